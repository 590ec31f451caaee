//! Proof kinds, priorities, requests, and the trait each kind implements.
//!
//! The service knows no proof format: a [`KindProver`] checks a request, names the
//! parameter set it needs, loads parameter sets, and starts the proof on the
//! engine. The Filecoin kinds are implementations in the Filecoin adapter; the
//! synthetic kind ([`crate::synthetic`]) is a built-in test circuit.

use std::{any::Any, sync::Arc};

use cuzk_scheduler::PipelineEngine;

/// What a job proves. The first four are Curio's kinds (the gRPC enum's values);
/// the rest are cuzk's own, with wire values far from Curio's: non-interactive
/// PoRep's C2 (`NiPorepSealCommit`, 1000) and SnarkPack aggregation of many
/// sectors' C2 outputs (`SealAggregate`, 1001), which Curio's proto does not
/// have, and `Synthetic` (100), a built-in test circuit served only when the
/// configuration enables it, never a stand-in for a Filecoin proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProofKind {
    PorepSealCommit,
    SnapDealsUpdate,
    WindowPostPartition,
    WinningPost,
    NiPorepSealCommit,
    SealAggregate,
    Synthetic,
}

impl ProofKind {
    pub const ALL: [ProofKind; 7] = [
        ProofKind::PorepSealCommit,
        ProofKind::SnapDealsUpdate,
        ProofKind::WindowPostPartition,
        ProofKind::WinningPost,
        ProofKind::NiPorepSealCommit,
        ProofKind::SealAggregate,
        ProofKind::Synthetic,
    ];

    /// The name used in status, metrics labels and errors (the gRPC enum's name).
    pub fn name(self) -> &'static str {
        match self {
            ProofKind::PorepSealCommit => "POREP_SEAL_COMMIT",
            ProofKind::SnapDealsUpdate => "SNAP_DEALS_UPDATE",
            ProofKind::WindowPostPartition => "WINDOW_POST_PARTITION",
            ProofKind::WinningPost => "WINNING_POST",
            ProofKind::NiPorepSealCommit => "NI_POREP_SEAL_COMMIT",
            ProofKind::SealAggregate => "SEAL_AGGREGATE",
            ProofKind::Synthetic => "SYNTHETIC",
        }
    }

    /// The priority a request of this kind gets when it asks for none: a
    /// WinningPoSt misses its block if it waits, a WindowPoSt its deadline.
    /// Sealing work is normal: a PoRep or SnapDeals C2 has hours of slack, and so
    /// has a non-interactive PoRep C2 (the same sealing pipeline, more
    /// partitions). An aggregation is normal too, not low: it holds an admission
    /// slot for seconds of CPU and never the GPU, and it is what brings many
    /// sectors already proved onto the chain, so it must not starve behind a
    /// steady stream of C2s (the service's queue is strict priority), while the
    /// PoSt kinds still pass it.
    pub fn default_priority(self) -> Priority {
        match self {
            ProofKind::WinningPost => Priority::Critical,
            ProofKind::WindowPostPartition => Priority::High,
            ProofKind::PorepSealCommit
            | ProofKind::SnapDealsUpdate
            | ProofKind::NiPorepSealCommit
            | ProofKind::SealAggregate
            | ProofKind::Synthetic => Priority::Normal,
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
    /// PoRep and NI-PoRep: the C1 envelope. Aggregation: the aggregate request's
    /// JSON (`cuzk aggregate request`). Synthetic: its JSON spec.
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
    ///
    /// A non-interactive PoRep C1 envelope is ~12.6 times an interactive one (the
    /// vanilla proofs of 126 partitions against 10, at 32 and 64 GiB): ~630 MB at
    /// 32 GiB, so 1 GiB, and only 4 may
    /// wait (4 GiB of queued requests at worst, beside their parsed copies); a
    /// 64 GiB NI sector (~1.8 GB) needs `[daemon.limits.ni_porep]
    /// max_request_mib` raised.
    ///
    /// An aggregate request (`AggregateRequest`, pretty JSON as `cuzk aggregate
    /// request` writes it) holds per sector its registered proof's name and sector
    /// number (~100 bytes with the keys), four 32-byte arrays written one number a
    /// line (~4 × 32 × 12 = ~1.5 KB) and its proof in base64: 10 partitions ×
    /// 192 bytes = 1920 bytes → 2560 characters for an interactive sector, 126 ×
    /// 192 = 24192 → 32256 for a 32 GiB NI one. The chain's largest aggregates,
    /// 819 interactive sectors (~4.2 KB each: ~3.4 MB) or 65 NI sectors (~34 KB
    /// each: ~2.2 MB), fit in 8 MiB with room for other indentation; 32 may
    /// wait (256 MiB at worst).
    pub fn default_for(kind: ProofKind) -> KindLimits {
        const MIB: u64 = 1 << 20;
        let (max_pending, max_request_bytes) = match kind {
            ProofKind::PorepSealCommit => (64, 192 * MIB),
            ProofKind::SnapDealsUpdate => (64, 128 * MIB),
            ProofKind::WindowPostPartition => (64, 128 * MIB),
            ProofKind::WinningPost => (16, 16 * MIB),
            ProofKind::NiPorepSealCommit => (4, 1024 * MIB),
            ProofKind::SealAggregate => (32, 8 * MIB),
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

/// A proof on the engine, or work of a kind that needs no engine (aggregation).
pub trait RunningProof: Send {
    /// The engine's job id (for cancellation and the TIMELINE); `None` for work
    /// that runs outside the engine (SnarkPack aggregation, on the job's own
    /// thread), which cannot be interrupted: a cancelled one runs to its end, and
    /// the service discards its result and reports the job cancelled.
    fn engine_job(&self) -> Option<u64>;
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
