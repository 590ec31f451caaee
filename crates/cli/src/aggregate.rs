//! `cuzk aggregate`: many sectors' C2 outputs into one SnarkPack aggregate, with
//! filecoin-proofs' own aggregation and verification (interactive PoRep, the
//! ProveCommitAggregate case, and non-interactive PoRep's partition proofs).
//!
//! ```text
//! cuzk aggregate request --miner-id 1000 --c1 a.json --proof a.proof --c1 b.json --proof b.proof -o req.json
//! cuzk aggregate req.json -o agg.bin        # aggregated, verified, written
//! cuzk aggregate verify req.json --aggregate agg.bin
//! cuzk aggregate gen-srs                    # test SRS under its official name
//! ```

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use cuzk_filecoin::aggregate::{self, AggregateRequest, AggregateSector};
use cuzk_filecoin::{check_aggregate_request, read_c1};

use crate::filecoin::ParamCacheArgs;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AggregateArgs {
    #[command(subcommand)]
    pub command: Option<AggregateCommand>,
    /// The aggregate request (JSON, as `cuzk aggregate request` writes it).
    pub request: Option<PathBuf>,
    /// Where to write the aggregate.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub params: ParamCacheArgs,
}

#[derive(Subcommand, Debug)]
pub enum AggregateCommand {
    /// Writes an aggregate request from C1 outputs and their C2 proofs.
    Request(RequestArgs),
    /// Verifies an aggregate with filecoin-proofs' verify_aggregate_seal_commit_proofs.
    Verify(VerifyArgs),
    /// Writes an insecure SnarkPack SRS (tests) under its official name.
    GenSrs(GenSrsArgs),
}

#[derive(Args, Debug)]
pub struct RequestArgs {
    /// Miner actor id (1000 or f01000) or 32-byte hex prover id.
    #[arg(long)]
    pub miner_id: String,
    /// A sector's C1 output or envelope, once per sector, in the aggregate's order.
    #[arg(long, required = true)]
    pub c1: Vec<PathBuf>,
    /// Its proof (interactive: the C2 output; non-interactive: the partition proofs,
    /// `cuzk c2 --partition-proofs`), once per `--c1`, in the same order.
    #[arg(long, required = true)]
    pub proof: Vec<PathBuf>,
    /// The sector numbers, once per `--c1`, where the inputs are bare C1 outputs.
    #[arg(long)]
    pub sector: Vec<u64>,
    /// SnarkPackV2 (default) or SnarkPackV1.
    #[arg(long, default_value = "SnarkPackV2")]
    pub aggregation: String,
    #[arg(long, short)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    pub request: PathBuf,
    #[arg(long)]
    pub aggregate: PathBuf,
    #[command(flatten)]
    pub params: ParamCacheArgs,
}

#[derive(Args, Debug)]
pub struct GenSrsArgs {
    /// The most proofs the SRS aggregates (partitions, not sectors).
    #[arg(long, default_value_t = 256)]
    pub max_proofs: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub params: ParamCacheArgs,
}

pub fn run(args: AggregateArgs) -> Result<()> {
    match args.command {
        Some(AggregateCommand::Request(r)) => request(r),
        Some(AggregateCommand::Verify(v)) => verify(v),
        Some(AggregateCommand::GenSrs(g)) => gen_srs(g),
        None => {
            let Some(path) = &args.request else {
                bail!("give the aggregate request (JSON), or a subcommand");
            };
            let dir = args.params.apply();
            let checked = read_request(path)?;
            let t = Instant::now();
            let bytes = aggregate::aggregate(&checked, &dir)?;
            println!(
                "aggregate of {} {} sectors: {} bytes in {:.2} s, verified by filecoin-proofs' verify_aggregate_seal_commit_proofs",
                checked.sectors.len(),
                checked.kind.name,
                bytes.len(),
                t.elapsed().as_secs_f64()
            );
            if let Some(out) = &args.out {
                fs::write(out, &bytes).with_context(|| format!("writing {}", out.display()))?;
                println!("aggregate: {}", out.display());
            }
            Ok(())
        }
    }
}

fn read_request(path: &PathBuf) -> Result<cuzk_filecoin::CheckedAggregate> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(check_aggregate_request(AggregateRequest::parse(&bytes)?)?)
}

fn request(args: RequestArgs) -> Result<()> {
    if args.c1.len() != args.proof.len() {
        bail!(
            "{} --c1 and {} --proof: give one proof per C1 output",
            args.c1.len(),
            args.proof.len()
        );
    }
    if !args.sector.is_empty() && args.sector.len() != args.c1.len() {
        bail!("give --sector once per --c1, or not at all (envelopes carry their own)");
    }
    let aggregation =
        serde_json::from_value(serde_json::Value::String(args.aggregation.clone()))
            .with_context(|| format!("`{}` is not SnarkPackV1 or SnarkPackV2", args.aggregation))?;
    let mut sectors = Vec::with_capacity(args.c1.len());
    for (i, (c1, proof)) in args.c1.iter().zip(&args.proof).enumerate() {
        let input = read_c1(c1).with_context(|| format!("reading {}", c1.display()))?;
        let proof = fs::read(proof).with_context(|| format!("reading {}", proof.display()))?;
        sectors.push(AggregateSector::from_c1(
            &input,
            args.sector.get(i).copied(),
            proof,
        )?);
    }
    let req = AggregateRequest {
        prover_id: args.miner_id,
        aggregation,
        sectors,
    };
    // Checked now, so that a request that can never aggregate is not written.
    check_aggregate_request(req.clone())?;
    fs::write(&args.out, serde_json::to_vec_pretty(&req)?)
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "request for {} sectors: {}",
        req.sectors.len(),
        args.out.display()
    );
    Ok(())
}

fn verify(args: VerifyArgs) -> Result<()> {
    args.params.apply();
    let checked = read_request(&args.request)?;
    let bytes = fs::read(&args.aggregate)
        .with_context(|| format!("reading {}", args.aggregate.display()))?;
    aggregate::verify_aggregate(&checked, &bytes)?;
    println!(
        "aggregate {} of {} {} sectors verifies, checked by filecoin-proofs' verify_aggregate_seal_commit_proofs",
        args.aggregate.display(),
        checked.sectors.len(),
        checked.kind.name
    );
    Ok(())
}

fn gen_srs(args: GenSrsArgs) -> Result<()> {
    let dir = args.params.apply();
    let t = Instant::now();
    let path = aggregate::generate_srs(&dir, args.seed, args.max_proofs)?;
    println!(
        "INSECURE test SRS for up to {} proofs: {} in {:.2} s",
        args.max_proofs.next_power_of_two(),
        path.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
