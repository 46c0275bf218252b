#!/usr/bin/env bash
# Soak run: toolgate (release) under 10 minutes of mixed traffic from examples/soak.rs (tool
# calls in both eras, sessions and streams opened and dropped, bad tokens), its resident memory
# and open files sampled every 5 s. Not a CI test: run it on a quiet machine.
#
#   benches/soak.sh [SECONDS]     default 600; writes $SOAK_DIR (default /tmp/toolgate-soak)
#
# Prints the samples and a verdict: RSS at the end within 5% of RSS after the warm-up
# (SOAK_WARMUP_SECS, default the first fifth of the run), and no errors. Any TOOLGATE__*
# variable set by the caller is passed on (e.g. TOOLGATE__AUDIT__ENABLED=false to leave the
# audit database out).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECONDS_TOTAL=${1:-600}
DIR=${SOAK_DIR:-/tmp/toolgate-soak}
rm -rf "$DIR" && mkdir -p "$DIR/data"
log() { printf '[soak] %s\n' "$*" >&2; }

cargo build --release --locked --quiet --bin toolgate --example soak
BIN=target/release/toolgate
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export TOOLGATE__SERVER__BIND="127.0.0.1:$PORT" TOOLGATE__STORAGE__DATA_DIR="$DIR/data" \
  TOOLGATE__AUTH__DEV_KEY_FILE="$DIR/data/dev.key" TOOLGATE__ADMIN__BIND="127.0.0.1:0" \
  TOOLGATE__LOG__FILTER=warn \
  TOOLGATE__LIMITS__REQUESTS_PER_MINUTE=60000000 TOOLGATE__LIMITS__REQUEST_BURST=1000000 \
  TOOLGATE__LIMITS__TOOL_UNITS_PER_MINUTE=60000000 TOOLGATE__LIMITS__TOOL_BURST=1000000
"$BIN" serve >"$DIR/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
TOKEN=$("$BIN" dev-token --subject soak)
log "toolgate pid $SERVER on port $PORT; ${SECONDS_TOTAL} s of mixed traffic"
target/release/examples/soak "http://127.0.0.1:$PORT" "$TOKEN" "$SERVER" "$SECONDS_TOTAL" "$DIR/samples.jsonl"
python3 - "$DIR/samples.jsonl" "${SOAK_WARMUP_SECS:-$((SECONDS_TOTAL / 5))}" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
warmup = int(sys.argv[2])
warm = next((r for r in rows if r["t"] >= warmup), rows[-1])
end = rows[-1]
peak = max(r["rss_kb"] for r in rows if r["t"] >= warm["t"])
growth = (end["rss_kb"] - warm["rss_kb"]) / warm["rss_kb"] * 100
print(f"samples {len(rows)}; after warm-up (t={warm['t']} s): RSS {warm['rss_kb']} kB, {warm['fds']} open files")
print(f"end (t={end['t']} s): RSS {end['rss_kb']} kB ({growth:+.1f}%), peak after warm-up {peak} kB, {end['fds']} open files")
print(f"requests: {end['ok']} answered 2xx, {end['refused']} refused (401/429), {end['errors']} errors")
print("verdict:", "flat (within 5%)" if abs(growth) <= 5 else "NOT flat")
sys.exit(0 if abs(growth) <= 5 and end["errors"] == 0 else 1)
PY
