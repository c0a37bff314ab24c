#!/usr/bin/env bash
# Soak: a traced training run held for a long time, to show that neither the
# rank nor the collector grows (docs/performance.md, "Soak").
#
# Runs `traceml run -- quickstart` for DURATION seconds, reads the resident
# set size (VmRSS) of the launcher, which hosts the collector, and of the rank
# every SAMPLE seconds, then stops the run with SIGINT (the launcher forwards
# it and writes the summary). Prints every sample, then per process the median
# RSS of the first and of the last quarter of the samples after WARMUP
# seconds, and their difference. Exits 1 when a difference is larger than
# MAX_GROWTH_MB, 2 when something could not run.
#
# Builds nothing: build traceml_cli and traceml_example_quickstart first.
# Usage: bench/soak.sh [BUILD_DIR]   (default: build)
# Environment (defaults in brackets):
#   DURATION [1800]      seconds of training
#   SAMPLE [10]          seconds between RSS readings
#   WARMUP [60]          first seconds left out (allocator and page cache settle)
#   MAX_GROWTH_MB [16]   largest allowed growth, first to last quarter, per process
#   QUICKSTART_ARGS      extra quickstart flags [--batch-size 32]
#   WINDOW [10000]       traceml run --summary-window-rows: the collector holds
#                        a bounded multiple of it per rank in memory (up to 20x
#                        for step memory), so its memory rises until that bound
#                        is reached and must be flat after; a small window
#                        reaches it within a short soak's warm-up
set -euo pipefail

build="${1:-build}"
traceml="$build/bin/traceml"
quickstart="$build/bin/examples/quickstart"
duration="${DURATION:-1800}"
sample="${SAMPLE:-10}"
warmup="${WARMUP:-60}"
max_growth_mb="${MAX_GROWTH_MB:-16}"
read -r -a qs_args <<<"${QUICKSTART_ARGS:---batch-size 32}"
window="${WINDOW:-10000}"

for f in "$traceml" "$quickstart"; do
  if [ ! -x "$f" ]; then
    echo "soak.sh: $f not found: build traceml_cli and traceml_example_quickstart in $build" >&2
    exit 2
  fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/traceml_soak.XXXXXX")"
launcher_pid=""
cleanup() {
  if [ -n "$launcher_pid" ] && kill -0 "$launcher_pid" 2>/dev/null; then
    kill -KILL "$launcher_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# VmRSS of a process in KiB; empty once it is gone.
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true; }

"$traceml" run --logs-dir "$work/logs" --run-name soak --aggregator-port 0 --master-port 0 \
  --summary-window-rows "$window" -- "$quickstart" --steps 1000000000 --log-every 100000 "${qs_args[@]}" \
  >"$work/out.log" 2>"$work/err.log" &
launcher_pid=$!

# The rank is the launcher's child.
rank_pid=""
for _ in $(seq 1 300); do
  rank_pid="$(pgrep -P "$launcher_pid" | head -n 1 || true)"
  [ -n "$rank_pid" ] && break
  sleep 0.1
done
if [ -z "$rank_pid" ]; then
  echo "soak.sh: the rank did not start" >&2
  cat "$work/err.log" >&2
  exit 2
fi

echo "# soak: ${duration}s of quickstart ${qs_args[*]} under traceml run (window $window), RSS every ${sample}s"
printf '%8s %14s %14s\n' "t_s" "launcher_MiB" "rank_MiB"
samples="$work/samples.tsv"
start=$(date +%s)
while :; do
  now=$(( $(date +%s) - start ))
  [ "$now" -ge "$duration" ] && break
  l="$(rss_kib "$launcher_pid")"
  r="$(rss_kib "$rank_pid")"
  if [ -z "$l" ] || [ -z "$r" ]; then
    echo "soak.sh: a process ended early" >&2
    tail -n 20 "$work/err.log" >&2
    exit 2
  fi
  printf '%s\t%s\t%s\n' "$now" "$l" "$r" >>"$samples"
  awk -v t="$now" -v l="$l" -v r="$r" 'BEGIN { printf "%8d %14.1f %14.1f\n", t, l/1024, r/1024 }'
  sleep "$sample"
done

kill -INT "$launcher_pid"
set +e
wait "$launcher_pid"
rc=$?
set -e
launcher_pid=""
if [ "$rc" -ne 130 ]; then
  echo "soak.sh: traceml run ended with $rc, expected 130 (interrupted)" >&2
  tail -n 20 "$work/err.log" >&2
  exit 2
fi
# The step count (the first non-null training_total_steps: the system
# section's is null).
steps="$(grep -o '"training_total_steps": [0-9][0-9]*' "$work/logs/soak/final_summary.json" |
  head -n 1 | grep -o '[0-9]*$' || echo '?')"

# Medians of the first and last quarter of the samples after the warm-up.
awk -v warmup="$warmup" -v max="$max_growth_mb" -v steps="$steps" '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
    return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
  }
  $1 >= warmup { n++; l[n] = $2; r[n] = $3 }
  END {
    if (n < 4) { print "soak.sh: fewer than 4 samples after the warm-up: raise DURATION" > "/dev/stderr"; exit 2 }
    q = int(n / 4)
    for (i = 1; i <= q; i++) { lf[i] = l[i]; rf[i] = r[i]; ll[i] = l[n-q+i]; rl[i] = r[n-q+i] }
    lg = (median(ll, q) - median(lf, q)) / 1024; rg = (median(rl, q) - median(rf, q)) / 1024
    printf "# steps recorded: %s\n", steps
    printf "# launcher+collector: first quarter %.1f MiB, last quarter %.1f MiB, growth %+.1f MiB\n", median(lf, q)/1024, median(ll, q)/1024, lg
    printf "# rank:               first quarter %.1f MiB, last quarter %.1f MiB, growth %+.1f MiB\n", median(rf, q)/1024, median(rl, q)/1024, rg
    if (lg > max || rg > max) { printf "# FAIL: growth above %s MiB\n", max; exit 1 }
    printf "# flat: both within %s MiB\n", max
  }' "$samples"
