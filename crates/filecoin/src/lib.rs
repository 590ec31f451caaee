//! Filecoin PoRep C2 on cuzk's engine: a sealed sector's C1 output in, the proof
//! bytes `seal_commit_phase2` would return out, verified by filecoin-proofs.
//!
//! # The one crate that knows Filecoin
//!
//! Every other cuzk crate proves generic circuits. This crate is the edge: it parses
//! what providers hand over (the C1 JSON, the lotus-bench/Curio envelope, a miner
//! id), dispatches once on the sector size to code generic over filecoin-proofs'
//! tree type (as filecoin-proofs-api's `with_shape!` does), and there builds each
//! partition's `StackedCircuit` with filecoin-proofs' own `StackedCompound::circuit`
//! and public inputs with its `generate_public_inputs`, exactly as
//! `seal_commit_phase2` does. From then on everything is generic: the circuits go to
//! cuzk's pipelined engine as one job of N partitions, and the engine's proofs come
//! back as N × 192 bytes, checked with filecoin-proofs' `verify_seal` before they are
//! returned. Nothing of Filecoin is written out by hand here: types, circuits,
//! parameter file names and the verifier are filecoin-proofs'.
//!
//! # What is kept per process
//!
//! A [`FilecoinProver`] compiles each proof type's R1CS once, from filecoin-proofs'
//! *blank* circuit (`cuzk_synth::compile_shape`, which never asks for values), and
//! loads each proof type's parameter file once (memory-mapped, decoded in parallel);
//! both are shared by every later job of that type, so after the first proof neither
//! costs anything. [`FilecoinProver::preload`] does both ahead of the first sector.
//!
//! # Parameters
//!
//! Parameter files are found by their official names (`v28-…`, from
//! filecoin-proofs' cache identifier of the circuit) in `FIL_PROOFS_PARAMETER_CACHE`
//! (default `/var/tmp/filecoin-proof-parameters`). filecoin-proofs' verifier reads
//! the verifying key from that same directory, so the prover's directory must be it
//! whenever proofs are verified. [`generate_params`] writes valid (insecure) test
//! parameters under the official names.

#[macro_use]
mod shape;
pub mod aggregate;
mod error;
mod input;
mod kind;
mod kinds_inputs;
mod kinds_shape_only;
mod mapped;
mod params;
mod porep_circuit;
mod porep_witness;
mod poseidon_witness;
mod post;
mod post_circuit;
mod prover;
pub mod reference;
pub mod reference_kinds;
mod seal;
pub mod service_aggregate;
pub mod service_kind;
pub mod service_kinds;
mod shape_only;
mod snap;
mod snap_witness;

pub use aggregate::{check_aggregate_request, AggregateRequest, AggregateSector, CheckedAggregate};
pub use cuzk_scheduler::Priority;
pub use error::{FilecoinError, PARAMETER_CACHE_VAR};
pub use filecoin_proofs_api::seal::SealCommitPhase1Output;
pub use filecoin_proofs_api::RegisteredSealProof;
pub use filecoin_proofs_api::{
    RegisteredAggregationProof, RegisteredPoStProof, RegisteredUpdateProof,
};
pub use input::{
    parse_c1, parse_prover_id, proof_name, prover_id_from_miner, read_c1, C1Input, Envelope,
};
pub use kind::{parse_priority, CircuitKind, KindJob, KindOutput};
pub use kinds_inputs::{post_test_inputs, snap_test_inputs, PostInputs};
pub use kinds_shape_only::{is_shape_only_marker, shape_only_post, shape_only_snap};
pub use params::{
    check_digest, default_parameter_dir, ensure_params, file_digest, generate_params, PorepKind,
    ALL_POREP,
};
pub use post::{
    check_window_post_request, check_winning_post_request, parse_post_proof, post_proof_name,
    verify_window_post_partition, verify_winning_post_proof, PostKind, WindowPostRequest,
    WinningPostRequest, ALL_POST, MAX_PARTITIONS_PER_DEADLINE,
};
pub use prover::{
    verify_proof, Blinding, FilecoinProver, LoadedEntry, LoadedParams, PorepJob, PorepOutput,
    PorepRequest, PreparedPorep, ProverConfig,
};
pub use seal::{seal_test_sector, SealedSector};
pub use shape::BlankUser;
pub use shape_only::{is_shape_only, shape_only_c1, SHAPE_ONLY_TICKET};
pub use snap::{
    check_snap_request, parse_update_proof, update_proof_name, verify_snap_proof, SnapRequest,
    UpdateKind, ALL_UPDATE,
};

/// Bytes of one partition's Groth16 proof (A in G1, B in G2, C in G1, compressed).
pub const PARTITION_PROOF_LEN: usize = 192;

/// Parses a registered PoRep proof by name (`StackedDrg2KiBV1_1`) or number (0–19,
/// as the Go enum numbers them).
pub fn parse_registered_proof(text: &str) -> Result<RegisteredSealProof, FilecoinError> {
    let t = text.trim();
    ALL_POREP
        .iter()
        .enumerate()
        .find(|(i, p)| proof_name(**p) == t || t.parse::<usize>().ok() == Some(*i))
        .map(|(_, p)| *p)
        .ok_or_else(|| FilecoinError::Unsupported {
            proof: text.to_string(),
            reason: "not the name or number of a registered PoRep proof",
        })
}
