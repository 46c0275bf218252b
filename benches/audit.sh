#!/usr/bin/env bash
# The audit log's cost on the request path: one toolgate build under tools/call load with one
# settings file, then the audit writer's own figures from the admin listener's /metrics (batches,
# records written, mean rows per batch, mean commit time). Pinned like benches/ab.sh: the server
# on SERVER_CPU [1], mcpload (../shared/bench, built by benches/run.sh into $BENCH_HOME) on
# LOADGEN_CPU [0].
#
#   benches/audit.sh BIN CONFIG [CONNS]
#
# Compare configurations by running it once per file, e.g. benches/config/core.toml, full.toml
# (sync audit, the default), and copies of full.toml with `durability = "batched"` or
# `enabled = false` under [audit]. TOOLGATE__STORAGE__URL=postgres://… measures Postgres.
# Environment: PROTO [2025-11-25], DURATION [6], WARMUP [1], TOKEN (bearer, for a config with
# authentication), BENCH_HOME [/tmp/mcp-bench], PORT [18811], ADMIN_PORT [18812].
set -uo pipefail

[[ $# -ge 2 ]] || { sed -n '2,14s/^# \{0,1\}//p' "$0" >&2; exit 2; }
BIN=$1 CFG=$2 CONNS=${3:-64}
PORT=${PORT:-18811} ADMIN_PORT=${ADMIN_PORT:-18812}
MCPLOAD=${BENCH_HOME:-/tmp/mcp-bench}/target/release/mcpload
[[ -x $MCPLOAD ]] || { echo "audit.sh: no mcpload at $MCPLOAD (benches/run.sh --short builds it)" >&2; exit 2; }
if curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz"; then echo "audit.sh: port $PORT already serves; not measuring" >&2; exit 2; fi
pin=() srv=()
[[ $(nproc) -ge 2 ]] && pin=(taskset -c "${LOADGEN_CPU:-0}") srv=(taskset -c "${SERVER_CPU:-1}")

data=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$data"' EXIT
TOOLGATE__SERVER__BIND=127.0.0.1:$PORT TOOLGATE__ADMIN__ENABLED=true TOOLGATE__ADMIN__BIND=127.0.0.1:$ADMIN_PORT \
  TOOLGATE__AUTH__RESOURCE=http://127.0.0.1:$PORT/mcp TOOLGATE__STORAGE__DATA_DIR=$data \
  "${srv[@]}" "$BIN" serve --config "$CFG" >"$data/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null || { echo "audit.sh: $BIN exited at start:" >&2; tail -3 "$data/server.log" >&2; exit 1; }
"${pin[@]}" "$MCPLOAD" load --url "http://127.0.0.1:$PORT/mcp" --proto "${PROTO:-2025-11-25}" --conns "$CONNS" \
  --duration "${DURATION:-6}" --warmup "${WARMUP:-1}" --pid "$pid" --label audit --round 1 --out "$data/out.json" \
  ${TOKEN:+--token "$TOKEN"} 2>&1 | grep 'req/s'
curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | awk '
  /^toolgate_audit_records_written_total / {w = $2}
  /^toolgate_audit_batch_duration_seconds_count / {c = $2}
  /^toolgate_audit_batch_duration_seconds_sum / {s = $2}
  END { if (c > 0) printf "audit: %d records in %d batches, %.1f rows and %.2f ms per batch\n", w, c, w / c, s / c * 1000;
        else print "audit: no batch written" }'
