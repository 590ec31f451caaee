//! PoRep C2 as a proof kind of the proving service (`cuzk serve`): Curio's
//! `POREP_SEAL_COMMIT` requests (the C1 envelope, the miner id, the sector number)
//! checked and turned into [`FilecoinProver`] jobs, parameter sets named by Curio's
//! circuit ids (`porep-2k`, `porep-32g`, ...) loaded and released through the
//! prover's cache. The service knows no Filecoin format; this is where they meet.
//!
//! Non-interactive PoRep is a kind of its own (`NI_POREP_SEAL_COMMIT`, cuzk's
//! 1000; [`PorepService::non_interactive`]): the same request fields and the same
//! path, but only NI registered proofs, whose result is a SnarkPack aggregate of
//! 13 to 126 partition proofs instead of 10 × 192 bytes and whose C1 envelope is
//! ~12.6 times larger (the kind's own limits). Each kind refuses the other's
//! registered proofs, naming the kind to use.
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

/// The service kind that proves a C1 output or envelope: `NI_POREP_SEAL_COMMIT`
/// for a non-interactive registered proof, else `POREP_SEAL_COMMIT`. For entries
/// that take a C1 file of either (`cuzk c2`, `cuzk client prove`, `cuzk queue
/// submit porep`); the wire names the kind, and each kind refuses the other's.
/// Parses the whole input (the kind's check parses it again).
pub fn porep_kind_of(c1: &[u8]) -> Result<ProofKind, FilecoinError> {
    let input = parse_c1(c1)?;
    Ok(
        if PorepKind::new(input.c1.registered_proof)?.is_non_interactive() {
            ProofKind::NiPorepSealCommit
        } else {
            ProofKind::PorepSealCommit
        },
    )
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
        // Aggregation has no Groth16 circuit to make timing-only.
        let known: Vec<_> = ServiceProvers::new(self.real.clone())
            .kinds()
            .into_iter()
            .filter(|k| k.kind() != ProofKind::SealAggregate)
            .collect();
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

    /// The Filecoin kinds over these provers: PoRep, SnapDeals, WindowPoSt,
    /// WinningPoSt, and cuzk's NI-PoRep and SnarkPack aggregation.
    pub fn kinds(&self) -> Vec<Arc<dyn KindProver>> {
        let mut k: Vec<Arc<dyn KindProver>> =
            vec![Arc::new(PorepService::with_provers(self.clone()))];
        k.extend(crate::service_kinds::KindService::all_with(self));
        k.push(Arc::new(PorepService::non_interactive(self.clone())));
        k.push(Arc::new(crate::service_aggregate::AggregateService::new(
            self.real.config().parameter_dir.clone(),
        )));
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

/// The PoRep kind of the service (interactive, or non-interactive), over shared
/// [`ServiceProvers`].
pub struct PorepService {
    provers: ServiceProvers,
    /// Serves `NI_POREP_SEAL_COMMIT` (NI registered proofs only) rather than
    /// `POREP_SEAL_COMMIT` (interactive ones only).
    non_interactive: bool,
}

impl PorepService {
    /// Every interactive PoRep circuit on `prover` (real parameters, proofs
    /// verified).
    pub fn new(prover: Arc<FilecoinProver>) -> Self {
        Self::with_provers(ServiceProvers::new(prover))
    }

    /// Interactive PoRep over `provers` (some circuit ids may be timing-only).
    pub fn with_provers(provers: ServiceProvers) -> Self {
        Self {
            provers,
            non_interactive: false,
        }
    }

    /// Non-interactive PoRep (`NI_POREP_SEAL_COMMIT`) over `provers`.
    pub fn non_interactive(provers: ServiceProvers) -> Self {
        Self {
            provers,
            non_interactive: true,
        }
    }

    fn service_kind(&self) -> ProofKind {
        if self.non_interactive {
            ProofKind::NiPorepSealCommit
        } else {
            ProofKind::PorepSealCommit
        }
    }

    fn malformed(&self, why: impl std::fmt::Display) -> RequestError {
        RequestError::Malformed {
            kind: self.service_kind(),
            why: why.to_string(),
        }
    }

    /// Refuses a registered proof of the other PoRep kind, naming the kind to use.
    fn check_interactivity(&self, kind: &PorepKind) -> Result<(), RequestError> {
        match (kind.is_non_interactive(), self.non_interactive) {
            (true, false) => Err(self.malformed(format!(
                "{} is a non-interactive PoRep proof: submit it as NI_POREP_SEAL_COMMIT (cuzk's proof kind 1000), whose result is a SnarkPack aggregate of its {} partition proofs, with limits of its own",
                kind.name,
                kind.partitions()
            ))),
            (false, true) => Err(self.malformed(format!(
                "{} is an interactive PoRep proof: submit it as POREP_SEAL_COMMIT (proof kind 1); NI_POREP_SEAL_COMMIT (1000) takes only StackedDrg*V1_2_Feat_NonInteractivePoRep",
                kind.name
            ))),
            _ => Ok(()),
        }
    }
}

impl KindProver for PorepService {
    fn kind(&self) -> ProofKind {
        self.service_kind()
    }

    fn prepare(&self, request: ProofRequest) -> Result<Box<dyn PreparedProof>, RequestError> {
        let malformed = |e: FilecoinError| self.malformed(e);
        let input = parse_c1(&request.vanilla_proof).map_err(malformed)?;
        let kind = PorepKind::new(input.c1.registered_proof).map_err(malformed)?;
        self.check_interactivity(&kind)?;
        let given = (request.sector_number != 0).then_some(request.sector_number);
        input.sector(given).map_err(malformed)?;
        let circuit_id = circuit_id(kind.registered);
        check_not_shape_only(&self.provers, &circuit_id, is_shape_only(&input.c1))
            .map_err(|why| self.malformed(why))?;
        Ok(Box::new(Prepared {
            prover: self.provers.for_circuit(&circuit_id).clone(),
            circuit_id,
            request: PorepRequest {
                input,
                prover_id: prover_id_from_miner(request.miner_id),
                sector: given,
                blinding: Blinding::Random,
            },
            priority: job_priority(request.priority, self.service_kind()),
        }))
    }

    fn knows_circuit(&self, circuit_id: &str) -> bool {
        registered_proof(circuit_id).is_some_and(|p| {
            PorepKind::new(p).is_ok_and(|k| k.is_non_interactive() == self.non_interactive)
        })
    }

    fn load_params(&self, circuit_id: &str) -> Result<LoadedParams, String> {
        let proof = registered_proof(circuit_id)
            .ok_or_else(|| format!("`{circuit_id}` is not a PoRep circuit id"))?;
        let kind = PorepKind::new(proof).map_err(|e| e.to_string())?;
        self.check_interactivity(&kind).map_err(|e| e.to_string())?;
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
    fn engine_job(&self) -> Option<u64> {
        Some(self.job.id())
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
                vec!["winning-2k".to_string()],
                vec![],
                vec![]
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
        // The SRS is the aggregation kind's circuit id, but no Groth16 circuit.
        let srs = crate::aggregate::srs_file();
        assert!(provers().with_timing_only(&[srs], 7).is_err());
        // An NI-PoRep circuit is the NI kind's (timing-only as before).
        let ni = "StackedDrg2KiBV1_2_Feat_NonInteractivePoRep".to_string();
        let p = provers()
            .with_timing_only(std::slice::from_ref(&ni), 7)
            .unwrap();
        let kinds = p.kinds();
        let of = |k: ProofKind| {
            kinds
                .iter()
                .find(|x| x.kind() == k)
                .unwrap()
                .timing_only_circuits()
        };
        assert_eq!(of(ProofKind::NiPorepSealCommit), [ni]);
        assert!(of(ProofKind::PorepSealCommit).is_empty());
        // Each PoRep kind knows only its own circuits.
        let porep = &kinds[0];
        let ni_kind = kinds
            .iter()
            .find(|k| k.kind() == ProofKind::NiPorepSealCommit)
            .unwrap();
        assert!(porep.knows_circuit("porep-2k") && !ni_kind.knows_circuit("porep-2k"));
        assert!(ni_kind.knows_circuit("StackedDrg32GiBV1_2_Feat_NonInteractivePoRep"));
        assert!(!porep.knows_circuit("StackedDrg32GiBV1_2_Feat_NonInteractivePoRep"));
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
