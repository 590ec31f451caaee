#!/usr/bin/env bash
# The test suite, as CI runs it (`.ci/run` calls this). Works on a fresh machine
# with a Rust toolchain: builds everything (the plugin .so files the tests load
# included), fetches NVRTC from PyPI when it can so every CUDA kernel is compiled
# here too, then runs every test in release mode (field arithmetic in debug builds
# is too slow for a 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."

# NVRTC (CUDA's run-time compiler) from PyPI, so kernel-compile tests run without a
# GPU. Optional: without it those tests print "skipped: no NVRTC".
if [ -z "${CUZK_NO_NVRTC:-}" ]; then
  source scripts/nvrtc-env.sh || echo "note: NVRTC not installed; kernel compile tests will be skipped"
fi

cargo build --release --workspace --all-targets
cargo test --release --workspace "$@"
bash scripts/ci-python-grpc.sh  # the daemon through a gRPC client that is not ours (Python)
