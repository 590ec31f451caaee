//! `cuzk queue submit|status|wait`: the queue from the outside, for people and
//! scripts. Job ids go to stdout one per line; everything else to stderr.

use std::{path::PathBuf, time::Duration};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use cuzk_queue::{JobState, JobStatus, Queue, Submission};

use crate::{synthetic_job, CircuitArgs};

#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Put jobs in the queue; prints their ids, one per line.
    Submit(SubmitArgs),
    /// Show jobs (or, without ids, how many are in each state).
    Status(StatusArgs),
    /// Wait until jobs are done or failed; writes their proofs. Exits non-zero
    /// if any failed.
    Wait(WaitArgs),
}

#[derive(Args, Debug)]
pub struct QueueUrl {
    /// The queue: a PostgreSQL URL (`postgres://user@host:port/db`).
    #[arg(long)]
    pub queue: String,
}

#[derive(Args, Debug)]
pub struct SubmitArgs {
    #[command(flatten)]
    url: QueueUrl,
    /// Higher is claimed first; ties in submission order.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    priority: i32,
    /// Attempts before a job is marked failed.
    #[arg(long, default_value_t = cuzk_queue::QueueConfig::default().max_attempts)]
    max_attempts: u32,
    #[command(subcommand)]
    kind: SubmitKind,
}

#[derive(Subcommand, Debug)]
enum SubmitKind {
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
    /// A job of any kind from a file of its input bytes (a kind no worker
    /// proves stays queued until one does).
    Raw {
        /// The job kind.
        #[arg(long)]
        kind: String,
        /// The input file.
        input: PathBuf,
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
    Queue::connect(&url.queue).context("connecting to the queue")
}

pub fn run(cmd: QueueCommand) -> Result<()> {
    match cmd {
        QueueCommand::Submit(a) => submit(a),
        QueueCommand::Status(a) => status(a),
        QueueCommand::Wait(a) => wait(a),
    }
}

fn submit(args: SubmitArgs) -> Result<()> {
    let jobs: Vec<(String, Vec<u8>)> = match &args.kind {
        SubmitKind::Synthetic {
            circuit,
            seed,
            partitions,
            count,
        } => (0..*count)
            .map(|i| {
                let job = synthetic_job::SyntheticJob {
                    circuit: circuit.circuit.name().into(),
                    log: circuit.log,
                    seed: seed.wrapping_add(i as u64 * *partitions as u64),
                    partitions: *partitions,
                };
                (synthetic_job::KIND.to_string(), job.to_bytes())
            })
            .collect(),
        SubmitKind::Raw { kind, input } => vec![(
            kind.clone(),
            std::fs::read(input).with_context(|| format!("reading {}", input.display()))?,
        )],
    };
    let mut q = connect(&args.url)?;
    for (kind, input) in jobs {
        let id = q.submit(&Submission {
            kind,
            input,
            priority: args.priority,
            max_attempts: args.max_attempts,
        })?;
        println!("{id}");
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
        "{:>8}  {:<10} {:<8} prio {:>4}  attempts {}/{}  {who}{}",
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
