#!/usr/bin/env bash
# Issue 35's dev bar: a 2 KiB NI-PoRep C2 through cuzk (CPU backend) against
# filecoin-proofs' own seal_commit_phase2 on the same sector, in alternating rounds
# (cuzk, then the peer) on a quiet machine. Both run at nice -15, which keeps other
# work of the same cgroup off them but not work in other cgroups (another session's
# build): run it with nothing else on the machine, and compare CPU seconds where
# the wall times show contention (a run's CPU/wall well under its core count).
# Wall and CPU seconds of each run (GNU time) go to OUT/rounds.tsv, logs to OUT.
#
#   bash scripts/ni-dev-ratio.sh OUT [ROUNDS]     (parameters: target/tmp/filecoin-params)
set -u
out=${1:?usage: ni-dev-ratio.sh OUT [ROUNDS]}
rounds=${2:-3}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export FIL_PROOFS_PARAMETER_CACHE=${FIL_PROOFS_PARAMETER_CACHE:-$PWD/target/tmp/filecoin-params}
cuzk=${CUZK:-target/release/cuzk}
proof=StackedDrg2KiBV1_2_Feat_NonInteractivePoRep
[ -s "$out/ni-env.json" ] || $cuzk c1 --proof $proof --sector 5 -o "$out/ni.json" --envelope "$out/ni-env.json" >"$out/c1.log" 2>&1 || { echo "c1 failed" >&2; exit 1; }
echo "$(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/machine.txt"
printf 'round\twho\twall_s\tcpu_s\tload_before\trc\n' >"$out/rounds.tsv"
run() {
    local r=$1 who=$2
    shift 2
    local load
    load=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f '%e %U %S' -o "$out/time-$who-$r" nice -n -15 "$@" >"$out/$who-$r.log" 2>&1
    local rc=$?
    read -r wall user sys <"$out/time-$who-$r"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$who" "$wall" "$(echo "$user + $sys" | bc)" "$load" "$rc" | tee -a "$out/rounds.tsv"
}
for r in $(seq 1 "$rounds"); do
    run "$r" cuzk $cuzk bench --c1 "$out/ni-env.json" --jobs 1
    run "$r" peer $cuzk c2 peer "$out/ni-env.json" --miner-id 1000 -o "$out/peer-proof-$r"
done
python3 - "$out/rounds.tsv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def med(who, k): return statistics.median(float(r[k]) for r in rows if r["who"] == who and r["rc"] == "0")
for k in ("wall_s", "cpu_s"):
    c, p = med("cuzk", k), med("peer", k)
    print(f"median {k}: cuzk {c:.1f}, peer {p:.1f}, ratio {p / c:.2f}x")
PY
