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
# then ddp on a one-rank NCCL process group (collective time and GPU idle
# asserted, with a probe of the kernels a one-rank all-reduce launches), four
# short h2d_bound variants whose numbers are printed, not asserted (--pinned;
# TRACEML_CUPTI=0; TRACEML_CUPTI_PER_THREAD_BUFFERS=0 and =1), the evidence
# that the cheaper CUPTI settings keep (h2d_bound and ddp with
# TRACEML_CUPTI_API_RECORDS=launches and TRACEML_CUPTI_DUTY=8/128), and the
# overhead (tests/gpu/overhead_variants.sh: every CUPTI setting against
# untraced in 7 rounds of interleaved pairs, at launch-bound, ~3 ms and ~10 ms
# steps, against issue 36's targets). Every rank runs with TRACEML_DEBUG=1; the check prints each
# run's `traceml: debug:` lines, the CUDA libraries the rank really mapped
# (/proc/<pid>/maps, sampled while it runs) and a row of key numbers from
# final_summary.json, plus the versions of everything involved and each
# stage's duration.
#
# Budget: 8 minutes on one H200 with 16 cores; every stage has a timeout
# inside that budget, so a stuck stage fails the check instead of hanging it.
# The dependency preflight runs before the GPU is looked at, so on a machine
# without one the check still says whether the build could run, then stops
# with "no GPU".
#
# Usage: tests/gpu/check.sh            (from anywhere; exit 0 = every check passed)
# Environment:
#   LIBTORCH          an unpacked LibTorch (holds share/cmake/Torch); default: the
#                     one inside python3's torch package (torch.utils.cmake_prefix_path)
#   BUILD_DIR         build directory [<repo>/build-gpu]
#   TRACEML_GPU_DEBS  a folder of Debian packages (.deb) for traceml's own build
#                     dependencies (nlohmann-json3-dev libsqlite3-dev
#                     libsqlite3-0 libasio-dev libcli11-dev) on a machine that
#                     lacks them and cannot install them: unpacked (dpkg-deb, or
#                     ar and tar) into BUILD_DIR/deps and searched by CMake
#   TRACEML_CUPTI_INCLUDE_DIR, TRACEML_CUDA_INCLUDE_DIR
#                     the folders of cupti_activity.h and cuda.h; default: the
#                     first of $CUDA_HOME, $CUDA_PATH, /usr/local/cuda (include/
#                     and extras/CUPTI/include/), /usr/include, then the pip
#                     packages' nvidia/*/include, that has them
#   BUDGET_S          the whole check's budget in seconds [480]
#   JOBS              build parallelism [nproc]
#   GPU_CHECK_STAGES  the stages after the build, of: runs nccl variants
#                     evidence profile overhead [all six; issue 36's
#                     measurement: "evidence overhead"; issue 34's: "profile"]
#   GPU_CHECK_OVERHEAD the overhead plan, ';'-separated workloads, each "name
#                     steps quickstart-flags : variant ..." (tests/gpu/
#                     overhead_variants.sh's OVERHEAD_PLAN; default there)
#   OUT               when set: the output is also written to $OUT/gpu-check.txt,
#                     the versions to $OUT/gpu-versions.txt and the logs (run
#                     folders, configure and build logs) to $OUT/gpu-logs.tgz
#                     (under 16 MiB); without OUT the archive is BUILD_DIR/gpu-logs.tgz
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$repo/build-gpu}"
budget="${BUDGET_S:-480}"
jobs="${JOBS:-$(nproc)}"
logs="$build/gpu-check-logs"
versions="$logs/versions.txt"
mkdir -p "$build"
rm -rf "$logs"
mkdir -p "$logs"
: >"$versions"

tee_pid=""
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  exec > >(tee "$OUT/gpu-check.txt") 2>&1
  tee_pid=$!
fi

# ---- Stages, failures, the end ------------------------------------------------
failures=()
stage_name=""
stage_t0=0
stage_times=()
# Starts a stage: $1 its short name, $2 its heading.
stage() {
  stage_done
  stage_name=$1
  stage_t0=$SECONDS
  echo
  echo "== $2 =="
}
stage_done() {
  if [ -n "$stage_name" ]; then
    stage_times+=("$stage_name $((SECONDS - stage_t0)) s")
    echo "  ($stage_name: $((SECONDS - stage_t0)) s)"
    stage_name=""
  fi
}

# Archives the logs: every run folder (final_summary.*, manifest.json,
# telemetry.db), each run's output, versions, the preflight, configure and
# build logs. Capped under 16 MiB (what comes back from the device machine):
# telemetry.db files over 4 MiB are left out, and if the archive is still too
# large every telemetry.db, then every file over 1 MiB; each step says so.
collect_logs() {
  local dest="${OUT:-$build}/gpu-logs.tgz" list="$build/gpu-logs.list" cap=$((15 * 1024 * 1024))
  local size pass skipped
  [ -d "$logs" ] || return 0
  for pass in 1 2 3; do
    (
      cd "$build"
      case $pass in
        1) find gpu-check-logs -type f ! \( -name 'telemetry.db*' -size +4096k \) ;;
        2) find gpu-check-logs -type f ! -name 'telemetry.db*' ;;
        3) find gpu-check-logs -type f -size -1024k ;;
      esac
      for f in configure.log build.log CMakeCache.txt; do if [ -f "$f" ]; then echo "$f"; fi; done
    ) >"$list"
    skipped=$(cd "$build" && { find gpu-check-logs configure.log build.log CMakeCache.txt -type f \
      2>/dev/null || true; } | grep -vxF -f "$list") || skipped=""
    tar -C "$build" -czf "$dest" -T "$list" 2>/dev/null || true
    size=$(stat -c %s "$dest" 2>/dev/null || echo 0)
    ((size <= cap)) && break
  done
  echo "logs: $dest ($((size / 1024)) KiB, $(wc -l <"$list") files)"
  if [ -n "$skipped" ]; then
    echo "logs: left out to stay under 16 MiB:"
    while read -r f; do
      echo "  $f ($(($(stat -c %s "$build/$f") / 1024)) KiB)"
    done <<<"$skipped"
  fi
  if [ -n "${OUT:-}" ]; then cp "$versions" "$OUT/gpu-versions.txt" 2>/dev/null || true; fi
}

finished=0
# Ends the check with exit code $1: stage durations, the log archive, the result.
finish() {
  finished=1
  stage_done
  echo
  local joined="" t
  for t in "${stage_times[@]}"; do joined+="${joined:+, }$t"; done
  echo "gpu-check: stage durations: ${joined:-none}"
  collect_logs || true
  echo "gpu-check: finished in $SECONDS s (budget $budget s)"
  if (($1 != 0)) || ((${#failures[@]} > 0)); then
    for f in "${failures[@]}"; do echo "gpu-check: FAILED: $f"; done
    echo "gpu-check: result: FAIL"
    exit 1
  fi
  echo "gpu-check: result: PASS"
  exit 0
}
# shellcheck disable=SC2317  # called by the EXIT trap
on_exit() {
  local rc=$?
  if ((finished == 0)); then
    set +e
    echo "gpu-check: FAILED: stopped unexpectedly (exit code $rc) in stage ${stage_name:-none}"
    stage_done
    collect_logs
    echo "gpu-check: result: FAIL"
  fi
  # Let tee write the last lines before the script's caller reads the file.
  if [ -n "$tee_pid" ]; then
    exec >&- 2>&-
    wait "$tee_pid" 2>/dev/null || true
  fi
}
trap on_exit EXIT
trap 'echo "gpu-check: FAILED: terminated by a signal"; exit 143' TERM INT HUP

fail_now() {
  echo "gpu-check: FAILED: $*"
  failures+=("$*")
  finish 1
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

# Prints "name: value" and saves it in versions.txt.
ver() {
  printf '  %-20s %s\n' "$1:" "$2" | tee -a "$versions"
}

echo "== traceml GPU check: $(date -u '+%Y-%m-%d %H:%M UTC') =="
echo "repo: $repo (commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown))"
echo "machine: $(nproc) CPUs, $(uname -sr)"
ver commit "$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"

# ---- 1. Preflight: tools and build dependencies (before the GPU) --------------
stage preflight "preflight: tools and build dependencies"
for tool in cmake python3 c++ tar timeout; do
  command -v "$tool" >/dev/null 2>&1 || fail_now "$tool is not installed"
done
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
ver cmake "$(cmake --version | head -n 1)"
ver compiler "$(c++ --version | head -n 1) ($(command -v c++))"
ver ninja "$(ninja --version 2>/dev/null || echo 'not installed (Unix Makefiles)')"
ver python3 "$(python3 --version 2>&1 | head -n 1)"
nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
if [ -n "$nvcc" ]; then
  ver nvcc "$("$nvcc" --version | grep -E 'release|Build' | tr '\n' ' ') ($nvcc)"
else
  # traceml compiles no CUDA code, but LibTorch's CMake package with CUDA
  # enables CUDA and looks for the toolkit: the configure will say if it fails.
  ver nvcc "not installed (LibTorch's CMake package with CUDA may need it)"
fi

dep_prefixes=""
if [ -n "${TRACEML_GPU_DEBS:-}" ]; then
  [ -d "$TRACEML_GPU_DEBS" ] || fail_now "TRACEML_GPU_DEBS=$TRACEML_GPU_DEBS is not a folder"
  # dpkg-deb where the machine has it; otherwise ar and tar (a .deb is an ar
  # archive holding data.tar.*).
  unpack_deb() {
    if command -v dpkg-deb >/dev/null 2>&1; then
      dpkg-deb -x "$1" "$2"
      return
    fi
    local tmp data
    tmp=$(mktemp -d)
    (cd "$tmp" && ar x "$1") || return 1
    data=$(find "$tmp" -maxdepth 1 -name 'data.tar*' | head -n 1)
    [ -n "$data" ] && mkdir -p "$2" && tar -xf "$data" -C "$2"
    local rc=$?
    rm -rf "$tmp"
    return $rc
  }
  if ! command -v dpkg-deb >/dev/null 2>&1 && ! command -v ar >/dev/null 2>&1; then
    fail_now "TRACEML_GPU_DEBS is set but neither dpkg-deb nor ar is installed: cannot unpack the .deb files"
  fi
  rm -rf "$build/deps"
  unpacked=0
  for deb in "$TRACEML_GPU_DEBS"/*.deb; do
    [ -f "$deb" ] || fail_now "TRACEML_GPU_DEBS=$TRACEML_GPU_DEBS holds no .deb"
    unpack_deb "$deb" "$build/deps" || fail_now "cannot unpack $deb"
    unpacked=$((unpacked + 1))
  done
  dep_prefixes="$build/deps/usr"
  echo "  build dependencies: unpacked $unpacked packages into $build/deps"
fi

# The build's find_package calls, alone (tests/gpu/preflight/CMakeLists.txt).
pf_log="$logs/preflight-cmake.log"
pf_limit=$(stage_limit 60)
pf_rc=0
timeout --kill-after=10 "$pf_limit" cmake -S "$repo/tests/gpu/preflight" -B "$build/preflight" \
  -DCMAKE_PREFIX_PATH="$dep_prefixes" >"$pf_log" 2>&1 || pf_rc=$?
if ((pf_rc != 0)); then
  # CMake wraps a long message over several lines: join them back into one.
  missing=$(sed -n '/preflight: missing:/,/^$/p' "$pf_log" | tr -s ' \n' ' ' |
    sed 's/^ *preflight: missing: //; s/ *$//')
  if [ -z "$missing" ]; then
    tail -n 20 "$pf_log"
    fail_now "dependency preflight: cmake $(exit_reason "$pf_rc" "$pf_limit") (log above)"
  fi
  fail_now "missing build dependencies: $missing (scripts/install-deps.sh installs them; or set TRACEML_GPU_DEBS, docs/gpu-validation.md)"
fi
sed -n 's/^-- preflight: found /  found /p' "$pf_log" | tee -a "$versions"

# CUPTI's and CUDA's headers: without them the build silently drops GPU
# activity capture (src/CMakeLists.txt), so the check finds them itself and
# hands them to CMake. The toolkit first, then the pip packages' nvidia/*/include.
pip_nvidia=$(timeout 60 python3 -c '
import nvidia
for p in nvidia.__path__:
    print(p)' 2>/dev/null || true)
header_dirs=()
for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
  if [ -n "$root" ]; then header_dirs+=("$root/include" "$root/extras/CUPTI/include"); fi
done
header_dirs+=(/usr/include)
pip_dirs=()
while read -r p; do
  [ -n "$p" ] || continue
  for d in "$p/cu13/include" "$p/cuda_cupti/include" "$p/cuda_runtime/include" "$p"/*/include; do
    if [ -d "$d" ]; then pip_dirs+=("$d"); fi
  done
done <<<"$pip_nvidia"
# The first of $1's folder list (the rest of the arguments) holding file $1.
first_with() {
  local file=$1 d
  shift
  for d in "$@"; do
    if [ -f "$d/$file" ]; then
      echo "$d"
      return
    fi
  done
}
cupti_version() {
  sed -n '/^#define CUPTI_API_VERSION /{s/^#define CUPTI_API_VERSION \([0-9]*\).*/\1/p;q}' \
    "$1/cupti_version.h" 2>/dev/null
}
cupti_dir="${TRACEML_CUPTI_INCLUDE_DIR:-$(first_with cupti_activity.h "${header_dirs[@]}" "${pip_dirs[@]}")}"
cuda_dir="${TRACEML_CUDA_INCLUDE_DIR:-$(first_with cuda.h "${header_dirs[@]}" "${pip_dirs[@]}")}"
if [ -z "$cupti_dir" ] || [ -z "$cuda_dir" ]; then
  fail_now "CUPTI headers not found (cupti_activity.h: ${cupti_dir:-none}, cuda.h: ${cuda_dir:-none}; searched ${header_dirs[*]} ${pip_dirs[*]:-and no pip nvidia packages}): without them GPU activity capture is off; set CUDA_HOME or TRACEML_CUPTI_INCLUDE_DIR and TRACEML_CUDA_INCLUDE_DIR"
fi
# NCCL's nccl.h for the ddp example's --backend nccl (LibTorch does not ship it):
# the pip package's first (the NCCL that torch loads), then the toolkit's.
nccl_dir="${TRACEML_NCCL_INCLUDE_DIR:-$(first_with nccl.h "${pip_dirs[@]}" "${header_dirs[@]}")}"
ver "nccl.h" "${nccl_dir:-not found (the ddp run on NCCL will fail)}"
ver "CUPTI headers" "$cupti_dir (CUPTI_API_VERSION $(cupti_version "$cupti_dir" || true))"
ver "cuda.h" "$cuda_dir"
pip_cupti=$(first_with cupti_version.h "${pip_dirs[@]}")
if [ -n "$pip_cupti" ] && [ "$pip_cupti" != "$cupti_dir" ]; then
  ver "pip CUPTI headers" "$pip_cupti (CUPTI_API_VERSION $(cupti_version "$pip_cupti" || true))"
  if [ "$(cupti_version "$pip_cupti")" != "$(cupti_version "$cupti_dir")" ]; then
    echo "  note: the pip packages' CUPTI (loaded at run time, see LD_LIBRARY_PATH) differs from the headers built against"
  fi
fi
echo "dependencies: all found (nlohmann_json, SQLite3, asio, CLI11, CUPTI and CUDA headers)"

# ---- 2. A GPU, and a LibTorch with CUDA ----------------------------------------
stage gpu "GPU, driver and LibTorch"
if ! command -v nvidia-smi >/dev/null 2>&1; then
  fail_now "no GPU: nvidia-smi is not installed (this check needs an NVIDIA GPU and its driver)"
fi
if ! gpus=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1) ||
  [ -z "$gpus" ]; then
  fail_now "no GPU: nvidia-smi found no usable GPU: ${gpus:-no output}"
fi
timeout 30 nvidia-smi >"$logs/nvidia-smi.txt" 2>&1 || true
ver gpu "$gpus"
ver "driver (CUDA)" "$(timeout 30 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null |
  head -n 1) ($(grep -o 'CUDA Version: [0-9.]*' "$logs/nvidia-smi.txt" || echo 'CUDA version unknown'))"

site_packages=""
if [ -n "${LIBTORCH:-}" ]; then
  [ -f "$LIBTORCH/share/cmake/Torch/TorchConfig.cmake" ] ||
    fail_now "LIBTORCH=$LIBTORCH holds no share/cmake/Torch/TorchConfig.cmake"
  torch_prefix="$LIBTORCH"
  ver libtorch "$LIBTORCH ($(cat "$LIBTORCH/build-version" 2>/dev/null || echo 'version unknown'))"
else
  # key=value lines on stdout; stderr (import warnings) apart, shown on failure.
  py_err="$logs/python-torch.err"
  if ! torch_info=$(timeout 120 python3 - 2>"$py_err" <<'EOF'
import os
import torch
print("prefix=" + torch.utils.cmake_prefix_path)
print("version=" + torch.__version__)
print("cuda=" + str(torch.version.cuda))
print("available=" + str(torch.cuda.is_available()))
print("site=" + os.path.dirname(os.path.dirname(torch.__file__)))
try:
    v = torch.cuda.nccl.version()
    print("nccl=" + (".".join(map(str, v)) if isinstance(v, tuple) else str(v)))
except Exception as e:  # noqa: BLE001 - any failure is worth a line
    print("nccl=unavailable (%s)" % str(e).splitlines()[0] if str(e) else "nccl=unavailable")
print("cudnn=" + str(torch.backends.cudnn.version()))
try:
    from importlib import metadata
    names = sorted("%s==%s" % (d.metadata["Name"], d.version) for d in metadata.distributions()
                   if (d.metadata["Name"] or "").lower().startswith(("nvidia-", "torch")))
    print("packages=" + " ".join(names))
except Exception:  # noqa: BLE001
    pass
EOF
  ); then
    tail -n 5 "$py_err"
    fail_now "no LibTorch: set LIBTORCH to an unpacked LibTorch with CUDA, or install PyTorch with CUDA for python3 ($(tail -n 1 "$py_err"))"
  fi
  info() { sed -n "/^$1=/{s/^$1=//p;q}" <<<"$torch_info"; }
  torch_prefix=$(info prefix)
  site_packages=$(info site)
  ver torch "$(info version) (CUDA $(info cuda), cuDNN $(info cudnn), GPU available: $(info available))"
  ver "torch NCCL" "$(info nccl)"
  ver "pip packages" "$(info packages)"
  echo "  CMake prefix $torch_prefix"
  [ -n "$torch_prefix" ] || fail_now "python3's torch gave no cmake_prefix_path"
  [ "$(info available)" = "True" ] ||
    fail_now "python3's torch has no CUDA or sees no GPU: torch $(info version), CUDA $(info cuda), available $(info available)"
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
ver LD_LIBRARY_PATH "${LD_LIBRARY_PATH:-(empty)}"

# ---- 3. Configure and build -----------------------------------------------------
stage build "build (Release, -DTRACEML_WITH_TORCH=ON, $jobs jobs)"
prefixes="$torch_prefix${dep_prefixes:+;$dep_prefixes}"
# LibTorch's CMake package with CUDA finds the toolkit through nvcc; the GPU's
# architecture is named so that it does not compile a program to detect it.
cuda_args=()
if [ -n "$nvcc" ]; then
  cuda_args=(-DCMAKE_CUDA_COMPILER="$nvcc" -DCUDAToolkit_ROOT="$(dirname "$(dirname "$nvcc")")")
fi
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
run_stage 180 "$build/configure.log" cmake -S "$repo" -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefixes" -DTRACEML_WITH_TORCH=ON \
  -DTRACEML_BUILD_EXAMPLES=ON -DTRACEML_BUILD_TESTS=OFF -DTRACEML_BUILD_BENCHMARKS=OFF \
  -DTRACEML_CUPTI_INCLUDE_DIR="$cupti_dir" -DTRACEML_CUDA_INCLUDE_DIR="$cuda_dir" \
  ${nccl_dir:+-DTRACEML_NCCL_INCLUDE_DIR="$nccl_dir"} "${cuda_args[@]}"
grep -E "^-- traceml:" "$build/configure.log" | sed 's/^/  /' || true
if grep -q "CUPTI headers not found" "$build/configure.log" ||
  ! grep -q "GPU activity capture on" "$build/configure.log"; then
  fail_now "the configure dropped CUPTI (GPU activity capture off) although the headers are in $cupti_dir and $cuda_dir"
fi
# The examples must see LibTorch's CUDA side (traceml::torch's TRACEML_TORCH_CUDA).
grep -q "TRACEML_TORCH_CUDA=1" "$build/compile_commands.json" ||
  fail_now "this LibTorch has no CUDA (TRACEML_TORCH_CUDA=0; c10_cuda target missing): use a CUDA build of LibTorch"
grep -q "TRACEML_HAVE_CUPTI=1" "$build/compile_commands.json" ||
  fail_now "traceml_core is compiled without TRACEML_HAVE_CUPTI=1: no GPU activity capture"
# Keeps going past a target that fails (a LibTorch API difference in one
# example must not cost the runs of the others); each run then needs its binary.
keep_going=(-k 0)
if [ ${#generator[@]} -eq 0 ]; then keep_going=(-k); fi
build_limit=$(stage_limit 330)
build_rc=0
timeout --kill-after=10 "$build_limit" cmake --build "$build" -j "$jobs" --target traceml_cli \
  traceml_example_h2d_bound traceml_example_input_bound traceml_example_quickstart \
  traceml_example_ddp -- "${keep_going[@]}" >"$build/build.log" 2>&1 || build_rc=$?
if ((build_rc != 0)); then
  # The compiler's first errors, then what failed.
  grep -n -m 40 -E "error|FAILED" "$build/build.log" || tail -n 40 "$build/build.log"
  check_failed "build: $(exit_reason "$build_rc" "$build_limit") (the runs go on with what was built)"
fi
[ -x "$build/bin/traceml" ] || fail_now "traceml_cli did not build (build.log above)"

traceml="$build/bin/traceml"
examples="$build/bin/examples"
rows="$logs/rows.txt"
: >"$rows"

# ---- 4. Runs on the GPU ---------------------------------------------------------
# Runs one example under `traceml run` with TRACEML_DEBUG=1, sampling the
# CUDA libraries its rank maps while it runs, then prints the debug lines, the
# libraries and the summary's row. $1 run name, $2 expected primary kind on
# the GPU clock (- for none: a variant, only printed), $3 extra environment
# ("NAME=value ...", or -), rest: the example and its flags.
run_and_check() {
  local name=$1 expected=$2 extra_env=() limit rc=0 pid libs_pid
  if [ "$3" != "-" ]; then read -r -a extra_env <<<"$3"; fi
  shift 3
  echo
  case $expected in
    -) echo "== $name: variant, numbers only ==" ;;
    collective) echo "== $name: expect collective time (NCCL) and GPU idle in steps ==" ;;
    *) echo "== $name: expect $expected on the GPU clock ==" ;;
  esac
  if [ ! -x "$1" ]; then
    check_failed "$name: $(basename "$1") was not built"
    return
  fi
  echo "\$ ${extra_env[*]:+${extra_env[*]} }traceml run -- $(basename "$1") ${*:2}"
  limit=$(stage_limit 90)
  local t0=$SECONDS
  env TRACEML_DEBUG=1 "${extra_env[@]}" timeout --kill-after=10 "$limit" "$traceml" run \
    --logs-dir "$logs" --run-name "$name" --aggregator-port 0 --master-port 0 --interval 0.5 \
    -- "$@" >"$logs/$name.log" 2>&1 &
  pid=$!
  python3 "$repo/tests/gpu/rank_libs.py" "$pid" "$(basename "$1")" "$logs/$name.libs.txt" \
    "$((limit + 15))" 2>"$logs/$name.libs.err" &
  libs_pid=$!
  wait "$pid" || rc=$?
  wait "$libs_pid" || true
  echo "  ran in $((SECONDS - t0)) s"
  grep -a "traceml: debug:" "$logs/$name.log" | sed 's/^/  /' || echo "  (no 'traceml: debug:' lines)"
  # What else the runtime said about its clock and GPU libraries.
  grep -a -iE "traceml: .*(clock|cupti|nvml|cuda|gpu)" "$logs/$name.log" | grep -v "traceml: debug:" |
    head -n 5 | sed 's/^/  /' || true
  echo "  libraries mapped:"
  sed 's/^/    /' "$logs/$name.libs.txt" 2>/dev/null || cat "$logs/$name.libs.err"
  if ((rc != 0)); then
    tail -n 30 "$logs/$name.log"
    check_failed "$name: traceml run: $(exit_reason "$rc" "$limit")"
    return
  fi
  local expect_args=() src=0
  case $expected in
    -) ;;
    collective) expect_args=(--expect-collective) ;;
    *) expect_args=(--expect "$expected") ;;
  esac
  python3 "$repo/tests/gpu/summary_row.py" "$logs/$name/final_summary.json" "$name" \
    "${expect_args[@]}" --row-file "$rows" 2>"$logs/$name.summary.err" || src=$?
  if ((src != 0)); then
    cat "$logs/$name.summary.err"
    case $expected in
      -) check_failed "$name: no usable final_summary.json" ;;
      collective) check_failed "$name: expected collective_ms > 0 and a GPU idle fraction" ;;
      *) check_failed "$name: expected $expected on the GPU clock" ;;
    esac
    return
  fi
  echo "  ok"
}

# GPU_CHECK_STAGES: which of the stages after the build run (default all):
# runs nccl variants evidence profile overhead. Issue 36's one call is "evidence
# overhead" (docs/gpu-validation.md).
stages="${GPU_CHECK_STAGES:-runs nccl variants evidence profile overhead}"
wanted() { [[ " $stages " == *" $1 "* ]]; }

# Pageable copies of 64 MiB, not marked: only the automatic H2D capture sees them.
h2d_args=(--device cuda --batch-mb 64 --mark-h2d 0)

if wanted runs; then
stage runs "runs: three verdicts on the GPU clock"
run_and_check h2d_bound H2D_BOUND - "$examples/h2d_bound" "${h2d_args[@]}" --steps 200
# The H2D evidence: the primary's, and every pageable-copy figure in the summary.
if [ -f "$logs/h2d_bound/final_summary.json" ]; then
  echo "  h2d evidence:"
  python3 - "$logs/h2d_bound/final_summary.json" <<'EOF' 2>"$logs/h2d_evidence.err" || cat "$logs/h2d_evidence.err"
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
walk(s, "")
for line in found:
    print("    " + line)
if not found:
    print("    (no pageable-copy figure anywhere in final_summary.json)")
EOF
fi
# 32 samples x 100 us of transform per batch, a tiny model: the GPU waits.
run_and_check input_bound INPUT_BOUND - "$examples/input_bound" --device cuda --steps 150
# A 16384-wide MLP (about 400 GFLOP per step) outruns its in-memory loader.
run_and_check compute_bound COMPUTE_BOUND - "$examples/quickstart" --device cuda --steps 150 \
  --hidden 16384 --batch-size 256

fi

if wanted nccl; then
stage nccl "NCCL: one rank, the all-reduce inside Backward"
# Which kernels a one-rank NCCL all-reduce launches (PyTorch's profiler, CUPTI
# underneath): with one rank NCCL runs an in-place sum as no work at all and an
# average as its one-rank reduction kernel, which traceml counts as collective.
probe_limit=$(stage_limit 60)
timeout --kill-after=10 "$probe_limit" python3 - >"$logs/nccl_kernels.txt" 2>"$logs/nccl_kernels.err" <<'EOF' ||
import torch, torch.distributed as dist
from torch.profiler import profile, ProfilerActivity
dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
x = torch.randn(1 << 20, device="cuda")
for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
    dist.all_reduce(x, op=op)
torch.cuda.synchronize()
for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        dist.all_reduce(x, op=op)
        torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
    print(f"all_reduce {op}: {len(names)} GPU activities: " + (" | ".join(names) or "none"))
print("NCCL " + ".".join(map(str, torch.cuda.nccl.version())))
dist.destroy_process_group()
EOF
  echo "  (the NCCL probe failed: $(tail -n 1 "$logs/nccl_kernels.err"))"
sed 's/^/  /' "$logs/nccl_kernels.txt"
# ddp with one rank on NCCL: its all-reduce (an average) is inside Backward.
run_and_check ddp_nccl collective - "$examples/ddp" --device cuda --backend nccl --steps 300 \
  --batch-size 256 --log-every 100

fi

if wanted variants; then
stage variants "variants: h2d_bound pinned, without CUPTI, CUPTI per-thread buffers 0 and 1"
# The fix the H2D verdict suggests: pinned batches copied non_blocking.
run_and_check h2d_pinned - - "$examples/h2d_bound" "${h2d_args[@]}" --steps 100 --pinned
# CUPTI off (runtime.cpp): the unmarked copy is then invisible on the GPU clock.
run_and_check h2d_cupti_off - TRACEML_CUPTI=0 "$examples/h2d_bound" "${h2d_args[@]}" --steps 100
# CUPTI's per-thread activity buffers, off (the default) and on.
run_and_check h2d_per_thread_0 - TRACEML_CUPTI_PER_THREAD_BUFFERS=0 "$examples/h2d_bound" \
  "${h2d_args[@]}" --steps 100
run_and_check h2d_per_thread_1 - TRACEML_CUPTI_PER_THREAD_BUFFERS=1 "$examples/h2d_bound" \
  "${h2d_args[@]}" --steps 100

fi

if wanted evidence; then
stage evidence "evidence: h2d_bound and one-rank NCCL ddp under each cheaper CUPTI setting"
# What the overhead stage's cheaper settings keep of the evidence (issue 36),
# printed, not asserted: the H2D verdict and pageable share, and the
# collective time, as the runs and nccl stages give them with every API call
# recorded. The duty cycle records steps 1-8 and 129-136 of 200 (1-8, 129-136
# and 257-264 of ddp's 300); its sample size is in the `duty cycle` debug line.
run_and_check h2d_launches - TRACEML_CUPTI_API_RECORDS=launches "$examples/h2d_bound" \
  "${h2d_args[@]}" --steps 200
run_and_check h2d_duty - TRACEML_CUPTI_DUTY=8/128 "$examples/h2d_bound" "${h2d_args[@]}" \
  --steps 200
run_and_check ddp_launches - TRACEML_CUPTI_API_RECORDS=launches "$examples/ddp" --device cuda \
  --backend nccl --steps 300 --batch-size 256 --log-every 100
run_and_check ddp_duty - TRACEML_CUPTI_DUTY=8/128 "$examples/ddp" --device cuda --backend nccl \
  --steps 300 --batch-size 256 --log-every 100

fi

if wanted profile; then
stage profile "profile: LibTorch's profiler on steps 50-54 (--profile-steps), CUPTI on and off"
# Issue 34 (docs/profiling.md). With traceml's CUPTI records on, they lend
# CUPTI to LibTorch's profiler for steps 50-54 and take it back after: the
# profile is written, and the debug report says CUPTI was lent once with
# ~5 steps not recorded and the rest recorded (records resumed after the
# capture); with TRACEML_CUPTI=0 the profile is written too.
run_and_check profile_cupti_on - TRACEML_PROFILE_STEPS=50:54 "$examples/quickstart" \
  --device cuda --steps 150
run_and_check profile_cupti_off - "TRACEML_PROFILE_STEPS=50:54 TRACEML_CUPTI=0" \
  "$examples/quickstart" --device cuda --steps 150
for name in profile_cupti_on profile_cupti_off; do
  TRACEML="$traceml" python3 - "$logs/$name" "$name" <<'EOF' 2>"$logs/$name.profile.err" || {
import collections, json, os, subprocess, sys
run, name = sys.argv[1], sys.argv[2]
path = os.path.join(run, "profiles", "rank0_steps50-54.json")
if not os.path.exists(path):
    sys.exit(f"{name}: no profile file")
trace = json.load(open(path))
meta = trace["otherData"]["traceml"]
ops = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
top = collections.Counter(e["name"] for e in ops).most_common(8)
print(f"  {name}: {meta['ops']} ops, cut {meta['ops_cut']}, error: {meta.get('error')}")
print("    top: " + ", ".join(f"{n} x{c}" for n, c in top))
window = json.load(open(os.path.join(run, "final_summary.json")))["step_time"]["global"]["window"]
print(f"    steps left out of the analysis: {window.get('profiled_steps_left_out')}")
if meta["ops"] == 0 or meta.get("error"):
    sys.exit(f"{name}: expected a profile with operators")
# The GPU's kernels (CUDA activities) inside the captured steps' span.
gpu = [e for e in ops if e.get("args", {}).get("gpu") or e.get("cat") == "gpu"]
cpu_ts = [e["ts"] for e in ops if e not in gpu]
inside = [e for e in gpu if cpu_ts and min(cpu_ts) - 1e6 <= e["ts"] <= max(cpu_ts) + 1e6]
print(f"    gpu ops: {len(gpu)}, inside the capture's span: {len(inside)}")
if not inside:
    sys.exit(f"{name}: expected the GPU's kernels inside the captured steps")
# LibTorch's own (Kineto) trace beside it: LibTorch has Kineto where it
# recorded the GPU's kernels.
kineto = os.path.join(run, "profiles", "rank0_steps50-54.kineto.json")
if not os.path.exists(kineto):
    sys.exit(f"{name}: no LibTorch (Kineto) trace kept beside the profile")
kt = json.load(open(kineto))
print(f"    kineto trace: {os.path.getsize(kineto)} bytes, "
      f"{len(kt.get('traceEvents', []))} events")
if name == "profile_cupti_on":
    # traceml's own records came back after the capture: the steps after it
    # carry GPU activity from CUPTI again.
    steps = {}
    export = subprocess.run([os.environ["TRACEML"], "export", run, "--out", run + ".export.jsonl"],
                            capture_output=True, text=True)
    if export.returncode != 0:
        sys.exit(f"{name}: traceml export failed: {export.stderr.strip()}")
    for line in open(run + ".export.jsonl"):
        r = json.loads(line)
        if r.get("type") == "step":
            steps[r["step"]] = r.get("gpu_activity")
    busy = lambda s: bool(steps.get(s)) and steps[s].get("busy_ms", 0) > 0
    before = [s for s in range(40, 50) if busy(s)]
    after = [s for s in range(60, 150) if busy(s)]
    during = [s for s in range(50, 55) if steps.get(s)]
    print(f"    steps with CUPTI activity: 40-49 {len(before)}, 50-54 {len(during)}, "
          f"60-149 {len(after)}")
    if len(before) < 10:
        sys.exit(f"{name}: the steps just before the capture lost their CUPTI records")
    if len(after) < 60:
        sys.exit(f"{name}: traceml's CUPTI records did not come back after the capture")
    if during:
        sys.exit(f"{name}: steps under the profiler carry traceml's CUPTI activity")
    log = open(os.path.join(os.path.dirname(run), name + ".log"), errors="replace").read()
    lent = [l for l in log.splitlines() if "CUPTI lent to LibTorch's profiler" in l]
    print("    " + (lent[0].strip() if lent else "no 'CUPTI lent' line in the debug report"))
    if not lent or "lent to LibTorch's profiler once" not in lent[0]:
        sys.exit(f"{name}: expected CUPTI lent once to the profiler")
    recorded = int(lent[0].split("steps recorded ")[1].split(",")[0])
    if recorded < 100:
        sys.exit(f"{name}: traceml's CUPTI records did not resume after the capture")
EOF
    cat "$logs/$name.profile.err"
    check_failed "$name: $(tail -n 1 "$logs/$name.profile.err")"
  }
done

fi

echo
echo "== runs at a glance =="
sed 's/^/  /' "$rows"

if wanted overhead; then

# ---- 6. Overhead ------------------------------------------------------------------
stage overhead "overhead: every CUPTI setting against untraced, quickstart at three step sizes"
# tests/gpu/overhead_variants.sh says the plan and its arithmetic: launch-bound,
# ~3 ms and ~10 ms steps; untraced, every API recorded (today's default),
# launching APIs only, the duty cycle 8/128 and CUPTI off; 7 rounds of
# interleaved pairs, fewer when the budget would not hold another round.
# What is left of the budget, less a margin for the table and the archive.
overhead_s=$((budget - SECONDS - 20))
if ((overhead_s < 60)); then
  check_failed "overhead: only $overhead_s s of the ${budget} s budget left (BUDGET_S)"
else
  rc=0
  if [ -n "${GPU_CHECK_OVERHEAD:-}" ]; then export OVERHEAD_PLAN="$GPU_CHECK_OVERHEAD"; fi
  timeout --kill-after=10 "$((overhead_s + 15))" bash "$repo/tests/gpu/overhead_variants.sh" \
    "$build" "$logs/overhead" "$overhead_s" || rc=$?
  if ((rc != 0)); then
    check_failed "overhead: $(exit_reason "$rc" "$((overhead_s + 15))")"
  fi
fi
fi

finish 0
