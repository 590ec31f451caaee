//! WindowPoSt (one partition) and WinningPoSt from vanilla sector proofs: the bytes
//! filecoin-proofs' `generate_single_window_post_with_vanilla` and
//! `generate_winning_post_with_vanilla` return, made on cuzk's engine.
//!
//! Everything is filecoin-proofs' own: the partitioned vanilla proof
//! (`single_partition_vanilla_proofs`, `partition_vanilla_proofs`, which also check
//! the vanilla proofs against the challenges), `FallbackPoStCompound::circuit` and
//! `generate_public_inputs` at the partition those functions prove, the
//! `PoStConfig` cache identifier for the files, and the verifiers:
//! `verify_winning_post`, and for one WindowPoSt partition `FallbackPoStCompound::verify`
//! with the public inputs the proof was made for (filecoin-proofs' `verify_window_post`
//! takes a whole deadline's proof) and the verifying key read by filecoin-proofs'
//! parameter cache.
//!
//! A PoSt proof does not bind the prover id (it only selects WinningPoSt's challenged
//! sector), so a wrong miner id does not make a PoSt proof fail to verify.

use bellperson::groth16::prepare_verifying_key;
use cuzk::pipeline::PipelineEngine;
use filecoin_hashers::Hasher;
use filecoin_proofs::parameters::{
    window_post_public_params, window_post_setup_params, winning_post_public_params,
    winning_post_setup_params,
};
use filecoin_proofs::{
    as_safe_commitment, get_num_partition_for_fallback_post, partition_vanilla_proofs,
    single_partition_vanilla_proofs, FallbackPoStSectorProof, PoStConfig, PoStType,
    PublicReplicaInfo,
};
use filecoin_proofs_api::RegisteredPoStProof;
use rand::rngs::OsRng;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::multi_proof::MultiProof;
use storage_proofs_core::sector::SectorId;
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector,
};

use crate::kind::{bytes32, CircuitKind, KindJob, Priority, Verify};
use crate::post_circuit::PostCircuit;
use crate::shape::{BlankUser, Partition};
use crate::snap::{KindCircuit, SnapPartitionsUser};
use crate::{Blinding, FilecoinError, FilecoinProver};

/// Every registered PoSt proof of filecoin-proofs-api, in its order: 0–4 Winning,
/// 5–9 Window V1, 10–14 Window V1_2 (numbered 10–14 `…V1_1` by Filecoin's Go enum).
pub const ALL_POST: [RegisteredPoStProof; 15] = {
    use RegisteredPoStProof::*;
    [
        StackedDrgWinning2KiBV1,
        StackedDrgWinning8MiBV1,
        StackedDrgWinning512MiBV1,
        StackedDrgWinning32GiBV1,
        StackedDrgWinning64GiBV1,
        StackedDrgWindow2KiBV1,
        StackedDrgWindow8MiBV1,
        StackedDrgWindow512MiBV1,
        StackedDrgWindow32GiBV1,
        StackedDrgWindow64GiBV1,
        StackedDrgWindow2KiBV1_2,
        StackedDrgWindow8MiBV1_2,
        StackedDrgWindow512MiBV1_2,
        StackedDrgWindow32GiBV1_2,
        StackedDrgWindow64GiBV1_2,
    ]
};

/// The most partitions a WindowPoSt deadline holds (Filecoin's builtin-actors policy
/// `max_partitions_per_deadline`, 3000): a partition index must be below it.
pub const MAX_PARTITIONS_PER_DEADLINE: usize = 3000;

/// The name of a registered PoSt proof, as filecoin-proofs-api spells it.
pub fn post_proof_name(p: RegisteredPoStProof) -> String {
    format!("{p:?}")
}

/// Parses a registered PoSt proof by filecoin-proofs-api's name
/// (`StackedDrgWindow32GiBV1_2`), Filecoin's Go name (`StackedDrgWindow32GiBV1_1`,
/// optionally prefixed `RegisteredPoStProof_`), which is filecoin-proofs' `V1_2`, or
/// the Go enum's number (0–14; 10–14 are those `V1_1` = `V1_2` types).
pub fn parse_post_proof(text: &str) -> Result<RegisteredPoStProof, FilecoinError> {
    let t = text.trim();
    let t = t.strip_prefix("RegisteredPoStProof_").unwrap_or(t);
    let go_v1_1 = t
        .strip_prefix("StackedDrgWindow")
        .and_then(|rest| rest.strip_suffix("V1_1"))
        .map(|size| format!("StackedDrgWindow{size}V1_2"));
    crate::kind::parse_registered(
        go_v1_1.as_deref().unwrap_or(t),
        "",
        &ALL_POST,
        post_proof_name,
        "not the name or number of a registered PoSt proof (0-14)",
    )
    // The error names what the caller gave, not its Go V1_1 spelling.
    .map_err(|e| match e {
        FilecoinError::Unsupported { reason, .. } => FilecoinError::Unsupported {
            proof: text.to_string(),
            reason,
        },
        e => e,
    })
}

/// A registered PoSt proof as this crate proves it.
#[derive(Clone, Debug)]
pub struct PostKind {
    pub registered: RegisteredPoStProof,
    /// filecoin-proofs-api's configuration (`as_v1_config`).
    pub config: PoStConfig,
    pub name: String,
    /// `proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-<hash>`.
    pub cache_id: String,
}

impl PostKind {
    pub fn new(registered: RegisteredPoStProof) -> Result<Self, FilecoinError> {
        let name = post_proof_name(registered);
        let config = registered.as_v1_config();
        let size = u64::from(config.sector_size);
        let cache_id = with_sector_shape!(size, name.clone(), post_cache_id, &config, &name)?;
        Ok(Self {
            registered,
            config,
            name,
            cache_id,
        })
    }

    pub fn is_winning(&self) -> bool {
        self.config.typ == PoStType::Winning
    }

    /// Sectors one partition proves (WindowPoSt: 2349 for 32 GiB; WinningPoSt: 1).
    pub fn sectors_per_partition(&self) -> usize {
        self.config.sector_count
    }

    /// WinningPoSt [`Priority::Critical`] (it must land within an epoch), WindowPoSt
    /// [`Priority::High`].
    pub fn default_priority(&self) -> Priority {
        if self.is_winning() {
            Priority::Critical
        } else {
            Priority::High
        }
    }

    pub(crate) fn size(&self) -> u64 {
        u64::from(self.config.sector_size)
    }
}

impl CircuitKind for PostKind {
    fn name(&self) -> &str {
        &self.name
    }
    fn cache_id(&self) -> &str {
        &self.cache_id
    }
    fn with_blank<U: BlankUser>(&self, user: U) -> Result<U::Out, FilecoinError> {
        with_sector_shape!(self.size(), self.name.clone(), blank[_], self, user)
    }
}

fn text(e: anyhow::Error) -> String {
    format!("{e:#}")
}

fn post_cache_id<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    name: &str,
) -> Result<String, FilecoinError> {
    config
        .get_cache_identifier::<Tree>()
        .map_err(|e| FilecoinError::Circuit {
            proof: name.to_string(),
            message: text(e),
        })
}

fn public_params<Tree: 'static + MerkleTreeTrait>(
    kind: &PostKind,
) -> Result<fallback::PublicParams, FilecoinError> {
    let pp = if kind.is_winning() {
        winning_post_public_params::<Tree>(&kind.config)
    } else {
        window_post_public_params::<Tree>(&kind.config)
    };
    pp.map_err(|e| FilecoinError::Circuit {
        proof: kind.name.clone(),
        message: text(e),
    })
}

fn blank<Tree: 'static + MerkleTreeTrait, U: BlankUser>(
    kind: &PostKind,
    user: U,
) -> Result<U::Out, FilecoinError> {
    let pp = public_params::<Tree>(kind)?;
    let circuit = <FallbackPoStCompound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::blank_circuit(&pp);
    Ok(user.with(circuit))
}

/// One WindowPoSt partition to prove.
#[derive(Clone, Debug)]
pub struct WindowPostRequest {
    pub proof: RegisteredPoStProof,
    /// 32 bytes (the chain's randomness for the deadline).
    pub randomness: Vec<u8>,
    /// From the miner id, as for PoRep ([`crate::prover_id_from_miner`]).
    pub prover_id: [u8; 32],
    /// Below [`MAX_PARTITIONS_PER_DEADLINE`].
    pub partition_index: usize,
    /// One bincode `FallbackPoStSectorProof` per sector of the partition (what
    /// filecoin-proofs-api's `generate_single_vanilla_proof` returns), at most
    /// [`PostKind::sectors_per_partition`].
    pub vanilla_proofs: Vec<Vec<u8>>,
    pub blinding: Blinding,
}

/// One WinningPoSt to prove.
#[derive(Clone, Debug)]
pub struct WinningPostRequest {
    pub proof: RegisteredPoStProof,
    pub randomness: Vec<u8>,
    pub prover_id: [u8; 32],
    /// One bincode `FallbackPoStSectorProof` per challenged sector (one).
    pub vanilla_proofs: Vec<Vec<u8>>,
    pub blinding: Blinding,
}

/// What a PoSt proof is checked against.
#[derive(Clone, Debug)]
pub(crate) struct PostPublic {
    pub randomness: [u8; 32],
    pub prover_id: [u8; 32],
    /// `Some` for WindowPoSt.
    pub partition_index: Option<usize>,
}

impl PostPublic {
    pub(crate) fn new(
        kind: &PostKind,
        randomness: &[u8],
        prover_id: [u8; 32],
        partition_index: Option<usize>,
    ) -> Result<Self, FilecoinError> {
        match (kind.is_winning(), partition_index) {
            (true, Some(_)) | (false, None) => {
                return Err(FilecoinError::Unsupported {
                    proof: kind.name.clone(),
                    reason: if kind.is_winning() {
                        "a WinningPoSt proof type, not a WindowPoSt one"
                    } else {
                        "a WindowPoSt proof type, not a WinningPoSt one"
                    },
                })
            }
            (false, Some(index)) if index >= MAX_PARTITIONS_PER_DEADLINE => {
                return Err(FilecoinError::PartitionIndex {
                    index,
                    limit: MAX_PARTITIONS_PER_DEADLINE,
                })
            }
            _ => {}
        }
        Ok(Self {
            randomness: bytes32("randomness", randomness)?,
            prover_id,
            partition_index,
        })
    }
}

/// Runs a user with the circuits and public inputs of a PoSt, or verifies one: both
/// need the same decoded vanilla proofs and public inputs.
struct Decoded<Tree: 'static + MerkleTreeTrait> {
    setup: compound_proof::SetupParams<'static, FallbackPoSt<'static, Tree>>,
    pub_inputs: fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>,
    vanilla: Vec<FallbackPoStSectorProof<Tree>>,
}

fn decode<Tree: 'static + MerkleTreeTrait>(
    kind: &PostKind,
    public: &PostPublic,
    vanilla: &[Vec<u8>],
) -> Result<Decoded<Tree>, FilecoinError> {
    let fail = |e: anyhow::Error| FilecoinError::Circuit {
        proof: kind.name.clone(),
        message: text(e),
    };
    let per_partition = kind.config.sector_count;
    let count_ok = if kind.is_winning() {
        vanilla.len() == per_partition
    } else {
        (1..=per_partition).contains(&vanilla.len())
    };
    if !count_ok {
        return Err(FilecoinError::VanillaCount {
            proof: kind.name.clone(),
            expected: per_partition,
            actual: vanilla.len(),
        });
    }
    let nodes = (kind.size() / 32) as usize;
    let mut proofs: Vec<FallbackPoStSectorProof<Tree>> = Vec::with_capacity(vanilla.len());
    for (index, bytes) in vanilla.iter().enumerate() {
        let p: FallbackPoStSectorProof<Tree> =
            bincode::deserialize(bytes).map_err(|e| FilecoinError::VanillaDecode {
                proof: kind.name.clone(),
                index,
                message: e.to_string(),
            })?;
        let shape = |message: String| FilecoinError::VanillaShape {
            proof: kind.name.clone(),
            index,
            message,
        };
        for s in &p.vanilla_proof.sectors {
            if s.inclusion_proofs.len() != kind.config.challenge_count {
                return Err(shape(format!(
                    "{} inclusion proofs, the proof type challenges {}",
                    s.inclusion_proofs.len(),
                    kind.config.challenge_count
                )));
            }
            if let Some(m) = s
                .inclusion_proofs
                .iter()
                .find(|m| m.path().len() != m.expected_len(nodes))
            {
                return Err(shape(format!(
                    "a Merkle path of {} levels, the sector size's tree has {}",
                    m.path().len(),
                    m.expected_len(nodes)
                )));
            }
        }
        proofs.push(p);
    }
    let randomness = as_safe_commitment(&public.randomness, "randomness").map_err(fail)?;
    let prover_id = as_safe_commitment(&public.prover_id, "prover_id").map_err(fail)?;
    let setup = if kind.is_winning() {
        compound_proof::SetupParams {
            vanilla_params: winning_post_setup_params(&kind.config).map_err(fail)?,
            partitions: None,
            priority: kind.config.priority,
        }
    } else {
        let n = get_num_partition_for_fallback_post(&kind.config, proofs.len());
        compound_proof::SetupParams {
            vanilla_params: window_post_setup_params(&kind.config),
            partitions: (n > 1).then_some(n),
            priority: kind.config.priority,
        }
    };
    let pub_inputs = fallback::PublicInputs {
        randomness,
        prover_id,
        sectors: proofs
            .iter()
            .map(|p| PublicSector {
                id: p.sector_id,
                comm_r: p.comm_r,
            })
            .collect(),
        k: public.partition_index,
    };
    Ok(Decoded {
        setup,
        pub_inputs,
        vanilla: proofs,
    })
}

fn validate<Tree: 'static + MerkleTreeTrait>(
    kind: &PostKind,
    public: &PostPublic,
    vanilla: &[Vec<u8>],
) -> Result<(), FilecoinError> {
    decode::<Tree>(kind, public, vanilla).map(|_| ())
}

pub(crate) fn with_post_partitions<U: SnapPartitionsUser>(
    kind: &PostKind,
    public: &PostPublic,
    vanilla: &[Vec<u8>],
    user: U,
) -> Result<U::Out, FilecoinError> {
    with_sector_shape!(
        kind.size(),
        kind.name.clone(),
        partitions[_],
        kind,
        public,
        vanilla,
        user
    )
}

/// A PoSt partition's witness: its sectors in parallel on the synthesis pool, each
/// with its Poseidon hashes computed natively (`post_circuit`).
impl<Tree: 'static + MerkleTreeTrait> KindCircuit for PostCircuit<Tree> {
    type Witness = cuzk::pipeline::SplitWitness<Self>;
    fn into_witness(self) -> Self::Witness {
        cuzk::pipeline::SplitWitness(self)
    }
}

/// The circuits `generate_single_window_post_with_vanilla` or
/// `generate_winning_post_with_vanilla` proves, with their public inputs.
fn partitions<Tree: 'static + MerkleTreeTrait, U: SnapPartitionsUser>(
    kind: &PostKind,
    public: &PostPublic,
    vanilla: &[Vec<u8>],
    user: U,
) -> Result<U::Out, FilecoinError> {
    Ok(user.with(post_circuits::<Tree>(kind, public, vanilla)?))
}

pub(crate) fn post_circuits<Tree: 'static + MerkleTreeTrait>(
    kind: &PostKind,
    public: &PostPublic,
    vanilla: &[Vec<u8>],
) -> Result<Vec<Partition<PostCircuit<Tree>>>, FilecoinError> {
    let fail = |e: anyhow::Error| FilecoinError::Circuit {
        proof: kind.name.clone(),
        message: text(e),
    };
    let d = decode::<Tree>(kind, public, vanilla)?;
    type Compound<T> = FallbackPoStCompound<T>;
    let pub_params = <Compound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::setup(&d.setup)
    .map_err(fail)?;
    let vp = &pub_params.vanilla_params;
    // filecoin-proofs' own partitioning, which also checks the vanilla proofs against
    // the challenges of this randomness (a proof that fails is refused here).
    let partitioned = if crate::kinds_shape_only::is_shape_only_marker(&public.randomness) {
        // Random values: filecoin-proofs' partitioning would refuse them.
        Ok(vec![shape_only_partition(kind, vp, &d.vanilla)])
    } else if kind.is_winning() {
        let n = pub_params.partitions.unwrap_or(1);
        partition_vanilla_proofs(&kind.config, vp, &d.pub_inputs, n, &d.vanilla)
    } else {
        single_partition_vanilla_proofs(&kind.config, vp, &d.pub_inputs, &d.vanilla)
            .map(|p| vec![p])
    }
    .map_err(|e| FilecoinError::VanillaRejected {
        proof: kind.name.clone(),
        message: text(e),
    })?;
    let mut out = Vec::with_capacity(partitioned.len());
    // `prove_with_vanilla` numbers the partitions it is given from 0.
    for (k, proof) in partitioned.iter().enumerate() {
        let circuit = <Compound<Tree> as CompoundProof<
            FallbackPoSt<'_, Tree>,
            FallbackPoStCircuit<Tree>,
        >>::circuit(&d.pub_inputs, Default::default(), proof, vp, Some(k))
        .map_err(fail)?;
        let inputs = <Compound<Tree> as CompoundProof<
            FallbackPoSt<'_, Tree>,
            FallbackPoStCircuit<Tree>,
        >>::generate_public_inputs(&d.pub_inputs, vp, Some(k))
        .map_err(fail)?;
        let circuit =
            PostCircuit::new(circuit, proof).map_err(|message| FilecoinError::Circuit {
                proof: kind.name.clone(),
                message,
            })?;
        out.push(Partition {
            circuit,
            public_inputs: inputs,
        });
    }
    Ok(out)
}

/// The partition of a shape-only PoSt (see `kinds_shape_only`): its sectors laid out
/// as filecoin-proofs' `single_partition_vanilla_proofs` lays them out (WinningPoSt:
/// each challenge's inclusion proof a sector of its own), padded by repeating the last,
/// without its check against the challenges, which random values cannot pass.
fn shape_only_partition<Tree: 'static + MerkleTreeTrait>(
    kind: &PostKind,
    vp: &fallback::PublicParams,
    vanilla: &[FallbackPoStSectorProof<Tree>],
) -> fallback::Proof<Tree::Proof> {
    let mut sectors: Vec<fallback::SectorProof<Tree::Proof>> = Vec::new();
    for p in vanilla {
        for s in &p.vanilla_proof.sectors {
            if kind.is_winning() {
                sectors.extend(s.inclusion_proofs.iter().map(|m| fallback::SectorProof {
                    inclusion_proofs: vec![m.clone()],
                    comm_c: s.comm_c,
                    comm_r_last: s.comm_r_last,
                }));
            } else {
                sectors.push(s.clone());
            }
        }
    }
    while let (true, Some(last)) = (sectors.len() < vp.sector_count, sectors.last()) {
        let last = last.clone();
        sectors.push(last);
    }
    fallback::Proof { sectors }
}

/// filecoin-proofs' verdict on PoSt proof bytes (see the module's docs for which
/// verifier each kind uses).
pub(crate) fn verify_post(
    kind: &PostKind,
    public: &PostPublic,
    vanilla: &[Vec<u8>],
    proof: &[u8],
) -> Result<(), FilecoinError> {
    if proof.len() != crate::PARTITION_PROOF_LEN {
        return Err(FilecoinError::ProofLength {
            proof: kind.name.clone(),
            expected: crate::PARTITION_PROOF_LEN,
            actual: proof.len(),
        });
    }
    let ok = with_sector_shape!(
        kind.size(),
        kind.name.clone(),
        verify,
        kind,
        public,
        vanilla,
        proof
    )?;
    if ok {
        Ok(())
    } else {
        Err(FilecoinError::Rejected {
            proof: kind.name.clone(),
            verifier: if kind.is_winning() {
                "verify_winning_post"
            } else {
                "FallbackPoStCompound::verify"
            },
        })
    }
}

fn verify<Tree: 'static + MerkleTreeTrait>(
    kind: &PostKind,
    public: &PostPublic,
    vanilla: &[Vec<u8>],
    proof: &[u8],
) -> Result<bool, FilecoinError> {
    let verifier = |e: anyhow::Error| FilecoinError::Verifier(text(e));
    let d = decode::<Tree>(kind, public, vanilla)?;
    if kind.is_winning() {
        let replicas = d
            .vanilla
            .iter()
            .map(|p| {
                let mut comm_r = [0u8; 32];
                comm_r.copy_from_slice(p.comm_r.as_ref());
                Ok((p.sector_id, PublicReplicaInfo::new(comm_r)?))
            })
            .collect::<anyhow::Result<Vec<(SectorId, PublicReplicaInfo)>>>()
            .map_err(verifier)?;
        return filecoin_proofs::verify_winning_post::<Tree>(
            &kind.config,
            &public.randomness,
            &replicas,
            public.prover_id,
            proof,
        )
        .map_err(verifier);
    }
    type Compound<T> = FallbackPoStCompound<T>;
    let pub_params = <Compound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::setup(&d.setup)
    .map_err(verifier)?;
    let vk = <Compound<Tree> as CompoundProof<
        FallbackPoSt<'_, Tree>,
        FallbackPoStCircuit<Tree>,
    >>::verifying_key::<OsRng>(None, &public_params::<Tree>(kind)?)
    .map_err(verifier)?;
    let pvk = prepare_verifying_key(&vk);
    let multi = MultiProof::new_from_bytes(d.setup.partitions, proof, &pvk).map_err(verifier)?;
    <Compound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::verify(
        &pub_params,
        &d.pub_inputs,
        &multi,
        &fallback::ChallengeRequirements {
            minimum_challenge_count: kind.config.challenge_count * kind.config.sector_count,
        },
    )
    .map_err(verifier)
}

/// Checks a WindowPoSt request without proving it: the proof type, the lengths, the
/// partition index, and the vanilla proofs' count, bincode and shape (what the
/// daemon answers at submission).
pub fn check_window_post_request(r: &WindowPostRequest) -> Result<(), FilecoinError> {
    check_post(
        r.proof,
        &r.randomness,
        r.prover_id,
        Some(r.partition_index),
        &r.vanilla_proofs,
    )
}

/// [`check_window_post_request`] for a WinningPoSt.
pub fn check_winning_post_request(r: &WinningPostRequest) -> Result<(), FilecoinError> {
    check_post(r.proof, &r.randomness, r.prover_id, None, &r.vanilla_proofs)
}

fn check_post(
    proof: RegisteredPoStProof,
    randomness: &[u8],
    prover_id: [u8; 32],
    partition: Option<usize>,
    vanilla_proofs: &[Vec<u8>],
) -> Result<(), FilecoinError> {
    let kind = PostKind::new(proof)?;
    let public = PostPublic::new(&kind, randomness, prover_id, partition)?;
    with_sector_shape!(
        kind.size(),
        kind.name.clone(),
        validate,
        &kind,
        &public,
        vanilla_proofs
    )
}

/// Verifies a WindowPoSt partition proof (`cuzk post window verify`).
pub fn verify_window_post_partition(
    request: &WindowPostRequest,
    proof: &[u8],
) -> Result<(), FilecoinError> {
    let kind = PostKind::new(request.proof)?;
    let public = PostPublic::new(
        &kind,
        &request.randomness,
        request.prover_id,
        Some(request.partition_index),
    )?;
    verify_post(&kind, &public, &request.vanilla_proofs, proof)
}

/// Verifies a WinningPoSt proof (`cuzk post winning verify`).
pub fn verify_winning_post_proof(
    request: &WinningPostRequest,
    proof: &[u8],
) -> Result<(), FilecoinError> {
    let kind = PostKind::new(request.proof)?;
    let public = PostPublic::new(&kind, &request.randomness, request.prover_id, None)?;
    verify_post(&kind, &public, &request.vanilla_proofs, proof)
}

impl FilecoinProver {
    /// Proves one WindowPoSt partition as `generate_single_window_post_with_vanilla`
    /// does (192 bytes), verified before `wait` returns them.
    pub fn submit_window_post(
        &self,
        engine: &PipelineEngine,
        request: WindowPostRequest,
        priority: Priority,
    ) -> Result<KindJob, FilecoinError> {
        let kind = PostKind::new(request.proof)?;
        let public = PostPublic::new(
            &kind,
            &request.randomness,
            request.prover_id,
            Some(request.partition_index),
        )?;
        self.submit_post(
            engine,
            kind,
            public,
            request.vanilla_proofs,
            request.blinding,
            priority,
        )
    }

    /// Proves a WinningPoSt as `generate_winning_post_with_vanilla` does (192 bytes),
    /// verified with `verify_winning_post` before `wait` returns them.
    pub fn submit_winning_post(
        &self,
        engine: &PipelineEngine,
        request: WinningPostRequest,
        priority: Priority,
    ) -> Result<KindJob, FilecoinError> {
        let kind = PostKind::new(request.proof)?;
        let public = PostPublic::new(&kind, &request.randomness, request.prover_id, None)?;
        self.submit_post(
            engine,
            kind,
            public,
            request.vanilla_proofs,
            request.blinding,
            priority,
        )
    }

    fn submit_post(
        &self,
        engine: &PipelineEngine,
        kind: PostKind,
        public: PostPublic,
        vanilla: Vec<Vec<u8>>,
        blinding: Blinding,
        priority: Priority,
    ) -> Result<KindJob, FilecoinError> {
        // The inputs are checked before any parameters are loaded.
        with_sector_shape!(
            kind.size(),
            kind.name.clone(),
            validate,
            &kind,
            &public,
            &vanilla
        )?;
        // Shared by the job's builder and its verifier (a 32 GiB partition's vanilla
        // proofs are large: not copied).
        let vanilla = std::sync::Arc::new(vanilla);
        let verify: Verify = {
            let (kind, public, vanilla) = (kind.clone(), public.clone(), vanilla.clone());
            Box::new(move |proof: &[u8]| verify_post(&kind, &public, &vanilla, proof))
        };
        self.submit_kind(
            engine,
            &kind,
            1,
            blinding,
            priority,
            |make| with_post_partitions(&kind, &public, &vanilla, make),
            verify,
        )
    }
}

/// The partitions' circuits, for the reference prover.
pub(crate) fn post_partitions_for<U: SnapPartitionsUser>(
    request_kind: &PostKind,
    randomness: &[u8],
    prover_id: [u8; 32],
    partition_index: Option<usize>,
    vanilla: &[Vec<u8>],
    user: U,
) -> Result<U::Out, FilecoinError> {
    let public = PostPublic::new(request_kind, randomness, prover_id, partition_index)?;
    with_post_partitions(request_kind, &public, vanilla, user)
}
