//! The G1 MSMs of [`WgpuBackend`](crate::WgpuBackend), behind one seam.
//!
//! Every G1 MSM of a partition (H, L, A, B_G1) goes through [`G1MsmEngine`], and
//! the engine is named once, by [`Engine`]: the WGSL MSM ([`crate::msm::G1Msm`]),
//! with each base vector uploaded once and kept resident ([`DeviceBases`]) until
//! the host forgets that memory. The seam keeps the backend's residency and
//! bookkeeping independent of how the sums are computed, and lets a test drive the
//! backend with the engine it names.

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, Scalar};
use cuzk_alloc::SplitRef;
use cuzk_gpu_backend::BackendError;

use crate::context::Context;
use crate::msm::{DeviceBases, G1Msm, MsmError};

/// The G1 MSMs the backend needs, over bases it keeps resident between partitions.
///
/// Residency: the backend calls [`G1MsmEngine::upload_bases`] the first time it
/// sees a base vector (keyed by its host address and length) and keeps the
/// handle until the host forgets that memory (`GpuBackend::forget_bases`), when
/// it hands the handle to [`G1MsmEngine::release_bases`]. Every MSM call gets both
/// the host bases and the handle: an engine that computes on the host reads the
/// former, a device engine the latter.
pub trait G1MsmEngine: Send + Sync + Sized {
    /// What an engine keeps of a base vector (a device copy, or nothing).
    type Resident: Send + Sync;

    fn new(ctx: &Arc<Context>, pool: Arc<rayon::ThreadPool>) -> Result<Self, BackendError>;

    fn upload_bases(&self, bases: &[G1Affine]) -> Result<Self::Resident, BackendError>;

    /// Frees what `upload_bases` kept; returns the bytes freed.
    fn release_bases(&self, resident: Self::Resident) -> u64;

    /// `Σ scalars[i]·bases[i]` over `scalars.len()` bases (the H MSM).
    fn msm(
        &self,
        bases: &[G1Affine],
        resident: &Self::Resident,
        scalars: &[Scalar],
    ) -> Result<G1Projective, BackendError>;

    /// One query's MSM from its split (the sum of the ones plus the tail's MSM).
    fn split_msm(
        &self,
        bases: &[G1Affine],
        resident: &Self::Resident,
        split: SplitRef<'_>,
    ) -> Result<G1Projective, BackendError>;
}

/// The engine [`WgpuBackend`](crate::WgpuBackend) uses.
pub(crate) type Engine = GpuG1Msm;

/// The MSMs on the device: [`G1Msm`]'s pipelines, compiled once per context.
pub struct GpuG1Msm {
    ctx: Arc<Context>,
    msm: G1Msm,
}

impl std::fmt::Debug for GpuG1Msm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuG1Msm")
            .field("adapter", &self.ctx.info.name)
            .finish_non_exhaustive()
    }
}

fn device(e: MsmError) -> BackendError {
    BackendError::Device(format!("wgpu G1 MSM: {e}"))
}

impl G1MsmEngine for GpuG1Msm {
    /// The bases in the device's layout, resident.
    type Resident = DeviceBases;

    fn new(ctx: &Arc<Context>, _pool: Arc<rayon::ThreadPool>) -> Result<Self, BackendError> {
        Ok(Self {
            msm: G1Msm::new(&ctx.device).map_err(device)?,
            ctx: Arc::clone(ctx),
        })
    }

    fn upload_bases(&self, bases: &[G1Affine]) -> Result<DeviceBases, BackendError> {
        self.msm
            .upload(&self.ctx.device, &self.ctx.queue, bases)
            .map_err(device)
    }

    fn release_bases(&self, resident: DeviceBases) -> u64 {
        let bytes = resident.bytes();
        drop(resident);
        bytes
    }

    fn msm(
        &self,
        _bases: &[G1Affine],
        resident: &DeviceBases,
        scalars: &[Scalar],
    ) -> Result<G1Projective, BackendError> {
        self.msm
            .msm_scalars(&self.ctx.device, &self.ctx.queue, resident, scalars)
            .map_err(device)
    }

    fn split_msm(
        &self,
        _bases: &[G1Affine],
        resident: &DeviceBases,
        split: SplitRef<'_>,
    ) -> Result<G1Projective, BackendError> {
        self.msm
            .split_msm(&self.ctx.device, &self.ctx.queue, resident, split)
            .map_err(device)
    }
}
