#!/usr/bin/env bash
# Filecoin PoRep C2 at the 32 GiB shape on the H200: several sectors through the
# pipelined engine with the CUDA backend (configs/cuda.toml) and timing-only
# parameters (random points of the real sizes: 44 GiB made in memory, no download).
# The sectors' C1 output is shape-only (`cuzk c1 --shape-only`): vanilla proofs of the
# exact 32 GiB shape (10 partitions x 18 challenges, 11 layers, trees 8-8-0) filled
# with random values, so synthesis runs every real SHA-256 and Poseidon gadget on
# real-sized inputs; the proofs do not verify (and are not checked).
#
# Stage first (on the dev machine): bash scripts/stage-device.sh, then run through the
# device tool with carry [".device/run"]:
#
#   bash scripts/h200-filecoin.sh OUT
#   RUNS="2:2:60 3:2:80"   jobs:synth_jobs:memory_budget_gib, space-separated
#   PROOF=StackedDrg64GiBV1_1   another shape (default StackedDrg32GiBV1_1)
#   CONFIG=configs/cuda-profile.toml   another engine configuration (default
#                        configs/cuda.toml); FLAGS="--abc-on-backend false" more flags
#   RUST_LOG=cuzk_cuda::profile=info    with the profile configuration: each
#                        partition's per-phase device times (the last ones land in
#                        summary.txt, all of them in the bench log in all.tgz)
#
# Reports, per run, in OUT/summary.txt: s/proof, GPU busy %, the per-stage table
# (per-partition synthesis, spmv, prep_msm, GPU and b_g2_msm times), peak RSS (the bar:
# <= 110 GiB of the host's 128), and the R1CS compile time and size. Everything else
# (TIMELINEs, waterfalls, manifests) lands in OUT/all.tgz.
set -u
out=${1:?usage: h200-filecoin.sh OUT}
d=.device/run
work=/tmp/cuzk-filecoin
rm -rf "$work" && mkdir -p "$work" "$out"
export CUZK_CUDA_CACHE=$d/cubin
proof=${PROOF:-StackedDrg32GiBV1_1}
sum="$out/summary.txt"
say() { echo "$@" | tee -a "$sum"; }
say "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
say "== cpus $(nproc), ram $(free -g | awk '/Mem:/{print $2}') GiB"

# watch_bench PID LIMIT PREFIX: waits for the bench, sampling host memory every 5 s
# into PREFIX-mem.txt; past LIMIT seconds it writes where each of cuzk's threads
# waits (PREFIX-threads.txt: name, state, kernel wait channel) and kills it (rc 124),
# so a hung run says where it hung.
watch_bench() {
    local pid=$1 limit=$2 prefix=$3 start
    start=$(date +%s)
    while kill -0 "$pid" 2>/dev/null; do
        if (( $(date +%s) - start >= limit )); then
            local c
            for c in $(pgrep -P "$pid") "$pid"; do
                for t in /proc/"$c"/task/*; do
                    echo "$(cat "$t/comm" 2>/dev/null) $(awk '{print $3}' "$t/stat" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null)"
                done
            done | sort | uniq -c | sort -rn >"$prefix-threads.txt"
            pkill -P "$pid"; kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
            return 124
        fi
        echo "$(( $(date +%s) - start )) s: $(free -m | awk '/Mem:/{print "used", $3, "MiB, available", $7, "MiB"}')" >>"$prefix-mem.txt"
        sleep 5
    done
    wait "$pid"
}

t=$(date +%s)
$d/cuzk c1 --shape-only --proof "$proof" --sector 1 -o "$work/c1.json" >"$work/c1.txt" 2>&1
say "== shape-only $proof C1 rc=$? in $(( $(date +%s) - t )) s: $(tail -1 "$work/c1.txt")"

for r in ${RUNS:-2:2:60}; do
    IFS=: read -r jobs sj budget <<<"$r"
    t=$(date +%s)
    log="$work/bench-$jobs-$sj-$budget.txt"
    # shellcheck disable=SC2086
    /usr/bin/time -v $d/cuzk bench --config "${CONFIG:-configs/cuda.toml}" \
        --plugin-dir $d --c1 "$work/c1.json" --timing-only --jobs "$jobs" \
        --synth-jobs "$sj" --memory-budget-gib "$budget" ${FLAGS:-} --out "$work/runs" >"$log" 2>&1 &
    watch_bench $! "${BENCH_TIMEOUT:-560}" "$work/bench-$jobs-$sj-$budget"
    rc=$?
    say "== bench $proof ${jobs} sectors synth_jobs=$sj budget=${budget}GiB rc=$rc in $(( $(date +%s) - t )) s"
    grep -E "compiled once|ready in|s/proof|evaluated|busy|^ *(stage|synthesis|spmv|prep_msm|gpu|b_g2_msm|assembly|queue|lock|budget)|Maximum resident|Percent of CPU|Elapsed|error" "$log" >>"$sum"
    grep -E "profile" "$log" | tail -6 >>"$sum"
done
tar czf "$out/all.tgz" -C "$work" . 2>/dev/null
say "== done $(date -u +%FT%TZ)"
