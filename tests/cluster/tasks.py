#!/usr/bin/env python3
"""Check (f) of tests/cluster/topology.sh: tasks across replicas, in the 2026-07-28 era.

Every request is stateless, declares the tasks extension in its `_meta` (so `slow_compute`
runs as a task) and carries Mcp-Method / Mcp-Name (the task id for tasks/*); so each may go to
any replica. One subcommand per step, each printing one JSON line (exit status 0 only if the
step held); --poll NAME=URL names where tasks/get is asked (replicas directly, and nginx).

  spread   a task created on --create (slow_compute, --seconds) is visible at once through
           every --poll, and every one reaches `completed` with the same inlined result
  cancel   a slow task created on --create is cancelled through --cancel: the ack comes back,
           every --poll says `cancelled`, and the tool really stopped on the creating replica.
           The replicas run with tools.max_concurrent_calls = 1 and max_queued_calls = 0, so
           the task holds the creating replica's only call slot: a `greet` there is refused
           as busy before the cancel (the control) and answered after it (the tool's run ended)
  lost     a slow task created on --create, whose process (--victim-pid) is then killed with
           SIGKILL: a surviving --poll reports it `failed`, with a message saying its server
           stopped, within the lease (--lease-secs, renewed every third of it) + --margin-secs
  restart  after every replica restarted: the tasks the steps above left (--state) are still
           answered through --url (nginx), --requests times, and through each --poll once:
           the same result, the same statuses
  update   (tasks/update through another replica) `confirm_delete` created on --create asks for
           input (`input_required`, inputRequests); tasks/update with an accepting answer for
           every key through --update resumes the task on the creating replica to `completed`

    MCP_TOKEN=... python tests/cluster/tasks.py spread --create replica-1=http://127.0.0.1:P1/mcp \\
        --poll replica-2=http://127.0.0.1:P2/mcp --poll nginx=http://127.0.0.1:LB/mcp --state /tmp/f.json
"""

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import time
from typing import Any

import httpx

from common import final_message, modern_request

TASKS_CAPS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
# The update step's client also answers elicitations, so it declares them (a tool that asks
# without the capability declared fails with -32021).
ELICITING_CAPS = {**TASKS_CAPS, "elicitation": {}}
TERMINAL = {"completed", "failed", "cancelled"}


def named(spec: str) -> tuple[str, str]:
    name, _, url = spec.partition("=")
    if not url:
        raise SystemExit(f"expected NAME=URL, got {spec!r}")
    return name, url


class Mcp:
    """Stateless 2026-07-28 requests that declare the tasks extension (`caps`); every request
    gets an X-Request-Id `<prefix>-<n>` (so nginx's log tells where those through it went)."""

    def __init__(self, http: httpx.AsyncClient, prefix: str, caps: dict[str, Any]) -> None:
        self.http = http
        self.prefix = prefix
        self.caps = caps
        self.n = 0

    async def rpc(self, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """{"http": status, "result"|"error": ...}, or {"http": None, "exc": ...} when no answer."""
        self.n += 1
        headers, body = modern_request(self.n, method, params, caps=self.caps)
        headers["X-Request-Id"] = f"{self.prefix}-{self.n}"
        t0 = time.monotonic()
        try:
            res = await self.http.post(url, headers=headers, content=body)
        except httpx.HTTPError as e:
            return {"http": None, "exc": type(e).__name__, "ms": round((time.monotonic() - t0) * 1000, 1)}
        out: dict[str, Any] = {"http": res.status_code, "ms": round((time.monotonic() - t0) * 1000, 1)}
        try:
            msg = final_message(res.headers.get("content-type", ""), res.text)
        except ValueError:
            msg = None
        if msg is None:
            out["body"] = res.text[:300]
        elif "error" in msg:
            out["error"] = msg["error"]
        else:
            out["result"] = msg.get("result")
        return out

    async def call(self, url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.rpc(url, "tools/call", {"name": tool, "arguments": arguments})

    async def get(self, url: str, task_id: str) -> dict[str, Any]:
        return await self.rpc(url, "tasks/get", {"taskId": task_id})


def text_of(result: Any) -> str:
    if not isinstance(result, dict):
        return ""
    return "".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))


def short(answer: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in answer.items() if k != "ms"}, separators=(",", ":"))[:300]


def status_of(answer: dict[str, Any]) -> str | None:
    r = answer.get("result")
    return r.get("status") if isinstance(r, dict) else None


def same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


async def create(mcp: Mcp, url: str, tool: str, arguments: dict[str, Any], out: dict[str, Any]) -> str | None:
    """Calls `tool` as a task on `url`; the task id, or None (the reason in out["errors"])."""
    answer = await mcp.call(url, tool, arguments)
    r = answer.get("result")
    if not (isinstance(r, dict) and r.get("resultType") == "task" and r.get("taskId")):
        out["errors"].append(f"tools/call {tool} on {url} did not create a task: {short(answer)}")
        return None
    out["taskId"] = r["taskId"]
    out["createdStatus"] = r.get("status")
    out["createMs"] = answer["ms"]
    return r["taskId"]


async def visible_everywhere(mcp: Mcp, polls: list[tuple[str, str]], task_id: str, out: dict[str, Any],
                             want: set[str]) -> None:
    """One tasks/get through each poll right away: the task must be there, in a status of `want`."""
    answers = await asyncio.gather(*(mcp.get(url, task_id) for _, url in polls))
    seen = {name: status_of(a) or short(a) for (name, _), a in zip(polls, answers)}
    out["atOnce"] = seen
    wrong = {n: s for n, s in seen.items() if s not in want}
    if wrong:
        out["errors"].append(f"right after the creation, tasks/get answered {wrong} (expected {sorted(want)} everywhere)")


async def until_terminal(mcp: Mcp, polls: list[tuple[str, str]], task_id: str, since: float, timeout: float,
                         interval: float = 0.2, want: set[str] = TERMINAL) -> dict[str, dict[str, Any]]:
    """Polls tasks/get through every poll until it reports a status in `want` (or `timeout`
    seconds pass): per poll, the last answer's task, the seconds since `since` it took, the
    statuses seen (in order) and how many requests got no answer (retried)."""
    end = time.monotonic() + timeout

    async def one(url: str) -> dict[str, Any]:
        statuses: list[str] = []
        unanswered = 0
        last: dict[str, Any] = {}
        while True:
            a = await mcp.get(url, task_id)
            s = status_of(a)
            if s is None:
                unanswered += 1
                last = {"answer": short(a)}
            else:
                last = a["result"]
                if not statuses or statuses[-1] != s:
                    statuses.append(s)
                if s in want:
                    return {"task": last, "afterS": round(time.time() - since, 3), "statuses": statuses, "unanswered": unanswered}
            if time.monotonic() >= end:
                return {"task": last, "afterS": None, "statuses": statuses, "unanswered": unanswered}
            await asyncio.sleep(interval)

    answers = await asyncio.gather(*(one(url) for _, url in polls))
    return {name: a for (name, _), a in zip(polls, answers)}


# ---- spread: one task, polled everywhere ----------------------------------------------------------
async def spread(args: argparse.Namespace, mcp: Mcp, out: dict[str, Any]) -> None:
    creator, url = named(args.create)
    polls = [named(p) for p in args.poll]
    label = f"{args.rid_prefix}-spread"
    out.update(createdOn=creator, polledThrough=[n for n, _ in polls], seconds=args.seconds)
    t0 = time.time()
    task_id = await create(mcp, url, "slow_compute", {"seconds": args.seconds, "label": label}, out)
    if not task_id:
        return
    await visible_everywhere(mcp, polls, task_id, out, {"working"})
    ended = await until_terminal(mcp, polls, task_id, t0, args.seconds + 15)
    out["completedAfterS"] = {n: e["afterS"] for n, e in ended.items()}
    out["unanswered"] = sum(e["unanswered"] for e in ended.values())
    results = {n: e["task"].get("result") for n, e in ended.items()}
    for n, e in ended.items():
        if e["task"].get("status") != "completed":
            out["errors"].append(f"{n}: the task ended {e['task'].get('status')} ({json.dumps(e['task'])[:300]}), statuses seen {e['statuses']}")
    first = next(iter(results.values()), None)
    out["identical"] = all(same(r, first) for r in results.values())
    out["resultText"] = text_of(first)
    if not out["identical"]:
        out["errors"].append(f"the inlined results differ between replicas: {results}")
    if not re.fullmatch(rf"Computed {re.escape(label)} after {args.seconds:g}(\.0)? seconds", out["resultText"]):
        out["errors"].append(f"unexpected result text {out['resultText']!r}")
    done = [t for t in out["completedAfterS"].values() if t is not None]
    if done:
        out["completionSpreadS"] = round(max(done) - min(done), 3)
    if args.state and not out["errors"]:
        save_state(args.state, "completed", {"taskId": task_id, "result": first})


# ---- cancel: created on A, cancelled through B, stopped on A ----------------------------------------
async def metric(admin: str, name: str, labels: str = "") -> float | None:
    """A counter's value from a replica's /metrics: the series `name{labels}` (`labels` as
    exported, e.g. `tool="x",outcome="ok"`), or the unlabelled `name`; 0 when absent (a counter
    is exported from its first increment). None: no answer."""
    try:
        async with httpx.AsyncClient(timeout=3.0) as http:
            text = (await http.get(f"{admin}/metrics")).text
    except httpx.HTTPError:
        return None
    series = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        key, _, value = line.rpartition(" ")
        if key == series:
            return float(value)
    return 0.0


async def slot_probe(mcp: Mcp, url: str) -> tuple[str, str]:
    """What a `greet` on `url` meets: ("busy", text) when every call slot is taken, ("free", text)
    when it ran, else ("other", what came back)."""
    a = await mcp.call(url, "greet", {"name": "slot"})
    t = text_of(a.get("result"))
    if t.startswith("Hello"):
        return "free", t
    if "busy" in t:
        return "busy", t
    return "other", short(a)


async def cancel(args: argparse.Namespace, mcp: Mcp, out: dict[str, Any]) -> None:
    a_name, a_url = named(args.create)
    b_name, b_url = named(args.cancel)
    polls = [named(p) for p in args.poll]
    out.update(createdOn=a_name, cancelledThrough=b_name)
    task_id = await create(mcp, a_url, "slow_compute", {"seconds": args.seconds, "label": f"{args.rid_prefix}-cancel"}, out)
    if not task_id:
        return
    await visible_everywhere(mcp, polls, task_id, out, {"working"})
    # The control: the task holds A's only call slot.
    out["slotBefore"], why = await slot_probe(mcp, a_url)
    if out["slotBefore"] != "busy":
        out["errors"].append(f"before the cancel a greet on {a_name} was not refused as busy ({why}): the slot check proves nothing "
                             "(run the replicas with tools.max_concurrent_calls = 1, max_queued_calls = 0)")
    received = "toolgate_cluster_events_received_total"
    sent = "toolgate_cluster_events_sent_total"
    cancelled_metric = ("toolgate_tool_calls_total", 'tool="slow_compute",outcome="cancelled"')
    before = {"aReceived": await metric(args.admin_a, received), "bSent": await metric(args.admin_b, sent),
              "aCancelledCalls": await metric(args.admin_a, *cancelled_metric)}
    t0 = time.time()
    ack = await mcp.rpc(b_url, "tasks/cancel", {"taskId": task_id})
    out["ackMs"] = ack["ms"]
    if "result" not in ack:
        out["errors"].append(f"tasks/cancel through {b_name} was not acknowledged: {short(ack)}")
    out["ack"] = ack.get("result")
    ended = await until_terminal(mcp, polls, task_id, t0, 5.0)
    out["cancelledAfterS"] = {n: e["afterS"] for n, e in ended.items()}
    for n, e in ended.items():
        if e["task"].get("status") != "cancelled":
            out["errors"].append(f"{n}: tasks/get says {e['task'].get('status')} after the cancel, statuses seen {e['statuses']}")
    out["statusMessage"] = next(iter(ended.values()), {}).get("task", {}).get("statusMessage")
    # The tool stopped on A: A's slot is free again (its run returned and dropped the permit).
    freed = None
    tries = 0
    last = ""
    while time.time() - t0 < args.stop_timeout:
        tries += 1
        state, last = await slot_probe(mcp, a_url)
        if state == "free":
            freed = round(time.time() - t0, 3)
            break
        await asyncio.sleep(0.1)
    out["slotFreedAfterS"] = freed
    out["slotProbes"] = tries
    if freed is None:
        out["errors"].append(f"{a_name}'s call slot was still taken {args.stop_timeout} s after the cancel ({last}): "
                             "the tool did not stop on the replica running it")
    after = {"aReceived": await metric(args.admin_a, received), "bSent": await metric(args.admin_b, sent),
             "aCancelledCalls": await metric(args.admin_a, *cancelled_metric)}
    out["metricDeltas"] = {k: (after[k] - before[k]) if after[k] is not None and before[k] is not None else None for k in before}
    # Still cancelled a moment later (a late end of the run must not overwrite it).
    await asyncio.sleep(0.5)
    again = await mcp.get(a_url, task_id)
    if status_of(again) != "cancelled":
        out["errors"].append(f"{a_name} says {status_of(again) or short(again)} a moment after the cancel")
    if args.state and task_id:
        save_state(args.state, "cancelled", {"taskId": task_id})


# ---- lost: the running replica is killed ---------------------------------------------------------
async def lost(args: argparse.Namespace, mcp: Mcp, out: dict[str, Any]) -> None:
    v_name, v_url = named(args.create)
    polls = [named(p) for p in args.poll]
    bound = args.lease_secs * 4 / 3 + args.margin_secs
    out.update(victim=v_name, leaseSecs=args.lease_secs, boundS=round(bound, 2), polledThrough=[n for n, _ in polls])
    task_id = await create(mcp, v_url, "slow_compute", {"seconds": args.seconds, "label": f"{args.rid_prefix}-lost"}, out)
    if not task_id:
        return
    await visible_everywhere(mcp, polls, task_id, out, {"working"})
    # A moment of running (and a renewal or two of the lease) before the kill.
    await asyncio.sleep(args.run_before_kill)
    still = await mcp.get(v_url, task_id)
    if status_of(still) != "working":
        out["errors"].append(f"the task was not working on {v_name} before the kill: {short(still)}")
    kill_at = time.time()
    os.kill(args.victim_pid, signal.SIGKILL)
    out["killedPid"] = args.victim_pid
    ended = await until_terminal(mcp, polls, task_id, kill_at, bound + 5, interval=0.1)
    out["failedAfterS"] = {n: e["afterS"] for n, e in ended.items()}
    out["unanswered"] = {n: e["unanswered"] for n, e in ended.items()}
    seen = [t for t in out["failedAfterS"].values() if t is not None]
    out["timeToFailedS"] = min(seen) if seen else None
    for n, e in ended.items():
        task = e["task"]
        if task.get("status") != "failed":
            out["errors"].append(f"{n}: the task is {task.get('status') or task} {bound + 5:.1f} s after the kill, statuses seen {e['statuses']}")
        elif e["afterS"] > bound:
            out["errors"].append(f"{n}: failed only {e['afterS']} s after the kill (bound {bound:.1f} s: lease {args.lease_secs} s, "
                                 f"renewed every third, + {args.margin_secs} s)")
    first = next((e["task"] for e in ended.values() if e["task"].get("status") == "failed"), {})
    out["statusMessage"] = first.get("statusMessage")
    out["error"] = first.get("error")
    words = re.compile(r"stopped|lost|died|replica|server", re.I)
    if first and not (words.search(first.get("statusMessage") or "") and words.search(json.dumps(first.get("error") or {}))):
        out["errors"].append(f"the failure does not say the replica running it was lost: statusMessage {first.get('statusMessage')!r}, "
                             f"error {first.get('error')}")
    if args.state:
        save_state(args.state, "failed", {"taskId": task_id})


# ---- restart: every replica restarted, the tasks are still there ----------------------------------
async def restart(args: argparse.Namespace, mcp: Mcp, out: dict[str, Any]) -> None:
    state = json.load(open(args.state))
    if "completed" not in state:
        out["errors"].append("no completed task to look for (the spread step failed)")
        return
    done = state["completed"]
    end = time.monotonic() + args.timeout - 5

    async def ask(url: str) -> dict[str, Any] | None:
        """tasks/get of the completed task, asked again while no replica answers (not up yet)."""
        while time.monotonic() < end:
            a = await mcp.get(url, done["taskId"])
            if status_of(a) is None and (a.get("http") is None or a.get("http", 0) >= 500):
                out["retried"] += 1
                await asyncio.sleep(0.2)
                continue
            return a
        return None

    out.update(requests=args.requests, answered=0, retried=0, direct={})
    wrong: list[str] = []
    t0 = time.time()
    for _ in range(args.requests):  # through nginx
        a = await ask(args.url)
        if a is None:
            break
        out["answered"] += 1
        task = a.get("result") or {}
        if task.get("status") != "completed" or not same(task.get("result"), done["result"]):
            wrong.append(short(a))
    for name, url in (named(p) for p in args.poll or []):  # and every replica directly
        a = await ask(url)
        task = (a or {}).get("result") or {}
        ok = task.get("status") == "completed" and same(task.get("result"), done["result"])
        out["direct"][name] = "same result" if ok else (short(a) if a else "no answer")
        if not ok:
            wrong.append(f"{name}: {out['direct'][name]}")
    out["elapsedS"] = round(time.time() - t0, 3)
    if out["answered"] < args.requests:
        out["errors"].append(f"only {out['answered']} of {args.requests} tasks/get through nginx answered")
    if wrong:
        out["errors"].append(f"{len(wrong)} answer(s) without the completed result stored before the restart, e.g. {wrong[0]}")
    # The other steps' tasks keep their terminal statuses too.
    out["others"] = {}
    for status in ("cancelled", "failed"):
        if status in state:
            a = await mcp.get(args.url, state[status]["taskId"])
            out["others"][status] = status_of(a) or short(a)
            if status_of(a) != status:
                out["errors"].append(f"the {status} task is now {status_of(a) or short(a)}")


# ---- update: tasks/update through another replica (confirm_delete) -------------------------------
# The tool `confirm_delete` {filename} asks its client to confirm (an elicitation, so these
# requests declare `elicitation` besides the tasks extension): its task goes
# `input_required` with `inputRequests` ({key: {method, params}}); a tasks/update {taskId,
# inputResponses: {key: {action: "accept", content: {confirm: true}}}} through a replica other
# than the one running it must be stored, acknowledged, and resume the task on the running
# replica (woken by the cluster channel) to `completed`. Against a build without the tool this
# step fails with "Unknown tool: confirm_delete".
async def update(args: argparse.Namespace, mcp: Mcp, out: dict[str, Any]) -> None:
    a_name, a_url = named(args.create)
    b_name, b_url = named(args.update)
    polls = [named(p) for p in args.poll]
    out.update(createdOn=a_name, updatedThrough=b_name)
    t0 = time.time()
    task_id = await create(mcp, a_url, "confirm_delete", {"filename": args.filename}, out)
    if not task_id:
        return
    asking = await until_terminal(mcp, polls, task_id, t0, 10.0, want={"input_required"} | TERMINAL)
    out["inputRequiredAfterS"] = {n: e["afterS"] for n, e in asking.items()}
    requests = {n: e["task"].get("inputRequests") for n, e in asking.items()}
    for n, e in asking.items():
        if e["task"].get("status") != "input_required":
            out["errors"].append(f"{n}: the task is {e['task'].get('status') or e['task']}, not input_required, statuses seen {e['statuses']}")
    first = next(iter(requests.values()), None)
    if not isinstance(first, dict) or not first:
        out["errors"].append(f"no inputRequests in the input_required task: {json.dumps(next(iter(asking.values()), {}).get('task'))[:300]}")
        return
    if not all(same(r, first) for r in requests.values()):
        out["errors"].append(f"the replicas show different inputRequests: {requests}")
    out["inputKeys"] = sorted(first)
    out["inputMethods"] = sorted({str(r.get("method")) for r in first.values() if isinstance(r, dict)})
    responses = {key: {"action": "accept", "content": {"confirm": True}} for key in first}
    received = await metric(args.admin_a, "toolgate_cluster_events_received_total") if args.admin_a else None
    t1 = time.time()
    ack = await mcp.rpc(b_url, "tasks/update", {"taskId": task_id, "inputResponses": responses})
    out["ackMs"] = ack["ms"]
    if "result" not in ack:
        out["errors"].append(f"tasks/update through {b_name} was not acknowledged: {short(ack)}")
        return
    ended = await until_terminal(mcp, polls, task_id, t1, args.timeout_after_update)
    out["completedAfterUpdateS"] = {n: e["afterS"] for n, e in ended.items()}
    if received is not None:  # the wake-up by the cluster channel (else the running replica's re-read finds it)
        now = await metric(args.admin_a, "toolgate_cluster_events_received_total")
        out["aEventsReceived"] = None if now is None else now - received
    for n, e in ended.items():
        if e["task"].get("status") != "completed":
            out["errors"].append(f"{n}: the task is {e['task'].get('status') or e['task']} after the update, statuses seen {e['statuses']}")
    result = next(iter(ended.values()), {}).get("task", {}).get("result")
    out["resultText"] = text_of(result)[:200]
    out["resultIsError"] = bool(isinstance(result, dict) and result.get("isError"))


def save_state(path: str, key: str, value: dict[str, Any]) -> None:
    try:
        state = json.load(open(path))
    except (OSError, ValueError):
        state = {}
    state[key] = value
    with open(path, "w") as f:
        json.dump(state, f)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="step", required=True)

    def step(name: str) -> argparse.ArgumentParser:
        s = sub.add_parser(name)
        s.add_argument("--rid-prefix", default="f")
        s.add_argument("--state", help="JSON file the steps share (the tasks left for `restart`)")
        s.add_argument("--timeout", type=float, default=60.0)
        return s

    s = step("spread")
    s.add_argument("--create", required=True, metavar="NAME=URL")
    s.add_argument("--poll", action="append", required=True, metavar="NAME=URL")
    s.add_argument("--seconds", type=float, default=3)
    s = step("cancel")
    s.add_argument("--create", required=True, metavar="NAME=URL")
    s.add_argument("--cancel", required=True, metavar="NAME=URL")
    s.add_argument("--poll", action="append", required=True, metavar="NAME=URL")
    s.add_argument("--admin-a", required=True, help="admin URL of the creating replica (its /metrics)")
    s.add_argument("--admin-b", required=True, help="admin URL of the cancelling replica")
    s.add_argument("--seconds", type=float, default=120)
    s.add_argument("--stop-timeout", type=float, default=5.0, help="how long the tool may take to stop after the ack")
    s = step("lost")
    s.add_argument("--create", required=True, metavar="NAME=URL")
    s.add_argument("--victim-pid", type=int, required=True)
    s.add_argument("--poll", action="append", required=True, metavar="NAME=URL")
    s.add_argument("--lease-secs", type=float, required=True)
    s.add_argument("--margin-secs", type=float, default=3.0)
    s.add_argument("--seconds", type=float, default=120)
    s.add_argument("--run-before-kill", type=float, default=1.0)
    s = step("restart")
    s.add_argument("--url", required=True)
    s.add_argument("--poll", action="append", metavar="NAME=URL", help="also asked once each, directly")
    s.add_argument("--requests", type=int, default=9)
    s = step("update")
    s.add_argument("--create", required=True, metavar="NAME=URL")
    s.add_argument("--update", required=True, metavar="NAME=URL")
    s.add_argument("--poll", action="append", required=True, metavar="NAME=URL")
    s.add_argument("--filename", default="cluster-confirm.txt")
    s.add_argument("--admin-a", help="admin URL of the creating replica (its /metrics)")
    s.add_argument("--timeout-after-update", type=float, default=10.0)
    args = p.parse_args()

    out: dict[str, Any] = {"step": args.step, "errors": []}

    async def run() -> None:
        headers = {"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"}
        async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(10.0, connect=3.0)) as http:
            mcp = Mcp(http, args.rid_prefix, ELICITING_CAPS if args.step == "update" else TASKS_CAPS)
            await {"spread": spread, "cancel": cancel, "lost": lost, "restart": restart, "update": update}[args.step](args, mcp, out)

    try:
        asyncio.run(asyncio.wait_for(run(), args.timeout))
    except TimeoutError:
        out["errors"].append(f"the step did not end within {args.timeout} s")
    except Exception as e:  # noqa: BLE001 - reported, and the step fails
        out["errors"].append(f"{type(e).__name__}: {e}")
    out["ok"] = not out["errors"]
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
