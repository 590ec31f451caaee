#!/usr/bin/env bash
# Source this: installs PyPI's nvidia-cuda-nvrtc (CUDA 13, the device's major
# version) into .venv-nvrtc once (a venv, or `pip install --target` where python3
# has no venv module) and puts libnvrtc on LD_LIBRARY_PATH. Returns non-zero when
# it cannot (scripts/test.sh fails the run then under CI=true).
_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_venv="$_root/.venv-nvrtc"
_pkg="nvidia-cuda-nvrtc==13.0.*"
if [ ! -d "$_venv" ]; then
  { python3 -m venv "$_venv" && "$_venv/bin/pip" install -q "$_pkg"; } ||
    { rm -rf "$_venv" && python3 -m pip install -q --target "$_venv/site-packages" "$_pkg"; } ||
    { rm -rf "$_venv"; return 1; }
fi
_lib="$(find "$_venv" -type d -path '*nvidia/cu13/lib' | head -n1)"
[ -n "$_lib" ] || { echo "no nvidia/cu13/lib in $_venv (delete it to reinstall)" >&2; return 1; }
[ -e "$_lib/libnvrtc.so" ] || ln -sf "$(ls "$_lib"/libnvrtc.so.13* | head -n1)" "$_lib/libnvrtc.so"
export LD_LIBRARY_PATH="$_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
