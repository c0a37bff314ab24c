#!/usr/bin/env bash
# Builds everything (library, CLI, tests, benchmarks) with warnings as errors,
# checks formatting, and runs the whole test suite; then the same unit tests
# under AddressSanitizer + UndefinedBehaviorSanitizer with every libFuzzer
# target run for TRACEML_FUZZ_SECONDS (default 60) each (scripts/fuzz.sh), and
# the runtime, transport and collector tests under ThreadSanitizer
# (scripts/sanitize-thread.sh); the suite that trains with LibTorch runs again
# against LibTorch 2.x (scripts/torch2.sh). The two sanitizer builds compile at nice 19
# while the suite runs (TRACEML_OVERLAP_BUILDS=0: after it). TRACEML_QUICK=1
# skips the sanitizer stages.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/build.sh
build_dir="${TRACEML_BUILD_DIR:-build}"
bash scripts/check-format.sh
# install-deps.sh (through build.sh) installed chromium: the HTML report's
# browser tests must run here, not skip.
export TRACEML_REQUIRE_BROWSER=1

# While the suite runs, the two sanitizer builds compile at the lowest
# priority: the suite's tests wait on child processes, sockets and timeouts
# for a third of its time (62 % of 2 cores busy, measured), and a compiler at
# nice 19 takes only what they leave (the suite took 361 s with the ASan
# build beside it, 360 s without; docs/performance.md "Build and CI time").
# The ThreadSanitizer build goes on beside the ASan tests.
# TRACEML_OVERLAP_BUILDS=0: each build when its stage comes, as before.
background=0
if [ "${TRACEML_QUICK:-0}" != 1 ] && [ "${TRACEML_OVERLAP_BUILDS:-1}" = 1 ]; then
  background_log=$(mktemp "${TMPDIR:-/tmp}/traceml-sanitizer-builds.XXXXXX")
  asan_built="$background_log.asan-built"
  # A session of its own, so that one signal stops the compilers too when
  # a stage fails or this script ends early. Where the kernel groups each
  # session's processes (autogroup, sched(7)), a nice value counts only
  # within the group: the group's own is set to 19, or the builds would take
  # half the cores from the suite and the fuzzers.
  setsid -w bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true
    export TRACEML_FUZZ_SECONDS=0 TRACEML_SKIP_UNIT_TESTS=1
    nice -n 19 bash scripts/fuzz.sh && touch "$0" && nice -n 19 bash scripts/sanitize-thread.sh' \
    "$asan_built" >"$background_log" 2>&1 &
  background=$!
  trap 'kill -- "-$background" 2>/dev/null && kill -CONT -- "-$background" 2>/dev/null
    rm -f "$background_log" "$asan_built"' EXIT
fi
# The background builds' exit status; their log when they failed.
background_done() {
  local rc=0
  wait "$background" || rc=$?
  grep -E 'took|total' "$background_log" | sed 's/^/background: /' || true
  if [ "$rc" != 0 ]; then
    cat "$background_log"
    echo "test.sh: the sanitizer builds failed (exit $rc)" >&2
    exit "$rc"
  fi
  trap - EXIT
  rm -f "$background_log" "$asan_built"
  echo "test.sh: sanitizer builds done $((SECONDS - start)) s after the start"
}

ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
echo "test.sh: build and test suite took $((SECONDS - start)) s"
# The LibTorch-facing suite again against LibTorch 2.x (the examples rebuilt
# against it; nothing of traceml compiled twice). TRACEML_TORCH2=0 skips it
# (as install-deps.sh then skips installing 2.x).
if [ "${TRACEML_TORCH2:-1}" != 0 ]; then
  bash scripts/torch2.sh
  echo "test.sh: LibTorch 2.x suite done $((SECONDS - start)) s after the start"
else
  echo "test.sh: LibTorch 2.x suite skipped (TRACEML_TORCH2=0)"
fi
if [ "${TRACEML_QUICK:-0}" = 1 ]; then exit 0; fi
if [ "$background" != 0 ]; then
  while [ ! -e "$asan_built" ] && kill -0 "$background" 2>/dev/null; do sleep 1; done
  if [ ! -e "$asan_built" ]; then background_done; fi
  echo "test.sh: ASan build done $((SECONDS - start)) s after the start"
fi
# The fuzzers run alone: work beside them, even at nice 19 with a core left
# idle for it, slowed some of them (fuzz_profile 918 -> 284 executions a
# second, measured; docs/performance.md): the TSan build is stopped
# meanwhile, and goes on beside the ASan unit tests.
if [ "$background" != 0 ]; then kill -STOP -- "-$background" 2>/dev/null || true; fi
TRACEML_SKIP_UNIT_TESTS=1 bash scripts/fuzz.sh
if [ "$background" != 0 ]; then kill -CONT -- "-$background" 2>/dev/null || true; fi
TRACEML_FUZZ_SECONDS=0 bash scripts/fuzz.sh
if [ "$background" != 0 ]; then background_done; fi
bash scripts/sanitize-thread.sh
echo "test.sh: total $((SECONDS - start)) s"
