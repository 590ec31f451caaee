//! A PoSt partition's circuit, two ways: filecoin-proofs' own `FallbackPoStCircuit`
//! (what bellperson proves; the shape is compiled from its blank form), and the same
//! partition's witness as one part per sector, computed in parallel on the synthesis
//! pool ([`cuzk_synth::SplitCircuit`]) with each Poseidon hash computed natively
//! ([`crate::poseidon_witness`]).
//!
//! Why this is the same witness: `FallbackPoStCircuit::synthesize` allocates nothing
//! before its sectors and synthesizes each sector (`&Sector::synthesize`) in turn,
//! each reading only its own values: its `comm_r_last`, `comm_c` and `comm_r` (an
//! input), the hash binding them, then one `PoRCircuit` per challenge against
//! `comm_r_last`. [`SectorWitness`] allocates the same, in the same order, from the
//! same vanilla proof (`Sector::circuit`'s leaves and paths). Every sector of a
//! partition has one shape, so each part writes straight into its window of the
//! witness. cuzk-synth checks the counts against the compiled shape, and the tests
//! compare the witness with filecoin-proofs' circuit's.

use std::marker::PhantomData;

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::{self, FallbackPoStCircuit};

use crate::poseidon_witness::{hash2, is_poseidon, por, RawPath};

/// One PoSt partition.
pub(crate) struct PostCircuit<Tree: 'static + MerkleTreeTrait> {
    /// filecoin-proofs' circuit of the whole partition.
    pub whole: FallbackPoStCircuit<Tree>,
    /// Each sector alone, in the partition's order (padding included).
    pub sectors: Vec<SectorWitness<Tree>>,
}

/// One sector of a PoSt partition, for its witness only.
pub(crate) struct SectorWitness<Tree> {
    comm_r: Option<Scalar>,
    comm_c: Option<Scalar>,
    comm_r_last: Option<Scalar>,
    /// Per challenge, the leaf and its path in the sector's tree R.
    challenges: Vec<(Option<Scalar>, RawPath)>,
    _tree: PhantomData<Tree>,
}

impl<Tree: 'static + MerkleTreeTrait> PostCircuit<Tree> {
    /// The partition `whole` is, built by `FallbackPoStCompound::circuit` from
    /// `proof`: each sector's values as that circuit holds them, its paths as
    /// `Sector::circuit` read them (`SectorProof::as_options`).
    pub(crate) fn new(
        whole: FallbackPoStCircuit<Tree>,
        proof: &fallback::Proof<Tree::Proof>,
    ) -> Result<Self, String> {
        if whole.sectors.len() != proof.sectors.len() {
            return Err(format!(
                "{} sectors in the circuit, {} in the vanilla proof",
                whole.sectors.len(),
                proof.sectors.len()
            ));
        }
        let sectors = whole
            .sectors
            .iter()
            .zip(&proof.sectors)
            .map(|(s, p)| SectorWitness {
                comm_r: s.comm_r,
                comm_c: s.comm_c,
                comm_r_last: s.comm_r_last,
                challenges: s.leafs.iter().copied().zip(p.as_options()).collect(),
                _tree: PhantomData,
            })
            .collect();
        Ok(Self { whole, sectors })
    }
}

// By hand, as filecoin-proofs does for its circuits: a derive would ask `Tree: Clone`.
impl<Tree: 'static + MerkleTreeTrait> Clone for PostCircuit<Tree> {
    fn clone(&self) -> Self {
        Self {
            whole: self.whole.clone(),
            sectors: self.sectors.clone(),
        }
    }
}

impl<Tree> Clone for SectorWitness<Tree> {
    fn clone(&self) -> Self {
        Self {
            challenges: self.challenges.clone(),
            _tree: PhantomData,
            ..*self
        }
    }
}

/// The sequential synthesis: filecoin-proofs' whole circuit.
impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for PostCircuit<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.whole.synthesize(cs)
    }
}

/// `FallbackPoStCircuit` allocates nothing before its sectors.
pub(crate) struct NoPrefix;

impl Circuit<Scalar> for NoPrefix {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, _: &mut CS) -> Result<(), SynthesisError> {
        Ok(())
    }
}

impl<Tree: 'static + MerkleTreeTrait> cuzk_synth::SplitCircuit for PostCircuit<Tree> {
    type Prefix = NoPrefix;
    type Part = SectorWitness<Tree>;
    /// A partition's sectors have one shape.
    const UNIFORM_PARTS: bool = true;
    fn split(self) -> Result<(Self::Prefix, Vec<Self::Part>), SynthesisError> {
        Ok((NoPrefix, self.sectors))
    }
}

/// `&Sector::synthesize`, with the Poseidon hashes computed natively.
impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for SectorWitness<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        if !is_poseidon::<Tree::Hasher>() {
            return Err(SynthesisError::IoError(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a PoSt sector witness needs a Poseidon tree",
            )));
        }
        use bellperson::gadgets::num::AllocatedNum;
        let value = |v: Option<Scalar>| move || v.ok_or(SynthesisError::AssignmentMissing);
        let comm_r_last =
            AllocatedNum::alloc(cs.namespace(|| "comm_r_last"), value(self.comm_r_last))?;
        let comm_c = AllocatedNum::alloc(cs.namespace(|| "comm_c"), value(self.comm_c))?;
        let comm_r = AllocatedNum::alloc(cs.namespace(|| "comm_r"), value(self.comm_r))?;
        comm_r.inputize(cs.namespace(|| "comm_r_input"))?;
        let hash = hash2(cs, &comm_c, &comm_r_last)?;
        storage_proofs_core::gadgets::constraint::equal(cs, || "comm_r", &comm_r, &hash);
        for (leaf, path) in self.challenges {
            por::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity, _>(
                cs,
                Root::Val(leaf),
                path,
                Root::from_allocated::<CS>(comm_r_last.clone()),
                true,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::reference::WitnessPair;
    use crate::RegisteredPoStProof;

    /// The first partition of a shape-only PoSt of `proof`, cut to its first `keep`
    /// sectors (the whole witness of a 32 GiB partition is minutes on one core): the
    /// witness of filecoin-proofs' circuit and the split one, for the shape compiled
    /// from that circuit, are the same.
    fn split_is_filecoin_proofs_witness(proof: RegisteredPoStProof, keep: usize) {
        let pair = WitnessPair::post_partition(proof, keep).expect("pair");
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .expect("pool");
        let whole = pair.gadget().expect("whole");
        let split = pair.native(&pool).expect("split");
        assert_eq!(split.input, whole.input, "public inputs");
        assert!(split.aux == whole.aux, "aux values differ");
        assert!(whole.aux.len() > 5_000 * keep, "real sectors");
    }

    /// The 32 GiB shape (8-8-0 trees), three sectors of a WindowPoSt partition.
    #[test]
    fn split_window_post_witness_of_the_32gib_shape_is_filecoin_proofs_witness() {
        split_is_filecoin_proofs_witness(RegisteredPoStProof::StackedDrgWindow32GiBV1_2, 3);
    }

    /// The 64 GiB shape (8-8-2 trees: a top tree too), two sectors.
    #[test]
    fn split_window_post_witness_of_the_64gib_shape_is_filecoin_proofs_witness() {
        split_is_filecoin_proofs_witness(RegisteredPoStProof::StackedDrgWindow64GiBV1_2, 2);
    }

    /// A WinningPoSt's partition (its 66 challenges, each a sector of its own at
    /// 32 GiB), cut to three.
    #[test]
    fn split_winning_post_witness_of_the_32gib_shape_is_filecoin_proofs_witness() {
        split_is_filecoin_proofs_witness(RegisteredPoStProof::StackedDrgWinning32GiBV1, 3);
    }
}
