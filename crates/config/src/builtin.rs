//! The in-process strategies a slot can name with `builtin = "..."`, with their
//! parameters. An empty slot is the first of each list.
//!
//! | slot       | builtins            | parameters                         |
//! |------------|---------------------|------------------------------------|
//! | `backend`  | `cpu`               | `threads` (0: one per core), `devices` (1: the devices it reports), `tables_mib` (2048: memory for fixed-base tables, 0: none) |
//! | `dealloc`  | `inline`, `bounded` | `bounded`: `depth` (default 4)     |
//! | `throttle` | `off`               |                                    |
//! | `gpu_lock` | `single`, `split`   |                                    |
//!
//! The other strategies (`detached` dealloc, the `flag` throttle, GPU backends) are
//! plugins; a library user may also put any in-process implementation straight into
//! the [`Policies`](cuzk_scheduler::Policies) [`Config::build_policies`](crate::Config::build_policies)
//! returns.

use std::{collections::BTreeMap, str::FromStr, sync::Arc};

use cuzk_alloc::{BoundedDealloc, DeallocPolicy, InlineDealloc};
use cuzk_gpu_backend::{
    lock::{GpuLock, SingleLock, SplitLock},
    CpuBackend, GpuBackend,
};
use cuzk_scheduler::{ThrottlePolicy, Unthrottled};

use crate::ConfigError;

/// The builtin backends.
pub const BACKENDS: &str = "cpu";
/// The builtin deallocation policies.
pub const DEALLOCS: &str = "inline, bounded";
/// The builtin throttles.
pub const THROTTLES: &str = "off";
/// The builtin GPU locks.
pub const GPU_LOCKS: &str = "single, split";

/// A builtin's parameters, each taken at most once; what is left is unknown.
struct Params<'a> {
    slot: &'static str,
    name: &'a str,
    left: BTreeMap<String, String>,
    /// Every parameter taken, with the value used (given or default), for manifests.
    used: BTreeMap<String, String>,
}

impl<'a> Params<'a> {
    fn new(slot: &'static str, name: &'a str, params: &BTreeMap<String, String>) -> Self {
        Self {
            slot,
            name,
            left: params.clone(),
            used: BTreeMap::new(),
        }
    }

    fn get<T: FromStr + std::fmt::Display>(
        &mut self,
        key: &str,
        default: T,
    ) -> Result<T, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        let v = self.get_given(key, default)?;
        self.used.insert(key.into(), v.to_string());
        Ok(v)
    }

    fn get_given<T: FromStr>(&mut self, key: &str, default: T) -> Result<T, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        match self.left.remove(key) {
            None => Ok(default),
            Some(text) => text.trim().parse().map_err(|e| ConfigError::Param {
                slot: self.slot,
                key: key.into(),
                reason: format!("= {text:?} is not valid: {e}"),
            }),
        }
    }

    /// Fails on a parameter the builtin does not take.
    fn done(self) -> Result<(), ConfigError> {
        match self.left.into_keys().next() {
            None => Ok(()),
            Some(key) => Err(ConfigError::Param {
                slot: self.slot,
                key,
                reason: format!("is not a parameter of builtin `{}`", self.name),
            }),
        }
    }
}

fn unknown(slot: &'static str, name: &str, known: &'static str) -> ConfigError {
    ConfigError::UnknownBuiltin {
        slot,
        name: name.into(),
        known,
    }
}

/// The backend `name` (see the module doc).
pub fn backend(
    name: &str,
    params: &BTreeMap<String, String>,
) -> Result<Arc<dyn GpuBackend>, ConfigError> {
    backend_with_params(name, params).map(|(b, _)| b)
}

/// A built backend and every parameter it used (defaults included).
pub type BackendWithParams = (Arc<dyn GpuBackend>, BTreeMap<String, String>);

/// [`backend`], with every parameter it used (defaults included), for manifests.
pub fn backend_with_params(
    name: &str,
    params: &BTreeMap<String, String>,
) -> Result<BackendWithParams, ConfigError> {
    let mut p = Params::new("backend", name, params);
    match name {
        "cpu" => {
            let threads: usize = p.get("threads", 0)?;
            // How many devices it reports (each instance computes the same on
            // the CPU): the several-device path without a GPU.
            let devices: u32 = p.get("devices", 1)?;
            // Fixed-base tables of the bases proven with (CpuBackend::with_tables):
            // 16x a query's memory, so at the default the small circuits proved
            // again and again (PoSt: ~0.9 GiB at 2 KiB) get them and PoRep's do not.
            let tables_mib: usize = p.get("tables_mib", 2048)?;
            let used = std::mem::take(&mut p.used);
            p.done()?;
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("cuzk-backend-{i}"))
                .build()
                .map_err(|e| ConfigError::Build {
                    slot: "backend",
                    name: name.into(),
                    reason: format!("its thread pool: {e}"),
                })?;
            Ok((
                Arc::new(
                    CpuBackend::new(Arc::new(pool))
                        .with_device_count(devices)
                        .with_tables(tables_mib << 20),
                ),
                used,
            ))
        }
        _ => Err(unknown("backend", name, BACKENDS)),
    }
}

/// The deallocation policy `name` (see the module doc).
pub fn dealloc(
    name: &str,
    params: &BTreeMap<String, String>,
) -> Result<Arc<dyn DeallocPolicy>, ConfigError> {
    let mut p = Params::new("dealloc", name, params);
    match name {
        "inline" => {
            p.done()?;
            Ok(Arc::new(InlineDealloc))
        }
        "bounded" => {
            let depth: usize = p.get("depth", 4)?;
            p.done()?;
            let d = BoundedDealloc::new(depth).map_err(|e| ConfigError::Build {
                slot: "dealloc",
                name: name.into(),
                reason: format!("its thread: {e}"),
            })?;
            Ok(Arc::new(d))
        }
        _ => Err(unknown("dealloc", name, DEALLOCS)),
    }
}

/// The throttle `name` (see the module doc).
pub fn throttle(
    name: &str,
    params: &BTreeMap<String, String>,
) -> Result<Arc<dyn ThrottlePolicy>, ConfigError> {
    let p = Params::new("throttle", name, params);
    match name {
        "off" => {
            p.done()?;
            Ok(Arc::new(Unthrottled))
        }
        _ => Err(unknown("throttle", name, THROTTLES)),
    }
}

/// The GPU lock `name` (see the module doc).
pub fn gpu_lock(
    name: &str,
    params: &BTreeMap<String, String>,
) -> Result<Arc<dyn GpuLock>, ConfigError> {
    let p = Params::new("gpu_lock", name, params);
    match name {
        "single" => {
            p.done()?;
            Ok(Arc::new(SingleLock::new()))
        }
        "split" => {
            p.done()?;
            Ok(Arc::new(SplitLock::new()))
        }
        _ => Err(unknown("gpu_lock", name, GPU_LOCKS)),
    }
}
