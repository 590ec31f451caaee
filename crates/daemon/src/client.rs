//! A Rust client of the daemon: connecting over TCP or a Unix socket, and the
//! calls `cuzk client` makes. Returns the wire types: this is the wire's client
//! side (the service never sees them).

use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::{
    config::Listen,
    wire::{self as pb, proving_engine_client::ProvingEngineClient},
};

/// Connecting failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("bad daemon address: {0}")]
    Address(String),
    #[error("could not connect to the daemon at {addr}: {source}")]
    Connect {
        addr: String,
        source: tonic::transport::Error,
    },
}

/// A client of `cuzk.v1.ProvingEngine`.
pub type Client = ProvingEngineClient<Channel>;

/// Connects to `addr` (`host:port` or `unix:///path`), allowing messages of
/// `max_message_bytes` each way.
pub async fn connect(addr: &str, max_message_bytes: usize) -> Result<Client, ConnectError> {
    let listen = Listen::parse(addr).map_err(|e| ConnectError::Address(e.to_string()))?;
    let err = |source| ConnectError::Connect {
        addr: addr.to_owned(),
        source,
    };
    let channel = match listen {
        Listen::Tcp(a) => Endpoint::from_shared(format!("http://{a}"))
            .map_err(|e| ConnectError::Address(e.to_string()))?
            .connect_timeout(Duration::from_secs(10))
            .connect()
            .await
            .map_err(err)?,
        Listen::Unix(path) => {
            // The URI is required by the API and unused: the connector dials the path.
            Endpoint::from_static("http://localhost")
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        Ok::<_, std::io::Error>(TokioIo::new(
                            tokio::net::UnixStream::connect(path).await?,
                        ))
                    }
                }))
                .await
                .map_err(err)?
        }
    };
    Ok(ProvingEngineClient::new(channel)
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(max_message_bytes))
}

/// The status's words for an `AwaitProofResponse`.
pub fn status_name(r: &pb::AwaitProofResponse) -> &'static str {
    match pb::await_proof_response::Status::try_from(r.status) {
        Ok(pb::await_proof_response::Status::Completed) => "COMPLETED",
        Ok(pb::await_proof_response::Status::Failed) => "FAILED",
        Ok(pb::await_proof_response::Status::Cancelled) => "CANCELLED",
        Ok(pb::await_proof_response::Status::Timeout) => "TIMEOUT",
        _ => "UNKNOWN",
    }
}

/// `GetStatus` as lines a person reads.
pub fn format_status(s: &pb::GetStatusResponse) -> String {
    use std::fmt::Write as _;
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "uptime {} s, proofs completed {}, failed {}, budget in use {:.2} / {:.2} GiB",
        s.uptime_seconds,
        s.total_proofs_completed,
        s.total_proofs_failed,
        gib(s.pinned_memory_bytes),
        gib(s.pinned_memory_limit_bytes)
    );
    if !s.timing_only_circuits.is_empty() {
        let _ = writeln!(
            out,
            "TIMING-ONLY circuits (benchmarks; proofs returned unverified, they do not verify): {}",
            s.timing_only_circuits.join(", ")
        );
    }
    if s.gpus.is_empty() {
        let _ = writeln!(out, "GPUs: none seen by the CUDA driver");
    }
    for g in &s.gpus {
        let _ = writeln!(
            out,
            "GPU {} {}: {:.1} / {:.1} GiB free{}",
            g.ordinal,
            g.name,
            gib(g.vram_free_bytes),
            gib(g.vram_total_bytes),
            if g.current_job_id.is_empty() {
                String::new()
            } else {
                format!(", proving {} ({})", g.current_job_id, g.current_proof_kind)
            }
        );
    }
    for q in &s.queues {
        let _ = writeln!(
            out,
            "queue {}: {} pending, {} in progress",
            q.proof_kind, q.pending, q.in_progress
        );
    }
    for p in &s.loaded_srs {
        let _ = writeln!(
            out,
            "parameters {}: {:.3} GiB, {} job(s) using them{}",
            p.circuit_id,
            gib(p.size_bytes),
            p.ref_count,
            if p.timing_only {
                " (TIMING-ONLY: random points)"
            } else {
                ""
            }
        );
    }
    out
}
