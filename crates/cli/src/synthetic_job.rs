//! The `synthetic` job kind: a built-in test circuit (SHA-256 or multiplication
//! chain) proved through the queue. Not a Filecoin proof: it exists so the queue
//! can be tested and measured without sector data, with parameters generated once
//! and cached like `cuzk prove`'s.
//!
//! A job's input is JSON (`{"circuit":"mul","log":10,"seed":7,"partitions":1}`);
//! partition `p` has the witness of seed `seed + p` and the blinding of
//! [`blinding`]`(seed + p)`, so two workers proving the same job write the same
//! bytes. The output is the partitions' proofs, 192 bytes each (bellperson's
//! encoding), in order, every one verified by the engine before it is returned.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use blstrs::{Bls12, Scalar};
use cuzk::pipeline::{job, to_bellperson, BellpersonVerifier, PartitionInput, PipelineEngine};
use cuzk::{Parameters, R1cs, Srs};
use cuzk_circuits::{AnyCircuit, Builtin};
use cuzk_queue::{Cancel, ClaimedJob, JobRunner, RunError};
use serde::{Deserialize, Serialize};

use crate::{prove::blinding, prove::load_params, CircuitArgs};

/// The kind name jobs of this runner are submitted under.
pub const KIND: &str = "synthetic";

/// The largest circuit a synthetic job may ask for: parameter generation at 2^22
/// already takes minutes, and a typo should not start an hour of it.
pub const MAX_LOG: u32 = 22;
/// The most partitions a synthetic job may have.
pub const MAX_PARTITIONS: u32 = 64;

/// A synthetic job's input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticJob {
    /// `sha256` or `mul`.
    pub circuit: String,
    /// log2 of the constraint count.
    pub log: u32,
    /// Witness (and blinding) seed of the first partition.
    pub seed: u64,
    pub partitions: u32,
}

impl SyntheticJob {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a plain struct serialises")
    }

    fn parse(input: &[u8]) -> Result<(SyntheticJob, Builtin), RunError> {
        let job: SyntheticJob = serde_json::from_slice(input)
            .map_err(|e| RunError(format!("the synthetic job's input is not valid: {e}")))?;
        let circuit = Builtin::from_name(&job.circuit).ok_or_else(|| {
            RunError(format!(
                "the synthetic job names an unknown circuit `{}` (sha256 or mul)",
                job.circuit
            ))
        })?;
        if job.log > MAX_LOG {
            return Err(RunError(format!(
                "the synthetic job asks for 2^{} constraints; at most 2^{MAX_LOG}",
                job.log
            )));
        }
        if job.partitions == 0 || job.partitions > MAX_PARTITIONS {
            return Err(RunError(format!(
                "the synthetic job has {} partitions; 1 to {MAX_PARTITIONS}",
                job.partitions
            )));
        }
        Ok((job, circuit))
    }

    /// Partition `p`'s witness seed.
    pub fn partition_seed(&self, p: u32) -> u64 {
        self.seed.wrapping_add(p as u64)
    }
}

/// What a circuit shape needs, made once per (circuit, log) and kept.
struct Shape {
    r1cs: Arc<R1cs>,
    srs: Arc<Srs>,
    verifier: Arc<BellpersonVerifier>,
}

/// Proves synthetic jobs on a shared pipelined engine.
pub struct SyntheticRunner {
    engine: Arc<PipelineEngine>,
    cache_dir: PathBuf,
    shapes: Mutex<HashMap<(Builtin, u32), Arc<Shape>>>,
}

impl SyntheticRunner {
    pub fn new(engine: Arc<PipelineEngine>, cache_dir: PathBuf) -> Self {
        Self {
            engine,
            cache_dir,
            shapes: Mutex::new(HashMap::new()),
        }
    }

    /// The shape's parameters and R1CS (generated or read from the cache the
    /// first time; jobs of a new shape wait for the first to make it).
    fn shape(&self, circuit: Builtin, log: u32) -> Result<Arc<Shape>, RunError> {
        let mut shapes = self
            .shapes
            .lock()
            .map_err(|_| RunError("a thread preparing parameters panicked".into()))?;
        if let Some(s) = shapes.get(&(circuit, log)) {
            return Ok(s.clone());
        }
        let args = CircuitArgs { circuit, log };
        let params: Parameters<Bls12> = load_params(None, &self.cache_dir, &args).map_err(|e| {
            RunError(format!(
                "parameters for {} at 2^{log}: {e:#}",
                circuit.name()
            ))
        })?;
        let blank = AnyCircuit::new(circuit, log, Some(0)).map_err(|e| RunError::from_error(&e))?;
        let r1cs = Arc::new(
            cuzk_synth::compile(blank)
                .map_err(|e| RunError::from_error(&e))?
                .r1cs,
        );
        let srs =
            Arc::new(cuzk::srs_from_source(&&params, &r1cs).map_err(|e| RunError::from_error(&e))?);
        let shape = Arc::new(Shape {
            verifier: Arc::new(BellpersonVerifier::new(&params.vk)),
            r1cs,
            srs,
        });
        shapes.insert((circuit, log), shape.clone());
        Ok(shape)
    }
}

impl JobRunner for SyntheticRunner {
    fn kind(&self) -> &str {
        KIND
    }

    fn run(&self, claimed: &ClaimedJob, cancel: &Cancel) -> Result<Vec<u8>, RunError> {
        let (req, circuit) = SyntheticJob::parse(&claimed.input)?;
        // The circuit's own checks (the size range) come before any parameters.
        let mut parts = Vec::with_capacity(req.partitions as usize);
        for p in 0..req.partitions {
            let seed = req.partition_seed(p);
            let c = AnyCircuit::new(circuit, req.log, Some(seed))
                .map_err(|e| RunError(format!("the synthetic job's circuit: {e}")))?;
            let (r, s): (Scalar, Scalar) = blinding(seed);
            parts.push(PartitionInput {
                public_inputs: c.public_inputs().map_err(|e| RunError::from_error(&e))?,
                circuit: c,
                r,
                s,
            });
        }
        let shape = self.shape(circuit, req.log)?;
        let mut spec = job(
            shape.r1cs.clone(),
            shape.srs.clone(),
            parts,
            Some(shape.verifier.clone()),
        );
        spec.priority = crate::worker::engine_priority(claimed.priority);
        let handle = self.engine.submit(spec);
        let (engine, id) = (self.engine.clone(), handle.id());
        cancel.on_cancel(move || engine.cancel(id));
        let out = handle.wait().map_err(|e| RunError::from_error(&e))?;
        if !out.verified {
            return Err(RunError(
                "the engine returned unverified proofs (the worker runs with verification on)"
                    .into(),
            ));
        }
        let mut bytes = Vec::with_capacity(192 * out.proofs.len());
        for proof in &out.proofs {
            to_bellperson(proof)
                .write(&mut bytes)
                .map_err(|e| RunError(format!("encoding a proof: {e}")))?;
        }
        Ok(bytes)
    }
}
