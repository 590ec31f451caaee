//! `cuzk c1`, `cuzk c2`, `cuzk c2 verify`, `cuzk c2 peer` and `cuzk params gen
//! --proof`: Filecoin PoRep through `cuzk-filecoin`.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Arc,
    time::Instant,
};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use cuzk_filecoin::{
    parse_prover_id, parse_registered_proof, read_c1, Envelope, FilecoinProver, PorepKind,
    PorepRequest, ProverConfig,
};
use cuzk_scheduler::PipelineEngine;
use cuzk_service::ProofRequest;

use crate::{
    one_proof::{run_config, write_proof, Circuit, Setup},
    progress,
    queue_runner::check_request,
    runtime::RunArgs,
};

/// Where Filecoin's parameter files are. Sets `FIL_PROOFS_PARAMETER_CACHE` for this
/// process, so that filecoin-proofs' verifier reads its verifying key from the same
/// place.
#[derive(Args, Debug, Clone, Default)]
pub struct ParamCacheArgs {
    /// Filecoin's parameter directory (default: $FIL_PROOFS_PARAMETER_CACHE, else
    /// /var/tmp/filecoin-proof-parameters).
    #[arg(long)]
    pub param_cache: Option<PathBuf>,
    /// Memory-map the parameters from decoded points files kept in this
    /// directory (written once per set, as large as its points: 44 GiB for a
    /// 32 GiB PoRep set), so that the kernel pages them in as the backend reads
    /// them and may drop them again: what lets a 64 GiB host hold a set the GPU
    /// keeps. Default: decoded into memory at every start.
    #[arg(long)]
    pub points_dir: Option<PathBuf>,
}

impl ParamCacheArgs {
    /// Applies `--param-cache` (before anything of filecoin-proofs reads its
    /// settings) and returns the directory in use.
    pub fn apply(&self) -> PathBuf {
        if let Some(dir) = &self.param_cache {
            // Single-threaded here: commands call this first thing.
            std::env::set_var(cuzk_filecoin::PARAMETER_CACHE_VAR, dir);
        }
        cuzk_filecoin::default_parameter_dir()
    }

    /// `prover`, mapping its parameters if `--points-dir` was given.
    pub fn map(&self, prover: FilecoinProver) -> FilecoinProver {
        match &self.points_dir {
            Some(dir) => prover.with_points_dir(dir.clone()),
            None => prover,
        }
    }
}

#[derive(Args, Debug)]
pub struct C1Args {
    /// The registered seal proof (name such as StackedDrg2KiBV1_1, or its number).
    #[arg(long, default_value = "StackedDrg2KiBV1_1")]
    pub proof: String,
    /// Miner actor id (1000 or f01000) or 32-byte hex prover id.
    #[arg(long, default_value = "1000")]
    pub miner_id: String,
    /// Sector number.
    #[arg(long, default_value_t = 1)]
    pub sector: u64,
    /// Seed of the sector's random data, ticket and challenge seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write the C1 output (JSON).
    #[arg(long, short)]
    pub out: PathBuf,
    /// Also write the lotus-bench/Curio envelope here.
    #[arg(long)]
    pub envelope: Option<PathBuf>,
    /// Write a shape-only C1 output instead of sealing: vanilla proofs of the exact
    /// shape of `--proof` (any size, 32 GiB and 64 GiB included) filled with random
    /// values. Its circuits cost what real ones cost; its proofs do NOT verify (use
    /// it with `bench --c1 ... --timing-only`).
    #[arg(long)]
    pub shape_only: bool,
}

/// `cuzk c1`: seals a random sector through filecoin-proofs and writes its C1 output.
pub fn c1(args: C1Args) -> Result<()> {
    let proof = parse_registered_proof(&args.proof)?;
    let prover_id = parse_prover_id(&args.miner_id)?;
    if args.shape_only {
        let pb = progress::spinner(format!("making a shape-only {} C1 output", args.proof));
        let t = Instant::now();
        let c1 = cuzk_filecoin::shape_only_c1(proof, args.seed)?;
        let json = serde_json::to_vec(&c1)?;
        pb.finish_and_clear();
        fs::write(&args.out, &json).with_context(|| format!("writing {}", args.out.display()))?;
        println!(
            "SHAPE-ONLY C1 output (random values; its proofs do not verify): {} ({} bytes, {:.2} s)",
            args.out.display(),
            json.len(),
            t.elapsed().as_secs_f64()
        );
        if let Some(path) = &args.envelope {
            let env = Envelope::wrap(&json, args.sector, u64::from(proof.sector_size()));
            fs::write(path, serde_json::to_vec(&env)?)
                .with_context(|| format!("writing {}", path.display()))?;
            println!("envelope: {}", path.display());
        }
        return Ok(());
    }
    let work = tempfile::tempdir().context("creating a work directory")?;
    let pb = progress::spinner(format!("sealing a random {} sector", args.proof));
    let t = Instant::now();
    let sealed =
        cuzk_filecoin::seal_test_sector(proof, prover_id, args.sector, args.seed, work.path())?;
    pb.finish_and_clear();
    fs::write(&args.out, &sealed.c1_json)
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "sealed sector {} ({}) in {:.2} s; C1 output: {} ({} bytes)",
        args.sector,
        args.proof,
        t.elapsed().as_secs_f64(),
        args.out.display(),
        sealed.c1_json.len()
    );
    if let Some(path) = &args.envelope {
        let env = Envelope::wrap(&sealed.c1_json, args.sector, u64::from(proof.sector_size()));
        fs::write(path, serde_json::to_vec(&env)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("envelope: {}", path.display());
    }
    Ok(())
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct C2Args {
    #[command(subcommand)]
    pub command: Option<C2Command>,
    #[command(flatten)]
    pub prove: C2ProveArgs,
}

#[derive(Subcommand, Debug)]
pub enum C2Command {
    /// Verify a C2 proof with filecoin-proofs' verify_seal.
    Verify(C2VerifyArgs),
    /// Run filecoin-proofs' own seal_commit_phase2 (CPU) on the same input: the peer
    /// cuzk is measured against.
    Peer(C2PeerArgs),
}

/// What identifies a sector's proof: its C1 output, miner and sector number.
#[derive(Args, Debug, Clone)]
pub struct SectorArgs {
    /// The C1 output (JSON) or an envelope `{"SectorNum","Phase1Out","SectorSize"}`.
    pub input: Option<PathBuf>,
    /// Miner actor id (1000 or f01000), as the proving service takes it;
    /// `verify` and `peer` also take a 32-byte hex prover id.
    #[arg(long)]
    pub miner_id: Option<String>,
    /// Sector number (an envelope carries its own).
    #[arg(long)]
    pub sector: Option<u64>,
    #[command(flatten)]
    pub params: ParamCacheArgs,
}

impl SectorArgs {
    fn read(&self) -> Result<(cuzk_filecoin::C1Input, [u8; 32], PathBuf)> {
        let dir = self.params.apply();
        let Some(input) = &self.input else {
            bail!("give the C1 output or envelope to prove");
        };
        let Some(miner) = &self.miner_id else {
            bail!("give --miner-id (the miner actor id, or a 32-byte hex prover id)");
        };
        let prover_id = parse_prover_id(miner)?;
        let c1 = read_c1(input).with_context(|| format!("reading {}", input.display()))?;
        Ok((c1, prover_id, dir))
    }
}

#[derive(Args, Debug)]
pub struct C2ProveArgs {
    #[command(flatten)]
    pub sector: SectorArgs,
    /// Where to write the proof (interactive PoRep: N × 192 bytes; non-interactive:
    /// the SnarkPack aggregate of its partitions, as `seal_commit_phase2` returns it).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Check the parameter file against Filecoin's parameters.json digest first.
    #[arg(long)]
    pub check_digest: bool,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print every TIMELINE line to stderr as it happens.
    #[arg(long)]
    pub timeline_stderr: bool,
}

#[derive(Args, Debug)]
pub struct C2VerifyArgs {
    #[command(flatten)]
    pub sector: SectorArgs,
    /// The proof file.
    #[arg(long)]
    pub proof: PathBuf,
}

#[derive(Args, Debug)]
pub struct C2PeerArgs {
    #[command(flatten)]
    pub sector: SectorArgs,
    /// Where to write the proof.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

pub fn c2(args: C2Args) -> Result<()> {
    match args.command {
        Some(C2Command::Verify(v)) => c2_verify(v),
        Some(C2Command::Peer(p)) => c2_peer(p),
        None => c2_prove(args.prove),
    }
}

fn c2_verify(args: C2VerifyArgs) -> Result<()> {
    let (input, prover_id, dir) = args.sector.read()?;
    let proof =
        fs::read(&args.proof).with_context(|| format!("reading {}", args.proof.display()))?;
    cuzk_filecoin::verify_proof(&input, prover_id, args.sector.sector, &proof, &dir)?;
    println!(
        "proof {} verifies for sector {} ({}), checked by filecoin-proofs' verify_seal",
        args.proof.display(),
        input.sector(args.sector.sector)?,
        input.proof_name()
    );
    Ok(())
}

fn c2_peer(args: C2PeerArgs) -> Result<()> {
    let (input, prover_id, _) = args.sector.read()?;
    let sector = input.sector(args.sector.sector)?;
    let pb = progress::spinner("filecoin-proofs' seal_commit_phase2 (CPU)");
    let t = Instant::now();
    let proof = cuzk_filecoin::reference::filecoin_proofs_c2(&input, prover_id, sector)?;
    pb.finish_and_clear();
    println!(
        "filecoin-proofs seal_commit_phase2: {} bytes in {:.2} s (parameter load and its own verification included)",
        proof.len(),
        t.elapsed().as_secs_f64()
    );
    if let Some(out) = &args.out {
        fs::write(out, &proof).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// `cuzk c2`: the C1 output or envelope as the service's PoRep request (Curio's
/// fields: the envelope's bytes, the miner's actor id, the sector number), checked
/// and proved through the service `cuzk serve` runs.
fn c2_prove(args: C2ProveArgs) -> Result<()> {
    let dir = args.sector.params.apply();
    let Some(input) = &args.sector.input else {
        bail!("give the C1 output or envelope to prove");
    };
    let Some(miner) = &args.sector.miner_id else {
        bail!("give --miner-id (the miner actor id: 1000 or f01000)");
    };
    let vanilla_proof = fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    // An NI registered proof is its own kind (NI_POREP_SEAL_COMMIT), as on the wire.
    let kind = cuzk_filecoin::service_kind::porep_kind_of(&vanilla_proof)?;
    let request = ProofRequest {
        vanilla_proof,
        miner_id: crate::kinds::miner_actor_id(miner)?,
        sector_number: args.sector.sector.unwrap_or(0),
        ..ProofRequest::default()
    };
    let setup = Setup {
        who: "cuzk c2",
        param_dir: &dir,
        check_digest: args.check_digest,
        points_dir: args.sector.params.points_dir.as_deref(),
        timeline_stderr: args.timeline_stderr,
        run: run_config(&args.run)?,
    };
    let kinds = setup.kinds(None)?;
    let checked = check_request(&kinds.kinds, kind, &request)?;
    let circuit = Circuit::porep(checked.circuit_id())?;
    drop(checked);
    let service = setup.start(kinds, &circuit)?;
    let (result, _) =
        service.prove_runs(kind, &request, 1, false, "filecoin-proofs' verify_seal")?;
    service.shutdown();
    write_proof(args.out.as_ref(), &result.proof)
}

/// `cuzk params gen --proof P`: a valid (insecure) parameter set for a registered
/// PoRep proof under its official name, from its blank circuit.
pub fn params_gen(proof: &str, cache: &ParamCacheArgs, seed: u64) -> Result<()> {
    let dir = cache.apply();
    let kind = PorepKind::new(parse_registered_proof(proof)?)?;
    let pb = progress::spinner(format!(
        "generating {} parameters (insecure test parameters) in {}",
        kind.name,
        dir.display()
    ));
    let t = Instant::now();
    let path = cuzk_filecoin::generate_params(&kind, &dir, seed)?;
    pb.finish_and_clear();
    println!(
        "wrote {} and {} in {:.1} s",
        path.display(),
        kind.vk_file(),
        t.elapsed().as_secs_f64()
    );
    crate::prove::params_info(&path)
}

/// The Filecoin half of `cuzk bench --c1`.
#[derive(Args, Debug, Clone, Default)]
pub struct BenchC1Args {
    /// With `--c1`: the miner (actor id or 32-byte hex prover id) the sector was sealed
    /// for.
    #[arg(long = "c1-miner-id", default_value = "1000")]
    pub miner_id: String,
    #[command(flatten)]
    pub params: ParamCacheArgs,
}

/// A `--c1` workload: the sector's input and the prover holding its circuit and
/// parameters.
pub struct BenchC1 {
    prover: FilecoinProver,
    input: cuzk_filecoin::C1Input,
    prover_id: [u8; 32],
    pub r1cs: Arc<cuzk::R1cs>,
    pub srs: Arc<cuzk::Srs>,
    pub timing_only: bool,
    pub partitions: usize,
    name: String,
    shape_only: bool,
}

impl BenchC1 {
    /// What the manifest and the summary call the workload.
    pub fn label(&self) -> String {
        format!(
            "filecoin {}{}",
            self.name,
            if self.shape_only {
                " (shape-only C1: random values)"
            } else {
                ""
            }
        )
    }
}

/// Reads the C1, compiles its circuit and loads (or, `timing_only`, makes) its
/// parameters, printing what each cost.
pub fn bench_prepare(c1: &Path, args: &BenchC1Args, timing_only: bool) -> Result<BenchC1> {
    let dir = args.params.apply();
    let input = read_c1(c1).with_context(|| format!("reading {}", c1.display()))?;
    let shape_only = cuzk_filecoin::is_shape_only(&input.c1);
    if shape_only && !timing_only {
        bail!("{} is a shape-only C1 output (random values): its proofs cannot verify; run it with --timing-only", c1.display());
    }
    let prover_id = parse_prover_id(&args.miner_id)?;
    let kind = PorepKind::new(input.c1.registered_proof)?;
    let config = ProverConfig {
        parameter_dir: dir,
        verify: !timing_only,
        check_digest: false,
    };
    // Timing-only: a prover whose every parameter set is random points (seed 7,
    // as `cuzk serve`'s timing-only circuits).
    let prover = args.params.map(if timing_only {
        FilecoinProver::timing_only(config, 7)
    } else {
        FilecoinProver::new(config)
    });
    let (r1cs, params) = crate::one_proof::compile_and_load(&prover, &kind, kind.partitions())?;
    Ok(BenchC1 {
        r1cs,
        srs: params.srs.clone(),
        timing_only,
        partitions: kind.partitions(),
        name: kind.name,
        prover,
        input,
        prover_id,
        shape_only,
    })
}

/// One sector of a `--c1` run, as the manifest and the summary show it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SectorTiming {
    /// Submission order (all sectors are submitted at once).
    pub index: usize,
    /// Seconds from the submission to the sector's last partition proof.
    pub proofs_s: f64,
    /// The engine's time for this sector's partitions in the stream: seconds since
    /// the previous sector's last partition proof (the first: since the submission).
    pub partitions_s: f64,
    /// Non-interactive PoRep: the SnarkPack aggregation's seconds, which begin at
    /// `proofs_s` while the engine goes on with the next sector's partitions.
    pub aggregate_s: Option<f64>,
    /// Whether the aggregate was made with a timing-only SRS (it does not verify).
    pub timing_only_aggregate: bool,
    /// Seconds from the submission to the sector's output (aggregated, verified).
    pub done_s: f64,
    /// The C2 output's bytes (interactive: N x 192; non-interactive: the aggregate).
    pub proof_bytes: usize,
    pub verified: bool,
}

/// What a `--c1` run measured.
#[derive(Clone, Debug)]
pub struct BenchC1Run {
    /// Seconds from the submission to the last sector's output.
    pub wall: f64,
    /// Per sector, in submission order.
    pub sectors: Vec<SectorTiming>,
}

/// Runs `jobs` sectors of the C1 through `engine`: all built first (circuits from the
/// vanilla proofs), then submitted at once; each checked by `verify_seal` unless the
/// parameters are timing-only or `verify` is off (`--no-verify`). Every sector is
/// waited for on a thread of its own, so a non-interactive sector's aggregation
/// starts the moment its last partition proof exists, beside the engine (which has
/// every later sector's partitions already) and beside another sector's aggregation.
pub fn bench_run(
    fc: &BenchC1,
    engine: &PipelineEngine,
    verify: bool,
    jobs: usize,
    show_progress: bool,
    label: &str,
) -> Result<BenchC1Run> {
    let mut prepared = Vec::with_capacity(jobs);
    for _ in 0..jobs {
        let job = fc.prover.prepare_porep(PorepRequest {
            input: fc.input.clone(),
            prover_id: fc.prover_id,
            sector: Some(fc.input.sector_num.unwrap_or(1)),
            blinding: Default::default(),
        })?;
        prepared.push(if verify {
            job
        } else {
            job.without_verification()
        });
    }
    let pb = show_progress.then(|| progress::bar(jobs as u64, format!("{label}: sectors")));
    let start = Instant::now();
    let handles: Vec<_> = prepared
        .into_iter()
        .map(|p| p.submit(engine, cuzk_filecoin::Priority::Normal))
        .collect();
    let waited: Vec<Result<(usize, cuzk_filecoin::PorepOutput, f64)>> = std::thread::scope(|s| {
        let waiters: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(index, h)| {
                let pb = pb.clone();
                s.spawn(move || {
                    let id = h.id();
                    let out = h
                        .wait_output()
                        .with_context(|| format!("sector job {id} of the {label} run failed"))?;
                    let done = start.elapsed().as_secs_f64();
                    if let Some(pb) = &pb {
                        pb.inc(1);
                    }
                    Ok((index, out, done))
                })
            })
            .collect();
        waiters
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a sector's waiting thread panicked")))
            })
            .collect()
    });
    let wall = start.elapsed().as_secs_f64();
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let mut sectors = Vec::with_capacity(jobs);
    for w in waited {
        let (index, out, done_s) = w?;
        sectors.push(SectorTiming {
            index,
            proofs_s: out.proofs_at.duration_since(start).as_secs_f64(),
            partitions_s: 0.0,
            aggregate_s: out.aggregate_time.map(|d| d.as_secs_f64()),
            timing_only_aggregate: out.timing_only_aggregate,
            done_s,
            proof_bytes: out.proof.len(),
            verified: out.verified,
        });
    }
    // The engine's time per sector: between consecutive sectors' last proofs.
    let mut order: Vec<usize> = (0..sectors.len()).collect();
    order.sort_by(|&a, &b| sectors[a].proofs_s.total_cmp(&sectors[b].proofs_s));
    let mut previous = 0.0;
    for i in order {
        sectors[i].partitions_s = sectors[i].proofs_s - previous;
        previous = sectors[i].proofs_s;
    }
    Ok(BenchC1Run { wall, sectors })
}
