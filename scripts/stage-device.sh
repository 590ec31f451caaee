#!/usr/bin/env bash
# Builds everything a visit to the GPU machine needs and stages it in .device/run
# (ignored): the cuzk CLI, the backend plugins, cuzk-gpu-check (stripped), and every
# kernel module compiled to CUBIN here by NVRTC from PyPI, so the device spends no
# time compiling. Then, through the device tool with carry [".device/run"]:
#
#   bash scripts/h200-run.sh "$OUT"
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/nvrtc-env.sh
target=${CARGO_TARGET_DIR:-target}
cargo build --release --workspace --bins --lib
rm -rf .device/run
mkdir -p .device/run
for f in cuzk cuzk-gpu-check "$target"/release/libcuzk_plugin_*.so; do
    cp "$target/release/$(basename "$f")" .device/run/
    strip .device/run/"$(basename "$f")"
done
CUZK_CUDA_CACHE=.device/run/cubin .device/run/cuzk-gpu-check --compile-only sm_90
# STAGE_FIELD_MUL="cios": also the modules of those field-product variants, for a
# visit that runs the A/B with CUZK_FIELD_MUL set.
for v in ${STAGE_FIELD_MUL:-}; do
    CUZK_FIELD_MUL=$v CUZK_CUDA_CACHE=.device/run/cubin .device/run/cuzk-gpu-check --compile-only sm_90
done
du -sh .device/run
