//! `[daemon]`: the proving daemon's settings (`cuzk serve`, crate `cuzk-daemon`).
//!
//! ```toml
//! [daemon]
//! listen = "127.0.0.1:9820"          # or "unix:///run/cuzk.sock"
//! metrics_listen = "127.0.0.1:9821"  # HTTP /metrics; left out: no endpoint
//! param_cache = "/var/tmp/filecoin-proof-parameters"
//! param_memory_gib = 200             # parameter sets kept resident when idle
//! gpus = [0]
//! max_running_jobs = 2
//! result_ttl_s = 3600
//! max_message_mib = 1025             # default: the largest kind's request + 1
//! shutdown = "finish"                # or "cancel"
//! shutdown_timeout_s = 900
//! synthetic = false
//! synthetic_max_log = 18
//! synthetic_timing_only = false
//! timing_only_circuits = []          # benchmarks only, e.g. ["porep-32g"]
//! timeline = "/var/log/cuzk/timeline.jsonl"
//! # Who may call (see ARCHITECTURE.md, "Threat model").
//! token_file = "/etc/cuzk/token"     # every call needs `authorization: Bearer <token>`
//! insecure = false                   # true: allow a non-loopback listen without a token
//! tls_cert = "/etc/cuzk/tls.crt"     # PEM; with tls_key: gRPC over TLS (rustls)
//! tls_key = "/etc/cuzk/tls.key"
//! socket_mode = "0660"               # a Unix socket's mode (octal)
//! socket_group = "cuzk"              # and group (name or number)
//! max_streams_per_connection = 64
//! # Limits per kind (porep, snap, window, winning, ni_porep, aggregate,
//! # synthetic); unset: the defaults.
//! [daemon.limits.porep]
//! max_pending = 64                   # jobs waiting; over it: RESOURCE_EXHAUSTED
//! max_request_mib = 192              # bytes a request carries
//! [daemon.limits.ni_porep]           # NI-PoRep C2 (cuzk's kind 1000)
//! max_pending = 4
//! max_request_mib = 1024             # a 32 GiB NI C1 envelope is ~630 MB
//! [daemon.limits.aggregate]          # SnarkPack aggregation (cuzk's kind 1001)
//! max_pending = 32
//! max_request_mib = 8
//! ```
//!
//! `max_message_mib` defaults to the largest kind's `max_request_mib` plus one:
//! 1025 with the defaults (the NI-PoRep kind's 1 GiB).
//!
//! Every key is optional. `cuzk-daemon` checks the values the types cannot
//! (`DaemonConfig::from_section`) and applies the defaults documented here.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The `[daemon]` table as written (every key optional).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonSection {
    /// gRPC address: `host:port` or `unix:///path`. Default `127.0.0.1:9820`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// HTTP address of the Prometheus `/metrics` endpoint; none if left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<String>,
    /// Directory of parameter files. Default: `$FIL_PROOFS_PARAMETER_CACHE`, else
    /// `/var/tmp/filecoin-proof-parameters` (as filecoin-proofs and `cuzk c2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_cache: Option<PathBuf>,
    /// Memory-map the parameters from decoded points files kept in this
    /// directory (each set decoded once into it, as large as its points: 44 GiB
    /// for a 32 GiB PoRep set), so their pages are page cache the kernel reads
    /// as the backend needs them and may drop again, not anonymous memory.
    /// Default: none (decoded into memory when loaded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points_dir: Option<PathBuf>,
    /// GiB of parameter sets kept resident when no job uses them (least recently
    /// used evicted first). Default: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_memory_gib: Option<f64>,
    /// GPU ordinals to prove on (the CUDA backend's `device`). Default: the
    /// backend's own choice. One per daemon for now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<Vec<u32>>,
    /// Jobs admitted to the engine at once; the rest wait in priority order.
    /// Default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running_jobs: Option<usize>,
    /// Seconds a finished job's result waits to be awaited. Default 3600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_ttl_s: Option<u64>,
    /// Largest gRPC message each way, MiB. Default 256 (a 64 GiB sector's C1 is
    /// ~140 MB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_mib: Option<usize>,
    /// On SIGTERM: `finish` every accepted job, or `cancel` them. Default `finish`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<String>,
    /// Seconds `finish` waits before cancelling what is left. Default 900.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_timeout_s: Option<u64>,
    /// Serve the SYNTHETIC kind (cuzk's built-in test circuits). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<bool>,
    /// Largest synthetic circuit served, log2 of its constraints. Default 18;
    /// 27 is a 32 GiB PoRep partition's size (for benchmarks on a GPU host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic_max_log: Option<u32>,
    /// Benchmarks only: SYNTHETIC jobs use random-point parameters of the
    /// circuit's shape (seconds to make at 2^27, where real ones take hours), so
    /// their proofs are returned unverified. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic_timing_only: Option<bool>,
    /// Benchmarks only: the Filecoin circuit ids (Curio's: `porep-32g`,
    /// `winning-32g`, `snap-32g`, `wpost-32g`, ..., `porep-2k` for tests) proved
    /// with timing-only parameters: random points of the circuit's sizes made in
    /// memory (no parameter file), so their proofs are returned UNVERIFIED and do
    /// not verify. The daemon logs it at start, lists them in `GetStatus` and the
    /// `cuzk_timing_only_circuit` metric, and marks each such result
    /// (`AwaitProofResponse.timing_only`). Only these circuits accept shape-only
    /// inputs (`cuzk c1 --shape-only`). Ids not listed keep the real path.
    /// Default: none. Never set on a provider's daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing_only_circuits: Option<Vec<String>>,
    /// Also write the engine's TIMELINE as JSON lines here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<PathBuf>,
    /// A file holding the shared token (one line; not readable by others): every
    /// call must carry gRPC metadata `authorization: Bearer <token>`. Default:
    /// none, which a non-loopback `listen` refuses unless `insecure = true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// Allow listening on a non-loopback address without a token. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// PEM certificate chain for gRPC over TLS (with `tls_key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for `tls_cert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// A Unix socket's mode, octal text. Default "0660".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_mode: Option<String>,
    /// A Unix socket's group: a name or a number. Default: the process's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_group: Option<String>,
    /// Concurrent calls (HTTP/2 streams) one connection may have open. Default 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_streams_per_connection: Option<u32>,
    /// Per-kind limits; a kind left out keeps the service's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<KindLimitsSection>,
}

/// `[daemon.limits]`: a table per kind.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KindLimitsSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub porep: Option<LimitSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snap: Option<LimitSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<LimitSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winning: Option<LimitSection>,
    /// Non-interactive PoRep C2 (`NI_POREP_SEAL_COMMIT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ni_porep: Option<LimitSection>,
    /// SnarkPack aggregation (`SEAL_AGGREGATE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<LimitSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<LimitSection>,
}

/// One kind's limits; a key left out keeps its default.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSection {
    /// Jobs of the kind waiting to be admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pending: Option<u32>,
    /// MiB a request of the kind may carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_mib: Option<u64>,
}
