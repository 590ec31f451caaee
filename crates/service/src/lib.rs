//! cuzk's proving service, as a library: what the daemon (`cuzk serve`) serves
//! over gRPC and what a queue worker can drive without a socket.
//!
//! # Design
//!
//! A job is submitted with a kind, a priority and a request id; it waits in the
//! service's admission queue (priority first, then submission order) until one of
//! `max_running_jobs` slots is free; its parameter set is then acquired from the
//! [`ParamCache`] (loaded once, shared by every job of its circuit, kept while a
//! memory budget allows) and its kind starts it on the pipelined engine. The
//! result is kept until it is awaited once ([`Service::result`] as a future,
//! [`Service::wait_blocking`] for threads), or dropped after a time to live.
//!
//! The service owns no proof format: each kind is a [`KindProver`] (checks a
//! request, names and loads its parameter set, starts the proof). The Filecoin
//! kinds plug in from the Filecoin adapter; [`synthetic::SyntheticKind`] is the
//! built-in test kind.
//!
//! Metrics come from the engine's TIMELINE events ([`Metrics`] subscribes to the
//! recorder), so `/metrics`, status, logs and waterfalls cannot disagree. The
//! recorder keeps no events in memory (a daemon runs for months).
//!
//! Architecture invariant: no protobuf, no sockets, no Filecoin formats; the
//! service holds the scheduling-admission, parameter-cache and result logic that
//! the daemon must not.

mod gpus;
mod kind;
mod metrics;
mod params;
mod service;
pub mod synthetic;

pub use gpus::GpuInfo;
pub use kind::{
    check_request_id, KindLimits, KindProver, LoadedParams, PreparedProof, Priority, ProofFailure,
    ProofKind, ProofRequest, RequestError, RunningProof, MAX_REQUEST_ID_BYTES,
};
pub use metrics::{JobStages, Metrics};
pub use params::{EvictError, ParamCache, ParamHold, ParamStatus};
pub use service::{
    check_request, GpuStatus, JobFuture, JobLookupError, JobResult, JobStatus, ParamsError,
    QueueStatus, Service, ServiceConfig, ShutdownMode, StartError, Status, Submitted, Timings,
};
