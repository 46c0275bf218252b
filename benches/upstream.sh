#!/usr/bin/env bash
# toolgate, and the gateways users would pick instead, in front of an upstream MCP server vs that
# upstream directly. On loopback, with the load generator (mcpload, ../shared/bench) pinned to one
# core and the servers to another:
#   direct          mcpload -> rmcp (the official Rust SDK peer of ../shared/bench), tool calculate_sum
#   through         mcpload -> toolgate -> rmcp, tool rs_calculate_sum ([upstreams.rs], prefix "rs_"),
#                   audit off (the name and case of the earlier runs, so their figures compare)
#   toolgate-audit  the same with the audit log on at its default durability ([audit] enabled = true,
#                   no durability key: sync, SQLite in the data dir): what the zero-loss audit costs
#   contextforge    mcpload -> ContextForge (PyPI mcp-contextforge-gateway, pinned by
#                   ../shared/bench/peers/gateways/contextforge.sh) -> rmcp, tool
#                   upstream-calculate-sum on a virtual server, with its bearer token
#   fastmcp-proxy   mcpload -> FastMCP's create_proxy (PyPI fastmcp, pinned by
#                   ../shared/bench/peers/gateways/fastmcp-proxy.sh) -> rmcp, tool calculate_sum
# The gateway cases are chosen by GATEWAYS. For each round and each gateway: a fresh rmcp and a
# fresh gateway, then at each of its connection counts a direct run and a run through the gateway
# back to back (direct first in odd rounds, the gateway first in even ones); each gateway runs on
# TG_CPU, as toolgate does. tools/call throughput, p50 and p99, ROUNDS times; prints the medians,
# and per gateway the p50 it adds at the lowest of GW_CONNS (c=1) and its throughput against
# direct at the highest (c=16), each from the back-to-back pairs. toolgate (audit off) also runs
# at CONNS (64 and 1): the through/direct throughput ratio at the highest and the p50 added at
# c=1 are judged against their targets (through >= 0.80 of direct, < 100 us added).
#
# toolgate runs with auth off, rate limits off, the audit log off (as benches/config/core.toml)
# or on (toolgate-audit), no tool packs, the admin listener on loopback (only to see the upstream
# connected), and one upstream `rs` = rmcp (allow_private = true; upstream concurrency as
# configured by UPSTREAM_CONCURRENCY, toolgate's default 32 when unset). Protocol 2025-11-25 on
# both legs by default: mcpload makes one session per connection; toolgate
# (upstreams.rs.protocol = "legacy") makes one session to rmcp (initialize + initialized) and its
# GET stream, and sends every call as a POST on that session. UPSTREAM_PROTOCOL=auto lets
# toolgate find that rmcp (3.9) also speaks 2026-07-28 and use it on its leg (stateless: no
# session, `_meta` on every request). ContextForge (stateless sessions: no session id) and
# FastMCP (a session per connection; a fresh upstream client and session per forwarded call)
# run with the defaults of their scripts; ContextForge stores the upstream's URL as localhost,
# which rmcp accepts. A Python gateway that cannot be installed or started is logged, left out
# of the later rounds and reported (the run then exits 1); the others still run.
#
# RMCP_MODE=stateless-json works too (rmcp answers with JSON bodies and issues no session; toolgate
# then sends no session id).
#
# With the default pinning each gateway and rmcp SHARE the server core (each tokio runtime sizes
# itself to one worker thread; the Python gateways and ContextForge's worker processes are pinned
# there too): the ratio then includes the gateway's CPU time taken from rmcp. TG_CPU / UP_CPU /
# PIN=0 try other splits. A gateway's CPU % is its process group's (ContextForge forks helpers).
#
# mcpload calls `calculate_sum` only; this script builds a copy of ../shared/bench/loadgen as
# `mcpload-tool` whose tool name comes from MCPLOAD_TOOL (the one change; the same binary
# serves every case; the bearer token comes from MCPLOAD_TOKEN), rebuilt only when its source
# changes. Everything built or installed goes under BENCH_HOME, nothing into ../shared/bench.
#
#   benches/upstream.sh            the full run: 4 gateways, 10 s per run, 3 rounds (~15 min)
#   benches/upstream.sh --short    a smoke test: toolgate only, tiny durations, one round (no PyPI)
#
# Environment (defaults in brackets; the full run's first, then --short's):
#   SHARED_BENCH [../shared/bench]  BENCH_HOME [/tmp/mcp-bench]
#   TOOLGATE_BIN    a toolgate release binary (default: cargo build --release here)
#   GATEWAYS ["toolgate toolgate-audit contextforge fastmcp-proxy" | "toolgate"]
#   GATEWAYS_DIR [$SHARED_BENCH/peers/gateways]  contextforge.sh and fastmcp-proxy.sh
#   CONNS ["64 1" | "16 1"]  toolgate's (audit off) connection counts, as in the earlier runs
#   GW_CONNS ["16 1"]        every gateway's (toolgate's runs are CONNS and these, each once)
#   DURATION [10 | 1] s  WARMUP [2 | 0.5] s  ROUNDS [3 | 1]
#   RMCP_MODE [stateful-sse]  stateful-sse | stateless-sse | stateless-json (peers/peers.sh)
#   UPSTREAM_CONCURRENCY []   upstreams.rs.concurrency (unset: toolgate's default, 32)
#   UPSTREAM_PROTOCOL [legacy]  upstreams.rs.protocol: legacy | auto | 2026-07-28
#   PIN [auto] (0 = no taskset)  LOADGEN_CPU [0]  SERVER_CPU [1]
#   TG_CPU [$SERVER_CPU]  UP_CPU [$SERVER_CPU]   the gateway's and rmcp's core
#   REBUILD_PEER [0] (1: rebuild the rmcp peer even if built)  RESULTS [$BENCH_HOME/results/upstream-<time>]
#   QUIET_WAIT [300 | 0]  before each direct/gateway pair, wait up to this many seconds for the machine to be
#                    idle (other processes under QUIET_PCT [15] % of a core over 3 s); a shared
#                    machine's compiles otherwise land in the runs (others' CPU % in the table)
#   QUIET_BUDGET [900]  at most this many seconds of such waits in the whole run (then pairs start
#                    without waiting), so a machine that stays busy bounds the run
#   KEEP_RUNNING [0]  1: leave the last gateway and its rmcp up after the last round (pids printed), for profiling
set -uo pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
short=0
case "${1:-}" in
  --short) short=1 ;;
  "") ;;
  -h | --help) usage; exit 0 ;;
  *) usage >&2; exit 2 ;;
esac

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED_BENCH=${SHARED_BENCH:-$REPO/../shared/bench}
[[ -f $SHARED_BENCH/peers/peers.sh ]] || { echo "no peers at $SHARED_BENCH (set SHARED_BENCH)" >&2; exit 2; }
SHARED_BENCH=$(cd "$SHARED_BENCH" && pwd)
export BENCH_DIR=$SHARED_BENCH
# shellcheck source=/dev/null
source "$SHARED_BENCH/peers/peers.sh" # build_rust peer_cmd port_busy setup_pinning log REL MCPLOAD

if [[ $short == 1 ]]; then
  GATEWAYS=${GATEWAYS:-toolgate}
  CONNS=${CONNS:-"16 1"} DURATION=${DURATION:-1} WARMUP=${WARMUP:-0.5} ROUNDS=${ROUNDS:-1} QUIET_WAIT=${QUIET_WAIT:-0}
else
  GATEWAYS=${GATEWAYS:-"toolgate toolgate-audit contextforge fastmcp-proxy"}
  CONNS=${CONNS:-"64 1"} DURATION=${DURATION:-10} WARMUP=${WARMUP:-2} ROUNDS=${ROUNDS:-3} QUIET_WAIT=${QUIET_WAIT:-300}
fi
GW_CONNS=${GW_CONNS:-"16 1"}
GATEWAYS_DIR=${GATEWAYS_DIR:-$SHARED_BENCH/peers/gateways}
QUIET_PCT=${QUIET_PCT:-15}
QUIET_BUDGET=${QUIET_BUDGET:-900}
RMCP_MODE=${RMCP_MODE:-stateful-sse}
UPSTREAM_CONCURRENCY=${UPSTREAM_CONCURRENCY:-}
UPSTREAM_PROTOCOL=${UPSTREAM_PROTOCOL:-legacy}
KEEP_RUNNING=${KEEP_RUNNING:-0}
RESULTS=${RESULTS:-$BENCH_HOME/results/upstream-$(date +%Y%m%d-%H%M%S)}
PROTO=2025-11-25
peer_cmd "rmcp-$RMCP_MODE" 1 >/dev/null || { echo "unknown RMCP_MODE $RMCP_MODE" >&2; exit 2; }
[[ $RMCP_MODE == *2026* ]] && { echo "RMCP_MODE: toolgate's upstream client speaks 2025-11-25" >&2; exit 2; }
for gw in $GATEWAYS; do
  case $gw in
    toolgate | toolgate-audit) ;;
    contextforge | fastmcp-proxy)
      [[ -x $GATEWAYS_DIR/$gw.sh ]] || { echo "GATEWAYS: no $GATEWAYS_DIR/$gw.sh (set GATEWAYS_DIR)" >&2; exit 2; } ;;
    *) echo "GATEWAYS: unknown gateway $gw (toolgate, toolgate-audit, contextforge, fastmcp-proxy)" >&2; exit 2 ;;
  esac
done
for c in $CONNS $GW_CONNS; do [[ $c =~ ^[1-9][0-9]*$ ]] || { echo "CONNS/GW_CONNS: not a count: $c" >&2; exit 2; }; done

free_port() { # first port >= $1 nobody listens on, skipping the others given
  local p=$1
  shift
  while port_busy "$p" || [[ " $* " == *" $p "* ]]; do p=$((p + 1)); done
  echo "$p"
}
UP_PORT=$(free_port 18760)
TG_PORT=$(free_port 18780)
ADMIN_PORT=$(free_port $((TG_PORT + 1)) "$TG_PORT")
GW_PORT=$(free_port $((ADMIN_PORT + 1)) "$TG_PORT" "$ADMIN_PORT") # a Python gateway's
RUN_DIR=$(mktemp -d /tmp/toolgate-upstream.XXXXXX)
mkdir -p "$RESULTS" "$BENCH_HOME/logs"
ulimit -n 65536 2>/dev/null || true

# the gateway of the current block: GW (its name), GW_LABEL (its case in the results), GW_PID
# (toolgate's, or the Python gateway's process group leader), GW_URL, GW_TOOL, GW_TOKEN
UP_PID="" GW="" GW_PID="" GW_LABEL="" GW_URL="" GW_TOOL="" GW_TOKEN=""
stop_pid() { # pid: SIGINT, then SIGKILL after 5 s
  [[ -z $1 ]] && return 0
  kill -INT "$1" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}
stop_gateway() {
  case $GW in
    toolgate*) stop_pid "$GW_PID" ;;
    contextforge | fastmcp-proxy) "$GATEWAYS_DIR/$GW.sh" stop 2>/dev/null ;; # by its pid file (also one left mid-start)
  esac
  GW_PID=""
}
stop_all() { stop_gateway; stop_pid "$UP_PID"; UP_PID=""; }
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
PIN_TG=() PIN_UP=() GW_CPUS=""
if [[ ${#PIN_SERVER[@]} -gt 0 ]]; then
  PIN_TG=(taskset -c "$TG_CPU") PIN_UP=(taskset -c "$UP_CPU") GW_CPUS=$TG_CPU
  PINNED="load generator on CPU $LOADGEN_CPU, the gateway on CPU $TG_CPU, rmcp on CPU $UP_CPU"
fi

# ------------------------------------------------------------------ toolgate's configuration
toolgate_toml() { # audit: false (the case `through`) | true (toolgate-audit: the default durability)
  cat <<EOF
[server]
bind = "127.0.0.1:$TG_PORT"

[storage]
data_dir = "$RUN_DIR/data"

[auth]
mode = "off"

[limits]
enabled = false

[audit]
enabled = $1

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
  [[ -n $UPSTREAM_CONCURRENCY ]] && echo "concurrency = $UPSTREAM_CONCURRENCY"
  return 0
}
toolgate_toml false >"$RUN_DIR/toolgate.toml"
toolgate_toml true >"$RUN_DIR/toolgate-audit.toml"

pinned_version() { sed -n "s/^$2=//p" "$GATEWAYS_DIR/$1.sh" 2>/dev/null; } # the version a gateway script installs
{
  echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "pinning: $PINNED"
  echo "mode: $([[ $short == 1 ]] && echo short || echo full); GATEWAYS='$GATEWAYS' CONNS='$CONNS' GW_CONNS='$GW_CONNS' DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS"
  echo "upstream: rmcp-$RMCP_MODE on :$UP_PORT (protocol $PROTO), upstreams.rs.concurrency=${UPSTREAM_CONCURRENCY:-default (32)}"
  echo "toolgate: $("$TOOLGATE_BIN" --version 2>/dev/null) ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)$(git -C "$REPO" diff --quiet 2>/dev/null || echo +dirty) tree), $TOOLGATE_BIN, :$TG_PORT"
  [[ " $GATEWAYS " == *" contextforge "* ]] && echo "contextforge: mcp-contextforge-gateway $(pinned_version contextforge CF_VERSION) ($GATEWAYS_DIR/contextforge.sh), :$GW_PORT"
  [[ " $GATEWAYS " == *" fastmcp-proxy "* ]] && echo "fastmcp-proxy: fastmcp $(pinned_version fastmcp-proxy FM_VERSION) ($GATEWAYS_DIR/fastmcp-proxy.sh), :$GW_PORT"
  echo "rustc: $(rustc --version 2>/dev/null)"
} >"$RESULTS/env.txt"
cp "$RUN_DIR"/toolgate*.toml "$RESULTS/"
cat "$RESULTS/env.txt" >&2

# ------------------------------------------------------------------ start / readiness
ready() { # url tool [token] -> 0 when one handshake + tools/call succeeds within 30 s
  for _ in $(seq 1 150); do
    MCPLOAD_TOOL=$2 MCPLOAD_TOKEN=${3:-} "$LOAD" probe --url "$1" --proto "$PROTO" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

start_upstream() {
  local cmd
  cmd=$(peer_cmd "rmcp-$RMCP_MODE" "$UP_PORT")
  # shellcheck disable=SC2086
  "${PIN_UP[@]}" $cmd >"$BENCH_HOME/logs/upstream-rmcp.log" 2>&1 &
  UP_PID=$!
  ready "http://127.0.0.1:$UP_PORT/mcp" calculate_sum ||
    { log "rmcp did not start:"; tail -5 "$BENCH_HOME/logs/upstream-rmcp.log" >&2; return 1; }
}

start_toolgate() { # config file (toolgate.toml | toolgate-audit.toml)
  rm -rf "$RUN_DIR/data" && mkdir -p "$RUN_DIR/data"
  "${PIN_TG[@]}" "$TOOLGATE_BIN" serve --config "$RUN_DIR/$1" >"$BENCH_HOME/logs/upstream-$GW.log" 2>&1 &
  GW_PID=$!
  GW_URL="http://127.0.0.1:$TG_PORT/mcp" GW_TOOL=rs_calculate_sum GW_TOKEN=""
  # the upstream connected and its tool served (admin API), then a call through
  local state=""
  for _ in $(seq 1 150); do
    state=$(curl -fsS "http://127.0.0.1:$ADMIN_PORT/admin/upstreams" 2>/dev/null)
    jq -e '[.. | objects | select(.name? == "rs" and .state? == "connected" and (.tools? // 0) >= 1)] | length > 0' \
      <<<"$state" >/dev/null 2>&1 && break
    kill -0 "$GW_PID" 2>/dev/null || break
    sleep 0.2
  done
  jq -e '[.. | objects | select(.name? == "rs" and .state? == "connected")] | length > 0' <<<"$state" >/dev/null 2>&1 ||
    { log "toolgate did not connect to rmcp; admin said: ${state:-nothing}"; tail -5 "$BENCH_HOME/logs/upstream-$GW.log" >&2; return 1; }
  echo "$state" >"$RESULTS/admin-upstreams.json"
}

# A Python gateway through its script in GATEWAYS_DIR (install once, start, register the
# upstream; stdout: KEY=value lines), pinned like toolgate; its pid from the script's pid file.
start_python_gateway() {
  local out pidfile
  out=$(GW_CPUS=$GW_CPUS "$GATEWAYS_DIR/$GW.sh" start "http://127.0.0.1:$UP_PORT/mcp" "$GW_PORT") || return 1
  case $GW in
    contextforge) pidfile=$BENCH_HOME/contextforge/gateway.pid GW_TOOL="$(sed -n 's/^TOOL_PREFIX=//p' <<<"$out")calculate-sum" ;;
    fastmcp-proxy) pidfile=$BENCH_HOME/fastmcp-proxy/proxy.pid GW_TOOL=calculate_sum ;;
  esac
  GW_PID=$(cat "$pidfile" 2>/dev/null)
  GW_URL=$(sed -n 's/^MCP_URL=//p' <<<"$out") GW_TOKEN=$(sed -n 's/^TOKEN=//p' <<<"$out")
  [[ -n $GW_PID && -n $GW_URL ]] || { log "$GW: no pid ($pidfile) or MCP_URL from its script: $out"; return 1; }
}

start_servers() { # gateway -> rmcp, then the gateway in front of it; sets GW*
  GW=$1 GW_PID=""
  GW_LABEL=$([[ $GW == toolgate ]] && echo through || echo "$GW")
  start_upstream || return 1
  case $GW in
    toolgate) start_toolgate toolgate.toml ;;
    toolgate-audit) start_toolgate toolgate-audit.toml ;;
    *) start_python_gateway ;;
  esac || return 1
  ready "$GW_URL" "$GW_TOOL" "$GW_TOKEN" || {
    log "$GW does not serve $GW_TOOL at $GW_URL:"
    MCPLOAD_TOOL=$GW_TOOL MCPLOAD_TOKEN=$GW_TOKEN "$LOAD" probe --url "$GW_URL" --proto "$PROTO" >&2
    return 1
  }
}

# utime+stime clock ticks of a process, and of every process in its group when it leads one
# (a Python gateway's forked workers; toolgate and rmcp lead none here)
ticks() { cat /proc/[0-9]*/stat 2>/dev/null | awk -v p="$1" '{ pid = $1; sub(/^.*\) /, ""); if (pid == p || $3 == p) s += $12 + $13 } END { print s + 0 }'; }
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; } # the machine's busy ticks

# run CASE ROUND CONNS (CASE: direct | gateway): one mcpload run; its JSON line, plus the
# gateway's, rmcp's and the whole machine's CPU % (100 = one core) over the measured window
# (sampled here, after the warm-up), appended to load.jsonl. others_cpu_pct = machine - gateway -
# rmcp - load generator: what other processes took (noise). Direct runs carry the gateway of
# their block (idle then) in `gateway`; toolgate's runs also keep toolgate_cpu_pct.
run() {
  local case=$1 round=$2 c=$3 url tool token label pid out gw0 up0 m0 t0 gw1 up1 m1 t1 hz
  if [[ $case == direct ]]; then url="http://127.0.0.1:$UP_PORT/mcp" tool=calculate_sum token="" label=direct pid=$UP_PID
  else url=$GW_URL tool=$GW_TOOL token=$GW_TOKEN label=$GW_LABEL pid=$GW_PID; fi
  out="$RUN_DIR/run.json"
  MCPLOAD_TOOL=$tool MCPLOAD_TOKEN=$token "${PIN_LOADGEN[@]}" "$LOAD" load --url "$url" --proto "$PROTO" --conns "$c" \
    --duration "$DURATION" --warmup "$WARMUP" --pid "$pid" --label "$label" --round "$round" --quiet >"$out" &
  local lp=$!
  sleep "$WARMUP"
  gw0=$(ticks "$GW_PID") up0=$(ticks "$UP_PID") m0=$(busy) t0=$(date +%s.%N)
  wait "$lp"
  gw1=$(ticks "$GW_PID") up1=$(ticks "$UP_PID") m1=$(busy) t1=$(date +%s.%N)
  hz=$(getconf CLK_TCK)
  pct() { awk -v a="$1" -v b="$2" -v s="$t0" -v e="$t1" -v hz="$hz" 'BEGIN{printf "%.0f", (b-a)/hz/(e-s)*100}'; }
  [[ -s $out ]] || { log "mcpload gave no result ($label c=$c)"; return 1; }
  jq -c --argjson gw "$(pct "$gw0" "$gw1")" --argjson up "$(pct "$up0" "$up1")" --argjson m "$(pct "$m0" "$m1")" \
    --arg gateway "$GW" --arg mode "rmcp-$RMCP_MODE" --arg pin "$PINNED" \
    '. + {gateway: $gateway, gateway_cpu_pct: $gw, rmcp_cpu_pct: $up, machine_cpu_pct: $m,
          others_cpu_pct: ([$m - $gw - $up - (.loadgen_cpu_pct // 0), 0] | max), upstream: $mode, pinning: $pin}
     + (if ($gateway | startswith("toolgate")) then {toolgate_cpu_pct: $gw} else {} end)' "$out" |
    tee -a "$RESULTS/load.jsonl" |
    jq -r '"  \(.label)\tr\(.round)\tc=\(.conns)\t\(.rps) req/s\tp50 \(.p50_us) us\tp99 \(.p99_us) us\terr \(.errors)\tcpu % \(.gateway) \(.gateway_cpu_pct) rmcp \(.rmcp_cpu_pct) loadgen \(.loadgen_cpu_pct) others \(.others_cpu_pct)"
           + (if .errors > 0 then "\n    error sample: \(.error_samples[0] // "")" else "" end)' >&2
}

quiet_spent=0 # seconds waited so far, against QUIET_BUDGET
wait_quiet() { # up to QUIET_WAIT s until the machine's busy CPU over 3 s is under QUIET_PCT % of a core
  # (the servers, if up, are idle then: what is measured is other processes)
  local waited=0 limit=$QUIET_WAIT b0 b1 pct hz
  [[ $((QUIET_BUDGET - quiet_spent)) -lt $limit ]] && limit=$((QUIET_BUDGET - quiet_spent))
  hz=$(getconf CLK_TCK)
  while [[ $waited -lt $limit ]]; do
    b0=$(busy); sleep 3; b1=$(busy); waited=$((waited + 3)) quiet_spent=$((quiet_spent + 3))
    pct=$(((b1 - b0) * 100 / hz / 3))
    [[ $pct -lt $QUIET_PCT ]] && { [[ $waited -gt 3 ]] && log "machine idle after ${waited} s"; return 0; }
    [[ $((waited % 30)) == 0 ]] && log "waiting for the machine to be idle (busy ${pct}% of a core)"
  done
  [[ $waited -gt 0 ]] && log "the machine stayed busy for ${waited} s; measuring anyway"
  [[ $waited -gt 0 && $quiet_spent -ge $QUIET_BUDGET ]] && log "QUIET_BUDGET (${QUIET_BUDGET} s) spent: no more waits"
  return 0
}

conns_of() { # gateway -> its connection counts, highest first, each once
  # shellcheck disable=SC2086
  if [[ $1 == toolgate ]]; then printf '%s\n' $CONNS $GW_CONNS; else printf '%s\n' $GW_CONNS; fi | sort -rnu | xargs
}

# ------------------------------------------------------------------ 2. the runs
t_start=$SECONDS
active=$GATEWAYS failed=""
for r in $(seq 1 "$ROUNDS"); do
  order="direct gateway"
  [[ $((r % 2)) == 0 ]] && order="gateway direct"
  for gw in $active; do
    if ! start_servers "$gw"; then
      stop_all
      [[ $gw == toolgate* ]] && exit 1
      # a Python gateway that does not install or start: left out from here on, reported
      log "$gw: did not start; left out of the run (logs: $BENCH_HOME/logs/gateway-$gw.log, build-$gw.log)"
      active=$(xargs -n1 <<<"$active" | grep -vx "$gw" | xargs) failed="$failed $gw"
      continue
    fi
    log "round $r/$ROUNDS, $gw: rmcp pid $UP_PID, $gw pid $GW_PID"
    for c in $(conns_of "$gw"); do
      wait_quiet # before each back-to-back pair (the servers are up and idle meanwhile)
      for case in $order; do run "$case" "$r" "$c"; done
    done
    [[ $KEEP_RUNNING == 1 && $r == "$ROUNDS" && $gw == "${active##* }" ]] && break
    stop_all
  done
done
log "runs took $((SECONDS - t_start)) s"
[[ -n $failed ]] && echo "${failed# }" >"$RESULTS/failed.txt"

# ------------------------------------------------------------------ 3. summary
touch "$RESULTS/load.jsonl"
python3 - "$RESULTS/load.jsonl" "$GATEWAYS" "$GW_CONNS" "${failed# }" <<'EOF' | tee "$RESULTS/summary.md"
import json, sys
from statistics import median
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
gateways = sys.argv[2].split()
gw_conns = sorted({int(c) for c in sys.argv[3].split()})
failed = sys.argv[4].split()
label = {g: ("through" if g == "toolgate" else g) for g in gateways}
conns = sorted({r["conns"] for r in rows}, reverse=True)
def pick(case, c, gw=None):
    return [r for r in rows if r["label"] == case and r["conns"] == c and (gw is None or r.get("gateway") == gw)]
def cpu(r): # server CPU: rmcp's, plus the gateway's when the call goes through it
    return (r["rmcp_cpu_pct"] + (0 if r["label"] == "direct" else r["gateway_cpu_pct"])) / 100
def per_core(r): # req/s per core of server CPU: the figure least moved by noise
    return r["rps"] / cpu(r) if cpu(r) > 0 else 0.0
def med(rs, k): return median(r[k] for r in rs)
def num(x): return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"
print("| case | conns | req/s | p50 us | p99 us | gateway CPU % | rmcp CPU % | req/s per server core | others' CPU % | rounds: req/s | errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
for c in conns:
    for case in ["direct"] + [label[g] for g in gateways]:
        rs = pick(case, c)
        if not rs: continue
        gcpu = "-" if case == "direct" else f"{med(rs, 'gateway_cpu_pct'):.0f}"
        print(f"| {case} | {c} | {num(med(rs, 'rps'))} | {med(rs, 'p50_us'):,.0f} | {med(rs, 'p99_us'):,.0f} | {gcpu} | "
              f"{med(rs, 'rmcp_cpu_pct'):.0f} | {num(median(per_core(r) for r in rs))} | {med(rs, 'others_cpu_pct'):.0f} | "
              + ", ".join(num(r["rps"]) for r in rs) + f" | {sum(r['errors'] for r in rs)} |")
def per_round(gw, c, f): # f(direct, gateway) for each round's back-to-back pair in gw's block
    d = {r["round"]: r for r in pick("direct", c, gw)}
    t = {r["round"]: r for r in pick(label[gw], c, gw)}
    return [f(d[k], t[k]) for k in sorted(d) if k in t]
def fmt(xs, spec): return ", ".join(format(x, spec) for x in xs)
print("\nMedians over rounds (direct: its runs beside every gateway); ratios and differences are per round "
      "(the two runs back to back), then their median. `through` is toolgate with the audit off.")
tg = sorted({r["conns"] for r in rows if r["label"] == "through"}, reverse=True)
if tg:
    hi, lo = tg[0], tg[-1]
    ratios = per_round("toolgate", hi, lambda d, t: t["rps"] / d["rps"])
    if ratios:
        m = median(ratios)
        core = per_round("toolgate", hi, lambda d, t: per_core(t) / per_core(d) if per_core(d) else 0.0)
        print(f"throughput through/direct at c={hi}: {m:.3f} (rounds: {fmt(ratios, '.3f')}); per server core: "
              f"{median(core):.3f} (rounds: {fmt(core, '.3f')})")
        print(f"  toolgate in front costs {100 * (1 - m):.1f}% of the direct throughput; target < 20%: "
              + ("met" if m >= 0.80 else "MISSED"))
    added = per_round("toolgate", lo, lambda d, t: t["p50_us"] - d["p50_us"])
    if added:
        m = median(added)
        target = ("; target < 100 us: " + ("met" if m < 100 else "MISSED")) if lo == 1 else ""
        print(f"p50 added by toolgate at c={lo}: {m:.0f} us (rounds: {fmt(added, '.0f')}){target}")
print()
lo, hi = gw_conns[0], gw_conns[-1]
for gw in gateways:
    if gw in failed and not any(r.get("gateway") == gw for r in rows):
        print(f"{gw}: did not start (see the log above); not measured")
        continue
    added = per_round(gw, lo, lambda d, t: t["p50_us"] - d["p50_us"])
    ratio = per_round(gw, hi, lambda d, t: t["rps"] / d["rps"] if d["rps"] else 0.0)
    a = f"{median(added):,.0f} µs (rounds: {fmt(added, ',.0f')})" if added else "not measured"
    x = f"{median(ratio):.3g}× direct (rounds: {fmt(ratio, '.3g')})" if ratio else "not measured"
    errs = [r for r in rows if r["label"] == label[gw] and r["errors"]]
    e = f"; ERRORS: {sum(r['errors'] for r in errs)} ({(errs[0].get('error_samples') or [''])[0][:160]})" if errs else ""
    print(f"{gw}{' (through)' if gw == 'toolgate' else ''}: added p50 at c={lo}: {a}; throughput at c={hi}: {x}{e}")
    if gw in failed: print(f"  {gw} failed to start in a later round: fewer rounds")
noisy = [r for r in rows if r["others_cpu_pct"] > 20]
if len(noisy) > 6:
    print(f"other processes took > 20% of a core in {len(noisy)} of {len(rows)} runs "
          f"(median {median(r['others_cpu_pct'] for r in noisy):.0f}%, most {max(r['others_cpu_pct'] for r in noisy)}%): the machine was not quiet")
elif noisy:
    print("runs where other processes took > 20% of a core: "
          + ", ".join(f"{r['label']} r{r['round']} c={r['conns']} ({r['others_cpu_pct']}%)" for r in noisy))
errors = sum(r["errors"] for r in rows)
if errors: print(f"ERRORS: {errors} failed calls in the runs")
EOF
log "raw results: $RESULTS/load.jsonl"
[[ $KEEP_RUNNING == 1 ]] && log "still running: rmcp pid $UP_PID (:$UP_PORT), $GW pid $GW_PID ($GW_URL)"
[[ -z $failed && -s $RESULTS/load.jsonl && $(jq -s 'map(.errors) | add' "$RESULTS/load.jsonl") == 0 ]]
