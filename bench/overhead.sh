#!/usr/bin/env bash
# What tracing costs a real training run (docs/performance.md, "Tracer"):
#
#  1. Whole-run overhead: N interleaved pairs of the quickstart example run by
#     `traceml run` traced and `traceml run --disable` (which of the two goes
#     first alternates), each writing its own step times (--step-times, timed
#     by the example, fetch included). Per run: the median step time after
#     WARMUP steps; per pair and overall: traced, untraced, their ratio.
#  2. Fixed cost: wall time of `traceml run -- quickstart --steps FIXED_STEPS`
#     (collector start, rank start, finalize, report) against the binary run
#     directly with TRACEML_DISABLED=1, interleaved; the median difference.
#
# Builds nothing: build traceml and the examples first (Release), e.g.
#   cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRACEML_BUILD_EXAMPLES=ON
#   cmake --build build --target traceml_cli traceml_example_quickstart
#   bench/overhead.sh build
#
# Usage: bench/overhead.sh [BUILD_DIR]   (default: build)
# Environment (defaults in brackets):
#   N [7]             interleaved pairs of the whole-run comparison
#   STEPS [3000]      training steps per run
#   WARMUP [20]       first steps left out of each run's median
#   QUICKSTART_ARGS   extra quickstart flags [--batch-size 32] (step size)
#   FIXED_REPEATS [N] interleaved pairs of the fixed-cost comparison (0: none)
#   FIXED_STEPS [0]   steps of the fixed-cost runs
#   CONTROL [0]       1: an A/A control, both sides of every pair untraced, to
#                     show the noise floor of the machine (fixed cost skipped)
#   CPU_TIMES [0]     1: also the training thread's CPU time per step (quickstart
#                     --cpu-times), traced and untraced, and their difference:
#                     what tracing costs that thread (GPU-clock events included)
set -euo pipefail

build="${1:-build}"
traceml="$build/bin/traceml"
quickstart="$build/bin/examples/quickstart"
pairs="${N:-7}"
steps="${STEPS:-3000}"
warmup="${WARMUP:-20}"
read -r -a qs_args <<<"${QUICKSTART_ARGS:---batch-size 32}"
fixed_repeats="${FIXED_REPEATS:-$pairs}"
fixed_steps="${FIXED_STEPS:-0}"
control="${CONTROL:-0}"
cpu_times="${CPU_TIMES:-0}"

for f in "$traceml" "$quickstart"; do
  if [ ! -x "$f" ]; then
    echo "overhead.sh: $f not found: build traceml_cli and traceml_example_quickstart in $build" >&2
    exit 2
  fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/traceml_overhead.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Runs "$@" with output to $work/last.log; on failure shows the log and stops.
run_logged() {
  if ! "$@" >"$work/last.log" 2>&1; then
    echo "overhead.sh: failed: $*" >&2
    tail -n 30 "$work/last.log" >&2
    exit 1
  fi
}

# Median of a step-times file (ms), leaving out the first $warmup steps.
run_median() {
  python3 - "$1" "$warmup" <<'EOF'
import statistics, sys
steps = [float(line) for line in open(sys.argv[1]) if line.strip()]
kept = steps[int(sys.argv[2]):]
if not kept:
    sys.exit(f"overhead.sh: {sys.argv[1]} has {len(steps)} steps, none after the warm-up")
print(f"{statistics.median(kept):.6f}")
EOF
}

# Wall seconds of "$@" (output to $work/last.log).
wall_seconds() {
  local t0 t1
  t0=$(date +%s%N)
  run_logged "$@"
  t1=$(date +%s%N)
  python3 -c "print(f'{($t1 - $t0) / 1e9:.4f}')"
}

# quickstart's flags for one run writing its step times to $1 (and, with
# CPU_TIMES=1, its CPU times to $1.cpu), one a line.
timing_flags() {
  printf '%s\n' --step-times "$1"
  if [ "$cpu_times" = 1 ]; then printf '%s\n' --cpu-times "$1.cpu"; fi
}

# Each prints its wall seconds.
run_traced() {
  if [ "$control" = 1 ]; then
    run_untraced "$1"
    return
  fi
  local flags
  mapfile -t flags < <(timing_flags "$1")
  wall_seconds "$traceml" run --aggregator-port 0 --logs-dir "$work/logs" -- \
    "$quickstart" --steps "$steps" "${qs_args[@]}" "${flags[@]}"
}
run_untraced() {
  local flags
  mapfile -t flags < <(timing_flags "$1")
  wall_seconds "$traceml" run --disable --logs-dir "$work/logs" -- \
    "$quickstart" --steps "$steps" "${qs_args[@]}" "${flags[@]}"
}

echo "traceml overhead: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "quickstart --steps $steps ${qs_args[*]}; median step time after $warmup warm-up steps"
if [ "$control" = 1 ]; then
  echo "A/A CONTROL: both sides of every pair run untraced (\"traced\" is a label only)"
fi
echo
echo "== whole run: $pairs interleaved pairs =="
traced_medians=()
untraced_medians=()
traced_walls=()
untraced_walls=()
traced_cpu=()
untraced_cpu=()
for ((i = 1; i <= pairs; ++i)); do
  if ((i % 2 == 1)); then
    order="traced first"
    tw=$(run_traced "$work/traced_$i.txt")
    uw=$(run_untraced "$work/untraced_$i.txt")
  else
    order="untraced first"
    uw=$(run_untraced "$work/untraced_$i.txt")
    tw=$(run_traced "$work/traced_$i.txt")
  fi
  t=$(run_median "$work/traced_$i.txt")
  u=$(run_median "$work/untraced_$i.txt")
  traced_medians+=("$t")
  untraced_medians+=("$u")
  traced_walls+=("$tw")
  untraced_walls+=("$uw")
  python3 -c "print(f'pair $i ($order): traced {$t:.4f} ms, untraced {$u:.4f} ms, ratio {$t / $u:.4f}; '
                    f'wall {$tw:.2f} s vs {$uw:.2f} s')"
  if [ "$cpu_times" = 1 ]; then
    tc=$(run_median "$work/traced_$i.txt.cpu")
    uc=$(run_median "$work/untraced_$i.txt.cpu")
    traced_cpu+=("$tc")
    untraced_cpu+=("$uc")
    python3 -c "print(f'pair $i: training thread CPU per step: traced {$tc:.1f} us, untraced {$uc:.1f} us, difference {$tc - $uc:+.1f} us')"
  fi
done
if [ "$cpu_times" = 1 ]; then
  python3 - "${traced_cpu[*]}" "${untraced_cpu[*]}" <<'EOF'
import statistics, sys
t, u = ([float(x) for x in arg.split()] for arg in sys.argv[1:3])
print(f"training thread CPU per step: median traced {statistics.median(t):.1f} us, "
      f"median untraced {statistics.median(u):.1f} us, "
      f"median per-pair difference {statistics.median(a - b for a, b in zip(t, u)):+.1f} us")
EOF
fi
# The traced runs really were traced: each left a run directory with a summary.
check_summaries() {
  local found
  found=$(find "$1" -name final_summary.json 2>/dev/null | wc -l)
  if [ "$found" -ne "$2" ]; then
    echo "overhead.sh: expected $2 traced run summaries under $1, found $found" >&2
    exit 1
  fi
}
[ "$control" = 1 ] || check_summaries "$work/logs" "$pairs"
python3 - "${traced_medians[*]}" "${untraced_medians[*]}" "${traced_walls[*]}" "${untraced_walls[*]}" <<'EOF'
import statistics, sys
t, u, tw, uw = ([float(x) for x in arg.split()] for arg in sys.argv[1:5])
mt, mu = statistics.median(t), statistics.median(u)
print(f"overall: median traced {mt:.4f} ms, median untraced {mu:.4f} ms, "
      f"ratio of medians {mt / mu:.4f}, "
      f"median of per-pair ratios {statistics.median(a / b for a, b in zip(t, u)):.4f}")
print(f"whole-run wall: median traced {statistics.median(tw):.2f} s, "
      f"median untraced {statistics.median(uw):.2f} s, "
      f"median difference {statistics.median(a - b for a, b in zip(tw, uw)):+.2f} s")
EOF
[ "$control" = 1 ] && exit 0
[ "$fixed_repeats" = 0 ] && exit 0

echo
echo "== fixed cost: $fixed_repeats interleaved pairs, --steps $fixed_steps =="
traced_walls=()
direct_walls=()
for ((i = 1; i <= fixed_repeats; ++i)); do
  traced_cmd=("$traceml" run --aggregator-port 0 --logs-dir "$work/fixed" -- "$quickstart" --steps "$fixed_steps" "${qs_args[@]}")
  direct_cmd=(env TRACEML_DISABLED=1 "$quickstart" --steps "$fixed_steps" "${qs_args[@]}")
  if ((i % 2 == 1)); then
    t=$(wall_seconds "${traced_cmd[@]}")
    d=$(wall_seconds "${direct_cmd[@]}")
  else
    d=$(wall_seconds "${direct_cmd[@]}")
    t=$(wall_seconds "${traced_cmd[@]}")
  fi
  traced_walls+=("$t")
  direct_walls+=("$d")
  python3 -c "print(f'repeat $i: traceml run {$t:.3f} s, direct {$d:.3f} s, difference {$t - $d:+.3f} s')"
done
check_summaries "$work/fixed" "$fixed_repeats"
python3 - "${traced_walls[*]}" "${direct_walls[*]}" <<'EOF'
import statistics, sys
t = [float(x) for x in sys.argv[1].split()]
d = [float(x) for x in sys.argv[2].split()]
print(f"overall: median traceml run {statistics.median(t):.3f} s, "
      f"median direct {statistics.median(d):.3f} s, "
      f"median difference {statistics.median(a - b for a, b in zip(t, d)):+.3f} s")
EOF
