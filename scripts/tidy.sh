#!/usr/bin/env bash
# Runs clang-tidy (14, with the checks of .clang-tidy) over the library's and
# the CLI's sources, using the compile_commands.json of a configured build.
# Usage: scripts/tidy.sh [FILE_REGEX]   (default: every file under src/ and cli/)
# Build directory: $TRACEML_BUILD_DIR, default build/. Not part of CI yet: it
# reports; it fails only when clang-tidy itself cannot run.
# Debian: apt-get install clang-tidy-14.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TRACEML_BUILD_DIR:-build}
if [ ! -f "$build/compile_commands.json" ]; then
  echo "tidy: $build/compile_commands.json not found: configure first (scripts/build.sh)" >&2
  exit 2
fi
runner=$(command -v run-clang-tidy-14 || command -v run-clang-tidy || true)
if [ -z "$runner" ]; then
  echo "tidy: run-clang-tidy not found: apt-get install clang-tidy-14" >&2
  exit 2
fi
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)
"$runner" -quiet -clang-tidy-binary "$tidy" -p "$build" -j "$(nproc)" "${1:-/(src|cli)/}"
