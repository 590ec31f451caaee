//! The one place that names sector shapes: dispatch on the sector size to code
//! generic over filecoin-proofs' tree type, as filecoin-proofs-api's `with_shape!`
//! does, and the generic code itself, which only calls filecoin-proofs.
//!
//! Everything here builds what filecoin-proofs builds, with its own functions:
//! `seal_commit_phase2_circuit_proofs`' public inputs, compound setup and
//! `StackedCompound::circuit` per partition; `blank_circuit` for the shape;
//! `PoRepConfig::get_cache_identifier` for the parameter file name; `verify_seal`.

use std::convert::TryInto;

use blstrs::Scalar;
use filecoin_hashers::Hasher;
use filecoin_proofs::constants::{DefaultPieceDomain, DefaultPieceHasher};
use filecoin_proofs::parameters::{public_params, setup_params};
use filecoin_proofs::types::VanillaSealProof;
use filecoin_proofs::{as_safe_commitment, PoRepConfig};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{self, StackedCircuit, StackedCompound, StackedDrg, Tau};

use crate::porep_circuit::{PorepCircuit, Prefix};
use crate::porep_witness::ChallengeWitness;

/// Calls `$f::<Tree>(args…)` for the tree type of a sector size, or returns
/// [`crate::FilecoinError::Unsupported`]. The sizes are those of the registered PoRep
/// proofs (2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB), so only their shapes are
/// compiled in.
macro_rules! with_sector_shape {
    // `f[_]`: `f` has one more generic parameter after the tree, inferred.
    ($size:expr, $name:expr, $f:ident [_], $($args:expr),* $(,)?) => {
        with_sector_shape!(@go $size, $name, $f, (, _), $($args),*)
    };
    ($size:expr, $name:expr, $f:ident, $($args:expr),* $(,)?) => {
        with_sector_shape!(@go $size, $name, $f, (), $($args),*)
    };
    (@go $size:expr, $name:expr, $f:ident, ($($extra:tt)*), $($args:expr),*) => {
        match $size {
            s if s == filecoin_proofs::constants::SECTOR_SIZE_2_KIB => {
                $f::<filecoin_proofs::constants::SectorShape2KiB $($extra)*>($($args),*)
            }
            s if s == filecoin_proofs::constants::SECTOR_SIZE_8_MIB => {
                $f::<filecoin_proofs::constants::SectorShape8MiB $($extra)*>($($args),*)
            }
            s if s == filecoin_proofs::constants::SECTOR_SIZE_512_MIB => {
                $f::<filecoin_proofs::constants::SectorShape512MiB $($extra)*>($($args),*)
            }
            s if s == filecoin_proofs::constants::SECTOR_SIZE_32_GIB => {
                $f::<filecoin_proofs::constants::SectorShape32GiB $($extra)*>($($args),*)
            }
            s if s == filecoin_proofs::constants::SECTOR_SIZE_64_GIB => {
                $f::<filecoin_proofs::constants::SectorShape64GiB $($extra)*>($($args),*)
            }
            _ => Err($crate::FilecoinError::Unsupported {
                proof: $name,
                reason: "filecoin-proofs has no PoRep of this sector size",
            }),
        }
    };
}

/// A partition's circuit, exactly as `seal_commit_phase2` builds it, and its public
/// inputs (without the leading one).
pub(crate) struct Partition<C> {
    pub circuit: C,
    pub public_inputs: Vec<Scalar>,
}

/// An anyhow error from filecoin-proofs, with its causes, as text.
fn text(e: anyhow::Error) -> String {
    format!("{e:#}")
}

/// The circuit identifier's hash-named cache id (`stacked-proof-of-replication-…`),
/// which names the parameter files.
pub(crate) fn cache_identifier(
    cfg: &PoRepConfig,
    name: String,
) -> Result<String, crate::FilecoinError> {
    fn id<Tree: 'static + MerkleTreeTrait>(
        cfg: &PoRepConfig,
        name: String,
    ) -> Result<String, crate::FilecoinError> {
        cfg.get_cache_identifier::<Tree>()
            .map_err(|e| crate::FilecoinError::Circuit {
                proof: name,
                message: text(e),
            })
    }
    with_sector_shape!(u64::from(cfg.sector_size), name.clone(), id, cfg, name)
}

/// Runs `f` with the blank circuit of `cfg` (every value `None`): what parameter
/// generation and the shape compile synthesize.
pub trait BlankUser {
    type Out;
    fn with<C: bellpepper_core::Circuit<Scalar> + Clone + Send + 'static>(
        self,
        circuit: C,
    ) -> Self::Out;
}

pub(crate) fn with_blank_circuit<U: BlankUser>(
    cfg: &PoRepConfig,
    name: String,
    user: U,
) -> Result<U::Out, crate::FilecoinError> {
    fn blank<Tree: 'static + MerkleTreeTrait, U: BlankUser>(
        cfg: &PoRepConfig,
        name: String,
        user: U,
    ) -> Result<U::Out, crate::FilecoinError> {
        let pp = public_params::<Tree>(cfg).map_err(|e| crate::FilecoinError::Circuit {
            proof: name,
            message: text(e),
        })?;
        let circuit = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            StackedCircuit<Tree, DefaultPieceHasher>,
        >>::blank_circuit(&pp);
        Ok(user.with(circuit))
    }
    with_sector_shape!(
        u64::from(cfg.sector_size),
        name.clone(),
        blank[_],
        cfg,
        name,
        user
    )
}

/// Runs `f` with the partitions of a C1 output: circuits (filecoin-proofs' whole
/// circuit as a `Circuit`, split by challenge as a `SplitCircuit`) and public inputs.
pub(crate) trait PartitionsUser {
    type Out;
    fn with<
        C: bellpepper_core::Circuit<Scalar> + cuzk_synth::SplitCircuit + Clone + Send + 'static,
    >(
        self,
        partitions: Vec<Partition<C>>,
    ) -> Self::Out;
}

pub(crate) fn with_partitions<U: PartitionsUser>(
    cfg: &PoRepConfig,
    c1: SealCommitPhase1Output,
    name: String,
    user: U,
) -> Result<U::Out, crate::FilecoinError> {
    with_sector_shape!(
        u64::from(cfg.sector_size),
        name.clone(),
        partitions[_],
        cfg,
        c1,
        name,
        user
    )
}

/// The circuits `seal_commit_phase2_circuit_proofs` proves, with their public inputs.
fn partitions<Tree: 'static + MerkleTreeTrait, U: PartitionsUser>(
    cfg: &PoRepConfig,
    c1: SealCommitPhase1Output,
    name: String,
    user: U,
) -> Result<U::Out, crate::FilecoinError> {
    let fail = |message: String| crate::FilecoinError::Circuit {
        proof: name.clone(),
        message,
    };
    let SealCommitPhase1Output {
        vanilla_proofs,
        comm_r,
        comm_d,
        replica_id,
        seed,
        ticket: _,
        registered_proof: _,
    } = c1;
    // filecoin-proofs-api's conversions, as its `seal_commit_phase2` makes them.
    let vanilla_proofs: Vec<Vec<VanillaSealProof<Tree>>> =
        vanilla_proofs.try_into().map_err(|e| fail(text(e)))?;
    let replica_id: Scalar = replica_id.into();
    let replica_id: <Tree::Hasher as Hasher>::Domain = replica_id.into();

    // The checks filecoin-proofs makes before proving.
    if comm_d == [0; 32] {
        return Err(fail("Invalid all zero commitment (comm_d)".into()));
    }
    if comm_r == [0; 32] {
        return Err(fail("Invalid all zero commitment (comm_r)".into()));
    }
    if seed == [0; 32] {
        return Err(fail("Invalid porep challenge seed".into()));
    }
    if vanilla_proofs.is_empty() || vanilla_proofs.iter().any(|p| p.is_empty()) {
        return Err(fail("C1 output contains no vanilla proofs".into()));
    }
    let partitions = usize::from(cfg.partitions);
    if vanilla_proofs.len() != partitions {
        return Err(fail(format!(
            "{} partitions of vanilla proofs, the proof type has {partitions}",
            vanilla_proofs.len()
        )));
    }

    let comm_r_safe = as_safe_commitment(&comm_r, "comm_r").map_err(|e| fail(text(e)))?;
    let comm_d_safe = <DefaultPieceDomain as filecoin_hashers::Domain>::try_from_bytes(&comm_d)
        .map_err(|e| fail(text(e)))?;
    let public_inputs = stacked::PublicInputs {
        replica_id,
        tau: Some(Tau {
            comm_d: comm_d_safe,
            comm_r: comm_r_safe,
        }),
        k: None,
        seed: Some(seed),
    };
    let setup = compound_proof::SetupParams {
        vanilla_params: setup_params(cfg).map_err(|e| fail(text(e)))?,
        partitions: Some(partitions),
        priority: false,
    };
    let pp = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        StackedCircuit<Tree, DefaultPieceHasher>,
    >>::setup(&setup)
    .map_err(|e| fail(text(e)))?;

    let mut out = Vec::with_capacity(partitions);
    for (k, vanilla) in vanilla_proofs.iter().enumerate() {
        let circuit = |proofs: &[VanillaSealProof<Tree>]| {
            <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
                StackedDrg<'_, Tree, DefaultPieceHasher>,
                StackedCircuit<Tree, DefaultPieceHasher>,
            >>::circuit(
                &public_inputs,
                (), // StackedCircuit's component private inputs are ()
                &proofs.to_vec(),
                &pp.vanilla_params,
                Some(k),
            )
            .map_err(|e| fail(text(e)))
        };
        // The whole partition, built by filecoin-proofs' `circuit` (which also checks
        // that every challenge has the same comm_r_last and comm_c), and each
        // challenge alone for the parallel witness (`porep_witness`).
        let whole = circuit(vanilla)?;
        let prefix = Prefix {
            replica_id: public_inputs.replica_id,
            comm_d: comm_d_safe,
            comm_r: comm_r_safe,
            comm_r_last: vanilla[0].comm_r_last(),
            comm_c: vanilla[0].comm_c(),
        };
        let challenges = vanilla
            .iter()
            .map(|proof| ChallengeWitness {
                prefix: prefix.clone(),
                proof: proof.clone(),
            })
            .collect();
        let inputs = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            StackedCircuit<Tree, DefaultPieceHasher>,
        >>::generate_public_inputs(&public_inputs, &pp.vanilla_params, Some(k))
        .map_err(|e| fail(text(e)))?;
        out.push(Partition {
            circuit: PorepCircuit {
                whole,
                prefix,
                challenges,
            },
            public_inputs: inputs,
        });
    }
    Ok(user.with(out))
}

/// What `verify_seal` needs besides the configuration and the proof.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SealPublic {
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    pub prover_id: [u8; 32],
    pub sector: u64,
    pub ticket: [u8; 32],
    pub seed: [u8; 32],
}

/// filecoin-proofs' `verify_seal` on the proof bytes.
pub(crate) fn verify_seal(
    cfg: &PoRepConfig,
    public: &SealPublic,
    proof: &[u8],
    name: String,
) -> Result<bool, crate::FilecoinError> {
    fn verify<Tree: 'static + MerkleTreeTrait>(
        cfg: &PoRepConfig,
        p: &SealPublic,
        proof: &[u8],
    ) -> Result<bool, crate::FilecoinError> {
        filecoin_proofs::verify_seal::<Tree>(
            cfg,
            p.comm_r,
            p.comm_d,
            p.prover_id,
            p.sector.into(),
            p.ticket,
            p.seed,
            proof,
        )
        .map_err(|e| crate::FilecoinError::Verifier(text(e)))
    }
    with_sector_shape!(u64::from(cfg.sector_size), name, verify, cfg, public, proof)
}
