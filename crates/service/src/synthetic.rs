//! The synthetic kind: cuzk's built-in test circuits (SHA-256 chain, multiplication
//! chain) with parameters generated for them, proved through the same service
//! path as the Filecoin kinds. It exists so the daemon's queueing, cancellation,
//! priority and metrics can be exercised without Filecoin's parameters; it is
//! served only when the configuration turns it on, under its own kind
//! (`SYNTHETIC`), and is never a stand-in answer for a Filecoin request.
//!
//! A request's `vanilla_proof` is JSON: `{"circuit": "mul", "log": 10,
//! "partitions": 2, "seed": 7}`; `circuit` is `mul`, `sha256` or `porep` (the
//! R1CS shape of a 32 GiB PoRep partition at 2^log, `cuzk_circuits::PorepLike`). The proof is each partition's 192-byte Groth16
//! proof (bellperson's encoding), in partition order, each verified by
//! bellperson's verifier before it is returned. The circuit id is
//! `synthetic-<circuit>-<log>`; its parameters come from a fixed seed and are
//! cached as `cuzk-synthetic-<circuit>-<log>.params` in the parameter directory
//! (`porep`: `cuzk-porep-2^<log>.params`, the file `cuzk bench` generates).

use std::{path::PathBuf, sync::Arc};

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use bellperson::groth16::Parameters;
use blstrs::{Bls12, Scalar};
use cuzk::pipeline::{job, to_bellperson, BellpersonVerifier, PartitionInput};
use cuzk_circuits::{AnyCircuit, Builtin, PorepLike};
use cuzk_scheduler::{JobError, JobHandle, PipelineEngine, Srs};
use cuzk_synth::R1cs;
use ff::Field;
use serde::Deserialize;

use crate::kind::{
    KindProver, LoadedParams, PreparedProof, ProofFailure, ProofKind, ProofRequest, RequestError,
    RunningProof,
};

/// Largest synthetic circuit served by default (2^18 constraints: seconds on a
/// CPU); `SyntheticKind::with_max_log` raises it (2^27 is a 32 GiB partition).
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
    pub fn partition_circuit(&self, p: u32) -> Result<SynthCircuit, String> {
        SynthCircuit::new(&self.circuit, self.log, Some(self.seed + p as u64))
    }
}

/// A synthetic circuit: a built-in one or the PoRep-shaped one.
#[derive(Clone, Debug)]
pub enum SynthCircuit {
    Builtin(AnyCircuit),
    Porep(PorepLike),
}

impl SynthCircuit {
    /// `name` at 2^`log` with the witness of `seed` (`None`: blank).
    pub fn new(name: &str, log: u32, seed: Option<u64>) -> Result<Self, String> {
        if name == "porep" {
            return PorepLike::new(log, seed)
                .map(SynthCircuit::Porep)
                .map_err(|e| format!("{e:?}"));
        }
        let b = Builtin::from_name(name)
            .ok_or_else(|| format!("unknown circuit `{name}`: use `mul`, `sha256` or `porep`"))?;
        AnyCircuit::new(b, log, seed)
            .map(SynthCircuit::Builtin)
            .map_err(|e| format!("{e:?}"))
    }

    pub fn public_inputs(&self) -> Result<Vec<Scalar>, String> {
        match self {
            SynthCircuit::Builtin(c) => c.public_inputs(),
            SynthCircuit::Porep(c) => c.public_inputs(),
        }
        .map_err(|e| format!("{e:?}"))
    }

    fn known(name: &str) -> bool {
        name == "porep" || Builtin::from_name(name).is_some()
    }
}

impl Circuit<Scalar> for SynthCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            SynthCircuit::Builtin(c) => c.synthesize(cs),
            SynthCircuit::Porep(c) => c.synthesize(cs),
        }
    }
}

/// The parameters of one synthetic circuit, as jobs use them.
pub struct SyntheticParams {
    pub params: Arc<Parameters<Bls12>>,
    pub r1cs: Arc<R1cs>,
    pub srs: Arc<Srs>,
    pub verifier: Arc<BellpersonVerifier>,
    /// Random points of the right shape (benchmarks): proofs do not verify.
    pub timing_only: bool,
}

/// The synthetic kind.
pub struct SyntheticKind {
    param_dir: PathBuf,
    max_log: u32,
    timing_only: bool,
}

impl SyntheticKind {
    /// Parameters are cached in `param_dir`.
    pub fn new(param_dir: impl Into<PathBuf>) -> Self {
        Self {
            param_dir: param_dir.into(),
            max_log: MAX_LOG,
            timing_only: false,
        }
    }

    /// Benchmarks only: parameters of random points with the circuit's shape
    /// (`cuzk_params::timing`), made in seconds where generating real ones at
    /// 2^27 takes hours. Such proofs cannot verify: they are returned unverified
    /// (the daemon says so when it starts), and only for this kind.
    pub fn with_timing_only(mut self, on: bool) -> Self {
        self.timing_only = on;
        self
    }

    /// Serves circuits up to 2^`max_log` constraints.
    pub fn with_max_log(mut self, max_log: u32) -> Self {
        self.max_log = max_log;
        self
    }

    /// Parses `synthetic-<circuit>-<log>`.
    fn parse_circuit_id(&self, id: &str) -> Option<(String, u32)> {
        let rest = id.strip_prefix("synthetic-")?;
        let (name, log) = rest.rsplit_once('-')?;
        let log: u32 = log.parse().ok()?;
        (SynthCircuit::known(name) && (cuzk_circuits::MIN_LOG..=self.max_log).contains(&log))
            .then(|| (name.to_owned(), log))
    }

    /// The parameters of `circuit_id`, generated (and cached on disk) if needed.
    pub fn params(&self, circuit_id: &str) -> Result<SyntheticParams, String> {
        let (name, log) = self
            .parse_circuit_id(circuit_id)
            .ok_or_else(|| format!("`{circuit_id}` is not a synthetic circuit id"))?;
        if self.timing_only {
            return self.timing_params(circuit_id, &name, log);
        }
        let blank = SynthCircuit::new(&name, log, None)?;
        // The PoRep-shaped circuit's file is the one `cuzk bench --circuit porep`
        // generates (seed 0), so a machine that benched it need not generate again.
        let (file, seed) = if name == "porep" {
            (format!("cuzk-porep-2^{log}.params"), 0)
        } else {
            (format!("cuzk-synthetic-{name}-{log}.params"), PARAMS_SEED)
        };
        let path = self.param_dir.join(file);
        let params =
            cuzk_params::load_or_generate(&path, blank.clone(), seed).map_err(|e| e.to_string())?;
        let r1cs = compile(circuit_id, &name, log)?;
        let srs = Arc::new(cuzk::srs_from_source(&&params, &r1cs).map_err(|e| e.to_string())?);
        let verifier = Arc::new(BellpersonVerifier::new(&params.vk));
        Ok(SyntheticParams {
            params: Arc::new(params),
            r1cs,
            srs,
            verifier,
            timing_only: false,
        })
    }
}

impl SyntheticKind {
    fn timing_params(
        &self,
        circuit_id: &str,
        name: &str,
        log: u32,
    ) -> Result<SyntheticParams, String> {
        let r1cs = compile(circuit_id, name, log)?;
        let shape = timing_shape(&r1cs);
        let params = cuzk_params::timing::timing_only_params(&shape, 7)
            .map_err(|e| e.to_string())?
            .into_params();
        let srs = Arc::new(cuzk::srs_from_source(&&params, &r1cs).map_err(|e| e.to_string())?);
        let verifier = Arc::new(BellpersonVerifier::new(&params.vk));
        Ok(SyntheticParams {
            params: Arc::new(params),
            r1cs,
            srs,
            verifier,
            timing_only: true,
        })
    }
}

/// The circuit's R1CS, compiled from an instance with a witness (the compiler
/// evaluates the circuit; the shape does not depend on the witness).
fn compile(circuit_id: &str, name: &str, log: u32) -> Result<Arc<R1cs>, String> {
    let probe = SynthCircuit::new(name, log, Some(0))?;
    cuzk_synth::compile(probe)
        .map(|c| Arc::new(c.r1cs))
        .map_err(|e| format!("compiling {circuit_id}: {e}"))
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
        if !SynthCircuit::known(&spec.circuit) {
            return Err(bad(format!(
                "unknown circuit `{}`: use `mul`, `sha256` or `porep`",
                spec.circuit
            )));
        }
        if !(cuzk_circuits::MIN_LOG..=self.max_log).contains(&spec.log) {
            return Err(bad(format!(
                "log {} is outside {}..={} (the daemon's synthetic_max_log)",
                spec.log,
                cuzk_circuits::MIN_LOG,
                self.max_log
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
        self.parse_circuit_id(circuit_id).is_some()
    }

    fn load_params(&self, circuit_id: &str) -> Result<LoadedParams, String> {
        let p = self.params(circuit_id)?;
        let bytes = params_bytes(&p.params);
        Ok(LoadedParams {
            timing_only: p.timing_only,
            value: Arc::new(p),
            bytes,
        })
    }

    fn timing_only_circuits(&self) -> Vec<String> {
        // Every synthetic circuit id, when the kind is timing-only.
        if self.timing_only {
            vec!["synthetic-*".to_owned()]
        } else {
            Vec::new()
        }
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
        engine: &PipelineEngine,
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
                    public_inputs: circuit.public_inputs()?,
                    circuit,
                    r: Scalar::random(&mut rng),
                    s: Scalar::random(&mut rng),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let verifier = (!p.timing_only).then(|| p.verifier.clone());
        let spec = job(p.r1cs.clone(), p.srs.clone(), partitions, verifier);
        Ok(Box::new(Running {
            handle: engine.submit(spec),
            timing_only: p.timing_only,
        }))
    }
}

struct Running {
    handle: JobHandle,
    timing_only: bool,
}

impl RunningProof for Running {
    fn engine_job(&self) -> Option<u64> {
        Some(self.handle.id())
    }

    fn wait(self: Box<Self>) -> Result<Vec<u8>, ProofFailure> {
        match self.handle.wait() {
            Ok(out) if !out.verified && !self.timing_only => Err(ProofFailure::Failed(
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

/// The sizes timing-only parameters need for `r1cs` (its variables, the dense
/// parts of the A and B queries, the evaluation domain).
pub fn timing_shape(r1cs: &cuzk_synth::R1cs) -> cuzk_params::timing::TimingShape {
    cuzk_params::timing::TimingShape {
        num_inputs: r1cs.num_inputs(),
        num_aux: r1cs.num_aux(),
        a_aux_dense: r1cs.a_aux_density().count(),
        b_inputs_dense: r1cs.b_input_density().count(),
        b_aux_dense: r1cs.b_aux_density().count(),
        domain: r1cs.num_constraints().next_power_of_two(),
    }
}
