//! The strategy slots (`[backend]`, `[dealloc]`, `[throttle]`, `[gpu_lock]`) and
//! building them into the scheduler's [`Policies`].

use std::{collections::BTreeMap, path::PathBuf, sync::Arc};

use cuzk_alloc::DeallocPolicy;
use cuzk_gpu_backend::{lock::GpuLock, DeviceLane, DeviceSet, GpuBackend};
use cuzk_plugin_host::{BackendNeeds, Kind, PluginSpec, SearchPath};
use cuzk_scheduler::{Policies, ThrottlePolicy};
use serde::{Deserialize, Serialize};

use crate::{builtin, Config, ConfigError};

/// One strategy slot: exactly one of `plugin` (a plugin's name or path, loaded by
/// the plugin host) and `builtin` (an in-process strategy by name, see
/// [`builtin`]), with its parameters.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Slot {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<String>,
    /// Strings, integers, floats or booleans; plugins receive them as text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, toml::Value>,
}

impl Slot {
    /// A slot that loads the plugin `name` (a name or a path).
    pub fn plugin(name: impl Into<String>) -> Self {
        Self {
            plugin: Some(name.into()),
            ..Self::default()
        }
    }

    /// A slot with the in-process strategy `name`.
    pub fn builtin(name: impl Into<String>) -> Self {
        Self {
            builtin: Some(name.into()),
            ..Self::default()
        }
    }

    /// Sets one parameter (as a command-line flag would).
    pub fn with_param(mut self, key: impl Into<String>, value: impl Into<toml::Value>) -> Self {
        self.params.insert(key.into(), value.into());
        self
    }

    /// The plugin's or builtin's name.
    pub fn name(&self) -> &str {
        self.plugin
            .as_deref()
            .or(self.builtin.as_deref())
            .unwrap_or("")
    }

    pub(crate) fn validate(&self, slot: &'static str) -> Result<(), ConfigError> {
        let reason = match (&self.plugin, &self.builtin) {
            (Some(_), Some(_)) => Some("set `plugin` or `builtin`, not both"),
            (None, None) => Some("set `plugin` (a plugin's name or path) or `builtin`"),
            _ => None,
        };
        if let Some(reason) = reason {
            return Err(ConfigError::Slot {
                slot,
                reason: reason.into(),
            });
        }
        self.text_params(slot).map(|_| ())
    }

    /// The parameters as text (how plugins receive them).
    pub fn text_params(&self, slot: &'static str) -> Result<BTreeMap<String, String>, ConfigError> {
        self.params
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Float(f) => f.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    other => {
                        return Err(ConfigError::Param {
                            slot,
                            key: k.clone(),
                            reason: format!(
                                "is a {}; use a string, number or boolean",
                                other.type_str()
                            ),
                        })
                    }
                };
                Ok((k.clone(), text))
            })
            .collect()
    }

    /// The plugin host's spec for a `plugin` slot.
    pub fn plugin_spec(&self, slot: &'static str) -> Result<Option<PluginSpec>, ConfigError> {
        let Some(plugin) = &self.plugin else {
            return Ok(None);
        };
        Ok(Some(PluginSpec {
            plugin: plugin.clone(),
            params: self.text_params(slot)?,
        }))
    }
}

/// Where one strategy came from, for run manifests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicySource {
    /// The slot: `backend`, `dealloc`, `throttle` or `gpu_lock`.
    pub slot: &'static str,
    /// The plugin's or builtin's name; `(default)` marks an empty slot.
    pub name: String,
    /// Whether it runs in-process (a builtin or the default).
    pub in_process: bool,
    /// The plugin's file, for a plugin.
    pub path: Option<PathBuf>,
    /// Its parameters: a plugin's as given, a builtin backend's as used (defaults
    /// included).
    pub params: BTreeMap<String, String>,
}

/// The strategies a [`Config`] names, and where each came from.
pub struct Built {
    pub policies: Policies,
    pub sources: Vec<PolicySource>,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Built")
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}

/// What one slot resolves to before it is built.
enum Source<'a> {
    Default(&'static str),
    Builtin(&'a str),
    Plugin(PluginSpec, PathBuf),
}

fn source<'a>(
    slot_name: &'static str,
    slot: Option<&'a Slot>,
    kind: Kind,
    search: &SearchPath,
    default: &'static str,
) -> Result<Source<'a>, ConfigError> {
    let Some(slot) = slot else {
        return Ok(Source::Default(default));
    };
    slot.validate(slot_name)?;
    if let Some(spec) = slot.plugin_spec(slot_name)? {
        let path = search.resolve(kind, &spec.plugin)?;
        return Ok(Source::Plugin(spec, path));
    }
    Ok(Source::Builtin(slot.builtin.as_deref().unwrap_or(default)))
}

impl Source<'_> {
    fn record(&self, slot: &'static str) -> PolicySource {
        match self {
            Source::Default(name) => PolicySource {
                slot,
                name: format!("{name} (default)"),
                in_process: true,
                path: None,
                params: BTreeMap::new(),
            },
            Source::Builtin(name) => PolicySource {
                slot,
                name: name.to_string(),
                in_process: true,
                path: None,
                params: BTreeMap::new(),
            },
            Source::Plugin(spec, path) => PolicySource {
                slot,
                name: spec.plugin.clone(),
                in_process: false,
                path: Some(path.clone()),
                params: spec.params.clone(),
            },
        }
    }
}

/// A builtin's parameters: the slot's, none for an empty slot.
fn params(
    slot_name: &'static str,
    slot: Option<&Slot>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    slot.map_or(Ok(BTreeMap::new()), |s| s.text_params(slot_name))
}

pub(crate) fn build(cfg: &Config, needs: &BackendNeeds) -> Result<Built, ConfigError> {
    let search = cfg.search_path();
    let mut sources = Vec::with_capacity(4);

    let slot = cfg.backend.as_ref();
    let src = source("backend", slot, Kind::BACKEND, &search, "cpu")?;
    sources.push(src.record("backend"));
    let builtin_params = std::cell::RefCell::new(None);
    let open_one = |device: Option<u32>| -> Result<Arc<dyn GpuBackend>, ConfigError> {
        Ok(match &src {
            Source::Plugin(spec, _) => {
                let spec = match device {
                    Some(d) => spec.clone().with_param("device", d.to_string()),
                    None => spec.clone(),
                };
                cuzk_plugin_host::load_backend(&spec, &search, needs)?
            }
            Source::Default(name) | Source::Builtin(name) => {
                let (b, used) = builtin::backend_with_params(name, &params("backend", slot)?)?;
                builtin_params.borrow_mut().get_or_insert(used);
                b
            }
        })
    };
    let lanes = |ordinals: &mut dyn Iterator<Item = u32>,
                 first: Option<Arc<dyn GpuBackend>>|
     -> Result<Arc<dyn GpuBackend>, ConfigError> {
        let mut first = first;
        let lanes = ordinals
            .map(|ordinal| {
                let backend = match first.take() {
                    Some(b) => b,
                    None => open_one(Some(ordinal))?,
                };
                Ok(DeviceLane { ordinal, backend })
            })
            .collect::<Result<Vec<_>, ConfigError>>()?;
        Ok(Arc::new(DeviceSet::new(lanes).map_err(|e| {
            ConfigError::Slot {
                slot: "engine",
                reason: format!("devices: {e}"),
            }
        })?))
    };
    let backend: Arc<dyn GpuBackend> = match &cfg.engine.devices {
        None => {
            // All the devices the backend sees: the instance opened without a
            // device drives device 0, one more is opened for each other.
            let probe = open_one(None)?;
            let count = probe.device_count();
            let pinned =
                matches!(&src, Source::Plugin(spec, _) if spec.params.contains_key("device"));
            if count > 1 && !pinned {
                lanes(&mut (0..count), Some(probe))?
            } else {
                probe
            }
        }
        Some(devices) => {
            if let Source::Plugin(spec, _) = &src {
                if spec.params.contains_key("device") {
                    return Err(ConfigError::Slot {
                        slot: "backend",
                        reason: "`device` is set here and `devices` in [engine]: choose the devices in [engine] only".into(),
                    });
                }
            }
            // One backend per device, each opened on its own ordinal.
            lanes(&mut devices.iter().copied(), None)?
        }
    };
    if let Some(used) = builtin_params.into_inner() {
        sources[0].params = used;
    }
    if needs.g2 && !backend.capabilities().g2 {
        return Err(ConfigError::Slot {
            slot: "backend",
            reason: format!(
                "`b_g2_on_backend = true` but the backend `{}` does not offer B in G2",
                backend.capabilities().name
            ),
        });
    }

    let slot = cfg.dealloc.as_ref();
    let src = source("dealloc", slot, Kind::DEALLOC, &search, "inline")?;
    sources.push(src.record("dealloc"));
    let dealloc: Arc<dyn DeallocPolicy> = match &src {
        Source::Plugin(spec, _) => cuzk_plugin_host::load_dealloc(spec, &search)?,
        Source::Default(name) | Source::Builtin(name) => {
            builtin::dealloc(name, &params("dealloc", slot)?)?
        }
    };

    let slot = cfg.throttle.as_ref();
    let src = source("throttle", slot, Kind::THROTTLE, &search, "off")?;
    sources.push(src.record("throttle"));
    let throttle: Arc<dyn ThrottlePolicy> = match &src {
        Source::Plugin(spec, _) => cuzk_plugin_host::load_throttle(spec, &search)?,
        Source::Default(name) | Source::Builtin(name) => {
            builtin::throttle(name, &params("throttle", slot)?)?
        }
    };

    let slot = cfg.gpu_lock.as_ref();
    let src = source("gpu_lock", slot, Kind::GPU_LOCK, &search, "single")?;
    sources.push(src.record("gpu_lock"));
    let lock: Arc<dyn GpuLock> = match &src {
        Source::Plugin(spec, _) => cuzk_plugin_host::load_gpu_lock(spec, &search)?,
        Source::Default(name) | Source::Builtin(name) => {
            builtin::gpu_lock(name, &params("gpu_lock", slot)?)?
        }
    };

    Ok(Built {
        policies: Policies {
            backend,
            dealloc,
            throttle,
            lock,
        },
        sources,
    })
}
