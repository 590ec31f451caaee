#!/usr/bin/env bash
# Several 32 GiB-shape PoRep sectors submitted at once to the daemon on the H200:
# `cuzk serve` with the CUDA backend and `timing_only_circuits = ["porep-32g"]`
# (timing-only parameters: random points of the real sizes made in memory, no
# parameter file; the proofs are returned unverified and do not verify), and
# `cuzk client bench`, which submits SECTORS copies of a shape-only 32 GiB C1
# envelope (`cuzk c1 --shape-only`: the exact vanilla-proof shape, random values)
# at once and prints s/proof (first submission to last result, over SECTORS) and
# GPU busy (the daemon's cuzk_gpu_busy_seconds_total before and after, over the same
# wall). The circuit compile (~87 s) and the timing-only parameters (~45 s) are
# made first through PreloadSRS, out of the clock, as `cuzk bench --c1` makes them
# before its clock. The engine's knobs are those of scripts/h200-filecoin.sh's
# best run (synth_jobs 4, memory budget 100 GiB of the host's 128: peak ~102 GiB).
#
# Builds nothing. Stage first on the dev machine (bash scripts/stage-device.sh),
# then through the device tool with carry [".device/run"]:
#
#   bash scripts/h200-daemon-32g.sh OUT
#   SECTORS=4 BUDGET_GIB=100 SYNTH_JOBS=4 LIMIT_S=530   (the defaults but SECTORS=3)
#   PROFILE=1   the CUDA backend's per-partition device phases and host marks in the
#               daemon's log (serve.err; the last ones in the summary)
#
# Finishes within LIMIT_S seconds (default 530, under the device tool's 9 minutes):
# the client is cut at what is left, then the daemon is stopped (jobs cancelled).
# OUT/summary.txt: s/proof, GPU busy, each job's timings, the daemon's status, peak
# RSS, then EvictSRS of the circuit (bytes freed, status and RSS after), the
# TIMELINE's stage table. OUT/all.tgz: the daemon's log, the client's manifest,
# the TIMELINE (gzipped), the waterfall and the config (the device tool brings
# back at most 8 files).
set -u
out=${1:?usage: h200-daemon-32g.sh OUT}
t_start=$(date +%s)
limit=${LIMIT_S:-530}
d=.device/run
work=/tmp/cuzk-daemon-32g
rm -rf "$work" && mkdir -p "$work/params" "$out"
export CUZK_CUDA_CACHE=$d/cubin
proof=${PROOF:-StackedDrg32GiBV1_1}
cid=${CIRCUIT_ID:-porep-32g}
sectors=${SECTORS:-3}
budget=${BUDGET_GIB:-100}
sj=${SYNTH_JOBS:-4}
sum="$out/summary.txt"
: >"$sum"
say() { echo "$@" | tee -a "$sum"; }
left() { echo $((limit - ($(date +%s) - t_start))); }
say "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
say "== cpus $(nproc), ram $(free -g | awk '/Mem:/{print $2}') GiB; $sectors sectors of $proof ($cid), synth_jobs $sj, budget $budget GiB"

t=$(date +%s)
$d/cuzk c1 --shape-only --proof "$proof" --sector 1 -o "$work/c1.json" \
    --envelope "$work/envelope.json" >"$work/c1.txt" 2>&1
say "== shape-only C1 rc=$? in $(($(date +%s) - t)) s: $(head -1 "$work/c1.txt")"

cfg=$work/cuzk.toml
cat >"$cfg" <<EOF
# configs/cuda.toml with h200-filecoin.sh's knobs, and the daemon.
[engine]
synth_jobs = $sj
gpu_workers_per_device = 2
gpu_threads = 0
memory_budget_gib = $budget

[backend]
plugin = "cuda"
$([ -n "${PROFILE:-}" ] && echo 'params = { profile = "true" }')

[dealloc]
plugin = "bounded"

[gpu_lock]
plugin = "single"

[daemon]
listen = "unix://$work/cuzk.sock"
param_cache = "$work/params"
timing_only_circuits = ["$cid"]
max_running_jobs = $sectors
shutdown = "cancel"
shutdown_timeout_s = 20
timeline = "$work/timeline.jsonl"
EOF
cp "$cfg" "$out/cuzk.toml"

[ -n "${PROFILE:-}" ] && export RUST_LOG=cuzk_cuda::profile=info
FIL_PROOFS_PARAMETER_CACHE=$work/params $d/cuzk serve --config "$cfg" --plugin-dir $d \
    >"$work/serve.out" 2>"$work/serve.err" &
pid=$!
for _ in $(seq 300); do grep -q "listening on" "$work/serve.out" 2>/dev/null && break; sleep 0.2; done
addr="unix://$work/cuzk.sock"
say "== serve (pid $pid): $(head -1 "$work/serve.out")"
grep -E "WARNING|timing-only" "$work/serve.err" | tee -a "$sum"

t=$(date +%s)
# What is left, less ~45 s to stop the daemon and collect (never below 60 s).
client_limit=$(($(left) - 45)); [ "$client_limit" -lt 60 ] && client_limit=60
timeout "$client_limit" $d/cuzk client --addr "$addr" bench --c1 "$work/envelope.json" \
    --miner-id 1000 --jobs "$sectors" --preload "$cid" --out "$work/client" \
    >"$work/client.txt" 2>&1
rc=$?
say "== client bench rc=$rc in $(($(date +%s) - t)) s (124: cut at the time limit)"
cat "$work/client.txt" | tee -a "$sum"
grep -E "profile" "$work/serve.err" | grep -E "partition" | tail -6 >>"$sum"

$d/cuzk client --addr "$addr" status >"$work/status.txt" 2>&1
$d/cuzk client --addr "$addr" metrics >"$work/metrics.txt" 2>&1
say "== daemon status"
cat "$work/status.txt" | tee -a "$sum"
say "== peak RSS of the daemon: $(awk '/VmHWM/{printf "%.1f GiB", $2/1048576}' /proc/$pid/status 2>/dev/null)"
# EvictSRS on the real GPU: the circuit's parameters leave host and device memory
# (GetStatus's VRAM free and loaded parameters before and after, the daemon's RSS).
say "== evict $cid: $($d/cuzk client --addr "$addr" evict "$cid" 2>&1)"
$d/cuzk client --addr "$addr" status >"$work/status-evicted.txt" 2>&1
say "== daemon status after the evict"
cat "$work/status-evicted.txt" | tee -a "$sum"
say "== RSS of the daemon after the evict: $(awk '/VmRSS/{printf "%.1f GiB", $2/1048576}' /proc/$pid/status 2>/dev/null)"
kill -TERM "$pid" 2>/dev/null
for _ in $(seq 80); do kill -0 "$pid" 2>/dev/null || break; sleep 0.3; done
kill -0 "$pid" 2>/dev/null && { say "== serve did not stop in 24 s: killed"; kill -KILL "$pid"; }
wait "$pid"
say "== serve exit $?"

timeout 30 $d/cuzk timeline "$work/timeline.jsonl" --svg "$work/waterfall.svg" >"$work/timeline.txt" 2>&1
grep -iE "busy|stage|synthesis|spmv|prep_msm|gpu|b_g2_msm|queue|budget" "$work/timeline.txt" | head -40 >>"$sum"
say "== done $(date -u +%FT%TZ) in $(($(date +%s) - t_start)) s"
# The device tool brings back at most 8 files: the summary, and everything else in
# one archive (the TIMELINE, the waterfall, the client's manifest, the logs).
rm -f "$work"/client/proof-*.bin
gzip -f "$work/timeline.jsonl" 2>/dev/null
(cd "$work" && tar czf "$out/all.tgz" --exclude=params --exclude=c1.json --exclude=envelope.json --exclude=cuzk.sock . 2>/dev/null)
