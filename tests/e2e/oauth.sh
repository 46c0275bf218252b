#!/usr/bin/env bash
# OAuth end to end: toolgate in auth mode "jwt" (an OAuth 2.1 resource server) behind a real
# authorization server (npm oidc-provider, tests/e2e/oauth/as.mjs), driven by the official MCP
# SDKs' own auth flows: no token -> 401 -> protected-resource metadata -> authorization-server
# metadata -> token -> calculate_sum = 5, with the client-credentials grant and with authorization
# code + PKCE (dynamic registration; login and consent automated by the AS), by the TypeScript SDK
# (tests/e2e/oauth/ts_oauth_client.mjs) and the Python SDK 1.x and 2.x
# (tests/e2e/oauth/py_oauth_client.py); and the negatives, with the TypeScript SDK: a token for
# another resource gets 401, a token without mcp:tools gets 403 insufficient_scope (and the SDK
# recovers from both).
#
# Needs tests/e2e/setup.sh to have run (components node22, node, py-mcp1, py-mcp2, oauth-as).
# Everything listens on 127.0.0.1 only. Prints a PASS or FAIL line per check; the last line is `oauth: N passed, M
# failed`; exit status 0 only if M is 0. Called by tests/e2e/run.sh, or on its own.
#
# Environment:
#   HARNESS_DIR           where setup.sh installed things (default ~/.cache/toolgate-e2e)
#   TOOLGATE_BIN          the toolgate binary (default: cargo build --locked --bin toolgate, debug)
#   E2E_OAUTH_PORTS       loopback ports to try for toolgate, FIRST-LAST (default 18300-18399); the
#                         authorization server takes any free port (its issuer names it)
#   E2E_CLIENT_TIMEOUT    seconds each client run may take (default 120)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
PORTS="${E2E_OAUTH_PORTS:-18300-18399}"
CLIENT_TIMEOUT="${E2E_CLIENT_TIMEOUT:-120}"
NODE="$HARNESS_DIR/node22/node"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-oauth.XXXXXX")"

log() { printf '[e2e oauth] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"

as_pid=""
server_pid=""
cleanup() {
  stop_pid "$server_pid"
  server_pid=""
  stop_pid "$as_pid"
  as_pid=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

finish() { summary oauth; }

for need in "$NODE" "$HARNESS_DIR/node/node_modules/@modelcontextprotocol/sdk/package.json" \
  "$HARNESS_DIR/py-mcp1/bin/python" "$HARNESS_DIR/py-mcp2/bin/python" \
  "$HARNESS_DIR/oauth-as/node_modules/oidc-provider/package.json"; do
  if [ ! -e "$need" ]; then
    log "$need is missing: run tests/e2e/setup.sh first"
    record "harness installed" 1
    finish
    exit 1
  fi
done

# ---- toolgate binary ------------------------------------------------------------------------
toolgate_bin

# ---- authorization server -------------------------------------------------------------------
# It picks a free port itself and prints {"issuer": "http://127.0.0.1:<port>", ...} once listening.
start_as() {
  "$NODE" "$E2E/oauth/as.mjs" >"$LOGS/as.out" 2>"$LOGS/as.log" &
  as_pid=$!
  for _ in $(seq 150); do
    if ! kill -0 "$as_pid" 2>/dev/null; then break; fi
    ISSUER="$(sed -n 's/^{"issuer":"\(http:\/\/127\.0\.0\.1:[0-9]*\)".*/\1/p' "$LOGS/as.out")"
    [ -n "$ISSUER" ] && return 0
    sleep 0.1
  done
  log "the authorization server did not start within 15 s; its log:"
  cat "$LOGS/as.log" >&2
  return 1
}

# ---- toolgate -------------------------------------------------------------------------------
# The resource URI names the port, so the settings file is written for each port tried.
write_config() { # port
  cat >"$LOGS/toolgate.toml" <<EOF
[auth]
mode = "jwt"
resource = "http://127.0.0.1:$1/mcp"
required_scopes = ["mcp:tools"]

[[auth.issuers]]
issuer = "$ISSUER"
EOF
}

launch_toolgate() { # port
  write_config "$1"
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" TOOLGATE__ADMIN__BIND="127.0.0.1:0" TOOLGATE__LOG__FORMAT=json exec "$TOOLGATE_BIN" serve --config "$LOGS/toolgate.toml"
}

# ---- checks ---------------------------------------------------------------------------------
# Runs one scenario of a client; its one-line JSON summary goes to stdout, its stderr (the HTTP
# exchanges it saw) to a log file. The client's own deadline comes before the kill, so it can
# still say what it was waiting for.
scenario() { # name scenario command...
  local name="$1" which="$2" rc=0
  shift 2
  timeout -k 5 "$CLIENT_TIMEOUT" "$@" --url "$MCP" --issuer "$ISSUER" --scenario "$which" \
    --timeout "$((CLIENT_TIMEOUT > 20 ? CLIENT_TIMEOUT - 10 : CLIENT_TIMEOUT))" 2>"$LOGS/$name.stderr" | tee "$LOGS/$name.json" || rc=$?
  [ "$rc" = 124 ] && log "$name: killed after ${CLIENT_TIMEOUT}s"
  if [ "$rc" != 0 ] && [ -s "$LOGS/$name.stderr" ]; then
    log "$name stderr (last lines):"
    tail -n 20 "$LOGS/$name.stderr" >&2
  fi
  record "$name" "$rc"
}

if ! start_as; then
  record "authorization server start" 1
  finish
  exit 1
fi
if ! start_toolgate; then
  record "toolgate start" 1
  finish
  exit 1
fi
MCP="http://127.0.0.1:$SERVER_PORT/mcp"
log "authorization server $ISSUER (oidc-provider $("$NODE" -p "require('$HARNESS_DIR/oauth-as/node_modules/oidc-provider/package.json').version"))"
log "toolgate $("$TOOLGATE_BIN" --version | cut -d' ' -f2) on $MCP, auth mode jwt; logs in $LOGS"

for s in client-credentials authorization-code wrong-resource insufficient-scope; do
  scenario "typescript-$s" "$s" "$NODE" "$E2E/oauth/ts_oauth_client.mjs"
done
for v in 1 2; do
  for s in client-credentials authorization-code; do
    scenario "python-mcp$v-$s" "$s" "$HARNESS_DIR/py-mcp$v/bin/python" "$E2E/oauth/py_oauth_client.py"
  done
done

# both servers must have survived all of it
if kill -0 "$server_pid" 2>/dev/null && healthy "$SERVER_PORT"; then
  record "toolgate still healthy" 0
else
  record "toolgate still healthy" 1
  tail -n 50 "$LOGS/server.log" >&2
fi
if kill -0 "$as_pid" 2>/dev/null; then
  record "authorization server still running" 0
else
  record "authorization server still running" 1
  tail -n 50 "$LOGS/as.log" >&2
fi
cleanup
finish
