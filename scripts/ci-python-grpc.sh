#!/usr/bin/env bash
# A gRPC client that is not ours: Python's grpcio with stubs generated from the
# daemon's .proto by grpcio-tools (both from PyPI, into a venv under target/).
# Runs scripts/grpc_client_test.py against `target/release/cuzk serve` on a Unix
# socket and on a loopback port. Needs the release build (scripts/test.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/py-grpc-venv
stubs=target/py-grpc-stubs
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "grpcio-tools>=1.60,<2"
rm -rf "$stubs" && mkdir -p "$stubs"
"$venv/bin/python" -m grpc_tools.protoc -I crates/daemon/proto \
  --python_out="$stubs" --grpc_python_out="$stubs" crates/daemon/proto/cuzk/v1/proving.proto
PYTHONPATH="$stubs" timeout 900 "$venv/bin/python" scripts/grpc_client_test.py target/release/cuzk
# The same daemon as a hostile caller sees it (token, bad ids, junk, a flood), with a
# real 2 KiB PoRep job at the end; parameters shared with the Rust tests.
mkdir -p target/tmp/filecoin-params
PYTHONPATH="$stubs" timeout 1200 "$venv/bin/python" scripts/grpc_hostile_test.py target/release/cuzk target/tmp/filecoin-params
