use std::path::PathBuf;

use cuzk_plugin_api::{AbiError, ErrorCode};

/// Everything that can go wrong finding, loading, configuring or calling a plugin.
/// None of these crash the process: a bad plugin is reported and the caller decides.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("no {kind} plugin named `{name}`: looked for {file} in {searched}")]
    NotFound {
        kind: &'static str,
        name: String,
        file: String,
        searched: String,
    },
    #[error("the plugin file {} does not exist", path.display())]
    Missing { path: PathBuf },
    #[error("{} could not be loaded as a shared library: {reason}", path.display())]
    Open { path: PathBuf, reason: String },
    #[error("{} is not a cuzk plugin: {reason}", path.display())]
    NotAPlugin { path: PathBuf, reason: String },
    #[error(
        "{} was built against cuzk plugin ABI version {found}, but this cuzk loads version \
         {expected}: rebuild the plugin against this cuzk's cuzk-plugin-api",
        path.display()
    )]
    AbiVersion {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    #[error(
        "{} declares cuzk plugin ABI version {version}, but its types do not match this \
         cuzk's (rebuild it against this cuzk's cuzk-plugin-api): {detail}",
        path.display()
    )]
    Layout {
        path: PathBuf,
        version: u32,
        detail: String,
    },
    #[error("{} is a {found} plugin, but a {expected} plugin was asked for", path.display())]
    WrongKind {
        path: PathBuf,
        expected: &'static str,
        found: &'static str,
    },
    #[error("{kind} plugin `{plugin}` has no parameter `{key}` ({known})")]
    UnknownParameter {
        kind: &'static str,
        plugin: String,
        key: String,
        known: String,
    },
    #[error("{kind} plugin `{plugin}` could not be created: {message}")]
    Rejected {
        kind: &'static str,
        plugin: String,
        message: String,
    },
    #[error("backend plugin `{plugin}` cannot run this proof: {missing}")]
    MissingCapability { plugin: String, missing: String },
    #[error("plugin `{plugin}` panicked in {call}: {message}")]
    Panicked {
        plugin: String,
        call: &'static str,
        message: String,
    },
    #[error("plugin `{plugin}` failed in {call}: {message} ({code})")]
    Failed {
        plugin: String,
        call: &'static str,
        code: &'static str,
        message: String,
    },
}

impl PluginError {
    /// The host-side error for an [`AbiError`] a plugin returned from `call`.
    pub(crate) fn from_abi(plugin: &str, call: &'static str, e: AbiError) -> Self {
        let plugin = plugin.to_string();
        let message = e.message.into_string();
        if e.code == ErrorCode::PANIC {
            Self::Panicked {
                plugin,
                call,
                message,
            }
        } else {
            Self::Failed {
                plugin,
                call,
                code: e.code.name(),
                message,
            }
        }
    }
}
