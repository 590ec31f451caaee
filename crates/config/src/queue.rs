//! `[queue]`: the knobs of `cuzk worker`, the PostgreSQL work queue's worker
//! (`cuzk-queue`, which turns this section into its `QueueConfig`).

use serde::{Deserialize, Serialize};

/// The `[queue]` table. A knob left out takes `cuzk_queue::QueueConfig`'s default
/// (given below); the worker's flags set these fields first.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSection {
    /// How long a claim holds a job without renewal, in seconds (default 60); renewed at a
    /// third of it. A dead worker's job is claimed again this long after its last
    /// renewal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_secs: Option<f64>,
    /// How long an idle worker waits before looking for work again, in ms (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_ms: Option<u64>,
    /// Jobs one worker holds at once, all feeding its one engine (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_in_flight: Option<usize>,
    /// Attempts a submitted job gets before it is marked failed (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// What the worker does with the jobs it holds when told to stop (SIGTERM,
    /// SIGINT): `finish` them and write them back, or `release` them to the queue
    /// (cancelled here, claimed again by another worker, the attempt not
    /// counted). It claims nothing new either way and exits 0. Default `finish`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_stop: Option<String>,
}
