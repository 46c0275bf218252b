#!/usr/bin/env python3
"""Start-up time and idle RSS of one server process, for benches/run.sh. Standard library only.

Starts the command after `--`, polls URL/healthz and URL/readyz every millisecond, and records
how long after the spawn each first answered 200. Then it waits a second, reads the process's
resident set (VmRSS) as the idle RSS, stops it with SIGTERM and appends one JSON line to --out.

    benches/startup.py --label toolgate-default --url http://127.0.0.1:18790 --out s.jsonl -- toolgate serve
"""

import argparse
import http.client
import json
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit


def status(host: str, port: int, path: str) -> int:
    try:
        conn = http.client.HTTPConnection(host, port, timeout=0.5)
        conn.request("GET", path)
        code = conn.getresponse().status
        conn.close()
        return code
    except OSError:
        return 0


def rss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--round", type=int, default=1)
    ap.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:18790")
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    url = urlsplit(a.url)
    host, port = url.hostname or "127.0.0.1", url.port or 80

    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    live = ready = None
    while time.monotonic() - t0 < a.timeout and proc.poll() is None:
        if live is None and status(host, port, "/healthz") == 200:
            live = time.monotonic() - t0
        if live is not None and status(host, port, "/readyz") == 200:
            ready = time.monotonic() - t0
            break
        time.sleep(0.001)
    time.sleep(1.0)
    rss = rss_kb(proc.pid)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    record = {"kind": "startup", "label": a.label, "round": a.round,
              "live_ms": None if live is None else round(live * 1000, 1),
              "ready_ms": None if ready is None else round(ready * 1000, 1),
              "idle_rss_kb": rss, "exit": proc.returncode}
    with open(a.out, "a") as f:
        f.write(json.dumps(record) + "\n")
    if ready is None:
        sys.stderr.write(f"{a.label}: not ready within {a.timeout} s; its stderr:\n{err.decode(errors='replace')[-2000:]}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
