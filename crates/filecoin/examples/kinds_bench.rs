//! Times SnapDeals, WindowPoSt and WinningPoSt at 2 KiB on cuzk's engine against
//! filecoin-proofs' own functions in the same run, and the WinningPoSt latency with
//! PoRep C2 jobs queued ahead of it.
//!
//! ```text
//! cargo run --release -p cuzk-filecoin --example kinds_bench -- [PoRep jobs queued, default 10]
//! ```
//!
//! Parameters are read from (and, when missing, generated as insecure test
//! parameters into) `FIL_PROOFS_PARAMETER_CACHE`; inputs are sealed here.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use cuzk_alloc::InlineDealloc;
use cuzk_filecoin::reference_kinds::{
    filecoin_proofs_snap, filecoin_proofs_window_post, filecoin_proofs_winning_post,
};
use cuzk_filecoin::{
    default_parameter_dir, ensure_params, parse_c1, post_test_inputs, prover_id_from_miner,
    seal_test_sector, snap_test_inputs, Blinding, FilecoinProver, PorepKind, PorepRequest,
    PostKind, Priority, ProverConfig, RegisteredPoStProof, RegisteredSealProof,
    RegisteredUpdateProof, UpdateKind, WindowPostRequest, WinningPostRequest,
};
use cuzk_gpu_backend::{lock::SingleLock, CpuBackend};
use cuzk_scheduler::{PipelineConfig, PipelineEngine, Policies, Unthrottled};
use cuzk_timeline::Recorder;

const MINER: u64 = 1000;

fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

fn main() -> Result<()> {
    let queued: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(10);
    let dir = default_parameter_dir();
    let threads = std::thread::available_parallelism()?.get();
    println!(
        "# cuzk kinds bench: 2 KiB, {threads} threads, parameters in {}",
        dir.display()
    );

    let update = UpdateKind::new(RegisteredUpdateProof::StackedDrg2KiBV1)?;
    let window = PostKind::new(RegisteredPoStProof::StackedDrgWindow2KiBV1_2)?;
    let winning = PostKind::new(RegisteredPoStProof::StackedDrgWinning2KiBV1)?;
    let porep = PorepKind::new(RegisteredSealProof::StackedDrg2KiBV1_1)?;
    let t = Instant::now();
    ensure_params(&update, &dir, 2026)?;
    ensure_params(&window, &dir, 2026)?;
    ensure_params(&winning, &dir, 2026)?;
    if queued > 0 {
        ensure_params(&porep, &dir, 2026)?;
    }
    println!("parameters ready in {:.1} s", secs(t));

    let work = tempfile::tempdir()?;
    let snap = snap_test_inputs(update.registered, MINER, 1, &work.path().join("snap"))?;
    let win = post_test_inputs(window.registered, MINER, 2, 2, &work.path().join("window"))?;
    let wng = post_test_inputs(
        winning.registered,
        MINER,
        1,
        3,
        &work.path().join("winning"),
    )?;
    let window_request = WindowPostRequest {
        proof: win.proof,
        randomness: win.randomness.to_vec(),
        prover_id: win.prover_id,
        partition_index: 0,
        vanilla_proofs: win.vanilla_proofs.clone(),
        blinding: Blinding::Random,
    };
    let winning_request = WinningPostRequest {
        proof: wng.proof,
        randomness: wng.randomness.to_vec(),
        prover_id: wng.prover_id,
        vanilla_proofs: wng.vanilla_proofs.clone(),
        blinding: Blinding::Random,
    };

    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?,
    );
    let engine = PipelineEngine::start(
        PipelineConfig {
            synth_jobs: Some(1),
            synth_threads: threads,
            gpu_workers_per_device: 1,
            gpu_threads: threads,
            verify: false,
            ..PipelineConfig::default()
        },
        Policies {
            backend: Arc::new(CpuBackend::new(pool)),
            dealloc: Arc::new(InlineDealloc),
            throttle: Arc::new(Unthrottled),
            lock: Arc::new(SingleLock::default()),
        },
        Arc::new(Recorder::new(Instant::now())),
    )?;
    let prover = FilecoinProver::new(ProverConfig::default());
    let t = Instant::now();
    prover.params(&update)?;
    prover.params(&window)?;
    prover.params(&winning)?;
    println!("cuzk compile + load (once per process) {:.1} s", secs(t));

    println!("| kind | cuzk (s, verified) | filecoin-proofs (s) | ratio |");
    println!("|---|---|---|---|");
    // Each side runs once to warm its caches (filecoin-proofs loads its parameters on
    // its first call), then is timed.
    for round in 0..2 {
        let t = Instant::now();
        prover
            .submit_snap(&engine, snap.clone(), Priority::Normal)?
            .wait()?;
        let ours = secs(t);
        let t = Instant::now();
        filecoin_proofs_snap(&snap)?;
        let theirs = secs(t);
        if round == 1 {
            println!(
                "| SnapDeals 2 KiB | {ours:.2} | {theirs:.2} | {:.2}x |",
                theirs / ours
            );
        }
        let t = Instant::now();
        prover
            .submit_window_post(&engine, window_request.clone(), Priority::High)?
            .wait()?;
        let ours = secs(t);
        let t = Instant::now();
        filecoin_proofs_window_post(&window_request)?;
        let theirs = secs(t);
        if round == 1 {
            println!(
                "| WindowPoSt 2 KiB | {ours:.3} | {theirs:.3} | {:.2}x |",
                theirs / ours
            );
        }
        let t = Instant::now();
        prover
            .submit_winning_post(&engine, winning_request.clone(), Priority::Critical)?
            .wait()?;
        let ours = secs(t);
        let t = Instant::now();
        filecoin_proofs_winning_post(&winning_request)?;
        let theirs = secs(t);
        if round == 1 {
            println!(
                "| WinningPoSt 2 KiB | {ours:.3} | {theirs:.3} | {:.2}x |",
                theirs / ours
            );
        }
    }

    if queued == 0 {
        return Ok(());
    }
    // WinningPoSt submitted behind `queued` PoRep C2 jobs.
    let sealed = seal_test_sector(
        porep.registered,
        prover_id_from_miner(MINER),
        7,
        11,
        &work.path().join("porep"),
    )?;
    prover.params(&porep)?;
    let input = parse_c1(&sealed.c1_json)?;
    let prepared = (0..queued)
        .map(|_| {
            prover.prepare_porep(PorepRequest {
                input: input.clone(),
                prover_id: sealed.prover_id,
                sector: Some(sealed.sector),
                blinding: Blinding::Random,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let t0 = Instant::now();
    let porep_jobs: Vec<_> = prepared
        .into_iter()
        .map(|p| p.submit(&engine, cuzk_filecoin::Priority::Normal))
        .collect();
    let t = Instant::now();
    let job = prover.submit_winning_post(&engine, winning_request.clone(), Priority::Critical)?;
    job.wait()?;
    let latency = secs(t);
    for j in porep_jobs {
        j.wait()?;
    }
    println!(
        "WinningPoSt latency behind {queued} queued PoRep 2 KiB jobs: {latency:.2} s (all {queued} PoRep jobs done after {:.1} s)",
        secs(t0)
    );
    Ok(())
}
