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

impl PartitionJob<'_> {
    /// The job with `a, b, c` borrowed.
    pub fn as_ref(&self) -> PartitionJobRef<'_> {
        PartitionJobRef {
            abc: AbcRef::new(&self.abc),
            h_bases: self.h_bases,
            l: self.l,
            a: self.a,
            b_g1: self.b_g1,
            b_g2: self.b_g2,
        }
    }
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

    /// `a, b, c` of one length, or [`BackendError::AbcShape`] naming the three.
    pub fn check_shape(&self) -> Result<(), BackendError> {
        if !self.is_consistent() {
            return Err(BackendError::AbcShape {
                a: self.a.len(),
                b: self.b.len(),
                c: self.c.len(),
            });
        }
        Ok(())
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
    /// Every shape the job's caller could get wrong, checked before any work so a
    /// malformed job fails in microseconds and the same way on every backend: `a, b,
    /// c` of one length ([`BackendError::AbcShape`]), then the queries' bases against
    /// that length ([`BackendError::BaseCount`]; see [`WitnessJobRef::check_shapes`]).
    /// What only one backend refuses (a domain beyond its limit, G2 where it has
    /// none) is that backend's own check.
    pub fn check_shapes(&self) -> Result<(), BackendError> {
        self.abc.check_shape()?;
        check_queries(
            self.abc.len(),
            self.h_bases,
            &self.l,
            &self.a,
            &self.b_g1,
            self.b_g2.as_ref(),
        )
    }

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
    /// The queries' bases against the compiled shape's constraint count, as
    /// [`PartitionJobRef::check_shapes`] checks them against `a, b, c`: the h query
    /// has exactly `domain - 1` bases (`domain`: the constraints rounded up to a
    /// power of two), each split query at least its split's index space
    /// ([`SplitMsm::check_bases`]). The witness against the R1CS is the evaluator's
    /// to check.
    pub fn check_shapes(&self) -> Result<(), BackendError> {
        check_queries(
            self.r1cs.num_constraints(),
            self.h_bases,
            &self.l,
            &self.a,
            &self.b_g1,
            self.b_g2.as_ref(),
        )
    }

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

/// The query checks of [`PartitionJobRef::check_shapes`] and
/// [`WitnessJobRef::check_shapes`], for a partition of `rows` constraints.
fn check_queries(
    rows: usize,
    h_bases: &[G1Affine],
    l: &SplitMsm<'_, G1Affine>,
    a: &SplitMsm<'_, G1Affine>,
    b_g1: &SplitMsm<'_, G1Affine>,
    b_g2: Option<&SplitMsm<'_, G2Affine>>,
) -> Result<(), BackendError> {
    let want_h = (1usize << log_domain(rows)) - 1;
    if h_bases.len() != want_h {
        return Err(BackendError::BaseCount {
            query: "h",
            got: h_bases.len(),
            want: want_h,
        });
    }
    l.check_bases("l")?;
    a.check_bases("a")?;
    b_g1.check_bases("b_g1")?;
    if let Some(b_g2) = b_g2 {
        b_g2.check_bases("b_g2")?;
    }
    Ok(())
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
    use ff::Field;
    use group::prime::PrimeCurveAffine;
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

    /// A split over `num_bases` bases, all zeros: the checks read only its length.
    fn split(num_bases: usize, ones: &[u64]) -> SplitRef<'_> {
        SplitRef::prechecked(num_bases, num_bases, ones, &[], &[])
    }

    /// The query, bases given and bases wanted of a [`BackendError::BaseCount`].
    fn base_count(r: Result<(), BackendError>) -> (&'static str, usize, usize) {
        match r {
            Err(BackendError::BaseCount { query, got, want }) => (query, got, want),
            other => panic!("expected a base count error, got {other:?}"),
        }
    }

    /// Every malformed shape is refused with its own error, and only it: a test that
    /// fails if any one check is dropped or loosened.
    #[test]
    fn check_shapes_names_each_malformed_shape() {
        let ones = [0u64; 1];
        let g1 = vec![G1Affine::generator(); 16];
        let g2 = vec![G2Affine::generator(); 4];
        let five = vec![Scalar::ONE; 5];
        let (four, six) = (&five[..4], vec![Scalar::ONE; 6]);
        // 5 constraints: a domain of 8, so 7 h bases; l, a, b_g1 and b_g2 index 6,
        // 4, 3 and 3 bases.
        let good = PartitionJobRef {
            abc: AbcRef {
                a: &five,
                b: &five,
                c: &five,
            },
            h_bases: &g1[..7],
            l: SplitMsm {
                bases: &g1[..6],
                split: split(6, &ones),
            },
            a: SplitMsm {
                bases: &g1[..4],
                split: split(4, &ones),
            },
            b_g1: SplitMsm {
                bases: &g1[..3],
                split: split(3, &ones),
            },
            b_g2: Some(SplitMsm {
                bases: &g2[..3],
                split: split(3, &ones),
            }),
        };
        good.check_shapes().unwrap();
        // A split may index a prefix of a longer base vector, and B in G2 is optional.
        let mut longer = good;
        longer.l.bases = &g1;
        longer.b_g2 = None;
        longer.check_shapes().unwrap();
        // The owned job is checked the same way.
        good.to_owned_job().as_ref().check_shapes().unwrap();

        let abc_shape = |job: PartitionJobRef<'_>| match job.check_shapes() {
            Err(BackendError::AbcShape { a, b, c }) => (a, b, c),
            other => panic!("expected an a, b, c shape error, got {other:?}"),
        };
        let mut job = good;
        job.abc.a = four;
        assert_eq!(abc_shape(job), (4, 5, 5));
        let mut job = good;
        job.abc.c = &six;
        assert_eq!(abc_shape(job), (5, 5, 6));
        // `a, b, c` first: their length is what the h query is checked against.
        let mut job = good;
        job.abc.b = four;
        job.h_bases = &g1[..3];
        assert_eq!(abc_shape(job), (5, 4, 5));

        // The h query is exact: one base short or one over.
        for got in [6, 8] {
            let mut job = good;
            job.h_bases = &g1[..got];
            assert_eq!(base_count(job.check_shapes()), ("h", got, 7));
        }
        // Each split query one base short names itself.
        let mut job = good;
        job.l.bases = &g1[..5];
        assert_eq!(base_count(job.check_shapes()), ("l", 5, 6));
        let mut job = good;
        job.a.bases = &g1[..3];
        assert_eq!(base_count(job.check_shapes()), ("a", 3, 4));
        let mut job = good;
        job.b_g1.bases = &g1[..2];
        assert_eq!(base_count(job.check_shapes()), ("b_g1", 2, 3));
        let mut job = good;
        job.b_g2 = Some(SplitMsm {
            bases: &g2[..2],
            split: split(3, &ones),
        });
        assert_eq!(base_count(job.check_shapes()), ("b_g2", 2, 3));
    }

    /// A witness job's queries are checked against the compiled shape's constraints
    /// as a job's are against `a, b, c`.
    #[test]
    fn witness_check_shapes_counts_the_compiled_constraints() {
        let ones = [0u64; 1];
        let g1 = vec![G1Affine::generator(); 16];
        let msm = |n: usize| SplitMsm {
            bases: &g1[..n],
            split: split(n, &ones),
        };
        // 5 rows: a domain of 8.
        let (five_rows, nine_rows) = ([0u32; 6], [0u32; 10]);
        let rows = |row_ptr| {
            [CsrRef {
                row_ptr,
                terms: &[],
            }; 3]
        };
        let job = WitnessJobRef {
            r1cs: R1csRef {
                num_inputs: 1,
                num_aux: 2,
                matrices: rows(&five_rows),
                coeffs: &[],
            },
            input: &[],
            aux: &[],
            h_bases: &g1[..7],
            l: msm(2),
            a: msm(3),
            b_g1: msm(3),
            b_g2: None,
        };
        job.check_shapes().unwrap();
        let mut short = job;
        short.h_bases = &g1[..6];
        assert_eq!(base_count(short.check_shapes()), ("h", 6, 7));
        let mut short = job;
        short.b_g1.bases = &g1[..2];
        assert_eq!(base_count(short.check_shapes()), ("b_g1", 2, 3));
        // 9 rows: a domain of 16, so the same 7 h bases are now too few.
        let mut bigger = job;
        bigger.r1cs.matrices = rows(&nine_rows);
        assert_eq!(base_count(bigger.check_shapes()), ("h", 7, 15));
    }
}
