//! SnarkPack aggregation of many sectors' C2 outputs as a proof kind of the
//! proving service (`SEAL_AGGREGATE`, cuzk's kind 1001; Curio's proto has none):
//! the request's `vanilla_proof` is an [`AggregateRequest`] in its JSON form (what
//! `cuzk aggregate request` writes), the result filecoin-proofs'
//! `aggregate_seal_commit_proofs` of it, verified with its
//! `verify_aggregate_seal_commit_proofs` ([`crate::aggregate::aggregate`]).
//!
//! # A kind without Groth16 parameters
//!
//! Aggregation proves no circuit: it needs no parameter set on the engine, only
//! SnarkPack's SRS (and, for interactive PoRep, whose proofs are each verified
//! first, the circuit's verifying key), which filecoin-proofs reads itself from its
//! parameter cache. So the kind's one circuit id is the SRS file's official name
//! ([`srs_file`], `v28-fil-inner-product-v1.srs`): loading it checks that the file
//! is there (a job fails with `SrsMissing` otherwise, before any work) and counts
//! **0 bytes**, because the SRS keys filecoin-proofs specialises from it live in
//! its own process-wide cache (`SRS_KEY_MEMORY_CACHE`), which the service can
//! neither count before the first aggregate nor free: its memory is outside the
//! parameter budget (a few MB per proof count used, not the file's size: the keys
//! are read for the proofs aggregated). Evicting the id frees nothing.
//!
//! # Where the work runs, and cancellation
//!
//! A job's [`RunningProof::wait`] runs on the service's thread for that job, never
//! on the daemon's async runtime; filecoin-proofs aggregates with rayon's global
//! pool (seconds of CPU for hundreds of proofs). The engine is not involved, so
//! the job has no engine job ([`RunningProof::engine_job`] is `None`) and cannot
//! be interrupted: a job cancelled while it aggregates runs to its end, the
//! service discards the aggregate and reports the job cancelled, and its slot is
//! given back as for every job (a queued one is cancelled at once).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuzk_scheduler::PipelineEngine;
use cuzk_service::{
    KindProver, LoadedParams, PreparedProof, ProofFailure, ProofKind, ProofRequest, RequestError,
    RunningProof,
};

use crate::aggregate::{check_srs, srs_file, AggregateRequest, CheckedAggregate};
use crate::{check_aggregate_request, prover_id_from_miner, ALL_POREP};

/// The aggregation kind of the service.
pub struct AggregateService {
    /// filecoin-proofs' parameter cache: the SRS and the verifying keys.
    parameter_dir: PathBuf,
}

impl AggregateService {
    /// Aggregates with the SRS and verifying keys in `parameter_dir`, which must be
    /// filecoin-proofs' parameter cache (`FIL_PROOFS_PARAMETER_CACHE`; checked when
    /// a job runs).
    pub fn new(parameter_dir: PathBuf) -> Self {
        Self { parameter_dir }
    }

    /// The kind's one circuit id: the SRS file's official name.
    pub fn circuit_id() -> String {
        srs_file()
    }
}

fn malformed(why: impl std::fmt::Display) -> RequestError {
    RequestError::Malformed {
        kind: ProofKind::SealAggregate,
        why: why.to_string(),
    }
}

/// Checks the request's wire fields against the aggregate request they carry:
/// each may be left 0, or must agree.
fn check_fields(r: &ProofRequest, checked: &CheckedAggregate) -> Result<(), RequestError> {
    let kind = &checked.kind;
    if r.registered_proof != 0 {
        let number = ALL_POREP.iter().position(|p| *p == kind.registered);
        if number.map(|n| n as u64) != Some(r.registered_proof) {
            return Err(malformed(format!(
                "registered_proof {} contradicts the aggregate request's {} (Go's number {}); give 0 or that number",
                r.registered_proof,
                kind.name,
                number.map_or_else(|| "none".into(), |n| n.to_string())
            )));
        }
    }
    let size = u64::from(kind.config.sector_size);
    if r.sector_size != 0 && r.sector_size != size {
        return Err(malformed(format!(
            "sector_size {} contradicts the aggregate request's {} ({size} bytes)",
            r.sector_size, kind.name
        )));
    }
    if r.miner_id != 0 && prover_id_from_miner(r.miner_id) != checked.prover_id {
        return Err(malformed(format!(
            "miner_id {} is not the aggregate request's prover",
            r.miner_id
        )));
    }
    Ok(())
}

impl KindProver for AggregateService {
    fn kind(&self) -> ProofKind {
        ProofKind::SealAggregate
    }

    /// Parses and checks the request (one registered proof, a count SnarkPack and
    /// FIP-0092 take, proofs of the right length, a valid prover id): JSON of at
    /// most the kind's size limit and no proof verified, so it is cheap. Whether the
    /// proofs verify is the job's work.
    fn prepare(&self, r: ProofRequest) -> Result<Box<dyn PreparedProof>, RequestError> {
        let parsed = AggregateRequest::parse(&r.vanilla_proof).map_err(malformed)?;
        let checked = check_aggregate_request(parsed).map_err(malformed)?;
        check_fields(&r, &checked)?;
        Ok(Box::new(Prepared {
            circuit_id: Self::circuit_id(),
            checked,
            parameter_dir: self.parameter_dir.clone(),
        }))
    }

    fn knows_circuit(&self, circuit_id: &str) -> bool {
        circuit_id == srs_file()
    }

    fn load_params(&self, circuit_id: &str) -> Result<LoadedParams, String> {
        if !self.knows_circuit(circuit_id) {
            return Err(format!(
                "`{circuit_id}` is not the aggregation kind's circuit id (`{}`)",
                srs_file()
            ));
        }
        let path = check_srs(&self.parameter_dir).map_err(|e| e.to_string())?;
        Ok(LoadedParams {
            // filecoin-proofs reads and caches the SRS itself: see the module's doc.
            value: Arc::new(path),
            bytes: 0,
            timing_only: false,
        })
    }
}

struct Prepared {
    circuit_id: String,
    checked: CheckedAggregate,
    parameter_dir: PathBuf,
}

impl PreparedProof for Prepared {
    fn circuit_id(&self) -> &str {
        &self.circuit_id
    }

    fn start(
        self: Box<Self>,
        _engine: &PipelineEngine,
        _params: &LoadedParams,
    ) -> Result<Box<dyn RunningProof>, String> {
        Ok(Box::new(Running {
            checked: self.checked,
            parameter_dir: self.parameter_dir,
        }))
    }
}

struct Running {
    checked: CheckedAggregate,
    parameter_dir: PathBuf,
}

impl RunningProof for Running {
    fn engine_job(&self) -> Option<u64> {
        None
    }

    fn wait(self: Box<Self>) -> Result<Vec<u8>, ProofFailure> {
        aggregate_on(&self.checked, &self.parameter_dir)
    }
}

/// The aggregate, verified, or why not (a proof that does not verify is named by
/// its index and sector; a missing SRS, a parameter directory filecoin-proofs does
/// not read, an aggregate that does not verify: each its own message).
fn aggregate_on(checked: &CheckedAggregate, dir: &Path) -> Result<Vec<u8>, ProofFailure> {
    crate::aggregate::aggregate(checked, dir).map_err(|e| ProofFailure::Failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::AggregateSector;
    use crate::RegisteredSealProof;

    const POREP: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;

    /// Two 2 KiB interactive sectors (one partition each) with proofs of the right
    /// length: what `prepare` checks, no proof verified.
    fn json(proof: RegisteredSealProof) -> Vec<u8> {
        let sector = |n: u64| AggregateSector {
            registered_proof: proof,
            sector: n,
            comm_r: [1; 32],
            comm_d: [2; 32],
            ticket: [3; 32],
            seed: [4; 32],
            proof: vec![5; 192],
        };
        serde_json::to_vec_pretty(&AggregateRequest {
            prover_id: "1000".into(),
            aggregation: crate::RegisteredAggregationProof::SnarkPackV2,
            sectors: vec![sector(1), sector(2)],
        })
        .unwrap()
    }

    fn request(bytes: Vec<u8>) -> ProofRequest {
        ProofRequest {
            vanilla_proof: bytes,
            ..ProofRequest::default()
        }
    }

    fn refused(s: &AggregateService, r: ProofRequest) -> String {
        match s.prepare(r) {
            Err(RequestError::Malformed {
                kind: ProofKind::SealAggregate,
                why,
            }) => why,
            Err(e) => panic!("not malformed: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn prepare_checks_the_request_and_its_wire_fields() {
        let s = AggregateService::new(PathBuf::from("/nonexistent"));
        let ok = s.prepare(request(json(POREP))).unwrap();
        assert_eq!(ok.circuit_id(), "v28-fil-inner-product-v1.srs");
        // The wire fields may name the request's proof (Go's 5), size and miner.
        let agree = ProofRequest {
            registered_proof: 5,
            sector_size: 2048,
            miner_id: 1000,
            ..request(json(POREP))
        };
        assert!(s.prepare(agree).is_ok());

        for (r, needle) in [
            (request(b"not json".to_vec()), "aggregate request"),
            (request(json(POREP)[..40].to_vec()), "aggregate request"),
            (request(Vec::new()), "aggregate request"),
            (
                ProofRequest {
                    registered_proof: 15,
                    ..request(json(POREP))
                },
                "registered_proof 15 contradicts",
            ),
            (
                ProofRequest {
                    registered_proof: u64::MAX,
                    ..request(json(POREP))
                },
                "contradicts",
            ),
            (
                ProofRequest {
                    sector_size: 1 << 35,
                    ..request(json(POREP))
                },
                "sector_size",
            ),
            (
                ProofRequest {
                    miner_id: 1001,
                    ..request(json(POREP))
                },
                "miner_id 1001",
            ),
        ] {
            let why = refused(&s, r);
            assert!(why.contains(needle), "{needle}: {why}");
        }
        // Check failures of the request itself (a proof of the wrong length).
        let mut bad: AggregateRequest = serde_json::from_slice(&json(POREP)).unwrap();
        bad.sectors[1].proof.truncate(7);
        let why = refused(&s, request(serde_json::to_vec(&bad).unwrap()));
        assert!(why.contains("7"), "{why}");
    }

    #[test]
    fn its_one_circuit_is_the_srs_which_loads_as_zero_bytes_when_present() {
        let dir = tempfile::tempdir().unwrap();
        let s = AggregateService::new(dir.path().to_path_buf());
        assert!(s.knows_circuit("v28-fil-inner-product-v1.srs"));
        assert!(!s.knows_circuit("porep-2k"));
        let e = s.load_params("porep-2k").err().unwrap();
        assert!(e.contains("not the aggregation kind's circuit id"), "{e}");
        let e = s.load_params(&srs_file()).err().unwrap();
        assert!(e.contains("v28-fil-inner-product-v1.srs"), "{e}");
        std::fs::write(dir.path().join(srs_file()), b"srs").unwrap();
        let p = s.load_params(&srs_file()).unwrap();
        assert_eq!((p.bytes, p.timing_only), (0, false));
    }
}
