//! The queue's knobs: how long a lease lasts, how often an idle worker looks,
//! how many jobs a worker holds, how often a job may fail.

use std::time::Duration;

/// A worker's knobs. `cuzk.toml`'s `[queue]` table (`cuzk_config::QueueSection`)
/// and the worker's flags set them; a knob left unset takes [`Default`]'s value.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueConfig {
    /// How long a claim holds a job without renewal, in seconds. A worker renews
    /// at a third of it; a dead worker's job is claimed again this long after its
    /// last renewal. Longer than any stall of the database you want to ride out.
    pub lease_secs: f64,
    /// How long an idle worker waits before looking for work again, in ms.
    pub poll_ms: u64,
    /// Jobs one worker holds at once (each a thread feeding the same engine, so
    /// one job's synthesis overlaps another's GPU work).
    pub jobs_in_flight: usize,
    /// Attempts a job gets before it is marked failed (set at submission).
    pub max_attempts: u32,
    /// What a worker told to stop (SIGTERM, SIGINT) does with the jobs it holds.
    pub on_stop: OnStop,
    /// Done and failed jobs finished longer ago than this are deleted, with their
    /// inputs, by the worker once every [`PRUNE_EVERY`] (and by `cuzk queue
    /// prune`). `None`: kept for ever.
    pub keep_done: Option<Duration>,
}

/// How often a worker with [`QueueConfig::keep_done`] set prunes: rows are small
/// and the delete is one indexed statement, so once an hour is plenty.
pub const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// What a stopping worker does with the jobs it holds. It claims nothing new
/// either way, and exits once they are written back or released.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnStop {
    /// Prove them and write them back, then exit (a stop waits for the proofs).
    #[default]
    Finish,
    /// Cancel them on the engine and put them back in the queue (the attempt is
    /// not counted), so another worker takes them at once; exit without waiting.
    Release,
}

impl OnStop {
    /// `finish` or `release`, as `[queue] on_stop` and `--on-stop` spell them.
    pub fn parse(name: &str) -> Result<OnStop, String> {
        match name {
            "finish" => Ok(OnStop::Finish),
            "release" => Ok(OnStop::Release),
            _ => Err(format!(
                "[queue] on_stop must be `finish` or `release`, not `{name}`"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OnStop::Finish => "finish",
            OnStop::Release => "release",
        }
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            lease_secs: 60.0,
            poll_ms: 1000,
            jobs_in_flight: 2,
            max_attempts: 3,
            on_stop: OnStop::Finish,
            keep_done: None,
        }
    }
}

impl QueueConfig {
    /// The lease as a duration.
    pub fn lease(&self) -> Duration {
        Duration::from_secs_f64(self.lease_secs)
    }

    /// How often a held lease is renewed: a third of it, so two renewals can be
    /// lost before the lease runs out.
    pub fn renew_every(&self) -> Duration {
        self.lease() / 3
    }

    /// Checks the values a worker cannot run with.
    pub fn check(&self) -> Result<(), String> {
        if !(self.lease_secs.is_finite() && self.lease_secs >= 0.5) {
            return Err(format!(
                "[queue] lease_secs must be at least 0.5, not {}",
                self.lease_secs
            ));
        }
        if self.jobs_in_flight == 0 {
            return Err("[queue] jobs_in_flight must be at least 1".into());
        }
        if self.max_attempts == 0 || self.max_attempts > i32::MAX as u32 {
            return Err(format!(
                "[queue] max_attempts must be at least 1, not {}",
                self.max_attempts
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_a_worker_cannot_run_with_are_refused() {
        assert!(QueueConfig::default().check().is_ok());
        assert_eq!(
            QueueConfig::default().renew_every(),
            Duration::from_secs(20)
        );
        for bad in [
            QueueConfig {
                jobs_in_flight: 0,
                ..QueueConfig::default()
            },
            QueueConfig {
                lease_secs: 0.1,
                ..QueueConfig::default()
            },
            QueueConfig {
                lease_secs: f64::NAN,
                ..QueueConfig::default()
            },
            QueueConfig {
                max_attempts: 0,
                ..QueueConfig::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert_eq!(OnStop::parse("release"), Ok(OnStop::Release));
        assert_eq!(OnStop::parse("finish").map(OnStop::name), Ok("finish"));
        assert!(OnStop::parse("abandon").unwrap_err().contains("abandon"));
    }
}
