#!/usr/bin/env python3
"""End-to-end check of toolgate with the official MCP Python SDK (PyPI `mcp`, 1.x or 2.x).

Run it with the interpreter of a venv made by tests/e2e/setup.sh:

    $HARNESS_DIR/py-mcp1/bin/python tests/e2e/py_client.py --url http://127.0.0.1:8080/mcp --min-pages 2
    $HARNESS_DIR/py-mcp2/bin/python tests/e2e/py_client.py --transport sse --url http://127.0.0.1:8080/sse

Streamable HTTP: initialize (protocol version and server name), list tools following nextCursor,
call calculate_sum and report_progress_steps (progress), then wait on the GET stream for
notifications/tools/list_changed while a second session calls test_trigger_tool_change, and
re-list. The legacy SSE transport: initialize, list, calculate_sum. Prints one JSON line; exit
status 0 only if every check passed.
"""

import argparse
import os
import importlib.metadata
import json
import sys
import time
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

SDK_VERSION = importlib.metadata.version("mcp")
SDK_MAJOR = int(SDK_VERSION.split(".")[0])
if SDK_MAJOR >= 2:  # 2.x moved the types out and ships its own httpx fork
    import httpx2 as httpx
    import mcp_types as types
else:
    import httpx
    import mcp.types as types


class CheckFailed(Exception):
    pass


def check(ok: bool, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class GetWatcher(httpx.AsyncBaseTransport):
    """Notes the answer to the SDK's standalone GET stream, which it opens in the background after
    initialization; a change must not be caused before the stream exists."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.get_status: tuple[int, str] | None = None
        self.get_answered = anyio.Event()

    async def handle_async_request(self, request: Any) -> Any:
        response = await self._inner.handle_async_request(request)
        if request.method == "GET":
            self.get_status = (response.status_code, response.headers.get("content-type", ""))
            self.get_answered.set()
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def open_session(stack: AsyncExitStack, args: argparse.Namespace, on_message: Any = None) -> tuple[ClientSession, Any, GetWatcher]:
    watcher = GetWatcher()
    # MCP_TOKEN: a bearer token for a server with auth on, sent on every request.
    token = os.environ.get("MCP_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    if args.transport == "sse":
        streams = await stack.enter_async_context(sse_client(args.url, headers=headers, timeout=30, sse_read_timeout=300))
    else:
        client = await stack.enter_async_context(
            httpx.AsyncClient(transport=watcher, headers=headers, timeout=httpx.Timeout(30.0, read=300.0), follow_redirects=True)
        )
        streams = await stack.enter_async_context(streamable_http_client(args.url, http_client=client))
    timeout: Any = float(args.request_timeout) if SDK_MAJOR >= 2 else timedelta(seconds=args.request_timeout)
    session = await stack.enter_async_context(
        ClientSession(
            streams[0],
            streams[1],
            read_timeout_seconds=timeout,
            message_handler=on_message,
            client_info=types.Implementation(name="toolgate-e2e-py", version=SDK_VERSION),
        )
    )
    return session, dump(await session.initialize()), watcher


async def list_all_tools(session: ClientSession) -> tuple[list[dict[str, Any]], int]:
    tools: list[dict[str, Any]] = []
    cursors: set[str] = set()
    cursor: str | None = None
    pages = 0
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = dump(await session.list_tools(params=params))
        pages += 1
        tools.extend(page.get("tools", []))
        cursor = page.get("nextCursor")
        if not cursor:
            return tools, pages
        check(cursor not in cursors, f"tools/list repeated the cursor {cursor!r}")
        check(pages < 100, "tools/list did not end within 100 pages")
        cursors.add(cursor)


def text_of(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")


async def run(args: argparse.Namespace, out: dict[str, Any]) -> None:
    list_changed_at: list[float] = []

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/tools/list_changed":
            list_changed_at.append(time.monotonic())

    async with AsyncExitStack() as stack:
        session, init, watcher = await open_session(stack, args, on_message)
        out["protocolVersion"] = init.get("protocolVersion")
        check(init.get("protocolVersion") == args.protocol, f"negotiated protocolVersion {init.get('protocolVersion')!r}, wanted {args.protocol!r}")
        server_name = init.get("serverInfo", {}).get("name")
        check(server_name == args.server_name, f"serverInfo.name is {server_name!r}, wanted {args.server_name!r}")
        out["passed"].append("initialize")

        tools, pages = await list_all_tools(session)
        names = [t["name"] for t in tools]
        out["tools"], out["pages"] = len(names), pages
        check(len(set(names)) == len(names), f"duplicate tool names: {sorted({n for n in names if names.count(n) > 1})}")
        check(pages >= args.min_pages, f"tools/list came in {pages} page(s), wanted at least {args.min_pages}")
        bad = [t["name"] for t in tools if t.get("inputSchema", {}).get("type") != "object"]
        check(not bad, f"inputSchema without type object: {bad}")
        out["passed"].append("tools/list")

        result = dump(await session.call_tool("calculate_sum", {"a": 2, "b": 3}))
        check(not result.get("isError") and text_of(result) == "5", f"calculate_sum(2, 3) returned {result}")
        out["passed"].append("calculate_sum")
        if args.transport == "sse":
            return

        progress: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None = None) -> None:
            progress.append(value)

        result = dump(await session.call_tool("report_progress_steps", {"steps": 3, "delay_ms": 50}, progress_callback=on_progress))
        out["progress"] = progress
        check(not result.get("isError"), f"report_progress_steps returned {result}")
        check(len(progress) >= 3, f"{len(progress)} progress notification(s), wanted at least 3")
        check(all(a < b for a, b in zip(progress, progress[1:])), f"progress values not strictly increasing: {progress}")
        out["passed"].append("progress")

        with anyio.move_on_after(5):
            await watcher.get_answered.wait()
        check(watcher.get_status is not None, "the SDK opened no GET stream within 5 s")
        status, ctype = watcher.get_status or (0, "")
        check(status == 200 and ctype.startswith("text/event-stream"), f"GET stream answered {status} {ctype!r}")
        check(args.trigger in names, f"tool {args.trigger!r} is not offered (is the conformance pack on?)")
        async with AsyncExitStack() as other_stack:  # an independent session causes the change
            other, _, _ = await open_session(other_stack, args)
            started = time.monotonic()
            result = dump(await other.call_tool(args.trigger, json.loads(args.trigger_args)))
            check(not result.get("isError"), f"{args.trigger} returned {result}")
        with anyio.move_on_after(max(0.0, started + args.list_changed_within - time.monotonic())):
            while not list_changed_at:
                await anyio.sleep(0.02)
        check(bool(list_changed_at), f"no notifications/tools/list_changed on the GET stream within {args.list_changed_within} s")
        out["listChangedAfter"] = round(list_changed_at[0] - started, 3)
        after, _ = await list_all_tools(session)
        after_names = {t["name"] for t in after}
        out["toolsChanged"] = {"added": sorted(after_names - set(names)), "removed": sorted(set(names) - after_names)}
        check(after_names != set(names), "tools/list after notifications/tools/list_changed shows no change")
        out["passed"].append("list_changed")


def errors_of(e: BaseException) -> list[str]:
    if isinstance(e, BaseExceptionGroup):
        return [m for sub in e.exceptions for m in errors_of(sub)]
    if isinstance(e, CheckFailed):
        return [str(e)]
    if isinstance(e, TimeoutError) and not str(e):
        return ["TimeoutError: the run or a request took too long (--timeout, --request-timeout)"]
    return [f"{type(e).__name__}: {e}"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="the /mcp endpoint, or /sse with --transport sse")
    p.add_argument("--transport", choices=["streamable-http", "sse"], default="streamable-http")
    p.add_argument("--protocol", default="2025-11-25", help="protocolVersion the server must negotiate")
    p.add_argument("--min-pages", type=int, default=1, help="fewest tools/list pages expected")
    p.add_argument("--server-name", default="toolgate", help="serverInfo.name the server must announce")
    p.add_argument("--trigger", default="test_trigger_tool_change", help="tool that changes the tool list")
    p.add_argument("--trigger-args", default="{}", metavar="JSON", help="arguments of the --trigger tool")
    p.add_argument("--list-changed-within", type=float, default=10.0, metavar="SECONDS")
    p.add_argument("--request-timeout", type=float, default=30.0, metavar="SECONDS")
    p.add_argument("--timeout", type=float, default=90.0, metavar="SECONDS", help="bound on the whole run")
    args = p.parse_args()
    out: dict[str, Any] = {"client": f"python-mcp-{SDK_VERSION}", "transport": args.transport, "passed": [], "errors": []}

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args, out)

    try:
        anyio.run(bounded)
    except Exception as e:  # includes ExceptionGroups from the SDK's task groups
        out["errors"] = errors_of(e)
    out["ok"] = not out["errors"]
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
