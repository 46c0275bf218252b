#!/usr/bin/env python3
"""One-line summaries of the tests/cluster programs' JSON output, for topology.sh's PASS/FAIL
lines and figures. `report.py KIND FILE...`; never fails (prints what it could not read)."""

import json
import sys


def load(path: str) -> dict:
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except Exception as e:  # noqa: BLE001
        return {"errors": [f"no result in {path}: {type(e).__name__}"]}


def errs(d: dict) -> str:
    return f"; errors: {d['errors']}" if d.get("errors") else ""


def quota(d: dict) -> str:
    return (f"{d.get('admitted')} of {d.get('requests')} admitted, {d.get('refused')} refused with 429 "
            f"(Retry-After {d.get('retryAfterS')} s), in {d.get('elapsedS')} s; expected {d.get('expectedAdmitted')}{errs(d)}")


def session(d: dict) -> str:
    sid = str(d.get("sessionId") or "-")[:8]
    return f"{d.get('requests')} requests answered in session {sid}…, HTTP {d.get('statuses')}{errs(d)}"


def listeners(d: dict) -> str:
    c, s, a = d.get("crossReplicaMs", {}), d.get("sameReplicaMs", {}), d.get("adminCallMs", {})
    counts = d.get("listeners", {})
    return (f"{d.get('rounds')} changes × {len(counts)} listeners, every one heard {sorted(set(counts.values()))} "
            f"(missed {d.get('missed')}); latency from the admin call: other replicas p50 {c.get('p50')} ms, "
            f"p99 {c.get('p99')} ms, max {c.get('max')} ms (n={c.get('n')}); the same replica p50 {s.get('p50')} ms, "
            f"p99 {s.get('p99')} ms; the admin call itself p50 {a.get('p50')} ms{errs(d)}")


def throughput_runs(run_dir: str, replicas: str) -> tuple[list[dict], list[dict]]:
    import glob
    def runs(n: str) -> list[dict]:
        return [load(f) for f in sorted(glob.glob(f"{run_dir}/e-{n}-*.json"))]
    return runs(replicas), runs("1")


def throughput(run_dir: str, replicas: str) -> str:
    many, one = throughput_runs(run_dir, replicas)

    def f(ds: list[dict]) -> str:
        rates = [d.get("okPerSecond") or 0 for d in ds]
        p50 = [d.get("latencyMs", {}).get("p50") for d in ds]
        p99 = [d.get("latencyMs", {}).get("p99") for d in ds]
        failed = sum((d.get("retriable") or 0) + (d.get("other") or 0) for d in ds)
        mean = sum(rates) / max(len(rates), 1)
        return f"{mean:.0f} req/s (runs {rates}; latency p50 {p50} ms, p99 {p99} ms; {failed} failed)"

    def mean(ds: list[dict]) -> float:
        return sum(d.get("okPerSecond") or 0 for d in ds) / max(len(ds), 1)
    ratio = mean(many) / max(mean(one), 0.1)
    errors = [e for d in many + one for e in d.get("errors", [])]
    return f"{replicas} replicas: {f(many)}; 1 replica: {f(one)}; ratio {ratio:.2f}" + (f"; errors: {errors}" if errors else "")


def throughput_ok(run_dir: str, replicas: str) -> bool:
    many, one = throughput_runs(run_dir, replicas)
    return bool(many) and bool(one) and all((d.get("ok") or 0) > 0 and d.get("other", 1) == 0 for d in many + one)


def kill(v: dict, after: dict) -> str:
    def kind(name: str) -> str:
        k = v.get(name)
        if not k:
            return ""
        w = k.get("errorWindowS")
        window = f"failures from {w[0]:+} s to {w[1]:+} s relative to the kill" if w else "no failures"
        return (f"{name}: {k['ok']}/{k['requests']} ok, {k['failed']} failed, {window}, "
                f"{k.get('okAfterLastFailure')} ok after the last failure; ")
    return (f"{v.get('requests')} requests, {v.get('ok')} ok, {v.get('retriable')} retriable failures "
            f"{v.get('retriableKinds')}, {v.get('other')} other; " + kind("modern") + kind("streaming") + kind("legacy") +
            f"audit: {v.get('auditedOk')}/{v.get('ok')} ok requests audited exactly once, {v.get('lost')} lost, "
            f"{v.get('duplicated')} duplicated, {v.get('failedButAudited')} failed-but-audited (ran, answer lost); "
            f"legacy SDK sessions opened per worker {v.get('legacySessionsOpened')} ({v.get('legacyInitFailures')} failed to open), "
            f"their stream resumptions (Last-Event-ID) answered {v.get('legacyResumptions') or 'none tried'}; "
            f"after the run: {after.get('ok')}/{after.get('requests')} ok through nginx{errs(v)}")


def cut(d: dict) -> str:
    call = d.get("call", {})
    res = d.get("resumptions", [])
    return (f"killed {d.get('killed')} after {d.get('progressBeforeKill')} progress notification(s); the SDK's call ended with "
            f"{call.get('kind')} after {call.get('afterS')} s ({call.get('detail')}); its resumptions (Last-Event-ID) "
            f"answered {[r['status'] for r in res]} at {[r['afterKillS'] for r in res]} s after the kill, "
            f"list_changed at {d.get('listChangedAfterKillS')} s; retry in the same session: {d.get('retry')}{errs(d)}")


def task_spread(d: dict) -> str:
    return (f"task {str(d.get('taskId'))[:8]}… (slow_compute {d.get('seconds')} s) created on {d.get('createdOn')}, at once "
            f"{d.get('atOnce')}; completed through each after {d.get('completedAfterS')} s from the creation (spread "
            f"{d.get('completionSpreadS')} s), the same inlined result everywhere: {d.get('identical')} "
            f"({d.get('resultText')!r}); {d.get('unanswered')} poll(s) unanswered{errs(d)}")


def task_cancel(d: dict) -> str:
    m = d.get("metricDeltas") or {}
    return (f"created on {d.get('createdOn')}, cancelled through {d.get('cancelledThrough')}: ack in {d.get('ackMs')} ms; "
            f"cancelled through each after {d.get('cancelledAfterS')} s ({d.get('statusMessage')!r}); "
            f"{d.get('createdOn')}'s only call slot: {d.get('slotBefore')} before the cancel, free "
            f"{d.get('slotFreedAfterS')} s after it ({d.get('slotProbes')} probe(s)); cluster events sent by "
            f"{d.get('cancelledThrough')} +{m.get('bSent')}, received by {d.get('createdOn')} +{m.get('aReceived')}; "
            f"its tool_calls_total{{slow_compute,cancelled}} +{m.get('aCancelledCalls')}{errs(d)}")


def task_lost(d: dict) -> str:
    return (f"slow task on {d.get('victim')} (pid {d.get('killedPid')}) killed with SIGKILL: failed after "
            f"{d.get('timeToFailedS')} s (per poller {d.get('failedAfterS')}; lease {d.get('leaseSecs')} s, bound "
            f"{d.get('boundS')} s), statusMessage {d.get('statusMessage')!r}, error {d.get('error')}; unanswered polls "
            f"{d.get('unanswered')}{errs(d)}")


def task_restart(d: dict) -> str:
    return (f"{d.get('answered')}/{d.get('requests')} tasks/get through nginx returned the completed result stored before "
            f"the restart ({d.get('retried')} retried while replicas came up, {d.get('elapsedS')} s); directly: "
            f"{d.get('direct')}; the other tasks: "
            f"{d.get('others')}{errs(d)}")


def task_update(d: dict) -> str:
    return (f"confirm_delete created on {d.get('createdOn')}: input_required after {d.get('inputRequiredAfterS')} s, "
            f"inputRequests {d.get('inputKeys')} {d.get('inputMethods')}; tasks/update through {d.get('updatedThrough')} "
            f"ack in {d.get('ackMs')} ms; completed after {d.get('completedAfterUpdateS')} s ({d.get('resultText')!r}, "
            f"isError {d.get('resultIsError')}); cluster events received by {d.get('createdOn')} meanwhile "
            f"+{d.get('aEventsReceived')}{errs(d)}")


def main() -> None:
    kind, files = sys.argv[1], sys.argv[2:]
    try:
        if kind == "throughput":
            print(throughput(files[0], files[1]))
        elif kind == "throughput-ok":
            sys.exit(0 if throughput_ok(files[0], files[1]) else 1)
        elif kind == "kill":
            print(kill(load(files[0]), load(files[1])))
        else:
            print({"quota": quota, "session": session, "listeners": listeners, "cut": cut, "task-spread": task_spread,
                   "task-cancel": task_cancel, "task-lost": task_lost, "task-restart": task_restart,
                   "task-update": task_update}[kind](load(files[0])))
    except Exception as e:  # noqa: BLE001
        print(f"(no summary: {type(e).__name__}: {e})")


if __name__ == "__main__":
    main()
