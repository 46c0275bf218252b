#!/usr/bin/env bash
# The project's test command: formatting, lints, unit and integration tests, then the end-to-end
# tests that drive the real server with the official MCP clients and the conformance suite.
#
#   ./tests/run.sh            everything (the e2e part installs its clients with tests/e2e/setup.sh)
#   ./tests/run.sh --quick    Rust checks only: no npm, no PyPI, no server process
set -euo pipefail

usage() { sed -n '2,6s/^# \{0,1\}//p' "$0"; }
quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h | --help) usage && exit 0 ;;
    *) usage >&2 && exit 2 ;;
  esac
done

cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS
step() { printf '\n==> %s\n' "$*" >&2; }

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --locked --all-targets -- -D warnings

step "tests/otel_check.sh (the otel feature: clippy and its tests)"
tests/otel_check.sh

if cargo nextest --version >/dev/null 2>&1; then
  step "cargo nextest run"
  cargo nextest run --locked --no-fail-fast
  # nextest does not run doctests
  step "cargo test --doc"
  cargo test --locked --doc
else
  step "cargo test (cargo-nextest is not installed)"
  cargo test --locked
fi

if [ "$quick" = 1 ]; then
  step "--quick: end-to-end tests skipped"
else
  step "tests/deploy_check.sh (Dockerfile, compose, Kubernetes, Prometheus, Grafana, nginx)"
  tests/deploy_check.sh
  step "tests/openapi_check.sh (admin API description)"
  tests/openapi_check.sh
  step "tests/helm_check.sh (the Helm chart: lint, render, validate, compare with deploy/k8s)"
  tests/helm_check.sh
  step "tests/openapi_import.sh (tools import openapi on published specs: GitHub, Figma, Petstore)"
  tests/openapi_import.sh
  step "tests/console_check.sh (the admin console in Debian's Chromium: every view, screenshots)"
  tests/console_check.sh
  # Fuzzing (fuzz/README.md): every target for a short run, failing on any crash. The build is
  # kept between runs on this machine (a cold one takes about 10 minutes on 2 cores).
  step "fuzz/run.sh ${FUZZ_SECONDS:-15} (cargo fuzz: every target, a short run each)"
  CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$HOME/.cache/toolgate/fuzz-target}" fuzz/run.sh "${FUZZ_SECONDS:-15}"
  step "tests/e2e/setup.sh"
  tests/e2e/setup.sh
  step "tests/e2e/run.sh"
  tests/e2e/run.sh
  # Every command and snippet of README.md and the deploy/ guides, as written, on a fresh data
  # directory (the README's release build, servers on 127.0.0.1:8080/8081/9000, the clients above)
  step "tests/docs_check.sh (README and deploy/ guides, run as written)"
  DOCS_CHECK_ALREADY_RUN=tests/deploy_check.sh,tests/helm_check.sh tests/docs_check.sh
  step "tests/cluster/topology.sh (3 replicas behind nginx, Postgres, Redis: sessions, list_changed, quotas, kill -9)"
  tests/cluster/topology.sh
  step "tests/cluster/signin.sh (sign-in through toolgate's authorization server, 3 replicas behind nginx)"
  tests/cluster/signin.sh
  step "tests/cluster/approvals.sh (a rug pull held, then approved through one replica: live on 3 replicas behind nginx)"
  tests/cluster/approvals.sh
  step "tests/cluster/connect.sh (a user's own account at a service: connect through one replica, call through another, refresh races spend each refresh token once, revoke; 3 replicas behind nginx)"
  tests/cluster/connect.sh
  # The benchmark's smoke test: every step of benches/run.sh at tiny sizes, with toolgate and two
  # of the peers from ../shared/bench. It fails on errors, never on a slow figure (BENCHMARKS.md).
  step "benches/run.sh --short (benchmark smoke test)"
  if [ -f "${SHARED_BENCH:-../shared/bench}/peers/peers.sh" ]; then
    benches/run.sh --short
  elif [ "${CI:-}" = true ]; then
    echo "CI needs the peers and load generator of ../shared/bench beside the repository" >&2
    exit 1
  else
    echo "not run: no ../shared/bench beside the repository (set SHARED_BENCH to point at one)" >&2
  fi
fi
step "all checks passed in $((SECONDS - started)) s"
