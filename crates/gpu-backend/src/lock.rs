//! GPU-lock policies: what a GPU worker holds around its device region.
//!
//! A worker calls [`GpuLock::partition`] around its whole backend call; a backend
//! wraps its host↔device copies in [`GpuLock::region`]`(Memory)` and its kernels in
//! `region(Compute)`. Which of those calls actually lock is the policy:
//!
//! - [`SingleLock`] (the design the C2 history kept): one mutex per device, taken by
//!   `partition`; regions are free. One partition at a time owns the device.
//! - [`SplitLock`] (Phase 10): `partition` is free; a memory mutex and a compute mutex
//!   per device, so one worker's copies can overlap another's kernels. It failed on
//!   real hardware because CUDA's memory calls (`cudaDeviceSynchronize`,
//!   `cudaMemPoolTrimTo`) are device-global: they serialise against the other
//!   worker's kernels whatever the mutexes say, and VRAM could not hold two workers'
//!   buffers. It is kept so that failure can be shown by measurement.
//! - [`NoLock`]: nothing is held (a CPU backend, or one device per worker).
//!
//! Guards are owned values, not borrows, so a policy can live behind a plugin
//! boundary; each records how long it waited, which the scheduler logs as LOCK_WAIT.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The two kinds of device work a split lock keeps apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Region {
    /// Allocation, host↔device copies, frees.
    Memory,
    /// Kernels (NTT, MSM).
    Compute,
}

/// A held lock (or nothing), released when dropped. Dropping never panics.
#[must_use = "the lock is released when the guard is dropped"]
pub struct LockGuard {
    release: Option<Box<dyn FnOnce() + Send>>,
    waited: Duration,
    failure: Option<String>,
}

impl LockGuard {
    /// A guard that holds nothing (a policy's free call).
    pub fn free() -> Self {
        Self {
            release: None,
            waited: Duration::ZERO,
            failure: None,
        }
    }

    /// A guard that runs `release` when dropped; `waited` is how long acquiring took.
    pub fn new(waited: Duration, release: impl FnOnce() + Send + 'static) -> Self {
        Self {
            release: Some(Box::new(release)),
            waited,
            failure: None,
        }
    }

    /// A guard for a lock that could not be taken (a plugin failed): it holds nothing
    /// and says why, so the caller can fail the partition instead of running unlocked.
    pub fn failed(waited: Duration, why: String) -> Self {
        Self {
            release: None,
            waited,
            failure: Some(why),
        }
    }

    /// How long the caller waited for the lock.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Whether a lock is held.
    pub fn holds(&self) -> bool {
        self.release.is_some()
    }

    /// Why the lock could not be taken, if it could not.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            let _ = catch_unwind(AssertUnwindSafe(release));
        }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("holds", &self.holds())
            .field("waited", &self.waited)
            .field("failure", &self.failure)
            .finish()
    }
}

/// What a GPU worker must hold around its device work.
pub trait GpuLock: Send + Sync {
    /// Held by the worker around its whole backend call on `device`.
    fn partition(&self, device: usize) -> LockGuard;
    /// Held by a backend around one memory or compute phase on `device`.
    fn region(&self, device: usize, region: Region) -> LockGuard;
}

/// A first-come, first-served mutex whose guard is an owned value (a
/// `std::sync::MutexGuard` borrows its mutex, so it cannot be boxed into a
/// [`LockGuard`]).
///
/// FIFO matters: a worker that releases the lock and comes straight back with the
/// next partition must not overtake a worker that has been waiting with an older
/// one (measured: with a barging mutex, the first job of eight finished fifth).
#[derive(Default)]
struct Gate {
    /// (next ticket to hand out, ticket being served)
    tickets: Mutex<(u64, u64)>,
    freed: Condvar,
}

impl Gate {
    fn acquire(self: &Arc<Self>) -> LockGuard {
        let start = Instant::now();
        let mut t = self.tickets.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = t.0;
        t.0 += 1;
        while t.1 != mine {
            t = self.freed.wait(t).unwrap_or_else(PoisonError::into_inner);
        }
        drop(t);
        let gate = Arc::clone(self);
        LockGuard::new(start.elapsed(), move || {
            gate.tickets
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .1 += 1;
            gate.freed.notify_all();
        })
    }
}

/// Gates created on first use, one per (device, slot).
struct Gates<K>(Mutex<HashMap<K, Arc<Gate>>>);

impl<K> Default for Gates<K> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<K: std::hash::Hash + Eq> Gates<K> {
    fn acquire(&self, key: K) -> LockGuard {
        let gate = {
            let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(map.entry(key).or_default())
        };
        gate.acquire()
    }
}

/// Holds nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoLock;

impl GpuLock for NoLock {
    fn partition(&self, _device: usize) -> LockGuard {
        LockGuard::free()
    }
    fn region(&self, _device: usize, _region: Region) -> LockGuard {
        LockGuard::free()
    }
}

/// One mutex per device around the whole partition; regions are free.
#[derive(Default)]
pub struct SingleLock(Gates<usize>);

impl SingleLock {
    pub fn new() -> Self {
        Self::default()
    }
}

impl GpuLock for SingleLock {
    fn partition(&self, device: usize) -> LockGuard {
        self.0.acquire(device)
    }
    fn region(&self, _device: usize, _region: Region) -> LockGuard {
        LockGuard::free()
    }
}

impl std::fmt::Debug for SingleLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SingleLock")
    }
}

/// A memory mutex and a compute mutex per device; the partition is free.
#[derive(Default)]
pub struct SplitLock(Gates<(usize, Region)>);

impl SplitLock {
    pub fn new() -> Self {
        Self::default()
    }
}

impl GpuLock for SplitLock {
    fn partition(&self, _device: usize) -> LockGuard {
        LockGuard::free()
    }
    fn region(&self, device: usize, region: Region) -> LockGuard {
        self.0.acquire((device, region))
    }
}

impl std::fmt::Debug for SplitLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SplitLock")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    /// Two workers on device 0: one in a memory region, one in a compute region, each
    /// inside its partition guard. Returns whether the two regions overlapped in time.
    fn regions_overlap(lock: &dyn GpuLock) -> bool {
        let inside = std::sync::atomic::AtomicUsize::new(0);
        let max_inside = std::sync::atomic::AtomicUsize::new(0);
        let start = Barrier::new(2);
        std::thread::scope(|s| {
            for region in [Region::Memory, Region::Compute] {
                let (inside, max_inside, start) = (&inside, &max_inside, &start);
                s.spawn(move || {
                    start.wait();
                    let _p = lock.partition(0);
                    let _r = lock.region(0, region);
                    let now = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    max_inside.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                    // Long enough for the other worker to get in on a loaded machine.
                    std::thread::sleep(Duration::from_millis(250));
                    inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                });
            }
        });
        max_inside.load(std::sync::atomic::Ordering::SeqCst) == 2
    }

    #[test]
    fn split_overlaps_memory_and_compute_single_does_not() {
        assert!(!regions_overlap(&SingleLock::new()));
        assert!(regions_overlap(&SplitLock::new()));
        assert!(regions_overlap(&NoLock));
    }

    #[test]
    fn guards_record_wait_and_release_on_drop() {
        let lock = Arc::new(SingleLock::new());
        let g = lock.partition(3);
        assert!(g.holds() && g.failure().is_none());
        let l2 = Arc::clone(&lock);
        let t = std::thread::spawn(move || l2.partition(3).waited());
        std::thread::sleep(Duration::from_millis(80));
        drop(g);
        let waited = t.join().unwrap();
        assert!(waited >= Duration::from_millis(50), "waited {waited:?}");
        // Another device is independent; a region of a single lock holds nothing.
        let _a = lock.partition(3);
        let b = lock.partition(4);
        assert!(b.waited() < Duration::from_millis(50));
        assert!(!lock.region(3, Region::Compute).holds());
        // The same region of a split lock excludes; different regions do not.
        let split = SplitLock::new();
        let m = split.region(0, Region::Memory);
        assert!(m.holds() && !split.partition(0).holds());
        assert!(split.region(0, Region::Compute).waited() < Duration::from_millis(50));
    }

    /// A worker that releases and comes straight back must queue behind one that
    /// was already waiting (a barging mutex let the first job of eight finish fifth).
    #[test]
    fn the_lock_is_first_come_first_served() {
        let lock = Arc::new(SingleLock::new());
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = lock.partition(0);
        let (l2, o2) = (Arc::clone(&lock), Arc::clone(&order));
        let waiter = std::thread::spawn(move || {
            let _g = l2.partition(0);
            o2.lock().unwrap().push("waiter");
        });
        // Let the waiter take its place in the queue.
        std::thread::sleep(Duration::from_millis(100));
        drop(first);
        let again = lock.partition(0);
        order.lock().unwrap().push("releaser again");
        drop(again);
        waiter.join().unwrap();
        assert_eq!(*order.lock().unwrap(), ["waiter", "releaser again"]);
    }
}
