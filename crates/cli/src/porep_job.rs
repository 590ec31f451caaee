//! The `porep-c2` job kind: a sector's PoRep C2 from its C1 output, proved by
//! `cuzk-filecoin` on the worker's engine and verified with filecoin-proofs'
//! `verify_seal` before it is written back.
//!
//! A job's input is one line of JSON, then the C1 file's bytes as they are (a C1
//! output's JSON, or the envelope lotus-bench and Curio wrap it in):
//!
//! ```text
//! {"miner_id":"1000","sector":7}\n<C1 bytes>
//! ```
//!
//! `miner_id` is what `cuzk_filecoin::parse_prover_id` reads (an actor id, `f0…`,
//! or 32 bytes of hex); `sector` may be left out when the envelope carries it. The
//! output is filecoin-proofs' proof bytes (192 per partition).

use std::sync::Arc;

use cuzk::pipeline::PipelineEngine;
use cuzk_filecoin::{parse_c1, parse_prover_id, Blinding, FilecoinProver, PorepRequest};
use cuzk_queue::{Cancel, ClaimedJob, JobRunner, RunError};
use serde::{Deserialize, Serialize};

/// The kind name jobs of this runner are submitted under.
pub const KIND: &str = "porep-c2";

/// The first line of a `porep-c2` job's input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PorepHeader {
    pub miner_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sector: Option<u64>,
}

impl PorepHeader {
    /// The job input: this header's line, then `c1`.
    pub fn input(&self, c1: &[u8]) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).expect("a plain struct serialises");
        out.push(b'\n');
        out.extend_from_slice(c1);
        out
    }

    /// Splits a job input into its header and C1 bytes.
    pub fn parse(input: &[u8]) -> Result<(PorepHeader, &[u8]), RunError> {
        let nl = input.iter().position(|&b| b == b'\n').ok_or_else(|| {
            RunError("the porep-c2 job's input has no header line before its C1 bytes".into())
        })?;
        let header = serde_json::from_slice(&input[..nl])
            .map_err(|e| RunError(format!("the porep-c2 job's header is not valid: {e}")))?;
        Ok((header, &input[nl + 1..]))
    }
}

/// Proves `porep-c2` jobs with one [`FilecoinProver`] (its parameters and compiled
/// circuits cached across jobs) on the worker's engine.
pub struct PorepRunner {
    engine: Arc<PipelineEngine>,
    prover: FilecoinProver,
}

impl PorepRunner {
    pub fn new(engine: Arc<PipelineEngine>, prover: FilecoinProver) -> Self {
        Self { engine, prover }
    }
}

impl JobRunner for PorepRunner {
    fn kind(&self) -> &str {
        KIND
    }

    fn run(&self, job: &ClaimedJob, cancel: &Cancel) -> Result<Vec<u8>, RunError> {
        let (header, c1) = PorepHeader::parse(&job.input)?;
        let input = parse_c1(c1).map_err(|e| RunError::from_error(&e))?;
        let prover_id = parse_prover_id(&header.miner_id).map_err(|e| RunError::from_error(&e))?;
        let request = PorepRequest {
            input,
            prover_id,
            sector: header.sector,
            blinding: Blinding::Random,
        };
        let porep = self
            .prover
            .submit_porep(
                &self.engine,
                request,
                crate::worker::engine_priority(job.priority),
            )
            .map_err(|e| RunError::from_error(&e))?;
        let (engine, id) = (self.engine.clone(), porep.id());
        cancel.on_cancel(move || engine.cancel(id));
        let out = porep.wait_output().map_err(|e| RunError::from_error(&e))?;
        if !out.verified {
            return Err(RunError(
                "the proof was not verified (the worker's Filecoin prover verifies every proof)"
                    .into(),
            ));
        }
        Ok(out.proof)
    }
}
