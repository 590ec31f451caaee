//! The witness of Filecoin's Poseidon gadget, computed natively.
//!
//! Why: a WindowPoSt partition (2349 sectors at 32 GiB, 125 M constraints) is ~75%
//! Poseidon hashes in Merkle paths, and neptune's legacy gadget
//! (`neptune::circuit::poseidon_hash`, the one storage-proofs' circuits call) carries
//! every state element as a linear combination that it scales and adds term by term,
//! whatever the constraint system keeps: on the dev machine 2.2 µs a constraint, 280
//! core-seconds a partition, ~80% of it linear-combination bookkeeping that a witness
//! discards. [`poseidon`] allocates exactly the variables that gadget allocates, in
//! its order, with the same values, computed on field elements, and counts the same
//! constraints; [`por`] is storage-proofs' `PoRCircuit::synthesize` with it, for the
//! Poseidon trees every Filecoin sector has.
//!
//! What the legacy gadget allocates (neptune 11, `circuit.rs`), with the state's
//! first element the domain tag and the optimized constants (compressed round
//! constants, pre-sparse and sparse matrices): in the first full round the tag's
//! S-box is a constant and every other element's is `(x + k)²`, its square, and
//! `(x + k)⁴ · (x + k) + k'` (three variables); in every later full round and every
//! partial round each S-box input is a linear combination, first allocated (the
//! fourth variable), then `l²`, `l⁴`, `l⁴ · l (+ k)`; after the terminal full round
//! the state's second element is allocated as the result. Each variable has one
//! constraint. The constraints themselves are not built here (the witness system
//! only counts them): every proof's constraints come from the shape compiled from
//! filecoin-proofs' own circuit, and the tests compare this witness with that
//! circuit's, value for value.

use std::any::TypeId;

use bellpepper_core::{ConstraintSystem, SynthesisError};
use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::{multipack, num::AllocatedNum};
use blstrs::Scalar;
use ff::Field;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::{Hasher, PoseidonArity};
use generic_array::typenum::U2;
use neptune::poseidon::PoseidonConstants;
use storage_proofs_core::gadgets::insertion::insert;
use storage_proofs_core::gadgets::{constraint, variables::Root};

/// A Merkle path as storage-proofs' proofs give it (`MerkleProofTrait::as_options`):
/// per level, the siblings and the index of the node among them.
pub(crate) type RawPath = Vec<(Vec<Option<Scalar>>, Option<usize>)>;

fn malformed(what: &str) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("Poseidon witness: {what}"),
    ))
}

/// Allocates `value` and counts its one constraint.
fn var<CS: ConstraintSystem<Scalar>>(cs: &mut CS, value: Scalar) -> Result<Scalar, SynthesisError> {
    AllocatedNum::alloc(cs.namespace(|| ""), || Ok(value))?;
    cs.enforce(|| "", |lc| lc, |lc| lc, |lc| lc);
    Ok(value)
}

/// The S-box of a later round: the input allocated, then `l²`, `l⁴` and
/// `l⁴ · l + key` (`key` absent in the terminal round).
fn s_box<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    l: Scalar,
    key: Option<Scalar>,
) -> Result<Scalar, SynthesisError> {
    var(cs, l)?;
    let l2 = var(cs, l.square())?;
    let l4 = var(cs, l2.square())?;
    var(cs, l4 * l + key.unwrap_or(Scalar::ZERO))
}

/// A later full round's S-boxes, each element's followed by its key (none in the
/// terminal round).
fn full_round<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    state: &mut [Scalar],
    keys: Option<&[Scalar]>,
) -> Result<(), SynthesisError> {
    for (i, e) in state.iter_mut().enumerate() {
        *e = s_box(cs, *e, keys.map(|k| k[i]))?;
    }
    Ok(())
}

/// `state ← state · m` (row vector times matrix, as the gadget's
/// `product_mds_with_matrix`).
fn dense(state: &mut [Scalar], m: &[Vec<Scalar>], scratch: &mut Vec<Scalar>) {
    scratch.clear();
    scratch.extend((0..state.len()).map(|j| {
        state
            .iter()
            .zip(m)
            .map(|(e, row)| *e * row[j])
            .sum::<Scalar>()
    }));
    state.copy_from_slice(scratch);
}

/// `neptune::circuit::poseidon_hash(cs, preimage, constants)`'s witness (see the
/// module's documentation): the hash, allocated as the gadget allocates it.
pub(crate) fn poseidon<CS: ConstraintSystem<Scalar>, A: PoseidonArity>(
    cs: &mut CS,
    preimage: &[AllocatedNum<Scalar>],
    constants: &PoseidonConstants<Scalar, A>,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let width = constants.width();
    if preimage.len() + 1 != width {
        return Err(malformed("a preimage of another arity"));
    }
    let mut state = Vec::with_capacity(width);
    state.push(constants.domain_tag);
    for p in preimage {
        state.push(p.get_value().ok_or(SynthesisError::AssignmentMissing)?);
    }
    let c = &constants.compressed_round_constants;
    let half = constants.half_full_rounds;
    let mut scratch = Vec::with_capacity(width);
    // The first full round: keys before and after each S-box; the tag's is a constant.
    let (pre, post) = (&c[..width], &c[width..2 * width]);
    let mut at = 2 * width;
    for (i, e) in state.iter_mut().enumerate() {
        let x = *e + pre[i];
        *e = if i == 0 {
            x.square().square() * x + post[i]
        } else {
            let l2 = var(cs, x.square())?;
            let l4 = var(cs, l2.square())?;
            var(cs, l4 * x + post[i])?
        };
    }
    let mut round = 0;
    let mix = |state: &mut Vec<Scalar>, round: usize, scratch: &mut Vec<Scalar>| {
        if round + 1 == half {
            dense(state, &constants.pre_sparse_matrix, scratch);
        } else if round >= half && round < half + constants.partial_rounds {
            let sparse = &constants.sparse_matrixes[round - half];
            let first = state[0];
            let w: Scalar = state.iter().zip(&sparse.w_hat).map(|(e, w)| *e * w).sum();
            for (e, v) in state[1..].iter_mut().zip(&sparse.v_rest) {
                *e += first * v;
            }
            state[0] = w;
        } else {
            dense(state, &constants.mds_matrices.m, scratch);
        }
    };
    mix(&mut state, round, &mut scratch);
    round += 1;
    // The other initial full rounds, each S-box followed by its key.
    for _ in 1..half {
        full_round(cs, &mut state, Some(&c[at..at + width]))?;
        at += width;
        mix(&mut state, round, &mut scratch);
        round += 1;
    }
    for _ in 0..constants.partial_rounds {
        state[0] = s_box(cs, state[0], Some(c[at]))?;
        at += 1;
        mix(&mut state, round, &mut scratch);
        round += 1;
    }
    for _ in 0..half - 1 {
        full_round(cs, &mut state, Some(&c[at..at + width]))?;
        at += width;
        mix(&mut state, round, &mut scratch);
        round += 1;
    }
    // The terminal full round has no keys.
    full_round(cs, &mut state, None)?;
    mix(&mut state, round, &mut scratch);
    let result = state[1];
    let out = AllocatedNum::alloc(cs.namespace(|| "hash result"), || Ok(result))?;
    cs.enforce(|| "", |lc| lc, |lc| lc, |lc| lc);
    Ok(out)
}

/// Whether `H` is the Poseidon hasher (every Filecoin sector tree's).
pub(crate) fn is_poseidon<H: Hasher + 'static>() -> bool {
    TypeId::of::<H>() == TypeId::of::<PoseidonHasher>()
}

/// A path level's siblings, allocated in order (as storage-proofs' path gadgets do).
pub(crate) fn siblings<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    hashes: Vec<Option<Scalar>>,
) -> Result<Vec<AllocatedNum<Scalar>>, SynthesisError> {
    hashes
        .into_iter()
        .map(|h| {
            AllocatedNum::alloc(cs.namespace(|| "sibling"), || {
                h.ok_or(SynthesisError::AssignmentMissing)
            })
        })
        .collect()
}

/// The levels of one arity (storage-proofs' `SubPath::synthesize`): each level's
/// index bits and siblings allocated, the node inserted among them, the level hashed.
fn sub_path<A: PoseidonArity, CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    levels: RawPath,
    mut cur: AllocatedNum<Scalar>,
    bits: &mut Vec<Boolean>,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    let arity = A::to_usize();
    if arity == 0 {
        return if levels.is_empty() {
            Ok(cur)
        } else {
            Err(malformed("a path longer than its tree"))
        };
    }
    let index_bits = arity.trailing_zeros() as usize;
    for (hashes, index) in levels {
        if hashes.len() + 1 != arity {
            return Err(malformed("a path level with the wrong number of siblings"));
        }
        let mut level_bits = Vec::with_capacity(index_bits);
        for i in 0..index_bits {
            let bit = AllocatedBit::alloc(cs.namespace(|| ""), index.map(|x| (x >> i) & 1 == 1))?;
            level_bits.push(Boolean::from(bit));
        }
        bits.extend_from_slice(&level_bits);
        let siblings = siblings(cs, hashes)?;
        let inserted = insert(cs, &cur, &level_bits, &siblings)?;
        cur = poseidon(cs, &inserted, A::PARAMETERS())?;
    }
    Ok(cur)
}

/// storage-proofs' `PoRCircuit::<Tree>::synthesize(cs, value, path, root, private)`
/// for a Poseidon tree of arities `U` (base), `V` (sub) and `W` (top), with each
/// level's hash from [`poseidon`].
pub(crate) fn por<U, V, W, CS>(
    cs: &mut CS,
    value: Root<Scalar>,
    mut path: RawPath,
    root: Root<Scalar>,
    private: bool,
) -> Result<(), SynthesisError>
where
    U: PoseidonArity,
    V: PoseidonArity,
    W: PoseidonArity,
    CS: ConstraintSystem<Scalar>,
{
    let (has_sub, has_top) = (V::to_usize() > 0, W::to_usize() > 0);
    let upper = usize::from(has_sub) + usize::from(has_top);
    if path.len() < upper || (has_top && !has_sub) {
        return Err(malformed("a path shorter than its tree"));
    }
    let mut upper = path.split_off(path.len() - upper);
    let top = if has_top { upper.pop() } else { None };
    let sub = if has_sub { upper.pop() } else { None };
    let cur = value.allocated(cs.namespace(|| "value"))?;
    let mut bits = Vec::new();
    let cur = sub_path::<U, _>(cs, path, cur, &mut bits)?;
    let cur = sub_path::<V, _>(cs, sub.into_iter().collect(), cur, &mut bits)?;
    let computed = sub_path::<W, _>(cs, top.into_iter().collect(), cur, &mut bits)?;
    multipack::pack_into_inputs(cs.namespace(|| "path"), &bits)?;
    let rt = root.allocated(cs.namespace(|| "root_value"))?;
    constraint::equal(cs, || "root", &computed, &rt);
    if !private {
        rt.inputize(cs.namespace(|| "root"))?;
    }
    Ok(())
}

/// `PoseidonFunction::hash2_circuit(cs, a, b)`'s witness.
pub(crate) fn hash2<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    a: &AllocatedNum<Scalar>,
    b: &AllocatedNum<Scalar>,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    poseidon(cs, &[a.clone(), b.clone()], U2::PARAMETERS())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellpepper_core::Circuit;
    use filecoin_hashers::POSEIDON_CONSTANTS_11;
    use generic_array::typenum::{U0, U8};
    use rand_chacha::ChaCha20Rng;
    use rand_core::{RngCore, SeedableRng};
    use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
    use storage_proofs_core::merkle::{DiskStore, MerkleTreeWrapper};

    fn random(n: usize, rng: &mut ChaCha20Rng) -> Vec<Scalar> {
        (0..n).map(|_| Scalar::random(&mut *rng)).collect()
    }

    fn nums<CS: ConstraintSystem<Scalar>>(
        cs: &mut CS,
        values: &[Scalar],
    ) -> Result<Vec<AllocatedNum<Scalar>>, SynthesisError> {
        values
            .iter()
            .map(|v| AllocatedNum::alloc(cs.namespace(|| ""), || Ok(*v)))
            .collect()
    }

    /// `gadget`'s witness and `native`'s are the same, value for value, and `native`
    /// has the shape compiled from `gadget` (inputs, aux variables, constraints).
    fn same<C: Circuit<Scalar> + Clone>(gadget: C, native: C) {
        let shape = cuzk_synth::compile_shape(gadget.clone()).expect("shape");
        let want = cuzk_synth::synthesize_witness(gadget).expect("gadget");
        let got = cuzk_synth::synthesize_witness_for(&shape, native).expect("native");
        assert_eq!(got.input, want.input, "inputs");
        assert!(got.aux == want.aux, "aux values differ");
    }

    /// Hashes a preimage with neptune's legacy gadget or with [`poseidon`], then
    /// allocates the result once more (a wrong result shows in the witness).
    struct Hash<A: PoseidonArity> {
        preimage: Vec<Scalar>,
        constants: &'static PoseidonConstants<Scalar, A>,
        native: bool,
    }

    impl<A: PoseidonArity> Clone for Hash<A> {
        fn clone(&self) -> Self {
            Self {
                preimage: self.preimage.clone(),
                ..*self
            }
        }
    }

    impl<A: PoseidonArity> Circuit<Scalar> for Hash<A> {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let pre = nums(cs, &self.preimage)?;
            let out = if self.native {
                poseidon(cs, &pre, self.constants)?
            } else {
                neptune::circuit::poseidon_hash(cs.namespace(|| "h"), pre, self.constants)?
            };
            AllocatedNum::alloc(cs.namespace(|| "again"), || {
                out.get_value().ok_or(SynthesisError::AssignmentMissing)
            })?;
            Ok(())
        }
    }

    fn hash_is_the_gadgets<A: PoseidonArity>(constants: &'static PoseidonConstants<Scalar, A>) {
        let mut rng = ChaCha20Rng::seed_from_u64(A::to_u64());
        for _ in 0..3 {
            let preimage = random(A::to_usize(), &mut rng);
            let gadget = Hash {
                preimage,
                constants,
                native: false,
            };
            let native = Hash {
                native: true,
                ..gadget.clone()
            };
            same(gadget, native);
        }
    }

    #[test]
    fn native_poseidon_is_neptunes_legacy_gadget_at_every_filecoin_arity() {
        hash_is_the_gadgets(U2::PARAMETERS());
        hash_is_the_gadgets(<generic_array::typenum::U4 as PoseidonArity>::PARAMETERS());
        hash_is_the_gadgets(U8::PARAMETERS());
        hash_is_the_gadgets(&*POSEIDON_CONSTANTS_11);
    }

    #[test]
    fn a_preimage_of_another_arity_is_an_error() {
        let circuit = Hash {
            preimage: vec![Scalar::ONE; 3],
            constants: U2::PARAMETERS(),
            native: true,
        };
        assert!(cuzk_synth::synthesize_witness(circuit).is_err());
    }

    /// A leaf's path in a Poseidon tree of arities `U`-`V`-`W`, through
    /// storage-proofs' `PoRCircuit` or [`por`] (random values: a witness does not
    /// check that the path leads to the root).
    struct Path<U, V, W> {
        leaf: Scalar,
        root: Scalar,
        path: RawPath,
        private: bool,
        native: bool,
        _a: std::marker::PhantomData<(U, V, W)>,
    }

    impl<U, V, W> Clone for Path<U, V, W> {
        fn clone(&self) -> Self {
            Self {
                path: self.path.clone(),
                _a: std::marker::PhantomData,
                ..*self
            }
        }
    }

    impl<U: PoseidonArity, V: PoseidonArity, W: PoseidonArity> Circuit<Scalar> for Path<U, V, W> {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            // The leaf allocated by the caller, as a PoRep challenge's paths are.
            let leaf = nums(cs, &[self.leaf])?.remove(0);
            let value = Root::from_allocated::<CS>(leaf);
            let root = Root::Val(Some(self.root));
            if self.native {
                por::<U, V, W, _>(cs, value, self.path, root, self.private)
            } else {
                type Tree<U, V, W> = MerkleTreeWrapper<
                    PoseidonHasher,
                    DiskStore<<PoseidonHasher as Hasher>::Domain>,
                    U,
                    V,
                    W,
                >;
                PoRCircuit::<Tree<U, V, W>>::synthesize(
                    cs.namespace(|| "por"),
                    value,
                    AuthPath::<PoseidonHasher, U, V, W>::from(self.path),
                    root,
                    self.private,
                )
            }
        }
    }

    fn path_is_porcircuits<U: PoseidonArity, V: PoseidonArity, W: PoseidonArity>(base: usize) {
        let mut rng = ChaCha20Rng::seed_from_u64(base as u64);
        let mut path = Vec::new();
        let mut level = |arity: usize, rng: &mut ChaCha20Rng| {
            let siblings = random(arity - 1, rng).into_iter().map(Some).collect();
            let index = (rng.next_u32() as usize) % arity;
            path.push((siblings, Some(index)));
        };
        for _ in 0..base {
            level(U::to_usize(), &mut rng);
        }
        if V::to_usize() > 0 {
            level(V::to_usize(), &mut rng);
        }
        if W::to_usize() > 0 {
            level(W::to_usize(), &mut rng);
        }
        for private in [true, false] {
            let gadget = Path::<U, V, W> {
                leaf: Scalar::random(&mut rng),
                root: Scalar::random(&mut rng),
                path: path.clone(),
                private,
                native: false,
                _a: std::marker::PhantomData,
            };
            let native = Path {
                native: true,
                ..gadget.clone()
            };
            same(gadget, native);
        }
    }

    /// Every tree shape of Filecoin's sectors: 2 KiB (8-0-0), 32 GiB (8-8-0),
    /// 64 GiB (8-8-2), and a binary tree.
    #[test]
    fn native_path_is_storage_proofs_porcircuit_for_every_tree_shape() {
        path_is_porcircuits::<U8, U0, U0>(1);
        path_is_porcircuits::<U8, U8, U0>(9);
        path_is_porcircuits::<U8, U8, U2>(9);
        path_is_porcircuits::<U2, U0, U0>(5);
    }

    #[test]
    fn a_path_of_the_wrong_shape_is_an_error() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        // Binary levels in an octal tree.
        let path: RawPath = (0..3)
            .map(|_| (vec![Some(Scalar::random(&mut rng))], Some(1)))
            .collect();
        let circuit = Path::<U8, U0, U0> {
            leaf: Scalar::ONE,
            root: Scalar::ONE,
            path,
            private: true,
            native: true,
            _a: std::marker::PhantomData,
        };
        assert!(cuzk_synth::synthesize_witness(circuit).is_err());
        // A sub-tree level missing.
        let circuit = Path::<U8, U8, U2> {
            leaf: Scalar::ONE,
            root: Scalar::ONE,
            path: vec![(vec![Some(Scalar::ONE); 7], Some(0))],
            private: true,
            native: true,
            _a: std::marker::PhantomData,
        };
        assert!(cuzk_synth::synthesize_witness(circuit).is_err());
    }
}
