#!/usr/bin/env bash
# End-to-end tests: the real toolgate binary driven by the official MCP client SDKs (Python mcp
# 1.x and 2.x, TypeScript), over Streamable HTTP and the legacy HTTP+SSE transport, then OAuth
# end to end against a real authorization server (tests/e2e/oauth.sh), then the official
# conformance suite (tests/e2e/conformance.sh, when present). Needs tests/e2e/setup.sh to have
# run. The last line is always `e2e: N passed, M failed`; exit status 0 only if M is 0.
#
# Environment:
#   HARNESS_DIR            where setup.sh installed the clients (default ~/.cache/toolgate-e2e)
#   E2E_PROFILE            cargo profile of the server binary: debug (default) or release
#   E2E_PORTS              loopback ports to try for the server, FIRST-LAST (default 18200-18299)
#   E2E_CLIENT_TIMEOUT     seconds each client run may take (default 120)
#   E2E_OAUTH_TIMEOUT      seconds tests/e2e/oauth.sh may take (default 600)
#   E2E_CONFORMANCE_TIMEOUT  seconds tests/e2e/conformance.sh may take (default 1500)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
PROFILE="${E2E_PROFILE:-debug}"
PORTS="${E2E_PORTS:-18200-18299}"
CLIENT_TIMEOUT="${E2E_CLIENT_TIMEOUT:-120}"
OAUTH_TIMEOUT="${E2E_OAUTH_TIMEOUT:-600}"
CONFORMANCE_TIMEOUT="${E2E_CONFORMANCE_TIMEOUT:-1500}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e.XXXXXX")"

log() { printf '[e2e] %s\n' "$*" >&2; }

server_pid=""
stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    # a graceful stop; SIGKILL if it is still there after 10 s
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# ---- build ----------------------------------------------------------------------------------
cd "$ROOT"
case "$PROFILE" in
  debug) cargo build --locked --bin toolgate ;;
  release) cargo build --locked --release --bin toolgate ;;
  *) log "E2E_PROFILE must be debug or release" && exit 2 ;;
esac
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE/toolgate"
[ -x "$BIN" ] || { log "no binary at $BIN" && exit 2; }
export TOOLGATE_BIN="$BIN" # for oauth.sh and conformance.sh

# ---- server ---------------------------------------------------------------------------------
# GET /healthz with bash alone (no curl on a fresh machine): true on an HTTP 200 answer.
healthy() { # port
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
    IFS= read -r -t 5 status <&3 || exit 1
    [[ "$status" == "HTTP/1."?" 200 "* ]]
  ) 2>/dev/null
}

# Tries each port of E2E_PORTS until toolgate itself reports that it is listening (another
# process answering /healthz on a busy port must not be mistaken for ours).
start_server() {
  local first="${PORTS%-*}" last="${PORTS#*-}" port
  for ((port = first; port <= last; port++)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi # something listens there
    # Default auth (dev mode): every client sends a token minted below with this key.
    TOOLGATE__SERVER__BIND="127.0.0.1:$port" \
      TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" \
      TOOLGATE__TOOLS__PACKS__CONFORMANCE=true \
      TOOLGATE__LIMITS__REQUEST_BURST=10000 TOOLGATE__LIMITS__TOOL_BURST=10000 \
      TOOLGATE__TOOLS__PAGE_SIZE=4 \
      TOOLGATE__LOG__FORMAT=json \
      "$BIN" serve >"$LOGS/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 150); do
      if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
      if grep -q 'toolgate listening' "$LOGS/server.log" && healthy "$port"; then
        SERVER_PORT=$port
        return 0
      fi
      sleep 0.1
    done
    if kill -0 "$server_pid" 2>/dev/null; then
      log "toolgate did not become healthy on port $port within 15 s; its log:"
      cat "$LOGS/server.log" >&2
      return 1
    fi
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
    grep -qi 'in use' "$LOGS/server.log" || { log "toolgate failed to start; its log:" && cat "$LOGS/server.log" >&2 && return 1; }
  done
  log "no free port in $PORTS"
  return 1
}

passed=0
failed=0
failures=()
record() { # name status
  if [ "$2" = 0 ]; then
    passed=$((passed + 1))
    log "PASS $1"
  else
    failed=$((failed + 1))
    failures+=("$1")
    log "FAIL $1 (exit $2)"
  fi
}

# Runs one client; its one-line JSON summary goes to stdout, its stderr to a log file.
client() { # name command...
  local name="$1" rc=0
  shift
  timeout -k 5 "$CLIENT_TIMEOUT" "$@" 2>"$LOGS/$name.stderr" | tee "$LOGS/$name.json" || rc=$?
  [ "$rc" = 124 ] && log "$name: killed after ${CLIENT_TIMEOUT}s"
  if [ "$rc" != 0 ] && [ -s "$LOGS/$name.stderr" ]; then
    log "$name stderr (last lines):"
    tail -n 20 "$LOGS/$name.stderr" >&2
  fi
  record "$name" "$rc"
}

if ! start_server; then
  record "server start" 1
  echo "e2e: $passed passed, $failed failed"
  exit 1
fi
MCP="http://127.0.0.1:$SERVER_PORT/mcp"
SSE="http://127.0.0.1:$SERVER_PORT/sse"
# The server runs with its default auth (dev mode): the clients authenticate with a dev token.
if ! MCP_TOKEN="$(TOOLGATE__SERVER__BIND="127.0.0.1:$SERVER_PORT" TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" "$BIN" dev-token --subject e2e)"; then
  record "dev-token" 1
  echo "e2e: $passed passed, $failed failed"
  exit 1
fi
export MCP_TOKEN
log "toolgate $("$BIN" --version | cut -d' ' -f2) on 127.0.0.1:$SERVER_PORT (dev-mode auth, conformance pack on, page size 4); logs in $LOGS"

[ -d "$HARNESS_DIR/node" ] || log "HARNESS_DIR=$HARNESS_DIR has no clients: run tests/e2e/setup.sh first"
for v in 1 2; do
  py="$HARNESS_DIR/py-mcp$v/bin/python"
  client "python-mcp$v-streamable-http" "$py" "$E2E/py_client.py" --url "$MCP" --min-pages 2
  client "python-mcp$v-sse" "$py" "$E2E/py_client.py" --transport sse --url "$SSE" --min-pages 2
done
client "typescript-streamable-http" "$HARNESS_DIR/node22/node" "$E2E/ts_client.mjs" --url "$MCP" --min-pages 2
client "typescript-sse" "$HARNESS_DIR/node22/node" "$E2E/ts_client.mjs" --transport sse --url "$SSE" --min-pages 2

# the server must have survived all of it
if kill -0 "$server_pid" 2>/dev/null && healthy "$SERVER_PORT"; then
  record "server still healthy" 0
else
  record "server still healthy" 1
  tail -n 50 "$LOGS/server.log" >&2
fi
stop_server
unset MCP_TOKEN # the next checks run servers of their own, with tokens of their own

# ---- OAuth end to end (starts its own authorization server and server) ----------------------
# One check here; oauth.sh prints a PASS/FAIL line for each of its own.
rc=0
E2E_CLIENT_TIMEOUT="$CLIENT_TIMEOUT" timeout -k 10 "$OAUTH_TIMEOUT" bash "$E2E/oauth.sh" || rc=$?
[ "$rc" = 124 ] && log "oauth.sh: killed after ${OAUTH_TIMEOUT}s"
record "oauth" "$rc"

# ---- conformance suite (starts its own server) ----------------------------------------------
if [ -f "$E2E/conformance.sh" ]; then
  rc=0
  timeout -k 10 "$CONFORMANCE_TIMEOUT" bash "$E2E/conformance.sh" || rc=$?
  record "conformance" "$rc"
else
  log "tests/e2e/conformance.sh not present: conformance suite skipped"
fi

[ "$failed" = 0 ] || log "failed: ${failures[*]} (logs in $LOGS)"
echo "e2e: $passed passed, $failed failed"
[ "$failed" = 0 ]
