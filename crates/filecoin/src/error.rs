//! The one error type of the crate: what went wrong, in words a provider can act on.

use std::path::PathBuf;

/// The variable that names Filecoin's parameter cache directory.
pub const PARAMETER_CACHE_VAR: &str = "FIL_PROOFS_PARAMETER_CACHE";

/// Why a Filecoin proof could not be made (or checked).
#[derive(Debug, thiserror::Error)]
pub enum FilecoinError {
    /// The C1 output or envelope is not valid JSON of the expected form (truncated,
    /// malformed, a missing field, a value of the wrong type).
    #[error("the {what} is not valid: {source}")]
    Json {
        /// `"C1 output"` or `"envelope"`.
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The envelope's `Phase1Out` is not standard base64.
    #[error("the envelope's Phase1Out is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    /// The envelope's `SectorSize` differs from its C1 output's registered proof.
    #[error(
        "the envelope says SectorSize {envelope} but its C1 output is for {proof} ({c1} bytes)"
    )]
    EnvelopeSizeMismatch {
        envelope: u64,
        c1: u64,
        proof: String,
    },
    /// Two sources of the sector number disagree.
    #[error("the sector number was given as {given} but the envelope says {envelope}")]
    SectorMismatch { given: u64, envelope: u64 },
    /// No sector number was given and the input has none.
    #[error(
        "a sector number is needed: the C1 output carries none (give --sector, or use an envelope)"
    )]
    NoSectorNumber,
    /// A prover id that is not a miner id, `f0…`/`t0…` address or 32 bytes of hex.
    #[error(
        "`{input}` is not a prover id: give a miner actor id (1234 or f01234) or 32 bytes of hex"
    )]
    ProverId { input: String },
    /// The registered proof is not one this crate proves.
    #[error("{proof} is not supported: {reason}")]
    Unsupported { proof: String, reason: &'static str },
    /// filecoin-proofs refused the C1 output while building the circuits (an all-zero
    /// commitment, no vanilla proofs, a vanilla proof of another shape, ...).
    #[error("the C1 output for {proof} does not give valid circuits: {message}")]
    Circuit { proof: String, message: String },
    /// The blank circuit could not be compiled.
    #[error("compiling the {proof} circuit failed: {source}")]
    Compile {
        proof: String,
        #[source]
        source: cuzk_synth::SynthError,
    },
    /// The parameter file is not in the parameter cache.
    #[error("the parameter file {} is missing (the cache directory comes from {PARAMETER_CACHE_VAR} or --param-cache; `cuzk params gen --proof {proof}` writes test parameters)", path.display())]
    ParamsMissing { path: PathBuf, proof: String },
    /// The parameter file could not be read: corrupted, truncated, not a parameter file.
    #[error("the parameter file {} cannot be read: {source}", path.display())]
    ParamsRead {
        path: PathBuf,
        #[source]
        source: cuzk_params::ParamsError,
    },
    /// The parameter file reads, but is for another circuit.
    #[error("the parameter file {} is not for the {proof} circuit: {detail}", path.display())]
    ParamsMismatch {
        path: PathBuf,
        proof: String,
        detail: String,
    },
    /// The file's digest is not the one Filecoin's `parameters.json` lists.
    #[error("the parameter file {} has digest {actual}, but Filecoin's parameters.json lists {expected}", path.display())]
    DigestMismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    /// Filecoin's `parameters.json` has no entry for the file (test parameters).
    #[error("Filecoin's parameters.json has no entry for {file}: its digest cannot be checked (generated test parameters?)")]
    DigestUnknown { file: String },
    /// A file could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The engine did not produce the partitions' proofs.
    #[error("proving failed: {0}")]
    Job(#[from] cuzk_scheduler::JobError),
    /// filecoin-proofs' `verify_seal` rejected the proof: it is never returned.
    #[error("the proof for sector {sector} does not verify with filecoin-proofs' verify_seal (a wrong prover id or sector number, or parameters for another circuit)")]
    NotVerified { sector: u64 },
    /// filecoin-proofs' `verify_seal` could not run.
    #[error("filecoin-proofs' verify_seal failed: {0}")]
    Verifier(String),
    /// The proof bytes are not N × 192 bytes for the registered proof.
    #[error("a {proof} proof is {expected} bytes, this one is {actual}")]
    ProofLength {
        proof: String,
        expected: usize,
        actual: usize,
    },
    /// filecoin-proofs' verifier reads the verifying key from its own parameter cache
    /// directory, which is not the one this prover reads parameters from.
    #[error("parameters are read from {} but filecoin-proofs' verifier reads verifying keys from {} ({PARAMETER_CACHE_VAR}); set {PARAMETER_CACHE_VAR} to the same directory", ours.display(), theirs.display())]
    ParameterDirConflict { ours: PathBuf, theirs: PathBuf },
    /// A commitment or the randomness is not 32 bytes.
    #[error("{what} must be {expected} bytes, it is {actual}")]
    InputLength {
        what: &'static str,
        expected: usize,
        actual: usize,
    },
    /// The number of vanilla proofs is not what the proof type takes (SnapDeals: one per
    /// partition; WindowPoSt: 1 to the sectors of a partition; WinningPoSt: one per
    /// challenged sector).
    #[error("{proof} takes {expected} vanilla proofs (WindowPoSt: at most), {actual} were given")]
    VanillaCount {
        proof: String,
        expected: usize,
        actual: usize,
    },
    /// A vanilla proof is not bincode of the proof type's vanilla proof.
    #[error(
        "vanilla proof {index} does not decode as a {proof} vanilla proof (bincode): {message}"
    )]
    VanillaDecode {
        proof: String,
        index: usize,
        message: String,
    },
    /// A vanilla proof decodes but is of another shape (another sector size).
    #[error("vanilla proof {index} is not of {proof}'s shape (another sector size?): {message}")]
    VanillaShape {
        proof: String,
        index: usize,
        message: String,
    },
    /// filecoin-proofs refused the vanilla proofs (they do not answer this
    /// randomness's challenges, or were made for another partition or sector).
    #[error("filecoin-proofs refused the {proof} vanilla proofs: {message}")]
    VanillaRejected { proof: String, message: String },
    /// A WindowPoSt partition index beyond what a deadline can hold.
    #[error(
        "partition index {index} is out of range: a deadline holds at most {limit} partitions"
    )]
    PartitionIndex { index: usize, limit: usize },
    /// filecoin-proofs' verifier rejected a SnapDeals or PoSt proof: it is never returned.
    #[error("the {proof} proof does not verify with filecoin-proofs' {verifier}")]
    Rejected {
        proof: String,
        verifier: &'static str,
    },
    /// SnarkPack's SRS is not in filecoin-proofs' parameter cache.
    #[error("the SnarkPack SRS {} is missing: aggregation (and non-interactive PoRep's C2, an aggregate) needs it in {PARAMETER_CACHE_VAR}; `cuzk aggregate gen-srs` writes a test one", path.display())]
    SrsMissing { path: PathBuf },
    /// filecoin-proofs' `aggregate_seal_commit_proofs` refused the proofs.
    #[error("filecoin-proofs' aggregate_seal_commit_proofs failed: {0}")]
    Aggregate(String),
    /// The sectors of one aggregate are of different registered proofs.
    #[error("an aggregate is of one registered proof: the first sector is {first}, sector {index} is {other}")]
    MixedProofs {
        first: String,
        index: usize,
        other: String,
    },
    /// Too few or too many sectors for an aggregate.
    #[error("{count} {proof} sectors cannot be aggregated: {reason}")]
    AggregateCount {
        proof: String,
        count: usize,
        reason: &'static str,
    },
    /// A sector's proof given to aggregate does not verify: the aggregate is not made.
    #[error("the proof of sector {sector} (entry {index}) does not verify with filecoin-proofs' verify_seal: it is not aggregated")]
    InputNotVerified { index: usize, sector: u64 },
    /// filecoin-proofs rejected the aggregate: it is never returned.
    #[error("the aggregate of {sectors} {proof} sectors does not verify with filecoin-proofs' verify_aggregate_seal_commit_proofs")]
    AggregateNotVerified { proof: String, sectors: usize },
    /// Sealing a test sector failed (`cuzk c1`).
    #[error("sealing the test sector failed in {step}: {message}")]
    Seal { step: &'static str, message: String },
}

impl FilecoinError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FilecoinError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
