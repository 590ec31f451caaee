//! `cuzk queue submit|status|wait|migrate|prune`: the queue from the outside, for
//! people and scripts. Job ids go to stdout one per line; everything else to
//! stderr.
//!
//! Every job is the daemon's `SubmitProofRequest`, encoded (`cuzk_daemon::payload`),
//! queued under its kind's name, and checked before it is queued by the same
//! service kind that will prove it, so a typo fails here, not three times in a
//! worker.

use std::{path::PathBuf, sync::Arc, time::Duration};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use cuzk_config::Age;
use cuzk_daemon::payload;
use cuzk_queue::{Database, JobState, JobStatus, Queue, Submission};
use cuzk_service::{KindProver, Priority, ProofKind, ProofRequest};

use crate::{
    kinds::{RequestArgs, Which},
    queue_runner::{check_request, parse_priority, queue_priority},
    serve::{service_kinds, KindsSetup, SyntheticSetup},
    CircuitArgs,
};

#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Put jobs in the queue; prints their ids, one per line.
    Submit(Box<SubmitArgs>),
    /// Show jobs (or, without ids, how many are in each state).
    Status(StatusArgs),
    /// Wait until jobs are done or failed; writes their proofs. Exits non-zero
    /// if any failed.
    Wait(WaitArgs),
    /// Create or upgrade the queue's schema (the only command that changes it:
    /// workers and submitters refuse a schema behind their own).
    Migrate(MigrateArgs),
    /// Delete done and failed jobs (inputs and proofs with them) finished longer
    /// ago than `--keep-done` or `[queue] keep_done`.
    Prune(PruneArgs),
}

#[derive(Args, Debug)]
pub struct QueueUrl {
    /// The queue: a PostgreSQL URL (`postgres://user@host:port/db`; TLS as its
    /// `sslmode` says: disable, prefer, require).
    #[arg(long)]
    pub queue: String,
    /// A PEM file of CA certificates the server's certificate is verified
    /// against, beside Mozilla's roots.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
}

impl QueueUrl {
    pub fn database(&self) -> Database {
        Database::new(&self.queue).with_ca_file(self.ca_file.clone())
    }
}

#[derive(Args, Debug)]
pub struct MigrateArgs {
    #[command(flatten)]
    url: QueueUrl,
}

#[derive(Args, Debug)]
pub struct PruneArgs {
    #[command(flatten)]
    url: QueueUrl,
    /// Keep jobs finished more recently than this (`7d`, `12h`, `30m`).
    #[arg(long)]
    keep_done: Option<Age>,
    /// A cuzk.toml whose `[queue] keep_done` applies when the flag is not given.
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SubmitArgs {
    #[command(flatten)]
    url: QueueUrl,
    /// The job's priority, as in the engine: low, normal, high or critical
    /// (default: the kind's, WinningPoSt critical, WindowPoSt high, else
    /// normal). Claimed in that order (ties in submission order) and proved at it.
    #[arg(long, value_parser = parse_priority)]
    priority: Option<Priority>,
    /// Attempts before a job is marked failed.
    #[arg(long, default_value_t = cuzk_queue::QueueConfig::default().max_attempts)]
    max_attempts: u32,
    /// The idempotency key: a job submitted again with the same id is not
    /// queued twice (its first id is printed). Default: the payload's request
    /// id, if any. With `--count`, job i gets `ID-i`.
    #[arg(long)]
    request_id: Option<String>,
    /// Filecoin's parameter directory, for the checks that need it (default
    /// FIL_PROOFS_PARAMETER_CACHE, else filecoin-proofs' default).
    #[arg(long)]
    param_cache: Option<PathBuf>,
    #[command(subcommand)]
    kind: SubmitKind,
}

#[derive(Subcommand, Debug)]
enum SubmitKind {
    /// PoRep C2 from a C1 output (or its envelope), for a miner and sector. A
    /// non-interactive registered proof is queued as NI_POREP_SEAL_COMMIT (cuzk's
    /// kind 1000), an interactive one as POREP_SEAL_COMMIT.
    Porep {
        /// Miner actor id (1000 or f01000).
        #[arg(long)]
        miner_id: String,
        /// The sector number (default: the envelope's).
        #[arg(long)]
        sector: Option<u64>,
        /// The C1 output's JSON, or its envelope.
        c1: PathBuf,
    },
    /// SnarkPack aggregation of many sectors' C2 outputs (SEAL_AGGREGATE, cuzk's
    /// kind 1001): the aggregate request's JSON, as `cuzk aggregate request`
    /// writes it. The worker needs the SRS in its parameter cache.
    Aggregate {
        /// The aggregate request (JSON).
        request: PathBuf,
    },
    /// A SnapDeals update: an input file (`cuzk snap inputs`) and/or the flags
    /// of `cuzk snap`.
    Snap(RequestArgs),
    /// One WindowPoSt partition: an input file (`cuzk post window inputs`)
    /// and/or the flags of `cuzk post window`.
    Window(RequestArgs),
    /// A WinningPoSt: an input file (`cuzk post winning inputs`) and/or the
    /// flags of `cuzk post winning`.
    Winning(RequestArgs),
    /// Synthetic jobs: a built-in test circuit (not a Filecoin proof), proved with
    /// parameters the worker generates once and caches.
    Synthetic {
        #[command(flatten)]
        circuit: CircuitArgs,
        /// Witness seed of the first job's first partition; job i uses
        /// seed + i * partitions.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Partitions per job.
        #[arg(long, default_value_t = 1)]
        partitions: u32,
        /// How many jobs.
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// A job from a file holding an encoded `cuzk.v1.SubmitProofRequest` (what
    /// Curio sends to `cuzk serve`): its kind is the message's.
    Raw {
        /// The encoded request.
        #[arg(long)]
        payload: PathBuf,
    },
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    url: QueueUrl,
    /// Job ids (none: counts by state).
    ids: Vec<i64>,
    /// One JSON object per job on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct WaitArgs {
    #[command(flatten)]
    url: QueueUrl,
    /// Job ids.
    #[arg(required = true)]
    ids: Vec<i64>,
    /// Give up after this many seconds (exit non-zero).
    #[arg(long)]
    timeout_secs: Option<f64>,
    /// How often to look, in ms.
    #[arg(long, default_value_t = 200)]
    poll_ms: u64,
    /// Write each done job's proof to DIR/ID.proof.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn connect(url: &QueueUrl) -> Result<Queue> {
    Queue::connect(url.database()).context("connecting to the queue")
}

pub fn run(cmd: QueueCommand) -> Result<()> {
    match cmd {
        QueueCommand::Submit(a) => submit(*a),
        QueueCommand::Status(a) => status(a),
        QueueCommand::Wait(a) => wait(a),
        QueueCommand::Migrate(a) => migrate(a),
        QueueCommand::Prune(a) => prune(a),
    }
}

fn migrate(args: MigrateArgs) -> Result<()> {
    let applied = cuzk_queue::migrate_database(args.url.database())
        .context("migrating the queue's schema")?;
    if applied.is_empty() {
        eprintln!(
            "the queue's schema is up to date (migration {})",
            cuzk_queue::schema_version()
        );
    } else {
        eprintln!(
            "applied migration(s) {:?}; the schema is at {}",
            applied,
            cuzk_queue::schema_version()
        );
    }
    Ok(())
}

fn prune(args: PruneArgs) -> Result<()> {
    let from_config = match &args.config {
        Some(path) => cuzk_config::Config::load(path)?
            .queue
            .and_then(|q| q.keep_done),
        None => None,
    };
    let Some(keep) = args.keep_done.or(from_config) else {
        bail!("give --keep-done (such as 7d) or a --config with [queue] keep_done");
    };
    let pruned = connect(&args.url)?.prune(keep.0)?;
    eprintln!(
        "pruned {} done and {} failed jobs finished more than {} ago",
        pruned.done,
        pruned.failed,
        String::from(keep)
    );
    Ok(())
}

/// The service's kinds, as a worker registers them (nothing is loaded): what
/// checks each request before it is queued.
fn checking_kinds(param_cache: Option<&PathBuf>) -> Result<Vec<Arc<dyn KindProver>>> {
    let dir = crate::worker::param_cache(param_cache);
    service_kinds(&KindsSetup {
        who: "cuzk queue submit",
        param_cache_key: "--param-cache",
        param_cache: &dir,
        timing_only_circuits: &[],
        synthetic: Some(SyntheticSetup {
            max_log: cuzk_service::synthetic::MAX_LOG,
            timing_only: false,
        }),
        check_digest: false,
        points_dir: None,
    })
    .map(|k| k.kinds)
}

/// The jobs of a submission: each kind's request(s).
fn requests(kind: &SubmitKind) -> Result<Vec<(ProofKind, ProofRequest)>> {
    Ok(match kind {
        SubmitKind::Porep {
            miner_id: miner,
            sector,
            c1,
        } => {
            let bytes = std::fs::read(c1).with_context(|| format!("reading {}", c1.display()))?;
            let kind = cuzk_filecoin::service_kind::porep_kind_of(&bytes)
                .with_context(|| format!("the C1 output {}", c1.display()))?;
            vec![(
                kind,
                ProofRequest {
                    vanilla_proof: bytes,
                    miner_id: crate::kinds::miner_actor_id(miner)?,
                    sector_number: sector.unwrap_or(0),
                    ..ProofRequest::default()
                },
            )]
        }
        SubmitKind::Aggregate { request } => {
            let bytes =
                std::fs::read(request).with_context(|| format!("reading {}", request.display()))?;
            vec![(
                ProofKind::SealAggregate,
                ProofRequest {
                    vanilla_proof: bytes,
                    ..ProofRequest::default()
                },
            )]
        }
        SubmitKind::Snap(r) => vec![r.proof_request(Which::Snap)?],
        SubmitKind::Window(r) => vec![r.proof_request(Which::Window)?],
        SubmitKind::Winning(r) => vec![r.proof_request(Which::Winning)?],
        SubmitKind::Synthetic {
            circuit,
            seed,
            partitions,
            count,
        } => (0..*count)
            .map(|i| {
                let spec = serde_json::json!({
                    "circuit": circuit.circuit.name(),
                    "log": circuit.log,
                    "partitions": partitions,
                    "seed": seed.wrapping_add(i as u64 * *partitions as u64),
                });
                (
                    ProofKind::Synthetic,
                    ProofRequest {
                        vanilla_proof: spec.to_string().into_bytes(),
                        ..ProofRequest::default()
                    },
                )
            })
            .collect(),
        SubmitKind::Raw { payload: path } => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            vec![payload::decode(&bytes).with_context(|| path.display().to_string())?]
        }
    })
}

fn submit(args: SubmitArgs) -> Result<()> {
    let jobs = requests(&args.kind)?;
    let param_cache = match &args.kind {
        SubmitKind::Snap(r) | SubmitKind::Window(r) | SubmitKind::Winning(r) => {
            r.params.param_cache.as_ref().or(args.param_cache.as_ref())
        }
        _ => args.param_cache.as_ref(),
    };
    let kinds = checking_kinds(param_cache)?;
    let many = jobs.len() > 1;
    let mut checked = Vec::with_capacity(jobs.len());
    for (i, (kind, mut request)) in jobs.into_iter().enumerate() {
        let key = match (&args.request_id, many) {
            (Some(k), true) => Some(format!("{k}-{i}")),
            (Some(k), false) => Some(k.clone()),
            (None, _) => request.request_id.clone(),
        };
        if let Some(k) = &key {
            if !payload::is_valid_request_id(k) {
                bail!("--request-id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -");
            }
        }
        request.request_id = key.clone();
        if let Some(p) = args.priority {
            request.priority = Some(p);
        }
        // The kind's own checks, as the worker's service will run them.
        check_request(&kinds, kind, &request)
            .with_context(|| format!("the {kind} request is refused before it is queued"))?;
        let priority = queue_priority(request.priority.unwrap_or(kind.default_priority()));
        checked.push((kind, request, key, priority));
    }
    let mut q = connect(&args.url)?;
    for (kind, request, key, priority) in checked {
        let s = q.submit(&Submission {
            kind: kind.name().to_string(),
            input: payload::encode(kind, &request),
            priority,
            max_attempts: args.max_attempts,
            request_id: key.clone(),
        })?;
        if s.existing {
            eprintln!(
                "request id {} was submitted before as job {}: not queued again",
                key.unwrap_or_default(),
                s.id
            );
        }
        println!("{}", s.id);
    }
    Ok(())
}

fn json_of(s: &JobStatus) -> serde_json::Value {
    serde_json::json!({
        "id": s.id,
        "kind": s.kind,
        "state": s.state.name(),
        "priority": s.priority,
        "attempts": s.attempts,
        "max_attempts": s.max_attempts,
        "worker": s.worker,
        "done_by": s.done_by,
        "proof": s.proof.as_ref().map(hex::encode),
        "writes": s.writes,
        "refused_writes": s.refused_writes,
        "request_id": s.request_id,
        "errors": s.errors,
        "seconds": s.seconds,
    })
}

fn print_status(s: &JobStatus) {
    let who = match s.state {
        JobState::Running => s.worker.clone().unwrap_or_default(),
        JobState::Done => s.done_by.clone().unwrap_or_default(),
        _ => String::new(),
    };
    println!(
        "{:>8}  {:<21} {:<8} prio {:>4}  attempts {}/{}  {who}{}",
        s.id,
        s.kind,
        s.state.name(),
        s.priority,
        s.attempts,
        s.max_attempts,
        s.seconds.map(|t| format!("  {t:.2} s")).unwrap_or_default()
    );
    for e in &s.errors {
        println!("          {e}");
    }
}

fn status(args: StatusArgs) -> Result<()> {
    let mut q = connect(&args.url)?;
    if args.ids.is_empty() {
        let [queued, running, done, failed] = q.counts()?;
        if args.json {
            println!(
                "{}",
                serde_json::json!({"queued": queued, "running": running, "done": done, "failed": failed})
            );
        } else {
            println!("queued {queued}  running {running}  done {done}  failed {failed}");
        }
        return Ok(());
    }
    for s in q.statuses(&args.ids)? {
        if args.json {
            println!("{}", json_of(&s));
        } else {
            print_status(&s);
        }
    }
    Ok(())
}

fn wait(args: WaitArgs) -> Result<()> {
    let mut q = connect(&args.url)?;
    let Some(all) = q.wait(
        &args.ids,
        Duration::from_millis(args.poll_ms.max(10)),
        args.timeout_secs.map(Duration::from_secs_f64),
    )?
    else {
        bail!("timed out waiting for the jobs");
    };
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut failed = 0;
    for s in &all {
        print_status(s);
        match (&s.proof, &args.out) {
            (Some(proof), Some(dir)) => {
                let path = dir.join(format!("{}.proof", s.id));
                std::fs::write(&path, proof)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            _ => failed += (s.state == JobState::Failed) as usize,
        }
    }
    if failed > 0 {
        bail!("{failed} of {} jobs failed", all.len());
    }
    Ok(())
}
