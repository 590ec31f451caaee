#!/usr/bin/env bash
# One visit to the H200 (stage first with scripts/stage-device.sh), in this order:
#   1. the error-path test of issue #12 (a partition that fails right after its a, b, c
#      upload returns only once the copies are done), from the lib's test binary;
#   2. the device test suite: tests/device.rs (every kernel against the CPU: fields,
#      NTT, H, G1 and G2 MSMs, whole partitions resident and streamed) and
#      tests/gpu.rs (the backend against the CPU backend); tests/spmv.rs (a, b, c
#      from the witness on the device, prove_partition_witness against the CPU);
#   3. the benchmark table (cuzk-gpu-check --table-only), to compare with
#      BENCHMARKS.md's GPU table;
#   4. the demo through the cuda plugin (SKIP_DEMO=1 leaves it out);
#   SKIP_TESTS=1 / SKIP_TABLE=1 leave out 1-2 / 3 (to split a visit into two calls);
#   and optionally SWEEP=/AB= engine runs (see below). Full logs go to OUT; a short
#   table is printed last and kept in OUT/summary.txt. Exit status 1 if a step failed.
#
#   bash scripts/h200-run.sh OUT [gpu-check args...]   (e.g. --seed N)
#   SWEEP="22:4:10:2:2 24:2:10:3:2"  log:jobs:partitions:synth_jobs:gpu_workers[:config],
#                                    space-separated (config: configs/cuda.toml by default)
#   AB="configs/cuda.toml configs/cuda-g2.toml 22 2 10 3"  cuzk ab A B at 2^log, jobs,
#                                    partitions, rounds
set -u
out=${1:?usage: h200-run.sh OUT [gpu-check args]}
shift
d=.device/run
work=$out/logs
mkdir -p "$work"
export CUZK_CACHE_DIR=/tmp/cuzk-cache
sum="$out/summary.txt"
: >"$sum"
rows=()
failed=0
say() { echo "$@" | tee -a "$sum"; }
# step NAME TIMEOUT COMMAND...: runs it with its output in $work/NAME.log, keeps a row.
step() {
    local name=$1 limit=$2
    shift 2
    local t rc
    t=$(date +%s)
    timeout "$limit" "$@" >"$work/$name.log" 2>&1
    rc=$?
    local secs=$(($(date +%s) - t)) verdict=ok
    [ "$rc" -eq 0 ] || { verdict="FAILED (rc=$rc)"; failed=1; }
    rows+=("| $name | $verdict | $secs s |")
    say "== $name: $verdict in $secs s"
}
say "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
say "== cpus $(nproc), ram $(free -g | awk '/Mem:/{print $2}') GiB"

if [ -z "${SKIP_TESTS:-}" ]; then
# 1. The bug's test (its output says whether the upload was in flight at the fault).
step upload-wait "${BUG_TIMEOUT:-120}" $d/tests/lib --exact \
    backend::tests::a_failure_after_the_upload_returns_only_once_the_copies_are_done --nocapture --test-threads=1
grep -E "staged|skipped|warning|panicked|test result" "$work/upload-wait.log" >>"$sum"

# 2. The device test suite.
step device-tests "${CHECK_TIMEOUT:-300}" $d/tests/device --nocapture --test-threads=1
grep -E "checks,|skipped|panicked|test result" "$work/device-tests.log" >>"$sum"
cp -r /tmp/cuzk-device-checks "$work/device-checks" 2>/dev/null
step gpu-tests "${TESTS_TIMEOUT:-120}" $d/tests/gpu --nocapture --test-threads=1
grep -E "skipped|panicked|test result" "$work/gpu-tests.log" >>"$sum"
step spmv-tests "${SPMV_TIMEOUT:-180}" $d/tests/spmv --nocapture --test-threads=1
grep -E "spmv of|skipped|panicked|test result" "$work/spmv-tests.log" >>"$sum"
fi

# 3. The benchmark table (BENCHMARKS.md's GPU rows).
if [ -z "${SKIP_TABLE:-}" ]; then
    step bench-table "${TABLE_TIMEOUT:-180}" $d/cuzk-gpu-check "$work/table" --table-only "$@"
fi

# 4. The demo through the plugin.
if [ -z "${SKIP_DEMO:-}" ]; then
    step demo 120 $d/cuzk demo --backend cuda --plugin-dir $d
    grep -iE "identical|verif|error" "$work/demo.log" | head -8 >>"$sum"
fi

for s in ${SWEEP:-}; do
    IFS=: read -r lg jobs parts sj gw cfg <<<"$s"
    cfg=${cfg:-configs/cuda.toml}
    name="bench-$lg-$jobs-$parts-$sj-$gw"
    step "$name" "${BENCH_TIMEOUT:-150}" $d/cuzk bench --config "$cfg" --plugin-dir $d \
        --circuit porep --log "$lg" --timing-only --jobs "$jobs" --partitions "$parts" \
        --synth-jobs "$sj" --gpu-workers "$gw" --out "$work/runs"
    grep -E "s/proof|busy|^(synthesis|spmv|prep_msm|gpu|b_g2_msm) " "$work/$name.log" >>"$sum"
done

if [ -n "${AB:-}" ]; then
    read -r a b lg jobs parts rounds <<<"$AB"
    step ab "${AB_TIMEOUT:-200}" $d/cuzk ab "$a" "$b" --circuit porep --log "$lg" \
        --timing-only --jobs "$jobs" --partitions "$parts" --rounds "$rounds" --out "$work/runs"
    tail -15 "$work/ab.log" >>"$sum"
fi

{
    echo
    echo "| step | result | time |"
    echo "|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    cat "$work/table/table.md" 2>/dev/null
} | tee -a "$sum"
exit "$failed"
