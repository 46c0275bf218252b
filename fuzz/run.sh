#!/usr/bin/env bash
# Builds every fuzz target once, then runs each for SECONDS_PER_TARGET (default 20) against a
# temporary copy of its seed corpus, so new corpus entries never land in git. Exits non-zero
# when any target crashes, times out on one input, or runs out of memory; the input is kept
# in fuzz/artifacts/<target>/.
#
#   fuzz/run.sh [SECONDS_PER_TARGET]
#
# Environment: FUZZ_TARGETS (space-separated subset), FUZZ_SANITIZER (address, or none when
# the toolchain has no sanitizer runtime; default: address when available), FUZZ_TOOLCHAIN
# (stable: skip nightly even when installed), CARGO_BUILD_JOBS, CARGO_TARGET_DIR.
# Works from any directory, without a terminal or stdin (CI=true).
set -euo pipefail

seconds="${1:-20}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [SECONDS_PER_TARGET]   (a whole number of seconds, default 20)" >&2
    exit 2
fi

fuzz_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$fuzz_dir/.."
exec </dev/null

# cargo-fuzz only when absent: CI machines start without it.
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

# Nightly when installed; otherwise stable, allowed nightly flags (-Zsanitizer) by
# RUSTC_BOOTSTRAP. Without rustup, the default toolchain is used the same way.
# FUZZ_TOOLCHAIN=stable forces the fallback (to check it on a machine that has nightly).
toolchain=()
if [[ "${FUZZ_TOOLCHAIN:-}" != stable ]] && command -v rustup >/dev/null 2>&1 && rustup toolchain list | grep -q '^nightly'; then
    toolchain=(+nightly)
else
    export RUSTC_BOOTSTRAP=1
    command -v rustup >/dev/null 2>&1 && toolchain=(+stable)
fi

# AddressSanitizer needs the toolchain's runtime library; some builds do not ship it.
if [[ -z "${FUZZ_SANITIZER:-}" ]]; then
    sysroot="$(rustc "${toolchain[@]}" --print sysroot)"
    host="$(rustc "${toolchain[@]}" -vV | sed -n 's/^host: //p')"
    if compgen -G "$sysroot/lib/rustlib/$host/lib/librustc-*_rt.asan.a" >/dev/null; then
        FUZZ_SANITIZER=address
    else
        FUZZ_SANITIZER=none
        echo "== no AddressSanitizer runtime in $sysroot: building with -s none"
    fi
fi

# Release with debug assertions and overflow checks: fast enough to fuzz, and arithmetic
# overflow panics instead of wrapping silently. Build and run must use the same flags, or
# `cargo fuzz run` rebuilds.
flags=(--release --debug-assertions --sanitizer "$FUZZ_SANITIZER")

list="${FUZZ_TARGETS:-$(cargo "${toolchain[@]}" fuzz list)}"
read -r -d '' -a targets <<<"$list" || true

echo "== building ${#targets[@]} targets (cargo ${toolchain[*]:-} fuzz, sanitizer $FUZZ_SANITIZER)"
build_start=$SECONDS
cargo "${toolchain[@]}" fuzz build "${flags[@]}"
echo "== built in $((SECONDS - build_start)) s"

host="$(rustc "${toolchain[@]}" -vV | sed -n 's/^host: //p')"
bin_dir="${CARGO_TARGET_DIR:-$fuzz_dir/target}/$host/release"
work="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT

failed=()
summary=()
for target in "${targets[@]}"; do
    corpus="$work/corpus/$target"
    mkdir -p "$corpus" "$fuzz_dir/artifacts/$target"
    if [[ -d "$fuzz_dir/corpus/$target" ]]; then
        cp -R "$fuzz_dir/corpus/$target/." "$corpus/"
    fi
    log="$work/$target.log"
    echo "== $target: ${seconds} s"
    # -timeout: one input taking this long is a hang, reported like a crash.
    status=0
    # The binary built above, run directly: `cargo fuzz run` may rebuild the crate first (its
    # build script watches git's HEAD), which cost minutes per target. ASan's ODR check is
    # off as `cargo fuzz` turns it off: the bundled SQLite trips it falsely.
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_odr_violation=0}" "$bin_dir/$target" "$corpus" \
        -artifact_prefix="$fuzz_dir/artifacts/$target/" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 || status=$?
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    coverage="$(sed -n 's/^#[0-9]*[[:space:]]*DONE[[:space:]]*\(cov: [0-9]* ft: [0-9]* corp: [0-9]*\).*/\1/p' "$log" | tail -n 1)"
    if ((status != 0)); then
        failed+=("$target")
        summary+=("$(printf '%-20s FAILED (exit %s) after %s executions' "$target" "$status" "${execs:-?}")")
        echo "-- $target failed; the end of its log:"
        tail -n 60 "$log"
    else
        summary+=("$(printf '%-20s ok  %12s executions in %s s  (%s)' "$target" "${execs:-?}" "$seconds" "$coverage")")
    fi
done

echo "== summary"
printf '%s\n' "${summary[@]}"
if ((${#failed[@]})); then
    echo "== ${#failed[@]} target(s) failed: ${failed[*]}; inputs are in $fuzz_dir/artifacts/" >&2
    exit 1
fi
