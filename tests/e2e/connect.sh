#!/usr/bin/env bash
# Each user's own account at a service behind toolgate (issue 29), end to end with real parts:
# per-user upstream credentials through URL-mode elicitation and the vault.
#
#   - the service: an OAuth-protected MCP server (tests/e2e/connect/notes_server.py, the Python
#     SDK's FastMCP) that checks its own tokens by introspection at its own authorization server
#     (active, issued to toolgate-notes, aud = its URL, scope notes; else 401 with
#     WWW-Authenticate resource_metadata, RFC 9728) and keeps per-account data: notes_whoami,
#     notes_my_notes (octo-alice's and octo-bob's notes differ)
#   - its authorization server (tests/e2e/connect/notes_as.mjs, npm oidc-provider, a separate
#     instance): configured like a SaaS provider, one pre-registered confidential client for
#     toolgate (redirect URI {issuer}/oauth/vault/callback/notes; authorization_code,
#     refresh_token, client_credentials), resource indicators, opaque access tokens of
#     E2E_CONNECT_ACCESS_TTL s (20), refresh tokens rotated (a reused one revokes the grant); its
#     log names a digest of every refresh token spent and of every token issued
#   - toolgate's own authorization server in front of its identity provider (tests/e2e/oauth/idp.mjs,
#     as in tests/e2e/signin.sh) signs the users in; the vault key is 32 random bytes (openssl)
#   - the users' browser: headless Chromium (tests/e2e/oauth/browser.mjs), one kept context per user
#
# Three users at once, each through an official SDK:
#   alice  Python SDK 1.x, 2025-11-25 (tests/e2e/connect/py_connect_client.py): -32042 with a URL
#          elicitation; the abuse checks in the browser (bob opening alice's link: 403 "another
#          user", nothing in vault_grants; the consumed link refused; the upstream's redirect to
#          toolgate's callback replayed: refused); a session without URL elicitation gets an
#          isError naming /oauth/connections; connect; her own notes; a refresh after expiry;
#          DELETE /admin/connections/{id}, then -32042 again
#   bob    TypeScript SDK 1.x, 2025-11-25 (tests/e2e/connect/ts_connect_client.mjs): the SDK's
#          UrlElicitationRequiredError; connect (once alice's abuse checks are done); his own notes;
#          a refresh; Disconnect on his own page /oauth/connections, then the error again
#   carol  Python SDK 2.x, 2026-07-28 (tests/e2e/connect/py_modern_connect_client.py), through
#          the upstream "found" (the same service, its authorization server discovered from the
#          service's 401 instead of configured): input_required with inputRequests.connect_found
#          and a requestState; decline -> isError; the SDK's retry loop with the connect in the
#          browser -> her account; then her vault_grants row tampered with in the database
#          (another user's sealed tokens moved in): not used, input_required again
# Before them: forged and empty callbacks refused (400), /oauth/connections sends a browser
# without a session to the identity provider, the admin API's /admin/connections (401 without a
# token, empty with the operator's), both upstreams listed through client credentials (GET
# /admin/upstreams). After them, what the servers saw: the service's authorization
# server (every authorization request toolgate's, PKCE S256, state, resource; codes redeemed with
# PKCE; a client-credentials token for the listing; refresh grants, each refresh token spent once
# and issued before, alice's and bob's connections refreshed after their access token expired,
# the new token then used); the service (every bearer token one its authorization server issued to
# toolgate-notes and accepted, never an MCP token of toolgate; every tool call on a user's token);
# toolgate's database (vault_grants: nothing of alice's or bob's left, the rest sealed with k1), its
# audit records of kind connection (elicit, connect, use, refresh, revoke, failure); the vault
# metric; no token of either authorization server, client secret or vault key in toolgate's log
# or audit records; toolgate still healthy, no panic.
#
# Needs tests/e2e/setup.sh to have run (components node22, node, py-mcp1, py-mcp2, oauth-as,
# browser), openssl, sqlite3 and python3. Everything listens on 127.0.0.1 only. Prints a PASS or FAIL
# line per check; the last line is `connect: N passed, M failed`; exit status 0 only if M is 0.
# Called by tests/e2e/run.sh, or on its own (about a minute):
#
#   TOOLGATE_BIN=target/debug/toolgate tests/e2e/connect.sh
#
# Environment:
#   HARNESS_DIR                where setup.sh installed things (default ~/.cache/toolgate-e2e)
#   TOOLGATE_BIN               the toolgate binary (default: cargo build --locked --bin toolgate, debug)
#   E2E_CONNECT_PORTS          loopback ports to try for toolgate, FIRST-LAST (default 19000-19099);
#                              the other services take any free port
#   E2E_CONNECT_CLIENT_TIMEOUT seconds each client may take (default 150)
#   E2E_CONNECT_ACCESS_TTL     lifetime of the service's access tokens, seconds (default 20)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
export PYTHONDONTWRITEBYTECODE=1
CONNECT_PORTS="${E2E_CONNECT_PORTS:-19000-19099}"
CLIENT_TIMEOUT="${E2E_CONNECT_CLIENT_TIMEOUT:-150}"
ACCESS_TTL="${E2E_CONNECT_ACCESS_TTL:-20}"
NODE="$HARNESS_DIR/node22/node"
PY1="$HARNESS_DIR/py-mcp1/bin/python"
PY2="$HARNESS_DIR/py-mcp2/bin/python"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-connect.XXXXXX")"
started=$SECONDS

log() { printf '[e2e connect] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"
# shellcheck source=tests/e2e/oauth/signin_lib.sh
. "$E2E/oauth/signin_lib.sh"

server_pid=""
cleanup() {
  local rc=$?
  if [ -z "${FINISHED:-}" ] && [ "$rc" != 0 ] && [ "$rc" != 130 ]; then
    FINISHED=1
    record "connect.sh ran to its end (it stopped with status $rc at line ${BASH_LINENO[0]:-?})" 1
    finish || true
  fi
  stop_pid "$server_pid"
  server_pid=""
  signin_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

dump_logs() {
  local f
  for f in "$LOGS"/server.log "$LOGS"/notes-as.log "$LOGS"/notes.log "$LOGS"/idp.log "$LOGS"/browser.log; do
    [ -s "$f" ] || continue
    log "---- ${f#"$LOGS"/} (last 40 lines) ----"
    tail -n 40 "$f" >&2
  done
}
finish() {
  FINISHED=1
  log "took $((SECONDS - started)) s; logs in $LOGS"
  [ "$failed" = 0 ] || dump_logs
  summary connect
}
fail_early() { # what
  record "$1" 1
  finish || true
  exit 1
}

for need in "$NODE" "$HARNESS_DIR/node/node_modules/@modelcontextprotocol/sdk/package.json" "$PY1" "$PY2" \
  "$HARNESS_DIR/oauth-as/node_modules/oidc-provider/package.json" \
  "$HARNESS_DIR/browser/node_modules/playwright-core/package.json" /usr/bin/chromium; do
  [ -e "$need" ] || { log "$need is missing: run tests/e2e/setup.sh first" && fail_early "harness installed"; }
done
for tool in openssl sqlite3 python3; do
  command -v "$tool" >/dev/null || { log "$tool is missing" && fail_early "$tool installed"; }
done

toolgate_bin

# ---- the services --------------------------------------------------------------------------------
free_port() { # first port of CONNECT_PORTS nobody listens on
  local first="${CONNECT_PORTS%-*}" last="${CONNECT_PORTS#*-}" p
  for ((p = first; p <= last; p++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p" && return 0; }
  done
  return 1
}
rand() { od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'; }

start_service browser "$NODE" "$E2E/oauth/browser.mjs" --shots "$LOGS/screenshots" || fail_early "headless Chromium start"
BROWSER_URL="$(json_field "$SERVICE_JSON" url)"

TG_PORT="$(free_port)" || fail_early "a free port in $CONNECT_PORTS"
ISSUER="http://127.0.0.1:$TG_PORT"
MCP="$ISSUER/mcp"
IDP_SECRET="idp-secret-$(rand 12)"
start_service idp "$NODE" "$E2E/oauth/idp.mjs" --redirect-uri "$ISSUER/oauth/callback" --client-secret "$IDP_SECRET" ||
  fail_early "identity provider start"
IDP="$(json_field "$SERVICE_JSON" issuer)"

# The service first (its URL is the resource its authorization server knows), then its
# authorization server, whose issuer the service waits for in a file.
RS_SECRET="notes-rs-$(rand 12)"
# toolgate's secret at the service: characters HTTP Basic must form-encode (RFC 6749 2.3.1)
NOTES_CLIENT_SECRET="notes secret:+/=$(rand 8)"
start_service notes "$PY1" "$E2E/connect/notes_server.py" --issuer-file "$LOGS/notes-issuer" --rs-secret "$RS_SECRET" ||
  fail_early "the notes service start"
NOTES_URL="$(json_field "$SERVICE_JSON" url)"
start_service notes-as "$NODE" "$E2E/connect/notes_as.mjs" --resource "$NOTES_URL" \
  --redirect-uri "$ISSUER/oauth/vault/callback/notes" --redirect-uri "$ISSUER/oauth/vault/callback/found" --client-secret "$NOTES_CLIENT_SECRET" --rs-secret "$RS_SECRET" \
  --access-ttl "$ACCESS_TTL" || fail_early "the notes authorization server start"
NOTES_AS="$(json_field "$SERVICE_JSON" issuer)"
NOTES_AS_HOST="${NOTES_AS#http://}"
printf '%s\n' "$NOTES_AS" >"$LOGS/notes-issuer"
for _ in $(seq 200); do
  grep -q '"ready"' "$LOGS/notes.out" && break
  sleep 0.1
done
grep -q '"ready"' "$LOGS/notes.out" || { tail -n 20 "$LOGS/notes.log" >&2 && fail_early "the notes service serves"; }

# The service refuses what its own authorization server did not issue it: no token, a made-up one.
out="$(python3 - "$NOTES_URL" <<'EOF'
import json, sys, urllib.request, urllib.error
url = sys.argv[1]
init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}).encode()
seen = []
for bearer in (None, "made-up-token"):
    req = urllib.request.Request(url, data=init, method="POST", headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
    if bearer:
        req.add_header("authorization", f"Bearer {bearer}")
    try:
        res = urllib.request.urlopen(req, timeout=15)
        seen.append(f"{res.status}")
    except urllib.error.HTTPError as e:
        seen.append(f"{e.code} {e.headers.get('www-authenticate')}")
print(" | ".join(seen))
sys.exit(0 if all(x.startswith("401 ") and 'resource_metadata="' in x for x in seen) else 1)
EOF
)" && rc=0 || rc=1
record "the service without a token and with a made-up one: 401 naming its resource metadata (RFC 9728) — $out" "$rc"

# ---- toolgate ------------------------------------------------------------------------------------
openssl rand -base64 32 >"$LOGS/vault-k1.key"
chmod 600 "$LOGS/vault-k1.key"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$LOGS/signing.pem" 2>/dev/null
# The operator's admin tokens: HS256, from an issuer of their own (the users' tokens are toolgate's).
ADMIN_ISSUER="$ISSUER/e2e-admin"
E2E_ADMIN_HMAC="$(rand 32)"
cat >"$LOGS/toolgate.toml" <<EOF
[auth]
mode = "jwt"
resource = "$MCP"
required_scopes = ["mcp:tools"]

[[auth.issuers]]
issuer = "$ADMIN_ISSUER"
hmac_secret = "$E2E_ADMIN_HMAC"

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
private_hosts = ["$NOTES_AS_HOST"]
client_id = "toolgate-notes"
client_secret = { env = "NOTES_CLIENT_SECRET" }
scopes = ["notes"]
resource = "$NOTES_URL"
discovery = "client_credentials"
unconnected = "list"

# The same service once more, its authorization server found the way MCP clients find it: the
# service's 401 (resource_metadata, RFC 9728), then that server's metadata (RFC 8414 / OIDC).
[upstreams.found]
url = "$NOTES_URL"
allow_private = true
approval = "off"
oauth = { grant = "user", private_hosts = ["$NOTES_AS_HOST"], client_id = "toolgate-notes", client_secret = { env = "NOTES_CLIENT_SECRET" }, scopes = ["notes"], discovery = "client_credentials" }
EOF
launch_toolgate() { # port
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" TOOLGATE__ADMIN__BIND="127.0.0.1:0" TOOLGATE__LOG__FORMAT=json \
    TOOLGATE__SERVER__DRAIN_DELAY_MS=100 TOOLGATE__STORAGE__DATA_DIR="$LOGS/data" \
    RUST_LOG="info,toolgate=debug" NOTES_CLIENT_SECRET="$NOTES_CLIENT_SECRET" \
    exec "$TOOLGATE_BIN" serve --config "$LOGS/toolgate.toml"
}
mkdir -p "$LOGS/data"
PORTS="$TG_PORT-$TG_PORT" start_toolgate || fail_early "toolgate start"
DB="$LOGS/data/toolgate.db"
ADMIN_ADDR="$(grep '"admin listener"' "$LOGS/server.log" | grep -o '127\.0\.0\.1:[0-9]*' | head -n1 || true)"
[ -n "$ADMIN_ADDR" ] || fail_early "admin listener address in toolgate's log"
ADMIN="http://$ADMIN_ADDR"
ADMIN_TOKEN="$("$PY1" - "$ADMIN_ISSUER" "$MCP" "$E2E_ADMIN_HMAC" <<'EOF'
import sys, time, jwt
iss, aud, secret = sys.argv[1:]
now = int(time.time())
print(jwt.encode({"iss": iss, "sub": "e2e-operator", "aud": aud, "scope": "toolgate:admin", "iat": now, "exp": now + 900}, secret, algorithm="HS256"))
EOF
)" || fail_early "admin token"
export ADMIN_TOKEN
log "toolgate $("$TOOLGATE_BIN" --version | cut -d' ' -f2) on $ISSUER (admin $ADMIN); identity provider $IDP; notes $NOTES_URL behind $NOTES_AS; browser $BROWSER_URL; logs in $LOGS"

# ---- HTTP checks of toolgate's own pages, before any user ------------------------------------------
# http GET URL [bearer]: "<status> <location> <body, first 300 characters>" (redirects not followed)
http() {
  python3 - "$@" <<'EOF'
import sys, urllib.request, urllib.error
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None
req = urllib.request.Request(sys.argv[2], method=sys.argv[1])
if len(sys.argv) > 3 and sys.argv[3]:
    req.add_header("authorization", f"Bearer {sys.argv[3]}")
try:
    res = urllib.request.build_opener(NoRedirect).open(req, timeout=15)
    status, headers, body = res.status, res.headers, res.read()
except urllib.error.HTTPError as e:
    status, headers, body = e.code, e.headers, e.read()
except Exception as e:
    print(f"000 - {type(e).__name__}: {e}")
    sys.exit(0)
text = " ".join(body.decode("utf-8", "replace").split())
print(f"{status} {headers.get('location') or '-'} {text[:300]}")
EOF
}
out="$(http GET "$ISSUER/oauth/vault/callback/notes?state=forged&code=x")"
[[ "$out" == "400 "* ]] && rc=0 || rc=1
record "a forged state at /oauth/vault/callback/notes?state=forged&code=x: 400 — ${out:0:160}" "$rc"
out="$(http GET "$ISSUER/oauth/vault/callback/notes")"
[[ "$out" == "400 "* ]] && rc=0 || rc=1
record "a callback without state or code (no connect pending): 400 — ${out:0:160}" "$rc"
out="$(http GET "$ISSUER/oauth/vault/callback/notes?state=$(rand 24)&code=$(rand 16)&iss=$NOTES_AS")"
[[ "$out" == "400 "* ]] && rc=0 || rc=1
record "a callback with a well-formed state no connect is pending for: 400 — ${out:0:160}" "$rc"
out="$(http GET "$ISSUER/oauth/connections")"
[[ "$out" == "303 $IDP/auth?"* || "$out" == "302 $IDP/auth?"* ]] && rc=0 || rc=1
record "GET /oauth/connections without a browser session: a redirect to the identity provider — ${out:0:120}" "$rc"
out="$(http GET "$ADMIN/admin/connections")"
[[ "$out" == "401 "* ]] && rc=0 || rc=1
record "GET /admin/connections without a token: 401 — ${out:0:100}" "$rc"
out="$(http GET "$ADMIN/admin/connections" "$ADMIN_TOKEN")"
[[ "$out" =~ ^200\ -\ .*\"connections\":\ ?\[\] ]] && rc=0 || rc=1
record "GET /admin/connections with the operator's token: 200, no connections yet — ${out:0:120}" "$rc"

# The discovered authorization server: toolgate lists the service's tools for "found" too, with a
# client-credentials token from the token endpoint it discovered.
out="$(python3 - "$ADMIN/admin/upstreams" "$ADMIN_TOKEN" <<'EOF'
import json, sys, time, urllib.request
url, token = sys.argv[1:]
deadline, entry = time.monotonic() + 15, None
while time.monotonic() < deadline:
    req = urllib.request.Request(url, headers={"authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        doc = json.load(r)
    entry = {u.get("name"): u for u in doc.get("upstreams", [])}
    if all(entry.get(n, {}).get("state") == "connected" for n in ("notes", "found")):
        break
    time.sleep(0.25)
show = {n: {k: e.get(k) for k in ("state", "tools", "last_error")} for n, e in (entry or {}).items()}
print(json.dumps(show))
ok = all((entry or {}).get(n, {}).get("state") == "connected" and (entry or {}).get(n, {}).get("tools") for n in ("notes", "found"))
sys.exit(0 if ok else 1)
EOF
)" && rc=0 || rc=1
record "GET /admin/upstreams: notes (authorization server configured) and found (discovered from the 401) connected with their tools — ${out:0:300}" "$rc"

# ---- the three users at once ---------------------------------------------------------------------
COMMON=(--url "$MCP" --issuer "$ISSUER" --idp-issuer "$IDP" --upstream-issuer "$NOTES_AS" --browser "$BROWSER_URL")
: >"$LOGS/mcp-tokens"
chmod 600 "$LOGS/mcp-tokens"
clients_started=$SECONDS
client_start py-alice "$PY1" "$E2E/connect/py_connect_client.py" "${COMMON[@]}" --upstream-url "$NOTES_URL" \
  --admin-url "$ADMIN" --login alice --upstream-login octo-alice --notes-marker "alice:" --foreign-marker "bob:" \
  --abuse-login bob --db "$DB" --barrier "$LOGS/abuse.done" --tokens-file "$LOGS/mcp-tokens" \
  --access-ttl "$ACCESS_TTL" --timeout "$((CLIENT_TIMEOUT - 10))"
client_start ts-bob "$NODE" "$E2E/connect/ts_connect_client.mjs" "${COMMON[@]}" --upstream-url "$NOTES_URL" \
  --admin-url "$ADMIN" --login bob --upstream-login octo-bob --notes-marker "bob:" --foreign-marker "alice:" \
  --wait-for "$LOGS/abuse.done" --tokens-file "$LOGS/mcp-tokens" --access-ttl "$ACCESS_TTL" --timeout "$((CLIENT_TIMEOUT - 10))"
client_start py2-carol "$PY2" "$E2E/connect/py_modern_connect_client.py" "${COMMON[@]}" --upstream found --login carol \
  --upstream-login octo-carol --wait-for "$LOGS/abuse.done" --db "$DB" --tokens-file "$LOGS/mcp-tokens" --timeout "$((CLIENT_TIMEOUT - 10))"
clients_collect
log "the clients took $((SECONDS - clients_started)) s"

# ---- what the servers saw ------------------------------------------------------------------------
# The service's authorization server and the service itself (their logs).
rc=0
out="$(python3 - "$LOGS/notes-as.log" "$LOGS/notes.log" "$LOGS/mcp-tokens" "$NOTES_URL" "$ISSUER" <<'EOF'
import hashlib, json, sys
as_log, rs_log, tokens_file, resource, issuer = sys.argv[1:]
def lines(path, prefix):
    out = []
    for line in open(path, errors="replace"):
        if line.startswith(prefix):
            out.append(json.loads(line[len(prefix):]))
    return out
auth = lines(as_log, "[notes-as] authorize ")
token = lines(as_log, "[notes-as] token ")
probe = hashlib.sha256(b"made-up-token").hexdigest()[:16]  # this script's own probe, not toolgate's
bearers = [b for b in lines(rs_log, "[notes] bearer ") if b["digest"] != probe]
calls = lines(rs_log, "[notes] call ")
mcp_digests = {hashlib.sha256(t.strip().encode()).hexdigest()[:16] for t in open(tokens_file) if t.strip()}
problems, facts = [], []
# every authorization request: toolgate's client, code flow, PKCE S256, state, the resource, the exact callback
for a in auth:
    want = {"client_id": "toolgate-notes", "response_type": "code", "code_challenge_method": "S256", "pkce": True, "state": True, "resource": resource}
    bad = {k: a.get(k) for k, v in want.items() if a.get(k) != v}
    if a.get("redirect_uri") not in (f"{issuer}/oauth/vault/callback/notes", f"{issuer}/oauth/vault/callback/found"):
        bad["redirect_uri"] = a.get("redirect_uri")
    if bad or "notes" not in (a.get("scope") or "").split():
        problems.append(f"authorization request {a}")
codes = [t for t in token if t["grant_type"] == "authorization_code"]
cc = [t for t in token if t["grant_type"] == "client_credentials"]
refresh = [t for t in token if t["grant_type"] == "refresh_token"]
for t in codes:
    if t["status"] != 200 or not t["pkce"] or t["client_id"] != "toolgate-notes":
        problems.append(f"code redemption {t}")
if len(auth) != 3 or len([t for t in codes if t["status"] == 200]) != 3:
    problems.append(f"{len(auth)} authorization requests, {len(codes)} code redemptions: wanted exactly 3 each (alice, bob, carol; nobody else got there)")
if not any(t["status"] == 200 and t["resource"] == resource for t in cc):
    problems.append(f"no client-credentials token for {resource} (discovery): {cc}")
issued_rt = [t["issued_rt"] for t in token if t.get("issued_rt")]
spent = [t["spent"] for t in refresh]
if len([t for t in refresh if t["status"] == 200]) < 2:
    problems.append(f"{len(refresh)} refresh grants ({[t['status'] for t in refresh]}), wanted at least 2 successful (alice, bob)")
dupes = sorted({s for s in spent if spent.count(s) > 1})
if dupes:
    problems.append(f"refresh tokens spent more than once: {dupes}")
for t in refresh:
    if t["status"] != 200:
        problems.append(f"a refresh grant failed: {t}")
    if t["spent"] not in issued_rt:
        problems.append(f"a refresh token the server never issued was presented: {t['spent']}")
for t in token:
    if t["client_id"] != "toolgate-notes" or t["status"] == 401:
        problems.append(f"token request {t}")
# Each connection's chain of refresh tokens: from its code grant, every refresh presents the
# refresh token its predecessor issued (the latest one; rotation). A chain refreshed after its
# access token's lifetime had passed, with the new access token then used at the service, is a
# refresh after expiry; alice and bob each wait for one.
bearer_digests = {b["digest"] for b in bearers}
by_spent = {t["spent"]: t for t in refresh if t["status"] == 200}
late_chains = 0
for code in (t for t in codes if t["status"] == 200):
    link, late = code, False
    while link.get("issued_rt") in by_spent:
        nxt = by_spent[link["issued_rt"]]
        if nxt["t"] - code["t"] > (code.get("expires_in") or 0) * 1000 and nxt.get("issued_at") in bearer_digests:
            late = True
        link = nxt
    late_chains += late
if late_chains < 2:
    problems.append(f"{late_chains} connections refreshed after their access token expired (and the new token used), wanted 2 (alice, bob)")
issued_at = {t["issued_at"] for t in token if t.get("issued_at")}
cc_at = {t["issued_at"] for t in cc if t.get("issued_at")}
cc_refused = []
foreign = [b for b in bearers if b["digest"] not in issued_at]
if foreign:
    problems.append(f"the service received {len(foreign)} bearer token(s) its authorization server never issued: {foreign[:3]}")
leaked = [b for b in bearers if b["digest"] in mcp_digests]
if leaked:
    problems.append(f"the service received toolgate's MCP tokens: {leaked[:3]}")
# A user's token toolgate sent must have been good (toolgate refreshes before expiry); its own
# client-credentials token for the listing may be sent once after it expired (then replaced).
refused = [b for b in bearers if not b.get("accepted") and b["digest"] not in cc_at]
if refused:
    problems.append(f"the service refused {len(refused)} user token(s) toolgate sent (expired or revoked): {refused[:3]}")
cc_refused = [b for b in bearers if not b.get("accepted") and b["digest"] in cc_at]
anon = [c for c in calls if not c.get("sub") or c["digest"] in cc_at]
if anon:
    problems.append(f"tool calls on toolgate's own client-credentials token, not a user's: {anon[:3]}")
subs = sorted({c.get("sub") for c in calls if c.get("sub")})
facts.append(f"{len(auth)} authorization requests, {len(codes)} codes, {len(cc)} client-credentials, {len(refresh)} refreshes ({len(set(spent))} distinct refresh tokens; {late_chains} connections refreshed after expiry), client auth {sorted({t['client_auth'] for t in token})}; the service saw {len(bearers)} bearer checks of {len({b['digest'] for b in bearers})} tokens ({len(cc_refused)} refusals of an expired client-credentials token), calls by {subs}")
print("; ".join(problems[:6]) if problems else "; ".join(facts))
sys.exit(1 if problems else 0)
EOF
)" || rc=$?
record "the service's authorization server and the service: toolgate's client only, PKCE, state, resource; each refresh token spent once; only tokens that server issued, never an MCP token — $out" "$rc"

# toolgate's database: the vault after the run. alice's and bob's connections were revoked;
# carol's row (tampered with) may stay; every row sealed with k1, for notes, scope notes.
rc=0
out="$(sqlite3 -readonly -separator ' ' "$DB" "SELECT replace(principal, char(31), '/'), upstream, key_id, scopes, version FROM vault_grants" 2>&1)" || rc=$?
if [ "$rc" = 0 ]; then
  while read -r who up key scopes _; do
    [ -n "$who" ] || continue
    case "$who" in */alice | */bob) rc=1 ;; esac
    [ "$up" = notes ] || [ "$up" = found ] || rc=1
    [ "$key" = k1 ] && [[ "$scopes" == *notes* ]] || rc=1
  done <<<"$out"
fi
record "vault_grants after the run: none of alice's or bob's (revoked); the rest (carol's) sealed with k1 — $(tr '\n' ';' <<<"$out")" "$rc"

# Audit records of kind connection: the events (the detail's first word) and outcomes.
events="$(sqlite3 -readonly "$DB" "SELECT e || ':' || outcome || '=' || count(*) FROM
    (SELECT CASE WHEN instr(detail, ' ') > 0 THEN substr(detail, 1, instr(detail, ' ') - 1) ELSE detail END AS e, outcome
     FROM audit_log WHERE kind = 'connection') GROUP BY e, outcome ORDER BY e, outcome" 2>&1 | tr '\n' ' ' || true)"
rc=0
python3 - "$events" <<'EOF' || rc=$?
import sys
counts = {}
for item in sys.argv[1].split():
    key, _, n = item.rpartition("=")
    event = key.split(":")[0]
    counts[event] = counts.get(event, 0) + (int(n) if n.isdigit() else 0)
want = {"elicit": 3, "connect": 3, "use": 5, "refresh": 2, "revoke": 2, "failure": 2}
short = {k: counts.get(k, 0) for k, n in want.items() if counts.get(k, 0) < n}
unknown = [k for k in counts if k not in want]
sys.exit(1 if short or unknown else 0)
EOF
record "audit records of kind connection: elicit, connect, use, refresh, revoke and failure (another user, the tampered row) — ${events:-none}" "$rc"
rc=0
out="$(sqlite3 -readonly "$DB" "SELECT count(*), sum(detail NOT LIKE '% notes%' AND detail NOT LIKE '% found%'), sum(coalesce(subject, '') = '') FROM audit_log WHERE kind = 'connection' AND detail NOT LIKE 'failure%'" 2>&1)" || rc=$?
[ "$rc" = 0 ] && [[ "$out" =~ ^[1-9][0-9]*\|0\|0$ ]] || rc=1
record "every connection record names the upstream and the user (subject) — records|without upstream|without subject: $out" "$rc"

# No secret in toolgate's log or audit records: the MCP tokens the clients held, every token of the
# service's authorization server (by digest), toolgate's client secret there, the vault key.
sqlite3 -readonly "$DB" "SELECT * FROM audit_log" >"$LOGS/audit.dump" 2>&1 || true
sqlite3 -readonly "$DB" "SELECT * FROM vault_grants; SELECT * FROM vault_connects; SELECT * FROM vault_clients" >"$LOGS/vault.dump" 2>&1 || true
rc=0
out="$(python3 - "$LOGS/server.log" "$LOGS/audit.dump" "$LOGS/vault.dump" "$LOGS/mcp-tokens" "$LOGS/notes-as.log" "$LOGS/vault-k1.key" "$NOTES_CLIENT_SECRET" <<'EOF'
import hashlib, json, re, sys
server_log, audit, vault, tokens_file, as_log, key_file, secret = sys.argv[1:]
texts = {"toolgate's log": open(server_log, errors="replace").read(), "the audit records": open(audit, errors="replace").read(),
         "the vault tables (in the clear)": open(vault, errors="replace").read()}
mcp = [t.strip() for t in open(tokens_file) if t.strip()]
issued = set()
for line in open(as_log, errors="replace"):
    if line.startswith("[notes-as] token "):
        t = json.loads(line[len("[notes-as] token "):])
        issued.update(d for d in (t.get("issued_at"), t.get("issued_rt")) if d)
key = open(key_file).read().strip()
problems = []
for where, text in texts.items():
    for t in mcp:
        if t in text:
            problems.append(f"an MCP token of toolgate in {where}")
            break
    for run in set(re.findall(r"[A-Za-z0-9_-]{20,}", text)):
        # an opaque token of oidc-provider is 43 characters; a longer run may contain one
        for i in range(0, max(1, len(run) - 42)):
            if hashlib.sha256(run[i:i + 43].encode()).hexdigest()[:16] in issued:
                problems.append(f"a token of the service's authorization server in {where}")
                break
    if secret in text or secret.replace(" ", "+") in text:
        problems.append(f"toolgate's client secret at the service in {where}")
    if key in text or key.rstrip("=") in text:
        problems.append(f"the vault key in {where}")
print("; ".join(sorted(set(problems))) if problems else f"{len(mcp)} MCP tokens, {len(issued)} tokens of the service's authorization server: none found")
sys.exit(1 if problems else 0)
EOF
)" || rc=$?
record "no token, client secret or vault key in toolgate's log, audit records or (in the clear) vault tables — $out" "$rc"

# The vault metric on the admin listener.
rc=0
metrics="$(python3 - "$ADMIN/metrics" "$ADMIN_TOKEN" <<'EOF'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"authorization": f"Bearer {sys.argv[2]}"})
try:
    body = urllib.request.urlopen(req, timeout=15).read().decode()
except Exception as e:
    print(f"GET /metrics: {e}")
    sys.exit(0)
print(" ".join(l for l in body.splitlines() if l.startswith("toolgate_vault_events_total")))
EOF
)"
[[ "$metrics" == *'toolgate_vault_events_total{'*'upstream="notes"'* && "$metrics" == *'event="connect"'* && "$metrics" == *'event="refresh"'* ]] || rc=1
record "metric toolgate_vault_events_total{upstream,event,outcome}: connect and refresh counted — ${metrics:0:300}" "$rc"

if kill -0 "$server_pid" 2>/dev/null && healthy "$TG_PORT"; then
  record "toolgate still healthy" 0
else
  record "toolgate still healthy" 1
fi
if grep -q 'panicked' "$LOGS/server.log"; then
  grep 'panicked' "$LOGS/server.log" | head -n 5 >&2
  record "no panic in toolgate's log" 1
else
  record "no panic in toolgate's log" 0
fi
cleanup
finish
