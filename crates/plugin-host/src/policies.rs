//! Dealloc, throttle and GPU-lock plugins as the in-process traits the scheduler
//! and synthesis use. Those calls return nothing (a policy must not fail a proof),
//! so a plugin's error is logged and kept for `take_error`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use cuzk_alloc::{DeallocPolicy, Released, ThrottleControl};
use cuzk_gpu_backend::lock::{GpuLock, LockGuard, Region};
use cuzk_plugin_api::abi_stable::std_types::{RResult, RSlice};
use cuzk_plugin_api::{
    AbiError, DeallocMod_Ref, GpuLockMod_Ref, Instance, LockScope, Param, ReleasedBuf,
    ThrottleMod_Ref,
};

use crate::load::Library;
use crate::PluginError;

/// The last error a policy plugin returned, and how many there were since the last
/// `take`.
#[derive(Default)]
struct Errors {
    last: Mutex<(u64, Option<PluginError>)>,
}

impl Errors {
    fn record(&self, plugin: &str, call: &'static str, r: RResult<(), AbiError>) {
        if let RResult::RErr(e) = r {
            let e = PluginError::from_abi(plugin, call, e);
            tracing::error!(target: "cuzk::plugin", "{e}");
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            last.0 += 1;
            last.1 = Some(e);
        }
    }

    fn take(&self) -> Option<(u64, PluginError)> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let n = std::mem::take(&mut last.0);
        last.1.take().map(|e| (n, e))
    }
}

fn missing_module(lib: &Library, kind: &'static str) -> PluginError {
    PluginError::Failed {
        plugin: lib.name(),
        call: "load",
        code: "missing module",
        message: format!("the plugin says it is a {kind} plugin but has no {kind} module"),
    }
}

fn instantiate(
    lib: &Library,
    kind: &'static str,
    params: &BTreeMap<String, String>,
    f: extern "C" fn(RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>,
) -> Result<Instance, PluginError> {
    let pairs = lib.check_params(params)?;
    f(RSlice::from_slice(&pairs))
        .into_result()
        .map_err(|e| crate::rejected(kind, &lib.name(), e))
}

// ---------------------------------------------------------------------------------

/// A dealloc plugin as a [`DeallocPolicy`].
pub struct PluginDealloc {
    name: String,
    module: DeallocMod_Ref,
    instance: Option<Instance>,
    errors: Errors,
}

impl PluginDealloc {
    pub(crate) fn instantiate(
        lib: Library,
        params: &BTreeMap<String, String>,
    ) -> Result<Self, PluginError> {
        let module = lib
            .root
            .dealloc()
            .into_option()
            .ok_or_else(|| missing_module(&lib, "dealloc"))?;
        let instance = instantiate(&lib, "dealloc", params, module.instantiate())?;
        Ok(Self {
            name: lib.name(),
            module,
            instance: Some(instance),
            errors: Errors::default(),
        })
    }

    fn instance(&self) -> &Instance {
        self.instance.as_ref().expect("instance present until drop")
    }

    pub fn plugin_name(&self) -> &str {
        &self.name
    }

    /// The last error the plugin returned and how many it returned since the last
    /// call (the buffers involved were freed regardless).
    pub fn take_error(&self) -> Option<(u64, PluginError)> {
        self.errors.take()
    }
}

impl DeallocPolicy for PluginDealloc {
    fn release(&self, buf: Released) {
        let (bytes, label) = (buf.bytes() as u64, buf.label());
        // Dropping the `Released` frees it, so the plugin's dropper is the host's
        // own destructor: whatever thread the plugin runs it on, the host allocator
        // frees the memory.
        let buf = ReleasedBuf::from_value(buf, bytes, label);
        let r = (self.module.release())(self.instance(), buf);
        self.errors.record(&self.name, "release", r);
    }

    fn drain(&self) {
        let r = (self.module.drain())(self.instance());
        self.errors.record(&self.name, "drain", r);
    }
}

impl Drop for PluginDealloc {
    fn drop(&mut self) {
        if let Some(i) = self.instance.take() {
            (self.module.destroy())(i);
        }
    }
}

// ---------------------------------------------------------------------------------

/// A throttle plugin as both halves of the flag: [`ThrottleControl`] for the stage
/// that raises it, [`cuzk_synth::Throttle`] for the synthesis workers.
pub struct PluginThrottle {
    name: String,
    module: ThrottleMod_Ref,
    instance: Option<Instance>,
    errors: Errors,
}

impl PluginThrottle {
    pub(crate) fn instantiate(
        lib: Library,
        params: &BTreeMap<String, String>,
    ) -> Result<Self, PluginError> {
        let module = lib
            .root
            .throttle()
            .into_option()
            .ok_or_else(|| missing_module(&lib, "throttle"))?;
        let instance = instantiate(&lib, "throttle", params, module.instantiate())?;
        Ok(Self {
            name: lib.name(),
            module,
            instance: Some(instance),
            errors: Errors::default(),
        })
    }

    fn instance(&self) -> &Instance {
        self.instance.as_ref().expect("instance present until drop")
    }

    pub fn plugin_name(&self) -> &str {
        &self.name
    }

    /// See [`PluginDealloc::take_error`].
    pub fn take_error(&self) -> Option<(u64, PluginError)> {
        self.errors.take()
    }
}

impl ThrottleControl for PluginThrottle {
    fn raise(&self) {
        let r = (self.module.raise())(self.instance());
        self.errors.record(&self.name, "raise", r);
    }

    fn lower(&self) {
        let r = (self.module.lower())(self.instance());
        self.errors.record(&self.name, "lower", r);
    }
}

impl cuzk_synth::Throttle for PluginThrottle {
    fn checkpoint(&self, worker: usize) {
        let r = (self.module.checkpoint())(self.instance(), worker as u64);
        self.errors.record(&self.name, "checkpoint", r);
    }
}

impl Drop for PluginThrottle {
    fn drop(&mut self) {
        if let Some(i) = self.instance.take() {
            (self.module.destroy())(i);
        }
    }
}

// ---------------------------------------------------------------------------------

struct LockInner {
    name: String,
    module: GpuLockMod_Ref,
    instance: Option<Instance>,
    errors: Errors,
}

impl LockInner {
    fn instance(&self) -> &Instance {
        self.instance.as_ref().expect("instance present until drop")
    }
}

impl Drop for LockInner {
    fn drop(&mut self) {
        if let Some(i) = self.instance.take() {
            (self.module.destroy())(i);
        }
    }
}

/// A GPU-lock plugin as a [`GpuLock`]. Guards keep the plugin instance alive, so a
/// guard may outlive the `PluginGpuLock` it came from.
pub struct PluginGpuLock(Arc<LockInner>);

impl PluginGpuLock {
    pub(crate) fn instantiate(
        lib: Library,
        params: &BTreeMap<String, String>,
    ) -> Result<Self, PluginError> {
        let module = lib
            .root
            .gpu_lock()
            .into_option()
            .ok_or_else(|| missing_module(&lib, "gpu_lock"))?;
        let instance = instantiate(&lib, "gpu_lock", params, module.instantiate())?;
        Ok(Self(Arc::new(LockInner {
            name: lib.name(),
            module,
            instance: Some(instance),
            errors: Errors::default(),
        })))
    }

    pub fn plugin_name(&self) -> &str {
        &self.0.name
    }

    /// See [`PluginDealloc::take_error`] (release failures land here; acquire
    /// failures are in the guard).
    pub fn take_error(&self) -> Option<(u64, PluginError)> {
        self.0.errors.take()
    }

    fn lock(&self, device: usize, scope: LockScope) -> LockGuard {
        let start = Instant::now();
        let inner = &self.0;
        let r = (inner.module.acquire())(inner.instance(), device as u64, scope);
        let waited = start.elapsed();
        match r {
            RResult::ROk(()) => {
                let inner = Arc::clone(&self.0);
                LockGuard::new(waited, move || {
                    let r = (inner.module.release())(inner.instance(), device as u64, scope);
                    inner.errors.record(&inner.name, "release", r);
                })
            }
            RResult::RErr(e) => {
                let e = PluginError::from_abi(&inner.name, "acquire", e);
                tracing::error!(target: "cuzk::plugin", "{e}");
                LockGuard::failed(waited, e.to_string())
            }
        }
    }
}

impl GpuLock for PluginGpuLock {
    fn partition(&self, device: usize) -> LockGuard {
        self.lock(device, LockScope::PARTITION)
    }

    fn region(&self, device: usize, region: Region) -> LockGuard {
        let scope = match region {
            Region::Memory => LockScope::MEMORY,
            Region::Compute => LockScope::COMPUTE,
        };
        self.lock(device, scope)
    }
}

macro_rules! debug_by_name {
    ($($t:ty => $name:expr),*) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t)).field("plugin", &$name(self)).finish()
            }
        }
    )*};
}

debug_by_name! {
    PluginDealloc => |s: &PluginDealloc| s.name.clone(),
    PluginThrottle => |s: &PluginThrottle| s.name.clone(),
    PluginGpuLock => |s: &PluginGpuLock| s.0.name.clone()
}
