#!/usr/bin/env python3
"""Check d2 of tests/cluster/topology.sh: what a legacy client sees when the replica streaming
its answer dies. An official Python SDK session (2025-11-25) through the load balancer starts a
4 s `report_progress_steps` call (an SSE answer with progress); once progress arrives, the
replica holding that stream (found by its `toolgate_sse_streams_open{kind="post"}` metric) is
killed with SIGKILL (before it, --warm-streams short streamed calls through the load balancer,
so the survivors hold streams of the same session too). Then: what the SDK's call ends with, how the SDK's stream resumptions
(GET with Last-Event-ID) are answered by the survivors, whether a list_changed arrives (a
survivor cannot replay the dead replica's events, so it announces a change instead), and
whether the same session goes on working (a retry of the call, tools/list).

Prints one JSON line; exit status 0 only if the call failed in a way a client can act on (an
error or a timeout, never a wrong result), the session kept working, and the retry succeeded.

    MCP_TOKEN=... python tests/cluster/cut_stream.py --url http://127.0.0.1:LB/mcp \\
        --replica 1=PID=http://127.0.0.1:ADMIN1 --replica 2=PID=... --rid-prefix d2
"""

import argparse
import json
import os
import re
import signal
import sys
import time
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

import anyio
import httpx
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from common import run_reported


class Watching(httpx.AsyncBaseTransport):
    """Tags tools/call POSTs with X-Request-Id and notes every request and its answer."""

    def __init__(self, prefix: str) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.prefix = prefix
        self.n = 0
        self.log: list[dict[str, Any]] = []
        self.get_open = anyio.Event()

    async def handle_async_request(self, request: Any) -> Any:
        entry: dict[str, Any] = {"t": time.time(), "method": request.method}
        if request.method == "POST" and b'"tools/call"' in request.content:
            self.n += 1
            entry["rid"] = request.headers["X-Request-Id"] = f"{self.prefix}-{self.n}"
        if "last-event-id" in request.headers:
            entry["lastEventId"] = request.headers["last-event-id"]
        self.log.append(entry)
        try:
            response = await self._inner.handle_async_request(request)
        except Exception as e:
            entry["error"] = type(e).__name__
            raise
        entry["status"] = response.status_code
        if request.method == "GET" and response.status_code == 200:
            self.get_open.set()
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def post_streams(admin: str) -> int:
    async with httpx.AsyncClient(timeout=2.0) as http:
        text = (await http.get(f"{admin}/metrics")).text
    m = re.search(r'^toolgate_sse_streams_open\{[^}]*kind="post"[^}]*\} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0


async def run(args: argparse.Namespace, out: dict[str, Any]) -> None:
    replicas = []
    for spec in args.replica:
        name, pid, admin = spec.split("=", 2)
        replicas.append({"name": f"replica-{name}", "pid": int(pid), "admin": admin})
    watching = Watching(args.rid_prefix)
    out["requests"] = watching.log
    list_changed: list[float] = []

    async def on_message(message: Any) -> None:
        if getattr(getattr(message, "root", message), "method", None) == "notifications/tools/list_changed":
            list_changed.append(time.time())

    progress: list[float] = []
    first_progress = anyio.Event()

    async def on_warm(value: float, total: float | None, message: str | None = None) -> None:
        pass

    async def on_progress(value: float, total: float | None, message: str | None = None) -> None:
        progress.append(value)
        first_progress.set()

    headers = {"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"}
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx.AsyncClient(transport=watching, headers=headers, timeout=httpx.Timeout(10.0, read=60.0)))
        streams = await stack.enter_async_context(streamable_http_client(args.url, http_client=http))
        session = await stack.enter_async_context(ClientSession(
            streams[0], streams[1], read_timeout_seconds=timedelta(seconds=args.call_timeout), message_handler=on_message,
            client_info=types.Implementation(name="toolgate-cluster-cut", version="1")))
        await session.initialize()
        with anyio.fail_after(5):
            await watching.get_open.wait()
        await session.list_tools()  # the SDK 1.x looks tools up after a call anyway
        # Earlier streamed answers of this session on every replica (round robin): a survivor then
        # holds streams of this session too, which a resumption must not be confused with.
        for _ in range(args.warm_streams):
            r = await session.call_tool("report_progress_steps", {"steps": 2, "delay_ms": 10}, progress_callback=on_warm)
            if "Completed 2 steps" not in json.dumps(r.model_dump(mode="json", by_alias=True, exclude_none=True)):
                out["errors"].append(f"a warm-up call returned {r}")

        outcome: dict[str, Any] = {}

        async def long_call() -> None:
            started = time.time()
            try:
                r = await session.call_tool("report_progress_steps", {"steps": 40, "delay_ms": 100}, progress_callback=on_progress)
                d = r.model_dump(mode="json", by_alias=True, exclude_none=True)
                outcome.update(kind="result", detail=json.dumps(d)[:200])
            except Exception as e:  # noqa: BLE001 - this is what the check reports
                outcome.update(kind="error", detail=f"{type(e).__name__}: {e}"[:200])
            outcome["afterS"] = round(time.time() - started, 3)

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)
            with anyio.fail_after(5):
                await first_progress.wait()
            # the one replica with a POST stream open holds our call (nothing else streams now)
            holders = [r for r in replicas if await post_streams(r["admin"]) > 0]
            if len(holders) != 1:
                out["errors"].append(f"expected one replica streaming the call, found {[r['name'] for r in holders]}")
                tg.cancel_scope.cancel()
                return
            victim = holders[0]
            out["killed"] = victim["name"]
            out["progressBeforeKill"] = len(progress)
            kill_at = time.time()
            os.kill(victim["pid"], signal.SIGKILL)
            with anyio.move_on_after(args.call_timeout + 5):
                while not outcome:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        out["call"] = outcome or {"kind": "no outcome", "afterS": args.call_timeout + 5}
        out["progressTotal"] = len(progress)
        out["resumptions"] = [{"status": e.get("status", e.get("error")), "afterKillS": round(e["t"] - kill_at, 3)}
                              for e in watching.log if e.get("lastEventId") and e["t"] >= kill_at]
        out["listChangedAfterKillS"] = [round(t - kill_at, 3) for t in list_changed if t >= kill_at]
        # the same session goes on: a retry of the call, and a listing
        retry: dict[str, Any] = {}
        try:
            with anyio.fail_after(10):
                r = await session.call_tool("report_progress_steps", {"steps": 2, "delay_ms": 50}, progress_callback=on_progress)
                d = r.model_dump(mode="json", by_alias=True, exclude_none=True)
                retry["ok"] = not d.get("isError") and "Completed 2 steps" in json.dumps(d)
                await session.list_tools()
                retry["listOk"] = True
        except Exception as e:  # noqa: BLE001
            retry["error"] = f"{type(e).__name__}: {e}"[:200]
        out["retry"] = retry
        out["cutRid"] = f"{args.rid_prefix}-{args.warm_streams + 1}"
        out["retryRid"] = f"{args.rid_prefix}-{args.warm_streams + 2}"
        if out["call"]["kind"] == "result":
            out["errors"].append(f"the cut call (40 steps) returned a result, which its dead replica never sent: {out['call']['detail']} "
                                 "(a resumption replayed another stream of this session)")
        if not (retry.get("ok") and retry.get("listOk")):
            out["errors"].append(f"the session did not go on working after the kill: {retry}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--replica", action="append", required=True, metavar="N=PID=ADMIN_URL")
    p.add_argument("--rid-prefix", default="d2")
    p.add_argument("--call-timeout", type=float, default=8.0, help="the SDK's read timeout for the cut call")
    p.add_argument("--warm-streams", type=int, default=9, help="short streamed calls before the cut one")
    p.add_argument("--timeout", type=float, default=60.0)
    args = p.parse_args()
    out: dict[str, Any] = {"errors": []}

    return run_reported(run, args, out)


if __name__ == "__main__":
    sys.exit(main())
