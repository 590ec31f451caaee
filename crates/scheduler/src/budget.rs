//! The memory budget: new synthesis waits until the bytes a partition will hold fit.
//!
//! A partition's buffers (witness, a/b/c, splits) are the bulk of a prover's memory
//! (≈ 20 GiB for a 32 GiB-sector partition). The budget is one counter of bytes
//! held, a permit per partition from before synthesis until its buffers are handed to
//! deallocation, so a run slows down instead of being killed by the OOM killer.

use std::sync::{Arc, Condvar, Mutex};

/// A run cannot fit even one partition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("one partition needs about {need} bytes but the memory budget is {budget} bytes: raise the budget or use a machine with more memory")]
pub struct BudgetError {
    pub need: u64,
    pub budget: u64,
}

#[derive(Debug)]
struct State {
    used: u64,
    closed: bool,
}

/// A byte budget shared by every partition in flight.
#[derive(Debug)]
pub struct MemoryBudget {
    total: u64,
    state: Mutex<State>,
    freed: Condvar,
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
        })
    }

    /// Total RAM less a safety margin (a tenth, at least 2 GiB), read from
    /// `/proc/meminfo`; 8 GiB where that cannot be read.
    pub fn default_total() -> u64 {
        let total = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map(|kb| kb * 1024)
            .unwrap_or(8 << 30);
        total.saturating_sub((total / 10).max(2 << 30))
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
        while !st.closed && st.used + bytes > self.total {
            st = self.freed.wait(st).unwrap_or_else(|e| e.into_inner());
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
        st.used + bytes > self.total
    }

    /// Wakes every waiter with `None`.
    pub fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
