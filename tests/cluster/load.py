#!/usr/bin/env python3
"""Bounded load through the load balancer, and the check of what a killed replica cost.

`run`: --concurrency workers send stateless 2026-07-28 `tools/call echo` requests for
--duration seconds, each with a unique X-Request-Id (`<prefix>-m<worker>-<n>`, also the echoed
text), plus --slow-workers workers calling `report_progress_steps` with a progressToken (answers
streamed as SSE for --slow-steps × 100 ms, so some are in flight when a replica dies;
`<prefix>-p<worker>-<n>`), plus --legacy-sessions workers that each keep a 2025-11-25 session of the official Python
SDK and call echo in it (`<prefix>-s<worker>-<n>`). Every request's outcome is classified:

  ok         200 and the echoed text
  retriable  the client may retry: connection error or timeout, 502/503/504, 429 with
             Retry-After, 404 for a legacy session (re-initialize), a JSON-RPC error marked
             retriable (-32603 internal error from a dying replica, -32000..-32099 server errors)
  other      anything else (a wrong answer, 400, 500, ...): must never happen

A worker never stops on a failure: it pauses --backoff seconds and goes on (a legacy worker
opens a new session when its SDK transport gave up). With --procs > 1 the workers are spread
over that many processes. Writes every request to --records (JSON lines) and prints a summary.

`verify`: reads --records and the audit log's `request_id|count` lines (--audit), and checks
that every ok request was audited exactly once, every failed one at most once, that nothing was
classified `other`, and that every worker succeeded again after its last failure; with --kill-at
(epoch seconds) it reports the error window relative to the kill.

    python tests/cluster/load.py run --url http://127.0.0.1:LB/mcp --duration 15 --concurrency 16 \\
        --legacy-sessions 2 --prefix kill1 --records /tmp/r.jsonl
    python tests/cluster/load.py verify --records /tmp/r.jsonl --audit /tmp/audit.txt --kill-at 1763700000.1
"""

import argparse
import asyncio
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from typing import Any

import httpx

from common import final_message, modern_request, percentile

RETRIABLE_STATUS = {502, 503, 504}


def classify_rpc(msg: dict[str, Any] | None, want: str) -> tuple[str, str]:
    if msg is None:
        return "other", "no JSON-RPC response in the body"
    if "error" in msg:
        code = msg["error"].get("code")
        if code == -32603 or (isinstance(code, int) and -32099 <= code <= -32000):
            return "retriable", f"rpc {code}"
        return "other", f"rpc error {msg['error']}"
    result = msg.get("result", {})
    text = "".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))
    if result.get("isError") or text != want:
        return "other", f"unexpected result {json.dumps(result)[:200]}"
    return "ok", ""


async def modern_worker(http: httpx.AsyncClient, args: argparse.Namespace, w: int, end: float, records: list,
                        streaming: bool = False) -> None:
    """Stateless calls: `echo` (one JSON answer), or with `streaming` `report_progress_steps`
    with a progressToken (an SSE answer carrying progress, --slow-steps × 100 ms long)."""
    n = 0
    tag = "p" if streaming else "m"
    while time.time() < end:
        n += 1
        rid = f"{args.prefix}-{tag}{w}-{n}"
        if streaming:
            want = f"Completed {args.slow_steps} steps"
            headers, body = modern_request(n, "tools/call", {"name": "report_progress_steps",
                                                             "arguments": {"steps": args.slow_steps, "delay_ms": 100}},
                                           meta={"progressToken": rid})
        else:
            want = rid
            headers, body = modern_request(n, "tools/call", {"name": "echo", "arguments": {"text": rid}})
        headers["X-Request-Id"] = rid
        t0 = time.time()
        try:
            res = await http.post(args.url, headers=headers, content=body)
            text = res.text
            if res.status_code == 200:
                outcome, why = classify_rpc(final_message(res.headers.get("content-type", ""), text), want)
            elif res.status_code in RETRIABLE_STATUS:
                outcome, why = "retriable", f"http {res.status_code}"
            elif res.status_code == 429 and res.headers.get("retry-after"):
                outcome, why = "retriable", "http 429"
            else:
                outcome, why = "other", f"http {res.status_code} {text[:200]}"
        except (httpx.TransportError, httpx.TimeoutException) as e:
            outcome, why = "retriable", f"{type(e).__name__}"
        except Exception as e:  # noqa: BLE001 - e.g. a body that is not JSON
            outcome, why = "other", f"{type(e).__name__}: {e}"
        records.append({"rid": rid, "worker": f"{tag}{w}", "t0": t0, "t1": time.time(), "outcome": outcome, "why": why})
        if outcome != "ok":
            await asyncio.sleep(args.backoff)


async def legacy_worker(args: argparse.Namespace, w: int, end: float, records: list) -> None:
    """One 2025-11-25 SDK session at a time, calling echo (a JSON answer) and
    report_progress_steps (an SSE answer with progress) in turn until the run ends; a new session
    when a call failed (the SDK's transport ends on a 5xx or connection error). Notes the answers
    to the SDK's resumption attempts (GET with Last-Event-ID after an SSE answer was cut)."""
    import anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    import mcp.types as types

    seen: dict[str, str] = {}  # rid -> what the HTTP layer saw
    resumptions: dict[str, int] = {}  # GET with Last-Event-ID -> what it was answered

    class Tagging(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx.AsyncHTTPTransport()
            self.rid: str | None = None

        async def handle_async_request(self, request: Any) -> Any:
            rid = None
            if request.method == "POST" and b'"tools/call"' in request.content and self.rid:
                rid = self.rid
                request.headers["X-Request-Id"] = rid
            resuming = request.method == "GET" and "last-event-id" in request.headers
            try:
                response = await self._inner.handle_async_request(request)
            except Exception as e:
                if rid:
                    seen[rid] = type(e).__name__
                if resuming:
                    resumptions[type(e).__name__] = resumptions.get(type(e).__name__, 0) + 1
                raise
            if rid:
                seen[rid] = f"http {response.status_code}"
            if resuming:  # an SSE stream resumed with Last-Event-ID (after its replica died)
                key = f"http {response.status_code}"
                resumptions[key] = resumptions.get(key, 0) + 1
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    n = 0
    sessions = 0
    init_failures = 0

    async def on_progress(progress: float, total: float | None, message: str | None = None) -> None:
        pass
    headers = {"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"}
    while time.time() < end:
        sessions += 1
        tagging = Tagging()
        pending: dict[str, Any] = {}
        initialized = False
        try:
            with anyio.fail_after(max(1.0, end - time.time() + 10)):
                async with httpx.AsyncClient(transport=tagging, headers=headers, timeout=httpx.Timeout(5.0, read=30.0)) as http:
                    async with streamable_http_client(args.url, http_client=http) as streams:
                        async with ClientSession(streams[0], streams[1], read_timeout_seconds=timedelta(seconds=5),
                                                 client_info=types.Implementation(name="toolgate-cluster-load", version="1")) as session:
                            with anyio.fail_after(5):
                                await session.initialize()
                            initialized = True
                            while time.time() < end:
                                n += 1
                                rid = f"{args.prefix}-s{w}-{n}"
                                tagging.rid = rid
                                pending = {"rid": rid, "worker": f"s{w}", "t0": time.time()}
                                try:
                                    with anyio.fail_after(6):
                                        if n % 2:  # a JSON answer
                                            want = rid
                                            r = await session.call_tool("echo", {"text": rid})
                                        else:  # an SSE answer with progress, ~300 ms long; the step count
                                            # varies so that another call's answer is told apart
                                            steps = 2 + (n // 2) % 5
                                            want = f"Completed {steps} steps"
                                            r = await session.call_tool("report_progress_steps", {"steps": steps, "delay_ms": 300 // steps},
                                                                        progress_callback=on_progress)
                                    d = r.model_dump(mode="json", by_alias=True, exclude_none=True)
                                    outcome, why = classify_rpc({"result": d}, want)
                                except Exception as e:  # noqa: BLE001 - classified below
                                    outcome, why = legacy_failure(e, seen.get(rid))
                                records.append({**pending, "t1": time.time(), "outcome": outcome, "why": why})
                                pending = {}
                                if outcome != "ok":
                                    break  # the SDK transport may be gone: start a new session
                                await asyncio.sleep(args.legacy_pause)
        except BaseException as e:  # noqa: BLE001 - the SDK's task group ending with the failure
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            if pending:
                outcome, why = legacy_failure(e, seen.get(pending["rid"]))
                records.append({**pending, "t1": time.time(), "outcome": outcome, "why": why})
            elif not initialized:
                init_failures += 1  # initialize failed: no call was made in this session
        await asyncio.sleep(args.backoff)
    records.append({"worker": f"s{w}", "sessions": sessions, "initFailures": init_failures,
                    "resumptions": resumptions, "meta": True})


def leaves(e: BaseException) -> list[BaseException]:
    if isinstance(e, BaseExceptionGroup):
        return [x for sub in e.exceptions for x in leaves(sub)]
    return [e]


def legacy_failure(e: BaseException, http_seen: str | None) -> tuple[str, str]:
    """A failed SDK call: retriable when the HTTP layer saw a retriable answer or no answer."""
    names = ",".join(f"{type(x).__name__}: {str(x)[:80]}" for x in leaves(e))
    if http_seen is None:
        return "retriable", f"no HTTP answer ({names})"  # never sent, connection error or timeout
    if http_seen.startswith("http "):
        status = int(http_seen.split()[1])
        if status in RETRIABLE_STATUS or status == 404:
            return "retriable", f"{http_seen} ({names})"
        if status == 200:  # answered, then the SDK failed on the stream: a cut SSE answer
            return "retriable", f"http 200 then {names}"
        return "other", f"{http_seen} ({names})"
    return "retriable", f"{http_seen} ({names})"  # a transport exception


async def run_proc(args: argparse.Namespace, first_worker: int, workers: int, legacy: int, slow: int) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    end = args.start + args.duration
    limits = httpx.Limits(max_connections=workers + slow + 4, max_keepalive_connections=workers + slow + 4)
    headers = {"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"}
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=httpx.Timeout(args.request_timeout)) as http:
        tasks = [modern_worker(http, args, first_worker + i, end, records) for i in range(workers)]
        tasks += [legacy_worker(args, first_worker + i, end, records) for i in range(legacy)]
        tasks += [modern_worker(http, args, first_worker + i, end, records, streaming=True) for i in range(slow)]
        await asyncio.gather(*tasks)
    return records


def proc_main(args: argparse.Namespace, first_worker: int, workers: int, legacy: int, slow: int) -> list[dict[str, Any]]:
    return asyncio.run(run_proc(args, first_worker, workers, legacy, slow))


def cmd_run(args: argparse.Namespace) -> int:
    args.start = time.time()
    per = [args.concurrency // args.procs + (1 if i < args.concurrency % args.procs else 0) for i in range(args.procs)]
    if args.procs == 1:
        records = proc_main(args, 0, per[0], args.legacy_sessions, args.slow_workers)
    else:
        with ProcessPoolExecutor(args.procs) as pool:
            futures = [pool.submit(proc_main, args, sum(per[:i]), per[i], args.legacy_sessions if i == 0 else 0,
                                   args.slow_workers if i == 0 else 0) for i in range(args.procs)]
            records = [r for f in futures for r in f.result()]
    elapsed = max(time.time() - args.start, 1e-9)
    reqs = [r for r in records if not r.get("meta")]
    if args.records:
        with open(args.records, "w") as f:
            for r in records:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
    ok = [r for r in reqs if r["outcome"] == "ok"]
    lat = [(r["t1"] - r["t0"]) * 1000 for r in ok if r["worker"].startswith("m")]
    out = {
        "requests": len(reqs), "ok": len(ok),
        "retriable": sum(r["outcome"] == "retriable" for r in reqs),
        "other": sum(r["outcome"] == "other" for r in reqs),
        "elapsedS": round(elapsed, 2),
        "okPerSecond": round(len(ok) / args.duration, 1),
        "latencyMs": {"p50": round(percentile(lat, 50) or 0, 2), "p99": round(percentile(lat, 99) or 0, 2)},
    }
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    records = [json.loads(line) for line in open(args.records)]
    meta = [r for r in records if r.get("meta")]
    reqs = [r for r in records if not r.get("meta")]
    audit: dict[str, int] = {}
    for line in open(args.audit):
        line = line.strip()
        if line:
            rid, count = line.rsplit("|", 1)
            audit[rid] = int(count)
    errors: list[str] = []
    by = {k: [r for r in reqs if r["outcome"] == k] for k in ("ok", "retriable", "other")}
    lost = [r["rid"] for r in by["ok"] if audit.get(r["rid"], 0) == 0]
    dup_ok = [r["rid"] for r in by["ok"] if audit.get(r["rid"], 0) > 1]
    failed = by["retriable"] + by["other"]
    dup_failed = [r["rid"] for r in failed if audit.get(r["rid"], 0) > 1]
    failed_audited = sum(1 for r in failed if audit.get(r["rid"], 0) == 1)
    known = {r["rid"] for r in reqs}
    unknown = [rid for rid in audit if rid not in known]
    if by["other"]:
        whys: dict[str, int] = {}
        for r in by["other"]:
            whys[r["why"][:120]] = whys.get(r["why"][:120], 0) + 1
        errors.append(f"{len(by['other'])} request(s) failed in a way a client cannot retry: {whys}")
    if lost:
        errors.append(f"{len(lost)} request(s) answered as successful but recorded by no replica, e.g. {lost[:3]}: "
                      "either the audit lost the record, or the client was handed an answer that was not this "
                      "call's (e.g. another stream's replay after a resumption on another replica)")
    if dup_ok or dup_failed:
        errors.append(f"audited more than once: {len(dup_ok)} successful, {len(dup_failed)} failed, e.g. {(dup_ok + dup_failed)[:3]}")
    if unknown:
        errors.append(f"{len(unknown)} audit record(s) with request ids the load never sent, e.g. {unknown[:3]}")
    # every worker recovered: it succeeded again after its last failure
    workers = sorted({r["worker"] for r in reqs})
    stuck = []
    for w in workers:
        mine = [r for r in reqs if r["worker"] == w]
        last_fail = max((r["t1"] for r in mine if r["outcome"] != "ok"), default=None)
        if last_fail is not None and not any(r["outcome"] == "ok" and r["t0"] >= last_fail for r in mine):
            stuck.append(w)
    if stuck:
        errors.append(f"worker(s) that never succeeded again after a failure: {stuck}")
    whys: dict[str, int] = {}
    for r in by["retriable"]:
        key = r["why"].split(" (")[0][:60]
        whys[key] = whys.get(key, 0) + 1
    out: dict[str, Any] = {
        "requests": len(reqs), "ok": len(by["ok"]), "retriable": len(by["retriable"]), "other": len(by["other"]),
        "retriableKinds": whys,
        "auditedOk": len(by["ok"]) - len(lost), "lost": len(lost), "duplicated": len(dup_ok) + len(dup_failed),
        "failedButAudited": failed_audited,
        "legacySessionsOpened": {m["worker"]: m["sessions"] for m in meta},
        "legacyInitFailures": sum(m.get("initFailures", 0) for m in meta),
        "legacyResumptions": {k: sum(m.get("resumptions", {}).get(k, 0) for m in meta)
                              for k in sorted({k for m in meta for k in m.get("resumptions", {})})},
    }
    # per kind of client: modern stateless workers (m*) and legacy SDK sessions (s*)
    for kind, tag in (("modern", "m"), ("streaming", "p"), ("legacy", "s")):
        mine = [r for r in reqs if r["worker"].startswith(tag)]
        if not mine:
            continue
        fails = [r for r in mine if r["outcome"] != "ok"]
        oks = [r for r in mine if r["outcome"] == "ok"]
        k: dict[str, Any] = {"requests": len(mine), "ok": len(oks), "failed": len(fails)}
        if args.kill_at:
            at = args.kill_at
            if fails:
                k["errorWindowS"] = [round(min(r["t0"] for r in fails) - at, 3), round(max(r["t1"] for r in fails) - at, 3)]
            k["failedBeforeKill"] = sum(1 for r in fails if r["t1"] < at)
            last = max((r["t1"] for r in fails), default=at)
            k["okAfterLastFailure"] = sum(1 for r in oks if r["t0"] > last)
            if k["failedBeforeKill"]:
                early = [r for r in fails if r["t1"] < at]
                hint = ""
                if kind == "legacy" and any("404" in r["why"] or "Session terminated" in r["why"] for r in early):
                    hint = " (404 / Session terminated: a replica other than the session's own did not know it, so legacy sessions are not shared across replicas)"
                errors.append(f"{kind}: {k['failedBeforeKill']} request(s) failed before the kill{hint}")
            if k["okAfterLastFailure"] == 0:
                errors.append(f"{kind}: no successful request after the last failure")
        out[kind] = k
    if args.kill_at:
        fails = [r for r in reqs if r["outcome"] != "ok"]
        if fails:
            out["errorWindowS"] = [round(min(r["t0"] for r in fails) - args.kill_at, 3), round(max(r["t1"] for r in fails) - args.kill_at, 3)]
    out["errors"] = errors
    out["okFlag"] = not errors
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0 if not errors else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--url", required=True)
    r.add_argument("--duration", type=float, default=15.0)
    r.add_argument("--concurrency", type=int, default=16)
    r.add_argument("--procs", type=int, default=1)
    r.add_argument("--legacy-sessions", type=int, default=0)
    r.add_argument("--slow-workers", type=int, default=0, help="workers calling report_progress_steps (SSE answers)")
    r.add_argument("--slow-steps", type=int, default=5, help="steps of 100 ms per slow call")
    r.add_argument("--legacy-pause", type=float, default=0.02, help="seconds between a legacy worker's calls")
    r.add_argument("--backoff", type=float, default=0.05, help="seconds a worker waits after a failure")
    r.add_argument("--request-timeout", type=float, default=10.0)
    r.add_argument("--prefix", default="load")
    r.add_argument("--records")
    v = sub.add_parser("verify")
    v.add_argument("--records", required=True)
    v.add_argument("--audit", required=True, help="`request_id|count` lines from the audit log")
    v.add_argument("--kill-at", type=float)
    args = p.parse_args()
    return cmd_run(args) if args.cmd == "run" else cmd_verify(args)


if __name__ == "__main__":
    sys.exit(main())
