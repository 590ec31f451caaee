#!/usr/bin/env bash
# Stages a PostgreSQL server that runs without being installed, for a machine that
# has none and can install nothing (the GPU machine): Debian's server binaries
# (initdb, postgres, pg_ctl), the server's modules, its share/ directory, and every
# shared library they load (the ldd closure, the C library and its loader
# included), packed into DEST/postgres.tar.xz (~17 MB: the device tool carries
# 64 MiB in all, and ICU's data alone is 30 MB unpacked).
#
#   bash scripts/stage-postgres.sh [DEST]     # default .device/run/pg
#
# Unpacked anywhere (tar -xJf DEST/postgres.tar.xz -C DIR), DIR/bin holds
# initdb, postgres and pg_ctl as small launchers: each runs the real binary through
# the staged loader with the staged libraries (ld.so --library-path, the same as
# LD_LIBRARY_PATH but also immune to an older C library on the host), passing its
# own path as argv[0], so PostgreSQL finds share/ and its modules relative to bin/
# as it does installed. Then:
#
#   CUZK_PG_BIN=DIR/bin bash scripts/ci-postgres.sh start PGDIR
#
# scripts/test-staged-postgres.sh checks that such a copy starts and serves from
# the staged files alone, in a clean environment.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.device/run/pg}

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
[ -x "${bindir:-}/postgres" ] || {
    echo "stage-postgres: no Debian PostgreSQL here (apt-get install postgresql)" >&2
    exit 1
}
version=$(basename "$(dirname "$bindir")")
pkglib=$(dirname "$bindir")/lib
share=/usr/share/postgresql/$version
[ -d "$share" ] || { echo "stage-postgres: $share is missing" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Debian's server is built for bindir /usr/lib/postgresql/N/bin, sharedir
# /usr/share/postgresql/N and pkglibdir /usr/lib/postgresql/N/lib; PostgreSQL
# finds the other two relative to where its binary runs, so the same layout is
# kept under the root (DIR/bin is a link-free shortcut to it, see below).
root=$work/tree
real=$root/usr/lib/postgresql/$version/real
mkdir -p "$real" "$root/usr/lib/postgresql/$version/bin" "$root/usr/lib/postgresql/$version/lib" \
    "$root/usr/share/postgresql" "$root/libs"
for b in initdb postgres pg_ctl; do
    cp -L "$bindir/$b" "$real/$b"
done
# The modules initdb and the server use: PL/pgSQL, the snowball dictionaries and
# the encoding conversions. Not the JIT (LLVM is 100 MB) nor the contrib modules
# (one pulls in a 22 MB solver): the queue needs neither.
for m in "$pkglib"/plpgsql.so "$pkglib"/dict_snowball.so "$pkglib"/*_and_*.so; do
    cp -L "$m" "$root/usr/lib/postgresql/$version/lib/"
done
cp -rL "$share" "$root/usr/share/postgresql/$version"

# Every library the binaries and modules load, and theirs, and the loader.
libs() {
    ldd "$@" 2>/dev/null | awk '/=>/ && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' | sort -u
}
objects=("$real"/* "$root/usr/lib/postgresql/$version/lib"/*.so)
for lib in $(libs "${objects[@]}"); do
    cp -L "$lib" "$root/libs/$(basename "$lib")"
done
loader=$(cd "$root/libs" && ls ld-linux-*.so.* | head -n1)
[ -n "$loader" ] || { echo "stage-postgres: no dynamic loader found by ldd" >&2; exit 1; }
strip --strip-unneeded "$real"/* "$root/libs"/*.so* "$root/usr/lib/postgresql/$version/lib"/*.so 2>/dev/null || true

# The launchers. The staged loader is run directly (never the host's, which may
# be older than the staged C library); --argv0 keeps the launcher's own path as
# argv[0], which PostgreSQL resolves to find bin/, share/ and lib/.
for b in initdb postgres pg_ctl; do
    cat >"$root/usr/lib/postgresql/$version/bin/$b" <<EOF
#!/bin/sh
here=\$(cd "\$(dirname "\$0")" && pwd)
top=\$here/../../../../..
exec "\$top/libs/$loader" --library-path "\$top/libs" --argv0 "\$here/$b" "\$here/../real/$b" "\$@"
EOF
    chmod 755 "$root/usr/lib/postgresql/$version/bin/$b"
done
# DIR/bin: a launcher per tool that calls the one in the Debian layout (a plain
# script, not a link: the device tool drops links).
mkdir -p "$root/bin"
for b in initdb postgres pg_ctl; do
    printf '#!/bin/sh\nexec "$(cd "$(dirname "$0")" && pwd)/../usr/lib/postgresql/%s/bin/%s" "$@"\n' \
        "$version" "$b" >"$root/bin/$b"
    chmod 755 "$root/bin/$b"
done
echo "PostgreSQL $version from Debian, staged by scripts/stage-postgres.sh on $(date -u +%F)" >"$root/VERSION"

rm -rf "$dest"
mkdir -p "$dest"
XZ_OPT="-9 -T0" tar -C "$root" -cJf "$dest/postgres.tar.xz" .
echo "stage-postgres: PostgreSQL $version -> $dest/postgres.tar.xz ($(du -h "$dest/postgres.tar.xz" | cut -f1); $(du -sh "$root" | cut -f1) unpacked)" >&2
