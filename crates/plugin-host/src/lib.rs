//! Loads cuzk plugins and adapts them to the in-process traits the scheduler uses:
//! a backend plugin becomes a [`GpuBackend`](cuzk_gpu_backend::GpuBackend), a
//! dealloc plugin a [`DeallocPolicy`](cuzk_alloc::DeallocPolicy), a throttle plugin
//! both a [`ThrottleControl`](cuzk_alloc::ThrottleControl) and a
//! [`cuzk_synth::Throttle`], a GPU-lock plugin a
//! [`GpuLock`](cuzk_gpu_backend::lock::GpuLock).
//!
//! The scheduler knows nothing of plugins: it is handed trait objects, built either
//! from the in-process defaults or by this crate. That keeps the ABI out of every
//! stage crate, and lets the same proof run through a plugin or in-process so the
//! two can be compared (the crossing costs one indirect call per partition for a
//! backend, and nothing is copied).
//!
//! Loading checks, in order, and stops at the first failure with a [`PluginError`]
//! that says what is wrong: the file exists; it is a shared library; it carries a
//! cuzk plugin header; its ABI version is this host's; abi_stable finds its types
//! identical to ours; it is the kind asked for; its parameters are ones it declares
//! and it accepts their values; a backend offers what the run needs. A plugin that
//! panics or fails later fails that call only. Plugins are never unloaded.
//!
//! Architecture invariant: this crate is the only one that loads libraries or sees
//! `cuzk-plugin-api` types on the host side. It reads no configuration file: a
//! [`PluginSpec`] (name and parameters) says what to load; `cuzk-config` makes them
//! from `cuzk.toml`.

use std::sync::Arc;

use cuzk_plugin_api::{AbiError, ErrorCode, PluginKind};

mod backend;
mod error;
mod load;
mod policies;
mod spec;

pub use backend::{BackendNeeds, PluginBackend};
pub use cuzk_plugin_api::{BaseQuery, PluginKind as Kind, ABI_VERSION};
pub use error::PluginError;
pub use load::{
    check_plugin, declared_params, file_name, list_plugins, ParamInfo, PluginInfo, SearchPath,
};
pub use policies::{PluginDealloc, PluginGpuLock, PluginThrottle};
pub use spec::PluginSpec;

/// Loads the backend `spec` names, instantiates it with its parameters, and checks
/// its capabilities against `needs`.
pub fn load_backend(
    spec: &PluginSpec,
    search: &SearchPath,
    needs: &BackendNeeds,
) -> Result<Arc<PluginBackend>, PluginError> {
    let path = search.resolve(PluginKind::BACKEND, &spec.plugin)?;
    let lib = load::open(&path, Some(PluginKind::BACKEND))?;
    let b = PluginBackend::instantiate(lib, &spec.params)?;
    b.check_needs(needs)?;
    tracing::info!(target: "cuzk::plugin", plugin = %spec.plugin, path = %path.display(), "loaded backend plugin");
    Ok(Arc::new(b))
}

/// Loads and instantiates the dealloc plugin `spec` names.
pub fn load_dealloc(
    spec: &PluginSpec,
    search: &SearchPath,
) -> Result<Arc<PluginDealloc>, PluginError> {
    let path = search.resolve(PluginKind::DEALLOC, &spec.plugin)?;
    let lib = load::open(&path, Some(PluginKind::DEALLOC))?;
    Ok(Arc::new(PluginDealloc::instantiate(lib, &spec.params)?))
}

/// Loads and instantiates the throttle plugin `spec` names.
pub fn load_throttle(
    spec: &PluginSpec,
    search: &SearchPath,
) -> Result<Arc<PluginThrottle>, PluginError> {
    let path = search.resolve(PluginKind::THROTTLE, &spec.plugin)?;
    let lib = load::open(&path, Some(PluginKind::THROTTLE))?;
    Ok(Arc::new(PluginThrottle::instantiate(lib, &spec.params)?))
}

/// Loads and instantiates the GPU-lock plugin `spec` names.
pub fn load_gpu_lock(
    spec: &PluginSpec,
    search: &SearchPath,
) -> Result<Arc<PluginGpuLock>, PluginError> {
    let path = search.resolve(PluginKind::GPU_LOCK, &spec.plugin)?;
    let lib = load::open(&path, Some(PluginKind::GPU_LOCK))?;
    Ok(Arc::new(PluginGpuLock::instantiate(lib, &spec.params)?))
}

/// The error for a plugin that refused to be instantiated.
pub(crate) fn rejected(kind: &'static str, plugin: &str, e: AbiError) -> PluginError {
    if e.code == ErrorCode::PANIC {
        PluginError::from_abi(plugin, "instantiate", e)
    } else {
        PluginError::Rejected {
            kind,
            plugin: plugin.to_string(),
            message: e.message.into_string(),
        }
    }
}
