#!/usr/bin/env python3
"""Turns one benches/run.sh result folder into the tables of BENCHMARKS.md: throughput and
latency of every target, toolgate's ratios to the best rmcp mode and to the bare-axum ceiling,
sessions/streams/fan-out, start-up, and the targets of issue 31 that one run can judge, each met
or missed (a report: none of them decides the exit status).

Ratios are computed per round (the two servers ran back to back) and the median over rounds is
shown, because absolute figures drift on a shared machine. Standard library only.

    python3 benches/summarize.py [--check] RESULTS_DIR [RESULTS_DIR ...]

--check (the smoke test's verdict, not a threshold): exit 1 when a target has no results or any
error, a stream did not open, a fan-out did not reach every stream, or a start-up failed.
"""

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

TOOLGATE_LOAD = ["toolgate-full", "toolgate-full-2026", "toolgate-core", "toolgate-core-2026"]
CEILING = "axum-baseline"
# the official SDKs' modes among the peers (../shared/bench): Rust (rmcp), TypeScript, Python
OFFICIAL_SDK = ("rmcp-", "ts-", "py-")


def read_jsonl(dirs, name):
    out = []
    for d in dirs:
        p = Path(d) / name
        if p.exists():
            out += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return out


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=0):
    if x is None:
        return "–"
    return f"{x:,.{nd}f}"


def main() -> int:
    check = "--check" in sys.argv[1:]
    dirs = [a for a in sys.argv[1:] if a != "--check"]
    if not dirs:
        print(__doc__, file=sys.stderr)
        return 2
    load = read_jsonl(dirs, "load.jsonl")
    streams = read_jsonl(dirs, "streams.jsonl")
    startup = read_jsonl(dirs, "startup.jsonl")
    binary = [json.loads((Path(d) / "binary.json").read_text()) for d in dirs if (Path(d) / "binary.json").exists()]
    env = [(Path(d) / "env.txt").read_text() for d in dirs if (Path(d) / "env.txt").exists()]

    # by[label][conns] -> list of records; per_round[(round, conns)][label] -> rps
    by = defaultdict(lambda: defaultdict(list))
    per_round = defaultdict(dict)
    labels = []
    for r in load:
        if r["label"] not in labels:
            labels.append(r["label"])
        by[r["label"]][r["conns"]].append(r)
        per_round[(r.get("round"), r["conns"])][r["label"]] = r["rps"] if r.get("errors", 0) == 0 else None
    conns = sorted({r["conns"] for r in load})
    order = [lb for lb in TOOLGATE_LOAD if lb in labels] + [lb for lb in labels if lb not in TOOLGATE_LOAD]
    rmcp = [lb for lb in labels if lb.startswith("rmcp-")]

    def stat(label, c, key):
        return med([r.get(key) for r in by[label].get(c, [])])

    def ratio(label, c, against):
        """Median over rounds of label's req/s over the best of `against` in the same round."""
        xs = []
        for (_, cc), row in per_round.items():
            if cc != c or row.get(label) is None:
                continue
            best = max((row[a] for a in against if row.get(a)), default=None)
            if best:
                xs.append(row[label] / best)
        return med(xs)

    print("# toolgate benchmark\n")
    for e in env:
        print("```\n" + e.strip() + "\n```\n")

    if load:
        print("## tools/call throughput and latency (median over rounds)\n")
        head = " | ".join(f"req/s c={c}" for c in conns)
        print(f"| target | {head} | p50 ms {' / '.join(map(str, conns))} | p99 ms {' / '.join(map(str, conns))} | server CPU % c={conns[-1]} | idle → peak RSS MB | errors |")
        print("|---|" + "---:|" * len(conns) + "---|---|---:|---|---:|")
        for lb in order:
            rps = " | ".join(fmt(stat(lb, c, "rps")) for c in conns)
            p50 = " / ".join(fmt((stat(lb, c, "p50_us") or 0) / 1000, 2) for c in conns)
            p99 = " / ".join(fmt((stat(lb, c, "p99_us") or 0) / 1000, 2) for c in conns)
            cpu = fmt(stat(lb, conns[-1], "server_cpu_pct"))
            idle = med([r.get("rss_start_kb") for r in by[lb].get(conns[0], [])])
            peak = max((r.get("rss_max_kb") or 0 for c in conns for r in by[lb].get(c, [])), default=0)
            errs = sum(r.get("errors", 0) for c in conns for r in by[lb].get(c, []))
            rounds = max(len(by[lb].get(c, [])) for c in conns)
            name = f"**{lb}**" if lb.startswith("toolgate") else lb
            print(f"| {name} ({rounds}) | {rps} | {p50} | {p99} | {cpu} | {fmt((idle or 0) / 1024, 1)} → {fmt(peak / 1024, 1)} | {errs} |")
        print("\n(n) = rounds. toolgate-full: RS256 JWT from a JWKS, rate limits on (high), SQLite audit `sync` (the default). toolgate-core: none of those. `-2026`: protocol 2026-07-28 (stateless JSON); otherwise 2025-11-25 with a session.\n")

        tg = [lb for lb in TOOLGATE_LOAD if lb in labels]
        if tg and (rmcp or CEILING in labels):
            print("## Ratios (median of per-round ratios)\n")
            print("| toolgate target | " + " | ".join(f"÷ best rmcp c={c}" for c in conns) + " | " + " | ".join(f"÷ axum c={c}" for c in conns) + " |")
            print("|---|" + "---:|" * (2 * len(conns)))
            for lb in tg:
                a = " | ".join(fmt(ratio(lb, c, rmcp), 2) for c in conns)
                b = " | ".join(fmt(ratio(lb, c, [CEILING]), 2) for c in conns)
                print(f"| {lb} | {a} | {b} |")
            print("\n\"best rmcp\" is, in each round, the fastest of the rmcp modes measured in that round (" + ", ".join(rmcp) + ").\n")

    if streams:
        print("## Idle sessions, SSE GET streams and list_changed fan-out (fresh server each)\n")
        print("| target | streams open / requested | RSS base → sessions → streams MB | KB per session | KB per stream | fan-out p50 / p99 / max ms (median of rounds) | delivered | sessions set up in |")
        print("|---|---:|---|---:|---:|---|---:|---:|")
        for s in streams:
            fo = s.get("fanout") or []
            f50, f99, fmax = (med([f.get(k) for f in fo]) for k in ("p50_ms", "p99_ms", "max_ms"))
            got = sum(f.get("received", 0) for f in fo)
            want = sum(f.get("streams_open", 0) for f in fo)
            mb = " → ".join(fmt((s.get(k) or 0) / 1024, 1) for k in ("rss_base_kb", "rss_sessions_kb", "rss_streams_kb"))
            fan = f"{fmt(f50, 1)} / {fmt(f99, 1)} / {fmt(fmax, 1)}" if fo else "–"
            print(f"| {s['label']} | {s['streams_still_open']:,} / {s['requested']:,} | {mb} | {fmt(s.get('kb_per_session'), 1)} | {fmt(s.get('kb_per_stream'), 1)} | {fan} | {got:,} / {want:,} | {fmt(s.get('sessions_open_s'), 2)} s |")
            if s.get("error_samples"):
                print(f"|  ↳ errors: {'; '.join(s['error_samples'])[:300]} |||||||")
        print()

    if startup or binary:
        print("## Start-up, idle RSS, binary\n")
        print("| configuration | runs | live (/healthz) ms | ready (/readyz) ms | idle RSS MB |")
        print("|---|---:|---:|---:|---:|")
        for lb in sorted({s["label"] for s in startup}):
            rs = [s for s in startup if s["label"] == lb]
            print(f"| {lb} | {len(rs)} | {fmt(med([s.get('live_ms') for s in rs]), 1)} | {fmt(med([s.get('ready_ms') for s in rs]), 1)} | {fmt((med([s.get('idle_rss_kb') for s in rs]) or 0) / 1024, 1)} |")
        for b in binary:
            print(f"\nRelease binary: {b['bytes'] / 1048576:.1f} MiB ({b['bytes']:,} bytes, `{Path(b['path']).name}`).")
        print()

    # ---------------------------------------------------------------- targets (report only)
    print("## Targets (issue 31)\n")
    print("| target | measured | met |")
    print("|---|---|---|")

    def row(what, value, ok):
        print(f"| {what} | {value} | {'yes' if ok else ('no' if ok is not None else 'not measured')} |")

    top = max(conns) if conns else None
    sdk = [lb for lb in labels if lb.startswith(OFFICIAL_SDK)]
    # the defaults (JWT, rate limits, zero-loss audit) against the fastest official SDK mode of
    # the same round, which does none of that work
    for lb in ("toolgate-full", "toolgate-full-2026"):
        x = ratio(lb, top, sdk) if lb in labels and sdk else None
        row(f"the defaults ({lb}), c={top}: ≥ 1.0× the best official SDK mode", f"{fmt(x, 2)}×", None if x is None else x >= 1.0)
    for lb in ("toolgate-core", "toolgate-core-2026"):
        x = ratio(lb, top, [CEILING]) if lb in labels and CEILING in labels else None
        row(f"{lb}, c={top}: ≥ 0.65× bare axum", f"{fmt(x, 2)}×", None if x is None else x >= 0.65)
    new_core, old_core = "toolgate-core-2026", "toolgate-core"
    x = ratio(new_core, top, [old_core]) if new_core in labels and old_core in labels else None
    row(f"the 2026-07-28 core as fast as the 2025-11-25 one: {new_core} ÷ {old_core}, c={top} (met at ≥ 0.97, the rounds' noise)",
        f"{fmt(x, 2)}×", None if x is None else x >= 0.97)
    for lb in ("toolgate-full", "toolgate-full-2026"):
        p = stat(lb, 1, "p50_us") if lb in labels and 1 in conns else None
        row(f"the defaults ({lb}), c=1: p50 ≤ 0.25 ms", f"{fmt(p / 1000 if p is not None else None, 2)} ms", None if p is None else p <= 250)
    # streams and fan-out (issue 17's thresholds): with the start-up table above, the figures
    # "nothing gets slower" compares run to run
    tg_streams = sorted((s for s in streams if s["label"].startswith("toolgate")), key=lambda s: (s["label"], s["requested"]))
    for s in tg_streams:
        n, lb = s["requested"], s["label"]
        if s.get("kb_per_session") is not None:
            row(f"≤ 8 KB per idle legacy session ({lb}, {n:,})", f"{fmt(s.get('kb_per_session'), 1)} KB", s["kb_per_session"] <= 8)
        row(f"≤ 10 KB per open stream ({lb}, {n:,})", f"{fmt(s.get('kb_per_stream'), 1)} KB", (s.get("kb_per_stream") or 1e9) <= 10)
        row(f"{n:,} streams held ({lb})", f"{s['streams_still_open']:,}", s["streams_still_open"] == n)
        limit = {1000: 10, 10000: 100}.get(n)
        if limit and s.get("fanout"):
            p99 = med([f.get("p99_ms") for f in s["fanout"]])
            row(f"fan-out p99 ≤ {limit} ms to {n:,} listeners ({lb})", f"{fmt(p99, 1)} ms", None if p99 is None else p99 <= limit)
    if not any(s["requested"] >= 50000 and s["streams_still_open"] == s["requested"] for s in tg_streams):
        row("50,000 streams held", "not measured in this run", None)
    print("\nNot judged from this run (BENCHMARKS.md, \"Targets\"): the audit's time per call "
          "(benches/audit.sh), the new paths and the gateway comparison (benches/ab.sh, "
          "benches/authserver.rs, benches/upstream.sh).")
    if not check:
        return 0
    problems = smoke_problems(dirs, load, streams, startup)
    for p in problems:
        print(f"smoke test: {p}", file=sys.stderr)
    return 1 if problems else 0


def smoke_problems(dirs, load, streams, startup):
    """What makes a run unusable: missing or failed measurements, never a slow figure."""
    problems = []
    targets = []
    for d in dirs:
        env = Path(d) / "env.txt"
        for line in env.read_text().splitlines() if env.exists() else []:
            if line.startswith("targets:"):
                targets += line.split(":", 1)[1].split()
    for t in targets:
        runs = [r for r in load if r["label"] == t]
        if not runs:
            problems.append(f"{t}: no load results (it did not start or answer; see the server log)")
        for r in runs:
            if r.get("errors") or not r.get("rps"):
                problems.append(f"{t} c={r['conns']}: {r.get('errors')} errors, {r.get('rps')} req/s: {r.get('error_samples')}")
    if not streams:
        problems.append("no stream results")
    for s in streams:
        if s["streams_still_open"] != s["requested"]:
            problems.append(f"{s['label']}: {s['streams_still_open']} of {s['requested']} streams open: {s.get('error_samples')}")
        for f in s.get("fanout") or []:
            if f.get("received") != f.get("streams_open"):
                problems.append(f"{s['label']}: fan-out reached {f.get('received')} of {f.get('streams_open')} streams")
    if not startup or any(s.get("ready_ms") is None for s in startup):
        problems.append("a start-up run did not reach ready")
    return problems


if __name__ == "__main__":
    sys.exit(main())
