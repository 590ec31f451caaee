//! The synthetic kind: cuzk's built-in test circuits (SHA-256 chain, multiplication
//! chain) with parameters generated for them, proved through the same service
//! path as the Filecoin kinds. It exists so the daemon's queueing, cancellation,
//! priority and metrics can be exercised without Filecoin's parameters; it is
//! served only when the configuration turns it on, under its own kind
//! (`SYNTHETIC`), and is never a stand-in answer for a Filecoin request.
//!
//! A request's `vanilla_proof` is JSON: `{"circuit": "mul", "log": 10,
//! "partitions": 2, "seed": 7}`. The proof is each partition's 192-byte Groth16
//! proof (bellperson's encoding), in partition order, each verified by
//! bellperson's verifier before it is returned. The circuit id is
//! `synthetic-<circuit>-<log>`; its parameters come from a fixed seed and are
//! cached as `cuzk-synthetic-<circuit>-<log>.params` in the parameter directory.

use std::{path::PathBuf, sync::Arc};

use bellperson::groth16::Parameters;
use blstrs::{Bls12, Scalar};
use cuzk::pipeline::{job, to_bellperson, BellpersonVerifier, PartitionInput};
use cuzk_circuits::{AnyCircuit, Builtin};
use cuzk_scheduler::{Engine, JobError, JobHandle, Srs};
use cuzk_synth::R1cs;
use ff::Field;
use serde::Deserialize;

use crate::kind::{
    KindProver, LoadedParams, PreparedProof, ProofFailure, ProofKind, ProofRequest, RequestError,
    RunningProof,
};

/// Largest synthetic circuit served (2^18 constraints: seconds on a CPU).
pub const MAX_LOG: u32 = 18;
/// Most partitions in one synthetic job.
pub const MAX_PARTITIONS: u32 = 16;
/// The seed synthetic parameters are generated from (insecure by construction).
pub const PARAMS_SEED: u64 = 1;

/// The request's JSON.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SyntheticSpec {
    /// `sha256` or `mul`.
    pub circuit: String,
    /// log2 of the constraint count.
    pub log: u32,
    pub partitions: u32,
    /// The witness of partition `p` comes from `seed + p`.
    pub seed: u64,
}

impl SyntheticSpec {
    pub fn circuit_id(&self) -> String {
        format!("synthetic-{}-{}", self.circuit, self.log)
    }

    /// The circuit of partition `p`, with its witness.
    pub fn partition_circuit(&self, p: u32) -> Result<AnyCircuit, String> {
        let b = Builtin::from_name(&self.circuit)
            .ok_or_else(|| format!("unknown circuit `{}`", self.circuit))?;
        AnyCircuit::new(b, self.log, Some(self.seed + p as u64)).map_err(|e| format!("{e:?}"))
    }
}

/// The parameters of one synthetic circuit, as jobs use them.
pub struct SyntheticParams {
    pub params: Arc<Parameters<Bls12>>,
    pub r1cs: Arc<R1cs>,
    pub srs: Arc<Srs>,
    pub verifier: Arc<BellpersonVerifier>,
}

/// The synthetic kind.
pub struct SyntheticKind {
    param_dir: PathBuf,
}

impl SyntheticKind {
    /// Parameters are cached in `param_dir`.
    pub fn new(param_dir: impl Into<PathBuf>) -> Self {
        Self {
            param_dir: param_dir.into(),
        }
    }

    /// Parses `synthetic-<circuit>-<log>`.
    fn parse_circuit_id(id: &str) -> Option<(Builtin, u32)> {
        let rest = id.strip_prefix("synthetic-")?;
        let (name, log) = rest.rsplit_once('-')?;
        let b = Builtin::from_name(name)?;
        let log: u32 = log.parse().ok()?;
        (cuzk_circuits::MIN_LOG..=MAX_LOG)
            .contains(&log)
            .then_some((b, log))
    }

    /// The parameters of `circuit_id`, generated (and cached on disk) if needed.
    pub fn params(&self, circuit_id: &str) -> Result<SyntheticParams, String> {
        let (b, log) = Self::parse_circuit_id(circuit_id)
            .ok_or_else(|| format!("`{circuit_id}` is not a synthetic circuit id"))?;
        let blank = AnyCircuit::new(b, log, None).map_err(|e| format!("{e:?}"))?;
        let path = self
            .param_dir
            .join(format!("cuzk-synthetic-{}-{log}.params", b.name()));
        let params = cuzk_params::load_or_generate(&path, blank.clone(), PARAMS_SEED)
            .map_err(|e| e.to_string())?;
        let r1cs = Arc::new(
            cuzk_synth::compile(blank)
                .map_err(|e| format!("compiling {circuit_id}: {e}"))?
                .r1cs,
        );
        let srs = Arc::new(cuzk::srs_from_source(&&params, &r1cs).map_err(|e| e.to_string())?);
        let verifier = Arc::new(BellpersonVerifier::new(&params.vk));
        Ok(SyntheticParams {
            params: Arc::new(params),
            r1cs,
            srs,
            verifier,
        })
    }
}

/// Host bytes of a parameter set's points.
pub fn params_bytes(p: &Parameters<Bls12>) -> u64 {
    let g1 = std::mem::size_of::<blstrs::G1Affine>() as u64;
    let g2 = std::mem::size_of::<blstrs::G2Affine>() as u64;
    let n1 = p.h.len() + p.l.len() + p.a.len() + p.b_g1.len() + p.vk.ic.len();
    n1 as u64 * g1 + p.b_g2.len() as u64 * g2
}

impl KindProver for SyntheticKind {
    fn kind(&self) -> ProofKind {
        ProofKind::Synthetic
    }

    fn prepare(&self, request: ProofRequest) -> Result<Box<dyn PreparedProof>, RequestError> {
        let bad = |why: String| RequestError::Malformed {
            kind: ProofKind::Synthetic,
            why,
        };
        let spec: SyntheticSpec = serde_json::from_slice(&request.vanilla_proof).map_err(|e| {
            bad(format!(
                "vanilla_proof must be JSON like {{\"circuit\":\"mul\",\"log\":10,\"partitions\":2,\"seed\":7}}: {e}"
            ))
        })?;
        if Builtin::from_name(&spec.circuit).is_none() {
            return Err(bad(format!(
                "unknown circuit `{}`: use `sha256` or `mul`",
                spec.circuit
            )));
        }
        if !(cuzk_circuits::MIN_LOG..=MAX_LOG).contains(&spec.log) {
            return Err(bad(format!(
                "log {} is outside {}..={MAX_LOG}",
                spec.log,
                cuzk_circuits::MIN_LOG
            )));
        }
        if spec.partitions == 0 || spec.partitions > MAX_PARTITIONS {
            return Err(bad(format!(
                "partitions must be 1..={MAX_PARTITIONS}, not {}",
                spec.partitions
            )));
        }
        Ok(Box::new(Prepared {
            circuit_id: spec.circuit_id(),
            spec,
        }))
    }

    fn knows_circuit(&self, circuit_id: &str) -> bool {
        Self::parse_circuit_id(circuit_id).is_some()
    }

    fn load_params(&self, circuit_id: &str) -> Result<LoadedParams, String> {
        let p = self.params(circuit_id)?;
        let bytes = params_bytes(&p.params);
        Ok(LoadedParams {
            value: Arc::new(p),
            bytes,
        })
    }
}

struct Prepared {
    spec: SyntheticSpec,
    circuit_id: String,
}

impl PreparedProof for Prepared {
    fn circuit_id(&self) -> &str {
        &self.circuit_id
    }

    fn start(
        self: Box<Self>,
        engine: &Engine,
        params: &LoadedParams,
    ) -> Result<Box<dyn RunningProof>, String> {
        let p = params
            .value
            .downcast_ref::<SyntheticParams>()
            .ok_or("internal: the parameter set is not a synthetic one")?;
        let mut rng = rand::thread_rng();
        let partitions = (0..self.spec.partitions)
            .map(|i| {
                let circuit = self.spec.partition_circuit(i)?;
                Ok(PartitionInput {
                    public_inputs: circuit.public_inputs().map_err(|e| format!("{e:?}"))?,
                    circuit,
                    r: Scalar::random(&mut rng),
                    s: Scalar::random(&mut rng),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let spec = job(
            p.r1cs.clone(),
            p.srs.clone(),
            partitions,
            Some(p.verifier.clone()),
        );
        Ok(Box::new(Running {
            handle: engine.submit(spec),
        }))
    }
}

struct Running {
    handle: JobHandle,
}

impl RunningProof for Running {
    fn engine_job(&self) -> u64 {
        self.handle.id()
    }

    fn wait(self: Box<Self>) -> Result<Vec<u8>, ProofFailure> {
        match self.handle.wait() {
            Ok(out) if !out.verified => Err(ProofFailure::Failed(
                "the engine returned proofs it did not verify (verification is off)".into(),
            )),
            Ok(out) => {
                let mut bytes = Vec::with_capacity(192 * out.proofs.len());
                for proof in &out.proofs {
                    to_bellperson(proof)
                        .write(&mut bytes)
                        .map_err(|e| ProofFailure::Failed(format!("encoding the proof: {e}")))?;
                }
                Ok(bytes)
            }
            Err(JobError::Cancelled) => Err(ProofFailure::Cancelled),
            Err(e) => Err(ProofFailure::Failed(e.to_string())),
        }
    }
}
