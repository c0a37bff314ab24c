#!/usr/bin/env bash
# Builds build-sanitize/ with clang, ASan+UBSan on every target and the
# libFuzzer targets (tests/fuzz/), then
#   (a) runs each fuzz_* target for TRACEML_FUZZ_SECONDS (default 60), one
#       per core at a time, on a temporary copy of its seed corpus (the tree
#       is never written), failing on any crash, leak, timeout or
#       out-of-memory;
#   (b) runs the unit tests of that build under ASan+UBSan (ctest).
# Prints how long each stage took, and per fuzz target the executions done and
# executions per second.
#
# TRACEML_FUZZ_SECONDS=N     seconds per fuzz target (0: build and unit tests only)
# TRACEML_FUZZ_TARGETS="a b" only these fuzz targets (default: every fuzz_*)
# TRACEML_FUZZ_JOBS=N        targets fuzzed at once (default: nproc)
# TRACEML_FUZZ_KEEP_GOING=1  keep fuzzing after a crash (libFuzzer -fork=1
#                            -ignore_crashes=1): lists every finding instead of
#                            stopping at the first, and does not fail on them
# TRACEML_SKIP_UNIT_TESTS=1  fuzz only
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build-sanitize
# A minute each, as many targets at once as there are cores.
seconds="${TRACEML_FUZZ_SECONDS:-60}"
script_start=$SECONDS

stage_start=$SECONDS
stage_done() {
  echo "fuzz.sh: stage '$1' took $((SECONDS - stage_start)) s"
  stage_start=$SECONDS
}

bash scripts/install-deps.sh
stage_done "install-deps"

# Line tables only: stack traces keep file:line at a fraction of -g's cost.
# Tests, CLI and fuzz drivers at -O0, the library at -O1: -O0 halves the
# compile time of the test files, and the fuzzers (6x the executions of -O0)
# and the unit tests (46 s instead of 128 s) spend their time in the library.
# TRACEML_SANITIZE_OPT and TRACEML_SANITIZE_CORE_OPT (empty: the same as the
# rest) override the two.
opt="${TRACEML_SANITIZE_OPT:--O0 -gline-tables-only}"
core_opt="${TRACEML_SANITIZE_CORE_OPT--O1}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$opt" \
  -DTRACEML_CORE_OPTIMIZATION="$core_opt" \
  -DTRACEML_WARNINGS_AS_ERRORS=ON -DTRACEML_SANITIZE=address,undefined -DTRACEML_FUZZ=ON \
  -DTRACEML_BUILD_EXAMPLES=OFF -DTRACEML_BUILD_BENCHMARKS=OFF >/dev/null
stage_done "configure"
cmake --build "$build_dir"
stage_done "build (library, CLI, unit tests, fuzz targets)"

symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
if [ -x "$symbolizer" ]; then export ASAN_SYMBOLIZER_PATH="$symbolizer"; fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# ---------------------------------------------------------------- (a) fuzz
# A libFuzzer process uses one core: the targets run side by side, one per
# core (TRACEML_FUZZ_JOBS, default nproc), each for the full time.
failed=()
if [ "$seconds" -gt 0 ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/traceml-fuzz.XXXXXX")
  targets="${TRACEML_FUZZ_TARGETS:-$(cd "$build_dir/tests/fuzz" && ls fuzz_* | grep -v '\.' | tr '\n' ' ')}"
  jobs="${TRACEML_FUZZ_JOBS:-$(nproc)}"
  fuzz_one() {
    local target=$1
    mkdir -p "$work/$target/corpus" "$work/$target/artifacts"
    cp tests/fuzz/corpus/"$target"/* "$work/$target/corpus/"
    local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
                -artifact_prefix="$work/$target/artifacts/")
    if [ -f "tests/fuzz/$target.dict" ]; then args+=(-dict="tests/fuzz/$target.dict"); fi
    if [ "${TRACEML_FUZZ_KEEP_GOING:-0}" = 1 ]; then
      args+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
    fi
    local rc=0
    "$build_dir/tests/fuzz/$target" "${args[@]}" "$work/$target/corpus" >"$work/$target/log" 2>&1 || rc=$?
    echo "$rc" >"$work/$target/rc"
  }
  running=0
  for target in $targets; do
    if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
    fuzz_one "$target" &
    running=$((running + 1))
  done
  wait
  for target in $targets; do
    log="$work/$target/log"
    rc=$(cat "$work/$target/rc" 2>/dev/null || echo 1)
    # -fork=1 (keep going) prints no final stats: its last "#N: ... exec/s R" line.
    execs=$( (grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" || grep -o '^#[0-9]*: cov' "$log" || true) | grep -o '[0-9]\+' | tail -1 || true)
    rate=$( (grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" || grep -o 'exec/s [0-9]*' "$log" || true) | grep -o '[0-9]*$' | tail -1 || true)
    echo "fuzz.sh: $target: ${execs:-?} execs, ${rate:-?} exec/s, corpus $(ls "$work/$target/corpus" | wc -l) inputs, exit $rc"
    found=$(ls "$work/$target/artifacts")
    if [ "$rc" -ne 0 ] || { [ -n "$found" ] && [ "${TRACEML_FUZZ_KEEP_GOING:-0}" != 1 ]; }; then
      failed+=("$target")
      tail -n 60 "$log"
    fi
    # The inputs that broke something, so that a CI log carries them: add
    # each to tests/fuzz/corpus/<target>/ with the fix and its test.
    for f in $found; do
      echo "fuzz.sh: $target finding $work/$target/artifacts/$f ($(stat -c %s "$work/$target/artifacts/$f") bytes), base64:"
      head -c 4096 "$work/$target/artifacts/$f" | base64 -w 0
      echo
    done
  done
  stage_done "fuzz ($(echo $targets | wc -w) targets, $seconds s each, $jobs at a time)"
  if [ ${#failed[@]} -eq 0 ]; then rm -rf "$work"; else echo "fuzz.sh: logs and inputs kept in $work"; fi
fi

# ---------------------------------------------------------------- (b) unit tests
unit_rc=0
if [ "${TRACEML_SKIP_UNIT_TESTS:-0}" != 1 ]; then
  ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" || unit_rc=$?
  stage_done "unit tests under ASan+UBSan"
fi

echo "fuzz.sh: total $((SECONDS - script_start)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: FAILED fuzz targets: ${failed[*]}" >&2
  exit 1
fi
exit "$unit_rc"
