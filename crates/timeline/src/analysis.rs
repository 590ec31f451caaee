//! From events to intervals, and from intervals to the figures that matter:
//! stage durations, GPU busy share, seconds per proof, waits.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;

use crate::{Event, EventKind, Stage};

/// A wait: time a partition spent ready but not running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitKind {
    /// `SYNTH_QUEUE` → `SYNTH_START` (includes any memory-budget wait in between).
    SynthQueue,
    /// `GPU_QUEUE` → the first of `GPU_PICKUP`, `LOCK_WAIT_START`, `GPU_START`.
    GpuQueue,
    /// `LOCK_WAIT_START` → `LOCK_ACQUIRED`.
    Lock,
    /// `BUDGET_WAIT_START` → `BUDGET_ACQUIRED`.
    Budget,
}

impl WaitKind {
    pub const ALL: [WaitKind; 4] = [
        WaitKind::SynthQueue,
        WaitKind::GpuQueue,
        WaitKind::Lock,
        WaitKind::Budget,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WaitKind::SynthQueue => "synth queue",
            WaitKind::GpuQueue => "gpu queue",
            WaitKind::Lock => "gpu lock",
            WaitKind::Budget => "memory budget",
        }
    }

    /// The event that starts the wait.
    pub fn start(self) -> EventKind {
        match self {
            WaitKind::SynthQueue => EventKind::SynthQueue,
            WaitKind::GpuQueue => EventKind::GpuQueue,
            WaitKind::Lock => EventKind::LockWaitStart,
            WaitKind::Budget => EventKind::BudgetWaitStart,
        }
    }

    /// The events that end it (the first one seen does).
    pub fn ends(self) -> &'static [EventKind] {
        match self {
            WaitKind::SynthQueue => &[EventKind::SynthStart],
            WaitKind::GpuQueue => &[
                EventKind::GpuPickup,
                EventKind::LockWaitStart,
                EventKind::GpuStart,
            ],
            WaitKind::Lock => &[EventKind::LockAcquired],
            WaitKind::Budget => &[EventKind::BudgetAcquired],
        }
    }
}

impl fmt::Display for WaitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an [`Interval`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IntervalKind {
    /// A whole job, submit to done / failed / cancelled.
    Job,
    Stage(Stage),
    Wait(WaitKind),
    /// A partition's a, b, c staged (page-locked) for the backend before the GPU
    /// lock: one `STAGED` event at its end whose detail says how long (`ms=…`).
    Staging,
}

/// A matched pair of events.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    pub kind: IntervalKind,
    pub job: u64,
    pub partition: u32,
    /// From the start event, or the end event if the start has none.
    pub worker: Option<u32>,
    pub device: Option<u32>,
    pub bytes: Option<u64>,
    pub start_ms: f64,
    /// The end event's time, or the end of the run if it never ended.
    pub end_ms: f64,
    /// False if no end event was recorded (the run stopped, or crashed, inside it).
    pub complete: bool,
    /// For jobs: how it ended (`JOB_DONE`, `JOB_FAILED`, `JOB_CANCELLED`).
    pub outcome: Option<EventKind>,
    /// The start's detail and the end's, joined by " / " when both are present.
    pub detail: String,
}

impl Interval {
    pub fn duration_ms(&self) -> f64 {
        self.end_ms - self.start_ms
    }
}

/// Every interval of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Intervals {
    /// In order of their start.
    pub intervals: Vec<Interval>,
    /// Stage ends (and job ends) with no start before them.
    pub orphan_ends: Vec<Event>,
    /// Time of the first and last event (0 for an empty run).
    pub start_ms: f64,
    pub end_ms: f64,
}

/// Matches starts with ends. A stage is the pair `*_START`/`*_END` for the same
/// (job, partition, stage), matched first-in first-out (so a stage run twice for
/// one partition, such as two deallocations, gives two intervals); a wait likewise
/// per (job, partition, wait); a job is `JOB_SUBMIT` to its first
/// `JOB_DONE`/`JOB_FAILED`/`JOB_CANCELLED`. Events are taken in time order (a
/// stable sort, so equal times keep their recorded order).
pub fn intervals(events: &[Event]) -> Intervals {
    let mut sorted: Vec<&Event> = events.iter().collect();
    sorted.sort_by(|a, b| a.ms.total_cmp(&b.ms));
    let (start_ms, end_ms) = match (sorted.first(), sorted.last()) {
        (Some(a), Some(b)) => (a.ms, b.ms),
        _ => (0.0, 0.0),
    };

    let mut out = Vec::new();
    let mut orphan_ends = Vec::new();
    let mut open: HashMap<(u64, u32, IntervalKind), VecDeque<&Event>> = HashMap::new();

    fn close(out: &mut Vec<Interval>, start: &Event, end: &Event, kind: IntervalKind) {
        out.push(Interval {
            kind,
            job: start.job,
            partition: start.partition,
            worker: start.worker.or(end.worker),
            device: start.device.or(end.device),
            bytes: start.bytes.or(end.bytes),
            start_ms: start.ms,
            end_ms: end.ms,
            complete: true,
            outcome: matches!(kind, IntervalKind::Job).then_some(end.event),
            detail: join_detail(&start.detail, &end.detail),
        });
    }

    for e in sorted {
        // Ends first: one event can end a wait and start another
        // (`LOCK_WAIT_START` ends the GPU queue wait).
        for w in WaitKind::ALL {
            if w.ends().contains(&e.event) {
                let key = (e.job, e.partition, IntervalKind::Wait(w));
                if let Some(s) = open.get_mut(&key).and_then(VecDeque::pop_front) {
                    close(&mut out, s, e, IntervalKind::Wait(w));
                }
            }
        }
        match e.event {
            EventKind::JobDone | EventKind::JobFailed | EventKind::JobCancelled => {
                let key = (e.job, 0, IntervalKind::Job);
                match open.get_mut(&key).and_then(VecDeque::pop_front) {
                    Some(s) => close(&mut out, s, e, IntervalKind::Job),
                    None => orphan_ends.push(e.clone()),
                }
            }
            EventKind::JobSubmit => open
                .entry((e.job, 0, IntervalKind::Job))
                .or_default()
                .push_back(e),
            EventKind::Staged => {
                // One event at the end; the detail gives the length.
                let took = staged_ms(&e.detail).unwrap_or(0.0);
                out.push(Interval {
                    kind: IntervalKind::Staging,
                    job: e.job,
                    partition: e.partition,
                    worker: e.worker,
                    device: e.device,
                    bytes: e.bytes,
                    start_ms: e.ms - took,
                    end_ms: e.ms,
                    complete: true,
                    outcome: None,
                    detail: e.detail.clone(),
                });
            }
            kind => {
                if let Some((stage, is_start)) = kind.stage() {
                    let key = (e.job, e.partition, IntervalKind::Stage(stage));
                    if is_start {
                        open.entry(key).or_default().push_back(e);
                    } else {
                        match open.get_mut(&key).and_then(VecDeque::pop_front) {
                            Some(s) => close(&mut out, s, e, IntervalKind::Stage(stage)),
                            None => orphan_ends.push(e.clone()),
                        }
                    }
                }
            }
        }
        for w in WaitKind::ALL {
            if w.start() == e.event {
                open.entry((e.job, e.partition, IntervalKind::Wait(w)))
                    .or_default()
                    .push_back(e);
            }
        }
    }

    // Whatever is still open ran until the run stopped.
    for ((_, _, kind), starts) in open {
        for s in starts {
            out.push(Interval {
                kind,
                job: s.job,
                partition: s.partition,
                worker: s.worker,
                device: s.device,
                bytes: s.bytes,
                start_ms: s.ms,
                end_ms,
                complete: false,
                outcome: None,
                detail: s.detail.clone(),
            });
        }
    }
    out.sort_by(|a, b| {
        a.start_ms
            .total_cmp(&b.start_ms)
            .then(a.kind.cmp(&b.kind))
            .then(a.job.cmp(&b.job))
            .then(a.partition.cmp(&b.partition))
    });
    Intervals {
        intervals: out,
        orphan_ends,
        start_ms,
        end_ms,
    }
}

fn join_detail(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (false, true) => a.to_string(),
        (false, false) => format!("{a} / {b}"),
    }
}

/// Summary of a set of durations (milliseconds). Percentiles are nearest-rank:
/// the p-th percentile is the smallest value with at least p% of the values at
/// or below it, so it is always one of the durations.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub count: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub total_ms: f64,
}

impl Stats {
    /// `None` for no durations.
    pub fn from_durations(durations: &[f64]) -> Option<Stats> {
        if durations.is_empty() {
            return None;
        }
        let mut v = durations.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        // Nearest rank: index ceil(p·n/100) − 1, in integers.
        let rank = |p: usize| v[(p * n).div_ceil(100).max(1) - 1];
        let total: f64 = v.iter().sum();
        Some(Stats {
            count: n,
            mean_ms: total / n as f64,
            p50_ms: rank(50),
            p95_ms: rank(95),
            min_ms: v[0],
            max_ms: v[n - 1],
            total_ms: total,
        })
    }
}

/// How much of the run a GPU was busy.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceBusy {
    /// `None` collects GPU stages recorded without a device.
    pub device: Option<u32>,
    /// Length of the union of its `GPU_START`–`GPU_END` intervals (overlapping
    /// workers on one device count once).
    pub busy_ms: f64,
    /// `busy_ms` as a percentage of the run's span.
    pub busy_pct: f64,
    /// Idle while some partition was ready for the GPU (in the GPU queue, staging,
    /// or waiting for the lock): hand-over and lock overhead, the engine's share.
    pub idle_ready_ms: f64,
    /// Idle with nothing ready: the stages before the GPU (synthesis, spmv,
    /// prep_msm) could not keep up, or the run was starting or ending.
    pub starved_ms: f64,
}

impl DeviceBusy {
    /// `ms` as a percentage of `span_ms`.
    pub fn pct(ms: f64, span_ms: f64) -> f64 {
        if span_ms > 0.0 {
            100.0 * ms / span_ms
        } else {
            0.0
        }
    }
}

/// The waits of one partition, each the sum over its occurrences; `None` when
/// the timeline records no such wait for it.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionWaits {
    pub job: u64,
    pub partition: u32,
    pub synth_queue_ms: Option<f64>,
    pub gpu_queue_ms: Option<f64>,
    pub lock_wait_ms: Option<f64>,
    pub budget_wait_ms: Option<f64>,
}

impl PartitionWaits {
    pub fn get(&self, kind: WaitKind) -> Option<f64> {
        match kind {
            WaitKind::SynthQueue => self.synth_queue_ms,
            WaitKind::GpuQueue => self.gpu_queue_ms,
            WaitKind::Lock => self.lock_wait_ms,
            WaitKind::Budget => self.budget_wait_ms,
        }
    }

    fn slot(&mut self, kind: WaitKind) -> &mut Option<f64> {
        match kind {
            WaitKind::SynthQueue => &mut self.synth_queue_ms,
            WaitKind::GpuQueue => &mut self.gpu_queue_ms,
            WaitKind::Lock => &mut self.lock_wait_ms,
            WaitKind::Budget => &mut self.budget_wait_ms,
        }
    }
}

/// The figures of a run. Only complete intervals enter the statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// First and last event, and the span between them: the run's wall time.
    pub start_ms: f64,
    pub end_ms: f64,
    pub span_ms: f64,
    pub jobs_submitted: usize,
    pub jobs_done: usize,
    pub jobs_failed: usize,
    pub jobs_cancelled: usize,
    /// Distinct (job, partition) pairs with a partition-level event.
    pub partitions: usize,
    /// Span in seconds divided by the jobs done (`None` if none is done).
    pub s_per_proof: Option<f64>,
    /// A stream's rate once it runs: the time from the first job done to the last,
    /// over the jobs done after the first (`None` under two jobs done). Unlike
    /// [`Analysis::s_per_proof`] it leaves out the start-up (parameters to the
    /// device, the first synthesis) that a short run pays once.
    pub steady_s_per_proof: Option<f64>,
    /// Submit to done, over the jobs done.
    pub job_latency: Option<Stats>,
    /// Per stage present, in pipeline order.
    pub stages: Vec<(Stage, Stats)>,
    /// Staging of a, b, c before the GPU lock, where a backend staged.
    pub staging: Option<Stats>,
    /// Per wait present, over the partitions' summed waits.
    pub waits: Vec<(WaitKind, Stats)>,
    /// Per device with a GPU stage, by device number.
    pub gpu_busy: Vec<DeviceBusy>,
    /// Per partition, by (job, partition).
    pub partition_waits: Vec<PartitionWaits>,
    /// Stages, waits and jobs that started but never ended.
    pub unfinished: usize,
    /// Ends with no start.
    pub orphan_ends: usize,
}

/// Computes the [`Analysis`] of a run's events (in any order).
pub fn analyse(events: &[Event]) -> Analysis {
    let iv = intervals(events);
    let span_ms = iv.end_ms - iv.start_ms;

    let count = |k: EventKind| events.iter().filter(|e| e.event == k).count();
    let jobs_done = count(EventKind::JobDone);
    let done_at = || {
        events
            .iter()
            .filter(|e| e.event == EventKind::JobDone)
            .map(|e| e.ms)
    };
    let steady_s_per_proof = (jobs_done >= 2).then(|| {
        let first = done_at().fold(f64::INFINITY, f64::min);
        let last = done_at().fold(f64::NEG_INFINITY, f64::max);
        (last - first) / 1000.0 / (jobs_done - 1) as f64
    });

    let partitions = events
        .iter()
        .filter(|e| !e.event.is_job_level())
        .map(|e| (e.job, e.partition))
        .collect::<BTreeSet<_>>()
        .len();

    let complete = || iv.intervals.iter().filter(|i| i.complete);

    let job_latency: Vec<f64> = complete()
        .filter(|i| i.kind == IntervalKind::Job && i.outcome == Some(EventKind::JobDone))
        .map(Interval::duration_ms)
        .collect();

    let stages = Stage::ALL
        .into_iter()
        .filter_map(|s| {
            let d: Vec<f64> = complete()
                .filter(|i| i.kind == IntervalKind::Stage(s))
                .map(Interval::duration_ms)
                .collect();
            Stats::from_durations(&d).map(|st| (s, st))
        })
        .collect();

    let mut per_partition: BTreeMap<(u64, u32), PartitionWaits> = BTreeMap::new();
    for i in complete() {
        if let IntervalKind::Wait(w) = i.kind {
            let pw = per_partition
                .entry((i.job, i.partition))
                .or_insert_with(|| PartitionWaits {
                    job: i.job,
                    partition: i.partition,
                    synth_queue_ms: None,
                    gpu_queue_ms: None,
                    lock_wait_ms: None,
                    budget_wait_ms: None,
                });
            *pw.slot(w).get_or_insert(0.0) += i.duration_ms();
        }
    }
    let partition_waits: Vec<PartitionWaits> = per_partition.into_values().collect();
    let waits = WaitKind::ALL
        .into_iter()
        .filter_map(|w| {
            let d: Vec<f64> = partition_waits.iter().filter_map(|p| p.get(w)).collect();
            Stats::from_durations(&d).map(|st| (w, st))
        })
        .collect();

    // GPU busy: union of the GPU intervals of each device (unfinished ones too:
    // the device was busy until the run stopped).
    let mut by_device: BTreeMap<Option<u32>, Vec<(f64, f64)>> = BTreeMap::new();
    for i in &iv.intervals {
        if i.kind == IntervalKind::Stage(Stage::Gpu) {
            by_device
                .entry(i.device)
                .or_default()
                .push((i.start_ms, i.end_ms));
        }
    }
    // Work ready for a device: the GPU queue (shared by every device), and the
    // device's own staging and lock waits.
    let ready = |device: Option<u32>| {
        iv.intervals
            .iter()
            .filter(move |i| match i.kind {
                IntervalKind::Wait(WaitKind::GpuQueue) => true,
                IntervalKind::Wait(WaitKind::Lock) | IntervalKind::Staging => i.device == device,
                _ => false,
            })
            .map(|i| (i.start_ms, i.end_ms))
    };
    let gpu_busy = by_device
        .into_iter()
        .map(|(device, spans)| {
            let busy_ms = union_length(spans.clone());
            let busy_or_ready = union_length(spans.into_iter().chain(ready(device)).collect());
            let idle_ready_ms = (busy_or_ready - busy_ms).max(0.0);
            DeviceBusy {
                device,
                busy_ms,
                busy_pct: DeviceBusy::pct(busy_ms, span_ms),
                idle_ready_ms,
                starved_ms: (span_ms - busy_ms - idle_ready_ms).max(0.0),
            }
        })
        .collect();

    Analysis {
        start_ms: iv.start_ms,
        end_ms: iv.end_ms,
        span_ms,
        jobs_submitted: count(EventKind::JobSubmit),
        jobs_done,
        jobs_failed: count(EventKind::JobFailed),
        jobs_cancelled: count(EventKind::JobCancelled),
        partitions,
        s_per_proof: (jobs_done > 0).then(|| span_ms / 1000.0 / jobs_done as f64),
        steady_s_per_proof,
        job_latency: Stats::from_durations(&job_latency),
        stages,
        staging: Stats::from_durations(
            &complete()
                .filter(|i| i.kind == IntervalKind::Staging)
                .map(Interval::duration_ms)
                .collect::<Vec<_>>(),
        ),
        waits,
        gpu_busy,
        partition_waits,
        unfinished: iv.intervals.iter().filter(|i| !i.complete).count(),
        orphan_ends: iv.orphan_ends.len(),
    }
}

/// The `ms=…` of a `STAGED` event's detail (`ms=12.5` or `ms=12.5 failed: …`).
fn staged_ms(detail: &str) -> Option<f64> {
    let v = detail.strip_prefix("ms=")?;
    let end = v.find(' ').unwrap_or(v.len());
    v[..end]
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x >= 0.0)
}

/// Length of the union of `[start, end]` intervals.
fn union_length(mut spans: Vec<(f64, f64)>) -> f64 {
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut cur: Option<(f64, f64)> = None;
    for (s, e) in spans {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

/// Milliseconds as text: "812.5 ms" below ten seconds, "12.35 s" above.
pub(crate) fn fmt_ms(ms: f64) -> String {
    if ms.abs() >= 10_000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

impl Analysis {
    /// The rows of the stage and wait tables: (name, stats).
    pub(crate) fn stat_rows(&self) -> Vec<(String, &Stats)> {
        let mut rows: Vec<(String, &Stats)> = Vec::new();
        if let Some(s) = &self.job_latency {
            rows.push(("job (submit→done)".into(), s));
        }
        // Staging comes right before the GPU stage (it happens between prep_msm and
        // the lock).
        let mut staging = self.staging.as_ref();
        for (stage, s) in &self.stages {
            if matches!(
                stage,
                Stage::Gpu | Stage::BG2 | Stage::Assembly | Stage::Dealloc
            ) {
                if let Some(st) = staging.take() {
                    rows.push(("staging (a, b, c)".into(), st));
                }
            }
            rows.push((stage.name().into(), s));
        }
        if let Some(st) = staging {
            rows.push(("staging (a, b, c)".into(), st));
        }
        for (w, s) in &self.waits {
            rows.push((format!("wait: {}", w.name()), s));
        }
        rows
    }

    /// One line summing up the run.
    pub fn headline(&self) -> String {
        let mut s = format!(
            "{} over {}: {} job(s) done",
            self.partitions_text(),
            fmt_ms(self.span_ms),
            self.jobs_done
        );
        if self.jobs_failed > 0 {
            s += &format!(", {} failed", self.jobs_failed);
        }
        if self.jobs_cancelled > 0 {
            s += &format!(", {} cancelled", self.jobs_cancelled);
        }
        if let Some(t) = self.s_per_proof {
            s += &format!(", {t:.3} s/proof");
        }
        if let Some(t) = self.steady_s_per_proof {
            s += &format!(" (steady {t:.3}: first job done to last)");
        }
        for d in &self.gpu_busy {
            s += &format!(", {} {:.1}% busy", device_name(d.device), d.busy_pct);
        }
        s
    }

    fn partitions_text(&self) -> String {
        format!(
            "{} partition(s) of {} job(s)",
            self.partitions, self.jobs_submitted
        )
    }
}

pub(crate) fn device_name(d: Option<u32>) -> String {
    match d {
        Some(d) => format!("gpu {d}"),
        None => "gpu ?".into(),
    }
}

/// Per-partition rows printed by `Display` up to this many; beyond, only the
/// summary (the HTML report and `partition_waits` have them all).
const MAX_DISPLAY_PARTITIONS: usize = 32;

impl fmt::Display for Analysis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.headline())?;
        if self.unfinished > 0 || self.orphan_ends > 0 {
            writeln!(
                f,
                "incomplete timeline: {} interval(s) never ended, {} end(s) without a start",
                self.unfinished, self.orphan_ends
            )?;
        }
        let rows = self.stat_rows();
        if !rows.is_empty() {
            writeln!(
                f,
                "\n{:<22} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11}",
                "stage (ms)", "count", "mean", "p50", "p95", "max", "total"
            )?;
            for (name, s) in rows {
                writeln!(
                    f,
                    "{:<22} {:>6} {:>11.1} {:>11.1} {:>11.1} {:>11.1} {:>11.1}",
                    name, s.count, s.mean_ms, s.p50_ms, s.p95_ms, s.max_ms, s.total_ms
                )?;
            }
        }
        if !self.gpu_busy.is_empty() {
            writeln!(f)?;
            for d in &self.gpu_busy {
                writeln!(
                    f,
                    "{} busy {:.1}% ({} of {}); idle {:.1}% with work ready, {:.1}% starved (nothing ready: the stages before the GPU, start-up and tail)",
                    device_name(d.device),
                    d.busy_pct,
                    fmt_ms(d.busy_ms),
                    fmt_ms(self.span_ms),
                    DeviceBusy::pct(d.idle_ready_ms, self.span_ms),
                    DeviceBusy::pct(d.starved_ms, self.span_ms),
                )?;
            }
        }
        if !self.partition_waits.is_empty() {
            if self.partition_waits.len() > MAX_DISPLAY_PARTITIONS {
                writeln!(
                    f,
                    "\n(waits of {} partitions: see the HTML report)",
                    self.partition_waits.len()
                )?;
            } else {
                writeln!(
                    f,
                    "\n{:>6} {:>5} {:>12} {:>12} {:>12} {:>12}",
                    "job", "part", "synth queue", "gpu queue", "gpu lock", "budget"
                )?;
                let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
                for p in &self.partition_waits {
                    writeln!(
                        f,
                        "{:>6} {:>5} {:>12} {:>12} {:>12} {:>12}",
                        p.job,
                        p.partition,
                        cell(p.synth_queue_ms),
                        cell(p.gpu_queue_ms),
                        cell(p.lock_wait_ms),
                        cell(p.budget_wait_ms)
                    )?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = Stats::from_durations(&[5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
        assert_eq!(
            (s.p50_ms, s.p95_ms, s.min_ms, s.max_ms),
            (3.0, 5.0, 1.0, 5.0)
        );
        assert_eq!(s.mean_ms, 3.0);
        let one = Stats::from_durations(&[7.0]).unwrap();
        assert_eq!((one.p50_ms, one.p95_ms), (7.0, 7.0));
        // 20 values 1..=20: p95 is the 19th, p50 the 10th.
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        let s = Stats::from_durations(&v).unwrap();
        assert_eq!((s.p50_ms, s.p95_ms), (10.0, 19.0));
        assert!(Stats::from_durations(&[]).is_none());
    }

    #[test]
    fn union_merges_overlaps_and_touching_spans() {
        assert_eq!(
            union_length(vec![(0.0, 10.0), (5.0, 12.0), (12.0, 13.0), (20.0, 21.0)]),
            14.0
        );
        assert_eq!(union_length(vec![]), 0.0);
        assert_eq!(union_length(vec![(3.0, 4.0), (0.0, 10.0)]), 10.0);
    }
}
