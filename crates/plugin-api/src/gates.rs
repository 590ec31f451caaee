//! Building blocks for GPU-lock plugins: per-(device, scope) mutexes with separate
//! acquire and release calls (the host holds a lock between two calls across the
//! boundary, so a borrowing guard cannot be used). A lock policy is then only the
//! choice of which scopes take a mutex.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::{AbiError, LockScope};

/// A first-come, first-served mutex (a ticket lock): a worker that releases and
/// comes straight back must not overtake one that has been waiting.
#[derive(Default)]
struct Gate {
    /// (next ticket to hand out, ticket being served)
    tickets: Mutex<(u64, u64)>,
    freed: Condvar,
}

impl Gate {
    fn acquire(&self) {
        let mut t = self.tickets.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = t.0;
        t.0 += 1;
        while t.1 != mine {
            t = self.freed.wait(t).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn release(&self) -> Result<(), AbiError> {
        let mut t = self.tickets.lock().unwrap_or_else(PoisonError::into_inner);
        if t.1 >= t.0 {
            return Err(AbiError::other("released a GPU lock that was not held"));
        }
        t.1 += 1;
        drop(t);
        self.freed.notify_all();
        Ok(())
    }
}

/// One mutex per (device, scope) for the scopes `locked` says take one; the other
/// scopes are free.
pub struct Gates {
    locked: fn(LockScope) -> bool,
    gates: Mutex<HashMap<(u64, u32), Arc<Gate>>>,
}

impl Gates {
    pub fn new(locked: fn(LockScope) -> bool) -> Self {
        Self {
            locked,
            gates: Mutex::new(HashMap::new()),
        }
    }

    /// The gate `scope` takes on `device`, `None` where the scope is free.
    fn gate(&self, device: u64, scope: LockScope) -> Result<Option<Arc<Gate>>, AbiError> {
        if !matches!(
            scope,
            LockScope::PARTITION | LockScope::MEMORY | LockScope::COMPUTE
        ) {
            return Err(AbiError::unsupported(format!(
                "unknown lock scope {}",
                scope.0
            )));
        }
        if !(self.locked)(scope) {
            return Ok(None);
        }
        let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(Some(Arc::clone(
            gates.entry((device, scope.0)).or_default(),
        )))
    }

    /// Blocks until `scope` on `device` is free, then holds it.
    pub fn acquire(&self, device: u64, scope: LockScope) -> Result<(), AbiError> {
        if let Some(g) = self.gate(device, scope)? {
            g.acquire();
        }
        Ok(())
    }

    /// Releases what [`Gates::acquire`] took; releasing a lock not held is an error.
    pub fn release(&self, device: u64, scope: LockScope) -> Result<(), AbiError> {
        match self.gate(device, scope)? {
            Some(g) => g.release(),
            None => Ok(()),
        }
    }
}
