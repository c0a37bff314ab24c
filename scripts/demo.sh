#!/usr/bin/env bash
# The demo: builds traceml and the bundled input_bound LibTorch example, trains
# it on the CPU under `traceml run --mode live` (the live view on a terminal, a
# progress line otherwise), then draws its timeline. Writes logs/demo/:
# final_summary.{json,txt,html}, telemetry.db, manifest.json and timeline.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh traceml_cli traceml_example_input_bound >/dev/null
build_dir="${TRACEML_BUILD_DIR:-build}"
traceml="$build_dir/bin/traceml"
run_dir=logs/demo
# A run directory is never overwritten by `traceml run`: the demo's own is
# cleared first (only when it holds an earlier demo).
if [ -f "$run_dir/manifest.json" ] && grep -q 'examples/input_bound' "$run_dir/manifest.json"; then
  rm -rf "$run_dir"
fi
"$traceml" run --mode live --logs-dir logs --run-name demo --aggregator-port 0 -- \
  "$build_dir/bin/examples/input_bound" --steps 600 --log-every 100
"$traceml" export "$run_dir" --format chrome-trace --out "$run_dir/timeline.json"
echo
echo "HTML report: $run_dir/final_summary.html (open it in a browser)"
echo "Timeline:    $run_dir/timeline.json (open it in https://ui.perfetto.dev)"
