//! The references cuzk's proofs are compared with: bellperson's own prover on the
//! circuits filecoin-proofs builds (byte-identity at fixed `r, s`), and
//! filecoin-proofs' whole `seal_commit_phase2` (the peer in benchmarks).

use std::path::Path;

use blstrs::Scalar;

use crate::shape::{self, Partition, PartitionsUser};
use crate::{C1Input, FilecoinError, PorepKind};

/// Each partition proven by `bellperson::groth16::create_proof` at the given
/// `(r, s)`, with the parameters of `params_path`: N × 192 bytes, partition order.
pub fn prove_with_bellperson(
    input: &C1Input,
    params_path: &Path,
    blinding: &[(Scalar, Scalar)],
) -> Result<Vec<u8>, FilecoinError> {
    let kind = PorepKind::new(input.c1.registered_proof)?;
    let params =
        cuzk_params::read_params(params_path, cuzk_params::Validation::None).map_err(|source| {
            FilecoinError::ParamsRead {
                path: params_path.to_path_buf(),
                source,
            }
        })?;
    struct Prove<'a> {
        params: &'a cuzk_params::Parameters<blstrs::Bls12>,
        blinding: &'a [(Scalar, Scalar)],
    }
    impl PartitionsUser for Prove<'_> {
        type Out = Result<Vec<u8>, String>;
        fn with<
            C: bellpepper_core::Circuit<Scalar> + cuzk_synth::SplitCircuit + Clone + Send + 'static,
        >(
            self,
            partitions: Vec<Partition<C>>,
        ) -> Self::Out {
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
    shape::with_partitions(
        &kind.config,
        input.c1.clone(),
        kind.name.clone(),
        Prove {
            params: &params,
            blinding,
        },
    )?
    .map_err(|message| FilecoinError::Circuit {
        proof: kind.name,
        message,
    })
}

/// filecoin-proofs' own `seal_commit_phase2` (through filecoin-proofs-api, on the
/// CPU): what a provider runs today. Reads its parameters from
/// `FIL_PROOFS_PARAMETER_CACHE`, and verifies its proof itself.
pub fn filecoin_proofs_c2(
    input: &C1Input,
    prover_id: [u8; 32],
    sector: u64,
) -> Result<Vec<u8>, FilecoinError> {
    let name = input.proof_name();
    filecoin_proofs_api::seal::seal_commit_phase2(input.c1.clone(), prover_id, sector.into())
        .map(|o| o.proof)
        .map_err(|e| FilecoinError::Circuit {
            proof: name,
            message: format!("{e:#}"),
        })
}

/// filecoin-proofs' own `aggregate_seal_commit_proofs` (through filecoin-proofs-api)
/// of C2 outputs (interactive PoRep) or partition proofs (non-interactive PoRep, as
/// `seal_commit_phase2` aggregates one sector's): the reference for byte-identity.
pub fn filecoin_proofs_aggregate(
    registered: crate::RegisteredSealProof,
    aggregation: crate::RegisteredAggregationProof,
    comm_rs: &[[u8; 32]],
    seeds: &[[u8; 32]],
    proofs: &[Vec<u8>],
) -> Result<Vec<u8>, FilecoinError> {
    let outputs: Vec<_> = proofs
        .iter()
        .map(|p| filecoin_proofs_api::seal::SealCommitPhase2Output { proof: p.clone() })
        .collect();
    filecoin_proofs_api::seal::aggregate_seal_commit_proofs(
        registered,
        aggregation,
        comm_rs,
        seeds,
        &outputs,
    )
    .map_err(|e| FilecoinError::Aggregate(format!("{e:#}")))
}

/// A partition's witness two ways, for benchmarks: filecoin-proofs' circuit through
/// bellperson's gadgets (what every prover's synthesis runs), and cuzk's split
/// witness (PoRep: the labels' SHA-256 and the trees' Poseidon computed natively;
/// PoSt: each sector's Poseidon).
pub struct WitnessPair {
    /// The shape compiled from filecoin-proofs' circuit of the partition.
    pub r1cs: std::sync::Arc<cuzk_synth::R1cs>,
    gadget: Box<dyn Fn() -> WitnessResult>,
    native: Box<dyn Fn(&rayon::ThreadPool) -> WitnessResult>,
}

type WitnessResult = Result<cuzk_synth::Witness, cuzk_synth::SynthError>;

impl WitnessPair {
    /// The pair of `circuit`: the shape compiled from it, its whole witness and its
    /// split one.
    fn of<C>(circuit: C) -> Result<Self, cuzk_synth::SynthError>
    where
        C: bellpepper_core::Circuit<Scalar> + cuzk_synth::SplitCircuit + Clone + 'static,
    {
        let r1cs = std::sync::Arc::new(cuzk_synth::compile_shape(circuit.clone())?);
        let (g, n) = (circuit.clone(), circuit);
        let (shape, shape2) = (r1cs.clone(), r1cs.clone());
        Ok(WitnessPair {
            r1cs,
            gadget: Box::new(move || cuzk_synth::synthesize_witness_for(&shape, g.clone())),
            native: Box::new(move |pool| {
                cuzk_synth::synthesize_witness_split(&shape2, n.clone(), pool)
            }),
        })
    }

    /// The first partition of `c1`, cut to its first `challenges` challenges (a
    /// 32 GiB partition has 18; one or two keep a benchmark's samples short).
    pub fn first_partition(
        mut c1: crate::SealCommitPhase1Output,
        challenges: usize,
    ) -> Result<Self, FilecoinError> {
        let kind = PorepKind::new(c1.registered_proof)?;
        c1 = cut_challenges(c1, challenges).map_err(|message| FilecoinError::Circuit {
            proof: kind.name.clone(),
            message,
        })?;
        struct First;
        impl PartitionsUser for First {
            type Out = Result<WitnessPair, cuzk_synth::SynthError>;
            fn with<
                C: bellpepper_core::Circuit<Scalar>
                    + cuzk_synth::SplitCircuit
                    + Clone
                    + Send
                    + 'static,
            >(
                self,
                partitions: Vec<Partition<C>>,
            ) -> Self::Out {
                let Some(p) = partitions.into_iter().next() else {
                    return Err(cuzk_synth::SynthError::Circuit(
                        bellpepper_core::SynthesisError::AssignmentMissing,
                    ));
                };
                WitnessPair::of(p.circuit)
            }
        }
        shape::with_partitions(&kind.config, c1, kind.name.clone(), First)?.map_err(|e| {
            FilecoinError::Circuit {
                proof: kind.name,
                message: e.to_string(),
            }
        })
    }

    /// The first partition of a shape-only PoSt of `proof` (see
    /// [`crate::shape_only_post`]), cut to its first `sectors` sectors (a 32 GiB
    /// WindowPoSt partition has 2349).
    pub fn post_partition(
        proof: filecoin_proofs_api::RegisteredPoStProof,
        sectors: usize,
    ) -> Result<Self, FilecoinError> {
        let kind = crate::PostKind::new(proof)?;
        let inputs = crate::shape_only_post(proof, 1000, sectors, 1)?;
        let partition = (!kind.is_winning()).then_some(0);
        let public =
            crate::post::PostPublic::new(&kind, &inputs.randomness, inputs.prover_id, partition)?;
        with_sector_shape!(
            kind.size(),
            kind.name.clone(),
            post_pair,
            &kind,
            &public,
            &inputs.vanilla_proofs,
            sectors
        )
    }

    /// Partition `partition` of a shape-only SnapDeals update of `proof` (see
    /// [`crate::shape_only_snap`]), cut to its first `challenges` challenges (a
    /// 32 GiB partition has 86; the cut circuit is one of that many challenges, and
    /// only partition 0 keeps its challenges' values when cut: the circuit checks
    /// each new leaf's encoding, which the challenges' digests decide).
    pub fn snap_partition(
        proof: filecoin_proofs_api::RegisteredUpdateProof,
        partition: usize,
        challenges: usize,
    ) -> Result<Self, FilecoinError> {
        let request = crate::shape_only_snap(proof, 11)?;
        Self::snap_request_partition(&request, partition, challenges)
    }

    /// Partition `partition` of the update `request`, cut to its first `challenges`
    /// challenges (all of them where `challenges` is at least the partition's; see
    /// [`WitnessPair::snap_partition`] for partitions past the first).
    pub fn snap_request_partition(
        request: &crate::SnapRequest,
        partition: usize,
        challenges: usize,
    ) -> Result<Self, FilecoinError> {
        let kind = crate::UpdateKind::new(request.proof)?;
        let public = crate::snap::UpdatePublic::new(request)?;
        with_sector_shape!(
            u64::from(kind.config.sector_size),
            kind.name.clone(),
            snap_pair,
            &kind,
            &public,
            &request.vanilla_proofs,
            (partition, challenges)
        )
    }

    /// filecoin-proofs' circuit through bellperson's gadgets, on this thread.
    pub fn gadget(&self) -> Result<cuzk_synth::Witness, cuzk_synth::SynthError> {
        (self.gadget)()
    }

    /// cuzk's witness: the parts (PoRep's challenges, PoSt's sectors) in parallel on
    /// `pool`, SHA-256 and Poseidon natively.
    pub fn native(
        &self,
        pool: &rayon::ThreadPool,
    ) -> Result<cuzk_synth::Witness, cuzk_synth::SynthError> {
        (self.native)(pool)
    }
}

fn post_pair<Tree: 'static + storage_proofs_core::merkle::MerkleTreeTrait>(
    kind: &crate::PostKind,
    public: &crate::post::PostPublic,
    vanilla: &[Vec<u8>],
    sectors: usize,
) -> Result<WitnessPair, FilecoinError> {
    let mut c = crate::post::post_circuits::<Tree>(kind, public, vanilla)?
        .swap_remove(0)
        .circuit;
    c.whole.sectors.truncate(sectors.max(1));
    c.sectors.truncate(sectors.max(1));
    WitnessPair::of(c).map_err(|e| FilecoinError::Circuit {
        proof: kind.name.clone(),
        message: e.to_string(),
    })
}

fn snap_pair<
    Tree: 'static
        + storage_proofs_core::merkle::MerkleTreeTrait<
            Hasher = storage_proofs_update::constants::TreeRHasher,
        >,
>(
    kind: &crate::UpdateKind,
    public: &crate::snap::UpdatePublic,
    vanilla: &[Vec<u8>],
    (partition, challenges): (usize, usize),
) -> Result<WitnessPair, FilecoinError> {
    let fail = |message: String| FilecoinError::Circuit {
        proof: kind.name.clone(),
        message,
    };
    let mut all = crate::snap::snap_circuits::<Tree>(kind, public, vanilla)?;
    if partition >= all.len() {
        return Err(fail(format!("no partition {partition} of {}", all.len())));
    }
    let circuit = all.swap_remove(partition).circuit.cut(challenges);
    WitnessPair::of(circuit).map_err(|e| fail(e.to_string()))
}

/// `c1` with each partition cut to its first `challenges` challenges (at least one),
/// through the C1's own serde form, so that its circuits are built as for a real C1.
pub(crate) fn cut_challenges(
    c1: crate::SealCommitPhase1Output,
    challenges: usize,
) -> Result<crate::SealCommitPhase1Output, String> {
    let mut json = serde_json::to_value(&c1).map_err(|e| e.to_string())?;
    let per_shape = json["vanilla_proofs"]
        .as_object_mut()
        .and_then(|o| o.values_mut().next())
        .and_then(|v| v.as_array_mut())
        .ok_or("vanilla_proofs is not {shape: [[challenge proofs]]}")?;
    for partition in per_shape.iter_mut().filter_map(|p| p.as_array_mut()) {
        partition.truncate(challenges.max(1));
    }
    serde_json::from_value(json).map_err(|e| e.to_string())
}
