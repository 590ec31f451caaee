//! `cuzk`: prove, verify and benchmark Groth16 proofs for BLS12-381.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use cuzk_circuits::Builtin;

mod aggregate;
mod bench;
mod bench_mix;
mod client;
mod client_bench;
mod demo;
mod filecoin;
mod kinds;
mod one_proof;
mod plan;
mod plan_served;
mod progress;
mod prove;
mod queue_cmd;
mod queue_runner;
mod runtime;
mod serve;
mod table;
mod tools;
mod worker;

/// cuzk proves Groth16 (BLS12-381) circuits the way Filecoin's C2 does, stage by
/// stage, and prints what each stage cost. Its proofs are byte-identical to
/// bellperson's for the same parameters, circuit and randomness.
///
/// Start with `cuzk demo`: it generates parameters for a built-in circuit (cached),
/// proves a few proofs, verifies them with bellperson's verifier and prints the
/// per-stage times.
#[derive(Parser, Debug)]
#[command(name = "cuzk", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Prove and verify a few proofs of a built-in circuit and print per-stage times.
    Demo(demo::DemoArgs),
    /// Prove a built-in circuit and write the proof (192 bytes, bellperson's encoding).
    Prove(prove::ProveArgs),
    /// Verify a proof written by `cuzk prove` with bellperson's verifier.
    Verify(prove::VerifyArgs),
    /// Parameter files: generate, inspect.
    Params {
        #[command(subcommand)]
        command: ParamsCommand,
    },
    /// Run a workload (jobs of several partitions) through the pipelined engine and
    /// print s/proof, proofs/hour, GPU busy %, peak RSS and the stage table; writes
    /// the TIMELINE, a waterfall picture and a manifest.
    Bench(bench::BenchArgs),
    /// Compare two configurations: runs A and B interleaved and reports the ratio
    /// B/A with a 95% confidence interval.
    Ab(bench::AbArgs),
    /// Analyse a recorded TIMELINE: per-stage statistics, GPU busy %, waits, and a
    /// waterfall picture.
    Timeline(tools::TimelineArgs),
    /// Seal a random Filecoin sector on the CPU (filecoin-proofs: pre-commit 1 and 2,
    /// commit 1) and write its C1 output (and envelope): a test input for `c2`.
    C1(filecoin::C1Args),
    /// Filecoin PoRep C2: a sector's proof from its C1 output (or envelope), proven
    /// by the pipelined engine and verified by filecoin-proofs; `c2 verify` checks a
    /// proof, `c2 peer` runs filecoin-proofs' own C2 on the same input.
    C2(filecoin::C2Args),
    /// SnarkPack aggregation of many sectors' C2 outputs (filecoin-proofs' own).
    Aggregate(aggregate::AggregateArgs),
    /// Filecoin SnapDeals: an update proof from vanilla partition proofs, proven by the
    /// engine and verified by filecoin-proofs; `snap inputs` makes test inputs,
    /// `snap verify` checks a proof, `snap peer` runs filecoin-proofs' own function.
    Snap(kinds::KindArgs),
    /// Filecoin PoSt from vanilla sector proofs: `post window` (one WindowPoSt
    /// partition) and `post winning`, each with `inputs`, `verify` and `peer`.
    Post {
        #[command(subcommand)]
        command: kinds::PostCommand,
    },
    /// Plugins: list what is installed, check one file.
    Plugins {
        #[command(subcommand)]
        command: tools::PluginsCommand,
    },
    /// Claim proof jobs of every kind from a PostgreSQL queue and prove them
    /// through the proving service `cuzk serve` runs (the same `--config`,
    /// backend, plugins and kinds).
    Worker(worker::WorkerArgs),
    /// The PostgreSQL queue: submit jobs of any kind, show them, wait for their
    /// proofs, migrate its schema, prune old jobs.
    Queue {
        #[command(subcommand)]
        command: queue_cmd::QueueCommand,
    },
    /// Run the proving daemon (gRPC `cuzk.v1.ProvingEngine`, as Curio calls it)
    /// with the `[daemon]` table of `--config`.
    Serve(serve::ServeArgs),
    /// Talk to a running daemon: prove, status, cancel, metrics.
    Client(client::ClientArgs),
    /// The settings planned for this machine (or one the flags describe) and the
    /// s/proof to expect, per kind, before anything runs.
    Plan(plan::PlanArgs),
}

#[derive(Subcommand, Debug)]
enum ParamsCommand {
    /// Generate parameters for a built-in circuit and write them as a `.params` file,
    /// or (`--proof`) for a registered Filecoin PoRep proof, under its official name.
    Gen(prove::ParamsGenArgs),
    /// Print the section sizes of a `.params` file without decoding its points.
    Info {
        /// The `.params` file.
        file: PathBuf,
    },
}

/// Which built-in circuit, and how big.
#[derive(Args, Debug, Clone)]
pub struct CircuitArgs {
    /// The built-in circuit: `sha256` (a chain of SHA-256 compressions: boolean
    /// witness, like PoRep) or `mul` (a chain of multiplications: random witness).
    #[arg(long, default_value = "sha256", value_parser = parse_builtin)]
    pub circuit: Builtin,
    /// Size as log2 of the constraint count (the NTT domain), 10 to 22.
    #[arg(long = "log", default_value_t = 16, value_parser = clap::value_parser!(u32).range(10..=22))]
    pub log: u32,
}

fn parse_builtin(s: &str) -> Result<Builtin, String> {
    Builtin::from_name(s).ok_or_else(|| {
        let names: Vec<_> = Builtin::ALL.iter().map(|b| b.name()).collect();
        format!("unknown circuit `{s}`: choose one of {}", names.join(", "))
    })
}

fn main() -> std::process::ExitCode {
    // The engine's and backends' warnings (a staging that failed, a device error a
    // partition was retried after); `RUST_LOG=cuzk_cuda::profile=info` adds the CUDA
    // backend's per-phase device times where its `profile` is set.
    cuzk_plugin_api::log_to_stderr();
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The chain of causes, without a backtrace: these are the user's errors
            // (a bad file, a missing plugin), not ours.
            eprintln!("error: {}", cause_chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by ": ", skipping a cause whose text its
/// parent already includes (the library errors say what went wrong inside them,
/// and also expose it as their source).
fn cause_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    let mut parent = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !parent.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        parent = text;
    }
    out
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Prove(args) => prove::prove(args),
        Command::Verify(args) => prove::verify(args),
        Command::Params { command } => match command {
            ParamsCommand::Gen(args) => prove::params_gen(args),
            ParamsCommand::Info { file } => prove::params_info(&file),
        },
        Command::Bench(args) => bench::bench(args),
        Command::Ab(args) => bench::ab(args),
        Command::Timeline(args) => tools::timeline(args),
        Command::C1(args) => filecoin::c1(args),
        Command::C2(args) => filecoin::c2(args),
        Command::Aggregate(args) => aggregate::run(args),
        Command::Snap(args) => kinds::run(kinds::Which::Snap, args),
        Command::Post { command } => match command {
            kinds::PostCommand::Window(args) => kinds::run(kinds::Which::Window, args),
            kinds::PostCommand::Winning(args) => kinds::run(kinds::Which::Winning, args),
        },
        Command::Plugins { command } => tools::plugins(command),
        Command::Worker(args) => worker::worker(args),
        Command::Queue { command } => queue_cmd::run(command),
        Command::Serve(args) => serve::serve(args),
        Command::Client(args) => client::client(args),
        Command::Plan(args) => plan::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_already_in_their_parent_are_not_repeated() {
        #[derive(Debug, thiserror::Error)]
        #[error("inner failure")]
        struct Inner;
        #[derive(Debug, thiserror::Error)]
        #[error("the stage failed: {0}")]
        struct Outer(#[from] Inner);
        let e = anyhow::Error::from(Outer(Inner)).context("reading x");
        assert_eq!(
            cause_chain(&e),
            "reading x: the stage failed: inner failure"
        );
    }
}
