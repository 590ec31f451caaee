//! A made-up pipeline run, for rendering tests and demos of the waterfall.
//!
//! It is a small simulation of the engine's shape, not of its speed: partitions
//! are taken in submission order by the first free synthesis worker (waiting for
//! memory budget when too many are in flight), then by the first free GPU worker,
//! which waits for its device's lock; `b_g2_msm` overlaps the GPU stage, assembly
//! follows both, and one deallocation thread frees the buffers and returns the
//! budget. Durations get ±15% deterministic jitter.

use crate::{Event, EventKind};

/// The run to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticConfig {
    pub jobs: u64,
    pub partitions: u32,
    pub synth_workers: u32,
    pub devices: u32,
    pub gpu_workers_per_device: u32,
    /// Partitions allowed between synthesis start and deallocation end.
    pub budget_partitions: usize,
    /// Time between job submissions.
    pub submit_gap_ms: f64,
    pub seed: u64,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        Self {
            jobs: 4,
            partitions: 10,
            synth_workers: 4,
            devices: 1,
            gpu_workers_per_device: 2,
            budget_partitions: 6,
            submit_gap_ms: 4000.0,
            seed: 1,
        }
    }
}

/// Stage durations (ms) of the simulated partition, before jitter.
const SYNTH_MS: f64 = 2400.0;
const SPMV_MS: f64 = 300.0;
const PREP_MS: f64 = 250.0;
const GPU_MS: f64 = 600.0;
const B_G2_MS: f64 = 900.0;
const ASSEMBLY_MS: f64 = 4.0;
const DEALLOC_MS: f64 = 150.0;
/// Memory a partition holds from synthesis to deallocation (≈ 20 GiB in C2).
const PARTITION_BYTES: u64 = 20 << 30;

struct Jitter(u64);

impl Jitter {
    /// `ms` ±15%, rounded to microseconds (SplitMix64).
    fn ms(&mut self, ms: f64) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let u = (z >> 11) as f64 / (1u64 << 53) as f64;
        (ms * (0.85 + 0.3 * u) * 1000.0).round() / 1000.0
    }
}

/// The events of the simulated run, in time order.
pub fn synthetic_run(cfg: &SyntheticConfig) -> Vec<Event> {
    let mut rng = Jitter(cfg.seed);
    let mut ev: Vec<Event> = Vec::new();
    let mut push = |ms: f64,
                    event: EventKind,
                    job: u64,
                    partition: u32,
                    worker: Option<u32>,
                    device: Option<u32>,
                    bytes: Option<u64>| {
        ev.push(Event {
            // Whole microseconds, as the recorder stores them.
            ms: (ms * 1000.0).round() / 1000.0,
            event,
            job,
            partition,
            worker,
            device,
            bytes,
            detail: String::new(),
        })
    };

    let synth_workers = cfg.synth_workers.max(1) as usize;
    let devices = cfg.devices.max(1);
    let per_device = cfg.gpu_workers_per_device.max(1);
    let mut synth_free = vec![0.0f64; synth_workers];
    let mut gpu_free = vec![0.0f64; (devices * per_device) as usize];
    let mut lock_free = vec![0.0f64; devices as usize];
    let mut dealloc_free = 0.0f64;
    let mut dealloc_ends: Vec<f64> = Vec::new();
    let budget = cfg.budget_partitions.max(1);

    for job in 1..=cfg.jobs {
        let submit = (job - 1) as f64 * cfg.submit_gap_ms;
        push(submit, EventKind::JobSubmit, job, 0, None, None, None);
        let mut done = submit;
        for p in 0..cfg.partitions {
            push(submit, EventKind::SynthQueue, job, p, None, None, None);
            let w = argmin(&synth_free);
            let worker = Some(w as u32);
            let mut t = synth_free[w].max(submit);
            push(t, EventKind::BudgetWaitStart, job, p, worker, None, None);
            if dealloc_ends.len() >= budget {
                t = t.max(dealloc_ends[dealloc_ends.len() - budget]);
            }
            let bytes = Some(PARTITION_BYTES);
            push(t, EventKind::BudgetAcquired, job, p, worker, None, bytes);
            for (start, end, d) in [
                (EventKind::SynthStart, EventKind::SynthEnd, SYNTH_MS),
                (EventKind::SpmvStart, EventKind::SpmvEnd, SPMV_MS),
                (EventKind::PrepStart, EventKind::PrepEnd, PREP_MS),
            ] {
                push(t, start, job, p, worker, None, None);
                t += rng.ms(d);
                push(t, end, job, p, worker, None, None);
            }
            synth_free[w] = t;
            push(t, EventKind::GpuQueue, job, p, None, None, None);

            let g = argmin(&gpu_free);
            let device = (g as u32) / per_device;
            let (gw, dev) = (Some(g as u32 % per_device), Some(device));
            let pick = gpu_free[g].max(t);
            push(pick, EventKind::GpuPickup, job, p, gw, dev, None);
            push(pick, EventKind::LockWaitStart, job, p, gw, dev, None);
            let acquired = pick.max(lock_free[device as usize]);
            push(acquired, EventKind::LockAcquired, job, p, gw, dev, None);
            push(acquired, EventKind::GpuStart, job, p, gw, dev, None);
            let gpu_end = acquired + rng.ms(GPU_MS);
            push(gpu_end, EventKind::GpuEnd, job, p, gw, dev, None);
            lock_free[device as usize] = gpu_end;
            push(pick, EventKind::BG2Start, job, p, gw, dev, None);
            let b_g2_end = pick + rng.ms(B_G2_MS);
            push(b_g2_end, EventKind::BG2End, job, p, gw, dev, None);
            let asm = gpu_end.max(b_g2_end);
            push(asm, EventKind::AssemblyStart, job, p, gw, dev, None);
            let asm_end = asm + rng.ms(ASSEMBLY_MS);
            push(asm_end, EventKind::AssemblyEnd, job, p, gw, dev, None);
            gpu_free[g] = asm_end;
            done = done.max(asm_end);

            let d0 = dealloc_free.max(asm_end);
            push(d0, EventKind::DeallocStart, job, p, None, None, bytes);
            dealloc_free = d0 + rng.ms(DEALLOC_MS);
            push(
                dealloc_free,
                EventKind::DeallocEnd,
                job,
                p,
                None,
                None,
                bytes,
            );
            push(
                dealloc_free,
                EventKind::BudgetReleased,
                job,
                p,
                None,
                None,
                bytes,
            );
            dealloc_ends.push(dealloc_free);
        }
        push(done, EventKind::JobDone, job, 0, None, None, None);
    }
    ev.sort_by(|a, b| a.ms.total_cmp(&b.ms));
    ev
}

fn argmin(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x < v[best] {
            best = i;
        }
    }
    best
}
