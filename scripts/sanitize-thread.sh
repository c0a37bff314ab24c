#!/usr/bin/env bash
# Builds build-tsan/ with clang and ThreadSanitizer on every target, and runs
# the tests of the threaded modules under it: the files of tests/runtime/*,
# tests/transport/* and tests/collector/* that start threads (the rank's
# sampler and sender threads, the sockets, the collector's I/O and writer
# threads). Only those test executables are built. Prints how long each stage
# took.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build-tsan
script_start=$SECONDS
stage_start=$SECONDS
stage_done() {
  echo "sanitize-thread.sh: stage '$1' took $((SECONDS - stage_start)) s"
  stage_start=$SECONDS
}

bash scripts/install-deps.sh
stage_done "install-deps"

# The test files of those modules that start threads (or drive code that
# does): ThreadSanitizer finds nothing in a test with one thread, and each
# file costs its build. A new threaded test file of these modules is picked
# up by the grep.
tests=()
for f in tests/runtime/*_test.cpp tests/transport/*_test.cpp tests/collector/*_test.cpp; do
  if grep -qE 'std::thread|std::async|traceml::init|Collector|TcpServer|Sender ' "$f"; then
    tests+=("$(basename "$f" .cpp)")
  fi
done
echo "sanitize-thread.sh: ${#tests[@]} threaded test files: ${tests[*]}"

# As in scripts/fuzz.sh: line tables only, tests at -O0, the library at -O1.
opt="${TRACEML_SANITIZE_OPT:--O0 -gline-tables-only}"
core_opt="${TRACEML_SANITIZE_CORE_OPT--O1}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$opt" \
  -DTRACEML_CORE_OPTIMIZATION="$core_opt" \
  -DTRACEML_WARNINGS_AS_ERRORS=ON -DTRACEML_SANITIZE=thread \
  -DTRACEML_BUILD_EXAMPLES=OFF -DTRACEML_BUILD_BENCHMARKS=OFF >/dev/null
stage_done "configure"
cmake --build "$build_dir" --target "${tests[@]}"
stage_done "build (library, ${#tests[@]} test executables)"

symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
if [ -x "$symbolizer" ]; then export TSAN_SYMBOLIZER_PATH="$symbolizer"; fi
# A report fails the test (exit code 66) but does not stop it, so that one
# run lists every race; second_deadlock_stack shows both sides of a lock
# inversion.
export TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1:history_size=4}"
# Executables not built here register a placeholder test *_NOT_BUILT.
if [ "${TRACEML_SKIP_UNIT_TESTS:-0}" != 1 ]; then
  ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" -E '_NOT_BUILT$'
  stage_done "runtime, transport and collector tests under TSan"
fi
echo "sanitize-thread.sh: total $((SECONDS - script_start)) s"
