#!/usr/bin/env bash
# SnapDeals, WindowPoSt and WinningPoSt at the 32 GiB shapes on the H200 (issue 14):
# shape-only inputs (random vanilla proofs of the exact shape, `cuzk <kind> inputs
# --shape-only`), timing-only parameters made in memory, the CUDA backend
# (configs/cuda.toml). Nothing verifies (random values, random points): these are
# timings only. Three parts, each under 9 minutes, chosen by the second argument:
#
#   kinds    each kind alone (its 32 GiB shape), proved REPEAT times (default 2) on
#            one engine: bytes, time, per-stage table of each run (the first
#            uploads; KIND_TIMEOUT=300 fits a WindowPoSt's two).
#   latency  the WinningPoSt latency from submission to proof with ten 32 GiB-shape
#            PoRep sectors queued and one partition on the GPU: `cuzk bench --mix
#            porep:10,winning:1 --submit-on-gpu winning:2 --stop-after winning`
#            (the WinningPoSt is submitted at the second GPU_START, the GPU warm,
#            and the run ends as soon as it returns: the queued sectors are
#            cancelled, as ten would take ~13 minutes to drain). First with the
#            critical reserve on (CRITICAL_RESERVE_GIB, default 1: a 32 GiB
#            WinningPoSt partition and its parameters hold ~0.3 GiB; one reserved
#            synthesis slot), then, if the time left allows, with it off, for
#            contrast (each run compiles the 32 GiB R1CS, ~90-140 s, and makes
#            its parameters, ~45 s, so the second rarely fits).
#   KINDS="snap window"   only these kinds in the kinds part (default: winning window snap)
#   CONFIG=configs/cuda-profile.toml RUST_LOG=cuzk_cuda::profile=info   another engine
#            configuration (default configs/cuda.toml): with the profile one, each
#            partition's per-phase device times land in the summary
#   latency-off  only the run with the reserve off (memory and synthesis
#            slots; a ready partition still gives the GPU lock up to a critical
#            one, which has no knob).
#
# Stage first (on the dev machine): bash scripts/stage-device.sh, then run through the
# device tool with carry [".device/run"]:
#
#   bash scripts/h200-kinds.sh OUT latency      # or: OUT kinds, OUT latency-off
#
# Look in OUT/summary.txt for: (kinds) each kind's "bytes in X s" and its per-stage
# table (a WindowPoSt or SnapDeals partition's GPU time against a PoRep partition's,
# per constraint: the bar is <= 1.2x); (latency) each mix's `winning` row, latency
# from submission to proof (the bar: <= 3 s with the reserve on), and the
# `mix critical reserve:` line saying which run it is.
set -u
out=${1:?usage: h200-kinds.sh OUT kinds|latency|latency-off}
part=${2:?usage: h200-kinds.sh OUT kinds|latency|latency-off}
case "$part" in kinds | latency | latency-off) ;; *) echo "the part is kinds, latency or latency-off, not $part" >&2; exit 2 ;; esac
began=$(date +%s)
d=.device/run
work=/tmp/cuzk-kinds
rm -rf "$work" && mkdir -p "$work" "$out"
export CUZK_CUDA_CACHE=$d/cubin
sum="$out/summary.txt"
say() { echo "$@" | tee -a "$sum"; }
say "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
say "== cpus $(nproc), ram $(free -g | awk '/Mem:/{print $2}') GiB"
engine=(--config "${CONFIG:-configs/cuda.toml}" --plugin-dir $d)

if [ "$part" = kinds ]; then
    $d/cuzk post winning inputs --shape-only --proof 3 -o "$work/winning32.json" >>"$sum" 2>&1
    $d/cuzk post window inputs --shape-only --proof 13 --sectors 2349 -o "$work/wpost32.json" >>"$sum" 2>&1
    $d/cuzk snap inputs --shape-only --proof 3 -o "$work/snap32.json" >>"$sum" 2>&1
    for k in "post winning:winning32" "post window:wpost32" "snap:snap32"; do
        IFS=: read -r cmd input <<<"$k"
        case " ${KINDS:-winning window snap} " in *" ${cmd##* } "*) ;; *) continue ;; esac
        t=$(date +%s)
        # shellcheck disable=SC2086
        # Twice on one engine: the first run uploads the circuit and parameters to
        # the device; the second is the warm partition the per-constraint bar is about.
        timeout "${KIND_TIMEOUT:-170}" /usr/bin/time -v $d/cuzk $cmd -i "$work/$input.json" \
            --timing-only --repeat "${REPEAT:-2}" "${engine[@]}" >"$work/$input.txt" 2>&1
        say "== $cmd (32 GiB shape) rc=$? in $(( $(date +%s) - t )) s"
        grep -E "constraints|ready in|bytes in|^ *(stage|synthesis|spmv|prep_msm|gpu|b_g2_msm|assembly|total)|Maximum resident|error" \
            "$work/$input.txt" >>"$sum"
        grep -E "profile" "$work/$input.txt" | tail -8 >>"$sum"
    done
else
    $d/cuzk c1 --shape-only --proof StackedDrg32GiBV1_1 --sector 1 -o "$work/porep32.json" >>"$sum" 2>&1
    $d/cuzk post winning inputs --shape-only --proof 3 -o "$work/winning32.json" >>"$sum" 2>&1
    # Each run: R1CS compile (~90-140 s) and parameters (~45 s) before the clock,
    # ten sectors' circuits built, then ~15 s to the second GPU_START, the
    # WinningPoSt, and the partitions in flight finishing after the cancel.
    mix() { # name, timeout, engine flags...
        local name=$1 limit=$2
        shift 2
        local t
        t=$(date +%s)
        timeout "$limit" $d/cuzk bench --mix porep:10,winning:1 --submit-on-gpu winning:2 \
            --stop-after winning --c1 "$work/porep32.json" --winning-input "$work/winning32.json" \
            --timing-only "${engine[@]}" --synth-jobs "${SYNTH_JOBS:-3}" \
            --memory-budget-gib "${BUDGET_GIB:-100}" "$@" --out "$work/runs-$name" \
            >"$work/mix-$name.txt" 2>&1
        say "== mix porep:10,winning:1, reserve $name (32 GiB shapes) rc=$? in $(( $(date +%s) - t )) s"
        grep -E "mix|kind|porep|winning|cancel|error" "$work/mix-$name.txt" >>"$sum"
    }
    off=(--critical-reserve-gib 0 --critical-synth-slots 0)
    if [ "$part" = latency-off ]; then
        mix off "${MIX_TIMEOUT:-500}" "${off[@]}"
    else
        mix on "${MIX_TIMEOUT:-340}" --critical-reserve-gib "${CRITICAL_RESERVE_GIB:-1}" --critical-synth-slots 1
        left=$(( ${SCRIPT_LIMIT:-530} - ($(date +%s) - began) ))
        if [ "$left" -gt 280 ]; then
            mix off "$left" "${off[@]}"
        else
            say "== no time left for the run with the reserve off ($left s of ${SCRIPT_LIMIT:-530}): part latency-off"
        fi
    fi
fi
tar czf "$out/all.tgz" -C "$work" --exclude='*.json' . 2>/dev/null
say "== done $(date -u +%FT%TZ)"
