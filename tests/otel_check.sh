#!/usr/bin/env bash
# The `otel` cargo feature (OpenTelemetry traces over OTLP/HTTP) is off by default, so the
# default checks in tests/run.sh never compile it. This lints it and runs the tests that
# depend on it: the export to a stub collector, trace ids in logs and audit records, shutdown.
#
#   tests/otel_check.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
step() { printf '\n==> %s\n' "$*" >&2; }

step "cargo clippy --features otel --all-targets -- -D warnings"
cargo clippy --locked --features otel --all-targets -- -D warnings

tests=(--lib --test otel_export --test telemetry_logs --test shutdown)
if cargo nextest --version >/dev/null 2>&1; then
  step "cargo nextest run --features otel ${tests[*]}"
  cargo nextest run --locked --no-fail-fast --features otel "${tests[@]}"
else
  step "cargo test --features otel ${tests[*]} (cargo-nextest is not installed)"
  cargo test --locked --features otel "${tests[@]}"
fi
