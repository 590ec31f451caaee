//! The memory budget: new synthesis waits until the bytes a partition will hold fit.
//!
//! A partition's buffers (witness, a/b/c, splits) are the bulk of a prover's memory
//! (≈ 20 GiB for a 32 GiB-sector partition). The budget is one counter of bytes
//! held, a permit per partition from before synthesis until its buffers are handed to
//! deallocation, so a run slows down instead of being killed by the OOM killer.
//!
//! Part of the budget can be held back for critical work (a WinningPoSt, due within
//! an epoch): other partitions are admitted against the total less the reserve,
//! critical ones against the whole total, and while a critical partition waits no
//! other one is admitted, so the bytes freed go to it first. The reserve is either
//! fixed or learned ([`CriticalReserve`]).

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// A run cannot fit even one partition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("one partition (with the parameters it is proved with) needs about {need} bytes but the memory budget is {budget} bytes{}: raise the budget or use a machine with more memory", reserve_note(*reserved))]
pub struct BudgetError {
    pub need: u64,
    /// What this partition may use: the total, or for a non-critical partition the
    /// total less `reserved`.
    pub budget: u64,
    /// Bytes held back for critical work that this partition may not use (0 for a
    /// critical partition or with no reserve).
    pub reserved: u64,
}

fn reserve_note(reserved: u64) -> String {
    if reserved == 0 {
        String::new()
    } else {
        format!(" once the {reserved} bytes held back for critical work (critical_reserve) are set aside")
    }
}

/// How much of the budget is held back for critical-priority partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CriticalReserve {
    /// Exactly these bytes (0: none). Other partitions that need more than the
    /// total less this are refused.
    Bytes(u64),
    /// Learned: the largest need (a partition and its parameters) of a critical job
    /// seen so far, but never so much that the largest other need seen stops
    /// fitting (the reserve shrinks instead). Nothing is held back until a critical
    /// job has been seen.
    Learned,
}

#[derive(Debug)]
struct State {
    used: u64,
    closed: bool,
    /// Critical partitions waiting in [`MemoryBudget::acquire_for`]: while any
    /// waits, no other partition is admitted.
    critical_waiting: usize,
    /// The largest need of a critical job and of any other job seen so far (for
    /// [`CriticalReserve::Learned`]).
    largest_critical: u64,
    largest_other: u64,
}

/// Bytes held outside the budget's permits that it must leave room for (the
/// backend's page-locked host memory).
type External = Box<dyn Fn() -> u64 + Send + Sync>;

/// A byte budget shared by every partition in flight, the parameters in use and
/// the backend's pinned host memory.
pub struct MemoryBudget {
    total: u64,
    reserve: CriticalReserve,
    state: Mutex<State>,
    freed: Condvar,
    external: OnceLock<External>,
}

impl std::fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBudget")
            .field("total", &self.total)
            .field("reserve", &self.reserve)
            .field("used", &self.used())
            .field("external", &self.external())
            .finish()
    }
}

/// Bytes held by one partition; returned to the budget on drop.
#[derive(Debug)]
pub struct Permit {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl Permit {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Holds `bytes` more, at once, even past the budget's total (memory already in
    /// use): new partitions wait until it is released.
    pub fn grow(&mut self, bytes: u64) {
        let mut st = self.budget.state.lock().unwrap_or_else(|e| e.into_inner());
        st.used += bytes;
        self.bytes += bytes;
    }

    /// Moves `bytes` (at most all) of this permit into a new one, so the two are
    /// released apart.
    pub fn split_off(&mut self, bytes: u64) -> Permit {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        Permit {
            budget: self.budget.clone(),
            bytes,
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        // Never panics: a poisoned lock still hands out its data.
        let mut st = self.budget.state.lock().unwrap_or_else(|e| e.into_inner());
        st.used = st.used.saturating_sub(self.bytes);
        drop(st);
        self.budget.freed.notify_all();
    }
}

impl MemoryBudget {
    /// A budget of `total` bytes with nothing held back for critical work.
    pub fn new(total: u64) -> Arc<Self> {
        Self::with_reserve(total, CriticalReserve::Bytes(0))
    }

    /// A budget of `total` bytes, `reserve` of them held back for critical work
    /// (the caller checks that a fixed reserve is below the total).
    pub fn with_reserve(total: u64, reserve: CriticalReserve) -> Arc<Self> {
        Arc::new(Self {
            total,
            reserve,
            state: Mutex::new(State {
                used: 0,
                closed: false,
                critical_waiting: 0,
                largest_critical: 0,
                largest_other: 0,
            }),
            freed: Condvar::new(),
            external: OnceLock::new(),
        })
    }

    /// The machine's memory limit less a safety margin (a tenth, at least 2 GiB).
    /// The limit is the smallest of `MemTotal` and this process's cgroup limit (v2
    /// `memory.max`, v1 `memory.limit_in_bytes`), so a container's limit is what
    /// the budget plans for, not the host's RAM; 8 GiB where none can be read.
    pub fn default_total() -> u64 {
        Self::total_for_limit(machine_limit().unwrap_or(8 << 30))
    }

    /// [`Self::default_total`] for a machine whose limit is `limit` bytes: the
    /// limit less a tenth, at least 2 GiB (the planner counts a host it is not
    /// running on this way).
    pub fn total_for_limit(limit: u64) -> u64 {
        limit.saturating_sub((limit / 10).max(2 << 30))
    }

    /// Leaves room for bytes held elsewhere, read on every admission (the
    /// backend's pinned host memory). Set once; later calls are ignored.
    pub fn count_external(&self, bytes: impl Fn() -> u64 + Send + Sync + 'static) {
        let _ = self.external.set(Box::new(bytes));
        self.freed.notify_all();
    }

    /// The external bytes now.
    pub fn external(&self) -> u64 {
        self.external.get().map_or(0, |f| f())
    }

    /// Holds `bytes` at once, even past the total (memory already in use, such as
    /// loaded parameters): new partitions wait until it is released.
    pub fn hold(self: &Arc<Self>, bytes: u64) -> Permit {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.used += bytes;
        Permit {
            budget: self.clone(),
            bytes,
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn used(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).used
    }

    /// The bytes held back for critical work now.
    pub fn reserve(&self) -> u64 {
        self.reserve_in(&self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn reserve_in(&self, st: &State) -> u64 {
        match self.reserve {
            CriticalReserve::Bytes(b) => b,
            CriticalReserve::Learned => st
                .largest_critical
                .min(self.total.saturating_sub(st.largest_other)),
        }
    }

    /// What a partition of this class may hold with the others: the total for a
    /// critical one, else the total less the reserve.
    fn limit_in(&self, st: &State, critical: bool) -> u64 {
        if critical {
            self.total
        } else {
            self.total.saturating_sub(self.reserve_in(st))
        }
    }

    /// Fails at once if `bytes` can never fit a non-critical partition.
    pub fn check(&self, bytes: u64) -> Result<(), BudgetError> {
        self.check_for(bytes, false)
    }

    /// Fails at once if `bytes` (a partition and its parameters) can never fit a
    /// partition of this class; else notes them, so that a learned reserve covers
    /// the largest critical need and leaves room for the largest other one.
    pub fn check_for(&self, bytes: u64, critical: bool) -> Result<(), BudgetError> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.note(&mut st, bytes, critical);
        let limit = self.limit_in(&st, critical);
        if bytes > self.total {
            // Not the reserve's doing: it would not fit the whole budget either.
            Err(BudgetError {
                need: bytes,
                budget: self.total,
                reserved: 0,
            })
        } else if bytes > limit {
            Err(BudgetError {
                need: bytes,
                budget: limit,
                reserved: self.total - limit,
            })
        } else {
            Ok(())
        }
    }

    fn note(&self, st: &mut State, bytes: u64, critical: bool) {
        // Only what can fit at all is learned: a need past the total is refused
        // and must not shrink the reserve for everyone else.
        if bytes > self.total {
            return;
        }
        let largest = if critical {
            &mut st.largest_critical
        } else {
            &mut st.largest_other
        };
        *largest = (*largest).max(bytes);
    }

    /// Waits until `bytes` fit a non-critical partition, then holds them.
    pub fn acquire(self: &Arc<Self>, bytes: u64) -> Result<Option<Permit>, BudgetError> {
        self.acquire_for(bytes, false)
    }

    /// Waits until `bytes` fit, then holds them. `None` once the budget is closed
    /// (the engine is shutting down). A critical partition may use the whole
    /// total and, while it waits, is served before any other; any other partition
    /// is admitted only within the total less the reserve and while no critical
    /// one waits.
    pub fn acquire_for(
        self: &Arc<Self>,
        bytes: u64,
        critical: bool,
    ) -> Result<Option<Permit>, BudgetError> {
        self.acquire_for_with(|| bytes, critical)
    }

    /// [`Self::acquire_for`] for a need that may change while it waits (a partition
    /// charged at worst until its shape's first partition has measured what it
    /// holds; parameters that another partition of its job has come to hold):
    /// `need` is read again at every wake-up, so a waiter is never starved by its
    /// own stale, larger need. Holds exactly the need read last (a caller that
    /// splits the permit knows what that read returned).
    pub fn acquire_for_with(
        self: &Arc<Self>,
        need: impl Fn() -> u64,
        critical: bool,
    ) -> Result<Option<Permit>, BudgetError> {
        let mut bytes = need();
        self.check_for(bytes, critical)?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if critical {
            st.critical_waiting += 1;
        }
        // External bytes change without a notification: look again now and then.
        while !st.closed && self.blocked(&st, bytes, critical) {
            st = self
                .freed
                .wait_timeout(st, Duration::from_millis(200))
                .unwrap_or_else(|e| e.into_inner())
                .0;
            // Read without the lock held: the need may take other locks.
            drop(st);
            bytes = need();
            st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        }
        if critical {
            st.critical_waiting -= 1;
            // Others waited while this one did.
            self.freed.notify_all();
        }
        if st.closed {
            return Ok(None);
        }
        st.used += bytes;
        Ok(Some(Permit {
            budget: self.clone(),
            bytes,
        }))
    }

    /// A non-critical partition fits within the total less the reserve, with the
    /// external bytes; a critical one within the total, without them. External
    /// bytes (the backend's page-locked buffers) come out of non-critical room
    /// only: they grow after the partitions that cause them were admitted (a
    /// witness staged by copy gets its buffer at its GPU worker, long after its
    /// permit), so they can spend the reserve that admission kept for critical
    /// work, and a critical partition must not wait for them. On the H200, with
    /// `witness_staging = "copy"`, the first two 4.2 GB copy buffers of a 32 GiB
    /// PoRep stream made a WinningPoSt wait ~2.4 s for PoRep partitions to finish
    /// (3.48 s from submission, against 1.04 s with nothing copied). So a critical
    /// partition may take the host past the total by at most the external bytes,
    /// which the total's margin (`default_total`) is for.
    fn blocked(&self, st: &State, bytes: u64, critical: bool) -> bool {
        if critical {
            st.used + bytes > self.limit_in(st, true)
        } else {
            st.critical_waiting > 0 || st.used + self.external() + bytes > self.limit_in(st, false)
        }
    }

    /// Whether `bytes` would have to wait now for a non-critical partition.
    pub fn would_wait(&self, bytes: u64) -> bool {
        self.would_wait_for(bytes, false)
    }

    /// Whether `bytes` would have to wait now for a partition of this class.
    pub fn would_wait_for(&self, bytes: u64, critical: bool) -> bool {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.blocked(&st, bytes, critical)
    }

    /// Wakes every waiter with `None`.
    pub fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.freed.notify_all();
    }
}

/// The smallest of `MemTotal` and this process's cgroup memory limit (what
/// [`MemoryBudget::default_total`] plans from).
pub fn machine_limit() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| mem_total(&s));
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|groups| cgroup_limit(&groups, |p| std::fs::read_to_string(p).ok()));
    match (meminfo, cgroup) {
        (Some(m), Some(c)) => Some(m.min(c)),
        (m, c) => m.or(c),
    }
}

fn mem_total(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// The memory limit of the cgroups in `/proc/self/cgroup` (`groups`), reading
/// files through `read`: v2 (`0::/path`: `memory.max` of the group and each
/// parent) and v1 (the `memory` controller's `memory.limit_in_bytes`). `max` and
/// v1's "no limit" (a value near `u64::MAX`) count as none.
fn cgroup_limit(groups: &str, read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    let parse = |text: Option<String>| -> Option<u64> {
        let v = text?.trim().parse::<u64>().ok()?;
        (v < 1 << 60).then_some(v)
    };
    let mut limit: Option<u64> = None;
    let mut take = |v: Option<u64>| {
        if let Some(v) = v {
            limit = Some(limit.map_or(v, |l| l.min(v)));
        }
    };
    for line in groups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_end_matches('/');
        if controllers.is_empty() {
            // v2: the group and every parent up to the root may limit.
            let mut p = path.to_string();
            loop {
                take(parse(read(&format!("/sys/fs/cgroup{p}/memory.max"))));
                match p.rfind('/') {
                    Some(i) => p.truncate(i),
                    None => break,
                }
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            take(parse(read(&format!(
                "/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"
            ))));
            take(parse(read("/sys/fs/cgroup/memory/memory.limit_in_bytes")));
        }
    }
    limit
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A waiter whose need shrinks while it waits (its shape's splits measured) is
    /// admitted at the smaller need, though the larger one never fits.
    #[test]
    fn a_waiter_is_admitted_when_its_need_shrinks() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let b = MemoryBudget::new(100);
        let held = b.acquire(60).unwrap().unwrap();
        let need = Arc::new(AtomicU64::new(50));
        let (b2, n2) = (b.clone(), need.clone());
        let waiter =
            std::thread::spawn(move || b2.acquire_for_with(|| n2.load(Ordering::SeqCst), false));
        std::thread::sleep(Duration::from_millis(300));
        assert!(!waiter.is_finished(), "50 more cannot fit beside 60 of 100");
        need.store(30, Ordering::SeqCst);
        let permit = waiter.join().unwrap().unwrap().unwrap();
        assert_eq!(permit.bytes(), 30);
        assert_eq!(b.used(), 90);
        drop((held, permit));
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn cgroup_limits_are_found_in_v2_parents_and_v1() {
        let files = |map: &'static [(&'static str, &'static str)]| {
            move |p: &str| {
                map.iter()
                    .find(|(k, _)| *k == p)
                    .map(|(_, v)| v.to_string())
            }
        };
        // v2: the tightest of the group and its parents; "max" is no limit.
        let v2 = files(&[
            ("/sys/fs/cgroup/a/b/memory.max", "max\n"),
            ("/sys/fs/cgroup/a/memory.max", "4294967296\n"),
        ]);
        assert_eq!(cgroup_limit("0::/a/b\n", v2), Some(4 << 30));
        // v1: the memory controller's limit; the huge "unlimited" value is none.
        let v1 = files(&[(
            "/sys/fs/cgroup/memory/docker/x/memory.limit_in_bytes",
            "2147483648",
        )]);
        assert_eq!(
            cgroup_limit("12:cpu,cpuacct:/docker/x\n4:memory:/docker/x\n", v1),
            Some(2 << 30)
        );
        let unlimited = files(&[(
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712",
        )]);
        assert_eq!(cgroup_limit("4:memory:/\n", unlimited), None);
        assert_eq!(cgroup_limit("", |_| None), None);
        assert_eq!(mem_total("MemTotal:  1024 kB\n"), Some(1 << 20));
        // On this machine: whatever it is, never more than MemTotal.
        let m = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| mem_total(&s));
        if let (Some(limit), Some(m)) = (machine_limit(), m) {
            assert!(limit <= m);
        }
    }

    #[test]
    fn held_and_external_bytes_count() {
        let b = MemoryBudget::new(100);
        let params = b.hold(70);
        assert!(b.would_wait(40) && !b.would_wait(30));
        b.count_external(|| 20);
        assert!(b.would_wait(11) && !b.would_wait(10));
        drop(params);
        assert!(!b.would_wait(80) && b.would_wait(81));
        assert_eq!(b.used(), 0);
        let mut p = b.acquire(50).unwrap().unwrap();
        let q = p.split_off(20);
        assert_eq!((p.bytes(), q.bytes()), (30, 20));
        drop(p);
        assert_eq!(b.used(), 20);
        drop(q);
        assert_eq!(b.used(), 0);
    }

    /// External bytes that grew after non-critical admissions spent the reserve:
    /// a critical partition still goes in at once, a non-critical one waits.
    #[test]
    fn external_bytes_never_hold_back_a_critical_partition() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let b = MemoryBudget::with_reserve(100, CriticalReserve::Bytes(10));
        let ext = Arc::new(AtomicU64::new(0));
        let e = ext.clone();
        b.count_external(move || e.load(Ordering::Relaxed));
        let normal = b.acquire(90).unwrap().unwrap();
        // The backend's buffers arrive after that admission.
        ext.store(20, Ordering::Relaxed);
        assert!(b.would_wait(1), "non-critical room is gone");
        assert!(
            !b.would_wait_for(10, true),
            "the reserve is still the critical one's"
        );
        let crit = b.acquire_for(10, true).unwrap().unwrap();
        assert!(
            b.would_wait_for(1, true),
            "past the total without external bytes"
        );
        drop((normal, crit));
        assert!(!b.would_wait(70) && b.would_wait(71));
    }

    #[test]
    fn blocks_then_admits() {
        let b = MemoryBudget::new(100);
        let p1 = b.acquire(60).unwrap().unwrap();
        assert!(b.would_wait(50));
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.acquire(50).unwrap().map(|p| p.bytes()));
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !t.is_finished(),
            "the second permit must wait for the first"
        );
        drop(p1);
        assert_eq!(t.join().unwrap(), Some(50));
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn too_big_fails_at_once_and_close_wakes() {
        let b = MemoryBudget::new(10);
        assert_eq!(
            b.acquire(11).unwrap_err(),
            BudgetError {
                need: 11,
                budget: 10,
                reserved: 0
            }
        );
        let _p = b.acquire(10).unwrap().unwrap();
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.acquire(5).unwrap().is_none());
        std::thread::sleep(Duration::from_millis(20));
        b.close();
        assert!(t.join().unwrap());
    }

    #[test]
    fn a_fixed_reserve_is_left_to_critical_partitions() {
        let b = MemoryBudget::with_reserve(100, CriticalReserve::Bytes(30));
        assert_eq!(b.reserve(), 30);
        // Others fit in 70, critical ones in 100; what never fits is refused at once.
        let e = b.check_for(71, false).unwrap_err();
        assert_eq!(
            e,
            BudgetError {
                need: 71,
                budget: 70,
                reserved: 30
            }
        );
        assert!(e.to_string().contains("critical_reserve"), "{e}");
        assert!(b.check_for(100, true).is_ok());
        assert!(b.check_for(101, true).is_err());
        let normal = b.acquire_for(70, false).unwrap().unwrap();
        assert!(b.would_wait_for(1, false), "the reserve is not for others");
        assert!(!b.would_wait_for(30, true) && b.would_wait_for(31, true));
        let critical = b.acquire_for(30, true).unwrap().unwrap();
        assert_eq!(b.used(), 100);
        drop((normal, critical));
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn a_learned_reserve_covers_critical_needs_and_leaves_room_for_others() {
        let b = MemoryBudget::with_reserve(100, CriticalReserve::Learned);
        assert_eq!(b.reserve(), 0, "nothing held back before a critical job");
        b.check_for(20, true).unwrap();
        assert_eq!(b.reserve(), 20);
        b.check_for(60, false).unwrap();
        assert_eq!(b.reserve(), 20);
        // A larger other need shrinks the reserve rather than being refused.
        b.check_for(90, false).unwrap();
        assert_eq!(b.reserve(), 10);
        // A need past the total is refused, the reserve not blamed, and learns
        // nothing.
        assert_eq!(b.check_for(101, false).unwrap_err().reserved, 0);
        assert_eq!(b.reserve(), 10);
    }

    #[test]
    fn a_waiting_critical_partition_is_served_before_others() {
        let b = MemoryBudget::with_reserve(100, CriticalReserve::Bytes(0));
        let held = b.acquire_for(90, false).unwrap().unwrap();
        let b2 = b.clone();
        let critical = std::thread::spawn(move || b2.acquire_for(50, true).unwrap());
        // Wait (without a timing assertion) until the critical one is waiting.
        while b.state.lock().unwrap().critical_waiting == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // 10 bytes are free, but a critical partition waits: others wait too.
        assert!(b.would_wait_for(10, false));
        assert!(!b.would_wait_for(10, true));
        drop(held);
        let permit = critical.join().unwrap().unwrap();
        assert_eq!(permit.bytes(), 50);
        assert!(!b.would_wait_for(50, false));
    }
}
