#!/usr/bin/env bash
# The queue on the H200 (issue 16): one GPU driven through one `cuzk worker`
# process, then through two, on the same synthetic jobs, each round against a
# fresh PostgreSQL on loopback: the installed one if the machine has Debian's
# package, else the copy scripts/stage-device.sh staged in .device/run/pg
# (scripts/stage-postgres.sh; the GPU machine has none and can install nothing),
# unpacked to /tmp and run from there. Needs the staged binaries of
# scripts/stage-device.sh.
#
#   bash scripts/h200-queue.sh OUT [LOG] [JOBS] [PARTITIONS] [CONFIG]
#   defaults: 2^20 SHA-256 chain, 8 jobs of 10 partitions, configs/cuda.toml
#
# Look for the `round` lines in OUT/summary.txt: wall seconds and proofs/hour for
# 1 and 2 workers, and each worker's own line (proving seconds, the queue
# statements' seconds and ms per job).
set -u
out=${1:?usage: h200-queue.sh OUT [LOG] [JOBS] [PARTITIONS] [CONFIG]}
log=${2:-20}
jobs=${3:-8}
parts=${4:-10}
cfg=${5:-configs/cuda.toml}
d=.device/run
C=$d/cuzk
pg=/tmp/cuzk-pg-h200
mkdir -p "$out"
export CUZK_CACHE_DIR=/tmp/cuzk-cache CUZK_CUDA_CACHE=$d/cubin
sum="$out/summary.txt"
say() { echo "$@" | tee -a "$sum"; }
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    dist=/tmp/cuzk-pg-dist
    rm -rf "$dist" && mkdir -p "$dist"
    tar -xJf "$d/pg/postgres.tar.xz" -C "$dist" || { say "no staged PostgreSQL in $d/pg"; exit 1; }
    chmod -R a+rX "$dist"   # the cluster's owner (postgres or nobody) runs it
    export CUZK_PG_BIN=$dist/bin LC_ALL=C
    say "== PostgreSQL: the staged copy ($(cat "$dist/VERSION"))"
fi
trap 'bash scripts/ci-postgres.sh stop $pg' EXIT
say "== $(date -u +%FT%TZ) queue: 2^$log sha256, $jobs jobs x $parts partitions, $cfg"

# Parameters once, before any clock starts (every worker reads the cache): one
# job through one worker, whose synthetic kind generates them into the cache.
t=$(date +%s)
bash scripts/ci-postgres.sh stop $pg
Q=$(bash scripts/ci-postgres.sh start $pg) || { say "PostgreSQL did not start"; exit 1; }
$C queue migrate --queue "$Q" >"$out/warm.txt" 2>&1
$C queue submit --queue "$Q" synthetic --circuit sha256 --log "$log" >>"$out/warm.txt" 2>&1
$C worker --queue "$Q" --id warm --drain --config "$cfg" --plugin-dir $d \
    --param-cache /tmp/cuzk-cache >>"$out/warm.txt" 2>&1 ||
    { say "parameter generation failed"; tail "$out/warm.txt" | tee -a "$sum"; exit 1; }
say "== parameters ready in $(( $(date +%s) - t )) s"

for workers in 1 2; do
    bash scripts/ci-postgres.sh stop $pg
    Q=$(bash scripts/ci-postgres.sh start $pg) || { say "PostgreSQL did not start"; exit 1; }
    $C queue migrate --queue "$Q" >/dev/null 2>&1
    ids=$($C queue submit --queue "$Q" synthetic --circuit sha256 --log "$log" \
        --partitions "$parts" --count "$jobs")
    t0=$(date +%s.%N)
    for w in $(seq "$workers"); do
        $C worker --queue "$Q" --id "w$w" --drain --config "$cfg" --plugin-dir $d \
            --param-cache /tmp/cuzk-cache >"$out/round$workers-w$w.log" 2>&1 &
    done
    wait
    t1=$(date +%s.%N)
    $C queue wait --queue "$Q" $ids >"$out/round$workers-jobs.txt" 2>&1
    rc=$?
    say "round workers=$workers rc=$rc $(awk -v a="$t0" -v b="$t1" -v n="$jobs" \
        'BEGIN { printf "wall=%.1fs proofs/hour=%.0f", b - a, 3600 * n / (b - a) }')"
    grep -h "done, " "$out"/round$workers-w*.log | tee -a "$sum"
done
