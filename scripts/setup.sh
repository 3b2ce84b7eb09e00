#!/usr/bin/env bash
# Install tilefuse and what it needs on a fresh machine (idempotent):
#   - Mesa lavapipe (Vulkan on the CPU) through apt when no Vulkan ICD exists,
#   - the Python package with its test and bench extras (IREE compiler and runtime 3.13.0).
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
python -m pip install -q -e ".[test,bench,jax]"
