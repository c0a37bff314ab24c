#!/usr/bin/env bash
# A collector starved across the ranks' ends (docs/performance.md "A starved
# collector at the ranks' end"): RANKS real rank processes (tests'
# tiny_rank, steps as fast as it can for FOR_MS) into one `traceml serve`,
# which is stopped (SIGSTOP) STOP_S seconds from just after they start: the
# ranks end, shut down and exit while it is stopped, with megabytes queued
# behind it. Prints the run's status, serve's "without a goodbye" lines, the
# ranks' exit codes, and the records the ranks said they dropped beside
# those the summary counts.
#
#   bench/serve_stopped.sh TRACEML TINY_RANK   (env: RANKS=4 FOR_MS=2000 STOP_S=9)
set -euo pipefail
traceml=${1:?usage: bench/serve_stopped.sh TRACEML TINY_RANK}
tiny=${2:?usage: bench/serve_stopped.sh TRACEML TINY_RANK}
ranks=${RANKS:-4}
for_ms=${FOR_MS:-2000}
stop_s=${STOP_S:-9}
work=$(mktemp -d)
trap 'kill -CONT $(jobs -p) 2>/dev/null; kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
"$traceml" serve --port 0 --run-name stopped --logs-dir "$work/logs" --env-file "$work/env" \
  --world-size "$ranks" >"$work/serve.out" 2>"$work/serve.err" &
serve=$!
for _ in $(seq 1 300); do [ -s "$work/env" ] && break; sleep 0.02; done
mapfile -t vars <"$work/env"
pids=()
for r in $(seq 0 $((ranks - 1))); do
  env "${vars[@]}" RANK="$r" LOCAL_RANK="$r" WORLD_SIZE="$ranks" LOCAL_WORLD_SIZE="$ranks" \
    "$tiny" --steps 20000000 --step-us 0 --for-ms "$for_ms" >"$work/rank$r.out" \
    2>"$work/rank$r.err" &
  pids+=($!)
done
for _ in $(seq 1 600); do grep -q "connected ($ranks of $ranks)" "$work/serve.err" && break; sleep 0.05; done
kill -STOP "$serve"
sleep "$stop_s"
kill -CONT "$serve"
codes=()
for p in "${pids[@]}"; do
  rc=0
  wait "$p" || rc=$?
  codes+=("$rc")
done
rc=0
wait "$serve" || rc=$?
said=$(cat "$work"/rank*.err | awk '/telemetry records? (was|were) dropped on this rank/ { for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9]+$/) { s += $i; break } } END { print s + 0 }')
echo "ranks=$ranks for_ms=$for_ms stop_s=$stop_s: rank exit codes ${codes[*]}; serve exit $rc"
grep -c 'without a goodbye' "$work/serve.err" | sed 's/^/serve lines "closed its connection without a goodbye": /' || true
python3 - "$work/logs/stopped/final_summary.json" "$said" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
run, tracer = doc.get("run") or {}, doc["tracer"]
partial = sum(1 for r in tracer["ranks"] if r.get("counters_partial"))
print(f"run status {run.get('status')}, failed rank {run.get('failed_rank')}; ranks whose "
      f"counters are partial {partial}; records the ranks said they dropped "
      f"{int(sys.argv[2]):,}, the summary's {tracer['records_dropped']:,} of "
      f"{tracer['records_dropped'] + tracer['records_received']:,}")
PY
