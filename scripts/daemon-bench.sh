#!/usr/bin/env bash
# The daemon's overhead against the CLI on the same jobs: `cuzk bench` (the engine
# in-process) runs JOBS jobs of PARTS partitions; then `cuzk serve` (same config) is
# sent the same JOBS jobs at once by `cuzk client bench` (one warm-up job first, not
# timed; then JOBS SubmitProof + AwaitProof at once). Prints s/proof for both, each
# job's timings as the daemon reports them, GPU busy % from the daemon's
# cuzk_gpu_busy_seconds_total (GetMetrics before and after the timed jobs) and from
# its TIMELINE (`cuzk timeline`, warm-up included). Everything lands in OUT (the
# client's manifest in OUT/client-bench).
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
# Shape-only sectors (`cuzk c1 --shape-only --envelope`) with timing-only
# parameters: CIRCUIT `c1` and `timing-only`; the daemon lists CIRCUIT_ID (default
# porep-2k) in timing_only_circuits (its proofs are returned unverified):
#   CIRCUIT_ID=porep-2k bash scripts/daemon-bench.sh /tmp/db c1 shape-env.json 2 - "" timing-only
# (the 32 GiB shape on the H200 has its own script: scripts/h200-daemon-32g.sh).
# Look for: "daemon: ... s/proof" within noise of "cli: ... s/proof", and
# "GPU 0 busy" (the engine sweep's best was ~88-98%).
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
  if [ "$timing" = timing-only ]; then
    if [ "$circuit" = c1 ]; then echo "timing_only_circuits = [\"${CIRCUIT_ID:-porep-2k}\"]"
    else echo "synthetic_timing_only = true"; fi
  fi
} >"$dcfg"
rm -f "$out/daemon-timeline.jsonl"
"$cuzk" serve --config "$dcfg" "${plugin_args[@]}" >"$out/serve.out" 2>"$out/serve.err" &
pid=$!
for _ in $(seq 600); do grep -q "listening on" "$out/serve.out" 2>/dev/null && break; sleep 0.2; done
addr="unix://$out/cuzk.sock"
# The parameters are loaded (or generated) once, in the warm-up job, before the
# clock starts, as the bench's are.
if [ "$circuit" = c1 ]; then
    jobs_args=(--c1 "$lg" --miner-id 1000)
else
    jobs_args=(--synthetic "$circuit:$lg:$parts")
fi
"$cuzk" client --addr "$addr" bench "${jobs_args[@]}" --jobs "$jobs" --warm \
    --out "$out/client-bench" >"$out/client.txt" 2>&1
echo "client bench rc=$?" | tee -a "$out/summary.txt"
"$cuzk" client --addr "$addr" status >"$out/status.txt" 2>&1
"$cuzk" client --addr "$addr" metrics >"$out/metrics.txt" 2>&1
kill -TERM "$pid"; wait "$pid"; rc=$?
echo "serve exit $rc" | tee -a "$out/summary.txt"
grep -E "^(warm-up job|job|daemon:|TIMING-ONLY|GPU)" "$out/client.txt" | tee -a "$out/summary.txt"
"$cuzk" timeline "$out/daemon-timeline.jsonl" >"$out/daemon-timeline.txt" 2>&1
grep -iE "busy|s/proof" "$out/daemon-timeline.txt" | tee -a "$out/summary.txt"
