#!/usr/bin/env python3
"""A 2026-07-28 upstream MCP server for tests/e2e/upstreams_modern.sh, written with the official
Python SDK's MCPServer (PyPI mcp 2.3.0, `from mcp.server.mcpserver import MCPServer`: FastMCP's
successor), served over Streamable HTTP at http://127.0.0.1:PORT/mcp.

    $HARNESS_DIR/py-mcp2/bin/python tests/e2e/upstreams/fastmcp_modern_server.py --port 18600

The SDK routes a request by its MCP-Protocol-Version header: 2026-07-28 requests (server/discover,
then each request self-contained with the version and the client's capabilities in its _meta,
no initialize, no session) go to its single-exchange entry; 2025-era ones (initialize, a
session) to the stateful transport. Both work, so a client of either era can call it directly.

Tools:
  greet(name)           "Hello, <name>!" (also returned as structuredContent)
  count(n, delay_ms)    reports progress 1..n of n (ctx.report_progress: notifications/progress on
                        the request's own event stream), then "counted to <n>"
  slow(seconds)         sleeps (the cancellation target); notes whether it finished or was
                        cancelled (a 2026-07-28 client cancels by closing the request's stream)
  slow_status()         {"started": s, "finished": f, "cancelled": c} counts of slow() calls
  ask_name()            elicits {name} from the client, answers "hello <name>". Written the way
                        mcp 2.3.0 elicits in either era: a parameter filled by a resolver
                        (Annotated[..., Resolve(fn)]) that returns Elicit(message, Model). For a
                        2026-07-28 request the SDK answers the call with an input_required
                        result (inputRequests {<key>: elicitation/create}, a sealed
                        requestState) and finishes it when the client calls again with
                        inputResponses and that requestState; for a 2025-era request it sends
                        elicitation/create on the call's stream instead. (ctx.elicit() is the
                        2025-era path only: a 2026-07-28 request has no back channel.)
  add_tool(name)        registers a tool <name> (it answers "<name> was added at runtime") and
                        announces the change: ctx.notify_tools_changed() publishes ToolsListChanged
                        on the server's subscription bus, which every open subscriptions/listen
                        stream (2026-07-28) carries as notifications/tools/list_changed; a
                        2025-era caller's session is also sent it (send_tool_list_changed)
  remove_tool(name)     the reverse
  request_info()        what the request carrying this call said about its client:
                        {"protocolVersion", "clientName", "elicitation" (declared or not),
                        "mcpMethod", "mcpName", "mcpProtocolVersion" (its headers)}

MCPServer serves subscriptions/listen (its ListenHandler on an in-process bus), so in 2026-07-28
server/discover announces tools.listChanged = true.
"""

import argparse
import json
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, Field

mcp = MCPServer("toolgate-e2e-fastmcp-modern", version="2.3.0-e2e", log_level="WARNING")

# the fate of every slow() call, for the cancellation check
slow_counts = {"started": 0, "finished": 0, "cancelled": 0}


@mcp.tool()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@mcp.tool()
async def count(n: int, ctx: Context, delay_ms: int = 50) -> str:
    """Count from 1 to n, reporting progress at each step."""
    for i in range(1, n + 1):
        await anyio.sleep(delay_ms / 1000)
        await ctx.report_progress(i, n, f"step {i} of {n}")
    return f"counted to {n}"


@mcp.tool()
async def slow(seconds: float = 300) -> str:
    """Sleep for a long time (cancel me)."""
    slow_counts["started"] += 1
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        slow_counts["cancelled"] += 1
        raise
    slow_counts["finished"] += 1
    return f"slept {seconds} s"


@mcp.tool()
def slow_status() -> dict[str, int]:
    """How many slow() calls started, finished and were cancelled."""
    return dict(slow_counts)


class Name(BaseModel):
    name: str = Field(description="Your name")


def what_is_your_name() -> Elicit[Name]:
    """The resolver of ask_name's `answer`: always asks."""
    return Elicit("What is your name?", Name)


@mcp.tool()
async def ask_name(answer: Annotated[ElicitationResult[Name], Resolve(what_is_your_name)]) -> str:
    """Ask the client for a name, then greet it."""
    if isinstance(answer, AcceptedElicitation):
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


async def _announce(ctx: Context) -> None:
    await ctx.notify_tools_changed()  # subscriptions/listen streams (2026-07-28)
    version = ctx.protocol_version
    if version is not None and not is_version_at_least(version, "2026-07-28"):
        await ctx.session.send_tool_list_changed()  # the caller's own 2025-era session


@mcp.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a new tool called <name> and tell listening clients the tool list changed."""

    def added() -> str:
        return f"{name} was added at runtime"

    mcp.add_tool(added, name=name, description=f"Added at runtime by add_tool({name!r})")
    await _announce(ctx)
    return f"added {name}"


@mcp.tool()
async def remove_tool(name: str, ctx: Context) -> str:
    """Remove a tool and tell listening clients the tool list changed."""
    mcp.remove_tool(name)
    await _announce(ctx)
    return f"removed {name}"


@mcp.tool()
def request_info(ctx: Context) -> dict[str, Any]:
    """What the request that carried this call said about its client (version, info, headers)."""
    session = ctx.session
    params = session.client_params
    capabilities = session.client_capabilities
    headers = ctx.headers or {}
    return {
        "protocolVersion": ctx.protocol_version,
        "clientName": params.client_info.name if params is not None else None,
        "elicitation": capabilities is not None and capabilities.elicitation is not None,
        "mcpMethod": headers.get("mcp-method"),
        "mcpName": headers.get("mcp-name"),
        "mcpProtocolVersion": headers.get("mcp-protocol-version"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    print(json.dumps({"listening": f"http://127.0.0.1:{args.port}/mcp"}), flush=True)
    mcp.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
