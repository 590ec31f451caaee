#!/usr/bin/env bash
# What the session of 2026-12-03 left for the next H200 visit, one part a device
# call (each under 10 minutes). Stage first (bash scripts/stage-device.sh, then
# rm -rf .device/run/pg to stay under the carry limit), then through the device
# tool with carry [".device/run"]:
#
#   SKIP_TABLE=1 SKIP_DEMO=1 bash scripts/h200-run.sh OUT
#                                           first: the device tests
#   bash scripts/h200-next.sh OUT window    a warm WindowPoSt partition, profiled: its
#                                           GPU stage was 9.1-9.5 s for 6.7 s of device
#                                           work; the split check now runs on the cores
#                                           (~0.8 s of the gap, BENCHMARKS.md): how much
#                                           of the rest is left?
#   bash scripts/h200-next.sh OUT copy      the 32 GiB bar, 5 sectors, witness staging
#                                           by copy (the default now): 15.06 s/proof
#                                           steady on 2026-12-03 (bar <= 15), before
#                                           split data went through pinned memory
#   bash scripts/h200-next.sh OUT pageable  the same with the split data uploaded from
#                                           pageable memory (configs/cuda-pageable.toml):
#                                           the A/B of split_upload
#   bash scripts/h200-next.sh OUT porep     the same with register
#                                           (configs/cuda-register.toml): 17.28
#   bash scripts/h200-next.sh OUT profile   2 sectors, per-phase device times and host
#                                           marks: where the ~65 ms a partition between
#                                           the device work (1.465 s) and the period
#                                           (1.53 s) go
#   SCRIPT_LIMIT=200 bash scripts/h200-kinds.sh OUT latency
#                                           WinningPoSt behind ten PoRep sectors with
#                                           copy staging: 2.50 s on 2026-12-03 (bar 3 s;
#                                           register gave 1.04)
set -u
out=${1:?usage: h200-next.sh OUT copy|pageable|porep|profile|window}
case "${2:?usage: h200-next.sh OUT copy|pageable|porep|profile|window}" in
copy)
    CONFIG=configs/cuda-copy.toml RUNS="5:6:100" BENCH_TIMEOUT=520 \
        bash scripts/h200-filecoin.sh "$out/copy"
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
*) echo "the part is copy, pageable, porep, profile or window" >&2; exit 2 ;;
esac
