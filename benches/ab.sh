#!/usr/bin/env bash
# A/B of two toolgate builds on tools/call throughput, interleaved so the host's drift hits both
# alike: the server pinned to SERVER_CPU [1], mcpload (../shared/bench, built by benches/run.sh
# into $BENCH_HOME) on LOADGEN_CPU [0]. Prints each round and the per-round ratios B/A.
#
#   benches/ab.sh BIN_A CONFIG_A BIN_B CONFIG_B [ROUNDS]
#
# Each binary gets its own config (an older build refuses newer keys), e.g. the commit's own
# benches/config/core.toml (`git show REV:benches/config/core.toml > /tmp/core-old.toml`).
# Environment: PROTO [2025-11-25], CONNS [64], DURATION [8], WARMUP [2], TOKEN (bearer, for a
# config with authentication), BENCH_HOME [/tmp/mcp-bench], PATH_A and PATH_B [/mcp]: the endpoint
# each side is loaded at (a virtual server's path against /mcp, with the same binary and a config
# that defines the server: benches/config/virtual.toml).
set -uo pipefail

[[ $# -ge 4 ]] || { sed -n '2,12s/^# \{0,1\}//p' "$0" >&2; exit 2; }
BIN_A=$1 CFG_A=$2 BIN_B=$3 CFG_B=$4 ROUNDS=${5:-3}
PROTO=${PROTO:-2025-11-25} CONNS=${CONNS:-64} DURATION=${DURATION:-8} WARMUP=${WARMUP:-2}
MCPLOAD=${BENCH_HOME:-/tmp/mcp-bench}/target/release/mcpload
[[ -x $MCPLOAD ]] || { echo "ab.sh: no mcpload at $MCPLOAD (benches/run.sh --short builds it)" >&2; exit 2; }
PORT=18811
pin() { if [[ $(nproc) -ge 2 ]]; then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }

# one BIN CONFIG LABEL PATH: prints the requests per second of one run
one() {
  local data pid rps
  data=$(mktemp -d)
  # A busy port means a left-over server: never measure it in place of this one.
  if curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz"; then echo "ab.sh: port $PORT already serves; not measuring" >&2; rm -rf "$data"; echo 0; return; fi
  local srv=()
  [[ $(nproc) -ge 2 ]] && srv=(taskset -c "${SERVER_CPU:-1}")
  # A simple command in the background (taskset execs the server), so $! is the server itself and
  # `kill $pid` stops it: with the shell function `pin ... &`, $! was a subshell, the server
  # outlived the kill, and every later run measured that one left-over server.
  TOOLGATE__SERVER__BIND=127.0.0.1:$PORT TOOLGATE__AUTH__RESOURCE=http://127.0.0.1:$PORT/mcp TOOLGATE__STORAGE__DATA_DIR=$data \
    "${srv[@]}" "$1" serve --config "$2" >"$data/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
  # The server that answers must be ours, and alive.
  if ! kill -0 "$pid" 2>/dev/null; then echo "ab.sh: $1 exited at start:" >&2; tail -3 "$data/server.log" >&2; rm -rf "$data"; echo 0; return; fi
  echo "  [$3 pid $pid $(cat /proc/$pid/comm) on CPU $(taskset -cp $pid 2>/dev/null | awk '{print $NF}')]" >&2
  rps=$(pin "${LOADGEN_CPU:-0}" "$MCPLOAD" load --url "http://127.0.0.1:$PORT$4" --proto "$PROTO" --conns "$CONNS" \
    --duration "$DURATION" --warmup "$WARMUP" --pid "$pid" --label "$3" --round 1 --out "$data/out.json" ${TOKEN:+--token "$TOKEN"} 2>&1 |
    awk '/req\/s/ {print "  [" $0 "]" > "/dev/stderr"; print $3; exit}')  # the mcpload line (err=, cpu) kept in the log
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  # The next server starts only once this one has let go of the port.
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" || break; sleep 0.1; done
  grep -qi 'error\|panic' "$data/server.log" && { echo "  [$3 server log:]" >&2; tail -3 "$data/server.log" >&2; }
  rm -rf "$data"
  echo "${rps:-0}"
}

ratios=()
for r in $(seq "$ROUNDS"); do
  # Alternate which goes first, so neither always follows the other.
  if (( r % 2 )); then a=$(one "$BIN_A" "$CFG_A" a "${PATH_A:-/mcp}"); b=$(one "$BIN_B" "$CFG_B" b "${PATH_B:-/mcp}"); else b=$(one "$BIN_B" "$CFG_B" b "${PATH_B:-/mcp}"); a=$(one "$BIN_A" "$CFG_A" a "${PATH_A:-/mcp}"); fi
  ratio=$(python3 -c "print(f'{$b / $a:.3f}' if $a else 'n/a')")
  ratios+=("$ratio")
  echo "round $r: A $a req/s, B $b req/s, B/A $ratio"
done
python3 -c "import statistics,sys; r=[float(x) for x in sys.argv[1:] if x!='n/a']; print(f'median B/A over {len(r)} rounds: {statistics.median(r):.3f} (range {min(r):.3f}-{max(r):.3f})')" "${ratios[@]}"
