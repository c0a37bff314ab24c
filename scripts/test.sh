#!/usr/bin/env bash
# Builds everything (library, CLI, tests, benchmarks) with warnings as errors,
# checks formatting, and runs the whole test suite; then the same unit tests
# under AddressSanitizer + UndefinedBehaviorSanitizer with every libFuzzer
# target run for TRACEML_FUZZ_SECONDS (default 60) each (scripts/fuzz.sh), and
# the runtime, transport and collector tests under ThreadSanitizer
# (scripts/sanitize-thread.sh). TRACEML_QUICK=1 skips the sanitizer stages.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/build.sh
build_dir="${TRACEML_BUILD_DIR:-build}"
bash scripts/check-format.sh
# install-deps.sh (through build.sh) installed chromium: the HTML report's
# browser tests must run here, not skip.
export TRACEML_REQUIRE_BROWSER=1
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
echo "test.sh: build and test suite took $((SECONDS - start)) s"
if [ "${TRACEML_QUICK:-0}" = 1 ]; then exit 0; fi
bash scripts/fuzz.sh
bash scripts/sanitize-thread.sh
echo "test.sh: total $((SECONDS - start)) s"
