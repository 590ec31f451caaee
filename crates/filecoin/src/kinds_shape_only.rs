//! Shape-only inputs of the other kinds: vanilla proofs of a SnapDeals update or a
//! PoSt of the exact shape of a registered proof (any size, 32 GiB included), filled
//! with random values, for timing where no sector of that size can be sealed. Their
//! circuits are the real ones with real-sized inputs; their proofs do NOT verify.
//! Each is marked by [`SHAPE_ONLY_TICKET`] where a real input has chain data: a
//! PoSt's randomness, an update's `comm_r_new`.
//!
//! The proofs are storage-proofs' own types (`MerkleProof::from_parts`,
//! `PartitionProof`, `FallbackPoStSectorProof`) serialised by filecoin-proofs'
//! bincode. Two things make them provable: an update's new leaves are computed from
//! the old ones as the update circuit checks them (`leaf_r_new = leaf_r_old +
//! leaf_d_new · rho`, with storage-proofs-update's own `Challenges`, `phi` and
//! `rho`), and a shape-only PoSt skips filecoin-proofs' vanilla check
//! (`single_partition_vanilla_proofs` would refuse random proofs), taking its
//! sectors as they come, padded as that function pads them.

use blstrs::Scalar;
use ff::Field;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::types::SectorUpdateConfig;
use filecoin_proofs::FallbackPoStSectorProof;
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredUpdateProof};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_core::sector::SectorId;
use storage_proofs_post::fallback::{self, SectorProof};
use storage_proofs_update::constants::{TreeDArity, TreeDHasher, TreeRDomain, TreeRHasher};
use storage_proofs_update::vanilla::{phi, rho};
use storage_proofs_update::{ChallengeProof, Challenges, PartitionProof, PublicParams};

use crate::shape_only::{path, tree_proof, tree_proof_with_leaf};
use crate::{FilecoinError, PostInputs, PostKind, SnapRequest, UpdateKind, SHAPE_ONLY_TICKET};

/// Whether a PoSt's randomness or an update's `comm_r_new` marks a shape-only input.
pub fn is_shape_only_marker(bytes: &[u8]) -> bool {
    bytes == SHAPE_ONLY_TICKET
}

fn fr_bytes(rng: &mut ChaCha20Rng) -> [u8; 32] {
    let mut b = [0u8; 32];
    b.copy_from_slice(&ff::PrimeField::to_repr(&Scalar::random(&mut *rng)));
    b
}

fn bincode_err(name: &str) -> impl Fn(bincode::Error) -> FilecoinError + '_ {
    move |e| FilecoinError::Circuit {
        proof: name.to_string(),
        message: format!("encoding a shape-only vanilla proof: {e}"),
    }
}

/// A shape-only SnapDeals request of `proof` (deterministic in `seed`).
pub fn shape_only_snap(
    proof: RegisteredUpdateProof,
    seed: u64,
) -> Result<SnapRequest, FilecoinError> {
    let kind = UpdateKind::new(proof)?;
    let size = u64::from(kind.config.sector_size);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let comm_r_old = fr_bytes(&mut rng);
    let comm_d_new = fr_bytes(&mut rng);
    let comm_r_new = SHAPE_ONLY_TICKET;
    let h = SectorUpdateConfig::from_porep_config(&kind.config).h;
    let vanilla = with_sector_shape!(
        size,
        kind.name.clone(),
        snap_vanilla,
        &kind,
        h,
        (&comm_r_old, &comm_d_new, &comm_r_new),
        &mut rng
    )?;
    Ok(SnapRequest {
        proof,
        comm_r_old: comm_r_old.to_vec(),
        comm_r_new: comm_r_new.to_vec(),
        comm_d_new: comm_d_new.to_vec(),
        vanilla_proofs: vanilla,
        blinding: crate::Blinding::Random,
    })
}

fn snap_vanilla<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    kind: &UpdateKind,
    h: usize,
    comms: (&[u8; 32], &[u8; 32], &[u8; 32]),
    rng: &mut ChaCha20Rng,
) -> Result<Vec<Vec<u8>>, FilecoinError> {
    let fail = |e: anyhow::Error| FilecoinError::Circuit {
        proof: kind.name.clone(),
        message: format!("{e:#}"),
    };
    let pp = PublicParams::from_sector_size(u64::from(kind.config.sector_size));
    let nodes = pp.sector_nodes;
    let comm_r_old = TreeRDomain::try_from_bytes(comms.0).map_err(fail)?;
    let comm_d_new = <TreeDHasher as Hasher>::Domain::try_from_bytes(comms.1).map_err(fail)?;
    let comm_r_new = TreeRDomain::try_from_bytes(comms.2).map_err(fail)?;
    let phi = phi(&comm_d_new, &comm_r_old);
    let high_shift = pp.challenge_bit_len - h;
    let fr = |rng: &mut ChaCha20Rng| Scalar::random(&mut *rng);
    let mut out = Vec::with_capacity(pp.partition_count);
    for k in 0..pp.partition_count {
        let root_r_old: TreeRDomain = fr(rng).into();
        let root_r_new: TreeRDomain = fr(rng).into();
        // A partition's challenges lie in one subtree of the data tree: their
        // paths share its top `partition_bit_len` levels, which the circuit checks
        // (storage-proofs-update asserts it at synthesis). Random below it.
        let top = path(rng, 2, pp.partition_bit_len);
        let challenge_proofs = Challenges::new(nodes, comm_r_new, k)
            .map(|c| {
                let old = fr(rng);
                let d_new = fr(rng);
                let new = old + d_new * rho(&phi, c >> high_shift);
                let proof_r_old = tree_proof_with_leaf::<Tree>(rng, nodes, old.into(), root_r_old);
                let proof_r_new = tree_proof_with_leaf::<Tree>(rng, nodes, new.into(), root_r_new);
                let mut path_d = path(rng, 2, pp.challenge_bit_len - pp.partition_bit_len);
                path_d.extend(top.iter().cloned());
                let proof_d_new = MerkleProof::<TreeDHasher, TreeDArity>::from_parts(
                    d_new.into(),
                    comm_d_new,
                    path_d,
                );
                ChallengeProof::<Tree> {
                    proof_r_old,
                    proof_d_new,
                    proof_r_new,
                }
            })
            .collect();
        let partition = PartitionProof::<Tree> {
            comm_c: fr(rng).into(),
            apex_leafs: (0..pp.apex_leaf_count).map(|_| fr(rng).into()).collect(),
            challenge_proofs,
        };
        out.push(bincode::serialize(&partition).map_err(bincode_err(&kind.name))?);
    }
    Ok(out)
}

/// A shape-only PoSt of `proof`: `sectors` sector proofs for a WindowPoSt partition
/// (at most the partition's sectors), one for a WinningPoSt (deterministic in `seed`).
pub fn shape_only_post(
    proof: RegisteredPoStProof,
    miner: u64,
    sectors: usize,
    seed: u64,
) -> Result<PostInputs, FilecoinError> {
    let kind = PostKind::new(proof)?;
    let count = if kind.is_winning() {
        kind.sectors_per_partition()
    } else {
        sectors.clamp(1, kind.sectors_per_partition())
    };
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let size = u64::from(kind.config.sector_size);
    let vanilla = with_sector_shape!(
        size,
        kind.name.clone(),
        post_vanilla,
        &kind,
        count,
        &mut rng
    )?;
    Ok(PostInputs {
        proof,
        randomness: SHAPE_ONLY_TICKET,
        prover_id: crate::prover_id_from_miner(miner),
        sectors: (1..=count as u64).collect(),
        vanilla_proofs: vanilla,
    })
}

fn post_vanilla<Tree: 'static + MerkleTreeTrait>(
    kind: &PostKind,
    count: usize,
    rng: &mut ChaCha20Rng,
) -> Result<Vec<Vec<u8>>, FilecoinError> {
    let nodes = (u64::from(kind.config.sector_size) / 32) as usize;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let root: <Tree::Hasher as Hasher>::Domain = Scalar::random(&mut *rng).into();
        let inclusion_proofs = (0..kind.config.challenge_count)
            .map(|_| tree_proof::<Tree>(rng, nodes, root))
            .collect();
        let sector = SectorProof::<Tree::Proof> {
            inclusion_proofs,
            comm_c: Scalar::random(&mut *rng).into(),
            comm_r_last: root,
        };
        let p = FallbackPoStSectorProof::<Tree> {
            sector_id: SectorId::from(1 + i as u64),
            comm_r: Scalar::random(&mut *rng).into(),
            vanilla_proof: fallback::Proof {
                sectors: vec![sector],
            },
        };
        out.push(bincode::serialize(&p).map_err(bincode_err(&kind.name))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Partition;
    use crate::snap::{with_snap_partitions, SnapPartitionsUser, UpdatePublic};

    /// Synthesizes the first partition's witness (the circuit's own checks run, and
    /// storage-proofs-update asserts a partition's shape as it synthesizes).
    struct FirstWitness;

    impl SnapPartitionsUser for FirstWitness {
        type Out = (usize, Result<usize, String>);
        fn with<C: crate::snap::KindCircuit>(self, mut partitions: Vec<Partition<C>>) -> Self::Out {
            let n = partitions.len();
            let first = partitions.swap_remove(0).circuit;
            let w = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                cuzk_synth::synthesize_witness(first)
            }));
            let aux = match w {
                Ok(Ok(w)) => Ok(w.aux.len()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("the circuit panicked at synthesis".into()),
            };
            (n, aux)
        }
    }

    /// A shape-only update of a size with several partitions (8 MiB: 4) gives
    /// circuits that synthesize: each partition's challenges share the top of the
    /// data-tree path, as storage-proofs-update asserts (the 32 GiB shape panicked
    /// there on the H200 before the paths shared it).
    #[test]
    fn a_shape_only_update_of_several_partitions_synthesizes() {
        let proof = RegisteredUpdateProof::StackedDrg8MiBV1;
        let request = shape_only_snap(proof, 7).unwrap();
        let kind = UpdateKind::new(proof).unwrap();
        let public = UpdatePublic::new(&request).unwrap();
        let (n, aux) =
            with_snap_partitions(&kind, &public, &request.vanilla_proofs, FirstWitness).unwrap();
        assert_eq!(n, 4);
        assert!(aux.unwrap() > 0);
    }
}
