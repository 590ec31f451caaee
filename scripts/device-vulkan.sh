#!/usr/bin/env bash
# Sourced on the GPU machine before anything runs the wgpu backend on the NVIDIA
# driver's Vulkan (issue 36): the machine may lack the Vulkan loader, so Debian's
# libvulkan1 (and what it links) travels as .deb files in .device/run/vk
# (scripts/stage-device.sh downloads them) and is unpacked here; the driver's ICD is
# found where the driver installed its manifest, else written to /tmp pointing at
# the driver's libGLX_nvidia.so.0. Says what it found; exports VK_ICD_FILENAMES
# when it found an NVIDIA ICD.
#
#   source scripts/device-vulkan.sh
vk_debs=${VK_DEBS:-.device/run/vk}
if ! ldconfig -p | grep -q 'libvulkan.so.1 '; then
    for f in "$vk_debs"/*.deb; do
        [ -e "$f" ] && dpkg -x "$f" / 2>/dev/null
    done
    ldconfig 2>/dev/null
fi
echo "vulkan loader: $(ldconfig -p | grep -m1 'libvulkan.so.1 ' | awk '{print $NF}')"
vk_icd=
for j in /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json; do
    [ -e "$j" ] && { vk_icd=$j; break; }
done
if [ -z "$vk_icd" ]; then
    vk_glx=$(ldconfig -p | grep -m1 'libGLX_nvidia.so.0 ' | awk '{print $NF}')
    if [ -n "$vk_glx" ]; then
        vk_icd=/tmp/nvidia_icd.json
        printf '{"file_format_version":"1.0.0","ICD":{"library_path":"%s","api_version":"1.3.0"}}\n' \
            "$vk_glx" >"$vk_icd"
    fi
fi
if [ -n "$vk_icd" ]; then
    export VK_ICD_FILENAMES=$vk_icd
    echo "vulkan ICD: $vk_icd ($(grep -o '"library_path"[^,}]*' "$vk_icd"))"
else
    echo "vulkan ICD: none (no nvidia_icd.json and no libGLX_nvidia.so.0: the driver was installed without its graphics libraries)"
    ls /usr/lib/x86_64-linux-gnu/ | grep -i nvidia | head -20
fi
