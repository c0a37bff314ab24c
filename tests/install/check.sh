#!/usr/bin/env bash
# Installs the built project into a temporary prefix, then configures, builds
# and runs a separate consumer project against it with find_package(traceml).
# Usage: check.sh BUILD_DIR EXPECTED_VERSION
set -euo pipefail
build_dir=$1
expected=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
cmake -S "$here/consumer" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
got=$("$tmp/build/consumer")
test -x "$tmp/prefix/bin/traceml"
if [ "$got" != "$expected" ]; then
  echo "consumer printed '$got', expected '$expected'" >&2
  exit 1
fi
echo "find_package(traceml) consumer OK ($got)"
