#!/usr/bin/env python3
"""Upstream MCP servers through toolgate, checked with the official MCP Python SDK (PyPI mcp 1.x).

tests/e2e/upstreams.sh starts the upstreams and a toolgate that serves them (stdio
server-everything as ev_, Streamable HTTP server-everything as evh_, the FastMCP server
tests/e2e/upstreams/fastmcp_server.py as py_ and, with other settings, as pyl_ and blocked_, the
rmcp peer as rs_), then runs this client. It compares what toolgate serves with what the same SDK
gets from the upstreams directly:

  tools/list       every upstream's tools, prefixed, with the upstream's schemas (the FastMCP
                   server lists them in pages); allow_tools and deny_tools applied; the stdio
                   child sees only its configured environment
  tools/call       tools of each upstream give the same result through toolgate as directly
                   (content of every kind, structuredContent, isError, the result's _meta)
  progress         the upstream's notifications/progress reach the client's progress callback
                   (py_count, ev_trigger-long-running-operation); two concurrent calls each hear
                   only their own; no progress is sent for a call without a progressToken
  cancellation     notifications/cancelled for py_slow reaches the upstream (its slow() is
                   cancelled) and toolgate keeps serving. The 1.x SDK does not send
                   notifications/cancelled itself when a call's cancel scope is cancelled, so this
                   client sends it (ClientSession.send_notification), then cancels the scope.
                   pyl_slow (timeout_ms = 2000) fails after about 2 s and is cancelled upstream.
  elicitation      py_ask_name and ev_trigger-elicitation-request: the upstream's
                   elicitation/create reaches this client's elicitation callback and its answer
                   goes back; two clients elicited at once each answer their own call; for a
                   client without the capability py_ask_name ends with an error
  limits, headers  pyl_big: an answer over max_message_bytes is refused, the upstream keeps
                   working; pyl_ gets the header configured from toolgate's environment, no
                   upstream gets the caller's Authorization; `blocked` (loopback without
                   allow_private) is refused by the SSRF policy
  legacy SSE       a client of toolgate's /sse endpoint lists and calls upstream tools, with progress
  list_changed     py_add_tool / py_remove_tool change the FastMCP server's tool list (its
                   notification sent on its GET stream, then on the call's own stream); toolgate's
                   notifications/tools/list_changed must reach this client and tools/list must
                   show the change
  upstream death   kill -9 of the evh_ server: a call in flight to it ends with an error, its tools
                   leave tools/list within 15 s (with list_changed) while the others stay;
                   restarted on the same port, they return within 30 s. kill -9 of toolgate's
                   stdio child: toolgate restarts it and the ev_ tools work again within 30 s.
  admin            GET /admin/upstreams names every upstream with its state: all "connected"
                   (but `blocked`, with its last_error), then the dead one not (and no tools)

Prints `PASS <check>` or `FAIL <check>: <why>` per check on stdout (details on stderr); exit
status 0 only if every check passed. It needs the setup of tests/e2e/upstreams.sh (which passes
every argument); to run it against a setup of one's own, see --help:

    MCP_TOKEN=... ADMIN_TOKEN=... $HARNESS_DIR/py-mcp1/bin/python tests/e2e/upstreams_py.py --url ...
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from datetime import timedelta
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
from mcp import ClientSession, types
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_client import SDK_MAJOR, SDK_VERSION, CheckFailed, GetWatcher, check, dump, errors_of, list_all_tools, text_of

if SDK_MAJOR != 1:
    sys.exit(f"upstreams_py.py needs the mcp 1.x SDK (py-mcp1), not {SDK_VERSION}")

PREFIXES = {"ev": "ev_", "evh": "evh_", "py": "py_", "rs": "rs_"}
# server-everything registers these whatever the client's capabilities (its registerTools)
EVERYTHING_TOOLS = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
}
EVH_DENIED = "get-env"  # deny_tools of the evh upstream
RS_ALLOWED = {"calculate_sum"}  # allow_tools of the rs upstream
ELICITED_NAME = "Ada Lovelace"

results = {"passed": 0, "failed": 0}


def note(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def essence(result: Any) -> dict[str, Any]:
    """What a faithful proxy must keep of a CallToolResult."""
    d = dump(result)
    return {"content": d.get("content", []), "structuredContent": d.get("structuredContent"), "isError": bool(d.get("isError"))}


class Elicitor:
    """An elicitation callback that accepts with a name, and remembers what it was asked."""

    def __init__(self, name: str = ELICITED_NAME) -> None:
        self.name = name
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(dump(params))
        return types.ElicitResult(action="accept", content={"name": self.name})


class ListChanges:
    """A message handler that counts notifications/tools/list_changed (and notifications/progress,
    which it sees too, whether or not a progress callback took them)."""

    def __init__(self) -> None:
        self.count = 0
        self.progress = 0
        self.progress_seen: list[dict[str, Any]] = []  # the params of each notifications/progress

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", None)
        if isinstance(root, types.ToolListChangedNotification):
            self.count += 1
        elif isinstance(root, types.ProgressNotification):
            self.progress += 1
            self.progress_seen.append(dump(root.params))

    async def after(self, count: int, within: float) -> bool:
        with anyio.move_on_after(within):
            while self.count <= count:
                await anyio.sleep(0.02)
        return self.count > count


async def refuse_sampling(context: Any, params: Any) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message="this e2e client does no sampling")


async def no_roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


# A direct session declares every client capability server-everything looks at (sampling, roots,
# elicitation), so it sees every tool toolgate might be offered.
ALL_CAPABILITIES = {"sampling_callback": refuse_sampling, "list_roots_callback": no_roots}


async def http_session(
    stack: AsyncExitStack,
    url: str,
    args: argparse.Namespace,
    token: str | None = None,
    on_message: Any = None,
    elicitation: Any = None,
    **extra: Any,
) -> tuple[ClientSession, GetWatcher]:
    watcher = GetWatcher()
    headers = {"Authorization": f"Bearer {token}"} if token else None
    client = await stack.enter_async_context(
        httpx.AsyncClient(transport=watcher, headers=headers, timeout=httpx.Timeout(30.0, read=300.0), follow_redirects=True)
    )
    streams = await stack.enter_async_context(streamable_http_client(url, http_client=client))
    session = await stack.enter_async_context(
        ClientSession(
            streams[0],
            streams[1],
            read_timeout_seconds=timedelta(seconds=args.request_timeout),
            message_handler=on_message,
            elicitation_callback=elicitation,
            client_info=types.Implementation(name="toolgate-e2e-upstreams-py", version=SDK_VERSION),
            **extra,
        )
    )
    await session.initialize()
    return session, watcher


async def stdio_session(stack: AsyncExitStack, args: argparse.Namespace, elicitation: Any = None) -> ClientSession:
    """server-everything over stdio, started by the SDK itself: the direct counterpart of ev_."""
    params = StdioServerParameters(command=args.node, args=[args.everything, "stdio"])
    read, write = await stack.enter_async_context(stdio_client(params, errlog=stack.enter_context(open(os.devnull, "w"))))
    session = await stack.enter_async_context(
        ClientSession(
            read, write, read_timeout_seconds=timedelta(seconds=args.request_timeout), elicitation_callback=elicitation, **ALL_CAPABILITIES
        )
    )
    await session.initialize()
    return session


async def names_of(session: ClientSession) -> set[str]:
    tools, _ = await list_all_tools(session)
    return {t["name"] for t in tools}


async def eventually(what: Callable[[], Awaitable[bool]], within: float, every: float = 0.25) -> float | None:
    """Polls until `what()` is true; the seconds it took, or None."""
    started = time.monotonic()
    while True:
        if await what():
            return round(time.monotonic() - started, 2)
        if time.monotonic() - started > within:
            return None
        await anyio.sleep(every)


def child_pids(parent: int) -> set[int]:
    pids: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{parent}/task"):
            with open(f"/proc/{parent}/task/{task}/children") as f:
                pids.update(int(p) for p in f.read().split())
    except OSError:
        pass
    return pids


def stdio_children(toolgate_pid: int, everything: str) -> set[int]:
    """toolgate's children running server-everything over stdio."""
    found = set()
    for pid in child_pids(toolgate_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if everything.encode() in argv and b"stdio" in argv:
            found.add(pid)
    return found


def find_entry(doc: Any, name: str) -> Any:
    """The part of an admin answer about one upstream: an object with a string value `name`, or
    the value under the key `name`."""
    if isinstance(doc, dict):
        if name in doc and isinstance(doc[name], (dict, str)):
            return doc[name]
        if any(v == name for v in doc.values() if isinstance(v, str)):
            return doc
        for v in doc.values():
            if (found := find_entry(v, name)) is not None:
                return found
    elif isinstance(doc, list):
        for v in doc:
            if (found := find_entry(v, name)) is not None:
                return found
    return None


class Suite:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.token = os.environ.get("MCP_TOKEN")
        self.changes = ListChanges()
        self.elicitor = Elicitor()
        self.tg: ClientSession
        self.watcher: GetWatcher
        self.direct: dict[str, ClientSession] = {}
        self.listed: dict[str, dict[str, Any]] = {}  # toolgate's tools by name
        self.evh_killed = False

    async def check(self, name: str, body: Callable[[], Awaitable[Any]], timeout: float = 60.0) -> bool:
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

    async def call(self, session: ClientSession, tool: str, arguments: dict[str, Any], **kw: Any) -> types.CallToolResult:
        return await session.call_tool(tool, arguments, **kw)

    async def same_as_direct(self, upstream: str, tool: str, arguments: dict[str, Any]) -> str:
        via_result = await self.call(self.tg, PREFIXES[upstream] + tool, arguments)
        direct_result = await self.call(self.direct[upstream], tool, arguments)
        via, direct = essence(via_result), essence(direct_result)
        note(f"{upstream} {tool}: through toolgate {json.dumps(via)[:400]}")
        check(via == direct, f"through toolgate {json.dumps(via)[:600]} but directly {json.dumps(direct)[:600]}")
        # the upstream's own _meta of the result is kept (toolgate may add to it)
        via_meta, up_meta = dump(via_result).get("_meta") or {}, dump(direct_result).get("_meta") or {}
        lost = {k: v for k, v in up_meta.items() if via_meta.get(k) != v}
        check(not lost, f"the result's _meta {json.dumps(up_meta)} became {json.dumps(via_meta)} through toolgate")
        return f"isError={via['isError']}, {len(via['content'])} content item(s)" + (
            ", structuredContent" if via["structuredContent"] else ""
        )

    # ---- the checks ---------------------------------------------------------------------------

    async def all_listed(self) -> str:
        """toolgate connects at start-up; allow it a moment for the slowest upstream."""

        def complete(names: set[str]) -> bool:
            return all(any(n.startswith(p) for n in names) for p in PREFIXES.values())

        names: set[str] = set()

        async def poll() -> bool:
            nonlocal names
            names = await names_of(self.tg)
            return complete(names)

        took = await eventually(poll, 30)
        missing = [p for p in PREFIXES.values() if not any(n.startswith(p) for n in names)]
        check(took is not None, f"no tools with prefix(es) {missing} within 30 s; tools/list: {sorted(names)}")
        tools, pages = await list_all_tools(self.tg)
        self.listed = {t["name"]: t for t in tools}
        all_names = [t["name"] for t in tools]
        check(len(set(all_names)) == len(all_names), f"duplicate tool names: {sorted({n for n in all_names if all_names.count(n) > 1})}")
        return f"{len(tools)} tools in {pages} page(s), all four upstreams after {took} s"

    async def listed_like_upstream(self, upstream: str) -> str:
        """Every tool the upstream lists to this same SDK is served with the prefix and the same
        schemas (allow/deny applied), and nothing else has the prefix."""
        prefix = PREFIXES[upstream]
        direct, _ = await list_all_tools(self.direct[upstream])
        direct_by_name = {t["name"]: t for t in direct}
        served = {n[len(prefix) :]: t for n, t in self.listed.items() if n.startswith(prefix)}
        if upstream in ("ev", "evh"):
            # server-everything adds tools according to the client's capabilities (sampling,
            # roots, elicitation), which toolgate declares as it sees fit: the always-present
            # ones must be there, the others only if the direct session got them too
            want = EVERYTHING_TOOLS - ({EVH_DENIED} if upstream == "evh" else set())
            check(want <= set(served), f"missing {sorted(want - set(served))}; served: {sorted(served)}")
            extra = set(served) - set(direct_by_name)
            check(not extra, f"{prefix}tools the upstream does not have: {sorted(extra)}")
        else:
            want = set(direct_by_name) & RS_ALLOWED if upstream == "rs" else set(direct_by_name)
            check(set(served) == want, f"served {sorted(served)}, upstream lists {sorted(direct_by_name)} (expected {sorted(want)})")
        for name, tool in served.items():
            up = direct_by_name[name]
            for field in ("inputSchema", "outputSchema", "description", "title"):
                check(
                    tool.get(field) == up.get(field),
                    f"{prefix}{name} {field} {json.dumps(tool.get(field))} differs from the upstream's {json.dumps(up.get(field))}",
                )
            # hints: no annotations and empty ones say the same (toolgate always sends the object)
            check(
                (tool.get("annotations") or {}) == (up.get("annotations") or {}),
                f"{prefix}{name} annotations {json.dumps(tool.get('annotations'))} differ from the upstream's {json.dumps(up.get('annotations'))}",
            )
        return f"{len(served)} {prefix}tools"

    async def allow_deny(self) -> str:
        check("ev_get-env" in self.listed, "ev_get-env is not listed (it is not denied for ev)")
        check("evh_get-env" not in self.listed, "evh_get-env is listed although deny_tools has get-env")
        rs = sorted(n for n in self.listed if n.startswith("rs_"))
        check(rs == ["rs_calculate_sum"], f"rs_ tools {rs}, but allow_tools is [calculate_sum]")
        return "evh deny_tools and rs allow_tools applied"

    async def stdio_env(self) -> str:
        r = await self.call(self.tg, "ev_get-env", {})
        check(not r.isError, f"ev_get-env failed: {dump(r)}")
        env = json.loads(text_of(dump(r)))
        check(env.get("TOOLGATE_E2E_MARK") == "set-by-config", f"the child lacks env TOOLGATE_E2E_MARK from the config: {sorted(env)}")
        check("PATH" in env and "HOME" in env, f"PATH/HOME (env_passthrough) missing in the child: {sorted(env)}")
        leaked = sorted(k for k in env if k.startswith("TOOLGATE"))
        check(leaked == ["TOOLGATE_E2E_MARK"], f"toolgate's own environment leaked into the child: {leaked}")
        return f"child env: {sorted(env)}"

    async def progress_py(self) -> str:
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None = None) -> None:
            seen.append((progress, total, message))

        r = await self.call(self.tg, "py_count", {"n": 4, "delay_ms": 50}, progress_callback=on_progress)
        check(not r.isError and text_of(dump(r)) == "counted to 4", f"py_count returned {dump(r)}")
        want = [(float(i), 4.0, f"step {i} of 4") for i in range(1, 5)]
        check(seen == want, f"progress callback saw {seen}, the upstream sent {want}")
        return f"{len(seen)} notifications"

    async def progress_ev(self) -> str:
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None = None) -> None:
            seen.append(progress)

        r = await self.call(self.tg, "ev_trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=on_progress)
        check(not r.isError and "completed" in text_of(dump(r)), f"ev_trigger-long-running-operation returned {dump(r)}")
        check(seen == [1.0, 2.0, 3.0], f"progress callback saw {seen}, wanted [1, 2, 3]")
        return f"{len(seen)} notifications"

    async def progress_concurrent(self) -> str:
        """Two calls at once, each with its own progress callback: each hears only its own."""
        seen: dict[int, list[tuple[float, float | None]]] = {3: [], 5: []}
        results: dict[int, Any] = {}

        async def one(n: int) -> None:
            async def on_progress(progress: float, total: float | None, message: str | None = None) -> None:
                seen[n].append((progress, total))

            results[n] = await self.call(self.tg, "py_count", {"n": n, "delay_ms": 40}, progress_callback=on_progress)

        async with anyio.create_task_group() as group:
            for n in seen:
                group.start_soon(one, n)
        for n, got in seen.items():
            check(text_of(dump(results[n])) == f"counted to {n}", f"py_count({n}) returned {dump(results[n])}")
            want = [(float(i), float(n)) for i in range(1, n + 1)]
            check(got == want, f"the callback of py_count({n}) saw {got}, wanted {want}")
        return "each callback heard only its own call"

    async def progress_string_token(self) -> str:
        """A progressToken the client chose (a string, not the request id the SDK uses) comes back
        as it was sent."""
        token = f"e2e-token-{os.getpid()}"
        r = await self.call(self.tg, "py_count", {"n": 2, "delay_ms": 20}, meta={"progressToken": token})
        check(not r.isError and text_of(dump(r)) == "counted to 2", f"py_count returned {dump(r)}")
        await anyio.sleep(0.3)
        mine = [p.get("progress") for p in self.changes.progress_seen if p.get("progressToken") == token]
        check(
            mine == [1.0, 2.0], f"notifications/progress with progressToken {token!r}: {mine}; all seen: {self.changes.progress_seen[-4:]}"
        )
        return f"progressToken {token!r} kept"

    async def no_progress_unasked(self) -> str:
        before = self.changes.progress
        r = await self.call(self.tg, "py_count", {"n": 3, "delay_ms": 20})
        check(not r.isError and text_of(dump(r)) == "counted to 3", f"py_count returned {dump(r)}")
        await anyio.sleep(0.5)
        check(
            self.changes.progress == before, f"{self.changes.progress - before} notifications/progress for a call without a progressToken"
        )
        return ""

    async def elicitation_unsupported(self) -> str:
        """A client that did not declare elicitation: the upstream's request is not its to answer;
        the call must end (a tool error or an error answer), not hang."""
        async with AsyncExitStack() as stack:
            session, _ = await http_session(stack, self.args.url, self.args, self.token)
            try:
                with anyio.fail_after(20):
                    r = await self.call(session, "py_ask_name", {})
            except TimeoutError:
                raise CheckFailed("py_ask_name did not end within 20 s for a client without elicitation") from None
            except Exception as e:  # noqa: BLE001 - an error answer is fine
                return f"error answer: {e}"[:200]
            check(bool(r.isError), f"py_ask_name succeeded without an elicitation-capable client: {dump(r)}")
            return f"tool error: {text_of(dump(r))}"[:200]

    async def upstream_headers(self) -> str:
        """pyl_ sends the header its config names, from toolgate's environment; nothing sends the
        caller's own Authorization (its toolgate token) upstream."""

        async def header(tool: str, name: str) -> str:
            r = await self.call(self.tg, tool, {"name": name})
            check(not r.isError, f"{tool}({name}) failed: {dump(r)}")
            return text_of(dump(r))

        got = await header("pyl_header", "x-e2e-key")
        check(got == f"Key {self.args.upstream_key}", f"pyl_ upstream got X-E2E-Key {got!r}, wanted 'Key <E2E_UPSTREAM_KEY>'")
        got = await header("py_header", "x-e2e-key")
        check(got == "(none)", f"py_ upstream (no headers configured) got X-E2E-Key {got!r}")
        for tool in ("py_header", "pyl_header"):
            got = await header(tool, "authorization")
            check(got == "(none)" and (self.token or "-") not in got, f"{tool}: the upstream got an Authorization header {got[:40]!r}…")
        return "X-E2E-Key sent to pyl_ only; no Authorization upstream"

    async def max_message_bytes(self) -> str:
        """pyl_ has max_message_bytes = 65536: a bigger answer is refused with an error, and the
        upstream still works afterwards."""
        r = await self.call(self.tg, "pyl_big", {"size": 1000})
        check(not r.isError and text_of(dump(r)) == "x" * 1000, f"pyl_big(1000) returned {dump(r)}"[:300])
        outcome = ""
        try:
            with anyio.fail_after(15):
                r = await self.call(self.tg, "pyl_big", {"size": 200_000})
            check(bool(r.isError), f"pyl_big(200000) succeeded despite max_message_bytes = 65536 ({len(text_of(dump(r)))} bytes)")
            outcome = f"tool error {text_of(dump(r))!r}"
        except TimeoutError:
            raise CheckFailed("pyl_big(200000) did not end within 15 s") from None
        except CheckFailed:
            raise
        except Exception as e:  # noqa: BLE001 - an error answer is fine too
            outcome = f"error {e}"
        state: dict[str, Any] = {}

        async def works_again() -> bool:
            try:
                r = await self.call(self.tg, "pyl_big", {"size": 1000})
            except Exception as e:  # noqa: BLE001 - not yet
                state["last"] = repr(e)
                return False
            state["last"] = dump(r)
            return not r.isError and text_of(dump(r)) == "x" * 1000

        check(
            await eventually(works_again, 15, 0.5) is not None,
            f"pyl_ does not work again within 15 s after the refused answer: {state.get('last')}"[:400],
        )
        return outcome[:200]

    async def private_refused(self) -> str:
        """`blocked` points at the FastMCP server on loopback without allow_private: the SSRF
        policy must keep toolgate from connecting, and the admin API must say so."""
        blocked = sorted(n for n in await names_of(self.tg) if n.startswith("blocked_"))
        check(not blocked, f"tools of an upstream on loopback without allow_private are served: {blocked}")
        entry = find_entry(await self.admin(), "blocked")
        check(isinstance(entry, dict), "no admin entry for the upstream `blocked`")
        check(entry.get("state") != "connected", f"`blocked` shows as connected: {json.dumps(entry)}")
        check(bool(entry.get("last_error")), f"`blocked` shows no last_error: {json.dumps(entry)}")
        return f"{entry.get('state')}: {entry.get('last_error')}"[:200]

    async def legacy_sse(self) -> str:
        """A client of the legacy HTTP+SSE transport (toolgate's /sse) gets the same upstream tools."""
        url = self.args.url.rsplit("/", 1)[0] + "/sse"
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None = None) -> None:
            seen.append(progress)

        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(sse_client(url, headers=headers, timeout=30, sse_read_timeout=300))
            session = await stack.enter_async_context(
                ClientSession(read, write, read_timeout_seconds=timedelta(seconds=self.args.request_timeout))
            )
            await session.initialize()
            names = await names_of(session)
            for prefix in PREFIXES.values():
                check(any(n.startswith(prefix) for n in names), f"no {prefix} tools over SSE")
            r = await self.call(session, "py_greet", {"name": "SSE"})
            check(text_of(dump(r)) == "Hello, SSE!", f"py_greet over SSE returned {dump(r)}")
            r = await self.call(session, "py_count", {"n": 3, "delay_ms": 20}, progress_callback=on_progress)
            check(text_of(dump(r)) == "counted to 3" and seen == [1.0, 2.0, 3.0], f"py_count over SSE: {dump(r)}, progress {seen}")
        return f"{len(names)} tools, progress {seen}"

    async def upstream_timeout(self) -> str:
        """pyl_ is the FastMCP server again with timeout_ms = 2000: a longer call fails after about
        2 s and is cancelled upstream."""
        before = await self.slow_status()
        started = time.monotonic()
        try:
            r = await self.call(self.tg, "pyl_slow", {"seconds": 30})
            outcome = f"tool error {text_of(dump(r))!r}" if r.isError else None
            check(bool(r.isError), f"pyl_slow answered {dump(r)} despite timeout_ms = 2000")
        except CheckFailed:
            raise
        except Exception as e:  # noqa: BLE001 - an error answer is fine too
            outcome = f"error {e}"
        took = round(time.monotonic() - started, 2)
        check(1.5 <= took <= 10, f"pyl_slow ended after {took} s, wanted about 2 s (timeout_ms)")

        async def cancelled_upstream() -> bool:
            return (await self.slow_status())["cancelled"] > before["cancelled"]

        check(await eventually(cancelled_upstream, 10) is not None, "the upstream's slow() was not cancelled after the timeout")
        return f"{outcome} after {took} s"[:200]

    async def slow_status(self) -> dict[str, int]:
        r = await self.call(self.tg, "py_slow_status", {})
        check(not r.isError and isinstance(r.structuredContent, dict), f"py_slow_status returned {dump(r)}")
        return dict(r.structuredContent)  # type: ignore[arg-type]

    async def cancellation(self) -> str:
        before = await self.slow_status()
        outcome: dict[str, Any] = {}
        scope = anyio.CancelScope()

        async def run_slow() -> None:
            with scope:
                try:
                    outcome["result"] = await self.call(self.tg, "py_slow", {"seconds": 120})
                except Exception as e:  # noqa: BLE001
                    outcome["error"] = repr(e)

        request_id = self.tg._request_id  # the id the next request (py_slow) gets
        async with anyio.create_task_group() as group:
            group.start_soon(run_slow)
            await anyio.sleep(0.3)  # py_slow has its id and is on its way

            async def started() -> bool:
                return (await self.slow_status())["started"] > before["started"]

            check(await eventually(started, 10) is not None, "py_slow did not start upstream within 10 s")
            await self.tg.send_notification(
                types.ClientNotification(
                    types.CancelledNotification(
                        params=types.CancelledNotificationParams(requestId=request_id, reason="e2e: the client gave up")
                    )
                )
            )
            scope.cancel()

        async def cancelled_upstream() -> bool:
            return (await self.slow_status())["cancelled"] > before["cancelled"]

        took = await eventually(cancelled_upstream, 10)
        now = await self.slow_status()
        check(took is not None, f"the upstream's slow() was not cancelled within 10 s of notifications/cancelled: {before} -> {now}")
        check("result" not in outcome, f"py_slow answered although cancelled: {outcome}")
        r = await self.call(self.tg, "py_greet", {"name": "after cancel"})
        check(text_of(dump(r)) == "Hello, after cancel!", f"toolgate does not serve after the cancellation: {dump(r)}")
        return f"upstream cancelled after {took} s, status {now}"

    async def elicitation_py(self) -> str:
        asked = len(self.elicitor.asked)
        r = await self.call(self.tg, "py_ask_name", {})
        check(not r.isError and text_of(dump(r)) == f"hello {ELICITED_NAME}", f"py_ask_name returned {dump(r)}")
        check(len(self.elicitor.asked) == asked + 1, f"the elicitation callback ran {len(self.elicitor.asked) - asked} time(s), wanted 1")
        params = self.elicitor.asked[-1]
        check(params.get("message") == "What is your name?", f"elicitation message {params.get('message')!r}")
        props = params.get("requestedSchema", {}).get("properties", {})
        check("name" in props, f"requestedSchema lost its properties: {params.get('requestedSchema')}")
        return "hello " + ELICITED_NAME

    async def elicitation_two_clients(self) -> str:
        """Two clients elicited at once: each upstream request reaches the client whose call caused
        it."""
        other = Elicitor("Grace Hopper")
        results: dict[str, Any] = {}
        async with AsyncExitStack() as stack:
            session, _ = await http_session(stack, self.args.url, self.args, self.token, elicitation=other)

            async def ask(who: str, s: ClientSession) -> None:
                results[who] = text_of(dump(await self.call(s, "py_ask_name", {})))

            async with anyio.create_task_group() as group:
                group.start_soon(ask, ELICITED_NAME, self.tg)
                group.start_soon(ask, other.name, session)
        check(results == {n: f"hello {n}" for n in results}, f"answers crossed or failed: {results}")
        check(len(other.asked) == 1, f"the second client was asked {len(other.asked)} time(s), wanted 1")
        return ", ".join(results.values())

    async def elicitation_ev(self) -> str:
        check(
            "ev_trigger-elicitation-request" in self.listed,
            "ev_trigger-elicitation-request is not listed: server-everything offers it only to clients that declare "
            "the elicitation capability, so toolgate does not declare it to the upstream",
        )
        asked = len(self.elicitor.asked)
        detail = await self.same_as_direct("ev", "trigger-elicitation-request", {})
        check(len(self.elicitor.asked) == asked + 2, "the elicitation callback did not run once through toolgate and once directly")
        check(
            self.elicitor.asked[-2] == self.elicitor.asked[-1],
            f"the elicitation request differs through toolgate {self.elicitor.asked[-2]} and directly {self.elicitor.asked[-1]}",
        )
        return detail

    async def wait_get_stream(self) -> None:
        with anyio.move_on_after(5):
            await self.watcher.get_answered.wait()
        status = self.watcher.get_status
        check(status is not None and status[0] == 200, f"no GET stream for notifications: {status}")

    async def list_changed(self, via: str) -> str:
        await self.wait_get_stream()
        tool = f"added_{via}_{os.getpid()}"
        served = "py_" + tool
        count = self.changes.count
        r = await self.call(self.tg, "py_add_tool", {"name": tool, "via": via})
        check(not r.isError, f"py_add_tool returned {dump(r)}")
        started = time.monotonic()
        heard = await self.changes.after(count, 10)
        check(heard, f"no notifications/tools/list_changed within 10 s of the upstream's (sent on its {via} stream)")
        heard_after = round(time.monotonic() - started, 2)
        names = await names_of(self.tg)
        check(served in names, f"{served} not in tools/list after list_changed: {sorted(n for n in names if n.startswith('py_'))}")
        r = await self.call(self.tg, served, {})
        check(text_of(dump(r)) == f"{tool} was added at runtime", f"{served} returned {dump(r)}")

        count = self.changes.count
        r = await self.call(self.tg, "py_remove_tool", {"name": tool, "via": via})
        check(not r.isError, f"py_remove_tool returned {dump(r)}")
        check(await self.changes.after(count, 10), "no notifications/tools/list_changed within 10 s of the removal")

        async def gone() -> bool:
            return served not in await names_of(self.tg)

        check(await eventually(gone, 5) is not None, f"{served} still listed after its removal")
        return f"list_changed after {heard_after} s"

    async def admin(self) -> Any:
        headers = {"Authorization": f"Bearer {os.environ['ADMIN_TOKEN']}"} if os.environ.get("ADMIN_TOKEN") else {}
        async with httpx.AsyncClient(timeout=10) as client:
            r = await client.get(f"{self.args.admin_url}/admin/upstreams", headers=headers)
        check(r.status_code == 200, f"GET /admin/upstreams answered {r.status_code}: {r.text[:300]}")
        return r.json()

    async def admin_lists_all(self) -> str:
        doc = await self.admin()
        note("GET /admin/upstreams:", json.dumps(doc))
        entries = {n: find_entry(doc, n) for n in self.args.upstream_names}
        missing = [n for n, e in entries.items() if e is None]
        check(not missing, f"no entry for {missing} in {json.dumps(doc)[:600]}")
        states = {n: e.get("state") if isinstance(e, dict) else e for n, e in entries.items()}
        check(all(s == "connected" for s in states.values()), f"not every upstream is connected: {states}")
        return f"states {states}"

    async def evh_dies(self) -> str:
        with open(self.args.evh_pid_file) as f:
            pid = int(f.read().strip())
        count = self.changes.count
        in_flight: dict[str, Any] = {}
        ended = anyio.Event()

        async def long_call() -> None:
            try:
                r = await self.call(self.tg, "evh_trigger-long-running-operation", {"duration": 40, "steps": 40})
                in_flight["result"] = dump(r)
            except Exception as e:  # noqa: BLE001 - an error answer is what we want
                in_flight["error"] = "; ".join(errors_of(e))
            in_flight["at"] = time.monotonic()
            ended.set()

        async with anyio.create_task_group() as group:
            group.start_soon(long_call)
            await anyio.sleep(1)  # the call is running upstream
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            self.evh_killed = True
            with anyio.move_on_after(15):
                await ended.wait()
            if not ended.is_set():
                group.cancel_scope.cancel()
        check(ended.is_set(), "a call in flight to the killed upstream did not end within 15 s")
        check("error" in in_flight or in_flight["result"].get("isError"), f"the call in flight ended without an error: {in_flight}")
        note(f"call in flight when evh died ended after {in_flight['at'] - killed_at:.2f} s: {in_flight}")

        async def withdrawn() -> bool:
            return not any(n.startswith("evh_") for n in await names_of(self.tg))

        took = await eventually(withdrawn, 15, 0.5)
        check(took is not None, "evh_ tools still listed 15 s after their server was killed")
        check(await self.changes.after(count, 2), "tools withdrawn, but no notifications/tools/list_changed")
        names = await names_of(self.tg)
        for prefix in ("ev_", "py_", "rs_"):
            check(any(n.startswith(prefix) for n in names), f"the {prefix} tools went too")
        r = await self.call(self.tg, "py_greet", {"name": "meanwhile"})
        check(text_of(dump(r)) == "Hello, meanwhile!", f"py_greet while evh is down: {dump(r)}")
        try:
            with anyio.fail_after(10):
                r = await self.call(self.tg, "evh_echo", {"message": "anyone?"})
            check(bool(r.isError), f"evh_echo answered while its server is dead: {dump(r)}")
        except TimeoutError:
            raise CheckFailed("a call to a withdrawn evh_ tool did not end within 10 s") from None
        except CheckFailed:
            raise
        except Exception:  # noqa: BLE001, S110 - an error answer is right
            pass
        return f"withdrawn after {took} s, clients told; the call in flight ended after {in_flight['at'] - killed_at:.2f} s"

    async def admin_shows_down(self) -> str:
        doc = await self.admin()
        note("GET /admin/upstreams (evh down):", json.dumps(doc))
        down = find_entry(doc, "everything-http")
        check(isinstance(down, dict), f"no everything-http entry: {json.dumps(doc)[:600]}")
        check(down.get("state") != "connected", f"the dead upstream shows as connected: {json.dumps(down)}")
        check(down.get("tools", 0) == 0, f"the dead upstream shows tools: {json.dumps(down)}")
        return json.dumps(down)[:300]

    async def evh_returns(self) -> str:
        count = self.changes.count
        with open(self.args.evh_log, "ab") as log:
            proc = subprocess.Popen(
                json.loads(self.args.evh_argv),
                env={**os.environ, "PORT": str(self.args.evh_port)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        with open(self.args.evh_pid_file, "w") as f:  # upstreams.sh stops it at the end
            f.write(str(proc.pid))

        async def back() -> bool:
            return "evh_get-sum" in await names_of(self.tg)

        took = await eventually(back, 30, 0.5)
        check(took is not None, "evh_ tools not back within 30 s of restarting their server on the same port")
        check(self.changes.count > count, "evh_ tools back, but no notifications/tools/list_changed")
        r = essence(await self.call(self.tg, "evh_get-sum", {"a": 20, "b": 22}))
        check(r["content"] == [{"type": "text", "text": "The sum of 20 and 22 is 42."}] and not r["isError"], f"evh_get-sum returned {r}")
        return f"back after {took} s"

    async def stdio_restarts(self) -> str:
        children = stdio_children(self.args.toolgate_pid, self.args.everything)
        check(
            len(children) == 1, f"toolgate (pid {self.args.toolgate_pid}) has {len(children)} server-everything stdio children: {children}"
        )
        old = children.pop()
        count = self.changes.count
        os.kill(old, signal.SIGKILL)
        state: dict[str, Any] = {}

        async def restarted() -> bool:
            state["children"] = stdio_children(self.args.toolgate_pid, self.args.everything)
            if not state["children"] or old in state["children"]:
                return False
            try:
                r = await self.call(self.tg, "ev_echo", {"message": "again"})
            except Exception as e:  # noqa: BLE001 - not back yet
                state["last"] = repr(e)
                return False
            state["last"] = dump(r)
            return not r.isError and text_of(dump(r)) == "Echo: again"

        took = await eventually(restarted, 30, 0.5)
        check(
            took is not None,
            f"no working ev_ within 30 s of killing the stdio child {old}: children {state.get('children')}, last ev_echo {state.get('last')}",
        )
        check(self.changes.count > count, "the stdio upstream died and came back, but no notifications/tools/list_changed")
        return f"child {old} -> {sorted(state['children'])} after {took} s"

    async def still_serving(self) -> str:
        for upstream, tool, arguments in [
            ("ev", "get-sum", {"a": 1, "b": 2}),
            ("evh", "echo", {"message": "end"}),
            ("py", "greet", {"name": "end"}),
            ("rs", "calculate_sum", {"a": 1, "b": 2}),
        ]:
            r = await self.call(self.tg, PREFIXES[upstream] + tool, arguments)
            check(not r.isError, f"{PREFIXES[upstream]}{tool} failed at the end: {dump(r)}")
        return "ev_, evh_, py_, rs_ answer"

    async def run(self) -> None:
        a = self.args
        # Sessions are opened outside the checks' time limits (they hold task groups, which must
        # not outlive a cancel scope they were opened in; --request-timeout bounds initialize).
        # A failure to open one ends the run.
        async with AsyncExitStack() as stack, AsyncExitStack() as direct:
            try:
                self.tg, self.watcher = await http_session(stack, a.url, a, self.token, self.changes, self.elicitor)
            except Exception as e:
                raise CheckFailed(f"initialize through toolgate at {a.url}: {'; '.join(errors_of(e))}") from e
            for name, url in [("evh", a.evh_url), ("py", a.py_url), ("rs", a.rs_url)]:
                extra = ALL_CAPABILITIES if name == "evh" else {}
                self.direct[name] = (await http_session(direct, url, a, elicitation=self.elicitor, **extra))[0]
            self.direct["ev"] = await stdio_session(direct, a, elicitation=self.elicitor)

            if not await self.check("tools/list serves all four upstreams", self.all_listed, 45):
                return
            for upstream in ("ev", "evh", "py", "rs"):
                await self.check(f"{PREFIXES[upstream]} tools as the upstream lists them", lambda u=upstream: self.listed_like_upstream(u))
            await self.check("allow_tools / deny_tools", self.allow_deny)
            await self.check("stdio upstream environment (env, env_passthrough only)", self.stdio_env)

            same = [
                ("ev", "get-structured-content", {"location": "Chicago"}),
                ("ev", "get-tiny-image", {}),
                ("ev", "get-annotated-message", {"messageType": "error", "includeImage": True}),
                ("ev", "get-resource-links", {"count": 3}),
                ("evh", "get-sum", {"a": 2, "b": 3}),
                ("evh", "echo", {"message": "through toolgate"}),
                ("py", "greet", {"name": "Grace"}),
                ("py", "fail", {"message": "on purpose"}),
                ("py", "contents", {}),
                ("rs", "calculate_sum", {"a": 2, "b": 3.5}),
            ]
            for upstream, tool, arguments in same:
                await self.check(
                    f"{PREFIXES[upstream]}{tool} same as calling the upstream directly",
                    lambda u=upstream, t=tool, x=arguments: self.same_as_direct(u, t, x),
                )

            await self.check("progress relayed (py_count)", self.progress_py)
            await self.check("progress relayed (ev_trigger-long-running-operation)", self.progress_ev)
            await self.check("progress of two concurrent calls kept apart (py_count)", self.progress_concurrent)
            await self.check("progress with the client's own (string) progressToken", self.progress_string_token)
            await self.check("no progress relayed without a progressToken", self.no_progress_unasked)
            await self.check("cancellation relayed (py_slow)", self.cancellation, 45)
            await self.check("elicitation round trip (py_ask_name)", self.elicitation_py)
            await self.check("elicitation round trip (ev_trigger-elicitation-request)", self.elicitation_ev)
            await self.check("elicitation of two clients at once, each answers its own", self.elicitation_two_clients, 40)
            await self.check("elicitation to a client without the capability ends", self.elicitation_unsupported, 40)
            await self.check("timeout_ms ends a call and cancels it upstream (pyl_slow)", self.upstream_timeout, 40)
            await self.check("headers: the configured one sent, the caller's token not", self.upstream_headers)
            await self.check("max_message_bytes refuses a bigger answer, the upstream keeps working", self.max_message_bytes, 45)
            await self.check("legacy SSE client (/sse) gets the upstream tools", self.legacy_sse, 40)
            await self.check("list_changed from the upstream's GET stream (py_add_tool)", lambda: self.list_changed("standalone"), 40)
            await self.check("list_changed from the upstream's call stream (py_add_tool)", lambda: self.list_changed("request"), 40)
            await direct.aclose()  # the direct sessions are done; the evh one is about to die
            self.direct.clear()
            await self.check("GET /admin/upstreams", self.admin_lists_all, 15)
            await self.check("loopback upstream without allow_private refused (SSRF policy)", self.private_refused, 15)
            if await self.check("evh_ tools withdrawn when their server dies (and the call in flight ends)", self.evh_dies, 45):
                await self.check("GET /admin/upstreams shows the dead upstream", self.admin_shows_down, 15)
            if self.evh_killed:  # brought back even when the checks of its death failed
                await self.check("evh_ tools return when their server is back", self.evh_returns, 45)
            await self.check("stdio upstream restarted after its process died", self.stdio_restarts, 45)
            await self.check("every upstream still served at the end", self.still_serving, 30)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="toolgate's /mcp endpoint (token in $MCP_TOKEN)")
    p.add_argument("--admin-url", required=True, help="toolgate's admin listener, http://HOST:PORT (token in $ADMIN_TOKEN)")
    p.add_argument("--evh-url", required=True, help="the Streamable HTTP server-everything behind evh_")
    p.add_argument("--py-url", required=True, help="the FastMCP server behind py_")
    p.add_argument("--rs-url", required=True, help="the rmcp peer behind rs_")
    p.add_argument("--node", required=True, help="node, to start server-everything over stdio directly")
    p.add_argument("--everything", required=True, help="server-everything's dist/index.js")
    p.add_argument("--evh-pid-file", required=True, help="holds the evh server's pid; rewritten when it is restarted")
    p.add_argument("--evh-argv", required=True, help="JSON argv that (re)starts the evh server, with PORT in the environment")
    p.add_argument("--evh-port", type=int, required=True)
    p.add_argument("--evh-log", required=True, help="where the restarted evh server writes")
    p.add_argument("--toolgate-pid", type=int, required=True, help="toolgate's pid, to find its stdio child")
    p.add_argument(
        "--upstream-names",
        nargs="+",
        default=["everything", "everything-http", "py", "py-limits", "rs"],
        help="the upstreams that must be connected (not `blocked`)",
    )
    p.add_argument("--upstream-key", required=True, help="the value of E2E_UPSTREAM_KEY in toolgate's environment")
    p.add_argument("--request-timeout", type=float, default=30.0)
    p.add_argument("--timeout", type=float, default=280.0, help="bound on the whole run, seconds")
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
