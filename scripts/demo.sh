#!/usr/bin/env bash
# The demo: builds the traceml CLI, then diagnoses a bundled two-rank run whose
# rank 1 waits on its input pipeline, writing logs/demo/final_summary.{json,txt}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh traceml_cli >/dev/null
build_dir="${TRACEML_BUILD_DIR:-build}"
"$build_dir/bin/traceml" report --telemetry tests/golden/data/ddp_input_straggler.jsonl --out logs/demo
