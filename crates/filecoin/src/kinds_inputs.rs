//! Test inputs of the other kinds, made here through filecoin-proofs on the CPU: a
//! sector sealed as for PoRep ([`crate::seal_test_sector`]), then its PoSt vanilla
//! proofs (`generate_fallback_sector_challenges`, `generate_single_vanilla_proof`)
//! or, after an empty-sector update of it with random data
//! (`empty_sector_update_encode_into`), its update's vanilla partition proofs
//! (`generate_partition_proofs`). Real proofs: they verify. 2 KiB takes about a
//! second; sizes of 32 GiB cannot be sealed here.

use std::fs::{File, OpenOptions};
use std::io::Cursor;
use std::path::Path;

use filecoin_proofs_api::post::{
    generate_fallback_sector_challenges, generate_single_vanilla_proof,
    generate_winning_post_sector_challenge,
};
use filecoin_proofs_api::seal::add_piece;
use filecoin_proofs_api::update::{empty_sector_update_encode_into, generate_partition_proofs};
use filecoin_proofs_api::{
    PaddedBytesAmount, PrivateReplicaInfo, RegisteredPoStProof, RegisteredSealProof,
    RegisteredUpdateProof, SectorId, UnpaddedBytesAmount,
};
use rand::RngCore;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

use crate::{prover_id_from_miner, FilecoinError, SnapRequest, ALL_POREP};

/// A PoSt's inputs: what [`crate::WindowPostRequest`] and
/// [`crate::WinningPostRequest`] take.
#[derive(Clone, Debug)]
pub struct PostInputs {
    pub proof: RegisteredPoStProof,
    pub randomness: [u8; 32],
    pub prover_id: [u8; 32],
    /// The sectors proven, in the order of `vanilla_proofs`.
    pub sectors: Vec<u64>,
    /// bincode `FallbackPoStSectorProof`s, as `generate_single_vanilla_proof` returns.
    pub vanilla_proofs: Vec<Vec<u8>>,
}

fn seal_err(step: &'static str) -> impl Fn(anyhow::Error) -> FilecoinError {
    move |e| FilecoinError::Seal {
        step,
        message: format!("{e:#}"),
    }
}

/// The interactive PoRep (V1_1) of a sector size: what test sectors are sealed with.
fn seal_proof_of_size(size: u64) -> RegisteredSealProof {
    ALL_POREP[5..10]
        .iter()
        .copied()
        .find(|p| u64::from(p.sector_size()) == size)
        .unwrap_or(RegisteredSealProof::StackedDrg2KiBV1_1)
}

/// 32 random bytes that are a field element (as chain randomness is used).
fn randomness(rng: &mut ChaCha20Rng) -> [u8; 32] {
    let mut r = [0u8; 32];
    rng.fill_bytes(&mut r);
    r[31] &= 0x3f;
    r
}

/// Seals `sectors` sectors of `proof`'s size in `work_dir` and makes the vanilla
/// proofs of a WindowPoSt partition (or, for a Winning type, of the one challenged
/// sector) for random randomness (deterministic in `seed`).
pub fn post_test_inputs(
    proof: RegisteredPoStProof,
    miner: u64,
    sectors: usize,
    seed: u64,
    work_dir: &Path,
) -> Result<PostInputs, FilecoinError> {
    let kind = crate::PostKind::new(proof)?;
    let size = u64::from(kind.config.sector_size);
    let seal = seal_proof_of_size(size);
    let prover_id = prover_id_from_miner(miner);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let randomness = randomness(&mut rng);
    let count = if kind.is_winning() {
        1
    } else {
        sectors.clamp(1, kind.sectors_per_partition())
    };
    let mut sealed = Vec::with_capacity(count);
    for i in 0..count {
        let number = 1 + i as u64;
        let dir = work_dir.join(format!("sector-{number}"));
        let s = crate::seal_test_sector(seal, prover_id, number, seed + number, &dir)?;
        sealed.push((number, s.c1.comm_r, dir));
    }
    let chosen: Vec<usize> = if kind.is_winning() {
        let picks = generate_winning_post_sector_challenge(
            proof,
            &randomness,
            sealed.len() as u64,
            prover_id,
        )
        .map_err(seal_err("generate_winning_post_sector_challenge"))?;
        picks.iter().map(|&i| i as usize).collect()
    } else {
        (0..sealed.len()).collect()
    };
    let ids: Vec<SectorId> = chosen
        .iter()
        .map(|&i| SectorId::from(sealed[i].0))
        .collect();
    let challenges = generate_fallback_sector_challenges(proof, &randomness, &ids, prover_id)
        .map_err(seal_err("generate_fallback_sector_challenges"))?;
    let mut vanilla_proofs = Vec::with_capacity(ids.len());
    for (&i, id) in chosen.iter().zip(&ids) {
        let (_, comm_r, dir) = &sealed[i];
        let replica =
            PrivateReplicaInfo::new(proof, *comm_r, dir.join("cache"), dir.join("sealed"));
        let ch = challenges.get(id).ok_or_else(|| FilecoinError::Seal {
            step: "generate_fallback_sector_challenges",
            message: format!("no challenges for sector {}", u64::from(*id)),
        })?;
        vanilla_proofs.push(
            generate_single_vanilla_proof(proof, *id, &replica, ch)
                .map_err(seal_err("generate_single_vanilla_proof"))?,
        );
    }
    Ok(PostInputs {
        proof,
        randomness,
        prover_id,
        sectors: ids.iter().map(|&id| u64::from(id)).collect(),
        vanilla_proofs,
    })
}

/// Seals a sector of `proof`'s size in `work_dir`, updates it with random data
/// (deterministic in `seed`) and makes the update's vanilla partition proofs.
pub fn snap_test_inputs(
    proof: RegisteredUpdateProof,
    miner: u64,
    seed: u64,
    work_dir: &Path,
) -> Result<SnapRequest, FilecoinError> {
    let size = u64::from(proof.sector_size());
    let seal = seal_proof_of_size(size);
    let old = work_dir.join("old");
    let sealed = crate::seal_test_sector(seal, prover_id_from_miner(miner), 1, seed, &old)?;

    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0x5a0d);
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(size));
    let mut data = vec![0u8; unpadded.0 as usize];
    rng.fill_bytes(&mut data);
    let new = work_dir.join("new");
    let new_cache = new.join("cache");
    std::fs::create_dir_all(&new_cache)
        .map_err(|e| FilecoinError::io("creating", &new_cache, e))?;
    let staged = new.join("staged");
    let replica = new.join("replica");
    let mut staged_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staged)
        .map_err(|e| FilecoinError::io("creating", &staged, e))?;
    // The new replica is written in place: it must be the sector key's size.
    File::create(&replica)
        .and_then(|f| f.set_len(size))
        .map_err(|e| FilecoinError::io("creating", &replica, e))?;
    let (piece, _) = add_piece(seal, Cursor::new(&data), &mut staged_file, unpadded, &[])
        .map_err(seal_err("add_piece"))?;
    drop(staged_file);
    let (key, key_cache) = (old.join("sealed"), old.join("cache"));
    let encoded = empty_sector_update_encode_into(
        proof,
        &replica,
        &new_cache,
        &key,
        &key_cache,
        &staged,
        &[piece],
    )
    .map_err(seal_err("empty_sector_update_encode_into"))?;
    let comm_r_old = sealed.c1.comm_r;
    let vanilla = generate_partition_proofs(
        proof,
        comm_r_old,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &key,
        &key_cache,
        &replica,
        &new_cache,
    )
    .map_err(seal_err("generate_partition_proofs"))?;
    Ok(SnapRequest {
        proof,
        comm_r_old: comm_r_old.to_vec(),
        comm_r_new: encoded.comm_r_new.to_vec(),
        comm_d_new: encoded.comm_d_new.to_vec(),
        vanilla_proofs: vanilla.into_iter().map(|p| p.0).collect(),
        blinding: crate::Blinding::Random,
    })
}
