#!/usr/bin/env bash
# The admin console in a real browser: Debian's Chromium, driven by playwright-core
# (tests/console/check.mjs), against the real toolgate binary. Two runs:
#   token  dev-mode auth (the default): the page asks for a token, refuses a bad one and one
#          without the admin scope, then walks every view: tools (disable and re-enable a stored
#          tool, checked through the API; reload), a try-out from the generated form, a long
#          try-out's progress bar live and one cancelled (checked in the audit log), the audit
#          log filtered to that call and exported as CSV, a running task (created at /mcp) in the
#          Tasks view, filtered and cancelled through the button (checked through tasks/get),
#          sessions, virtual servers (one from the
#          settings, one stored through the form after a refused one, then deleted), upstreams,
#          approvals (an upstream's held change with its diff, approved through the button),
#          an upstream's page (its last error kept after a reconnect, its state changes, its
#          skipped tools, its charts), overview with charts of calls, errors and latency (both
#          windows), a tool's page with its charts; the audit log's times with their zone and a
#          record opened in a full-width row;
#   off    auth.mode = "off": no token is asked, the views load, a try-out works;
#   vault  the vault on (jwt auth with an operator's HS256 issuer, the built-in authorization
#          server, [vault] keys): connections of two users (rows written straight into the
#          database), filtered by user and upstream, one disconnected through the button and
#          checked through the API.
# Every view is screenshotted into $CONSOLE_SCREENSHOTS; any error in the page's console fails
# the run. The last line is `console: N passed, M failed`; exit status 0 only if M is 0.
#
# Installs what is missing, once: Debian's `chromium` package (apt-get; /usr/bin/chromium) and
# playwright-core (pinned, from npm, into $CONSOLE_CHECK_DIR; never `npx playwright install`:
# no browser is downloaded from anywhere but Debian).
#
# Environment:
#   CONSOLE_CHECK_DIR    where playwright-core goes (default ~/.cache/toolgate/console-test)
#   CONSOLE_SCREENSHOTS  where screenshots and the exported CSV go
#                        (default ${CARGO_TARGET_DIR:-target}/console-screenshots)
#   CONSOLE_PROFILE      cargo profile of the server binary: debug (default) or release
#   CONSOLE_PORTS        loopback ports to try for the public listener (default 18300-18399);
#                        the admin listener takes a free port of its own
#   CONSOLE_TIMEOUT      seconds each browser run may take (default 300)
#   NODE                 node >= 20 (default: node on PATH)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PLAYWRIGHT_VERSION=1.65.1
CHROMIUM=/usr/bin/chromium
CACHE="${CONSOLE_CHECK_DIR:-$HOME/.cache/toolgate/console-test}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
SHOTS="${CONSOLE_SCREENSHOTS:-$TARGET/console-screenshots}"
PROFILE="${CONSOLE_PROFILE:-debug}"
PORTS="${CONSOLE_PORTS:-18300-18399}"
TIMEOUT="${CONSOLE_TIMEOUT:-300}"
NODE="${NODE:-node}"
started=$SECONDS

log() { printf '[console] %s\n' "$*" >&2; }
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-console.XXXXXX")"

# shellcheck source=tests/e2e/lib.sh
. "$ROOT/tests/e2e/lib.sh"
server_pid=""
cleanup() { stop_pid "$server_pid"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the browser: Debian's chromium ---------------------------------------------------------
if [ ! -x "$CHROMIUM" ]; then
  log "installing Debian's chromium (apt-get)"
  as_root=()
  [ "$(id -u)" = 0 ] || as_root=(sudo)
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
[ -x "$CHROMIUM" ] || { log "no $CHROMIUM after apt-get install chromium" && exit 2; }
log "$("$CHROMIUM" --version 2>/dev/null || echo chromium)"

# ---- the driver: playwright-core, pinned -----------------------------------------------------
command -v "$NODE" >/dev/null || { log "node >= 20 is needed (set NODE)" && exit 2; }
node_major="$("$NODE" -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || { log "node >= 20 is needed, found $("$NODE" --version)" && exit 2; }
if [ "$(cat "$CACHE/.version" 2>/dev/null)" != "$PLAYWRIGHT_VERSION" ]; then
  log "installing playwright-core@$PLAYWRIGHT_VERSION into $CACHE"
  rm -rf "$CACHE"
  mkdir -p "$CACHE"
  printf '{"name":"toolgate-console-check","private":true,"dependencies":{"playwright-core":"%s"}}\n' "$PLAYWRIGHT_VERSION" >"$CACHE/package.json"
  # --ignore-scripts: playwright-core downloads nothing anyway; no install script runs.
  (cd "$CACHE" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
  printf '%s' "$PLAYWRIGHT_VERSION" >"$CACHE/.version"
fi

# The console's modules parse (a syntax error would otherwise show only as a blank page).
for module in "$ROOT"/assets/console/*.js; do
  cp "$module" "$LOGS/check-syntax.mjs"
  "$NODE" --check "$LOGS/check-syntax.mjs" || { log "syntax error in $module" && exit 1; }
done
# The charts' tick scale ends for any maximum (a pure function: run in node, no browser).
"$NODE" "$ROOT/tests/console/ticks.mjs" >"$LOGS/ticks.log" || { cat "$LOGS/ticks.log" >&2 && log "tests/console/ticks.mjs failed" && exit 1; }

# ---- the server -------------------------------------------------------------------------------
cd "$ROOT"
build_started=$SECONDS
case "$PROFILE" in
  debug) cargo build --locked --bin toolgate ;;
  release) cargo build --locked --release --bin toolgate ;;
  *) log "CONSOLE_PROFILE must be debug or release" && exit 2 ;;
esac
build_secs=$((SECONDS - build_started))
BIN="$TARGET/$PROFILE/toolgate"
[ -x "$BIN" ] || { log "no binary at $BIN" && exit 2; }

rm -rf "$SHOTS"
mkdir -p "$SHOTS"
# A tool from a tools file, and an upstream that never answers: each view has something to show.
cat >"$LOGS/tools.toml" <<'EOF'
[[tools]]
name = "from_file"
description = "Add two numbers (defined in the tools file). Example: {\"a\": 1, \"b\": 2} returns 3."
builtin = { id = "calculate_sum" }
EOF
cat >"$LOGS/toolgate.toml" <<EOF
[tools]
path = "$LOGS/tools.toml"

[upstreams.dead]
url = "http://127.0.0.1:9/mcp"
allow_private = true
prefix = "dead_"

# A real upstream that changes its echo after the first listing (rug_pull): the Approvals view
# shows the held change with its diff (approval = "pin", the default). It also lists a tool
# named "bad name", which its page shows skipped as invalid.
[upstreams.fx]
prefix = "fx_"
stdio = { program = "python3", args = ["$ROOT/tests/api/upstream_support/stdio_upstream.py"], env_passthrough = ["PATH"], env = { UPSTREAM_RUG = "1", UPSTREAM_EXTRA_NAMES = '["bad name"]' } }

[servers.docs]
path = "/teams/docs/mcp"
title = "Docs team"
tools = ["from_file", "get_current_time"]
EOF

# The vault run: toolgate's own authorization server (its identity provider is never reached:
# nobody signs in here) and the vault's key; operators' tokens from an HS256 issuer of their own.
openssl rand -base64 32 >"$LOGS/vault-k1.key"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$LOGS/signing.pem" 2>/dev/null
VAULT_ADMIN_HMAC="$(openssl rand -hex 32)"
vault_settings() { # port
  cat <<EOF
[auth]
mode = "jwt"
resource = "http://127.0.0.1:$1/mcp"

[[auth.issuers]]
issuer = "http://127.0.0.1:$1/console-admin"
hmac_secret = "$VAULT_ADMIN_HMAC"

[authorization_server]
enabled = true
issuer = "http://127.0.0.1:$1"
signing_key_files = ["$LOGS/signing.pem"]

[authorization_server.identity_provider]
preset = "generic"
issuer = "https://idp.invalid"
client_id = "toolgate"
client_secret = "unused"

[[authorization_server.scope_rules]]
scopes = ["mcp:tools"]

[vault]
keys = [ { id = "k1", file = "$LOGS/vault-k1.key" } ]
EOF
}
# An operator's token for the vault run (HS256, Python's standard library only).
vault_admin_token() { # port
  python3 - "http://127.0.0.1:$1" "$VAULT_ADMIN_HMAC" <<'EOF'
import base64, hashlib, hmac, json, sys, time
origin, secret = sys.argv[1:]
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
now = int(time.time())
claims = {"iss": origin + "/console-admin", "sub": "console-e2e", "aud": origin + "/mcp", "scope": "toolgate:admin", "iat": now, "exp": now + 900}
signing_input = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
print(signing_input + "." + b64(hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest()))
EOF
}
# Connections of two users, as a connect would have stored them (the sealed values are not
# real: listing and disconnecting never open them).
vault_rows() { # database
  python3 - "$1" <<'EOF'
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
now = int(time.time() * 1000)
rows = [
    ("0190c0de-0000-7000-8000-00000000a11c", "alice", "notes", "notes", now - 3_600_000, now + 1_800_000, now - 60_000),
    ("0190c0de-0000-7000-8000-0000000000b0", "bob", "notes", "notes", now - 7_200_000, now + 600_000, 0),
    ("0190c0de-0000-7000-8000-0000000a11c2", "alice", "tickets", "tickets:read", now - 600_000, now - 60_000, now - 120_000),
]
for id, user, upstream, scopes, created, expires, used in rows:
    db.execute(
        "INSERT INTO vault_grants (id, principal, subject, upstream, issuer, key_id, sealed, scopes, expires_ms, version, lease_until_ms, created_ms, updated_ms, used_ms) "
        "VALUES (?, ?, ?, ?, 'https://as.invalid', 'k1', 'not-a-sealed-record', ?, ?, 1, 0, ?, ?, ?)",
        (id, "https://idp.invalid\x1f" + user, user, upstream, scopes, expires, created, created, used),
    )
db.commit()
EOF
}

MODE=""
launch_toolgate() { # port
  local config="$LOGS/toolgate.toml"
  if [ "$MODE" = vault ]; then
    config="$LOGS/toolgate-vault.toml"
    vault_settings "$1" >"$config"
  fi
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" TOOLGATE__ADMIN__BIND="127.0.0.1:0" \
    TOOLGATE__AUTH__MODE="$(case "$MODE" in off) echo off ;; vault) echo jwt ;; *) echo dev ;; esac)" \
    TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" \
    TOOLGATE__STORAGE__DATA_DIR="$LOGS/data-$MODE" \
    TOOLGATE__LOG__FORMAT=json \
    exec "$BIN" serve --config "$config"
}

run_mode() { # token | off | vault
  MODE="$1"
  if ! start_toolgate; then
    record "server start ($MODE)" 1
    return
  fi
  local admin
  admin="$(grep '"admin listener"' "$LOGS/server.log" | grep -o '127\.0\.0\.1:[0-9]*' | head -n1 || true)"
  if [ -z "$admin" ]; then
    record "admin listener ($MODE)" 1
    stop_pid "$server_pid"
    return
  fi
  local admin_token="" mcp_only=""
  if [ "$MODE" = token ]; then
    mint() { TOOLGATE__SERVER__BIND="127.0.0.1:$SERVER_PORT" TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" "$BIN" dev-token --subject console-e2e --scope "$1"; }
    admin_token="$(mint "toolgate:admin mcp:tools")"
    mcp_only="$(mint "mcp:tools")"
  elif [ "$MODE" = vault ]; then
    admin_token="$(vault_admin_token "$SERVER_PORT")"
    if ! vault_rows "$LOGS/data-vault/toolgate.db"; then
      record "vault: connections written into the database" 1
      stop_pid "$server_pid"
      return
    fi
  fi
  log "run $MODE: toolgate on 127.0.0.1:$SERVER_PORT, admin on $admin; logs in $LOGS"
  local run_started=$SECONDS
  run_client "browser-$MODE" env PLAYWRIGHT_DIR="$CACHE" CHROMIUM="$CHROMIUM" ADMIN="http://$admin" \
    MCP="http://127.0.0.1:$SERVER_PORT/mcp" MODE="$MODE" SHOTS="$SHOTS" ADMIN_TOKEN="$admin_token" \
    MCP_ONLY_TOKEN="$mcp_only" MCP_TOKEN="$admin_token" "$NODE" "$ROOT/tests/console/check.mjs"
  # The driver's other lines: console errors it saw, and its own timing.
  [ -s "$LOGS/browser-$MODE.stdout" ] && while IFS= read -r line; do log "$line"; done <"$LOGS/browser-$MODE.stdout"
  log "run $MODE took $((SECONDS - run_started)) s"
  stop_pid "$server_pid"
  server_pid=""
}

CLIENT_TIMEOUT="$TIMEOUT" # for run_client
shopt -s lastpipe          # run_client's loop updates `passed` and `failed` here
run_mode token
run_mode off
run_mode vault

log "screenshots: $SHOTS"
log "took $((SECONDS - started)) s (build $build_secs s)"
if [ "$failed" -gt 0 ]; then
  log "failed: ${failures[*]}"
fi
echo "console: $passed passed, $failed failed"
[ "$failed" = 0 ]
