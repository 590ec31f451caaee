//! Throttling: the write side of the flag that lets one memory-hungry stage slow the
//! others down while it runs.
//!
//! Phase 11 of the C2 history found `b_g2_msm` (all pool threads in Pippenger) and
//! synthesis (all rayon threads in the mat-vec) fighting over L3 and memory channels.
//! The proposed cure: `b_g2_msm` raises a flag, and synthesis workers look at it every
//! 64 chunks and pause while it is up. The read side is `cuzk_synth::Throttle`; this
//! crate holds the write side so that the MSM stage does not depend on synthesis.

/// Raised around a stage that wants the cores (`b_g2_msm`); lowered after it.
/// Raises nest: the flag is up while any raise is outstanding.
pub trait ThrottleControl: Send + Sync {
    fn raise(&self);
    fn lower(&self);
}

/// Never throttles (the default, and the "off" strategy).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoThrottle;

impl ThrottleControl for NoThrottle {
    #[inline]
    fn raise(&self) {}
    #[inline]
    fn lower(&self) {}
}

/// Keeps the flag raised while alive, so an early return or a panic cannot leave
/// synthesis paused.
#[must_use = "the flag is lowered when the guard is dropped"]
pub struct Raised<'a>(&'a dyn ThrottleControl);

impl<'a> Raised<'a> {
    pub fn new(control: &'a dyn ThrottleControl) -> Self {
        control.raise();
        Self(control)
    }
}

impl Drop for Raised<'_> {
    fn drop(&mut self) {
        self.0.lower();
    }
}

impl std::fmt::Debug for Raised<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Raised")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicIsize, Ordering};

    #[derive(Default)]
    struct Depth(AtomicIsize);
    impl ThrottleControl for Depth {
        fn raise(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn lower(&self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn raised_guard_lowers_on_drop_and_nests() {
        let d = Depth::default();
        {
            let _a = Raised::new(&d);
            let _b = Raised::new(&d);
            assert_eq!(d.0.load(Ordering::SeqCst), 2);
        }
        assert_eq!(d.0.load(Ordering::SeqCst), 0);
        let _ = Raised::new(&NoThrottle);
    }
}
