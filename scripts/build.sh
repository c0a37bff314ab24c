#!/usr/bin/env bash
# Configures and builds traceml into ./build (or $TRACEML_BUILD_DIR), installing
# the Debian packages it needs first. Arguments are CMake targets to build
# (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build_dir="${TRACEML_BUILD_DIR:-build}"
# -g1 (line tables and function names: stack traces and profiles keep
# file:line) instead of the build type's -g: gcc's full debug info of the
# optimized library is a quarter of its compile time. Code is the same.
cmake -S . -B "$build_dir" -G Ninja -DTRACEML_WARNINGS_AS_ERRORS=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=${TRACEML_RELWITHDEBINFO_FLAGS:--O2 -g1 -DNDEBUG}" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build "$build_dir" --target "$@"
else
  cmake --build "$build_dir"
fi
