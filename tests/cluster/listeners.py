#!/usr/bin/env python3
"""Check (b) of tests/cluster/topology.sh: list_changed reaches listeners on every replica.

For each replica (its own URL, not the load balancer, so every replica is covered) it opens two
listeners: a legacy 2025-11-25 session of the official Python SDK, whose standalone GET stream
carries notifications/tools/list_changed, and a modern 2026-07-28 `subscriptions/listen` stream.
Then, --rounds times, it creates a tool through one replica's admin API (round robin over the
admin URLs) and measures, per listener, the time from the start of the admin call to the
notification. Every listener must hear every change within --within seconds.

Prints one JSON line: per-listener counts, latency p50/p99/max for listeners on other replicas
(cross) and on the one the change was made on (same); exit status 0 only if nothing was missed.

    ADMIN_TOKEN=... MCP_TOKEN=... $HARNESS_DIR/py-mcp1/bin/python tests/cluster/listeners.py \\
        --replica http://127.0.0.1:P1/mcp --admin http://127.0.0.1:A1 --replica ... --admin ...
"""

import argparse
import importlib.metadata
import json
import os
import sys
import time
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from common import modern_request, percentile, run_reported, sse_messages

SDK_VERSION = importlib.metadata.version("mcp")
SDK_MAJOR = int(SDK_VERSION.split(".")[0])
if SDK_MAJOR >= 2:
    import httpx2 as httpx
    import mcp_types as types
else:
    import httpx
    import mcp.types as types


class Listener:
    def __init__(self, replica: int, kind: str) -> None:
        self.replica = replica
        self.kind = kind
        self.arrivals: list[float] = []
        self.ready = anyio.Event()
        self.error: str | None = None

    @property
    def name(self) -> str:
        return f"replica-{self.replica + 1}/{self.kind}"

    def first_after(self, t0: float) -> float | None:
        return next((t for t in self.arrivals if t >= t0), None)


class GetWatcher(httpx.AsyncBaseTransport):
    """Sets `listener.ready` once the SDK's standalone GET stream is answered with 200 SSE."""

    def __init__(self, listener: Listener) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.listener = listener

    async def handle_async_request(self, request: Any) -> Any:
        response = await self._inner.handle_async_request(request)
        if request.method == "GET":
            if response.status_code == 200 and response.headers.get("content-type", "").startswith("text/event-stream"):
                self.listener.ready.set()
            else:
                self.listener.error = f"GET stream answered {response.status_code}"
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def sdk_listener(stack: AsyncExitStack, url: str, listener: Listener) -> ClientSession:
    """Opens a legacy SDK session on `url` whose GET stream feeds `listener`; returns the session."""
    async def on_message(message: Any) -> None:
        if getattr(getattr(message, "root", message), "method", None) == "notifications/tools/list_changed":
            listener.arrivals.append(time.monotonic())

    headers = {"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"}
    http = await stack.enter_async_context(
        httpx.AsyncClient(transport=GetWatcher(listener), headers=headers, timeout=httpx.Timeout(15.0, read=600.0))
    )
    streams = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    timeout: Any = 15.0 if SDK_MAJOR >= 2 else timedelta(seconds=15)
    session = await stack.enter_async_context(
        ClientSession(streams[0], streams[1], read_timeout_seconds=timeout, message_handler=on_message,
                      client_info=types.Implementation(name="toolgate-cluster-listener", version=SDK_VERSION))
    )
    await session.initialize()
    return session


async def modern_listener(http: Any, url: str, listener: Listener) -> None:
    headers, body = modern_request(1, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    try:
        async with http.stream("POST", url, headers=headers, content=body) as response:
            if response.status_code != 200:
                listener.error = f"subscriptions/listen answered {response.status_code}"
                listener.ready.set()
                return
            async for msg in sse_messages(response.aiter_lines()):
                method = msg.get("method")
                if method == "notifications/subscriptions/acknowledged":
                    listener.ready.set()
                elif method == "notifications/tools/list_changed":
                    listener.arrivals.append(time.monotonic())
    except Exception as e:  # noqa: BLE001 - reported as the listener's error
        listener.error = listener.error or f"{type(e).__name__}: {e}"
        listener.ready.set()
    if not listener.error:
        listener.error = "the stream ended"


async def run(args: argparse.Namespace, out: dict[str, Any]) -> None:
    listeners: list[Listener] = []
    admin_headers = {"Authorization": f"Bearer {os.environ['ADMIN_TOKEN']}"}
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx.AsyncClient(headers={"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"},
                              timeout=httpx.Timeout(15.0, read=600.0))
        )
        admin = await stack.enter_async_context(httpx.AsyncClient(headers=admin_headers, timeout=15.0))
        for i, url in enumerate(args.replica):  # SDK sessions first: their task groups enclose ours
            legacy = Listener(i, "legacy-get")
            listeners.append(legacy)
            await sdk_listener(stack, url, legacy)
        async with anyio.create_task_group() as tg:
            for i, url in enumerate(args.replica):
                modern = Listener(i, "modern-listen")
                listeners.append(modern)
                tg.start_soon(modern_listener, http, url, modern)
            await rounds(args, out, listeners, admin)
            tg.cancel_scope.cancel()


async def rounds(args: argparse.Namespace, out: dict[str, Any], listeners: list[Listener], admin: Any) -> None:
    with anyio.move_on_after(10):
        for listener in listeners:
            await listener.ready.wait()
    broken = {l.name: l.error or "not ready within 10 s" for l in listeners if l.error or not l.ready.is_set()}
    if broken:
        out["errors"].append(f"listeners not open: {broken}")
        return
    await anyio.sleep(0.2)  # let any notification caused by the set-up itself arrive first
    cross: list[float] = []
    same: list[float] = []
    admin_ms: list[float] = []
    missed: dict[str, int] = {}
    for r in range(args.rounds):
        target = r % len(args.admin)
        name = f"{args.name_prefix}_{r}"
        definition = {"name": name, "description": "Repeat the given text. Example: {\"text\": \"hi\"}.",
                      "builtin": {"id": "echo"}}
        t0 = time.monotonic()
        res = await admin.post(f"{args.admin[target]}/admin/tools", json=definition)
        admin_ms.append((time.monotonic() - t0) * 1000)
        if res.status_code != 201:
            out["errors"].append(f"round {r}: POST /admin/tools on replica-{target + 1} answered {res.status_code}: {res.text[:200]}")
            break
        deadline = t0 + args.within
        while time.monotonic() < deadline and any(l.first_after(t0) is None for l in listeners):
            await anyio.sleep(0.002)
        for l in listeners:
            t = l.first_after(t0)
            if t is None:
                missed[l.name] = missed.get(l.name, 0) + 1
            else:
                (same if l.replica == target else cross).append((t - t0) * 1000)
        await anyio.sleep(args.pause)
    out["rounds"] = args.rounds
    out["listeners"] = {l.name: len(l.arrivals) for l in listeners}
    out["missed"] = missed
    r2 = lambda v: None if v is None else round(v, 1)  # noqa: E731
    out["crossReplicaMs"] = {"n": len(cross), "p50": r2(percentile(cross, 50)), "p99": r2(percentile(cross, 99)), "max": r2(max(cross, default=None))}
    out["sameReplicaMs"] = {"n": len(same), "p50": r2(percentile(same, 50)), "p99": r2(percentile(same, 99)), "max": r2(max(same, default=None))}
    out["adminCallMs"] = {"p50": r2(percentile(admin_ms, 50)), "p99": r2(percentile(admin_ms, 99))}
    if missed:
        out["errors"].append(f"listeners missed changes: {missed}")
    dead = {l.name: l.error for l in listeners if l.error}
    if dead:
        out["errors"].append(f"listener streams ended during the run: {dead}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replica", action="append", required=True, help="a replica's own /mcp URL (repeat)")
    p.add_argument("--admin", action="append", required=True, help="a replica's admin base URL (repeat)")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--within", type=float, default=5.0, metavar="SECONDS")
    p.add_argument("--pause", type=float, default=0.05, metavar="SECONDS", help="between rounds")
    p.add_argument("--name-prefix", default="cluster_lc")
    p.add_argument("--timeout", type=float, default=120.0)
    args = p.parse_args()
    out: dict[str, Any] = {"client": f"python-mcp-{SDK_VERSION}", "errors": []}

    return run_reported(run, args, out)


if __name__ == "__main__":
    sys.exit(main())
