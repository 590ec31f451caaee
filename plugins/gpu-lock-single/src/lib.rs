//! GPU-lock plugin `single`: one mutex per device, held around the whole partition;
//! memory and compute regions are free. The design the C2 history kept: one
//! partition owns the device at a time, so device-global CUDA calls cannot collide.

use cuzk_plugin_api::{gates::Gates, AbiError, GpuLockPlugin, LockScope, ParamDoc, Params};

pub struct Lock(Gates);

impl GpuLockPlugin for Lock {
    const PARAMS: &'static [ParamDoc] = &[];

    fn new(_params: &Params<'_>) -> Result<Self, AbiError> {
        Ok(Self(Gates::new(|s| s == LockScope::PARTITION)))
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
    name: "single",
    description: "one mutex per device around the whole partition",
    type: Lock,
}
