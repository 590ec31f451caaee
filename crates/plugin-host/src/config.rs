//! `cuzk.toml`: which plugin fills each slot, with what parameters.
//!
//! ```toml
//! plugin_dir = "/opt/cuzk/plugins"   # optional; default: next to the binary
//!
//! [backend]
//! plugin = "cpu"                     # a name, or a path to a .so
//! [backend.params]
//! threads = 2
//!
//! [dealloc]
//! plugin = "bounded"
//! params = { depth = 8 }
//!
//! [throttle]
//! plugin = "flag"
//!
//! [gpu_lock]
//! plugin = "single"
//! ```
//!
//! Other top-level tables are left to their owners (the CLI parses its own); inside
//! a plugin table an unknown key is an error, so `plugn = "cpu"` is not ignored.
//! Parameter values may be strings, integers, floats or booleans; plugins receive
//! them as text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::{PluginError, SearchPath};

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

/// The plugin half of `cuzk.toml`. A slot left out means "the in-process default".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Where named plugins are looked up; relative paths are relative to the
    /// config file's directory.
    pub plugin_dir: Option<PathBuf>,
    pub backend: Option<PluginSpec>,
    pub dealloc: Option<PluginSpec>,
    pub throttle: Option<PluginSpec>,
    pub gpu_lock: Option<PluginSpec>,
}

#[derive(Deserialize)]
struct RawConfig {
    plugin_dir: Option<PathBuf>,
    backend: Option<RawSpec>,
    dealloc: Option<RawSpec>,
    throttle: Option<RawSpec>,
    gpu_lock: Option<RawSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    plugin: String,
    #[serde(default)]
    params: BTreeMap<String, toml::Value>,
}

impl Config {
    /// Parses the text of a `cuzk.toml`; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, PluginError> {
        let err = |reason: String| PluginError::Config {
            origin: origin.to_string(),
            reason,
        };
        let raw: RawConfig = toml::from_str(text).map_err(|e| err(e.message().to_string()))?;
        let spec = |section: &str, s: Option<RawSpec>| -> Result<Option<PluginSpec>, PluginError> {
            let Some(s) = s else { return Ok(None) };
            let mut params = BTreeMap::new();
            for (k, v) in s.params {
                let text = match v {
                    toml::Value::String(s) => s,
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Float(f) => f.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    other => {
                        return Err(err(format!(
                        "parameter `{k}` of [{section}] is a {}; use a string, number or boolean",
                        other.type_str()
                    )))
                    }
                };
                params.insert(k, text);
            }
            Ok(Some(PluginSpec {
                plugin: s.plugin,
                params,
            }))
        };
        Ok(Self {
            plugin_dir: raw.plugin_dir,
            backend: spec("backend", raw.backend)?,
            dealloc: spec("dealloc", raw.dealloc)?,
            throttle: spec("throttle", raw.throttle)?,
            gpu_lock: spec("gpu_lock", raw.gpu_lock)?,
        })
    }

    /// Reads and parses `path`; a relative `plugin_dir` becomes relative to the
    /// file's directory.
    pub fn load(path: &Path) -> Result<Self, PluginError> {
        let text = std::fs::read_to_string(path).map_err(|e| PluginError::Config {
            origin: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let mut c = Self::from_toml(&text, &path.display().to_string())?;
        if let (Some(d), Some(base)) = (&c.plugin_dir, path.parent()) {
            if d.is_relative() {
                c.plugin_dir = Some(base.join(d));
            }
        }
        Ok(c)
    }

    /// `plugin_dir` if set, else next to the executable.
    pub fn search_path(&self) -> SearchPath {
        match &self.plugin_dir {
            Some(d) => SearchPath::dir(d),
            None => SearchPath::next_to_exe(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_slot_and_stringifies_params() {
        let c = Config::from_toml(
            r#"
            plugin_dir = "plugins"
            [scheduler]          # someone else's table: ignored here
            workers = 3
            [backend]
            plugin = "cpu"
            [backend.params]
            threads = 2
            [dealloc]
            plugin = "bounded"
            params = { depth = 8, name = "x", fast = true, ratio = 0.5 }
            [throttle]
            plugin = "/abs/libcuzk_plugin_throttle_flag.so"
            [gpu_lock]
            plugin = "split"
            "#,
            "test",
        )
        .unwrap();
        assert_eq!(
            c.backend,
            Some(PluginSpec::new("cpu").with_param("threads", "2"))
        );
        let d = c.dealloc.clone().unwrap();
        assert_eq!(d.params["depth"], "8");
        assert_eq!(d.params["fast"], "true");
        assert_eq!(d.params["ratio"], "0.5");
        assert_eq!(c.gpu_lock.as_ref().unwrap().plugin, "split");
        assert_eq!(c.search_path(), SearchPath::dir("plugins"));
        assert!(Config::from_toml("", "empty").unwrap() == Config::default());
    }

    #[test]
    fn rejects_typos_and_nested_values() {
        let e = Config::from_toml("[backend]\nplugn = \"cpu\"\n", "cuzk.toml").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("cuzk.toml") && msg.contains("plugn"), "{msg}");
        let e = Config::from_toml("[backend]\nplugin = \"cpu\"\nparams = { a = [1] }\n", "t")
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("parameter `a` of [backend] is a array"),
            "{e}"
        );
    }
}
