#!/usr/bin/env bash
# Issue #17: the multi-GPU engine on a two-H200 host (device kind nvidia-h200-x2), in
# one call. Stage first on the dev machine (bash scripts/stage-device.sh), then run
# through the device tool with carry [".device/run"]:
#
#   bash scripts/h200-x2.sh OUT
#   JOBS=4 SYNTH=8 BUDGET=200 PROOF=StackedDrg32GiBV1_1   (the defaults)
#   SKIP_CHECK=1 leaves the per-device gpu-check out; SKIP_2K=1 the real 2 KiB C2.
#
# 1. Correctness, each GPU by ordinal: cuzk-gpu-check --device N --quick --no-bench
#    and the device test suite (tests/gpu, which opens device 0) run once per device
#    with CUDA_VISIBLE_DEVICES=N, so each device is the one under test.
# 2. A real 2 KiB sector (cuzk params gen, cuzk c1, cuzk c2 with devices = [0, 1]),
#    verified by cuzk (filecoin-proofs' verifier) and by cuzk c2 verify; then four
#    such sectors through cuzk bench on both devices, every proof verified, and the
#    GPU_END events of its TIMELINE counted per device.
# 3. Scaling: JOBS shape-only 32 GiB sectors with timing-only parameters through the
#    engine on one GPU (devices = [0]) then on both (devices = [0, 1]), same C1,
#    same knobs: s/proof, each GPU's busy %, per-partition synthesis, peak RSS
#    (/usr/bin/time), and the waterfall (in OUT/all.tgz). The summary says whether
#    the two-GPU run was synthesis-bound (GPUs idle with nothing ready).
#
# On the ONE-H200 machine (kind nvidia-h200) the same engine path runs with the
# device list given explicitly: ONE_GPU=1 bash scripts/h200-x2.sh OUT runs steps
# 1-3 on devices = [0] only.
set -u
out=${1:?usage: h200-x2.sh OUT}
d=.device/run
work=/tmp/cuzk-x2
rm -rf "$work" && mkdir -p "$work" "$out"
export CUZK_CUDA_CACHE=$d/cubin
export CUZK_CACHE_DIR=/tmp/cuzk-cache
proof=${PROOF:-StackedDrg32GiBV1_1}
jobs=${JOBS:-4}
sj=${SYNTH:-8}
budget=${BUDGET:-200}
sum="$out/summary.txt"
: >"$sum"
failed=0
say() { echo "$@" | tee -a "$sum"; }
# run NAME TIMEOUT COMMAND...: output in $work/NAME.log, a verdict line in the summary.
run() {
    local name=$1 limit=$2 t rc
    shift 2
    t=$(date +%s)
    timeout "$limit" "$@" >"$work/$name.log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || failed=1
    say "== $name rc=$rc in $(($(date +%s) - t)) s"
    return "$rc"
}
# config DEVICES: configs/cuda-devices.toml with `devices = [DEVICES]`.
config() {
    local f="$work/cuda-$(echo "$1" | tr -d ' ,')".toml
    sed "s/^devices = .*/devices = [$1]/" configs/cuda-devices.toml >"$f"
    echo "$f"
}
say "== $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee -a "$sum"
say "== cpus $(nproc), ram $(free -g | awk '/Mem:/{print $2}') GiB"
if [ -n "${ONE_GPU:-}" ]; then gpus=(0); all="0"; else gpus=(0 1); all="0, 1"; fi

# 1. Each device, by ordinal.
if [ -z "${SKIP_CHECK:-}" ]; then
    for g in "${gpus[@]}"; do
        run "gpu-check-$g" 300 $d/cuzk-gpu-check "$work/check-$g" --device "$g" --quick --no-bench
        grep -E "device:|FAIL|aborted|checks," "$work/check-$g/gpu-check.log" >>"$sum"
        run "gpu-tests-$g" 200 env CUDA_VISIBLE_DEVICES="$g" $d/tests/gpu --test-threads=1
        grep -E "skipped|panicked|test result" "$work/gpu-tests-$g.log" >>"$sum"
    done
fi

# 2. A real 2 KiB sector, partitions on every listed device, verified.
if [ -z "${SKIP_2K:-}" ]; then
    pc="$work/params"
    mkdir -p "$pc"
    run params-2k 300 $d/cuzk params gen --proof StackedDrg2KiBV1_1 --param-cache "$pc"
    run c1-2k 300 $d/cuzk c1 --proof StackedDrg2KiBV1_1 --param-cache "$pc" -o "$work/c1-2k.json"
    cfg=$(config "$all")
    # A 2 KiB sector is one partition: `cuzk c2` proves it on one of the devices;
    # four sectors through the engine (cuzk bench --c1, real parameters, every proof
    # verified) put partitions on both.
    run c2-2k 300 $d/cuzk c2 "$work/c1-2k.json" --param-cache "$pc" --config "$cfg" \
        --plugin-dir $d --timeline-stderr -o "$work/proof-2k.bin"
    grep -iE "verif|error" "$work/c2-2k.log" | tail -3 >>"$sum"
    run verify-2k 120 $d/cuzk c2 verify "$work/c1-2k.json" --param-cache "$pc" --proof "$work/proof-2k.bin"
    tail -2 "$work/verify-2k.log" >>"$sum"
    run bench-2k 300 $d/cuzk bench --config "$cfg" --plugin-dir $d --c1 "$work/c1-2k.json" \
        --param-cache "$pc" --jobs 4 --out "$work/runs-2k"
    grep -E "s/proof|busy|verified|error" "$work/bench-2k.log" >>"$sum"
    for g in "${gpus[@]}"; do
        say "   2 KiB partitions proven on device $g: $(cat "$work"/runs-2k/*/timeline* 2>/dev/null | grep -E "GPU_END" | grep -cE "(\"device\": ?$g[,}]| d=$g( |$))")"
    done
fi

# 3. Scaling: the same sectors on one GPU, then on both.
run c1-shape 300 $d/cuzk c1 --shape-only --proof "$proof" --sector 1 -o "$work/c1.json"
lists=("0")
[ -n "${ONE_GPU:-}" ] || lists+=("0, 1")
for devs in "${lists[@]}"; do
    name="bench-devices-$(echo "$devs" | tr -d ' ,')"
    cfg=$(config "$devs")
    run "$name" "${BENCH_TIMEOUT:-560}" /usr/bin/time -v $d/cuzk bench --config "$cfg" \
        --plugin-dir $d --c1 "$work/c1.json" --timing-only --jobs "$jobs" \
        --synth-jobs "$sj" --memory-budget-gib "$budget" --out "$work/runs-$name"
    say "-- devices = [$devs], $jobs sectors of $proof, synth_jobs=$sj"
    grep -E "s/proof|busy|idle|starved|^ *(stage|synthesis|spmv|prep_msm|gpu|b_g2_msm|assembly|queue|lock|budget)|Maximum resident|error" \
        "$work/$name.log" >>"$sum"
done
say "== synthesis-bound? In the devices = [0, 1] run, a GPU whose idle time is mostly"
say "   'starved' (nothing ready) rather than 'ready' is waiting for synthesis."
tar czf "$out/all.tgz" -C "$work" --exclude params . 2>/dev/null
say "== done $(date -u +%FT%TZ), failed=$failed"
exit "$failed"
