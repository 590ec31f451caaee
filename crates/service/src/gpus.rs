//! The host's GPUs and their memory, asked of the CUDA driver (through cudarc),
//! never by running `nvidia-smi`.

use cudarc::driver::{result, sys, CudaContext};

/// One GPU as the driver reports it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    pub ordinal: u32,
    pub name: String,
    pub vram_total_bytes: u64,
    pub vram_free_bytes: u64,
}

/// Every GPU the driver sees, with its memory now; empty where there is no
/// driver or no device (a CPU-only host is not an error for status).
///
/// The primary context is retained for the query (cudarc's `CudaContext::new`),
/// which is the context the CUDA backend already holds, so asking costs no new
/// context on a proving host.
pub fn gpus() -> Vec<GpuInfo> {
    if !driver_present() {
        return Vec::new();
    }
    let count = match CudaContext::device_count() {
        Ok(n) => n.max(0) as usize,
        Err(e) => {
            tracing::debug!(%e, "no CUDA devices");
            return Vec::new();
        }
    };
    (0..count)
        .filter_map(|ordinal| {
            let ctx = CudaContext::new(ordinal)
                .map_err(|e| tracing::warn!(ordinal, %e, "could not open GPU"))
                .ok()?;
            let name = ctx.name().unwrap_or_else(|e| format!("unknown ({e})"));
            let (free, total) = ctx.mem_get_info().unwrap_or((0, 0));
            Some(GpuInfo {
                ordinal: ordinal as u32,
                name,
                vram_total_bytes: total as u64,
                vram_free_bytes: free as u64,
            })
        })
        .collect()
}

/// cudarc panics on first use of a missing driver library, so its presence is
/// checked first, the check itself guarded against panics.
fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library by its usual names.
    let present = std::panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
    present
        && std::panic::catch_unwind(result::init)
            .map(|r| r.is_ok())
            .unwrap_or(false)
}
