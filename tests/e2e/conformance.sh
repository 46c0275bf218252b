#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance, server
# scenarios) against a freshly built toolgate with deploy/config/conformance.toml:
#
#   active      conformance 0.1.16, --suite active            (the 30 scenarios of 2025-11-25)
#   2025-11-25  conformance 0.2.0-alpha.12, --requirements 2025-11-25  (stateful era)
#   2026-07-28  conformance 0.2.0-alpha.12, --requirements 2026-07-28  (stateless era, MRTR)
#
# Prints every failing check with its message, a summary line per run, and exits non-zero if
# any scored scenario failed (the CLI's own verdict), the harness is missing (2), or the
# server did not start (3). Not-scored scenarios are reported but do not fail the run, except
# the tasks extension's: in the 2026-07-28 run all ten `tasks-*` scenarios must be there and
# pass (toolgate implements the extension, so the suite's verdict on it is required).
#
# Environment:
#   HARNESS_DIR         where tests/e2e/setup.sh installed node22/, node/ and conformance-next/
#                       (default ~/.cache/toolgate-e2e, as tests/e2e/setup.sh)
#   CONFORMANCE_RUNS    which runs, space-separated (default "active 2025-11-25 2026-07-28")
#   CONFORMANCE_OUT     results directory (default: a new /tmp/toolgate-conformance.XXXXXX);
#                       holds server.log and, per run, <run>.log and <run>/<scenario>/checks.json
#   CONFORMANCE_TIMEOUT seconds per run (default 900)
#   PORT                loopback port for the server (default: a free one chosen by the OS)
#   CONFORMANCE_AUTH    dev (default: bearer tokens required, sent by a preload) or off
#   TOOLGATE_BIN        use this binary instead of running `cargo build`
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
NODE="$HARNESS_DIR/node22/node"
CLI_SUFFIX="node_modules/@modelcontextprotocol/conformance/dist/index.js"
STABLE_DIR="$HARNESS_DIR/node"
NEXT_DIR="$HARNESS_DIR/conformance-next"
CONFIG="$ROOT/deploy/config/conformance.toml"
RUNS="${CONFORMANCE_RUNS:-active 2025-11-25 2026-07-28}"
RUN_TIMEOUT="${CONFORMANCE_TIMEOUT:-900}"

die() { echo "conformance.sh: $*" >&2; exit "${2:-1}"; }

# --- the harness must already be installed: this script never downloads anything ----------
missing=()
[ -x "$NODE" ] || missing+=("$NODE (Node 22; the suite needs fs.globSync)")
[ -f "$STABLE_DIR/$CLI_SUFFIX" ] || missing+=("$STABLE_DIR/$CLI_SUFFIX (conformance 0.1.16)")
[ -f "$NEXT_DIR/$CLI_SUFFIX" ] || missing+=("$NEXT_DIR/$CLI_SUFFIX (conformance 0.2.0-alpha.12)")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "conformance.sh: the conformance harness is not installed in HARNESS_DIR=$HARNESS_DIR; missing:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  echo "Install it with: HARNESS_DIR=$HARNESS_DIR $ROOT/tests/e2e/setup.sh node22 node conformance-next" >&2
  exit 2
fi
[ -f "$CONFIG" ] || die "missing $CONFIG" 2
command -v curl >/dev/null || die "curl is needed to wait for the server" 2

OUT="${CONFORMANCE_OUT:-$(mktemp -d /tmp/toolgate-conformance.XXXXXX)}"
mkdir -p "$OUT" || die "cannot create $OUT" 2

# --- build and start the server ------------------------------------------------------------
if [ -n "${TOOLGATE_BIN:-}" ]; then
  BIN="$TOOLGATE_BIN"
else
  echo "building toolgate (cargo build)..." >&2
  (cd "$ROOT" && cargo build --quiet --bin toolgate) || die "cargo build failed"
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/toolgate"
fi
[ -x "$BIN" ] || die "no toolgate binary at $BIN" 2

# Port 0 lets the OS pick a free port; the probe closes it again before the server binds.
PORT="${PORT:-$("$NODE" -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')}"
[ -n "$PORT" ] || die "could not find a free port" 3

SERVER_PID=""
# shellcheck disable=SC2317  # called by the EXIT trap
stop_server() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# The DNS-rebinding scenario only passes for a localhost URL.
URL="http://localhost:$PORT/mcp"

# With CONFORMANCE_AUTH=dev (the default) the server requires bearer tokens (dev mode, a key of
# its own in $OUT) and the suite sends one through tests/e2e/lib/bearer-preload.mjs, so every
# scenario also proves the auth layer lets a valid token through, in both eras.
AUTH="${CONFORMANCE_AUTH:-dev}"
case "$AUTH" in
  dev)
    export TOOLGATE__AUTH__MODE=dev TOOLGATE__AUTH__DEV_KEY_FILE="$OUT/dev-signing.key" TOOLGATE__AUTH__RESOURCE="$URL" ;;
  off) ;;
  *) die "CONFORMANCE_AUTH must be dev or off, not '$AUTH'" 2 ;;
esac

TOOLGATE__SERVER__BIND="127.0.0.1:$PORT" TOOLGATE__ADMIN__BIND="127.0.0.1:0" "$BIN" serve --config "$CONFIG" >"$OUT/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
  curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$OUT/server.log" >&2; die "the server exited during start-up (log: $OUT/server.log)" 3; }
  sleep 0.1
done
curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" || die "the server did not answer /healthz on port $PORT within 10 s" 3

echo "toolgate pid $SERVER_PID at $URL (auth: $AUTH); results in $OUT" >&2

PRELOAD=()
if [ "$AUTH" = dev ]; then
  # Auth must really be on: a request without a token is refused.
  code="$(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
    --data '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$URL")"
  [ "$code" = 401 ] || die "auth.mode=dev but a request without a token got HTTP $code, not 401" 3
  TOKEN="$(TOOLGATE__SERVER__BIND="127.0.0.1:$PORT" "$BIN" dev-token --config "$CONFIG" --subject conformance)" || die "toolgate dev-token failed" 3
  export MCP_TOKEN="$TOKEN" MCP_URL="$URL"
  PRELOAD=(--import "$ROOT/tests/e2e/lib/bearer-preload.mjs")
fi

# --- the runs ------------------------------------------------------------------------------
# Prints the failing checks and one summary line of a run; exits 1 if the run failed.
summarize() {
  "$NODE" - "$@" <<'EOF'
const fs = require('fs'); const path = require('path');
const [run, dir, logFile, rcStr] = process.argv.slice(2);
const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';
// The CLI lists the not-scored scenarios after "Not scored for <revision>:".
const notScored = new Set();
const tail = log.split(/^Not scored for /m)[1] ?? '';
for (const m of tail.matchAll(/^\s+[✓✗] (\S+) \(/gm)) notScored.add(m[1]);
const scenarios = new Map();
for (const d of fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []) {
  const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(d);
  const f = path.join(dir, d, 'checks.json');
  if (!m || !fs.existsSync(f)) continue;
  let checks;
  try { checks = JSON.parse(fs.readFileSync(f, 'utf8')); } catch { checks = [{ id: 'checks.json', status: 'FAILURE', errorMessage: 'unreadable' }]; }
  scenarios.set(m[1], checks);
}
const tally = { scenarios: 0, passed: 0, SUCCESS: 0, FAILURE: 0, WARNING: 0, other: 0 };
const extra = [];
// Not scored by the suite, required here: the tasks extension's scenarios.
const TASKS = ['tasks-capability-negotiation', 'tasks-dispatch-and-envelope', 'tasks-lifecycle', 'tasks-mrtr-composition',
  'tasks-mrtr-input', 'tasks-request-headers', 'tasks-request-state-removal', 'tasks-required-task-error',
  'tasks-status-notifications', 'tasks-wire-fields'];
const tasksFailed = [];
if (run === '2026-07-28') for (const name of TASKS) if (!scenarios.has(name)) tasksFailed.push(`${name} did not run`);
for (const [name, checks] of scenarios) {
  const failures = checks.filter((c) => c.status === 'FAILURE');
  if (name.startsWith('tasks-') && failures.length) {
    tasksFailed.push(name);
    for (const c of failures) console.log(`  FAILURE ${name} / ${c.id}: ${(c.errorMessage ?? '').slice(0, 400)}`);
  }
  if (notScored.has(name)) {
    extra.push(`${name} ${failures.length ? 'FAIL' : 'ok'} (${checks.filter((c) => c.status === 'SUCCESS').length}/${checks.length} checks succeed)`);
    continue;
  }
  tally.scenarios += 1;
  if (!failures.length) tally.passed += 1;
  for (const c of checks) tally[c.status in tally ? c.status : 'other'] += 1;
  for (const c of checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING')) {
    console.log(`  ${c.status} ${name} / ${c.id}: ${(c.errorMessage ?? '').slice(0, 400)}`);
  }
}
for (const line of extra) console.log(`  not scored: ${line}`);
const rc = Number(rcStr);
if (rc === 124 || rc === 137) console.log(`  the run hit its ${process.env.RUN_TIMEOUT}s time limit`);
for (const t of tasksFailed) console.log(`  required tasks scenario failed: ${t}`);
const ok = rc === 0 && tally.scenarios > 0 && tally.passed === tally.scenarios && tasksFailed.length === 0;
console.log(
  `${ok ? 'PASS' : 'FAIL'} ${run}: scored scenarios ${tally.passed}/${tally.scenarios} passed; checks ${tally.SUCCESS} passed, ` +
    `${tally.FAILURE} failed, ${tally.WARNING} warnings, ${tally.other} info/skipped; cli exit ${rc}`,
);
process.exit(ok ? 0 : 1);
EOF
}

failed=0
summaries=()
for run in $RUNS; do
  case "$run" in
    active) dir="$STABLE_DIR"; args=(--suite active) ;;
    2025-11-25|2026-07-28) dir="$NEXT_DIR"; args=(--requirements "$run") ;;
    *) die "unknown run '$run' (known: active 2025-11-25 2026-07-28)" 2 ;;
  esac
  echo "=== $run (conformance $("$NODE" "$dir/$CLI_SUFFIX" --version 2>/dev/null)) ==="
  # The CLI resolves its own files relative to the package, so run it from its install dir.
  (cd "$dir" && UNDICI_FROM="$dir/package.json" timeout -k 5 "$RUN_TIMEOUT" "$NODE" "${PRELOAD[@]}" "$CLI_SUFFIX" server --url "$URL" "${args[@]}" -o "$OUT/$run") >"$OUT/$run.log" 2>&1
  rc=$?
  report="$(RUN_TIMEOUT="$RUN_TIMEOUT" summarize "$run" "$OUT/$run" "$OUT/$run.log" "$rc")" || failed=1
  echo "$report"
  summaries+=("$(tail -n 1 <<<"$report")")
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "the server died during the $run run (log: $OUT/server.log)" >&2; failed=1; break; }
done

echo
printf '%s\n' "${summaries[@]}"
echo "CONFORMANCE: $([ "$failed" = 0 ] && echo PASS || echo FAIL) (results and logs in $OUT)"
exit "$failed"
