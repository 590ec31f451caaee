//! Deallocation policies: what happens to a stage's large buffers once the next stage
//! is done with them.
//!
//! Freeing is not free at this scale. Dropping a 4 GiB `Vec` is an `munmap`, and each
//! `munmap` interrupts every core that may cache the mapping (a TLB shootdown). The C2
//! history tried three answers: free where the buffer dies (the caller pays the
//! `munmap`), a detached thread per free (the caller pays nothing, but concurrent
//! `munmap`s turned into shootdown storms that slowed synthesis), and one bounded
//! dealloc thread (Phase 11). Which is best depends on the machine, so the scheduler
//! hands every large buffer to a [`DeallocPolicy`] instead of dropping it, and the
//! policy is chosen at run time: [`InlineDealloc`] and [`BoundedDealloc`] here (the
//! `bounded` plugin is a thin wrapper over the latter), others as plugins.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::HeapSize;

/// An owned buffer of any type, type-erased into "run its destructor", with the bytes
/// it holds and a label for logs (`"abc"`, `"witness"`).
///
/// Dropping a `Released` frees the buffer on the dropping thread, so a policy that
/// loses one (an error, a panic) still frees it rather than leaking it.
pub struct Released {
    free: Option<Box<dyn FnOnce() + Send>>,
    bytes: usize,
    label: &'static str,
}

impl Released {
    /// Takes ownership of `value`; `bytes` is what freeing it returns to the system.
    pub fn new<T: Send + 'static>(value: T, bytes: usize, label: &'static str) -> Self {
        Self {
            free: Some(Box::new(move || drop(value))),
            bytes,
            label,
        }
    }

    /// Like [`Released::new`], counting the bytes with [`HeapSize`].
    pub fn of<T: HeapSize + Send + 'static>(value: T, label: &'static str) -> Self {
        let bytes = value.heap_size();
        Self::new(value, bytes, label)
    }

    /// Bytes the buffer holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// What the buffer is, for logs.
    pub fn label(&self) -> &'static str {
        self.label
    }

    /// Frees the buffer now, on this thread. A panicking destructor is contained
    /// (freeing must never take the caller down).
    pub fn free(mut self) {
        self.run();
    }

    /// The destructor, its byte count and label: for adapters that move the buffer
    /// somewhere a `Released` cannot go (across a plugin boundary).
    pub fn into_parts(mut self) -> (Box<dyn FnOnce() + Send>, usize, &'static str) {
        let free = self.free.take().unwrap_or_else(|| Box::new(|| ()));
        (free, self.bytes, self.label)
    }

    fn run(&mut self) {
        if let Some(free) = self.free.take() {
            let _ = catch_unwind(AssertUnwindSafe(free));
        }
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        self.run();
    }
}

impl std::fmt::Debug for Released {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Released")
            .field("label", &self.label)
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// Decides on which thread, and when, released buffers are freed.
pub trait DeallocPolicy: Send + Sync {
    /// Hands a buffer over; it is freed now or later, here or elsewhere. May block
    /// (back-pressure) but never fails: a policy that cannot queue frees inline.
    fn release(&self, buf: Released);

    /// Returns once every buffer released before the call has been freed.
    fn drain(&self);
}

/// Frees on the calling thread, at once: the baseline every other policy is measured
/// against, and the only one that adds no thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct InlineDealloc;

impl DeallocPolicy for InlineDealloc {
    fn release(&self, buf: Released) {
        buf.free();
    }

    fn drain(&self) {}
}

/// One dealloc thread behind a queue of `depth` buffers (Phase 11 of the C2
/// history, the setting the C2 history kept).
///
/// One thread means at most one `munmap` of the big buffers in flight, so no
/// shootdown storm; the bound means a stage that releases faster than the thread
/// frees is held back (back-pressure) instead of letting freed-but-not-yet-unmapped
/// memory pile up past the memory budget. Dropping it frees what is queued (at most
/// `depth` buffers) and joins the thread.
pub struct BoundedDealloc {
    queue: Mutex<Option<SyncSender<Released>>>,
    pending: Arc<Pending>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl BoundedDealloc {
    /// Starts the dealloc thread; `depth` buffers may wait before `release` blocks
    /// (0: `release` waits until the thread takes the buffer).
    pub fn new(depth: usize) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel::<Released>(depth);
        let pending = Arc::new(Pending::default());
        let p = Arc::clone(&pending);
        let thread = std::thread::Builder::new()
            .name("cuzk-dealloc".into())
            .spawn(move || {
                for buf in rx {
                    buf.free();
                    p.finish();
                }
            })?;
        Ok(Self {
            queue: Mutex::new(Some(tx)),
            pending,
            thread: Mutex::new(Some(thread)),
        })
    }
}

impl DeallocPolicy for BoundedDealloc {
    fn release(&self, buf: Released) {
        let tx = self
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(tx) = tx else {
            buf.free();
            return;
        };
        self.pending.start();
        // Blocks while the queue is full: the back-pressure. The thread cannot die
        // (frees contain panics); were it gone, the buffer comes back and is freed
        // here.
        if let Err(returned) = tx.send(buf) {
            returned.0.free();
            self.pending.finish();
        }
    }

    fn drain(&self) {
        self.pending.wait_idle();
    }
}

impl Drop for BoundedDealloc {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has freed what is queued.
        drop(
            self.queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(t) = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for BoundedDealloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedDealloc").finish_non_exhaustive()
    }
}

/// Buffers handed over but not yet freed, so `drain` can wait for none.
#[derive(Default)]
struct Pending {
    count: Mutex<usize>,
    done: Condvar,
}

impl Pending {
    fn start(&self) {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    fn finish(&self) {
        let mut n = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.done.notify_all();
        }
    }

    fn wait_idle(&self) {
        let mut n = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *n > 0 {
            n = self.done.wait(n).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn released_frees_exactly_once_by_every_path() {
        let n = Arc::new(AtomicUsize::new(0));
        Released::new(Counted(n.clone()), 8, "t").free();
        assert_eq!(n.load(Ordering::SeqCst), 1);
        drop(Released::new(Counted(n.clone()), 8, "t"));
        assert_eq!(n.load(Ordering::SeqCst), 2);
        let (free, bytes, label) = Released::new(Counted(n.clone()), 8, "t").into_parts();
        assert_eq!((bytes, label), (8, "t"));
        assert_eq!(n.load(Ordering::SeqCst), 2, "into_parts must not free");
        free();
        assert_eq!(n.load(Ordering::SeqCst), 3);
        InlineDealloc.release(Released::new(Counted(n.clone()), 8, "t"));
        assert_eq!(n.load(Ordering::SeqCst), 4);
    }

    /// Everything released is freed by `drain`, on the dealloc thread, in order, and
    /// a full queue holds the releaser back.
    #[test]
    fn bounded_frees_on_its_thread_and_drain_waits() {
        use std::sync::mpsc::channel;
        let (tx, rx) = channel::<(usize, String)>();
        struct Tagged(usize, std::sync::mpsc::Sender<(usize, String)>);
        impl Drop for Tagged {
            fn drop(&mut self) {
                let name = std::thread::current().name().unwrap_or("").to_string();
                let _ = self.1.send((self.0, name));
            }
        }
        let d = BoundedDealloc::new(2).unwrap();
        for i in 0..20 {
            d.release(Released::new(Tagged(i, tx.clone()), 1, "t"));
        }
        d.drain();
        let freed: Vec<_> = rx.try_iter().collect();
        assert_eq!(
            freed.len(),
            20,
            "drain returned before every buffer was freed"
        );
        for (i, (tag, thread)) in freed.iter().enumerate() {
            assert_eq!(*tag, i);
            assert_eq!(thread, "cuzk-dealloc");
        }
        // Dropping the policy frees what is still queued.
        let n = Arc::new(AtomicUsize::new(0));
        let d = BoundedDealloc::new(8).unwrap();
        for _ in 0..5 {
            d.release(Released::new(Counted(n.clone()), 1, "t"));
        }
        drop(d);
        assert_eq!(n.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn released_counts_heap_bytes_and_contains_panics() {
        let v: Vec<u64> = Vec::with_capacity(33);
        let r = Released::of(v, "v");
        assert_eq!((r.bytes(), r.label()), (33 * 8, "v"));
        r.free();

        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("destructor panicked");
            }
        }
        // A panicking destructor must not unwind out of free (or out of Drop).
        Released::new(Bomb, 0, "bomb").free();
        drop(Released::new(Bomb, 0, "bomb"));
    }
}
