#!/usr/bin/env bash
# Upstream MCP servers end to end: toolgate serving the tools of four real MCP servers (six
# upstreams) as its own, each with a name prefix, to the official Python and TypeScript SDK
# clients:
#   ev_   @modelcontextprotocol/server-everything over stdio, started by toolgate itself
#         (upstreams.everything.stdio: node22 + the package, env and env_passthrough)
#   evh_  the same package over Streamable HTTP on a loopback port (url + allow_private;
#         deny_tools = ["get-env"])
#   py_   a FastMCP server of the Python SDK, tests/e2e/upstreams/fastmcp_server.py (progress,
#         a slow tool to cancel, elicitation, tools added and removed at runtime; tools/list in
#         pages of 3)
#   pyl_  the same FastMCP server as a second upstream: allow_tools, timeout_ms = 2000,
#         max_message_bytes = 65536, a header from toolgate's environment (headers)
#   blocked_  and as a third, without allow_private: refused by the SSRF policy
#   rs_   the rmcp peer of ../shared/bench (the official Rust SDK's Streamable HTTP server);
#         its url comes from the environment (TOOLGATE__UPSTREAMS__RS__URL) over a dead one in
#         the file; allow_tools = ["calculate_sum"]
# tests/e2e/upstreams_py.py (Python SDK 1.x) checks tools/list, calls against direct calls,
# progress, cancellation, elicitation, list_changed, timeout_ms, max_message_bytes, headers, the
# SSRF policy, a legacy SSE client, an upstream dying and coming back
# (this script hands it the evh server's pid and command line), toolgate's stdio child dying, and
# GET /admin/upstreams; tests/e2e/upstreams_ts.mjs (TypeScript SDK) lists, calls one tool of each
# upstream, progress and cancellation. Then: toolgate still healthy, no panic in its log, and its
# stdio child gone once toolgate has stopped.
#
# Needs tests/e2e/setup.sh to have run (components node22, node, py-mcp1, upstreams) and cargo
# for the rmcp peer, built once from $SHARED_BENCH/peers/rmcp with ../shared/bench's own
# build_rust (release, into $BENCH_HOME/target; kept while its sources are unchanged). Everything
# listens on 127.0.0.1 only. Prints a PASS or FAIL line per check; the last line is
# `upstreams: N passed, M failed`; exit status 0 only if M is 0. Called by tests/e2e/run.sh, or
# alone:
#
#   TOOLGATE_BIN=target/debug/toolgate tests/e2e/upstreams.sh
#
# Environment:
#   HARNESS_DIR            where setup.sh installed things (default ~/.cache/toolgate-e2e)
#   TOOLGATE_BIN           the toolgate binary (default: cargo build --locked --bin toolgate, debug)
#   SHARED_BENCH           the peers of ../shared/bench (default: <repo>/../shared/bench)
#   BENCH_HOME             where the rmcp peer is built (default /tmp/mcp-bench, the same as
#                          benches/run.sh, so CI builds it once for both)
#   E2E_UPSTREAMS_PORTS    loopback ports for the upstreams and toolgate, FIRST-LAST
#                          (default 18500-18599)
#   E2E_UPSTREAMS_CLIENT_TIMEOUT  seconds each client run may take (default 300)
set -euo pipefail
shopt -s lastpipe # the loop reading a client's output runs in this shell, so it can count

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
PORTS="${E2E_UPSTREAMS_PORTS:-18500-18599}"
CLIENT_TIMEOUT="${E2E_UPSTREAMS_CLIENT_TIMEOUT:-300}"
SHARED_BENCH="${SHARED_BENCH:-$ROOT/../shared/bench}"
RMCP_HOME="${BENCH_HOME:-/tmp/mcp-bench}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-upstreams.XXXXXX")"
NODE="$HARNESS_DIR/node22/node"
PY="$HARNESS_DIR/py-mcp1/bin/python"
EVERYTHING="$HARNESS_DIR/upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
# server-everything's HTTP server listens on every interface and has no option for it: this
# preload makes http.Server#listen(port, cb) listen on 127.0.0.1 only.
LOOPBACK_ONLY='data:text/javascript,import http from "node:http";
const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function (port, ...rest) {
  return typeof rest[0] === "string" ? listen.call(this, port, ...rest) : listen.call(this, port, "127.0.0.1", ...rest);
};'

log() { printf '[e2e upstreams] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"

server_pid=""
py_pid=""
rs_pid=""
cleanup() {
  stop_pid "$server_pid"
  server_pid=""
  # the evh server may have been restarted by upstreams_py.py, which leaves its pid here
  if [ -s "$LOGS/evh.pid" ]; then stop_pid "$(cat "$LOGS/evh.pid")"; fi
  stop_pid "$py_pid"
  stop_pid "$rs_pid"
  py_pid="" rs_pid=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

finish() {
  [ "$failed" = 0 ] || (IFS=';' && log "failed: ${failures[*]} (logs in $LOGS)")
  echo "upstreams: $passed passed, $failed failed"
  [ "$failed" = 0 ]
}
fail_early() { # what
  record "$1" 1
  finish || true
  exit 1
}

for need in "$NODE" "$PY" "$EVERYTHING" "$HARNESS_DIR/node/node_modules"; do
  [ -e "$need" ] || { log "missing $need: run tests/e2e/setup.sh" && exit 2; }
done
if [ -z "${TOOLGATE_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --locked --bin toolgate)
  TOOLGATE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/toolgate"
fi
[ -x "$TOOLGATE_BIN" ] || { log "no toolgate binary at $TOOLGATE_BIN" && exit 2; }

# ---- the rmcp peer: built with ../shared/bench's own build_rust, only when its sources changed
PEER_SRC="$SHARED_BENCH/peers/rmcp"
RMCP_PEER="$RMCP_HOME/target/release/peer-rmcp"
[ -f "$PEER_SRC/Cargo.toml" ] || fail_early "rmcp peer sources at $PEER_SRC (set SHARED_BENCH)"
if [ ! -x "$RMCP_PEER" ] || [ -n "$(find "$PEER_SRC" -newer "$RMCP_PEER" -print -quit)" ]; then
  log "building the rmcp peer into $RMCP_HOME/target (cargo build --release; the first time takes minutes)"
  # in a subshell: peers.sh defines log and stop_server of its own
  if ! (
    export BENCH_HOME="$RMCP_HOME" BENCH_DIR="$SHARED_BENCH"
    # shellcheck source=/dev/null
    . "$SHARED_BENCH/peers/peers.sh"
    mkdir -p "$BENCH_HOME/logs"
    build_rust "$PEER_SRC"
  ); then
    fail_early "rmcp peer build"
  fi
fi

# ---- ports: the upstreams take the first free ones of PORTS, toolgate one after them ---------
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
NEXT_PORT="${PORTS%-*}"
LAST_PORT="${PORTS#*-}"
take_port() { # variable
  while port_busy "$NEXT_PORT"; do NEXT_PORT=$((NEXT_PORT + 1)); done
  [ "$NEXT_PORT" -le "$LAST_PORT" ] || fail_early "a free port in $PORTS"
  printf -v "$1" '%s' "$NEXT_PORT"
  NEXT_PORT=$((NEXT_PORT + 1))
}
wait_listening() { # name port pid
  for _ in $(seq 200); do
    port_busy "$2" && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.1
  done
  log "$1 did not listen on 127.0.0.1:$2 within 20 s; its log:"
  tail -n 30 "$LOGS/$1.log" >&2
  fail_early "$1 starts"
}

take_port EVH_PORT
take_port PY_PORT
take_port RS_PORT
EVH_ARGV=("$NODE" --import "$LOOPBACK_ONLY" "$EVERYTHING" streamableHttp)
PORT="$EVH_PORT" "${EVH_ARGV[@]}" </dev/null >"$LOGS/evh.log" 2>&1 &
echo $! >"$LOGS/evh.pid"
disown # upstreams_py.py kills it (and starts another): no job notice from bash
"$PY" "$E2E/upstreams/fastmcp_server.py" --port "$PY_PORT" --page-size 3 </dev/null >"$LOGS/py.log" 2>&1 &
py_pid=$!
"$RMCP_PEER" --port "$RS_PORT" --mode stateful </dev/null >"$LOGS/rs.log" 2>&1 &
rs_pid=$!
wait_listening evh "$EVH_PORT" "$(cat "$LOGS/evh.pid")"
wait_listening py "$PY_PORT" "$py_pid"
wait_listening rs "$RS_PORT" "$rs_pid"
EVH_URL="http://127.0.0.1:$EVH_PORT/mcp"
PY_URL="http://127.0.0.1:$PY_PORT/mcp"
RS_URL="http://127.0.0.1:$RS_PORT/mcp"

# ---- toolgate: the upstreams, no built-in tools ---------------------------------------------
UPSTREAM_KEY="e2e-upstream-key-$RANDOM$RANDOM" # pyl_'s credential, sent as X-E2E-Key
mkdir -p "$LOGS/stdio-cwd"
cat >"$LOGS/toolgate.toml" <<EOF
[tools.packs]
examples = false

[upstreams.everything]
prefix = "ev_"
timeout_ms = 60000

[upstreams.everything.stdio]
program = "$NODE"
args = ["$EVERYTHING", "stdio"]
env_passthrough = ["PATH", "HOME"]
env = { TOOLGATE_E2E_MARK = "set-by-config" }
working_dir = "$LOGS/stdio-cwd"

[upstreams.everything-http]
url = "$EVH_URL"
allow_private = true
prefix = "evh_"
deny_tools = ["get-env"]
timeout_ms = 60000

[upstreams.py]
url = "$PY_URL"
allow_private = true
prefix = "py_"
timeout_ms = 60000
# py_add_tool adds tools at run time, which must serve at once here (the approved catalog,
# which would hold them, is tested in tests/api/catalog_approval.rs)
approval = "off"

# the same server again: timeout_ms, max_message_bytes, headers
[upstreams.py-limits]
url = "$PY_URL"
allow_private = true
prefix = "pyl_"
allow_tools = ["slow", "big", "header"]
timeout_ms = 2000
max_message_bytes = 65536
headers = { "X-E2E-Key" = { env = "E2E_UPSTREAM_KEY", prefix = "Key " } }

# and once more without allow_private: the SSRF policy must refuse loopback
[upstreams.blocked]
url = "$PY_URL"
prefix = "blocked_"

# url: TOOLGATE__UPSTREAMS__RS__URL in the environment replaces this dead one
[upstreams.rs]
url = "http://127.0.0.1:9/mcp"
allow_private = true
prefix = "rs_"
allow_tools = ["calculate_sum"]
EOF

launch_toolgate() { # port
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" \
    TOOLGATE__ADMIN__BIND="127.0.0.1:0" \
    TOOLGATE__STORAGE__DATA_DIR="$LOGS/data" \
    TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" \
    TOOLGATE__LIMITS__REQUEST_BURST=10000 TOOLGATE__LIMITS__TOOL_BURST=10000 \
    TOOLGATE__UPSTREAMS__RS__URL="$RS_URL" \
    E2E_UPSTREAM_KEY="$UPSTREAM_KEY" \
    TOOLGATE_E2E_NOT_PASSED="toolgate's own environment, not for the stdio child" \
    TOOLGATE__LOG__FORMAT=json \
    RUST_LOG="info,toolgate=debug" \
    exec "$TOOLGATE_BIN" serve --config "$LOGS/toolgate.toml"
}
PORTS="$NEXT_PORT-$LAST_PORT" # for start_toolgate
if ! start_toolgate; then
  fail_early "server start"
fi
MCP="http://127.0.0.1:$SERVER_PORT/mcp"
ADMIN_ADDR="$(grep '"admin listener"' "$LOGS/server.log" | grep -o '127\.0\.0\.1:[0-9]*' | head -n1 || true)"
[ -n "$ADMIN_ADDR" ] || { log "no 'admin listener' address in the server log" && fail_early "admin listener"; }
token() { # scopes
  TOOLGATE__SERVER__BIND="127.0.0.1:$SERVER_PORT" TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" \
    "$TOOLGATE_BIN" dev-token --config "$LOGS/toolgate.toml" --subject e2e-upstreams --scope "$1"
}
MCP_TOKEN="$(token "mcp:tools")" || fail_early "dev-token"
ADMIN_TOKEN="$(token "toolgate:admin")" || fail_early "dev-token (admin)"
export MCP_TOKEN ADMIN_TOKEN
log "toolgate on 127.0.0.1:$SERVER_PORT (admin $ADMIN_ADDR); upstreams: evh $EVH_PORT, py $PY_PORT, rs $RS_PORT; logs in $LOGS"

run_client python-mcp1 "$PY" "$E2E/upstreams_py.py" --url "$MCP" --admin-url "http://$ADMIN_ADDR" \
  --evh-url "$EVH_URL" --py-url "$PY_URL" --rs-url "$RS_URL" --node "$NODE" --everything "$EVERYTHING" \
  --evh-pid-file "$LOGS/evh.pid" --evh-argv "$("$PY" -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${EVH_ARGV[@]}")" \
  --evh-port "$EVH_PORT" --evh-log "$LOGS/evh.log" --toolgate-pid "$server_pid" --upstream-key "$UPSTREAM_KEY" \
  --timeout $((CLIENT_TIMEOUT - 10))
run_client typescript "$NODE" "$E2E/upstreams_ts.mjs" --url "$MCP" --evh-url "$EVH_URL" --py-url "$PY_URL" --rs-url "$RS_URL" \
  --timeout $((CLIENT_TIMEOUT - 10))

# ---- toolgate itself --------------------------------------------------------------------------
if kill -0 "$server_pid" 2>/dev/null && healthy "$SERVER_PORT"; then
  record "server still healthy" 0
else
  record "server still healthy" 1
  tail -n 50 "$LOGS/server.log" >&2
fi
if grep -q "$UPSTREAM_KEY" "$LOGS/server.log"; then
  record "upstream credential absent from the server log" 1
else
  record "upstream credential absent from the server log" 0
fi
if grep -q 'panicked' "$LOGS/server.log"; then
  grep 'panicked' "$LOGS/server.log" | head -n 5 >&2
  record "no panic in the server log" 1
else
  record "no panic in the server log" 0
fi
# toolgate's stdio children (server-everything) must not outlive it
children=""
for task in /proc/"$server_pid"/task/*; do children+=" $(cat "$task/children" 2>/dev/null || true)"; done
stop_pid "$server_pid"
server_pid=""
left=""
for pid in $children; do
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && left+=" $pid"
done
if [ -z "$children" ]; then
  log "toolgate had no child processes when it was stopped"
  record "stdio upstream stops with toolgate" 1
elif [ -n "$left" ]; then
  log "still running 5 s after toolgate stopped:$left"
  record "stdio upstream stops with toolgate" 1
  for pid in $left; do kill -9 "$pid" 2>/dev/null || true; done
else
  record "stdio upstream stops with toolgate" 0
fi
finish
