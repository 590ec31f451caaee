//! GPU-lock plugin `split` (Phase 10 of the C2 history): the partition is free; each
//! device has a memory mutex and a compute mutex, so one worker's copies overlap
//! another's kernels. It failed on hardware: `cudaDeviceSynchronize` and
//! `cudaMemPoolTrimTo` are device-global and serialise against the other worker's
//! kernels whatever these mutexes say, and VRAM could not hold two workers' buffers.
//! It exists so that the failure can be shown by measurement.

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
            LockScope::PARTITION => false,
            LockScope::MEMORY | LockScope::COMPUTE => true,
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
    name: "split",
    description: "separate memory and compute mutexes per device (Phase 10; fails on device-global CUDA calls)",
    type: Lock,
}
