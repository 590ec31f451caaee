//! `cuzk serve`: the gRPC daemon Curio calls (`cuzk.v1.ProvingEngine`), a thin
//! skin over [`cuzk_service::Service`].
//!
//! The skin translates messages to service calls and service errors to status
//! codes (malformed input: INVALID_ARGUMENT; unknown job: NOT_FOUND; a kind not
//! built: UNIMPLEMENTED; a failed proof: `status = FAILED` with its message) and
//! holds no scheduling, caching or proof logic, so tests can drive the same
//! service without a socket. The `.proto` is compiled at build time by protox
//! (no `protoc` needed). It also serves Prometheus `/metrics` over HTTP and stops
//! gracefully on SIGTERM (no new jobs, accepted jobs finished or cancelled as
//! configured, calls in flight answered, exit 0).
//!
//! The same message, encoded, is the PostgreSQL queue's job payload
//! ([`payload`]): one wire format for every entry.
//!
//! Architecture invariant: protobuf types stay in this crate (and its clients);
//! the service never sees them.

pub mod auth;
pub mod client;
mod codec;
pub mod config;
mod convert;
mod metrics_http;
pub mod payload;
pub mod server;

/// The wire types and the generated client and server (package `cuzk.v1`).
#[allow(clippy::all, missing_docs)]
pub mod wire {
    tonic::include_proto!("cuzk.v1");
}

pub use config::{Access, ConfigError, DaemonConfig, DaemonSection, Listen};
pub use server::{serve, termination_signal, Api, Bound, ServeError, Shutdown};
