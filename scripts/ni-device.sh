#!/usr/bin/env bash
# Issue 35 on the GPU machine: the 32 GiB NI-PoRep stream against the 32 GiB PoRep
# stream on the same card and plan (the bar: NI s/proof <= 126/10 x PoRep s/proof x
# 1.05), and SnarkPack's CPU aggregation of 65 NI-PoRep sectors (65 x 126 partition
# proofs, padded to 8192) on that host's cores: filecoin-proofs' own
# `aggregate_seal_commit_proofs` path, the one cuzk calls, through the timing-only
# SRS. Shape-only C1 outputs and timing-only parameters: timings, nothing verifies.
#
# An NI sector is 126 partitions (~4 minutes of GPU on an H100), so a stream of two
# outlasts one 10-minute call. The parts, each one device call on a warm machine:
#
#   bash scripts/ni-device.sh OUT porep    # the PoRep stream (JOBS, default 3)
#   bash scripts/ni-device.sh OUT start    # the NI stream (NI_JOBS, default 2), in a
#                                          # new session (setsid) so it outlives the call
#   bash scripts/ni-device.sh OUT wait     # waits (up to WAIT_S, default 560 s) for it,
#                                          # then its summary; call again if unfinished
#   bash scripts/ni-device.sh OUT agg      # the aggregation bench at 8192 and 128 proofs
#                                          # (AGG_PROOFS: the counts)
#
# Stage first (scripts/stage-device.sh; it stages the aggregate bench as
# .device/run/bench-aggregate). Each part appends to OUT/summary.txt.
set -u
out=${1:?usage: ni-device.sh OUT porep|start|wait|agg}
part=${2:?usage: ni-device.sh OUT porep|start|wait|agg}
cd "$(dirname "$0")/.."
d=.device/run
work=/tmp/cuzk-ni
mkdir -p "$work" "$out"
export CUZK_CACHE_DIR=/tmp/cuzk-cache
sum=$out/summary.txt
say() { echo "$@" | tee -a "$sum"; }
say "== $part $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader) cpus $(nproc)"

# The plan for this machine (the planner reads the card and the host), shared by
# both streams so that they run with the same knobs. Both H100 visits of 2026-12-07
# ran with a host-only plan (41.9 s/proof expected against 15.7): `cuzk plan` with
# no --config planned the embedded default's CPU backend, which drives no device,
# and wrote it into a CUDA configuration. `cuzk plan` now asks the CUDA backend
# when no --config is given (so none here: cuda.toml gives synth_jobs and the
# workers, which would win over the plan). The planner takes
# the card's free memory as it finds it, so wait until the card is idle too, and
# say what the plan saw.
plan() {
    [ -s "$work/plan.toml" ] && return 0
    local i used
    for i in $(seq 60); do
        used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1)
        [ "${used:-0}" -lt 2048 ] && break
        sleep 1
    done
    say "card memory used before planning: ${used:-?} MiB (waited ${i} s)"
    $d/cuzk plan --kind porep >"$work/plan-described.txt" 2>&1
    grep -E "planning for|device:|host:|expected" "$work/plan-described.txt" | tee -a "$sum"
    $d/cuzk plan --kind porep --toml >"$work/plan.toml" 2>"$work/plan.txt" ||
        { say "plan failed: $(tail -1 "$work/plan.txt")"; cp configs/cuda.toml "$work/plan.toml"; }
    head -1 "$work/plan.toml" | tee -a "$sum"
}

# stream NAME PROOF JOBS: a shape-only C1 of the proof, then its stream.
stream() {
    local name=$1 proof=$2 jobs=$3
    plan
    $d/cuzk c1 --shape-only --proof "$proof" --sector 1 -o "$work/$name.json" >"$work/$name-c1.txt" 2>&1 ||
        { say "$name: shape-only C1 failed: $(tail -1 "$work/$name-c1.txt")"; return 1; }
    local t=$(date +%s)
    /usr/bin/time -v $d/cuzk bench --config "$work/plan.toml" --plugin-dir $d \
        --c1 "$work/$name.json" --timing-only --jobs "$jobs" --out "$work/runs-$name" >"$work/$name.txt" 2>&1
    echo "rc=$? in $(($(date +%s) - t)) s" >>"$work/$name.txt"
}

summary() {
    local name=$1
    say "-- $name: $(tail -1 "$work/$name.txt")"
    grep -E "s/proof|busy|partition\(s\)|Maximum resident|error|aggregat" "$work/$name.txt" | head -12 | tee -a "$sum"
    cp "$work/$name.txt" "$out/$name.log"
}

case $part in
porep)
    stream porep StackedDrg32GiBV1_1 "${JOBS:-3}"
    summary porep
    ;;
start)
    rm -f "$work/ni.done" "$work/ni.txt"
    setsid bash -c "$(declare -f plan stream say); d=$d work=$work sum=$work/bg-summary.txt; export CUZK_CACHE_DIR; \
        stream ni StackedDrg32GiBV1_2_Feat_NonInteractivePoRep ${NI_JOBS:-2}; touch $work/ni.done" \
        </dev/null >"$work/ni-bg.txt" 2>&1 &
    sleep 5
    say "NI stream started in the background (pid $!)"
    ;;
wait)
    t=$(date +%s)
    while [ ! -e "$work/ni.done" ] && [ $(($(date +%s) - t)) -lt "${WAIT_S:-560}" ]; do sleep 5; done
    if [ -e "$work/ni.done" ]; then
        summary ni
    else
        say "NI stream still running after $(($(date +%s) - t)) s: $(grep -c 'partition' "$work/ni.txt" 2>/dev/null) lines so far"
        tail -3 "$work/ni.txt" | tee -a "$sum"
    fi
    ;;
agg)
    for n in ${AGG_PROOFS:-8192 128}; do
        t=$(date +%s)
        BENCH_PROOFS=$n timeout 400 $d/bench-aggregate --bench --warm-up-time 1 --measurement-time 1 \
            --sample-size 10 >"$work/agg-$n.txt" 2>&1
        say "-- aggregate of $n proofs: rc=$? in $(($(date +%s) - t)) s"
        grep -E "SRS|first aggregate|time:" "$work/agg-$n.txt" | tee -a "$sum"
        cp "$work/agg-$n.txt" "$out/agg-$n.log"
    done
    ;;
*) echo "the part is porep, start, wait or agg" >&2; exit 2 ;;
esac
