//! The recorder the scheduler writes events into.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::{Event, EventKind, Stage, TimelineError};

/// Collects [`Event`]s from any thread.
///
/// Each [`record`](Recorder::record) takes the time and appends under one short
/// mutex, so the stored order is the time order and the JSONL file (if any) is in
/// the same order; it also emits the event through `tracing` (target
/// `cuzk::timeline`: job-level events at INFO, the rest at DEBUG) and, if asked,
/// prints its TIMELINE line to stderr. A C2 partition produces about twenty events
/// over seconds, so a mutex costs nothing measurable; recording never blocks on
/// anything but that mutex and the optional file write.
///
/// A failure to write the JSONL file never fails `record` (the scheduler must not
/// stop proving because a log disk is full): the first error is kept and returned
/// by [`flush`](Recorder::flush), and later lines are not attempted.
pub struct Recorder {
    start: Instant,
    inner: Mutex<Inner>,
    timeline_stderr: bool,
    /// Whether events are kept in memory (a long-lived process that only needs
    /// the subscribers turns this off, so memory does not grow with every proof).
    retain: bool,
    subscribers: Vec<Arc<dyn Subscriber>>,
}

/// Receives every event as it is recorded (after the tracing event, under the
/// recorder's lock, so subscribers see events in time order). The daemon's
/// metrics are one: its histograms come from the same events as the waterfall.
/// A subscriber must be quick and must not record into the same recorder.
pub trait Subscriber: Send + Sync {
    fn event(&self, event: &Event);
}

struct Inner {
    events: Vec<Event>,
    jsonl: Option<Jsonl>,
}

struct Jsonl {
    path: PathBuf,
    writer: BufWriter<File>,
    error: Option<io::Error>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("Recorder")
            .field("events", &inner.events.len())
            .field("jsonl", &inner.jsonl.as_ref().map(|j| &j.path))
            .field("timeline_stderr", &self.timeline_stderr)
            .field("retain", &self.retain)
            .field("subscribers", &self.subscribers.len())
            .finish()
    }
}

impl Recorder {
    /// A recorder whose times count from `start`.
    pub fn new(start: Instant) -> Self {
        Self {
            start,
            inner: Mutex::new(Inner {
                events: Vec::new(),
                jsonl: None,
            }),
            timeline_stderr: false,
            retain: true,
            subscribers: Vec::new(),
        }
    }

    /// Also hands every event to `subscriber`.
    pub fn with_subscriber(mut self, subscriber: Arc<dyn Subscriber>) -> Self {
        self.subscribers.push(subscriber);
        self
    }

    /// Whether [`events`](Recorder::events) keeps every event (the default). A
    /// daemon that proves for months turns it off; the JSONL file, stderr lines,
    /// `tracing` and subscribers still see every event.
    pub fn with_retention(mut self, retain: bool) -> Self {
        self.retain = retain;
        self
    }

    /// Also appends every event to `path` as a JSON line (the file is created if
    /// missing), flushing after each line so the file is complete up to the last
    /// event if the process dies.
    pub fn with_jsonl(self, path: impl AsRef<Path>) -> Result<Self, TimelineError> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| TimelineError::Open {
                path: path.clone(),
                source,
            })?;
        self.lock().jsonl = Some(Jsonl {
            path,
            writer: BufWriter::new(file),
            error: None,
        });
        Ok(self)
    }

    /// Also prints every event's TIMELINE line to stderr.
    pub fn with_timeline_stderr(mut self, on: bool) -> Self {
        self.timeline_stderr = on;
        self
    }

    /// The instant times count from.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Milliseconds since the start, rounded down to whole microseconds.
    pub fn now_ms(&self) -> f64 {
        // u128 microseconds are exact in f64 below 2^53 (285 years); dividing an
        // exact integer by 1000 gives the double nearest to the decimal value, which
        // is what makes TIMELINE lines (three decimals) parse back exactly.
        self.start.elapsed().as_micros() as f64 / 1000.0
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves the vector valid (pushes
        // are atomic from our point of view), so keep recording.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records one event now and returns its time (ms since the start).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        event: EventKind,
        job: u64,
        partition: u32,
        worker: Option<u32>,
        device: Option<u32>,
        bytes: Option<u64>,
        detail: impl Into<String>,
    ) -> f64 {
        let detail = detail.into();
        let mut inner = self.lock();
        // The time is taken under the lock so the stored order is the time order.
        let ms = self.now_ms();
        let e = Event {
            ms,
            event,
            job,
            partition,
            worker,
            device,
            bytes,
            detail,
        };
        self.emit(&mut inner, e);
        ms
    }

    /// Records an event built by the caller (its `ms` is kept as given). For
    /// replaying or merging timelines; live code should use
    /// [`record`](Recorder::record).
    pub fn push(&self, event: Event) {
        let mut inner = self.lock();
        self.emit(&mut inner, event);
    }

    fn emit(&self, inner: &mut Inner, e: Event) {
        trace_event(&e);
        if self.timeline_stderr {
            eprintln!("{}", e.timeline_line());
        }
        if let Some(j) = inner.jsonl.as_mut() {
            if j.error.is_none() {
                let r = writeln!(j.writer, "{}", e.to_json()).and_then(|_| j.writer.flush());
                if let Err(err) = r {
                    j.error = Some(err);
                }
            }
        }
        for s in &self.subscribers {
            s.event(&e);
        }
        if self.retain {
            inner.events.push(e);
        }
    }

    /// Records `stage`'s start now and returns a guard that records its end when
    /// ended or dropped (so an early return or `?` still closes the stage).
    pub fn stage(
        &self,
        stage: Stage,
        job: u64,
        partition: u32,
        worker: Option<u32>,
        device: Option<u32>,
    ) -> StageGuard<'_> {
        self.record(stage.start(), job, partition, worker, device, None, "");
        StageGuard {
            recorder: self,
            stage,
            job,
            partition,
            worker,
            device,
            bytes: None,
            ended: false,
        }
    }

    /// A snapshot of the events so far, in time order.
    pub fn events(&self) -> Vec<Event> {
        self.lock().events.clone()
    }

    /// Number of events so far.
    pub fn len(&self) -> usize {
        self.lock().events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Flushes the JSONL file and reports the first write error seen, if any.
    pub fn flush(&self) -> Result<(), TimelineError> {
        let mut inner = self.lock();
        let Some(j) = inner.jsonl.as_mut() else {
            return Ok(());
        };
        if let Some(err) = &j.error {
            // The error stays: later lines are not written, the file has a gap.
            return Err(TimelineError::Write(io::Error::new(
                err.kind(),
                err.to_string(),
            )));
        }
        j.writer.flush().map_err(TimelineError::Write)
    }
}

/// The end of a stage started by [`Recorder::stage`].
#[derive(Debug)]
pub struct StageGuard<'a> {
    recorder: &'a Recorder,
    stage: Stage,
    job: u64,
    partition: u32,
    worker: Option<u32>,
    device: Option<u32>,
    bytes: Option<u64>,
    ended: bool,
}

impl StageGuard<'_> {
    /// Bytes to put on the end event.
    pub fn set_bytes(&mut self, bytes: u64) {
        self.bytes = Some(bytes);
    }

    /// Records the end now, with `detail`; returns its time.
    pub fn end(mut self, detail: impl Into<String>) -> f64 {
        self.ended = true;
        self.recorder.record(
            self.stage.end(),
            self.job,
            self.partition,
            self.worker,
            self.device,
            self.bytes,
            detail,
        )
    }
}

impl Drop for StageGuard<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let detail = if std::thread::panicking() {
                "unwound"
            } else {
                ""
            };
            self.recorder.record(
                self.stage.end(),
                self.job,
                self.partition,
                self.worker,
                self.device,
                self.bytes,
                detail,
            );
        }
    }
}

/// The `tracing` side of an event. The level must be a constant per call site,
/// hence two calls.
fn trace_event(e: &Event) {
    macro_rules! emit {
        ($level:expr) => {
            tracing::event!(
                target: "cuzk::timeline",
                $level,
                ms = e.ms,
                event = e.event.name(),
                job = e.job,
                partition = e.partition,
                worker = e.worker,
                device = e.device,
                bytes = e.bytes,
                detail = e.detail.as_str(),
                "{}",
                e.event.name()
            )
        };
    }
    if e.event.is_job_level() {
        emit!(tracing::Level::INFO);
    } else {
        emit!(tracing::Level::DEBUG);
    }
}
