//! Building blocks for GPU-lock plugins: per-(device, scope) mutexes with separate
//! acquire and release calls (the host holds a lock between two calls across the
//! boundary, so a borrowing guard cannot be used). A lock policy is then only the
//! choice of which scopes take a mutex.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::{AbiError, LockScope};

#[derive(Default)]
struct Gate {
    held: Mutex<bool>,
    freed: Condvar,
}

impl Gate {
    fn acquire(&self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held {
            held = self
                .freed
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *held = true;
    }

    fn release(&self) -> Result<(), AbiError> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if !*held {
            return Err(AbiError::other("released a GPU lock that was not held"));
        }
        *held = false;
        self.freed.notify_one();
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
