#!/usr/bin/env bash
# The multi-replica topology, on one machine: N toolgate replicas (default 3) on loopback ports,
# sharing a fresh Postgres database (audit log, tool definitions, legacy sessions, events by
# LISTEN/NOTIFY) and Redis (cluster rate limits), behind nginx from Debian's packages doing round
# robin with SSE-safe settings (tests/cluster/nginx.conf.tmpl). The same shape as
# deploy/docker-compose.yml. Then, through the load balancer, with the official SDK clients:
#
#   a  legacy sessions survive round robin: one 2025-11-25 session per SDK (Python 1.x, 2.x,
#      TypeScript), 24 requests each, all answered, and served by at least two replicas
#      (nginx's log and the audit log's replica_id say which)
#   b  list_changed everywhere: legacy GET streams and modern subscriptions/listen streams on
#      every replica (connected directly), a tool created through one replica's admin API per
#      round, 20 rounds; every listener hears every change; cross-replica latency p50/p99
#   c  one client's quota holds cluster-wide: burst 20, 60/min, 90 requests round robin →
#      about 20 admitted (not 3×20), the rest 429 with Retry-After; first the same with
#      per-replica limits (`local`), for the comparison (--no-compare-local skips it)
#   e  throughput: requests/s through nginx with N replicas vs 1 (same load generator, runs
#      alternating N/1 so the machine's other load hits both alike)
#   d  kill -9 one replica during a bounded load run (modern stateless calls, JSON and streamed,
#      and legacy SDK sessions): only retriable failures, every worker recovers, every successful call in the
#      audit log exactly once and no failed one twice, survivors healthy
#   d2 the killed replica rejoins; then, after a few short streamed calls of one legacy SDK
#      session on every replica, the replica streaming that session's long call is killed
#      mid-answer: the call must fail (timeout), never be answered (a resumption on a survivor
#      must not replay another stream of the session); the same session goes on working; the
#      cut call is audited at most once
#   f  tasks across replicas (2026-07-28, stateless, the tasks extension declared per request;
#      replicas restarted with the conformance pack, tasks.lease_secs = --task-lease, and one call
#      slot each: tools.max_concurrent_calls = 1, max_queued_calls = 0), tests/cluster/tasks.py:
#      f1 a task created on replica-1 (slow_compute 3 s) is polled with tasks/get through every
#         other replica and nginx: visible at once, completed everywhere with the same inlined
#         result, its run audited once, by replica-1
#      f2 a slow task created on replica-1 is cancelled through replica-2: the ack, `cancelled`
#         through every replica and nginx, and the tool stopped on replica-1 (its one call slot,
#         busy before the cancel, is free again: a greet there is refused before and runs after)
#      f3 kill -9 of the replica running a slow task: the survivors (and nginx) report it
#         `failed`, saying its server stopped, within lease × 4/3 + 3 s; the time is a figure
#      f4 every replica stopped and started again: the completed result (f1) is still returned
#         through nginx and by every replica directly, the cancelled (f2) and failed (f3) tasks
#         keep their statuses
#      f5 tasks/update through another replica: confirm_delete on replica-1 goes input_required;
#         an accepting answer through replica-2 resumes it on replica-1 to `completed` (audited
#         there). Fails with "Unknown tool: confirm_delete" on a build without that tool
#
# Prints PASS/FAIL per check with its figures; the last line is `cluster: N passed, M failed`,
# exit status 0 only if M is 0. Everything it started is stopped, and the database and the
# Redis keys are removed, on every exit. Bounded by CLUSTER_TIMEOUT (default 300 s, after the
# build). Needs: Postgres (trust auth, user postgres) and Redis on this machine, nginx (found on
# PATH or /usr/sbin, else unpacked from Debian's nginx package into ~/.cache), and the
# clients of tests/e2e/setup.sh (py-mcp1, py-mcp2, node22, node).
#
#   tests/cluster/topology.sh                 # all checks, debug binary (cargo build)
#   tests/cluster/topology.sh --keep          # then leave the topology up until Ctrl-C
#   TOOLGATE_BIN=target/release/toolgate tests/cluster/topology.sh --only e,d
#   TOOLGATE_BIN=target/release/toolgate tests/cluster/topology.sh --only f --task-lease 5
#
# Options: --keep, --replicas N, --limits redis|local (backend of every phase but the comparison),
#   --no-compare-local, --only a,b,c,d,e,f, --duration S (load of d, default 15),
#   --throughput-duration S (each run of e, default 8), --throughput-rounds R (runs each way,
#   alternating, default 2), --audit sync|batched (audit.durability;
#   default sync, which check d's "none lost" needs), --task-lease S (tasks.lease_secs of check f,
#   default 5, at least 3).
# Environment: TOOLGATE_BIN (default: cargo build --locked --bin toolgate, debug), HARNESS_DIR
#   (default ~/.cache/toolgate-e2e), TOOLGATE_TEST_PG_HOST (host:port, default 127.0.0.1:5432),
#   TOOLGATE_TEST_REDIS_URL (default redis://127.0.0.1:6379), CLUSTER_TIMEOUT (seconds),
#   CLUSTER_DEB_ONLY=1 (use the unpacked Debian package even where nginx is installed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/cluster"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ next to the scripts
PG_HOST="${TOOLGATE_TEST_PG_HOST:-127.0.0.1:5432}"
REDIS_URL="${TOOLGATE_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
TIMEOUT="${CLUSTER_TIMEOUT:-300}"
REPLICAS=3
LIMITS=redis
KEEP=0
COMPARE_LOCAL=1
AUDIT=sync
ONLY="a,b,c,d,e,f"
TASK_LEASE=5
DURATION=15
TP_DURATION=8
TP_ROUNDS=2
while [ "$#" -gt 0 ]; do
  case "$1" in
    --keep) KEEP=1 ;;
    --replicas) REPLICAS="$2" && shift ;;
    --limits) LIMITS="$2" && shift ;;
    --no-compare-local) COMPARE_LOCAL=0 ;;
    --audit) AUDIT="$2" && shift ;;
    --only) ONLY="$2" && shift ;;
    --duration) DURATION="$2" && shift ;;
    --throughput-duration) TP_DURATION="$2" && shift ;;
    --throughput-rounds) TP_ROUNDS="$2" && shift ;;
    --task-lease) TASK_LEASE="$2" && shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
    *) echo "unknown option $1 (--help)" >&2 && exit 2 ;;
  esac
  shift
done
case "$LIMITS" in redis | local) ;; *) echo "--limits must be redis or local" >&2 && exit 2 ;; esac
case "$AUDIT" in sync | batched) ;; *) echo "--audit must be sync or batched" >&2 && exit 2 ;; esac
[ "$REPLICAS" -ge 2 ] || { echo "--replicas must be at least 2" >&2 && exit 2; }
[[ "$TASK_LEASE" =~ ^[0-9]+$ ]] && [ "$TASK_LEASE" -ge 3 ] || { echo "--task-lease must be a whole number of seconds, at least 3" >&2 && exit 2; }
want() { [[ ",$ONLY," == *",$1,"* ]]; }

log() { printf '[cluster] %s\n' "$*" >&2; }
passed=0
failed=0
failures=()
result() { # check-name status(0=pass) figures...
  local name="$1" rc="$2"
  shift 2
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
    printf '[cluster] PASS %s%s\n' "$name" "${*:+ — $*}" >&2
  else
    failed=$((failed + 1))
    failures+=("$name")
    printf '[cluster] FAIL %s%s\n' "$name" "${*:+ — $*}" >&2
  fi
}
FIGURES=()
figure() { FIGURES+=("$*"); }

# ---- binary and tools (before the clock starts) -----------------------------------------------
if [ -z "${TOOLGATE_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --locked --bin toolgate)
  TOOLGATE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/toolgate"
fi
[ -x "$TOOLGATE_BIN" ] || { log "no toolgate binary at $TOOLGATE_BIN" && exit 2; }
PY1="$HARNESS_DIR/py-mcp1/bin/python"
PY2="$HARNESS_DIR/py-mcp2/bin/python"
NODE="$HARNESS_DIR/node22/node"
for f in "$PY1" "$PY2" "$NODE"; do
  [ "$f" = "$PY1" ] || want a || continue # the other SDKs only for check a
  [ -x "$f" ] || { log "$f is missing: run tests/e2e/setup.sh first" && exit 2; }
done
for t in psql redis-cli; do
  command -v "$t" >/dev/null || { log "$t is missing (the Postgres and Redis clients)" && exit 2; }
done

# nginx from Debian's packages: installed, or the nginx package unpacked into the cache (no root
# needed once the package lists exist).
CACHE="$HOME/.cache/toolgate-cluster"
find_nginx() {
  local n=""
  if [ -z "${CLUSTER_DEB_ONLY:-}" ]; then # set: test the download path even where nginx is installed
    n="$(command -v nginx 2>/dev/null || true)"
    [ -z "$n" ] && [ -x /usr/sbin/nginx ] && n=/usr/sbin/nginx
  fi
  if [ -z "$n" ]; then
    for pkg in nginx nginx-light; do # Debian 12: the binary is in nginx; nginx-light is transitional
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

# ---- run state and cleanup --------------------------------------------------------------------
RUN="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-cluster.XXXXXX")"
RUN_ID="$(date +%H%M%S)$$$RANDOM"
DB="toolgate_cluster_$RUN_ID"
KEY_PREFIX="tgcluster-$RUN_ID"
PGURL_ADMIN="postgres://postgres@$PG_HOST/postgres"
PGURL="postgres://postgres@$PG_HOST/$DB"
declare -a PIDS PORTS ADMINS
NGINX_PID=""
DB_CREATED=0
WATCHDOG=""

stop_pid() { # pid [grace seconds]: SIGTERM, then SIGKILL
  local pid="$1" grace="${2:-10}"
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq $((grace * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
stop_replicas() {
  local i
  for i in "${!PIDS[@]}"; do [ -n "${PIDS[$i]}" ] && kill "${PIDS[$i]}" 2>/dev/null || true; done
  for i in "${!PIDS[@]}"; do stop_pid "${PIDS[$i]}" 10; PIDS[i]=""; done
}
cleanup() {
  local rc=$?
  set +e # clean up everything, whatever fails
  trap - EXIT INT TERM
  [ -n "$WATCHDOG" ] && kill "$WATCHDOG" 2>/dev/null && wait "$WATCHDOG" 2>/dev/null
  stop_replicas
  stop_pid "$NGINX_PID" 5
  if [ "$DB_CREATED" = 1 ]; then
    psql -q "$PGURL_ADMIN" -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || log "could not drop database $DB"
  fi
  redis-cli -u "$REDIS_URL" --scan --pattern "$KEY_PREFIX*" 2>/dev/null | xargs -r redis-cli -u "$REDIS_URL" del >/dev/null 2>&1 || true
  if [ "$failed" = 0 ] && [ "$rc" = 0 ] && [ "$KEEP" = 0 ]; then rm -rf "$RUN"; else log "logs kept in $RUN"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "stopped (CLUSTER_TIMEOUT=${TIMEOUT}s or SIGTERM)"; exit 124' TERM
# The whole run is bounded: the watchdog ends it (cleanup included) after TIMEOUT seconds.
watchdog() {
  sleep "$TIMEOUT" &
  local s=$!
  trap 'kill $s 2>/dev/null; exit 0' TERM
  wait "$s" && kill -TERM $$ 2>/dev/null
}
watchdog &
WATCHDOG=$!
started=$SECONDS
# bounded SECONDS COMMAND...: the command's own time limit, cut to what is left of CLUSTER_TIMEOUT
# (bash runs the watchdog's trap only once the foreground command ends).
bounded() {
  local s="$1" left=$((TIMEOUT - (SECONDS - started) - 5))
  shift
  [ "$left" -lt "$s" ] && s="$left"
  [ "$s" -ge 1 ] || { log "out of time (CLUSTER_TIMEOUT=${TIMEOUT}s)" && return 124; }
  timeout -k 3 "$s" "$@"
}

finish() {
  log "figures:"
  for f in "${FIGURES[@]}"; do log "  $f"; done
  [ "$failed" = 0 ] || log "failed: ${failures[*]}"
  echo "cluster: $passed passed, $failed failed"
}

# ---- ports ------------------------------------------------------------------------------------
free_ports() { # count: distinct free loopback ports (held open together while chosen)
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}
read -r -a P <<<"$(free_ports $((2 * REPLICAS + 2)))"
LB_PORT="${P[0]}"
SINGLE_PORT="${P[1]}"
for ((i = 0; i < REPLICAS; i++)); do
  PORTS[i]="${P[$((2 + 2 * i))]}"
  ADMINS[i]="${P[$((3 + 2 * i))]}"
  PIDS[i]=""
done
LB="http://127.0.0.1:$LB_PORT/mcp"
SINGLE="http://127.0.0.1:$SINGLE_PORT/mcp"

# ---- shared state: database, keys, secrets -------------------------------------------------------
psql -q "$PGURL_ADMIN" -c "CREATE DATABASE \"$DB\"" >/dev/null || { log "cannot create database $DB on $PG_HOST" && exit 2; }
DB_CREATED=1
redis-cli -u "$REDIS_URL" ping >/dev/null 2>&1 || log "Redis at $REDIS_URL does not answer (check c will show it)"
SESSION_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
STATE_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"

# Sessions across replicas need the shared id-signing secret (sessions.secret). A build without
# the setting refuses the unknown key at start-up; then the replicas run without it and check a
# says why it fails.
SESSIONS_SECRET_OK=1
if ! TOOLGATE__SESSIONS__SECRET="$SESSION_SECRET" "$TOOLGATE_BIN" check-config >"$RUN/check-config.out" 2>&1; then
  if grep -q 'secret' "$RUN/check-config.out"; then
    SESSIONS_SECRET_OK=0
    log "this toolgate refuses sessions.secret ($(head -c 200 "$RUN/check-config.out")): replicas start without it"
  fi
fi

# replica_env INDEX PHASE: the settings of one replica, one per line (env's NAME=VALUE form).
replica_env() {
  local i="$1" phase="$2" n=$(($1 + 1))
  cat <<EOF
TOOLGATE__SERVER__BIND=127.0.0.1:${PORTS[$i]}
TOOLGATE__ADMIN__BIND=127.0.0.1:${ADMINS[$i]}
TOOLGATE__SERVER__ALLOWED_HOSTS=127.0.0.1:$LB_PORT,127.0.0.1:$SINGLE_PORT,127.0.0.1:${PORTS[$i]}
TOOLGATE__SERVER__SHUTDOWN_GRACE_SECS=3
TOOLGATE__SERVER__DRAIN_DELAY_MS=200
TOOLGATE__SERVER__STATE_SECRET=$STATE_SECRET
TOOLGATE__AUTH__DEV_KEY_FILE=$RUN/dev-signing.key
TOOLGATE__AUTH__RESOURCE=$LB
TOOLGATE__STORAGE__URL=$PGURL
TOOLGATE__STORAGE__DATA_DIR=$RUN/replica-$n
TOOLGATE__AUDIT__REPLICA_ID=replica-$n
TOOLGATE__AUDIT__DURABILITY=$AUDIT
TOOLGATE__LOG__FORMAT=json
TOOLGATE__LIMITS__REDIS__URL=$REDIS_URL
TOOLGATE__LIMITS__REDIS__KEY_PREFIX=$KEY_PREFIX
TOOLGATE__LIMITS__AUTH_FAILURES_PER_MINUTE=600
TOOLGATE__LIMITS__AUTH_FAILURE_BURST=100
EOF
  [ "$SESSIONS_SECRET_OK" = 1 ] && echo "TOOLGATE__SESSIONS__SECRET=$SESSION_SECRET"
  case "$phase" in
    quota-redis | quota-local)
      echo "TOOLGATE__LIMITS__BACKEND=${phase#quota-}"
      echo "TOOLGATE__LIMITS__REQUESTS_PER_MINUTE=60"
      echo "TOOLGATE__LIMITS__REQUEST_BURST=20"
      ;;
    tasks | tasks-restart)
      echo "TOOLGATE__TOOLS__PACKS__CONFORMANCE=true"
      echo "TOOLGATE__TASKS__LEASE_SECS=$TASK_LEASE"
      echo "TOOLGATE__TOOLS__MAX_CONCURRENT_CALLS=1"
      echo "TOOLGATE__TOOLS__MAX_QUEUED_CALLS=0"
      ;;&
    main | rejoin | tasks | tasks-restart)
      echo "TOOLGATE__LIMITS__BACKEND=$LIMITS"
      echo "TOOLGATE__LIMITS__REQUESTS_PER_MINUTE=100000000"
      echo "TOOLGATE__LIMITS__REQUEST_BURST=10000000"
      echo "TOOLGATE__LIMITS__TOOL_UNITS_PER_MINUTE=100000000"
      echo "TOOLGATE__LIMITS__TOOL_BURST=10000000"
      echo "TOOLGATE__LIMITS__GLOBAL_PER_SECOND=1000000"
      echo "TOOLGATE__LIMITS__GLOBAL_BURST=1000000"
      ;;
  esac
}

healthy() { # port: GET /healthz answers 200
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
    IFS= read -r -t 5 status <&3 || exit 1
    [[ "$status" == "HTTP/1."?" 200 "* ]]
  ) 2>/dev/null
}

# launch_replica INDEX PHASE: starts one replica in the background (its log: replica-N.PHASE.log).
launch_replica() {
  local i="$1" phase="$2" n=$(($1 + 1)) envs
  mkdir -p "$RUN/replica-$n"
  mapfile -t envs < <(replica_env "$i" "$phase")
  env "${envs[@]}" "$TOOLGATE_BIN" serve >>"$RUN/replica-$n.$phase.log" 2>&1 &
  PIDS[i]=$!
}
# await_replica INDEX PHASE: waits (at most 30 s) until it says it listens and answers /healthz.
await_replica() {
  local i="$1" n=$(($1 + 1)) log_file="$RUN/replica-$(($1 + 1)).$2.log"
  for _ in $(seq 300); do
    kill -0 "${PIDS[$i]}" 2>/dev/null || break
    if grep -q 'toolgate listening' "$log_file" 2>/dev/null && healthy "${PORTS[$i]}"; then return 0; fi
    sleep 0.1
  done
  log "replica-$n did not start ($2); its log:"
  tail -n 30 "$log_file" >&2
  return 1
}
# start_replicas PHASE: all replicas, in parallel.
start_replicas() {
  local i
  for ((i = 0; i < REPLICAS; i++)); do launch_replica "$i" "$1"; done
  for ((i = 0; i < REPLICAS; i++)); do await_replica "$i" "$1" || return 1; done
}

# The dev key exists before the replicas start (they would race to create it); tokens are minted
# for the load balancer's URL (auth.resource), so they are valid on every replica.
token() { # subject scope
  local envs
  mapfile -t envs < <(replica_env 0 main | grep -E '^TOOLGATE__(AUTH|SERVER__BIND)')
  env "${envs[@]}" "$TOOLGATE_BIN" dev-token --subject "$1" --scope "$2" --ttl-secs 3600
}
MCP_TOKEN="$(token "cluster-$RUN_ID" "mcp:tools")" || { log "dev-token failed" && exit 2; }
ADMIN_TOKEN="$(token "cluster-admin-$RUN_ID" "mcp:tools toolgate:admin")"
export MCP_TOKEN ADMIN_TOKEN

# ---- nginx ------------------------------------------------------------------------------------
mkdir -p "$RUN/nginx-tmp"
servers=""
for ((i = 0; i < REPLICAS; i++)); do
  servers+="        server 127.0.0.1:${PORTS[$i]} max_fails=1 fail_timeout=5s;"$'\n'
done
python3 - "$HERE/nginx.conf.tmpl" "$HERE/nginx-proxy.inc" "$RUN/nginx.conf" <<EOF
import sys
tmpl, inc, out = sys.argv[1:]
text = open(tmpl).read()
for k, v in {"@WORKERS@": "2", "@RUN@": "$RUN", "@PORT@": "$LB_PORT", "@SINGLE_PORT@": "$SINGLE_PORT",
             "@ACCESS_LOG_BUFFER@": "buffer=64k flush=200ms",
             "@SERVERS@": """${servers%$'\n'}""",
             "@SINGLE_SERVER@": "        server 127.0.0.1:${PORTS[0]} max_fails=1 fail_timeout=5s;",
             "@PROXY@": open(inc).read().rstrip("\n")}.items():
    text = text.replace(k, v)
import re
assert not re.search(r"@[A-Z_]+@", text.split("\n", 2)[2]), "unfilled placeholder"
open(out, "w").write(text)
EOF
"$NGINX" -t -q -p "$RUN" -e "$RUN/nginx-error.log" -c "$RUN/nginx.conf" || { log "nginx -t refused $RUN/nginx.conf" && exit 2; }
"$NGINX" -p "$RUN" -e "$RUN/nginx-error.log" -c "$RUN/nginx.conf" -g 'daemon off;' &
NGINX_PID=$!
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$LB_PORT") 2>/dev/null && break
  kill -0 "$NGINX_PID" 2>/dev/null || break
  sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/$LB_PORT") 2>/dev/null || { log "nginx did not start: $(tail -n 3 "$RUN/nginx-error.log")" && exit 2; }
log "toolgate $("$TOOLGATE_BIN" --version | cut -d' ' -f2) ×$REPLICAS on ${PORTS[*]} (admin ${ADMINS[*]}), $("$NGINX" -v 2>&1 | cut -d' ' -f3) on $LB_PORT (single-replica server on $SINGLE_PORT), database $DB, Redis prefix $KEY_PREFIX; run directory $RUN"

# nginx log lines of the requests whose id starts with PREFIX: distinct upstream addresses
upstreams_of() { # rid-prefix
  sleep 0.3 # the access log is flushed every 200 ms
  python3 - "$RUN/nginx-access.log" "$1" <<'EOF'
import json, sys
seen = {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("request_id", "").startswith(sys.argv[2] + "-"):
        for u in r["upstream"].split(", "):
            seen[u] = seen.get(u, 0) + 1
print(" ".join(f"{k}={v}" for k, v in sorted(seen.items())))
EOF
}
sql() { psql -qAt "$PGURL" -c "$1"; }

# ---- c: one client's quota, cluster-wide --------------------------------------------------------
quota_phase() { # backend expect
  local backend="$1" expect="$2" out rc=0 tok
  stop_replicas
  start_replicas "quota-$backend" || { result "c: quota ($backend backend)" 1 "replicas did not start" && return; }
  tok="$(token "quota-$backend-$RUN_ID" "mcp:tools")"
  out="$(MCP_TOKEN="$tok" bounded 60 "$PY1" "$HERE/quota.py" --url "$LB" --requests 90 --burst 20 --per-minute 60 \
    --replicas "$REPLICAS" --expect "$expect" --rid-prefix "c-$backend-$RUN_ID" 2>"$RUN/quota-$backend.stderr")" || rc=$?
  echo "$out" >"$RUN/quota-$backend.json"
  local spread
  spread="$(upstreams_of "c-$backend-$RUN_ID")"
  local fig
  fig="$(python3 "$HERE/report.py" quota "$RUN/quota-$backend.json")"
  if [ "$expect" = cluster ]; then
    result "c: per-client quota holds cluster-wide (burst 20, 60/min, $backend backend, 90 requests round robin)" "$rc" "$fig; upstreams $spread"
    figure "c  quota, $backend backend: $fig"
  else
    result "c': comparison, $backend backend (each replica counts alone)" "$rc" "$fig; upstreams $spread"
    figure "c' quota, $backend backend: $fig"
  fi
}
if want c; then
  [ "$COMPARE_LOCAL" = 1 ] && [ "$LIMITS" = redis ] && quota_phase local local
  if [ "$LIMITS" = redis ]; then quota_phase redis cluster; else quota_phase local local; fi
fi

# ---- f: tasks across replicas -----------------------------------------------------------------------
# Its own phase (the conformance pack's task tools, a short lease, one call slot per replica);
# each step is a subcommand of tasks.py, its JSON in $RUN/f-STEP.json, the tasks it leaves in
# $RUN/f-state.json (for f4).
replica_url() { echo "replica-$(($1 + 1))=http://127.0.0.1:${PORTS[$1]}/mcp"; }
tasks_step() { # step args...: one step of tasks.py (25 s at most; lost: 2 leases + 15 s), its JSON in $RUN/f-STEP.json
  local step="$1" limit=25
  shift
  [ "$step" = lost ] && limit=$((2 * TASK_LEASE + 15))
  bounded $((limit + 5)) "$PY1" "$HERE/tasks.py" "$step" --timeout "$limit" --rid-prefix "f$step-$RUN_ID" --state "$RUN/f-state.json" "$@" \
    >"$RUN/f-$step.json" 2>"$RUN/f-$step.stderr"
}
json_field() { # file key: a field of a helper's one-line JSON ("" if absent)
  python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]).get(sys.argv[2]) or "")' "$1" "$2" 2>/dev/null || true
}
task_audit() { # task-id: who audited the end of its run (replica_id=count of its task_change records other than the creation), waiting up to 3 s for one
  local out="" n
  for n in $(seq 30); do
    out="$(sql "SELECT string_agg(replica_id || '=' || n, ' ' ORDER BY replica_id) FROM (SELECT replica_id, count(*) n FROM audit_log WHERE kind = 'task_change' AND starts_with(detail, 'task $1 ') AND detail <> 'task $1 created' GROUP BY 1) t" 2>/dev/null || true)"
    [ -n "$out" ] || [ "${2:-wait}" = nowait ] && break
    sleep 0.1
  done
  echo "${out:-none}"
}
tasks_check() {
  local i rc id audit spread fig polls=() others=() survivors=()
  stop_replicas
  start_replicas tasks || { result "f: tasks across replicas" 1 "replicas did not start (tasks phase)" && return; }
  log "tasks phase: replicas up with tasks.lease_secs=$TASK_LEASE, one call slot each ($((SECONDS - started)) s)"
  rm -f "$RUN/f-state.json"
  for ((i = 0; i < REPLICAS; i++)); do polls+=(--poll "$(replica_url "$i")"); done
  for ((i = 1; i < REPLICAS; i++)); do others+=(--poll "$(replica_url "$i")"); done
  for ((i = 0; i < REPLICAS - 1; i++)); do survivors+=(--poll "$(replica_url "$i")"); done

  # f1: created on replica-1, polled through every other replica and nginx
  rc=0
  tasks_step spread --create "$(replica_url 0)" "${others[@]}" --poll "nginx=$LB" --seconds 3 || rc=1
  id="$(json_field "$RUN/f-spread.json" taskId)"
  audit="$(task_audit "$id")"
  [ "$audit" = "replica-1=1" ] || rc=1
  spread="$(upstreams_of "fspread-$RUN_ID")"
  [ "$(wc -w <<<"$spread")" -ge 2 ] || rc=1
  fig="$(python3 "$HERE/report.py" task-spread "$RUN/f-spread.json")"
  result "f1: a task created on replica-1 completes through every replica and nginx, one result" "$rc" \
    "$fig; its run audited by ${audit} (want replica-1=1); nginx sent the polls to ${spread:-none}"
  figure "f1 task polled everywhere: $fig"

  # f2: created on replica-1, cancelled through replica-2, stopped on replica-1
  rc=0
  tasks_step cancel --create "$(replica_url 0)" --cancel "$(replica_url 1)" "${polls[@]}" --poll "nginx=$LB" \
    --admin-a "http://127.0.0.1:${ADMINS[0]}" --admin-b "http://127.0.0.1:${ADMINS[1]}" --seconds 120 || rc=1
  id="$(json_field "$RUN/f-cancel.json" taskId)"
  audit="$(task_audit "$id")"
  # The cancel is recorded once, by the replica that took it.
  [ "$audit" = "replica-2=1" ] || rc=1
  fig="$(python3 "$HERE/report.py" task-cancel "$RUN/f-cancel.json")"
  result "f2: a task created on replica-1 is cancelled through replica-2, and its tool stops on replica-1" "$rc" \
    "$fig; its cancel audited by $audit (want replica-2=1)"
  figure "f2 cancel across replicas: $fig"

  # f3: kill -9 of the replica running a task
  rc=0
  local v=$((REPLICAS - 1))
  tasks_step lost --create "$(replica_url "$v")" --victim-pid "${PIDS[$v]}" "${survivors[@]}" --poll "nginx=$LB" \
    --lease-secs "$TASK_LEASE" --margin-secs 3 --seconds 120 || rc=1
  if ! kill -0 "${PIDS[$v]}" 2>/dev/null; then
    wait "${PIDS[$v]}" 2>/dev/null || true
    PIDS[v]=""
  else
    log "replica-$((v + 1)) was not killed" && rc=1
  fi
  fig="$(python3 "$HERE/report.py" task-lost "$RUN/f-lost.json")"
  result "f3: kill -9 of the replica running a task: a survivor reports it failed within the lease ($TASK_LEASE s) + margin" "$rc" "$fig"
  figure "f3 time to failed after kill -9: $(json_field "$RUN/f-lost.json" timeToFailedS) s (lease $TASK_LEASE s): $fig"

  # f4: every replica restarts; the tasks are still there
  rc=0
  stop_replicas
  if start_replicas tasks-restart; then
    tasks_step restart --url "$LB" --requests $((3 * REPLICAS)) "${polls[@]}" || rc=1
    spread="$(upstreams_of "frestart-$RUN_ID")"
    [ "$(wc -w <<<"$spread")" -ge 2 ] || rc=1
    fig="$(python3 "$HERE/report.py" task-restart "$RUN/f-restart.json")"
  else
    rc=1 fig="the replicas did not start again"
  fi
  result "f4: after every replica restarted, the completed result is still returned through nginx and by each" "$rc" "$fig; nginx sent them to ${spread:-none}"
  figure "f4 after a restart of all: $fig"

  tasks_update_step
}

# ---- f5: tasks/update through another replica ---------------------------------------------------
# confirm_delete {filename} created on replica-1 goes input_required (inputRequests); an accepting
# answer (tasks/update) through replica-2 must resume it on replica-1 (the cluster channel wakes
# it) to completed, its end audited by replica-1. A build without the tool fails here with
# "Unknown tool: confirm_delete".
tasks_update_step() {
  local rc=0 id audit fig polls=() i
  for ((i = 0; i < REPLICAS; i++)); do polls+=(--poll "$(replica_url "$i")"); done
  tasks_step update --create "$(replica_url 0)" --update "$(replica_url 1)" "${polls[@]}" --poll "nginx=$LB" \
    --admin-a "http://127.0.0.1:${ADMINS[0]}" --filename "cluster-$RUN_ID.txt" || rc=1
  id="$(json_field "$RUN/f-update.json" taskId)"
  audit=none
  if [ -n "$id" ]; then
    audit="$(task_audit "$id")"
    [ "$rc" = 0 ] && [ "$audit" != "replica-1=1" ] && rc=1
  fi
  fig="$(python3 "$HERE/report.py" task-update "$RUN/f-update.json")"
  result "f5: tasks/update through replica-2 resumes a task waiting for input on replica-1" "$rc" "$fig; its run's end audited by $audit (want replica-1=1)"
  figure "f5 tasks/update across replicas: $fig"
}

want f && tasks_check

# ---- the main phase (checks a, b, d, e) ---------------------------------------------------------------
if ! want a && ! want b && ! want d && ! want e; then
  log "done in $((SECONDS - started)) s"
  finish
  [ "$failed" = 0 ] && exit 0
  exit 1
fi
stop_replicas
if ! start_replicas main; then
  result "replicas start" 1 "see the log above"
  finish
  exit 1
fi
# The restarted replicas left nginx's pooled upstream connections dead: the first request on
# each would fail over and mark its replica down for fail_timeout (max_fails=1), and check a's
# round robin would then see two upstreams, not three. A reload starts workers with fresh pools
# and fresh peer state.
"$NGINX" -p "$RUN" -e "$RUN/nginx-error.log" -c "$RUN/nginx.conf" -s reload || log "nginx reload failed"
sleep 1
log "replicas up ($((SECONDS - started)) s)"

# ---- a: legacy sessions through round robin ---------------------------------------------------
if want a; then
  for sdk in py1 py2 ts; do
    case "$sdk" in
      py1) cmd=("$PY1" "$HERE/sdk_session.py") && label="Python SDK $("$PY1" -c 'import importlib.metadata as m; print(m.version("mcp"))')" ;;
      py2) cmd=("$PY2" "$HERE/sdk_session.py") && label="Python SDK $("$PY2" -c 'import importlib.metadata as m; print(m.version("mcp"))')" ;;
      ts) cmd=("$NODE" "$HERE/ts_session.mjs") && label="TypeScript SDK $("$NODE" -p "require('$HARNESS_DIR/node/node_modules/@modelcontextprotocol/sdk/package.json').version")" ;;
    esac
    prefix="a-$sdk-$RUN_ID"
    rc=0
    out="$(bounded 90 "${cmd[@]}" --url "$LB" --requests 24 --rid-prefix "$prefix" 2>"$RUN/a-$sdk.stderr")" || rc=$?
    echo "$out" >"$RUN/a-$sdk.json"
    spread="$(upstreams_of "$prefix")"
    audit="$(sql "SELECT string_agg(replica_id || '=' || n, ' ' ORDER BY replica_id) FROM (SELECT replica_id, count(*) n FROM audit_log WHERE kind = 'tool_call' AND request_id LIKE '$prefix-%' GROUP BY 1) t" 2>/dev/null || true)"
    summary="$(python3 "$HERE/report.py" session "$RUN/a-$sdk.json")"
    n_up=$(wc -w <<<"$spread")
    n_audit=$(wc -w <<<"$audit")
    why=""
    [ "$rc" = 0 ] || why="the client failed; "
    [ "$n_up" -ge 2 ] || why+="nginx sent the session's requests to $n_up replica(s), which proves nothing; "
    [ "$n_audit" -ge 2 ] || why+="audit shows tool calls from $n_audit replica(s); "
    [ "$SESSIONS_SECRET_OK" = 1 ] || why+="this build has no sessions.secret; "
    result "a: legacy session survives round robin ($label)" "$([ -z "$why" ] && echo 0 || echo 1)" \
      "${why}$summary; nginx upstreams: ${spread:-none}; audit replica_id: ${audit:-none}"
    figure "a  $label: $summary; served by ${spread:-none}"
  done
fi

# ---- b: list_changed on every replica ---------------------------------------------------------
if want b; then
  args=()
  for ((i = 0; i < REPLICAS; i++)); do
    args+=(--replica "http://127.0.0.1:${PORTS[$i]}/mcp" --admin "http://127.0.0.1:${ADMINS[$i]}")
  done
  rc=0
  out="$(bounded 90 "$PY1" "$HERE/listeners.py" "${args[@]}" --rounds 20 --name-prefix "lc_$RUN_ID" 2>"$RUN/b.stderr")" || rc=$?
  echo "$out" >"$RUN/b.json"
  fig="$(python3 "$HERE/report.py" listeners "$RUN/b.json")"
  result "b: list_changed reaches listeners on every replica" "$rc" "$fig"
  figure "b  list_changed: $fig"
fi

# ---- e: throughput, N replicas vs 1 ------------------------------------------------------------
load_run() { # url prefix duration extra-args... ; prints the summary line
  local url="$1" prefix="$2" duration="$3"
  shift 3
  bounded $((duration + 60)) "$PY1" "$HERE/load.py" run --url "$url" --duration "$duration" --prefix "$prefix" "$@" 2>>"$RUN/load.stderr"
}
if want e; then
  # Alternating N, 1, 1, N, ... so a drift in the machine's other load hits both alike.
  rc=0
  for ((r = 1; r <= TP_ROUNDS; r++)); do
    order=("$REPLICAS" 1)
    [ $((r % 2)) = 0 ] && order=(1 "$REPLICAS")
    for n in "${order[@]}"; do
      url="$LB"
      [ "$n" = 1 ] && url="$SINGLE"
      load_run "$url" "e$n-$r-$RUN_ID" "$TP_DURATION" --concurrency 32 --procs 2 >"$RUN/e-$n-$r.json" || rc=1
    done
  done
  fig="$(python3 "$HERE/report.py" throughput "$RUN" "$REPLICAS")"
  python3 "$HERE/report.py" throughput-ok "$RUN" "$REPLICAS" || rc=1
  result "e: throughput through nginx (tools/call echo, 32 connections, ${TP_ROUNDS}×${TP_DURATION} s each way, audit $AUDIT, $(nproc) cores shared by everything)" "$rc" "$fig"
  figure "e  throughput: $fig"
fi

# ---- d: kill -9 one replica under load ----------------------------------------------------------
if want d; then
  victim=1 # replica-2
  prefix="d-$RUN_ID"
  load_run "$LB" "$prefix" "$DURATION" --concurrency 16 --slow-workers 4 --legacy-sessions 3 --records "$RUN/d-records.jsonl" >"$RUN/d-run.json" &
  load_pid=$!
  sleep 5
  kill_at="$(date +%s.%N)"
  kill -9 "${PIDS[$victim]}" 2>/dev/null || true
  wait "${PIDS[$victim]}" 2>/dev/null || true
  PIDS[victim]=""
  log "kill -9 replica-$((victim + 1)) at +5 s of the load run"
  rc=0
  wait "$load_pid" || rc=$?
  [ "$rc" = 0 ] || log "the load run failed (exit $rc): $(tail -n 5 "$RUN/load.stderr" | tr '\n' ' ')"
  sql "SELECT request_id, count(*) FROM audit_log WHERE kind = 'tool_call' AND request_id LIKE '$prefix-%' GROUP BY 1" >"$RUN/d-audit.txt" || rc=1
  by_replica="$(sql "SELECT string_agg(replica_id || '=' || n, ' ' ORDER BY replica_id) FROM (SELECT replica_id, count(*) n FROM audit_log WHERE kind = 'tool_call' AND request_id LIKE '$prefix-%' GROUP BY 1) t" 2>/dev/null || true)"
  vout="$("$PY1" "$HERE/load.py" verify --records "$RUN/d-records.jsonl" --audit "$RUN/d-audit.txt" --kill-at "$kill_at" 2>>"$RUN/load.stderr")" || rc=1
  echo "$vout" >"$RUN/d-verify.json"
  # the survivors keep serving: healthy, ready, and a short clean run through nginx
  survivors_ok=1
  for ((i = 0; i < REPLICAS; i++)); do
    [ "$i" = "$victim" ] && continue
    kill -0 "${PIDS[$i]}" 2>/dev/null && healthy "${PORTS[$i]}" || survivors_ok=0
  done
  after="$(load_run "$LB" "d-after-$RUN_ID" 2 --concurrency 4)" || survivors_ok=0
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["ok"] > 0 and d["ok"] == d["requests"] else 1)' "$after" 2>/dev/null || survivors_ok=0
  [ "$survivors_ok" = 1 ] || rc=1
  echo "$after" >"$RUN/d-after.json"
  fig="$(python3 "$HERE/report.py" kill "$RUN/d-verify.json" "$RUN/d-after.json")"
  result "d: kill -9 replica-$((victim + 1)) during a ${DURATION} s load run (16 modern echo workers, 4 modern streaming workers, 3 legacy SDK sessions)" "$rc" "$fig; audit by replica: $by_replica; survivors healthy: $([ "$survivors_ok" = 1 ] && echo yes || echo NO)"
  figure "d  kill -9: $fig"
fi

# ---- d2: the replica streaming a legacy client's answer dies -------------------------------------
if want d; then
  rc=0
  for ((i = 0; i < REPLICAS; i++)); do # the replica killed by d rejoins first
    if [ -z "${PIDS[$i]}" ] || ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
      launch_replica "$i" rejoin
      await_replica "$i" rejoin || rc=1
    fi
  done
  args=()
  for ((i = 0; i < REPLICAS; i++)); do args+=(--replica "$((i + 1))=${PIDS[$i]}=http://127.0.0.1:${ADMINS[$i]}"); done
  out="$(bounded 60 "$PY1" "$HERE/cut_stream.py" --url "$LB" "${args[@]}" --rid-prefix "d2-$RUN_ID" 2>"$RUN/d2.stderr")" || rc=1
  echo "$out" >"$RUN/d2.json"
  for ((i = 0; i < REPLICAS; i++)); do # note the one it killed
    if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
      wait "${PIDS[$i]}" 2>/dev/null || true
      PIDS[i]=""
    fi
  done
  sql "SELECT request_id, count(*) FROM audit_log WHERE kind = 'tool_call' AND request_id LIKE 'd2-$RUN_ID-%' GROUP BY 1" >"$RUN/d2-audit.txt" || rc=1
  # the cut call audited at most once, its retry exactly once
  audited="$(python3 - "$RUN/d2.json" "$RUN/d2-audit.txt" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
counts = dict(line.strip().rsplit("|", 1) for line in open(sys.argv[2]) if line.strip())
cut, retry = int(counts.get(d.get("cutRid"), 0)), int(counts.get(d.get("retryRid"), 0))
print(f"cut call {cut}, retry {retry}")
sys.exit(0 if cut <= 1 and retry == 1 else 1)
EOF
)" || rc=1
  fig="$(python3 "$HERE/report.py" cut "$RUN/d2.json")"
  result "d2: the replica streaming a legacy SDK call is killed mid-answer (replica-2 rejoined first)" "$rc" "$fig; audit records: ${audited:-none}"
  figure "d2 cut stream: $fig"
fi

if [ "$KEEP" = 1 ]; then
  kill "$WATCHDOG" 2>/dev/null && wait "$WATCHDOG" 2>/dev/null
  WATCHDOG=""
  finish
  log "--keep: the topology stays up until Ctrl-C. Load balancer $LB (single replica: $SINGLE); replicas ${PORTS[*]}, admin ${ADMINS[*]}; database $PGURL"
  log "tokens: MCP_TOKEN=$MCP_TOKEN"
  log "        ADMIN_TOKEN=$ADMIN_TOKEN"
  while true; do
    sleep 3600 &
    wait $! # interruptible: Ctrl-C runs the cleanup at once
  done
fi
log "done in $((SECONDS - started)) s"
finish
[ "$failed" = 0 ]
