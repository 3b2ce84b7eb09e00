#!/usr/bin/env bash
# Install tilefuse and what it needs on a fresh machine (idempotent):
#   - Mesa lavapipe (Vulkan on the CPU) through apt when no Vulkan ICD exists,
#   - the Python package with its test, bench, jax and peers extras (IREE compiler and
#     runtime 3.13.0; torch's CPU build for the peers).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq mesa-vulkan-drivers >/dev/null
fi
# Graphviz's `dot` draws `tilefuse explain --fusion` pictures (SVG, PNG).
if ! command -v dot >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq graphviz >/dev/null
fi
# torch for the bundle runner's Inductor peer (samples/torch_peers.py and its
# tests run on the CPU): a CPU build, installed before the `peers` extra so
# that pip does not fetch PyPI's CUDA build (gigabytes of CUDA libraries).
# The pinned CPU wheel first (this machine's wheel directory has it; asking
# PyTorch's index where it is unreachable costs minutes of retries), else
# PyTorch's CPU index.
python -c "import torch" 2>/dev/null ||
  python -m pip install -q "torch==2.13.0+cpu" 2>/dev/null ||
  python -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
python -m pip install -q -e ".[test,bench,jax,peers]"
