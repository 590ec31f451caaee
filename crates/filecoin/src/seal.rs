//! Test inputs made here: a random sector sealed on the CPU through filecoin-proofs
//! (pre-commit 1 and 2, commit 1), giving a real C1 output.

use std::fs::{File, OpenOptions};
use std::io::Cursor;
use std::path::Path;

use filecoin_proofs_api::seal::{
    add_piece, seal_commit_phase1, seal_pre_commit_phase1, seal_pre_commit_phase2,
    SealCommitPhase1Output,
};
use filecoin_proofs_api::{
    ApiFeature, PaddedBytesAmount, RegisteredSealProof, SectorId, UnpaddedBytesAmount,
};
use rand::RngCore;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

use crate::{proof_name, FilecoinError};

/// A sealed test sector's C1 output and what proving it needs.
#[derive(Debug, Clone)]
pub struct SealedSector {
    pub c1: SealCommitPhase1Output,
    /// The C1 output as JSON (serde of filecoin-proofs-api's type).
    pub c1_json: Vec<u8>,
    pub prover_id: [u8; 32],
    pub sector: u64,
}

/// Seals a sector of random data (deterministic in `seed`) with filecoin-proofs on
/// the CPU, in `work_dir` (staged and sealed files, the cache of layers and trees),
/// and runs commit phase 1. 2 KiB takes well under a second, 8 MiB seconds.
pub fn seal_test_sector(
    proof: RegisteredSealProof,
    prover_id: [u8; 32],
    sector: u64,
    seed: u64,
    work_dir: &Path,
) -> Result<SealedSector, FilecoinError> {
    let kind = crate::PorepKind::new(proof)?;
    if kind.config.feature_enabled(ApiFeature::SyntheticPoRep) {
        return Err(FilecoinError::Unsupported {
            proof: proof_name(proof),
            reason:
                "test sectors are sealed for interactive (V1, V1_1) and non-interactive PoRep only",
        });
    }
    let fail = |step: &'static str| {
        move |e: anyhow::Error| FilecoinError::Seal {
            step,
            message: format!("{e:#}"),
        }
    };
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(u64::from(proof.sector_size())));
    let mut data = vec![0u8; unpadded.0 as usize];
    rng.fill_bytes(&mut data);
    let mut ticket = [0u8; 32];
    let mut challenge_seed = [0u8; 32];
    rng.fill_bytes(&mut ticket);
    rng.fill_bytes(&mut challenge_seed);

    let cache = work_dir.join("cache");
    std::fs::create_dir_all(&cache).map_err(|e| FilecoinError::io("creating", &cache, e))?;
    let staged = work_dir.join("staged");
    let sealed = work_dir.join("sealed");
    let mut staged_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staged)
        .map_err(|e| FilecoinError::io("creating", &staged, e))?;
    File::create(&sealed).map_err(|e| FilecoinError::io("creating", &sealed, e))?;

    let (piece, _) = add_piece(proof, Cursor::new(&data), &mut staged_file, unpadded, &[])
        .map_err(fail("add_piece"))?;
    drop(staged_file);
    let pieces = [piece];
    let sector_id = SectorId::from(sector);
    let p1 = seal_pre_commit_phase1(
        proof, &cache, &staged, &sealed, prover_id, sector_id, ticket, &pieces,
    )
    .map_err(fail("pre-commit phase 1"))?;
    let p2 = seal_pre_commit_phase2(p1, &cache, &sealed).map_err(fail("pre-commit phase 2"))?;
    let c1 = seal_commit_phase1(
        &cache,
        &sealed,
        prover_id,
        sector_id,
        ticket,
        challenge_seed,
        p2,
        &pieces,
    )
    .map_err(fail("commit phase 1"))?;
    let c1_json = serde_json::to_vec(&c1).map_err(|source| FilecoinError::Json {
        what: "C1 output",
        source,
    })?;
    Ok(SealedSector {
        c1,
        c1_json,
        prover_id,
        sector,
    })
}
