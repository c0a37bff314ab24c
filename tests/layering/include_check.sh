#!/usr/bin/env bash
# Compiles a one-line file that includes HEADER with the include directories of
# one module's target (src/CMakeLists.txt), and checks the outcome:
#   ok    the header is visible to that module and compiles;
#   fail  the header is not visible: the compiler says it has no such file.
# That a wrong include fails is the build's guarantee of the module layering
# (docs/architecture.md); the "ok" cases show the failure is not a broken setup.
# Usage: include_check.sh CXX ok|fail HEADER [-Idir ...]
set -uo pipefail
cxx=$1 expect=$2 header=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include "%s"\n' "$header" >"$tmp/probe.cpp"
"$cxx" -std=c++17 -fsyntax-only "$@" "$tmp/probe.cpp" >"$tmp/out" 2>&1
rc=$?
case $expect in
  ok)
    if [ $rc -ne 0 ]; then
      echo "expected \"$header\" to compile with these include directories:" >&2
      cat "$tmp/out" >&2
      exit 1
    fi
    ;;
  fail)
    if [ $rc -eq 0 ]; then
      echo "\"$header\" compiled, but this module must not see it" >&2
      exit 1
    fi
    # GCC: "HEADER: No such file or directory"; clang: "'HEADER' file not found".
    if ! grep -qF -e "$header: No such file or directory" -e "'$header' file not found" "$tmp/out"; then
      echo "\"$header\" failed for another reason than being invisible:" >&2
      cat "$tmp/out" >&2
      exit 1
    fi
    ;;
  *)
    echo "usage: include_check.sh CXX ok|fail HEADER [-Idir ...]" >&2
    exit 2
    ;;
esac
echo "$expect: \"$header\""
