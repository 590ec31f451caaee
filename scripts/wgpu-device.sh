#!/usr/bin/env bash
# Issue 36 on the GPU machine: the wgpu backend on the NVIDIA driver's Vulkan, and
# the CUDA backend's kernel table in the same visit (the ratio the issue asks for:
# G1 MSM and Fr NTT at 2^24 within 3x of CUDA, same card). Stage first
# (scripts/stage-device.sh), leave .device/run/tests and .device/run/pg out of the
# carry (the 64 MiB limit), then through the device tool with carry [".device/run"]:
#
#   bash scripts/wgpu-device.sh OUT
#
# Steps: the Vulkan loader and ICD (scripts/device-vulkan.sh); the wgpu tests
# (fields, NTT, MSM, whole partitions against the CPU backend) on the NVIDIA
# adapter; the MSM bench at 2^20 and 2^24 and the NTT/H bench at 2^24; a short
# PoRep-shaped stream through the plugin beside the CUDA plugin's; the CUDA
# kernel table. Each step's output is in OUT/NAME.log, a summary in
# OUT/summary.txt.
set -u
out=${1:?usage: wgpu-device.sh OUT}
d=.device/run
w=$d/wgpu
mkdir -p "$out"
sum=$out/summary.txt
: >"$sum"
export CUZK_CACHE_DIR=/tmp/cuzk-cache
say() { echo "$@" | tee -a "$sum"; }
step() {
    local name=$1 limit=$2
    shift 2
    local t=$(date +%s)
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    say "== $name: rc=$rc in $(($(date +%s) - t)) s"
}
say "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
source scripts/device-vulkan.sh 2>&1 | tee -a "$sum"
# The adapter must be the NVIDIA card, not a software one.
export CUZK_WGPU_ADAPTER=${CUZK_WGPU_ADAPTER:-NVIDIA}
# WGPU_TESTS: which test binaries (all four by default); WGPU_SKIP: steps left out
# (any of msm, stream, table) on a short visit.
skip() { case " ${WGPU_SKIP:-} " in *" $1 "*) return 0 ;; esac; return 1; }
for t in ${WGPU_TESTS:-fr ntt msm backend}; do
    [ -x "$w/test-$t" ] && step "test-$t" 90 "$w/test-$t" --test-threads=1
    grep -E "adapter|test result|panicked" "$out/test-$t.log" | head -4 >>"$sum"
done
skip msm || for n in 20 24; do
    # Ten samples (criterion's least): at 2^24 one call took 3.1 s on the H100.
    BENCH_NPOW=$n BENCH_BLST=0 step "bench-msm-$n" 150 "$w/bench-msm" --bench \
        --warm-up-time 1 --measurement-time 1 --sample-size 10
    grep -E "adapter|time:|disagrees" "$out/bench-msm-$n.log" >>"$sum"
done
BENCH_NPOW=24 step bench-ntt-24 150 "$w/bench-wgpu" --bench --warm-up-time 1 --measurement-time 5
grep -E "adapter|time:|^2\^24/" "$out/bench-ntt-24.log" >>"$sum"
# A second NTT bench binary staged beside it (bench-wgpu-base: the build before a
# kernel change, staged by WGPU_BASE_BENCH=PATH scripts/stage-device.sh), its
# resident transforms only: the two builds on the same card in the same visit.
if [ -x "$w/bench-wgpu-base" ]; then
    BENCH_NPOW=24 step bench-ntt-24-base 150 "$w/bench-wgpu-base" --bench --warm-up-time 1 \
        --measurement-time 5 resident
    grep -E "adapter|time:|^fft" "$out/bench-ntt-24-base.log" >>"$sum"
fi
skip stream || for b in wgpu cuda; do
    step "stream-$b" 120 $d/cuzk bench --config configs/$b.toml --plugin-dir $d --circuit porep \
        --log 24 --timing-only --jobs 2 --partitions 4 --out "$out/runs-$b"
    grep -E "s/proof|busy|^gpu " "$out/stream-$b.log" >>"$sum"
done
skip table || step cuda-table 150 $d/cuzk-gpu-check "$out/cuda-table" --table-only \
    ${CUDA_TABLE_SKIP:+--skip $CUDA_TABLE_SKIP}
cat "$out/cuda-table/table.md" >>"$sum" 2>/dev/null
cat "$sum"
