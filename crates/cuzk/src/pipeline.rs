//! The pipelined engine with bellperson's types: jobs from circuits and parameters,
//! proofs checked by bellperson's verifier.
//!
//! [`crate::BatchProver`] proves one batch at a time, stage after stage; the pipelined
//! engine ([`PipelineEngine`]) keeps many partitions of many jobs in flight, under
//! a memory budget, with the strategies (`Policies`) chosen at run time, and
//! records a TIMELINE.

use std::sync::Arc;

use bellperson::groth16::{prepare_verifying_key, verify_proof, PreparedVerifyingKey, Proof};
use blstrs::{Bls12, Scalar};
use cuzk_assembly::ProofPoints;
use cuzk_scheduler::{JobSpec, PartitionSpec, ProofVerifier, Srs, WitnessSource};
use cuzk_synth::R1cs;

use crate::VerifyingKey;

pub use cuzk_timeline::Recorder;

pub use cuzk_scheduler::{
    JobError, JobHandle, JobOutput, PipelineConfig, PipelineEngine, PipelineError, Policies,
    Priority, SplitWitness, Unthrottled,
};

/// bellperson's Groth16 verifier behind the engine's [`ProofVerifier`].
pub struct BellpersonVerifier {
    pvk: PreparedVerifyingKey<Bls12>,
}

impl BellpersonVerifier {
    pub fn new(vk: &VerifyingKey<Bls12>) -> Self {
        Self {
            pvk: prepare_verifying_key(vk),
        }
    }
}

impl ProofVerifier for BellpersonVerifier {
    fn verify(&self, proof: &ProofPoints, public_inputs: &[Scalar]) -> Result<bool, String> {
        let proof = to_bellperson(proof);
        verify_proof(&self.pvk, &proof, public_inputs).map_err(|e| e.to_string())
    }
}

/// A proof in bellperson's type (which `Proof::write` encodes).
pub fn to_bellperson(p: &ProofPoints) -> Proof<Bls12> {
    Proof {
        a: p.a,
        b: p.b,
        c: p.c,
    }
}

/// One partition of a job: its circuit (any bellperson circuit, or a
/// [`SplitWitness`] of one whose parts synthesize in parallel), blinding and public
/// inputs.
pub struct PartitionInput<C> {
    pub circuit: C,
    pub r: Scalar,
    pub s: Scalar,
    pub public_inputs: Vec<Scalar>,
}

/// A job for [`PipelineEngine::submit`]: partitions of one compiled shape,
/// verified with `verifier` (when the engine verifies), at [`Priority::Normal`]
/// (set `priority` on the result for another).
pub fn job<C>(
    r1cs: Arc<R1cs>,
    srs: Arc<Srs>,
    partitions: Vec<PartitionInput<C>>,
    verifier: Option<Arc<BellpersonVerifier>>,
) -> JobSpec
where
    C: WitnessSource + 'static,
{
    JobSpec {
        r1cs,
        srs,
        partitions: partitions
            .into_iter()
            .map(|p| PartitionSpec {
                circuit: Box::new(p.circuit),
                r: p.r,
                s: p.s,
                public_inputs: p.public_inputs,
            })
            .collect(),
        verifier: verifier.map(|v| v as Arc<dyn ProofVerifier>),
        priority: Priority::Normal,
    }
}
