//! `[queue]`: the knobs of `cuzk worker`, the PostgreSQL work queue's worker
//! (`cuzk-queue`, which turns this section into its `QueueConfig`).

use std::{path::PathBuf, time::Duration};

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
    /// Done and failed jobs finished longer ago than this are deleted with their
    /// inputs (by `cuzk queue prune`, and by a worker once an hour): `"7d"`,
    /// `"12h"`, `"30m"`, `"90s"`. Default: kept for ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_done: Option<Age>,
    /// A PEM file of CA certificates the queue's PostgreSQL certificate is verified
    /// against, beside Mozilla's roots (TLS follows the URL's `sslmode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

/// An age: a number and a unit, `s`, `m`, `h` or `d` (`"7d"`, `"36h"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub struct Age(pub Duration);

impl std::str::FromStr for Age {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let bad =
            || format!("`{text}` is not an age: a whole number and a unit s, m, h or d (\"7d\")");
        let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let (n, unit) = t.split_at(split);
        let n: u64 = n.parse().map_err(|_| bad())?;
        let secs = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86400,
            _ => return Err(bad()),
        };
        n.checked_mul(secs)
            .map(|s| Age(Duration::from_secs(s)))
            .ok_or_else(bad)
    }
}

impl TryFrom<String> for Age {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Age> for String {
    fn from(a: Age) -> String {
        let s = a.0.as_secs();
        match s {
            _ if s > 0 && s.is_multiple_of(86400) => format!("{}d", s / 86400),
            _ if s > 0 && s.is_multiple_of(3600) => format!("{}h", s / 3600),
            _ if s > 0 && s.is_multiple_of(60) => format!("{}m", s / 60),
            _ => format!("{s}s"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_their_unit_and_round_trip() {
        for (text, secs) in [("7d", 604800), ("36h", 129600), ("30m", 1800), ("90s", 90)] {
            let a: Age = text.parse().unwrap();
            assert_eq!(a.0, Duration::from_secs(secs));
            assert_eq!(String::from(a), text);
        }
        for bad in ["7", "d", "7w", "-1d", "1.5h", ""] {
            assert!(bad.parse::<Age>().is_err(), "{bad}");
        }
        let q: QueueSection =
            toml::from_str("keep_done = \"2d\"\nca_file = \"/etc/ca.pem\"").unwrap();
        assert_eq!(q.keep_done, Some(Age(Duration::from_secs(172800))));
        assert!(toml::from_str::<QueueSection>("keep_done = \"soon\"").is_err());
        assert!(toml::from_str::<QueueSection>("keep = \"2d\"").is_err());
    }
}
