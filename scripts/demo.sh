#!/usr/bin/env bash
# The demo: builds traceml and the bundled input_bound LibTorch example, trains
# it on the CPU under `traceml run --mode live` (the live view on a terminal, a
# progress line otherwise), then draws its timeline. Writes logs/demo/:
# final_summary.{json,txt,html}, telemetry.db, manifest.json and timeline.json.
# TRACEML_DEMO_LOGS_DIR puts logs/ elsewhere (the README's test does).
set -euo pipefail
cd "$(dirname "$0")/.."
# The first run compiles the library, the CLI and the example: say so, and
# show the build's progress (scripts/build-progress.sh) instead of minutes of
# silence. README.md says how the time was measured.
echo "demo: building traceml and the input_bound example; a first build takes about 9 minutes on 2 cores (after installing its dependencies, LibTorch 2.x from pip among them: 5.4 GB, a minute or more), later runs a few seconds"
NINJA_STATUS='[%f/%t] ' bash scripts/build.sh traceml_cli traceml_example_input_bound |
  bash scripts/build-progress.sh demo
build_dir="${TRACEML_BUILD_DIR:-build}"
traceml="$build_dir/bin/traceml"
logs_dir="${TRACEML_DEMO_LOGS_DIR:-logs}"
run_dir=$logs_dir/demo
# A run directory is never overwritten by `traceml run`: the demo's own is
# cleared first (only when it holds an earlier demo).
if [ -f "$run_dir/manifest.json" ] && grep -q 'examples/input_bound' "$run_dir/manifest.json"; then
  rm -rf "$run_dir"
fi
"$traceml" run --mode live --logs-dir "$logs_dir" --run-name demo --aggregator-port 0 -- \
  "$build_dir/bin/examples/input_bound" --steps 600 --log-every 100
"$traceml" export "$run_dir" --format chrome-trace --out "$run_dir/timeline.json"
echo
echo "HTML report: $run_dir/final_summary.html (open it in a browser)"
echo "Timeline:    $run_dir/timeline.json (open it in https://ui.perfetto.dev)"
