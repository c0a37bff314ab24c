#!/usr/bin/env bash
# Fails when a C++ file differs from .clang-format's layout (prints which).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "check-format: $f is not clang-formatted (run: clang-format -i $f)"
    bad=1
  fi
done
exit $bad
