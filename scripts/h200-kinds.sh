#!/usr/bin/env bash
# SnapDeals, WindowPoSt and WinningPoSt at the 32 GiB shapes on the H200 (issue 14):
# shape-only inputs (random vanilla proofs of the exact shape, `cuzk <kind> inputs
# --shape-only`), timing-only parameters made in memory, the CUDA backend
# (configs/cuda.toml). Then the WinningPoSt latency from submission to proof with ten
# 32 GiB-shape PoRep sectors queued ahead of it (`cuzk bench --mix porep:10,winning:1`).
# Nothing verifies (random values, random points): these are timings only.
#
# Stage first (on the dev machine): bash scripts/stage-device.sh, then run through the
# device tool with carry [".device/run"]:
#
#   bash scripts/h200-kinds.sh OUT
#
# Look in OUT/summary.txt for: each kind's "bytes in X s" and its per-stage table (a
# WindowPoSt or SnapDeals partition's GPU time against a PoRep partition's, per
# constraint: the bar is <= 1.2x), and the mix's `winning` row (the bar: <= 3 s).
set -u
out=${1:?usage: h200-kinds.sh OUT}
d=.device/run
work=/tmp/cuzk-kinds
rm -rf "$work" && mkdir -p "$work" "$out"
export CUZK_CUDA_CACHE=$d/cubin
sum="$out/summary.txt"
say() { echo "$@" | tee -a "$sum"; }
say "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
say "== cpus $(nproc), ram $(free -g | awk '/Mem:/{print $2}') GiB"
engine=(--config configs/cuda.toml --plugin-dir $d)

$d/cuzk c1 --shape-only --proof StackedDrg32GiBV1_1 --sector 1 -o "$work/porep32.json" >>"$sum" 2>&1
$d/cuzk post winning inputs --shape-only --proof 3 -o "$work/winning32.json" >>"$sum" 2>&1
$d/cuzk post window inputs --shape-only --proof 13 --sectors 2349 -o "$work/wpost32.json" >>"$sum" 2>&1
$d/cuzk snap inputs --shape-only --proof 3 -o "$work/snap32.json" >>"$sum" 2>&1

for k in "post winning:winning32" "post window:wpost32" "snap:snap32"; do
    IFS=: read -r cmd input <<<"$k"
    t=$(date +%s)
    # shellcheck disable=SC2086
    timeout "${KIND_TIMEOUT:-400}" /usr/bin/time -v $d/cuzk $cmd -i "$work/$input.json" \
        --timing-only "${engine[@]}" >"$work/$input.txt" 2>&1
    say "== $cmd (32 GiB shape) rc=$? in $(( $(date +%s) - t )) s"
    grep -E "constraints|ready in|bytes in|^ *(stage|synthesis|spmv|prep_msm|gpu|b_g2_msm|assembly|total)|Maximum resident|error" \
        "$work/$input.txt" >>"$sum"
done

t=$(date +%s)
timeout "${MIX_TIMEOUT:-560}" $d/cuzk bench --mix porep:10,winning:1 --c1 "$work/porep32.json" \
    --winning-input "$work/winning32.json" --timing-only "${engine[@]}" \
    --synth-jobs "${SYNTH_JOBS:-3}" --out "$work/runs" >"$work/mix.txt" 2>&1
say "== mix porep:10,winning:1 (32 GiB shapes) rc=$? in $(( $(date +%s) - t )) s"
grep -E "mix|kind|porep|winning|error" "$work/mix.txt" >>"$sum"
tar czf "$out/all.tgz" -C "$work" --exclude='*.json' . 2>/dev/null
say "== done $(date -u +%FT%TZ)"
