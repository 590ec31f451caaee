//! The memory budget: new synthesis waits until the bytes a partition will hold fit.
//!
//! A partition's buffers (witness, a/b/c, splits) are the bulk of a prover's memory
//! (≈ 20 GiB for a 32 GiB-sector partition). The budget is one counter of bytes
//! held, a permit per partition from before synthesis until its buffers are handed to
//! deallocation, so a run slows down instead of being killed by the OOM killer.

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// A run cannot fit even one partition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("one partition (with the parameters it is proved with) needs about {need} bytes but the memory budget is {budget} bytes: raise the budget or use a machine with more memory")]
pub struct BudgetError {
    pub need: u64,
    pub budget: u64,
}

#[derive(Debug)]
struct State {
    used: u64,
    closed: bool,
}

/// Bytes held outside the budget's permits that it must leave room for (the
/// backend's page-locked host memory).
type External = Box<dyn Fn() -> u64 + Send + Sync>;

/// A byte budget shared by every partition in flight, the parameters in use and
/// the backend's pinned host memory.
pub struct MemoryBudget {
    total: u64,
    state: Mutex<State>,
    freed: Condvar,
    external: OnceLock<External>,
}

impl std::fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBudget")
            .field("total", &self.total)
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
    pub fn new(total: u64) -> Arc<Self> {
        Arc::new(Self {
            total,
            state: Mutex::new(State {
                used: 0,
                closed: false,
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
        let total = machine_limit().unwrap_or(8 << 30);
        total.saturating_sub((total / 10).max(2 << 30))
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

    /// Fails at once if `bytes` can never fit.
    pub fn check(&self, bytes: u64) -> Result<(), BudgetError> {
        if bytes > self.total {
            Err(BudgetError {
                need: bytes,
                budget: self.total,
            })
        } else {
            Ok(())
        }
    }

    /// Waits until `bytes` fit, then holds them. `None` once the budget is closed
    /// (the engine is shutting down).
    pub fn acquire(self: &Arc<Self>, bytes: u64) -> Result<Option<Permit>, BudgetError> {
        self.check(bytes)?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // External bytes change without a notification: look again now and then.
        while !st.closed && st.used + self.external() + bytes > self.total {
            st = self
                .freed
                .wait_timeout(st, Duration::from_millis(200))
                .unwrap_or_else(|e| e.into_inner())
                .0;
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

    /// Whether `bytes` would have to wait now.
    pub fn would_wait(&self, bytes: u64) -> bool {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.used + self.external() + bytes > self.total
    }

    /// Wakes every waiter with `None`.
    pub fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.freed.notify_all();
    }
}

/// The smallest of `MemTotal` and this process's cgroup memory limit.
fn machine_limit() -> Option<u64> {
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
                budget: 10
            }
        );
        let _p = b.acquire(10).unwrap().unwrap();
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.acquire(5).unwrap().is_none());
        std::thread::sleep(Duration::from_millis(20));
        b.close();
        assert!(t.join().unwrap());
    }
}
