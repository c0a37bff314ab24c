#!/usr/bin/env bash
# Configures and builds traceml into ./build (or $TRACEML_BUILD_DIR), installing
# the Debian packages it needs first. Arguments are CMake targets to build
# (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build_dir="${TRACEML_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja -DTRACEML_WARNINGS_AS_ERRORS=ON >/dev/null
if [ $# -gt 0 ]; then
  cmake --build "$build_dir" --target "$@"
else
  cmake --build "$build_dir"
fi
