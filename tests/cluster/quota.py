#!/usr/bin/env python3
"""Check (c) of tests/cluster/topology.sh: one client's quota holds across the cluster.

One client (one token, so one principal) sends --requests stateless 2026-07-28 `tools/list`
requests through the load balancer, which spreads them round robin over the replicas. With
`limits.backend = "redis"` the replicas share one bucket, so about --burst are admitted (plus
what the bucket refills while the run lasts); with `local` each replica has its own, so about
replicas × burst. Every refusal must be 429 with Retry-After and a JSON-RPC error carrying
data.retryAfterMs. Prints one JSON line; exit status 0 only if the expectation (--expect) held.

    MCP_TOKEN=... $HARNESS_DIR/py-mcp1/bin/python tests/cluster/quota.py --url http://127.0.0.1:LB/mcp \\
        --burst 20 --per-minute 60 --replicas 3 --expect cluster
"""

import argparse
import asyncio
import json
import math
import os
import sys
import time
from typing import Any

import httpx

from common import modern_request


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"expect": args.expect, "requests": args.requests, "errors": []}
    admitted = refused = 0
    other: dict[str, int] = {}
    bad_refusals: list[str] = []
    retry_after: list[int] = []
    headers = {"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"}
    async with httpx.AsyncClient(headers=headers, timeout=10.0) as http:
        sem = asyncio.Semaphore(args.concurrency)

        async def one(i: int) -> None:
            nonlocal admitted, refused
            h, body = modern_request(i, "tools/list")
            h["X-Request-Id"] = f"{args.rid_prefix}-{i}"
            async with sem:
                try:
                    res = await http.post(args.url, headers=h, content=body)
                except httpx.HTTPError as e:
                    other[type(e).__name__] = other.get(type(e).__name__, 0) + 1
                    return
            if res.status_code == 200:
                admitted += 1
            elif res.status_code == 429:
                refused += 1
                ra = res.headers.get("retry-after")
                try:
                    data = res.json()["error"]["data"]
                    ok = ra is not None and ra.isdigit() and int(ra) >= 1 and int(data["retryAfterMs"]) > 0
                except Exception:  # noqa: BLE001
                    ok = False
                if ok:
                    retry_after.append(int(ra))
                else:
                    bad_refusals.append(f"retry-after={ra!r} body={res.text[:200]}")
            else:
                key = str(res.status_code)
                other[key] = other.get(key, 0) + 1

        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(args.requests)))
        elapsed = time.monotonic() - started
    refill = args.per_minute / 60 * elapsed
    out.update(admitted=admitted, refused=refused, other=other, elapsedS=round(elapsed, 2),
               refillDuringRun=round(refill, 2), retryAfterS=sorted(set(retry_after)))
    if other:
        out["errors"].append(f"answers other than 200/429: {other}")
    if bad_refusals:
        out["errors"].append(f"{len(bad_refusals)} refusal(s) without Retry-After / data.retryAfterMs, e.g. {bad_refusals[0]}")
    if args.expect == "cluster":
        lo, hi = args.burst - 1, args.burst + math.ceil(refill) + 1
        out["expectedAdmitted"] = [lo, hi]
        if not lo <= admitted <= hi:
            out["errors"].append(f"admitted {admitted} of {args.requests}, expected {lo}..{hi} (one shared bucket of burst {args.burst}); "
                                 f"≈{args.replicas}×{args.burst} means the replicas count separately")
    else:
        lo = min(args.requests, 2 * args.burst)
        out["expectedAdmitted"] = [lo, args.requests]
        if admitted < lo:
            out["errors"].append(f"admitted {admitted}, expected at least {lo} with per-replica buckets")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--requests", type=int, default=90)
    p.add_argument("--concurrency", type=int, default=3)
    p.add_argument("--burst", type=int, required=True)
    p.add_argument("--per-minute", type=int, required=True)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--expect", choices=["cluster", "local"], default="cluster")
    p.add_argument("--rid-prefix", default="quota")
    args = p.parse_args()
    try:
        out = asyncio.run(asyncio.wait_for(main_async(args), 60))
    except Exception as e:  # noqa: BLE001
        out = {"errors": [f"{type(e).__name__}: {e}"]}
    out["ok"] = not out["errors"]
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
