//! SnapDeals (empty-sector update) proofs from vanilla partition proofs: what
//! filecoin-proofs' `generate_empty_sector_update_proof_with_vanilla` returns, made
//! on cuzk's engine and checked with its `verify_empty_sector_update_proof`.
//!
//! The circuits, public inputs, parameter names and verifier are storage-proofs-update's
//! and filecoin-proofs' own: `EmptySectorUpdateCompound::circuit` and
//! `generate_public_inputs` per partition with the public inputs
//! `generate_empty_sector_update_proof_with_vanilla` builds, and the compound's own
//! cache identifier for the files (filecoin-proofs-api's
//! `RegisteredUpdateProof::cache_params_path` names the PoRep files instead).

use std::sync::Arc;

use blstrs::Scalar;
use cuzk::pipeline::{job, PartitionInput, PipelineEngine};
use cuzk::R1cs;
use cuzk_scheduler::Srs;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::constants::DefaultPieceDomain;
use filecoin_proofs::types::SectorUpdateConfig;
use filecoin_proofs::PoRepConfig;
use filecoin_proofs_api::RegisteredUpdateProof;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof,
    PublicInputs, PublicParams, SetupParams,
};

use crate::kind::{bytes32, CircuitKind, KindJob, Priority};
use crate::shape::{BlankUser, Partition};
use crate::snap_witness::SnapCircuit;
use crate::{Blinding, FilecoinError, FilecoinProver};

/// Every registered update proof, numbered as filecoin-proofs-api and Filecoin's Go
/// enum number them (0–4).
pub const ALL_UPDATE: [RegisteredUpdateProof; 5] = {
    use RegisteredUpdateProof::*;
    [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
    ]
};

/// The name of a registered update proof, as filecoin-proofs-api spells it.
pub fn update_proof_name(p: RegisteredUpdateProof) -> String {
    format!("{p:?}")
}

/// Parses a registered update proof by name (`StackedDrg2KiBV1`, also with Go's
/// `RegisteredUpdateProof_` prefix) or number (0–4).
pub fn parse_update_proof(text: &str) -> Result<RegisteredUpdateProof, FilecoinError> {
    crate::kind::parse_registered(
        text,
        "RegisteredUpdateProof_",
        &ALL_UPDATE,
        update_proof_name,
        "not the name or number of a registered update proof (0-4)",
    )
}

/// A registered update proof as this crate proves it.
#[derive(Clone, Debug)]
pub struct UpdateKind {
    pub registered: RegisteredUpdateProof,
    /// filecoin-proofs-api's configuration of the update (`as_v1_config`).
    pub config: PoRepConfig,
    pub name: String,
    /// `empty-sector-update-merkletree-poseidon_hasher-8-0-0-<hash>`: the update
    /// compound's own cache identifier.
    pub cache_id: String,
}

impl UpdateKind {
    pub fn new(registered: RegisteredUpdateProof) -> Result<Self, FilecoinError> {
        let name = update_proof_name(registered);
        let config = registered.as_v1_config();
        let size = u64::from(config.sector_size);
        let cache_id = with_sector_shape!(size, name.clone(), update_cache_id, size)?;
        Ok(Self {
            registered,
            config,
            name,
            cache_id,
        })
    }

    /// Partitions of one update proof (16 for 32 GiB).
    pub fn partitions(&self) -> usize {
        usize::from(SectorUpdateConfig::from_porep_config(&self.config).update_partitions)
    }

    /// Bytes of one proof: 192 per partition.
    pub fn proof_len(&self) -> usize {
        self.partitions() * crate::PARTITION_PROOF_LEN
    }

    fn size(&self) -> u64 {
        u64::from(self.config.sector_size)
    }
}

impl CircuitKind for UpdateKind {
    fn name(&self) -> &str {
        &self.name
    }
    fn cache_id(&self) -> &str {
        &self.cache_id
    }
    fn with_blank<U: BlankUser>(&self, user: U) -> Result<U::Out, FilecoinError> {
        with_sector_shape!(self.size(), self.name.clone(), blank[_], self.size(), user)
    }
}

fn update_cache_id<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: u64,
) -> Result<String, FilecoinError> {
    let pp = PublicParams::from_sector_size(size);
    Ok(<EmptySectorUpdateCompound<Tree> as CacheableParameters<
        EmptySectorUpdateCircuit<Tree>,
        PublicParams,
    >>::cache_identifier(&pp))
}

fn blank<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>, U: BlankUser>(
    size: u64,
    user: U,
) -> Result<U::Out, FilecoinError> {
    Ok(user.with(BlankUpdate::<Tree> {
        size,
        _tree: std::marker::PhantomData,
    }))
}

/// The update's blank circuit, made by the compound's `blank_circuit` when it is
/// synthesized: `EmptySectorUpdateCircuit` is not `Clone`, which parameter generation
/// (synthesizing the blank circuit more than once) needs.
struct BlankUpdate<Tree> {
    size: u64,
    _tree: std::marker::PhantomData<fn() -> Tree>,
}

impl<Tree> Clone for BlankUpdate<Tree> {
    fn clone(&self) -> Self {
        Self {
            size: self.size,
            _tree: std::marker::PhantomData,
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> bellpepper_core::Circuit<Scalar>
    for BlankUpdate<Tree>
{
    fn synthesize<CS: bellpepper_core::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellpepper_core::SynthesisError> {
        let pp = PublicParams::from_sector_size(self.size);
        <EmptySectorUpdateCompound<Tree> as CompoundProof<
            EmptySectorUpdate<Tree>,
            EmptySectorUpdateCircuit<Tree>,
        >>::blank_circuit(&pp)
        .synthesize(cs)
    }
}

/// One SnapDeals update proof to make.
#[derive(Clone, Debug)]
pub struct SnapRequest {
    pub proof: RegisteredUpdateProof,
    /// 32 bytes each, as filecoin-proofs' `Commitment`.
    pub comm_r_old: Vec<u8>,
    pub comm_r_new: Vec<u8>,
    pub comm_d_new: Vec<u8>,
    /// One bincode `PartitionProof` per partition, partition order (what
    /// filecoin-proofs-api's `generate_partition_proofs` returns).
    pub vanilla_proofs: Vec<Vec<u8>>,
    pub blinding: Blinding,
}

/// The commitments of an update, checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UpdatePublic {
    pub comm_r_old: [u8; 32],
    pub comm_r_new: [u8; 32],
    pub comm_d_new: [u8; 32],
}

impl UpdatePublic {
    pub(crate) fn new(r: &SnapRequest) -> Result<Self, FilecoinError> {
        Ok(Self {
            comm_r_old: bytes32("comm_r_old", &r.comm_r_old)?,
            comm_r_new: bytes32("comm_r_new", &r.comm_r_new)?,
            comm_d_new: bytes32("comm_d_new", &r.comm_d_new)?,
        })
    }
}

fn fail(kind: &UpdateKind) -> impl Fn(anyhow::Error) -> FilecoinError + '_ {
    move |e| FilecoinError::Circuit {
        proof: kind.name.clone(),
        message: format!("{e:#}"),
    }
}

/// A partition's circuit of the other kinds: filecoin-proofs' own (bellperson, the
/// reference prover, proves it) and what the engine computes its witness from.
pub(crate) trait KindCircuit: bellpepper_core::Circuit<Scalar> + Send + 'static {
    type Witness: cuzk_scheduler::WitnessSource + 'static;
    fn into_witness(self) -> Self::Witness;
}

/// An update's witness: its challenges in parallel on the synthesis pool, with their
/// SHA-256 and Poseidon computed natively (`snap_witness`).
impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> KindCircuit for SnapCircuit<Tree> {
    type Witness = cuzk::pipeline::SplitWitness<Self>;
    fn into_witness(self) -> Self::Witness {
        cuzk::pipeline::SplitWitness(self)
    }
}

/// The partitions `generate_empty_sector_update_proof_with_vanilla` proves (and the
/// PoSt kinds' `with_post_partitions`).
pub(crate) trait SnapPartitionsUser {
    type Out;
    fn with<C: KindCircuit>(self, partitions: Vec<Partition<C>>) -> Self::Out;
}

pub(crate) fn with_snap_partitions<U: SnapPartitionsUser>(
    kind: &UpdateKind,
    public: &UpdatePublic,
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

/// The vanilla partition proofs, decoded as filecoin-proofs-api decodes them and
/// checked for this sector size's shape and count.
fn decode_all<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    kind: &UpdateKind,
    vanilla: &[Vec<u8>],
) -> Result<Vec<PartitionProof<Tree>>, FilecoinError> {
    let n = kind.partitions();
    if vanilla.len() != n {
        return Err(FilecoinError::VanillaCount {
            proof: kind.name.clone(),
            expected: n,
            actual: vanilla.len(),
        });
    }
    let pp = PublicParams::from_sector_size(kind.size());
    let mut proofs: Vec<PartitionProof<Tree>> = Vec::with_capacity(n);
    for (index, bytes) in vanilla.iter().enumerate() {
        let p: PartitionProof<Tree> =
            bincode::deserialize(bytes).map_err(|e| FilecoinError::VanillaDecode {
                proof: kind.name.clone(),
                index,
                message: e.to_string(),
            })?;
        check_partition_shape(kind, &pp, index, &p)?;
        proofs.push(p);
    }
    Ok(proofs)
}

fn check_vanilla<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    kind: &UpdateKind,
    vanilla: &[Vec<u8>],
) -> Result<(), FilecoinError> {
    decode_all::<Tree>(kind, vanilla).map(|_| ())
}

fn partitions<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>, U: SnapPartitionsUser>(
    kind: &UpdateKind,
    public: &UpdatePublic,
    vanilla: &[Vec<u8>],
    user: U,
) -> Result<U::Out, FilecoinError> {
    Ok(user.with(snap_circuits::<Tree>(kind, public, vanilla)?))
}

/// The circuits `generate_empty_sector_update_proof_with_vanilla` proves, with their
/// public inputs.
pub(crate) fn snap_circuits<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    kind: &UpdateKind,
    public: &UpdatePublic,
    vanilla: &[Vec<u8>],
) -> Result<Vec<Partition<SnapCircuit<Tree>>>, FilecoinError> {
    let config = SectorUpdateConfig::from_porep_config(&kind.config);
    let n = usize::from(config.update_partitions);
    let proofs = decode_all::<Tree>(kind, vanilla)?;
    // The public inputs as `generate_empty_sector_update_proof_with_vanilla` builds them.
    let fail = fail(kind);
    let public_inputs = PublicInputs {
        k: n,
        comm_r_old: <TreeRHasher as Hasher>::Domain::try_from_bytes(&public.comm_r_old)
            .map_err(&fail)?,
        comm_d_new: DefaultPieceDomain::try_from_bytes(&public.comm_d_new).map_err(&fail)?,
        comm_r_new: <TreeRHasher as Hasher>::Domain::try_from_bytes(&public.comm_r_new)
            .map_err(&fail)?,
        h: config.h,
    };
    let setup = compound_proof::SetupParams {
        vanilla_params: SetupParams {
            sector_bytes: kind.size(),
        },
        partitions: Some(n),
        priority: false,
    };
    type Compound<T> = EmptySectorUpdateCompound<T>;
    let pub_params = <Compound<Tree> as CompoundProof<
        EmptySectorUpdate<Tree>,
        EmptySectorUpdateCircuit<Tree>,
    >>::setup(&setup)
    .map_err(&fail)?;
    let mut out = Vec::with_capacity(n);
    for (k, proof) in proofs.iter().enumerate() {
        let circuit = <Compound<Tree> as CompoundProof<
            EmptySectorUpdate<Tree>,
            EmptySectorUpdateCircuit<Tree>,
        >>::circuit(
            &public_inputs,
            (), // the update circuit has no private inputs beyond the vanilla proof
            proof,
            &pub_params.vanilla_params,
            Some(k),
        )
        .map_err(&fail)?;
        let inputs = <Compound<Tree> as CompoundProof<
            EmptySectorUpdate<Tree>,
            EmptySectorUpdateCircuit<Tree>,
        >>::generate_public_inputs(
            &public_inputs, &pub_params.vanilla_params, Some(k)
        )
        .map_err(&fail)?;
        out.push(Partition {
            circuit: SnapCircuit { whole: circuit },
            public_inputs: inputs,
        });
    }
    Ok(out)
}

/// A partition proof decoded as this size's type can still be another size's (the
/// same tree type serves 2 KiB, 8 MiB and 512 MiB): its counts and path lengths must
/// be this size's, or the circuit would not be the compiled one.
fn check_partition_shape<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    kind: &UpdateKind,
    pp: &PublicParams,
    index: usize,
    p: &PartitionProof<Tree>,
) -> Result<(), FilecoinError> {
    let shape = |message: String| FilecoinError::VanillaShape {
        proof: kind.name.clone(),
        index,
        message,
    };
    if p.apex_leafs.len() != pp.apex_leaf_count {
        return Err(shape(format!(
            "{} apex leaves, the sector size has {}",
            p.apex_leafs.len(),
            pp.apex_leaf_count
        )));
    }
    if p.challenge_proofs.len() != pp.challenge_count {
        return Err(shape(format!(
            "{} challenge proofs, the sector size has {}",
            p.challenge_proofs.len(),
            pp.challenge_count
        )));
    }
    let nodes = pp.sector_nodes;
    for c in &p.challenge_proofs {
        let lens = [
            (
                c.proof_r_old.path().len(),
                c.proof_r_old.expected_len(nodes),
            ),
            (
                c.proof_d_new.path().len(),
                c.proof_d_new.expected_len(nodes),
            ),
            (
                c.proof_r_new.path().len(),
                c.proof_r_new.expected_len(nodes),
            ),
        ];
        if let Some((got, want)) = lens.iter().find(|(g, w)| g != w) {
            return Err(shape(format!(
                "a Merkle path of {got} levels, the sector size's trees have {want}"
            )));
        }
    }
    Ok(())
}

/// filecoin-proofs' `verify_empty_sector_update_proof` on the proof bytes.
pub(crate) fn verify_update(
    kind: &UpdateKind,
    public: &UpdatePublic,
    proof: &[u8],
) -> Result<(), FilecoinError> {
    fn verify<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        cfg: &PoRepConfig,
        p: &UpdatePublic,
        proof: &[u8],
    ) -> Result<bool, FilecoinError> {
        filecoin_proofs::verify_empty_sector_update_proof::<Tree>(
            cfg,
            proof,
            p.comm_r_old,
            p.comm_r_new,
            p.comm_d_new,
        )
        .map_err(|e| FilecoinError::Verifier(format!("{e:#}")))
    }
    if proof.len() != kind.proof_len() {
        return Err(FilecoinError::ProofLength {
            proof: kind.name.clone(),
            expected: kind.proof_len(),
            actual: proof.len(),
        });
    }
    let ok = with_sector_shape!(
        kind.size(),
        kind.name.clone(),
        verify,
        &kind.config,
        public,
        proof
    )?;
    if ok {
        Ok(())
    } else {
        Err(FilecoinError::Rejected {
            proof: kind.name.clone(),
            verifier: "verify_empty_sector_update_proof",
        })
    }
}

/// Checks a SnapDeals request without proving it: the commitments' lengths and the
/// vanilla proofs' count, bincode and shape (what the daemon answers at submission).
pub fn check_snap_request(r: &SnapRequest) -> Result<(), FilecoinError> {
    let kind = UpdateKind::new(r.proof)?;
    UpdatePublic::new(r)?;
    with_sector_shape!(
        kind.size(),
        kind.name.clone(),
        check_vanilla,
        &kind,
        &r.vanilla_proofs
    )
}

/// Verifies SnapDeals proof bytes with filecoin-proofs (`cuzk snap verify`).
pub fn verify_snap_proof(request: &SnapRequest, proof: &[u8]) -> Result<(), FilecoinError> {
    let kind = UpdateKind::new(request.proof)?;
    verify_update(&kind, &UpdatePublic::new(request)?, proof)
}

/// Builds a job of `partitions` with `blinding`, as every kind's prepare does.
pub(crate) struct MakeJob {
    pub r1cs: Arc<R1cs>,
    pub srs: Arc<Srs>,
    pub blinding: Vec<(Scalar, Scalar)>,
}

impl MakeJob {
    pub(crate) fn make<C: KindCircuit>(
        self,
        partitions: Vec<Partition<C>>,
    ) -> cuzk_scheduler::JobSpec {
        let parts = partitions
            .into_iter()
            .zip(self.blinding)
            .map(|(p, (r, s))| PartitionInput {
                circuit: p.circuit.into_witness(),
                r,
                s,
                public_inputs: p.public_inputs,
            })
            .collect();
        job(self.r1cs, self.srs, parts, None)
    }
}

impl SnapPartitionsUser for MakeJob {
    type Out = cuzk_scheduler::JobSpec;
    fn with<C: KindCircuit>(self, partitions: Vec<Partition<C>>) -> Self::Out {
        self.make(partitions)
    }
}

impl FilecoinProver {
    /// Builds a SnapDeals update's partitions exactly as
    /// `generate_empty_sector_update_proof_with_vanilla` does and submits them as one
    /// job (`Priority::Normal` unless the caller says otherwise). The job's `wait`
    /// returns the bytes that function returns, verified with
    /// `verify_empty_sector_update_proof`.
    pub fn submit_snap(
        &self,
        engine: &PipelineEngine,
        request: SnapRequest,
        priority: Priority,
    ) -> Result<KindJob, FilecoinError> {
        let kind = UpdateKind::new(request.proof)?;
        let public = UpdatePublic::new(&request)?;
        // The inputs are checked before any parameters are loaded.
        with_sector_shape!(
            kind.size(),
            kind.name.clone(),
            check_vanilla,
            &kind,
            &request.vanilla_proofs
        )?;
        let vanilla = request.vanilla_proofs;
        self.submit_kind(
            engine,
            &kind,
            kind.partitions(),
            request.blinding,
            priority,
            |make| with_snap_partitions(&kind, &public, &vanilla, make),
            {
                let kind = kind.clone();
                Box::new(move |proof: &[u8]| verify_update(&kind, &public, proof))
            },
        )
    }
}
