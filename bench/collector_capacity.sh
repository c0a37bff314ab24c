#!/usr/bin/env bash
# What one collector holds (docs/performance.md "Collector capacity"): RANKS
# real rank processes (tests' tiny_rank: one fetch and one phase a step,
# STEP_US long) run for SECONDS into one `traceml serve`. Prints the steps
# the ranks made, the step rows stored, the records the ranks dropped, the
# records serve took per second, and serve's CPU (user + system, GNU time)
# per million records and as a share of one core over the run: the figure
# that says how many cores a given ranks x step rate needs.
#
#   bench/collector_capacity.sh TRACEML TINY_RANK   (env: RANKS=64 STEP_US=1000 SECONDS_EACH=10;
#                                                    STEPS=N: N steps a rank instead of a time)
#
# The ranks share this machine's cores with serve: on a small machine the
# ranks' own CPU bounds the load before the collector does.
set -euo pipefail
traceml=${1:?usage: bench/collector_capacity.sh TRACEML TINY_RANK}
tiny=${2:?usage: bench/collector_capacity.sh TRACEML TINY_RANK}
ranks=${RANKS:-64}
step_us=${STEP_US:-1000}
seconds=${SECONDS_EACH:-10}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"' EXIT

/usr/bin/time -f '%U %S %e' -o "$work/time" "$traceml" serve --port 0 --run-name cap \
  --logs-dir "$work/logs" --env-file "$work/env" --world-size "$ranks" >"$work/serve.out" \
  2>"$work/serve.err" &
serve=$!
for _ in $(seq 1 300); do [ -s "$work/env" ] && break; sleep 0.02; done
mapfile -t vars <"$work/env"
# More steps than the time allows (tiny_rank holds one int per step): the time ends them.
steps=$((seconds * 2000000 / (step_us > 0 ? step_us : 1) + 1000))
for_ms=$((seconds * 1000))
if [ -n "${STEPS:-}" ]; then
  steps=$STEPS
  for_ms=0
fi
pids=()
for r in $(seq 0 $((ranks - 1))); do
  env "${vars[@]}" RANK="$r" LOCAL_RANK="$r" WORLD_SIZE="$ranks" LOCAL_WORLD_SIZE="$ranks" \
    "$tiny" --steps "$steps" --step-us "$step_us" --for-ms "$for_ms" \
    >"$work/rank$r.out" 2>"$work/rank$r.err" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
wait "$serve" || true
made=$(cat "$work"/rank*.out | awk '/^tiny_rank:/ { s += $2 } END { print s + 0 }')
stored=$(sqlite3 "$work/logs/cap/telemetry.db" 'SELECT SUM(rows) FROM step_blocks')
grep -c 'without a goodbye' "$work/serve.err" | sed 's/^/serve lines "closed its connection without a goodbye": /' || true
cat "$work"/rank*.err | grep -c 'lost the connection' | sed 's/^/rank lines "lost the connection": /' || true
# What the ranks themselves said they dropped (their last stderr line), and
# how many exited 0: the run must not be called failed when all did.
said_dropped=$(cat "$work"/rank*.err | awk '/telemetry records? (was|were) dropped on this rank/ { for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9]+$/) { s += $i; break } } END { print s + 0 }')
python3 - "$work/logs/cap/final_summary.json" "$work/time" "$made" "$stored" "$ranks" "$step_us" \
  "$seconds" "${STEPS:-}" "$said_dropped" <<'EOF'
import json, sys
summary, time_file, made, stored, ranks, step_us, seconds, steps, said_dropped = sys.argv[1:]
doc = json.load(open(summary))
tracer = doc["tracer"]["ranks"]
received = sum(r["records_received"] for r in tracer)
dropped = sum(r["records_dropped"] for r in tracer)
run = doc.get("run") or {}
partial = sum(1 for r in tracer if r.get("counters_partial"))
print(f"run status {run.get('status')}, failed rank {run.get('failed_rank')}; ranks whose "
      f"counters are partial {partial}; records the ranks said they dropped {int(said_dropped):,}, "
      f"the summary's {dropped:,}")
user, system, wall = (float(x) for x in open(time_file).read().split()[-3:])
cpu = user + system
if steps:
    seconds = wall  # the steps, not a time, ended the ranks: serve's whole run
print(f"ranks={ranks} step_us={step_us} steps={steps or 'by time'} seconds={float(seconds):.1f}")
print(f"steps made {int(made):,}, step rows stored {int(stored):,}, records received "
      f"{received:,}, records dropped by the ranks {dropped:,}")
print(f"records/s taken {received / float(seconds):,.0f}; serve CPU {cpu:.2f} s in {wall:.1f} s "
      f"({cpu / float(seconds):.2f} of a core while the ranks ran), "
      f"{cpu / received * 1e6:.2f} CPU s per million records")
EOF
