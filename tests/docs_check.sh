#!/usr/bin/env bash
# Runs every command and snippet of README.md and of the Markdown guides under deploy/, as the docs
# write them, on a fresh data directory, and fails if one fails (tests/docs_check.py does the work;
# its docstring says how each kind of block is run). One PASS/FAIL/SKIP line per block or inline
# command, with file and line; SKIP lines give the reason (Docker, Kubernetes, an identity
# provider on the internet, ...). Last line: `docs: N passed, M failed`; exit 0 only if M is 0.
#
#   tests/docs_check.sh
#
# Needs: the e2e clients of tests/e2e/setup.sh in $HARNESS_DIR (the Python and TypeScript SDKs at
# the versions the README pins are taken from there instead of being installed again; Node 22 for
# the MCP Inspector), npm/npx (the Inspector is fetched from npm by the README's npx command),
# python3, cargo (the README's own `cargo run --release` / `cargo build --release`, a no-op when
# target/release is up to date). Servers listen on loopback only, on the ports the docs name:
# 127.0.0.1:8080 and 8081 (the defaults) and 9000 must be free.
#
# Environment:
#   HARNESS_DIR               the e2e clients (default ~/.cache/toolgate-e2e)
#   DOCS_CHECK_TIMEOUT        seconds for the whole run (default 2700: a cold release build included)
#   DOCS_CHECK_BLOCK_TIMEOUT  seconds per block (default 300; plus the serve wait for cargo blocks)
#   DOCS_CHECK_SERVE_TIMEOUT  seconds a started server (cargo build included) has to listen (default 1500)
#   DOCS_CHECK_ALREADY_RUN    comma-separated commands the caller has just run, skipped here
#                             (tests/run.sh: tests/deploy_check.sh)
#   DOCS_CHECK_KEEP=1         keep the work directory (logs, generated scripts, fresh state)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
DC_WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-docs-check.XXXXXX")"
export DC_WORK

# Servers started from the docs run in process groups of their own (the reader's other terminal);
# whatever happens to the runner, they are stopped here.
cleanup() {
  local pgid _rest i
  if [ -s "$DC_WORK/servers" ]; then
    while read -r pgid _rest; do
      kill -TERM -- "-$pgid" 2>/dev/null || continue
      for ((i = 0; i < 300; i++)); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL -- "-$pgid" 2>/dev/null || true
    done <"$DC_WORK/servers"
  fi
  if [ "${DOCS_CHECK_KEEP:-}" = 1 ]; then
    echo "[docs] kept $DC_WORK" >&2
  else
    rm -rf "$DC_WORK"
  fi
}
trap cleanup EXIT
# The runner runs in the background so that a signal is handled at once (bash defers traps while
# it waits for a foreground child): it is passed on, and the runner stops its servers itself.
runner=""
trap '[ -n "$runner" ] && kill -TERM "$runner" 2>/dev/null; wait "$runner" 2>/dev/null; exit 130' INT TERM

rc=0
timeout --kill-after=20 "${DOCS_CHECK_TIMEOUT:-2700}" python3 "$ROOT/tests/docs_check.py" &
runner=$!
wait "$runner" || rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "[docs] killed after ${DOCS_CHECK_TIMEOUT:-2700}s (DOCS_CHECK_TIMEOUT)"
  echo "docs: 0 passed, 1 failed"
fi
exit "$rc"
