#!/usr/bin/env bash
# The approved catalog's rug pull across replicas (issue 28), end to end: N toolgate replicas
# (default 3) on one fresh Postgres database behind nginx round robin (tests/cluster/nginx.conf.tmpl,
# as tests/cluster/topology.sh runs it; no affinity), each with its own stdio child of the real MCP
# server tests/api/upstream_support/stdio_upstream.py as upstream `fx` (UPSTREAM_RUG=1; `approval`
# left at its default, `pin`), dev-key tokens as topology.sh mints them. The driver,
# tests/cluster/approvals.py (the official Python SDK 1.x), proves:
#   - every replica serves fx_echo, the first listing pinned once in the shared catalog
#   - with list_changed listeners open through nginx and on every replica directly (a legacy
#     2025-11-25 SDK session's GET stream and a 2026-07-28 subscriptions/listen stream each),
#     fx_rug_pull is called through every replica's admin API, so each replica's own child
#     changes echo's description (it now asks for ~/.ssh/id_rsa) and schema (a required `secret`)
#   - the change is held: every replica's GET /admin/upstreams says so; GET /admin/approvals on
#     every replica lists exactly one pending change of echo, its diff naming the description and
#     the schema paths (/properties/secret, /required/1)
#   - the old echo keeps serving, byte for byte, on every replica directly, through nginx and in
#     every SDK session, and no listener hears list_changed until 2 s after every replica held it
#   - one approval through one replica's admin API (replica-2) puts it live everywhere: every
#     listener hears notifications/tools/list_changed within 10 s (the latencies are printed),
#     every replica then lists the new echo; nothing is pending, the change is the approved echo
#   - nginx sent the driver's listings to every replica (its access log)
#   - the shared database: one baseline for fx, echo stored twice (the pinned version superseded,
#     the change approved by the admin token's subject); the approval audited once, by replica-2,
#     naming who approved it; every replica still healthy
#
# Prints PASS/FAIL per check; the last line is `cluster approvals: N passed, M failed`, exit
# status 0 only if M is 0. Everything it started is stopped and the database dropped on every
# exit. Needs Postgres (trust auth, user postgres), nginx (on PATH, /usr/sbin, or Debian's package
# unpacked into ~/.cache/toolgate-cluster as tests/cluster/topology.sh does), python3, and the
# py-mcp1 client of tests/e2e/setup.sh. About 10 s after the build.
#
#   tests/cluster/approvals.sh [--replicas N] [--break nothing-approved|approval-off]
#
# --break is a self-test: `nothing-approved` skips the approval, `approval-off` sets
# `approval = "off"`; either must make checks fail.
# Environment: TOOLGATE_BIN (default: cargo build --locked --bin toolgate, debug), HARNESS_DIR
#   (default ~/.cache/toolgate-e2e), TOOLGATE_TEST_PG_HOST (host:port, default 127.0.0.1:5432),
#   CLUSTER_APPROVALS_TIMEOUT (seconds the driver may take, default 120),
#   CLUSTER_APPROVALS_PORTS (loopback ports for nginx and the replicas, FIRST-LAST, default
#   18900-18999; no other script uses them).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/cluster"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
export PYTHONDONTWRITEBYTECODE=1
PG_HOST="${TOOLGATE_TEST_PG_HOST:-127.0.0.1:5432}"
CLIENT_TIMEOUT="${CLUSTER_APPROVALS_TIMEOUT:-120}"
PORT_RANGE="${CLUSTER_APPROVALS_PORTS:-18900-18999}"
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
case "$BREAK" in "" | nothing-approved | approval-off) ;; *) echo "--break must be nothing-approved or approval-off" >&2 && exit 2 ;; esac
PY1="$HARNESS_DIR/py-mcp1/bin/python"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-cluster-approvals.XXXXXX")"
started=$SECONDS

log() { printf '[cluster approvals] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"
shopt -s lastpipe # run_client updates this shell's counters

# ---- binary and tools ---------------------------------------------------------------------------
toolgate_bin
[ -x "$PY1" ] || { log "$PY1 is missing: run tests/e2e/setup.sh first" && exit 2; }
for t in psql python3; do command -v "$t" >/dev/null || { log "$t is missing" && exit 2; }; done

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
DB="toolgate_approvals_$RUN_ID"
PGURL_ADMIN="postgres://postgres@$PG_HOST/postgres"
PGURL="postgres://postgres@$PG_HOST/$DB"
DB_CREATED=0
NGINX_PID=""
declare -a PIDS RPORTS APORTS
cleanup() {
  local rc=$? i
  set +e
  trap - EXIT INT TERM
  # A command that failed under set -e ends the script here: say so, with the logs.
  if [ -z "${FINISHED:-}" ] && [ "$rc" != 0 ] && [ "$rc" != 130 ] && [ "$rc" != 2 ]; then
    record "approvals.sh ran to its end (it stopped with status $rc)" 1
    finish
  fi
  for i in "${!PIDS[@]}"; do [ -n "${PIDS[$i]}" ] && kill "${PIDS[$i]}" 2>/dev/null; done
  for i in "${!PIDS[@]}"; do stop_pid "${PIDS[$i]}"; done
  stop_pid "$NGINX_PID"
  [ "$DB_CREATED" = 1 ] && { psql -q "$PGURL_ADMIN" -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || log "could not drop database $DB"; }
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

dump_logs() {
  local f
  for f in "$LOGS"/replica-*.log "$LOGS"/nginx-error.log; do
    [ -s "$f" ] || continue
    log "---- ${f#"$LOGS"/} (last 30 lines) ----"
    tail -n 30 "$f" >&2
  done
}
finish() {
  FINISHED=1
  log "took $((SECONDS - started)) s; logs in $LOGS"
  [ "$failed" = 0 ] || dump_logs
  summary "cluster approvals"
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
[ "${#P[@]}" = $((2 * REPLICAS + 2)) ] || { log "not enough free ports in $PORT_RANGE (CLUSTER_APPROVALS_PORTS)" && exit 2; }
LB_PORT="${P[0]}"
SINGLE_PORT="${P[1]}"
for ((i = 0; i < REPLICAS; i++)); do RPORTS[i]="${P[$((2 + 2 * i))]}" && APORTS[i]="${P[$((3 + 2 * i))]}" && PIDS[i]=""; done
LB="http://127.0.0.1:$LB_PORT/mcp"

psql -q "$PGURL_ADMIN" -c "CREATE DATABASE \"$DB\"" >/dev/null || { log "cannot create database $DB on $PG_HOST" && exit 2; }
DB_CREATED=1
SESSION_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
STATE_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
sql() { psql -qAt "$PGURL" -c "$1"; }

# ---- replicas: one settings file (the upstream), the rest per replica as topology.sh sets it -----
APPROVAL_LINE=""
[ "$BREAK" = approval-off ] && APPROVAL_LINE='approval = "off"'
cat >"$LOGS/toolgate.toml" <<EOF
# A real MCP server that changes its echo when its tool rug_pull is called (each replica runs its own).
[upstreams.fx]
prefix = "fx_"
stdio = { program = "python3", args = ["$ROOT/tests/api/upstream_support/stdio_upstream.py"], env_passthrough = ["PATH"], env = { UPSTREAM_RUG = "1" } }
$APPROVAL_LINE
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
TOOLGATE__AUTH__DEV_KEY_FILE=$LOGS/dev-signing.key
TOOLGATE__AUTH__RESOURCE=$LB
TOOLGATE__STORAGE__URL=$PGURL
TOOLGATE__STORAGE__DATA_DIR=$LOGS/replica-$n
TOOLGATE__AUDIT__REPLICA_ID=replica-$n
TOOLGATE__LOG__FORMAT=json
TOOLGATE__LIMITS__AUTH_FAILURES_PER_MINUTE=600
TOOLGATE__LIMITS__AUTH_FAILURE_BURST=100
EOF
}
# The dev key exists before the replicas start (they would race to create it); tokens are minted
# for nginx's URL (auth.resource), so they are valid on every replica.
token() { # subject scope
  local envs
  mapfile -t envs < <(replica_env 0 | grep -E '^TOOLGATE__(AUTH|SERVER__BIND)')
  env "${envs[@]}" "$TOOLGATE_BIN" dev-token --subject "$1" --scope "$2" --ttl-secs 3600
}
MCP_TOKEN="$(token "approvals-$RUN_ID" "mcp:tools")" || fail_early "dev-token"
ADMIN_TOKEN="$(token "approvals-admin-$RUN_ID" "mcp:tools toolgate:admin")" || fail_early "dev-token (admin)"
export MCP_TOKEN ADMIN_TOKEN
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
# The first replica alone applies the migrations; then the others, which find fx's first listing
# pinned already (or race replica-1 to it: the catalog's unique keys decide).
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
log "toolgate ×$REPLICAS on ${RPORTS[*]} (admin ${APORTS[*]}) behind $("$NGINX" -v 2>&1 | cut -d' ' -f3) at $LB (Postgres $DB); each with its own stdio upstream fx${BREAK:+; --break $BREAK}; logs in $LOGS"

# ---- the driver -------------------------------------------------------------------------------------
args=(--lb "$LB" --approve-on 2 --timeout "$((CLIENT_TIMEOUT - 10))" --rid-prefix "approvals-$RUN_ID")
for ((i = 0; i < REPLICAS; i++)); do args+=(--replica "http://127.0.0.1:${RPORTS[$i]}/mcp" --admin "http://127.0.0.1:${APORTS[$i]}"); done
[ "$BREAK" = nothing-approved ] && args+=(--skip-approve)
driver_started=$SECONDS
run_client approvals "$PY1" "$HERE/approvals.py" "${args[@]}"
log "the driver took $((SECONDS - driver_started)) s; its figures: $(tail -n 1 "$LOGS/approvals.stdout" 2>/dev/null | cut -c1-2000)"

# ---- where nginx sent the driver's listings (its X-Request-Id prefix) -------------------------------
sleep 0.3 # nginx flushes its access log every 100 ms
spread="$(python3 - "$LOGS/nginx-access.log" "approvals-$RUN_ID-" <<'EOF'
import json, sys
seen = {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("request_id", "").startswith(sys.argv[2]):
        for u in r["upstream"].split(", "):
            if u:
                port = u.rsplit(":", 1)[1]
                seen[port] = seen.get(port, 0) + 1
print(len(seen), " ".join(f"{k}={v}" for k, v in sorted(seen.items())))
EOF
)" || spread="0 (no access log)"
rc=0
[ "${spread%% *}" = "$REPLICAS" ] || rc=1
record "nginx sent the driver's listings to all $REPLICAS replicas (port=requests: ${spread#* })" "$rc"

# ---- what the shared database holds -----------------------------------------------------------------
out="$(sql "SELECT (SELECT count(*) FROM catalog_baselines WHERE source = 'fx') || ' baseline; echo: ' ||
    coalesce((SELECT string_agg(state || ' by ' || coalesce(decided_by, '-'), ', ' ORDER BY first_seen_ms, id)
              FROM catalog_entries WHERE source = 'fx' AND kind = 'tool' AND name = 'echo'), 'none')" 2>&1)" || true
rc=0
[ "$out" = "1 baseline; echo: superseded by toolgate: first listing pinned, approved by approvals-admin-$RUN_ID" ] || rc=1
record "the shared database: one baseline for fx; echo pinned, then superseded by the change the admin approved — $out" "$rc"
out="$(sql "SELECT string_agg(replica_id || ' ' || kind || ' ' || outcome || ' ' || coalesce(subject, '-') || ': ' || detail, ' | ')
    FROM audit_log WHERE detail LIKE '% the tool echo of upstream fx %'" 2>&1)" || true
rc=0
[[ "$out" == "replica-2 "*" approvals-admin-$RUN_ID: approved the tool echo of upstream fx (fingerprint "* ]] && [[ "$out" != *" | "* ]] || rc=1
record "the approval audited once, by replica-2, with who approved it — ${out:-none}" "$rc"
alive=0
for ((i = 0; i < REPLICAS; i++)); do kill -0 "${PIDS[$i]}" 2>/dev/null && healthy "${RPORTS[$i]}" && alive=$((alive + 1)); done
rc=0
[ "$alive" = "$REPLICAS" ] || rc=1
record "all $REPLICAS replicas still healthy ($alive)" "$rc"
finish
