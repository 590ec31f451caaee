//! The stage functions both the single-proof [`Prover`] and the pipelined engine
//! call, and the single-proof path itself.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use blstrs::{G1Affine, G2Affine, G2Projective, Scalar};
use cuzk_alloc::{Abc, Witness};
use cuzk_assembly::{assemble, AssemblyError, AssemblyKey, MsmSums, ProofPoints};
use cuzk_gpu_backend::{
    AbcEval, AbcRef, BackendError, GpuBackend, PartitionJob, PartitionJobRef, PartitionResult,
    SplitMsm, Staged, WitnessJobRef,
};
use cuzk_msm_cpu::{prep_msm_classified, split_msm_g2, MsmError, ScalarClasses, SplitScalars};
use cuzk_synth::{check_shape, check_witness, spmv_parallel, R1cs, SynthError, Throttle};
use rayon::ThreadPool;

use crate::srs::{Srs, SrsError};

/// Knobs of the single-proof path.
#[derive(Clone, Debug, Default)]
pub struct ProverConfig {
    /// Check `a·b = c` for every constraint before the MSMs and fail with the first
    /// constraint that does not hold (costs one pass over a, b, c).
    pub check_witness: bool,
    /// Run the B query in G2 on the backend instead of the CPU `b_g2_msm` stage:
    /// `Some(true)` where the backend offers G2, `Some(false)` never, `None` by the
    /// backend's capabilities ([`b_g2_on_backend`]).
    pub b_g2_on_backend: Option<bool>,
}

/// Whether B in G2 runs inside the backend call, for the setting `setting`.
///
/// Unset, it does when the backend offers G2 *and* drives a device. Measured on the
/// H200 machine (BENCHMARKS.md): the CUDA G2 MSM took 43 ms at 2^20 and 117 ms at
/// 2^22 against 1.3 s and 5.9 s on the host's 16 threads (27-33x); a library user
/// measured whole runs 6-10x faster on dense witnesses with B in G2 on the GPU. With
/// boolean (PoRep-like) witnesses most B scalars are zeros and ones, the CPU tail
/// is small and the A/B was within noise; moving it to the device never lost, and
/// it leaves the cores to synthesis. The CPU reference backend offers G2 too; without
/// fixed-base tables it would only move the same CPU work under the GPU lock (a
/// WinningPoSt at 2 KiB on 2 cores took the same 2.9 s either way), with them its G2
/// MSM is 1.3× faster than the `b_g2_msm` stage's, so it says `g2_preferred`.
pub fn b_g2_on_backend(setting: Option<bool>, caps: &cuzk_gpu_backend::Capabilities) -> bool {
    match setting {
        Some(on) => on && caps.g2,
        None => caps.g2 && (!caps.devices.is_empty() || caps.g2_preferred),
    }
}

/// Wall time of each stage of one proof. `gpu` and `b_g2_msm` overlap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimes {
    pub synthesis: Duration,
    pub spmv: Duration,
    pub prep_msm: Duration,
    /// The backend's partition call: H (NTTs) and the G1 MSMs.
    pub gpu: Duration,
    pub b_g2_msm: Duration,
    pub assembly: Duration,
    pub dealloc: Duration,
    pub total: Duration,
}

impl StageTimes {
    /// Names and durations in pipeline order, for tables.
    pub fn rows(&self) -> [(&'static str, Duration); 8] {
        [
            ("synthesis", self.synthesis),
            ("spmv", self.spmv),
            ("prep_msm", self.prep_msm),
            ("gpu (H + G1 MSMs)", self.gpu),
            ("b_g2_msm", self.b_g2_msm),
            ("assembly", self.assembly),
            ("dealloc", self.dealloc),
            ("total", self.total),
        ]
    }

    /// Adds another proof's times (for averages over many proofs).
    pub fn accumulate(&mut self, other: &StageTimes) {
        self.synthesis += other.synthesis;
        self.spmv += other.spmv;
        self.prep_msm += other.prep_msm;
        self.gpu += other.gpu;
        self.b_g2_msm += other.b_g2_msm;
        self.assembly += other.assembly;
        self.dealloc += other.dealloc;
        self.total += other.total;
    }
}

/// A proof and what it cost.
#[derive(Clone, Debug)]
pub struct Proved {
    pub proof: ProofPoints,
    pub times: StageTimes,
}

/// Why a proof failed. Each variant names the stage.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    #[error("synthesis failed: {0}")]
    Synthesis(#[from] SynthError),
    #[error("the parameters do not fit the circuit: {0}")]
    Params(#[from] SrsError),
    #[error("prep_msm or b_g2_msm failed: {0}")]
    Msm(#[from] MsmError),
    #[error("the backend failed: {0}")]
    Backend(#[from] BackendError),
    #[error("assembly failed: {0}")]
    Assembly(#[from] AssemblyError),
    #[error("the {stage} stage panicked ({message}); this is a bug in cuzk or in a plugin")]
    Panicked {
        stage: &'static str,
        /// The panic's message (its payload, when a string).
        message: String,
    },
    #[error("the proof did not verify{0}")]
    Verification(String),
}

impl ProveError {
    /// The error for a panic in `stage`, with the panic's message.
    pub fn panicked(stage: &'static str, payload: &(dyn std::any::Any + Send)) -> Self {
        Self::Panicked {
            stage,
            message: panic_message(payload),
        }
    }
}

/// A panic payload's message: the `&str` or `String` `panic!` was given.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// The three query splits `prep_msm` produces.
#[derive(Debug)]
pub struct Splits {
    pub l: SplitScalars,
    pub a: SplitScalars,
    pub b: SplitScalars,
}

impl Splits {
    pub fn heap_size(&self) -> usize {
        self.l.heap_size() + self.a.heap_size() + self.b.heap_size()
    }
}

/// The bases of each query a circuit of one shape needs, checked once.
#[derive(Clone, Copy, Debug)]
pub struct QueryBases<'a> {
    pub h: &'a [G1Affine],
    pub l: &'a [G1Affine],
    pub a: &'a [G1Affine],
    pub b_g1: &'a [G1Affine],
    pub b_g2: &'a [G2Affine],
}

/// Checks the parameters against the circuit's shape and slices each query.
pub fn query_bases<'a>(srs: &'a Srs, r1cs: &R1cs) -> Result<QueryBases<'a>, SrsError> {
    if srs.ic_len != r1cs.num_inputs() {
        return Err(SrsError::IcLength {
            have: srs.ic_len,
            need: r1cs.num_inputs(),
        });
    }
    let n = r1cs.num_constraints();
    let domain = n.max(1).next_power_of_two();
    if srs.h.len() != domain - 1 {
        return Err(SrsError::HLength {
            have: srs.h.len(),
            need: domain - 1,
            constraints: n,
            domain,
        });
    }
    let a_count = r1cs.num_inputs() + r1cs.a_aux_density().count();
    let b_count = r1cs.b_input_density().count() + r1cs.b_aux_density().count();
    Ok(QueryBases {
        h: srs.h.as_slice(),
        l: srs.l.exactly("l", r1cs.num_aux())?,
        a: srs.a.exactly("a", a_count)?,
        b_g1: srs.b_g1.exactly("b_g1", b_count)?,
        b_g2: srs.b_g2.exactly("b_g2", b_count)?,
    })
}

/// spmv: `a, b, c` from the witness, optionally checked.
pub fn spmv_stage(
    r1cs: &R1cs,
    witness: &Witness,
    pool: &ThreadPool,
    throttle: &dyn Throttle,
    check: bool,
) -> Result<Abc, SynthError> {
    check_shape(r1cs, witness)?;
    let abc = spmv_parallel(r1cs, witness, pool, throttle)?;
    if check {
        check_witness(r1cs, &abc)?;
    }
    Ok(abc)
}

/// prep_msm for the L, A and B queries, from one classification of the witness.
pub fn prep_stage(r1cs: &R1cs, witness: &Witness, pool: &ThreadPool) -> Result<Splits, MsmError> {
    let _span = tracing::info_span!("prep_msm").entered();
    let inputs = ScalarClasses::of(&witness.input, pool);
    let aux = ScalarClasses::of(&witness.aux, pool);
    let split = |inputs, input_density, aux_density| {
        prep_msm_classified(inputs, input_density, &aux, aux_density, pool)
    };
    Ok(Splits {
        l: split(&ScalarClasses::default(), None, None)?,
        a: split(&inputs, None, Some(r1cs.a_aux_density()))?,
        b: split(
            &inputs,
            Some(r1cs.b_input_density()),
            Some(r1cs.b_aux_density()),
        )?,
    })
}

/// The job of one partition with `a, b, c` borrowed.
fn job_ref<'a>(
    abc: AbcRef<'a>,
    bases: &QueryBases<'a>,
    splits: &'a Splits,
    b_g2_on_backend: bool,
) -> PartitionJobRef<'a> {
    PartitionJobRef {
        abc,
        h_bases: bases.h,
        l: SplitMsm {
            bases: bases.l,
            split: splits.l.as_ref(),
        },
        a: SplitMsm {
            bases: bases.a,
            split: splits.a.as_ref(),
        },
        b_g1: SplitMsm {
            bases: bases.b_g1,
            split: splits.b.as_ref(),
        },
        b_g2: b_g2_on_backend.then_some(SplitMsm {
            bases: bases.b_g2,
            split: splits.b.as_ref(),
        }),
    }
}

/// The backend's partition call, handing `a, b, c` over (the backend may free them).
pub fn gpu_stage(
    backend: &dyn GpuBackend,
    abc: Abc,
    bases: &QueryBases<'_>,
    splits: &Splits,
    b_g2_on_backend: bool,
) -> Result<PartitionResult, BackendError> {
    let empty = AbcRef {
        a: &[],
        b: &[],
        c: &[],
    };
    let PartitionJobRef {
        abc: _,
        h_bases,
        l,
        a,
        b_g1,
        b_g2,
    } = job_ref(empty, bases, splits, b_g2_on_backend);
    backend.prove_partition(PartitionJob {
        abc,
        h_bases,
        l,
        a,
        b_g1,
        b_g2,
    })
}

/// The backend's partition call with `a, b, c` lent: the call a caller makes for a
/// partition it staged ([`GpuBackend::stage`]), since it must keep them until the
/// guard is dropped.
pub fn gpu_stage_ref(
    backend: &dyn GpuBackend,
    abc: &Abc,
    bases: &QueryBases<'_>,
    splits: &Splits,
    b_g2_on_backend: bool,
) -> Result<PartitionResult, BackendError> {
    backend.prove_partition_ref(job_ref(AbcRef::new(abc), bases, splits, b_g2_on_backend))
}

/// Stages `abc` for `backend` ([`GpuBackend::stage`]), before any GPU lock is taken.
/// Staging is an optimisation: an error (or a panic in the backend) is logged and
/// the partition goes on unstaged, reported as `Err(message)` next to the empty
/// guard so the caller can record it.
pub fn stage_abc(backend: &dyn GpuBackend, abc: &Abc) -> (Staged, Result<(), String>) {
    staging(backend, "a, b, c", || backend.stage(AbcRef::new(abc)))
}

/// A staging call with a panic contained and a failure logged (see [`stage_abc`]).
fn staging(
    backend: &dyn GpuBackend,
    what: &str,
    stage: impl FnOnce() -> Result<Staged, BackendError>,
) -> (Staged, Result<(), String>) {
    let why = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(stage)) {
        Ok(Ok(staged)) => return (staged, Ok(())),
        Ok(Err(e)) => e.to_string(),
        Err(_) => "the backend panicked while staging".to_string(),
    };
    tracing::warn!(
        backend = %backend.capabilities().name,
        error = %why,
        "staging {what} failed; the partition goes on unstaged"
    );
    (Staged::none(), Err(why))
}

/// Whether the backend evaluates `a, b, c` from the witness
/// ([`GpuBackend::prove_partition_witness`]) instead of the engine's spmv stage, for
/// the setting `setting`: `Some(true)` where the backend offers it at all,
/// `Some(false)` never, `None` where it evaluates them on its device
/// ([`AbcEval::Device`]: the host then never holds `a, b, c`).
pub fn abc_on_backend(setting: Option<bool>, backend: &dyn GpuBackend) -> bool {
    let eval = backend.abc_eval();
    match setting {
        Some(want) => want && eval != AbcEval::No,
        None => eval == AbcEval::Device,
    }
}

/// The backend's partition call from the witness: the backend evaluates `a, b, c`
/// itself ([`GpuBackend::prove_partition_witness`]).
pub fn gpu_stage_witness(
    backend: &dyn GpuBackend,
    r1cs: &R1cs,
    witness: &Witness,
    bases: &QueryBases<'_>,
    splits: &Splits,
    b_g2_on_backend: bool,
) -> Result<PartitionResult, BackendError> {
    let empty = AbcRef {
        a: &[],
        b: &[],
        c: &[],
    };
    let PartitionJobRef {
        h_bases,
        l,
        a,
        b_g1,
        b_g2,
        ..
    } = job_ref(empty, bases, splits, b_g2_on_backend);
    backend.prove_partition_witness(WitnessJobRef {
        r1cs: r1cs.view(),
        input: &witness.input,
        aux: &witness.aux,
        h_bases,
        l,
        a,
        b_g1,
        b_g2,
    })
}

/// [`stage_abc`] for a partition proven from its witness
/// ([`GpuBackend::stage_witness`]).
pub fn stage_witness(backend: &dyn GpuBackend, witness: &Witness) -> (Staged, Result<(), String>) {
    staging(backend, "the witness", || {
        backend.stage_witness(&witness.input, &witness.aux)
    })
}

/// [`stage_abc`] for a partition's split data ([`GpuBackend::stage_splits`]), in
/// the order the backend call takes them: L, A, B_G1, and B again when the
/// backend sums B_G2.
pub fn stage_splits(
    backend: &dyn GpuBackend,
    splits: &Splits,
    b_g2_on_backend: bool,
) -> (Staged, Result<(), String>) {
    let mut parts = vec![splits.l.as_ref(), splits.a.as_ref(), splits.b.as_ref()];
    if b_g2_on_backend {
        parts.push(splits.b.as_ref());
    }
    staging(backend, "the split data", || backend.stage_splits(&parts))
}

/// The `b_g2_msm` stage: the B query in G2 on the CPU pool given.
pub fn b_g2_msm(
    bases: &[G2Affine],
    split: &SplitScalars,
    pool: &ThreadPool,
) -> Result<G2Projective, MsmError> {
    let _span = tracing::info_span!("b_g2_msm").entered();
    split_msm_g2(bases, split.as_ref(), pool)
}

/// Assembly from the backend's result and the G2 sum.
pub fn assembly_stage(
    key: &AssemblyKey,
    result: &PartitionResult,
    b_g2: G2Projective,
    r: Scalar,
    s: Scalar,
) -> Result<ProofPoints, AssemblyError> {
    let _span = tracing::info_span!("assembly").entered();
    assemble(
        key,
        &MsmSums {
            h: result.h,
            l: result.l,
            a: result.a,
            b_g1: result.b_g1,
            b_g2,
        },
        r,
        s,
    )
}

/// Runs a proof's stages in order on the pools it owns.
pub struct Prover {
    backend: Arc<dyn GpuBackend>,
    /// Synthesis (spmv) and prep_msm.
    synth_pool: Arc<ThreadPool>,
    /// `b_g2_msm`: the groth16 pool of the C2 history, sized separately (32 beat 192).
    b_g2_pool: Arc<ThreadPool>,
    throttle: Arc<dyn Throttle>,
    config: ProverConfig,
}

impl std::fmt::Debug for Prover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prover")
            .field("backend", &self.backend.capabilities().name)
            .field("synth_threads", &self.synth_pool.current_num_threads())
            .field("b_g2_threads", &self.b_g2_pool.current_num_threads())
            .field("config", &self.config)
            .finish()
    }
}

impl Prover {
    pub fn new(
        backend: Arc<dyn GpuBackend>,
        synth_pool: Arc<ThreadPool>,
        b_g2_pool: Arc<ThreadPool>,
        throttle: Arc<dyn Throttle>,
        config: ProverConfig,
    ) -> Self {
        Self {
            backend,
            synth_pool,
            b_g2_pool,
            throttle,
            config,
        }
    }

    pub fn backend(&self) -> &Arc<dyn GpuBackend> {
        &self.backend
    }

    pub fn synth_pool(&self) -> &Arc<ThreadPool> {
        &self.synth_pool
    }

    pub fn b_g2_pool(&self) -> &Arc<ThreadPool> {
        &self.b_g2_pool
    }

    pub fn config(&self) -> &ProverConfig {
        &self.config
    }

    /// Proves one witness of `r1cs`. `synthesis` is the time the caller spent
    /// computing the witness, reported in the stage table.
    pub fn prove_witness(
        &self,
        r1cs: &R1cs,
        witness: Witness,
        srs: &Srs,
        r: Scalar,
        s: Scalar,
        synthesis: Duration,
    ) -> Result<Proved, ProveError> {
        let start = Instant::now();
        let mut times = StageTimes {
            synthesis,
            ..StageTimes::default()
        };
        let bases = query_bases(srs, r1cs)?;

        let t = Instant::now();
        let abc = spmv_stage(
            r1cs,
            &witness,
            &self.synth_pool,
            self.throttle.as_ref(),
            self.config.check_witness,
        )?;
        times.spmv = t.elapsed();

        let t = Instant::now();
        let splits = prep_stage(r1cs, &witness, &self.synth_pool)?;
        times.prep_msm = t.elapsed();
        let t = Instant::now();
        drop(witness);
        times.dealloc += t.elapsed();

        // The backend's partition call, with b_g2_msm overlapping it on its own pool.
        let g2_on_backend =
            b_g2_on_backend(self.config.b_g2_on_backend, &self.backend.capabilities());
        let (gpu, b_g2) = std::thread::scope(|scope| {
            let b_g2 = (!g2_on_backend).then(|| {
                scope.spawn(|| {
                    let t = Instant::now();
                    let r = b_g2_msm(bases.b_g2, &splits.b, &self.b_g2_pool);
                    (r, t.elapsed())
                })
            });
            let t = Instant::now();
            let backend = self.backend.as_ref();
            // Staged (pinned, for a GPU backend) before the call; then a, b, c are
            // lent, kept until the guard is gone, and freed after it.
            let (staged, _) = stage_abc(backend, &abc);
            let gpu = if staged.is_staged() {
                let r = gpu_stage_ref(backend, &abc, &bases, &splits, g2_on_backend);
                drop(staged);
                drop(abc);
                r
            } else {
                gpu_stage(backend, abc, &bases, &splits, g2_on_backend)
            }
            .map(|r| (r, t.elapsed()));
            let b_g2 = b_g2.map(|h| {
                h.join()
                    .map_err(|p| ProveError::panicked("b_g2_msm", p.as_ref()))
            });
            (gpu, b_g2)
        });
        let (result, gpu_time) = gpu?;
        times.gpu = gpu_time;
        let b_g2_sum = match (b_g2, result.b_g2) {
            (Some(joined), _) => {
                let (sum, t) = joined?;
                times.b_g2_msm = t;
                sum?
            }
            (None, Some(sum)) => sum,
            (None, None) => {
                return Err(BackendError::Unsupported("the G2 MSM it was asked for").into())
            }
        };

        let t = Instant::now();
        let proof = assembly_stage(&srs.key, &result, b_g2_sum, r, s)?;
        times.assembly = t.elapsed();

        let t = Instant::now();
        drop(splits);
        times.dealloc += t.elapsed();
        times.total = start.elapsed() + synthesis;
        Ok(Proved { proof, times })
    }
}
