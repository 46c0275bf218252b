#!/usr/bin/env bash
# A real third-party 2026-07-28 server as a toolgate upstream, end to end:
#   fm_   tests/e2e/upstreams/fastmcp_modern_server.py, an MCPServer of the official Python SDK
#         (PyPI mcp 2.3.0, the py-mcp2 venv), over Streamable HTTP on a loopback port; it answers
#         server/discover with supportedVersions ["2026-07-28"] (checked here first)
# toolgate (auth off) serves it as [upstreams.fm] with protocol = "2026-07-28", so a silent fall
# back to initialize fails the run; GET /admin/upstreams must show it connected with
# protocol_version "2026-07-28". tests/e2e/upstreams_modern_py.py then runs twice, as the official
# Python SDK 2.x client in 2026-07-28 (py-mcp2, mode="auto") and as the 1.x client in 2025-11-25
# (py-mcp1), comparing with direct calls to the upstream: tools/list, a call, what the upstream
# saw of toolgate (_meta, Mcp-* headers), progress, elicitation (the upstream's input_required
# relayed: toolgate's own input_required for 2.x, elicitation/create for 1.x; a decline; a client
# without the capability), cancellation and tools list_changed (the upstream's
# subscriptions/listen stream to the client's listen stream or GET stream). Then: the upstream still connected in 2026-07-28 and never reconnected, toolgate
# healthy, no panic in its log.
#
# Needs tests/e2e/setup.sh to have run (components py-mcp1, py-mcp2). Everything listens on
# 127.0.0.1 only. Prints a PASS or FAIL line per check; the last line is
# `upstreams-modern: N passed, M failed`; exit status 0 only if M is 0. Called by
# tests/e2e/run.sh, or alone:
#
#   TOOLGATE_BIN=target/debug/toolgate tests/e2e/upstreams_modern.sh
#
# Environment:
#   HARNESS_DIR                 where setup.sh installed things (default ~/.cache/toolgate-e2e)
#   TOOLGATE_BIN                the toolgate binary (default: cargo build --locked --bin toolgate, debug)
#   E2E_UPSTREAMS_MODERN_PORTS  loopback ports for the upstream and toolgate, FIRST-LAST
#                               (default 18600-18649)
#   E2E_UPSTREAMS_MODERN_CLIENT_TIMEOUT  seconds each client run may take (default 100)
set -euo pipefail
shopt -s lastpipe # the loop reading a client's output runs in this shell, so it can count

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
PORTS="${E2E_UPSTREAMS_MODERN_PORTS:-18600-18649}"
CLIENT_TIMEOUT="${E2E_UPSTREAMS_MODERN_CLIENT_TIMEOUT:-100}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-upstreams-modern.XXXXXX")"
PY1="$HARNESS_DIR/py-mcp1/bin/python"
PY2="$HARNESS_DIR/py-mcp2/bin/python"

log() { printf '[e2e upstreams-modern] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"

server_pid=""
fm_pid=""
cleanup() {
  stop_pid "$server_pid"
  stop_pid "$fm_pid"
  server_pid="" fm_pid=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

finish() {
  [ "$failed" = 0 ] || (IFS=';' && log "failed: ${failures[*]} (logs in $LOGS)")
  echo "upstreams-modern: $passed passed, $failed failed"
  [ "$failed" = 0 ]
}
fail_early() { # what
  record "$1" 1
  finish || true
  exit 1
}

for need in "$PY1" "$PY2"; do
  [ -x "$need" ] || { log "missing $need: run tests/e2e/setup.sh py-mcp1 py-mcp2" && exit 2; }
done
if [ -z "${TOOLGATE_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --locked --bin toolgate)
  TOOLGATE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/toolgate"
fi
[ -x "$TOOLGATE_BIN" ] || { log "no toolgate binary at $TOOLGATE_BIN" && exit 2; }

# ---- ports: the upstream takes the first free one of PORTS, toolgate one after it ------------
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

# ---- the upstream: mcp 2.3.0's MCPServer ------------------------------------------------------
take_port FM_PORT
"$PY2" "$E2E/upstreams/fastmcp_modern_server.py" --port "$FM_PORT" </dev/null >"$LOGS/fm.log" 2>&1 &
fm_pid=$!
wait_listening fm "$FM_PORT" "$fm_pid"
FM_URL="http://127.0.0.1:$FM_PORT/mcp"

# The upstream itself speaks 2026-07-28: server/discover, with the version in the
# MCP-Protocol-Version and Mcp-Method headers and the request's _meta, lists it.
if "$PY2" - "$FM_URL" >"$LOGS/discover.out" 2>"$LOGS/discover.stderr" <<'EOF'; then
import json, sys, urllib.request
body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "upstreams_modern.sh", "version": "0"}}}}
request = urllib.request.Request(sys.argv[1], data=json.dumps(body).encode(), method="POST", headers={
    "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"})
with urllib.request.urlopen(request, timeout=10) as r:
    answer = json.load(r)
print(json.dumps(answer), file=sys.stderr)
versions = answer.get("result", {}).get("supportedVersions", [])
print(f"supportedVersions {json.dumps(versions)}")
sys.exit(0 if "2026-07-28" in versions else f"supportedVersions {versions}: {answer}")
EOF
  record "upstream answers server/discover with 2026-07-28 ($(cat "$LOGS/discover.out"))" 0
else
  cat "$LOGS/discover.stderr" >&2
  fail_early "upstream answers server/discover with 2026-07-28"
fi

# ---- toolgate: auth off, the one upstream, spoken in 2026-07-28 only --------------------------
cat >"$LOGS/toolgate.toml" <<EOF
[auth]
mode = "off"

[tools.packs]
examples = false

[upstreams.fm]
url = "$FM_URL"
allow_private = true
protocol = "2026-07-28"
prefix = "fm_"
timeout_ms = 60000
# its tool list changes at run time (list_changed), which must serve at once here
approval = "off"
EOF

launch_toolgate() { # port
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" \
    TOOLGATE__ADMIN__BIND="127.0.0.1:0" \
    TOOLGATE__STORAGE__DATA_DIR="$LOGS/data" \
    TOOLGATE__LIMITS__REQUEST_BURST=10000 TOOLGATE__LIMITS__TOOL_BURST=10000 \
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
log "toolgate on 127.0.0.1:$SERVER_PORT (admin $ADMIN_ADDR, auth off); upstream fm on $FM_PORT; logs in $LOGS"

# GET /admin/upstreams: waits (up to 20 s) for fm to be connected, then checks it is spoken in
# 2026-07-28; with --stable also that it never reconnected and still has its tools.
admin_check() { # [--stable]
  "$PY2" - "http://$ADMIN_ADDR/admin/upstreams" "${1:-}" <<'EOF'
import json, sys, time, urllib.request
url, stable = sys.argv[1], sys.argv[2] == "--stable"
deadline, entry, doc = time.monotonic() + 20, None, None
while time.monotonic() < deadline:
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    entry = next((u for u in doc.get("upstreams", []) if u.get("name") == "fm"), None)
    if entry is not None and entry.get("state") == "connected":
        break
    time.sleep(0.25)
print(json.dumps(entry if entry is not None else doc))
problems = []
if entry is None:
    problems.append("no entry named fm")
else:
    if entry.get("state") != "connected":
        problems.append(f"state {entry.get('state')!r} (last_error {entry.get('last_error')!r})")
    if entry.get("protocol_version") != "2026-07-28":
        problems.append(f"protocol_version {entry.get('protocol_version')!r}, wanted '2026-07-28'")
    if entry.get("transport") != "http":
        problems.append(f"transport {entry.get('transport')!r}")
    if stable and entry.get("reconnects") != 0:
        problems.append(f"reconnects {entry.get('reconnects')!r}, wanted 0")
    if not entry.get("tools"):
        problems.append(f"tools {entry.get('tools')!r}")
sys.exit("; ".join(problems) if problems else 0)
EOF
}
if admin_check >"$LOGS/admin-start.json" 2>"$LOGS/admin-start.stderr"; then
  record "GET /admin/upstreams: fm connected, protocol_version 2026-07-28 ($(cat "$LOGS/admin-start.json"))" 0
else
  log "GET /admin/upstreams: $(cat "$LOGS/admin-start.json") $(tail -n 3 "$LOGS/admin-start.stderr")"
  tail -n 20 "$LOGS/server.log" >&2
  fail_early "GET /admin/upstreams: fm connected, protocol_version 2026-07-28"
fi

run_client python-mcp2 "$PY2" "$E2E/upstreams_modern_py.py" --url "$MCP" --upstream-url "$FM_URL" --timeout $((CLIENT_TIMEOUT - 10))
run_client python-mcp1 "$PY1" "$E2E/upstreams_modern_py.py" --url "$MCP" --upstream-url "$FM_URL" --timeout $((CLIENT_TIMEOUT - 10))

# ---- afterwards -------------------------------------------------------------------------------
if admin_check --stable >"$LOGS/admin-end.json" 2>"$LOGS/admin-end.stderr"; then
  record "fm still connected in 2026-07-28, never reconnected" 0
else
  log "GET /admin/upstreams: $(cat "$LOGS/admin-end.json") $(tail -n 3 "$LOGS/admin-end.stderr")"
  record "fm still connected in 2026-07-28, never reconnected" 1
fi
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
finish
