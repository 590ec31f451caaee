//! The GPU backend interface: everything one partition does on an accelerator, as
//! one call over plain slices, plus the CPU reference implementation of it.
//!
//! One call per partition (not one per kernel) is the shape the C2 history settled
//! on (phases 6–8): the scheduler takes the GPU lock once, the backend keeps `a, b,
//! c` and `h` on the device between the NTTs and the H MSM, and its results come back
//! as a handful of points. The CPU reference implements the same call so that every
//! GPU result can be checked against it and so that a machine without a GPU proves.
//!
//! Architecture invariant: this crate knows nothing of circuits, synthesis or
//! parameters files. Its inputs are `Abc`, bases and the split scalars that
//! `prep_msm` produced; its outputs are group elements.

#![forbid(unsafe_code)]

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
pub use cuzk_alloc::Abc;
pub use cuzk_alloc::{SplitRef, SplitScalars};
pub use cuzk_synth::{CsrRef, R1csRef, Term};

mod cpu;
mod devices;
pub mod lock;
pub mod ntt;
mod tables;

pub use cpu::CpuBackend;
pub use devices::{DeviceLane, DeviceSet, DeviceSetError};
pub use ntt::compute_h;

/// What a backend offers; checked by the scheduler before work is handed to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Short name, e.g. `cpu` or `cuda`.
    pub name: String,
    /// Largest NTT domain, as log2 of its size.
    pub max_log_domain: u32,
    /// Whether `PartitionJob::b_g2` may be `Some` (the backend does the G2 MSM too).
    pub g2: bool,
    /// Whether B in G2 is faster here than on the engine's CPU `b_g2_msm` stage even
    /// without a device (the CPU backend with fixed-base tables).
    pub g2_preferred: bool,
    /// The devices the backend drives (empty for the CPU backend).
    pub devices: Vec<DeviceInfo>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub total_memory: u64,
    pub free_memory: u64,
}

/// One MSM over a query whose scalars `prep_msm` already split into zeros (dropped),
/// ones (summed by plain addition) and a tail (Pippenger).
#[derive(Clone, Copy, Debug)]
pub struct SplitMsm<'a, G> {
    /// The query's bases, in the split's index space (dense inputs, then dense aux).
    pub bases: &'a [G],
    pub split: SplitRef<'a>,
}

impl<G> SplitMsm<'_, G> {
    /// The bases must cover the split's index space (`split_msm_*` accepts a longer
    /// base vector, so this does too); `query` names it in the error.
    pub fn check_bases(&self, query: &'static str) -> Result<(), BackendError> {
        let want = self.split.num_bases();
        if self.bases.len() < want {
            return Err(BackendError::BaseCount {
                query,
                got: self.bases.len(),
                want,
            });
        }
        Ok(())
    }
}

/// Everything the accelerator does for one partition.
#[derive(Debug)]
pub struct PartitionJob<'a> {
    /// The evaluations from synthesis, consumed: the backend may free them as soon
    /// as they are on the device.
    pub abc: Abc,
    /// The h query: `domain - 1` bases where `domain` is `abc.len()` rounded up to a
    /// power of two.
    pub h_bases: &'a [G1Affine],
    /// The l query over the aux assignment (full density).
    pub l: SplitMsm<'a, G1Affine>,
    /// The a query over inputs (full density) and the dense aux.
    pub a: SplitMsm<'a, G1Affine>,
    /// The b query in G1 over dense inputs and dense aux.
    pub b_g1: SplitMsm<'a, G1Affine>,
    /// The b query in G2; `Some` only when the backend offers G2 and the run wants it
    /// on the device instead of the CPU `b_g2_msm` stage.
    pub b_g2: Option<SplitMsm<'a, G2Affine>>,
}

/// `a, b, c` borrowed, for a backend that only reads them.
#[derive(Clone, Copy, Debug)]
pub struct AbcRef<'a> {
    pub a: &'a [Scalar],
    pub b: &'a [Scalar],
    pub c: &'a [Scalar],
}

impl<'a> AbcRef<'a> {
    pub fn new(abc: &'a Abc) -> Self {
        Self {
            a: &abc.a,
            b: &abc.b,
            c: &abc.c,
        }
    }

    pub fn len(&self) -> usize {
        self.a.len()
    }

    pub fn is_empty(&self) -> bool {
        self.a.is_empty()
    }

    pub fn is_consistent(&self) -> bool {
        self.a.len() == self.b.len() && self.b.len() == self.c.len()
    }
}

/// A [`PartitionJob`] whose `a, b, c` are borrowed (a plugin's view of the host's
/// buffers, say).
#[derive(Clone, Copy, Debug)]
pub struct PartitionJobRef<'a> {
    pub abc: AbcRef<'a>,
    pub h_bases: &'a [G1Affine],
    pub l: SplitMsm<'a, G1Affine>,
    pub a: SplitMsm<'a, G1Affine>,
    pub b_g1: SplitMsm<'a, G1Affine>,
    pub b_g2: Option<SplitMsm<'a, G2Affine>>,
}

impl<'a> PartitionJobRef<'a> {
    /// An owned job, copying `a, b, c` into vectors with room for the NTT domain
    /// (so an in-place H computation pads them without a second copy).
    pub fn to_owned_job(&self) -> PartitionJob<'a> {
        let domain = self.abc.len().max(1).next_power_of_two();
        let copy = |v: &[Scalar]| {
            let mut out = Vec::with_capacity(domain.max(v.len()));
            out.extend_from_slice(v);
            out
        };
        PartitionJob {
            abc: Abc {
                a: copy(self.abc.a),
                b: copy(self.abc.b),
                c: copy(self.abc.c),
            },
            h_bases: self.h_bases,
            l: self.l,
            a: self.a,
            b_g1: self.b_g1,
            b_g2: self.b_g2,
        }
    }
}

/// Where a backend can evaluate `a = A·w, b = B·w, c = C·w` itself, from the
/// witness and the compiled matrices ([`GpuBackend::prove_partition_witness`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AbcEval {
    /// Not offered: the engine evaluates `a, b, c` (its spmv stage) and hands them
    /// over.
    #[default]
    No,
    /// On the host, as the engine's spmv would (the CPU backend): no gain, but the
    /// same call, so the witness path runs on any machine.
    Host,
    /// On the device, from a device copy of the matrices kept per compiled shape:
    /// the host never holds `a, b, c` (12.5 GB less a 32 GiB-sector partition, and
    /// the spmv's CPU time) and uploads the witness (a third of their size) instead.
    Device,
}

/// A partition handed over as its witness: the backend evaluates `a, b, c` from
/// `r1cs` and `input, aux` (columns `[input, aux]`), then proves as
/// [`GpuBackend::prove_partition_ref`] would. The MSM queries are those of
/// [`PartitionJobRef`].
#[derive(Clone, Copy, Debug)]
pub struct WitnessJobRef<'a> {
    pub r1cs: R1csRef<'a>,
    pub input: &'a [Scalar],
    pub aux: &'a [Scalar],
    pub h_bases: &'a [G1Affine],
    pub l: SplitMsm<'a, G1Affine>,
    pub a: SplitMsm<'a, G1Affine>,
    pub b_g1: SplitMsm<'a, G1Affine>,
    pub b_g2: Option<SplitMsm<'a, G2Affine>>,
}

impl<'a> WitnessJobRef<'a> {
    /// The job with `a, b, c` evaluated elsewhere (on the host, say).
    pub fn with_abc(&self, abc: AbcRef<'a>) -> PartitionJobRef<'a> {
        PartitionJobRef {
            abc,
            h_bases: self.h_bases,
            l: self.l,
            a: self.a,
            b_g1: self.b_g1,
            b_g2: self.b_g2,
        }
    }
}

/// The sums the partition's proof is assembled from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionResult {
    pub h: G1Projective,
    pub l: G1Projective,
    pub a: G1Projective,
    pub b_g1: G1Projective,
    pub b_g2: Option<G2Projective>,
}

/// Errors of a backend. Variants say which stage failed and why.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("the NTT domain 2^{log} exceeds what this backend supports (2^{max})")]
    DomainTooLarge { log: u32, max: u32 },
    #[error("the NTT input has {got} elements but the domain has {want}")]
    NttLength { got: usize, want: usize },
    #[error("a, b and c have different lengths ({a}, {b}, {c})")]
    AbcShape { a: usize, b: usize, c: usize },
    #[error("the {query} query has {got} bases but the circuit needs {want}")]
    BaseCount {
        query: &'static str,
        got: usize,
        want: usize,
    },
    #[error("this backend does not offer {0}")]
    Unsupported(&'static str),
    #[error("MSM failed: {0}")]
    Msm(#[from] cuzk_msm_cpu::MsmError),
    #[error("device error: {0}")]
    Device(String),
    /// A backend behind the plugin boundary refused the job's shape (the input's
    /// fault, not the device's).
    #[error("the backend rejected the job: {0}")]
    Rejected(String),
}

impl BackendError {
    /// Whether the failure is the device's (another device may well succeed with
    /// the same job) rather than the input's (every device would refuse it). The
    /// engine retries a partition on another device only for these.
    pub fn is_device(&self) -> bool {
        matches!(self, BackendError::Device(_))
    }
}

/// What [`GpuBackend::stage`] prepared (page-locked host memory, say), undone when
/// dropped. Dropping never panics: a panic inside the undo is contained.
///
/// Owned (it borrows neither the backend nor `a, b, c`), so a caller can hold it
/// across the GPU-lock wait and the backend call; the borrow it cannot express is
/// the contract on [`GpuBackend::stage`].
#[must_use = "the staging is undone when the guard is dropped"]
pub struct Staged {
    undo: Option<Box<dyn FnOnce() + Send>>,
}

impl Staged {
    /// Nothing staged (the default of [`GpuBackend::stage`]).
    pub fn none() -> Self {
        Self { undo: None }
    }

    /// A guard that runs `undo` when dropped.
    pub fn new(undo: impl FnOnce() + Send + 'static) -> Self {
        Self {
            undo: Some(Box::new(undo)),
        }
    }

    /// Whether anything was staged (and will be undone on drop).
    pub fn is_staged(&self) -> bool {
        self.undo.is_some()
    }

    /// One guard for two stagings: dropped, it undoes `self`'s, then `other`'s
    /// (even if the first panics).
    pub fn and(mut self, mut other: Staged) -> Staged {
        match (self.undo.take(), other.undo.take()) {
            (None, None) => Staged::none(),
            (Some(undo), None) | (None, Some(undo)) => Staged { undo: Some(undo) },
            (Some(first), Some(second)) => Staged::new(move || {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(first));
                second();
            }),
        }
    }
}

impl Default for Staged {
    fn default() -> Self {
        Self::none()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(undo) = self.undo.take() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(undo));
        }
    }
}

impl std::fmt::Debug for Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged")
            .field("staged", &self.is_staged())
            .finish()
    }
}

/// A backend: the accelerator half of a partition.
pub trait GpuBackend: Send + Sync {
    fn capabilities(&self) -> Capabilities;

    /// Prepares a partition's `a, b, c` for the backend call that will use them,
    /// *before* the caller takes the GPU lock: the CUDA backend page-locks (pins)
    /// them here, ≈0.5 s for the 12 GiB of a 2^27 partition, which then no longer
    /// runs inside the locked GPU region. The default stages nothing.
    ///
    /// The contract:
    ///
    /// - the caller keeps `a, b, c` alive and unmoved (not freed, not reallocated)
    ///   until the returned guard is dropped;
    /// - the caller drops the guard after the backend call that used them returns,
    ///   and passes the same `a, b, c` to that call *borrowed*
    ///   ([`GpuBackend::prove_partition_ref`]), since the owned
    ///   [`GpuBackend::prove_partition`] may free them inside the call, while
    ///   still staged; a backend that stages should therefore override
    ///   `prove_partition_ref` (the default copies);
    /// - staging is an optimisation, never needed for correctness: the backend call
    ///   works the same with or without it, and a caller that gets an error here
    ///   logs it and goes on unstaged.
    fn stage(&self, abc: AbcRef<'_>) -> Result<Staged, BackendError> {
        let _ = abc;
        Ok(Staged::none())
    }

    /// Computes H from `a, b, c` and the MSMs H, L, A, B_G1 (and B_G2 if asked).
    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError>;

    /// The same call with `a, b, c` borrowed. The default copies them into an owned
    /// job (the CPU backend transforms them in place); a backend that only reads
    /// them (a GPU uploads them) overrides this and saves the copy, 12 GiB for a
    /// 32 GiB-sector partition.
    fn prove_partition_ref(
        &self,
        job: PartitionJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        self.prove_partition(job.to_owned_job())
    }

    /// Where this backend evaluates `a, b, c` from a witness, if it does
    /// ([`GpuBackend::prove_partition_witness`]); the default does not.
    fn abc_eval(&self) -> AbcEval {
        AbcEval::No
    }

    /// [`GpuBackend::stage`] for a partition that will be proven from its witness
    /// ([`GpuBackend::prove_partition_witness`]): prepares `input, aux` (a GPU
    /// backend page-locks them) before the caller takes its GPU lock, on the same
    /// contract. The default stages nothing.
    fn stage_witness(&self, input: &[Scalar], aux: &[Scalar]) -> Result<Staged, BackendError> {
        let _ = (input, aux);
        Ok(Staged::none())
    }

    /// Prepares a partition's split data (the ones bitmaps and tail terms of the
    /// queries its backend call will take, in the call's order: L, A, B_G1, then
    /// B_G2 when the backend sums it) before the caller takes its GPU lock, on
    /// [`GpuBackend::stage`]'s contract: the caller keeps the arrays allocated,
    /// unmoved and unchanged until it drops the guard, after the backend call that
    /// used them. The CUDA backend copies them into page-locked memory here, ~280
    /// MB at the 32 GiB PoRep shape, a copy that otherwise runs inside the lock
    /// while the device waits for the first bitmap. The default stages nothing.
    fn stage_splits(&self, splits: &[SplitRef<'_>]) -> Result<Staged, BackendError> {
        let _ = splits;
        Ok(Staged::none())
    }

    /// Evaluates `a, b, c` from the witness and proves the partition
    /// ([`WitnessJobRef`]); offered where [`GpuBackend::abc_eval`] is not
    /// [`AbcEval::No`]. A malformed `r1cs` or a witness of another shape is
    /// [`BackendError::Rejected`]. The default refuses: [`BackendError::Unsupported`].
    fn prove_partition_witness(
        &self,
        job: WitnessJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        let _ = job;
        Err(BackendError::Unsupported(
            "evaluating a, b, c from the witness",
        ))
    }

    /// Host memory the backend allocated page-locked and holds now (staging
    /// buffers for streamed bases): memory that exists only because of the backend.
    /// The pipelined engine's memory budget leaves room for it. Caller memory the
    /// backend page-locks in place (`a, b, c` registered by [`GpuBackend::stage`])
    /// is not included: the caller's budget already holds it. The default holds none.
    fn pinned_host_bytes(&self) -> u64 {
        0
    }

    /// The devices this backend drives as separate lanes, one backend per device,
    /// each with its ordinal: the engine runs GPU workers and takes a lock per lane.
    /// The default, an empty list, means one lane: this backend itself, on the
    /// device it was opened on (see [`DeviceSet`] for several).
    fn device_lanes(&self) -> Vec<DeviceLane> {
        Vec::new()
    }

    /// Another instance of this backend on the same device, with its own streams,
    /// buffers and caches, so that work given to it does not wait behind this
    /// one's calls (the engine's critical lane: a WinningPoSt beside a PoRep
    /// partition already on the GPU). `None`: not offered (the default).
    fn open_sibling(&self) -> Result<Option<std::sync::Arc<dyn GpuBackend>>, BackendError> {
        Ok(None)
    }

    /// How many devices this kind of backend can drive on this machine (a CUDA
    /// backend: the driver's device count). With `[engine] devices` unset, the
    /// configuration opens one instance per device when this is more than one, so
    /// the engine drives them all; an instance opened without a device drives
    /// device 0. The default is one: the backend itself.
    fn device_count(&self) -> u32 {
        1
    }

    /// Drops the device copies this backend keeps of host base vectors lying in
    /// `host` (address ranges of host memory: a parameter set whose host memory
    /// was, or is being, freed), and returns the bytes freed (the CPU backend:
    /// its fixed-base tables of them, host memory). A backend that keeps nothing
    /// of the bases frees nothing (the default).
    fn forget_bases(&self, host: &[std::ops::Range<usize>]) -> u64 {
        let _ = host;
        0
    }

    /// Waits until work the backend does on its own in the background (the CPU
    /// backend's fixed-base tables) is done, so the next call runs as a warm one.
    /// For benchmarks; the default has nothing to wait for.
    fn settle(&self) {}
}

/// Log2 of the NTT domain for `n` constraints (the next power of two).
pub fn log_domain(n: usize) -> u32 {
    n.max(1).next_power_of_two().trailing_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn staged_undoes_once_on_drop_and_contains_panics() {
        let undone = Arc::new(AtomicUsize::new(0));
        let u = Arc::clone(&undone);
        let g = Staged::new(move || {
            u.fetch_add(1, Ordering::SeqCst);
        });
        assert!(g.is_staged());
        assert_eq!(undone.load(Ordering::SeqCst), 0);
        drop(g);
        assert_eq!(undone.load(Ordering::SeqCst), 1);
        assert!(!Staged::none().is_staged());
        // A panicking undo does not unwind out of the drop.
        drop(Staged::new(|| panic!("undo failed")));
    }

    #[test]
    fn the_default_stage_stages_nothing() {
        let pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap(),
        );
        let backend = CpuBackend::new(pool);
        let v = vec![Scalar::from(1u64); 4];
        let staged = backend
            .stage(AbcRef {
                a: &v,
                b: &v,
                c: &v,
            })
            .unwrap();
        assert!(!staged.is_staged());
    }
}
