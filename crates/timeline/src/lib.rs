//! The pipeline's timeline: one event per stage start and end, queue wait, lock
//! wait, memory-budget wait and deallocation, and everything that reads them.
//!
//! # Design: one event stream, many views
//!
//! The C2 history (Phases 6–11) was steered by TIMELINE lines: which partition
//! waited for the GPU lock, how long synthesis sat in its queue, whether the GPU
//! idled between partitions. Those lines were printed next to `tracing` logs and
//! ad-hoc timers, and the three regularly disagreed. Here an [`Event`] is the only
//! record: the scheduler calls [`Recorder::record`] once per transition and every
//! other view is derived from the same values:
//!
//! * a `tracing` event (target `cuzk::timeline`), so logs show the same transitions;
//! * a `TIMELINE,<offset_ms>,<EVENT>,<job_id>,<detail>` line ([`Event::timeline_line`]),
//!   the format of the earlier tooling, parseable back ([`Event::parse_timeline_line`]);
//! * JSON lines ([`write_jsonl`], [`read_jsonl`]), lossless, for offline analysis;
//! * [`analyse`]: per-stage count / mean / p50 / p95, GPU busy share per device,
//!   seconds per proof and per-partition waits;
//! * [`render_svg`] / [`render_html`]: a waterfall with one lane per worker.
//!
//! Events are flat (a kind, a time, and ids), not spans: a stage is the pair of its
//! `*_START` and `*_END` events for the same (job, partition, stage), matched in
//! order. Flat events survive a crash half-way through a stage (the start is
//! already written), are cheap to record from any thread, and merge across
//! processes by sorting on time.
//!
//! Architecture invariant: this crate knows nothing of proving; it depends on no
//! other cuzk crate, so any stage (and the CLI) can record or read timelines.

#![forbid(unsafe_code)]

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod analysis;
mod recorder;
mod svg;
pub mod synthetic;

pub use analysis::{
    analyse, intervals, Analysis, DeviceBusy, Interval, IntervalKind, Intervals, PartitionWaits,
    Stats, WaitKind,
};
pub use recorder::{Recorder, StageGuard, Subscriber};
pub use svg::{render_html, render_svg};

/// Errors reading or writing timelines.
#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    /// A timeline file could not be opened or read.
    #[error("could not read the timeline file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A timeline file could not be created or opened for appending.
    #[error("could not open {path} to append timeline events: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Reading events from a stream failed.
    #[error("could not read timeline events: {0}")]
    Io(#[source] io::Error),
    /// Writing events failed.
    #[error("could not write timeline events: {0}")]
    Write(#[source] io::Error),
    /// A line of a JSON-lines timeline is not an event (lines count from 1).
    #[error("line {line} of the timeline is not a valid event: {source}")]
    Line {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
}

/// One transition of one partition of one job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Milliseconds since the run started (monotonic clock). The [`Recorder`]
    /// rounds to whole microseconds, which is what TIMELINE lines print.
    pub ms: f64,
    pub event: EventKind,
    pub job: u64,
    /// Partition within the job; job-level events (`JOB_*`) use 0.
    pub partition: u32,
    /// The worker (thread) that did it, numbered within its kind of worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u32>,
    /// The GPU, for GPU events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<u32>,
    /// Bytes concerned (freed by a dealloc, reserved from the memory budget, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Free text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Defines `EventKind` with its SCREAMING_SNAKE text name in one place, so the
/// TIMELINE name and the JSON name cannot drift apart.
macro_rules! event_kinds {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// What happened. In text (TIMELINE lines and JSON) the names are
        /// SCREAMING_SNAKE: `SYNTH_START`, `GPU_QUEUE`, `B_G2_END`, ...
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum EventKind {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl EventKind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)*];

            /// The SCREAMING_SNAKE name used in TIMELINE lines and JSON.
            pub fn name(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $name,)*
                }
            }

            /// The kind named `name` (as [`EventKind::name`] spells it).
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(EventKind::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

event_kinds! {
    /// A job (one proof of several partitions) was submitted.
    JobSubmit = "JOB_SUBMIT",
    /// A job's proof is complete.
    JobDone = "JOB_DONE",
    JobFailed = "JOB_FAILED",
    JobCancelled = "JOB_CANCELLED",
    /// A partition entered the synthesis queue.
    SynthQueue = "SYNTH_QUEUE",
    SynthStart = "SYNTH_START",
    SynthEnd = "SYNTH_END",
    SpmvStart = "SPMV_START",
    SpmvEnd = "SPMV_END",
    /// `prep_msm`.
    PrepStart = "PREP_START",
    PrepEnd = "PREP_END",
    /// A partition entered the GPU queue.
    GpuQueue = "GPU_QUEUE",
    /// A GPU worker started waiting for the GPU lock.
    LockWaitStart = "LOCK_WAIT_START",
    LockAcquired = "LOCK_ACQUIRED",
    /// A GPU worker took the partition from the GPU queue.
    GpuPickup = "GPU_PICKUP",
    /// A GPU worker staged the partition's a, b, c or witness, and its split data,
    /// for the backend (the CUDA backend copies or pins them) before waiting for
    /// the GPU lock; detail `ms=` is how long it took in all, `splits_ms=` the
    /// split data's part, `failed: ...` if a staging did not succeed (the
    /// partition then goes on unstaged). Only recorded when something was staged
    /// or staging failed.
    Staged = "STAGED",
    GpuStart = "GPU_START",
    GpuEnd = "GPU_END",
    /// `b_g2_msm`.
    BG2Start = "B_G2_START",
    BG2End = "B_G2_END",
    AssemblyStart = "ASSEMBLY_START",
    AssemblyEnd = "ASSEMBLY_END",
    DeallocStart = "DEALLOC_START",
    DeallocEnd = "DEALLOC_END",
    VerifyStart = "VERIFY_START",
    VerifyEnd = "VERIFY_END",
    /// A partition started waiting for memory budget.
    BudgetWaitStart = "BUDGET_WAIT_START",
    BudgetAcquired = "BUDGET_ACQUIRED",
    BudgetReleased = "BUDGET_RELEASED",
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A stage: the interval between a `*_START` and its `*_END` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    Synth,
    Spmv,
    Prep,
    Gpu,
    BG2,
    Assembly,
    Dealloc,
    Verify,
}

impl Stage {
    pub const ALL: [Stage; 8] = [
        Stage::Synth,
        Stage::Spmv,
        Stage::Prep,
        Stage::Gpu,
        Stage::BG2,
        Stage::Assembly,
        Stage::Dealloc,
        Stage::Verify,
    ];

    /// The stage's name as the `tracing` spans and `StageTimes` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Synth => "synthesis",
            Stage::Spmv => "spmv",
            Stage::Prep => "prep_msm",
            Stage::Gpu => "gpu",
            Stage::BG2 => "b_g2_msm",
            Stage::Assembly => "assembly",
            Stage::Dealloc => "dealloc",
            Stage::Verify => "verify",
        }
    }

    pub fn start(self) -> EventKind {
        match self {
            Stage::Synth => EventKind::SynthStart,
            Stage::Spmv => EventKind::SpmvStart,
            Stage::Prep => EventKind::PrepStart,
            Stage::Gpu => EventKind::GpuStart,
            Stage::BG2 => EventKind::BG2Start,
            Stage::Assembly => EventKind::AssemblyStart,
            Stage::Dealloc => EventKind::DeallocStart,
            Stage::Verify => EventKind::VerifyStart,
        }
    }

    pub fn end(self) -> EventKind {
        match self {
            Stage::Synth => EventKind::SynthEnd,
            Stage::Spmv => EventKind::SpmvEnd,
            Stage::Prep => EventKind::PrepEnd,
            Stage::Gpu => EventKind::GpuEnd,
            Stage::BG2 => EventKind::BG2End,
            Stage::Assembly => EventKind::AssemblyEnd,
            Stage::Dealloc => EventKind::DeallocEnd,
            Stage::Verify => EventKind::VerifyEnd,
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl EventKind {
    /// The stage this kind starts or ends, with `true` for a start.
    pub fn stage(self) -> Option<(Stage, bool)> {
        Stage::ALL.into_iter().find_map(|s| {
            if s.start() == self {
                Some((s, true))
            } else if s.end() == self {
                Some((s, false))
            } else {
                None
            }
        })
    }

    /// Job-level events (submit, done, failed, cancelled).
    pub fn is_job_level(self) -> bool {
        matches!(
            self,
            EventKind::JobSubmit
                | EventKind::JobDone
                | EventKind::JobFailed
                | EventKind::JobCancelled
        )
    }
}

impl Event {
    /// `TIMELINE,<offset_ms>,<EVENT>,<job_id>,<detail>`, the detail being
    /// `p=<partition> w=<worker> d=<device> bytes=<n> <free text>` with absent
    /// fields left out. The offset is printed with three decimals (microseconds),
    /// so the line parses back to the same event when `ms` is a whole number of
    /// microseconds (as the [`Recorder`] makes it). Line breaks in the free text
    /// become spaces, to keep one event per line.
    pub fn timeline_line(&self) -> String {
        use fmt::Write as _;
        let mut s = format!(
            "TIMELINE,{:.3},{},{},p={}",
            self.ms,
            self.event.name(),
            self.job,
            self.partition
        );
        // Writing to a String cannot fail.
        if let Some(w) = self.worker {
            let _ = write!(s, " w={w}");
        }
        if let Some(d) = self.device {
            let _ = write!(s, " d={d}");
        }
        if let Some(b) = self.bytes {
            let _ = write!(s, " bytes={b}");
        }
        if !self.detail.is_empty() {
            s.push(' ');
            s.extend(
                self.detail
                    .chars()
                    .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
            );
        }
        s
    }

    /// Parses a line written by [`Event::timeline_line`]. Text before `TIMELINE,`
    /// (a log prefix) is skipped; `None` if the line holds no well-formed TIMELINE
    /// record or names an unknown event. The detail's fields are read in the order
    /// written (`p=`, `w=`, `d=`, `bytes=`); a missing `p=` means partition 0, as in
    /// the C2 daemon's job-level lines. Free text that itself starts with one of
    /// those fields (while that field is absent) is read as the field.
    pub fn parse_timeline_line(line: &str) -> Option<Event> {
        let start = line.find("TIMELINE,")?;
        let line = line[start + "TIMELINE,".len()..].trim_end_matches(['\r', '\n']);
        let mut parts = line.splitn(4, ',');
        let ms: f64 = parts.next()?.trim().parse().ok()?;
        if !ms.is_finite() {
            return None;
        }
        let event = EventKind::from_name(parts.next()?.trim())?;
        let job: u64 = parts.next()?.trim().parse().ok()?;
        let mut rest = parts.next().unwrap_or("");
        let mut out = Event {
            ms,
            event,
            job,
            partition: 0,
            worker: None,
            device: None,
            bytes: None,
            detail: String::new(),
        };
        // Fields, each at most once and in the order they are written.
        let mut field = 0;
        loop {
            let (token, after) = match rest.find(' ') {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, ""),
            };
            let Some((key, value)) = token.split_once('=') else {
                break;
            };
            let slot = ["p", "w", "d", "bytes"][field..]
                .iter()
                .position(|k| *k == key);
            let Some(slot) = slot.map(|s| s + field) else {
                break;
            };
            match slot {
                0 => out.partition = value.parse().ok()?,
                1 => out.worker = Some(value.parse().ok()?),
                2 => out.device = Some(value.parse().ok()?),
                _ => out.bytes = Some(value.parse().ok()?),
            }
            field = slot + 1;
            rest = after;
            if rest.is_empty() || field == 4 {
                break;
            }
        }
        out.detail = rest.to_string();
        Some(out)
    }

    /// The event as one JSON object (no line break).
    pub fn to_json(&self) -> String {
        // An `Event` holds only strings, integers, options and one float (which
        // serde_json writes as `null` if it is not finite), so serialising it
        // cannot fail; the fallback only keeps this function total.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}

/// Reads every TIMELINE line in `text` (other lines, such as interleaved logs,
/// are skipped).
pub fn parse_timeline_log(text: &str) -> Vec<Event> {
    text.lines()
        .filter_map(Event::parse_timeline_line)
        .collect()
}

/// Reads a JSON-lines timeline file (one [`Event`] per line; blank lines are
/// skipped).
pub fn read_jsonl(path: impl AsRef<Path>) -> Result<Vec<Event>, TimelineError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|source| TimelineError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_jsonl(BufReader::new(file)).map_err(|e| match e {
        TimelineError::Io(source) => TimelineError::Read {
            path: path.to_path_buf(),
            source,
        },
        other => other,
    })
}

/// Reads JSON-lines events from `reader`; a malformed line is
/// [`TimelineError::Line`] with its number (from 1).
pub fn parse_jsonl(reader: impl BufRead) -> Result<Vec<Event>, TimelineError> {
    let mut events = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(TimelineError::Io)?;
        if line.trim().is_empty() {
            continue;
        }
        let event = serde_json::from_str(&line).map_err(|source| TimelineError::Line {
            line: i + 1,
            source,
        })?;
        events.push(event);
    }
    Ok(events)
}

/// Writes `events` as JSON lines.
pub fn write_jsonl<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    mut writer: impl Write,
) -> Result<(), TimelineError> {
    for e in events {
        writeln!(writer, "{}", e.to_json()).map_err(TimelineError::Write)?;
    }
    writer.flush().map_err(TimelineError::Write)
}
