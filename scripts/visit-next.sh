#!/usr/bin/env bash
# What the GPU machine has still to run for issues 33, 34 and 36, one device call
# per step (each fits the 10-minute limit). Stage first (scripts/stage-device.sh),
# then through the device tool with carry [".device/pack"], the first call of a
# visit starting with `(cd .device && rm -rf run && tar -xJf pack/run.tar.xz) &&`
# (later calls on the warm machine find .device/run there).
#
# Run on the H100 on 2026-12-07 (BENCHMARKS.md): steps 1 (all pass, the 2^20
# two-H-buffer check included), 2 and 5 (the wgpu stream did not start then: fixed
# since), and 8 and 9 under a plan made while the card was still held (so again).
# Run on the H100's fifth visit (2026-12-07 14:45-15:20 UTC): 10 (the knob it
# compared lost and left the code), 8 and 9 (JOBS=2 NI_JOBS=1; both streams again
# under a host-only plan: `cuzk plan` without --config planned no device, fixed
# since). Still to run, in this order: 8 and 9 with the card's plan (JOBS=2
# NI_JOBS=1 on a short visit), 5 (the wgpu NTT bench times the resident transform
# with u64 and with 16-bit word products side by side; to time the Fr product as a
# loop against b123dc1's written-out one in the same visit, build the wgpu bench
# at 2b65ac1 too and stage with WGPU_BASE_BENCH=that binary; on a short visit:
# WGPU_TESTS="fr ntt" WGPU_SKIP="msm stream"
# CUDA_TABLE_SKIP=field-bench,g2-bench,h-bench,msm-bench,spmv-bench,partition-bench),
# 4, 6 and 3. The sixth visit (2026-12-07 19:14 UTC) ran step 8's PoRep stream on
# the card's plan (19.0 s/proof steady, BENCHMARKS.md) and started the NI stream,
# but the session's device time ran out before it ended: 8 (JOBS=2 NI_JOBS=1)
# and 9 again first. Call only when a visit is likely: refused calls cost device time.
#
# The seventh visit (2026-12-07 23:15 UTC, H100) ran 1 on `a1f7240` (every check
# passes, the split queries streaming in chunks of their own) and 12 (the 16 GiB
# cell's partitions 5.25 -> 3.20 s of device time; `9499f21`'s cell timed out
# after 8 partitions, so only per-partition figures compare). Still to run, in
# this order: the 16 GiB cell's steady rate on this build (step 2 with
# DEVICE_GIB=16: the bar is 1.3x the full card's 19.0 s/proof), then
# `ni-device.sh OUT start` and `wait` (NI_JOBS=1; the sixth visit's PoRep stream,
# same card and plan, is its baseline, or step 8 on an H200), 5 (short, as above),
# 11, 4, 6, 3. Step 12 carries an earlier build's pack as .device/pack/base.tar.xz;
# the first call unpacks both: `(cd .device && rm -rf run base b && tar -xJf
# pack/run.tar.xz && mkdir b && tar -xJf pack/base.tar.xz -C b && mv b/run base &&
# rmdir b)`, and its cells need CELL_TIMEOUT >= 330 with profiling on.
#
#   bash scripts/visit-next.sh OUT 1   # device tests: the per-instance tuning (two
#                                      # backends, one profiling) and every kernel
#                                      # against the CPU after the refactor
#   bash scripts/visit-next.sh OUT 2   # table: 16 and 80 GiB cards, 125 GiB host
#   bash scripts/visit-next.sh OUT 3   # table: 24, 32 and 48 GiB cards
#   bash scripts/visit-next.sh OUT 4   # 64 GiB host with mapped parameters
#                                      # (points files), 16 and 80 GiB cards
#   bash scripts/visit-next.sh OUT 5   # issue 36: the wgpu backend on the NVIDIA
#                                      # driver's Vulkan (tests, MSM and NTT at 2^24,
#                                      # a 2^24 stream) beside CUDA's kernel table
#   bash scripts/visit-next.sh OUT 6   # issue 34: SnapDeals at 32 GiB with the
#                                      # native witness (is it GPU-bound now?)
#   bash scripts/visit-next.sh OUT 7   # issue 33: the 2^27 partition rows of
#                                      # cuzk-gpu-check only (resident, streamed in
#                                      # 2^22 chunks, a 16 GiB card's own placement,
#                                      # each profiled phase by phase)
#   bash scripts/visit-next.sh OUT 8   # issue 35: the 32 GiB PoRep stream, then the
#                                      # NI-PoRep stream started in the background
#   bash scripts/visit-next.sh OUT 9   # issue 35: wait for the NI stream (call again
#                                      # while it runs), then SnarkPack over 8192 proofs
#   bash scripts/visit-next.sh OUT 10  # step 7 with the 8192-proof SnarkPack bench
#                                      # beside it (the GPU's rows, the host's cores)
#   bash scripts/visit-next.sh OUT 12  # issue 33: the 16 GiB cell, profiled, with an
#                                      # earlier build (.device/base) and this one
#   bash scripts/visit-next.sh OUT 11  # issues 33 and 34: the 16 and 80 GiB cells of
#                                      # step 2, one sector each, with every engine
#                                      # partition's device phases profiled (where the
#                                      # 16 GiB card's 6.3 s and the 80 GiB card's
#                                      # 0.3 s over the pre-staged row go)
#
# Record each number in BENCHMARKS.md with the card it ran on (H100 or H200) and
# the full-card cell of the same visit as its baseline.
set -u
out=${1:?usage: visit-next.sh OUT STEP}
step=${2:?usage: visit-next.sh OUT STEP}
cd "$(dirname "$0")/.."
case $step in
1) SKIP_TABLE=1 SKIP_DEMO=1 bash scripts/h200-run.sh "$out/dev" ;;
2) DEVICE_GIB="16 80" HOST_GIB=125 CORES=16 JOBS=2 CELL_TIMEOUT=270 bash scripts/gpu-table.sh "$out/t2" ;;
3) DEVICE_GIB="24 32 48" HOST_GIB=125 CORES=16 JOBS=1 CELL_TIMEOUT=180 bash scripts/gpu-table.sh "$out/t3" ;;
4) POINTS_DIR=/tmp/cuzk-points DEVICE_GIB="80 16" HOST_GIB=64 CORES=16 JOBS=1 \
    CELL_TIMEOUT=270 bash scripts/gpu-table.sh "$out/t4" ;;
5) bash scripts/wgpu-device.sh "$out/wgpu" ;;
6) KINDS=snap REPEAT=3 KIND_TIMEOUT=420 bash scripts/h200-kinds.sh "$out/snap" kinds ;;
7) timeout 420 .device/run/cuzk-gpu-check "$out/part" --table-only \
    --skip field-bench,g2-bench,h-bench,msm-bench,ntt-bench,spmv-bench >"$out/part.txt" 2>&1
    echo "== partition rows rc=$?"; grep -E "^\||profile|phase|error|Error" "$out/part.txt" | head -60 ;;
8) bash scripts/ni-device.sh "$out/ni" porep && bash scripts/ni-device.sh "$out/ni" start ;;
9) bash scripts/ni-device.sh "$out/ni" wait && [ -e /tmp/cuzk-ni/ni.done ] && AGG_PROOFS=8192 bash scripts/ni-device.sh "$out/ni" agg ;;
10) AGG_PROOFS=8192 bash scripts/ni-device.sh "$out/ni" agg >"$out/agg-bg.txt" 2>&1 &
    bash "$0" "$out" 7
    wait; cat "$out/agg-bg.txt" ;;
11) EXTRA_PARAMS="profile = true" DEVICE_GIB="16 80" HOST_GIB=125 CORES=16 JOBS=1 \
    CELL_TIMEOUT=270 bash scripts/gpu-table.sh "$out/t11" ;;
12) # The 16 GiB cell, profiled, with the binaries of two builds: .device/base (the
    # pack of an earlier commit, unpacked there by the first call) against .device/run.
    for b in base run; do
        RUN_DIR=.device/$b EXTRA_PARAMS="profile = true" DEVICE_GIB=16 HOST_GIB=125 CORES=16 \
            JOBS=1 CELL_TIMEOUT=330 bash scripts/gpu-table.sh "$out/t12-$b"
    done ;;
*) echo "step is 1 to 12" >&2; exit 2 ;;
esac
