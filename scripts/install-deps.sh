#!/usr/bin/env bash
# Installs every build and test dependency of traceml: Debian packages (with
# Debian's LibTorch 1.13), then LibTorch 2.x from PyTorch's pip wheel in a
# virtual environment outside the source tree (scripts/torch2.sh builds and
# tests against it; docs/libtorch-versions.md). Idempotent: packages already
# present are skipped, apt is only asked when something is missing, and pip
# only when the pinned wheel is not installed yet. Run as root (or with sudo
# available). TRACEML_TORCH2=0 skips LibTorch 2.x (about 5.3 GB).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang-format
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libtorch-dev libgloo-dev libasio-dev
  # scripts/fuzz.sh and scripts/sanitize-thread.sh: clang's sanitizers and
  # libFuzzer, and llvm-symbolizer for their stack traces.
  clang-14 libfuzzer-14-dev llvm-14
  # The HTML report's tests render final_summary.html in headless Chromium;
  # the live view's run in a real terminal, tmux.
  chromium tmux
  # torchrun (Debian's PyTorch 1.13), to test `traceml serve` with ranks
  # that torchrun starts (docs/launchers.md).
  python3-torch
  # The virtual environment that holds LibTorch 2.x (pip's torch wheel).
  python3-venv
  # mpirun (Open MPI), to test the same with ranks that mpirun starts.
  openmpi-bin
  # --metrics-port: prometheus-cpp and its civetweb server; the Prometheus
  # server and promtool, to test the endpoint as Prometheus scrapes it.
  prometheus-cpp-dev libcivetweb-dev prometheus
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

install_debian_packages() {
  if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    return
  fi
  local sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo_cmd=(sudo)
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
install_debian_packages

# LibTorch 2.x: PyTorch's wheel carries LibTorch's headers, libraries and
# CMake package (torch/share/cmake/Torch), and its torchrun. Its Linux build is
# CUDA's and pulls NVIDIA's runtime wheels; it loads and runs on a CPU. The
# version is pinned; a stamp written after a whole install makes a second run
# a no-op (an install cut short is redone).
if [ "${TRACEML_TORCH2:-1}" = 0 ]; then
  echo "install-deps: LibTorch 2.x skipped (TRACEML_TORCH2=0)"
  exit 0
fi
venv=$(bash "$(dirname "$0")/torch2-env.sh" venv)
version=$(bash "$(dirname "$0")/torch2-env.sh" version)
stamp="$venv/.traceml-installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "torch==$version" ]; then
  echo "install-deps: LibTorch $version present ($venv)"
  exit 0
fi
echo "install-deps: installing LibTorch $version from pip into $venv (about 5.3 GB, 1-3 minutes on a fast link)"
start=$SECONDS
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" -m venv "$venv"
# numpy: without it, importing torch (torchrun does) prints a warning.
"$venv/bin/pip" install -q --no-cache-dir --disable-pip-version-check "torch==$version" "numpy==2.4.6"
echo "torch==$version" >"$stamp"
echo "install-deps: LibTorch $version installed in $((SECONDS - start)) s, $(du -sh "$venv" | cut -f1) ($venv)"
