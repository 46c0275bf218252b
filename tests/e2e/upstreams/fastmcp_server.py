#!/usr/bin/env python3
"""An upstream MCP server for tests/e2e/upstreams.sh, written with the official Python SDK's
FastMCP (PyPI mcp 1.30.0, `from mcp.server.fastmcp import FastMCP`), served over Streamable HTTP
(stateful sessions, SSE responses) at http://127.0.0.1:PORT/mcp.

    $HARNESS_DIR/py-mcp1/bin/python tests/e2e/upstreams/fastmcp_server.py --port 18555

Tools:
  greet(name)           "Hello, <name>!" (FastMCP also returns it as structuredContent)
  fail(message)         raises: a result with isError true and the message
  contents()            one block of every content type (text with annotations and _meta, image,
                        audio, embedded text and blob resources, resource link), structuredContent
                        and the result's own _meta
  big(size)             a text of <size> bytes ("x" repeated), for message size limits
  header(name)          the value of an HTTP header of the request that carried this call, or
                        "(none)": what the upstream's client sent
  count(n, delay_ms)    reports progress 1..n of n (ctx.report_progress), then "counted to <n>"
  slow(seconds)         sleeps (the cancellation target); notes whether it finished or was cancelled
  slow_status()         {"started": s, "finished": f, "cancelled": c} counts of slow() calls
  ask_name()            elicits {name} from the client (ctx.elicit), answers "hello <name>"
  add_tool(name, via)   registers a tool <name> (it answers "<name> was added at runtime") and
                        sends notifications/tools/list_changed: via="standalone" (default) on the
                        session's standalone GET stream, as ServerSession.send_tool_list_changed()
                        does, or via="request" on this call's own response stream
  remove_tool(name, via)  the reverse

FastMCP itself announces tools.listChanged = false; this server sends the notification, so it
announces true (NotificationOptions(tools_changed=True)). With --page-size N, tools/list answers N
tools a page with nextCursor (FastMCP itself does not paginate).
"""

import argparse
import base64
import json
from typing import Any

import anyio
from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.lowlevel.server import NotificationOptions
from pydantic import BaseModel, Field

mcp = FastMCP("toolgate-e2e-fastmcp", log_level="WARNING")

# the fate of every slow() call, for the cancellation check
slow_counts = {"started": 0, "finished": 0, "cancelled": 0}


@mcp.tool()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@mcp.tool()
def fail(message: str) -> str:
    """Fail with the given message (a tool error, isError true)."""
    raise ToolError(message)


@mcp.tool()
def contents() -> types.CallToolResult:
    """Return one content block of every kind."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n toolgate e2e").decode()
    wav = base64.b64encode(b"RIFF toolgate e2e WAVE").decode()
    return types.CallToolResult(
        content=[
            types.TextContent(
                type="text",
                text="every kind of content",
                annotations=types.Annotations(audience=["user"], priority=0.5),
                _meta={"e2e/content": "kept"},
            ),
            types.ImageContent(type="image", data=png, mimeType="image/png"),
            types.AudioContent(type="audio", data=wav, mimeType="audio/wav"),
            types.EmbeddedResource(
                type="resource", resource=types.TextResourceContents(uri="e2e://text", mimeType="text/plain", text="embedded text")
            ),
            types.EmbeddedResource(
                type="resource", resource=types.BlobResourceContents(uri="e2e://blob", mimeType="application/octet-stream", blob=wav)
            ),
            types.ResourceLink(
                type="resource_link", uri="e2e://linked", name="linked", description="a resource link", mimeType="text/plain"
            ),
        ],
        structuredContent={"kinds": ["text", "image", "audio", "resource", "resource", "resource_link"]},
        _meta={"e2e/result": "kept"},
    )


@mcp.tool()
def big(size: int) -> str:
    """Return a text of the given size in bytes."""
    return "x" * size


@mcp.tool()
def header(name: str, ctx: Context) -> str:
    """The value of one header of the HTTP request that carried this call."""
    request = ctx.request_context.request
    value = request.headers.get(name) if request is not None else None
    return value if value is not None else "(none)"


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


@mcp.tool()
async def ask_name(ctx: Context) -> str:
    """Ask the client for a name, then greet it."""
    answer = await ctx.elicit("What is your name?", Name)
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


async def _notify_list_changed(ctx: Context, via: str) -> None:
    if via == "request":
        await ctx.session.send_notification(
            types.ServerNotification(types.ToolListChangedNotification()),
            related_request_id=ctx.request_id,
        )
    else:
        await ctx.session.send_tool_list_changed()


@mcp.tool()
async def add_tool(name: str, ctx: Context, via: str = "standalone") -> str:
    """Register a new tool called <name> and tell the client the tool list changed."""

    def added() -> str:
        return f"{name} was added at runtime"

    mcp.add_tool(added, name=name, description=f"Added at runtime by add_tool({name!r})")
    await _notify_list_changed(ctx, via)
    return f"added {name}"


@mcp.tool()
async def remove_tool(name: str, ctx: Context, via: str = "standalone") -> str:
    """Remove a tool and tell the client the tool list changed."""
    mcp.remove_tool(name)
    await _notify_list_changed(ctx, via)
    return f"removed {name}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--page-size", type=int, default=0, help="tools per tools/list page (0: all at once)")
    args = p.parse_args()
    mcp.settings.port = args.port
    lowlevel: Any = mcp._mcp_server
    if args.page_size > 0:

        async def list_tools_paged(request: types.ListToolsRequest) -> types.ListToolsResult:
            tools = await mcp.list_tools()
            cursor = request.params.cursor if request.params else None
            start = int(cursor) if cursor else 0
            end = start + args.page_size
            return types.ListToolsResult(tools=tools[start:end], nextCursor=str(end) if end < len(tools) else None)

        lowlevel.list_tools()(list_tools_paged)
    plain = lowlevel.create_initialization_options
    lowlevel.create_initialization_options = lambda notification_options=None, experimental_capabilities=None: plain(
        notification_options or NotificationOptions(tools_changed=True), experimental_capabilities
    )
    print(json.dumps({"listening": f"http://127.0.0.1:{args.port}/mcp"}), flush=True)
    mcp.run("streamable-http")


if __name__ == "__main__":
    main()
