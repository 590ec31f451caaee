//! [`Tuning`]: what one backend instance's launches read besides their inputs (its
//! MSM launch parameters and its profiler), owned by that instance and passed by
//! reference to every MSM it enqueues.
//!
//! Why not process-wide statics: two backends in one process (a device each, the
//! engine's critical lane beside the main one, both sides of `cuzk ab`) must each
//! run with their own settings, and profiling one must not switch it on for the
//! other (ARCHITECTURE.md: settings belong to an instance).

use std::sync::Arc;

use crate::config::CudaConfig;
use crate::msm::MsmTuning;
use crate::profile::Profiler;

/// One backend's MSM launch parameters and profiler. A clone shares the profiler
/// (a benchmark's variant of its backend's tuning reports to that backend); a
/// value made by [`Tuning::from_config`] or [`Tuning::default`] has its own.
#[derive(Clone, Debug, Default)]
pub struct Tuning {
    /// The MSM's launch parameters (from `CudaConfig::tuning`).
    pub msm: MsmTuning,
    /// Per-phase device times (on where `CudaConfig::profile` is).
    pub profiler: Arc<Profiler>,
}

impl Tuning {
    /// What `config` sets: its MSM knobs and, with `profile`, a profiler switched
    /// on.
    pub fn from_config(config: &CudaConfig) -> Self {
        Self {
            msm: MsmTuning::from_config(&config.tuning),
            profiler: Arc::new(Profiler::new(config.profile)),
        }
    }

    /// This tuning with other MSM launch parameters, reporting to the same
    /// profiler.
    pub fn with_msm(&self, msm: MsmTuning) -> Self {
        Self {
            msm,
            profiler: Arc::clone(&self.profiler),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CudaTuning;
    use crate::gpu::DeviceCurve as _;
    use crate::msm::{MsmPlan, Scatter, SumVariant};
    use crate::profile::HostMarks;

    /// Two instances' tuning and profilers, configured differently, stay apart: each
    /// derives its own launch parameters, and profiling one leaves the other off
    /// and without reports.
    #[test]
    fn two_instances_tuning_and_profilers_are_independent() {
        let a = Tuning::from_config(&CudaConfig {
            profile: true,
            tuning: CudaTuning {
                msm_sum: SumVariant::CalledProducts,
                ba_min_per: 1,
                ba_group_log: 12,
                ba_waves: 4,
                scatter: Scatter::Window,
                ..CudaTuning::default()
            },
            ..CudaConfig::default()
        });
        let b = Tuning::from_config(&CudaConfig::default());
        assert_eq!(a.msm.sum(), SumVariant::CalledProducts);
        assert_eq!(a.msm.ba_min_per(), 1);
        assert_eq!(a.msm.ba_group_entries(), 1 << 12);
        assert_eq!(a.msm.ba_waves(), 4);
        assert_eq!(b.msm, MsmTuning::default());
        assert_eq!(
            MsmTuning::DEFAULT,
            MsmTuning::from_config(&CudaTuning::default())
        );
        assert_eq!(b.msm.sum(), SumVariant::BatchAffine);
        assert_eq!(b.msm.ba_min_per(), 32);
        assert_eq!(b.msm.ba_group_entries(), 1 << 28);
        assert_eq!(b.msm.ba_waves(), 1);

        // The launch parameters each derives: G1 batch-affine or not, the window
        // group, the threads of a round (132 SMs of 4 blocks), the first round's
        // pairs per thread, the scatter.
        let (g1, g2) = (crate::gpu::G1::XYZZ_BYTES, crate::gpu::G2::XYZZ_BYTES);
        assert!(!a.msm.batch_affine_for(g1) && a.msm.batch_affine_for(g2));
        assert!(b.msm.batch_affine_for(g1) && b.msm.batch_affine_for(g2));
        assert_eq!(a.msm.group_entries_for(g1), 1 << 12);
        assert_eq!(a.msm.group_entries_for(g2), 1 << 11);
        assert_eq!(b.msm.group_entries_for(g1), 1 << 28);
        assert_eq!(a.msm.ba_round_threads(132, 4), 132 * 4 * 128 * 4);
        assert_eq!(b.msm.ba_round_threads(132, 4), 132 * 4 * 128);
        let plan = MsmPlan::for_size(1 << 20);
        let n = 1usize << 20;
        // a: groups of 2^12 entries hold one window of 2^20 terms; b: every window.
        assert_eq!(
            a.msm.ba_first_round_per(g1, 1000, n, plan),
            (n as u64 / 2).div_ceil(1000)
        );
        assert_eq!(
            b.msm.ba_first_round_per(g1, 1000, n, plan),
            (plan.nwin as u64 * n as u64 / 2).div_ceil(1000)
        );
        assert!(a.msm.scatter_per_window(1) && !b.msm.scatter_per_window(1));
        // So their scratch (and the footprint the planner counts) differ too.
        assert_ne!(plan.scratch_bytes(&a.msm, n), plan.scratch_bytes(&b.msm, n));

        // Profiling: a is on, b off; a report filed through a stays a's.
        assert!(a.profiler.enabled() && !b.profiler.enabled());
        let mut marks = HostMarks::start(&a.profiler, || "a's work".into());
        HostMarks::mark(&mut marks, "step");
        HostMarks::finish(marks);
        assert!(HostMarks::start(&b.profiler, || "b's work".into()).is_none());
        b.profiler.set_enabled(true);
        assert!(a.profiler.enabled());
        a.profiler.set_enabled(false);
        assert!(b.profiler.enabled() && !a.profiler.enabled());
        let mut marks = HostMarks::start(&b.profiler, || "b's work".into());
        HostMarks::mark(&mut marks, "step");
        HostMarks::finish(marks);
        let (ra, rb) = (a.profiler.take(), b.profiler.take());
        assert_eq!(ra.len(), 1);
        assert_eq!(ra[0].what, "a's work");
        assert_eq!(rb.len(), 1);
        assert_eq!(rb[0].what, "b's work");
        assert!(a.profiler.take().is_empty());

        // A variant of a's tuning (as a benchmark sweeps one) reports to a's
        // profiler and leaves a's launch parameters as they were.
        let swept = a.with_msm(a.msm.with_sum(SumVariant::BatchAffine));
        assert!(Arc::ptr_eq(&swept.profiler, &a.profiler));
        assert_eq!(a.msm.sum(), SumVariant::CalledProducts);
        assert_eq!(swept.msm.sum(), SumVariant::BatchAffine);
    }

    /// The `with_*` values clamp as the configuration's ranges do (a group of at
    /// least one entry, at least one pair, 1..=16 waves), and the configuration's
    /// ba_group_log is clamped to 10..=30.
    #[test]
    fn msm_tuning_values_are_clamped() {
        let t = MsmTuning::default()
            .with_ba_min_per(0)
            .with_ba_group_entries(0)
            .with_ba_waves(99);
        assert_eq!(
            (t.ba_min_per(), t.ba_group_entries(), t.ba_waves()),
            (1, 1, 16)
        );
        assert_eq!(MsmTuning::default().with_ba_waves(0).ba_waves(), 1);
        let low = MsmTuning::from_config(&CudaTuning {
            ba_group_log: 3,
            ..CudaTuning::default()
        });
        assert_eq!(low.ba_group_entries(), 1 << 10);
    }
}
