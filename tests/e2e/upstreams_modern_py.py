#!/usr/bin/env python3
"""A 2026-07-28 upstream through toolgate, checked with the official MCP Python SDK (PyPI mcp 2.x
or 1.x: run it with either venv's interpreter).

tests/e2e/upstreams_modern.sh starts tests/e2e/upstreams/fastmcp_modern_server.py (mcp 2.3.0's
MCPServer, which speaks 2026-07-28) and a toolgate that serves it as `fm` (prefix fm_) with
protocol = "2026-07-28", so toolgate speaks nothing else to it. This client then talks to
toolgate in its own era and compares with what the same SDK gets from the upstream directly:

  mcp 2.x (py-mcp2)  Client(mode="auto"): server/discover, then 2026-07-28 (no session) both to
                     toolgate and directly to the upstream
  mcp 1.x (py-mcp1)  ClientSession: initialize, 2025-11-25, both to toolgate and directly

Checks, for either SDK:
  protocol           the era negotiated with toolgate (2026-07-28, or 2025-11-25 for 1.x)
  tools/list         fm_greet, fm_count, fm_slow, fm_slow_status, fm_ask_name, fm_add_tool,
                     fm_remove_tool and fm_request_info, exactly the upstream's tools with the
                     prefix, with its schemas and descriptions
  upstream's view    fm_request_info: whatever the client's era, the call reached the upstream
                     in 2026-07-28: _meta with that version, clientInfo toolgate and the
                     elicitation capability; headers MCP-Protocol-Version, Mcp-Method tools/call
                     and Mcp-Name request_info
  tools/call         fm_greet gives the same result through toolgate as directly
  progress           fm_count(n=3): the progress callback hears 1, 2, 3 of 3 with the upstream's
                     messages
  elicitation        fm_ask_name: the upstream answers input_required (MRTR) to toolgate; the
                     client's elicitation callback is asked (2.x: toolgate's own input_required
                     result, answered by the SDK's retry loop; 1.x: an elicitation/create request
                     on the call's stream) and the result is "hello <name>". 2.x also drives one
                     round by hand: toolgate's input_required result carries the upstream's
                     question and a requestState, and the retry with inputResponses and that
                     requestState finishes the call. A client that declines: the upstream hears
                     it ("no name (decline)"); a client without the elicitation capability: a
                     tool error saying so, not a hang
  cancellation       fm_slow(30) is cancelled client-side (2.x: the SDK closes the request's
                     stream; 1.x: notifications/cancelled, which that SDK does not send itself,
                     then the call's scope is cancelled); the upstream's slow_status (asked
                     directly) shows it cancelled, not finished, within 10 s
  list_changed       fm_add_tool through toolgate adds a tool upstream, which announces it on
                     its subscriptions/listen stream (toolgate's); toolgate's tools
                     list_changed reaches this client (2.x: on its own subscriptions/listen
                     stream to toolgate; 1.x: on its GET stream) and fm_<name> is listed and
                     callable; removed directly on the upstream, it leaves toolgate's list again

Prints `PASS <check>` or `FAIL <check>: <why>` per check on stdout (details on stderr); exit
status 0 only if every check passed:

    $HARNESS_DIR/py-mcp2/bin/python tests/e2e/upstreams_modern_py.py --url http://127.0.0.1:18602/mcp \\
        --upstream-url http://127.0.0.1:18600/mcp
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
from py_client import SDK_MAJOR, SDK_VERSION, CheckFailed, GetWatcher, check, dump, errors_of, httpx, text_of, types

if SDK_MAJOR >= 2:
    from mcp import Client
    from mcp.client.subscriptions import ToolsListChanged
else:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

PREFIX = "fm_"
UPSTREAM_TOOLS = {"greet", "count", "slow", "slow_status", "ask_name", "add_tool", "remove_tool", "request_info"}
ELICITED_NAME = "Ada Lovelace"
QUESTION = "What is your name?"
WANT_ERA = "2026-07-28" if SDK_MAJOR >= 2 else "2025-11-25"

results = {"passed": 0, "failed": 0}


def note(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def essence(result: dict[str, Any]) -> dict[str, Any]:
    """What a faithful proxy must keep of a CallToolResult."""
    return {"content": result.get("content", []), "structuredContent": result.get("structuredContent"), "isError": bool(result.get("isError"))}


class Elicitor:
    """An elicitation callback that accepts with a name, and remembers what it was asked."""

    def __init__(self, name: str = ELICITED_NAME) -> None:
        self.name = name
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, context: Any, params: Any) -> Any:
        self.asked.append(dump(params))
        return types.ElicitResult(action="accept", content={"name": self.name})


class Decliner:
    """An elicitation callback that declines."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, context: Any, params: Any) -> Any:
        self.asked += 1
        return types.ElicitResult(action="decline")


class Notifications:
    """A message handler: counts notifications/tools/list_changed (the 1.x client's GET stream)."""

    def __init__(self) -> None:
        self.list_changed = 0

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification):
            self.list_changed += 1

    async def after(self, count: int, within: float) -> bool:
        with anyio.move_on_after(within):
            while self.list_changed <= count:
                await anyio.sleep(0.02)
        return self.list_changed > count


async def eventually(what: Callable[[], Awaitable[bool]], within: float, every: float = 0.25) -> float | None:
    """Polls until `what()` is true; the seconds it took, or None."""
    started = time.monotonic()
    while True:
        if await what():
            return round(time.monotonic() - started, 2)
        if time.monotonic() - started > within:
            return None
        await anyio.sleep(every)


class Conn:
    """One connection of this SDK, to toolgate or to the upstream, behind one small interface."""

    def __init__(self, session: Any, protocol_version: str, watcher: GetWatcher | None = None) -> None:
        self.session = session  # a 2.x Client or a 1.x ClientSession
        self.protocol_version = protocol_version
        self.watcher = watcher

    async def tools(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        for _ in range(100):
            if SDK_MAJOR >= 2:
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

    async def call(self, name: str, arguments: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return dump(await self.session.call_tool(name, arguments, **kw))


async def open_conn(stack: AsyncExitStack, url: str, args: argparse.Namespace, **callbacks: Any) -> Conn:
    info = types.Implementation(name="toolgate-e2e-upstreams-modern-py", version=SDK_VERSION)
    if SDK_MAJOR >= 2:
        client = await stack.enter_async_context(
            Client(url, mode="auto", read_timeout_seconds=args.request_timeout, client_info=info, cache=None, **callbacks)
        )
        return Conn(client, client.protocol_version)
    watcher = GetWatcher()
    http = await stack.enter_async_context(
        httpx.AsyncClient(transport=watcher, timeout=httpx.Timeout(30.0, read=300.0), follow_redirects=True)
    )
    streams = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(
        ClientSession(streams[0], streams[1], read_timeout_seconds=timedelta(seconds=args.request_timeout), client_info=info, **callbacks)
    )
    init = await session.initialize()
    return Conn(session, init.protocolVersion, watcher)


class Suite:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.elicitor = Elicitor()
        self.notes = Notifications()
        self.tg: Conn
        self.up: Conn

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

    # ---- the checks -----------------------------------------------------------------------------

    async def protocol(self) -> str:
        check(self.tg.protocol_version == WANT_ERA, f"toolgate negotiated {self.tg.protocol_version!r}, wanted {WANT_ERA!r}")
        check(self.up.protocol_version == WANT_ERA, f"the upstream directly negotiated {self.up.protocol_version!r}, wanted {WANT_ERA!r}")
        return self.tg.protocol_version

    async def listed(self) -> str:
        served = {n[len(PREFIX) :]: t for n, t in (await self.tg.tools()).items() if n.startswith(PREFIX)}
        direct = await self.up.tools()
        check(UPSTREAM_TOOLS <= set(served), f"missing {sorted(UPSTREAM_TOOLS - set(served))}; served: {sorted(served)}")
        check(set(served) == set(direct), f"served {sorted(served)}, the upstream lists {sorted(direct)}")
        for name, tool in served.items():
            for field in ("inputSchema", "outputSchema", "description", "title"):
                check(
                    tool.get(field) == direct[name].get(field),
                    f"{PREFIX}{name} {field} {json.dumps(tool.get(field))} differs from the upstream's {json.dumps(direct[name].get(field))}",
                )
        return f"{len(served)} {PREFIX} tools, as the upstream lists them"

    async def upstream_view(self) -> str:
        r = await self.tg.call(PREFIX + "request_info", {})
        seen = r.get("structuredContent")
        want = {
            "protocolVersion": "2026-07-28",
            "clientName": "toolgate",
            "elicitation": True,
            "mcpMethod": "tools/call",
            "mcpName": "request_info",
            "mcpProtocolVersion": "2026-07-28",
        }
        check(not r.get("isError") and seen == want, f"the upstream saw {json.dumps(seen)}, wanted {json.dumps(want)} ({json.dumps(r)})")
        return "2026-07-28 _meta and Mcp-* headers from toolgate"

    async def greet(self) -> str:
        via = await self.tg.call(PREFIX + "greet", {"name": "Grace"})
        direct = await self.up.call("greet", {"name": "Grace"})
        note(f"greet through toolgate: {json.dumps(via)}; directly: {json.dumps(direct)}")
        check(essence(via) == essence(direct), f"through toolgate {json.dumps(essence(via))} but directly {json.dumps(essence(direct))}")
        check(text_of(via) == "Hello, Grace!", f"fm_greet returned {json.dumps(via)}")
        return text_of(via)

    async def progress(self) -> str:
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None = None) -> None:
            seen.append((progress, total, message))

        r = await self.tg.call(PREFIX + "count", {"n": 3, "delay_ms": 50}, progress_callback=on_progress)
        check(not r.get("isError") and text_of(r) == "counted to 3", f"fm_count returned {json.dumps(r)}")
        want = [(float(i), 3.0, f"step {i} of 3") for i in range(1, 4)]
        check(seen == want, f"the progress callback heard {seen}, the upstream sent {want}")
        return f"{len(seen)} notifications"

    async def elicitation(self) -> str:
        asked = len(self.elicitor.asked)
        r = await self.tg.call(PREFIX + "ask_name", {})
        check(not r.get("isError") and text_of(r) == f"hello {ELICITED_NAME}", f"fm_ask_name returned {json.dumps(r)}")
        check(len(self.elicitor.asked) == asked + 1, f"the elicitation callback ran {len(self.elicitor.asked) - asked} time(s), wanted 1")
        params = self.elicitor.asked[-1]
        check(params.get("message") == QUESTION, f"elicitation message {params.get('message')!r}, wanted {QUESTION!r}")
        props = (params.get("requestedSchema") or {}).get("properties", {})
        check("name" in props, f"requestedSchema lost its properties: {params.get('requestedSchema')}")
        return "hello " + ELICITED_NAME

    async def elicitation_declined(self) -> str:
        decliner = Decliner()
        async with AsyncExitStack() as stack:
            other = await open_conn(stack, self.args.url, self.args, elicitation_callback=decliner)
            r = await other.call(PREFIX + "ask_name", {})
        check(decliner.asked == 1, f"the declining client was asked {decliner.asked} time(s), wanted 1")
        check(not r.get("isError") and text_of(r) == "no name (decline)", f"fm_ask_name returned {json.dumps(r)}")
        return text_of(r)

    async def elicitation_unsupported(self) -> str:
        async with AsyncExitStack() as stack:
            other = await open_conn(stack, self.args.url, self.args)  # no elicitation callback
            try:
                with anyio.fail_after(15):
                    r = await other.call(PREFIX + "ask_name", {})
            except TimeoutError:
                raise CheckFailed("fm_ask_name did not end within 15 s for a client without elicitation") from None
        check(bool(r.get("isError")) and "elicitation" in text_of(r), f"fm_ask_name for a client without elicitation returned {json.dumps(r)}")
        return text_of(r)[:120]

    async def elicitation_by_hand(self) -> str:
        """2.x: toolgate's own input_required result, and the retry that finishes it."""
        first = await self.tg.session.session.call_tool(PREFIX + "ask_name", {}, allow_input_required=True)
        check(isinstance(first, types.InputRequiredResult), f"the first round answered {type(first).__name__}: {dump(first)}")
        requests = first.input_requests or {}
        check(len(requests) == 1, f"inputRequests {dump(first)}, wanted one question")
        key, request = next(iter(requests.items()))
        wire = dump(request)
        check(wire.get("method") == "elicitation/create", f"inputRequests[{key!r}] is {wire}")
        check(wire.get("params", {}).get("message") == QUESTION, f"the question reads {wire.get('params')}")
        check(bool(first.request_state), f"no requestState in toolgate's input_required result: {dump(first)}")
        answer = {key: types.ElicitResult(action="accept", content={"name": "Grace Hopper"})}
        second = await self.tg.session.session.call_tool(
            PREFIX + "ask_name", {}, input_responses=answer, request_state=first.request_state, allow_input_required=True
        )
        check(isinstance(second, types.CallToolResult), f"the retry answered {type(second).__name__}: {dump(second)}")
        r = dump(second)
        check(not r.get("isError") and text_of(r) == "hello Grace Hopper", f"the retry returned {json.dumps(r)}")
        return f"question {key!r}, then {text_of(r)!r}"

    async def slow_status(self) -> dict[str, int]:
        r = await self.up.call("slow_status", {})
        check(not r.get("isError") and isinstance(r.get("structuredContent"), dict), f"slow_status returned {json.dumps(r)}")
        return dict(r["structuredContent"])

    async def cancellation(self) -> str:
        before = await self.slow_status()
        outcome: dict[str, Any] = {}
        scope = anyio.CancelScope()

        async def run_slow() -> None:
            with scope:
                try:
                    outcome["result"] = await self.tg.call(PREFIX + "slow", {"seconds": 30})
                except Exception as e:  # noqa: BLE001
                    outcome["error"] = repr(e)

        request_id = None if SDK_MAJOR >= 2 else self.tg.session._request_id  # 1.x: the id fm_slow gets
        async with anyio.create_task_group() as group:
            group.start_soon(run_slow)

            async def started() -> bool:
                return (await self.slow_status())["started"] > before["started"]

            check(await eventually(started, 10) is not None, "fm_slow did not start upstream within 10 s")
            if request_id is not None:
                await self.tg.session.send_notification(
                    types.ClientNotification(
                        types.CancelledNotification(
                            params=types.CancelledNotificationParams(requestId=request_id, reason="e2e: the client gave up")
                        )
                    )
                )
            cancelled_at = time.monotonic()
            scope.cancel()

        async def cancelled_upstream() -> bool:
            return (await self.slow_status())["cancelled"] > before["cancelled"]

        took = await eventually(cancelled_upstream, 10)
        now = await self.slow_status()
        check(took is not None, f"the upstream's slow() was not cancelled within 10 s: {before} -> {now}")
        check(now["finished"] == before["finished"], f"the upstream's slow() finished: {before} -> {now}")
        check("result" not in outcome, f"fm_slow answered although cancelled: {outcome}")
        r = await self.tg.call(PREFIX + "greet", {"name": "after cancel"})
        check(text_of(r) == "Hello, after cancel!", f"toolgate does not serve after the cancellation: {json.dumps(r)}")
        how = "closed the request's stream" if SDK_MAJOR >= 2 else "notifications/cancelled"
        return f"{how}; upstream cancelled {round(time.monotonic() - cancelled_at, 2)} s later, status {now}"

    async def list_changed(self) -> str:
        tool = f"added_{os.getpid()}_{SDK_MAJOR}"
        served = PREFIX + tool

        async def listed() -> bool:
            return served in await self.tg.tools()

        async def unlisted() -> bool:
            return served not in await self.tg.tools()

        if SDK_MAJOR >= 2:
            async with self.tg.session.listen(tools_list_changed=True) as sub:
                check(bool(sub.honored.tools_list_changed), f"toolgate did not honour toolsListChanged: {dump(sub.honored)}")
                r = await self.tg.call(PREFIX + "add_tool", {"name": tool})
                check(not r.get("isError"), f"fm_add_tool returned {json.dumps(r)}")
                started = time.monotonic()
                try:
                    with anyio.fail_after(10):
                        event = await sub.__anext__()
                except TimeoutError:
                    raise CheckFailed("no tools list_changed on toolgate's subscriptions/listen stream within 10 s of the upstream's") from None
                heard = round(time.monotonic() - started, 2)
                check(isinstance(event, ToolsListChanged), f"the stream carried {event!r}, wanted ToolsListChanged")
                check(await eventually(listed, 5) is not None, f"{served} not in tools/list after list_changed")
                r = await self.tg.call(served, {})
                check(text_of(r) == f"{tool} was added at runtime", f"{served} returned {json.dumps(r)}")
                r = await self.up.call("remove_tool", {"name": tool})  # directly on the upstream this time
                check(not r.get("isError"), f"remove_tool (direct) returned {json.dumps(r)}")
                try:
                    with anyio.fail_after(10):
                        event = await sub.__anext__()
                except TimeoutError:
                    raise CheckFailed("no tools list_changed within 10 s of the removal") from None
                check(await eventually(unlisted, 5) is not None, f"{served} still listed after its removal upstream")
            return f"list_changed on subscriptions/listen after {heard} s; added, called, removed"

        with anyio.move_on_after(5):
            await self.tg.watcher.get_answered.wait()
        status = self.tg.watcher.get_status
        check(status is not None and status[0] == 200, f"no GET stream from toolgate for notifications: {status}")
        count = self.notes.list_changed
        r = await self.tg.call(PREFIX + "add_tool", {"name": tool})
        check(not r.get("isError"), f"fm_add_tool returned {json.dumps(r)}")
        started = time.monotonic()
        check(await self.notes.after(count, 10), "no notifications/tools/list_changed on toolgate's GET stream within 10 s of the upstream's")
        heard = round(time.monotonic() - started, 2)
        check(await eventually(listed, 5) is not None, f"{served} not in tools/list after list_changed")
        r = await self.tg.call(served, {})
        check(text_of(r) == f"{tool} was added at runtime", f"{served} returned {json.dumps(r)}")
        count = self.notes.list_changed
        r = await self.up.call("remove_tool", {"name": tool})
        check(not r.get("isError"), f"remove_tool (direct) returned {json.dumps(r)}")
        check(await self.notes.after(count, 10), "no notifications/tools/list_changed within 10 s of the removal")
        check(await eventually(unlisted, 5) is not None, f"{served} still listed after its removal upstream")
        return f"list_changed on the GET stream after {heard} s; added, called, removed"

    async def run(self) -> None:
        a = self.args
        async with AsyncExitStack() as stack:
            try:
                self.tg = await open_conn(stack, a.url, a, elicitation_callback=self.elicitor, message_handler=self.notes)
            except Exception as e:
                raise CheckFailed(f"connecting to toolgate at {a.url}: {'; '.join(errors_of(e))}") from e
            try:
                self.up = await open_conn(stack, a.upstream_url, a, elicitation_callback=Elicitor())
            except Exception as e:
                raise CheckFailed(f"connecting to the upstream at {a.upstream_url}: {'; '.join(errors_of(e))}") from e
            await self.check(f"protocol {WANT_ERA} with toolgate", self.protocol)
            if not await self.check("tools/list has the upstream's tools as fm_*", self.listed):
                return
            await self.check("the upstream is called in 2026-07-28 (fm_request_info)", self.upstream_view)
            await self.check("fm_greet same as calling the upstream directly", self.greet)
            await self.check("progress relayed (fm_count n=3)", self.progress)
            await self.check("elicitation round trip (fm_ask_name)", self.elicitation)
            if SDK_MAJOR >= 2:
                await self.check("toolgate's own input_required, finished by the retry (fm_ask_name)", self.elicitation_by_hand)
            await self.check("elicitation declined, the upstream hears it (fm_ask_name)", self.elicitation_declined)
            await self.check("elicitation to a client without the capability ends in a tool error", self.elicitation_unsupported)
            await self.check("cancellation reaches the upstream (fm_slow)", self.cancellation, 40)
            await self.check("tools list_changed relayed (fm_add_tool)", self.list_changed, 45)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="toolgate's /mcp endpoint (auth off)")
    p.add_argument("--upstream-url", required=True, help="the 2026-07-28 FastMCP server behind fm_")
    p.add_argument("--request-timeout", type=float, default=30.0)
    p.add_argument("--timeout", type=float, default=110.0, help="bound on the whole run, seconds")
    args = p.parse_args()

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await Suite(args).run()

    try:
        anyio.run(bounded)
    except Exception as e:  # noqa: BLE001
        results["failed"] += 1
        print(f"FAIL python client run: {'; '.join(errors_of(e))}", flush=True)
    note(f"python-mcp-{SDK_VERSION}: {results['passed']} passed, {results['failed']} failed")
    return 0 if results["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
