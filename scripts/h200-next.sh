#!/usr/bin/env bash
# What the sessions of 2026-12-03 left for the next H200 visit, one part a device
# call (each under 10 minutes). Stage first (bash scripts/stage-device.sh, then
# rm -rf .device/run/pg to stay under the carry limit), then through the device
# tool with carry [".device/run"]:
#
#   SKIP_TABLE=1 SKIP_DEMO=1 bash scripts/h200-run.sh OUT
#                                           first: the device tests (all passed at
#                                           20:13 on 2026-12-03, 2fb7a80)
#   bash scripts/h200-next.sh OUT stream    the 32 GiB stream, 10 sectors: GPU-bound at
#                                           14.22 s/proof over partitions 6-100 at
#                                           20:18 (2fb7a80, synthesis p50 631 ms,
#                                           456% CPU); rerun after changes to
#                                           synthesis, prep_msm or the backend
#   bash scripts/h200-next.sh OUT profile   2 sectors, per-phase device times and host
#                                           marks: device work 1410 ms a partition,
#                                           job conversion 0.00 ms (16:48)
#   bash scripts/h200-next.sh OUT window    a warm WindowPoSt partition, profiled: GPU
#                                           stage 5.8 s, synthesis 1.45 s, 10.6 s
#                                           submission to proof (20:17, 2fb7a80)
#   SCRIPT_LIMIT=200 bash scripts/h200-kinds.sh OUT latency
#   SCRIPT_LIMIT=200 bash scripts/h200-kinds.sh OUT latency-off
#                                           WinningPoSt behind ten PoRep sectors,
#                                           critical reserve on / off (each part
#                                           ~150 s): 1.68 / 1.77 s at 16:45, 1.95 /
#                                           1.83 s at 17:38, 0.87 s (on) at 20:23
#                                           (bar 3 s); partly decided by where in a
#                                           PoRep partition's GPU stage it lands
#   bash scripts/h200-next.sh OUT block     the stream with host_wait = "block": 14.30
#                                           s/proof (5 sectors, 14:43), no better
#                                           than auto while GPU-bound
#   bash scripts/h200-next.sh OUT copy      the stream's settings, 5 sectors
#   bash scripts/h200-next.sh OUT pageable  5 sectors with the split data from
#                                           pageable memory (configs/cuda-pageable.toml)
#   bash scripts/h200-next.sh OUT porep     5 sectors with register
#                                           (configs/cuda-register.toml)
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
