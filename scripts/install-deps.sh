#!/usr/bin/env bash
# Installs every build and test dependency of traceml from Debian packages.
# Idempotent: packages already present are skipped, and apt is only asked when
# something is missing. Run as root (or with sudo available).
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

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
