//! Per-phase device times, for tuning: CUDA events recorded on the compute stream
//! between the phases of an MSM or a partition, read once the work is done.
//!
//! Off by default (`CudaConfig::profile`, or [`set_enabled`]): then nothing is
//! recorded and nothing costs anything. On, it adds no synchronisation of its own:
//! the events are read after the caller's own wait for the results. Each report is
//! logged (`tracing`, info) and kept, up to the last [`MAX_KEPT`], in a process-wide
//! list that [`take`] empties (cuzk-gpu-check prints them).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;

use crate::error::{Ctx, CudaError};
use crate::gpu::Gpu;

/// 1: off, 2: on.
static STATE: AtomicU8 = AtomicU8::new(1);
/// Reports kept for [`take`] (older ones are dropped: a long run with profiling on
/// does not grow without bound).
pub const MAX_KEPT: usize = 10_000;
static REPORTS: Mutex<Vec<Report>> = Mutex::new(Vec::new());

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

pub fn set_enabled(on: bool) {
    STATE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    STATE.load(Ordering::Relaxed) == 2
}

/// The reports collected so far (the list is emptied).
pub fn take() -> Vec<Report> {
    std::mem::take(&mut *REPORTS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Events between phases of one piece of work; `None` when profiling is off.
#[derive(Debug)]
pub struct Phases {
    what: String,
    start: CudaEvent,
    marks: Vec<(&'static str, CudaEvent)>,
}

fn record(gpu: &Gpu) -> Result<CudaEvent, CudaError> {
    gpu.compute_stream()
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .ctx("cuEventRecord")
}

fn keep(report: Report) {
    tracing::info!(target: "cuzk_cuda::profile", "{report}");
    let mut kept = REPORTS.lock().unwrap_or_else(|e| e.into_inner());
    if kept.len() >= MAX_KEPT {
        kept.remove(0);
    }
    kept.push(report);
}

/// Host wall-clock marks of one piece of work: where the calling thread spends its
/// time around the device phases (before the first is enqueued, enqueueing, waiting
/// for the results). Device phases alone do not show the host time between two
/// partitions, when the device has nothing queued. `None` when profiling is off.
#[derive(Debug)]
pub struct HostMarks {
    what: String,
    start: Instant,
    marks: Vec<(&'static str, Instant)>,
}

impl HostMarks {
    pub fn start(what: impl FnOnce() -> String) -> Option<Self> {
        enabled().then(|| Self {
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
        keep(Report {
            what: h.what,
            phases,
        });
    }
}

impl Phases {
    /// Starts timing `what` at the compute stream's current position.
    pub fn start(gpu: &Gpu, what: impl FnOnce() -> String) -> Result<Option<Self>, CudaError> {
        if !enabled() {
            return Ok(None);
        }
        Ok(Some(Self {
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
        keep(Report {
            what: p.what,
            phases,
        });
        Ok(())
    }
}
