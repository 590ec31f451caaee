//! Shape-only C1 outputs: vanilla proofs of the exact shape of a registered proof
//! (partitions, challenges, layers, parents, Merkle path lengths and arities), filled
//! with random values. Their circuits have the real structure and synthesis cost
//! (every SHA-256 and Poseidon gadget runs on real-sized inputs), so they time a
//! 32 GiB or 64 GiB C2 on any machine; their proofs do NOT verify (the values are not
//! a sealed sector's). The output says so in its `ticket`, which is
//! [`SHAPE_ONLY_TICKET`].
//!
//! The vanilla proofs are built with storage-proofs' own constructors
//! (`MerkleProof::from_parts`, `ColumnProof::new`, `LabelingProof::new`,
//! `EncodingProof::new`) and turned into filecoin-proofs-api's tagged
//! `VanillaSealProof` by its own serde.

use blstrs::Scalar;
use ff::Field;
use filecoin_hashers::Hasher;
use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::parameters::public_params;
use filecoin_proofs::types::VanillaSealProof;
use filecoin_proofs::PoRepConfig;
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::RegisteredSealProof;
use generic_array::typenum::Unsigned;
use rand::RngCore;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_porep::stacked::{
    ColumnProof, EncodingProof, LabelingProof, Proof, ReplicaColumnProof,
};

use crate::FilecoinError;

/// The ticket of every shape-only C1 output: ASCII "cuzk shape-only, not a sector",
/// zero-padded. A C1 output with this ticket is not a sealed sector's.
pub const SHAPE_ONLY_TICKET: [u8; 32] = *b"cuzk shape-only, not a sector\0\0\0";

/// Whether a C1 output is a shape-only one (its proofs will not verify).
pub fn is_shape_only(c1: &SealCommitPhase1Output) -> bool {
    c1.ticket == SHAPE_ONLY_TICKET
}

/// A C1 output of `proof`'s exact shape with random values (deterministic in `seed`).
pub fn shape_only_c1(
    proof: RegisteredSealProof,
    seed: u64,
) -> Result<SealCommitPhase1Output, FilecoinError> {
    let kind = crate::PorepKind::new(proof)?;
    let size = u64::from(kind.config.sector_size);
    let name = kind.name.clone();
    let vanilla = with_sector_shape!(
        size,
        name.clone(),
        vanilla_json,
        &kind.config,
        seed,
        name.clone()
    )?;
    // filecoin-proofs-api tags vanilla proofs with the V1 name of the sector size,
    // whatever the API version (`StackedDrg32GiBV1`).
    let tag = format!("StackedDrg{}V1", size_name(size));
    let tagged = serde_json::json!({ tag: vanilla });
    let vanilla_proofs = serde_json::from_value(tagged).map_err(|source| FilecoinError::Json {
        what: "C1 output",
        source,
    })?;
    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0x5eed);
    let fr_bytes = |rng: &mut ChaCha20Rng| -> [u8; 32] {
        let mut b = [0u8; 32];
        b.copy_from_slice(&ff::PrimeField::to_repr(&Scalar::random(&mut *rng)));
        b
    };
    let mut seed_bytes = [0u8; 32];
    rng.fill_bytes(&mut seed_bytes);
    Ok(SealCommitPhase1Output {
        registered_proof: proof,
        vanilla_proofs,
        comm_r: fr_bytes(&mut rng),
        comm_d: fr_bytes(&mut rng),
        replica_id: Scalar::random(&mut rng).into(),
        seed: seed_bytes,
        ticket: SHAPE_ONLY_TICKET,
    })
}

fn size_name(size: u64) -> String {
    match size {
        s if s >= 1 << 30 => format!("{}GiB", s >> 30),
        s if s >= 1 << 20 => format!("{}MiB", s >> 20),
        s => format!("{}KiB", s >> 10),
    }
}

/// A random path of `levels` elements of `arity − 1` siblings each.
pub(crate) fn path<D: From<Scalar>>(
    rng: &mut ChaCha20Rng,
    arity: usize,
    levels: usize,
) -> Vec<(Vec<D>, usize)> {
    (0..levels)
        .map(|_| {
            let siblings = (0..arity - 1)
                .map(|_| Scalar::random(&mut *rng).into())
                .collect();
            (siblings, (rng.next_u32() as usize) % arity)
        })
        .collect()
}

/// A random Merkle proof of tree type `Tree` over `nodes` leaves, under `root`.
pub(crate) fn tree_proof<Tree: MerkleTreeTrait>(
    rng: &mut ChaCha20Rng,
    nodes: usize,
    root: <Tree::Hasher as Hasher>::Domain,
) -> MerkleProof<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity> {
    let leaf = Scalar::random(&mut *rng).into();
    tree_proof_with_leaf::<Tree>(rng, nodes, leaf, root)
}

/// [`tree_proof`] of a given leaf.
pub(crate) fn tree_proof_with_leaf<Tree: MerkleTreeTrait>(
    rng: &mut ChaCha20Rng,
    nodes: usize,
    leaf: <Tree::Hasher as Hasher>::Domain,
    root: <Tree::Hasher as Hasher>::Domain,
) -> MerkleProof<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity> {
    let (a, s, t) = (
        Tree::Arity::to_usize(),
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    );
    let base_leaves = nodes / s.max(1) / t.max(1);
    let levels = base_leaves.trailing_zeros() as usize / a.trailing_zeros() as usize;
    let mut p = path(rng, a, levels);
    if s > 0 {
        p.extend(path(rng, s, 1));
    }
    if t > 0 {
        p.extend(path(rng, t, 1));
    }
    MerkleProof::from_parts(leaf, root, p)
}

fn vanilla_json<Tree: 'static + MerkleTreeTrait>(
    cfg: &PoRepConfig,
    seed: u64,
    name: String,
) -> Result<serde_json::Value, FilecoinError> {
    let pp = public_params::<Tree>(cfg).map_err(|e| FilecoinError::Circuit {
        proof: name.clone(),
        message: format!("{e:#}"),
    })?;
    let nodes = pp.graph.size();
    let layers = pp.num_layers;
    let drg = pp.graph.base_graph().degree();
    let exp = pp.graph.expansion_degree();
    let challenges = pp.challenges.num_challenges_per_partition();
    let partitions = usize::from(cfg.partitions);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let fr = |rng: &mut ChaCha20Rng| Scalar::random(&mut *rng);

    let mut all: Vec<Vec<VanillaSealProof<Tree>>> = Vec::with_capacity(partitions);
    for _ in 0..partitions {
        // Every challenge of a partition opens the same trees R and C.
        let root_r = fr(&mut rng).into();
        let root_c = fr(&mut rng).into();
        let root_d = fr(&mut rng).into();
        let mut part = Vec::with_capacity(challenges);
        for _ in 0..challenges {
            let node = rng.next_u64() % nodes as u64;
            let column = |rng: &mut ChaCha20Rng| {
                let rows = (0..layers).map(|_| fr(&mut *rng).into()).collect();
                ColumnProof::new(
                    (rng.next_u64() % nodes as u64) as u32,
                    rows,
                    tree_proof::<Tree>(rng, nodes, root_c),
                )
            };
            let comm_d_path = path(&mut rng, 2, nodes.trailing_zeros() as usize);
            let comm_d_proofs =
                MerkleProof::<DefaultPieceHasher, generic_array::typenum::U2>::from_parts(
                    fr(&mut rng).into(),
                    root_d,
                    comm_d_path,
                );
            let c_x = column(&mut rng);
            let drg_parents = (0..drg).map(|_| column(&mut rng)).collect();
            let exp_parents = (0..exp).map(|_| column(&mut rng)).collect();
            let labeling_proofs = (1..=layers as u32)
                .map(|l| LabelingProof::new(l, node, Vec::new()))
                .collect();
            part.push(Proof::<Tree, DefaultPieceHasher> {
                comm_d_proofs,
                comm_r_last_proof: tree_proof::<Tree>(&mut rng, nodes, root_r),
                replica_column_proofs: ReplicaColumnProof {
                    c_x,
                    drg_parents,
                    exp_parents,
                },
                labeling_proofs,
                encoding_proof: EncodingProof::new(layers as u32, node, Vec::new()),
            });
        }
        all.push(part);
    }
    serde_json::to_value(&all).map_err(|source| FilecoinError::Json {
        what: "C1 output",
        source,
    })
}
