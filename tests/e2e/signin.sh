#!/usr/bin/env bash
# Sign-in for every MCP client, end to end with real parts: toolgate's own authorization server
# ([authorization_server]) in front of a real OpenID Connect provider (npm oidc-provider,
# tests/e2e/oauth/idp.mjs) configured like an enterprise one: no dynamic registration, one
# confidential client for toolgate. The official SDK clients sign a user in through toolgate as
# desktop MCP clients do: their OAuth client providers, a loopback redirect listener, and a
# headless Chromium (Debian's, driven by playwright-core: tests/e2e/oauth/browser.mjs) in which the
# user logs in at the provider, consents there, and approves on toolgate's consent page. Then
# tools/list, calculate_sum = 5, and, after the 30 s access token has expired, a refresh.
#
# Two runs, in parallel, each with its own provider and toolgate:
#   a  the provider ignores `resource` (Okta's org server, Google); toolgate grants mcp:tools by
#      the ID token's groups claim (scope rule on groups = mcp-users); clients: TypeScript SDK
#      (tests/e2e/oauth/ts_signin_client.mjs) and Python SDK 1.x (tests/e2e/oauth/py_signin_client.py)
#   b  the provider refuses `resource` (invalid_target, as Entra ID does); toolgate grants mcp:tools
#      to every signed-in user; clients: TypeScript SDK and Python SDK 2.x
# and in each, every client twice: once registering dynamically (RFC 7591; the TypeScript one then
# signs in a second time, and toolgate's consent page must not show: remembered), once with a Client ID
# Metadata Document served over https on loopback (tests/e2e/oauth/cimd_server.mjs, with a CA and a
# certificate made here with openssl; toolgate trusts the CA through metadata_documents.ca_file and
# may fetch from 127.0.0.1:<port> through metadata_documents.private_hosts). What each client checks
# is listed at the top of its script; besides, per run: the provider's log (toolgate's client only,
# PKCE, nonce, never `resource`), toolgate's database (a grant per sign-in, each refreshed once, none
# revoked) and audit log, each metadata document fetched, toolgate still healthy.
#
# Needs tests/e2e/setup.sh to have run (components node22, node, py-mcp1, py-mcp2, oauth-as,
# browser), openssl, sqlite3 and python3. Everything listens on 127.0.0.1 only. Prints a PASS or FAIL
# line per check; the last line is `signin: N passed, M failed`; exit status 0 only if M is 0.
# Called by tests/e2e/run.sh, or on its own (about a minute).
#
# Environment:
#   HARNESS_DIR           where setup.sh installed things (default ~/.cache/toolgate-e2e)
#   TOOLGATE_BIN          the toolgate binary (default: cargo build --locked --bin toolgate, debug)
#   E2E_SIGNIN_PORTS      loopback ports to try for the two toolgates, FIRST-LAST (default
#                         18700-18799); the other services take any free port
#   E2E_SIGNIN_CLIENT_TIMEOUT  seconds each client may take (default 150; the access token's expiry
#                         alone takes 30 s plus toolgate's leeway)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
export PYTHONDONTWRITEBYTECODE=1
SIGNIN_PORTS="${E2E_SIGNIN_PORTS:-18700-18799}"
CLIENT_TIMEOUT="${E2E_SIGNIN_CLIENT_TIMEOUT:-150}"
NODE="$HARNESS_DIR/node22/node"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-signin.XXXXXX")"
started=$SECONDS

log() { printf '[e2e signin] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"
# shellcheck source=tests/e2e/oauth/signin_lib.sh
. "$E2E/oauth/signin_lib.sh"

server_pid=""
TOOLGATE_PIDS=()
cleanup() {
  local rc=$? pid
  # A command that failed under set -e ends the script here: say so, with the logs.
  if [ -z "${FINISHED:-}" ] && [ "$rc" != 0 ] && [ "$rc" != 130 ]; then
    FINISHED=1
    record "signin.sh ran to its end (it stopped with status $rc at line ${BASH_LINENO[0]:-?})" 1
    finish || true
  fi
  for pid in "${TOOLGATE_PIDS[@]}"; do stop_pid "$pid"; done
  TOOLGATE_PIDS=()
  signin_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# On failure: the logs that say why, on stderr (CI keeps nothing else).
dump_logs() {
  local f
  for f in "$LOGS"/*/server.log "$LOGS"/idp-*.log "$LOGS"/browser.log "$LOGS"/cimd.log; do
    [ -s "$f" ] || continue
    log "---- ${f#"$LOGS"/} (last 40 lines) ----"
    tail -n 40 "$f" >&2
  done
}
finish() {
  FINISHED=1
  log "took $((SECONDS - started)) s; logs in $LOGS"
  [ "$failed" = 0 ] || dump_logs
  summary signin
}

for need in "$NODE" "$HARNESS_DIR/node/node_modules/@modelcontextprotocol/sdk/package.json" \
  "$HARNESS_DIR/py-mcp1/bin/python" "$HARNESS_DIR/py-mcp2/bin/python" \
  "$HARNESS_DIR/oauth-as/node_modules/oidc-provider/package.json" \
  "$HARNESS_DIR/browser/node_modules/playwright-core/package.json" /usr/bin/chromium; do
  if [ ! -e "$need" ]; then
    log "$need is missing: run tests/e2e/setup.sh first"
    record "harness installed" 1
    finish
    exit 1
  fi
done
for tool in openssl sqlite3 python3; do
  command -v "$tool" >/dev/null || { log "$tool is missing" && record "$tool installed" 1 && finish && exit 1; }
done

toolgate_bin

# ---- shared services: the browser, the metadata documents' https server -----------------------
if ! make_pki "$LOGS/pki"; then
  record "CA and certificate for 127.0.0.1 (openssl)" 1
  finish
  exit 1
fi
mkdir -p "$LOGS/cimd"
if ! start_service cimd "$NODE" "$E2E/oauth/cimd_server.mjs" --dir "$LOGS/cimd" --cert "$LOGS/pki/server.pem" --key "$LOGS/pki/server.key"; then
  record "metadata documents' https server start" 1
  finish
  exit 1
fi
CIMD_URL="$(json_field "$SERVICE_JSON" url)"
CIMD_PORT="$(json_field "$SERVICE_JSON" port)"
write_cimd_doc "$LOGS/cimd" ts-cimd "$CIMD_URL" "toolgate e2e TypeScript (metadata document)"
write_cimd_doc "$LOGS/cimd" py1-cimd "$CIMD_URL" "toolgate e2e Python 1.x (metadata document)"
write_cimd_doc "$LOGS/cimd" py2-cimd "$CIMD_URL" "toolgate e2e Python 2.x (metadata document)"
if ! start_service browser "$NODE" "$E2E/oauth/browser.mjs" --shots "$LOGS/screenshots"; then
  record "headless Chromium start" 1
  finish
  exit 1
fi
BROWSER_URL="$(json_field "$SERVICE_JSON" url)"
log "Chromium $(json_field "$SERVICE_JSON" chromium) (playwright-core) behind $BROWSER_URL; metadata documents at $CIMD_URL"

# ---- one run: a provider and a toolgate ------------------------------------------------------
free_port() { # first port of SIGNIN_PORTS nobody listens on
  local first="${SIGNIN_PORTS%-*}" last="${SIGNIN_PORTS#*-}" p
  for ((p = first; p <= last; p++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p" && return 0; }
  done
  return 1
}

declare -A RUN_PORT RUN_IDP RUN_DIR
RUN_TG="" # the run whose toolgate launch_toolgate starts
launch_toolgate() { # port (called by start_toolgate)
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" TOOLGATE__ADMIN__BIND="127.0.0.1:0" TOOLGATE__LOG__FORMAT=json \
    TOOLGATE__SERVER__DRAIN_DELAY_MS=100 TOOLGATE__STORAGE__DATA_DIR="${RUN_DIR[$RUN_TG]}/data" \
    exec "$TOOLGATE_BIN" serve --config "${RUN_DIR[$RUN_TG]}/toolgate.toml"
}

start_run() { # run reject-resource(0|1) scope-rule-toml
  local run="$1" reject="$2" rule="$3" dir="$LOGS/$1" port secret idp_args=()
  RUN_DIR[$run]="$dir"
  mkdir -p "$dir/data"
  port="$(free_port)" || { log "no free port in $SIGNIN_PORTS" && return 1; }
  secret="idp-secret-$run-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
  [ "$reject" = 1 ] && idp_args+=(--reject-resource)
  start_service "idp-$run" "$NODE" "$E2E/oauth/idp.mjs" --redirect-uri "http://127.0.0.1:$port/oauth/callback" \
    --client-secret "$secret" "${idp_args[@]}" || return 1
  RUN_IDP[$run]="$(json_field "$SERVICE_JSON" issuer)"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/signing.pem" 2>/dev/null || return 1
  cat >"$dir/toolgate.toml" <<EOF
[auth]
mode = "jwt"
resource = "http://127.0.0.1:$port/mcp"
required_scopes = ["mcp:tools"]

# Every client polls with its expired token until it is refused: failures from one address.
[limits]
auth_failures_per_minute = 6000
auth_failure_burst = 1000

[authorization_server]
enabled = true
issuer = "http://127.0.0.1:$port"
signing_key_files = ["$dir/signing.pem"]
access_token_ttl_secs = 30
requests_per_minute = 600

[authorization_server.identity_provider]
preset = "generic"
issuer = "${RUN_IDP[$run]}"
client_id = "toolgate"
client_secret = "$secret"

$rule

[authorization_server.registration]
mode = "open"

[authorization_server.metadata_documents]
private_hosts = ["127.0.0.1:$CIMD_PORT"]
ca_file = "$LOGS/pki/ca.pem"
EOF
  RUN_TG="$run"
  LOGS="$dir" PORTS="$port-$port" start_toolgate || return 1
  TOOLGATE_PIDS+=("$server_pid")
  RUN_PORT[$run]="$port"
  log "run $run: toolgate on http://127.0.0.1:$port, identity provider ${RUN_IDP[$run]} (resource $([ "$reject" = 1 ] && echo refused || echo ignored)); logs in $dir"
}

GROUPS_RULE='[[authorization_server.scope_rules]]
claim = "groups"
values = ["mcp-users"]
scopes = ["mcp:tools"]'
EVERYONE_RULE='[[authorization_server.scope_rules]]
scopes = ["mcp:tools"]'

ok=1
start_run a 0 "$GROUPS_RULE" || { record "run a: identity provider and toolgate start" 1 && ok=0; }
start_run b 1 "$EVERYONE_RULE" || { record "run b: identity provider and toolgate start" 1 && ok=0; }
if [ "$ok" = 0 ]; then
  finish
  exit 1
fi

# ---- the clients: all eight at once (the access token's expiry is waited for once) -------------
CLIENT_ARGS=(--browser "$BROWSER_URL" --timeout "$((CLIENT_TIMEOUT - 10))" --expiry-max 100)
run_clients() { # run python-venv
  local run="$1" py="$HARNESS_DIR/$2/bin/python" v="${2#py-mcp}" port="${RUN_PORT[$1]}"
  local common=(--url "http://127.0.0.1:$port/mcp" --issuer "http://127.0.0.1:$port" --idp-issuer "${RUN_IDP[$run]}" "${CLIENT_ARGS[@]}")
  client_start "$run-ts-dcr" "$NODE" "$E2E/oauth/ts_signin_client.mjs" "${common[@]}" --registration dcr --label "$run/ts-dcr" --again
  client_start "$run-ts-cimd" "$NODE" "$E2E/oauth/ts_signin_client.mjs" "${common[@]}" --registration cimd \
    --client-metadata-url "$CIMD_URL/clients/ts-cimd.json" --label "$run/ts-cimd"
  client_start "$run-py$v-dcr" "$py" "$E2E/oauth/py_signin_client.py" "${common[@]}" --registration dcr --label "$run/py$v-dcr"
  client_start "$run-py$v-cimd" "$py" "$E2E/oauth/py_signin_client.py" "${common[@]}" --registration cimd \
    --client-metadata-url "$CIMD_URL/clients/py$v-cimd.json" --label "$run/py$v-cimd"
}
clients_started=$SECONDS
run_clients a py-mcp1
run_clients b py-mcp2
clients_collect
log "the clients took $((SECONDS - clients_started)) s"

# ---- what the servers saw ------------------------------------------------------------------------
# toolgate's database: a grant per sign-in, none revoked, and a used (rotated) refresh token each;
# its audit log: the kinds of record written for the authorization server.
db_checks() { # run
  local run="$1" db="${RUN_DIR[$1]}/data/toolgate.db" out rc=0
  out="$(sqlite3 -readonly "$db" "SELECT
      (SELECT count(*) FROM oauth_grants),
      (SELECT count(*) FROM oauth_grants WHERE revoked_ms IS NOT NULL),
      (SELECT count(DISTINCT grant_id) FROM oauth_refresh_tokens WHERE used_ms IS NOT NULL),
      (SELECT count(*) FROM oauth_consents)" 2>&1)" || rc=$?
  if [ "$rc" = 0 ]; then
    IFS='|' read -r grants revoked refreshed consents <<<"$out"
    [ "$grants" -ge 4 ] && [ "$revoked" = 0 ] && [ "$refreshed" -ge 4 ] || rc=1
    out="$grants grants, $revoked revoked, $refreshed refreshed, $consents consents remembered"
  fi
  record "$run: toolgate's database: a grant per sign-in, each refreshed, none revoked — $out" "$rc"
  # The authorization server's audit records (kind oauth; the detail starts with the event).
  local events
  events="$(sqlite3 -readonly "$db" "SELECT e || ':' || outcome || '=' || count(*) FROM
      (SELECT substr(detail, 1, instr(detail, ':') - 1) AS e, outcome FROM audit_log WHERE kind = 'oauth')
      GROUP BY e, outcome ORDER BY e, outcome" 2>&1 | tr '\n' ' ' || true)"
  audit_verdict "$run" "$events" 5 4
}
for run in a b; do
  idp_checks "$run" "$LOGS/idp-$run.log" 4
  db_checks "$run"
done
rc=0
for doc in ts-cimd py1-cimd py2-cimd; do
  grep -q "GET /clients/$doc.json 200" "$LOGS/cimd.log" || rc=1
done
record "toolgate fetched every metadata document over https ($(grep -c ' 200 ' "$LOGS/cimd.log" || true) fetches)" "$rc"
for run in a b; do
  pid="${TOOLGATE_PIDS[$([ "$run" = a ] && echo 0 || echo 1)]}"
  if kill -0 "$pid" 2>/dev/null && healthy "${RUN_PORT[$run]}"; then
    record "$run: toolgate still healthy" 0
  else
    record "$run: toolgate still healthy" 1
  fi
done
cleanup
finish
