#!/usr/bin/env bash
# The daemon's overhead against the CLI on the same jobs: `cuzk bench` (the engine
# in-process) runs JOBS jobs of PARTS partitions; then `cuzk serve` (same config) is
# sent the same JOBS jobs at once by JOBS `cuzk client synthetic` processes. Prints
# s/proof for both, each job's timings as the daemon reports them, and GPU busy %
# from the daemon's TIMELINE (`cuzk timeline`). Everything lands in OUT.
#
#   bash scripts/daemon-bench.sh OUT CIRCUIT LOG JOBS PARTS [CONFIG] [timing-only]
#   bash scripts/daemon-bench.sh OUT c1 ENVELOPE JOBS - [CONFIG]
#
# dev (CPU):  bash scripts/daemon-bench.sh /tmp/daemon-bench mul 14 4 2
# Real sectors (CIRCUIT `c1`): JOBS copies of the sector of a C1 envelope (from
# `cuzk c1 --envelope`, sealed for miner 1000), through `cuzk bench --c1` and
# through JOBS `cuzk client prove` at once; Filecoin's parameters from PARAM_DIR
# (FIL_PROOFS_PARAMETER_CACHE's layout, e.g. `cuzk params gen --proof ...`):
#   PARAM_DIR=/tmp/fil-params bash scripts/daemon-bench.sh /tmp/db-2k c1 env.json 4 -
# H200, several PoRep-shaped jobs at once (the synthetic PoRep-shaped circuit at
# 2^24, the largest `bench` makes, 10 partitions each; timing-only parameters; the
# binaries and plugins staged by scripts/stage-device.sh):
#   CUZK=.device/run/cuzk PLUGIN_DIR=.device/run \
#     bash scripts/daemon-bench.sh OUT porep 24 4 10 configs/cuda.toml timing-only
# Look for: "daemon: ... s/proof" within noise of "cli: ... s/proof", and
# "GPU 0 busy" in daemon-timeline.txt (the engine sweep's best was ~88-98%).
set -u
out=${1:?usage: daemon-bench.sh OUT CIRCUIT LOG JOBS PARTS [CONFIG] [timing-only]}
circuit=${2:?}; lg=${3:?}; jobs=${4:?}; parts=${5:?}; cfg=${6:-}; timing=${7:-}
cuzk=${CUZK:-target/release/cuzk}
mkdir -p "$out"
params=${PARAM_DIR:-$out/params}
mkdir -p "$params"
plugin_args=()
[ -n "${PLUGIN_DIR:-}" ] && plugin_args=(--plugin-dir "$PLUGIN_DIR")
cfg_args=()
[ -n "$cfg" ] && cfg_args=(--config "$cfg")
bench_timing=()
[ "$timing" = timing-only ] && bench_timing=(--timing-only)

# 1. The CLI: the engine in-process.
if [ "$circuit" = c1 ]; then
    work=(--c1 "$lg" --param-cache "$params" --jobs "$jobs")
else
    work=(--circuit "$circuit" --log "$lg" --jobs "$jobs" --partitions "$parts")
fi
CUZK_CACHE_DIR=$params timeout "${BENCH_TIMEOUT:-1800}" "$cuzk" bench "${cfg_args[@]}" "${plugin_args[@]}" \
    "${work[@]}" "${bench_timing[@]}" --out "$out/bench-runs" >"$out/cli.txt" 2>&1
echo "cli rc=$?: $(grep -m1 's/proof' "$out/cli.txt")" | tee "$out/summary.txt"

# 2. The daemon: its own config file = the given one plus a [daemon] table.
dcfg=$out/daemon.toml
{ if [ -n "$cfg" ]; then cat "$cfg"; fi
  echo
  echo "[daemon]"
  echo "listen = \"unix://$out/cuzk.sock\""
  echo "synthetic = true"
  [ "$circuit" = c1 ] || echo "synthetic_max_log = $lg"
  echo "param_cache = \"$params\""
  echo "timeline = \"$out/daemon-timeline.jsonl\""
  echo "max_running_jobs = $jobs"
  [ "$timing" = timing-only ] && echo "synthetic_timing_only = true"
} >"$dcfg"
rm -f "$out/daemon-timeline.jsonl"
"$cuzk" serve --config "$dcfg" "${plugin_args[@]}" >"$out/serve.out" 2>"$out/serve.err" &
pid=$!
for _ in $(seq 600); do grep -q "listening on" "$out/serve.out" 2>/dev/null && break; sleep 0.2; done
addr="unix://$out/cuzk.sock"
# The parameters are loaded (or generated) once, before the clock starts, as the
# bench's are.
# One job's request: a sector of the envelope, or a synthetic job of seed $1.
job() {
    if [ "$circuit" = c1 ]; then
        "$cuzk" client --addr "$addr" prove --c1 "$lg" --miner-id 1000 --out "$2"
    else
        "$cuzk" client --addr "$addr" synthetic --circuit "$circuit" --log "$lg" \
            --partitions "$3" --seed "$1" --out "$2"
    fi
}
job 999 "$out/warm.bin" 1 >"$out/warm.txt" 2>&1
t0=$(date +%s.%N)
clients=()
for j in $(seq 1 "$jobs"); do
    job "$((j * 100))" "$out/proof-$j.bin" "$parts" >"$out/client-$j.txt" 2>&1 &
    clients+=($!)
done
wait "${clients[@]}"
t1=$(date +%s.%N)
"$cuzk" client --addr "$addr" status >"$out/status.txt" 2>&1
"$cuzk" client --addr "$addr" metrics >"$out/metrics.txt" 2>&1
kill -TERM "$pid"; wait "$pid"; rc=$?
ok=$(grep -l COMPLETED "$out"/client-*.txt | wc -l)
awk -v a="$t0" -v b="$t1" -v n="$jobs" -v ok="$ok" -v rc="$rc" 'BEGIN {
    printf "daemon: %.3f s/proof (%d jobs at once, %d completed, wall %.2f s; serve exit %d)\n", (b-a)/n, n, ok, b-a, rc }' \
    | tee -a "$out/summary.txt"
cat "$out"/client-*.txt | grep "^job" | tee -a "$out/summary.txt"
"$cuzk" timeline "$out/daemon-timeline.jsonl" >"$out/daemon-timeline.txt" 2>&1
grep -iE "busy|s/proof" "$out/daemon-timeline.txt" | tee -a "$out/summary.txt"
