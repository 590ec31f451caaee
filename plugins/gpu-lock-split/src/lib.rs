//! GPU-lock plugin `split` (Phase 10 of the C2 history): the partition is free; each
//! device has a memory mutex and a compute mutex, so one worker's copies overlap
//! another's kernels. It failed on hardware: `cudaDeviceSynchronize` and
//! `cudaMemPoolTrimTo` are device-global and serialise against the other worker's
//! kernels whatever these mutexes say, and VRAM could not hold two workers' buffers.
//! It exists so that the failure can be shown by measurement.

use cuzk_plugin_api::{gates::Gates, AbiError, GpuLockPlugin, LockScope, ParamDoc, Params};

pub struct Lock(Gates);

impl GpuLockPlugin for Lock {
    const PARAMS: &'static [ParamDoc] = &[];

    fn new(_params: &Params<'_>) -> Result<Self, AbiError> {
        Ok(Self(Gates::new(|s| {
            s == LockScope::MEMORY || s == LockScope::COMPUTE
        })))
    }

    fn acquire(&self, device: u64, scope: LockScope) -> Result<(), AbiError> {
        self.0.acquire(device, scope)
    }

    fn release(&self, device: u64, scope: LockScope) -> Result<(), AbiError> {
        self.0.release(device, scope)
    }
}

cuzk_plugin_api::export_plugin! {
    kind: gpu_lock,
    name: "split",
    description: "separate memory and compute mutexes per device (Phase 10; fails on device-global CUDA calls)",
    type: Lock,
}
