#!/usr/bin/env bash
# Builds everything a visit to the GPU machine needs and stages it in .device/run
# (ignored): the cuzk CLI, the backend plugins, cuzk-gpu-check, the CUDA crate's
# device test binaries (the lib's unit tests, among them the error-path test of
# issue #12; tests/gpu.rs; tests/device.rs, every kernel against the CPU;
# tests/spmv.rs, a, b, c from the witness on the device), all
# stripped, and every kernel module compiled to
# CUBIN here by NVRTC from PyPI into .device/run/kernels (found there beside the
# binaries and plugins, so the device spends no time compiling), and a PostgreSQL
# server packed in .device/run/pg (scripts/stage-postgres.sh) for the queue's
# round (scripts/h200-queue.sh). Then, through the
# device tool with carry [".device/run"]:
#
#   bash scripts/h200-run.sh "$OUT"
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/nvrtc-env.sh
target=${CARGO_TARGET_DIR:-target}
cargo build --release --workspace --bins --lib
# cuzk-gpu-check needs cuzk-cuda's `testing` feature (the engines below the backend).
cargo build --release -p cuzk-cuda --features testing --bin cuzk-gpu-check
rm -rf .device/run
mkdir -p .device/run/tests
for f in cuzk cuzk-gpu-check "$target"/release/libcuzk_plugin_*.so; do
    cp "$target/release/$(basename "$f")" .device/run/
    strip .device/run/"$(basename "$f")"
done
# The CUDA crate's test binaries: the lib's unit tests (named lib) and each file of
# crates/cuda/tests that needs a device (named after it).
cargo test --release -p cuzk-cuda --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("profile", {}).get("test") or not m.get("executable"):
        continue
    kind = m["target"]["kind"][0]
    name = "lib" if kind == "lib" else m["target"]["name"]
    print(name, m["executable"])
' | while read -r name exe; do
    case "$name" in lib | gpu | device | spmv) cp "$exe" ".device/run/tests/$name" && strip ".device/run/tests/$name" ;; esac
done
[ -x .device/run/tests/lib ] && [ -x .device/run/tests/gpu ] && [ -x .device/run/tests/device ] && [ -x .device/run/tests/spmv ] || { echo "error: test binaries not staged" >&2; exit 1; }
.device/run/cuzk-gpu-check --compile-only .device/run/kernels sm_90
cp -r .device/run/kernels .device/run/tests/kernels   # beside the test binaries (no links: the device tool drops them)
# PostgreSQL for scripts/h200-queue.sh: the GPU machine has none and installs nothing.
bash scripts/stage-postgres.sh .device/run/pg
# The Vulkan loader for the wgpu backend on the NVIDIA driver (the machine may lack
# it): Debian's packages, unpacked there by scripts/device-vulkan.sh.
mkdir -p .device/run/vk
(cd .device/run/vk && apt-get download -q libvulkan1 libegl1 libglvnd0 libgl1 libglx0 \
    libx11-6 libx11-data libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 libxext6 2>/dev/null) ||
    echo "stage-device: the Vulkan loader's packages were not downloaded" >&2
# The wgpu backend's tests and benches (issue 36), for scripts/wgpu-device.sh: on
# the NVIDIA driver's Vulkan there, beside the CUDA kernel table of the same visit.
mkdir -p .device/run/wgpu
{
    cargo test --release -p cuzk-wgpu --no-run --message-format=json 2>/dev/null
    cargo bench -p cuzk-wgpu --no-run --message-format=json 2>/dev/null
} | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    kind = m["target"]["kind"][0]
    if kind in ("test", "bench"):
        print(kind + "-" + m["target"]["name"], m["executable"])
' | while read -r name exe; do
    cp "$exe" ".device/run/wgpu/$name" && strip ".device/run/wgpu/$name"
done
# WGPU_BASE_BENCH=PATH: the NTT bench of an earlier build (the one a kernel change
# is measured against), run beside this build's by scripts/wgpu-device.sh.
if [ -n "${WGPU_BASE_BENCH:-}" ]; then
    cp "$WGPU_BASE_BENCH" .device/run/wgpu/bench-wgpu-base && strip .device/run/wgpu/bench-wgpu-base
fi
ls .device/run/wgpu
# SnarkPack's CPU aggregation bench (issue 35: 65 NI-PoRep sectors' 8192 proofs on the
# device host's cores, scripts/ni-device.sh agg).
cargo bench -p cuzk-filecoin --bench aggregate --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "aggregate":
        print(m["executable"])
' | while read -r exe; do cp "$exe" .device/run/bench-aggregate && strip .device/run/bench-aggregate; done
[ -x .device/run/bench-aggregate ] || echo "stage-device: the aggregate bench was not staged" >&2
# Everything but PostgreSQL in one xz archive (~21 MB against ~100 MB unpacked), so
# that one call carries it under the 64 MiB limit: carry [".device/pack"] and start
# the command with `(cd .device && rm -rf run && tar -xJf pack/run.tar.xz)`; the
# unpacked folder stays on the machine for the calls after while it is warm.
mkdir -p .device/pack
tar -C .device -cf - --exclude=run/pg run | xz -T0 -6 >.device/pack/run.tar.xz
du -sh .device/run .device/run/* .device/pack/run.tar.xz
