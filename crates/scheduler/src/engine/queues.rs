//! The engine's queues: the priority-ordered work queue (the GPU queue, the
//! `b_g2_msm` queue), the synthesis queue with its slots under one lock, and the
//! count of critical partitions on their way to a GPU.

use super::*;

/// A queue's order: higher priority first, then job sequence, then partition.
pub(super) type Key = (Reverse<Priority>, u64, u32);

pub(super) fn key(job: &JobShared, partition: u32) -> Key {
    (Reverse(job.priority), job.id, partition)
}

struct Prioritised<T> {
    key: Key,
    item: T,
}

impl<T> PartialEq for Prioritised<T> {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl<T> Eq for Prioritised<T> {}
impl<T> PartialOrd for Prioritised<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Prioritised<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(&o.key)
    }
}

/// A blocking min-queue on [`Key`].
pub(super) struct WorkQueue<T> {
    state: Mutex<(BinaryHeap<Reverse<Prioritised<T>>>, bool)>,
    ready: Condvar,
}

impl<T> WorkQueue<T> {
    pub(super) fn new() -> Self {
        Self {
            state: Mutex::new((BinaryHeap::new(), false)),
            ready: Condvar::new(),
        }
    }

    pub(super) fn push(&self, key: Key, item: T) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.0.push(Reverse(Prioritised { key, item }));
        drop(st);
        // Every waiter: a worker may pass over an item (it failed on its device)
        // that another one takes.
        self.ready.notify_all();
    }

    /// The smallest item; `None` once closed and empty.
    pub(super) fn pop(&self) -> Option<T> {
        self.pop_where(|_| true)
    }

    /// The smallest item `fits` accepts (a partition not yet failed on this
    /// device); `None` once closed with none left that it accepts. Items passed
    /// over stay queued in their order.
    pub(super) fn pop_where(&self, fits: impl Fn(&T) -> bool) -> Option<T> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let mut passed = Vec::new();
            let mut found = None;
            while let Some(Reverse(p)) = st.0.pop() {
                if fits(&p.item) {
                    found = Some(p.item);
                    break;
                }
                passed.push(Reverse(p));
            }
            st.0.extend(passed);
            if found.is_some() {
                return found;
            }
            if st.1 {
                return None;
            }
            st = self.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    pub(super) fn close(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.ready.notify_all();
    }

    /// Whether the smallest item is one `pred` accepts.
    pub(super) fn head_is(&self, pred: impl Fn(&Key, &T) -> bool) -> bool {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.0.peek().is_some_and(|r| pred(&r.0.key, &r.0.item))
    }

    pub(super) fn is_closed(&self) -> bool {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1
    }

    pub(super) fn drain(&self) -> Vec<T> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut st.0)
            .into_iter()
            .map(|r| r.0.item)
            .collect()
    }
}

/// The synthesis queue and its slots under one lock: a worker takes the queue's
/// head only when a slot is free for it, so the queue's order is the order
/// synthesis starts in and a worker never holds an item it may not start. The
/// others share `synth_jobs` slots (else chosen from the cores and the work: see
/// [`SynthQueue::auto_limit`]); critical partitions may also use the
/// `critical_synth_slots` beyond them.
pub(super) struct SynthQueue {
    state: Mutex<SynthState>,
    changed: Condvar,
    cores: usize,
    fixed: Option<usize>,
    critical_slots: usize,
}

struct SynthState {
    queue: BinaryHeap<Reverse<Prioritised<SynthItem>>>,
    /// Partitions in synthesis, critical ones included.
    active: usize,
    /// The most partitions of any job submitted so far.
    largest_job: usize,
    closed: bool,
}

impl SynthQueue {
    pub(super) fn new(cores: usize, fixed: Option<usize>, critical_slots: usize) -> Self {
        Self {
            state: Mutex::new(SynthState {
                queue: BinaryHeap::new(),
                active: 0,
                largest_job: 0,
                closed: false,
            }),
            changed: Condvar::new(),
            cores,
            fixed,
            critical_slots,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SynthState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The workers to start: every one that may ever hold a slot.
    pub(super) fn workers(&self) -> usize {
        self.fixed.unwrap_or(self.cores).max(1) + self.critical_slots
    }

    /// Unset `synth_jobs`: a whole job's partitions in one wave where the cores
    /// allow (10 partitions on 16 cores: 10, not a wave of 6 and one of 4), and at
    /// least half the cores, which the H200 machine's 16 vCPUs measured best for a
    /// stream of small jobs (6-8, BENCHMARKS.md): a partition's witness is one
    /// thread, its spmv and prep_msm share the synthesis pool.
    pub(super) fn auto_limit(cores: usize, largest_job: usize) -> usize {
        largest_job.max(cores.div_ceil(2)).min(cores).max(1)
    }

    /// The slots a partition of `priority` may take from.
    fn limit(&self, st: &SynthState, priority: Priority) -> usize {
        let shared = self
            .fixed
            .unwrap_or_else(|| Self::auto_limit(self.cores, st.largest_job));
        if priority == Priority::Critical {
            shared + self.critical_slots
        } else {
            shared
        }
    }

    pub(super) fn push(&self, key: Key, item: SynthItem) {
        self.lock().queue.push(Reverse(Prioritised { key, item }));
        self.changed.notify_all();
    }

    /// Waits until the queue's head has a free slot, then takes both; `None` once
    /// closed.
    pub(super) fn pop(&self) -> Option<SynthItem> {
        let mut st = self.lock();
        loop {
            if st.closed {
                return None;
            }
            let head = st.queue.peek().map(|r| r.0.key.0 .0);
            if let Some(priority) = head {
                if st.active < self.limit(&st, priority) {
                    st.active += 1;
                    return st.queue.pop().map(|r| r.0.item);
                }
            }
            st = self
                .changed
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A partition left synthesis: its slot is free.
    pub(super) fn release(&self) {
        let mut st = self.lock();
        st.active = st.active.saturating_sub(1);
        drop(st);
        // Every waiter: the head may be one only some slots admit.
        self.changed.notify_all();
    }

    pub(super) fn job_submitted(&self, partitions: usize) {
        let mut st = self.lock();
        if partitions > st.largest_job {
            st.largest_job = partitions;
            drop(st);
            self.changed.notify_all();
        }
    }

    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    pub(super) fn drain(&self) -> Vec<SynthItem> {
        std::mem::take(&mut self.lock().queue)
            .into_iter()
            .map(|r| r.0.item)
            .collect()
    }
}

/// Critical partitions on their way to a GPU: from their push on the GPU queue
/// until their worker holds a device's lock. While there is one, a non-critical
/// partition that gets a lock gives it up again (see `gpu_worker`), so a
/// WinningPoSt waits for at most the one partition already on the device, not
/// also for the one the second GPU worker of the device had ready.
pub(super) struct CriticalGpu {
    count: Mutex<usize>,
    changed: Condvar,
}

impl CriticalGpu {
    pub(super) fn new() -> Self {
        Self {
            count: Mutex::new(0),
            changed: Condvar::new(),
        }
    }

    pub(super) fn enter(&self) {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    pub(super) fn leave(&self) {
        let mut n = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        *n = n.saturating_sub(1);
        drop(n);
        self.changed.notify_all();
    }

    pub(super) fn any(&self) -> bool {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) > 0
    }

    /// Waits until none is on its way or `give_up` says so (the engine stops).
    pub(super) fn wait_none(&self, give_up: impl Fn() -> bool) {
        let mut n = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *n > 0 && !give_up() {
            n = self
                .changed
                .wait_timeout(n, Duration::from_millis(50))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}
