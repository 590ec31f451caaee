//! `cuzk snap …`, `cuzk post window …`, `cuzk post winning …`: SnapDeals updates and
//! PoSt proofs from vanilla proofs, proved through the proving service as `c2`
//! proves (`one_proof`: the kinds, checks and service `cuzk serve` and `cuzk
//! worker` use; same backend, config and plugin flags), verified by
//! filecoin-proofs before they are written.
//!
//! A request is given by flags (the registered proof as Filecoin's Go enum numbers it
//! or by name, hex 32-byte values, the miner id, the partition index, bincode vanilla
//! proof files) or by an input file (JSON, what `inputs` writes), flags overriding it.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use cuzk_filecoin::reference_kinds::{
    filecoin_proofs_snap, filecoin_proofs_window_post, filecoin_proofs_winning_post,
};
use cuzk_filecoin::{
    parse_post_proof, parse_priority, parse_prover_id, parse_update_proof, post_proof_name,
    post_test_inputs, shape_only_post, shape_only_snap, snap_test_inputs, update_proof_name,
    verify_snap_proof, verify_window_post_partition, verify_winning_post_proof, Blinding, PostKind,
    SnapRequest, UpdateKind, WindowPostRequest, WinningPostRequest, ALL_POST, ALL_UPDATE,
};
use cuzk_service::{ProofKind, ProofRequest};
use serde::{Deserialize, Serialize};

use crate::{
    filecoin::ParamCacheArgs,
    one_proof::{run_config, write_proof, Circuit, Setup},
    progress,
    queue_runner::check_request,
    runtime::RunArgs,
};

/// Which proof a command makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Snap,
    Window,
    Winning,
}

impl Which {
    pub fn name(self) -> &'static str {
        match self {
            Which::Snap => "snap",
            Which::Window => "window",
            Which::Winning => "winning",
        }
    }

    /// The registered proof `inputs` makes by default: 2 KiB (Go's numbers: update 0,
    /// Window V1_1 10, Winning 0).
    fn default_proof(self) -> &'static str {
        match self {
            Which::Snap => "0",
            Which::Window => "10",
            Which::Winning => "0",
        }
    }
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct KindArgs {
    #[command(subcommand)]
    pub command: Option<KindCommand>,
    #[command(flatten)]
    pub prove: KindProveArgs,
}

#[derive(Subcommand, Debug)]
pub enum KindCommand {
    /// Make a test input: seal sectors here (2 KiB in a second) and make their vanilla
    /// proofs through filecoin-proofs on the CPU (real: the proofs verify), or with
    /// `--shape-only` random vanilla proofs of any size's exact shape (timing only).
    Inputs(InputsArgs),
    /// Verify proof bytes for a request with filecoin-proofs' verifier.
    Verify(KindVerifyArgs),
    /// Run filecoin-proofs' own function on the same request (CPU): the peer cuzk is
    /// measured against.
    Peer(KindPeerArgs),
}

#[derive(Subcommand, Debug)]
pub enum PostCommand {
    /// One WindowPoSt partition (as `generate_single_window_post_with_vanilla`).
    Window(KindArgs),
    /// A WinningPoSt (as `generate_winning_post_with_vanilla`).
    Winning(KindArgs),
}

/// The request: an input file and/or flags (flags win).
#[derive(Args, Debug, Clone, Default)]
pub struct RequestArgs {
    /// An input file (JSON, as `inputs` writes it).
    #[arg(long, short)]
    pub input: Option<PathBuf>,
    /// The registered proof: a name or the Go enum's number (SnapDeals: 0–4; PoSt:
    /// 0–4 Winning, 5–9 Window V1, 10–14 Window V1_1 = filecoin-proofs' V1_2).
    #[arg(long)]
    pub proof: Option<String>,
    /// PoSt: the miner actor id (1000 or f01000) or a 32-byte hex prover id.
    #[arg(long)]
    pub miner_id: Option<String>,
    /// PoSt: the 32-byte randomness, hex.
    #[arg(long)]
    pub randomness: Option<String>,
    /// WindowPoSt: the partition's index in its deadline.
    #[arg(long)]
    pub partition_index: Option<usize>,
    /// SnapDeals: the sector's old replica commitment, 32 bytes hex.
    #[arg(long)]
    pub comm_r_old: Option<String>,
    /// SnapDeals: the new replica commitment, 32 bytes hex.
    #[arg(long)]
    pub comm_r_new: Option<String>,
    /// SnapDeals: the new data commitment, 32 bytes hex.
    #[arg(long)]
    pub comm_d_new: Option<String>,
    /// A vanilla proof file (filecoin-proofs' bincode), in order; repeat the flag for
    /// each (SnapDeals: one per partition; PoSt: one per sector).
    #[arg(long = "vanilla")]
    pub vanilla: Vec<PathBuf>,
    #[command(flatten)]
    pub params: ParamCacheArgs,
}

#[derive(Args, Debug)]
pub struct InputsArgs {
    /// The registered proof (name or Go enum number; default the 2 KiB one).
    #[arg(long)]
    pub proof: Option<String>,
    /// The miner actor id the sectors are sealed for.
    #[arg(long, default_value_t = 1000)]
    pub miner_id: u64,
    /// WindowPoSt: sectors in the partition (at most the partition's size).
    #[arg(long, default_value_t = 2)]
    pub sectors: usize,
    /// Seed of the sectors' data and of the randomness.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Random vanilla proofs of the proof type's exact shape (any size, 32 GiB
    /// included) instead of sealed sectors: their circuits cost what real ones cost,
    /// their proofs do NOT verify (prove them with `--timing-only`).
    #[arg(long)]
    pub shape_only: bool,
    /// Also write each vanilla proof as a bincode file `vanilla-<i>.bin` here (for
    /// the `--vanilla` flag).
    #[arg(long)]
    pub bincode_dir: Option<PathBuf>,
    /// The input file to write.
    #[arg(long, short)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct KindProveArgs {
    #[command(flatten)]
    pub request: RequestArgs,
    /// Where to write the proof bytes.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// The job's priority in the engine's queues: low, normal, high, critical
    /// (default: WinningPoSt critical, WindowPoSt high, SnapDeals normal).
    #[arg(long)]
    pub priority: Option<String>,
    /// Random points of the right sizes instead of the parameter file (made in
    /// memory at any size): the proof does not verify and is not checked; for
    /// timing, with shape-only inputs.
    #[arg(long)]
    pub timing_only: bool,
    /// Then time filecoin-proofs' own function on the same request in this process
    /// (once to load its parameters, then `--peer-rounds` rounds of it and of cuzk
    /// on the warm engine, taken in turn) and print the median of the rounds'
    /// ratios.
    #[arg(long, conflicts_with = "timing_only")]
    pub compare_peer: bool,
    /// Rounds of `--compare-peer`: each times filecoin-proofs' function once, then
    /// cuzk once, so that both see the same state of the machine; each one's p50
    /// and range and the median of the rounds' ratios (with a 95% interval from
    /// three rounds) are printed.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub peer_rounds: u32,
    /// Prove the request this many times, one after the other, on the same engine,
    /// with a line and a per-stage table for each: the first run uploads the circuit
    /// and its parameters to the device, the later ones show a warm engine.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Args, Debug)]
pub struct KindVerifyArgs {
    #[command(flatten)]
    pub request: RequestArgs,
    /// The proof bytes (`--proof` is the registered proof).
    #[arg(long)]
    pub proof_file: PathBuf,
}

#[derive(Args, Debug)]
pub struct KindPeerArgs {
    #[command(flatten)]
    pub request: RequestArgs,
    /// Where to write the proof.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

/// The input file: every value a request of its kind takes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindInput {
    /// `snap`, `window` or `winning`.
    pub kind: String,
    /// The registered proof's name (filecoin-proofs-api's).
    pub proof: String,
    /// Random vanilla proofs of the right shape: proofs do not verify.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shape_only: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_r_old: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_r_new: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_d_new: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub randomness: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miner_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_index: Option<usize>,
    /// Hex of each vanilla proof's bincode.
    pub vanilla_proofs: Vec<String>,
}

fn unhex(what: &str, s: Option<&str>) -> Result<Vec<u8>> {
    let s = s.with_context(|| format!("give --{} (32 bytes, hex)", what.replace('_', "-")))?;
    hex::decode(s.trim().trim_start_matches("0x")).with_context(|| format!("{what} is not hex"))
}

/// A parsed request of one kind.
#[derive(Clone)]
pub enum Request {
    Snap(SnapRequest),
    Window(WindowPostRequest),
    Winning(WinningPostRequest),
}

impl RequestArgs {
    /// The request: the input file's values with the flags over them.
    pub fn read(&self, which: Which) -> Result<Request> {
        let mut input = match &self.input {
            Some(path) => {
                let bytes =
                    fs::read(path).with_context(|| format!("reading {}", path.display()))?;
                let input: KindInput = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} is not a cuzk input file", path.display()))?;
                if input.kind != which.name() {
                    bail!(
                        "{} is a `{}` input, this command proves `{}`",
                        path.display(),
                        input.kind,
                        which.name()
                    );
                }
                input
            }
            None => KindInput::default(),
        };
        let over = |slot: &mut Option<String>, flag: &Option<String>| {
            if flag.is_some() {
                slot.clone_from(flag);
            }
        };
        over(&mut input.comm_r_old, &self.comm_r_old);
        over(&mut input.comm_r_new, &self.comm_r_new);
        over(&mut input.comm_d_new, &self.comm_d_new);
        over(&mut input.randomness, &self.randomness);
        let proof = match (&self.proof, input.proof.is_empty()) {
            (Some(p), _) => p.clone(),
            (None, false) => input.proof.clone(),
            (None, true) => bail!("give --proof (the registered proof, name or number)"),
        };
        let vanilla: Vec<Vec<u8>> = if self.vanilla.is_empty() {
            input
                .vanilla_proofs
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    hex::decode(v).with_context(|| format!("vanilla proof {i} is not hex"))
                })
                .collect::<Result<_>>()?
        } else {
            self.vanilla
                .iter()
                .map(|p| fs::read(p).with_context(|| format!("reading {}", p.display())))
                .collect::<Result<_>>()?
        };
        if vanilla.is_empty() {
            bail!("no vanilla proofs: give --vanilla FILE (bincode) for each, or --input");
        }
        let prover_id = || -> Result<[u8; 32]> {
            match (&self.miner_id, input.miner_id) {
                (Some(m), _) => Ok(parse_prover_id(m)?),
                (None, Some(m)) => Ok(cuzk_filecoin::prover_id_from_miner(m)),
                (None, None) => bail!("give --miner-id (the miner actor id)"),
            }
        };
        Ok(match which {
            Which::Snap => Request::Snap(SnapRequest {
                proof: parse_update_proof(&proof)?,
                comm_r_old: unhex("comm_r_old", input.comm_r_old.as_deref())?,
                comm_r_new: unhex("comm_r_new", input.comm_r_new.as_deref())?,
                comm_d_new: unhex("comm_d_new", input.comm_d_new.as_deref())?,
                vanilla_proofs: vanilla,
                blinding: Blinding::Random,
            }),
            Which::Window => Request::Window(WindowPostRequest {
                proof: post_kind(which, &proof)?.registered,
                randomness: unhex("randomness", input.randomness.as_deref())?,
                prover_id: prover_id()?,
                partition_index: self
                    .partition_index
                    .or(input.partition_index)
                    .context("give --partition-index")?,
                vanilla_proofs: vanilla,
                blinding: Blinding::Random,
            }),
            Which::Winning => Request::Winning(WinningPostRequest {
                proof: post_kind(which, &proof)?.registered,
                randomness: unhex("randomness", input.randomness.as_deref())?,
                prover_id: prover_id()?,
                vanilla_proofs: vanilla,
                blinding: Blinding::Random,
            }),
        })
    }
}

/// The miner actor id whose prover id is `prover_id` (the inverse of
/// `prover_id_from_miner`: LEB128, left-aligned, zero-padded), or `None` for a
/// prover id that is no actor id's.
pub fn miner_of_prover_id(prover_id: &[u8; 32]) -> Option<u64> {
    let mut id: u64 = 0;
    for (i, &b) in prover_id.iter().take(10).enumerate() {
        id |= u64::from(b & 0x7f).checked_shl(7 * i as u32)?;
        if b & 0x80 == 0 {
            return (cuzk_filecoin::prover_id_from_miner(id) == *prover_id).then_some(id);
        }
    }
    None
}

/// The miner actor id of `text` (`1000`, `f01000`): the service's requests carry
/// an actor id, as Curio's do, never a raw prover id.
pub fn miner_actor_id(text: &str) -> Result<u64> {
    let prover_id = parse_prover_id(text)?;
    miner_of_prover_id(&prover_id).with_context(|| {
        format!("--miner-id {text}: the proving service's requests carry a miner actor id (1000 or f01000), not a raw prover id")
    })
}

impl RequestArgs {
    /// The request as the proving service takes it, parsed by
    /// [`RequestArgs::read`] first, so the queue and `cuzk snap`/`cuzk post` read
    /// the same flags and files the same way.
    pub fn proof_request(&self, which: Which) -> Result<(ProofKind, ProofRequest)> {
        self.read(which)?.proof_request()
    }
}

impl Request {
    /// The request as the proving service takes it (Curio's fields: the
    /// registered proof as Go's enum numbers it, the miner's actor id, the
    /// vanilla proofs as bincode).
    pub fn proof_request(&self) -> Result<(ProofKind, ProofRequest)> {
        let number = |found: Option<usize>, name: String| {
            found
                .map(|n| n as u64)
                .with_context(|| format!("{name} has no number in Filecoin's enum"))
        };
        // A PoSt request: the same fields for WindowPoSt and WinningPoSt.
        let post = |proof, randomness: &[u8], prover_id: &[u8; 32], vanilla: &[Vec<u8>]| {
            Ok::<_, anyhow::Error>(ProofRequest {
                registered_proof: number(
                    ALL_POST.iter().position(|p| *p == proof),
                    post_proof_name(proof),
                )?,
                randomness: randomness.to_vec(),
                miner_id: miner_of_prover_id(prover_id).context(
                    "the service's requests carry a miner actor id (1000 or f01000), not a raw prover id",
                )?,
                vanilla_proofs: vanilla.to_vec(),
                ..ProofRequest::default()
            })
        };
        Ok(match self {
            Request::Snap(r) => (
                ProofKind::SnapDealsUpdate,
                ProofRequest {
                    registered_proof: number(
                        ALL_UPDATE.iter().position(|p| *p == r.proof),
                        update_proof_name(r.proof),
                    )?,
                    comm_r_old: r.comm_r_old.clone(),
                    comm_r_new: r.comm_r_new.clone(),
                    comm_d_new: r.comm_d_new.clone(),
                    vanilla_proofs: r.vanilla_proofs.clone(),
                    ..ProofRequest::default()
                },
            ),
            Request::Window(r) => (
                ProofKind::WindowPostPartition,
                ProofRequest {
                    partition_index: u32::try_from(r.partition_index)
                        .context("the partition index is too large")?,
                    ..post(r.proof, &r.randomness, &r.prover_id, &r.vanilla_proofs)?
                },
            ),
            Request::Winning(r) => (
                ProofKind::WinningPost,
                post(r.proof, &r.randomness, &r.prover_id, &r.vanilla_proofs)?,
            ),
        })
    }
}

pub fn run(which: Which, args: KindArgs) -> Result<()> {
    match args.command {
        Some(KindCommand::Inputs(a)) => inputs(which, a),
        Some(KindCommand::Verify(a)) => verify(which, a),
        Some(KindCommand::Peer(a)) => peer(which, a),
        None => prove(which, args.prove),
    }
}

/// Checks that a PoSt proof type is of the command's kind.
fn post_kind(which: Which, proof: &str) -> Result<PostKind> {
    let kind = PostKind::new(parse_post_proof(proof)?)?;
    if kind.is_winning() != (which == Which::Winning) {
        bail!(
            "{} is not a {} PoSt proof type (Go's numbers: 0-4 Winning, 5-14 Window)",
            kind.name,
            which.name()
        );
    }
    Ok(kind)
}

fn inputs(which: Which, args: InputsArgs) -> Result<()> {
    let work = tempfile::tempdir().context("creating a work directory")?;
    let proof = args
        .proof
        .clone()
        .unwrap_or_else(|| which.default_proof().to_string());
    let t = Instant::now();
    let hexes = |v: &[Vec<u8>]| v.iter().map(hex::encode).collect::<Vec<_>>();
    let pb = progress::spinner(if args.shape_only {
        format!("making shape-only {proof} vanilla proofs")
    } else {
        format!("sealing and making {proof} vanilla proofs with filecoin-proofs")
    });
    let (input, raw) = match which {
        Which::Snap => {
            let proof = parse_update_proof(&proof)?;
            let r = if args.shape_only {
                shape_only_snap(proof, args.seed)?
            } else {
                snap_test_inputs(proof, args.miner_id, args.seed, work.path())?
            };
            let input = KindInput {
                kind: which.name().into(),
                proof: update_proof_name(proof),
                shape_only: args.shape_only,
                comm_r_old: Some(hex::encode(&r.comm_r_old)),
                comm_r_new: Some(hex::encode(&r.comm_r_new)),
                comm_d_new: Some(hex::encode(&r.comm_d_new)),
                vanilla_proofs: hexes(&r.vanilla_proofs),
                ..KindInput::default()
            };
            (input, r.vanilla_proofs)
        }
        Which::Window | Which::Winning => {
            let kind = post_kind(which, &proof)?;
            let p = if args.shape_only {
                shape_only_post(kind.registered, args.miner_id, args.sectors, args.seed)?
            } else {
                post_test_inputs(
                    kind.registered,
                    args.miner_id,
                    args.sectors,
                    args.seed,
                    work.path(),
                )?
            };
            let input = KindInput {
                kind: which.name().into(),
                proof: post_proof_name(kind.registered),
                shape_only: args.shape_only,
                randomness: Some(hex::encode(p.randomness)),
                miner_id: Some(args.miner_id),
                partition_index: (which == Which::Window).then_some(0),
                vanilla_proofs: hexes(&p.vanilla_proofs),
                ..KindInput::default()
            };
            (input, p.vanilla_proofs)
        }
    };
    pb.finish_and_clear();
    let json = serde_json::to_vec_pretty(&input)?;
    fs::write(&args.out, &json).with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "{}{} input for {} ({} vanilla proofs, {} bytes, made in {:.2} s): {}",
        if args.shape_only {
            "SHAPE-ONLY (random values; its proofs do not verify) "
        } else {
            ""
        },
        input.kind,
        input.proof,
        input.vanilla_proofs.len(),
        json.len(),
        t.elapsed().as_secs_f64(),
        args.out.display()
    );
    if let Some(dir) = &args.bincode_dir {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (i, v) in raw.iter().enumerate() {
            let path = dir.join(format!("vanilla-{i}.bin"));
            fs::write(&path, v).with_context(|| format!("writing {}", path.display()))?;
        }
        println!("bincode vanilla proofs: {}/vanilla-*.bin", dir.display());
    }
    Ok(())
}

/// `cuzk snap`, `cuzk post window|winning`: the request as the service takes it
/// (`RequestArgs::proof_request`, the one the queue submits too), checked and
/// proved through the service `cuzk serve` runs; `--timing-only` makes its
/// circuit a timing-only one there, as a benchmark daemon's
/// `timing_only_circuits` does, so whether a shape-only input may be proved is
/// the service's check's to say.
fn prove(which: Which, args: KindProveArgs) -> Result<()> {
    let dir = args.request.params.apply();
    let typed = args.request.read(which)?;
    let (kind, mut request) = typed.proof_request()?;
    if let Some(p) = &args.priority {
        request.priority = Some(parse_priority(p)?);
    }
    let circuit = Circuit::of_request(kind, &request)?;
    let who = format!("cuzk {}", which.name());
    let setup = Setup {
        who: &who,
        param_dir: &dir,
        check_digest: false,
        points_dir: args.request.params.points_dir.as_deref(),
        timeline_stderr: false,
        run: run_config(&args.run)?,
    };
    let kinds = setup.kinds(args.timing_only.then(|| circuit.id()))?;
    check_request(&kinds.kinds, kind, &request)?;
    let service = setup.start(kinds, &circuit)?;
    let (result, took) = service.prove_runs(
        kind,
        &request,
        args.repeat,
        args.repeat > 1 || args.compare_peer,
        "filecoin-proofs",
    )?;
    if args.compare_peer {
        compare_peer(typed, took, args.peer_rounds, &mut || {
            service.prove(kind, request.clone()).map(drop)
        })?;
    }
    service.shutdown();
    write_proof(args.out.as_ref(), &result.proof)
}

/// filecoin-proofs' own function on `request` in this process: once cold (it loads
/// its parameters), then `rounds` rounds of it timed and `prove` (cuzk's proof of
/// it through the warm service) timed, in turn. Prints each round, both one's p50
/// and range, and the median of the rounds' ratios.
fn compare_peer(
    request: Request,
    first: std::time::Duration,
    rounds: u32,
    prove: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let (what, peer) = peer_fn(request.clone());
    let pb = progress::spinner(format!(
        "filecoin-proofs' {what}: first call (loads its parameters)"
    ));
    let t = Instant::now();
    peer()?;
    let cold = t.elapsed();
    pb.finish_and_clear();
    let (mut theirs, mut ours) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let (_, peer) = peer_fn(request.clone());
        let pb = progress::spinner(format!(
            "round {round} of {rounds}: filecoin-proofs' {what}"
        ));
        let t = Instant::now();
        peer()?;
        theirs.push(t.elapsed().as_secs_f64());
        pb.finish_and_clear();
        let t = Instant::now();
        prove()?;
        ours.push(t.elapsed().as_secs_f64());
        println!(
            "round {round} of {rounds}: filecoin-proofs {:.2} s, cuzk {:.2} s ({:.2}x)",
            theirs[theirs.len() - 1],
            ours[ours.len() - 1],
            theirs[theirs.len() - 1] / ours[ours.len() - 1]
        );
    }
    // Per round, the ratio of the two, summarised as `cuzk ab` does (median, and a
    // 95% interval from three rounds on).
    let ratios: Vec<f64> = theirs.iter().zip(&ours).map(|(p, o)| p / o).collect();
    let (ratio, lo, hi) = crate::bench::ratio_stats(&ratios);
    let interval = if lo.is_finite() {
        format!(", 95% interval {lo:.2}-{hi:.2}")
    } else {
        String::new()
    };
    let spread = |xs: &[f64]| {
        let s = cuzk_timeline::Stats::from_durations(xs).expect("at least one round");
        format!("p50 {:.2} s ({:.2}-{:.2})", s.p50_ms, s.min_ms, s.max_ms)
    };
    println!(
        "same run, {rounds} round(s) in turn: cuzk {} (before them {:.2} s), filecoin-proofs {what} {} (first call {:.2} s, parameter load included): {ratio:.2}x (median of the rounds' ratios{interval}), load average {}",
        spread(&ours),
        first.as_secs_f64(),
        spread(&theirs),
        cold.as_secs_f64(),
        fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(())
}

type PeerFn = Box<dyn FnOnce() -> Result<Vec<u8>>>;

/// filecoin-proofs' own function for a request, and its name.
fn peer_fn(request: Request) -> (&'static str, PeerFn) {
    match request {
        Request::Snap(r) => (
            "generate_empty_sector_update_proof_with_vanilla",
            Box::new(move || Ok(filecoin_proofs_snap(&r)?)),
        ),
        Request::Window(r) => (
            "generate_single_window_post_with_vanilla",
            Box::new(move || Ok(filecoin_proofs_window_post(&r)?)),
        ),
        Request::Winning(r) => (
            "generate_winning_post_with_vanilla",
            Box::new(move || Ok(filecoin_proofs_winning_post(&r)?)),
        ),
    }
}

fn verify(which: Which, args: KindVerifyArgs) -> Result<()> {
    args.request.params.apply();
    let request = args.request.read(which)?;
    let proof = read_proof(&args.proof_file)?;
    match &request {
        Request::Snap(r) => verify_snap_proof(r, &proof)?,
        Request::Window(r) => verify_window_post_partition(r, &proof)?,
        Request::Winning(r) => verify_winning_post_proof(r, &proof)?,
    }
    println!(
        "proof {} verifies ({} bytes), checked by filecoin-proofs",
        args.proof_file.display(),
        proof.len()
    );
    Ok(())
}

fn read_proof(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).with_context(|| format!("reading {}", path.display()))
}

fn peer(which: Which, args: KindPeerArgs) -> Result<()> {
    args.request.params.apply();
    let request = args.request.read(which)?;
    let (what, run) = peer_fn(request);
    let pb = progress::spinner(format!("filecoin-proofs' {what} (CPU)"));
    let t = Instant::now();
    let proof = run()?;
    pb.finish_and_clear();
    println!(
        "filecoin-proofs {what}: {} bytes in {:.2} s (parameter load included)",
        proof.len(),
        t.elapsed().as_secs_f64()
    );
    if let Some(out) = &args.out {
        fs::write(out, &proof).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// `cuzk params gen --kind snap|window|winning --proof P`: the official-named test
/// parameters of a SnapDeals or PoSt proof type.
pub fn params_gen(which: Which, proof: &str, cache: &ParamCacheArgs, seed: u64) -> Result<()> {
    let dir = cache.apply();
    let pb = progress::spinner(format!(
        "generating {proof} parameters (insecure test parameters) in {}",
        dir.display()
    ));
    let t = Instant::now();
    let path = match which {
        Which::Snap => cuzk_filecoin::generate_params(
            &UpdateKind::new(parse_update_proof(proof)?)?,
            &dir,
            seed,
        )?,
        Which::Window | Which::Winning => {
            cuzk_filecoin::generate_params(&post_kind(which, proof)?, &dir, seed)?
        }
    };
    pb.finish_and_clear();
    println!(
        "wrote {} in {:.1} s",
        path.display(),
        t.elapsed().as_secs_f64()
    );
    crate::prove::params_info(&path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prover_id_gives_back_its_miner_and_a_raw_one_none() {
        for m in [0, 1, 127, 128, 1000, 16_384, u64::from(u32::MAX), u64::MAX] {
            let id = cuzk_filecoin::prover_id_from_miner(m);
            assert_eq!(miner_of_prover_id(&id), Some(m), "{m}");
        }
        assert_eq!(miner_of_prover_id(&[0xff; 32]), None);
        let mut trailing = cuzk_filecoin::prover_id_from_miner(1000);
        trailing[31] = 1;
        assert_eq!(miner_of_prover_id(&trailing), None);
    }
}
