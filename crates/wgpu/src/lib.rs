//! The portable GPU backend: one partition's H and G1 MSMs through wgpu, so one
//! build runs on Vulkan (NVIDIA, AMD RADV, Intel, lavapipe in CI), Metal (Apple)
//! and DX12 (Windows), with every kernel in WGSL.
//!
//! # The central choice: portability over peak speed, exactness everywhere
//!
//! WGSL has 32-bit integers only and no vendor intrinsics, so Fr is eight u32
//! limbs with products built from 16-bit halves (`shaders/fr.wgsl`), and no
//! kernel relies on subgroup operations, 64-bit atomics or a vendor's memory model.
//! That costs speed against the CUDA backend's PTX; what it buys is one backend for
//! every vendor, tested in CI on a software Vulkan device (lavapipe), with results
//! equal bit for bit to the CPU reference's (`cuzk_gpu_backend::CpuBackend`): field
//! arithmetic is exact, so any correct schedule of the same transforms gives the
//! same H, and the same sums give the same proof.
//!
//! Layers, inner first: [`context`] (instance, adapter choice, device with the
//! adapter's own limits, its memory from the platform), `buffers` (vectors of Fr
//! planned against the binding limits, split across bindings), `kernels`
//! (compiled WGSL and a dispatch recorder), [`ntt`] (transforms and H), and
//! [`WgpuBackend`], the only type the plugin uses: `cuzk_gpu_backend::GpuBackend`
//! over all of it. The G1 MSMs go through `msm_bridge` (see there) to [`msm`].
//!
//! **Architecture invariant:** knows nothing of circuits, synthesis or parameter
//! files (as `cuzk-gpu-backend`); no `unsafe` beyond reading Vulkan's memory heaps.

mod backend;
mod buffers;
pub mod context;
mod kernels;
pub mod memory;
pub mod msm;
mod msm_bridge;
pub mod ntt;

pub use backend::WgpuBackend;
pub use buffers::{chunk_len, FrVec, FR_BYTES};
pub use context::{adapters, Context, WgpuConfig};
pub use memory::{DeviceMemory, MemorySource};
pub use msm_bridge::G1MsmEngine;
pub use ntt::Ntt;

use cuzk_gpu_backend::BackendError;

/// Errors of the wgpu backend, each saying what failed and where.
#[derive(Debug, thiserror::Error)]
pub enum WgpuError {
    #[error(
        "no wgpu adapter matches (name filter {filter:?}, device {device}); adapters found: {found:?}"
    )]
    NoAdapter {
        filter: String,
        device: u32,
        found: Vec<String>,
    },
    #[error("wgpu device error: {0}")]
    Device(String),
    #[error("a WGSL kernel did not compile: {0}")]
    Shader(String),
    #[error("buffer plan: {0}")]
    Plan(String),
    #[error("{what} need {need} bytes of device memory; the device has {have}")]
    TooLarge {
        what: &'static str,
        need: u64,
        have: u64,
    },
    #[error("the NTT domain 2^{log} exceeds what this backend supports (2^{max})")]
    DomainTooLarge { log: u32, max: u32 },
    #[error("the NTT input has {got} elements but the domain has {want}")]
    NttLength { got: usize, want: usize },
    #[error("a, b and c have different lengths ({a}, {b}, {c})")]
    AbcShape { a: usize, b: usize, c: usize },
}

impl From<WgpuError> for BackendError {
    fn from(e: WgpuError) -> Self {
        match e {
            WgpuError::DomainTooLarge { log, max } => BackendError::DomainTooLarge { log, max },
            WgpuError::NttLength { got, want } => BackendError::NttLength { got, want },
            WgpuError::AbcShape { a, b, c } => BackendError::AbcShape { a, b, c },
            other => BackendError::Device(other.to_string()),
        }
    }
}
