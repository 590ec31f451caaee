#!/usr/bin/env bash
# Checks scripts/stage-postgres.sh: the staged server, unpacked into a fresh folder,
# starts through scripts/ci-postgres.sh in a clean environment (env -i: no PATH to
# the installed server, no LD_LIBRARY_PATH, no locale), serves a query, and runs
# from the staged files alone: every file the running server has mapped (its
# binary, loader, libraries; not its shared memory) lies inside the unpacked
# folder. CI runs it
# (scripts/test.sh); it is what the GPU machine, which has no PostgreSQL, relies on
# (scripts/h200-queue.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
work=$(mktemp -d /tmp/cuzk-staged-pg-test.XXXXXX)
pgdir=$work/cluster
cleanup() {
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C CUZK_PG_BIN="$work/dist/bin" \
        bash "$repo/scripts/ci-postgres.sh" stop "$pgdir" || true
    rm -rf "$work"
}
trap cleanup EXIT

bash scripts/stage-postgres.sh "$work/staged"
mkdir -p "$work/dist"
tar -xJf "$work/staged/postgres.tar.xz" -C "$work/dist"
# The cluster's owner (postgres, or nobody) must reach the staged files.
chmod 755 "$work"
chmod -R a+rX "$work/dist"

url=$(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C CUZK_PG_BIN="$work/dist/bin" \
    bash scripts/ci-postgres.sh start "$pgdir")
echo "staged server at $url"

# The postmaster: the first line of postmaster.pid.
pid=$(head -n1 "$pgdir/data/postmaster.pid")
fail=0
while read -r path; do
    case "$path" in
        "$work"/dist/*) ;;
        *) echo "error: the staged server maps $path, outside the staged folder" >&2; fail=1 ;;
    esac
done < <(awk '$6 ~ /^\// && $6 !~ /^\/(dev|SYSV)/ { print $6 }' "/proc/$pid/maps" | sort -u)
[ "$fail" = 0 ] || exit 1
mapped=$(awk '$6 ~ /\.so/ { print $6 }' "/proc/$pid/maps" | sort -u | wc -l)
[ "$mapped" -gt 5 ] || { echo "error: only $mapped libraries mapped; is $pid the server?" >&2; exit 1; }

# It serves: a statement through the wire protocol (the installed client, or
# cuzk's own queue when no client is installed).
if command -v psql >/dev/null; then
    got=$(psql "$url" -Atc "SELECT 40 + 2")
    [ "$got" = 42 ] || { echo "error: the staged server answered '$got'" >&2; exit 1; }
else
    echo "error: no psql to query the staged server with" >&2
    exit 1
fi
echo "ok: the staged PostgreSQL started in a clean environment and served from $work/dist only ($mapped libraries mapped)"
