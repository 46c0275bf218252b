#!/usr/bin/env bash
# Per-user upstream credentials across replicas (issue 29): N toolgate replicas (default 3) on one
# fresh Postgres database behind nginx round robin (tests/cluster/nginx.conf.tmpl, as
# tests/cluster/topology.sh runs it; no affinity), the issuer being nginx's origin, every replica
# with the same settings and the same [vault] key file. The parts of tests/e2e/connect.sh: the
# "notes" service (tests/e2e/connect/notes_server.py, FastMCP, tokens checked by introspection)
# behind its own authorization server (tests/e2e/connect/notes_as.mjs, oidc-provider: opaque
# access tokens of CLUSTER_CONNECT_ACCESS_TTL s, refresh tokens rotated, a reused one revoking the
# grant; its log names a digest of every refresh token spent), toolgate's identity provider
# (tests/e2e/oauth/idp.mjs) and the user's browser (tests/e2e/oauth/browser.mjs). The driver,
# tests/cluster/connect.py (the official Python SDK 1.x for the sign-in; plain 2025-11-25 sessions
# on each replica's own listener), proves:
#   1 connect through one, call through another: the user signs in through nginx at toolgate's
#     authorization server; notes_whoami on replica-1 directly is -32042 with a connect link on
#     nginx's origin; the browser follows it through nginx, whose access log shows the connect's
#     steps served by at least two replicas; the call on replica-3 directly (then every replica and
#     nginx) answers the user's own account at the service
#   2 refresh races: rounds making the stored access token due (expires_ms moved into the past,
#     or into the renewal window, in Postgres; or waiting for toolgate's own renewal point), then
#     the user's call fired at the same moment on every replica directly (2 calls each): every
#     call succeeds, one refresh per round (the grant's version), and the service's authorization
#     server saw each refresh token spent exactly once, in one chain, no reuse, no grant revoked
#   3 DELETE /admin/connections/{id} through replica-2's admin API: the next call on every other
#     replica (and through nginx) is -32042 again
# Then: the audit records of kind connection (from several replicas; one refresh record per
# refresh, one revoke), no token (MCP or the service's), client secret or vault key in any
# replica's log or the audit records, every replica still healthy, no panic.
#
# Prints PASS/FAIL per check; the last line is `cluster connect: N passed, M failed`, exit status 0
# only if M is 0. Everything it started is stopped and the database dropped on every exit. Needs
# Postgres (trust auth, user postgres), nginx (on PATH, /usr/sbin, or Debian's package unpacked into
# ~/.cache/toolgate-cluster as tests/cluster/topology.sh does), openssl, python3, and the components
# of tests/e2e/setup.sh (node22, py-mcp1, oauth-as, browser). About 45 s after the build.
#
#   tests/cluster/connect.sh [--replicas N] [--break lease]
#
# --break lease is a self-test: a trigger in the database clears the refresh lease of
# vault_grants on every update, so replicas racing to refresh all win it; the refresh-race checks
# must fail (a refresh token spent twice, the grant revoked by the service, calls asking to
# connect again).
# Environment: TOOLGATE_BIN (default: cargo build --locked --bin toolgate, debug), HARNESS_DIR
#   (default ~/.cache/toolgate-e2e), TOOLGATE_TEST_PG_HOST (host:port, default 127.0.0.1:5432),
#   CLUSTER_CONNECT_TIMEOUT (seconds the driver may take, default 120), CLUSTER_CONNECT_ACCESS_TTL
#   (the service's access tokens, seconds, default 20), CLUSTER_CONNECT_ROUNDS (refresh races,
#   default 6), CLUSTER_CONNECT_PORTS (loopback ports for nginx and the replicas, FIRST-LAST,
#   default 19100-19199; no other script uses them; the other services take any free port).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/cluster"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
export PYTHONDONTWRITEBYTECODE=1
PG_HOST="${TOOLGATE_TEST_PG_HOST:-127.0.0.1:5432}"
CLIENT_TIMEOUT="${CLUSTER_CONNECT_TIMEOUT:-120}"
ACCESS_TTL="${CLUSTER_CONNECT_ACCESS_TTL:-20}"
ROUNDS="${CLUSTER_CONNECT_ROUNDS:-6}"
PORT_RANGE="${CLUSTER_CONNECT_PORTS:-19100-19199}"
REPLICAS=3
BREAK=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --replicas) REPLICAS="$2" && shift ;;
    --break) BREAK="$2" && shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
    *) echo "unknown option $1 (--help)" >&2 && exit 2 ;;
  esac
  shift
done
[ "$REPLICAS" -ge 2 ] || { echo "--replicas must be at least 2" >&2 && exit 2; }
case "$BREAK" in "" | lease) ;; *) echo "--break must be lease" >&2 && exit 2 ;; esac
NODE="$HARNESS_DIR/node22/node"
PY1="$HARNESS_DIR/py-mcp1/bin/python"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-cluster-connect.XXXXXX")"
started=$SECONDS

log() { printf '[cluster connect] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"
# shellcheck source=tests/e2e/oauth/signin_lib.sh
. "$E2E/oauth/signin_lib.sh"

# ---- binary and tools ---------------------------------------------------------------------------
toolgate_bin
for need in "$NODE" "$PY1" "$HARNESS_DIR/oauth-as/node_modules/oidc-provider/package.json" \
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
DB="toolgate_connect_$RUN_ID"
PGURL_ADMIN="postgres://postgres@$PG_HOST/postgres"
PGURL="postgres://postgres@$PG_HOST/$DB"
DB_CREATED=0
NGINX_PID=""
DRIVER_PID=""
declare -a PIDS RPORTS APORTS
cleanup() {
  local rc=$? i
  set +e
  trap - EXIT INT TERM
  # A command that failed under set -e ends the script here: say so, with the logs.
  if [ -z "${FINISHED:-}" ] && [ "$rc" != 0 ] && [ "$rc" != 130 ] && [ "$rc" != 2 ]; then
    record "connect.sh ran to its end (it stopped with status $rc)" 1
    finish
  fi
  stop_pid "$DRIVER_PID"
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
  for f in "$LOGS"/replica-*.log "$LOGS"/notes-as.log "$LOGS"/notes.log "$LOGS"/idp.log "$LOGS"/browser.log "$LOGS"/nginx-error.log; do
    [ -s "$f" ] || continue
    log "---- ${f#"$LOGS"/} (last 30 lines) ----"
    tail -n 30 "$f" >&2
  done
}
finish() {
  FINISHED=1
  log "took $((SECONDS - started)) s; logs in $LOGS"
  [ "$failed" = 0 ] || dump_logs
  summary "cluster connect"
}
fail_early() { # what
  record "$1" 1
  finish
  exit 1
}

# ---- ports (free ones of PORT_RANGE, held open together while chosen), database, secrets --------
read -r -a P <<<"$(python3 - "$PORT_RANGE" $((2 * REPLICAS + 2)) <<'EOF'
import socket, sys
first, last = map(int, sys.argv[1].split("-"))
want, socks = int(sys.argv[2]), []
for port in range(first, last + 1):
    if len(socks) == want:
        break
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
)"
[ "${#P[@]}" = $((2 * REPLICAS + 2)) ] || { log "not enough free ports in $PORT_RANGE (CLUSTER_CONNECT_PORTS)" && exit 2; }
LB_PORT="${P[0]}"
SINGLE_PORT="${P[1]}"
for ((i = 0; i < REPLICAS; i++)); do RPORTS[i]="${P[$((2 + 2 * i))]}" && APORTS[i]="${P[$((3 + 2 * i))]}" && PIDS[i]=""; done
ISSUER="http://127.0.0.1:$LB_PORT"
MCP="$ISSUER/mcp"

psql -q "$PGURL_ADMIN" -c "CREATE DATABASE \"$DB\"" >/dev/null || { log "cannot create database $DB on $PG_HOST" && exit 2; }
DB_CREATED=1
sql() { psql -qAt "$PGURL" -c "$1"; }
rand() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }
SESSION_SECRET="$(rand 32)"
STATE_SECRET="$(rand 32)"
IDP_SECRET="idp-secret-$(rand 12)"
RS_SECRET="notes-rs-$(rand 12)"
# toolgate's secret at the service: characters HTTP Basic must form-encode (RFC 6749 2.3.1)
NOTES_CLIENT_SECRET="notes secret:+/=$(rand 8)"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$LOGS/signing.pem" 2>/dev/null || fail_early "signing key (openssl)"
# One vault key for every replica.
openssl rand -base64 32 >"$LOGS/vault-k1.key"
chmod 600 "$LOGS/vault-k1.key"

# ---- services: browser, identity provider, the notes service and its authorization server --------
start_service browser "$NODE" "$E2E/oauth/browser.mjs" --shots "$LOGS/screenshots" || fail_early "headless Chromium start"
BROWSER_URL="$(json_field "$SERVICE_JSON" url)"
start_service idp "$NODE" "$E2E/oauth/idp.mjs" --redirect-uri "$ISSUER/oauth/callback" --client-secret "$IDP_SECRET" ||
  fail_early "identity provider start"
IDP="$(json_field "$SERVICE_JSON" issuer)"
# The service first (its URL is the resource its authorization server knows), then its
# authorization server, whose issuer the service waits for in a file.
start_service notes "$PY1" "$E2E/connect/notes_server.py" --issuer-file "$LOGS/notes-issuer" --rs-secret "$RS_SECRET" ||
  fail_early "the notes service start"
NOTES_URL="$(json_field "$SERVICE_JSON" url)"
start_service notes-as "$NODE" "$E2E/connect/notes_as.mjs" --resource "$NOTES_URL" \
  --redirect-uri "$ISSUER/oauth/vault/callback/notes" --client-secret "$NOTES_CLIENT_SECRET" --rs-secret "$RS_SECRET" \
  --access-ttl "$ACCESS_TTL" || fail_early "the notes authorization server start"
NOTES_AS="$(json_field "$SERVICE_JSON" issuer)"
printf '%s\n' "$NOTES_AS" >"$LOGS/notes-issuer"
for _ in $(seq 200); do
  grep -q '"ready"' "$LOGS/notes.out" && break
  sleep 0.1
done
grep -q '"ready"' "$LOGS/notes.out" || { tail -n 20 "$LOGS/notes.log" >&2 && fail_early "the notes service serves"; }

# ---- replicas: one settings file, the listeners per replica --------------------------------------
# The operator's admin tokens: HS256, from an issuer of their own (the user's tokens are toolgate's).
ADMIN_ISSUER="$ISSUER/cluster-admin"
ADMIN_HMAC="$(rand 32)"
cat >"$LOGS/toolgate.toml" <<EOF
[auth]
mode = "jwt"
resource = "$MCP"
required_scopes = ["mcp:tools"]

[[auth.issuers]]
issuer = "$ADMIN_ISSUER"
hmac_secret = "$ADMIN_HMAC"

[limits]
auth_failures_per_minute = 6000
auth_failure_burst = 1000

[tools.packs]
examples = false

[authorization_server]
enabled = true
issuer = "$ISSUER"
signing_key_files = ["$LOGS/signing.pem"]
access_token_ttl_secs = 900
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

[vault]
keys = [ { id = "k1", file = "$LOGS/vault-k1.key" } ]
connect_ttl_secs = 600

[upstreams.notes]
url = "$NOTES_URL"
allow_private = true
approval = "off"

[upstreams.notes.oauth]
grant = "user"
authorization_server = "$NOTES_AS"
private_hosts = ["${NOTES_AS#http://}"]
client_id = "toolgate-notes"
client_secret = { env = "NOTES_CLIENT_SECRET" }
scopes = ["notes"]
resource = "$NOTES_URL"
discovery = "client_credentials"
unconnected = "list"
EOF
replica_env() { # index: the settings of one replica, one per line
  local i="$1" n=$(($1 + 1))
  cat <<EOF
TOOLGATE__SERVER__BIND=127.0.0.1:${RPORTS[$i]}
TOOLGATE__ADMIN__BIND=127.0.0.1:${APORTS[$i]}
TOOLGATE__SERVER__ALLOWED_HOSTS=127.0.0.1:$LB_PORT,127.0.0.1:$SINGLE_PORT,127.0.0.1:${RPORTS[$i]}
TOOLGATE__SERVER__SHUTDOWN_GRACE_SECS=3
TOOLGATE__SERVER__DRAIN_DELAY_MS=100
TOOLGATE__SERVER__STATE_SECRET=$STATE_SECRET
TOOLGATE__SESSIONS__SECRET=$SESSION_SECRET
TOOLGATE__STORAGE__URL=$PGURL
TOOLGATE__STORAGE__DATA_DIR=$LOGS/replica-$n
TOOLGATE__AUDIT__REPLICA_ID=replica-$n
TOOLGATE__LOG__FORMAT=json
RUST_LOG=info,toolgate=debug
NOTES_CLIENT_SECRET=$NOTES_CLIENT_SECRET
EOF
}
launch_replica() { # index
  local i="$1" n=$(($1 + 1)) envs
  mkdir -p "$LOGS/replica-$n"
  mapfile -t envs < <(replica_env "$i")
  env "${envs[@]}" "$TOOLGATE_BIN" serve --config "$LOGS/toolgate.toml" >"$LOGS/replica-$n.log" 2>&1 &
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
if [ "$BREAK" = lease ]; then
  psql -q "$PGURL" >/dev/null <<'EOF' || fail_early "the --break lease trigger"
CREATE FUNCTION toolgate_test_no_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.lease_until_ms := 0; RETURN NEW; END $$;
CREATE TRIGGER toolgate_test_no_lease BEFORE UPDATE ON vault_grants FOR EACH ROW EXECUTE FUNCTION toolgate_test_no_lease();
EOF
fi
for ((i = 1; i < REPLICAS; i++)); do launch_replica "$i"; done
for ((i = 1; i < REPLICAS; i++)); do await_replica "$i" || fail_early "replica-$((i + 1)) start"; done

ADMIN_TOKEN="$("$PY1" - "$ADMIN_ISSUER" "$MCP" "$ADMIN_HMAC" <<'EOF'
import sys, time, jwt
iss, aud, secret = sys.argv[1:]
now = int(time.time())
print(jwt.encode({"iss": iss, "sub": "cluster-operator", "aud": aud, "scope": "toolgate:admin", "iat": now, "exp": now + 900}, secret, algorithm="HS256"))
EOF
)" || fail_early "admin token"
export ADMIN_TOKEN

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
log "toolgate ×$REPLICAS on ${RPORTS[*]} (admin ${APORTS[*]}) behind $("$NGINX" -v 2>&1 | cut -d' ' -f3) at $ISSUER (Postgres $DB); identity provider $IDP; notes $NOTES_URL behind $NOTES_AS (access tokens ${ACCESS_TTL} s)${BREAK:+; --break $BREAK}; logs in $LOGS"

# ---- the driver -------------------------------------------------------------------------------------
: >"$LOGS/mcp-tokens"
chmod 600 "$LOGS/mcp-tokens"
args=(--lb "$MCP" --issuer "$ISSUER" --browser "$BROWSER_URL" --idp-issuer "$IDP" --upstream-issuer "$NOTES_AS"
  --upstream-url "$NOTES_URL" --pg-url "$PGURL" --nginx-log "$LOGS/nginx-access.log" --as-log "$LOGS/notes-as.log"
  --rs-log "$LOGS/notes.log" --tokens-file "$LOGS/mcp-tokens" --rounds "$ROUNDS" --rid-prefix "connect-$RUN_ID"
  --timeout "$((CLIENT_TIMEOUT - 10))")
for ((i = 0; i < REPLICAS; i++)); do args+=(--replica "http://127.0.0.1:${RPORTS[$i]}/mcp" --admin "http://127.0.0.1:${APORTS[$i]}"); done
# In the background, so a signal to this script ends it at once (cleanup stops the driver too).
driver_started=$SECONDS
timeout -k 5 "$CLIENT_TIMEOUT" "$PY1" "$HERE/connect.py" "${args[@]}" >"$LOGS/connect.out" 2>"$LOGS/connect.stderr" &
DRIVER_PID=$!
driver_rc=0
wait "$DRIVER_PID" || driver_rc=$?
DRIVER_PID=""
driver_fails=0
while IFS= read -r line; do
  case "$line" in
    "PASS "*) record "${line#PASS }" 0 ;;
    "FAIL "*) record "${line#FAIL }" 1 && driver_fails=$((driver_fails + 1)) ;;
  esac
done <"$LOGS/connect.out"
[ "$driver_rc" = 124 ] && log "the driver was stopped after ${CLIENT_TIMEOUT}s"
if [ "$driver_rc" != 0 ]; then
  [ "$driver_fails" = 0 ] && record "the driver (exit $driver_rc without saying why)" 1
  log "the driver's stderr (last lines; all of it in $LOGS/connect.stderr):"
  tail -n 20 "$LOGS/connect.stderr" >&2
fi
FIGURES="$(grep '^{' "$LOGS/connect.out" | tail -n 1 || true)"
log "the driver took $((SECONDS - driver_started)) s; its figures: ${FIGURES:0:2000}"

# ---- what the shared database holds -----------------------------------------------------------------
# Audit records of kind connection: event (the detail's first word), outcome, replica.
events="$(sql "SELECT e || ':' || outcome || '@' || replica_id || '=' || count(*) FROM
    (SELECT split_part(detail, ' ', 1) AS e, outcome, replica_id FROM audit_log WHERE kind = 'connection') t
    GROUP BY e, outcome, replica_id ORDER BY e, outcome, replica_id" 2>&1 | tr '\n' ' ' || true)"
refreshes="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("refreshes", -1))' "${FIGURES:-{\}}" 2>/dev/null || echo -1)"
rc=0
python3 - "$events" "$refreshes" <<'EOF' || rc=$?
import sys
counts, replicas = {}, {}
for item in sys.argv[1].split():
    key, _, n = item.rpartition("=")
    ev, _, rep = key.partition("@")
    counts[ev] = counts.get(ev, 0) + (int(n) if n.isdigit() else 0)
    replicas.setdefault(ev.split(":")[0], set()).add(rep)
refreshes = int(sys.argv[2])
ok = (counts.get("elicit:ok", 0) >= 1 and counts.get("connect:ok", 0) == 1 and counts.get("use:ok", 0) >= 10
      and refreshes >= 1 and counts.get("refresh:ok", 0) == refreshes and counts.get("revoke:ok", 0) == 1
      and replicas.get("revoke") == {"replica-2"} and len(replicas.get("use", set())) >= 2
      and not [k for k in counts if not k.endswith(":ok")])
sys.exit(0 if ok else 1)
EOF
record "audit records of kind connection: elicit, one connect, uses on several replicas, one refresh record per refresh ($refreshes), one revoke (by replica-2), nothing refused — ${events:-none}" "$rc"
out="$(sql "SELECT count(*) FROM vault_grants" 2>&1)" || true
rc=0
[ "$out" = 0 ] || rc=1
record "vault_grants after the revoke: empty ($out rows)" "$rc"

# ---- no secret in any replica's log or the audit records -----------------------------------------
sql "SELECT * FROM audit_log" >"$LOGS/audit.dump" 2>&1 || true
rc=0
out="$(python3 - "$LOGS/mcp-tokens" "$LOGS/notes-as.log" "$LOGS/vault-k1.key" "$NOTES_CLIENT_SECRET" "$LOGS/audit.dump" "$LOGS"/replica-*.log <<'EOF'
import hashlib, json, re, sys
tokens_file, as_log, key_file, secret, *files = sys.argv[1:]
mcp = [t.strip() for t in open(tokens_file) if t.strip()]
issued = set()
for line in open(as_log, errors="replace"):
    if line.startswith("[notes-as] token "):
        t = json.loads(line[len("[notes-as] token "):])
        issued.update(d for d in (t.get("issued_at"), t.get("issued_rt")) if d)
key = open(key_file).read().strip()
problems, sizes = [], []
for path in files:
    text = open(path, errors="replace").read()
    where = path.rsplit("/", 1)[-1]
    sizes.append(f"{where} {len(text.splitlines())} lines")
    for t in mcp:
        if t in text:
            problems.append(f"an MCP token of toolgate in {where}")
            break
    hit = False
    for run in set(re.findall(r"[A-Za-z0-9_-]{20,}", text)):
        # an opaque token of oidc-provider is 43 characters; a longer run may contain one
        for i in range(0, max(1, len(run) - 42)):
            if hashlib.sha256(run[i:i + 43].encode()).hexdigest()[:16] in issued:
                hit = True
                break
        if hit:
            break
    if hit:
        problems.append(f"a token of the service's authorization server in {where}")
    if secret in text or secret.replace(" ", "+") in text:
        problems.append(f"toolgate's client secret at the service in {where}")
    if key in text or key.rstrip("=") in text:
        problems.append(f"the vault key in {where}")
if not mcp or not issued:
    problems.append(f"nothing to look for: {len(mcp)} MCP tokens, {len(issued)} tokens of the service")
print("; ".join(sorted(set(problems))) if problems else f"{len(mcp)} MCP tokens, {len(issued)} tokens of the service's authorization server, its client secret, the vault key: none in {', '.join(sizes)}")
sys.exit(1 if problems else 0)
EOF
)" || rc=$?
record "no token (toolgate's or the service's), client secret or vault key in any replica's log or the audit records — $out" "$rc"

alive=0
for ((i = 0; i < REPLICAS; i++)); do kill -0 "${PIDS[$i]}" 2>/dev/null && healthy "${RPORTS[$i]}" && alive=$((alive + 1)); done
rc=0
[ "$alive" = "$REPLICAS" ] || rc=1
record "all $REPLICAS replicas still healthy ($alive)" "$rc"
if grep -l 'panicked' "$LOGS"/replica-*.log >/dev/null 2>&1; then
  grep -h 'panicked' "$LOGS"/replica-*.log | head -n 5 >&2
  record "no panic in any replica's log" 1
else
  record "no panic in any replica's log" 0
fi
finish
