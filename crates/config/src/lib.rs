//! `cuzk.toml`: the one typed configuration of a cuzk run, parsed once, shared by the
//! CLI, the daemon, the queue worker and library users.
//!
//! ```toml
//! plugin_dir = "/opt/cuzk/plugins"   # optional; default: next to the binary
//!
//! [engine]                           # the pipelined engine's knobs (all optional)
//! synth_jobs = 6
//! gpu_workers_per_device = 2
//! b_g2_on_backend = true
//!
//! [backend]                          # each strategy slot: a plugin or a builtin
//! plugin = "cuda"                    # a name, or a path to a .so
//! params = { device = 0 }
//!
//! [dealloc]
//! builtin = "bounded"                # in-process, no library to ship
//! params = { depth = 8 }
//! ```
//!
//! Central choice: **the whole file is one serde type with `deny_unknown_fields` on
//! every table**, so an unknown table or key anywhere (`[engine] synth_job = 2`,
//! `[deamon]`) is an error that names it with its line, never a silently ignored
//! knob that makes a run measure the default. The price is that every section a
//! program reads must be declared here; that is also the point (one place lists
//! every knob, and the run manifest serialises the same type).
//!
//! # Adding a section
//!
//! A crate that owns a section (the daemon's `[daemon]`, the queue worker's
//! `[queue]`, the Filecoin adapter's `[filecoin]`) adds it in one step: a module here
//! with its typed struct (`#[derive(Debug, Clone, Default, PartialEq, Deserialize,
//! Serialize)]`, `#[serde(deny_unknown_fields)]`, optional fields or serde defaults,
//! documented), and one field of [`Config`]:
//!
//! ```text
//! /// The gRPC daemon (`cuzk-daemon`).
//! #[serde(default, skip_serializing_if = "Option::is_none")]
//! pub daemon: Option<daemon::DaemonSection>,
//! ```
//!
//! Nothing else changes: parsing, unknown-key errors and the manifest follow from
//! the type. Keep validation that needs more than types (a port range, a path that
//! must exist) in a `validate` method the owner calls, so this crate stays free of
//! the owner's dependencies.
//!
//! # Building the strategies
//!
//! [`Config::build_policies`] turns the four slots into the scheduler's
//! [`Policies`]: an empty slot is the in-process default (the CPU backend, inline
//! deallocation, no throttle, one GPU lock per device), `plugin = ...` loads a
//! plugin through `cuzk-plugin-host`, `builtin = ...` builds an in-process strategy
//! by name ([`builtin`] lists them). A library user can replace any field of the
//! returned [`Policies`] (for instance with an in-process `CudaBackend`).
//!
//! Architecture invariant: this crate parses and builds; it runs nothing. It knows
//! the plugin host and the scheduler's types, never a binary's flags (the CLI
//! applies its flags to a [`Config`] after loading it).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod builtin;
pub mod daemon;
mod engine;
mod plan;
mod queue;
mod slot;

pub use cuzk_plugin_host::{BackendNeeds, PluginError, PluginSpec, SearchPath};
pub use cuzk_scheduler::{PipelineConfig, Policies};
pub use engine::EngineSection;
pub use plan::{PlanKind, PlanSection};
pub use queue::{Age, QueueSection};
pub use slot::{Built, PolicySource, Slot};

/// Everything that can be wrong with a `cuzk.toml` or the strategies it names.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("could not read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A syntax error, a wrong type, or an unknown table or key (named, with its
    /// line).
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("[{slot}]: {reason}")]
    Slot { slot: &'static str, reason: String },
    #[error("[{slot}]: no builtin {slot} named `{name}` (builtins: {known})")]
    UnknownBuiltin {
        slot: &'static str,
        name: String,
        known: &'static str,
    },
    #[error("[{slot}]: parameter `{key}` {reason}")]
    Param {
        slot: &'static str,
        key: String,
        reason: String,
    },
    #[error("[{slot}]: could not build builtin `{name}`: {reason}")]
    Build {
        slot: &'static str,
        name: String,
        reason: String,
    },
    /// A section's value the types cannot refuse (`[plan] devices = 0`).
    #[error("[{section}] {reason}")]
    Section {
        section: &'static str,
        reason: String,
    },
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

/// A whole `cuzk.toml`. Every table is optional; an empty file is the defaults.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where named plugins are looked up; relative to the file's directory when
    /// loaded with [`Config::load`]. Default: next to the executable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_dir: Option<PathBuf>,
    /// The pipelined engine's knobs.
    #[serde(default)]
    pub engine: EngineSection,
    /// The backend (H and the G1 MSMs, optionally B in G2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<Slot>,
    /// The deallocation policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dealloc: Option<Slot>,
    /// The throttle (synthesis pauses while `b_g2_msm` runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<Slot>,
    /// The GPU-lock policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_lock: Option<Slot>,
    /// The queue worker's knobs (`cuzk worker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueSection>,
    /// The gRPC daemon (`cuzk serve`, crate `cuzk-daemon`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<daemon::DaemonSection>,
    /// What the planner is told rather than finds (`cuzk plan`, and every
    /// command that plans its knobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSection>,
}

impl Config {
    /// Parses the text of a `cuzk.toml`; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads and parses `path`; a relative `plugin_dir` becomes relative to the
    /// file's directory.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut c = Self::from_toml(&text, &path.display().to_string())?;
        if let (Some(d), Some(base)) = (&c.plugin_dir, path.parent()) {
            if d.is_relative() {
                c.plugin_dir = Some(base.join(d));
            }
        }
        Ok(c)
    }

    /// Checks what the types cannot: each slot names exactly one plugin or builtin,
    /// and parameters are scalars.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, slot) in self.slots() {
            if let Some(slot) = slot {
                slot.validate(name)?;
            }
        }
        if let Some(plan) = &self.plan {
            plan.validate().map_err(|reason| ConfigError::Section {
                section: "plan",
                reason,
            })?;
        }
        Ok(())
    }

    /// The four strategy slots with their table names.
    pub fn slots(&self) -> [(&'static str, Option<&Slot>); 4] {
        [
            ("backend", self.backend.as_ref()),
            ("dealloc", self.dealloc.as_ref()),
            ("throttle", self.throttle.as_ref()),
            ("gpu_lock", self.gpu_lock.as_ref()),
        ]
    }

    /// `plugin_dir` if set, else next to the executable.
    pub fn search_path(&self) -> SearchPath {
        match &self.plugin_dir {
            Some(d) => SearchPath::dir(d),
            None => SearchPath::next_to_exe(),
        }
    }

    /// The pipelined engine's configuration: `[engine]` over the defaults.
    pub fn pipeline_config(&self) -> PipelineConfig {
        self.engine.pipeline_config()
    }

    /// What a backend must offer for this configuration (for the plugin host's
    /// capability check); `log_domain` is the largest NTT domain the run needs.
    pub fn backend_needs(&self, log_domain: Option<u32>) -> BackendNeeds {
        BackendNeeds {
            log_domain,
            // Only an explicit `b_g2_on_backend = true` requires G2; left unset,
            // the engine uses the backend's G2 where it is offered.
            g2: self.engine.b_g2_on_backend == Some(true),
            resident_bases: false,
        }
    }

    /// Builds the strategies the slots name (see the crate doc), checking a backend
    /// against `needs`.
    pub fn build_policies(&self, needs: &BackendNeeds) -> Result<Built, ConfigError> {
        slot::build(self, needs)
    }
}

#[cfg(test)]
mod tests;
