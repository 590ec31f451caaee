//! The engine's devices as status shows them: what each backend reported when it
//! opened its device, with the memory free now read from NVML where the host has
//! it (`nvml-wrapper`, the library `nvidia-smi` itself uses, loaded at run time).
//!
//! Status never opens a device: it used to ask the CUDA driver, which retained a
//! context on every GPU of the host at each `GetStatus` (hundreds of MB of
//! device memory each, on GPUs another process may own). NVML reads the
//! driver's counters without a context, so this crate no longer links CUDA.

use std::sync::OnceLock;

use cuzk_gpu_backend::DeviceInfo;
use nvml_wrapper::Nvml;

/// One device of the engine, with its memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    pub ordinal: u32,
    pub name: String,
    pub vram_total_bytes: u64,
    /// Free now (NVML), or at the backend's opening where NVML cannot say.
    pub vram_free_bytes: u64,
}

/// NVML, initialised once per process; `None` where the library or the driver
/// is missing (a CPU-only host is not an error for status).
fn nvml() -> Option<&'static Nvml> {
    static NVML: OnceLock<Option<Nvml>> = OnceLock::new();
    NVML.get_or_init(|| {
        Nvml::init()
            .map_err(|e| tracing::debug!(%e, "NVML unavailable: status shows device memory as reported at opening"))
            .ok()
    })
    .as_ref()
}

/// `(name, total, free)` of NVML's device `index` now.
fn nvml_memory(index: u32) -> Option<(String, u64, u64)> {
    let device = nvml()?.device_by_index(index).ok()?;
    let name = device.name().ok()?;
    let mem = device.memory_info().ok()?;
    Some((name, mem.total, mem.free))
}

/// Status's entry for an engine lane: `reported` is what its backend said at
/// opening (`None`: a CPU lane, named `cpu`, no device memory).
///
/// NVML numbers devices by PCI bus; CUDA's ordinals follow it only when no
/// `CUDA_VISIBLE_DEVICES` remaps them, and a lane's free memory is taken from
/// NVML only then and only where the device there has the lane's name, so a
/// mismatch shows the memory at opening rather than another card's.
pub(crate) fn lane_info(ordinal: u32, reported: Option<DeviceInfo>) -> GpuInfo {
    let Some(d) = reported else {
        return GpuInfo {
            ordinal,
            name: "cpu".into(),
            vram_total_bytes: 0,
            vram_free_bytes: 0,
        };
    };
    let remapped = std::env::var_os("CUDA_VISIBLE_DEVICES").is_some();
    let now = (!remapped)
        .then(|| nvml_memory(ordinal))
        .flatten()
        .filter(|(name, _, _)| *name == d.name);
    match now {
        Some((_, total, free)) => GpuInfo {
            ordinal,
            name: d.name,
            vram_total_bytes: total,
            vram_free_bytes: free,
        },
        None => GpuInfo {
            ordinal,
            name: d.name,
            vram_total_bytes: d.total_memory,
            vram_free_bytes: d.free_memory,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_lane_has_no_device_memory_and_a_gpu_lane_keeps_its_name() {
        assert_eq!(
            lane_info(3, None),
            GpuInfo {
                ordinal: 3,
                name: "cpu".into(),
                vram_total_bytes: 0,
                vram_free_bytes: 0
            }
        );
        // No NVML device has this name: the figures at opening stand.
        let reported = DeviceInfo {
            name: "not a real card".into(),
            total_memory: 80 << 30,
            free_memory: 70 << 30,
        };
        let g = lane_info(0, Some(reported));
        assert_eq!(g.name, "not a real card");
        assert_eq!(
            (g.vram_total_bytes, g.vram_free_bytes),
            (80 << 30, 70 << 30)
        );
    }
}
