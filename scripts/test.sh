#!/usr/bin/env bash
# The test suite, as CI runs it (`.ci/run` calls this). Works on a fresh machine with
# a Rust toolchain, Python 3 and a C++ compiler, and no GPU. One step a line, in
# order; add a step as one more line where it belongs.
#
# Nothing here may pass by skipping: NVRTC (CUDA's run-time compiler, from PyPI) must
# install in CI, the kernel-compile and host-arithmetic tests fail without it or a
# C++ compiler, and only tests that need a device skip, saying
# "skipped: no CUDA device". The wgpu backend's tests run on lavapipe, a software
# Vulkan device installed here in CI, and fail (never skip) without it. Tests run
# in release mode (field arithmetic in debug builds is too slow for a 2-core
# machine).
set -euo pipefail
cd "$(dirname "$0")/.."

# Style, lints and docs first: they fail fast.
cargo fmt --all --check
cargo clippy --release --workspace --all-targets -- -D warnings
# The CUDA crate without its `testing` feature (the workspace's test targets turn it on).
cargo clippy --release -p cuzk-cuda --lib -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps --workspace

# NVRTC from PyPI, so every kernel compiles here. In CI a failed install fails the run.
if ! source scripts/nvrtc-env.sh; then
  if [ "${CI:-}" = "true" ]; then echo "error: NVRTC did not install from PyPI" >&2; exit 1; fi
  echo "warning: NVRTC did not install; the kernel-compile tests will fail" >&2
fi

# A software Vulkan device (lavapipe) for the wgpu backend's tests, which fail
# without an adapter. In CI a failed install fails the run.
if ! source scripts/lavapipe-env.sh; then
  if [ "${CI:-}" = "true" ]; then echo "error: lavapipe (mesa-vulkan-drivers) did not install" >&2; exit 1; fi
  echo "warning: no lavapipe; the wgpu tests fail unless CUZK_WGPU_ALLOW_NO_ADAPTER=1" >&2
fi

# PostgreSQL for the queue's tests, on a loopback port; stopped when this ends.
CUZK_TEST_PG_URL=$(bash scripts/ci-postgres.sh start); export CUZK_TEST_PG_URL; trap 'bash scripts/ci-postgres.sh stop' EXIT

# Build everything (the plugin .so files the tests load included), then test.
cargo build --release --workspace --all-targets
cargo test --release --workspace "$@"
bash scripts/ci-python-grpc.sh  # the daemon through a gRPC client that is not ours (Python)
bash scripts/test-staged-postgres.sh  # the PostgreSQL staged for the GPU machine starts from its own files
