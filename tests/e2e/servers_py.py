#!/usr/bin/env python3
"""Virtual servers through the official MCP Python SDK (PyPI mcp 1.x or 2.x: run it with either
venv's interpreter), for tests/e2e/servers.sh, which starts one toolgate with two virtual servers
(data, ops) beside the default /mcp and writes what each must serve to --expect (JSON: per
endpoint its url, the environment variable holding a token minted for it, its name and title, its
exact tool names, overridden fields, one call with its expected text, names unknown there).

    --era 2025-11-25  ClientSession + streamable_http_client: initialize, a session per endpoint,
                      the standalone GET stream for notifications (1.x or 2.x)
    --era 2026-07-28  mcp 2.x Client(mode="auto"): server/discover, no session,
                      subscriptions/listen for notifications

--checks serve: for data and ops, the server identifies as itself (serverInfo name and title,
instructions: from initialize, or in 2026-07-28 from server/discover), lists exactly its own tools
(the renamed ones under their new names, with the overridden descriptions, titles and hints),
calls one, and does not know a tool of the other server or the old name of a renamed one; the
other server's token is refused (the SDK fails to connect, and every HTTP answer was 401); /mcp
lists everything under the original names, without the virtual servers' overrides.

--checks list_changed: listeners on ops, data and /mcp; py_add_tool through ops adds a tool to the
upstream, which announces it; ops and /mcp hear notifications/tools/list_changed, ops lists and
calls the new tool, data does not list it; py_remove_tool, and ops hears again; data hears
nothing until 1.5 s after ops heard the last change.

Prints `PASS <check>` or `FAIL <check>: <why>` per check on stdout (details on stderr); exit
status 0 only if every check passed.
"""

import argparse
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

import anyio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_client import SDK_MAJOR, SDK_VERSION, CheckFailed, check, dump, errors_of, httpx, text_of, types

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

if SDK_MAJOR >= 2:
    from mcp import Client

MODERN = "2026-07-28"
results = {"passed": 0, "failed": 0}


def note(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


class Recorder(httpx.AsyncBaseTransport):
    """Notes the status of every HTTP answer, and when the standalone GET stream was answered."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.statuses: list[tuple[str, int]] = []
        self.get_status: int | None = None
        self.get_answered = anyio.Event()

    async def handle_async_request(self, request: Any) -> Any:
        response = await self._inner.handle_async_request(request)
        self.statuses.append((request.method, response.status_code))
        if request.method == "GET":
            self.get_status = response.status_code
            self.get_answered.set()
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class ListChanged:
    """A message handler counting notifications/tools/list_changed (2025-11-25: the GET stream)."""

    def __init__(self) -> None:
        self.heard: list[float] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            self.heard.append(time.monotonic())

    async def more_than(self, count: int, within: float) -> float | None:
        """Waits until more than `count` were heard; when the next one came, or None."""
        with anyio.move_on_after(within):
            while len(self.heard) <= count:
                await anyio.sleep(0.02)
        return self.heard[count] if len(self.heard) > count else None


def mismatches(tool: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of `fields` (nested: annotations) whose value `tool` does not have, as it has them."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        got = tool.get(key)
        if isinstance(value, dict):
            inner = mismatches(got if isinstance(got, dict) else {}, value)
            if inner:
                out[key] = inner
        elif got != value:
            out[key] = got
    return out


def fields_equal(tool: dict[str, Any], fields: dict[str, Any]) -> bool:
    """Whether `tool` has every one of `fields` (nested) as given."""
    return not mismatches(tool, fields)


class Conn:
    """One connection to one endpoint, in one era, behind one small interface."""

    def __init__(self, session: Any, recorder: Recorder, info: dict[str, Any], modern: bool) -> None:
        self.session = session  # a ClientSession, or a 2.x Client in 2026-07-28
        self.recorder = recorder
        self.info = info  # protocolVersion, serverInfo
        self.modern = modern

    async def tools(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        for _ in range(100):
            if self.modern:
                page = dump(await self.session.list_tools(cursor=cursor))
            else:
                page = dump(await self.session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None))
            for tool in page.get("tools", []):
                check(tool["name"] not in found, f"tools/list names {tool['name']} twice")
                found[tool["name"]] = tool
            cursor = page.get("nextCursor")
            if not cursor:
                return found
        raise CheckFailed("tools/list did not end within 100 pages")

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return dump(await self.session.call_tool(name, arguments))


async def connect(
    stack: AsyncExitStack, args: argparse.Namespace, url: str, token: str, on_message: Any = None, recorder: Recorder | None = None
) -> Conn:
    recorder = recorder or Recorder()
    http = await stack.enter_async_context(
        httpx.AsyncClient(
            transport=recorder, headers={"Authorization": f"Bearer {token}"}, timeout=httpx.Timeout(15.0, read=120.0)
        )
    )
    info = types.Implementation(name="toolgate-e2e-servers-py", version=SDK_VERSION)
    if args.era == MODERN:
        client = await stack.enter_async_context(
            Client(
                streamable_http_client(url, http_client=http),
                mode="auto",
                read_timeout_seconds=args.request_timeout,
                client_info=info,
                cache=None,
                message_handler=on_message,
            )
        )
        server = dump(client.server_info) if client.server_info is not None else {}
        return Conn(client, recorder, {"protocolVersion": client.protocol_version, "serverInfo": server}, True)
    streams = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    timeout: Any = float(args.request_timeout) if SDK_MAJOR >= 2 else timedelta(seconds=args.request_timeout)
    session = await stack.enter_async_context(
        ClientSession(streams[0], streams[1], read_timeout_seconds=timeout, message_handler=on_message, client_info=info)
    )
    return Conn(session, recorder, dump(await session.initialize()), False)


class Suite:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        with open(args.expect) as f:
            self.expect = json.load(f)

    def token(self, endpoint: str) -> str:
        return os.environ[self.expect[endpoint]["token_env"]]

    async def check(self, name: str, body: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> bool:
        try:
            with anyio.fail_after(timeout):
                detail = await body()
        except Exception as e:  # noqa: BLE001 - every failure is reported, the run goes on
            results["failed"] += 1
            why = "; ".join(errors_of(e)) or type(e).__name__
            print(f"FAIL {name}: {why}", flush=True)
            return False
        results["passed"] += 1
        print(f"PASS {name}" + (f" ({detail})" if detail else ""), flush=True)
        return True

    # ---- serve ----------------------------------------------------------------------------------

    async def identifies_as_itself(self, endpoint: str) -> str:
        want = self.expect[endpoint]
        async with AsyncExitStack() as stack:
            conn = await connect(stack, self.args, want["url"], self.token(endpoint))
            version, server = conn.info.get("protocolVersion"), conn.info.get("serverInfo", {})
            instructions = conn.session.instructions if conn.modern else conn.info.get("instructions")
        check(version == self.args.era, f"negotiated {version!r}, wanted {self.args.era!r}")
        source = "the _meta serverInfo stamp of server/discover's result" if conn.modern else "initialize's result"
        check(server.get("name") == want["name"], f"serverInfo.name {server.get('name')!r} in {source}, wanted {want['name']!r}")
        # 2026-07-28 carries serverInfo as the `_meta` stamp of server/discover's result, where a
        # title is optional; an initialize result has it
        if not conn.modern or "title" in server:
            check(server.get("title") == want["title"], f"serverInfo.title {server.get('title')!r}, wanted {want['title']!r}")
        check(instructions == want["instructions"], f"instructions {instructions!r}, wanted {want['instructions']!r}")
        return f"{version}; serverInfo {server.get('name')!r} {server.get('title')!r}"

    async def serves_its_own(self, endpoint: str) -> str:
        want = self.expect[endpoint]
        async with AsyncExitStack() as stack:
            conn = await connect(stack, self.args, want["url"], self.token(endpoint))
            tools = await conn.tools()
            check(sorted(tools) == sorted(want["tools"]), f"lists {sorted(tools)}, wanted exactly {sorted(want['tools'])}")
            for name, fields in want["served"].items():
                differs = mismatches(tools[name], fields)
                check(not differs, f"{name} is served with {differs}, wanted {json.dumps(fields)}")
            call = want["call"]
            r = await conn.call(call["name"], call["arguments"])
            check(not r.get("isError") and text_of(r) == call["text"], f"{call['name']}({json.dumps(call['arguments'])}) returned {json.dumps(r)}")
            got = text_of(r)
            # a tool of the other server, and the original name of a renamed one, are unknown here
            for stranger in want["unknown"]:
                try:
                    r = await conn.call(stranger, {})
                except Exception as e:  # noqa: BLE001 - the SDK raises the JSON-RPC error
                    check("Unknown tool" in str(e), f"calling {stranger} raised {type(e).__name__}: {e}")
                    continue
                check(bool(r.get("isError")) and "Unknown tool" in text_of(r), f"{stranger} answered here: {json.dumps(r)}")
        return f"{len(tools)} tools; {call['name']} -> {got!r}; unknown here: {', '.join(want['unknown'])}"

    async def refused(self, endpoint: str, token_of: str) -> str:
        recorder = Recorder()
        try:
            with anyio.fail_after(self.args.request_timeout + 5):
                async with AsyncExitStack() as stack:
                    conn = await connect(stack, self.args, self.expect[endpoint]["url"], self.token(token_of), recorder=recorder)
                    await conn.tools()
        except Exception as e:  # noqa: BLE001 - what the SDK raises differs between versions and eras
            raised = "; ".join(errors_of(e))[:200]
        else:
            raise CheckFailed(f"connected to {endpoint} and listed its tools with a token minted for {token_of}")
        note(f"{endpoint} with a token for {token_of}: HTTP {recorder.statuses}; the SDK raised {raised}")
        statuses = recorder.statuses
        check(bool(statuses) and all(status == 401 for _, status in statuses), f"HTTP answers {statuses}, wanted only 401")
        return f"HTTP {statuses}; the SDK raised {raised}"

    async def default_serves_everything(self) -> str:
        want = self.expect["default"]
        async with AsyncExitStack() as stack:
            conn = await connect(stack, self.args, want["url"], self.token("default"))
            tools = await conn.tools()
        names = set(tools)
        missing = sorted(set(want["includes"]) - names)
        check(not missing, f"/mcp lacks {missing}")
        present = sorted(set(want["excludes"]) & names)
        check(not present, f"/mcp lists the virtual servers' own names {present}")
        for name, fields in want["not_served"].items():
            check(not fields_equal(tools[name], fields), f"/mcp serves {name} with a virtual server's {json.dumps(fields)}")
        return f"{len(names)} tools"

    async def serve(self) -> None:
        era = self.args.era
        async with anyio.create_task_group() as group:
            for endpoint in ("data", "ops"):
                group.start_soon(self.check, f"{era} {endpoint}: identifies as itself (serverInfo, instructions)", lambda e=endpoint: self.identifies_as_itself(e))
                group.start_soon(self.check, f"{era} {endpoint}: lists exactly its own tools, calls one, not the others'", lambda e=endpoint: self.serves_its_own(e))
            group.start_soon(self.check, f"{era} /mcp: lists everything under the original names", self.default_serves_everything)
            group.start_soon(self.check, f"{era} ops: a token minted for data is refused (401)", lambda: self.refused("ops", "data"))
            group.start_soon(self.check, f"{era} data: a token minted for ops is refused (401)", lambda: self.refused("data", "ops"))

    # ---- list_changed ---------------------------------------------------------------------------

    async def list_changed(self) -> str:
        tool = f"added_{os.getpid()}_{SDK_MAJOR}"
        served = "py_" + tool
        heard: dict[str, ListChanged] = {e: ListChanged() for e in ("ops", "data", "default")}
        async with AsyncExitStack() as stack:
            conns = {}
            modern = self.args.era == MODERN
            for endpoint in heard:
                # 2025-11-25: the GET stream, through the message handler; 2026-07-28: only the
                # subscriptions/listen stream below counts
                handler = None if modern else heard[endpoint]
                conns[endpoint] = await connect(stack, self.args, self.expect[endpoint]["url"], self.token(endpoint), handler)
            if modern:
                for endpoint, conn in conns.items():
                    sub = await stack.enter_async_context(conn.session.listen(tools_list_changed=True))
                    check(bool(sub.honored.tools_list_changed), f"{endpoint} did not honour toolsListChanged: {dump(sub.honored)}")

                    async def drain(sub: Any = sub, counter: ListChanged = heard[endpoint]) -> None:
                        async for _ in sub:
                            counter.heard.append(time.monotonic())

                    group = await stack.enter_async_context(anyio.create_task_group())
                    group.start_soon(drain)
                    stack.callback(group.cancel_scope.cancel)
            else:
                # the SDK opens the GET stream in the background: a change must not come before it
                for endpoint, conn in conns.items():
                    with anyio.fail_after(5):
                        await conn.recorder.get_answered.wait()
                    check(conn.recorder.get_status == 200, f"{endpoint}'s GET stream answered {conn.recorder.get_status}")
            ops, data = conns["ops"], conns["data"]

            before = {e: len(h.heard) for e, h in heard.items()}
            started = time.monotonic()
            r = await ops.call("py_add_tool", {"name": tool})
            check(not r.get("isError"), f"py_add_tool returned {json.dumps(r)}")
            at = await heard["ops"].more_than(before["ops"], 10)
            check(at is not None, "ops heard no notifications/tools/list_changed within 10 s of the upstream's")
            check(await heard["default"].more_than(before["default"], 10) is not None, "/mcp heard no notifications/tools/list_changed within 10 s")
            check(served in await ops.tools(), f"{served} not listed at ops after list_changed")
            r = await ops.call(served, {})
            check(text_of(r) == f"{tool} was added at runtime", f"{served} at ops returned {json.dumps(r)}")
            check(served not in await data.tools(), f"{served} listed at data")

            count = len(heard["ops"].heard)
            r = await ops.call("py_remove_tool", {"name": tool})
            check(not r.get("isError"), f"py_remove_tool returned {json.dumps(r)}")
            last = await heard["ops"].more_than(count, 10)
            check(last is not None, "ops heard no notifications/tools/list_changed within 10 s of the removal")
            check(served not in await ops.tools(), f"{served} still listed at ops after its removal")
            await anyio.sleep(max(0.0, last + 1.5 - time.monotonic()))
            check(not heard["data"].heard, f"data heard {len(heard['data'].heard)} notifications/tools/list_changed; its list never changed")
        return f"ops heard after {round(at - started, 2)} s; data silent for {round(time.monotonic() - started, 2)} s"

    async def changes(self) -> None:
        await self.check(f"{self.args.era}: upstream list_changed reaches ops and /mcp, not data", self.list_changed, 45)


async def amain(args: argparse.Namespace) -> None:
    suite = Suite(args)
    if args.checks == "serve":
        await suite.serve()
    else:
        await suite.changes()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--expect", required=True, help="the JSON servers.sh writes")
    p.add_argument("--era", choices=["2025-11-25", MODERN], default="2025-11-25")
    p.add_argument("--checks", choices=["serve", "list_changed"], required=True)
    p.add_argument("--request-timeout", type=float, default=20)
    p.add_argument("--timeout", type=float, default=55, help="seconds for the whole run")
    args = p.parse_args()
    if args.era == MODERN and SDK_MAJOR < 2:
        print(f"FAIL {MODERN}: mcp {SDK_VERSION} does not speak it; run this with mcp 2.x", flush=True)
        return 1
    note(f"mcp {SDK_VERSION}, era {args.era}, checks {args.checks}")
    try:
        anyio.run(run_bounded, args)
    except Exception as e:  # noqa: BLE001 - reported as a failure of the run
        print(f"FAIL {args.era} {args.checks}: the run ended early: {'; '.join(errors_of(e))}", flush=True)
        return 1
    return 0 if results["failed"] == 0 and results["passed"] > 0 else 1


async def run_bounded(args: argparse.Namespace) -> None:
    with anyio.fail_after(args.timeout):
        await amain(args)


if __name__ == "__main__":
    sys.exit(main())
