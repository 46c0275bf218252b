#!/usr/bin/env bash
# shellcheck disable=SC2034  # the variables set here are the caller's
# Helpers of tests/e2e/signin.sh and tests/cluster/signin.sh (sourced after tests/e2e/lib.sh, not
# run): the services a sign-in needs besides toolgate (the identity provider, the https server of
# the clients' metadata documents, the browser), the CA and certificate made for it, and the SDK
# clients run in parallel. The caller defines `log`, sets LOGS, HARNESS_DIR, E2E (tests/e2e),
# NODE and CLIENT_TIMEOUT, and calls signin_cleanup on exit.

SERVICE_PIDS=()
CLIENT_PIDS=()
CLIENT_NAMES=()

signin_cleanup() {
  local pid
  for pid in "${CLIENT_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${SERVICE_PIDS[@]}"; do stop_pid "$pid"; done
  SERVICE_PIDS=()
  CLIENT_PIDS=()
}

# A field of a one-line JSON object.
json_field() { # json field
  python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"
}

# start_service NAME COMMAND...: runs COMMAND in the background (stdout $LOGS/NAME.out, stderr
# $LOGS/NAME.log) and waits up to 20 s for its first line on stdout, a JSON object, which goes
# to the variable SERVICE_JSON. The pid is added to SERVICE_PIDS (stopped by signin_cleanup).
start_service() {
  local name="$1" pid line
  shift
  "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.log" &
  pid=$!
  SERVICE_PIDS+=("$pid")
  for _ in $(seq 200); do
    line="$(head -n 1 "$LOGS/$name.out" 2>/dev/null || true)"
    if [ -n "$line" ] && [[ "$line" == "{"*"}" ]]; then
      SERVICE_JSON="$line"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  log "$name did not start; its log:"
  tail -n 30 "$LOGS/$name.log" >&2
  return 1
}

# A CA and a certificate for IP 127.0.0.1 signed by it (P-256), for the metadata documents' https
# server: DIR/ca.pem (toolgate's metadata_documents.ca_file), DIR/server.pem, DIR/server.key.
make_pki() { # dir
  local d="$1"
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" \
    -days 2 -subj "/CN=toolgate e2e sign-in CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/server.key" -out "$d/server.csr" \
      -subj "/CN=127.0.0.1" 2>/dev/null &&
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' >"$d/server.ext" &&
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -out "$d/server.pem" \
      -days 2 -extfile "$d/server.ext" 2>/dev/null
}

# A Client ID Metadata Document: DIR/NAME.json, whose client_id is BASE/clients/NAME.json. Its
# redirect URI is loopback without a port: the client listens on any port (RFC 8252 section 7.3).
write_cimd_doc() { # dir name base-url client-name
  python3 - "$@" <<'EOF'
import json, sys
d, name, base, client_name = sys.argv[1:]
doc = {
    "client_id": f"{base}/clients/{name}.json",
    "client_name": client_name,
    "client_uri": "https://github.com/modelcontextprotocol",
    "redirect_uris": ["http://127.0.0.1/callback"],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
}
open(f"{d}/{name}.json", "w").write(json.dumps(doc, indent=2) + "\n")
EOF
}

# client_start NAME COMMAND...: one SDK client in the background; its PASS/FAIL lines go to
# $LOGS/NAME.out (and its exit status as a last `EXIT n` line), its stderr to $LOGS/NAME.stderr.
client_start() {
  local name="$1"
  shift
  (
    rc=0
    timeout -k 5 "$CLIENT_TIMEOUT" "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.stderr" || rc=$?
    echo "EXIT $rc" >>"$LOGS/$name.out"
  ) &
  CLIENT_PIDS+=("$!")
  CLIENT_NAMES+=("$name")
}

# Waits for every client started, then records each one's checks (record, from tests/e2e/lib.sh).
clients_collect() {
  local pid name line rc fails
  for pid in "${CLIENT_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  CLIENT_PIDS=()
  for name in "${CLIENT_NAMES[@]}"; do
    rc="" fails=0
    while IFS= read -r line; do
      case "$line" in
        "PASS "*) record "${line#PASS }" 0 ;;
        "FAIL "*)
          fails=$((fails + 1))
          record "${line#FAIL }" 1
          ;;
        "EXIT "*) rc="${line#EXIT }" ;;
      esac
    done <"$LOGS/$name.out"
    [ "$rc" = 124 ] && log "$name: killed after ${CLIENT_TIMEOUT}s"
    if [ "$rc" != 0 ] && [ "$fails" = 0 ]; then record "$name: exited $rc without saying why" 1; fi
    if [ "$rc" != 0 ]; then
      log "$name stderr (last lines; all of it in $LOGS/$name.stderr):"
      tail -n 25 "$LOGS/$name.stderr" >&2
    fi
  done
  CLIENT_NAMES=()
}

# The identity provider's view (its log): every authorization request was toolgate's, with PKCE
# S256 and a nonce and without `resource`, none was refused; every code was redeemed by toolgate
# with its secret (client_secret_basic) and PKCE.
idp_checks() { # label idp-log expected-sign-ins
  local label="$1" file="$2" want="$3" out rc=0
  out="$(python3 - "$file" "$want" <<'EOF'
import json, sys
path, want = sys.argv[1], int(sys.argv[2])
auth, token, problems = [], [], []
for line in open(path, errors="replace"):
    for kind, into in (("[idp] authorize ", auth), ("[idp] token ", token)):
        if line.startswith(kind):
            into.append(json.loads(line[len(kind):]))
for a in auth:
    if a["client_id"] != "toolgate" or a["code_challenge_method"] != "S256" or not a["nonce"] or not a["state"]:
        problems.append(f"authorization request {a}")
    if a["resource"] is not None or a["rejected"]:
        problems.append(f"toolgate sent resource={a['resource']} to the identity provider")
codes = [t for t in token if t["grant_type"] == "authorization_code"]
for t in codes:
    if t["status"] != 200 or t["client_id"] != "toolgate" or not t["pkce"] or t["resource"] is not None:
        problems.append(f"token request {t}")
if len(auth) < want or len(codes) < want:
    problems.append(f"{len(auth)} authorization requests and {len(codes)} code redemptions at the provider, wanted {want} each")
print("; ".join(problems[:5]) if problems else f"{len(auth)} authorization requests, {len(codes)} codes redeemed ({', '.join(sorted({t['client_auth'] for t in codes}))}), never a resource")
sys.exit(1 if problems else 0)
EOF
)" || rc=$?
  record "$label: the identity provider saw toolgate's client only: PKCE S256, nonce, no resource; codes redeemed with its secret — $out" "$rc"
}

# The authorization server's audit records, as "event:outcome=count ..." (kind oauth; the detail
# starts with the event): at least SIGN-INS sign-ins, consents and codes redeemed, at least
# REFRESHES refreshes, and no refusal of any kind in these happy paths.
audit_verdict() { # label events sign-ins refreshes
  local rc=0
  python3 - "$2" "$3" "$4" <<'EOF' || rc=$?
import sys
counts = {}
for item in sys.argv[1].split():
    key, _, n = item.rpartition("=")
    counts[key] = int(n) if n.isdigit() else 0
signins, refreshes = int(sys.argv[2]), int(sys.argv[3])
want = {"sign_in:ok": signins, "consent:ok": signins, "token:ok": signins, "refresh:ok": refreshes}
short = [k for k, n in want.items() if counts.get(k, 0) < n]
refused = [k for k in counts if not k.endswith(":ok")]
sys.exit(1 if short or refused else 0)
EOF
  record "$1: audit log: every sign-in, consent, code redeemed and refresh recorded, nothing refused — ${2:-no records}" "$rc"
}
