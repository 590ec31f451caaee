#!/usr/bin/env bash
# A throwaway PostgreSQL server for the queue's tests (and for trying the queue
# by hand): Debian's `postgresql` package, a cluster of its own in DIR, listening
# on a free loopback port with trust authentication, nothing else.
#
#   bash scripts/ci-postgres.sh start [DIR]    # prints the server's URL
#   bash scripts/ci-postgres.sh restart [DIR]  # same cluster, same port
#   bash scripts/ci-postgres.sh stop [DIR]     # stops it and removes DIR
#
# DIR defaults to a folder under /tmp named after this checkout. CUZK_PG_BIN names
# the bin/ folder of a server that is not installed (scripts/stage-postgres.sh). As root the
# server runs as the `postgres` user (postgres refuses to run as root); as anyone
# else it runs as that user. scripts/test.sh starts one, exports its URL as
# CUZK_TEST_PG_URL and stops it when the tests end. CUZK_PG_TLS_DIR (at start)
# names a folder with server.crt and server.key: the server then has `ssl=on`
# with them (the queue's TLS test makes its own CA and certificate).
set -euo pipefail

cmd=${1:?usage: ci-postgres.sh start|restart|stop [DIR]}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${2:-/tmp/cuzk-pg-$(printf %s "$root" | cksum | cut -d' ' -f1)}

pg_bin() {
  local d
  # A server that is not installed (scripts/stage-postgres.sh's, unpacked): its
  # bin/ folder, which the owner below must be able to read.
  if [ -n "${CUZK_PG_BIN:-}" ]; then
    [ -x "$CUZK_PG_BIN/initdb" ] && echo "$CUZK_PG_BIN" && return 0
    echo "ci-postgres: CUZK_PG_BIN=$CUZK_PG_BIN has no initdb" >&2
    return 1
  fi
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
  if [ -z "$d" ] || [ ! -x "$d/initdb" ]; then
    return 1
  fi
  echo "$d"
}

bin=$(pg_bin || true)
[ -z "$bin" ] && [ -n "${CUZK_PG_BIN:-}" ] && exit 1
if [ -z "$bin" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "ci-postgres: PostgreSQL is not installed and this user cannot install it (apt-get install postgresql)" >&2
    exit 1
  fi
  echo "ci-postgres: installing Debian's postgresql package" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  bin=$(pg_bin)
fi

# The user that owns the cluster when this runs as root: Debian's package makes
# `postgres`; on a machine without it, `nobody`.
owner=postgres
getent passwd postgres >/dev/null || owner=nobody

# Runs a PostgreSQL tool as the user that owns the cluster.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$owner" -- "$@"
  else
    "$@"
  fi
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown "$owner": "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 \
        --no-sync >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
      }
    fi
    if [ ! -f "$dir/port" ]; then
      port=$((55000 + RANDOM % 5000))
      while ! port_free "$port"; do port=$((port + 1)); done
      echo "$port" >"$dir/port"
    fi
    port=$(cat "$dir/port")
    # TLS: the certificate and key copied in, owned by the server's user (it
    # refuses a key others can read); the options kept for `restart`.
    if [ -n "${CUZK_PG_TLS_DIR:-}" ]; then
      cp "$CUZK_PG_TLS_DIR/server.crt" "$CUZK_PG_TLS_DIR/server.key" "$dir/"
      chmod 600 "$dir/server.key"
      [ "$(id -u)" = 0 ] && chown "$owner": "$dir/server.crt" "$dir/server.key"
      echo "-c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key" >"$dir/tls-opts"
    fi
    tls_opts=$(cat "$dir/tls-opts" 2>/dev/null || true)
    # Already running (a run that did not stop it): reuse it.
    if as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      echo "postgres://postgres@127.0.0.1:$port/postgres"
      exit 0
    fi
    # fsync off: a test cluster loses nothing worth keeping in a crash, and the
    # CI machine's disk is shared.
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200 $tls_opts" \
      start >/dev/null || {
      cat "$dir/server.log" >&2
      exit 1
    }
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  restart)
    port=$(cat "$dir/port")
    tls_opts=$(cat "$dir/tls-opts" 2>/dev/null || true)
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -m fast \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200 $tls_opts" \
      restart >/dev/null
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    if [ -f "$dir/data/PG_VERSION" ]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -w -t 60 -m fast stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: ci-postgres.sh start|restart|stop [DIR]" >&2
    exit 2
    ;;
esac
