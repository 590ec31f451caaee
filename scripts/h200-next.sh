#!/usr/bin/env bash
# What the sessions of 2026-12-02 (fourth, fifth: no device time) left for the next H200 visit, one part a
# device call (each under 10 minutes). Stage first (bash scripts/stage-device.sh,
# then rm -rf .device/run/pg to stay under the carry limit), then through the device
# tool with carry [".device/run"]:
#
#   SKIP_TABLE=1 SKIP_DEMO=1 bash scripts/h200-run.sh OUT
#                                           first: the device tests (tests/device.rs,
#                                           gpu.rs, spmv.rs) have not run since the
#                                           borrowed splits (5af40bc) and the gate
#   bash scripts/h200-next.sh OUT porep     the 32 GiB bar after the launch gate
#                                           (924ff91): 5 sectors, configs/cuda.toml;
#                                           look at "steady" s/proof (bar <= 15) and
#                                           the GPU_START period against 1.465 s
#   bash scripts/h200-next.sh OUT profile   2 sectors with per-phase device times and
#                                           host marks: did the hand-over go?
#   bash scripts/h200-daemon-32g.sh OUT     (PROFILE=1 SECTORS=3 LIMIT_S=560) the daemon
#                                           with 3 sectors, then EvictSRS on the GPU
#   bash scripts/h200-next.sh OUT window    a warm WindowPoSt partition, profiled: why
#                                           12.4 s of GPU stage for 125 M constraints
set -u
out=${1:?usage: h200-next.sh OUT porep|profile|window}
case "${2:?usage: h200-next.sh OUT porep|profile|window}" in
porep) RUNS="5:6:100" BENCH_TIMEOUT=520 bash scripts/h200-filecoin.sh "$out/porep" ;;
profile)
    RUST_LOG=cuzk_cuda::profile=info,cuzk_plugin_api::profile=info \
        CONFIG=configs/cuda-profile.toml RUNS="2:6:100" BENCH_TIMEOUT=400 \
        bash scripts/h200-filecoin.sh "$out/profile"
    ;;
window)
    RUST_LOG=cuzk_cuda::profile=info CONFIG=configs/cuda-profile.toml KINDS=window \
        REPEAT=2 KIND_TIMEOUT=400 bash scripts/h200-kinds.sh "$out/window" kinds
    ;;
*) echo "the part is porep, profile or window" >&2; exit 2 ;;
esac
