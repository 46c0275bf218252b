#!/usr/bin/env bash
# shellcheck disable=SC2034  # server_pid, SERVER_PORT and the counters are the caller's
# Helpers the e2e runners share (sourced, not run). The caller defines `log` (one line to
# stderr) and sets LOGS (a directory) and PORTS (FIRST-LAST); for start_toolgate it also
# defines `launch_toolgate PORT`, which must `exec` the server so its pid is the one we track.

# GET /healthz with bash alone (no curl on a fresh machine): true on an HTTP 200 answer.
healthy() { # port
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
    IFS= read -r -t 5 status <&3 || exit 1
    [[ "$status" == "HTTP/1."?" 200 "* ]]
  ) 2>/dev/null
}

# Stops a process gracefully; SIGKILL if it is still there after 10 s.
stop_pid() { # pid
  local pid="$1"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
}

# Tries each port of PORTS until toolgate itself reports that it is listening (another process
# answering /healthz on a busy port must not be mistaken for ours). Sets server_pid and
# SERVER_PORT; the server's output goes to $LOGS/server.log.
start_toolgate() {
  local first="${PORTS%-*}" last="${PORTS#*-}" port
  for ((port = first; port <= last; port++)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi # something listens there
    launch_toolgate "$port" >"$LOGS/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 150); do
      if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
      if grep -q 'toolgate listening' "$LOGS/server.log" 2>/dev/null && healthy "$port"; then
        SERVER_PORT=$port # read by the caller
        return 0
      fi
      sleep 0.1
    done
    if kill -0 "$server_pid" 2>/dev/null; then
      log "toolgate did not become healthy on port $port within 15 s; its log:"
      cat "$LOGS/server.log" >&2
      return 1
    fi
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
    grep -qi 'in use' "$LOGS/server.log" || { log "toolgate failed to start; its log:" && cat "$LOGS/server.log" >&2 && return 1; }
  done
  log "no free port in $PORTS"
  return 1
}

passed=0
failed=0
failures=()
record() { # name status
  if [ "$2" = 0 ]; then
    passed=$((passed + 1))
    log "PASS $1"
  else
    failed=$((failed + 1))
    failures+=("$1")
    log "FAIL $1 (exit $2)"
  fi
}

# Runs a client that prints `PASS <check>` / `FAIL <check>: <why>` lines; each is recorded as a
# check of this suite, and a client that dies without saying why is a failure of its own. Needs
# CLIENT_TIMEOUT (seconds) and `shopt -s lastpipe` in the caller, so the counters it updates are
# the caller's.
run_client() { # name command...
  local name="$1" line rc=0 fails=0
  shift
  { timeout -k 5 "$CLIENT_TIMEOUT" "$@" 2>"$LOGS/$name.stderr" || echo "EXIT $?"; } | while IFS= read -r line; do
    case "$line" in
      "PASS "*)
        passed=$((passed + 1))
        log "PASS $name: ${line#PASS }"
        ;;
      "FAIL "*)
        failed=$((failed + 1)) fails=$((fails + 1))
        failures+=("$name: $(printf '%s' "${line#FAIL }" | cut -d: -f1)")
        log "FAIL $name: ${line#FAIL }"
        ;;
      "EXIT "*) rc="${line#EXIT }" ;;
      *) printf '%s\n' "$line" >>"$LOGS/$name.stdout" ;;
    esac
  done
  [ "$rc" = 124 ] && log "$name: killed after ${CLIENT_TIMEOUT}s"
  if [ "$rc" != 0 ] && [ "$fails" = 0 ]; then record "$name (exit $rc)" 1; fi
  if [ "$rc" != 0 ] && [ -s "$LOGS/$name.stderr" ]; then
    log "$name stderr (last lines):"
    tail -n 20 "$LOGS/$name.stderr" >&2
  fi
}

# The summary line of a suite (each failure named, where its logs are) and its status.
summary() { # suite
  [ "$failed" = 0 ] || log "failed: ${failures[*]} (logs in $LOGS)"
  echo "$1: $passed passed, $failed failed"
  [ "$failed" = 0 ]
}

# TOOLGATE_BIN as given, else the debug build of $ROOT (built now); exits 2 without one.
toolgate_bin() {
  if [ -z "${TOOLGATE_BIN:-}" ]; then
    (cd "$ROOT" && cargo build --locked --bin toolgate)
    TOOLGATE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/toolgate"
  fi
  [ -x "$TOOLGATE_BIN" ] || { log "no toolgate binary at $TOOLGATE_BIN" && exit 2; }
}
