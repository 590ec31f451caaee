#!/usr/bin/env bash
# Source this: makes sure a software Vulkan device (Mesa's lavapipe, Debian's
# mesa-vulkan-drivers with the libvulkan1 loader) is there for the wgpu backend's
# tests, installing it with apt under CI=true when it is missing, and points the
# Vulkan loader at it alone (VK_ICD_FILENAMES), so a CI machine's other drivers
# cannot change which adapter the tests get. Returns non-zero when there is none
# (scripts/test.sh fails the run then under CI=true: the wgpu tests fail, never
# skip, without an adapter).
_icd() { ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n1; }
if [ -z "$(_icd)" ] || ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
  if [ "${CI:-}" = "true" ]; then
    _sudo=""; [ "$(id -u)" = 0 ] || _sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $_sudo apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $_sudo apt-get install -y -qq --no-install-recommends \
        mesa-vulkan-drivers libvulkan1 >/dev/null || return 1
  fi
fi
_found="$(_icd)"
[ -n "$_found" ] || { echo "no lavapipe ICD in /usr/share/vulkan/icd.d (apt-get install mesa-vulkan-drivers libvulkan1)" >&2; return 1; }
export VK_ICD_FILENAMES="$_found"
