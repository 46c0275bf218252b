#!/usr/bin/env python3
"""End-to-end check of toolgate's 2025-11-25 tasks with the official MCP Python SDK 1.x.

Drives the tasks through the SDK's own (experimental, deprecated in 1.x) task client API,
`session.experimental` (mcp/client/experimental/tasks.py): call_tool_as_task, get_task,
poll_task, get_task_result, list_tasks and cancel_task. Needs a server with the conformance
pack on (slow_compute, failing_job, confirm_delete) and auth on (tasks/list is only offered where
a requestor can be told apart). Run it with the interpreter of the venv tests/e2e/setup.sh made:

    MCP_TOKEN=... $HARNESS_DIR/py-mcp1/bin/python tests/e2e/py_tasks_client.py --url http://127.0.0.1:8080/mcp

Steps (each runs even if an earlier one failed; one that needs an earlier one's task fails too):
  capabilities    initialize advertises capabilities.tasks {list, cancel, requests.tools.call}
  create          slow_compute {seconds: 1, label: "py"} as a task (ttl 60000): CreateTaskResult
  poll            tasks/get until completed, at the server's pollInterval
  result          tasks/result: the CallToolResult ("Computed py"), with the related-task _meta
  cancel          a 60 s slow_compute task cancelled: cancelled, stays so; a second cancel -32602
  list            tasks/list (every page) holds both tasks
  failure         failing_job as a task ends failed with a statusMessage; tasks/result isError
  input_required  confirm_delete as a task: input_required, then tasks/result carries the
                  elicitation/create (with the related-task _meta), the answer completes the task

Prints PASS/FAIL lines on stderr and one JSON line on stdout; exit status 0 only if every step
passed (--skip leaves steps out).
"""

import argparse
import importlib.metadata
import json
import os
import sys
import time
import warnings
from contextlib import AsyncExitStack
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable

import anyio
import httpx
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError

SDK_VERSION = importlib.metadata.version("mcp")
RELATED_TASK = "io.modelcontextprotocol/related-task"
STEPS = ["capabilities", "create", "poll", "result", "cancel", "list", "failure", "input_required"]

# The SDK marks its whole tasks API deprecated (tasks return in mcp 2.x as an extension); the
# 1.x API is exactly what a 2025-11-25 client uses, so its warning is noise here.
warnings.filterwarnings("ignore", message="The experimental tasks API is deprecated", category=DeprecationWarning)


class CheckFailed(Exception):
    pass


def check(ok: bool, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def related_task_of(meta: Any) -> Any:
    """The related-task entry of a `_meta` (a dict on results, a model on request params)."""
    if meta is None:
        return None
    if not isinstance(meta, dict):
        meta = meta.model_dump(by_alias=True)
    return meta.get(RELATED_TASK)


def check_related(meta: Any, task_id: str, what: str) -> None:
    """`meta` must carry the related-task entry naming `task_id`."""
    related = related_task_of(meta)
    ok = isinstance(related, dict) and related.get("taskId") == task_id
    check(ok, f"{what} _meta {meta!r}, wanted {RELATED_TASK} {{taskId: {task_id}}}")


class Watcher(httpx.AsyncBaseTransport):
    """Notes how the server answered each POST, by JSON-RPC method: JSON or an SSE stream."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.answers: list[tuple[str, int, str]] = []  # (method, status, content type)

    async def handle_async_request(self, request: Any) -> Any:
        response = await self._inner.handle_async_request(request)
        if request.method == "POST":
            try:
                method = json.loads(request.content).get("method") or "(response)"
            except Exception:
                method = "(unreadable)"
            self.answers.append((method, response.status_code, response.headers.get("content-type", "")))
        return response

    def types_of(self, method: str, since: int = 0) -> list[str]:
        return [ctype.split(";")[0] for m, _, ctype in self.answers[since:] if m == method]

    async def aclose(self) -> None:
        await self._inner.aclose()


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out: dict[str, Any] = {"client": f"python-mcp-{SDK_VERSION}-tasks", "transport": "streamable-http", "passed": [], "errors": []}
        self.session: ClientSession | None = None
        self.watcher = Watcher()
        self.done_id: str | None = None  # the slow_compute task of create/poll/result
        self.cancelled_id: str | None = None
        self.elicitations: list[dict[str, Any]] = []  # what the elicitation callback saw
        self.in_tasks_result = False

    @property
    def tasks(self) -> Any:
        assert self.session is not None
        return self.session.experimental

    async def step(self, name: str, body: Callable[[], Awaitable[str | None]]) -> None:
        if name in self.args.skip:
            print(f"SKIP {name}", file=sys.stderr, flush=True)
            return
        try:
            with anyio.fail_after(self.args.step_timeout):
                detail = await body()
        except Exception as e:
            message = "; ".join(errors_of(e))
            self.out["errors"].append(f"{name}: {message}")
            print(f"FAIL {name}: {message}", file=sys.stderr, flush=True)
        else:
            self.out["passed"].append(name)
            print(f"PASS {name}" + (f": {detail}" if detail else ""), file=sys.stderr, flush=True)

    # ---- the steps --------------------------------------------------------------------------

    async def capabilities(self) -> str:
        assert self.session is not None
        caps = self.session.get_server_capabilities()
        check(caps is not None, "no server capabilities after initialize")
        tasks = caps.tasks if caps else None
        check(tasks is not None, "initialize result has no capabilities.tasks")
        assert tasks is not None
        check(tasks.list is not None, f"capabilities.tasks has no list: {dump(tasks)}")
        check(tasks.cancel is not None, f"capabilities.tasks has no cancel: {dump(tasks)}")
        check(
            tasks.requests is not None and tasks.requests.tools is not None and tasks.requests.tools.call is not None,
            f"capabilities.tasks has no requests.tools.call: {dump(tasks)}",
        )
        self.out["capabilities.tasks"] = dump(tasks)
        return json.dumps(dump(tasks), separators=(",", ":"))

    def check_created(self, created: types.CreateTaskResult, tool: str) -> types.Task:
        task = created.task  # the SDK has validated taskId, status, createdAt, lastUpdatedAt, ttl
        check(isinstance(task.taskId, str) and task.taskId != "", f"{tool}: task id {task.taskId!r}")
        check(task.status == "working", f"{tool}: a new task is {task.status!r}, wanted 'working'")
        check(isinstance(task.createdAt, datetime) and isinstance(task.lastUpdatedAt, datetime), f"{tool}: timestamps {dump(task)}")
        check(task.lastUpdatedAt >= task.createdAt, f"{tool}: lastUpdatedAt before createdAt: {dump(task)}")
        check(task.ttl is None or (isinstance(task.ttl, int) and task.ttl > 0), f"{tool}: ttl {task.ttl!r}")
        return task

    async def create(self) -> str:
        created = await self.tasks.call_tool_as_task("slow_compute", {"seconds": 1, "label": "py"}, ttl=60000)
        task = self.check_created(created, "slow_compute")
        self.done_id = task.taskId
        self.out["task"] = dump(task)
        return f"{task.taskId} {task.status} ttl={task.ttl} pollInterval={task.pollInterval}"

    async def poll(self) -> str:
        check(self.done_id is not None, "no task: create failed")
        assert self.done_id is not None
        seen: list[tuple[float, types.GetTaskResult]] = []
        # poll_task sleeps pollInterval (the SDK's default 500 ms without one) between polls.
        async for status in self.tasks.poll_task(self.done_id):
            seen.append((time.monotonic(), status))
            check(status.taskId == self.done_id, f"tasks/get for {self.done_id} answered task {status.taskId}")
            check(status.status in ("working", "completed"), f"slow_compute task went {status.status!r} ({status.statusMessage!r})")
            check(related_task_of(status.meta) is None, f"tasks/get result carries the related-task _meta (SHOULD NOT): {status.meta}")
        statuses = [s.status for _, s in seen]
        check(statuses[-1] == "completed", f"polls saw {statuses}")
        for (t0, a), (t1, _) in zip(seen, seen[1:]):
            wanted = (a.pollInterval if a.pollInterval is not None else 500) / 1000
            check(t1 - t0 >= wanted * 0.9, f"polled after {t1 - t0:.3f} s, pollInterval {wanted} s")
        last = seen[-1][1]
        check(last.lastUpdatedAt >= last.createdAt, f"completed task timestamps {dump(last)}")
        self.out["polls"] = statuses
        return f"{len(seen)} polls: {' -> '.join(dict.fromkeys(statuses))} (pollInterval {last.pollInterval} ms)"

    async def result(self) -> str:
        check(self.done_id is not None, "no task: create failed")
        assert self.done_id is not None
        result = await self.tasks.get_task_result(self.done_id, types.CallToolResult)
        text = text_of(result)
        check(not result.isError, f"slow_compute result isError: {dump(result)}")
        check("Computed py" in text, f"slow_compute result text {text!r}, wanted it to contain 'Computed py'")
        check_related(result.meta, self.done_id, "tasks/result")
        return repr(text)

    async def cancel(self) -> str:
        created = await self.tasks.call_tool_as_task("slow_compute", {"seconds": 60, "label": "cancel"}, ttl=60000)
        task = self.check_created(created, "slow_compute(60)")
        self.cancelled_id = task.taskId
        cancelled = await self.tasks.cancel_task(task.taskId)
        check(cancelled.taskId == task.taskId, f"tasks/cancel answered task {cancelled.taskId}")
        check(cancelled.status == "cancelled", f"tasks/cancel answered status {cancelled.status!r}")
        for _ in range(2):  # right away, and once more a moment later: cancelled is terminal
            got = await self.tasks.get_task(task.taskId)
            check(got.status == "cancelled", f"tasks/get after cancel: {got.status!r}")
            await anyio.sleep(0.5)
        try:
            again = await self.tasks.cancel_task(task.taskId)
        except McpError as e:
            check(e.error.code == -32602, f"second tasks/cancel: error {e.error.code} {e.error.message!r}, wanted -32602")
            return f"{task.taskId} cancelled; second cancel -> {e.error.code} {e.error.message!r}"
        raise CheckFailed(f"second tasks/cancel of a cancelled task succeeded: {dump(again)}")

    async def list(self) -> str:
        ids: list[str] = []
        cursors: set[str] = set()
        cursor: str | None = None
        pages = 0
        while True:
            page = await self.tasks.list_tasks(cursor)
            pages += 1
            ids.extend(t.taskId for t in page.tasks)
            check(related_task_of(page.meta) is None, f"tasks/list result carries the related-task _meta (SHOULD NOT): {page.meta}")
            cursor = page.nextCursor
            if not cursor:
                break
            check(cursor not in cursors, f"tasks/list repeated the cursor {cursor!r}")
            check(pages < 100, "tasks/list did not end within 100 pages")
            cursors.add(cursor)
        wanted = [i for i in (self.done_id, self.cancelled_id) if i]
        check(len(wanted) == 2, "create or cancel made no task to look for")
        missing = [i for i in wanted if i not in ids]
        check(not missing, f"tasks/list ({len(ids)} tasks, {pages} pages) lacks {missing}")
        check(len(set(ids)) == len(ids), f"tasks/list repeats tasks: {ids}")
        return f"{len(ids)} tasks in {pages} page(s), both present"

    async def failure(self) -> str:
        created = await self.tasks.call_tool_as_task("failing_job", {}, ttl=60000)
        task = self.check_created(created, "failing_job")
        last = None
        async for status in self.tasks.poll_task(task.taskId):
            last = status
        assert last is not None
        check(last.status == "failed", f"failing_job task ended {last.status!r}, wanted 'failed'")
        check(bool(last.statusMessage), f"failed task has no statusMessage: {dump(last)}")
        result = await self.tasks.get_task_result(task.taskId, types.CallToolResult)
        check(result.isError is True, f"tasks/result of the failed task: isError {result.isError!r}: {dump(result)}")
        check_related(result.meta, task.taskId, "tasks/result")
        return f"failed: {last.statusMessage!r}; result isError, {text_of(result)!r}"

    async def input_required(self) -> str:
        created = await self.tasks.call_tool_as_task("confirm_delete", {"filename": "x.txt"}, ttl=60000)
        task = self.check_created(created, "confirm_delete")
        mark = len(self.watcher.answers)
        statuses: list[str] = []
        # Wait for the task to ask (TK-15: SHOULD move to input_required); poll_task would run
        # on to a terminal status, so stop at input_required.
        with anyio.move_on_after(self.args.input_required_within):
            async for status in self.tasks.poll_task(task.taskId):
                statuses.append(status.status)
                if status.status == "input_required":
                    break
        check(
            statuses[-1:] == ["input_required"],
            f"confirm_delete task went {statuses} without input_required (waited up to {self.args.input_required_within} s)",
        )
        check(not self.elicitations, "the elicitation arrived before tasks/result was called")
        # tasks/result blocks; the server delivers the elicitation/create on its SSE stream and the
        # session's elicitation callback answers it.
        self.in_tasks_result = True
        try:
            result = await self.tasks.get_task_result(task.taskId, types.CallToolResult)
        finally:
            self.in_tasks_result = False
        check(len(self.elicitations) == 1, f"{len(self.elicitations)} elicitation(s) during tasks/result, wanted 1")
        seen = self.elicitations[0]
        self.out["elicitation"] = seen
        check(seen["during_tasks_result"], "the elicitation did not arrive while tasks/result was open")
        check_related(seen["meta"], task.taskId, "elicitation/create")
        check(not result.isError, f"confirm_delete result isError: {dump(result)}")
        check_related(result.meta, task.taskId, "tasks/result")
        final = await self.tasks.get_task(task.taskId)
        check(final.status == "completed", f"after the answer the task is {final.status!r}")
        answers = self.watcher.types_of("tasks/result", mark)
        check(answers == ["text/event-stream"], f"tasks/result answered as {answers}, wanted one SSE stream")
        gets = set(self.watcher.types_of("tasks/get", mark))
        check(gets == {"application/json"}, f"tasks/get answered as {gets} (SHOULD NOT be SSE)")
        return f"{' -> '.join(dict.fromkeys(statuses))}; elicitation {seen['message']!r} accepted; {text_of(result)!r}"

    # ---- the session ------------------------------------------------------------------------

    async def on_elicit(self, ctx: Any, params: Any) -> types.ElicitResult | types.ErrorData:
        self.elicitations.append(
            {
                "during_tasks_result": self.in_tasks_result,
                "message": getattr(params, "message", None),
                # the request's params._meta, as the SDK hands it to the callback
                "meta": dump(ctx.meta) if ctx.meta is not None else None,
            }
        )
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def main(self) -> None:
        token = os.environ.get("MCP_TOKEN")  # a bearer token for a server with auth on
        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                httpx.AsyncClient(transport=self.watcher, headers=headers, timeout=httpx.Timeout(30.0, read=300.0), follow_redirects=True)
            )
            streams = await stack.enter_async_context(streamable_http_client(self.args.url, http_client=client))
            self.session = await stack.enter_async_context(
                ClientSession(
                    streams[0],
                    streams[1],
                    read_timeout_seconds=timedelta(seconds=self.args.request_timeout),
                    elicitation_callback=self.on_elicit,
                    client_info=types.Implementation(name="toolgate-e2e-py-tasks", version=SDK_VERSION),
                )
            )
            init = await self.session.initialize()
            self.out["protocolVersion"] = init.protocolVersion
            check(init.protocolVersion == self.args.protocol, f"negotiated protocolVersion {init.protocolVersion!r}, wanted {self.args.protocol!r}")
            for name in STEPS:
                await self.step(name, getattr(self, name))


def errors_of(e: BaseException) -> list[str]:
    if isinstance(e, BaseExceptionGroup):
        return [m for sub in e.exceptions for m in errors_of(sub)]
    if isinstance(e, CheckFailed):
        return [str(e)]
    if isinstance(e, McpError):
        return [f"JSON-RPC error {e.error.code}: {e.error.message}"]
    if isinstance(e, TimeoutError) and not str(e):
        return ["TimeoutError: took too long (--step-timeout, --request-timeout, --timeout)"]
    return [f"{type(e).__name__}: {e}"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="the Streamable HTTP /mcp endpoint")
    p.add_argument("--protocol", default="2025-11-25", help="protocolVersion the server must negotiate")
    p.add_argument("--skip", action="append", default=[], choices=STEPS, help="leave a step out (repeatable)")
    p.add_argument("--request-timeout", type=float, default=30.0, metavar="SECONDS")
    p.add_argument("--step-timeout", type=float, default=30.0, metavar="SECONDS", help="bound on each step")
    p.add_argument("--input-required-within", type=float, default=10.0, metavar="SECONDS", help="how soon confirm_delete must ask")
    p.add_argument("--timeout", type=float, default=100.0, metavar="SECONDS", help="bound on the whole run")
    args = p.parse_args()
    run = Run(args)

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run.main()

    try:
        anyio.run(bounded)
    except Exception as e:  # includes ExceptionGroups from the SDK's task groups
        errors = errors_of(e)
        run.out["errors"].extend(errors)
        for message in errors:
            print(f"FAIL session: {message}", file=sys.stderr, flush=True)
    run.out["ok"] = not run.out["errors"]
    print(json.dumps(run.out, separators=(",", ":")), flush=True)
    return 0 if run.out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
