//! SnapDeals, WindowPoSt and WinningPoSt as proof kinds of the proving service
//! (`cuzk serve`), beside [`crate::service_kind::PorepService`] and over the same
//! [`FilecoinProver`] (so each circuit is compiled once and its parameters loaded
//! once per process, whichever kind asks first). Requests are Curio's
//! (`SNAP_DEALS_UPDATE`, `WINDOW_POST_PARTITION`, `WINNING_POST`: the registered proof
//! as Filecoin's Go enum numbers it, the vanilla proofs as bincode, the randomness,
//! the commitments); they are checked in full at submission (lengths, proof type,
//! partition index, every vanilla proof decoded and its shape checked), so a
//! malformed request is refused before it is queued. Parameter sets are named by
//! Curio's circuit ids (`snap-32g`, `wpost-32g`, `winning-32g`, and `-2k`, `-8m`,
//! `-512m`, `-64g` for the other sizes).

use std::sync::Arc;

use cuzk_scheduler::PipelineEngine;
use cuzk_service::{
    KindProver, LoadedParams, PreparedProof, ProofKind, ProofRequest, RequestError, RunningProof,
};
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredUpdateProof};

use crate::service_kind::{check_not_shape_only, Running, ServiceProvers};
use crate::{
    check_snap_request, check_window_post_request, check_winning_post_request,
    is_shape_only_marker, post_proof_name, prover_id_from_miner, update_proof_name, Blinding,
    FilecoinError, FilecoinProver, PostKind, SnapRequest, UpdateKind, WindowPostRequest,
    WinningPostRequest, ALL_POST, ALL_UPDATE,
};

/// The size suffixes of Curio's circuit ids, in the registered proofs' size order.
const SIZES: [&str; 5] = ["2k", "8m", "512m", "32g", "64g"];

/// Which of the three kinds a [`KindService`] serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Snap,
    Window,
    Winning,
}

/// A proof type of one of the three kinds.
#[derive(Clone, Debug)]
enum AnyKind {
    Update(UpdateKind),
    Post(PostKind),
}

impl AnyKind {
    fn evict(&self, prover: &FilecoinProver) -> bool {
        match self {
            AnyKind::Update(k) => prover.evict_kind(k),
            AnyKind::Post(k) => prover.evict_kind(k),
        }
    }

    fn load(&self, prover: &FilecoinProver) -> Result<Arc<crate::LoadedParams>, FilecoinError> {
        match self {
            AnyKind::Update(k) => prover.params(k),
            AnyKind::Post(k) => prover.params(k),
        }
    }
}

/// Every registered proof of a kind with its circuit id: Curio's name for the
/// current type of each size (update V1, Window V1_2 = Go's V1_1, Winning V1),
/// filecoin-proofs' name for the others (Window V1).
fn proofs_of(which: Which) -> Vec<(String, AnyKind)> {
    let mut out = Vec::new();
    match which {
        Which::Snap => {
            for (p, size) in ALL_UPDATE.iter().zip(SIZES) {
                if let Ok(k) = UpdateKind::new(*p) {
                    out.push((format!("snap-{size}"), AnyKind::Update(k)));
                }
            }
        }
        Which::Window | Which::Winning => {
            let (prefix, range) = if which == Which::Winning {
                ("winning", 0..5)
            } else {
                ("wpost", 10..15)
            };
            for (p, size) in ALL_POST[range].iter().zip(SIZES) {
                if let Ok(k) = PostKind::new(*p) {
                    out.push((format!("{prefix}-{size}"), AnyKind::Post(k)));
                }
            }
            if which == Which::Window {
                for p in &ALL_POST[5..10] {
                    if let Ok(k) = PostKind::new(*p) {
                        out.push((post_proof_name(*p), AnyKind::Post(k)));
                    }
                }
            }
        }
    }
    out
}

/// The circuit id of a SnapDeals update proof type: the name of the parameter
/// set its requests use (`snap-32g`), as the service's check names it.
pub fn update_circuit_id(proof: RegisteredUpdateProof) -> String {
    proofs_of(Which::Snap)
        .into_iter()
        .find(|(_, k)| matches!(k, AnyKind::Update(k) if k.registered == proof))
        .map(|(id, _)| id)
        .unwrap_or_else(|| update_proof_name(proof))
}

/// The circuit id of a PoSt proof type (`wpost-32g`, `winning-32g`, or
/// filecoin-proofs' name of an older Window type), as the service's check names it.
pub fn post_circuit_id(proof: RegisteredPoStProof) -> String {
    [Which::Window, Which::Winning]
        .into_iter()
        .flat_map(proofs_of)
        .find(|(_, k)| matches!(k, AnyKind::Post(k) if k.registered == proof))
        .map(|(id, _)| id)
        .unwrap_or_else(|| post_proof_name(proof))
}

/// The service kind of SnapDeals, WindowPoSt or WinningPoSt.
pub struct KindService {
    which: Which,
    provers: ServiceProvers,
}

impl KindService {
    /// SnapDeals updates (`SNAP_DEALS_UPDATE`).
    pub fn snap(prover: Arc<FilecoinProver>) -> Self {
        Self {
            which: Which::Snap,
            provers: ServiceProvers::new(prover),
        }
    }

    /// WindowPoSt partitions (`WINDOW_POST_PARTITION`).
    pub fn window_post(prover: Arc<FilecoinProver>) -> Self {
        Self {
            which: Which::Window,
            provers: ServiceProvers::new(prover),
        }
    }

    /// WinningPoSt (`WINNING_POST`).
    pub fn winning_post(prover: Arc<FilecoinProver>) -> Self {
        Self {
            which: Which::Winning,
            provers: ServiceProvers::new(prover),
        }
    }

    /// All three over one prover.
    pub fn all(prover: &Arc<FilecoinProver>) -> Vec<Arc<dyn KindProver>> {
        Self::all_with(&ServiceProvers::new(prover.clone()))
    }

    /// All three over `provers` (some circuit ids may be timing-only).
    pub fn all_with(provers: &ServiceProvers) -> Vec<Arc<dyn KindProver>> {
        [Which::Snap, Which::Window, Which::Winning]
            .into_iter()
            .map(|which| {
                Arc::new(Self {
                    which,
                    provers: provers.clone(),
                }) as Arc<dyn KindProver>
            })
            .collect()
    }

    fn service_kind(&self) -> ProofKind {
        match self.which {
            Which::Snap => ProofKind::SnapDealsUpdate,
            Which::Window => ProofKind::WindowPostPartition,
            Which::Winning => ProofKind::WinningPost,
        }
    }

    fn malformed(&self, why: impl std::fmt::Display) -> RequestError {
        RequestError::Malformed {
            kind: self.service_kind(),
            why: why.to_string(),
        }
    }

    fn proofs(&self) -> Vec<(String, AnyKind)> {
        proofs_of(self.which)
    }

    fn circuit(&self, circuit_id: &str) -> Option<AnyKind> {
        self.proofs()
            .into_iter()
            .find(|(id, _)| id == circuit_id)
            .map(|(_, k)| k)
    }

    /// The registered proof of a request: the Go enum's number.
    fn registered(&self, r: &ProofRequest) -> Result<AnyKind, RequestError> {
        let n = usize::try_from(r.registered_proof).unwrap_or(usize::MAX);
        let kind = match self.which {
            Which::Snap => {
                let p: RegisteredUpdateProof = *ALL_UPDATE.get(n).ok_or_else(|| {
                    self.malformed(format!(
                        "registered_proof {} is not a registered update proof (0-4)",
                        r.registered_proof
                    ))
                })?;
                AnyKind::Update(UpdateKind::new(p).map_err(|e| self.malformed(e))?)
            }
            Which::Window | Which::Winning => {
                let p: RegisteredPoStProof = *ALL_POST.get(n).ok_or_else(|| {
                    self.malformed(format!(
                        "registered_proof {} is not a registered PoSt proof (0-14)",
                        r.registered_proof
                    ))
                })?;
                let k = PostKind::new(p).map_err(|e| self.malformed(e))?;
                if k.is_winning() != (self.which == Which::Winning) {
                    return Err(self.malformed(format!(
                        "registered_proof {} ({}) is not a {} proof type (Go's numbers: 0-4 Winning, 5-14 Window)",
                        r.registered_proof,
                        k.name,
                        if self.which == Which::Winning { "WinningPoSt" } else { "WindowPoSt" }
                    )));
                }
                AnyKind::Post(k)
            }
        };
        let size = match &kind {
            AnyKind::Update(k) => u64::from(k.config.sector_size),
            AnyKind::Post(k) => u64::from(k.config.sector_size),
        };
        if r.sector_size != 0 && r.sector_size != size {
            return Err(self.malformed(format!(
                "sector_size {} contradicts registered_proof {} ({size} bytes)",
                r.sector_size, r.registered_proof
            )));
        }
        Ok(kind)
    }
}

/// A checked request of one of the three kinds.
enum Request {
    Snap(SnapRequest),
    Window(WindowPostRequest),
    Winning(WinningPostRequest),
}

impl KindProver for KindService {
    fn kind(&self) -> ProofKind {
        self.service_kind()
    }

    fn prepare(&self, r: ProofRequest) -> Result<Box<dyn PreparedProof>, RequestError> {
        let kind = self.registered(&r)?;
        let (request, circuit_id) = match (self.which, kind) {
            (Which::Snap, AnyKind::Update(k)) => {
                let request = SnapRequest {
                    proof: k.registered,
                    comm_r_old: r.comm_r_old,
                    comm_r_new: r.comm_r_new,
                    comm_d_new: r.comm_d_new,
                    vanilla_proofs: r.vanilla_proofs,
                    blinding: Blinding::Random,
                };
                check_snap_request(&request).map_err(|e| self.malformed(e))?;
                (Request::Snap(request), update_circuit_id(k.registered))
            }
            (Which::Window, AnyKind::Post(k)) => {
                let request = WindowPostRequest {
                    proof: k.registered,
                    randomness: r.randomness,
                    prover_id: prover_id_from_miner(r.miner_id),
                    partition_index: r.partition_index as usize,
                    vanilla_proofs: r.vanilla_proofs,
                    blinding: Blinding::Random,
                };
                check_window_post_request(&request).map_err(|e| self.malformed(e))?;
                (Request::Window(request), post_circuit_id(k.registered))
            }
            (Which::Winning, AnyKind::Post(k)) => {
                let request = WinningPostRequest {
                    proof: k.registered,
                    randomness: r.randomness,
                    prover_id: prover_id_from_miner(r.miner_id),
                    vanilla_proofs: r.vanilla_proofs,
                    blinding: Blinding::Random,
                };
                check_winning_post_request(&request).map_err(|e| self.malformed(e))?;
                (Request::Winning(request), post_circuit_id(k.registered))
            }
            _ => return Err(self.malformed("the registered proof is of another kind")),
        };
        let shape_only = match &request {
            Request::Snap(r) => is_shape_only_marker(&r.comm_r_new),
            Request::Window(r) => is_shape_only_marker(&r.randomness),
            Request::Winning(r) => is_shape_only_marker(&r.randomness),
        };
        check_not_shape_only(&self.provers, &circuit_id, shape_only)
            .map_err(|why| self.malformed(why))?;
        Ok(Box::new(Prepared {
            prover: self.provers.for_circuit(&circuit_id).clone(),
            circuit_id,
            request,
            priority: crate::service_kind::job_priority(r.priority, self.service_kind()),
        }))
    }

    fn knows_circuit(&self, circuit_id: &str) -> bool {
        self.circuit(circuit_id).is_some()
    }

    fn load_params(&self, circuit_id: &str) -> Result<LoadedParams, String> {
        let kind = self
            .circuit(circuit_id)
            .ok_or_else(|| format!("`{circuit_id}` is not a {} circuit id", self.kind()))?;
        let params = kind
            .load(self.provers.for_circuit(circuit_id))
            .map_err(|e| e.to_string())?;
        Ok(LoadedParams {
            bytes: params.bytes,
            timing_only: params.timing_only,
            value: params,
        })
    }

    fn release_params(&self, circuit_id: &str) {
        if let Some(kind) = self.circuit(circuit_id) {
            kind.evict(self.provers.for_circuit(circuit_id));
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
    request: Request,
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
        let job = match self.request {
            Request::Snap(r) => self.prover.submit_snap(engine, r, self.priority),
            Request::Window(r) => self.prover.submit_window_post(engine, r, self.priority),
            Request::Winning(r) => self.prover.submit_winning_post(engine, r, self.priority),
        }
        .map_err(|e| e.to_string())?;
        Ok(Box::new(Running { job }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids a command line names a request's circuit by are the ids the
    /// service's check gives it (Curio's names), and each is a circuit the kind knows.
    #[test]
    fn circuit_ids_of_proof_types_are_curio_s_and_known() {
        assert_eq!(
            update_circuit_id(RegisteredUpdateProof::StackedDrg32GiBV1),
            "snap-32g"
        );
        assert_eq!(
            post_circuit_id(RegisteredPoStProof::StackedDrgWindow2KiBV1_2),
            "wpost-2k"
        );
        assert_eq!(
            post_circuit_id(RegisteredPoStProof::StackedDrgWinning64GiBV1),
            "winning-64g"
        );
        // An older Window type keeps filecoin-proofs' name.
        let v1 = RegisteredPoStProof::StackedDrgWindow2KiBV1;
        assert_eq!(post_circuit_id(v1), post_proof_name(v1));
        let prover = Arc::new(FilecoinProver::new(crate::ProverConfig::default()));
        let kinds = KindService::all(&prover);
        for id in ["snap-32g", "wpost-2k", "winning-64g", &post_proof_name(v1)] {
            assert!(kinds.iter().any(|k| k.knows_circuit(id)), "{id}");
        }
    }
}
