//! `FilecoinProver`: the caches a process keeps (compiled circuits, loaded
//! parameters) and the submission of a sector's C2 to cuzk's pipelined engine.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use blstrs::Scalar;
use cuzk::pipeline::{
    job, to_bellperson, JobHandle, JobOutput, PartitionInput, PipelineEngine, SplitWitness,
};
use cuzk::R1cs;
use cuzk_scheduler::{Priority, Srs};
use ff::Field;
use filecoin_proofs_api::RegisteredSealProof;
use rand::rngs::OsRng;

use crate::aggregate::TimingOnlySrs;
use crate::kind::CircuitKind;
use crate::shape::{self, BlankUser, Partition, PartitionsUser, SealPublic};
use crate::{C1Input, FilecoinError, PorepKind, PARTITION_PROOF_LEN};

/// How a [`FilecoinProver`] finds and checks parameters and proofs.
#[derive(Clone, Debug)]
pub struct ProverConfig {
    /// Where the `.params` files are; default [`crate::default_parameter_dir`]
    /// (`FIL_PROOFS_PARAMETER_CACHE`).
    pub parameter_dir: PathBuf,
    /// Verify every proof with filecoin-proofs' `verify_seal` before returning it
    /// (off only for benchmarks, e.g. with timing-only parameters).
    pub verify: bool,
    /// Check each parameter file's digest against Filecoin's `parameters.json` when it
    /// is loaded (reads the whole file once: minutes for 32 GiB).
    pub check_digest: bool,
}

impl Default for ProverConfig {
    fn default() -> Self {
        Self {
            parameter_dir: crate::default_parameter_dir(),
            verify: true,
            check_digest: false,
        }
    }
}

/// A proof type's parameters, loaded once and shared by every job of that type.
#[derive(Debug)]
pub struct LoadedParams {
    pub path: PathBuf,
    pub srs: Arc<Srs>,
    /// Bytes the decoded points hold in memory.
    pub bytes: u64,
    pub load_time: Duration,
    /// Random points of the right sizes: proofs do not verify.
    pub timing_only: bool,
    /// The points are a memory-mapped points file (page cache), not decoded
    /// into anonymous memory: `bytes` is then the file's points, which the
    /// kernel may drop and read back.
    pub mapped: bool,
}

/// What the caches hold for one circuit (one cache identifier).
#[derive(Default)]
struct Slot {
    r1cs: Option<(Arc<R1cs>, Duration)>,
    params: Option<Arc<LoadedParams>>,
}

/// Everything the prover has loaded, for status pages.
#[derive(Clone, Debug)]
pub struct LoadedEntry {
    pub cache_id: String,
    /// Constraints and bytes of the compiled R1CS, and how long the compile took.
    pub r1cs: Option<(usize, u64, Duration)>,
    /// The parameter file and the bytes its points hold.
    pub params: Option<(PathBuf, u64)>,
}

/// How each partition is blinded.
#[derive(Clone, Debug, Default)]
pub enum Blinding {
    /// Fresh `r, s` from the OS for every partition, as filecoin-proofs draws them.
    #[default]
    Random,
    /// These `(r, s)`, one pair per partition (tests: byte-identity with bellperson).
    Fixed(Vec<(Scalar, Scalar)>),
}

/// One sector's C2 request.
#[derive(Clone, Debug)]
pub struct PorepRequest {
    pub input: C1Input,
    pub prover_id: [u8; 32],
    /// The sector number; `None`: the envelope's.
    pub sector: Option<u64>,
    pub blinding: Blinding,
}

/// Holds the per-process caches: each proof type's R1CS, compiled once from
/// filecoin-proofs' blank circuit, and its parameters, loaded once; both shared by
/// every job of that type. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct FilecoinProver {
    config: ProverConfig,
    /// One slot per cache identifier, each behind its own lock so that compiling or
    /// loading one proof type never blocks another.
    slots: Mutex<HashMap<String, Arc<Mutex<Slot>>>>,
    /// `Some(seed)`: a timing-only prover ([`FilecoinProver::timing_only`]).
    timing_only_seed: Option<u64>,
    /// `Some(dir)`: parameters are memory-mapped points files kept in `dir`
    /// ([`FilecoinProver::with_points_dir`]).
    points_dir: Option<PathBuf>,
    /// The SnarkPack SRS timing-only NI-PoRep sectors are aggregated with, made in
    /// memory on first use (never a file: see [`crate::aggregate::TimingOnlySrs`]).
    timing_only_srs: Mutex<Option<Arc<TimingOnlySrs>>>,
}

impl std::fmt::Debug for FilecoinProver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilecoinProver")
            .field("config", &self.config)
            .finish()
    }
}

impl FilecoinProver {
    pub fn new(config: ProverConfig) -> Self {
        Self {
            config,
            slots: Mutex::new(HashMap::new()),
            timing_only_seed: None,
            points_dir: None,
            timing_only_srs: Mutex::new(None),
        }
    }

    /// Parameters memory-mapped from points files in `dir`
    /// (`cuzk_params::points`): each set is decoded (or, timing-only, generated)
    /// once into `dir` (as many bytes as its points: 44 GiB for a 32 GiB PoRep
    /// set) and mapped from then on, so its pages are page cache that the kernel
    /// reads as the backends upload or stream the queries and may drop again,
    /// instead of anonymous memory held for as long as the set is loaded. The
    /// engine's memory budget does not count mapped points (`Srs::host_bytes`).
    pub fn with_points_dir(mut self, dir: PathBuf) -> Self {
        self.points_dir = Some(dir);
        self
    }

    /// A prover whose every parameter set is timing-only: random points of the
    /// circuit's sizes made in memory from `seed` ([`Self::use_timing_only_params_for`])
    /// whenever [`Self::params`] would load a file, so it needs no parameter file
    /// and none of its proofs is verified (they cannot verify). Benchmarks only:
    /// the daemon keeps it apart from its real prover (its own caches), for the
    /// circuit ids configured timing-only, so a real circuit never gets its
    /// parameters.
    pub fn timing_only(config: ProverConfig, seed: u64) -> Self {
        Self {
            timing_only_seed: Some(seed),
            ..Self::new(config)
        }
    }

    /// Whether this prover makes timing-only parameters ([`Self::timing_only`]).
    pub fn is_timing_only(&self) -> bool {
        self.timing_only_seed.is_some()
    }

    pub fn config(&self) -> &ProverConfig {
        &self.config
    }

    /// The SRS that aggregates `partitions` timing-only partition proofs: made once
    /// (from the prover's timing-only seed) and kept, made again larger only for a
    /// proof type with more partitions than it was made for.
    pub fn timing_only_srs(&self, partitions: usize) -> Arc<TimingOnlySrs> {
        let mut srs = self
            .timing_only_srs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match &*srs {
            Some(s) if s.max_proofs() >= crate::aggregate::aggregate_len(partitions) => s.clone(),
            _ => {
                let seed = self.timing_only_seed.unwrap_or(TIMING_ONLY_SRS_SEED);
                let made = Arc::new(TimingOnlySrs::generate(seed, partitions));
                *srs = Some(made.clone());
                made
            }
        }
    }

    fn slot<K: CircuitKind>(&self, kind: &K) -> Arc<Mutex<Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(kind.cache_id().to_string())
            .or_default()
            .clone()
    }

    /// The R1CS of `kind` (any proof type), compiled from filecoin-proofs' blank
    /// circuit on first use.
    pub fn r1cs<K: CircuitKind>(&self, kind: &K) -> Result<Arc<R1cs>, FilecoinError> {
        let slot = self.slot(kind);
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((r1cs, _)) = &slot.r1cs {
            return Ok(r1cs.clone());
        }
        struct Compile;
        impl BlankUser for Compile {
            type Out = Result<R1cs, cuzk_synth::SynthError>;
            fn with<C: bellpepper_core::Circuit<Scalar> + Clone + Send + 'static>(
                self,
                circuit: C,
            ) -> Self::Out {
                cuzk_synth::compile_shape(circuit)
            }
        }
        let t = Instant::now();
        let r1cs = kind
            .with_blank(Compile)?
            .map_err(|source| FilecoinError::Compile {
                proof: kind.name().to_string(),
                source,
            })?;
        let r1cs = Arc::new(r1cs);
        let took = t.elapsed();
        tracing::info!(proof = %kind.name(), constraints = r1cs.num_constraints(), ?took, "compiled the circuit");
        slot.r1cs = Some((r1cs.clone(), took));
        Ok(r1cs)
    }

    /// The parameters of `kind`, loaded (memory-mapped and decoded in parallel) on
    /// first use and checked against the compiled circuit; made in memory instead
    /// by a timing-only prover ([`Self::timing_only`]).
    pub fn params<K: CircuitKind>(&self, kind: &K) -> Result<Arc<LoadedParams>, FilecoinError> {
        let r1cs = self.r1cs(kind)?;
        let slot = self.slot(kind);
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = &slot.params {
            return Ok(p.clone());
        }
        let loaded = Arc::new(match self.timing_only_seed {
            Some(seed) => make_timing_only(kind, &r1cs, seed, self.points_dir.as_deref())?,
            None => load_params(kind, &self.config, &r1cs, self.points_dir.as_deref())?,
        });
        slot.params = Some(loaded.clone());
        Ok(loaded)
    }

    /// Compiles the circuit and loads the parameters of `proof` now, so that no sector
    /// waits for them.
    pub fn preload(&self, proof: RegisteredSealProof) -> Result<(), FilecoinError> {
        let kind = PorepKind::new(proof)?;
        self.params(&kind).map(|_| ())
    }

    /// Drops `proof`'s parameters (jobs in flight keep theirs until they finish).
    /// Returns whether any were loaded.
    pub fn evict(&self, proof: RegisteredSealProof) -> Result<bool, FilecoinError> {
        let kind = PorepKind::new(proof)?;
        let slot = self.slot(&kind);
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(slot.params.take().is_some())
    }

    /// Drops the parameters of `kind` (any proof type), as [`Self::evict`] does.
    pub fn evict_kind<K: CircuitKind>(&self, kind: &K) -> bool {
        let slot = self.slot(kind);
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        slot.params.take().is_some()
    }

    /// What is loaded now, per circuit.
    pub fn loaded(&self) -> Vec<LoadedEntry> {
        let slots: Vec<_> = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        slots
            .into_iter()
            .map(|(cache_id, slot)| {
                let slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
                LoadedEntry {
                    cache_id,
                    r1cs: slot
                        .r1cs
                        .as_ref()
                        .map(|(r, t)| (r.num_constraints(), r.heap_size() as u64, *t)),
                    params: slot.params.as_ref().map(|p| (p.path.clone(), p.bytes)),
                }
            })
            .collect()
    }

    /// Builds a sector's partitions exactly as filecoin-proofs' `seal_commit_phase2`
    /// does and submits them to `engine` as one job, at `priority` in the engine's
    /// queues.
    pub fn submit_porep(
        &self,
        engine: &PipelineEngine,
        request: PorepRequest,
        priority: Priority,
    ) -> Result<PorepJob, FilecoinError> {
        Ok(self.prepare_porep(request)?.submit(engine, priority))
    }

    /// The engine job of a sector's C2, not yet submitted: its circuits built (as
    /// `seal_commit_phase2` builds them), its circuit compiled and parameters loaded
    /// (on first use). Benchmarks build all their jobs first, then submit them.
    pub fn prepare_porep(&self, request: PorepRequest) -> Result<PreparedPorep, FilecoinError> {
        let kind = PorepKind::new(request.input.c1.registered_proof)?;
        let sector = request.input.sector(request.sector)?;
        let params = self.params(&kind)?;
        let r1cs = self.r1cs(&kind)?;
        let c1 = request.input.c1;
        let public = SealPublic {
            comm_r: c1.comm_r,
            comm_d: c1.comm_d,
            prover_id: request.prover_id,
            sector,
            ticket: c1.ticket,
            seed: c1.seed,
        };
        let n = kind.partitions();
        let blinding = match request.blinding {
            Blinding::Random => (0..n)
                .map(|_| (Scalar::random(OsRng), Scalar::random(OsRng)))
                .collect(),
            Blinding::Fixed(rs) => rs,
        };
        if blinding.len() != n {
            return Err(FilecoinError::Circuit {
                proof: kind.name.clone(),
                message: format!("{} blinding pairs for {n} partitions", blinding.len()),
            });
        }
        struct MakeJob {
            r1cs: Arc<R1cs>,
            srs: Arc<Srs>,
            blinding: Vec<(Scalar, Scalar)>,
        }
        impl PartitionsUser for MakeJob {
            type Out = cuzk_scheduler::JobSpec;
            fn with<
                C: bellpepper_core::Circuit<Scalar>
                    + cuzk_synth::SplitCircuit
                    + Clone
                    + Send
                    + 'static,
            >(
                self,
                partitions: Vec<Partition<C>>,
            ) -> Self::Out {
                let parts = partitions
                    .into_iter()
                    .zip(self.blinding)
                    .map(|(p, (r, s))| PartitionInput {
                        // The challenges' witnesses in parallel on the synthesis pool.
                        circuit: SplitWitness(p.circuit),
                        r,
                        s,
                        public_inputs: p.public_inputs,
                    })
                    .collect();
                job(self.r1cs, self.srs, parts, None)
            }
        }
        let spec = shape::with_partitions(
            &kind.config,
            c1,
            kind.name.clone(),
            MakeJob {
                r1cs,
                srs: params.srs.clone(),
                blinding,
            },
        )?;
        let aggregation = match (kind.is_non_interactive(), params.timing_only) {
            (false, _) => Aggregation::None,
            // Timing-only partition proofs cannot verify, and filecoin-proofs would read
            // the real verifying key and SRS: aggregated with an SRS made in memory.
            (true, true) => Aggregation::TimingOnly(self.timing_only_srs(n)),
            (true, false) => {
                // filecoin-proofs aggregates the partitions with the SRS and verifying
                // key of its own parameter cache: refuse now rather than after every
                // partition.
                check_parameter_dir(&self.config.parameter_dir)?;
                crate::aggregate::check_srs(&self.config.parameter_dir)?;
                Aggregation::FilecoinProofs
            }
        };
        Ok(PreparedPorep {
            spec,
            kind,
            public,
            verify: self.config.verify && !params.timing_only,
            parameter_dir: self.config.parameter_dir.clone(),
            aggregation,
        })
    }

    /// Installs timing-only parameters for `proof` (random points of the right sizes,
    /// made in memory in seconds at any size): proofs made with them do not verify,
    /// so verification is skipped for this proof type from now on. For timing a
    /// 32 GiB C2 where no one has its 44 GiB of real parameters.
    pub fn use_timing_only_params(
        &self,
        proof: RegisteredSealProof,
        seed: u64,
    ) -> Result<Arc<LoadedParams>, FilecoinError> {
        self.use_timing_only_params_for(&PorepKind::new(proof)?, seed)
    }

    /// [`Self::use_timing_only_params`] for any proof type (SnapDeals, PoSt).
    pub fn use_timing_only_params_for<K: CircuitKind>(
        &self,
        kind: &K,
        seed: u64,
    ) -> Result<Arc<LoadedParams>, FilecoinError> {
        let r1cs = self.r1cs(kind)?;
        let loaded = Arc::new(make_timing_only(
            kind,
            &r1cs,
            seed,
            self.points_dir.as_deref(),
        )?);
        let slot = self.slot(kind);
        slot.lock().unwrap_or_else(PoisonError::into_inner).params = Some(loaded.clone());
        Ok(loaded)
    }
}

/// The seed of a timing-only SRS for a prover that is not itself timing-only (a
/// proof type given timing-only parameters by [`FilecoinProver::use_timing_only_params`]).
const TIMING_ONLY_SRS_SEED: u64 = 7;

/// How a sector's partition proofs become its C2 output.
#[derive(Clone, Debug)]
enum Aggregation {
    /// Interactive PoRep: the partition proofs are the output.
    None,
    /// Non-interactive PoRep: filecoin-proofs' `aggregate_seal_commit_proofs`.
    FilecoinProofs,
    /// Non-interactive PoRep with timing-only parameters: the same aggregation's
    /// cost with an SRS made in memory (the aggregate does not verify).
    TimingOnly(Arc<TimingOnlySrs>),
}

/// A sector's C2 job, built and ready to submit.
pub struct PreparedPorep {
    spec: cuzk_scheduler::JobSpec,
    kind: PorepKind,
    public: SealPublic,
    verify: bool,
    parameter_dir: PathBuf,
    aggregation: Aggregation,
}

impl std::fmt::Debug for PreparedPorep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedPorep")
            .field("proof", &self.kind.name)
            .field("sector", &self.public.sector)
            .field("partitions", &self.spec.partitions.len())
            .finish()
    }
}

impl PreparedPorep {
    /// Returns the proof without filecoin-proofs' `verify_seal` (benchmarks that
    /// measure the prover alone, `cuzk bench --c1 --no-verify`).
    pub fn without_verification(mut self) -> Self {
        self.verify = false;
        self
    }

    /// Submits the job to `engine` at `priority` (every engine queue serves a higher
    /// priority first).
    pub fn submit(mut self, engine: &PipelineEngine, priority: Priority) -> PorepJob {
        self.spec.priority = priority;
        let handle = engine.submit(self.spec);
        PorepJob {
            handle,
            kind: self.kind,
            public: self.public,
            verify: self.verify,
            parameter_dir: self.parameter_dir,
            aggregation: self.aggregation,
        }
    }
}

/// Timing-only parameters of `kind` (random points of its circuit's sizes); with
/// `points_dir`, generated once into a points file and mapped.
fn make_timing_only<K: CircuitKind>(
    kind: &K,
    r1cs: &R1cs,
    seed: u64,
    points_dir: Option<&Path>,
) -> Result<LoadedParams, FilecoinError> {
    let t = Instant::now();
    let shape = cuzk_service::synthetic::timing_shape(r1cs);
    let path = PathBuf::from(format!("<{}>", cuzk_params::timing::TIMING_ONLY_LABEL));
    let mismatch = |detail: String| FilecoinError::ParamsMismatch {
        path: path.clone(),
        proof: kind.name().to_string(),
        detail,
    };
    let generate = || {
        cuzk_params::timing::timing_only_params(&shape, seed)
            .map(|p| p.into_params())
            .map_err(|e| e.to_string())
    };
    let (srs, bytes, mapped) = match points_dir {
        Some(dir) => {
            let file = dir.join(format!("timing-only-{}-{seed}.points", kind.cache_id()));
            let identity = cuzk_params::points::Identity::generated(&format!(
                "timing-only parameters of {} ({shape:?}), seed {seed}",
                kind.name()
            ));
            let m = cuzk_params::points::map_or_build(&file, &identity, || {
                generate().map_err(|e| cuzk_params::ParamsError::Write {
                    path: file.clone(),
                    source: std::io::Error::other(e),
                })
            })
            .map_err(|source| FilecoinError::ParamsRead {
                path: file.clone(),
                source,
            })?;
            (crate::mapped::srs(&m), m.point_bytes(), true)
        }
        None => {
            let params = generate().map_err(mismatch)?;
            let bytes = params_bytes(&params);
            let srs = cuzk::srs_from_source(&&params, r1cs).map_err(|e| mismatch(e.to_string()))?;
            (srs, bytes, false)
        }
    };
    tracing::warn!(proof = %kind.name(), bytes, mapped, took = ?t.elapsed(), "TIMING-ONLY parameters made (random points): proofs of this circuit do not verify");
    Ok(LoadedParams {
        path,
        srs: Arc::new(srs),
        bytes,
        load_time: t.elapsed(),
        timing_only: true,
        mapped,
    })
}

fn params_bytes(params: &cuzk_params::Parameters<blstrs::Bls12>) -> u64 {
    (params.h.len() + params.l.len() + params.a.len() + params.b_g1.len()) as u64 * 96
        + params.b_g2.len() as u64 * 192
}

fn load_params<K: CircuitKind>(
    kind: &K,
    config: &ProverConfig,
    r1cs: &R1cs,
    points_dir: Option<&Path>,
) -> Result<LoadedParams, FilecoinError> {
    let path = config.parameter_dir.join(kind.params_file());
    if !path.exists() {
        return Err(FilecoinError::ParamsMissing {
            path,
            proof: kind.name().to_string(),
        });
    }
    if config.check_digest {
        crate::check_digest(kind, &config.parameter_dir, false)?;
    }
    let t = Instant::now();
    let read_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| FilecoinError::ParamsRead { path, source }
    };
    let read = || cuzk_params::read_params(&path, cuzk_params::Validation::None);
    let mismatch = |detail: String| FilecoinError::ParamsMismatch {
        path: path.clone(),
        proof: kind.name().to_string(),
        detail,
    };
    // The counts the engine checks, from whichever form the points take.
    let (srs, counts, bytes, mapped) = match points_dir {
        Some(dir) => {
            let file = dir.join(format!("{}.points", kind.params_file()));
            let identity =
                cuzk_params::points::Identity::of_file(&path).map_err(read_err(&path))?;
            let m = cuzk_params::points::map_or_build(&file, &identity, read)
                .map_err(read_err(&file))?;
            let counts = (m.vk.ic.len(), m.h.len(), m.l.len());
            (crate::mapped::srs(&m), counts, m.point_bytes(), true)
        }
        None => {
            let params = read().map_err(read_err(&path))?;
            let counts = (params.vk.ic.len(), params.h.len(), params.l.len());
            let srs = cuzk::srs_from_source(&&params, r1cs).map_err(|e| mismatch(e.to_string()))?;
            (srs, counts, params_bytes(&params), false)
        }
    };
    let (ic, h, l) = counts;
    if ic != r1cs.num_inputs() {
        return Err(mismatch(format!(
            "its verifying key has {ic} IC points, the circuit {} public inputs (the one included)",
            r1cs.num_inputs()
        )));
    }
    // The engine's own checks, run now so that a wrong file fails the load, not a job.
    if h != r1cs.num_constraints().next_power_of_two() - 1 {
        return Err(mismatch(format!(
            "its h query has {h} points, the circuit's domain needs {}",
            r1cs.num_constraints().next_power_of_two() - 1
        )));
    }
    if l != r1cs.num_aux() {
        return Err(mismatch(format!(
            "its l query has {l} points, the circuit has {} private variables",
            r1cs.num_aux()
        )));
    }
    Ok(LoadedParams {
        path,
        srs: Arc::new(srs),
        bytes,
        load_time: t.elapsed(),
        timing_only: false,
        mapped,
    })
}

/// A sector's C2 in the engine.
#[derive(Debug)]
pub struct PorepJob {
    handle: JobHandle,
    kind: PorepKind,
    public: SealPublic,
    verify: bool,
    parameter_dir: PathBuf,
    aggregation: Aggregation,
}

/// A finished C2: the proof bytes and what the engine reports about the job.
#[derive(Debug)]
pub struct PorepOutput {
    /// What `seal_commit_phase2` returns: interactive PoRep's N × 192 bytes in
    /// partition order, non-interactive PoRep's SnarkPack aggregate of them.
    pub proof: Vec<u8>,
    /// Non-interactive PoRep only: the partition proofs that were aggregated (what
    /// `seal_commit_phase2_circuit_proofs` returns, the input to aggregating several
    /// NI-PoRep sectors into one).
    pub partition_proofs: Option<Vec<u8>>,
    /// The engine's output (per-partition stage times, the proofs as points).
    pub job: JobOutput,
    /// Whether `verify_seal` accepted the proof (false only when verification is off
    /// or the parameters are timing-only).
    pub verified: bool,
    /// When the engine's last partition proof came back (where a non-interactive
    /// sector's aggregation starts).
    pub proofs_at: Instant,
    /// Non-interactive PoRep only: how long the SnarkPack aggregation took.
    pub aggregate_time: Option<Duration>,
    /// Whether the aggregate was made with a timing-only SRS (it does not verify).
    pub timing_only_aggregate: bool,
}

impl PorepJob {
    /// The engine's job id (for `cancel`).
    pub fn id(&self) -> u64 {
        self.handle.id()
    }

    pub fn kind(&self) -> &PorepKind {
        &self.kind
    }

    pub fn sector(&self) -> u64 {
        self.public.sector
    }

    /// Waits for the proof bytes (verified, unless verification is off).
    pub fn wait(self) -> Result<Vec<u8>, FilecoinError> {
        self.wait_output().map(|o| o.proof)
    }

    /// Waits for the job; assembles the bytes and verifies them with filecoin-proofs'
    /// `verify_seal`. A proof that does not verify is an error, never a result.
    pub fn wait_output(self) -> Result<PorepOutput, FilecoinError> {
        let out = self.handle.wait()?;
        let proofs_at = Instant::now();
        let mut proof = Vec::with_capacity(out.proofs.len() * PARTITION_PROOF_LEN);
        for p in &out.proofs {
            to_bellperson(p)
                .write(&mut proof)
                .map_err(|e| FilecoinError::io("encoding the proof", "", e))?;
        }
        // Non-interactive PoRep: the aggregate starts as soon as the last partition
        // proof exists (the engine goes on with the next job meanwhile: this runs on
        // the waiting thread, never on an engine worker).
        let (proof, partition_proofs, aggregate_time) = match &self.aggregation {
            Aggregation::None => (proof, None, None),
            Aggregation::FilecoinProofs => {
                let aggregate =
                    crate::aggregate::aggregate_ni_sector(&self.kind, &self.public, &proof)?;
                (aggregate, Some(proof), Some(proofs_at.elapsed()))
            }
            Aggregation::TimingOnly(srs) => {
                let aggregate = srs.aggregate(&self.kind, &proof)?;
                (aggregate, Some(proof), Some(proofs_at.elapsed()))
            }
        };
        let timing_only_aggregate = matches!(self.aggregation, Aggregation::TimingOnly(_));
        // (Timing-only parameters, hence a timing-only aggregate, never verify: off.)
        if self.verify {
            verify_bytes(&self.kind, &self.public, &proof, &self.parameter_dir)?;
        }
        Ok(PorepOutput {
            proof,
            partition_proofs,
            job: out,
            verified: self.verify,
            proofs_at,
            aggregate_time,
            timing_only_aggregate,
        })
    }
}

/// Verifies proof bytes with filecoin-proofs' `verify_seal`, which reads the
/// verifying key from its own parameter cache (`FIL_PROOFS_PARAMETER_CACHE`).
pub(crate) fn verify_bytes(
    kind: &PorepKind,
    public: &SealPublic,
    proof: &[u8],
    parameter_dir: &Path,
) -> Result<(), FilecoinError> {
    // An NI-PoRep proof is an aggregate, whose length depends on the partition count:
    // filecoin-proofs' reader checks it.
    if !kind.is_non_interactive() && proof.len() != kind.proof_len() {
        return Err(FilecoinError::ProofLength {
            proof: kind.name.clone(),
            expected: kind.proof_len(),
            actual: proof.len(),
        });
    }
    check_parameter_dir(parameter_dir)?;
    if shape::verify_seal(&kind.config, public, proof, kind.name.clone())? {
        Ok(())
    } else {
        Err(FilecoinError::NotVerified {
            sector: public.sector,
        })
    }
}

/// filecoin-proofs reads verifying keys and the SRS from its own parameter cache
/// (`FIL_PROOFS_PARAMETER_CACHE`): `parameter_dir` must be it.
pub(crate) fn check_parameter_dir(parameter_dir: &Path) -> Result<(), FilecoinError> {
    let theirs = crate::default_parameter_dir();
    if same_dir(parameter_dir, &theirs) {
        Ok(())
    } else {
        Err(FilecoinError::ParameterDirConflict {
            ours: parameter_dir.to_path_buf(),
            theirs,
        })
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a.components().eq(b.components()),
    }
}

/// Verifies a C2 proof for a C1 output with filecoin-proofs' `verify_seal`
/// (`cuzk c2 verify`).
pub fn verify_proof(
    input: &C1Input,
    prover_id: [u8; 32],
    sector: Option<u64>,
    proof: &[u8],
    parameter_dir: &Path,
) -> Result<(), FilecoinError> {
    let kind = PorepKind::new(input.c1.registered_proof)?;
    let public = SealPublic {
        comm_r: input.c1.comm_r,
        comm_d: input.c1.comm_d,
        prover_id,
        sector: input.sector(sector)?,
        ticket: input.c1.ticket,
        seed: input.c1.seed,
    };
    verify_bytes(&kind, &public, proof, parameter_dir)
}
