#!/usr/bin/env bash
# Issue 33's table, measured on the lent GPU machine (stage first with
# scripts/stage-device.sh; then, through the device tool with carry [".device/run"]):
#
#   bash scripts/gpu-table.sh OUT
#
# Each cell is a short 32 GiB-shape PoRep stream (`cuzk bench --c1 shape32.json
# --timing-only --jobs $JOBS`) run with the plan `cuzk plan` makes for the cell
# (`--toml`: every knob written out, marked planned or given), on:
#   - a smaller card, emulated: the CUDA backend's `device_memory_gib` (it plans
#     with what a card of that size would have free, less the reserve);
#   - a smaller host: a cgroup v2 memory limit on the bench (`systemd-run --scope
#     -p MemoryMax=`, else a cgroup directory of our own under the one we are in),
#     which the memory budget reads like a container's; without either the cell is
#     recorded as "no cgroup" and not run;
#   - fewer cores: `taskset`.
# Recorded per cell: ran or not (and why: the plan's refusal, an error, an OOM
# kill), s/proof of the whole run (the manifest and TIMELINE under OUT/logs give
# the steady part), GPU busy %, peak RSS, and the plan's expected s/proof, in
# OUT/table.md and OUT/summary.txt; logs and manifests in OUT/logs.
#
#   DEVICE_GIB="16 24 32 48 80"  HOST_GIB="64 96 128"  CORES="16 8"  JOBS=3
#   CELL_TIMEOUT=540 (seconds a cell may run)
#   POINTS_DIR=/tmp/points: parameters memory-mapped from points files there
#     (`cuzk bench --points-dir`; the first cell writes the 44 GiB file), planned
#     as such (`cuzk plan --points-dir`: page cache, the streamed sets' staging
#     and the budget planned with the host)
#   PLAN_HOST_GIB=N plans each cell as an N GiB host would while the cgroup stays
#     the cell's (to run a cell the plan refuses)
#   RUN_DIR=.device/base: the binaries of another build (an A/B in one visit)
#   EXTRA_PARAMS='profile = true': a line added to each cell's [backend.params]
#     after the plan's (a knob given wins over a planned one); with `profile = true`
#     the device phases of every partition (`RUST_LOG=cuzk_cuda::profile=info`) go
#     into the summary
set -u
out=${1:?usage: gpu-table.sh OUT}
d=${RUN_DIR:-.device/run}
work=$out/logs
mkdir -p "$work"
export CUZK_CACHE_DIR=/tmp/cuzk-cache
sum=$out/summary.txt
table=$out/table.md
: >"$sum"
say() { echo "$@" | tee -a "$sum"; }
say "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,memory.total,memory.free,pcie.link.gen.max,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader)"
say "== cpus $(nproc), ram $(free -g | awk '/Mem:/{print $2}') GiB, cgroup $(cat /proc/self/cgroup)"

[ -n "${EXTRA_PARAMS:-}" ] && export RUST_LOG="${RUST_LOG:-warn},cuzk_cuda::profile=info"
free_gib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 | awk '{print int($1 / 1024)}')
cores_all=$(nproc)

t=$(date +%s)
$d/cuzk c1 --shape-only --proof StackedDrg32GiBV1_1 --sector 1 -o "$work/shape32.json" >"$work/c1.txt" 2>&1
say "== shape-only 32 GiB C1 rc=$? in $(($(date +%s) - t)) s"

# in_cgroup BYTES COMMAND...: runs COMMAND under a memory limit of BYTES (cgroup v2).
in_cgroup() {
    local bytes=$1
    shift
    if command -v systemd-run >/dev/null && systemd-run --quiet --scope -p MemoryMax="$bytes" true 2>/dev/null; then
        systemd-run --quiet --scope -p MemoryMax="$bytes" -p MemorySwapMax=0 "$@"
        return $?
    fi
    # A cgroup of our own under the one we are in (where its memory controller is
    # delegated to children), else under the root (the lent machine's case: its
    # per-call cgroup does not enable memory for children; measured 2026-12-06).
    local here dir parent
    here=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
    for parent in "/sys/fs/cgroup$here" /sys/fs/cgroup; do
        dir=$parent/cuzk-table-$$
        if mkdir -p "$dir" 2>/dev/null && echo "$bytes" >"$dir/memory.max" 2>/dev/null; then
            echo 0 >"$dir/memory.swap.max" 2>/dev/null
            (echo $BASHPID >"$dir/cgroup.procs" && exec "$@")
            local rc=$?
            echo "cgroup $dir: memory.max $bytes, peak $(cat "$dir/memory.peak" 2>/dev/null), events $(tr '\n' ' ' <"$dir/memory.events" 2>/dev/null)" >>"$sum"
            rmdir "$dir" 2>/dev/null
            return $rc
        fi
        rmdir "$dir" 2>/dev/null
    done
    return 200
}

{
    echo "| device GiB | host GiB | cores | ran | s/proof (whole run) | GPU busy | peak RSS | planned s/proof | plan |"
    echo "|---|---|---|---|---|---|---|---|---|"
} >"$table"

for dev in ${DEVICE_GIB:-16 24 32 48 80}; do
    for host in ${HOST_GIB:-64 96 128}; do
        for cores in ${CORES:-16 8}; do
            [ "$cores" -le "$cores_all" ] || continue
            cell="d$dev-h$host-c$cores"
            cfg=$work/$cell.toml
            # The plan for the cell, then the reserve that emulates the card.
            if ! $d/cuzk plan --kind porep --device-memory-gib "$dev" --host-memory-gib "${PLAN_HOST_GIB:-$host}" \
                --cores "$cores" ${POINTS_DIR:+--points-dir "$POINTS_DIR"} --toml >"$cfg" 2>"$work/$cell-plan.txt"; then
                say "== $cell: planned not to run: $(tail -1 "$work/$cell-plan.txt")"
                echo "| $dev | $host | $cores | no (plan: does not fit) | | | | | $(tail -1 "$work/$cell-plan.txt" | cut -c1-120) |" >>"$table"
                continue
            fi
            expected=$(head -1 "$cfg" | grep -oE '[0-9.]+ s/proof')
            echo "device_memory_gib = $dev # emulated on a card with $free_gib GiB free" >>"$cfg"
            [ -n "${EXTRA_PARAMS:-}" ] && printf '%s # given\n' "$EXTRA_PARAMS" >>"$cfg"
            t=$(date +%s)
            log=$work/$cell.txt
            in_cgroup $((host << 30)) timeout "${CELL_TIMEOUT:-540}" /usr/bin/time -v \
                taskset -c "0-$((cores - 1))" $d/cuzk bench --config "$cfg" --plugin-dir $d \
                --c1 "$work/shape32.json" --timing-only --jobs "${JOBS:-3}" --out "$work/runs-$cell" \
                ${POINTS_DIR:+--points-dir "$POINTS_DIR"} \
                >"$log" 2>&1
            rc=$?
            secs=$(($(date +%s) - t))
            ran=yes
            case $rc in
            0) ;;
            200) ran="no (no cgroup)" ;;
            124) ran="no (timeout)" ;;
            137) ran="no (killed: OOM?)" ;;
            *) ran="no (rc=$rc)" ;;
            esac
            grep -qiE "oom|out of memory" "$log" && ran="$ran, OOM in log"
            sp=$(grep -oE '[0-9.]+ s/proof' "$log" | head -1)
            busy=$(grep -oE 'busy [0-9.]+%' "$log" | head -1)
            rss=$(awk -F': ' '/Maximum resident/ {printf "%.1f GiB", $2 / 1048576}' "$log")
            say "== $cell: $ran in $secs s: ${sp:-?} ${busy:-} peak ${rss:-?} (planned ${expected:-?})"
            grep -E "s/proof|busy|error" "$log" | head -4 >>"$sum"
            grep -E "phases|partition 2\^[0-9]+ [0-9.]+ ms" "$log" | grep -v "host partition" | head -24 >>"$sum"
            echo "| $dev | $host | $cores | $ran | ${sp:-} | ${busy#busy } | ${rss:-} | ${expected:-} | \`$cell.toml\` |" >>"$table"
        done
    done
done
cat "$table" | tee -a "$sum"
tar czf "$out/all.tgz" -C "$work" . 2>/dev/null
say "== done $(date -u +%FT%TZ)"
