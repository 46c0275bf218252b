#!/usr/bin/env bash
# End-to-end tests: the real toolgate binary driven by the official MCP client SDKs (Python mcp
# 1.x and 2.x, TypeScript), over Streamable HTTP and the legacy HTTP+SSE transport, and the
# 2025-11-25 tasks through the Python 1.x SDK's task API (tests/e2e/py_tasks_client.py), then OAuth
# end to end against a real authorization server (tests/e2e/oauth.sh), then sign-in through
# toolgate's own authorization server at a real OpenID Connect provider, the user in a headless
# Chromium (tests/e2e/signin.sh), then each user's own account at an OAuth-protected upstream
# through URL-mode elicitation and the vault (tests/e2e/connect.sh), then per-caller RFC 8693
# token exchange for an upstream at that authorization server (tests/e2e/upstream_oauth.sh), then
# declarative tools served from nothing but a tools directory (tests/e2e/tools.sh), then the tools
# of upstream MCP servers (server-everything, FastMCP, rmcp) served through toolgate
# (tests/e2e/upstreams.sh), then a 2026-07-28 upstream (the Python SDK 2.x's MCPServer) served
# through toolgate to 2026-07-28 and 2025-11-25 clients (tests/e2e/upstreams_modern.sh), then
# virtual servers ([servers.<name>]: own tools, names, audiences and list_changed) through both
# SDKs in both eras (tests/e2e/servers.sh), then the official conformance suite (tests/e2e/conformance.sh, when present). Needs tests/e2e/setup.sh to
# have run. The last line is always `e2e: N passed, M failed`; exit status 0 only if M is 0.
#
# Environment:
#   HARNESS_DIR            where setup.sh installed the clients (default ~/.cache/toolgate-e2e)
#   E2E_PROFILE            cargo profile of the server binary: debug (default) or release
#   E2E_PORTS              loopback ports to try for the server, FIRST-LAST (default 18200-18299)
#   E2E_CLIENT_TIMEOUT     seconds each client run may take (default 120)
#   E2E_OAUTH_TIMEOUT      seconds tests/e2e/oauth.sh may take (default 600)
#   E2E_SIGNIN_TIMEOUT     seconds tests/e2e/signin.sh may take (default 300)
#   E2E_CONNECT_TIMEOUT    seconds tests/e2e/connect.sh may take (default 300)
#   E2E_UPSTREAM_OAUTH_TIMEOUT  seconds tests/e2e/upstream_oauth.sh may take (default 300)
#   E2E_TOOLS_TIMEOUT      seconds tests/e2e/tools.sh may take (default 300)
#   E2E_UPSTREAMS_TIMEOUT  seconds tests/e2e/upstreams.sh may take (default 600; the first run
#                          also builds the rmcp peer)
#   E2E_UPSTREAMS_MODERN_TIMEOUT  seconds tests/e2e/upstreams_modern.sh may take (default 300)
#   E2E_SERVERS_TIMEOUT    seconds tests/e2e/servers.sh may take (default 300)
#   E2E_CONFORMANCE_TIMEOUT  seconds tests/e2e/conformance.sh may take (default 1500)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
PROFILE="${E2E_PROFILE:-debug}"
PORTS="${E2E_PORTS:-18200-18299}"
CLIENT_TIMEOUT="${E2E_CLIENT_TIMEOUT:-120}"
OAUTH_TIMEOUT="${E2E_OAUTH_TIMEOUT:-600}"
SIGNIN_TIMEOUT="${E2E_SIGNIN_TIMEOUT:-300}"
CONNECT_TIMEOUT="${E2E_CONNECT_TIMEOUT:-300}"
UPSTREAM_OAUTH_TIMEOUT="${E2E_UPSTREAM_OAUTH_TIMEOUT:-300}"
TOOLS_TIMEOUT="${E2E_TOOLS_TIMEOUT:-300}"
UPSTREAMS_TIMEOUT="${E2E_UPSTREAMS_TIMEOUT:-600}"
UPSTREAMS_MODERN_TIMEOUT="${E2E_UPSTREAMS_MODERN_TIMEOUT:-300}"
SERVERS_TIMEOUT="${E2E_SERVERS_TIMEOUT:-300}"
CONFORMANCE_TIMEOUT="${E2E_CONFORMANCE_TIMEOUT:-1500}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e.XXXXXX")"

log() { printf '[e2e] %s\n' "$*" >&2; }

# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"
server_pid=""
stop_server() {
  stop_pid "$server_pid"
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
export TOOLGATE_BIN="$BIN" # for oauth.sh, signin.sh, connect.sh, upstream_oauth.sh, tools.sh, upstreams.sh, upstreams_modern.sh, servers.sh and conformance.sh

# ---- server ---------------------------------------------------------------------------------
# Default auth (dev mode): every client sends a token minted below with this key.
launch_toolgate() { # port
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" TOOLGATE__ADMIN__BIND="127.0.0.1:0" \
    TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" \
    TOOLGATE__TOOLS__PACKS__CONFORMANCE=true \
    TOOLGATE__LIMITS__REQUEST_BURST=10000 TOOLGATE__LIMITS__TOOL_BURST=10000 \
    TOOLGATE__TOOLS__PAGE_SIZE=4 \
    TOOLGATE__LOG__FORMAT=json \
    exec "$BIN" serve
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

if ! start_toolgate; then
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
# 2025-11-25 tasks through the SDK's own task client API, which only 1.x has (2.x dropped it)
client "python-mcp1-tasks-streamable-http" "$HARNESS_DIR/py-mcp1/bin/python" "$E2E/py_tasks_client.py" --url "$MCP"
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

# ---- sign-in through toolgate's own authorization server, and per-user upstream credentials
# (connect, vault, refresh, revoke): each starts its own provider, browser and servers on its own
# ports, and both spend most of their time waiting for tokens to expire, so they run side by side.
connect_rc=0
timeout -k 10 "$CONNECT_TIMEOUT" bash "$E2E/connect.sh" >"$LOGS/connect.out" 2>&1 &
connect_pid=$!
rc=0
timeout -k 10 "$SIGNIN_TIMEOUT" bash "$E2E/signin.sh" || rc=$?
[ "$rc" = 124 ] && log "signin.sh: killed after ${SIGNIN_TIMEOUT}s"
record "sign-in (authorization server)" "$rc"
wait "$connect_pid" || connect_rc=$?
cat "$LOGS/connect.out" >&2
[ "$connect_rc" = 124 ] && log "connect.sh: killed after ${CONNECT_TIMEOUT}s"
record "per-user upstream credentials (connect)" "$connect_rc"

# ---- per-caller token exchange for an upstream (starts its own AS, upstream and server) ------
rc=0
E2E_CLIENT_TIMEOUT="$CLIENT_TIMEOUT" timeout -k 10 "$UPSTREAM_OAUTH_TIMEOUT" bash "$E2E/upstream_oauth.sh" || rc=$?
[ "$rc" = 124 ] && log "upstream_oauth.sh: killed after ${UPSTREAM_OAUTH_TIMEOUT}s"
record "upstream token exchange" "$rc"

# ---- declarative tools (starts its own upstream and server) ---------------------------------
rc=0
E2E_CLIENT_TIMEOUT="$CLIENT_TIMEOUT" timeout -k 10 "$TOOLS_TIMEOUT" bash "$E2E/tools.sh" || rc=$?
[ "$rc" = 124 ] && log "tools.sh: killed after ${TOOLS_TIMEOUT}s"
record "declarative tools" "$rc"

# ---- upstream MCP servers (starts its own upstreams and server) -----------------------------
rc=0
timeout -k 10 "$UPSTREAMS_TIMEOUT" bash "$E2E/upstreams.sh" || rc=$?
[ "$rc" = 124 ] && log "upstreams.sh: killed after ${UPSTREAMS_TIMEOUT}s"
record "upstream MCP servers" "$rc"

# ---- a 2026-07-28 upstream (starts its own upstream and server) ------------------------------
rc=0
timeout -k 10 "$UPSTREAMS_MODERN_TIMEOUT" bash "$E2E/upstreams_modern.sh" || rc=$?
[ "$rc" = 124 ] && log "upstreams_modern.sh: killed after ${UPSTREAMS_MODERN_TIMEOUT}s"
record "2026-07-28 upstream" "$rc"

# ---- virtual servers (starts its own upstream and server) -----------------------------------
rc=0
timeout -k 10 "$SERVERS_TIMEOUT" bash "$E2E/servers.sh" || rc=$?
[ "$rc" = 124 ] && log "servers.sh: killed after ${SERVERS_TIMEOUT}s"
record "virtual servers" "$rc"

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
