//! `cuzk-wgpu`: a portable GPU backend through wgpu (Vulkan, Metal, DX12).
//!
//! This branch holds the G1 MSM ([`msm`]); the device context, the NTT and the
//! `GpuBackend` implementation live beside it.

pub mod msm;
