#!/usr/bin/env bash
# The GPU check of the GPU clock (docs/gpu-validation.md): on a machine with an
# NVIDIA GPU and a LibTorch built with CUDA, builds traceml against that
# LibTorch and runs three examples under `traceml run` on the GPU, asserting
# each verdict AND that it was reached on the GPU clock:
#
#   h2d_bound   (pageable copies, not marked)  H2D_BOUND
#   input_bound (slow per-sample transform)    INPUT_BOUND
#   quickstart  (wide MLP, fast loader)        COMPUTE_BOUND
#
# then prints the h2d run's evidence and the overhead ratio traced/untraced
# (bench/overhead.sh on the compute-bound quickstart). Budget: 8 minutes on one
# H200 with 16 cores; every stage has a timeout inside that budget, so a stuck
# stage fails the check instead of hanging it.
#
# Usage: tests/gpu/check.sh            (from anywhere; exit 0 = every check passed)
# Environment:
#   LIBTORCH          an unpacked LibTorch (holds share/cmake/Torch); default: the
#                     one inside python3's torch package (torch.utils.cmake_prefix_path)
#   BUILD_DIR         build directory [<repo>/build-gpu]
#   TRACEML_GPU_DEBS  a folder of Debian packages (.deb) for traceml's own build
#                     dependencies (nlohmann-json3-dev libfmt-dev libfmt9
#                     libsqlite3-dev libsqlite3-0 libasio-dev) on a machine that
#                     lacks them and cannot install them: unpacked into
#                     BUILD_DIR/deps and searched by CMake
#   BUDGET_S          the whole check's budget in seconds [480]
#   JOBS              build parallelism [nproc]
#   OUT               when set, the output is also written to $OUT/gpu-check.txt
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$repo/build-gpu}"
budget="${BUDGET_S:-480}"
jobs="${JOBS:-$(nproc)}"

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  exec > >(tee "$OUT/gpu-check.txt") 2>&1
  tee_pid=$!
  # Let tee write the last lines before the script's caller reads the file.
  trap 'exec >&- 2>&-; wait "$tee_pid" 2>/dev/null || true' EXIT
fi

failures=()
fail_now() {
  echo "gpu-check: FAILED: $*"
  echo "gpu-check: result: FAIL (stopped after $SECONDS s)"
  exit 1
}
check_failed() {
  echo "  FAIL: $*"
  failures+=("$*")
}
# Why a command under `timeout` failed: $1 its exit code, $2 its limit.
exit_reason() {
  if (($1 == 124 || $1 == 137)); then
    echo "timed out after $2 s"
  else
    echo "exit code $1"
  fi
}

# Seconds left for a stage: at most $1, and never past the whole budget.
stage_limit() {
  local left=$((budget - SECONDS))
  if ((left < 10)); then
    fail_now "the ${budget} s budget is spent (BUDGET_S)"
  fi
  if (($1 < left)); then echo "$1"; else echo "$left"; fi
}

# Runs "$@" under a timeout with its output to log file $2; on failure shows
# the end of the log and stops the check. $1: the stage's limit in seconds.
run_stage() {
  local limit log rc=0
  limit=$(stage_limit "$1")
  log="$2"
  shift 2
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1 || rc=$?
  if ((rc != 0)); then
    tail -n 40 "$log"
    fail_now "$(exit_reason "$rc" "$limit"): $*"
  fi
}

echo "== traceml GPU check: $(date -u '+%Y-%m-%d %H:%M UTC') =="
echo "repo: $repo (commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown))"
echo "machine: $(nproc) CPUs, $(uname -sr)"

# ---- 1. A GPU, and a LibTorch with CUDA --------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
  fail_now "no GPU: nvidia-smi is not installed (this check needs an NVIDIA GPU and its driver)"
fi
if ! gpus=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1) ||
  [ -z "$gpus" ]; then
  fail_now "no GPU: nvidia-smi found no usable GPU: ${gpus:-no output}"
fi
echo "gpu: $gpus"

for tool in cmake python3 c++; do
  command -v "$tool" >/dev/null 2>&1 || fail_now "$tool is not installed"
done
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

if [ -n "${LIBTORCH:-}" ]; then
  [ -f "$LIBTORCH/share/cmake/Torch/TorchConfig.cmake" ] ||
    fail_now "LIBTORCH=$LIBTORCH holds no share/cmake/Torch/TorchConfig.cmake"
  torch_prefix="$LIBTORCH"
  echo "libtorch: $LIBTORCH ($(cat "$LIBTORCH/build-version" 2>/dev/null || echo 'version unknown'))"
else
  if ! torch_info=$(timeout 120 python3 -c '
import torch
print(torch.utils.cmake_prefix_path)
print(torch.__version__, "CUDA", torch.version.cuda, "GPU available:", torch.cuda.is_available())
import os; print(os.path.dirname(os.path.dirname(torch.__file__)))
' 2>&1); then
    fail_now "no LibTorch: set LIBTORCH to an unpacked LibTorch with CUDA, or install PyTorch with CUDA for python3 ($(echo "$torch_info" | tail -n 1))"
  fi
  torch_prefix=$(sed -n 1p <<<"$torch_info")
  site_packages=$(sed -n 3p <<<"$torch_info")
  echo "libtorch: python3's torch $(sed -n 2p <<<"$torch_info")"
  echo "          CMake prefix $torch_prefix"
  grep -q "GPU available: True" <<<"$torch_info" ||
    fail_now "python3's torch has no CUDA or sees no GPU: $(sed -n 2p <<<"$torch_info")"
  # The CUDA libraries of the pip packages (CUPTI, NVML users, cudart), so that
  # traceml's run-time loading finds them as torch itself does.
  for lib in "$site_packages"/nvidia/*/lib "$site_packages"/nvidia/*/*/lib; do
    if [ -d "$lib" ]; then LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
  done
fi
for lib in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64; do
  if [ -d "$lib" ]; then LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$lib"; fi
done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-(empty)}"

# ---- 2. Configure and build ---------------------------------------------------
mkdir -p "$build"
prefixes="$torch_prefix"
if [ -n "${TRACEML_GPU_DEBS:-}" ]; then
  [ -d "$TRACEML_GPU_DEBS" ] || fail_now "TRACEML_GPU_DEBS=$TRACEML_GPU_DEBS is not a folder"
  unpacked=0
  for deb in "$TRACEML_GPU_DEBS"/*.deb; do
    [ -f "$deb" ] || fail_now "TRACEML_GPU_DEBS=$TRACEML_GPU_DEBS holds no .deb"
    dpkg-deb -x "$deb" "$build/deps" || fail_now "cannot unpack $deb"
    unpacked=$((unpacked + 1))
  done
  prefixes="$prefixes;$build/deps/usr"
  echo "build dependencies: unpacked $unpacked packages into $build/deps"
fi

echo
echo "== build (Release, -DTRACEML_WITH_TORCH=ON, $jobs jobs) =="
t0=$SECONDS
run_stage 180 "$build/configure.log" cmake -S "$repo" -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefixes" -DTRACEML_WITH_TORCH=ON \
  -DTRACEML_BUILD_EXAMPLES=ON -DTRACEML_BUILD_TESTS=OFF -DTRACEML_BUILD_BENCHMARKS=OFF
grep -E "^-- traceml:" "$build/configure.log" || true
# The examples must see LibTorch's CUDA side (traceml::torch's TRACEML_TORCH_CUDA).
grep -q "TRACEML_TORCH_CUDA=1" "$build/compile_commands.json" ||
  fail_now "this LibTorch has no CUDA (TRACEML_TORCH_CUDA=0; c10_cuda target missing): use a CUDA build of LibTorch"
run_stage 330 "$build/build.log" cmake --build "$build" -j "$jobs" --target traceml_cli \
  traceml_example_h2d_bound traceml_example_input_bound traceml_example_quickstart
echo "built in $((SECONDS - t0)) s"

traceml="$build/bin/traceml"
examples="$build/bin/examples"
logs="$build/gpu-check-logs"
rm -rf "$logs"
mkdir -p "$logs"

# ---- 3. Three verdicts on the GPU clock --------------------------------------
# Runs one example under `traceml run`, then checks final_summary.json:
# $1 run name, $2 expected primary kind, rest: the example and its flags.
run_and_check() {
  local name=$1 expected=$2 limit rc=0
  shift 2
  echo
  echo "== $name: expect $expected on the GPU clock =="
  echo "\$ traceml run -- $(basename "$1") ${*:2}"
  limit=$(stage_limit 120)
  timeout --kill-after=10 "$limit" "$traceml" run --logs-dir "$logs" --run-name "$name" \
    --aggregator-port 0 --master-port 0 --interval 0.5 -- "$@" >"$logs/$name.log" 2>&1 || rc=$?
  if ((rc != 0)); then
    tail -n 30 "$logs/$name.log"
    check_failed "$name: traceml run: $(exit_reason "$rc" "$limit")"
    return
  fi
  # What the rank's runtime said about its clock and GPU libraries, if anything.
  grep -iE "traceml: .*(clock|cupti|nvml|cuda|gpu)" "$logs/$name.log" | head -n 5 || true
  if ! python3 - "$logs/$name/final_summary.json" "$expected" <<'EOF'; then
import json, sys
path, expected = sys.argv[1], sys.argv[2]
try:
    s = json.load(open(path))
except (OSError, ValueError) as e:
    sys.exit(f"  no final_summary.json: {e}")
p = s.get("primary_diagnosis", {})
st = s.get("step_time", {})
clock = st.get("global", {}).get("window", {}).get("diagnosis_clock")
avg = st.get("global", {}).get("average", {})
def ms(key):
    v = avg.get(key)
    return "null" if v is None else f"{v:.3f}"
print(f"  verdict: {p.get('kind')} ({p.get('severity')}) on the {clock} clock: {p.get('summary')}")
print(f"  action: {p.get('action')}")
print("  step averages (ms): " + ", ".join(f"{k} {ms(k + '_ms')}" for k in
      ("step_time", "input_wait", "h2d", "compute", "residual", "step_time_cpu", "step_time_gpu")))
mem = s.get("step_memory", {})
print(f"  step memory: {mem.get('diagnosis', {}).get('kind')}; "
      f"gpus observed: {s.get('meta', {}).get('gpus_observed')}")
ok = True
if p.get("kind") != expected:
    print(f"  FAIL: verdict {p.get('kind')}, expected {expected}")
    ok = False
if clock != "gpu":
    print(f'  FAIL: diagnosis clock "{clock}", expected "gpu"')
    ok = False
sys.exit(0 if ok else 1)
EOF
    check_failed "$name: expected $expected on the GPU clock"
    return
  fi
  echo "  ok"
}

# Pageable copies of 64 MiB, not marked: only the automatic H2D capture sees them.
run_and_check h2d_bound H2D_BOUND "$examples/h2d_bound" --device cuda --steps 200 \
  --batch-mb 64 --mark-h2d 0
# The H2D evidence: the primary's, and every pageable-copy figure in the summary.
if [ -f "$logs/h2d_bound/final_summary.json" ]; then
  echo "  h2d evidence:"
  python3 - "$logs/h2d_bound/final_summary.json" <<'EOF' || true
import json, sys
s = json.load(open(sys.argv[1]))
print("    primary evidence: " + json.dumps(s.get("primary_diagnosis", {}).get("evidence", {}), sort_keys=True))
found = []
def walk(node, path):
    if isinstance(node, dict):
        for k, v in node.items():
            walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk(v, f"{path}[{i}]")
    elif "pageable" in path.lower():
        found.append(f"{path} = {node}")
for line in found:
    print("    " + line)
if not found:
    print("    (no pageable-copy figure anywhere in final_summary.json)")
EOF
fi
# 32 samples x 100 us of transform per batch, a tiny model: the GPU waits.
run_and_check input_bound INPUT_BOUND "$examples/input_bound" --device cuda --steps 150
# A 16384-wide MLP (about 400 GFLOP per step) outruns its in-memory loader.
run_and_check compute_bound COMPUTE_BOUND "$examples/quickstart" --device cuda --steps 150 \
  --hidden 16384 --batch-size 256

# ---- 4. Overhead --------------------------------------------------------------
echo
echo "== overhead: bench/overhead.sh, compute-bound quickstart on the GPU =="
limit=$(stage_limit 150)
rc=0
N=3 STEPS=300 WARMUP=20 FIXED_REPEATS=1 FIXED_STEPS=0 \
  QUICKSTART_ARGS="--device cuda --hidden 16384 --batch-size 256 --log-every 1000" \
  timeout --kill-after=10 "$limit" bash "$repo/bench/overhead.sh" "$build" || rc=$?
if ((rc != 0)); then
  check_failed "overhead.sh: $(exit_reason "$rc" "$limit")"
fi

echo
echo "gpu-check: finished in $SECONDS s (budget $budget s)"
if ((${#failures[@]} > 0)); then
  for f in "${failures[@]}"; do echo "gpu-check: FAILED: $f"; done
  echo "gpu-check: result: FAIL"
  exit 1
fi
echo "gpu-check: result: PASS"
