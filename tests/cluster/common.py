"""Helpers the tests/cluster Python programs share: modern (2026-07-28) requests without an SDK,
a minimal SSE reader, percentiles. Imported from the script's own directory."""

import json
import math
from typing import Any, AsyncIterator

MODERN = "2026-07-28"


def modern_request(rid: Any, method: str, params: dict[str, Any] | None = None,
                   meta: dict[str, Any] | None = None) -> tuple[dict[str, str], bytes]:
    """Headers and body of a stateless 2026-07-28 request (the `_meta` and headers the spec asks
    for, plus `meta`, e.g. a progressToken)."""
    params = dict(params or {})
    params["_meta"] = {
        **(meta or {}),
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-cluster", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
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
