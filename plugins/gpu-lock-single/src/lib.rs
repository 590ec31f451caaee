//! GPU-lock plugin `single`: one mutex per device, held around the whole partition;
//! memory and compute regions are free. The design the C2 history kept: one
//! partition owns the device at a time, so device-global CUDA calls cannot collide.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use cuzk_plugin_api::{AbiError, GpuLockPlugin, LockScope, ParamDoc, Params};

/// A mutex with separate acquire and release calls (the host holds it between two
/// calls across the boundary, so a borrowing guard cannot be used).
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

#[derive(Default)]
pub struct Lock {
    gates: Mutex<HashMap<(u64, u32), Arc<Gate>>>,
}

impl Lock {
    /// The gate that `scope` takes on `device`, or None where the scope is free.
    fn gate(&self, device: u64, scope: LockScope) -> Result<Option<Arc<Gate>>, AbiError> {
        let locked = match scope {
            LockScope::PARTITION => true,
            LockScope::MEMORY | LockScope::COMPUTE => false,
            other => {
                return Err(AbiError::unsupported(format!(
                    "unknown lock scope {}",
                    other.0
                )))
            }
        };
        if !locked {
            return Ok(None);
        }
        let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(Some(Arc::clone(
            gates.entry((device, scope.0)).or_default(),
        )))
    }
}

impl GpuLockPlugin for Lock {
    const PARAMS: &'static [ParamDoc] = &[];

    fn new(_params: &Params<'_>) -> Result<Self, AbiError> {
        Ok(Self::default())
    }

    fn acquire(&self, device: u64, scope: LockScope) -> Result<(), AbiError> {
        if let Some(g) = self.gate(device, scope)? {
            g.acquire();
        }
        Ok(())
    }

    fn release(&self, device: u64, scope: LockScope) -> Result<(), AbiError> {
        match self.gate(device, scope)? {
            Some(g) => g.release(),
            None => Ok(()),
        }
    }
}

cuzk_plugin_api::export_plugin! {
    kind: gpu_lock,
    name: "single",
    description: "one mutex per device around the whole partition",
    type: Lock,
}
