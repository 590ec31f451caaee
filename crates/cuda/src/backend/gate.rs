//! The launch gate: a partition's launches go before another partition's host
//! memory work (page-locking a staged witness, unlocking and freeing the last one).
//!
//! On the H200 at the 32 GiB PoRep shape, a partition's device work is 1.47 s but
//! partitions started every ~1.95 s. The engine's second GPU worker stages the next
//! partition (page-locks its 4 GB witness: 0.2-0.5 s) and unstages the last one the
//! moment the device lock changes hands, that is while the partition now holding
//! the device is being launched; the page-locking calls hold the driver (a
//! registration seen from another thread waited up to 71 ms) and the process's
//! memory map, and the launches waited behind them while the device had nothing
//! queued. Once a partition's work is enqueued the device runs for over a second,
//! and the same host work costs nothing.
//!
//! So: [`Gate::launch`] is held while a partition enqueues its work; host memory
//! work ([`Gate::memory`]) waits while a launch runs, and for a short while after a
//! partition ends ([`Gate::reserve`]), when the next one is about to launch; a
//! launch waits only for host memory work already running (never started after
//! it asked). Reservations no launch takes (one GPU worker a device: the thread
//! that would launch next is the one waiting) stop after two in a row, and one in
//! [`PROBE`] is tried again.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Host memory work on at most this many bytes (page-locking a witness, allocating a
/// pinned buffer for one; split data's buffers grow in steps of this) does not wait
/// for the gate ([`Gate::memory_of`]): the driver call takes a few milliseconds, where
/// the gate can hold it for the rest of another partition's launch. Measured on the
/// H200 at `4da9b3d`: a WinningPoSt's 12 MB witness, staged by copy behind ten 32 GiB
/// PoRep sectors, waited 0.72 s of its 1.68 s for a new buffer. The gate is for the
/// 4 GB a PoRep partition pins.
pub(crate) const UNGATED_BYTES: usize = 64 << 20;

/// How long after a partition ends host memory work waits for the next partition's
/// launch (the engine's next holder takes the device lock within microseconds;
/// when none comes, this is what host memory work loses).
pub(crate) const RESERVE: Duration = Duration::from_millis(200);
/// Once reservations lapse unused, one partition end in this many reserves anyway.
const PROBE: u32 = 16;

#[derive(Debug, Default)]
struct State {
    launching: usize,
    /// Launches asking (they go before memory work not started yet).
    waiting: usize,
    memory: usize,
    reserved_until: Option<Instant>,
    /// Reservations in a row that lapsed with no launch.
    lapsed: u32,
    /// Partition ends since reservations stopped.
    skipped: u32,
}

#[derive(Debug, Default)]
pub(crate) struct Gate {
    state: Mutex<State>,
    changed: Condvar,
}

/// Held while a partition enqueues its work.
pub(crate) struct Launch<'a>(&'a Gate);

impl Drop for Launch<'_> {
    fn drop(&mut self) {
        self.0.lock().launching -= 1;
        self.0.changed.notify_all();
    }
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>, until: Option<Instant>) -> MutexGuard<'a, State> {
        match until {
            Some(t) => {
                let left = t.saturating_duration_since(Instant::now());
                self.changed
                    .wait_timeout(g, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => self.changed.wait(g).unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// Waits for host memory work already running, then holds the gate until the
    /// guard goes; the reservation made for this launch ends.
    pub(crate) fn launch(&self) -> Launch<'_> {
        let mut g = self.lock();
        g.waiting += 1;
        while g.memory > 0 {
            g = self.wait(g, None);
        }
        g.waiting -= 1;
        g.launching += 1;
        if g.reserved_until.take().is_some_and(|t| t > Instant::now()) {
            g.lapsed = 0;
        }
        drop(g);
        Launch(self)
    }

    /// A partition ended: host memory work waits up to [`RESERVE`] for the next
    /// launch.
    pub(crate) fn reserve(&self) {
        let mut g = self.lock();
        if g.lapsed >= 2 {
            g.skipped += 1;
            if !g.skipped.is_multiple_of(PROBE) {
                return;
            }
        }
        g.reserved_until = Some(Instant::now() + RESERVE);
    }

    /// [`Gate::memory`] for work on `bytes` bytes, at once when they are at most
    /// [`UNGATED_BYTES`].
    pub(crate) fn memory_of<T>(&self, bytes: usize, f: impl FnOnce() -> T) -> T {
        if bytes <= UNGATED_BYTES {
            f()
        } else {
            self.memory(f)
        }
    }

    /// Runs `f` (page-locking or unlocking host memory) when no launch runs or is
    /// asking, and no reservation is open.
    pub(crate) fn memory<T>(&self, f: impl FnOnce() -> T) -> T {
        let mut g = self.lock();
        loop {
            let now = Instant::now();
            if g.reserved_until.is_some_and(|t| t <= now) {
                // Lapsed with no launch.
                g.reserved_until = None;
                g.lapsed += 1;
                g.skipped = 0;
            }
            if g.launching == 0 && g.waiting == 0 && g.reserved_until.is_none() {
                break;
            }
            let until = g.reserved_until;
            g = self.wait(g, until);
        }
        g.memory += 1;
        drop(g);
        // The count goes down even if `f` panics.
        struct Done<'a>(&'a Gate);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.lock().memory -= 1;
                self.0.changed.notify_all();
            }
        }
        let _done = Done(self);
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn memory_work_waits_for_a_launch_and_a_reservation() {
        let gate = Arc::new(Gate::default());
        let launch = gate.launch();
        let done = Arc::new(AtomicBool::new(false));
        let (g, d) = (Arc::clone(&gate), Arc::clone(&done));
        let t = std::thread::spawn(move || g.memory(|| d.store(true, Ordering::SeqCst)));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "ran during a launch");
        drop(launch);
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));

        // After a partition ends: memory work waits for the reservation to lapse...
        gate.reserve();
        let start = Instant::now();
        gate.memory(|| ());
        assert!(start.elapsed() >= RESERVE - Duration::from_millis(5));
        // ...or for the next launch to come and go.
        gate.reserve();
        let (g, d) = (Arc::clone(&gate), Arc::new(AtomicBool::new(false)));
        let d2 = Arc::clone(&d);
        let t = std::thread::spawn(move || g.memory(|| d2.store(true, Ordering::SeqCst)));
        let launch = gate.launch();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!d.load(Ordering::SeqCst));
        drop(launch);
        t.join().unwrap();
        assert!(d.load(Ordering::SeqCst));
    }

    #[test]
    fn small_memory_work_runs_during_a_launch_and_large_waits() {
        let gate = Arc::new(Gate::default());
        let launch = gate.launch();
        assert_eq!(gate.memory_of(UNGATED_BYTES, || 7), 7, "small: at once");
        let done = Arc::new(AtomicBool::new(false));
        let (g, d) = (Arc::clone(&gate), Arc::clone(&done));
        let t = std::thread::spawn(move || {
            g.memory_of(UNGATED_BYTES + 1, || d.store(true, Ordering::SeqCst))
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "large: ran during a launch");
        drop(launch);
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
    }

    #[test]
    fn reservations_no_launch_takes_stop_and_are_probed_again() {
        let gate = Gate::default();
        for _ in 0..2 {
            gate.reserve();
            let start = Instant::now();
            gate.memory(|| ());
            assert!(start.elapsed() >= RESERVE - Duration::from_millis(5));
        }
        // Two lapsed: the next PROBE - 1 partition ends reserve nothing.
        for _ in 1..PROBE {
            gate.reserve();
            let start = Instant::now();
            gate.memory(|| ());
            assert!(start.elapsed() < RESERVE / 2);
        }
        // The probe reserves; a launch takes it, and reservations are back.
        gate.reserve();
        drop(gate.launch());
        assert_eq!(gate.lock().lapsed, 0);
        gate.reserve();
        assert!(gate.lock().reserved_until.is_some());
    }

    #[test]
    fn a_launch_waits_only_for_memory_work_already_running() {
        let gate = Arc::new(Gate::default());
        let (g, started) = (Arc::clone(&gate), Arc::new(AtomicBool::new(false)));
        let s = Arc::clone(&started);
        let t = std::thread::spawn(move || {
            g.memory(|| {
                s.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(80));
            })
        });
        while !started.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let start = Instant::now();
        drop(gate.launch());
        assert!(start.elapsed() >= Duration::from_millis(40));
        t.join().unwrap();
        // A panic inside memory work does not leave the gate shut.
        let g = Arc::clone(&gate);
        let _ = std::thread::spawn(move || g.memory(|| panic!("boom"))).join();
        drop(gate.launch());
    }
}
