//! `cuzk client`: talk to a running `cuzk serve` (prove, status, cancel, metrics).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use cuzk_daemon::{client, wire as pb};

#[derive(Args, Debug)]
pub struct ClientArgs {
    /// The daemon: `host:port` or `unix:///path`.
    #[arg(long, default_value = "127.0.0.1:9820", global = true)]
    pub addr: String,
    /// Largest message each way, MiB (the daemon's default is its largest kind's
    /// request + 1: 1025, for NI-PoRep's C1 envelopes).
    #[arg(long, default_value_t = 1025, global = true)]
    pub max_message_mib: usize,
    /// A file holding the daemon's token (its `[daemon] token_file`), sent as
    /// `authorization: Bearer <token>` with every call.
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
    /// Connect over TLS, trusting this PEM CA certificate.
    #[arg(long, global = true)]
    pub tls_ca: Option<PathBuf>,
    /// The name the daemon's certificate must carry (default: the address's host).
    #[arg(long, global = true)]
    pub tls_domain: Option<String>,
    #[command(subcommand)]
    pub command: ClientCommand,
}

#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Prove a PoRep C2 from a C1 output (the `{"SectorNum","Phase1Out","SectorSize"}`
    /// envelope) and write the proof. A non-interactive registered proof is sent
    /// as NI_POREP_SEAL_COMMIT (cuzk's kind 1000; its proof is the sector's
    /// SnarkPack aggregate), an interactive one as POREP_SEAL_COMMIT.
    Prove(ProveArgs),
    /// Aggregate many sectors' C2 outputs with SnarkPack (SEAL_AGGREGATE, cuzk's
    /// kind 1001) and write the aggregate, verified by the daemon.
    Aggregate(AggregateArgs),
    /// Prove a built-in synthetic circuit (a daemon started with `synthetic = true`).
    Synthetic(SyntheticArgs),
    /// Queues, loaded parameters, GPUs and counters.
    Status,
    /// Cancel a job.
    Cancel {
        /// The job id.
        job_id: String,
    },
    /// The Prometheus metrics text.
    Metrics,
    /// Load a circuit's parameters (and compile its circuit) now, ahead of its
    /// first proof: `porep-32g`, `wpost-32g`, `winning-32g`, `snap-32g`, ...
    Preload {
        /// The circuit id, as Curio names it.
        circuit_id: String,
    },
    /// Free a circuit's parameters (host and device) when no job uses them.
    Evict {
        /// The circuit id, as Curio names it.
        circuit_id: String,
    },
    /// Submit N jobs at once and report s/proof and GPU busy (the daemon's
    /// `cuzk_gpu_busy_seconds_total` before and after).
    Bench(crate::client_bench::BenchArgs),
}

#[derive(Args, Debug)]
pub struct ProveArgs {
    /// The C1 output envelope (JSON).
    #[arg(long)]
    pub c1: PathBuf,
    #[arg(long)]
    pub miner_id: u64,
    /// Default: the envelope's SectorNum.
    #[arg(long)]
    pub sector_number: Option<u64>,
    /// Where to write the proof bytes.
    #[arg(long, default_value = "proof.bin")]
    pub out: PathBuf,
    /// The job id (default: the daemon picks one).
    #[arg(long, default_value = "")]
    pub request_id: String,
}

#[derive(Args, Debug)]
pub struct AggregateArgs {
    /// The aggregate request (JSON, as `cuzk aggregate request` writes it).
    pub request: PathBuf,
    /// Where to write the aggregate.
    #[arg(long, short, default_value = "aggregate.bin")]
    pub out: PathBuf,
    /// The job id (default: the daemon picks one).
    #[arg(long, default_value = "")]
    pub request_id: String,
}

#[derive(Args, Debug)]
pub struct SyntheticArgs {
    /// `sha256` or `mul`.
    #[arg(long, default_value = "mul")]
    pub circuit: String,
    #[arg(long, default_value_t = 10)]
    pub log: u32,
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write the proof bytes.
    #[arg(long, default_value = "proof.bin")]
    pub out: PathBuf,
}

pub fn client(args: ClientArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(run(args))
}

async fn run(args: ClientArgs) -> Result<()> {
    let token = match &args.token_file {
        Some(path) => Some(cuzk_daemon::auth::read_token(path).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let opts = client::ClientOptions {
        token,
        tls_ca: args.tls_ca.clone(),
        tls_domain: args.tls_domain.clone(),
    };
    let mut c = client::connect_with(&args.addr, args.max_message_mib << 20, &opts).await?;
    match args.command {
        ClientCommand::Prove(p) => {
            let envelope =
                std::fs::read(&p.c1).with_context(|| format!("reading {}", p.c1.display()))?;
            let sector_number = match p.sector_number {
                Some(n) => n,
                None => serde_json::from_slice::<serde_json::Value>(&envelope)
                    .ok()
                    .and_then(|v| v.get("SectorNum").and_then(|n| n.as_u64()))
                    .context("the envelope has no SectorNum: pass --sector-number")?,
            };
            let kind = cuzk_filecoin::service_kind::porep_kind_of(&envelope)
                .with_context(|| format!("the C1 envelope {}", p.c1.display()))?;
            let submit = pb::SubmitProofRequest {
                request_id: p.request_id,
                proof_kind: client::wire_kind(kind) as i32,
                vanilla_proof: envelope,
                sector_number,
                miner_id: p.miner_id,
                ..Default::default()
            };
            prove(&mut c, submit, &p.out).await
        }
        ClientCommand::Aggregate(a) => {
            let request = std::fs::read(&a.request)
                .with_context(|| format!("reading {}", a.request.display()))?;
            let submit = pb::SubmitProofRequest {
                request_id: a.request_id,
                proof_kind: pb::ProofKind::SealAggregate as i32,
                vanilla_proof: request,
                ..Default::default()
            };
            prove(&mut c, submit, &a.out).await
        }
        ClientCommand::Synthetic(s) => {
            let spec = serde_json::json!({
                "circuit": s.circuit, "log": s.log, "partitions": s.partitions, "seed": s.seed,
            });
            let submit = pb::SubmitProofRequest {
                proof_kind: pb::ProofKind::Synthetic as i32,
                vanilla_proof: spec.to_string().into_bytes(),
                ..Default::default()
            };
            prove(&mut c, submit, &s.out).await
        }
        ClientCommand::Status => {
            let s = c.get_status(pb::GetStatusRequest {}).await?.into_inner();
            print!("{}", client::format_status(&s));
            Ok(())
        }
        ClientCommand::Cancel { job_id } => {
            let r = c
                .cancel_proof(pb::CancelProofRequest {
                    job_id: job_id.clone(),
                })
                .await?
                .into_inner();
            println!(
                "{job_id}: cancelled ({})",
                if r.was_running {
                    "it was running"
                } else {
                    "it was queued or finished"
                }
            );
            Ok(())
        }
        ClientCommand::Bench(b) => crate::client_bench::run(&mut c, &args.addr, b).await,
        ClientCommand::Metrics => {
            let m = c.get_metrics(pb::GetMetricsRequest {}).await?.into_inner();
            print!("{}", m.prometheus_text);
            Ok(())
        }
        ClientCommand::Preload { circuit_id } => {
            let r = c
                .preload_srs(pb::PreloadSrsRequest {
                    circuit_id: circuit_id.clone(),
                })
                .await?
                .into_inner();
            if r.already_loaded {
                println!("{circuit_id}: already loaded");
            } else {
                println!("{circuit_id}: loaded in {} ms", r.load_time_ms);
            }
            Ok(())
        }
        ClientCommand::Evict { circuit_id } => {
            let r = c
                .evict_srs(pb::EvictSrsRequest {
                    circuit_id: circuit_id.clone(),
                })
                .await?
                .into_inner();
            if r.was_loaded {
                println!("{circuit_id}: evicted, {} bytes freed", r.freed_bytes);
            } else {
                println!("{circuit_id}: was not loaded");
            }
            Ok(())
        }
    }
}

async fn prove(
    c: &mut client::Client,
    submit: pb::SubmitProofRequest,
    out: &PathBuf,
) -> Result<()> {
    let r = c
        .prove(pb::ProveRequest {
            submit: Some(submit),
        })
        .await?
        .into_inner()
        .result
        .context("the daemon's answer has no result")?;
    let status = client::status_name(&r);
    let timing_only = if r.timing_only {
        " TIMING-ONLY (timing-only parameters: NOT verified, does not verify)"
    } else {
        ""
    };
    println!(
        "job {}: {status}{timing_only} (queue {} ms, parameters {} ms, synthesis {} ms, GPU {} ms, total {} ms)",
        r.job_id, r.queue_wait_ms, r.srs_load_ms, r.synthesis_ms, r.gpu_compute_ms, r.total_ms
    );
    if status != "COMPLETED" {
        bail!("the proof was not made: {}", r.error_message);
    }
    std::fs::write(out, &r.proof).with_context(|| format!("writing {}", out.display()))?;
    println!("wrote {} bytes to {}", r.proof.len(), out.display());
    Ok(())
}
