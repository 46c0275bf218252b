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

# The library's unit tests, and the integration modules that depend on the feature.
modules='otel_export|telemetry_logs|shutdown'
if cargo nextest --version >/dev/null 2>&1; then
  step "cargo nextest run --features otel (lib, and the ${modules} tests)"
  cargo nextest run --locked --no-fail-fast --features otel --lib --test api -E "kind(lib) | test(/^(${modules})::/)"
else
  step "cargo test --features otel (lib, and the ${modules} tests; cargo-nextest is not installed)"
  cargo test --locked --features otel --lib
  cargo test --locked --features otel --test api -- otel_export:: telemetry_logs:: shutdown::
fi
