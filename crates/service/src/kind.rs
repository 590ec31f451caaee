//! Proof kinds, priorities, requests, and the trait each kind implements.
//!
//! The service knows no proof format: a [`KindProver`] checks a request, names the
//! parameter set it needs, loads parameter sets, and starts the proof on the
//! engine. The Filecoin kinds are implementations in the Filecoin adapter; the
//! synthetic kind ([`crate::synthetic`]) is a built-in test circuit.

use std::{any::Any, sync::Arc};

use cuzk_scheduler::PipelineEngine;

/// What a job proves. The first four are Curio's kinds (the gRPC enum's values);
/// `Synthetic` is cuzk's own: a built-in test circuit, served only when the
/// configuration enables it, never a stand-in for a Filecoin proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProofKind {
    PorepSealCommit,
    SnapDealsUpdate,
    WindowPostPartition,
    WinningPost,
    Synthetic,
}

impl ProofKind {
    pub const ALL: [ProofKind; 5] = [
        ProofKind::PorepSealCommit,
        ProofKind::SnapDealsUpdate,
        ProofKind::WindowPostPartition,
        ProofKind::WinningPost,
        ProofKind::Synthetic,
    ];

    /// The name used in status, metrics labels and errors (the gRPC enum's name).
    pub fn name(self) -> &'static str {
        match self {
            ProofKind::PorepSealCommit => "POREP_SEAL_COMMIT",
            ProofKind::SnapDealsUpdate => "SNAP_DEALS_UPDATE",
            ProofKind::WindowPostPartition => "WINDOW_POST_PARTITION",
            ProofKind::WinningPost => "WINNING_POST",
            ProofKind::Synthetic => "SYNTHETIC",
        }
    }

    /// The priority a request of this kind gets when it asks for none: a
    /// WinningPoSt misses its block if it waits, a WindowPoSt its deadline.
    pub fn default_priority(self) -> Priority {
        match self {
            ProofKind::WinningPost => Priority::Critical,
            ProofKind::WindowPostPartition => Priority::High,
            ProofKind::PorepSealCommit | ProofKind::SnapDealsUpdate | ProofKind::Synthetic => {
                Priority::Normal
            }
        }
    }
}

impl std::fmt::Display for ProofKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Scheduling priority: the engine's one type (higher first, then submission
/// order), used unchanged by the service's admission queue, the daemon and the
/// queue worker.
pub use cuzk_scheduler::Priority;

/// A proof request as Curio sends it, without its wire encoding. Which fields a
/// kind reads is the kind's business; the others are ignored.
#[derive(Clone, Debug, Default)]
pub struct ProofRequest {
    /// Becomes the job id; a fresh id if `None`.
    pub request_id: Option<String>,
    /// `None`: the kind's default.
    pub priority: Option<Priority>,
    pub sector_size: u64,
    pub registered_proof: u64,
    /// PoRep: the C1 envelope. Synthetic: its JSON spec.
    pub vanilla_proof: Vec<u8>,
    /// SnapDeals: one partition proof each; PoSt: one sector proof each.
    pub vanilla_proofs: Vec<Vec<u8>>,
    pub sector_number: u64,
    pub miner_id: u64,
    pub randomness: Vec<u8>,
    pub partition_index: u32,
    pub comm_r_old: Vec<u8>,
    pub comm_r_new: Vec<u8>,
    pub comm_d_new: Vec<u8>,
}

impl ProofRequest {
    /// The bytes the request carries (what a kind's size limit counts).
    pub fn payload_bytes(&self) -> u64 {
        let fields = [
            &self.vanilla_proof,
            &self.randomness,
            &self.comm_r_old,
            &self.comm_r_new,
            &self.comm_d_new,
        ];
        fields.iter().map(|f| f.len() as u64).sum::<u64>()
            + self
                .vanilla_proofs
                .iter()
                .map(|p| p.len() as u64)
                .sum::<u64>()
            + self.request_id.as_ref().map_or(0, |id| id.len() as u64)
    }
}

/// The request cannot be proved as it stands: the caller must change it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("{kind} proofs are not served by this daemon: {why}")]
    Unsupported { kind: ProofKind, why: String },
    #[error("the {kind} request is malformed: {why}")]
    Malformed { kind: ProofKind, why: String },
    #[error("a job with id `{0}` is already known; use another request_id or await that job")]
    DuplicateId(String),
    #[error("the daemon is shutting down and accepts no new jobs")]
    ShuttingDown,
    #[error("request_id is not acceptable: {0}")]
    BadRequestId(String),
    #[error(
        "the {kind} request carries {bytes} bytes; at most {limit} are accepted for this kind"
    )]
    TooLarge {
        kind: ProofKind,
        bytes: u64,
        limit: u64,
    },
    #[error("{pending} {kind} jobs are already waiting, the most this daemon queues for the kind; try again later")]
    QueueFull { kind: ProofKind, pending: u32 },
}

/// The longest `request_id` accepted, in bytes.
pub const MAX_REQUEST_ID_BYTES: usize = 128;

/// Checks a caller's `request_id`: 1 to [`MAX_REQUEST_ID_BYTES`] bytes of
/// printable ASCII without spaces (`!` to `~`), so that an id can appear in a
/// log line, a status listing or an error message as it is, and never carries
/// a NUL, a newline or a terminal escape. (Ids never name a thread, a file or a
/// metric label.)
pub fn check_request_id(id: &str) -> Result<(), RequestError> {
    if id.is_empty() {
        return Err(RequestError::BadRequestId("it is empty".into()));
    }
    if id.len() > MAX_REQUEST_ID_BYTES {
        return Err(RequestError::BadRequestId(format!(
            "it is {} bytes long; at most {MAX_REQUEST_ID_BYTES}",
            id.len()
        )));
    }
    if let Some((at, b)) = id
        .bytes()
        .enumerate()
        .find(|(_, b)| !(0x21..=0x7e).contains(b))
    {
        return Err(RequestError::BadRequestId(format!(
            "byte {at} is 0x{b:02x}; only printable ASCII without spaces (! to ~) is accepted"
        )));
    }
    Ok(())
}

/// What the service accepts of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindLimits {
    /// Jobs of the kind waiting in the service's queue (not yet admitted); a
    /// submission over it is refused, nothing accepted is dropped.
    pub max_pending: u32,
    /// Bytes a request may carry ([`ProofRequest::payload_bytes`]).
    pub max_request_bytes: u64,
}

impl KindLimits {
    /// The defaults, from what each kind's largest real request weighs: a 64 GiB
    /// sector's C1 envelope is ~140 MB (32 GiB: ~50 MB); a 32 GiB WindowPoSt
    /// partition's 2349 vanilla proofs ~70 MB; a SnapDeals update's 16 partition
    /// proofs ~30 MB; a WinningPoSt's one sector proof well under 1 MB.
    pub fn default_for(kind: ProofKind) -> KindLimits {
        const MIB: u64 = 1 << 20;
        let (max_pending, max_request_bytes) = match kind {
            ProofKind::PorepSealCommit => (64, 192 * MIB),
            ProofKind::SnapDealsUpdate => (64, 128 * MIB),
            ProofKind::WindowPostPartition => (64, 128 * MIB),
            ProofKind::WinningPost => (16, 16 * MIB),
            ProofKind::Synthetic => (64, MIB),
        };
        KindLimits {
            max_pending,
            max_request_bytes,
        }
    }
}

/// A parameter set in memory, as its kind loaded it. The service keeps it while
/// the memory budget allows and hands it to every job of its circuit.
pub struct LoadedParams {
    /// The kind's own value (downcast by the kind in [`PreparedProof::start`]).
    pub value: Arc<dyn Any + Send + Sync>,
    /// Host bytes it holds.
    pub bytes: u64,
    /// Random points of the right sizes (benchmarks only: `[daemon]
    /// timing_only_circuits`, `synthetic_timing_only`): proofs made with them are
    /// returned unverified and do not verify; every result says so.
    pub timing_only: bool,
}

/// A request that passed its kind's checks, waiting to run.
pub trait PreparedProof: Send {
    /// The parameter set it needs (Curio's circuit ids: `porep-32g`, ...).
    fn circuit_id(&self) -> &str;

    /// Starts the proof on `engine` with the parameters of
    /// [`circuit_id`](PreparedProof::circuit_id).
    fn start(
        self: Box<Self>,
        engine: &PipelineEngine,
        params: &LoadedParams,
    ) -> Result<Box<dyn RunningProof>, String>;
}

/// Why a running proof did not give bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofFailure {
    #[error("the job was cancelled")]
    Cancelled,
    #[error("{0}")]
    Failed(String),
}

/// A proof on the engine.
pub trait RunningProof: Send {
    /// The engine's job id (for cancellation and the TIMELINE).
    fn engine_job(&self) -> u64;
    /// Blocks until the proof is done; the bytes are verified before they are
    /// returned, unless its parameter set is timing-only
    /// ([`LoadedParams::timing_only`]).
    fn wait(self: Box<Self>) -> Result<Vec<u8>, ProofFailure>;
}

/// One proof kind: checks requests, loads parameter sets, starts proofs.
pub trait KindProver: Send + Sync {
    fn kind(&self) -> ProofKind;

    /// Checks `request` (cheaply: this runs while the client waits for its job id).
    fn prepare(&self, request: ProofRequest) -> Result<Box<dyn PreparedProof>, RequestError>;

    /// Whether `circuit_id` is one of this kind's parameter sets.
    fn knows_circuit(&self, circuit_id: &str) -> bool;

    /// Loads a parameter set from disk (or generates it, for synthetic circuits).
    fn load_params(&self, circuit_id: &str) -> Result<LoadedParams, String>;

    /// The service dropped `circuit_id`'s set: drop any copy the kind keeps too,
    /// so the memory is freed (a kind with its own cache, such as the Filecoin
    /// adapter's, releases it here). The default keeps nothing.
    fn release_params(&self, circuit_id: &str) {
        let _ = circuit_id;
    }

    /// The circuit ids this kind proves with timing-only parameters (random
    /// points; proofs returned unverified), as configured. Status and metrics
    /// show them from start-up, before any is loaded. The default: none.
    fn timing_only_circuits(&self) -> Vec<String> {
        Vec::new()
    }
}
