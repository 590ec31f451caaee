//! [`MsmTuning`]: the MSM's launch parameters, one value per backend instance.

use super::*;
use crate::config::CudaTuning;

/// The MSM's launch parameters, derived from a backend's [`CudaTuning`]
/// ([`MsmTuning::from_config`]) and owned by that backend (its [`crate::Tuning`]):
/// every MSM reads the value it is handed, so two backends in one process each run
/// with their own. The checks and benchmarks build their own values (`with_*`)
/// to reach the rounds and groupings with small inputs or to sweep a knob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmTuning {
    sum: SumVariant,
    sum_g2: SumVariant,
    /// At least 1.
    ba_min_per: u64,
    /// At least 1.
    ba_group_entries: u64,
    /// 1..=16.
    ba_waves: u64,
    scatter: Scatter,
}

impl Default for MsmTuning {
    /// The defaults of [`CudaTuning`]: [`MsmTuning::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl From<&CudaTuning> for MsmTuning {
    fn from(t: &CudaTuning) -> Self {
        Self::from_config(t)
    }
}

impl MsmTuning {
    /// What [`CudaTuning::default`] describes (a test keeps the two equal), as a
    /// constant: what the planner counts a partition's MSM scratch with.
    pub const DEFAULT: Self = Self {
        sum: SumVariant::BatchAffine,
        sum_g2: SumVariant::BatchAffine,
        ba_min_per: batch_affine::BA_MIN_PER,
        ba_group_entries: 1 << batch_affine::BA_GROUP_LOG,
        ba_waves: 1,
        scatter: Scatter::Auto,
    };

    /// The launch parameters `t` describes (a window group of 2^`ba_group_log`
    /// entries, the log clamped to 10..=30; the other values clamped as the
    /// `with_*` methods do).
    pub fn from_config(t: &CudaTuning) -> Self {
        Self {
            sum: t.msm_sum,
            sum_g2: t.msm_sum_g2,
            ba_min_per: 1,
            ba_group_entries: 1,
            ba_waves: 1,
            scatter: t.scatter,
        }
        .with_ba_min_per(t.ba_min_per)
        .with_ba_group_entries(1u64 << t.ba_group_log.clamp(10, 30))
        .with_ba_waves(t.ba_waves)
    }

    /// G1's bucket sums.
    pub fn with_sum(self, v: SumVariant) -> Self {
        Self { sum: v, ..self }
    }

    /// G2's bucket sums.
    pub fn with_sum_g2(self, v: SumVariant) -> Self {
        Self { sum_g2: v, ..self }
    }

    /// The least pairs per thread for which a batch-affine round runs (at least 1;
    /// the rest goes to the XYZZ levels). 1 makes every round affine, at any size:
    /// what the checks use to reach the rounds with small inputs.
    pub fn with_ba_min_per(self, per: u64) -> Self {
        Self {
            ba_min_per: per.max(1),
            ..self
        }
    }

    /// The most sorted entries a window group of the batch-affine sums may hold (at
    /// least 1; at least one window always goes in a group): small values make
    /// small MSMs go a window at a time, as the checks use to reach the grouping
    /// with small inputs.
    pub fn with_ba_group_entries(self, entries: u64) -> Self {
        Self {
            ba_group_entries: entries.max(1),
            ..self
        }
    }

    /// Waves of threads per batch-affine round (clamped to 1..=16).
    pub fn with_ba_waves(self, waves: u64) -> Self {
        Self {
            ba_waves: waves.clamp(1, 16),
            ..self
        }
    }

    /// The scatter's launches.
    pub fn with_scatter(self, scatter: Scatter) -> Self {
        Self { scatter, ..self }
    }

    /// G1's bucket sums.
    pub fn sum(&self) -> SumVariant {
        self.sum
    }

    /// G2's bucket sums.
    pub fn sum_g2(&self) -> SumVariant {
        self.sum_g2
    }

    /// The least pairs per thread for which a batch-affine round runs.
    pub fn ba_min_per(&self) -> u64 {
        self.ba_min_per
    }

    /// The most sorted entries of a batch-affine window group (G1's; G2's groups
    /// hold half as many, the same bytes).
    pub fn ba_group_entries(&self) -> u64 {
        self.ba_group_entries
    }

    /// Waves of threads per batch-affine round.
    pub fn ba_waves(&self) -> u64 {
        self.ba_waves
    }

    pub fn scatter(&self) -> Scatter {
        self.scatter
    }

    /// Whether MSMs over XYZZ points of `xyzz` bytes (G1's 192, G2's 384) sum their
    /// buckets by batch-affine rounds: their curve's [`SumVariant`].
    pub(crate) fn batch_affine_for(&self, xyzz: u64) -> bool {
        let v = if xyzz == G1::XYZZ_BYTES {
            self.sum
        } else {
            self.sum_g2
        };
        v == SumVariant::BatchAffine
    }

    /// The most sorted entries of a window group over XYZZ points of `xyzz` bytes:
    /// [`Self::ba_group_entries`] for G1, half as many for G2, whose points are
    /// twice the bytes, so that a group's scratch is the same for both curves (~20
    /// GB at 2^28 G1 entries).
    pub(crate) fn group_entries_for(&self, xyzz: u64) -> u64 {
        (self.ba_group_entries * G1::XYZZ_BYTES / xyzz.max(1)).max(1)
    }

    /// Threads of one batch-affine round on a device of `sm_count` multiprocessors
    /// that hold `blocks_per_sm` of the round's blocks at once: `ba_waves` waves of
    /// them (k waves: k times fewer pairs per thread, for the A/B against one).
    pub(crate) fn ba_round_threads(&self, sm_count: u32, blocks_per_sm: u32) -> u64 {
        sm_count as u64
            * blocks_per_sm.max(1) as u64
            * batch_affine::BA_BLOCK as u64
            * self.ba_waves
    }

    /// Pairs per thread of the first batch-affine round of an MSM of `n` terms over
    /// XYZZ points of `xyzz` bytes with `plan`, where a round has `wave` threads.
    pub(crate) fn ba_first_round_per(&self, xyzz: u64, wave: u64, n: usize, plan: MsmPlan) -> u64 {
        let group = (self.group_entries_for(xyzz) / (n as u64).max(1)).clamp(1, plan.nwin as u64);
        (group * n as u64 / 2).div_ceil(wave)
    }

    /// Where the scatter goes a window per launch for `slots` bucket slots (all
    /// windows): [`Scatter::Auto`] from [`SCATTER_ALL_MAX_BYTES`] of cursors.
    pub(crate) fn scatter_per_window(&self, slots: usize) -> bool {
        match self.scatter {
            Scatter::Window => true,
            Scatter::All => false,
            Scatter::Auto => slots * 4 > SCATTER_ALL_MAX_BYTES,
        }
    }
}
