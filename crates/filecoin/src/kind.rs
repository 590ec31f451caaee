//! What every proof type of this crate shares: a circuit named by filecoin-proofs'
//! cache identifier (which names its parameter files), a blank circuit to compile
//! and to generate parameters from, and a job in the engine whose bytes are checked
//! by filecoin-proofs' verifier before they are returned.
//!
//! PoRep ([`crate::PorepKind`]), SnapDeals ([`crate::UpdateKind`]) and PoSt
//! ([`crate::PostKind`]) implement [`CircuitKind`], so [`crate::FilecoinProver`]'s
//! caches (one compiled R1CS and one loaded parameter set per cache identifier)
//! and `cuzk params gen` serve all of them.

use blstrs::Scalar;
use cuzk::pipeline::{to_bellperson, JobHandle, JobOutput};
use storage_proofs_core::parameter_cache::{parameter_id, verifying_key_id};

use crate::shape::BlankUser;
use crate::{FilecoinError, PARTITION_PROOF_LEN};

/// A circuit of filecoin-proofs, as this crate compiles it and names its files.
pub trait CircuitKind {
    /// The registered proof's name (`StackedDrgWinning32GiBV1`).
    fn name(&self) -> &str;
    /// filecoin-proofs' cache identifier of the circuit
    /// (`proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-<hash>`).
    fn cache_id(&self) -> &str;
    /// Runs `user` with the blank circuit (every value `None`), as filecoin-proofs
    /// builds it for parameter generation.
    fn with_blank<U: BlankUser>(&self, user: U) -> Result<U::Out, FilecoinError>;

    /// The parameter file's name (`v28-….params`), by filecoin-proofs' own function.
    fn params_file(&self) -> String {
        parameter_id(self.cache_id())
    }

    /// The verifying key's file name (`v28-….vk`).
    fn vk_file(&self) -> String {
        verifying_key_id(self.cache_id())
    }
}

/// How urgent a proof is: the engine's own priority (its queues serve a higher one
/// first). WinningPoSt must land within an epoch, so it is `Critical` by default;
/// WindowPoSt, due within its deadline, `High`; PoRep and SnapDeals `Normal`.
pub use cuzk_scheduler::Priority;

/// Parses `low`, `normal`, `high` or `critical`.
pub fn parse_priority(s: &str) -> Result<Priority, FilecoinError> {
    match s {
        "low" => Ok(Priority::Low),
        "normal" => Ok(Priority::Normal),
        "high" => Ok(Priority::High),
        "critical" => Ok(Priority::Critical),
        _ => Err(FilecoinError::Unsupported {
            proof: s.to_string(),
            reason: "not a priority (low, normal, high, critical)",
        }),
    }
}

/// Checks filecoin-proofs' verdict on the finished proof bytes.
pub(crate) type Verify = Box<dyn FnOnce(&[u8]) -> Result<(), FilecoinError> + Send>;

/// A SnapDeals, WindowPoSt or WinningPoSt proof in the engine.
pub struct KindJob {
    pub(crate) handle: JobHandle,
    pub(crate) name: String,
    pub(crate) priority: Priority,
    /// `None`: verification is off (benchmarks, timing-only parameters).
    pub(crate) verify: Option<Verify>,
}

impl std::fmt::Debug for KindJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindJob")
            .field("id", &self.handle.id())
            .field("proof", &self.name)
            .field("priority", &self.priority)
            .finish()
    }
}

/// A finished proof: its bytes and what the engine reports about the job.
#[derive(Debug)]
pub struct KindOutput {
    /// What filecoin-proofs' own function returns: partitions × 192 bytes.
    pub proof: Vec<u8>,
    pub job: JobOutput,
    /// Whether filecoin-proofs' verifier accepted the bytes (false only when
    /// verification is off).
    pub verified: bool,
}

impl KindJob {
    /// The engine's job id (for `cancel`).
    pub fn id(&self) -> u64 {
        self.handle.id()
    }

    /// The registered proof's name.
    pub fn proof_name(&self) -> &str {
        &self.name
    }

    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Waits for the proof bytes, verified by filecoin-proofs (unless verification
    /// is off).
    pub fn wait(self) -> Result<Vec<u8>, FilecoinError> {
        self.wait_output().map(|o| o.proof)
    }

    /// Waits for the job, encodes its proofs as filecoin-proofs does (partition
    /// order, 192 bytes each) and verifies them. A proof that does not verify is an
    /// error, never a result.
    pub fn wait_output(self) -> Result<KindOutput, FilecoinError> {
        let out = self.handle.wait()?;
        let mut proof = Vec::with_capacity(out.proofs.len() * PARTITION_PROOF_LEN);
        for p in &out.proofs {
            to_bellperson(p)
                .write(&mut proof)
                .map_err(|e| FilecoinError::io("encoding the proof", "", e))?;
        }
        let verified = self.verify.is_some();
        if let Some(verify) = self.verify {
            verify(&proof)?;
        }
        Ok(KindOutput {
            proof,
            job: out,
            verified,
        })
    }
}

/// Checks that an input is 32 bytes (commitments, randomness).
/// A registered proof of `all` by its name (`name` of it, after an optional Go
/// `prefix`) or its number (its index in `all`, which is Go's enum order).
pub(crate) fn parse_registered<P: Copy>(
    text: &str,
    prefix: &str,
    all: &[P],
    name: impl Fn(P) -> String,
    reason: &'static str,
) -> Result<P, FilecoinError> {
    let t = text.trim();
    let t = t.strip_prefix(prefix).unwrap_or(t);
    all.iter()
        .enumerate()
        .find(|(i, p)| name(**p) == t || t.parse::<usize>().ok() == Some(*i))
        .map(|(_, p)| *p)
        .ok_or_else(|| FilecoinError::Unsupported {
            proof: text.to_string(),
            reason,
        })
}

pub(crate) fn bytes32(what: &'static str, bytes: &[u8]) -> Result<[u8; 32], FilecoinError> {
    bytes.try_into().map_err(|_| FilecoinError::InputLength {
        what,
        expected: 32,
        actual: bytes.len(),
    })
}

/// One `(r, s)` per partition: fixed, or fresh from the OS.
pub(crate) fn blinding_pairs(
    blinding: crate::Blinding,
    n: usize,
    name: &str,
) -> Result<Vec<(Scalar, Scalar)>, FilecoinError> {
    use ff::Field;
    let pairs = match blinding {
        crate::Blinding::Random => (0..n)
            .map(|_| {
                (
                    Scalar::random(rand::rngs::OsRng),
                    Scalar::random(rand::rngs::OsRng),
                )
            })
            .collect(),
        crate::Blinding::Fixed(rs) => rs,
    };
    if pairs.len() != n {
        return Err(FilecoinError::Circuit {
            proof: name.to_string(),
            message: format!("{} blinding pairs for {n} partitions", pairs.len()),
        });
    }
    Ok(pairs)
}

/// Submits a kind's job to the engine at `priority` (every queue of the engine
/// orders by priority first).
pub(crate) fn submit(
    engine: &cuzk::pipeline::PipelineEngine,
    mut spec: cuzk_scheduler::JobSpec,
    priority: Priority,
) -> JobHandle {
    spec.priority = priority;
    engine.submit(spec)
}

impl crate::FilecoinProver {
    /// What every kind's submission shares, once its inputs are checked: the
    /// circuit compiled and parameters loaded (first use), one `(r, s)` per
    /// partition, the job built by `build` (the kind's partitions through
    /// [`crate::snap::MakeJob`]) and submitted at `priority`; `verify` checks the
    /// bytes unless verification is off or the parameters are timing-only.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn submit_kind<K: CircuitKind>(
        &self,
        engine: &cuzk::pipeline::PipelineEngine,
        kind: &K,
        partitions: usize,
        blinding: crate::Blinding,
        priority: Priority,
        build: impl FnOnce(crate::snap::MakeJob) -> Result<cuzk_scheduler::JobSpec, FilecoinError>,
        verify: Verify,
    ) -> Result<KindJob, FilecoinError> {
        let params = self.params(kind)?;
        let r1cs = self.r1cs(kind)?;
        let blinding = blinding_pairs(blinding, partitions, kind.name())?;
        let spec = build(crate::snap::MakeJob {
            r1cs,
            srs: params.srs.clone(),
            blinding,
        })?;
        Ok(KindJob {
            handle: submit(engine, spec, priority),
            name: kind.name().to_string(),
            priority,
            verify: (self.config().verify && !params.timing_only).then_some(verify),
        })
    }
}
