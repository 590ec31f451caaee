//! Sizes of one MSM: the window, which windows run together, the buffers.

use super::host::XYZZ_WORDS;
use super::MsmError;

/// Entries one thread of level 0 (affine bases) adds up.
pub(crate) const SEG0: u64 = 64;
/// Entries one thread of the levels above adds up.
pub(crate) const SEG: u64 = 32;
/// Buckets one `bucket_reduce` thread walks.
const BUCKETS_PER_THREAD: u32 = 16;
/// Points one `group_sum` thread adds.
pub(crate) const GROUP: u32 = 16;
/// Counts one scan thread walks.
pub(crate) const SCAN_BLOCK: u32 = 256;
/// Largest window: 2^19 buckets a window (96 MiB of XYZZ buckets).
pub(crate) const MAX_WINDOW_BITS: u32 = 20;

const XYZZ_BYTES: u64 = (XYZZ_WORDS * 4) as u64;

/// Windows of `c` bits for 255-bit scalars with signed digits: `W c >= 256`, so
/// the top window's digit (at most 2^(c-1) with its carry) never carries out.
pub(crate) fn windows(c: u32) -> u32 {
    256u32.div_ceil(c)
}

/// The window minimising `terms W + 3 W 2^(c-1)`: level 0 adds each term once a
/// window; the bucket reduction adds each bucket twice, in full XYZZ additions
/// (~1.4 mixed ones).
pub(crate) fn window_bits(terms: u64) -> u32 {
    (2..=MAX_WINDOW_BITS)
        .min_by_key(|&c| {
            let w = u64::from(windows(c));
            terms * w + 3 * w * (1u64 << (c - 1))
        })
        .unwrap_or(2)
}

/// Everything the dispatches of one MSM need to know about sizes.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub c: u32,
    pub windows: u32,
    /// Buckets a window: 2^(c-1) digit magnitudes.
    pub half: u32,
    /// Windows a pass over the bases handles.
    pub group_windows: u32,
    /// Most entries one (chunk, window group) sorts.
    pub max_entries: u64,
    /// Most entries in at each level: [0] is `max_entries`; levels past the
    /// last are absent.
    pub level_max: Vec<u64>,
    /// Buckets one `bucket_reduce` thread walks, and threads a window.
    pub reduce_per_thread: u32,
    pub reduce_threads: u32,
}

impl Plan {
    /// `terms`: the scalars that are not one (they choose the window);
    /// `max_scalars`, `max_ones`: the most of each in one chunk of bases;
    /// `limit`: the largest buffer (and binding) allowed.
    pub(crate) fn new(
        terms: u64,
        max_scalars: u64,
        max_ones: u64,
        window: Option<u32>,
        limit: u64,
    ) -> Result<Self, MsmError> {
        let c = window
            .unwrap_or_else(|| window_bits(terms))
            .clamp(2, MAX_WINDOW_BITS);
        let windows = windows(c);
        let half = 1u32 << (c - 1);
        let reduce_per_thread = half.min(BUCKETS_PER_THREAD);
        let reduce_threads = half / reduce_per_thread;
        let sizes = |wg: u32| -> [(&'static str, u64); 5] {
            let entries = max_scalars * u64::from(wg) + max_ones;
            let keys = u64::from(wg) * u64::from(half);
            [
                ("the sorted digits", entries * 8),
                (
                    "the partial bucket sums",
                    2 * entries.div_ceil(SEG0) * XYZZ_BYTES,
                ),
                ("the buckets", keys * XYZZ_BYTES),
                ("the bucket counts", keys * 4),
                (
                    "the window partial sums",
                    u64::from(wg) * u64::from(reduce_threads) * XYZZ_BYTES,
                ),
            ]
        };
        let fits = |wg: u32| sizes(wg).iter().all(|&(_, b)| b <= limit);
        if !fits(1) {
            let (what, bytes) = sizes(1)
                .into_iter()
                .find(|&(_, b)| b > limit)
                .expect("one size is over");
            return Err(MsmError::BufferTooBig { what, bytes, limit });
        }
        let most = (1..=windows).rev().find(|&wg| fits(wg)).unwrap_or(1);
        // Equal groups: 16 windows at most 10 a pass run as 8 + 8, not 10 + 6.
        let group_windows = windows.div_ceil(windows.div_ceil(most));
        let max_entries = max_scalars * u64::from(group_windows) + max_ones;
        let mut level_max = vec![max_entries];
        let mut seg = SEG0;
        while let Some(&l) = level_max.last() {
            if l <= seg {
                break;
            }
            level_max.push(2 * l.div_ceil(seg));
            seg = SEG;
        }
        Ok(Self {
            c,
            windows,
            half,
            group_windows,
            max_entries,
            level_max,
            reduce_per_thread,
            reduce_threads,
        })
    }

    /// Keys (buckets) of one window group.
    pub(crate) fn group_keys(&self) -> u64 {
        u64::from(self.group_windows) * u64::from(self.half)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_the_scalar_with_room_for_the_top_carry() {
        for c in 2..=MAX_WINDOW_BITS {
            assert!(windows(c) * c >= 256);
            assert!((windows(c) - 1) * c < 256);
        }
    }

    #[test]
    fn the_window_grows_with_the_terms_and_groups_fit_the_limit() {
        let small = window_bits(1 << 12);
        let big = window_bits(1 << 24);
        assert!(small < big, "{small} {big}");
        assert!(big <= MAX_WINDOW_BITS);
        let p = Plan::new(1 << 24, 1 << 24, 0, None, 1 << 27).unwrap();
        assert!(p.max_entries * 8 <= 1 << 27);
        assert!(p.group_windows < p.windows);
        let levels = &p.level_max;
        assert!(levels.windows(2).all(|w| w[1] < w[0]), "{levels:?}");
        assert!(*levels.last().unwrap() <= SEG0);
        // Nothing fits a tiny limit: a typed error, not a panic.
        assert!(matches!(
            Plan::new(1 << 20, 1 << 20, 0, None, 1 << 10),
            Err(MsmError::BufferTooBig { .. })
        ));
    }
}
