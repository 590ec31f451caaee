//! cuzk: a Groth16 prover for BLS12-381, a drop-in for bellperson's `create_proof`.
//!
//! ```no_run
//! # fn demo<C: bellpepper_core::Circuit<blstrs::Scalar> + Send>(circuit: C, params: &bellperson::groth16::Parameters<blstrs::Bls12>) -> Result<(), cuzk::Error> {
//! use ff::Field;
//! let (r, s) = (blstrs::Scalar::random(rand::thread_rng()), blstrs::Scalar::random(rand::thread_rng()));
//! // The very bytes `bellperson::groth16::create_proof(circuit, params, r, s)` gives.
//! let proof = cuzk::create_proof(circuit, params, r, s)?;
//! # Ok(()) }
//! ```
//!
//! Behind the drop-in functions is a pipeline of stage crates: synthesis compiles the
//! circuit's R1CS once to CSR and evaluates `a, b, c` by sparse mat-vec; `prep_msm`
//! splits each query's scalars into zeros, ones and a tail; a backend (the CPU
//! reference here, a GPU plugin elsewhere) computes H and the G1 MSMs; `b_g2_msm`
//! runs on its own CPU pool alongside; assembly adds the blinding. [`BatchProver`] exposes
//! the same path with its knobs (backend, pools, witness check) and per-stage times.
//!
//! bellperson's `create_random_proof` and `create_random_proof_batch` (what
//! filecoin-proofs calls) have counterparts here that draw `r` and `s` from the RNG
//! exactly as bellperson does, so the same RNG gives the same bytes. Compiled
//! shapes are cached ([`ShapeCache`], keyed by [`ShapeKey`]), so repeated calls
//! for one circuit shape compile it once.
//!
//! With the `cuda` feature, `cuzk::cuda` is the CUDA backend (`cuzk-cuda`); with
//! [`config`] (`cuzk.toml`), this crate is the one dependency a user needs.
//!
//! Architecture invariant: this crate only adapts. It turns bellperson's types
//! (`ParameterSource`, `Proof`) into the stages' plain data and back, and owns the
//! default engine; it contains no stage logic.

#![forbid(unsafe_code)]

use std::{
    sync::{Arc, OnceLock},
    time::{Duration, Instant},
};

use bellpepper_core::{Circuit, SynthesisError};
use bellperson::groth16::{ParameterSource, Proof};
use blstrs::{Bls12, Scalar};
use ec_source::SourceExt as _;
use rand_core::RngCore;
use rayon::prelude::*;

pub use bellperson::groth16::{Parameters, VerifyingKey};
pub use cuzk_assembly::{AssemblyKey, ProofPoints};
pub use cuzk_gpu_backend::{CpuBackend, GpuBackend};
pub use cuzk_scheduler::{ProveError, Proved, Prover, ProverConfig, Srs, StageTimes};
pub use cuzk_synth::{Compiled, NoThrottle, R1cs, SynthError, Throttle};

/// `cuzk.toml`: the typed configuration and building the strategies it names
/// (the `cuzk-config` crate).
pub use cuzk_config as config;

/// The CUDA backend (`cuzk-cuda`): put a [`cuda::CudaBackend`] into a
/// [`BatchProverConfig`] or into the pipelined engine's `Policies`.
#[cfg(feature = "cuda")]
pub use cuzk_cuda as cuda;

mod ec_source;
pub mod pipeline;
mod shapes;

pub use shapes::{ShapeCache, ShapeKey};

/// Errors of the drop-in API and the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Prove(#[from] ProveError),
    #[error("synthesis failed: {0}")]
    Synthesis(#[from] SynthError),
    #[error("the parameter source failed: {0}")]
    ParameterSource(SynthesisError),
    #[error("a batch of {circuits} circuits needs as many r and s values; got {r} r and {s} s")]
    BatchLength { circuits: usize, r: usize, s: usize },
    #[error("could not build a thread pool: {0}")]
    ThreadPool(String),
}

/// Proves `circuit` with `params` and the blinding `r, s`: the same proof, byte for
/// byte, as `bellperson::groth16::create_proof(circuit, params, r, s)`.
pub fn create_proof<C, P>(
    circuit: C,
    params: P,
    r: Scalar,
    s: Scalar,
) -> Result<Proof<Bls12>, Error>
where
    C: Circuit<Scalar> + Send,
    P: ParameterSource<Bls12>,
{
    let mut proofs = create_proof_batch(vec![circuit], params, vec![r], vec![s])?;
    Ok(proofs.pop().expect("one circuit gives one proof"))
}

/// Proves a batch of circuits of one shape (as bellperson requires of a batch).
/// The shape is compiled once per circuit type and parameters (the first batch
/// compiles its first circuit; later batches find it cached) and every other
/// circuit only computes its witness.
pub fn create_proof_batch<C, P>(
    circuits: Vec<C>,
    params: P,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
) -> Result<Vec<Proof<Bls12>>, Error>
where
    C: Circuit<Scalar> + Send,
    P: ParameterSource<Bls12>,
{
    Ok(BatchProver::default_prover()?
        .prove_batch(circuits, &params, r, s)?
        .into_iter()
        .map(|p| p.proof)
        .collect())
}

/// bellperson's `create_random_proof` for BLS12-381: `r` then `s` drawn from `rng`,
/// as bellperson draws them, so the same RNG state gives the same proof bytes.
pub fn create_random_proof<C, R, P>(
    circuit: C,
    params: P,
    rng: &mut R,
) -> Result<Proof<Bls12>, Error>
where
    C: Circuit<Scalar> + Send,
    R: RngCore,
    P: ParameterSource<Bls12>,
{
    let mut proofs = create_random_proof_batch(vec![circuit], params, rng)?;
    Ok(proofs.pop().expect("one circuit gives one proof"))
}

/// bellperson's `create_random_proof_batch` for BLS12-381: every `r` drawn from
/// `rng`, then every `s`, as bellperson draws them.
pub fn create_random_proof_batch<C, R, P>(
    circuits: Vec<C>,
    params: P,
    rng: &mut R,
) -> Result<Vec<Proof<Bls12>>, Error>
where
    C: Circuit<Scalar> + Send,
    R: RngCore,
    P: ParameterSource<Bls12>,
{
    use ff::Field;
    let r = (0..circuits.len())
        .map(|_| Scalar::random(&mut *rng))
        .collect();
    let s = (0..circuits.len())
        .map(|_| Scalar::random(&mut *rng))
        .collect();
    create_proof_batch(circuits, params, r, s)
}

/// Compiles `circuit`'s R1CS and computes its witness in the same pass. Needs no
/// thread pool.
pub fn compile<C: Circuit<Scalar>>(circuit: C) -> Result<Compiled, Error> {
    Ok(cuzk_synth::compile(circuit)?)
}

/// Compiles `circuit`'s shape only (for the pipelined engine's jobs, or to fill a
/// [`ShapeCache`]): a blank circuit will do, its values are never asked for.
/// Needs no thread pool.
pub fn compile_shape<C: Circuit<Scalar>>(circuit: C) -> Result<R1cs, Error> {
    Ok(cuzk_synth::compile_shape(circuit)?)
}

/// A proof with its stage times.
#[derive(Clone, Debug)]
pub struct TimedProof {
    pub proof: Proof<Bls12>,
    pub times: StageTimes,
}

/// The one-batch prover with its knobs (backend, pools, witness check): proves a
/// batch stage after stage and returns per-stage times. For many jobs in flight at
/// once, with a TIMELINE, use the pipelined engine ([`pipeline::PipelineEngine`]).
#[derive(Debug, Clone)]
pub struct BatchProver {
    prover: Arc<Prover>,
    shapes: Arc<ShapeCache>,
}

/// How to build a [`BatchProver`].
#[derive(Clone, Default)]
pub struct BatchProverConfig {
    /// Threads for synthesis, spmv and prep_msm (0: all cores).
    pub synth_threads: usize,
    /// Threads of the `b_g2_msm` pool (0: all cores).
    pub b_g2_threads: usize,
    /// Threads of the CPU backend's pool, used when `backend` is `None` (0: all cores).
    pub backend_threads: usize,
    /// The backend; `None` is the CPU reference backend.
    pub backend: Option<Arc<dyn GpuBackend>>,
    pub throttle: Option<Arc<dyn Throttle>>,
    pub prover: ProverConfig,
    /// Where compiled shapes are kept; `None`: a cache of this prover's own.
    pub shapes: Option<Arc<ShapeCache>>,
}

impl std::fmt::Debug for BatchProverConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchProverConfig")
            .field("synth_threads", &self.synth_threads)
            .field("b_g2_threads", &self.b_g2_threads)
            .field("backend_threads", &self.backend_threads)
            .field(
                "backend",
                &self.backend.as_ref().map(|b| b.capabilities().name),
            )
            .field("prover", &self.prover)
            .field("shapes", &self.shapes.as_ref().map(|s| s.len()))
            .finish()
    }
}

fn pool(threads: usize, name: &'static str) -> Result<Arc<rayon::ThreadPool>, Error> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("cuzk-{name}-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| Error::ThreadPool(e.to_string()))
}

impl BatchProver {
    pub fn new(config: BatchProverConfig) -> Result<Self, Error> {
        let backend = match config.backend {
            Some(b) => b,
            None => Arc::new(CpuBackend::new(pool(config.backend_threads, "backend")?)),
        };
        let prover = Prover::new(
            backend,
            pool(config.synth_threads, "synth")?,
            pool(config.b_g2_threads, "b-g2")?,
            config.throttle.unwrap_or_else(|| Arc::new(NoThrottle)),
            config.prover,
        );
        Ok(Self {
            prover: Arc::new(prover),
            shapes: config.shapes.unwrap_or_default(),
        })
    }

    /// The process-wide prover the drop-in functions use: the CPU backend, pools of
    /// all cores, built on first use.
    pub fn default_prover() -> Result<&'static BatchProver, Error> {
        static PROVER: OnceLock<BatchProver> = OnceLock::new();
        if let Some(e) = PROVER.get() {
            return Ok(e);
        }
        let engine = BatchProver::new(BatchProverConfig::default())?;
        Ok(PROVER.get_or_init(|| engine))
    }

    pub fn prover(&self) -> &Prover {
        &self.prover
    }

    /// The compiled shapes this prover keeps.
    pub fn shapes(&self) -> &Arc<ShapeCache> {
        &self.shapes
    }

    /// Compiles `circuit`'s R1CS (and computes its witness in the same pass).
    pub fn compile<C: Circuit<Scalar>>(&self, circuit: C) -> Result<Compiled, Error> {
        Ok(cuzk_synth::compile(circuit)?)
    }

    /// Proves with an R1CS compiled earlier: only the witness is synthesized.
    pub fn prove_compiled<C, P>(
        &self,
        r1cs: &R1cs,
        circuit: C,
        params: &P,
        r: Scalar,
        s: Scalar,
    ) -> Result<TimedProof, Error>
    where
        C: Circuit<Scalar> + Send,
        P: ParameterSource<Bls12>,
    {
        let t = Instant::now();
        let witness = cuzk_synth::synthesize_witness_for(r1cs, circuit)?;
        let synthesis = t.elapsed();
        let srs = srs_from_source(params, r1cs)?;
        self.finish(r1cs, witness, &srs, r, s, synthesis)
    }

    /// Proves a batch of circuits of one shape, returning per-proof stage times. The
    /// shape comes from the cache when circuits of this type were proved with these
    /// parameters before; otherwise the first circuit is compiled (and cached).
    pub fn prove_batch<C, P>(
        &self,
        circuits: Vec<C>,
        params: &P,
        r: Vec<Scalar>,
        s: Vec<Scalar>,
    ) -> Result<Vec<TimedProof>, Error>
    where
        C: Circuit<Scalar> + Send,
        P: ParameterSource<Bls12>,
    {
        if circuits.len() != r.len() || circuits.len() != s.len() {
            return Err(Error::BatchLength {
                circuits: circuits.len(),
                r: r.len(),
                s: s.len(),
            });
        }
        if circuits.is_empty() {
            return Ok(Vec::new());
        }
        let key = ShapeKey::of::<C, P>(params)?;
        let mut circuits = circuits.into_iter();
        // The first proof's witness comes from the compile on a miss.
        let (r1cs, first) = match self.shapes.get(&key) {
            Some(r1cs) => (r1cs, None),
            None => {
                let first = circuits.next().expect("not empty");
                let t = Instant::now();
                let Compiled { r1cs, witness } = cuzk_synth::compile(first)?;
                let r1cs = Arc::new(r1cs);
                self.shapes.insert(key, r1cs.clone());
                (r1cs, Some((witness, t.elapsed())))
            }
        };
        let rest: Vec<C> = circuits.collect();
        let srs = srs_from_source(params, &r1cs)?;

        // Witnesses of the rest in parallel on the synthesis pool, then prove in order.
        let witnesses: Vec<_> = self.prover.synth_pool().install(|| {
            rest.into_par_iter()
                .map(|c| {
                    let t = Instant::now();
                    cuzk_synth::synthesize_witness_for(&r1cs, c).map(|w| (w, t.elapsed()))
                })
                .collect()
        });
        let mut out = Vec::with_capacity(witnesses.len() + 1);
        let mut rs = r.into_iter().zip(s);
        if let Some((witness, synthesis)) = first {
            let (r0, s0) = rs.next().expect("lengths were checked");
            out.push(self.finish(&r1cs, witness, &srs, r0, s0, synthesis)?);
        }
        for (w, (r, s)) in witnesses.into_iter().zip(rs) {
            let (w, synthesis) = w?;
            out.push(self.finish(&r1cs, w, &srs, r, s, synthesis)?);
        }
        Ok(out)
    }

    fn finish(
        &self,
        r1cs: &R1cs,
        witness: cuzk_alloc::Witness,
        srs: &Srs,
        r: Scalar,
        s: Scalar,
        synthesis: Duration,
    ) -> Result<TimedProof, Error> {
        let Proved { proof, times } = self
            .prover
            .prove_witness(r1cs, witness, srs, r, s, synthesis)?;
        Ok(TimedProof {
            proof: Proof {
                a: proof.a,
                b: proof.b,
                c: proof.c,
            },
            times,
        })
    }
}

/// The stages' view of a bellperson parameter source, for a circuit of `r1cs`'s
/// shape. Base vectors are shared, not copied, whenever the source lays a query out
/// contiguously (as `Parameters` and `MappedParameters` do).
pub fn srs_from_source<P: ParameterSource<Bls12>>(params: &P, r1cs: &R1cs) -> Result<Srs, Error> {
    let e = Error::ParameterSource;
    let vk = params.get_vk(r1cs.num_inputs()).map_err(e)?;
    let key = AssemblyKey {
        alpha_g1: vk.alpha_g1,
        beta_g1: vk.beta_g1,
        beta_g2: vk.beta_g2,
        delta_g1: vk.delta_g1,
        delta_g2: vk.delta_g2,
    };
    let ic_len = vk.ic.len();
    let num_inputs = r1cs.num_inputs();
    let b_inputs = r1cs.b_input_density().count();
    let h = params.get_h(r1cs.num_constraints()).map_err(e)?.bases();
    let l = params.get_l(r1cs.num_aux()).map_err(e)?.bases();
    let (ai, aa) = params
        .get_a(num_inputs, r1cs.a_aux_density().count())
        .map_err(e)?;
    let (bi, ba) = params
        .get_b_g1(b_inputs, r1cs.b_aux_density().count())
        .map_err(e)?;
    let (gi, ga) = params
        .get_b_g2(b_inputs, r1cs.b_aux_density().count())
        .map_err(e)?;
    Ok(Srs {
        key,
        ic_len,
        h,
        l,
        a: ec_source::join(ai, aa, num_inputs),
        b_g1: ec_source::join(bi, ba, b_inputs),
        b_g2: ec_source::join(gi, ga, b_inputs),
    })
}

/// Verifies a proof with bellperson's verifier. `public_inputs` excludes the one.
pub fn verify(
    vk: &VerifyingKey<Bls12>,
    proof: &Proof<Bls12>,
    public_inputs: &[Scalar],
) -> Result<bool, SynthesisError> {
    let pvk = bellperson::groth16::prepare_verifying_key(vk);
    bellperson::groth16::verify_proof(&pvk, proof, public_inputs)
}
