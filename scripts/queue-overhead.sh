#!/usr/bin/env bash
# The queue's overhead per job against the engine alone, same jobs, same run:
# N synthetic jobs through one `cuzk worker --drain` on a throwaway PostgreSQL on
# loopback. The worker's last line splits its time into proving (the engine,
# summed over jobs) and the queue's statements (claims that got a job and
# write-backs, summed over jobs), and gives the statements' ms per job.
#
#   bash scripts/queue-overhead.sh [JOBS] [LOG] [JOBS_IN_FLIGHT] [worker flags...]
#   defaults: 100 jobs of a 2^10 multiplication chain, 1 job in flight
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-100}
log=${2:-10}
inflight=${3:-1}
shift $(( $# < 3 ? $# : 3 ))
C=${CUZK:-target/release/cuzk}
pg=/tmp/cuzk-pg-overhead-$$
trap 'bash scripts/ci-postgres.sh stop $pg' EXIT
Q=$(bash scripts/ci-postgres.sh start $pg)
$C queue migrate --queue "$Q"
cache=/tmp/cuzk-overhead-cache
# Parameters before the clock starts: one job through a worker of its own (the
# synthetic kind generates them into its parameter directory once).
$C queue submit --queue "$Q" synthetic --circuit mul --log "$log" --seed 999998 >/dev/null
$C worker --queue "$Q" --drain --poll-ms 100 --param-cache "$cache" "$@" >/dev/null 2>&1
$C queue submit --queue "$Q" synthetic --circuit mul --log "$log" --count "$jobs" >/dev/null
# Warm the engine's shape (R1CS, SRS) with one job first, so the run measures
# steady state: submitted last at top priority, claimed first.
$C queue submit --queue "$Q" --priority critical synthetic --circuit mul --log "$log" --seed 999999 >/dev/null
$C worker --queue "$Q" --drain --poll-ms 100 --param-cache "$cache" --jobs-in-flight "$inflight" "$@" 2>&1 | tail -n 1
$C queue status --queue "$Q"
