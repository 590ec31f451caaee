//! A Rust client of the daemon: connecting over TCP or a Unix socket, and the
//! calls `cuzk client` makes. Returns the wire types: this is the wire's client
//! side (the service never sees them).

use std::{path::PathBuf, time::Duration};

use hyper_util::rt::TokioIo;
use tonic::{
    service::interceptor::InterceptedService,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Uri},
};

use crate::{
    auth::BearerToken,
    config::Listen,
    wire::{self as pb, proving_engine_client::ProvingEngineClient},
};

/// The wire's `ProofKind` of a service kind (what a client sends for it).
pub use crate::convert::wire_kind;

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

/// A client of `cuzk.v1.ProvingEngine` (sending the token, if it has one).
pub type Client = ProvingEngineClient<InterceptedService<Channel, BearerToken>>;

/// How a client identifies itself and checks the daemon.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// The daemon's shared token (`[daemon] token_file`'s content).
    pub token: Option<String>,
    /// A PEM CA certificate: connect over TLS, trusting it.
    pub tls_ca: Option<PathBuf>,
    /// The name the daemon's certificate is checked against (default: the
    /// address's host).
    pub tls_domain: Option<String>,
}

/// Connects to `addr` (`host:port` or `unix:///path`), allowing messages of
/// `max_message_bytes` each way; no token, no TLS.
pub async fn connect(addr: &str, max_message_bytes: usize) -> Result<Client, ConnectError> {
    connect_with(addr, max_message_bytes, &ClientOptions::default()).await
}

/// [`connect`] with a token and TLS as `opts` says.
pub async fn connect_with(
    addr: &str,
    max_message_bytes: usize,
    opts: &ClientOptions,
) -> Result<Client, ConnectError> {
    let listen = Listen::parse(addr).map_err(|e| ConnectError::Address(e.to_string()))?;
    let err = |source| ConnectError::Connect {
        addr: addr.to_owned(),
        source,
    };
    let token = BearerToken::new(opts.token.as_deref()).map_err(ConnectError::Address)?;
    let channel = match listen {
        Listen::Tcp(a) => {
            let scheme = if opts.tls_ca.is_some() {
                "https"
            } else {
                "http"
            };
            let mut endpoint = Endpoint::from_shared(format!("{scheme}://{a}"))
                .map_err(|e| ConnectError::Address(e.to_string()))?
                .connect_timeout(Duration::from_secs(10));
            if let Some(ca) = &opts.tls_ca {
                let pem = std::fs::read(ca)
                    .map_err(|e| ConnectError::Address(format!("{}: {e}", ca.display())))?;
                let host = a.rsplit_once(':').map_or(a.as_str(), |(h, _)| h);
                let domain = opts.tls_domain.clone().unwrap_or_else(|| {
                    host.trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_owned()
                });
                endpoint = endpoint
                    .tls_config(
                        ClientTlsConfig::new()
                            .ca_certificate(Certificate::from_pem(pem))
                            .domain_name(domain),
                    )
                    .map_err(err)?;
            }
            endpoint.connect().await.map_err(err)?
        }
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
    Ok(ProvingEngineClient::with_interceptor(channel, token)
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
    if !s.plan.is_empty() {
        let _ = write!(out, "plan at start:\n{}", s.plan);
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
