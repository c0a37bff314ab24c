#!/usr/bin/env bash
# Builds everything (library, CLI, tests, benchmarks) with warnings as errors,
# checks formatting, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build_dir="${TRACEML_BUILD_DIR:-build}"
bash scripts/check-format.sh
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
