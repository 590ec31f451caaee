#!/usr/bin/env bash
# What the session of 2026-12-02 (sixth) left for the next H200 visit, one part a
# device call (each under 10 minutes). Stage first (bash scripts/stage-device.sh,
# then rm -rf .device/run/pg to stay under the carry limit), then through the device
# tool with carry [".device/run"]:
#
#   SKIP_TABLE=1 SKIP_DEMO=1 bash scripts/h200-run.sh OUT
#                                           first: the device tests; tests/spmv.rs has
#                                           the new witness-by-copy test (the upload
#                                           reads the staged copy, its buffer reused)
#   bash scripts/h200-next.sh OUT copy      the 32 GiB bar with witness_staging =
#                                           "copy" (configs/cuda-copy.toml), 5 sectors:
#                                           "steady" s/proof (bar <= 15; register gave
#                                           17.98) and the GPU_START period (1.94 s)
#   bash scripts/h200-next.sh OUT porep     the same with register (configs/cuda-register.toml),
#                                           for the A/B in one visit
#   bash scripts/h200-next.sh OUT profile   2 sectors, per-phase device times and host
#                                           marks, now one per step of the enqueue
#                                           (where do its 653 ms go?)
#   bash scripts/h200-next.sh OUT window    a warm WindowPoSt partition, profiled
#                                           (9.76 s of device work on 2026-12-02, ~4.4 s
#                                           of it the streamed bases' chunk overhead)
set -u
out=${1:?usage: h200-next.sh OUT copy|porep|profile|window}
case "${2:?usage: h200-next.sh OUT copy|porep|profile|window}" in
copy)
    CONFIG=configs/cuda-copy.toml RUNS="5:6:100" BENCH_TIMEOUT=520 \
        bash scripts/h200-filecoin.sh "$out/copy"
    ;;
porep)
    CONFIG=configs/cuda-register.toml RUNS="5:6:100" BENCH_TIMEOUT=520 \
        bash scripts/h200-filecoin.sh "$out/porep"
    ;;
profile)
    RUST_LOG=cuzk_cuda::profile=info,cuzk_plugin_api::profile=info \
        CONFIG=configs/cuda-profile.toml RUNS="2:6:100" BENCH_TIMEOUT=400 \
        bash scripts/h200-filecoin.sh "$out/profile"
    ;;
window)
    RUST_LOG=cuzk_cuda::profile=info CONFIG=configs/cuda-profile.toml KINDS=window \
        REPEAT=2 KIND_TIMEOUT=400 bash scripts/h200-kinds.sh "$out/window" kinds
    ;;
*) echo "the part is copy, porep, profile or window" >&2; exit 2 ;;
esac
