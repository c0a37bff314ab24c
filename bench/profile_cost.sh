#!/bin/bash
# What a capture costs the steps it covers (docs/performance.md, "LibTorch's
# profiler on chosen steps"): the quickstart example (an MLP on the CPU)
# under `traceml run --profile-steps A:B` for 10 steps; each run's median
# traced step time of the captured steps against the 40 steps on either
# side of them, the profile's operators and its file size.
#
#   bench/profile_cost.sh BUILD_DIR [RUNS] [STEPS A:B]
#
# BUILD_DIR holds bin/traceml and bin/examples/quickstart.
set -euo pipefail
build=$(cd "$1" && pwd)
runs=${2:-3}
range=${3:-101:110}
first=${range%:*}
last=${range#*:}
tmp=$(mktemp -d /tmp/profile_cost.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq "$runs"); do
  "$build/bin/traceml" run --logs-dir "$tmp/logs" --run-name "r$i" --profile-steps "$range" \
    --mode summary -- "$build/bin/examples/quickstart" --steps $((last + 60)) --log-every 100000 \
    >/dev/null 2>&1
  "$build/bin/traceml" export "$tmp/logs/r$i" --out "$tmp/r$i.jsonl" 2>/dev/null
  python3 - "$tmp" "r$i" "$first" "$last" "$range" <<'PY'
import glob, json, os, statistics, sys
d, run, first, last, rng = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ms = {}
for line in open(f"{d}/{run}.jsonl"):
    j = json.loads(line)
    if j.get("type") == "step":
        ms[j["step"]] = j["events"]["traced_step_time"]["cpu_ms"]
captured = [ms[s] for s in range(first, last + 1) if s in ms]
around = [ms[s] for s in list(range(first - 40, first)) + list(range(last + 1, last + 41)) if s in ms]
profile = f"{d}/logs/{run}/profiles/rank0_steps{rng.replace(':', '-')}.json"
meta = json.load(open(profile))["otherData"]["traceml"]
a, b = statistics.median(captured), statistics.median(around)
print(f"{run}: captured steps median {a:.3f} ms, the 80 around them {b:.3f} ms, "
      f"x{a / b:.2f}; {meta['ops']} ops, {os.path.getsize(profile) / 1e3:.0f} kB")
PY
done
