//! Throttle plugin `flag` (Phase 11 of the C2 history): `b_g2_msm` raises an atomic
//! flag; synthesis workers whose pool index is below `pause_workers` stop at their
//! next checkpoint while it is up, giving L3 and the memory channels to the MSM.
//!
//! The common case (flag down) is one relaxed-then-acquire load per checkpoint;
//! `cuzk_synth::spmv_parallel` checkpoints every 64 chunks of 1024 rows, so the cost
//! does not show. Pauses are bounded by `max_pause_ms` so that a flag left up by a
//! bug slows synthesis down instead of stalling it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cuzk_plugin_api::{AbiError, ErrorCode, ParamDoc, Params, ThrottlePlugin};

/// Per-worker checkpoint counters (for `check_every`), indexed by worker modulo this.
const SLOTS: usize = 256;

pub struct Flag {
    raised: AtomicUsize,
    check_every: u64,
    pause_workers: u64,
    max_pause: Duration,
    gate: Mutex<()>,
    lowered: Condvar,
    calls: Box<[AtomicU64]>,
}

impl ThrottlePlugin for Flag {
    const PARAMS: &'static [ParamDoc] = &[
        ParamDoc::new(
            "check_every",
            "1",
            "look at the flag at every n-th checkpoint of a worker (synthesis checkpoints every 64 chunks)",
        ),
        ParamDoc::new(
            "pause_workers",
            "all",
            "how many synthesis workers (pool indices 0..n) pause while the flag is up; `all` for every one",
        ),
        ParamDoc::new("max_pause_ms", "2000", "longest a worker stays paused at one checkpoint"),
    ];

    fn new(params: &Params<'_>) -> Result<Self, AbiError> {
        let check_every: u64 = params.get("check_every")?;
        if check_every == 0 {
            return Err(AbiError::new(
                ErrorCode::INVALID_PARAMETER,
                "parameter `check_every` must be at least 1",
            ));
        }
        let pause_workers = match params.text("pause_workers").trim() {
            "all" => u64::MAX,
            _ => params.get("pause_workers")?,
        };
        Ok(Self {
            raised: AtomicUsize::new(0),
            check_every,
            pause_workers,
            max_pause: Duration::from_millis(params.get("max_pause_ms")?),
            gate: Mutex::new(()),
            lowered: Condvar::new(),
            calls: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn raise(&self) {
        self.raised.fetch_add(1, Ordering::AcqRel);
    }

    fn lower(&self) {
        // Saturating: an unmatched lower must not wrap the count to "raised forever".
        let prev = self
            .raised
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(1))
            })
            .unwrap_or(0);
        if prev == 1 {
            // Taking the gate orders this notify after any waiter's check.
            let _g = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
            self.lowered.notify_all();
        }
    }

    fn checkpoint(&self, worker: u64) {
        if worker >= self.pause_workers {
            return;
        }
        if self.check_every > 1 {
            let n = self.calls[(worker % SLOTS as u64) as usize].fetch_add(1, Ordering::Relaxed);
            if !n.is_multiple_of(self.check_every) {
                return;
            }
        }
        if self.raised.load(Ordering::Acquire) == 0 {
            return;
        }
        let deadline = Instant::now() + self.max_pause;
        let mut g = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        while self.raised.load(Ordering::Acquire) > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            g = self
                .lowered
                .wait_timeout(g, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

cuzk_plugin_api::export_plugin! {
    kind: throttle,
    name: "flag",
    description: "an atomic flag raised around b_g2_msm; the first pause_workers synthesis workers pause while it is up",
    type: Flag,
}
