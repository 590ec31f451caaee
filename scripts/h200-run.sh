#!/usr/bin/env bash
# One visit to the H200 (see scripts/stage-device.sh): every GPU correctness check and
# kernel benchmark (cuzk-gpu-check), the PoRep-shaped partition's GPU region, the demo
# through the cuda plugin, and the engine sweep of issue 4 (GPU busy at several knob
# settings). Everything lands in OUT: summary.txt (the parts worth reading) and
# all.tgz (every log, timeline, waterfall and manifest).
#
#   bash scripts/h200-run.sh OUT [gpu-check args...]
#   SWEEP="22:4:10:2:2 24:2:10:3:2"  log:jobs:partitions:synth_jobs:gpu_workers[:config],
#                                    space-separated (config: configs/cuda.toml by default)
#   AB="configs/cuda.toml configs/cuda-g2.toml 22 2 10 3"  cuzk ab A B at 2^log, jobs,
#                                    partitions, rounds
set -u
out=${1:?usage: h200-run.sh OUT [gpu-check args]}
shift
d=.device/run
work=/tmp/cuzk-visit
rm -rf "$work" && mkdir -p "$work" "$out"
export CUZK_CUDA_CACHE=$d/cubin CUZK_CACHE_DIR=/tmp/cuzk-cache
sum="$out/summary.txt"
say() { echo "$@" | tee -a "$sum"; }
say "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
say "== cpus $(nproc), ram $(free -g | awk '/Mem:/{print $2}') GiB"

if [ -z "${SKIP_CHECK:-}" ]; then
    t=$(date +%s)
    timeout "${CHECK_TIMEOUT:-360}" $d/cuzk-gpu-check "$work/check" "$@" >"$work/gpu-check.out" 2>&1
    say "== gpu-check rc=$? in $(( $(date +%s) - t )) s"
    grep -E "FAIL|aborted|checks,|BENCH|partition 2\^" "$work/check/gpu-check.log" | tee -a "$sum" >/dev/null
    cat "$work/check/table.md" >>"$sum" 2>/dev/null
fi

if [ -z "${SKIP_DEMO:-}" ]; then
    timeout 120 $d/cuzk demo --backend cuda --plugin-dir $d >"$work/demo-cuda.txt" 2>&1
    say "== demo --backend cuda rc=$?"
    grep -iE "identical|verif|error" "$work/demo-cuda.txt" | head -8 >>"$sum"
fi

for s in ${SWEEP:-}; do
    IFS=: read -r lg jobs parts sj gw cfg <<<"$s"
    cfg=${cfg:-configs/cuda.toml}
    t=$(date +%s)
    timeout "${BENCH_TIMEOUT:-150}" $d/cuzk bench --config "$cfg" --plugin-dir $d \
        --circuit porep --log "$lg" --timing-only --jobs "$jobs" --partitions "$parts" \
        --synth-jobs "$sj" --gpu-workers "$gw" --out "$work/runs" \
        >"$work/bench-$lg-$jobs-$parts-$sj-$gw.txt" 2>&1
    rc=$?
    say "== bench $cfg 2^$lg ${jobs}x$parts synth_jobs=$sj gpu_workers=$gw rc=$rc in $(( $(date +%s) - t )) s"
    grep -E "s/proof|busy|^(synthesis|spmv|prep_msm|gpu|b_g2_msm) " "$work/bench-$lg-$jobs-$parts-$sj-$gw.txt" >>"$sum"
done

if [ -n "${AB:-}" ]; then
    read -r a b lg jobs parts rounds <<<"$AB"
    t=$(date +%s)
    timeout "${AB_TIMEOUT:-200}" $d/cuzk ab "$a" "$b" --circuit porep --log "$lg" \
        --timing-only --jobs "$jobs" --partitions "$parts" --rounds "$rounds" --out "$work/runs" \
        >"$work/ab.txt" 2>&1
    say "== ab $a vs $b 2^$lg ${jobs}x$parts rounds=$rounds rc=$? in $(( $(date +%s) - t )) s"
    tail -15 "$work/ab.txt" >>"$sum"
fi

tar czf "$out/all.tgz" -C "$work" . 2>/dev/null
ls -la "$out"
