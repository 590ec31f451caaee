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

/// A policy plugin's kind module, as the adapters below need it.
trait PolicyModule: Copy {
    const KIND: &'static str;
    fn of(lib: &Library) -> Option<Self>;
    fn instantiate_fn(self) -> extern "C" fn(RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>;
    fn destroy_fn(self) -> extern "C" fn(Instance);
}

macro_rules! policy_module {
    ($($t:ty => $kind:literal, $get:ident;)*) => {$(
        impl PolicyModule for $t {
            const KIND: &'static str = $kind;
            fn of(lib: &Library) -> Option<Self> {
                lib.root.$get().into_option()
            }
            fn instantiate_fn(
                self,
            ) -> extern "C" fn(RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError> {
                self.instantiate()
            }
            fn destroy_fn(self) -> extern "C" fn(Instance) {
                self.destroy()
            }
        }
    )*};
}

policy_module! {
    DeallocMod_Ref => "dealloc", dealloc;
    ThrottleMod_Ref => "throttle", throttle;
    GpuLockMod_Ref => "gpu_lock", gpu_lock;
}

/// What every policy adapter holds: the plugin's name, its kind module, its
/// instance (destroyed on drop) and the errors its calls returned.
struct Plugged<M: PolicyModule> {
    name: String,
    module: M,
    instance: Option<Instance>,
    errors: Errors,
}

impl<M: PolicyModule> Plugged<M> {
    fn new(lib: Library, params: &BTreeMap<String, String>) -> Result<Self, PluginError> {
        let module = M::of(&lib).ok_or_else(|| missing_module(&lib, M::KIND))?;
        let instance = instantiate(&lib, M::KIND, params, module.instantiate_fn())?;
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

    fn record(&self, call: &'static str, r: RResult<(), AbiError>) {
        self.errors.record(&self.name, call, r);
    }
}

impl<M: PolicyModule> Drop for Plugged<M> {
    fn drop(&mut self) {
        if let Some(i) = self.instance.take() {
            (self.module.destroy_fn())(i);
        }
    }
}

// ---------------------------------------------------------------------------------

/// A dealloc plugin as a [`DeallocPolicy`].
pub struct PluginDealloc(Plugged<DeallocMod_Ref>);

impl PluginDealloc {
    pub(crate) fn instantiate(
        lib: Library,
        params: &BTreeMap<String, String>,
    ) -> Result<Self, PluginError> {
        Plugged::new(lib, params).map(Self)
    }

    pub fn plugin_name(&self) -> &str {
        &self.0.name
    }

    /// The last error the plugin returned and how many it returned since the last
    /// call (the buffers involved were freed regardless).
    pub fn take_error(&self) -> Option<(u64, PluginError)> {
        self.0.errors.take()
    }
}

impl DeallocPolicy for PluginDealloc {
    fn release(&self, buf: Released) {
        let (bytes, label) = (buf.bytes() as u64, buf.label());
        // Dropping the `Released` frees it, so the plugin's dropper is the host's
        // own destructor: whatever thread the plugin runs it on, the host allocator
        // frees the memory.
        let buf = ReleasedBuf::from_value(buf, bytes, label);
        let p = &self.0;
        p.record("release", (p.module.release())(p.instance(), buf));
    }

    fn drain(&self) {
        let p = &self.0;
        p.record("drain", (p.module.drain())(p.instance()));
    }
}

// ---------------------------------------------------------------------------------

/// A throttle plugin as both halves of the flag: [`ThrottleControl`] for the stage
/// that raises it, [`cuzk_synth::Throttle`] for the synthesis workers.
pub struct PluginThrottle(Plugged<ThrottleMod_Ref>);

impl PluginThrottle {
    pub(crate) fn instantiate(
        lib: Library,
        params: &BTreeMap<String, String>,
    ) -> Result<Self, PluginError> {
        Plugged::new(lib, params).map(Self)
    }

    pub fn plugin_name(&self) -> &str {
        &self.0.name
    }

    /// See [`PluginDealloc::take_error`].
    pub fn take_error(&self) -> Option<(u64, PluginError)> {
        self.0.errors.take()
    }
}

impl ThrottleControl for PluginThrottle {
    fn raise(&self) {
        let p = &self.0;
        p.record("raise", (p.module.raise())(p.instance()));
    }

    fn lower(&self) {
        let p = &self.0;
        p.record("lower", (p.module.lower())(p.instance()));
    }
}

impl cuzk_synth::Throttle for PluginThrottle {
    fn checkpoint(&self, worker: usize) {
        let p = &self.0;
        p.record(
            "checkpoint",
            (p.module.checkpoint())(p.instance(), worker as u64),
        );
    }
}

// ---------------------------------------------------------------------------------

/// A GPU-lock plugin as a [`GpuLock`]. Guards keep the plugin instance alive, so a
/// guard may outlive the `PluginGpuLock` it came from.
pub struct PluginGpuLock(Arc<Plugged<GpuLockMod_Ref>>);

impl PluginGpuLock {
    pub(crate) fn instantiate(
        lib: Library,
        params: &BTreeMap<String, String>,
    ) -> Result<Self, PluginError> {
        Plugged::new(lib, params).map(|p| Self(Arc::new(p)))
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
                    inner.record("release", r);
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
    ($($t:ty),*) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t)).field("plugin", &self.plugin_name()).finish()
            }
        }
    )*};
}

debug_by_name!(PluginDealloc, PluginThrottle, PluginGpuLock);
