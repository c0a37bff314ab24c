#!/usr/bin/env bash
# ctest gpu_check_preflight (registered only where nvidia-smi is absent): the
# GPU check must get through its dependency preflight on this machine, print
# "dependencies: all found", then stop with "no GPU" (exit 1), and still leave
# its output, versions and log archive in $OUT, the output file identical to
# what it printed. A missing build dependency, a preflight moved after the GPU
# check or a lost log archive fails this test.
# Usage: check_preflight_test.sh WORK_DIR
set -uo pipefail

work=$1
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "gpu_check_preflight: FAIL: $*"
  exit 1
}

rc=0
BUILD_DIR="$work/build" OUT="$work/out" bash "$(dirname "${BASH_SOURCE[0]}")/check.sh" \
  >"$work/printed.txt" 2>&1 || rc=$?
cat "$work/printed.txt"
echo "--- check.sh exited $rc"

((rc == 1)) || fail "check.sh exited $rc, expected 1 (no GPU)"
deps=$(grep -n "^dependencies: all found" "$work/printed.txt" | head -n 1 | cut -d: -f1)
no_gpu=$(grep -n "^gpu-check: FAILED: no GPU" "$work/printed.txt" | head -n 1 | cut -d: -f1)
[ -n "$deps" ] || fail "no 'dependencies: all found' line"
[ -n "$no_gpu" ] || fail "no 'gpu-check: FAILED: no GPU' line"
((deps < no_gpu)) || fail "the dependency preflight did not run before the GPU check"
[ "$(tail -n 1 "$work/printed.txt")" = "gpu-check: result: FAIL" ] ||
  fail "the last line is not 'gpu-check: result: FAIL'"
cmp -s "$work/printed.txt" "$work/out/gpu-check.txt" ||
  fail "\$OUT/gpu-check.txt differs from what check.sh printed"
grep -q "^  CUPTI headers: " "$work/out/gpu-versions.txt" ||
  fail "\$OUT/gpu-versions.txt has no CUPTI headers line"
# The listing first: grep -q would stop reading and fail tar under pipefail.
listing=$(tar -tzf "$work/out/gpu-logs.tgz") || fail "\$OUT/gpu-logs.tgz is not a readable archive"
grep -qx "gpu-check-logs/preflight-cmake.log" <<<"$listing" ||
  fail "\$OUT/gpu-logs.tgz lacks gpu-check-logs/preflight-cmake.log"
echo "gpu_check_preflight: ok"
