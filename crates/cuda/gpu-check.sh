#!/usr/bin/env bash
# Builds cuzk-gpu-check here, compiles the kernels to CUBIN here (NVRTC from PyPI, no
# GPU needed) and stages both in .device/cuda/ (ignored), ready for the GPU machine:
#
#   crates/cuda/gpu-check.sh                 # on the development machine
#   then, on the GPU machine (device tool, carry [".device/cuda"]):
#   CUZK_CUDA_CACHE=.device/cuda/cubin .device/cuda/cuzk-gpu-check $OUT/check
#
# The binary runs every correctness check and benchmark, prints the table last and
# writes gpu-check.log and table.md into the folder it is given.
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${CARGO_TARGET_DIR:-target}
venv=${CUZK_NVRTC_VENV:-/tmp/cuzk-nvrtc-venv}
if [ ! -d "$venv" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "nvidia-cuda-nvrtc==13.0.*"
fi
lib=$(ls -d "$venv"/lib/python3*/site-packages/nvidia/cu13/lib)
cargo build --release -p cuzk-cuda --bin cuzk-gpu-check
mkdir -p .device/cuda
rm -rf .device/cuda/cubin
cp "$target/release/cuzk-gpu-check" .device/cuda/
LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUZK_CUDA_CACHE=.device/cuda/cubin \
    .device/cuda/cuzk-gpu-check --compile-only sm_90
du -sh .device/cuda
