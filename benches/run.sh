#!/usr/bin/env bash
# toolgate's benchmark (method and results: BENCHMARKS.md). In one run, on loopback, with the load
# generator and every server pinned to different cores:
#   1. tools/call throughput and p50/p99 latency at 1, 16 and 64 connections: toolgate in both
#      protocol eras (2025-11-25 with a session and SSE-capable responses; 2026-07-28 stateless
#      JSON), with the full production stack and with the protocol core alone, back to back with
#      the peer MCP servers of ../shared/bench (official Rust, TypeScript and Python SDKs) and the
#      bare-axum ceiling, rounds rotated;
#   2. memory per idle legacy session and per open SSE GET stream, and list_changed fan-out
#      latency, at 1,000 and 10,000 streams (peers at 1,000); the same for 2026-07-28
#      subscriptions/listen streams over HTTP/1.1, and for H2_STREAMS of them over HTTP/2;
#   3. start-up time, idle RSS and the release binary's size;
#   4. with TASKS=1 (on in --short, off in the full run): tasks, on SQLite and Postgres: time
#      to create one (p50/p99) and tasks/get throughput (benches/tasks.py);
# then prints the tables, the ratios and each target met or missed (benches/summarize.py).
#
#   benches/run.sh           the full run, about 25 minutes
#   benches/run.sh --short   the smoke test CI runs: every step at tiny sizes, no thresholds
#
# Environment (defaults in brackets; the full run's first, then --short's):
#   SHARED_BENCH [../shared/bench]   the peers and the load generator (mcpload)
#   BENCH_HOME [/tmp/mcp-bench]      builds, venv, node_modules, logs (shared with its run.sh)
#   TOOLGATE_BIN                     a toolgate binary to measure (default: built here, release)
#   RESULTS [$BENCH_HOME/results/toolgate-<time>]
#   PEERS [core + rmcp-2026-json | axum-baseline rmcp-stateless-json]
#   TG_TARGETS [toolgate-full toolgate-full-2026 toolgate-core toolgate-core-2026]
#   CONNS ["1 16 64" | "1 16"]  DURATION [10 | 2] s  WARMUP [2 | 1] s  ROUNDS [3 | 1]
#   STREAMS_SIZES ["1000 10000" | 200]  PEER_STREAMS [1000 | none]  FANOUT_ROUNDS [5 | 2]
#   H2_STREAMS [50000 | 400]: subscriptions/listen streams over HTTP/2 (examples/listeners.rs)
#   STARTUP_RUNS [5 | 2]  PIN, LOADGEN_CPU [0], SERVER_CPU [1]: as in ../shared/bench/run.sh
#   TASKS [0 | 1]  TASKS_BACKENDS [sqlite,postgres]  TOOLGATE_TEST_PG_HOST [127.0.0.1:5432]
#     (Postgres: user postgres, trust auth, psql; a database is created and dropped per run)
set -uo pipefail

short=0
case "${1:-}" in
  --short) short=1 ;;
  "") ;;
  -h | --help) sed -n '2,32s/^# \{0,1\}//p' "$0" && exit 0 ;;
  *) sed -n '2,32s/^# \{0,1\}//p' "$0" >&2 && exit 2 ;;
esac

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED_BENCH=${SHARED_BENCH:-$REPO/../shared/bench}
[[ -f $SHARED_BENCH/peers/peers.sh ]] || { echo "no peers at $SHARED_BENCH (set SHARED_BENCH)" >&2; exit 2; }
SHARED_BENCH=$(cd "$SHARED_BENCH" && pwd)
export BENCH_DIR=$SHARED_BENCH
# shellcheck source=/dev/null
source "$SHARED_BENCH/peers/peers.sh" # build_rust build_ts build_py start_peer stop_server setup_pinning wait_ready log

if [[ $short == 1 ]]; then
  PEERS=${PEERS:-"axum-baseline rmcp-stateless-json"}
  CONNS=${CONNS:-"1 16"} DURATION=${DURATION:-2} WARMUP=${WARMUP:-1} ROUNDS=${ROUNDS:-1}
  STREAMS_SIZES=${STREAMS_SIZES:-200} PEER_STREAMS=${PEER_STREAMS:-none} FANOUT_ROUNDS=${FANOUT_ROUNDS:-2} H2_STREAMS=${H2_STREAMS:-400}
  STARTUP_RUNS=${STARTUP_RUNS:-2} TASKS=${TASKS:-1}
else
  PEERS=${PEERS:-"$(expand_peers core) rmcp-2026-json"}
  CONNS=${CONNS:-"1 16 64"} DURATION=${DURATION:-10} WARMUP=${WARMUP:-2} ROUNDS=${ROUNDS:-3}
  STREAMS_SIZES=${STREAMS_SIZES:-"1000 10000"} PEER_STREAMS=${PEER_STREAMS:-1000} FANOUT_ROUNDS=${FANOUT_ROUNDS:-5} H2_STREAMS=${H2_STREAMS:-50000}
  STARTUP_RUNS=${STARTUP_RUNS:-5} TASKS=${TASKS:-0}
fi
TASKS_BACKENDS=${TASKS_BACKENDS:-sqlite,postgres}
[[ $PEER_STREAMS == none ]] && PEER_STREAMS=""
TG_TARGETS=${TG_TARGETS:-"toolgate-full toolgate-full-2026 toolgate-core toolgate-core-2026"}
RESULTS=${RESULTS:-$BENCH_HOME/results/toolgate-$(date +%Y%m%d-%H%M%S)}
# toolgate's port: the first free one from 18780 (below the ephemeral range, so no client socket
# of the run takes it between restarts), so a server left on a port cannot break the run. The
# issuer takes any free port; the peers keep ../shared/bench's numbering from PORT_BASE.
free_port() { # first port >= $1 nobody listens on
  local p=$1
  while port_busy "$p"; do p=$((p + 1)); done
  echo "$p"
}
PORT_BASE=${PORT_BASE:-18700}
TG_PORT=$(free_port 18780)
RUN_DIR=$(mktemp -d /tmp/toolgate-bench.XXXXXX)
mkdir -p "$RESULTS" "$BENCH_HOME/logs"
# 10,000 streams: a descriptor per stream on each side, and the handshake connections
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

ISSUER_PID=""
cleanup() {
  stop_server
  [[ -n $ISSUER_PID ]] && kill "$ISSUER_PID" 2>/dev/null
  rm -rf "$RUN_DIR"
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

# ------------------------------------------------------------------ 1. build
[[ -x $MCPLOAD ]] && [[ ${SKIP_BUILD:-0} == 1 ]] || build_rust "$SHARED_BENCH/loadgen" || exit 2
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  [[ " $PEERS " == *" axum-"* ]] && build_rust "$PEERS_DIR/axum-baseline"
  [[ " $PEERS " == *" rmcp-"* ]] && build_rust "$PEERS_DIR/rmcp"
  [[ " $PEERS " == *" ts-"* ]] && build_ts
  [[ " $PEERS " == *" py-"* ]] && build_py
fi
log "cargo build --release --example listeners"
(cd "$REPO" && cargo build --release --locked --quiet --example listeners) || exit 2
LISTENERS="${CARGO_TARGET_DIR:-$REPO/target}/release/examples/listeners"
if [[ -z ${TOOLGATE_BIN:-} ]]; then
  log "cargo build --release --bin toolgate"
  (cd "$REPO" && cargo build --release --locked --quiet --bin toolgate) || exit 2
  TOOLGATE_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/toolgate"
fi
[[ -x $TOOLGATE_BIN ]] || { log "no toolgate binary at $TOOLGATE_BIN"; exit 2; }
setup_pinning

# ------------------------------------------------------------------ token issuer (full stack)
python3 "$REPO/benches/issuer.py" --dir "$RUN_DIR" --port 0 \
  --resource "http://127.0.0.1:$TG_PORT/mcp" >"$BENCH_HOME/logs/issuer.log" 2>&1 &
ISSUER_PID=$!
for _ in $(seq 1 100); do [[ -s $RUN_DIR/token ]] || ! kill -0 "$ISSUER_PID" 2>/dev/null && break; sleep 0.1; done
[[ -s $RUN_DIR/token ]] || { log "the token issuer did not start:"; cat "$BENCH_HOME/logs/issuer.log" >&2; exit 2; }
TOKEN=$(cat "$RUN_DIR/token")
ISSUER_PORT=$(cat "$RUN_DIR/port")
{
  cat "$REPO/benches/config/full.toml"
  printf '\n[[auth.issuers]]\nissuer = "http://127.0.0.1:%s"\njwks_uri = "http://127.0.0.1:%s/jwks"\nalgorithms = ["RS256"]\n' \
    "$ISSUER_PORT" "$ISSUER_PORT"
} >"$RUN_DIR/full.toml"
cp "$REPO/benches/config/core.toml" "$RUN_DIR/core.toml"

# ------------------------------------------------------------------ environment record
{
  echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "cpu:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "pinning: $PINNED"
  echo "mode: $([[ $short == 1 ]] && echo short || echo full); CONNS='$CONNS' DURATION=$DURATION WARMUP=$WARMUP ROUNDS=$ROUNDS STREAMS_SIZES='$STREAMS_SIZES' PEER_STREAMS='$PEER_STREAMS' FANOUT_ROUNDS=$FANOUT_ROUNDS TASKS=$TASKS$([[ $TASKS == 1 ]] && echo " ($TASKS_BACKENDS)")"
  echo "toolgate: $("$TOOLGATE_BIN" --version 2>/dev/null) ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)$(git -C "$REPO" diff --quiet 2>/dev/null || echo +dirty)), $TOOLGATE_BIN"
  echo "targets: $TG_TARGETS $PEERS"
  echo "rustc: $(rustc --version 2>/dev/null)"
} >"$RESULTS/env.txt"
cat "$RESULTS/env.txt" >&2

# ------------------------------------------------------------------ targets
is_toolgate() { [[ $1 == toolgate-* ]]; }

# What every toolgate process of the run gets: its port, the data directory (emptied by
# fresh_data before each start, so each has a new SQLite file) and the resource its tokens name.
TG_ENV=(TOOLGATE__SERVER__BIND="127.0.0.1:$TG_PORT" TOOLGATE__STORAGE__DATA_DIR="$RUN_DIR/data"
  TOOLGATE__AUTH__RESOURCE="http://127.0.0.1:$TG_PORT/mcp")
fresh_data() { rm -rf "$RUN_DIR/data" && mkdir -p "$RUN_DIR/data"; }

# start_toolgate NAME: a fresh process on a fresh data directory
start_toolgate() {
  local name=$1 cfg=core
  [[ $name == toolgate-full* ]] && cfg=full
  fresh_data
  TARGET_URL="http://127.0.0.1:$TG_PORT/mcp"
  TARGET_PROTO=2025-11-25
  [[ $name == *-2026 ]] && TARGET_PROTO=2026-07-28
  TARGET_TOKEN=""
  [[ $cfg == full ]] && TARGET_TOKEN=$TOKEN
  start_cmd "$name" "$TG_PORT" env "${TG_ENV[@]}" "$TOOLGATE_BIN" serve --config "$RUN_DIR/$cfg.toml" || return 1
  TARGET_PID=$SERVER_PID
  if ! wait_ready "$TARGET_URL" "$TARGET_PROTO" "$TARGET_TOKEN"; then
    log "$name did not become ready; last log lines:"
    tail -5 "$BENCH_HOME/logs/server-$name.log" >&2
    stop_server
    return 1
  fi
}

# start_target NAME INDEX -> TARGET_URL TARGET_PROTO TARGET_PID TARGET_TOKEN
start_target() {
  if is_toolgate "$1"; then
    start_toolgate "$1"
  else
    TARGET_TOKEN=""
    start_peer "$1" $((PORT_BASE + $2)) || return 1
    TARGET_PID=$SERVER_PID
  fi
}

# ------------------------------------------------------------------ 2. throughput and latency
read -ra TARGETS <<<"$TG_TARGETS $PEERS"
N=${#TARGETS[@]}
for r in $(seq 1 "$ROUNDS"); do
  for k in $(seq 0 $((N - 1))); do
    i=$(((k + r - 1) % N))
    t=${TARGETS[$i]}
    start_target "$t" "$i" || { log "round $r: $t could not be started; skipped"; continue; }
    log "round $r/$ROUNDS: $t ($TARGET_URL, protocol $TARGET_PROTO, pid $TARGET_PID)"
    for c in $CONNS; do
      MCPLOAD_TOKEN=$TARGET_TOKEN "${PIN_LOADGEN[@]}" "$MCPLOAD" load --url "$TARGET_URL" --proto "$TARGET_PROTO" \
        --conns "$c" --duration "$DURATION" --warmup "$WARMUP" --pid "$TARGET_PID" \
        --label "$t" --round "$r" --out "$RESULTS/load.jsonl" >/dev/null
    done
    stop_server
  done
done

# ------------------------------------------------------------------ 3. idle sessions, streams, fan-out
streams_run() { # target n
  local t=$1 n=$2 rounds=$FANOUT_ROUNDS
  [[ $n -ge 10000 ]] && rounds=$(((FANOUT_ROUNDS + 1) / 2))
  start_target "$t" 0 || return 0
  log "streams: $t ($n sessions + idle GET streams, $rounds fan-out rounds)"
  MCPLOAD_TOKEN=$TARGET_TOKEN "${PIN_LOADGEN[@]}" "$MCPLOAD" streams --url "$TARGET_URL" --proto "$TARGET_PROTO" \
    --n "$n" --fanout-rounds "$rounds" --pid "$TARGET_PID" --label "$t" --out "$RESULTS/streams.jsonl" >/dev/null
  stop_server
}
# 2026-07-28 subscriptions/listen streams (examples/listeners.rs): one connection each over
# HTTP/1.1 at the same sizes, then H2_STREAMS over HTTP/2 with prior knowledge, 200 per connection
# (more streams than the open-file limit allows connections).
listeners_run() { # label n [--h2 K]
  local label=$1 n=$2 rounds=$FANOUT_ROUNDS
  [[ $n -ge 10000 ]] && rounds=$(((FANOUT_ROUNDS + 1) / 2))
  start_target toolgate-full 0 || return 0
  log "streams: $label ($n subscriptions/listen streams${3:+ over $4 HTTP/2 connections}, $rounds fan-out rounds)"
  MCPLOAD_TOKEN=$TARGET_TOKEN "${PIN_LOADGEN[@]}" "$LISTENERS" --url "$TARGET_URL" --mode listen --n "$n" --rounds "$rounds" \
    --pid "$TARGET_PID" --label "$label" --out "$RESULTS/streams.jsonl" "${@:3}" >/dev/null
  stop_server
}
for n in $STREAMS_SIZES; do streams_run toolgate-full "$n"; done
for n in $STREAMS_SIZES; do listeners_run toolgate-full-listen "$n"; done
listeners_run toolgate-full-listen-h2 "$H2_STREAMS" --h2 $(((H2_STREAMS + 199) / 200))
for n in $PEER_STREAMS; do
  for p in $PEERS; do peer_stateful "$p" && [[ $p == *-sse ]] && streams_run "$p" "$n"; done
done

# ------------------------------------------------------------------ 4. start-up, idle RSS, binary size
log "start-up: $STARTUP_RUNS runs per configuration"
for run in $(seq 1 "$STARTUP_RUNS"); do
  for cfg in default full; do
    fresh_data
    args=(serve)
    [[ $cfg == full ]] && args+=(--config "$RUN_DIR/full.toml")
    # the embedded default: SQLite, dev tokens, examples pack; admin listener on a free port
    env "${TG_ENV[@]}" TOOLGATE__AUTH__DEV_KEY_FILE="$RUN_DIR/data/dev.key" \
      TOOLGATE__ADMIN__BIND="127.0.0.1:0" TOOLGATE__LOG__FILTER=warn \
      "${PIN_LOADGEN[@]}" python3 "$REPO/benches/startup.py" --label "toolgate-$cfg" --round "$run" \
      --url "http://127.0.0.1:$TG_PORT" --out "$RESULTS/startup.jsonl" -- "${PIN_SERVER[@]}" "$TOOLGATE_BIN" "${args[@]}" ||
      log "start-up run $run ($cfg) failed"
  done
done
python3 - "$TOOLGATE_BIN" "$RESULTS/binary.json" <<'EOF'
import json, os, sys
path = sys.argv[1]
json.dump({"path": path, "bytes": os.path.getsize(path)}, open(sys.argv[2], "w"))
EOF

# ------------------------------------------------------------------ 5. tasks (TASKS=1)
# benches/tasks.py starts its own servers (auth and rate limits off, conformance pack, audit
# sync as in full.toml), pinned like the rest; its table goes to tasks.md, its figures to
# tasks.json, and into the summary below. It fails only on errors or missing results.
tasks_status=0
if [[ $TASKS == 1 ]]; then
  log "tasks: create latency and tasks/get throughput ($TASKS_BACKENDS)"
  tasks_args=(--bin "$TOOLGATE_BIN" --backends "$TASKS_BACKENDS" --port "$TG_PORT" --out "$RESULTS/tasks.json")
  [[ $short == 1 ]] && tasks_args+=(--short)
  pin=${PIN:-auto}
  [[ $PINNED == "not pinned" ]] && pin=0
  PIN=$pin LOADGEN_CPU=$LOADGEN_CPU SERVER_CPU=$SERVER_CPU \
    python3 "$REPO/benches/tasks.py" "${tasks_args[@]}" >"$RESULTS/tasks.md"
  tasks_status=$?
  [[ $tasks_status == 0 ]] || log "tasks: failed (exit $tasks_status); see $RESULTS/tasks.md"
fi

# ------------------------------------------------------------------ 6. summary
python3 "$REPO/benches/summarize.py" --check "$RESULTS" | tee "$RESULTS/summary.md"
status=${PIPESTATUS[0]}
if [[ -s $RESULTS/tasks.md ]]; then
  { echo; cat "$RESULTS/tasks.md"; } | tee -a "$RESULTS/summary.md"
fi
[[ $tasks_status == 0 ]] || status=1
log "raw results: $RESULTS"
exit "$status"
