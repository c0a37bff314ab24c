#!/usr/bin/env bash
# The end of a big run (docs/performance.md "End of a run"): RANKS ranks of
# bench/step_loop, STEPS steps each, under `traceml run`. For each of REPEATS
# runs it prints the time from the last rank's exit to traceml's exit, and
# the peak resident memory of the traceml process (launcher, collector and
# end-of-run diagnosis; GNU time's figure, the largest of traceml and its
# ranks, and the ranks are small), then the medians.
#
#   bench/end_of_run.sh TRACEML STEP_LOOP      (env: RANKS=64 STEPS=20000 REPEATS=3;
#                                               TRACEML_DEBUG=1 adds each run's phases)
#
# TRACEML and STEP_LOOP are binaries, so that two builds of traceml can be
# compared with one step_loop: the ranks' side is not what is measured.
set -euo pipefail
traceml=${1:?usage: bench/end_of_run.sh TRACEML STEP_LOOP}
loop=${2:?usage: bench/end_of_run.sh TRACEML STEP_LOOP}
ranks=${RANKS:-64}
steps=${STEPS:-20000}
repeats=${REPEATS:-3}
fetch_us=${FETCH_US:-50}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '%-4s %12s %12s %10s\n' run end_s peak_MiB steps_db
for i in $(seq 1 "$repeats"); do
  /usr/bin/time -f '%M' -o "$work/rss" "$traceml" run --nproc-per-node "$ranks" \
    --logs-dir "$work/logs" --run-name "r$i" -- "$loop" --steps "$steps" --fetch-us "$fetch_us" \
    >"$work/out" 2>"$work/err"
  ended=$(date +%s.%N)
  last=$(grep -o 'step_loop: exited at [0-9.]*' "$work/err" | awk '{print $4}' | sort -g | tail -1)
  if [ -z "$last" ]; then
    echo "end_of_run: no rank reported its exit; traceml said:" >&2
    tail -5 "$work/err" >&2
    exit 1
  fi
  # With TRACEML_DEBUG=1: where the end went (ingest, store, summary).
  grep 'debug: end of run' "$work/err" >&2 || true
  rows=$(sqlite3 "$work/logs/r$i/telemetry.db" 'SELECT SUM(rows) FROM step_blocks' 2>/dev/null || echo '?')
  awk -v e="$ended" -v l="$last" -v m="$(cat "$work/rss")" -v i="$i" -v r="$rows" \
    'BEGIN { printf "%-4s %12.3f %12.1f %10s\n", i, e - l, m / 1024, r }' | tee -a "$work/table"
  rm -rf "$work/logs/r$i"
done
sort -k2 -g "$work/table" | awk -v n="$repeats" 'NR == int((n + 1) / 2) { printf "median end_s %.3f\n", $2 }'
sort -k3 -g "$work/table" | awk -v n="$repeats" 'NR == int((n + 1) / 2) { printf "median peak_MiB %.1f\n", $3 }'
