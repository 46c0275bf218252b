#!/usr/bin/env python3
"""The driver of tests/cluster/approvals.sh: the approved catalog's rug pull, end to end, on N
replicas behind nginx, each with its own stdio child of tests/api/upstream_support/stdio_upstream.py
(UPSTREAM_RUG=1) as upstream `fx` (approval = "pin", the default).

  1 every replica serves fx_echo (directly and through nginx); the shared catalog holds one
    approved version of echo, pinned with the first listing, and nothing pending
  2 list_changed listeners through nginx and on every replica directly: a legacy 2025-11-25
    session of the official Python SDK (its GET stream, through the SDK's message handler) and a
    2026-07-28 `subscriptions/listen` stream each
  3 `fx_rug_pull` through every replica's admin API (each replica's own child changes its echo)
  4 every replica holds the change (its GET /admin/upstreams says so); GET /admin/approvals on
    every replica lists the one pending change of echo, its diff naming the description and the
    schema paths; every replica still lists the old echo, byte for byte, directly, through nginx
    and in every SDK session; no listener hears list_changed for --quiet seconds after the hold
  5 an approval through one replica's admin API (--approve-on); every listener hears
    notifications/tools/list_changed within --within seconds (latencies reported); every
    replica lists the new echo, directly and through nginx; nothing pending, the new version
    approved

Prints `PASS <check>` / `FAIL <check>: <why>` lines (tests/e2e/lib.sh's run_client reads them)
and, last, one JSON line of figures.

    MCP_TOKEN=... ADMIN_TOKEN=... $HARNESS_DIR/py-mcp1/bin/python tests/cluster/approvals.py \\
        --lb http://127.0.0.1:L/mcp --replica http://127.0.0.1:P1/mcp --admin http://127.0.0.1:A1 ...
"""

import argparse
import json
import os
import sys
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio

from common import final_message, modern_request, percentile, run_reported
from listeners import SDK_MAJOR, SDK_VERSION, Listener, modern_listener, sdk_listener

if SDK_MAJOR >= 2:
    import httpx2 as httpx
else:
    import httpx

SOURCE = "fx"
TOOL = "fx_echo"
SCHEMA_PATHS_ADDED = ["/properties/secret", "/required/1"]


class Target(Listener):
    """A listener on one target (`nginx` or `replica-N`)."""

    def __init__(self, label: str, kind: str) -> None:
        super().__init__(-1, kind)
        self.label = label

    @property
    def name(self) -> str:
        return f"{self.label}/{self.kind}"


def say(ok: bool, check: str, why: str = "") -> bool:
    print(f"PASS {check}{' — ' + why if why and ok else ''}" if ok else f"FAIL {check}: {why}", flush=True)
    return ok


def shape(tool: dict[str, Any] | None) -> Any:
    """What a client reads of a tool and sends to it: its description and input schema."""
    return None if tool is None else {"description": tool.get("description"), "inputSchema": tool.get("inputSchema")}


async def modern_list(http: Any, url: str, rid: str) -> dict[str, Any] | None:
    """fx_echo as a stateless 2026-07-28 tools/list on `url` lists it (every page), or None."""
    cursor = None
    for page in range(50):
        headers, body = modern_request(f"{rid}-{page}", "tools/list", {"cursor": cursor} if cursor else {})
        headers["X-Request-Id"] = f"{rid}-{page}"
        res = await http.post(url, headers=headers, content=body)
        if res.status_code != 200:
            raise RuntimeError(f"tools/list on {url} answered {res.status_code}: {res.text[:200]}")
        msg = final_message(res.headers.get("content-type", ""), res.text) or {}
        result = msg.get("result") or {}
        for tool in result.get("tools", []):
            if tool.get("name") == TOOL:
                return tool
        cursor = result.get("nextCursor")
        if not cursor:
            return None
    return None


async def sdk_list(session: Any) -> dict[str, Any] | None:
    cursor = None
    for _ in range(50):
        result = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
        for tool in result.tools:
            if tool.name == TOOL:
                return tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        cursor = result.nextCursor
        if not cursor:
            return None
    return None


async def everywhere(args: argparse.Namespace, http: Any, sessions: dict[str, Any], tag: str) -> dict[str, Any]:
    """fx_echo's shape as every replica lists it directly, as nginx does (2 × replicas requests,
    round robin), and in every SDK session: label -> shape."""
    seen: dict[str, Any] = {}
    for i, url in enumerate(args.replica):
        seen[f"replica-{i + 1}"] = shape(await modern_list(http, url, f"{args.rid_prefix}-{tag}-r{i + 1}"))
    for k in range(2 * len(args.replica)):
        seen[f"nginx#{k + 1}"] = shape(await modern_list(http, args.lb, f"{args.rid_prefix}-{tag}-n{k + 1}"))
    for label, session in sessions.items():
        seen[f"{label}/sdk-session"] = shape(await sdk_list(session))
    return seen


def differing(seen: dict[str, Any], want: Any) -> dict[str, Any]:
    return {k: v for k, v in seen.items() if v != want}


async def get_json(admin: Any, url: str) -> Any:
    res = await admin.get(url)
    if res.status_code != 200:
        raise RuntimeError(f"GET {url} answered {res.status_code}: {res.text[:200]}")
    return res.json()


async def run(args: argparse.Namespace, out: dict[str, Any]) -> None:
    n = len(args.replica)
    labels = ["nginx"] + [f"replica-{i + 1}" for i in range(n)]
    urls = [args.lb] + list(args.replica)
    listeners: list[Target] = []
    sessions: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx.AsyncClient(headers={"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"},
                              timeout=httpx.Timeout(15.0, read=600.0))
        )
        admin = await stack.enter_async_context(
            httpx.AsyncClient(headers={"Authorization": f"Bearer {os.environ['ADMIN_TOKEN']}"}, timeout=15.0)
        )

        # ---- 1: the first listing, pinned once, served everywhere
        t0 = time.monotonic()
        old = None
        seen: dict[str, Any] = {}
        while time.monotonic() - t0 < args.settle:
            seen = {labels[1 + i]: shape(await modern_list(http, u, f"{args.rid_prefix}-wait-r{i + 1}")) for i, u in enumerate(args.replica)}
            if all(v is not None for v in seen.values()):
                old = seen["replica-1"]
                break
            await anyio.sleep(0.2)
        out["firstListingS"] = round(time.monotonic() - t0, 2)
        why = f"after {time.monotonic() - t0:.1f} s" if old is not None else f"not within {args.settle} s: {seen}"
        if not say(old is not None, f"every replica serves {TOOL}", why):
            return
        out["old"] = old
        approved = []
        pending_before = []
        for i, a in enumerate(args.admin):
            approved.append([e for e in (await get_json(admin, f"{a}/admin/approvals?state=approved&source={SOURCE}"))["approvals"] if e["name"] == "echo"])
            pending_before.append((await get_json(admin, f"{a}/admin/approvals?source={SOURCE}"))["approvals"])
        ids = {e["id"] for rows in approved for e in rows}
        ok = (all(len(rows) == 1 for rows in approved) and len(ids) == 1
              and all(rows[0]["decided_by"] == "toolgate: first listing pinned" for rows in approved)
              and not any(pending_before))
        say(ok, "the shared catalog: one approved echo, pinned with the first listing, the same on every replica; nothing pending",
            f"approved echo per replica: {[[(e['id'], e['decided_by']) for e in rows] for rows in approved]}; pending: {pending_before}")
        seen = await everywhere(args, http, {}, "pinned")
        say(not differing(seen, old), "every replica lists the same echo, directly and through nginx",
            f"{len(seen)} listings" if not differing(seen, old) else f"differ from replica-1's {old}: {differing(seen, old)}")

        # ---- 2: listeners
        for label, url in zip(labels, urls):  # SDK sessions first: their task groups enclose ours
            legacy = Target(label, "legacy-get")
            listeners.append(legacy)
            sessions[label] = await sdk_listener(stack, url, legacy)
        async with anyio.create_task_group() as tg:
            for label, url in zip(labels, urls):
                modern = Target(label, "modern-listen")
                listeners.append(modern)
                tg.start_soon(modern_listener, http, url, modern)
            await rug_pull(args, out, listeners, sessions, http, admin, old)
            tg.cancel_scope.cancel()


async def rug_pull(args: argparse.Namespace, out: dict[str, Any], listeners: list[Target], sessions: dict[str, Any],
                   http: Any, admin: Any, old: Any) -> None:
    with anyio.move_on_after(10):
        for listener in listeners:
            await listener.ready.wait()
    broken = {l.name: l.error or "not ready within 10 s" for l in listeners if l.error or not l.ready.is_set()}
    if not say(not broken, f"{len(listeners)} list_changed listeners open (legacy GET stream and subscriptions/listen; nginx and each replica)", str(broken)):
        return
    await anyio.sleep(0.5)  # anything the set-up itself caused arrives first
    early = {l.name: len(l.arrivals) for l in listeners if l.arrivals}
    out["heardBeforeThePull"] = early

    # ---- 3: the rug pull on every replica's own child
    t_pull = time.monotonic()
    answers = []
    for i, a in enumerate(args.admin):
        res = await admin.post(f"{a}/admin/tools/fx_rug_pull/call", json={"arguments": {}})
        body = res.json() if res.headers.get("content-type", "").startswith(("application/json", "application/problem+json")) else res.text
        text = body.get("result", {}).get("content", [{}])[0].get("text") if isinstance(body, dict) else None
        answers.append((res.status_code, text))
    say(all(a == (200, "pulled") for a in answers), "fx_rug_pull through every replica's admin API (each replica's own stdio child)",
        f"answers (status, text): {answers}")

    # ---- 4: held on every replica, one pending change, the old echo everywhere, no list_changed
    held: dict[str, Any] = {}
    deadline = t_pull + args.within
    while time.monotonic() < deadline:
        for i, a in enumerate(args.admin):
            ups = (await get_json(admin, f"{a}/admin/upstreams"))["upstreams"]
            fx = next((u for u in ups if u.get("name") == SOURCE), {})
            held[f"replica-{i + 1}"] = fx.get("held", [])
        if all(any(h.get("name") == "echo" and h.get("kind") == "tool" and h.get("change") == "changed" for h in v) for v in held.values()):
            break
        await anyio.sleep(0.1)
    t_held = time.monotonic()
    all_held = all(any(h.get("name") == "echo" and h.get("change") == "changed" for h in v) for v in held.values()) and len(held) == len(args.admin)
    out["heldAfterMs"] = round((t_held - t_pull) * 1000)
    say(all_held, "every replica holds the change its own child made (GET /admin/upstreams: fx held echo, changed)",
        f"after {out['heldAfterMs']} ms: {held}")

    pending = []
    for a in args.admin:
        pending.append((await get_json(admin, f"{a}/admin/approvals?source={SOURCE}"))["approvals"])
    why = []
    first = pending[0][0] if pending and len(pending[0]) == 1 else None
    if not all(len(p) == 1 for p in pending):
        why.append(f"pending per replica: {[len(p) for p in pending]} (want 1 each)")
    elif len({p[0]["id"] for p in pending}) != 1:
        why.append(f"different ids: {[p[0]['id'] for p in pending]}")
    desc_diff = schema_diff = None
    if first:
        if (first.get("name"), first.get("kind"), first.get("change"), first.get("state")) != ("echo", "tool", "changed", "pending"):
            why.append(f"not a pending change of tool echo: {first.get('name')} {first.get('kind')} {first.get('change')} {first.get('state')}")
        diff = first.get("diff") or []
        desc_diff = next((d for d in diff if d.get("field") == "description"), None)
        schema_diff = next((d for d in diff if d.get("field") == "inputSchema"), None)
        if not desc_diff or "id_rsa" not in str(desc_diff.get("after")) or desc_diff.get("before") != old["description"]:
            why.append(f"description diff: {desc_diff}")
        if not schema_diff or (schema_diff.get("paths") or {}).get("added") != SCHEMA_PATHS_ADDED:
            why.append(f"inputSchema diff (want paths.added {SCHEMA_PATHS_ADDED}): {schema_diff}")
    say(not why, f"GET /admin/approvals?source={SOURCE} on every replica: exactly one pending change, echo, its diff naming the description and the schema paths",
        "; ".join(why) if why else f"id {first['id']}; description → {str(desc_diff.get('after'))[:60]}…; schema paths {schema_diff.get('paths')}")
    out["pending"] = first

    seen = await everywhere(args, http, sessions, "held")
    bad = differing(seen, old)
    say(not bad, "the old echo (description and schema) keeps serving on every replica, directly, through nginx and in every SDK session",
        f"{len(seen)} listings" if not bad else f"differ from the approved {old}: {bad}")

    quiet_until = t_held + args.quiet
    await anyio.sleep(max(0.0, quiet_until - time.monotonic()))
    heard = {l.name: round((l.first_after(t_pull) - t_pull) * 1000) for l in listeners if l.first_after(t_pull) is not None}
    say(not heard, f"no listener heard list_changed from the pull until {args.quiet} s after every replica held it",
        f"heard (ms after the pull): {heard}")
    dead = {l.name: l.error for l in listeners if l.error}
    if dead:
        say(False, "listeners still open before the approval", str(dead))
        return

    # ---- 5: the approval through one replica
    if not first:
        say(False, "approval", "nothing pending to approve")
        return
    target = args.approve_on - 1
    t_app = time.monotonic()
    if args.skip_approve:
        say(False, f"POST /admin/approvals/{{id}}/approve on replica-{args.approve_on}", "skipped (--skip-approve: the later checks must fail)")
    else:
        res = await admin.post(f"{args.admin[target]}/admin/approvals/{first['id']}/approve")
        state = res.json().get("state") if res.status_code == 200 else None
        out["approveCallMs"] = round((time.monotonic() - t_app) * 1000, 1)
        say(res.status_code == 200 and state == "approved", f"POST /admin/approvals/{{id}}/approve on replica-{args.approve_on}",
            f"{res.status_code} {state} in {out['approveCallMs']} ms" if res.status_code == 200 else f"{res.status_code}: {res.text[:300]}")
    deadline = t_app + args.within
    while time.monotonic() < deadline and any(l.first_after(t_app) is None for l in listeners):
        await anyio.sleep(0.005)
    lat = {l.name: round((l.first_after(t_app) - t_app) * 1000, 1) for l in listeners if l.first_after(t_app) is not None}
    missed = [l.name for l in listeners if l.first_after(t_app) is None]
    values = list(lat.values())
    out["listChangedMs"] = lat
    out["listChangedSummaryMs"] = {"n": len(values), "p50": percentile(values, 50), "max": max(values, default=None)}
    say(not missed, f"every listener (nginx and each replica, both kinds) hears notifications/tools/list_changed within {args.within} s of the approval",
        f"missed: {missed}; heard: {lat}" if missed else
        f"latency ms p50 {out['listChangedSummaryMs']['p50']}, max {out['listChangedSummaryMs']['max']}: {lat}")

    new = shape(first.get("entry")) if first.get("entry") else None
    bad: dict[str, Any] = {}
    t_new = time.monotonic()
    while True:
        seen = await everywhere(args, http, sessions, f"new{int((time.monotonic() - t_new) * 10)}")
        bad = differing(seen, new)
        if not bad or time.monotonic() - t_new > args.within:
            break
        await anyio.sleep(0.2)
    say(new is not None and not bad, "every replica lists the new echo (description and schema as approved), directly, through nginx and in every SDK session",
        f"{len(seen)} listings" if not bad else f"differ from the approved {new}: {bad}")

    after_pending = [(await get_json(admin, f"{a}/admin/approvals?source={SOURCE}"))["approvals"] for a in args.admin]
    now_approved = [[e for e in (await get_json(admin, f"{a}/admin/approvals?state=approved&source={SOURCE}"))["approvals"] if e["name"] == "echo"] for a in args.admin]
    ok = not any(after_pending) and all(len(r) == 1 and r[0]["id"] == first["id"] for r in now_approved)
    say(ok, "nothing pending afterwards on any replica; the approved echo is the change",
        f"pending: {[len(p) for p in after_pending]}; approved echo: {[[(e['id'], e['decided_by']) for e in r] for r in now_approved]}")
    dead = {l.name: l.error for l in listeners if l.error}
    say(not dead, "every listener stream stayed open throughout", str(dead))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lb", required=True, help="nginx's /mcp URL")
    p.add_argument("--replica", action="append", required=True, help="a replica's own /mcp URL (repeat)")
    p.add_argument("--admin", action="append", required=True, help="a replica's admin base URL (repeat, same order)")
    p.add_argument("--approve-on", type=int, default=2, metavar="N", help="the replica whose admin API approves (1-based)")
    p.add_argument("--settle", type=float, default=30.0, metavar="SECONDS", help="for the first listing on every replica")
    p.add_argument("--quiet", type=float, default=2.0, metavar="SECONDS", help="no list_changed this long after the hold")
    p.add_argument("--within", type=float, default=10.0, metavar="SECONDS", help="for each step after a change")
    p.add_argument("--skip-approve", action="store_true", help="self-test: approve nothing (the later checks must fail)")
    p.add_argument("--rid-prefix", default="approvals")
    p.add_argument("--timeout", type=float, default=120.0)
    args = p.parse_args()
    if len(args.replica) != len(args.admin) or not 1 <= args.approve_on <= len(args.admin):
        p.error("one --admin per --replica; --approve-on within them")
    out: dict[str, Any] = {"client": f"python-mcp-{SDK_VERSION}", "errors": []}
    rc = run_reported(run, args, out)
    for e in out["errors"]:
        print(f"FAIL the driver ran to its end: {e}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
