//! Building block for dealloc plugins that free on other threads: a count of
//! buffers handed over but not yet freed, so `drain` can wait for it to reach zero.

use std::sync::{Condvar, Mutex, PoisonError};

#[derive(Default)]
pub struct Pending {
    count: Mutex<usize>,
    done: Condvar,
}

impl Pending {
    /// One more buffer in flight.
    pub fn start(&self) {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }

    /// One buffer freed (or freed elsewhere after all).
    pub fn finish(&self) {
        let mut n = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.done.notify_all();
        }
    }

    /// Blocks until every buffer started so far is finished.
    pub fn wait_idle(&self) {
        let mut n = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *n > 0 {
            n = self.done.wait(n).unwrap_or_else(PoisonError::into_inner);
        }
    }
}
