//! PoRep C2 as a proof kind of the proving service (`cuzk serve`): Curio's
//! `POREP_SEAL_COMMIT` requests (the C1 envelope, the miner id, the sector number)
//! checked and turned into [`FilecoinProver`] jobs, parameter sets named by Curio's
//! circuit ids (`porep-2k`, `porep-32g`, ...) loaded and released through the
//! prover's cache. The service knows no Filecoin format; this is where they meet.
//!
//! # Timing-only circuits (benchmarks)
//!
//! [`ServiceProvers`] holds the real prover (parameter files; every proof verified
//! by filecoin-proofs before it is returned) and, only for circuit ids a benchmark
//! configured timing-only (`[daemon] timing_only_circuits`), a second prover with
//! its own caches whose parameters are random points made in memory: those
//! circuits need no parameter file, their proofs are returned unverified, and the
//! service marks every such result (`JobResult::timing_only`). A circuit id not
//! listed keeps the real path, even where it shares a parameter file with a listed
//! one (`StackedDrg32GiBV1` and `porep-32g`): the two provers share nothing. A
//! shape-only input (`cuzk c1 --shape-only`, random values) is refused for a real
//! circuit, since no proof of it can verify.

use std::collections::BTreeSet;
use std::sync::Arc;

use cuzk_scheduler::{JobError, PipelineEngine};
use cuzk_service::{
    KindProver, LoadedParams, PreparedProof, ProofFailure, ProofKind, ProofRequest, RequestError,
    RunningProof,
};
use filecoin_proofs_api::RegisteredSealProof;

use crate::{
    is_shape_only, parse_c1, proof_name, prover_id_from_miner, Blinding, FilecoinError,
    FilecoinProver, KindJob, PorepJob, PorepKind, PorepRequest,
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

/// The provers the Filecoin kinds of the service share: the real one, and the
/// timing-only one of the circuit ids configured so (none by default).
#[derive(Clone, Debug)]
pub struct ServiceProvers {
    real: Arc<FilecoinProver>,
    timing: Option<(Arc<FilecoinProver>, BTreeSet<String>)>,
}

impl ServiceProvers {
    /// Every circuit on `real` (parameter files, proofs verified).
    pub fn new(real: Arc<FilecoinProver>) -> Self {
        Self { real, timing: None }
    }

    /// Proves the circuit ids `ids` (Curio's: `porep-32g`, `winning-32g`, ...,
    /// or a registered proof's name) with timing-only parameters made from `seed`,
    /// on a prover of their own. Benchmarks only: their proofs do not verify and
    /// are returned unverified. An id that no Filecoin kind knows is an error.
    pub fn with_timing_only(mut self, ids: &[String], seed: u64) -> Result<Self, FilecoinError> {
        if ids.is_empty() {
            self.timing = None;
            return Ok(self);
        }
        let known: Vec<Arc<dyn KindProver>> = {
            let mut k: Vec<Arc<dyn KindProver>> =
                vec![Arc::new(PorepService::new(self.real.clone()))];
            k.extend(crate::service_kinds::KindService::all(&self.real));
            k
        };
        for id in ids {
            if !known.iter().any(|k| k.knows_circuit(id)) {
                return Err(FilecoinError::Unsupported {
                    proof: format!("timing-only circuit id `{id}`"),
                    reason: "no Filecoin kind knows it (Curio's ids: porep-32g, porep-64g, snap-32g, wpost-32g, winning-32g, ... with -2k, -8m, -512m for the small sizes; synthetic circuits have synthetic_timing_only)",
                });
            }
        }
        let config = crate::ProverConfig {
            verify: false,
            ..self.real.config().clone()
        };
        self.timing = Some((
            Arc::new(FilecoinProver::timing_only(config, seed)),
            ids.iter().cloned().collect(),
        ));
        Ok(self)
    }

    /// Whether `circuit_id` is proved with timing-only parameters.
    pub fn is_timing_only(&self, circuit_id: &str) -> bool {
        self.timing
            .as_ref()
            .is_some_and(|(_, ids)| ids.contains(circuit_id))
    }

    /// The prover of `circuit_id`.
    pub fn for_circuit(&self, circuit_id: &str) -> &Arc<FilecoinProver> {
        match &self.timing {
            Some((prover, ids)) if ids.contains(circuit_id) => prover,
            _ => &self.real,
        }
    }

    /// The timing-only circuit ids, sorted.
    pub fn timing_only_circuits(&self) -> Vec<String> {
        self.timing
            .as_ref()
            .map(|(_, ids)| ids.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The four Filecoin kinds over these provers: PoRep, SnapDeals, WindowPoSt,
    /// WinningPoSt.
    pub fn kinds(&self) -> Vec<Arc<dyn KindProver>> {
        let mut k: Vec<Arc<dyn KindProver>> =
            vec![Arc::new(PorepService::with_provers(self.clone()))];
        k.extend(crate::service_kinds::KindService::all_with(self));
        k
    }
}

/// Refuses a shape-only input (random values) for a circuit with real
/// parameters: no proof of it can verify, so the real path could only fail it.
pub(crate) fn check_not_shape_only(
    provers: &ServiceProvers,
    circuit_id: &str,
    shape_only: bool,
) -> Result<(), String> {
    if shape_only && !provers.is_timing_only(circuit_id) {
        return Err(format!(
            "the input is shape-only (random values, from `cuzk c1 --shape-only` or `inputs --shape-only`): no proof of it can verify, and `{circuit_id}` is proved with real parameters and verified. A benchmark proves it with timing-only parameters: `--timing-only` on the command line, or `{circuit_id}` in a daemon's [daemon] timing_only_circuits"
        ));
    }
    Ok(())
}

/// The PoRep kind of the service, over shared [`ServiceProvers`].
pub struct PorepService {
    provers: ServiceProvers,
}

impl PorepService {
    /// Every PoRep circuit on `prover` (real parameters, proofs verified).
    pub fn new(prover: Arc<FilecoinProver>) -> Self {
        Self::with_provers(ServiceProvers::new(prover))
    }

    /// Over `provers` (some circuit ids may be timing-only).
    pub fn with_provers(provers: ServiceProvers) -> Self {
        Self { provers }
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
        let circuit_id = circuit_id(kind.registered);
        check_not_shape_only(&self.provers, &circuit_id, is_shape_only(&input.c1)).map_err(
            |why| RequestError::Malformed {
                kind: ProofKind::PorepSealCommit,
                why,
            },
        )?;
        Ok(Box::new(Prepared {
            prover: self.provers.for_circuit(&circuit_id).clone(),
            circuit_id,
            request: PorepRequest {
                input,
                prover_id: prover_id_from_miner(request.miner_id),
                sector: given,
                blinding: Blinding::Random,
            },
            priority: job_priority(request.priority, ProofKind::PorepSealCommit),
        }))
    }

    fn knows_circuit(&self, circuit_id: &str) -> bool {
        registered_proof(circuit_id).is_some_and(|p| PorepKind::new(p).is_ok())
    }

    fn load_params(&self, circuit_id: &str) -> Result<LoadedParams, String> {
        let proof = registered_proof(circuit_id)
            .ok_or_else(|| format!("`{circuit_id}` is not a PoRep circuit id"))?;
        let kind = PorepKind::new(proof).map_err(|e| e.to_string())?;
        let params = self
            .provers
            .for_circuit(circuit_id)
            .params(&kind)
            .map_err(|e| e.to_string())?;
        Ok(LoadedParams {
            bytes: params.bytes,
            timing_only: params.timing_only,
            value: params,
        })
    }

    fn release_params(&self, circuit_id: &str) {
        if let Some(proof) = registered_proof(circuit_id) {
            if let Err(e) = self.provers.for_circuit(circuit_id).evict(proof) {
                tracing::warn!(circuit_id, %e, "releasing PoRep parameters failed");
            }
        }
    }

    fn timing_only_circuits(&self) -> Vec<String> {
        self.provers
            .timing_only_circuits()
            .into_iter()
            .filter(|id| self.knows_circuit(id))
            .collect()
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

/// The job's priority: the service sets it before `prepare` (the request's, or
/// the kind's default); a request prepared without the service gets `kind`'s
/// default too.
pub(crate) fn job_priority(
    p: Option<crate::Priority>,
    kind: cuzk_service::ProofKind,
) -> crate::Priority {
    p.unwrap_or(kind.default_priority())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provers() -> ServiceProvers {
        ServiceProvers::new(Arc::new(
            FilecoinProver::new(crate::ProverConfig::default()),
        ))
    }

    #[test]
    fn only_the_listed_circuit_ids_are_timing_only() {
        let p = provers()
            .with_timing_only(&["porep-2k".into(), "winning-2k".into()], 7)
            .unwrap();
        assert!(p.is_timing_only("porep-2k") && p.is_timing_only("winning-2k"));
        assert!(p.for_circuit("porep-2k").is_timing_only());
        // StackedDrg2KiBV1 has porep-2k's parameter file but is not listed: real.
        assert!(!p.is_timing_only("StackedDrg2KiBV1"));
        assert!(!p.for_circuit("StackedDrg2KiBV1").is_timing_only());
        assert!(!p.for_circuit("porep-32g").is_timing_only());
        assert_eq!(p.timing_only_circuits(), ["porep-2k", "winning-2k"]);
        // Each kind reports its own ids.
        let per_kind: Vec<Vec<String>> =
            p.kinds().iter().map(|k| k.timing_only_circuits()).collect();
        assert_eq!(
            per_kind,
            [
                vec!["porep-2k".to_string()],
                vec![],
                vec![],
                vec!["winning-2k".to_string()]
            ]
        );
        // Off by default.
        assert!(provers().timing_only_circuits().is_empty());
        assert!(!provers().for_circuit("porep-2k").is_timing_only());
    }

    #[test]
    fn an_unknown_id_is_refused_and_shape_only_input_needs_a_listed_circuit() {
        let err = provers()
            .with_timing_only(&["porep-3k".into()], 7)
            .unwrap_err()
            .to_string();
        assert!(err.contains("porep-3k"), "{err}");
        let p = provers().with_timing_only(&["porep-2k".into()], 7).unwrap();
        assert!(check_not_shape_only(&p, "porep-2k", true).is_ok());
        assert!(check_not_shape_only(&p, "porep-8m", false).is_ok());
        let why = check_not_shape_only(&p, "porep-8m", true).unwrap_err();
        assert!(
            why.contains("shape-only")
                && why.contains("timing_only_circuits")
                && why.contains("--timing-only"),
            "{why}"
        );
    }
}
