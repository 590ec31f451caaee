//! `cuzk client bench`: the daemon's throughput as a client sees it. Submits N
//! jobs at once to a running `cuzk serve` (`SubmitProof` each, then `AwaitProof`
//! each, all concurrently over one connection) and reports s/proof (wall time from
//! the first submission to the last result, over N) and each device's GPU busy
//! fraction (the daemon's `cuzk_gpu_busy_seconds_total{device}` from `GetMetrics`
//! before and after, over the same wall). The jobs are PoRep C2s of one C1
//! envelope (real, or shape-only on a daemon whose `timing_only_circuits` lists the
//! circuit) or synthetic jobs. `--preload` and `--warm` keep the circuit compile
//! and the parameter load out of the clock, as `cuzk bench` does.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use clap::Args;
use cuzk_daemon::{client, wire as pb};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// PoRep jobs: the C1 output envelope (`cuzk c1 --envelope`, `--shape-only`
    /// included); every job proves its sector.
    #[arg(long, conflicts_with = "synthetic")]
    pub c1: Option<PathBuf>,
    /// The miner id of the PoRep jobs.
    #[arg(long, default_value_t = 1000)]
    pub miner_id: u64,
    /// Synthetic jobs instead: `CIRCUIT:LOG:PARTITIONS` (`mul:14:2`; a daemon with
    /// `synthetic = true`), each job its own seed.
    #[arg(long)]
    pub synthetic: Option<String>,
    /// Jobs submitted at once.
    #[arg(long, default_value_t = 4)]
    pub jobs: usize,
    /// Load this circuit's parameters first (`PreloadSRS`, e.g. `porep-32g`): the
    /// compile and the load (or the timing-only parameters) are not timed.
    #[arg(long)]
    pub preload: Option<String>,
    /// Prove one job first, not timed (warms the circuit, parameters and kernels).
    #[arg(long)]
    pub warm: bool,
    /// Write the manifest (arguments, the daemon's status, every job, the
    /// figures) and each proof here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One job's answer, as the client saw it.
struct Done {
    index: usize,
    /// Seconds from the first submission to its result.
    at: f64,
    result: pb::AwaitProofResponse,
}

fn requests(args: &BenchArgs) -> Result<Vec<pb::SubmitProofRequest>> {
    let n = args.jobs + usize::from(args.warm);
    if let Some(path) = &args.c1 {
        let envelope =
            std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let sector_number = serde_json::from_slice::<serde_json::Value>(&envelope)
            .ok()
            .and_then(|v| v.get("SectorNum").and_then(|n| n.as_u64()))
            .context("the envelope has no SectorNum (write it with `cuzk c1 --envelope`)")?;
        let req = pb::SubmitProofRequest {
            proof_kind: pb::ProofKind::PorepSealCommit as i32,
            vanilla_proof: envelope,
            sector_number,
            miner_id: args.miner_id,
            ..Default::default()
        };
        return Ok(vec![req; n]);
    }
    let Some(spec) = &args.synthetic else {
        bail!("give --c1 ENVELOPE or --synthetic CIRCUIT:LOG:PARTITIONS");
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let [circuit, log, partitions] = parts[..] else {
        bail!("--synthetic `{spec}`: expected CIRCUIT:LOG:PARTITIONS such as mul:14:2");
    };
    let log: u32 = log.parse().context("--synthetic: LOG is a number")?;
    let partitions: u32 = partitions
        .parse()
        .context("--synthetic: PARTITIONS is a number")?;
    Ok((0..n)
        .map(|i| pb::SubmitProofRequest {
            proof_kind: pb::ProofKind::Synthetic as i32,
            vanilla_proof: serde_json::json!({
                "circuit": circuit, "log": log, "partitions": partitions, "seed": 100 + i,
            })
            .to_string()
            .into_bytes(),
            ..Default::default()
        })
        .collect())
}

/// `cuzk_gpu_busy_seconds_total` per device label, from the Prometheus text.
pub fn gpu_busy_seconds(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cuzk_gpu_busy_seconds_total{device=\"")?;
            let (device, value) = rest.split_once("\"}")?;
            Some((device.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

async fn metrics(c: &mut client::Client) -> Result<String> {
    Ok(c.get_metrics(pb::GetMetricsRequest {})
        .await
        .context("GetMetrics")?
        .into_inner()
        .prometheus_text)
}

/// Submits and awaits one job.
async fn one(mut c: client::Client, req: pb::SubmitProofRequest) -> Result<pb::AwaitProofResponse> {
    let id = c
        .submit_proof(req)
        .await
        .context("SubmitProof")?
        .into_inner()
        .job_id;
    Ok(c.await_proof(pb::AwaitProofRequest {
        job_id: id.clone(),
        timeout_ms: 0,
    })
    .await
    .with_context(|| format!("AwaitProof {id}"))?
    .into_inner())
}

fn job_line(d: &Done) -> String {
    let r = &d.result;
    format!(
        "job {} ({}): {}{} at {:.2} s (queue {} ms, parameters {} ms, synthesis {} ms, GPU {} ms, total {} ms){}",
        d.index,
        r.job_id,
        client::status_name(r),
        if r.timing_only {
            " TIMING-ONLY (unverified, does not verify)"
        } else {
            ""
        },
        d.at,
        r.queue_wait_ms,
        r.srs_load_ms,
        r.synthesis_ms,
        r.gpu_compute_ms,
        r.total_ms,
        if r.error_message.is_empty() {
            String::new()
        } else {
            format!(": {}", r.error_message)
        }
    )
}

pub async fn run(c: &mut client::Client, addr: &str, args: BenchArgs) -> Result<()> {
    if args.jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let mut reqs = requests(&args)?;
    if let Some(id) = &args.preload {
        let t = Instant::now();
        let r = c
            .preload_srs(pb::PreloadSrsRequest {
                circuit_id: id.clone(),
            })
            .await
            .with_context(|| format!("PreloadSRS {id}"))?
            .into_inner();
        println!(
            "preloaded {id}: {} in {:.2} s (the daemon: {} ms)",
            if r.already_loaded {
                "already resident"
            } else {
                "loaded"
            },
            t.elapsed().as_secs_f64(),
            r.load_time_ms
        );
    }
    if args.warm {
        let warm = reqs.remove(0);
        let r = one(c.clone(), warm).await?;
        println!(
            "{}",
            job_line(&Done {
                index: 0,
                at: 0.0,
                result: r
            })
            .replacen("job 0", "warm-up job", 1)
        );
    }
    let before = metrics(c).await?;
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (i, req) in reqs.into_iter().enumerate() {
        let c = c.clone();
        set.spawn(async move {
            let r = one(c, req).await;
            (i + 1, start.elapsed(), r)
        });
    }
    let mut done = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (index, at, r) = joined.context("a job's task failed")?;
        let d = Done {
            index,
            at: at.as_secs_f64(),
            result: r.with_context(|| format!("job {index}"))?,
        };
        println!("{}", job_line(&d));
        done.push(d);
    }
    let wall = start.elapsed();
    let after = metrics(c).await?;
    let status = c
        .get_status(pb::GetStatusRequest {})
        .await
        .context("GetStatus")?
        .into_inner();
    done.sort_by_key(|d| d.index);
    report(addr, &args, &done, wall, &before, &after, &status)
}

fn report(
    addr: &str,
    args: &BenchArgs,
    done: &[Done],
    wall: Duration,
    before: &str,
    after: &str,
    status: &pb::GetStatusResponse,
) -> Result<()> {
    let n = done.len();
    let completed = done
        .iter()
        .filter(|d| client::status_name(&d.result) == "COMPLETED")
        .count();
    let timing_only = done.iter().filter(|d| d.result.timing_only).count();
    let w = wall.as_secs_f64();
    let s_per_proof = w / n as f64;
    println!(
        "daemon: {s_per_proof:.3} s/proof, {:.1} proofs/hour ({n} jobs at once, {completed} completed, wall {w:.2} s from the first submission to the last result)",
        3600.0 / s_per_proof
    );
    if timing_only > 0 {
        println!(
            "TIMING-ONLY: {timing_only} of the proofs were made with timing-only parameters (circuits {}): NOT verified, they do not verify",
            status.timing_only_circuits.join(", ")
        );
    }
    let (b, a) = (gpu_busy_seconds(before), gpu_busy_seconds(after));
    let mut busy = BTreeMap::new();
    for (device, after_s) in &a {
        let s = after_s - b.get(device).copied().unwrap_or(0.0);
        let pct = 100.0 * s / w;
        println!("GPU {device} busy {pct:.1}% ({s:.2} s of {w:.2} s, cuzk_gpu_busy_seconds_total)");
        busy.insert(
            device.clone(),
            serde_json::json!({ "seconds": s, "percent": pct }),
        );
    }
    if a.is_empty() {
        println!(
            "GPU busy: the daemon reports no cuzk_gpu_busy_seconds_total (no device lane yet)"
        );
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for d in done {
            if !d.result.proof.is_empty() {
                let p = dir.join(format!("proof-{}.bin", d.index));
                std::fs::write(&p, &d.result.proof)
                    .with_context(|| format!("writing {}", p.display()))?;
            }
        }
        let manifest = serde_json::json!({
            "command": "cuzk client bench",
            "addr": addr,
            "c1": args.c1,
            "synthetic": args.synthetic,
            "miner_id": args.miner_id,
            "jobs": args.jobs,
            "preload": args.preload,
            "warm": args.warm,
            "daemon_timing_only_circuits": status.timing_only_circuits,
            "parameters": status.loaded_srs.iter().map(|p| serde_json::json!({
                "circuit_id": p.circuit_id, "bytes": p.size_bytes, "timing_only": p.timing_only,
            })).collect::<Vec<_>>(),
            "wall_s": w,
            "s_per_proof": s_per_proof,
            "completed": completed,
            "timing_only_proofs": timing_only,
            "gpu_busy": busy,
            "results": done.iter().map(|d| serde_json::json!({
                "index": d.index,
                "job_id": d.result.job_id,
                "status": client::status_name(&d.result),
                "timing_only": d.result.timing_only,
                "proof_bytes": d.result.proof.len(),
                "error": d.result.error_message,
                "at_s": d.at,
                "queue_wait_ms": d.result.queue_wait_ms,
                "srs_load_ms": d.result.srs_load_ms,
                "synthesis_ms": d.result.synthesis_ms,
                "gpu_compute_ms": d.result.gpu_compute_ms,
                "total_ms": d.result.total_ms,
            })).collect::<Vec<_>>(),
        });
        let p = dir.join("manifest.json");
        std::fs::write(&p, serde_json::to_vec_pretty(&manifest)?)
            .with_context(|| format!("writing {}", p.display()))?;
        println!("manifest: {}", p.display());
    }
    if completed != n {
        bail!("{} of {n} jobs did not complete", n - completed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_seconds_are_read_per_device() {
        let text = "# HELP cuzk_gpu_busy_seconds_total x\n\
                    cuzk_gpu_busy_seconds_total{device=\"0\"} 12.5\n\
                    cuzk_gpu_busy_seconds_total{device=\"1\"} 0.25\n\
                    cuzk_gpu_workers 2\n";
        let m = gpu_busy_seconds(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m["0"], 12.5);
        assert_eq!(m["1"], 0.25);
    }
}
