//! Prometheus metrics, fed by the engine's TIMELINE events.
//!
//! The service's [`Metrics`] is a TIMELINE [`Subscriber`]: every stage histogram
//! (`cuzk_stage_seconds{stage=...}`) and every job's stage sums come from the
//! same `*_START`/`*_END` events as the waterfall, so `/metrics`, `GetStatus`,
//! the logs and the pictures cannot disagree. Job-level counters are counted where
//! the service hands a result over (once per job).

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::Instant,
};

use cuzk_timeline::{Event, EventKind, Stage, Subscriber};
use prometheus::{
    CounterVec, Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::kind::ProofKind;

/// What the TIMELINE says of one engine job, summed over its partitions.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct JobStages {
    /// ms of the job's `JOB_SUBMIT`.
    pub submit_ms: Option<f64>,
    /// ms of its first `SYNTH_START`.
    pub first_synth_ms: Option<f64>,
    /// Synthesis, spmv and prep_msm, summed over partitions (ms).
    pub synthesis_ms: f64,
    /// The backend call (GPU_START..GPU_END), summed over partitions (ms).
    pub gpu_ms: f64,
}

/// The daemon's metrics.
pub struct Metrics {
    registry: Registry,
    started: Instant,
    pub(crate) completed: IntCounter,
    pub(crate) failed: IntCounter,
    pub(crate) cancelled: IntCounter,
    pub(crate) completed_by_kind: IntCounterVec,
    pub(crate) failed_by_kind: IntCounterVec,
    pub(crate) submitted_by_kind: IntCounterVec,
    /// Submissions refused because the kind's pending cap was reached.
    pub(crate) refused_by_kind: IntCounterVec,
    pub(crate) proof_seconds: HistogramVec,
    pub(crate) queue_wait_seconds: Histogram,
    pub(crate) srs_load_seconds: Histogram,
    pub(crate) queue_depth: IntGauge,
    pub(crate) running_jobs: IntGauge,
    pub(crate) gpu_workers: IntGauge,
    pub(crate) results_waiting: IntGauge,
    /// 1 for each circuit id proved with timing-only parameters (benchmarks).
    pub(crate) timing_only_circuits: IntGaugeVec,
    /// Completed proofs made with timing-only parameters (returned unverified).
    pub(crate) timing_only_proofs: IntCounter,
    uptime: IntGauge,
    stage_seconds: HistogramVec,
    /// Per device: seconds with at least one backend call running (GPU_START to
    /// GPU_END; the calls of a device's two workers overlap, and are counted once);
    /// its rate is the device's busy fraction.
    gpu_busy_seconds: CounterVec,
    timeline: Mutex<Pairing>,
}

#[derive(Default)]
struct Pairing {
    open: HashMap<(u64, u32, Stage), f64>,
    /// The engine job on each device now (GPU_START to GPU_END).
    on_gpu: HashMap<u32, u64>,
    /// Per device: backend calls running now, and the time of its last GPU event.
    gpu_open: HashMap<u32, (usize, f64)>,
    jobs: HashMap<u64, JobStages>,
}

fn buckets() -> Vec<f64> {
    // 1 ms to ~4.6 hours: a 2 KiB test proof and a 64 GiB PoRep on a slow host.
    prometheus::exponential_buckets(0.001, 2.5, 18).expect("constant, valid buckets")
}

impl Metrics {
    /// Builds every metric. The names are constants, so registering cannot fail
    /// except by a programming error; it is still reported, not unwrapped.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let counter = |name: &str, help: &str| -> Result<IntCounter, prometheus::Error> {
            let c = IntCounter::new(name, help)?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let by_kind = |name: &str, help: &str| -> Result<IntCounterVec, prometheus::Error> {
            let c = IntCounterVec::new(Opts::new(name, help), &["kind"])?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |name: &str, help: &str| -> Result<IntGauge, prometheus::Error> {
            let g = IntGauge::new(name, help)?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let histogram = |name: &str, help: &str| -> Result<Histogram, prometheus::Error> {
            let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets()))?;
            registry.register(Box::new(h.clone()))?;
            Ok(h)
        };
        let histogram_vec =
            |name: &str, help: &str, label: &str| -> Result<HistogramVec, prometheus::Error> {
                let h =
                    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets()), &[label])?;
                registry.register(Box::new(h.clone()))?;
                Ok(h)
            };
        let gpu_busy_seconds = CounterVec::new(
            Opts::new(
                "cuzk_gpu_busy_seconds_total",
                "Seconds each device had a backend call running (GPU_START to GPU_END, \
                 overlapping calls counted once); rate() of it is the device's busy fraction",
            ),
            &["device"],
        )?;
        registry.register(Box::new(gpu_busy_seconds.clone()))?;
        let timing_only_circuits = IntGaugeVec::new(
            Opts::new(
                "cuzk_timing_only_circuit",
                "1 for each circuit id proved with TIMING-ONLY parameters (random \
                 points, benchmarks only): its proofs are returned unverified and do not verify",
            ),
            &["circuit_id"],
        )?;
        registry.register(Box::new(timing_only_circuits.clone()))?;
        let m = Self {
            timing_only_circuits,
            timing_only_proofs: counter(
                "cuzk_timing_only_proofs_total",
                "Completed proofs made with TIMING-ONLY parameters (returned unverified; they do not verify)",
            )?,
            gpu_busy_seconds,
            completed: counter("cuzk_proofs_completed_total", "Proofs completed")?,
            failed: counter("cuzk_proofs_failed_total", "Proofs failed")?,
            cancelled: counter("cuzk_proofs_cancelled_total", "Proofs cancelled")?,
            completed_by_kind: by_kind(
                "cuzk_proofs_completed_by_kind_total",
                "Proofs completed, per proof kind",
            )?,
            failed_by_kind: by_kind(
                "cuzk_proofs_failed_by_kind_total",
                "Proofs failed, per proof kind",
            )?,
            submitted_by_kind: by_kind(
                "cuzk_proofs_submitted_total",
                "Proof jobs accepted, per proof kind",
            )?,
            refused_by_kind: by_kind(
                "cuzk_proofs_refused_queue_full_total",
                "Submissions refused because the kind's pending jobs were at their cap",
            )?,
            proof_seconds: histogram_vec(
                "cuzk_proof_duration_seconds",
                "Submission to result of completed proofs, per proof kind",
                "kind",
            )?,
            queue_wait_seconds: histogram(
                "cuzk_queue_wait_seconds",
                "Submission to the first partition's synthesis",
            )?,
            srs_load_seconds: histogram(
                "cuzk_srs_load_seconds",
                "Time jobs waited for their parameters to load",
            )?,
            queue_depth: gauge("cuzk_queue_depth", "Jobs waiting to start")?,
            running_jobs: gauge("cuzk_running_jobs", "Jobs loading parameters or proving")?,
            gpu_workers: gauge("cuzk_gpu_workers", "GPU workers of the engine")?,
            results_waiting: gauge(
                "cuzk_results_waiting",
                "Finished jobs whose results wait to be awaited",
            )?,
            uptime: gauge("cuzk_uptime_seconds", "Seconds since the service started")?,
            stage_seconds: histogram_vec(
                "cuzk_stage_seconds",
                "Per-partition stage durations, from the engine's TIMELINE",
                "stage",
            )?,
            registry,
            started: Instant::now(),
            timeline: Mutex::new(Pairing::default()),
        };
        // Every kind's series exists from the start (a scrape sees zeros, not gaps).
        for k in ProofKind::ALL {
            m.completed_by_kind.with_label_values(&[k.name()]);
            m.failed_by_kind.with_label_values(&[k.name()]);
            m.submitted_by_kind.with_label_values(&[k.name()]);
            m.refused_by_kind.with_label_values(&[k.name()]);
        }
        for s in Stage::ALL {
            m.stage_seconds.with_label_values(&[s.name()]);
        }
        Ok(m)
    }

    pub fn uptime_seconds(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        self.uptime.set(self.uptime_seconds() as i64);
        let mut out = Vec::new();
        // Encoding into a Vec fails only for invalid metric families, which the
        // constants above are not; an error would leave a partial text.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!(%e, "encoding the metrics failed");
        }
        String::from_utf8(out).unwrap_or_default()
    }

    /// The engine job on each device now, from the TIMELINE.
    pub fn jobs_on_gpus(&self) -> HashMap<u32, u64> {
        self.timeline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .on_gpu
            .clone()
    }

    /// What the TIMELINE said of `engine_job`; forgets it.
    pub fn take_job(&self, engine_job: u64) -> JobStages {
        let mut p = self.timeline.lock().unwrap_or_else(PoisonError::into_inner);
        p.open.retain(|(j, _, _), _| *j != engine_job);
        p.jobs.remove(&engine_job).unwrap_or_default()
    }
}

impl Subscriber for Metrics {
    fn event(&self, e: &Event) {
        let mut p = self.timeline.lock().unwrap_or_else(PoisonError::into_inner);
        if e.event == EventKind::JobSubmit {
            p.jobs.entry(e.job).or_default().submit_ms = Some(e.ms);
            return;
        }
        let Some((stage, is_start)) = e.event.stage() else {
            return;
        };
        let key = (e.job, e.partition, stage);
        if let (Stage::Gpu, Some(d)) = (stage, e.device) {
            if is_start {
                p.on_gpu.insert(d, e.job);
            } else if p.on_gpu.get(&d) == Some(&e.job) {
                p.on_gpu.remove(&d);
            }
            // The union of the device's calls: the time since its last GPU event
            // counts if any call was running through it.
            let (open, last) = p.gpu_open.entry(d).or_insert((0, e.ms));
            if *open > 0 {
                self.gpu_busy_seconds
                    .with_label_values(&[&d.to_string()])
                    .inc_by((e.ms - *last).max(0.0) / 1e3);
            }
            *last = e.ms;
            *open = if is_start {
                *open + 1
            } else {
                open.saturating_sub(1)
            };
        }
        if is_start {
            p.open.insert(key, e.ms);
            if stage == Stage::Synth {
                let job = p.jobs.entry(e.job).or_default();
                if job.first_synth_ms.is_none() {
                    job.first_synth_ms = Some(e.ms);
                }
            }
            return;
        }
        let Some(start) = p.open.remove(&key) else {
            return;
        };
        let ms = (e.ms - start).max(0.0);
        self.stage_seconds
            .with_label_values(&[stage.name()])
            .observe(ms / 1e3);
        // Only jobs the service started are summed (the entry exists from their
        // JOB_SUBMIT); this keeps the map from growing with jobs nobody takes.
        if let Some(job) = p.jobs.get_mut(&e.job) {
            match stage {
                Stage::Synth | Stage::Spmv | Stage::Prep => job.synthesis_ms += ms,
                Stage::Gpu => job.gpu_ms += ms,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ms: f64, event: EventKind, job: u64, device: Option<u32>) -> Event {
        Event {
            ms,
            event,
            job,
            partition: 0,
            worker: None,
            device,
            bytes: None,
            detail: String::new(),
        }
    }

    #[test]
    fn each_device_busy_seconds_are_summed_from_the_timeline() {
        let m = Metrics::new().expect("metrics");
        // In recorded order. Device 0's second worker runs a call from 800 to
        // 1000 ms, overlapping job 3's (400 to 900 ms), and one inside it (850 to
        // 860 ms): each second counts once, 0.25 + 0.6 s.
        let mut events = Vec::new();
        for (job, device, start, end) in [
            (1, 0, 100.0, 350.0),
            (2, 1, 200.0, 300.0),
            (3, 0, 400.0, 900.0),
            (4, 0, 800.0, 1000.0),
            (5, 0, 850.0, 860.0),
        ] {
            events.push(ev(start, EventKind::GpuStart, job, Some(device)));
            events.push(ev(end, EventKind::GpuEnd, job, Some(device)));
        }
        events.sort_by(|a, b| a.ms.total_cmp(&b.ms));
        for e in &events {
            m.event(e);
        }
        let text = m.render();
        assert!(
            text.contains("cuzk_gpu_busy_seconds_total{device=\"0\"} 0.85"),
            "{text}"
        );
        assert!(
            text.contains("cuzk_gpu_busy_seconds_total{device=\"1\"} 0.1"),
            "{text}"
        );
    }
}
