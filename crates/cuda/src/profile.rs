//! Per-phase device times, for tuning: CUDA events recorded on the compute stream
//! between the phases of an MSM or a partition, read once the work is done.
//!
//! Each backend owns its [`Profiler`] (through its [`crate::Tuning`]): off by
//! default (`CudaConfig::profile`, or [`Profiler::set_enabled`]), and then nothing
//! is recorded and nothing costs anything. On, it adds no synchronisation of its
//! own: the events are read after the caller's own wait for the results. Each
//! report is logged (`tracing`, info, target `cuzk_cuda::profile`) and kept, up to
//! the last [`MAX_KEPT`], in that profiler's list, which [`Profiler::take`] empties
//! (cuzk-gpu-check prints them). Two backends in one process (two devices, a
//! critical lane, both sides of an A/B run) profile independently: switching one
//! on leaves the other off, and each keeps only its own reports.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;

use crate::error::{Ctx, CudaError};
use crate::gpu::Gpu;

/// Reports a [`Profiler`] keeps for [`Profiler::take`] (older ones are dropped: a
/// long run with profiling on does not grow without bound).
pub const MAX_KEPT: usize = 10_000;

/// One backend's profiling: whether it is on, and the reports kept so far.
#[derive(Debug, Default)]
pub struct Profiler {
    on: AtomicBool,
    reports: Mutex<Vec<Report>>,
}

impl Profiler {
    pub fn new(on: bool) -> Self {
        Self {
            on: AtomicBool::new(on),
            reports: Mutex::new(Vec::new()),
        }
    }

    /// Switches this profiler on or off for the work started from now on.
    pub fn set_enabled(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The reports this profiler collected so far (its list is emptied).
    pub fn take(&self) -> Vec<Report> {
        std::mem::take(&mut *self.reports.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn keep(&self, report: Report) {
        tracing::info!(target: "cuzk_cuda::profile", "{report}");
        let mut kept = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= MAX_KEPT {
            kept.remove(0);
        }
        kept.push(report);
    }
}

/// One profiled piece of work: its phases' device times in order.
#[derive(Clone, Debug)]
pub struct Report {
    pub what: String,
    /// (phase, milliseconds since the previous mark).
    pub phases: Vec<(&'static str, f32)>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: f32 = self.phases.iter().map(|p| p.1).sum();
        write!(f, "{} {total:.2} ms:", self.what)?;
        for (name, ms) in &self.phases {
            write!(f, " {name} {ms:.2}")?;
        }
        Ok(())
    }
}

/// Events between phases of one piece of work; `None` when profiling is off.
#[derive(Debug)]
pub struct Phases {
    /// Where the report goes.
    profiler: Arc<Profiler>,
    what: String,
    start: CudaEvent,
    marks: Vec<(&'static str, CudaEvent)>,
}

fn record(gpu: &Gpu) -> Result<CudaEvent, CudaError> {
    gpu.compute_stream()
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .ctx("cuEventRecord")
}

/// Host wall-clock marks of one piece of work: where the calling thread spends its
/// time around the device phases (before the first is enqueued, enqueueing, waiting
/// for the results). Device phases alone do not show the host time between two
/// partitions, when the device has nothing queued. `None` when profiling is off.
#[derive(Debug)]
pub struct HostMarks {
    profiler: Arc<Profiler>,
    what: String,
    start: Instant,
    marks: Vec<(&'static str, Instant)>,
}

impl HostMarks {
    /// Starts `what`'s marks now, where `profiler` is on.
    pub fn start(profiler: &Arc<Profiler>, what: impl FnOnce() -> String) -> Option<Self> {
        profiler.enabled().then(|| Self {
            profiler: Arc::clone(profiler),
            what: what(),
            start: Instant::now(),
            marks: Vec::new(),
        })
    }

    /// Ends host phase `name` now.
    pub fn mark(this: &mut Option<Self>, name: &'static str) {
        if let Some(h) = this {
            h.marks.push((name, Instant::now()));
        }
    }

    /// Files the report (logged and kept as [`Phases::finish`] does).
    pub fn finish(this: Option<Self>) {
        let Some(h) = this else { return };
        let mut prev = h.start;
        let phases = h
            .marks
            .iter()
            .map(|&(name, t)| {
                let ms = t.duration_since(prev).as_secs_f32() * 1e3;
                prev = t;
                (name, ms)
            })
            .collect();
        h.profiler.keep(Report {
            what: h.what,
            phases,
        });
    }
}

impl Phases {
    /// Starts timing `what` at the compute stream's current position, where
    /// `profiler` is on.
    pub fn start(
        profiler: &Arc<Profiler>,
        gpu: &Gpu,
        what: impl FnOnce() -> String,
    ) -> Result<Option<Self>, CudaError> {
        if !profiler.enabled() {
            return Ok(None);
        }
        Ok(Some(Self {
            profiler: Arc::clone(profiler),
            what: what(),
            start: record(gpu)?,
            marks: Vec::new(),
        }))
    }

    /// Ends phase `name` at the compute stream's current position.
    pub fn mark(this: &mut Option<Self>, gpu: &Gpu, name: &'static str) -> Result<(), CudaError> {
        if let Some(p) = this {
            p.marks.push((name, record(gpu)?));
        }
        Ok(())
    }

    /// Waits for the last mark and files the report.
    pub fn finish(this: Option<Self>) -> Result<(), CudaError> {
        let Some(p) = this else { return Ok(()) };
        if let Some((_, last)) = p.marks.last() {
            last.synchronize().ctx("cuEventSynchronize")?;
        }
        let mut phases = Vec::with_capacity(p.marks.len());
        let mut prev = &p.start;
        for (name, ev) in &p.marks {
            phases.push((*name, prev.elapsed_ms(ev).ctx("cuEventElapsedTime")?));
            prev = ev;
        }
        p.profiler.keep(Report {
            what: p.what,
            phases,
        });
        Ok(())
    }
}
