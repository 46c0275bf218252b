#!/usr/bin/env bash
# Declarative tools end to end: toolgate started with nothing but a tools directory (a copy of
# deploy/tools/, no built-in packs), serving the example HTTP, command and builtin tools to the
# official Python SDK 1.x and 2.x (tests/e2e/py_tools_client.py), against a stand-in upstream
# API on loopback (tests/e2e/upstream.py); then adding a tool file while serving, which the
# client must hear about as notifications/tools/list_changed. Also `toolgate tools validate`
# on the shipped examples, and that the upstream token never reaches the server's log.
#
# Needs tests/e2e/setup.sh to have run (py-mcp1, py-mcp2). Prints a PASS or FAIL line per
# check; the last line is `tools: N passed, M failed`. Called by tests/e2e/run.sh, or alone.
#
# Environment:
#   HARNESS_DIR         where setup.sh installed things (default ~/.cache/toolgate-e2e)
#   TOOLGATE_BIN        the toolgate binary (default: cargo build --locked --bin toolgate, debug)
#   E2E_TOOLS_PORTS     loopback ports to try for toolgate, FIRST-LAST (default 18400-18499)
#   E2E_CLIENT_TIMEOUT  seconds each client run may take (default 120)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
PORTS="${E2E_TOOLS_PORTS:-18400-18499}"
CLIENT_TIMEOUT="${E2E_CLIENT_TIMEOUT:-120}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-tools.XXXXXX")"

log() { printf '[e2e tools] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"

upstream_pid=""
server_pid=""
cleanup() {
  stop_pid "$server_pid"
  server_pid=""
  stop_pid "$upstream_pid"
  upstream_pid=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

finish() { summary tools; }

toolgate_bin

# ---- the shipped examples validate as they are ----------------------------------------------
rc=0
TOOLGATE__TOOLS__PACKS__EXAMPLES=false TOOLGATE__TOOLS__HTTP__SECRET_ENV=GITHUB_TOKEN "$TOOLGATE_BIN" tools validate "$ROOT/deploy/tools" >"$LOGS/validate.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || cat "$LOGS/validate.out" >&2
record "toolgate tools validate deploy/tools" "$rc"

# ---- the world the tools reach: an upstream API, a git repository, a CSV directory ----------
SECRET="e2e-upstream-token-$RANDOM$RANDOM"
python3 "$E2E/upstream.py" --token "$SECRET" --log "$LOGS/upstream.jsonl" >"$LOGS/upstream.port" 2>"$LOGS/upstream.log" &
upstream_pid=$!
for _ in $(seq 100); do [ -s "$LOGS/upstream.port" ] && break; sleep 0.1; done
UPSTREAM_PORT="$(head -n1 "$LOGS/upstream.port")"
[ -n "$UPSTREAM_PORT" ] || { log "the upstream did not start" && record "upstream" 1 && finish && exit 1; }

REPO="$LOGS/repo"
SUBJECT="Initial import of the e2e repository"
git init -q "$REPO"
git -C "$REPO" -c user.name=e2e -c user.email=e2e@example.invalid commit -q --allow-empty -m "$SUBJECT"
mkdir -p "$LOGS/csv"
printf 'region,amount\nnorth,10\nsouth,20\nnorth,5\n' >"$LOGS/csv/sales.csv"

# The container's view: a tools directory and environment variables, nothing else. The git
# example names the repository it may read (/srv/repo); here it is the test repository.
TOOLS="$LOGS/tools"
cp -r "$ROOT/deploy/tools" "$TOOLS"
sed -i "s#/srv/repo#$REPO#g" "$TOOLS/git_log.toml"
rm -f "$TOOLS"/*.md

launch_toolgate() { # port
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" \
    TOOLGATE__ADMIN__BIND="127.0.0.1:0" \
    TOOLGATE__STORAGE__DATA_DIR="$LOGS/data" \
    TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" \
    TOOLGATE__TOOLS__PACKS__EXAMPLES=false \
    TOOLGATE__TOOLS__PATH="$TOOLS" \
    TOOLGATE__TOOLS__CSV_DIR="$LOGS/csv" \
    TOOLGATE__TOOLS__HTTP__ALLOW_HOSTS="127.0.0.1" \
    TOOLGATE__TOOLS__HTTP__SECRET_ENV=GITHUB_TOKEN \
    WEATHER_API_URL="http://127.0.0.1:$UPSTREAM_PORT" \
    GITHUB_API_URL="http://127.0.0.1:$UPSTREAM_PORT" \
    GITHUB_TOKEN="$SECRET" \
    TOOLGATE__LOG__FORMAT=json \
    RUST_LOG="info,toolgate=debug" \
    exec "$TOOLGATE_BIN" serve
}

if ! start_toolgate; then
  record "server start" 1
  finish
  exit 1
fi
MCP="http://127.0.0.1:$SERVER_PORT/mcp"
# A token per client: github_create_issue's own rate limit (burst 3) is per caller.
token() { # subject
  TOOLGATE__SERVER__BIND="127.0.0.1:$SERVER_PORT" TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" \
    "$TOOLGATE_BIN" dev-token --subject "$1" --scope "mcp:tools github:write"
}
log "toolgate on 127.0.0.1:$SERVER_PORT serving $TOOLS; upstream on $UPSTREAM_PORT; logs in $LOGS"

for v in 1 2; do
  rm -f "$TOOLS/zz_added.toml"
  sleep 1 # let the removal's reload settle before the client starts watching
  name="python-mcp$v-declarative-tools"
  MCP_TOKEN="$(token "e2e-tools-$v")"
  export MCP_TOKEN
  rc=0
  timeout -k 5 "$CLIENT_TIMEOUT" "$HARNESS_DIR/py-mcp$v/bin/python" "$E2E/py_tools_client.py" \
    --url "$MCP" --tools-dir "$TOOLS" --secret "$SECRET" --commit-subject "$SUBJECT" \
    2>"$LOGS/$name.stderr" | tee "$LOGS/$name.json" || rc=$?
  [ "$rc" = 0 ] || tail -n 20 "$LOGS/$name.stderr" >&2
  record "$name" "$rc"
done

# The upstream saw the token; the server's log must not have.
if grep -q "$SECRET" "$LOGS/server.log"; then
  record "upstream token absent from the server log" 1
else
  record "upstream token absent from the server log" 0
fi
if grep -qi "\"authorization\": \"Bearer $SECRET\"" "$LOGS/upstream.jsonl"; then
  record "upstream received the token from the environment" 0
else
  record "upstream received the token from the environment" 1
fi
finish
