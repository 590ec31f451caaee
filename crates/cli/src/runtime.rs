//! A run's configuration: `cuzk.toml` (engine knobs and plugins) with command-line
//! overrides, turned into the scheduler's `PipelineConfig` and `Policies`.

use std::{path::PathBuf, sync::Arc};

use anyhow::{Context, Result};
use clap::Args;
use cuzk_alloc::{DeallocPolicy, InlineDealloc};
use cuzk_gpu_backend::{lock::GpuLock, lock::SingleLock, CpuBackend, GpuBackend};
use cuzk_plugin_host::{BackendNeeds, Config, PluginSpec, SearchPath};
use cuzk_scheduler::{PipelineConfig, Policies, ThrottlePolicy, Unthrottled};
use serde::Deserialize;

/// Flags shared by every command that runs the engine. Each overrides the same
/// setting of `--config`.
#[derive(Args, Debug, Clone, Default)]
pub struct RunArgs {
    /// A `cuzk.toml`: `[engine]` knobs and the plugins for `[backend]`, `[dealloc]`,
    /// `[throttle]` and `[gpu_lock]`.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Backend plugin (a name such as `cpu` or `cuda`, or a path to a .so).
    #[arg(long)]
    pub backend: Option<String>,
    /// Deallocation plugin: `inline`, `detached`, `bounded`, or a path.
    #[arg(long)]
    pub dealloc: Option<String>,
    /// Throttle plugin: `off`, `flag`, or a path.
    #[arg(long)]
    pub throttle: Option<String>,
    /// GPU-lock plugin: `single`, `split`, or a path.
    #[arg(long)]
    pub gpu_lock: Option<String>,
    /// Where named plugins are looked up (default: next to the cuzk binary).
    #[arg(long)]
    pub plugin_dir: Option<PathBuf>,
    /// Partitions in synthesis at once.
    #[arg(long)]
    pub synth_jobs: Option<usize>,
    /// Threads of the synthesis pool (0: all cores).
    #[arg(long)]
    pub synth_threads: Option<usize>,
    /// GPU workers per device.
    #[arg(long)]
    pub gpu_workers: Option<usize>,
    /// Threads of the b_g2_msm pool (0: all cores).
    #[arg(long)]
    pub gpu_threads: Option<usize>,
    /// Memory budget in GiB for all partitions in flight (default: RAM less a margin).
    #[arg(long)]
    pub memory_budget_gib: Option<f64>,
    /// Do not verify proofs before returning them (for benchmarks).
    #[arg(long)]
    pub no_verify: bool,
}

/// The `[engine]` table of `cuzk.toml`.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
struct EngineTable {
    synth_jobs: Option<usize>,
    synth_threads: Option<usize>,
    gpu_workers_per_device: Option<usize>,
    gpu_threads: Option<usize>,
    memory_budget_gib: Option<f64>,
    verify: Option<bool>,
    check_witness: Option<bool>,
    b_g2_on_backend: Option<bool>,
}

#[derive(Deserialize, Default)]
struct EngineFile {
    #[serde(default)]
    engine: EngineTable,
}

/// A fully resolved run configuration.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub engine: PipelineConfig,
    pub plugins: Config,
    /// The config file, if any (recorded in manifests).
    pub source: Option<PathBuf>,
}

impl RunArgs {
    /// Reads `--config` (if any) and applies the flags over it.
    pub fn resolve(&self) -> Result<RunConfig> {
        let (mut plugins, table) = match &self.config {
            Some(path) => {
                let plugins = Config::load(path)?;
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let file: EngineFile = toml::from_str(&text)
                    .with_context(|| format!("the [engine] table of {}", path.display()))?;
                (plugins, file.engine)
            }
            None => (Config::default(), EngineTable::default()),
        };
        let set = |slot: &mut Option<PluginSpec>, flag: &Option<String>| {
            if let Some(name) = flag {
                // A flag names the plugin; parameters from the file stay if it is
                // the same plugin.
                match slot {
                    Some(spec) if &spec.plugin == name => {}
                    _ => *slot = Some(PluginSpec::new(name.clone())),
                }
            }
        };
        set(&mut plugins.backend, &self.backend);
        set(&mut plugins.dealloc, &self.dealloc);
        set(&mut plugins.throttle, &self.throttle);
        set(&mut plugins.gpu_lock, &self.gpu_lock);
        if let Some(d) = &self.plugin_dir {
            plugins.plugin_dir = Some(d.clone());
        }
        let d = PipelineConfig::default();
        let engine = PipelineConfig {
            synth_jobs: self.synth_jobs.or(table.synth_jobs).unwrap_or(d.synth_jobs),
            synth_threads: self
                .synth_threads
                .or(table.synth_threads)
                .unwrap_or(d.synth_threads),
            gpu_workers_per_device: self
                .gpu_workers
                .or(table.gpu_workers_per_device)
                .unwrap_or(d.gpu_workers_per_device),
            gpu_threads: self
                .gpu_threads
                .or(table.gpu_threads)
                .unwrap_or(d.gpu_threads),
            memory_budget: self
                .memory_budget_gib
                .or(table.memory_budget_gib)
                .map(|g| (g * (1u64 << 30) as f64) as u64),
            verify: !self.no_verify && table.verify.unwrap_or(d.verify),
            check_witness: table.check_witness.unwrap_or(d.check_witness),
            b_g2_on_backend: table.b_g2_on_backend.unwrap_or(d.b_g2_on_backend),
        };
        Ok(RunConfig {
            engine,
            plugins,
            source: self.config.clone(),
        })
    }
}

/// The loaded strategies, with the plugin files they came from.
pub struct Loaded {
    pub policies: Policies,
    /// (slot, plugin name or "in-process", path if a plugin)
    pub sources: Vec<(&'static str, String, Option<PathBuf>)>,
}

fn resolve_path(
    search: &SearchPath,
    kind: cuzk_plugin_host::Kind,
    spec: &PluginSpec,
) -> Option<PathBuf> {
    search.resolve(kind, &spec.plugin).ok()
}

/// Loads the plugins of `cfg` (in-process defaults for empty slots: the CPU
/// backend, inline dealloc, no throttle, a single GPU lock).
pub fn load_policies(cfg: &RunConfig, needs: &BackendNeeds) -> Result<Loaded> {
    let search = cfg.plugins.search_path();
    let mut sources = Vec::new();
    let backend: Arc<dyn GpuBackend> = match &cfg.plugins.backend {
        Some(spec) => {
            let b = cuzk_plugin_host::load_backend(spec, &search, needs)?;
            sources.push((
                "backend",
                spec.plugin.clone(),
                resolve_path(&search, cuzk_plugin_host::Kind::BACKEND, spec),
            ));
            b
        }
        None => {
            sources.push(("backend", "cpu (in-process)".into(), None));
            let pool = rayon::ThreadPoolBuilder::new()
                .thread_name(|i| format!("cuzk-backend-{i}"))
                .build()
                .context("building the CPU backend's pool")?;
            Arc::new(CpuBackend::new(Arc::new(pool)))
        }
    };
    let dealloc: Arc<dyn DeallocPolicy> = match &cfg.plugins.dealloc {
        Some(spec) => {
            sources.push((
                "dealloc",
                spec.plugin.clone(),
                resolve_path(&search, cuzk_plugin_host::Kind::DEALLOC, spec),
            ));
            cuzk_plugin_host::load_dealloc(spec, &search)?
        }
        None => {
            sources.push(("dealloc", "inline (in-process)".into(), None));
            Arc::new(InlineDealloc)
        }
    };
    let throttle: Arc<dyn ThrottlePolicy> = match &cfg.plugins.throttle {
        Some(spec) => {
            sources.push((
                "throttle",
                spec.plugin.clone(),
                resolve_path(&search, cuzk_plugin_host::Kind::THROTTLE, spec),
            ));
            cuzk_plugin_host::load_throttle(spec, &search)?
        }
        None => {
            sources.push(("throttle", "off (in-process)".into(), None));
            Arc::new(Unthrottled)
        }
    };
    let lock: Arc<dyn GpuLock> = match &cfg.plugins.gpu_lock {
        Some(spec) => {
            sources.push((
                "gpu_lock",
                spec.plugin.clone(),
                resolve_path(&search, cuzk_plugin_host::Kind::GPU_LOCK, spec),
            ));
            cuzk_plugin_host::load_gpu_lock(spec, &search)?
        }
        None => {
            sources.push(("gpu_lock", "single (in-process)".into(), None));
            Arc::new(SingleLock::new())
        }
    };
    Ok(Loaded {
        policies: Policies {
            backend,
            dealloc,
            throttle,
            lock,
        },
        sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shipped example configuration parses, and flags override the file.
    #[test]
    fn shipped_configs_parse_and_flags_override_them() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let cfg = RunArgs {
                    config: Some(path.clone()),
                    ..RunArgs::default()
                }
                .resolve()
                .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                assert!(cfg.plugins.backend.is_some(), "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen >= 5, "only {seen} configs in {}", dir.display());

        let cfg = RunArgs {
            config: Some(dir.join("dealloc-bounded.toml")),
            dealloc: Some("bounded".into()),
            gpu_lock: Some("split".into()),
            gpu_threads: Some(3),
            no_verify: true,
            ..RunArgs::default()
        }
        .resolve()
        .unwrap();
        let dealloc = cfg.plugins.dealloc.unwrap();
        assert_eq!(dealloc.plugin, "bounded");
        assert_eq!(dealloc.params.get("depth").map(String::as_str), Some("4"));
        assert_eq!(cfg.plugins.gpu_lock.unwrap().plugin, "split");
        assert_eq!(cfg.engine.gpu_threads, 3);
        assert!(!cfg.engine.verify);
    }

    #[test]
    fn an_unknown_engine_knob_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "[engine]\nsynth_job = 2\n").unwrap();
        let err = RunArgs {
            config: Some(path),
            ..RunArgs::default()
        }
        .resolve()
        .unwrap_err();
        assert!(format!("{err:#}").contains("synth_job"), "{err:#}");
    }
}
