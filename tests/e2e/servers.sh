#!/usr/bin/env bash
# Virtual servers ([servers.<name>]) end to end: one toolgate (dev-mode auth) serving
#   data  at /teams/data/mcp: calculate_* (a glob) and analyze_csv of the examples pack, and echo
#         renamed `say` with its own description (overrides)
#   ops   at /teams/ops/mcp: get_current_time (its own title and openWorldHint) and every tool of
#         a real upstream MCP server (upstream:py, the FastMCP server of
#         tests/e2e/upstreams/fastmcp_server.py, prefix py_), py_greet renamed `hello`; its own
#         scope team:ops
# and the default /mcp, which still serves everything. What it proves, with the official SDK
# clients (tests/e2e/servers_py.py as Python mcp 1.x in 2025-11-25, mcp 2.x in 2025-11-25 and in
# 2026-07-28, and tests/e2e/servers_ts.mjs as the TypeScript SDK in 2025-11-25), each holding a
# dev token minted for the server it talks to (RFC 8707 resource = origin + the server's path):
#   - each server identifies as itself (serverInfo name and title, instructions) and lists exactly
#     its own tools, the renamed ones under their new names, with the overridden descriptions,
#     titles and hints, calls them, and knows neither the other's tools nor the old names;
#   - a token minted for one server is refused at the other (the SDK fails with HTTP 401), and
#     the default /mcp lists everything under the original names, descriptions and titles;
#   - list_changed from the upstream (py_add_tool / py_remove_tool, the upstream's own
#     notifications/tools/list_changed) reaches a listener on ops and one on /mcp (2025-11-25 GET
#     stream through the SDK's message handler; 2026-07-28 subscriptions/listen), and a listener on
#     data hears nothing in the same time, up to 1.5 s after ops heard the last change.
# And with curl: the 401's WWW-Authenticate names the other server's RFC 9728 metadata URL
# (/.well-known/oauth-protected-resource<path>), each metadata document gives its server's
# resource, a token without ops' own scope is refused with 403 naming it, a session of data is
# unknown at ops (404), and an unknown path is 404. Then: toolgate still healthy, no panic in its
# log. About 20 s.
#
# One toolgate and one upstream for everything; the listing checks of the four clients run in
# parallel, the list_changed checks one client after another (each would hear the changes the
# others cause, and could not tell them from its own). Needs tests/e2e/setup.sh to have run (components node22, node, py-mcp1, py-mcp2).
# Everything listens on 127.0.0.1 only. Prints a PASS or FAIL line per check; the last line is
# `servers: N passed, M failed`; exit status 0 only if M is 0. Called by tests/e2e/run.sh, or
# alone:
#
#   TOOLGATE_BIN=target/debug/toolgate tests/e2e/servers.sh
#
# Environment:
#   HARNESS_DIR               where setup.sh installed things (default ~/.cache/toolgate-e2e)
#   TOOLGATE_BIN              the toolgate binary (default: cargo build --locked --bin toolgate, debug)
#   E2E_SERVERS_PORTS         loopback ports for the upstream and toolgate, FIRST-LAST
#                             (default 18800-18899)
#   E2E_SERVERS_CLIENT_TIMEOUT  seconds each client run may take (default 60)
set -euo pipefail
shopt -s lastpipe # the loop reading a client's output runs in this shell, so it can count

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
PORTS="${E2E_SERVERS_PORTS:-18800-18899}"
CLIENT_TIMEOUT="${E2E_SERVERS_CLIENT_TIMEOUT:-60}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-servers.XXXXXX")"
NODE="$HARNESS_DIR/node22/node"
PY1="$HARNESS_DIR/py-mcp1/bin/python"
PY2="$HARNESS_DIR/py-mcp2/bin/python"

log() { printf '[e2e servers] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"

server_pid=""
py_pid=""
cleanup() {
  stop_pid "$server_pid"
  stop_pid "$py_pid"
  server_pid="" py_pid=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail_early() { # what
  record "$1" 1
  summary servers || true
  exit 1
}

for need in "$NODE" "$PY1" "$PY2" "$HARNESS_DIR/node/node_modules"; do
  [ -e "$need" ] || { log "missing $need: run tests/e2e/setup.sh node22 node py-mcp1 py-mcp2" && exit 2; }
done
command -v curl >/dev/null || { log "curl not found" && exit 2; }
toolgate_bin

# ---- ports: the upstream takes the first free one of PORTS, toolgate one after it ------------
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
NEXT_PORT="${PORTS%-*}"
LAST_PORT="${PORTS#*-}"
while port_busy "$NEXT_PORT"; do NEXT_PORT=$((NEXT_PORT + 1)); done
[ "$NEXT_PORT" -le "$LAST_PORT" ] || fail_early "a free port in $PORTS"
PY_PORT=$NEXT_PORT

# ---- the upstream: FastMCP (mcp 1.x), whose tool list changes on demand -----------------------
"$PY1" "$E2E/upstreams/fastmcp_server.py" --port "$PY_PORT" </dev/null >"$LOGS/py.log" 2>&1 &
py_pid=$!
for _ in $(seq 200); do
  port_busy "$PY_PORT" && break
  kill -0 "$py_pid" 2>/dev/null || break
  sleep 0.1
done
port_busy "$PY_PORT" || { tail -n 30 "$LOGS/py.log" >&2 && fail_early "the FastMCP upstream listens on $PY_PORT"; }
PY_URL="http://127.0.0.1:$PY_PORT/mcp"

# ---- toolgate: dev-mode auth, the examples pack, the upstream, two virtual servers -----------
DATA_PATH=/teams/data/mcp
OPS_PATH=/teams/ops/mcp
SAY_DESCRIPTION="Say the text back (the data team's echo)"
HELLO_DESCRIPTION="Greet an on-call engineer by name"
cat >"$LOGS/toolgate.toml" <<EOF
[auth]
mode = "dev"

[tools.packs]
examples = true

[upstreams.py]
url = "$PY_URL"
allow_private = true
prefix = "py_"
timeout_ms = 30000
# py_add_tool adds tools at run time, which must serve at once here (the approved catalog, which
# would hold them, is tested in tests/api/catalog_approval.rs and tests/cluster/approvals.sh)
approval = "off"

[servers.data]
path = "$DATA_PATH"
title = "Data team"
instructions = "Tools of the data team."
tools = ["calculate_*", "analyze_csv"]
overrides.echo = { name = "say", description = "$SAY_DESCRIPTION" }

[servers.ops]
path = "$OPS_PATH"
title = "Ops team"
tools = ["get_current_time", "upstream:py"]
scopes = ["team:ops"]
overrides.py_greet = { name = "hello", description = "$HELLO_DESCRIPTION" }
overrides.get_current_time = { title = "Ops clock", open_world_hint = true }
EOF

launch_toolgate() { # port
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" \
    TOOLGATE__ADMIN__BIND="127.0.0.1:0" \
    TOOLGATE__STORAGE__DATA_DIR="$LOGS/data" \
    TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" \
    TOOLGATE__LIMITS__REQUEST_BURST=10000 TOOLGATE__LIMITS__TOOL_BURST=10000 \
    TOOLGATE__LOG__FORMAT=json \
    RUST_LOG="info,toolgate=debug" \
    exec "$TOOLGATE_BIN" serve --config "$LOGS/toolgate.toml"
}
PORTS="$((NEXT_PORT + 1))-$LAST_PORT" # for start_toolgate
start_toolgate || fail_early "server start"
ORIGIN="http://127.0.0.1:$SERVER_PORT"
DATA_URL="$ORIGIN$DATA_PATH"
OPS_URL="$ORIGIN$OPS_PATH"
DEFAULT_URL="$ORIGIN/mcp"

# A dev token whose audience is one endpoint's resource (the origin with its path).
token() { # resource scopes
  TOOLGATE__SERVER__BIND="127.0.0.1:$SERVER_PORT" TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" \
    TOOLGATE__AUTH__RESOURCE="$1" "$TOOLGATE_BIN" dev-token --config "$LOGS/toolgate.toml" --subject e2e-servers --scope "$2"
}
TOKEN_DATA="$(token "$DATA_URL" "mcp:tools")" || fail_early "dev-token (data)"
TOKEN_OPS="$(token "$OPS_URL" "mcp:tools team:ops")" || fail_early "dev-token (ops)"
TOKEN_OPS_UNSCOPED="$(token "$OPS_URL" "mcp:tools")" || fail_early "dev-token (ops, without team:ops)"
TOKEN_DEFAULT="$(token "$DEFAULT_URL" "mcp:tools")" || fail_early "dev-token (/mcp)"
export TOKEN_DATA TOKEN_OPS TOKEN_DEFAULT
log "toolgate on 127.0.0.1:$SERVER_PORT (dev-mode auth); upstream py on $PY_PORT; logs in $LOGS"

# ---- curl: the refusals and the metadata ------------------------------------------------------
# One 2025-11-25 initialize at a URL with a token; prints the status, then the headers in $LOGS/$2.
INIT='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}'
post_init() { # url headers-file token
  curl -sS -m 10 -o /dev/null -D "$LOGS/$2" -w '%{http_code}' -X POST "$1" -H "Authorization: Bearer $3" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' --data "$INIT"
}
challenge_of() { grep -i '^www-authenticate:' "$LOGS/$1" | tr -d '\r' || true; }

# A token for one endpoint at another: 401, and the challenge points at that other endpoint's
# metadata.
refused_pointing_at() { # token-name token url path
  local status metadata challenge file
  file="headers-${1//\//_}-at-${4//\//_}"
  status="$(post_init "$3" "$file" "$2")" || status="curl failed"
  metadata="$ORIGIN/.well-known/oauth-protected-resource$4"
  challenge="$(challenge_of "$file")"
  if [ "$status" = 401 ] && [[ "$challenge" == *'error="invalid_token"'* ]] && [[ "$challenge" == *"resource_metadata=\"$metadata\""* ]]; then
    record "curl: a token for $1 is refused at $4: 401, resource_metadata=\"$metadata\"" 0
  else
    log "a token for $1 at $4: status $status, $challenge"
    record "curl: a token for $1 is refused at $4: 401, resource_metadata=\"$metadata\"" 1
  fi
}
refused_pointing_at data "$TOKEN_DATA" "$OPS_URL" "$OPS_PATH"
refused_pointing_at ops "$TOKEN_OPS" "$DATA_URL" "$DATA_PATH"
refused_pointing_at data "$TOKEN_DATA" "$DEFAULT_URL" /mcp
refused_pointing_at /mcp "$TOKEN_DEFAULT" "$DATA_URL" "$DATA_PATH"

# ...and each token where it belongs is let in (200), so the refusals above are about the audience.
for pair in "data $TOKEN_DATA $DATA_URL" "ops $TOKEN_OPS $OPS_URL" "/mcp $TOKEN_DEFAULT $DEFAULT_URL"; do
  read -r name tok url <<<"$pair"
  status="$(post_init "$url" "headers-${name//\//_}-ok" "$tok")" || status="curl failed"
  record "curl: a token for $name is let in there (status $status)" "$([ "$status" = 200 ] && echo 0 || echo 1)"
done

# ops requires its own scope: 403 naming it.
status="$(post_init "$OPS_URL" headers-ops-unscoped "$TOKEN_OPS_UNSCOPED")" || status="curl failed"
challenge="$(challenge_of headers-ops-unscoped)"
if [ "$status" = 403 ] && [[ "$challenge" == *'scope="mcp:tools team:ops"'* ]]; then
  record "curl: a token for ops without team:ops is 403 naming the scope" 0
else
  log "a token for ops without team:ops: status $status, $challenge"
  record "curl: a token for ops without team:ops is 403 naming the scope" 1
fi

# Each server's RFC 9728 metadata gives its own resource; an unknown server has none.
for pair in "$DATA_PATH mcp:tools" "$OPS_PATH team:ops"; do
  read -r path scope <<<"$pair"
  doc="$(curl -sS -m 10 "$ORIGIN/.well-known/oauth-protected-resource$path" || true)"
  if [ "$(jq -r .resource <<<"$doc" 2>/dev/null)" = "$ORIGIN$path" ] &&
    jq -e --arg s "$scope" '.scopes_supported | index($s)' <<<"$doc" >/dev/null 2>&1; then
    record "curl: metadata of $path gives resource $ORIGIN$path and scope $scope" 0
  else
    log "metadata of $path: $doc"
    record "curl: metadata of $path gives resource $ORIGIN$path and scope $scope" 1
  fi
done
# A session belongs to the endpoint that made it: data's session id is unknown at ops.
sid="$(grep -i '^mcp-session-id:' "$LOGS/headers-data-ok" | cut -d: -f2 | tr -d ' \r' || true)"
status="$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -X POST "$OPS_URL" -H "Authorization: Bearer $TOKEN_OPS" \
  -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25' -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' --data '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' || echo failed)"
record "curl: a session of data ('${sid:0:8}…') is unknown at ops (status $status)" "$([ -n "$sid" ] && [ "$status" = 404 ] && echo 0 || echo 1)"
status="$(curl -sS -m 10 -o /dev/null -w '%{http_code}' "$ORIGIN/.well-known/oauth-protected-resource/teams/nope/mcp" || echo failed)"
record "curl: no metadata for an unknown server (status $status)" "$([ "$status" = 404 ] && echo 0 || echo 1)"
status="$(post_init "$ORIGIN/teams/nope/mcp" headers-nope "$TOKEN_DEFAULT")" || status="curl failed"
record "curl: an unknown path is 404, not a request for a token (status $status)" "$([ "$status" = 404 ] && echo 0 || echo 1)"

# ---- the SDK clients --------------------------------------------------------------------------
# What each endpoint must serve, for the clients. ops: get_current_time and the upstream's tools,
# py_greet as hello. UPSTREAM_TOOLS: the tools of tests/e2e/upstreams/fastmcp_server.py.
UPSTREAM_TOOLS='["greet","fail","contents","big","header","count","slow","slow_status","ask_name","add_tool","remove_tool"]'
jq -n --arg data "$DATA_URL" --arg ops "$OPS_URL" --arg default "$DEFAULT_URL" \
  --arg say "$SAY_DESCRIPTION" --arg hello "$HELLO_DESCRIPTION" --argjson upstream "$UPSTREAM_TOOLS" '{
  data: {url: $data, token_env: "TOKEN_DATA", name: "data", title: "Data team", instructions: "Tools of the data team.",
         tools: ["analyze_csv", "calculate_sum", "say"], served: {say: {description: $say}},
         call: {name: "say", arguments: {text: "hi from data"}, text: "hi from data"},
         unknown: ["echo", "get_current_time"]},
  ops: {url: $ops, token_env: "TOKEN_OPS", name: "ops", title: "Ops team", instructions: null,
        tools: (["get_current_time", "hello"] + [$upstream[] | select(. != "greet") | "py_" + .]),
        served: {hello: {description: $hello},
                 get_current_time: {title: "Ops clock", annotations: {openWorldHint: true, readOnlyHint: true}}},
        call: {name: "hello", arguments: {name: "ops"}, text: "Hello, ops!"},
        unknown: ["py_greet", "calculate_sum"]},
  default: {url: $default, token_env: "TOKEN_DEFAULT",
            includes: (["analyze_csv", "calculate_sum", "echo", "get_current_time", "report_progress_steps"] + [$upstream[] | "py_" + .]),
            excludes: ["say", "hello"],
            not_served: {echo: {description: $say}, py_greet: {description: $hello},
                         get_current_time: {title: "Ops clock", annotations: {openWorldHint: true}}}}
}' >"$LOGS/expect.json"

# The upstream's tools reach toolgate shortly after it starts: wait (20 s at most) until ops
# lists hello, so the clients do not race the upstream's connection.
ops_ready() {
  curl -sS -m 5 -X POST "$OPS_URL" -H "Authorization: Bearer $TOKEN_OPS" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' \
    --data '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"curl","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}}}' |
    grep -q '"hello"'
}
for _ in $(seq 80); do ops_ready && break; sleep 0.25; done
ops_ready || { tail -n 30 "$LOGS/server.log" >&2 && fail_early "the upstream's tools reach ops within 20 s"; }
log "curl checks done, ops serves the upstream's tools after ${SECONDS}s"

CLIENT_ARGS=(--expect "$LOGS/expect.json" --timeout $((CLIENT_TIMEOUT - 5)))
clients=(
  "python-mcp1 $PY1 $E2E/servers_py.py --era 2025-11-25"
  "python-mcp2 $PY2 $E2E/servers_py.py --era 2025-11-25"
  "python-mcp2-modern $PY2 $E2E/servers_py.py --era 2026-07-28"
  "typescript $NODE $E2E/servers_ts.mjs"
)
# Listing, calls and refusals: all four at once, each into its own file, then counted in order.
pids=()
for c in "${clients[@]}"; do
  read -r -a argv <<<"$c"
  { timeout -k 5 "$CLIENT_TIMEOUT" "${argv[@]:1}" "${CLIENT_ARGS[@]}" --checks serve 2>"$LOGS/${argv[0]}-serve.stderr" || echo "EXIT $?"; } \
    >"$LOGS/${argv[0]}-serve.out" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || true; done
for c in "${clients[@]}"; do
  read -r -a argv <<<"$c"
  run_client "${argv[0]}" cat "$LOGS/${argv[0]}-serve.out" # an EXIT line there counts as in run_client
  if grep -q '^EXIT ' "$LOGS/${argv[0]}-serve.out"; then tail -n 20 "$LOGS/${argv[0]}-serve.stderr" >&2; fi
done
log "listing checks done after ${SECONDS}s"
# list_changed: one client after another.
for c in "${clients[@]}"; do
  read -r -a argv <<<"$c"
  run_client "${argv[0]}" "${argv[@]:1}" "${CLIENT_ARGS[@]}" --checks list_changed
done

log "list_changed checks done after ${SECONDS}s"

# ---- toolgate itself --------------------------------------------------------------------------
if kill -0 "$server_pid" 2>/dev/null && healthy "$SERVER_PORT"; then
  record "server still healthy" 0
else
  record "server still healthy" 1
  tail -n 50 "$LOGS/server.log" >&2
fi
if grep -q 'panicked' "$LOGS/server.log"; then
  grep 'panicked' "$LOGS/server.log" | head -n 5 >&2
  record "no panic in the server log" 1
else
  record "no panic in the server log" 0
fi
summary servers
