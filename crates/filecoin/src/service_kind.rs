//! PoRep C2 as a proof kind of the proving service (`cuzk serve`): Curio's
//! `POREP_SEAL_COMMIT` requests (the C1 envelope, the miner id, the sector number)
//! checked and turned into [`FilecoinProver`] jobs, parameter sets named by Curio's
//! circuit ids (`porep-2k`, `porep-32g`, ...) loaded and released through the
//! prover's cache. The service knows no Filecoin format; this is where they meet.

use std::sync::Arc;

use cuzk_scheduler::{JobError, PipelineEngine};
use cuzk_service::{
    KindProver, LoadedParams, PreparedProof, ProofFailure, ProofKind, ProofRequest, RequestError,
    RunningProof,
};
use filecoin_proofs_api::RegisteredSealProof;

use crate::{
    parse_c1, proof_name, prover_id_from_miner, Blinding, FilecoinError, FilecoinProver, KindJob,
    PorepJob, PorepKind, PorepRequest,
};

/// Curio's circuit ids for the current interactive PoRep (`V1_1`), with the small
/// sizes for tests. Other registered proofs are named by their filecoin-proofs name
/// (`StackedDrg2KiBV1`).
const CIRCUIT_IDS: [(&str, RegisteredSealProof); 5] = [
    ("porep-2k", RegisteredSealProof::StackedDrg2KiBV1_1),
    ("porep-8m", RegisteredSealProof::StackedDrg8MiBV1_1),
    ("porep-512m", RegisteredSealProof::StackedDrg512MiBV1_1),
    ("porep-32g", RegisteredSealProof::StackedDrg32GiBV1_1),
    ("porep-64g", RegisteredSealProof::StackedDrg64GiBV1_1),
];

/// The circuit id of `proof`.
pub fn circuit_id(proof: RegisteredSealProof) -> String {
    CIRCUIT_IDS
        .iter()
        .find(|(_, p)| *p == proof)
        .map(|(id, _)| (*id).to_owned())
        .unwrap_or_else(|| proof_name(proof))
}

/// The registered proof a circuit id names.
pub fn registered_proof(circuit_id: &str) -> Option<RegisteredSealProof> {
    CIRCUIT_IDS
        .iter()
        .find(|(id, _)| *id == circuit_id)
        .map(|(_, p)| *p)
        .or_else(|| {
            crate::ALL_POREP
                .iter()
                .copied()
                .find(|p| proof_name(*p) == circuit_id)
        })
}

/// The PoRep kind of the service, over a shared [`FilecoinProver`].
pub struct PorepService {
    prover: Arc<FilecoinProver>,
}

impl PorepService {
    pub fn new(prover: Arc<FilecoinProver>) -> Self {
        Self { prover }
    }
}

fn malformed(e: FilecoinError) -> RequestError {
    RequestError::Malformed {
        kind: ProofKind::PorepSealCommit,
        why: e.to_string(),
    }
}

impl KindProver for PorepService {
    fn kind(&self) -> ProofKind {
        ProofKind::PorepSealCommit
    }

    fn prepare(&self, request: ProofRequest) -> Result<Box<dyn PreparedProof>, RequestError> {
        let input = parse_c1(&request.vanilla_proof).map_err(malformed)?;
        let kind = PorepKind::new(input.c1.registered_proof).map_err(malformed)?;
        let given = (request.sector_number != 0).then_some(request.sector_number);
        input.sector(given).map_err(malformed)?;
        Ok(Box::new(Prepared {
            circuit_id: circuit_id(kind.registered),
            request: PorepRequest {
                input,
                prover_id: prover_id_from_miner(request.miner_id),
                sector: given,
                blinding: Blinding::Random,
            },
            priority: engine_priority(request.priority),
            prover: self.prover.clone(),
        }))
    }

    fn knows_circuit(&self, circuit_id: &str) -> bool {
        registered_proof(circuit_id).is_some_and(|p| PorepKind::new(p).is_ok())
    }

    fn load_params(&self, circuit_id: &str) -> Result<LoadedParams, String> {
        let proof = registered_proof(circuit_id)
            .ok_or_else(|| format!("`{circuit_id}` is not a PoRep circuit id"))?;
        let kind = PorepKind::new(proof).map_err(|e| e.to_string())?;
        let params = self.prover.params(&kind).map_err(|e| e.to_string())?;
        Ok(LoadedParams {
            bytes: params.bytes,
            value: params,
        })
    }

    fn release_params(&self, circuit_id: &str) {
        if let Some(proof) = registered_proof(circuit_id) {
            if let Err(e) = self.prover.evict(proof) {
                tracing::warn!(circuit_id, %e, "releasing PoRep parameters failed");
            }
        }
    }
}

struct Prepared {
    circuit_id: String,
    request: PorepRequest,
    priority: crate::Priority,
    prover: Arc<FilecoinProver>,
}

impl PreparedProof for Prepared {
    fn circuit_id(&self) -> &str {
        &self.circuit_id
    }

    fn start(
        self: Box<Self>,
        engine: &PipelineEngine,
        _params: &LoadedParams,
    ) -> Result<Box<dyn RunningProof>, String> {
        // The prover takes the parameters from its own cache, which the service's
        // hold keeps loaded for as long as this job runs.
        let job = self
            .prover
            .submit_porep(engine, self.request, self.priority)
            .map_err(|e| e.to_string())?;
        Ok(Box::new(Running { job }))
    }
}

/// A submitted Filecoin job as the service waits for it: a PoRep sector or one
/// proof of another kind.
pub(crate) trait SubmittedJob: Send + 'static {
    fn id(&self) -> u64;
    fn wait(self) -> Result<Vec<u8>, FilecoinError>;
}

impl SubmittedJob for PorepJob {
    fn id(&self) -> u64 {
        PorepJob::id(self)
    }
    fn wait(self) -> Result<Vec<u8>, FilecoinError> {
        PorepJob::wait(self)
    }
}

impl SubmittedJob for KindJob {
    fn id(&self) -> u64 {
        KindJob::id(self)
    }
    fn wait(self) -> Result<Vec<u8>, FilecoinError> {
        KindJob::wait(self)
    }
}

/// Any submitted Filecoin job behind the service's `RunningProof`: a cancelled
/// engine job is `Cancelled`, every other error `Failed` with its message.
pub(crate) struct Running<J> {
    pub job: J,
}

impl<J: SubmittedJob> RunningProof for Running<J> {
    fn engine_job(&self) -> u64 {
        self.job.id()
    }

    fn wait(self: Box<Self>) -> Result<Vec<u8>, ProofFailure> {
        match self.job.wait() {
            Ok(proof) => Ok(proof),
            Err(FilecoinError::Job(JobError::Cancelled)) => Err(ProofFailure::Cancelled),
            Err(e) => Err(ProofFailure::Failed(e.to_string())),
        }
    }
}

/// The service's priority (the wire's, with the kind's default already applied when
/// the request left it unset) as the engine's queue order.
pub(crate) fn engine_priority(p: Option<cuzk_service::Priority>) -> crate::Priority {
    use cuzk_service::Priority as S;
    match p {
        Some(S::Low) => crate::Priority::Low,
        Some(S::High) => crate::Priority::High,
        Some(S::Critical) => crate::Priority::Critical,
        Some(S::Normal) | None => crate::Priority::Normal,
    }
}
