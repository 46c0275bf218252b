#!/usr/bin/env bash
# Sign-in through toolgate's own authorization server across replicas: N toolgate replicas
# (default 3) on one Postgres database behind nginx round robin (tests/cluster/nginx.conf.tmpl, as
# tests/cluster/topology.sh runs it; no affinity), the issuer being nginx's origin. A real OpenID
# Connect provider (tests/e2e/oauth/idp.mjs: no dynamic registration, one client for toolgate, and
# here refusing `resource`), the user in a headless Chromium (tests/e2e/oauth/browser.mjs), and two
# official SDK clients at once through nginx, each a full sign-in, tools/list, calculate_sum = 5,
# and a refresh once its 30 s access token has expired:
#   - the TypeScript SDK with a Client ID Metadata Document (https on loopback, a CA made here)
#   - the Python SDK 1.x registering dynamically
# (what each checks: the top of tests/e2e/oauth/ts_signin_client.mjs). Then: nginx sent the steps
# of the sign-ins (authorize, callback, consent, token, register) to at least two replicas, so one
# user's sign-in crossed replicas; the database holds a grant per sign-in, refreshed, none revoked;
# the provider saw toolgate's client only, never `resource`.
#
# Prints PASS/FAIL per check; the last line is `cluster signin: N passed, M failed`, exit status 0
# only if M is 0. Everything it started is stopped and the database dropped on every exit. Needs
# Postgres (trust auth, user postgres), nginx (on PATH, /usr/sbin, or Debian's package unpacked into
# ~/.cache/toolgate-cluster as tests/cluster/topology.sh does), openssl, and the components of
# tests/e2e/setup.sh (node22, node, py-mcp1, oauth-as, browser). About a minute.
#
#   tests/cluster/signin.sh [--replicas N]
#
# Environment: TOOLGATE_BIN (default: cargo build --locked --bin toolgate, debug), HARNESS_DIR
#   (default ~/.cache/toolgate-e2e), TOOLGATE_TEST_PG_HOST (host:port, default 127.0.0.1:5432),
#   CLUSTER_SIGNIN_TIMEOUT (seconds each client may take, default 150).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/cluster"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
export PYTHONDONTWRITEBYTECODE=1
PG_HOST="${TOOLGATE_TEST_PG_HOST:-127.0.0.1:5432}"
CLIENT_TIMEOUT="${CLUSTER_SIGNIN_TIMEOUT:-150}"
REPLICAS=3
while [ "$#" -gt 0 ]; do
  case "$1" in
    --replicas) REPLICAS="$2" && shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
    *) echo "unknown option $1 (--help)" >&2 && exit 2 ;;
  esac
  shift
done
[ "$REPLICAS" -ge 2 ] || { echo "--replicas must be at least 2" >&2 && exit 2; }
NODE="$HARNESS_DIR/node22/node"
PY1="$HARNESS_DIR/py-mcp1/bin/python"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-cluster-signin.XXXXXX")"
started=$SECONDS

log() { printf '[cluster signin] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"
# shellcheck source=tests/e2e/oauth/signin_lib.sh
. "$E2E/oauth/signin_lib.sh"

# ---- binary and tools ---------------------------------------------------------------------------
toolgate_bin
for need in "$NODE" "$PY1" "$HARNESS_DIR/node/node_modules/@modelcontextprotocol/sdk/package.json" \
  "$HARNESS_DIR/oauth-as/node_modules/oidc-provider/package.json" \
  "$HARNESS_DIR/browser/node_modules/playwright-core/package.json" /usr/bin/chromium; do
  [ -e "$need" ] || { log "$need is missing: run tests/e2e/setup.sh first" && exit 2; }
done
for t in psql openssl python3; do command -v "$t" >/dev/null || { log "$t is missing" && exit 2; }; done

# nginx from Debian's packages, as tests/cluster/topology.sh finds it: installed, or the package
# unpacked into the cache.
CACHE="$HOME/.cache/toolgate-cluster"
find_nginx() {
  local n pkg deb
  n="$(command -v nginx 2>/dev/null || true)"
  [ -z "$n" ] && [ -x /usr/sbin/nginx ] && n=/usr/sbin/nginx
  if [ -z "$n" ]; then
    for pkg in nginx nginx-light; do
      [ -x "$CACHE/deb/root/usr/sbin/nginx" ] && break
      if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then break; fi
      mkdir -p "$CACHE/deb/dl"
      (cd "$CACHE/deb/dl" && { apt-get download -q "$pkg" >/dev/null 2>&1 ||
        { [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 && apt-get download -q "$pkg" >/dev/null 2>&1; }; }) || continue
      for deb in "$CACHE/deb/dl/${pkg}"_*.deb; do [ -f "$deb" ] && dpkg-deb -x "$deb" "$CACHE/deb/root"; done
    done
    [ -x "$CACHE/deb/root/usr/sbin/nginx" ] && n="$CACHE/deb/root/usr/sbin/nginx"
  fi
  echo "$n"
}
NGINX="$(find_nginx)"
[ -n "$NGINX" ] || { log "no nginx: apt-get install nginx (Debian), or put nginx on PATH" && exit 2; }

# ---- run state and cleanup ----------------------------------------------------------------------
RUN_ID="$(date +%H%M%S)$$$RANDOM"
DB="toolgate_signin_$RUN_ID"
PGURL_ADMIN="postgres://postgres@$PG_HOST/postgres"
PGURL="postgres://postgres@$PG_HOST/$DB"
DB_CREATED=0
NGINX_PID=""
declare -a PIDS RPORTS
cleanup() {
  local rc=$? i
  set +e
  trap - EXIT INT TERM
  # A command that failed under set -e ends the script here: say so, with the logs.
  if [ -z "${FINISHED:-}" ] && [ "$rc" != 0 ] && [ "$rc" != 130 ] && [ "$rc" != 2 ]; then
    record "signin.sh ran to its end (it stopped with status $rc)" 1
    finish
  fi
  for i in "${!PIDS[@]}"; do [ -n "${PIDS[$i]}" ] && kill "${PIDS[$i]}" 2>/dev/null; done
  for i in "${!PIDS[@]}"; do stop_pid "${PIDS[$i]}"; done
  stop_pid "$NGINX_PID"
  signin_cleanup
  [ "$DB_CREATED" = 1 ] && { psql -q "$PGURL_ADMIN" -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || log "could not drop database $DB"; }
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

dump_logs() {
  local f
  for f in "$LOGS"/replica-*.log "$LOGS"/idp.log "$LOGS"/browser.log "$LOGS"/cimd.log "$LOGS"/nginx-error.log; do
    [ -s "$f" ] || continue
    log "---- ${f#"$LOGS"/} (last 40 lines) ----"
    tail -n 40 "$f" >&2
  done
}
finish() {
  FINISHED=1
  log "took $((SECONDS - started)) s; logs in $LOGS"
  [ "$failed" = 0 ] || dump_logs
  summary "cluster signin"
}
fail_early() { # what
  record "$1" 1
  finish
  exit 1
}

# ---- ports, database, shared secrets and key ---------------------------------------------------
read -r -a P <<<"$(python3 - $((REPLICAS + 2)) <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
)"
LB_PORT="${P[0]}"
SINGLE_PORT="${P[1]}"
for ((i = 0; i < REPLICAS; i++)); do RPORTS[i]="${P[$((2 + i))]}" && PIDS[i]=""; done
ISSUER="http://127.0.0.1:$LB_PORT"
MCP="$ISSUER/mcp"

psql -q "$PGURL_ADMIN" -c "CREATE DATABASE \"$DB\"" >/dev/null || { log "cannot create database $DB on $PG_HOST" && exit 2; }
DB_CREATED=1
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$LOGS/signing.pem" 2>/dev/null || fail_early "signing key (openssl)"
make_pki "$LOGS/pki" || fail_early "CA and certificate for 127.0.0.1 (openssl)"
SESSION_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
STATE_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
IDP_SECRET="idp-secret-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"

# ---- services: metadata documents, browser, identity provider ------------------------------------
mkdir -p "$LOGS/cimd"
start_service cimd "$NODE" "$E2E/oauth/cimd_server.mjs" --dir "$LOGS/cimd" --cert "$LOGS/pki/server.pem" --key "$LOGS/pki/server.key" ||
  fail_early "metadata documents' https server start"
CIMD_URL="$(json_field "$SERVICE_JSON" url)"
CIMD_PORT="$(json_field "$SERVICE_JSON" port)"
write_cimd_doc "$LOGS/cimd" ts-cimd "$CIMD_URL" "toolgate e2e TypeScript (metadata document)"
start_service browser "$NODE" "$E2E/oauth/browser.mjs" --shots "$LOGS/screenshots" || fail_early "headless Chromium start"
BROWSER_URL="$(json_field "$SERVICE_JSON" url)"
start_service idp "$NODE" "$E2E/oauth/idp.mjs" --redirect-uri "$ISSUER/oauth/callback" --client-secret "$IDP_SECRET" --reject-resource ||
  fail_early "identity provider start"
IDP="$(json_field "$SERVICE_JSON" issuer)"

# ---- replicas: one settings file, the listener per replica ---------------------------------------
cat >"$LOGS/toolgate.toml" <<EOF
[auth]
mode = "jwt"
resource = "$MCP"
required_scopes = ["mcp:tools"]

[limits]
auth_failures_per_minute = 6000
auth_failure_burst = 1000

[authorization_server]
enabled = true
issuer = "$ISSUER"
signing_key_files = ["$LOGS/signing.pem"]
access_token_ttl_secs = 30
requests_per_minute = 600

[authorization_server.identity_provider]
preset = "generic"
issuer = "$IDP"
client_id = "toolgate"
client_secret = "$IDP_SECRET"

[[authorization_server.scope_rules]]
scopes = ["mcp:tools"]

[authorization_server.registration]
mode = "open"

[authorization_server.metadata_documents]
private_hosts = ["127.0.0.1:$CIMD_PORT"]
ca_file = "$LOGS/pki/ca.pem"
EOF
launch_replica() { # index
  local i="$1" n=$(($1 + 1))
  mkdir -p "$LOGS/replica-$n"
  TOOLGATE__SERVER__BIND="127.0.0.1:${RPORTS[$i]}" TOOLGATE__ADMIN__BIND="127.0.0.1:0" \
    TOOLGATE__SERVER__ALLOWED_HOSTS="127.0.0.1:$LB_PORT,127.0.0.1:$SINGLE_PORT,127.0.0.1:${RPORTS[$i]}" \
    TOOLGATE__SERVER__SHUTDOWN_GRACE_SECS=3 TOOLGATE__SERVER__DRAIN_DELAY_MS=100 \
    TOOLGATE__SERVER__STATE_SECRET="$STATE_SECRET" TOOLGATE__SESSIONS__SECRET="$SESSION_SECRET" \
    TOOLGATE__STORAGE__URL="$PGURL" TOOLGATE__STORAGE__DATA_DIR="$LOGS/replica-$n" \
    TOOLGATE__AUDIT__REPLICA_ID="replica-$n" TOOLGATE__LOG__FORMAT=json \
    "$TOOLGATE_BIN" serve --config "$LOGS/toolgate.toml" >"$LOGS/replica-$n.log" 2>&1 &
  PIDS[i]=$!
}
await_replica() { # index
  local i="$1" n=$(($1 + 1))
  for _ in $(seq 300); do
    kill -0 "${PIDS[$i]}" 2>/dev/null || break
    grep -q 'toolgate listening' "$LOGS/replica-$n.log" 2>/dev/null && healthy "${RPORTS[$i]}" && return 0
    sleep 0.1
  done
  log "replica-$n did not start; its log:"
  tail -n 30 "$LOGS/replica-$n.log" >&2
  return 1
}
# The first replica alone applies the migrations; then the others.
launch_replica 0
await_replica 0 || fail_early "replica-1 start"
for ((i = 1; i < REPLICAS; i++)); do launch_replica "$i"; done
for ((i = 1; i < REPLICAS; i++)); do await_replica "$i" || fail_early "replica-$((i + 1)) start"; done

# ---- nginx ----------------------------------------------------------------------------------------
mkdir -p "$LOGS/nginx-tmp"
servers=""
for ((i = 0; i < REPLICAS; i++)); do servers+="        server 127.0.0.1:${RPORTS[$i]} max_fails=1 fail_timeout=5s;"$'\n'; done
python3 - "$HERE/nginx.conf.tmpl" "$HERE/nginx-proxy.inc" "$LOGS/nginx.conf" <<EOF
import re, sys
tmpl, inc, out = sys.argv[1:]
text = open(tmpl).read()
for k, v in {"@WORKERS@": "1", "@RUN@": "$LOGS", "@PORT@": "$LB_PORT", "@SINGLE_PORT@": "$SINGLE_PORT",
             "@ACCESS_LOG_BUFFER@": "buffer=4k flush=100ms",
             "@SERVERS@": """${servers%$'\n'}""",
             "@SINGLE_SERVER@": "        server 127.0.0.1:${RPORTS[0]};",
             "@PROXY@": open(inc).read().rstrip("\n")}.items():
    text = text.replace(k, v)
assert not re.search(r"@[A-Z_]+@", text.split("\n", 2)[2]), "unfilled placeholder"
open(out, "w").write(text)
EOF
"$NGINX" -t -q -p "$LOGS" -e "$LOGS/nginx-error.log" -c "$LOGS/nginx.conf" || fail_early "nginx -t"
"$NGINX" -p "$LOGS" -e "$LOGS/nginx-error.log" -c "$LOGS/nginx.conf" -g 'daemon off;' &
NGINX_PID=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$LB_PORT") 2>/dev/null && break; sleep 0.1; done
(exec 3<>"/dev/tcp/127.0.0.1/$LB_PORT") 2>/dev/null || fail_early "nginx start"
log "toolgate ×$REPLICAS on ${RPORTS[*]} behind $("$NGINX" -v 2>&1 | cut -d' ' -f3) at $ISSUER (Postgres $DB); identity provider $IDP (refuses resource); logs in $LOGS"

# ---- the clients, at once --------------------------------------------------------------------------
common=(--url "$MCP" --issuer "$ISSUER" --idp-issuer "$IDP" --browser "$BROWSER_URL" --timeout "$((CLIENT_TIMEOUT - 10))" --expiry-max 100)
client_start ts-cimd "$NODE" "$E2E/oauth/ts_signin_client.mjs" "${common[@]}" --registration cimd \
  --client-metadata-url "$CIMD_URL/clients/ts-cimd.json" --label "nginx/ts-cimd"
client_start py1-dcr "$PY1" "$E2E/oauth/py_signin_client.py" "${common[@]}" --registration dcr --label "nginx/py1-dcr"
clients_started=$SECONDS
clients_collect
log "the clients took $((SECONDS - clients_started)) s"

# ---- what the servers saw ---------------------------------------------------------------------------
sleep 0.3 # nginx flushes its access log every 100 ms
spread="$(python3 - "$LOGS/nginx-access.log" <<'EOF'
import json, sys
by_path = {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r["uri"].startswith("/oauth/") and r["uri"] != "/oauth/jwks":
        by_path.setdefault(r["uri"], set()).update(u for u in r["upstream"].split(", ") if u)
every = set().union(*by_path.values()) if by_path else set()
print(len(every), "; ".join(f"{p} -> {' '.join(sorted(u.rsplit(':', 1)[1] for u in us))}" for p, us in sorted(by_path.items())))
EOF
)"
n="${spread%% *}"
rc=0
[ "$n" -ge 2 ] || rc=1
record "nginx sent the sign-in steps to $n of $REPLICAS replicas (${spread#* })" "$rc"
idp_checks nginx "$LOGS/idp.log" 2
out="$(psql -qAt "$PGURL" -c "SELECT
    (SELECT count(*) FROM oauth_grants) || ' grants, ' ||
    (SELECT count(*) FROM oauth_grants WHERE revoked_ms IS NOT NULL) || ' revoked, ' ||
    (SELECT count(DISTINCT grant_id) FROM oauth_refresh_tokens WHERE used_ms IS NOT NULL) || ' refreshed'" 2>&1)" || true
rc=0
[[ "$out" =~ ^([0-9]+)\ grants,\ 0\ revoked,\ ([0-9]+)\ refreshed$ ]] && [ "${BASH_REMATCH[1]}" -ge 2 ] && [ "${BASH_REMATCH[2]}" -ge 2 ] || rc=1
record "the shared database: a grant per sign-in, each refreshed, none revoked — $out" "$rc"
events="$(psql -qAt "$PGURL" -c "SELECT e || ':' || outcome || '=' || count(*) FROM
    (SELECT substr(detail, 1, strpos(detail, ':') - 1) AS e, outcome FROM audit_log WHERE kind = 'oauth') t
    GROUP BY e, outcome ORDER BY e, outcome" 2>&1 | tr '\n' ' ' || true)"
audit_verdict nginx "$events" 2 2
replicas="$(psql -qAt "$PGURL" -c "SELECT string_agg(DISTINCT replica_id, ' ') FROM audit_log WHERE kind = 'oauth'" 2>&1 || true)"
rc=0
[ "$(wc -w <<<"$replicas")" -ge 2 ] || rc=1
record "the authorization server's audit records come from several replicas: $replicas" "$rc"
alive=0
for ((i = 0; i < REPLICAS; i++)); do kill -0 "${PIDS[$i]}" 2>/dev/null && healthy "${RPORTS[$i]}" && alive=$((alive + 1)); done
rc=0
[ "$alive" = "$REPLICAS" ] || rc=1
record "all $REPLICAS replicas still healthy ($alive)" "$rc"
finish
