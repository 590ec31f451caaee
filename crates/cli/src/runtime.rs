//! A run's configuration: `cuzk.toml` (parsed by `cuzk-config`, shared with the
//! daemon and library users) with command-line overrides applied over it.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use cuzk_config::{BackendNeeds, Built, Config, PipelineConfig, Slot};

/// Flags shared by every command that runs the engine. Each overrides the same
/// setting of `--config`.
#[derive(Args, Debug, Clone, Default)]
pub struct RunArgs {
    /// A `cuzk.toml`: `[engine]` knobs and the plugins or builtins for `[backend]`,
    /// `[dealloc]`, `[throttle]` and `[gpu_lock]` (see the `cuzk-config` crate).
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
    /// GiB of the memory budget held back for critical-priority work such as a
    /// WinningPoSt (0: none; default: learned from the critical jobs seen).
    #[arg(long)]
    pub critical_reserve_gib: Option<f64>,
    /// Synthesis slots only critical-priority partitions may use, beyond
    /// --synth-jobs (0: none; default 1).
    #[arg(long)]
    pub critical_synth_slots: Option<usize>,
    /// A GPU worker per device on a second backend instance, outside the GPU lock,
    /// for critical-priority partitions only (true/false; default: where the
    /// backend drives devices).
    #[arg(long)]
    pub critical_lane: Option<bool>,
    /// a, b, c evaluated by the backend from the witness (true) or by the engine's
    /// spmv stage (false); default: on the backend where it evaluates them on its
    /// device.
    #[arg(long)]
    pub abc_on_backend: Option<bool>,
    /// Do not verify proofs before returning them (for benchmarks).
    #[arg(long)]
    pub no_verify: bool,
}

/// A fully resolved run configuration: the file with the flags applied.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// `cuzk.toml` with every flag applied (recorded whole in manifests).
    pub config: Config,
    /// The pipelined engine's settings, from `config`.
    pub engine: PipelineConfig,
    /// The config file, if any (recorded in manifests).
    pub source: Option<PathBuf>,
    /// The knobs `cuzk bench` took from the planner because the configuration left
    /// them unset (`crate::plan::apply`; recorded in manifests).
    pub applied_plan: Vec<&'static str>,
}

impl RunArgs {
    /// Reads `--config` (if any) and applies the flags over it.
    pub fn resolve(&self) -> Result<RunConfig> {
        let mut config = match &self.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        let set = |slot: &mut Option<Slot>, flag: &Option<String>| {
            if let Some(name) = flag {
                // A flag names a plugin; parameters from the file stay if the file
                // named the same plugin.
                match slot {
                    Some(s) if s.plugin.as_deref() == Some(name.as_str()) => {}
                    _ => *slot = Some(Slot::plugin(name.clone())),
                }
            }
        };
        set(&mut config.backend, &self.backend);
        set(&mut config.dealloc, &self.dealloc);
        set(&mut config.throttle, &self.throttle);
        set(&mut config.gpu_lock, &self.gpu_lock);
        if let Some(d) = &self.plugin_dir {
            config.plugin_dir = Some(d.clone());
        }
        let e = &mut config.engine;
        e.synth_jobs = self.synth_jobs.or(e.synth_jobs);
        e.synth_threads = self.synth_threads.or(e.synth_threads);
        e.gpu_workers_per_device = self.gpu_workers.or(e.gpu_workers_per_device);
        e.gpu_threads = self.gpu_threads.or(e.gpu_threads);
        e.memory_budget_gib = self.memory_budget_gib.or(e.memory_budget_gib);
        e.critical_reserve_gib = self.critical_reserve_gib.or(e.critical_reserve_gib);
        e.critical_synth_slots = self.critical_synth_slots.or(e.critical_synth_slots);
        e.abc_on_backend = self.abc_on_backend.or(e.abc_on_backend);
        e.critical_lane = self.critical_lane.or(e.critical_lane);
        if self.no_verify {
            e.verify = Some(false);
        }
        Ok(RunConfig {
            engine: config.pipeline_config(),
            config,
            source: self.config.clone(),
            applied_plan: Vec::new(),
        })
    }
}

/// Builds the strategies of `cfg` (see [`Config::build_policies`]).
pub fn load_policies(cfg: &RunConfig, needs: &BackendNeeds) -> Result<Built> {
    Ok(cfg.config.build_policies(needs)?)
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
                assert!(cfg.config.backend.is_some(), "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen >= 5, "only {seen} configs in {}", dir.display());

        let cfg = RunArgs {
            config: Some(dir.join("dealloc-bounded.toml")),
            dealloc: Some("bounded".into()),
            gpu_lock: Some("split".into()),
            gpu_threads: Some(3),
            critical_reserve_gib: Some(0.25),
            critical_synth_slots: Some(0),
            abc_on_backend: Some(true),
            critical_lane: Some(false),
            no_verify: true,
            ..RunArgs::default()
        }
        .resolve()
        .unwrap();
        let dealloc = cfg.config.dealloc.unwrap();
        assert_eq!(dealloc.plugin.as_deref(), Some("bounded"));
        assert_eq!(dealloc.text_params("dealloc").unwrap()["depth"], "4");
        assert_eq!(
            cfg.config.gpu_lock.unwrap().plugin.as_deref(),
            Some("split")
        );
        assert_eq!(cfg.engine.gpu_threads, 3);
        assert_eq!(cfg.engine.synth_jobs, Some(2), "the file's value stays");
        assert!(!cfg.engine.verify);
        assert_eq!(cfg.engine.critical_reserve, Some(1 << 28));
        assert_eq!(cfg.engine.critical_synth_slots, 0);
        assert_eq!(cfg.engine.abc_on_backend, Some(true));
        assert_eq!(cfg.engine.critical_lane, Some(false));
        // Recorded in the manifest with the rest of cuzk.toml.
        assert_eq!(cfg.config.engine.critical_reserve_gib, Some(0.25));
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
