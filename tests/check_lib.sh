# shellcheck shell=bash
# PASS/FAIL/SKIP bookkeeping shared by the file checks (tests/deploy_check.sh,
# tests/helm_check.sh). Source it after setting WORK (a scratch directory): a check's output goes
# to $WORK/out, and a failure shows its first 40 lines.

passed=0 failed=0 skipped=0
failures=()

pass() { printf 'PASS  %s\n' "$1"; passed=$((passed + 1)); }
skip() { printf 'SKIP  %s: %s\n' "$1" "$2"; skipped=$((skipped + 1)); }
fail() {
  printf 'FAIL  %s\n' "$1"
  [ -s "$WORK/out" ] && sed -n '1,40s/^/      /p' "$WORK/out"
  failed=$((failed + 1))
  failures+=("$1")
}
# check NAME CMD...: runs CMD, output to $WORK/out, PASS or FAIL with the first 40 lines.
check() {
  local name="$1"
  shift
  if "$@" >"$WORK/out" 2>&1; then pass "$name"; else fail "$name"; fi
}
