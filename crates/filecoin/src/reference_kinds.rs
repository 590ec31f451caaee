//! The references the other kinds' proofs are compared with: bellperson's prover on
//! the circuits filecoin-proofs builds (byte-identity at fixed `r, s`), and
//! filecoin-proofs-api's own `generate_empty_sector_update_proof_with_vanilla`,
//! `generate_single_window_post_with_vanilla` and `generate_winning_post_with_vanilla`
//! (the peers in benchmarks).

use std::path::Path;

use blstrs::Scalar;
use filecoin_proofs_api::{PartitionProofBytes, RegisteredPoStProof};

use crate::post::post_partitions_for;
use crate::shape::Partition;
use crate::snap::{
    with_snap_partitions, KindCircuit, SnapPartitionsUser, UpdateKind, UpdatePublic,
};
use crate::{FilecoinError, PostKind, SnapRequest, WindowPostRequest, WinningPostRequest};

struct Prove<'a> {
    params: &'a cuzk_params::Parameters<blstrs::Bls12>,
    blinding: &'a [(Scalar, Scalar)],
}

impl SnapPartitionsUser for Prove<'_> {
    type Out = Result<Vec<u8>, String>;
    fn with<C: KindCircuit>(self, partitions: Vec<Partition<C>>) -> Self::Out {
        if partitions.len() != self.blinding.len() {
            return Err(format!(
                "{} blinding pairs for {} partitions",
                self.blinding.len(),
                partitions.len()
            ));
        }
        let mut out = Vec::new();
        for (p, &(r, s)) in partitions.into_iter().zip(self.blinding) {
            let proof = bellperson::groth16::create_proof(p.circuit, self.params, r, s)
                .map_err(|e| e.to_string())?;
            proof.write(&mut out).map_err(|e| e.to_string())?;
        }
        Ok(out)
    }
}

fn read(path: &Path) -> Result<cuzk_params::Parameters<blstrs::Bls12>, FilecoinError> {
    cuzk_params::read_params(path, cuzk_params::Validation::None).map_err(|source| {
        FilecoinError::ParamsRead {
            path: path.to_path_buf(),
            source,
        }
    })
}

fn circuit_err(proof: &str) -> impl Fn(String) -> FilecoinError + '_ {
    move |message| FilecoinError::Circuit {
        proof: proof.to_string(),
        message,
    }
}

/// Each SnapDeals partition proven by `bellperson::groth16::create_proof` at the
/// given `(r, s)`: partitions × 192 bytes.
pub fn snap_with_bellperson(
    request: &SnapRequest,
    params_path: &Path,
    blinding: &[(Scalar, Scalar)],
) -> Result<Vec<u8>, FilecoinError> {
    let kind = UpdateKind::new(request.proof)?;
    let public = UpdatePublic::new(request)?;
    let params = read(params_path)?;
    let user = Prove {
        params: &params,
        blinding,
    };
    with_snap_partitions(&kind, &public, &request.vanilla_proofs, user)?
        .map_err(circuit_err(&kind.name))
}

/// A WindowPoSt partition proven by bellperson at `(r, s)`: 192 bytes.
pub fn window_post_with_bellperson(
    request: &WindowPostRequest,
    params_path: &Path,
    blinding: (Scalar, Scalar),
) -> Result<Vec<u8>, FilecoinError> {
    post_with_bellperson(
        request.proof,
        &request.randomness,
        request.prover_id,
        Some(request.partition_index),
        &request.vanilla_proofs,
        params_path,
        blinding,
    )
}

/// A WinningPoSt proven by bellperson at `(r, s)`: 192 bytes.
pub fn winning_post_with_bellperson(
    request: &WinningPostRequest,
    params_path: &Path,
    blinding: (Scalar, Scalar),
) -> Result<Vec<u8>, FilecoinError> {
    post_with_bellperson(
        request.proof,
        &request.randomness,
        request.prover_id,
        None,
        &request.vanilla_proofs,
        params_path,
        blinding,
    )
}

fn post_with_bellperson(
    proof: RegisteredPoStProof,
    randomness: &[u8],
    prover_id: [u8; 32],
    partition_index: Option<usize>,
    vanilla: &[Vec<u8>],
    params_path: &Path,
    blinding: (Scalar, Scalar),
) -> Result<Vec<u8>, FilecoinError> {
    let kind = PostKind::new(proof)?;
    let params = read(params_path)?;
    let blinding = [blinding];
    let user = Prove {
        params: &params,
        blinding: &blinding,
    };
    post_partitions_for(&kind, randomness, prover_id, partition_index, vanilla, user)?
        .map_err(circuit_err(&kind.name))
}

fn api_err(proof: String) -> impl Fn(anyhow::Error) -> FilecoinError {
    move |e| FilecoinError::Circuit {
        proof: proof.clone(),
        message: format!("{e:#}"),
    }
}

fn bytes32(what: &'static str, b: &[u8]) -> Result<[u8; 32], FilecoinError> {
    crate::kind::bytes32(what, b)
}

/// filecoin-proofs-api's `generate_empty_sector_update_proof_with_vanilla` (CPU):
/// what a provider runs today. Reads its parameters from `FIL_PROOFS_PARAMETER_CACHE`.
pub fn filecoin_proofs_snap(request: &SnapRequest) -> Result<Vec<u8>, FilecoinError> {
    let name = crate::update_proof_name(request.proof);
    filecoin_proofs_api::update::generate_empty_sector_update_proof_with_vanilla(
        request.proof,
        request
            .vanilla_proofs
            .iter()
            .map(|v| PartitionProofBytes(v.clone()))
            .collect(),
        bytes32("comm_r_old", &request.comm_r_old)?,
        bytes32("comm_r_new", &request.comm_r_new)?,
        bytes32("comm_d_new", &request.comm_d_new)?,
    )
    .map(|p| p.0)
    .map_err(api_err(name))
}

/// filecoin-proofs-api's `generate_single_window_post_with_vanilla` (CPU).
pub fn filecoin_proofs_window_post(request: &WindowPostRequest) -> Result<Vec<u8>, FilecoinError> {
    let name = crate::post_proof_name(request.proof);
    filecoin_proofs_api::post::generate_single_window_post_with_vanilla(
        request.proof,
        &bytes32("randomness", &request.randomness)?,
        request.prover_id,
        &request.vanilla_proofs,
        request.partition_index,
    )
    .map(|p| p.0)
    .map_err(api_err(name))
}

/// filecoin-proofs-api's `generate_winning_post_with_vanilla` (CPU).
pub fn filecoin_proofs_winning_post(
    request: &WinningPostRequest,
) -> Result<Vec<u8>, FilecoinError> {
    let name = crate::post_proof_name(request.proof);
    filecoin_proofs_api::post::generate_winning_post_with_vanilla(
        request.proof,
        &bytes32("randomness", &request.randomness)?,
        request.prover_id,
        &request.vanilla_proofs,
    )
    .map(|mut v| v.pop().map(|(_, p)| p).unwrap_or_default())
    .map_err(api_err(name))
}
