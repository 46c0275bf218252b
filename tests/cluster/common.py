"""Helpers the tests/cluster Python programs share: modern (2026-07-28) requests without an SDK,
a minimal SSE reader, percentiles, and the bounded run that prints a program's one-line JSON
report. Imported from the script's own directory."""

import json
import math
from typing import Any, AsyncIterator

MODERN = "2026-07-28"


# The param a request's Mcp-Name header repeats (SEP-2243; a task id, so a balancer could route
# tasks/* without reading the body).
NAME_PARAM = {"tools/call": "name", "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


def modern_request(rid: Any, method: str, params: dict[str, Any] | None = None,
                   meta: dict[str, Any] | None = None,
                   caps: dict[str, Any] | None = None) -> tuple[dict[str, str], bytes]:
    """Headers and body of a stateless 2026-07-28 request (the `_meta` and headers the spec asks
    for, plus `meta`, e.g. a progressToken; `caps`: the client capabilities this request
    declares, e.g. the tasks extension)."""
    params = dict(params or {})
    params["_meta"] = {
        **(meta or {}),
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-cluster", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps or {},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if method in NAME_PARAM:
        headers["Mcp-Name"] = params[NAME_PARAM[method]]
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, separators=(",", ":"))
    return headers, body.encode()


async def sse_messages(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """JSON messages of an SSE body (data lines joined per event; comments and empty data skipped)."""
    data: list[str] = []
    async for line in lines:
        if line == "":
            if data and "".join(data).strip():
                yield json.loads("\n".join(data))
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data and "".join(data).strip():
        yield json.loads("\n".join(data))


def final_message(content_type: str, text: str) -> dict[str, Any] | None:
    """The JSON-RPC response of a reply that is either one JSON body or an SSE stream."""
    if content_type.startswith("application/json"):
        return json.loads(text)
    data: list[str] = []
    found = None
    for line in text.split("\n") + [""]:
        line = line.rstrip("\r")
        if line == "":
            if data:
                msg = json.loads("\n".join(data))
                if "id" in msg and ("result" in msg or "error" in msg):
                    found = msg
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    return found


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100)."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))]


def errors_of(e: BaseException) -> list[str]:
    """Every failure inside an exception (the SDKs raise ExceptionGroups from task groups)."""
    if isinstance(e, BaseExceptionGroup):
        return [m for sub in e.exceptions for m in errors_of(sub)]
    return [f"{type(e).__name__}: {e}"]


def run_reported(run: Any, args: Any, out: dict[str, Any], ok: Any = None) -> int:
    """Runs `run(args, out)` within `args.timeout` seconds, records what went wrong in
    `out["errors"]`, prints `out` as one JSON line and returns the exit status: 0 when `ok(out)`
    (default: no errors)."""
    import anyio  # the SDK venvs have it; load.py and quota.py never call this

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args, out)

    try:
        anyio.run(bounded)
    except Exception as e:  # noqa: BLE001 - reported, and the check fails
        out["errors"].extend(errors_of(e))
    out["ok"] = ok(out) if ok else not out["errors"]
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0 if out["ok"] else 1
