//! The CUDA backend: one partition's H computation and G1 MSMs (and, when the
//! scheduler hands it over, the B query in G2) on an NVIDIA GPU.
//!
//! Central choice: **kernels are CUDA C compiled at run time by NVRTC** (through
//! `cudarc` with dynamic loading), not built by `nvcc` at build time. The crate then
//! builds and its non-GPU tests run on machines without CUDA (CI), a machine without
//! a driver gets a clear [`CudaError::NoDevice`] instead of a link error or a panic,
//! and the code is generated for the exact device found (`sm_90` on the H200). The
//! price, a compile of a few seconds per process, is paid once
//! (`gpu::compiled_modules` caches per process, [`cache::KernelCache`] on disk).
//!
//! Layers: raw driver calls (`cudarc::driver::sys`) → `Result` wrappers
//! (`cudarc::driver::result`, `raw`) → the small safe API of `gpu` → the NTT
//! (`ntt`) and MSM (`msm`) engines, and `streamed` for bases that do not fit on
//! the device → [`CudaBackend`], the only thing the rest of cuzk needs, an
//! implementation of [`cuzk_gpu_backend::GpuBackend`].
//!
//! Public surface: the backend and its settings ([`CudaConfig`], [`CudaTuning`] and
//! what they name), its per-instance [`Tuning`] (MSM launch parameters and
//! [`Profiler`]), [`CudaError`], [`KernelCache`], and [`footprint`], the device
//! memory arithmetic the planner shares with the backend. The engines below the
//! backend and the test kernels' launches are `testing`'s, behind the `testing`
//! feature, which only this crate's tests and cuzk-gpu-check turn on.
//!
//! Field elements and points cross to the device byte for byte: blstrs stores Fr and
//! Fq as little-endian u64 Montgomery limbs (R = 2^256 and 2^384), which the kernels
//! read as u32 limbs with the same R.

mod backend;
mod cache;
mod config;
mod error;
pub mod footprint;
mod gpu;
mod kernels;
mod msm;
mod ntt;
mod profile;
mod raw;
mod spmv;
mod streamed;
#[cfg(feature = "testing")]
pub mod testing;
mod tuning;

pub use backend::{BasePlacement, CudaBackend};
pub use cache::KernelCache;
pub use config::{CudaConfig, CudaTuning, HostWait, SplitUpload, StreamStaging, WitnessStaging};
pub use error::CudaError;
pub(crate) use gpu::launch;
pub use msm::{MsmTuning, Scatter, SumVariant};
pub use ntt::{HBuffers, NttKernel};
pub use profile::{Profiler, Report};
pub use tuning::Tuning;

/// Log2 of the NTT domain for `n` constraints (the next power of two).
pub fn log_domain(n: usize) -> u32 {
    cuzk_gpu_backend::log_domain(n)
}
