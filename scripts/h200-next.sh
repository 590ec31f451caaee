#!/usr/bin/env bash
# What the sessions of 2026-12-03 left for the next H200 visit, one part a device
# call (each under 10 minutes). Stage first (bash scripts/stage-device.sh, then
# rm -rf .device/run/pg to stay under the carry limit), then through the device
# tool with carry [".device/run"]:
#
#   SKIP_TABLE=1 SKIP_DEMO=1 bash scripts/h200-run.sh OUT
#                                           first: the device tests
#   bash scripts/h200-next.sh OUT profile   2 sectors, per-phase device times and host
#                                           marks: at 11:01 the plugin's job
#                                           conversion was still 20-302 ms in the
#                                           lock; cf92a3f takes split data checked
#                                           at their staging as checked: ~0 now?
#   SCRIPT_LIMIT=200 bash scripts/h200-kinds.sh OUT latency
#                                           WinningPoSt behind ten PoRep sectors: 1.88 s
#                                           at 06:57 (bar 3 s); not run since
#                                           stage_splits (a visit cut short)
#   bash scripts/h200-next.sh OUT stream    the 32 GiB bar over 10 sectors: GPU_START
#                                           period 1427 ms at 11:42 (bar <= 1.5 s), but
#                                           synthesis-bound (16.7 s/proof); compare
#                                           the R1CS compile with 77-114 s to tell
#                                           the host's speed
#   bash scripts/h200-next.sh OUT block     the stream with host_wait = "block"
#                                           (configs/cuda-block.toml): the GPU
#                                           workers sleep instead of spinning
#                                           while the device works
#   bash scripts/h200-next.sh OUT copy      the same, 5 sectors
#   bash scripts/h200-next.sh OUT pageable  5 sectors with the split data from
#                                           pageable memory (configs/cuda-pageable.toml)
#   bash scripts/h200-next.sh OUT porep     5 sectors with register
#                                           (configs/cuda-register.toml)
#   bash scripts/h200-next.sh OUT window    a warm WindowPoSt partition, profiled: GPU
#                                           stage 6.09 s, device work 5.81 s at 06:44
set -u
out=${1:?usage: h200-next.sh OUT copy|stream|block|pageable|porep|profile|window}
case "${2:?usage: h200-next.sh OUT copy|stream|block|pageable|porep|profile|window}" in
copy)
    CONFIG=configs/cuda-copy.toml RUNS="5:6:100" BENCH_TIMEOUT=520 \
        bash scripts/h200-filecoin.sh "$out/copy"
    ;;
stream)
    CONFIG=configs/cuda-copy.toml RUNS="10:6:100" BENCH_TIMEOUT=560 \
        bash scripts/h200-filecoin.sh "$out/stream"
    ;;
block)
    CONFIG=configs/cuda-block.toml RUNS="10:6:100" BENCH_TIMEOUT=560 \
        bash scripts/h200-filecoin.sh "$out/block"
    ;;
pageable)
    CONFIG=configs/cuda-pageable.toml RUNS="5:6:100" BENCH_TIMEOUT=520 \
        bash scripts/h200-filecoin.sh "$out/pageable"
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
    RUST_LOG=cuzk_cuda::profile=info,cuzk_plugin_api::profile=info \
        CONFIG=configs/cuda-profile.toml KINDS=window \
        REPEAT=2 KIND_TIMEOUT=400 bash scripts/h200-kinds.sh "$out/window" kinds
    ;;
*) echo "the part is copy, stream, block, pageable, porep, profile or window" >&2; exit 2 ;;
esac
