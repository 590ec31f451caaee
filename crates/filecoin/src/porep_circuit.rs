//! A PoRep partition's circuit, two ways: filecoin-proofs' own `StackedCircuit` of
//! all the partition's challenges (what bellperson proves, one core for ~40 s at
//! 32 GiB; the shape is compiled from it), and the same partition's witness as a
//! prefix and one part per challenge, computed in parallel
//! ([`cuzk_synth::SplitCircuit`]) with the labels' SHA-256 computed natively
//! ([`crate::porep_witness`]).
//!
//! Why this is the same witness: `StackedCircuit::synthesize` allocates a prefix
//! (replica id and its bits, comm_d, comm_r, comm_r_last, comm_c, and the hash that
//! binds comm_r to the last two), then walks the challenges, each of which reads
//! only the prefix's values. Each part allocates the same prefix, then its
//! challenge. cuzk-synth checks each part's prefix against filecoin-proofs' prefix,
//! value for value, and the counts against the compiled shape; the tests compare the
//! split witness with the sequential one.

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use filecoin_hashers::Hasher;
use filecoin_proofs::constants::DefaultPieceHasher;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::StackedCircuit;

use crate::porep_witness::ChallengeWitness;

type Domain<H> = <H as Hasher>::Domain;

/// One PoRep partition.
pub(crate) struct PorepCircuit<Tree: 'static + MerkleTreeTrait> {
    /// filecoin-proofs' circuit of the whole partition.
    pub whole: StackedCircuit<Tree, DefaultPieceHasher>,
    /// The prefix every challenge's circuit begins with.
    pub prefix: Prefix<Tree>,
    /// Each challenge alone, in the partition's order.
    pub challenges: Vec<ChallengeWitness<Tree>>,
}

/// The values `StackedCircuit` allocates before its challenges; synthesized by
/// filecoin-proofs' own `StackedCircuit::synthesize` with no challenge.
pub(crate) struct Prefix<Tree: MerkleTreeTrait> {
    pub replica_id: Domain<Tree::Hasher>,
    pub comm_d: Domain<DefaultPieceHasher>,
    pub comm_r: Domain<Tree::Hasher>,
    pub comm_r_last: Domain<Tree::Hasher>,
    pub comm_c: Domain<Tree::Hasher>,
}

// By hand, as filecoin-proofs does for its circuits: a derive would ask `Tree: Clone`.
impl<Tree: 'static + MerkleTreeTrait> Clone for PorepCircuit<Tree> {
    fn clone(&self) -> Self {
        Self {
            whole: self.whole.clone(),
            prefix: self.prefix.clone(),
            challenges: self.challenges.clone(),
        }
    }
}

impl<Tree: MerkleTreeTrait> Clone for Prefix<Tree> {
    fn clone(&self) -> Self {
        Self {
            replica_id: self.replica_id,
            comm_d: self.comm_d,
            comm_r: self.comm_r,
            comm_r_last: self.comm_r_last,
            comm_c: self.comm_c,
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for Prefix<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
            cs,
            Some(self.replica_id),
            Some(self.comm_d),
            Some(self.comm_r),
            Some(self.comm_r_last),
            Some(self.comm_c),
            Vec::new(),
        )
    }
}

/// The sequential synthesis: filecoin-proofs' whole circuit.
impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for PorepCircuit<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.whole.synthesize(cs)
    }
}

impl<Tree: 'static + MerkleTreeTrait> cuzk_synth::SplitCircuit for PorepCircuit<Tree> {
    type Prefix = Prefix<Tree>;
    type Part = ChallengeWitness<Tree>;
    /// A partition's challenges have one shape: each writes its witness straight
    /// into its window of the partition's.
    const UNIFORM_PARTS: bool = true;
    fn split(self) -> Result<(Self::Prefix, Vec<Self::Part>), SynthesisError> {
        Ok((self.prefix, self.challenges))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::{self, Partition, PartitionsUser};
    use crate::{PorepKind, RegisteredSealProof, SealCommitPhase1Output};
    use cuzk_synth::Witness;

    /// For the first `take` partitions: the whole circuit's witness (one thread) and
    /// the split one (a pool of three), both for the shape compiled from the circuit.
    struct Compare {
        take: usize,
    }
    impl PartitionsUser for Compare {
        type Out = Vec<(Witness, Witness)>;
        fn with<C: Circuit<Scalar> + cuzk_synth::SplitCircuit + Clone + Send + 'static>(
            self,
            partitions: Vec<Partition<C>>,
        ) -> Self::Out {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(3)
                .build()
                .expect("pool");
            partitions
                .into_iter()
                .take(self.take)
                .map(|p| {
                    let r1cs = cuzk_synth::compile_shape(p.circuit.clone()).expect("shape");
                    let whole = cuzk_synth::synthesize_witness_for(&r1cs, p.circuit.clone())
                        .expect("whole");
                    let split = cuzk_synth::synthesize_witness_split(&r1cs, p.circuit, &pool)
                        .expect("split");
                    (whole, split)
                })
                .collect()
        }
    }

    fn compare(c1: SealCommitPhase1Output, take: usize) {
        let kind = PorepKind::new(c1.registered_proof).expect("kind");
        let pairs = shape::with_partitions(&kind.config, c1, kind.name.clone(), Compare { take })
            .expect("partitions");
        assert_eq!(pairs.len(), take);
        for (whole, split) in pairs {
            assert_eq!(split.input, whole.input, "public inputs");
            assert!(split.aux == whole.aux, "aux values differ");
            assert!(whole.aux.len() > 1_000_000, "a real partition");
        }
    }

    #[test]
    fn split_witness_of_a_real_2kib_sector_is_filecoin_proofs_witness() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sector = crate::seal_test_sector(
            RegisteredSealProof::StackedDrg2KiBV1_1,
            crate::prover_id_from_miner(1000),
            3,
            5,
            dir.path(),
        )
        .expect("seal");
        compare(sector.c1, 1);
    }

    /// The 32 GiB shape (11 layers, 8-8-0 trees), each partition cut to its first
    /// three challenges so that the sequential witness stays seconds in CI.
    #[test]
    fn split_witness_of_the_32gib_shape_is_filecoin_proofs_witness() {
        let c1 = crate::shape_only_c1(RegisteredSealProof::StackedDrg32GiBV1_1, 9).expect("c1");
        let c1 = crate::reference::cut_challenges(c1, 3).expect("cut to 3 challenges");
        compare(c1, 1);
    }
}
