#!/usr/bin/env python3
"""Check (a) of tests/cluster/topology.sh: one legacy (2025-11-25) session of the official MCP
Python SDK (PyPI `mcp`, 1.x or 2.x) through the load balancer, kept for --requests requests
(tools/list and tools/call echo, alternating), each answer checked.

Every POST carries its own X-Request-Id (`<--rid-prefix>-<n>`), so the caller can find in the
load balancer's log and in the audit log which replica served each request. Prints one JSON
line: {"ok", "sessionId", "requests", "requestIds", "errors", ...}; exit status 0 only if every
request succeeded in the one session (never re-initialized).

    $HARNESS_DIR/py-mcp1/bin/python tests/cluster/sdk_session.py --url http://127.0.0.1:PORT/mcp --requests 24
"""

import argparse
import importlib.metadata
import json
import os
import sys
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from common import run_reported

SDK_VERSION = importlib.metadata.version("mcp")
SDK_MAJOR = int(SDK_VERSION.split(".")[0])
if SDK_MAJOR >= 2:  # 2.x moved the types out and ships its own httpx fork
    import httpx2 as httpx
    import mcp_types as types
else:
    import httpx
    import mcp.types as types


class Tagging(httpx.AsyncBaseTransport):
    """Gives every POST a fresh X-Request-Id and notes the session id the server assigns."""

    def __init__(self, prefix: str) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.prefix = prefix
        self.n = 0
        self.ids: list[dict[str, Any]] = []
        self.session_id: str | None = None
        self.statuses: dict[str, int] = {}

    async def handle_async_request(self, request: Any) -> Any:
        rid = None
        if request.method == "POST":
            self.n += 1
            rid = f"{self.prefix}-{self.n}"
            request.headers["X-Request-Id"] = rid
            try:
                method = json.loads(request.content).get("method")
            except Exception:  # noqa: BLE001 - a batch or an unreadable body: just not named
                method = None
            self.ids.append({"rid": rid, "method": method})
        response = await self._inner.handle_async_request(request)
        sid = response.headers.get("mcp-session-id")
        if sid:
            self.session_id = self.session_id or sid
        key = f"{request.method} {response.status_code}"
        self.statuses[key] = self.statuses.get(key, 0) + 1
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def run(args: argparse.Namespace, out: dict[str, Any]) -> None:
    tagging = Tagging(args.rid_prefix)
    out["requestIds"], out["statuses"] = tagging.ids, tagging.statuses  # filled as it goes
    headers = {"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"}
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx.AsyncClient(transport=tagging, headers=headers, timeout=httpx.Timeout(15.0, read=60.0))
        )
        streams = await stack.enter_async_context(streamable_http_client(args.url, http_client=http))
        timeout: Any = 15.0 if SDK_MAJOR >= 2 else timedelta(seconds=15)
        session = await stack.enter_async_context(
            ClientSession(streams[0], streams[1], read_timeout_seconds=timeout,
                          client_info=types.Implementation(name="toolgate-cluster-py", version=SDK_VERSION))
        )
        init = dump(await session.initialize())
        out["protocolVersion"] = init.get("protocolVersion")
        if init.get("protocolVersion") != "2025-11-25":
            out["errors"].append(f"negotiated {init.get('protocolVersion')!r}, wanted 2025-11-25")
            return
        first_sid = tagging.session_id
        out["sessionId"] = first_sid
        done = 0
        for i in range(args.requests):
            try:
                if i % 2 == 0:
                    page = dump(await session.list_tools())
                    if not any(t.get("name") == "echo" for t in page.get("tools", [])):
                        raise RuntimeError("tools/list without echo")
                else:
                    text = f"{args.rid_prefix} #{i}"
                    result = dump(await session.call_tool("echo", {"text": text}))
                    got = "".join(c.get("text", "") for c in result.get("content", []))
                    if result.get("isError") or got != text:
                        raise RuntimeError(f"echo returned {result}")
                done += 1
            except Exception as e:  # noqa: BLE001 - reported, and the check fails
                out["errors"].append(f"request {i + 1}: {type(e).__name__}: {e}")
                if len(out["errors"]) >= 3:
                    break
        out["requests"] = done
        if tagging.session_id != first_sid:
            out["errors"].append(f"the session id changed from {first_sid} to {tagging.session_id}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--rid-prefix", default="sdk")
    p.add_argument("--timeout", type=float, default=60.0)
    args = p.parse_args()
    out: dict[str, Any] = {"client": f"python-mcp-{SDK_VERSION}", "errors": [], "requests": 0}

    return run_reported(run, args, out, ok=lambda out: not out["errors"] and out["requests"] == args.requests)


if __name__ == "__main__":
    sys.exit(main())
