//! A PoRep challenge's witness, with its SHA-256 computed natively.
//!
//! What a partition's witness costs: each of its challenges re-derives the challenged
//! node's label on every layer (11 at 32 GiB), each label SHA-256 over 37 parents (20
//! compression blocks), and opens the data tree (30 levels of SHA-256 at 32 GiB):
//! ~90% of the partition's constraints are SHA-256, and most of its synthesis time
//! went to bellperson's gadget building linear combinations that the witness system
//! discards. [`ChallengeWitness`] synthesizes a one-challenge circuit in the order
//! filecoin-proofs' `StackedCircuit` does (its prefix, then storage-proofs'
//! `Proof::synthesize` for the challenge), calling the same public gadgets of
//! storage-proofs-core and bellperson for everything but the hashes: SHA-256's
//! witness comes from [`cuzk_synth::sha256::sha256_witness`] (the labels,
//! `create_label_circuit`, and the data tree's path, `PoRCircuit` with SHA-256), and
//! Poseidon's from [`crate::poseidon_witness`] (the columns, trees C and R; the
//! prefix keeps neptune's gadget, once a challenge).
//!
//! It is a witness and nothing more: the constraints of every proof come from the
//! shape compiled from filecoin-proofs' own circuit. Three checks keep it honest:
//! cuzk-synth compares every part's prefix with filecoin-proofs' prefix value for
//! value and the counts of variables and constraints with the compiled shape, and the
//! tests compare the whole witness with filecoin-proofs' circuit's on a real 2 KiB
//! sector and on the 32 GiB shape.

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::{multipack, num::AllocatedNum, uint32::UInt32};
use blstrs::Scalar;
use ff::PrimeField;
use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::types::VanillaSealProof;
use serde::de::DeserializeOwned;
use storage_proofs_core::gadgets::insertion::insert;
use storage_proofs_core::gadgets::{constraint, encode::encode, uint64::UInt64, variables::Root};
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::util::reverse_bit_numbering;

use storage_proofs_porep::stacked::{ColumnProof, TOTAL_PARENTS};

use crate::porep_circuit::Prefix;
use crate::poseidon_witness::{is_poseidon, por, poseidon, siblings, RawPath};

/// One challenge of a partition, synthesized (for its witness only) after the prefix.
pub(crate) struct ChallengeWitness<Tree: 'static + MerkleTreeTrait> {
    pub prefix: Prefix<Tree>,
    pub proof: VanillaSealProof<Tree>,
}

impl<Tree: 'static + MerkleTreeTrait> Clone for ChallengeWitness<Tree> {
    fn clone(&self) -> Self {
        Self {
            prefix: self.prefix.clone(),
            proof: self.proof.clone(),
        }
    }
}

/// The prefix's variables that a challenge reads.
struct Allocated {
    replica_id_bits: Vec<Boolean>,
    comm_d: AllocatedNum<Scalar>,
    comm_r_last: AllocatedNum<Scalar>,
    comm_c: AllocatedNum<Scalar>,
}

fn missing(what: &str) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("PoRep challenge witness: {what}"),
    ))
}

/// A private field of a vanilla proof, read through its serde form (filecoin-proofs
/// serializes these types; their fields are not public).
fn field<T: serde::Serialize, F: DeserializeOwned>(
    value: &T,
    name: &str,
) -> Result<F, SynthesisError> {
    let mut json = serde_json::to_value(value).map_err(|e| missing(&e.to_string()))?;
    let inner = json
        .get_mut(name)
        .map(serde_json::Value::take)
        .ok_or_else(|| missing(&format!("no field {name}")))?;
    serde_json::from_value(inner).map_err(|e| missing(&format!("field {name}: {e}")))
}

/// `StackedCircuit::synthesize` before its challenges.
fn prefix<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    p: &Prefix<Tree>,
) -> Result<Allocated, SynthesisError> {
    let replica_id =
        AllocatedNum::alloc(cs.namespace(|| "replica_id"), || Ok(p.replica_id.into()))?;
    replica_id.inputize(cs.namespace(|| "replica_id_input"))?;
    let replica_id_bits =
        reverse_bit_numbering(replica_id.to_bits_le(cs.namespace(|| "replica_id_bits"))?);
    let comm_d = AllocatedNum::alloc(cs.namespace(|| "comm_d"), || Ok(p.comm_d.into()))?;
    comm_d.inputize(cs.namespace(|| "comm_d_input"))?;
    let comm_r = AllocatedNum::alloc(cs.namespace(|| "comm_r"), || Ok(p.comm_r.into()))?;
    comm_r.inputize(cs.namespace(|| "comm_r_input"))?;
    let comm_r_last =
        AllocatedNum::alloc(cs.namespace(|| "comm_r_last"), || Ok(p.comm_r_last.into()))?;
    let comm_c = AllocatedNum::alloc(cs.namespace(|| "comm_c"), || Ok(p.comm_c.into()))?;
    let hash = <Tree::Hasher as Hasher>::Function::hash2_circuit(
        cs.namespace(|| "H_comm_c_comm_r_last"),
        &comm_c,
        &comm_r_last,
    )?;
    constraint::equal(cs, || "comm_r", &comm_r, &hash);
    Ok(Allocated {
        replica_id_bits,
        comm_d,
        comm_r_last,
        comm_c,
    })
}

/// storage-proofs' `enforce_inclusion`: a Merkle path from `leaf` to `root` in one
/// of the sector's trees (C or R, Poseidon in every Filecoin sector), with its
/// hashes computed natively.
fn inclusion<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    path: RawPath,
    root: &AllocatedNum<Scalar>,
    leaf: &AllocatedNum<Scalar>,
) -> Result<(), SynthesisError> {
    if !is_poseidon::<Tree::Hasher>() {
        return Err(missing("a tree that is not Poseidon"));
    }
    por::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity, _>(
        &mut cs,
        Root::from_allocated::<CS>(leaf.clone()),
        path,
        Root::from_allocated::<CS>(root.clone()),
        true,
    )
}

/// storage-proofs' `hash_single_column`: Poseidon over a column of 2 or 11 labels.
fn column_hash<CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    column: &[AllocatedNum<Scalar>],
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    use filecoin_hashers::{POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_2};
    match column.len() {
        2 => poseidon(&mut cs, column, &POSEIDON_CONSTANTS_2),
        11 => poseidon(&mut cs, column, &POSEIDON_CONSTANTS_11),
        n => Err(missing(&format!("a column of {n} layers"))),
    }
}

/// The Merkle proof type of a vanilla column proof (as `VanillaSealProof` holds it).
type TreeProof<T> = MerkleProof<
    <T as MerkleTreeTrait>::Hasher,
    <T as MerkleTreeTrait>::Arity,
    <T as MerkleTreeTrait>::SubTreeArity,
    <T as MerkleTreeTrait>::TopTreeArity,
>;

/// A parent's column (allocated) and its path in tree C, as `ColumnProof::alloc` does.
fn column<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Scalar>>(
    mut cs: CS,
    proof: &ColumnProof<TreeProof<Tree>>,
    layers: usize,
) -> Result<Vec<AllocatedNum<Scalar>>, SynthesisError> {
    let mut cs = cs.namespace(|| "column");
    (1..=layers)
        .map(|layer| {
            let value: Scalar = (*proof
                .get_node_at_layer(layer)
                .map_err(|e| missing(&e.to_string()))?)
            .into();
            AllocatedNum::alloc(cs.namespace(|| format!("row {layer}")), || Ok(value))
        })
        .collect()
}

fn path_of<Tree: 'static + MerkleTreeTrait>(
    proof: &ColumnProof<TreeProof<Tree>>,
) -> Result<RawPath, SynthesisError> {
    let inclusion: TreeProof<Tree> = field(proof, "inclusion_proof")?;
    Ok(inclusion.as_options())
}

/// The parents' columns, each allocated, hashed and proven in tree C, in order (as
/// `Proof::synthesize` does for the DRG and then the expander parents).
fn parent_columns<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    proofs: &[ColumnProof<TreeProof<Tree>>],
    layers: usize,
    comm_c: &AllocatedNum<Scalar>,
) -> Result<Vec<Vec<AllocatedNum<Scalar>>>, SynthesisError> {
    let mut out = Vec::with_capacity(proofs.len());
    for (i, p) in proofs.iter().enumerate() {
        let col = column::<Tree, _>(cs.namespace(|| format!("parent_{i}")), p, layers)?;
        let hash = column_hash(cs.namespace(|| format!("parent_{i}_hash")), &col)?;
        let path = path_of::<Tree>(p)?;
        inclusion::<Tree, _>(
            cs.namespace(|| format!("parent_{i}_in_c")),
            path,
            comm_c,
            &hash,
        )?;
        out.push(col);
    }
    Ok(out)
}

/// `create_label_circuit`, with the SHA-256 witness computed natively and the
/// result packed as `multipack::pack_bits` packs it (one variable, one constraint).
fn label<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    replica_id: &[Boolean],
    parents: &[Vec<Boolean>],
    layer: u32,
    node: &UInt64,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    if parents.len() != TOTAL_PARENTS || !(32..=256).contains(&replica_id.len()) {
        return Err(missing("a label's parents or replica id are malformed"));
    }
    let pad = |bits: &mut Vec<Boolean>, to: usize| {
        while !bits.len().is_multiple_of(to) {
            bits.push(Boolean::constant(false));
        }
    };
    let mut input = replica_id.to_vec();
    pad(&mut input, 256);
    input.extend(UInt32::constant(layer).into_bits_be());
    input.extend(node.to_bits_be());
    pad(&mut input, 512);
    for parent in parents {
        input.extend_from_slice(parent);
        pad(&mut input, 256);
    }
    packed_sha256(cs, &input)
}

/// SHA-256 of `input` as filecoin's gadgets make it a field element (the label's
/// `multipack::pack_bits` and `Sha256Function::hash_circuit` pack alike): the witness
/// computed natively, then the digest's bits, least significant first within each
/// byte, packed up to the field's capacity, i.e. the digest read little-endian with
/// its top two bits dropped (one variable, one constraint).
pub(crate) fn packed_sha256<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    input: &[Boolean],
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let mut repr = cuzk_synth::sha256::sha256_witness(cs, input)?;
    repr[31] &= 0x3f;
    let value = Option::<Scalar>::from(Scalar::from_repr(repr))
        .ok_or_else(|| missing("a digest that is not a field element"))?;
    let num = AllocatedNum::alloc(cs.namespace(|| "packed digest"), || Ok(value))?;
    cs.enforce(|| "packing", |lc| lc, |lc| lc, |lc| lc);
    Ok(num)
}

/// `PoRCircuit::synthesize` for the data tree (`DefaultPieceHasher`, SHA-256, binary,
/// without sub or top trees), as `enforce_inclusion` calls it, with each node's
/// SHA-256 computed natively: per level the index bit, the sibling, the gadget's
/// `insert`, the two children's bits (`Sha256Function::hash_multi_leaf_circuit`),
/// their hash; then the path bits packed into inputs and the root's equality.
fn data_inclusion<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    path: Vec<(Vec<Option<Scalar>>, Option<usize>)>,
    root: &AllocatedNum<Scalar>,
    leaf: &AllocatedNum<Scalar>,
) -> Result<(), SynthesisError> {
    let mut cur = leaf.clone();
    let mut index_bits = Vec::with_capacity(path.len());
    for (level, (hashes, index)) in path.into_iter().enumerate() {
        let mut cs = cs.namespace(|| format!("level {level}"));
        let index = index.ok_or(SynthesisError::AssignmentMissing)?;
        let bit = Boolean::from(AllocatedBit::alloc(
            cs.namespace(|| "index bit"),
            Some(index & 1 == 1),
        )?);
        let siblings = siblings(&mut cs, hashes)?;
        let children = insert(&mut cs, &cur, std::slice::from_ref(&bit), &siblings)?;
        index_bits.push(bit);
        let mut preimage = Vec::with_capacity(children.len() * 256);
        for child in &children {
            let mut le = child.to_bits_le(cs.namespace(|| "child bits"))?;
            while !le.len().is_multiple_of(8) {
                le.push(Boolean::constant(false));
            }
            preimage.extend(le.chunks_exact(8).flat_map(|c| c.iter().rev()).cloned());
        }
        cur = packed_sha256(&mut cs, &preimage)?;
    }
    multipack::pack_into_inputs(cs.namespace(|| "path"), &index_bits)?;
    constraint::equal(cs, || "root", &cur, root);
    Ok(())
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for ChallengeWitness<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let pre = prefix(cs, &self.prefix)?;
        let mut cs = cs.namespace(|| "challenge_0");
        let proof = self.proof;
        let rcp = &proof.replica_column_proofs;

        let data_leaf_value: Scalar = proof.comm_d_proofs.leaf().into();
        let data_leaf = AllocatedNum::alloc(cs.namespace(|| "data_leaf"), || Ok(data_leaf_value))?;
        data_inclusion(
            &mut cs.namespace(|| "comm_d"),
            proof.comm_d_proofs.as_options(),
            &pre.comm_d,
            &data_leaf,
        )?;

        let layers = proof.labeling_proofs.len();
        let drg = parent_columns::<Tree, _>(&mut cs, &rcp.drg_parents, layers, &pre.comm_c)?;
        let exp = parent_columns::<Tree, _>(&mut cs, &rcp.exp_parents, layers, &pre.comm_c)?;

        let first = proof
            .labeling_proofs
            .first()
            .ok_or_else(|| missing("no layers"))?;
        let node: u64 = field(first, "node")?;
        let challenge = UInt64::alloc(cs.namespace(|| "challenge"), Some(node))?;
        challenge.pack_into_input(cs.namespace(|| "challenge input"))?;

        let mut labels = Vec::with_capacity(layers);
        for layer in 1..=layers {
            let mut cs = cs.namespace(|| format!("labeling_{layer}"));
            let mut parents = Vec::with_capacity(drg.len() + exp.len());
            for col in &drg {
                let bits = col[layer - 1].to_bits_le(cs.namespace(|| "drg bits"))?;
                parents.push(reverse_bit_numbering(bits));
            }
            if layer > 1 {
                for col in &exp {
                    let bits = col[layer - 2].to_bits_le(cs.namespace(|| "exp bits"))?;
                    parents.push(reverse_bit_numbering(bits));
                }
            }
            let mut expanded = parents.clone();
            if layer > 1 {
                expanded.extend_from_slice(&parents);
                expanded.extend_from_slice(&parents[..9.min(parents.len())]);
            } else {
                for _ in 0..5 {
                    expanded.extend_from_slice(&parents);
                }
                if let Some(first) = parents.first() {
                    expanded.push(first.clone());
                }
            }
            labels.push(label(
                &mut cs,
                &pre.replica_id_bits,
                &expanded,
                layer as u32,
                &challenge,
            )?);
        }

        let key = labels.last().ok_or_else(|| missing("no layers"))?;
        let encoded = encode(cs.namespace(|| "encode_node"), key, &data_leaf)?;
        inclusion::<Tree, _>(
            cs.namespace(|| "comm_r_last"),
            proof.comm_r_last_proof.as_options(),
            &pre.comm_r_last,
            &encoded,
        )?;

        let hash = column_hash(cs.namespace(|| "c_x_column_hash"), &labels)?;
        inclusion::<Tree, _>(
            cs.namespace(|| "c_x_inclusion"),
            path_of::<Tree>(&rcp.c_x)?,
            &pre.comm_c,
            &hash,
        )?;
        Ok(())
    }
}
