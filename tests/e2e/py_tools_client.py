#!/usr/bin/env python3
"""End-to-end check of declarative tools with the official MCP Python SDK (PyPI `mcp`, 1.x or 2.x).

The server runs with nothing but a tools directory (tests/e2e/tools.sh sets it up from
deploy/tools/). This client, over Streamable HTTP:

1. lists the tools and finds the examples: get_weather and github_create_issue (http),
   git_log (command), analyze_csv (builtin);
2. calls each and checks the answer came from the upstream / the program;
3. adds a tool to the tools directory (a new file, written atomically) and waits on its GET
   stream for notifications/tools/list_changed, then finds the new tool listed and calls it.

Prints one JSON line; exit status 0 only if every check passed.
"""

import argparse
import json
import os
import sys
import time
from typing import Any

import anyio
from contextlib import AsyncExitStack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_client import CheckFailed, check, dump, errors_of, open_session, text_of, SDK_VERSION  # noqa: E402

NEW_TOOL = """
[[tools]]
name = "added_while_serving"
description = "Repeat the given text; added to the tools file while the server runs. Example: {\\"text\\": \\"hi\\"}."
builtin = { id = "echo" }
"""


async def call(session: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return dump(await session.call_tool(name, args))


async def run(args: argparse.Namespace, out: dict[str, Any]) -> None:
    list_changed_at: list[float] = []

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/tools/list_changed":
            list_changed_at.append(time.monotonic())

    async with AsyncExitStack() as stack:
        session, _init, watcher = await open_session(stack, args, on_message)
        tools = {t["name"]: t for t in dump(await session.list_tools()).get("tools", [])}
        out["tools"] = sorted(tools)
        for name in ["get_weather", "github_create_issue", "git_log", "analyze_csv"]:
            check(name in tools, f"{name} is not listed: {sorted(tools)}")
        check(tools["get_weather"].get("annotations", {}).get("readOnlyHint") is True, "get_weather is not marked read-only")
        out["passed"].append("tools/list")

        r = await call(session, "get_weather", {"latitude": 52.52, "longitude": 13.41})
        check(not r.get("isError"), f"get_weather failed: {r}")
        check("7.5" in text_of(r), f"get_weather text does not show the upstream's temperature: {text_of(r)!r}")
        out["passed"].append("http get_weather")

        r = await call(session, "github_create_issue", {"owner": "acme", "repo": "app", "title": "From the e2e test", "body": "Created by toolgate"})
        check(not r.get("isError"), f"github_create_issue failed: {r}")
        check("issues/" in text_of(r), f"github_create_issue text has no issue link: {text_of(r)!r}")
        check(args.secret not in json.dumps(r), "the upstream token appears in a tool result")
        out["passed"].append("http github_create_issue")

        r = await call(session, "github_create_issue", {"owner": "acme", "repo": "app", "title": ""})
        check(r.get("isError") is True, f"an empty title must fail (schema or upstream 422): {r}")
        out["passed"].append("http error is a tool error")

        r = await call(session, "git_log", {"limit": 2})
        check(not r.get("isError"), f"git_log failed: {r}")
        check(args.commit_subject in text_of(r), f"git_log does not show the commit {args.commit_subject!r}: {text_of(r)!r}")
        r = await call(session, "git_log", {"limit": 2, "path": "$(touch /tmp/toolgate-e2e-pwned)"})
        check(not os.path.exists("/tmp/toolgate-e2e-pwned"), "a shell substitution in an argument ran")
        out["passed"].append("command git_log")

        r = await call(session, "analyze_csv", {"path": "sales.csv"})
        check(not r.get("isError") and "region" in text_of(r), f"analyze_csv failed: {r}")
        out["passed"].append("builtin analyze_csv")

        with anyio.move_on_after(5):
            await watcher.get_answered.wait()
        check(watcher.get_status is not None and watcher.get_status[0] == 200, f"no GET stream: {watcher.get_status}")
        target = os.path.join(args.tools_dir, "zz_added.toml")
        tmp = target + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(NEW_TOOL)
        started = time.monotonic()
        os.rename(tmp, target)
        with anyio.move_on_after(10):
            while not list_changed_at:
                await anyio.sleep(0.02)
        check(bool(list_changed_at), "no notifications/tools/list_changed within 10 s of editing the tools directory")
        out["listChangedAfter"] = round(list_changed_at[0] - started, 3)
        names = {t["name"] for t in dump(await session.list_tools()).get("tools", [])}
        check("added_while_serving" in names, f"the added tool is not listed: {sorted(names)}")
        r = await call(session, "added_while_serving", {"text": "hot"})
        check(text_of(r) == "hot", f"the added tool answered {r}")
        out["passed"].append("hot reload list_changed")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--tools-dir", required=True, help="the directory the server reads (tools.path)")
    p.add_argument("--secret", required=True, help="the upstream token; must never appear in results")
    p.add_argument("--commit-subject", required=True, help="a commit subject git_log must show")
    p.add_argument("--request-timeout", type=float, default=30.0)
    p.add_argument("--timeout", type=float, default=90.0)
    args = p.parse_args()
    args.transport = "streamable-http"
    out: dict[str, Any] = {"client": f"python-mcp-{SDK_VERSION}", "passed": [], "errors": []}

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args, out)

    try:
        anyio.run(bounded)
    except Exception as e:
        out["errors"] = errors_of(e)
    out["ok"] = not out["errors"]
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
