//! What to load into one slot: a plugin's name (or path) and its parameters, as
//! text. Parsing `cuzk.toml` into these is `cuzk-config`'s job.

use std::collections::BTreeMap;

/// One plugin slot: which plugin, with which parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginSpec {
    /// A plugin name (looked up in the search path) or a path to the library.
    pub plugin: String,
    pub params: BTreeMap<String, String>,
}

impl PluginSpec {
    pub fn new(plugin: impl Into<String>) -> Self {
        Self {
            plugin: plugin.into(),
            params: BTreeMap::new(),
        }
    }

    /// Sets (or overrides, as a command-line flag does) one parameter.
    pub fn with_param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.insert(key.into(), value.into());
        self
    }
}
