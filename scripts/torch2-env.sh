#!/usr/bin/env bash
# Where LibTorch 2.x (pip's torch wheel, installed by install-deps.sh) lives:
#   torch2-env.sh version   the pinned version
#   torch2-env.sh venv      its virtual environment (TRACEML_TORCH2_VENV, or
#                           ~/.cache/traceml/torch-<version>)
#   torch2-env.sh root      LibTorch's root inside it (include/, lib/,
#                           share/cmake/Torch): the CMAKE_PREFIX_PATH to give
set -euo pipefail
version=2.15.0
venv="${TRACEML_TORCH2_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/traceml/torch-$version}"
case "${1:-}" in
  version) echo "$version" ;;
  venv) echo "$venv" ;;
  root)
    root=$(ls -d "$venv"/lib/python3*/site-packages/torch 2>/dev/null | head -n 1)
    if [ -z "$root" ] || [ ! -f "$root/share/cmake/Torch/TorchConfig.cmake" ]; then
      echo "torch2-env.sh: no LibTorch $version in $venv: run scripts/install-deps.sh" >&2
      exit 2
    fi
    echo "$root"
    ;;
  *)
    echo "usage: torch2-env.sh version|venv|root" >&2
    exit 2
    ;;
esac
