//! A SnapDeals partition's witness, with its SHA-256 and Poseidon computed natively.
//!
//! Why: storage-proofs-update's `EmptySectorUpdateCircuit::synthesize` is one function
//! that walks a partition's challenges in turn through bellperson's and neptune's
//! gadgets: 24–37 s a 32 GiB partition on one core (81 M constraints), so a SnapDeals
//! stream waited for the CPU, not the GPU. Most of it is the data tree's SHA-256
//! (TreeD is binary SHA-256: per challenge 19 levels from the leaf to its apex leaf at
//! 32 GiB, plus a partition's apex tree of 127 hashes and its 4-level path to comm_d)
//! and the replica trees' Poseidon (TreeR old and new, 8-8-0 at 32 GiB).
//!
//! [`SnapCircuit`] gives the same witness as filecoin-proofs' circuit, as a
//! [`cuzk_synth::SplitCircuit`]: a head (everything `synthesize` allocates before its
//! apex tree: `k_and_h_select` and its bits, the three public commitments, `phi`,
//! comm_c and the two roots, the apex leaves, the partition path, the two
//! `comm_r = H(comm_c, root_r)` checks), then one part for the apex tree, its
//! partition path and the challenge bits (`apex_por`, `gen_challenge_bits`), then one
//! part per challenge (`get_challenge_high_bits`, `rho`, the encoding
//! `leaf_r_new = leaf_r_old + leaf_d_new · rho`, the two TreeR paths, the apex leaf's
//! selection and the TreeD path up to it). Each part begins with the head, as the
//! split contract asks; the head is about a thousand variables (its three Poseidon
//! hashes and the apex leaves).
//!
//! Each step allocates what storage-proofs-update's code allocates, in its order:
//! the cheap public gadgets of bellperson and storage-proofs-core are called as that
//! code calls them (`AllocatedBit`, `pack_bits`, `AllocatedNum::mul`, `insert`,
//! `select`); storage-proofs-update's own gadgets are private to it, so theirs are
//! written out here step for step; SHA-256's witness comes from
//! [`cuzk_synth::sha256::sha256_witness`] and Poseidon's from
//! [`crate::poseidon_witness`]. A challenge reads bits that the apex part allocates
//! (its share of a `gen_challenge_bits` digest): its part computes them natively and
//! holds them as bits allocated in a [`Detached`] system, which lends the values to
//! the gadgets and adds nothing to the witness. That is sound only because a witness
//! system records values and counts constraints, never evaluating them: every proof's
//! constraints come from the shape compiled from filecoin-proofs' own circuit.
//!
//! Three checks keep it honest: cuzk-synth compares every part's head with the head
//! value for value and the counts of inputs, variables and constraints with the
//! compiled shape; the tests compare the whole witness with filecoin-proofs' circuit's
//! on a real 2 KiB update, a whole 8 MiB partition and the 32 GiB and 64 GiB shapes;
//! and the checks that the circuit makes with `assert!` (a partition's challenges
//! share one partition path, each `leaf_r_new` is the encoding of its old leaf and
//! new data) are errors here.
//!
//! The apex part is larger than a challenge's, so the parts are not uniform; their
//! sizes are told in advance (`SplitCircuit::part_sizes`: a challenge's counted once,
//! the apex part's what the shape leaves), so that each writes straight into its
//! window of the witness, as PoRep's and PoSt's uniform parts do.
//!
//! Measured (dev machine, one thread, the whole 32 GiB partition, BENCHMARKS.md):
//! 27.9-30.5 s through the gadgets, 2.3-3.5 s native (8.7-12.3×); before the parts
//! were told their sizes, each part's system was copied and the native witness took
//! 8.3 s, about half of it the kernel's work on fresh memory (perf).

use std::sync::Arc;

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use bellperson::gadgets::boolean::{field_into_allocated_bits_le, AllocatedBit, Boolean};
use bellperson::gadgets::{multipack::pack_bits, num::AllocatedNum};
use blstrs::Scalar;
use ff::{Field, PrimeField, PrimeFieldBits};
use filecoin_hashers::PoseidonArity;
use generic_array::typenum::Unsigned;
use storage_proofs_core::gadgets::insertion::{insert, select};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::circuit::{ChallengeProof, PrivateInputs};
use storage_proofs_update::constants::{hs, TreeRHasher, POSEIDON_CONSTANTS_GEN_RANDOMNESS};
use storage_proofs_update::{EmptySectorUpdateCircuit, PublicParams};

use crate::porep_witness::packed_sha256;
use crate::poseidon_witness::{hash2, poseidon};

fn malformed(what: &str) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("SnapDeals witness: {what}"),
    ))
}

fn value(v: Option<Scalar>) -> Result<Scalar, SynthesisError> {
    v.ok_or(SynthesisError::AssignmentMissing)
}

fn num<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    v: Scalar,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    AllocatedNum::alloc(cs.namespace(|| ""), || Ok(v))
}

/// One SnapDeals partition: filecoin-proofs' circuit (what bellperson proves and the
/// shape is compiled from), and its witness split into parts.
pub(crate) struct SnapCircuit<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    pub whole: EmptySectorUpdateCircuit<Tree>,
}

// By hand: storage-proofs-update's circuit is not `Clone`, and its private inputs
// derive it only for a `Tree: Clone`.
impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> Clone for SnapCircuit<Tree> {
    fn clone(&self) -> Self {
        let w = &self.whole;
        Self {
            whole: EmptySectorUpdateCircuit {
                pub_params: w.pub_params.clone(),
                pub_inputs: w.pub_inputs.clone(),
                priv_inputs: PrivateInputs {
                    comm_c: w.priv_inputs.comm_c,
                    root_r_old: w.priv_inputs.root_r_old,
                    root_r_new: w.priv_inputs.root_r_new,
                    apex_leafs: w.priv_inputs.apex_leafs.clone(),
                    challenge_proofs: w.priv_inputs.challenge_proofs.clone(),
                },
            },
        }
    }
}

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> SnapCircuit<Tree> {
    /// The partition cut to its first `challenges` challenges (at least one), as a
    /// circuit of that many challenges: for tests and benchmarks whose sequential
    /// witness must stay short. Not a circuit of any registered proof, and only the
    /// first partition's (`k = 0`) keeps its challenges: a digest's index counts the
    /// digests of a partition, which the cut changes.
    pub(crate) fn cut(mut self, challenges: usize) -> Self {
        let n = challenges.clamp(1, self.whole.pub_params.challenge_count);
        self.whole.pub_params.challenge_count = n;
        self.whole.priv_inputs.challenge_proofs.truncate(n);
        self
    }
}

/// The sequential synthesis: filecoin-proofs' whole circuit.
impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Circuit<Scalar> for SnapCircuit<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.whole.synthesize(cs)
    }
}

/// What the circuit allocates before its apex tree, as values.
pub(crate) struct Head {
    params: PublicParams,
    k_and_h_select: Scalar,
    comm_r_old: Scalar,
    comm_d_new: Scalar,
    comm_r_new: Scalar,
    comm_c: Scalar,
    root_r_old: Scalar,
    root_r_new: Scalar,
    apex_leafs: Vec<Scalar>,
    partition_path: Vec<Scalar>,
}

/// The head's variables that the parts read.
struct HeadVars {
    partition_bits: Vec<AllocatedBit>,
    h_select_bits: Vec<AllocatedBit>,
    partition: AllocatedNum<Scalar>,
    comm_r_new: AllocatedNum<Scalar>,
    phi: AllocatedNum<Scalar>,
    apex_leafs: Vec<AllocatedNum<Scalar>>,
    partition_path: Vec<AllocatedNum<Scalar>>,
}

/// The head alone: the split's prefix.
pub(crate) struct Prefix(Arc<Head>);

impl Circuit<Scalar> for Prefix {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.0.alloc(cs).map(|_| ())
    }
}

impl Head {
    /// `synthesize` up to its apex tree.
    fn alloc<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS) -> Result<HeadVars, SynthesisError> {
        let p = &self.params;
        let k_and_h_select = num(cs, self.k_and_h_select)?;
        k_and_h_select.inputize(cs.namespace(|| "k_and_h_select input"))?;
        let bit_len = p.partition_bit_len + hs(p.sector_nodes).len();
        let mut bits = Vec::with_capacity(bit_len);
        for b in self.k_and_h_select.to_le_bits().into_iter().take(bit_len) {
            bits.push(AllocatedBit::alloc(cs.namespace(|| ""), Some(b))?);
        }
        cs.enforce(|| "binary decomp", |lc| lc, |lc| lc, |lc| lc);
        let h_select_bits = bits.split_off(p.partition_bit_len);
        let partition_bits = bits;
        let booleans: Vec<Boolean> = partition_bits.iter().cloned().map(Into::into).collect();
        let partition = pack_bits(cs.namespace(|| "partition"), &booleans)?;
        let mut public = |v: Scalar| -> Result<AllocatedNum<Scalar>, SynthesisError> {
            let n = num(cs, v)?;
            n.inputize(cs.namespace(|| "input"))?;
            Ok(n)
        };
        let comm_r_old = public(self.comm_r_old)?;
        let comm_d_new = public(self.comm_d_new)?;
        let comm_r_new = public(self.comm_r_new)?;
        let phi = poseidon(
            cs,
            &[comm_d_new.clone(), comm_r_old.clone()],
            &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
        )?;
        let comm_c = num(cs, self.comm_c)?;
        let root_r_old = num(cs, self.root_r_old)?;
        let root_r_new = num(cs, self.root_r_new)?;
        let apex_leafs = self
            .apex_leafs
            .iter()
            .map(|v| num(cs, *v))
            .collect::<Result<Vec<_>, _>>()?;
        let partition_path = self
            .partition_path
            .iter()
            .map(|v| num(cs, *v))
            .collect::<Result<Vec<_>, _>>()?;
        // comm_r = H(comm_c, root_r), old and new, each checked by one constraint.
        for root in [&root_r_old, &root_r_new] {
            hash2(cs, &comm_c, root)?;
            cs.enforce(|| "comm_r", |lc| lc, |lc| lc, |lc| lc);
        }
        Ok(HeadVars {
            partition_bits,
            h_select_bits,
            partition,
            comm_r_new,
            phi,
            apex_leafs,
            partition_path,
        })
    }

    /// How many `gen_challenge_bits` digests a partition takes, and how many challenges
    /// each gives.
    fn digests(&self) -> (usize, usize) {
        let p = &self.params;
        let per = Scalar::CAPACITY as usize / (p.challenge_bit_len - p.partition_bit_len);
        (p.challenge_count.div_ceil(per), per)
    }
}

/// A part of the partition after the head.
pub(crate) enum Part<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    /// The apex tree, its path to comm_d, and the challenges' bits.
    Apex(Arc<Head>),
    /// One challenge, with its bits below the partition's (least significant first).
    Challenge {
        head: Arc<Head>,
        bits: Vec<bool>,
        proof: Box<ChallengeProof<Tree>>,
    },
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> cuzk_synth::SplitCircuit
    for SnapCircuit<Tree>
{
    type Prefix = Prefix;
    type Part = Part<Tree>;
    fn split(self) -> Result<(Self::Prefix, Vec<Self::Part>), SynthesisError> {
        let EmptySectorUpdateCircuit {
            pub_params: params,
            pub_inputs,
            priv_inputs,
        } = self.whole;
        let proofs = priv_inputs.challenge_proofs;
        let first = proofs.first().ok_or_else(|| malformed("no challenges"))?;
        let top = params.challenge_bit_len - params.partition_bit_len;
        let partition_path = first
            .path_d_new
            .get(top..)
            .ok_or_else(|| malformed("a data path shorter than the tree"))?
            .to_vec();
        if proofs.len() != params.challenge_count
            || priv_inputs.apex_leafs.len() != params.apex_leaf_count
            || partition_path.len() != params.partition_bit_len
            || partition_path.iter().any(|s| s.len() != 1)
            || proofs
                .iter()
                .any(|p| p.path_d_new.get(top..) != Some(partition_path.as_slice()))
        {
            return Err(malformed(
                "the challenges, apex leaves or partition paths are not the partition's",
            ));
        }
        let head = Arc::new(Head {
            k_and_h_select: value(pub_inputs.k_and_h_select)?,
            comm_r_old: value(pub_inputs.comm_r_old)?,
            comm_d_new: value(pub_inputs.comm_d_new)?,
            comm_r_new: value(pub_inputs.comm_r_new)?,
            comm_c: value(priv_inputs.comm_c)?,
            root_r_old: value(priv_inputs.root_r_old)?,
            root_r_new: value(priv_inputs.root_r_new)?,
            apex_leafs: priv_inputs
                .apex_leafs
                .iter()
                .map(|v| value(*v))
                .collect::<Result<_, _>>()?,
            partition_path: partition_path
                .iter()
                .map(|s| value(s[0]))
                .collect::<Result<_, _>>()?,
            params,
        });
        partition(&head)?;
        let bits = challenge_bits(&head)?;
        let mut parts = Vec::with_capacity(proofs.len() + 1);
        parts.push(Part::Apex(head.clone()));
        for (bits, proof) in bits.into_iter().zip(proofs) {
            parts.push(Part::Challenge {
                head: head.clone(),
                bits,
                proof: Box::new(proof),
            });
        }
        Ok((Prefix(head), parts))
    }

    /// The apex part's window and the challenges': a challenge's size counted by
    /// synthesizing the first challenge once more into a [`Detached`] system (about
    /// 1% of a 32 GiB partition's work, against a copy of every part's values), the
    /// apex part's what the shape leaves.
    fn part_sizes(parts: &[Part<Tree>], own: usize) -> Option<Vec<usize>> {
        let challenge = match parts.get(1)? {
            Part::Challenge { head, bits, proof } => {
                let mut counter = Detached::default();
                let head_aux = {
                    head.alloc(&mut counter).ok()?;
                    counter.aux
                };
                challenge::<Tree, _>(&mut counter, head, bits, proof).ok()?;
                counter.aux - 2 * head_aux
            }
            Part::Apex(_) => return None,
        };
        let apex = own.checked_sub(challenge * (parts.len() - 1))?;
        let mut sizes = vec![challenge; parts.len()];
        sizes[0] = apex;
        Some(sizes)
    }
}

/// `gen_challenge_bits`'s digest `j`: `H(comm_r_new, k · digests + j)`, with the
/// update's own Poseidon constants, computed natively.
fn digest(head: &Head, j: usize) -> Result<Scalar, SynthesisError> {
    let (digests, _) = head.digests();
    let k = partition(head)?;
    let index = Scalar::from((k * digests + j) as u64);
    let mut hasher = neptune::poseidon::Poseidon::new_with_preimage(
        &[head.comm_r_new, index],
        &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
    );
    Ok(hasher.hash())
}

/// The partition index `k`: the low bits of `k_and_h_select`, checked as the circuit
/// asserts it (`k` one of the sector's partitions, then `h_select` one bit, then
/// nothing).
fn partition(head: &Head) -> Result<usize, SynthesisError> {
    let p = &head.params;
    let bits: Vec<bool> = head.k_and_h_select.to_le_bits().into_iter().collect();
    let (k_bits, rest) = bits.split_at(p.partition_bit_len);
    let (select, rest) = rest.split_at(hs(p.sector_nodes).len());
    let k = k_bits
        .iter()
        .enumerate()
        .fold(0, |k, (i, b)| k | (usize::from(*b) << i));
    if k >= p.partition_count
        || select.iter().filter(|b| **b).count() != 1
        || rest.iter().any(|b| *b)
    {
        return Err(malformed("k_and_h_select is not a partition and one h"));
    }
    Ok(k)
}

/// Each challenge's random bits, as `gen_challenge_bits` cuts them from its digests.
fn challenge_bits(head: &Head) -> Result<Vec<Vec<bool>>, SynthesisError> {
    let p = &head.params;
    let (digests, per) = head.digests();
    let width = p.challenge_bit_len - p.partition_bit_len;
    let mut out = Vec::with_capacity(p.challenge_count);
    for j in 0..digests {
        let bits: Vec<bool> = digest(head, j)?.to_le_bits().into_iter().collect();
        let take = per.min(p.challenge_count - out.len());
        out.extend(bits.chunks(width).take(take).map(<[bool]>::to_vec));
    }
    Ok(out)
}

/// `allocated_num_to_allocated_bits`: the value's 255 bits and their packing
/// constraint (also what `AllocatedNum::to_bits_le` allocates).
fn bits_le<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    v: Option<Scalar>,
) -> Result<Vec<AllocatedBit>, SynthesisError> {
    let bits = field_into_allocated_bits_le(cs.namespace(|| "bits"), v)?;
    cs.enforce(|| "packing", |lc| lc, |lc| lc, |lc| lc);
    Ok(bits)
}

/// `Sha256Function::hash_multi_leaf_circuit` (and `hash2_circuit`, the same for two):
/// each node's bits, then SHA-256 of their bytes, computed natively and packed.
fn sha_nodes<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    nodes: &[AllocatedNum<Scalar>],
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let mut preimage = Vec::with_capacity(nodes.len() * 256);
    for node in nodes {
        let mut le: Vec<Boolean> = bits_le(cs, node.get_value())?
            .into_iter()
            .map(Boolean::from)
            .collect();
        le.push(Boolean::constant(false));
        preimage.extend(le.chunks_exact(8).flat_map(|c| c.iter().rev()).cloned());
    }
    packed_sha256(cs, &preimage)
}

/// `por_no_challenge_input` for TreeD (binary SHA-256): per level the node inserted
/// by its bit, the pair hashed; then the root's equality.
fn sha_path<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    bits: &[Boolean],
    leaf: AllocatedNum<Scalar>,
    path: &[AllocatedNum<Scalar>],
) -> Result<(), SynthesisError> {
    if bits.len() != path.len() {
        return Err(malformed("a data path of another length than its bits"));
    }
    let mut cur = leaf;
    for (bit, sibling) in bits.iter().zip(path) {
        let pair = insert(
            cs,
            &cur,
            std::slice::from_ref(bit),
            std::slice::from_ref(sibling),
        )?;
        cur = sha_nodes(cs, &pair)?;
    }
    cs.enforce(|| "root", |lc| lc, |lc| lc, |lc| lc);
    Ok(())
}

/// The levels of one arity of `por_no_challenge_input` for a TreeR (Poseidon).
fn poseidon_levels<A: PoseidonArity, CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    mut cur: AllocatedNum<Scalar>,
    levels: &[Vec<AllocatedNum<Scalar>>],
    bits: &mut std::slice::Iter<'_, Boolean>,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let arity = A::to_usize();
    let width = arity.trailing_zeros() as usize;
    for siblings in levels {
        let index: Vec<Boolean> = bits.by_ref().take(width).cloned().collect();
        if siblings.len() + 1 != arity || index.len() != width {
            return Err(malformed("a replica path of another shape than its tree"));
        }
        let inserted = insert(cs, &cur, &index, siblings)?;
        cur = poseidon(cs, &inserted, A::PARAMETERS())?;
    }
    Ok(cur)
}

/// `por_no_challenge_input` for the TreeR of `Tree` (base, sub and top arities),
/// with its siblings already allocated; then the root's equality.
fn poseidon_path<Tree: MerkleTreeTrait<Hasher = TreeRHasher>, CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    bits: &[Boolean],
    leaf: AllocatedNum<Scalar>,
    path: &[Vec<AllocatedNum<Scalar>>],
) -> Result<(), SynthesisError> {
    let upper = usize::from(Tree::SubTreeArity::to_usize() > 0)
        + usize::from(Tree::TopTreeArity::to_usize() > 0);
    let base = path
        .len()
        .checked_sub(upper)
        .ok_or_else(|| malformed("a replica path shorter than its tree"))?;
    let mut bits = bits.iter();
    let mut cur = poseidon_levels::<Tree::Arity, _>(cs, leaf, &path[..base], &mut bits)?;
    let mut rest = path[base..].iter();
    if Tree::SubTreeArity::to_usize() > 0 {
        let level = rest.next().map(std::slice::from_ref).unwrap_or_default();
        cur = poseidon_levels::<Tree::SubTreeArity, _>(cs, cur, level, &mut bits)?;
    }
    if Tree::TopTreeArity::to_usize() > 0 {
        let level = rest.next().map(std::slice::from_ref).unwrap_or_default();
        poseidon_levels::<Tree::TopTreeArity, _>(cs, cur, level, &mut bits)?;
    }
    if bits.next().is_some() {
        return Err(malformed("a challenge of more bits than its replica path"));
    }
    cs.enforce(|| "root", |lc| lc, |lc| lc, |lc| lc);
    Ok(())
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Circuit<Scalar> for Part<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            Part::Apex(head) => apex(cs, &head),
            Part::Challenge { head, bits, proof } => challenge::<Tree, _>(cs, &head, &bits, &proof),
        }
    }
}

/// The head, then `apex_por` and `gen_challenge_bits`.
fn apex<CS: ConstraintSystem<Scalar>>(cs: &mut CS, head: &Head) -> Result<(), SynthesisError> {
    let v = head.alloc(cs)?;
    // The apex tree, row by row, then its root's path to comm_d.
    let mut row = v.apex_leafs;
    while row.len() > 1 {
        row = row
            .chunks(2)
            .map(|pair| sha_nodes(cs, pair))
            .collect::<Result<_, _>>()?;
    }
    let root = row.pop().ok_or_else(|| malformed("no apex leaves"))?;
    let bits: Vec<Boolean> = v.partition_bits.into_iter().map(Into::into).collect();
    sha_path(cs, &bits, root, &v.partition_path)?;
    // The digests whose bits are the challenges (each challenge's part computes its own).
    let (digests, _) = head.digests();
    let k = v.partition.get_value();
    for j in 0..digests {
        let index = k.map(|k| k * Scalar::from(digests as u64) + Scalar::from(j as u64));
        let index = AllocatedNum::alloc(cs.namespace(|| "digest index"), || value(index))?;
        cs.enforce(|| "digest index", |lc| lc, |lc| lc, |lc| lc);
        let digest = poseidon(
            cs,
            &[v.comm_r_new.clone(), index],
            &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
        )?;
        // The challenges' parts cut their bits from `digest`'s value: the same.
        if digest.get_value() != Some(self::digest(head, j)?) {
            return Err(malformed(
                "a challenge digest that the challenges do not read",
            ));
        }
        bits_le(cs, digest.get_value())?;
    }
    Ok(())
}

/// A replica path's siblings, allocated level by level before the path's gadget.
fn siblings<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    path: &[Vec<Option<Scalar>>],
) -> Result<Vec<Vec<AllocatedNum<Scalar>>>, SynthesisError> {
    path.iter()
        .map(|level| level.iter().map(|s| num(cs, value(*s)?)).collect())
        .collect()
}

/// The head, then one challenge of the loop in `synthesize`.
fn challenge<Tree: MerkleTreeTrait<Hasher = TreeRHasher>, CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    head: &Head,
    random_bits: &[bool],
    proof: &ChallengeProof<Tree>,
) -> Result<(), SynthesisError> {
    let v = head.alloc(cs)?;
    let p = &head.params;
    // The bits the apex part allocated, lent (see `Detached`), then the partition's.
    let mut detached = Detached::default();
    let mut c_bits = Vec::with_capacity(p.challenge_bit_len);
    for b in random_bits {
        c_bits.push(Boolean::from(AllocatedBit::alloc(&mut detached, Some(*b))?));
    }
    c_bits.extend(v.partition_bits.iter().cloned().map(Boolean::from));
    if c_bits.len() != p.challenge_bit_len {
        return Err(malformed("a challenge of another width than the sector's"));
    }

    // `get_challenge_high_bits`: each `h`'s high bits packed and scaled by its
    // `h_select` bit, then their sum.
    let mut selected = Scalar::ZERO;
    for (h, select_bit) in hs(p.sector_nodes).iter().zip(&v.h_select_bits) {
        let high = pack_bits(cs.namespace(|| "c_high"), &c_bits[c_bits.len() - h..])?;
        let on = select_bit
            .get_value()
            .ok_or(SynthesisError::AssignmentMissing)?;
        let scaled = if on {
            value(high.get_value())?
        } else {
            Scalar::ZERO
        };
        num(cs, scaled)?;
        cs.enforce(|| "c_high_or_zero", |lc| lc, |lc| lc, |lc| lc);
        selected += scaled;
    }
    let c_high = num(cs, selected)?;
    cs.enforce(|| "c_high_selected", |lc| lc, |lc| lc, |lc| lc);
    let rho = poseidon(
        cs,
        &[v.phi.clone(), c_high],
        &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
    )?;

    // The encoding: leaf_r_new = leaf_r_old + leaf_d_new · rho (`label_r_new`).
    let leaf_r_old = num(cs, value(proof.leaf_r_old)?)?;
    let leaf_d_new = num(cs, value(proof.leaf_d_new)?)?;
    let d_rho = leaf_d_new.mul(cs.namespace(|| "d * rho"), &rho)?;
    let encoded = value(leaf_r_old.get_value())? + value(d_rho.get_value())?;
    let leaf_r_new = num(cs, encoded)?;
    cs.enforce(|| "label_r_new", |lc| lc, |lc| lc, |lc| lc);
    if Some(encoded) != proof.leaf_r_new {
        return Err(malformed(
            "a new replica leaf that is not the encoding of its old leaf and new data",
        ));
    }

    let path_r_old = siblings(cs, &proof.path_r_old)?;
    poseidon_path::<Tree, _>(cs, &c_bits, leaf_r_old, &path_r_old)?;
    let path_r_new = siblings(cs, &proof.path_r_new)?;
    poseidon_path::<Tree, _>(cs, &c_bits, leaf_r_new, &path_r_new)?;

    // The challenge's apex leaf, and its data path up to it.
    let below = p.challenge_bit_len - p.partition_bit_len - p.apex_leaf_bit_len;
    let apex_bits = &c_bits[below..below + p.apex_leaf_bit_len];
    select(cs.namespace(|| "apex leaf"), &v.apex_leafs, apex_bits)?;
    let path_d = proof
        .path_d_new
        .iter()
        .take(below)
        .map(|level| {
            let s = level.first().copied().flatten();
            num(cs, value(s)?)
        })
        .collect::<Result<Vec<_>, _>>()?;
    sha_path(cs, &c_bits[..below], leaf_d_new, &path_d)
}

/// A constraint system that keeps nothing but a count of its aux variables: bits
/// allocated in it carry their values into the gadgets of a part whose witness does
/// not contain them (another part allocated them), and a part synthesized in it is
/// counted. Its variables are placeholders, which a witness system never reads: it
/// evaluates no linear combination.
#[derive(Default)]
struct Detached {
    aux: usize,
}

impl ConstraintSystem<Scalar> for Detached {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        f()?;
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(0)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        f()?;
        Ok(Variable::new_unchecked(Index::Input(0)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

#[cfg(test)]
mod tests;
