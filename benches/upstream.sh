#!/usr/bin/env bash
# toolgate in front of an upstream MCP server vs that upstream directly. On loopback, with the
# load generator (mcpload, ../shared/bench) pinned to one core and the servers to another:
#   direct   mcpload -> rmcp (the official Rust SDK peer of ../shared/bench), tool calculate_sum
#   through  mcpload -> toolgate -> rmcp, tool rs_calculate_sum ([upstreams.rs], prefix "rs_")
# tools/call throughput, p50 and p99 at each connection count (64 and 1 by default), ROUNDS
# times, the two cases interleaved (the order alternates each round: direct first in odd
# rounds, through first in even ones); fresh rmcp and toolgate processes each round. Prints the
# medians, the through/direct throughput ratio at the highest connection count and the p50 that
# toolgate adds at c=1, against the targets (through >= 0.80 of direct, < 100 us added).
#
# toolgate runs with auth off, rate limits off, the audit log off (as benches/config/core.toml),
# no tool packs, the admin listener on loopback (only to see the upstream connected), and one
# upstream `rs` = rmcp (allow_private = true; upstream concurrency as configured by
# UPSTREAM_CONCURRENCY, toolgate's default 32 when unset). Protocol 2025-11-25 on both legs by
# default: mcpload makes one session per connection; toolgate (upstreams.rs.protocol = "legacy")
# makes one session to rmcp (initialize + initialized) and its GET stream, and sends every call
# as a POST on that session. UPSTREAM_PROTOCOL=auto lets toolgate find that rmcp (3.9) also
# speaks 2026-07-28 and use it on its leg (stateless: no session, `_meta` on every request).
#
# RMCP_MODE=stateless-json works too (rmcp answers with JSON bodies and issues no session; toolgate
# then sends no session id).
#
# With the default pinning toolgate and rmcp SHARE the server core in the "through" case (each
# tokio runtime sizes itself to one worker thread): the ratio then includes toolgate's CPU time
# taken from rmcp. TG_CPU / UP_CPU / PIN=0 try other splits.
#
# mcpload calls `calculate_sum` only; this script builds a copy of ../shared/bench/loadgen as
# `mcpload-tool` whose tool name comes from MCPLOAD_TOOL (the one change; the same binary
# serves both cases), rebuilt only when its source changes. Everything built goes under
# BENCH_HOME, nothing into ../shared/bench.
#
#   benches/upstream.sh            the full run: c=64 and c=1, 10 s each, 3 rounds (~3 min)
#   benches/upstream.sh --short    a smoke test: every step at tiny durations, one round
#
# Environment (defaults in brackets; the full run's first, then --short's):
#   SHARED_BENCH [../shared/bench]  BENCH_HOME [/tmp/mcp-bench]
#   TOOLGATE_BIN    a toolgate release binary (default: cargo build --release here)
#   CONNS ["64 1" | "16 1"]  DURATION [10 | 1] s  WARMUP [2 | 0.5] s  ROUNDS [3 | 1]
#   RMCP_MODE [stateful-sse]  stateful-sse | stateless-sse | stateless-json (peers/peers.sh)
#   UPSTREAM_CONCURRENCY []   upstreams.rs.concurrency (unset: toolgate's default, 32)
#   UPSTREAM_PROTOCOL [legacy]  upstreams.rs.protocol: legacy | auto | 2026-07-28
#   PIN [auto] (0 = no taskset)  LOADGEN_CPU [0]  SERVER_CPU [1]
#   TG_CPU [$SERVER_CPU]  UP_CPU [$SERVER_CPU]   toolgate's and rmcp's core
#   REBUILD_PEER [0] (1: rebuild the rmcp peer even if built)  RESULTS [$BENCH_HOME/results/upstream-<time>]
#   QUIET_WAIT [300 | 0]  before each direct/through pair, wait up to this many seconds for the machine to be
#                    idle (other processes under QUIET_PCT [15] % of a core over 3 s); a shared
#                    machine's compiles otherwise land in the runs (others' CPU % in the table)
#   KEEP_RUNNING [0]  1: leave both servers up after the last round (pids printed), for profiling
set -uo pipefail

short=0
case "${1:-}" in
  --short) short=1 ;;
  "") ;;
  -h | --help) sed -n '2,46s/^# \{0,1\}//p' "$0" && exit 0 ;;
  *) sed -n '2,46s/^# \{0,1\}//p' "$0" >&2 && exit 2 ;;
esac

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED_BENCH=${SHARED_BENCH:-$REPO/../shared/bench}
[[ -f $SHARED_BENCH/peers/peers.sh ]] || { echo "no peers at $SHARED_BENCH (set SHARED_BENCH)" >&2; exit 2; }
SHARED_BENCH=$(cd "$SHARED_BENCH" && pwd)
export BENCH_DIR=$SHARED_BENCH
# shellcheck source=/dev/null
source "$SHARED_BENCH/peers/peers.sh" # build_rust peer_cmd port_busy setup_pinning log REL MCPLOAD

if [[ $short == 1 ]]; then
  CONNS=${CONNS:-"16 1"} DURATION=${DURATION:-1} WARMUP=${WARMUP:-0.5} ROUNDS=${ROUNDS:-1} QUIET_WAIT=${QUIET_WAIT:-0}
else
  CONNS=${CONNS:-"64 1"} DURATION=${DURATION:-10} WARMUP=${WARMUP:-2} ROUNDS=${ROUNDS:-3} QUIET_WAIT=${QUIET_WAIT:-300}
fi
QUIET_PCT=${QUIET_PCT:-15}
RMCP_MODE=${RMCP_MODE:-stateful-sse}
UPSTREAM_CONCURRENCY=${UPSTREAM_CONCURRENCY:-}
UPSTREAM_PROTOCOL=${UPSTREAM_PROTOCOL:-legacy}
KEEP_RUNNING=${KEEP_RUNNING:-0}
RESULTS=${RESULTS:-$BENCH_HOME/results/upstream-$(date +%Y%m%d-%H%M%S)}
PROTO=2025-11-25
peer_cmd "rmcp-$RMCP_MODE" 1 >/dev/null || { echo "unknown RMCP_MODE $RMCP_MODE" >&2; exit 2; }
[[ $RMCP_MODE == *2026* ]] && { echo "RMCP_MODE: toolgate's upstream client speaks 2025-11-25" >&2; exit 2; }

free_port() { # first port >= $1 nobody listens on, skipping $2
  local p=$1
  while port_busy "$p" || [[ $p == "${2:-}" ]]; do p=$((p + 1)); done
  echo "$p"
}
UP_PORT=$(free_port 18760)
TG_PORT=$(free_port 18780)
ADMIN_PORT=$(free_port $((TG_PORT + 1)) "$TG_PORT")
RUN_DIR=$(mktemp -d /tmp/toolgate-upstream.XXXXXX)
mkdir -p "$RESULTS" "$BENCH_HOME/logs"
ulimit -n 65536 2>/dev/null || true

UP_PID="" TG_PID=""
stop_pid() { # pid: SIGINT, then SIGKILL after 5 s
  [[ -z $1 ]] && return 0
  kill -INT "$1" 2>/dev/null
  local i
  for i in $(seq 1 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}
stop_all() { stop_pid "$TG_PID"; stop_pid "$UP_PID"; TG_PID="" UP_PID=""; }
cleanup() { if [[ $KEEP_RUNNING == 1 ]]; then log "kept: $RUN_DIR"; else stop_all; rm -rf "$RUN_DIR"; fi; }
trap 'KEEP_RUNNING=0; cleanup; exit 130' INT TERM
trap cleanup EXIT

# ------------------------------------------------------------------ 1. build
# mcpload with a configurable tool name: ../shared/bench/loadgen with every call's literal
# "calculate_sum" replaced by MCPLOAD_TOOL (read once), as its own binary `mcpload-tool`.
LOAD=$REL/mcpload-tool
build_mcpload_tool() {
  local src=$BENCH_HOME/src/mcpload-tool sum
  sum=$( (echo "patch v1"; cat "$SHARED_BENCH/loadgen/Cargo.toml" "$SHARED_BENCH/loadgen/src/main.rs") | sha256sum | cut -c1-16)
  if [[ -x $LOAD && -f $src/.source-sum && $(cat "$src/.source-sum") == "$sum" ]]; then return 0; fi
  rm -rf "$src" && mkdir -p "$src" && cp -r "$SHARED_BENCH/loadgen/." "$src/" && chmod -R u+w "$src"
  [[ -f $BENCH_HOME/src/loadgen/Cargo.lock ]] && cp "$BENCH_HOME/src/loadgen/Cargo.lock" "$src/"
  sed -i 's/^name = "mcpload"$/name = "mcpload-tool"/' "$src/Cargo.toml"
  sed -i 's/, "calculate_sum"/, tool_name()/g' "$src/src/main.rs"
  cat >>"$src/src/main.rs" <<'EOF'

/// toolgate's benches/upstream.sh: the tool every tools/call names (MCPLOAD_TOOL, default
/// calculate_sum), read once.
fn tool_name() -> &'static str {
    static TOOL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOOL.get_or_init(|| std::env::var("MCPLOAD_TOOL").unwrap_or_else(|_| "calculate_sum".to_owned()))
}
EOF
  if [[ $(grep -c 'tool_name()' "$src/src/main.rs") -lt 5 ]]; then
    log "the mcpload patch no longer applies (../shared/bench/loadgen changed); see $src/src/main.rs"
    return 1
  fi
  log "cargo build --release (mcpload-tool)"
  (cd "$src" && CARGO_TARGET_DIR="$BENCH_HOME/target" cargo build --release --quiet) >"$BENCH_HOME/logs/build-mcpload-tool.log" 2>&1 ||
    { log "BUILD FAILED: mcpload-tool (see $BENCH_HOME/logs/build-mcpload-tool.log)"; tail -20 "$BENCH_HOME/logs/build-mcpload-tool.log" >&2; return 1; }
  echo "$sum" >"$src/.source-sum"
}
build_mcpload_tool || exit 2
# the rmcp peer: reused when already built (run.sh, benches/run.sh build the same one)
if [[ ! -x $REL/peer-rmcp || ${REBUILD_PEER:-0} == 1 ]]; then build_rust "$PEERS_DIR/rmcp" || exit 2; fi
if [[ -z ${TOOLGATE_BIN:-} ]]; then
  log "cargo build --release --bin toolgate"
  (cd "$REPO" && cargo build --release --locked --quiet --bin toolgate) || exit 2
  TOOLGATE_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/toolgate"
fi
[[ -x $TOOLGATE_BIN ]] || { log "no toolgate binary at $TOOLGATE_BIN"; exit 2; }
setup_pinning # PIN_LOADGEN, PIN_SERVER, PINNED, LOADGEN_CPU, SERVER_CPU
TG_CPU=${TG_CPU:-$SERVER_CPU}
UP_CPU=${UP_CPU:-$SERVER_CPU}
PIN_TG=() PIN_UP=()
if [[ ${#PIN_SERVER[@]} -gt 0 ]]; then
  PIN_TG=(taskset -c "$TG_CPU") PIN_UP=(taskset -c "$UP_CPU")
  PINNED="load generator on CPU $LOADGEN_CPU, toolgate on CPU $TG_CPU, rmcp on CPU $UP_CPU"
fi

# ------------------------------------------------------------------ toolgate's configuration
cat >"$RUN_DIR/toolgate.toml" <<EOF
[server]
bind = "127.0.0.1:$TG_PORT"

[storage]
data_dir = "$RUN_DIR/data"

[auth]
mode = "off"

[limits]
enabled = false

[audit]
enabled = false

[sessions]
max_per_client = 100000

[sse]
max_streams_per_client = 100000

[admin]
enabled = true
bind = "127.0.0.1:$ADMIN_PORT"

[tools.packs]
examples = false
bench = false

[log]
format = "json"
filter = "warn"

[upstreams.rs]
url = "http://127.0.0.1:$UP_PORT/mcp"
allow_private = true
prefix = "rs_"
protocol = "$UPSTREAM_PROTOCOL"
EOF
[[ -n $UPSTREAM_CONCURRENCY ]] && echo "concurrency = $UPSTREAM_CONCURRENCY" >>"$RUN_DIR/toolgate.toml"

{
  echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "pinning: $PINNED"
  echo "mode: $([[ $short == 1 ]] && echo short || echo full); CONNS='$CONNS' DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS"
  echo "upstream: rmcp-$RMCP_MODE on :$UP_PORT (protocol $PROTO), upstreams.rs.concurrency=${UPSTREAM_CONCURRENCY:-default (32)}"
  echo "toolgate: $("$TOOLGATE_BIN" --version 2>/dev/null) ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)$(git -C "$REPO" diff --quiet 2>/dev/null || echo +dirty) tree), $TOOLGATE_BIN, :$TG_PORT"
  echo "rustc: $(rustc --version 2>/dev/null)"
} >"$RESULTS/env.txt"
cp "$RUN_DIR/toolgate.toml" "$RESULTS/toolgate.toml"
cat "$RESULTS/env.txt" >&2

# ------------------------------------------------------------------ start / readiness
ready() { # url tool -> 0 when one handshake + tools/call succeeds within 30 s
  local i
  for i in $(seq 1 150); do
    MCPLOAD_TOOL=$2 "$LOAD" probe --url "$1" --proto "$PROTO" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

start_servers() {
  local cmd
  cmd=$(peer_cmd "rmcp-$RMCP_MODE" "$UP_PORT")
  # shellcheck disable=SC2086
  "${PIN_UP[@]}" $cmd >"$BENCH_HOME/logs/upstream-rmcp.log" 2>&1 &
  UP_PID=$!
  ready "http://127.0.0.1:$UP_PORT/mcp" calculate_sum ||
    { log "rmcp did not start:"; tail -5 "$BENCH_HOME/logs/upstream-rmcp.log" >&2; return 1; }
  rm -rf "$RUN_DIR/data" && mkdir -p "$RUN_DIR/data"
  "${PIN_TG[@]}" "$TOOLGATE_BIN" serve --config "$RUN_DIR/toolgate.toml" >"$BENCH_HOME/logs/upstream-toolgate.log" 2>&1 &
  TG_PID=$!
  # the upstream connected and its tool served (admin API), then a call through
  local i state=""
  for i in $(seq 1 150); do
    state=$(curl -fsS "http://127.0.0.1:$ADMIN_PORT/admin/upstreams" 2>/dev/null)
    jq -e '[.. | objects | select(.name? == "rs" and .state? == "connected" and (.tools? // 0) >= 1)] | length > 0' \
      <<<"$state" >/dev/null 2>&1 && break
    kill -0 "$TG_PID" 2>/dev/null || break
    sleep 0.2
  done
  jq -e '[.. | objects | select(.name? == "rs" and .state? == "connected")] | length > 0' <<<"$state" >/dev/null 2>&1 ||
    { log "toolgate did not connect to rmcp; admin said: ${state:-nothing}"; tail -5 "$BENCH_HOME/logs/upstream-toolgate.log" >&2; return 1; }
  echo "$state" >"$RESULTS/admin-upstreams.json"
  ready "http://127.0.0.1:$TG_PORT/mcp" rs_calculate_sum || {
    log "toolgate does not serve rs_calculate_sum:"
    MCPLOAD_TOOL=rs_calculate_sum "$LOAD" probe --url "http://127.0.0.1:$TG_PORT/mcp" --proto "$PROTO" >&2
    return 1
  }
}

ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; } # utime+stime, clock ticks
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; } # the machine's busy ticks

# run CASE ROUND CONNS: one mcpload run; its JSON line, plus toolgate's, rmcp's and the whole
# machine's CPU % (100 = one core) over the measured window (sampled here, after the warm-up),
# appended to load.jsonl. others_cpu_pct = machine - toolgate - rmcp - load generator: what other
# processes took (noise).
run() {
  local case=$1 round=$2 c=$3 url tool out tg0 up0 m0 t0 tg1 up1 m1 t1 hz
  if [[ $case == direct ]]; then url="http://127.0.0.1:$UP_PORT/mcp" tool=calculate_sum
  else url="http://127.0.0.1:$TG_PORT/mcp" tool=rs_calculate_sum; fi
  out="$RUN_DIR/run.json"
  MCPLOAD_TOOL=$tool "${PIN_LOADGEN[@]}" "$LOAD" load --url "$url" --proto "$PROTO" --conns "$c" \
    --duration "$DURATION" --warmup "$WARMUP" --pid "$([[ $case == direct ]] && echo "$UP_PID" || echo "$TG_PID")" \
    --label "$case" --round "$round" --quiet >"$out" &
  local lp=$!
  sleep "$WARMUP"
  tg0=$(ticks "$TG_PID") up0=$(ticks "$UP_PID") m0=$(busy) t0=$(date +%s.%N)
  wait "$lp"
  tg1=$(ticks "$TG_PID") up1=$(ticks "$UP_PID") m1=$(busy) t1=$(date +%s.%N)
  hz=$(getconf CLK_TCK)
  pct() { awk -v a="$1" -v b="$2" -v s="$t0" -v e="$t1" -v hz="$hz" 'BEGIN{printf "%.0f", (b-a)/hz/(e-s)*100}'; }
  jq -c --argjson tg "$(pct "$tg0" "$tg1")" --argjson up "$(pct "$up0" "$up1")" --argjson m "$(pct "$m0" "$m1")" \
    --arg mode "rmcp-$RMCP_MODE" --arg pin "$PINNED" \
    '. + {toolgate_cpu_pct: $tg, rmcp_cpu_pct: $up, machine_cpu_pct: $m,
          others_cpu_pct: ([$m - $tg - $up - (.loadgen_cpu_pct // 0), 0] | max), upstream: $mode, pinning: $pin}' "$out" |
    tee -a "$RESULTS/load.jsonl" |
    jq -r '"  \(.label)\tr\(.round)\tc=\(.conns)\t\(.rps) req/s\tp50 \(.p50_us) us\tp99 \(.p99_us) us\terr \(.errors)\tcpu % toolgate \(.toolgate_cpu_pct) rmcp \(.rmcp_cpu_pct) loadgen \(.loadgen_cpu_pct) others \(.others_cpu_pct)"' >&2
}

wait_quiet() { # up to QUIET_WAIT s until the machine's busy CPU over 3 s is under QUIET_PCT % of a core
  # (the servers, if up, are idle then: what is measured is other processes)
  local waited=0 b0 b1 pct hz
  hz=$(getconf CLK_TCK)
  while [[ $waited -lt $QUIET_WAIT ]]; do
    b0=$(busy); sleep 3; b1=$(busy); waited=$((waited + 3))
    pct=$(((b1 - b0) * 100 / hz / 3))
    [[ $pct -lt $QUIET_PCT ]] && { [[ $waited -gt 3 ]] && log "machine idle after ${waited} s"; return 0; }
    [[ $((waited % 30)) == 0 ]] && log "waiting for the machine to be idle (busy ${pct}% of a core)"
  done
  [[ $QUIET_WAIT -gt 0 ]] && log "the machine stayed busy for ${QUIET_WAIT} s; measuring anyway"
  return 0
}

# ------------------------------------------------------------------ 2. the runs
for r in $(seq 1 "$ROUNDS"); do
  start_servers || { stop_all; exit 1; }
  log "round $r/$ROUNDS: rmcp pid $UP_PID, toolgate pid $TG_PID"
  order="direct through"
  [[ $((r % 2)) == 0 ]] && order="through direct"
  for c in $CONNS; do
    wait_quiet # before each back-to-back pair (the servers are up and idle meanwhile)
    for case in $order; do run "$case" "$r" "$c"; done
  done
  [[ $KEEP_RUNNING == 1 && $r == "$ROUNDS" ]] && break
  stop_all
done

# ------------------------------------------------------------------ 3. summary
python3 - "$RESULTS/load.jsonl" <<'EOF' | tee "$RESULTS/summary.md"
import json, sys
from statistics import median
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
conns = sorted({r["conns"] for r in rows}, reverse=True)
def pick(case, c): return [r for r in rows if r["label"] == case and r["conns"] == c]
def per_core(r): # req/s per core of server CPU (toolgate + rmcp): the figure least moved by noise
    cpu = (r["toolgate_cpu_pct"] + r["rmcp_cpu_pct"]) / 100
    return r["rps"] / cpu if cpu > 0 else 0.0
def med(rs, k): return median(r[k] for r in rs)
print("| case | conns | req/s | p50 us | p99 us | toolgate CPU % | rmcp CPU % | req/s per server core | others' CPU % | rounds: req/s | errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
for c in conns:
    for case in ("direct", "through"):
        rs = pick(case, c)
        if not rs: continue
        tg = f"{med(rs, 'toolgate_cpu_pct'):.0f}" if case == "through" else "-"
        print(f"| {case} | {c} | {med(rs, 'rps'):,.0f} | {med(rs, 'p50_us'):,.0f} | {med(rs, 'p99_us'):,.0f} | {tg} | "
              f"{med(rs, 'rmcp_cpu_pct'):.0f} | {median(per_core(r) for r in rs):,.0f} | {med(rs, 'others_cpu_pct'):.0f} | "
              + ", ".join(f"{r['rps']:,.0f}" for r in rs) + f" | {sum(r['errors'] for r in rs)} |")
def per_round(c, f):
    d = {r["round"]: r for r in pick("direct", c)}
    t = {r["round"]: r for r in pick("through", c)}
    return [f(d[k], t[k]) for k in sorted(d) if k in t]
def fmt(xs, spec): return ", ".join(format(x, spec) for x in xs)
print("\nMedians over rounds; ratios are per round (the two runs back to back), then their median.")
hi, lo = conns[0], conns[-1]
ratios = per_round(hi, lambda d, t: t["rps"] / d["rps"])
if ratios:
    m = median(ratios)
    core = per_round(hi, lambda d, t: per_core(t) / per_core(d) if per_core(d) else 0.0)
    print(f"throughput through/direct at c={hi}: {m:.3f} (rounds: {fmt(ratios, '.3f')}); per server core: "
          f"{median(core):.3f} (rounds: {fmt(core, '.3f')})")
    print(f"  toolgate in front costs {100 * (1 - m):.1f}% of the direct throughput; target < 20%: "
          + ("met" if m >= 0.80 else "MISSED"))
added = per_round(lo, lambda d, t: t["p50_us"] - d["p50_us"])
if added:
    m = median(added)
    target = ("; target < 100 us: " + ("met" if m < 100 else "MISSED")) if lo == 1 else ""
    print(f"p50 added by toolgate at c={lo}: {m:.0f} us (rounds: {fmt(added, '.0f')}){target}")
noisy = [f"{r['label']} r{r['round']} c={r['conns']} ({r['others_cpu_pct']}%)" for r in rows if r["others_cpu_pct"] > 20]
if noisy: print("runs where other processes took > 20% of a core: " + ", ".join(noisy))
errors = sum(r["errors"] for r in rows)
if errors: print(f"ERRORS: {errors} failed calls in the runs")
EOF
log "raw results: $RESULTS/load.jsonl"
[[ $KEEP_RUNNING == 1 ]] && log "still running: rmcp pid $UP_PID (:$UP_PORT), toolgate pid $TG_PID (:$TG_PORT)"
[[ $(jq -s 'map(.errors) | add' "$RESULTS/load.jsonl") == 0 ]]
