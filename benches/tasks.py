#!/usr/bin/env python3
"""Tasks benchmark: how long creating a task takes, and how many tasks/get a server answers,
on SQLite and on Postgres. Standard library only: asyncio with raw HTTP/1.1 keep-alive sockets,
each connection a closed loop driven from the event loop's callbacks, so the client stays cheap
(about 11 µs of CPU per request at saturation; its CPU share is reported beside the server's).

For each backend it starts the toolgate binary itself (a fresh SQLite data directory; or a new
Postgres database, dropped at the end, also on failure), pinned with taskset to SERVER_CPU [1]
while this client runs on LOADGEN_CPU [0] (when there are two CPUs or more; PIN=0: no pinning),
with auth off, rate limits off, the conformance pack on, the audit log as --audit says
(default: sync, as benches/config/full.toml), tasks.max_running_per_client raised (without
auth it counts per client address, and this client is one) and tasks.poll_interval_ms at 10
(--poll-interval-ms; the lowest the server accepts; the default is 1000) and the poll limit off
(tasks.poll_burst = 0), so tasks/get throughput measures the read path, not refusals (the
output says when each task was polled more often than the interval, which the default poll
limit would refuse after its burst):
  create   tools/call `slow_compute` {seconds: 30} in the 2026-07-28 era, declaring the tasks
           extension, so the server answers every call with a CreateTaskResult (resultType
           "task") and the task stays `working`: --creates calls at concurrency 1, then at
           --create-conns (16), each set after --create-warmup unmeasured ones; each set's
           tasks are cancelled after it (not timed), so both start with no task running.
           Latency p50/p99/max and creates/s.
  get      --ids tasks (100) created and still working, then --conns (16) keep-alive
           connections, one request in flight each, send tasks/get round-robin over the ids
           for --duration s (10) after --warmup s (2): req/s and latency p50/p99. Anything but
           HTTP 200 with a task in the JSON-RPC result is an error (warm-up included); the first
           one is printed.
Latency runs from writing a request to reading the last byte of its answer. Prints one markdown
table and the exact settings; writes everything to --out (JSON). Exit 1 when a backend did not
start, a phase had errors or no results, or the run overran --timeout; never for slow figures.
A binary whose path contains /debug/ or tg-next is flagged: a debug build's figures mean nothing.

    benches/tasks.py --bin target/release/toolgate --out /tmp/tasks.json   # ~30-40 s
    benches/tasks.py --short --bin ...                # CI smoke test: tiny sizes, ~5 s
    benches/tasks.py --backends sqlite --duration 5   # one backend

Environment: TOOLGATE_BIN (default for --bin), TOOLGATE_TEST_PG_HOST (default for --pg-host,
127.0.0.1:5432; user postgres, trust auth; needs psql), PIN, LOADGEN_CPU, SERVER_CPU (as in
../shared/bench/run.sh). Other TOOLGATE__* variables in the environment reach the server and are
listed in the output.
"""

import argparse
import asyncio
import json
import math
import os
import platform
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

MODERN = "2026-07-28"
CAPS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
TOOL = "slow_compute"
PINNED_MARK = "TOOLGATE_TASKS_BENCH_PINNED"
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Overrun(Exception):
    pass


# ---------------------------------------------------------------- requests and connections


def request_bytes(host: str, path: str, method: str, params: dict[str, Any], rid: int = 1) -> bytes:
    """One 2026-07-28 request, as tests/api/common/mod.rs `modern()` builds it: `_meta` with the
    protocol version, client info and capabilities; Mcp-Protocol-Version, Mcp-Method and
    Mcp-Name (the tool for tools/call, the task id for tasks/*)."""
    params = dict(params)
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-tasks-bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": CAPS,
    }
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, separators=(",", ":")).encode()
    name = params.get("name") or params.get("taskId")
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: {MODERN}\r\n"
        f"Mcp-Method: {method}\r\n" + (f"Mcp-Name: {name}\r\n" if name else "") + f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class Conn:
    """One keep-alive HTTP/1.1 connection, one request in flight."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.r: asyncio.StreamReader | None = None
        self.w: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.r, self.w = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        self.w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        if self.w is not None:
            self.w.close()
        self.r = self.w = None

    async def rt(self, req: bytes) -> tuple[int, bytes]:
        """Sends `req`, returns (HTTP status, body). Reconnects if the server closed."""
        if self.w is None:
            await self.open()
        w, r = self.w, self.r
        w.write(req)
        try:
            head = await r.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            # the server closed a kept-alive connection: once more on a new one
            self.close()
            await self.open()
            w, r = self.w, self.r
            w.write(req)
            head = await r.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        low = head.lower()
        i = low.find(b"\r\ncontent-length:")
        if i >= 0:
            j = low.index(b"\r\n", i + 2)
            body = await r.readexactly(int(low[i + 17 : j]))
        elif b"transfer-encoding: chunked" in low:
            parts = []
            while True:
                size = int((await r.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await r.readuntil(b"\r\n")
                    break
                parts.append(await r.readexactly(size))
                await r.readexactly(2)
            body = b"".join(parts)
        else:
            body = await r.read()
            self.close()
            return status, body
        if b"\r\nconnection: close" in low:
            self.close()
        return status, body


class Loop(asyncio.Protocol):
    """One keep-alive connection of a closed loop, driven from the event loop's callbacks (no
    coroutine switch per request): the next request is written as soon as the answer to the
    last one is complete. `next_req(k)` gives the bytes to send (None: stop); `on_answer(k,
    status, body, t_sent, t_done)` gets every answer (nanoseconds, perf_counter)."""

    def __init__(self, k: int, next_req: Any, on_answer: Any, errors: list[str]) -> None:
        self.k, self.next_req, self.on_answer, self.errors = k, next_req, on_answer, errors
        self.buf = b""
        self.t0 = 0
        self.tr: asyncio.Transport | None = None
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.stopped = False

    def connection_made(self, transport: Any) -> None:
        self.tr = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.send()

    def send(self) -> None:
        req = self.next_req(self.k)
        if req is None:
            self.stopped = True
            self.tr.close()
            return
        self.t0 = time.perf_counter_ns()
        self.tr.write(req)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        while True:
            h = buf.find(b"\r\n\r\n")
            if h < 0:
                break
            head = buf[:h].lower()
            c = head.find(b"\r\ncontent-length:")
            if c < 0:
                # toolgate answers JSON with a Content-Length; anything else is not what we measure
                self.errors.append(brief(int(head[9:12] or 0), buf[:400]) + " (no Content-Length)")
                self.stopped = True
                self.tr.close()
                return
            e = head.find(b"\r\n", c + 2)
            end = h + 4 + int(head[c + 17 : e if e >= 0 else len(head)])
            if len(buf) < end:
                break
            t1 = time.perf_counter_ns()
            body, buf = buf[h + 4 : end], buf[end:]
            self.on_answer(self.k, int(head[9:12]), body, self.t0, t1)
            if b"\r\nconnection: close" in head:
                self.tr.close()
                return
            self.send()
        self.buf = buf

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(exc)


async def closed_loop(host: str, port: int, conc: int, next_req: Any, on_answer: Any, errors: list[str],
                      stats: dict[str, int] | None = None) -> None:
    """`conc` connections, one request in flight on each, until next_req says stop; a connection
    the server closes is opened again (counted in stats["reconnects"])."""
    loop = asyncio.get_running_loop()

    async def keep(k: int) -> None:
        first, failed = True, 0
        while True:
            try:
                _, proto = await loop.create_connection(lambda: Loop(k, next_req, on_answer, errors), host, port)
            except OSError as e:
                errors.append(f"connect: {e}")
                failed += 1
                if failed >= 3:
                    return
                await asyncio.sleep(0.05)
                continue
            failed = 0
            if not first and stats is not None:
                stats["reconnects"] = stats.get("reconnects", 0) + 1
            first = False
            await proto.done
            if proto.stopped:
                return

    await asyncio.gather(*(keep(k) for k in range(max(1, conc))))


def pct(sorted_ns: list[int] | array, p: float) -> float | None:
    """Nearest-rank percentile of sorted nanoseconds, in milliseconds."""
    if not sorted_ns:
        return None
    k = max(0, min(len(sorted_ns) - 1, math.ceil(p / 100 * len(sorted_ns)) - 1))
    return round(sorted_ns[k] / 1e6, 3)


def cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def brief(status: int | None, body: bytes | str) -> str:
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    return f"HTTP {status}: {text[:400]}"


# ---------------------------------------------------------------- the phases


class Client:
    def __init__(self, host: str, port: int, path: str) -> None:
        self.host, self.port, self.path = host, port, path
        self.hosthdr = f"{host}:{port}"

    def req(self, method: str, params: dict[str, Any], rid: int = 1) -> bytes:
        return request_bytes(self.hosthdr, self.path, method, params, rid)

    async def creates(self, n: int, conc: int, seconds: float, warmup: int, server_pid: int) -> dict[str, Any]:
        """n tools/call that must each become a task, over `conc` connections (after `warmup`
        unmeasured ones: the connections' first requests, and whatever warms up on the server)."""
        req = self.req("tools/call", {"name": TOOL, "arguments": {"seconds": seconds}})
        ids: list[str] = []
        errors: list[str] = []
        lat: list[int] = []
        left = [0]

        def next_req(_k: int) -> bytes | None:
            if left[0] <= 0:
                return None
            left[0] -= 1
            return req

        def on_answer(_k: int, status: int, body: bytes, t0: int, t1: int, record: bool) -> None:
            try:
                result = json.loads(body).get("result") if status == 200 else None
            except ValueError:
                result = None
            if not isinstance(result, dict) or result.get("resultType") != "task" or not result.get("taskId"):
                errors.append(brief(status, body))
                return
            ids.append(result["taskId"])
            if record:
                lat.append(t1 - t0)

        left[0] = warmup
        await closed_loop(self.host, self.port, min(conc, warmup), next_req,
                          lambda k, st, b, t0, t1: on_answer(k, st, b, t0, t1, False), errors)
        left[0] = n
        t0, c0, s0 = time.perf_counter(), time.process_time(), cpu_s(server_pid)
        await closed_loop(self.host, self.port, conc, next_req,
                          lambda k, st, b, t0, t1: on_answer(k, st, b, t0, t1, True), errors)
        wall = time.perf_counter() - t0
        c1, s1 = time.process_time(), cpu_s(server_pid)
        lat.sort()
        return {
            "phase": "create", "conns": conc, "n": n, "ok": len(lat), "errors": len(errors),
            "first_error": errors[0] if errors else None, "per_s": round(len(lat) / wall, 1) if wall > 0 and lat else None,
            "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "max_ms": pct(lat, 100), "wall_s": round(wall, 3),
            # CPU time is counted in clock ticks (10 ms): too coarse for a set shorter than 1 s
            "server_cpu_pct": None if s0 is None or s1 is None or wall < 1 else round(100 * (s1 - s0) / wall, 1),
            "client_cpu_pct": round(100 * (c1 - c0) / wall, 1) if wall >= 1 else None,
            "task_ids": ids,
        }

    async def cancel_all(self, ids: list[str], conc: int = 16) -> dict[str, Any]:
        """tasks/cancel for every id (not timed); how many were acknowledged."""
        reqs = [self.req("tasks/cancel", {"taskId": i}) for i in ids]
        todo = list(reversed(reqs))
        ok, errors = [0], []

        async def worker() -> None:
            conn = Conn(self.host, self.port)
            try:
                while todo:
                    status, body = await conn.rt(todo.pop())
                    if status == 200 and b'"result":' in body:
                        ok[0] += 1
                    else:
                        errors.append(brief(status, body))
            finally:
                conn.close()

        await asyncio.gather(*(worker() for _ in range(min(conc, len(reqs)) or 1)))
        return {"cancelled": ok[0], "errors": len(errors), "first_error": errors[0] if errors else None}

    async def gets(self, ids: list[str], conc: int, warmup: float, duration: float, server_pid: int) -> dict[str, Any]:
        """tasks/get round-robin over `ids` on `conc` connections: warmup, then `duration` s."""
        reqs = [self.req("tasks/get", {"taskId": i}) for i in ids]
        n = len(reqs)
        lat = [array("q") for _ in range(conc)]
        pos = [(k * n) // conc for k in range(conc)]
        errors: list[str] = []
        statuses: dict[str, int] = {}
        seen = [0]
        perf = time.perf_counter_ns
        t_measure = perf() + int(warmup * 1e9)
        t_end = t_measure + int(duration * 1e9)
        last = [t_measure]
        marks: dict[str, float | None] = {}

        def next_req(k: int) -> bytes | None:
            if perf() >= t_end:
                return None
            i = pos[k]
            pos[k] = i + 1 if i + 1 < n else 0
            return reqs[i]

        def on_answer(k: int, status: int, body: bytes, t0: int, t1: int) -> None:
            # a task in the result (a JSON-RPC error names no "taskId" key); in the warm-up too
            if status != 200 or b'"taskId":"' not in body:
                errors.append(brief(status, body) if not errors else "")
                return
            seen[0] += 1
            if seen[0] % 512 == 1:  # a sample, fully parsed: the task's status
                try:
                    msg = json.loads(body)
                    st = "error" if "error" in msg else str(msg["result"].get("status"))
                except (ValueError, KeyError, AttributeError):
                    st = "unparsable"
                statuses[st] = statuses.get(st, 0) + 1
                if st in ("error", "unparsable"):
                    errors.append(brief(status, body) if not errors else "")
            if t0 >= t_measure:
                lat[k].append(t1 - t0)
                if t1 > last[0]:
                    last[0] = t1

        async def meter() -> None:
            await asyncio.sleep(max(0.0, (t_measure - perf()) / 1e9))
            marks["client0"], marks["server0"] = time.process_time(), cpu_s(server_pid)
            await asyncio.sleep(max(0.0, (t_end - perf()) / 1e9))
            marks["client1"], marks["server1"] = time.process_time(), cpu_s(server_pid)

        loop_stats: dict[str, int] = {}
        await asyncio.gather(meter(), closed_loop(self.host, self.port, conc, next_req, on_answer, errors, loop_stats))
        all_ns = sorted(x for a in lat for x in a)
        span = (last[0] - t_measure) / 1e9

        def cpu_pct(a: str, b: str) -> float | None:
            x, y = marks.get(a), marks.get(b)
            return None if x is None or y is None else round(100 * (y - x) / duration, 1)

        rps = len(all_ns) / span if span > 0 and all_ns else None
        return {
            "phase": "tasks/get", "conns": conc, "ids": len(ids), "warmup_s": warmup, "duration_s": duration,
            "requests": len(all_ns), "errors": len(errors), "first_error": errors[0] if errors else None,
            "per_s": round(rps, 1) if rps else None, "p50_ms": pct(all_ns, 50), "p99_ms": pct(all_ns, 99),
            "max_ms": pct(all_ns, 100), "sampled_statuses": statuses, "reconnects": loop_stats.get("reconnects", 0),
            "server_cpu_pct": cpu_pct("server0", "server1"), "client_cpu_pct": cpu_pct("client0", "client1"),
            "each_id_polled_every_ms": round(1000 * len(ids) / rps, 2) if rps else None,
        }


# ---------------------------------------------------------------- server, Postgres, pinning


def free_port(start: int) -> int:
    """The first port from `start` that nobody listens on and that can be bound (below the
    ephemeral range, as benches/run.sh does, so no client socket takes it meanwhile)."""
    for p in range(start, start + 500):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", p)) == 0:
                continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
                return p
            except OSError:
                continue
    raise RuntimeError(f"no free port in {start}..{start + 500}")


def http_status(port: int, path: str) -> int:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            return int(s.recv(64)[9:12])
    except (OSError, ValueError):
        return 0


def pinning() -> tuple[list[str], int | None, str]:
    """(server command prefix, client CPU, description), as setup_pinning in ../shared/bench."""
    lcpu, scpu = os.environ.get("LOADGEN_CPU", "0"), os.environ.get("SERVER_CPU", "1")
    ok = (
        os.environ.get("PIN", "auto") != "0" and shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
        and all(subprocess.run(["taskset", "-c", c, "true"], capture_output=True).returncode == 0 for c in (lcpu, scpu))
    )
    if not ok:
        return [], None, "not pinned"
    return ["taskset", "-c", scpu], int(lcpu), f"client on CPU {lcpu}, server on CPU {scpu} (taskset)"


def pin_self(cpu: int | None) -> None:
    """Re-executes this script under `taskset -c CPU` (once)."""
    if cpu is None or os.environ.get(PINNED_MARK) == "1":
        return
    os.environ[PINNED_MARK] = "1"
    os.execvp("taskset", ["taskset", "-c", str(cpu), sys.executable, os.path.abspath(__file__), *sys.argv[1:]])


class Postgres:
    def __init__(self, hostport: str) -> None:
        self.hostport = hostport
        self.name = f"toolgate_bench_tasks_{os.getpid()}_{secrets.token_hex(4)}"
        self.admin = f"postgres://postgres@{hostport}/postgres"
        self.url = f"postgres://postgres@{hostport}/{self.name}"
        self.created = False

    def _psql(self, sql: str) -> subprocess.CompletedProcess:
        return subprocess.run(["psql", "-qAtX", self.admin, "-c", sql], capture_output=True, text=True, timeout=30)

    def create(self) -> None:
        if shutil.which("psql") is None:
            raise RuntimeError("psql is not installed: cannot create the benchmark's database")
        r = self._psql(f'CREATE DATABASE "{self.name}"')
        if r.returncode != 0:
            raise RuntimeError(f"cannot create database {self.name} on {self.hostport}: {r.stderr.strip()[:300]}")
        self.created = True

    def drop(self) -> str | None:
        if not self.created:
            return None
        r = self._psql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        if r.returncode != 0:
            return f"could not drop database {self.name}: {r.stderr.strip()[:200]}"
        self.created = False
        return None

    def version(self) -> str:
        r = self._psql("SHOW server_version")
        return r.stdout.strip() if r.returncode == 0 else "?"


def config_text(a: argparse.Namespace, max_calls: int) -> str:
    audit = "enabled = false" if a.audit == "off" else f'enabled = true\ndurability = "{a.audit}"'
    poll = f"poll_interval_ms = {a.poll_interval_ms}\n" if a.poll_interval_ms else ""
    return f"""# written by benches/tasks.py; the bind address, data directory and storage URL come from
# TOOLGATE__SERVER__BIND, TOOLGATE__STORAGE__DATA_DIR and TOOLGATE__STORAGE__URL
[server]
shutdown_grace_secs = 5
drain_delay_ms = 0

[auth]
mode = "off"

[limits]
enabled = false

[audit]
{audit}

[admin]
enabled = false

[tools]
# every task holds a call slot while it runs: room for all the benchmark keeps running
max_concurrent_calls = {max_calls}

[tools.packs]
conformance = true

[tasks]
# without auth the cap counts per client address: this client is one address
max_running_per_client = 100000
max_stored_per_client = 1000000
# tasks/get throughput measures the read path, not the poll limit's refusals
poll_burst = 0
{poll}
[log]
format = "json"
filter = "warn"
"""


class Server:
    def __init__(self, a: argparse.Namespace, backend: str, run_dir: Path, pin: list[str], pg: Postgres | None) -> None:
        self.port = free_port(a.port)
        self.data = run_dir / f"data-{backend}"
        shutil.rmtree(self.data, ignore_errors=True)
        self.data.mkdir(parents=True)
        self.cfg = run_dir / "tasks.toml"
        self.env_set = {"TOOLGATE__SERVER__BIND": f"127.0.0.1:{self.port}", "TOOLGATE__STORAGE__DATA_DIR": str(self.data)}
        if pg is not None:
            self.env_set["TOOLGATE__STORAGE__URL"] = pg.url
        self.cmd = [*pin, a.bin, "serve", "--config", str(self.cfg)]
        self.log = run_dir / f"server-{backend}.log"
        self.proc: subprocess.Popen | None = None

    def command_line(self) -> str:
        return " ".join([*(f"{k}={v}" for k, v in self.env_set.items()), *self.cmd])

    def start(self, timeout: float) -> None:
        env = {**os.environ, **self.env_set}
        env.pop(PINNED_MARK, None)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}) before it was ready: {self.tail()}")
            if http_status(self.port, "/readyz") == 200:
                return
            time.sleep(0.05)
        raise RuntimeError(f"the server was not ready within {timeout:.0f} s: {self.tail()}")

    def tail(self) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-5:])[-1200:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------- one backend


def run_backend(a: argparse.Namespace, backend: str, run_dir: Path, pin: list[str], deadline: float) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": backend, "results": [], "problems": []}
    pg = Postgres(a.pg_host) if backend == "postgres" else None
    server = None
    try:
        if pg is not None:
            pg.create()
            out["database"] = f"{pg.name} on {pg.hostport} (PostgreSQL {pg.version()}; not pinned)"
        server = Server(a, backend, run_dir, pin, pg)
        out["command"] = server.command_line()
        server.start(min(a.ready_timeout, max(1.0, deadline - time.monotonic())))
        assert server.proc is not None
        client = Client("127.0.0.1", server.port, "/mcp")
        get_seconds = min(600.0, max(a.seconds, a.warmup + a.duration + 30))

        def phase(coro: Any) -> Any:
            left = deadline - time.monotonic()
            if left <= 0:
                coro.close()
                raise Overrun("the run's --timeout was reached")
            try:
                return asyncio.run(asyncio.wait_for(coro, left))
            except (asyncio.TimeoutError, TimeoutError) as e:
                raise Overrun("the run's --timeout was reached") from e

        for conc in (1, a.create_conns):
            r = phase(client.creates(a.creates, conc, a.seconds, a.create_warmup, server.proc.pid))
            ids = r.pop("task_ids")
            c = phase(client.cancel_all(ids))
            r["cancelled_after"] = c["cancelled"]
            if c["errors"]:
                out["problems"].append(f"create c={conc}: {c['errors']} cancels failed: {c['first_error']}")
            out["results"].append(r)
            log(f"{backend}: create c={conc}: {fmt_row(r)}")
        made = phase(client.creates(a.ids, min(16, a.ids), get_seconds, 0, server.proc.pid))
        ids = made.pop("task_ids")
        if made["errors"] or len(ids) < a.ids:
            out["problems"].append(f"tasks/get: only {len(ids)} of {a.ids} tasks created: {made['first_error']}")
        if ids:
            g = phase(client.gets(ids, a.conns, a.warmup, a.duration, server.proc.pid))
            g["task_seconds"] = get_seconds
            out["results"].append(g)
            log(f"{backend}: tasks/get c={a.conns}: {fmt_row(g)}")
            phase(client.cancel_all(ids))
    except Overrun as e:
        out["problems"].append(str(e))
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        out["problems"].append(f"{type(e).__name__}: {e}")
    finally:
        if server is not None:
            server.stop()
            rc = server.proc.returncode if server.proc else None
            out["server_exit"] = rc
            if rc not in (0, None, -signal.SIGTERM):
                out["problems"].append(f"the server exited with {rc}: {server.tail()}")
        if pg is not None:
            err = pg.drop()
            if err:
                out["problems"].append(err)
    for r in out["results"]:
        if r["errors"]:
            out["problems"].append(f"{r['phase']} c={r['conns']}: {r['errors']} errors; first: {r['first_error']}")
        if not r.get("per_s"):
            out["problems"].append(f"{r['phase']} c={r['conns']}: no results")
    phases = {(r["phase"], r["conns"]) for r in out["results"]}
    for want in (("create", 1), ("create", a.create_conns), ("tasks/get", a.conns)):
        if want not in phases:
            out["problems"].append(f"{want[0]} c={want[1]}: not measured")
    return out


# ---------------------------------------------------------------- output


def log(msg: str) -> None:
    print(f"[tasks-bench] {msg}", file=sys.stderr, flush=True)


def f(x: Any, nd: int = 2) -> str:
    return "–" if x is None else f"{x:,.{nd}f}"


def fmt_row(r: dict[str, Any]) -> str:
    return f"{f(r.get('per_s'), 1)}/s, p50 {f(r.get('p50_ms'))} ms, p99 {f(r.get('p99_ms'))} ms, {r['errors']} errors"


def table(report: dict[str, Any]) -> str:
    lines = [
        "| backend | measurement | conc | requests | per s | p50 ms | p99 ms | max ms | errors | server CPU % | client CPU % |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for b in report["backends"]:
        for r in b["results"]:
            what = "create (tools/call → task)" if r["phase"] == "create" else f"tasks/get ({r['ids']} ids, {r['duration_s']:g} s)"
            n = r.get("ok", r.get("requests"))
            lines.append(
                f"| {b['backend']} | {what} | {r['conns']} | {n:,} | {f(r.get('per_s'), 0)} | {f(r.get('p50_ms'))} | "
                f"{f(r.get('p99_ms'))} | {f(r.get('max_ms'))} | {r['errors']} | {f(r.get('server_cpu_pct'), 0)} | {f(r.get('client_cpu_pct'), 0)} |"
            )
        if not b["results"]:
            lines.append(f"| {b['backend']} | (no results) | | | | | | | | | |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("TOOLGATE_BIN"), help="the toolgate binary [$TOOLGATE_BIN]")
    ap.add_argument("--out", help="write the report as JSON here")
    ap.add_argument("--short", action="store_true", help="CI smoke test: tiny sizes; exit 1 only on errors or missing results")
    ap.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres [both]")
    ap.add_argument("--pg-host", default=os.environ.get("TOOLGATE_TEST_PG_HOST", "127.0.0.1:5432"))
    ap.add_argument("--creates", type=int, help="measured creates per concurrency [500; short 16]")
    ap.add_argument("--create-conns", type=int, default=16, help="the second create concurrency [16]")
    ap.add_argument("--create-warmup", type=int, help="unmeasured creates before each measured set [20; short 2]")
    ap.add_argument("--seconds", type=float, default=30, help="slow_compute's seconds for the created tasks [30]")
    ap.add_argument("--ids", type=int, help="tasks tasks/get goes round over [100; short 20]")
    ap.add_argument("--conns", type=int, default=16, help="tasks/get connections [16]")
    ap.add_argument("--duration", type=float, help="tasks/get measured seconds [10; short 1]")
    ap.add_argument("--warmup", type=float, help="tasks/get warm-up seconds [2; short 0.5]")
    ap.add_argument("--poll-interval-ms", type=int, default=10,
                    help="tasks.poll_interval_ms for the server (the lowest it accepts is 10; 0: leave the default, 1000) [10]")
    ap.add_argument("--audit", choices=["batched", "sync", "off"], default="sync",
                    help="audit log durability, or off [sync, as benches/config/full.toml]")
    ap.add_argument("--port", type=int, default=18860, help="first port tried for the server [18860]")
    ap.add_argument("--ready-timeout", type=float, default=60)
    ap.add_argument("--timeout", type=float, help="bound on the whole run, s [600; short 120]")
    a = ap.parse_args()
    short = a.short
    a.creates = a.creates or (16 if short else 500)
    a.create_warmup = a.create_warmup if a.create_warmup is not None else (2 if short else 20)
    a.ids = a.ids or (20 if short else 100)
    a.duration = a.duration or (1.0 if short else 10.0)
    a.warmup = a.warmup if a.warmup is not None else (0.5 if short else 2.0)
    a.timeout = a.timeout or (120.0 if short else 600.0)
    backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    if not a.bin:
        ap.error("no binary: pass --bin or set TOOLGATE_BIN")
    a.bin = os.path.abspath(a.bin)
    if not os.access(a.bin, os.X_OK):
        ap.error(f"not an executable: {a.bin}")
    if any(b not in ("sqlite", "postgres") for b in backends):
        ap.error("--backends: sqlite and/or postgres")
    if a.poll_interval_ms and a.poll_interval_ms < 10:
        log(f"--poll-interval-ms {a.poll_interval_ms}: the server refuses below 10 (tasks.poll_interval_ms); using 10")
        a.poll_interval_ms = 10

    pin, client_cpu, pinned = pinning()
    pin_self(client_cpu)
    t_start = time.monotonic()
    deadline = t_start + a.timeout
    debug = "/debug/" in a.bin or "tg-next" in a.bin
    run_dir = Path(tempfile.mkdtemp(prefix="toolgate-tasks-bench."))
    max_calls = max(256, a.creates + a.create_warmup + a.ids + 64)
    (run_dir / "tasks.toml").write_text(config_text(a, max_calls))

    def on_signal(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    version = subprocess.run([a.bin, "--version"], capture_output=True, text=True).stdout.strip()
    inherited = {k: v for k, v in os.environ.items() if k.startswith("TOOLGATE__")}
    report: dict[str, Any] = {
        "kind": "tasks",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mode": "short" if short else "full",
        "host": f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        "pinning": pinned, "client_cpus": sorted(os.sched_getaffinity(0)),
        "binary": a.bin, "version": version, "debug_build": debug,
        "settings": {
            "creates": a.creates, "create_conns": [1, a.create_conns], "create_warmup": a.create_warmup,
            "seconds": a.seconds, "ids": a.ids, "get_conns": a.conns, "duration_s": a.duration, "warmup_s": a.warmup,
            "poll_interval_ms": a.poll_interval_ms or "default (1000)", "audit": a.audit, "auth": "off",
            "rate_limits": "off", "max_running_per_client": 100000, "max_concurrent_calls": max_calls,
            "inherited_env": sorted(inherited),
        },
        "config": config_text(a, max_calls),
        "backends": [],
    }
    log(f"{version} at {a.bin}; {pinned}; audit {a.audit}; run dir {run_dir}")
    interrupted = False
    try:
        for b in backends:
            if time.monotonic() >= deadline:
                report["backends"].append({"backend": b, "results": [], "problems": ["not run: the run's --timeout was reached"]})
                continue
            report["backends"].append(run_backend(a, b, run_dir, pin, deadline))
    except KeyboardInterrupt as e:
        interrupted = True
        report["interrupted"] = str(e) or "interrupted"
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    report["run_s"] = round(time.monotonic() - t_start, 1)

    problems = [f"{b['backend']}: {p}" for b in report["backends"] for p in b["problems"]]
    problems += [f"{b}: not run or not finished" for b in backends if b not in [x["backend"] for x in report["backends"]]]
    if interrupted:
        problems.append(f"interrupted ({report['interrupted']})")
    report["problems"] = problems

    print("## Tasks: create latency and tasks/get throughput\n")
    if debug:
        print("**DEBUG BUILD** (the binary's path contains /debug/ or tg-next): these figures are meaningless; use a release build.\n")
    print(table(report))
    s = report["settings"]
    print(
        f"\ncreate: `tools/call {TOOL} {{seconds: {a.seconds:g}}}` (2026-07-28, tasks extension declared), {a.creates} measured "
        f"after {a.create_warmup} unmeasured per concurrency, each answered with a CreateTaskResult (resultType \"task\"); "
        "the tasks are cancelled (untimed) after each set. "
        f"tasks/get: {a.ids} working tasks, {a.conns} keep-alive connections, round-robin, {a.warmup:g} s warm-up + {a.duration:g} s. "
        "Latency: from writing the request to reading the last byte of the answer, on this (Python asyncio) client; "
        "client CPU near 100 % means the client, not the server, set the pace.\n"
    )
    for b in report["backends"]:
        g = next((r for r in b["results"] if r["phase"] == "tasks/get"), None)
        if g and set(g.get("sampled_statuses") or {}) - {"working"}:
            print(f"Note ({b['backend']}): not every task polled was `working` (sampled: {g['sampled_statuses']}); "
                  "a finished task's answer carries its result, so the figures mix two kinds of answer.\n")
        if g and g.get("each_id_polled_every_ms") is not None and a.poll_interval_ms and g["each_id_polled_every_ms"] < a.poll_interval_ms:
            print(f"Note ({b['backend']}): each task was polled every {g['each_id_polled_every_ms']} ms, faster than its "
                  f"pollInterval ({a.poll_interval_ms} ms); the default poll limit (tasks.poll_burst, off here) would refuse some of these. "
                  "Raise --ids to stay under it.\n")
    print("```")
    print(f"date_utc: {report['date_utc']}; host: {report['host']}; pinning: {pinned}; mode: {report['mode']}; run: {report['run_s']} s")
    print(f"toolgate: {version}, {a.bin}{' (DEBUG BUILD: figures meaningless)' if debug else ''}")
    print(f"settings: auth off, rate limits off, audit {a.audit}{' (as benches/config/full.toml)' if a.audit == 'sync' else ''}, "
          f"conformance pack on, tasks.poll_interval_ms {s['poll_interval_ms']}, tasks.max_running_per_client 100000, "
          f"tools.max_concurrent_calls {max_calls}, storage defaults otherwise")
    if inherited:
        print(f"inherited from the environment: {' '.join(sorted(inherited))}")
    for b in report["backends"]:
        if b.get("database"):
            print(f"{b['backend']} database: {b['database']}")
        if b.get("command"):
            print(f"{b['backend']}: {b['command']}")
    print("config (the --config file):")
    print(report["config"].rstrip())
    print("```")
    for p in problems:
        print(f"problem: {p}")
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=2) + "\n")
        log(f"report: {a.out}")
    if problems:
        log(f"{len(problems)} problem(s); exit 1")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
