//! `[engine]`: the pipelined engine's knobs.

use serde::{Deserialize, Serialize};

use cuzk_scheduler::PipelineConfig;

/// The `[engine]` table. A knob left out takes [`PipelineConfig::default`]'s value;
/// the CLI's flags set these fields before [`EngineSection::pipeline_config`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSection {
    /// Partitions in synthesis at once (unset: chosen from the cores and the work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synth_jobs: Option<usize>,
    /// Threads of the synthesis pool (0: all cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synth_threads: Option<usize>,
    /// The devices to prove on, by ordinal (`devices = [0, 1]`): the backend is
    /// opened once per device (a plugin with its `device` parameter set to each;
    /// the builtin CPU backend as that many CPU "devices") and the engine runs
    /// `gpu_workers_per_device` workers and a lock on each. Unset: the backend as
    /// configured, one device (the CUDA plugin's `device` parameter, default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<u32>>,
    /// GPU workers per device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_workers_per_device: Option<usize>,
    /// Threads of the `b_g2_msm` pool (0: all cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_threads: Option<usize>,
    /// Memory budget in GiB for all partitions in flight (unset: the machine's
    /// limit, cgroups included, less a margin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_budget_gib: Option<f64>,
    /// Verify every proof before returning it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<bool>,
    /// Check `a·b = c` before the MSMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_witness: Option<bool>,
    /// B in G2 on the backend (unset: where a device backend offers it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_g2_on_backend: Option<bool>,
    /// `a, b, c` evaluated by the backend from the witness instead of the engine's
    /// spmv stage (unset: where the backend evaluates them on its device, as the
    /// CUDA backend does, unless `check_witness` is set). A partition then holds its
    /// witness instead of `a, b, c` (a third of their size) until its GPU stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abc_on_backend: Option<bool>,
    /// GiB of the memory budget held back for critical-priority work (a
    /// WinningPoSt): other partitions are admitted against the budget less this,
    /// critical ones against the whole budget. 0: none. Unset: learned, the largest
    /// critical job (a partition and its parameters) seen so far, shrunk where it
    /// would keep another job from fitting. Must be below the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_reserve_gib: Option<f64>,
    /// Synthesis slots only critical-priority partitions may use, beyond
    /// `synth_jobs` (0: none; unset: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_synth_slots: Option<usize>,
    /// One more GPU worker per device, on a second instance of the backend and
    /// outside the GPU lock, for critical-priority partitions only: a WinningPoSt
    /// does not wait for the partition already on the GPU (unset: where the
    /// backend drives devices and offers a second instance; true: required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_lane: Option<bool>,
}

impl EngineSection {
    /// These knobs over [`PipelineConfig::default`].
    pub fn pipeline_config(&self) -> PipelineConfig {
        let d = PipelineConfig::default();
        PipelineConfig {
            synth_jobs: self.synth_jobs.or(d.synth_jobs),
            synth_threads: self.synth_threads.unwrap_or(d.synth_threads),
            gpu_workers_per_device: self
                .gpu_workers_per_device
                .unwrap_or(d.gpu_workers_per_device),
            gpu_threads: self.gpu_threads.unwrap_or(d.gpu_threads),
            memory_budget: self.memory_budget_gib.map(gib_to_bytes).or(d.memory_budget),
            verify: self.verify.unwrap_or(d.verify),
            check_witness: self.check_witness.unwrap_or(d.check_witness),
            b_g2_on_backend: self.b_g2_on_backend.or(d.b_g2_on_backend),
            abc_on_backend: self.abc_on_backend.or(d.abc_on_backend),
            critical_reserve: self
                .critical_reserve_gib
                .map(gib_to_bytes)
                .or(d.critical_reserve),
            critical_synth_slots: self.critical_synth_slots.unwrap_or(d.critical_synth_slots),
            critical_lane: self.critical_lane.or(d.critical_lane),
        }
    }
}

/// GiB (a fraction allowed) to bytes; a negative or NaN value is 0.
fn gib_to_bytes(gib: f64) -> u64 {
    (gib * (1u64 << 30) as f64) as u64
}
