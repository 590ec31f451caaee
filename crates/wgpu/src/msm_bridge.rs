//! **The merge point of the G1 MSM.** [`WgpuBackend`](crate::WgpuBackend) computes
//! every G1 MSM (H, L, A, B_G1) through the [`G1MsmEngine`] seam below, with the
//! engine named once, by [`Engine`]. On this branch that engine is [`CpuG1Msm`]:
//! `cuzk-msm-cpu` on the backend's pool, exact, so proofs are already the CPU
//! backend's bytes while the H computation runs on the device.
//!
//! At merge, this file is replaced by one whose `Engine` wraps the WGSL MSM
//! (`crate::msm::G1Msm`: `upload` for [`G1MsmEngine::upload_bases`], dropping its
//! `DeviceBases` for [`G1MsmEngine::release_bases`], `split_msm` for
//! [`G1MsmEngine::split_msm`]; the dense H MSM is a split whose every scalar is in
//! the tail, or a dense entry point of its own). Nothing else in the crate names
//! an MSM implementation.

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, Scalar};
use cuzk_alloc::SplitRef;
use cuzk_gpu_backend::BackendError;

use crate::context::Context;

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

/// The engine [`WgpuBackend`](crate::WgpuBackend) uses: the merge replaces this.
pub(crate) type Engine = CpuG1Msm;

/// The MSMs on the host (`cuzk-msm-cpu`), until the WGSL MSM lands here.
#[derive(Debug)]
pub struct CpuG1Msm {
    pool: Arc<rayon::ThreadPool>,
}

impl G1MsmEngine for CpuG1Msm {
    /// The host's bases are read in place: nothing is kept.
    type Resident = ();

    fn new(_ctx: &Arc<Context>, pool: Arc<rayon::ThreadPool>) -> Result<Self, BackendError> {
        Ok(Self { pool })
    }

    fn upload_bases(&self, _bases: &[G1Affine]) -> Result<(), BackendError> {
        Ok(())
    }

    fn release_bases(&self, _resident: ()) -> u64 {
        0
    }

    fn msm(
        &self,
        bases: &[G1Affine],
        _resident: &(),
        scalars: &[Scalar],
    ) -> Result<G1Projective, BackendError> {
        Ok(cuzk_msm_cpu::msm_g1(bases, scalars, &self.pool)?)
    }

    fn split_msm(
        &self,
        bases: &[G1Affine],
        _resident: &(),
        split: SplitRef<'_>,
    ) -> Result<G1Projective, BackendError> {
        Ok(cuzk_msm_cpu::split_msm_g1(bases, split, &self.pool)?)
    }
}
