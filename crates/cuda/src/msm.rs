//! G1 and G2 multi-scalar multiplication on the device (see `kernels/msm.cu`).
//!
//! The code is written once over [`DeviceCurve`] (G1, G2: point types, kernel
//! names, the conversion of results); the curve follows from the bases' type, so
//! `msm(gpu, &bases, ..)` needs no annotation.
//!
//! Every MSM is enqueued on the compute stream and returns a [`PendingSum`]: a few
//! XYZZ points still on the device (one per window, or one for a plain sum). Reading
//! them back is the wait, scoped to the stream; the final combination of window sums
//! (c doublings per window, 16 windows at most) runs on the host in microseconds.
//! G1's batch-affine bucket sums (the default, [`SumVariant::BatchAffine`]) read
//! one more value back before their rounds, the fullest bucket's count (a
//! stream-scoped wait for the histogram), to know how many rounds to enqueue.
//!
//! Bucket sums, G1 by default: batch-affine rounds (affine additions sharing one
//! binary-GCD inversion per thread, while a round gives each thread at least 32
//! pairs), then XYZZ levels for what is left; G2 and small MSMs: XYZZ levels only.

use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig};
use group::Group;

use crate::error::CudaError;
use crate::gpu::{grid, CurvePoint, DeviceCurve, FrRepr, Gpu, G1};
use crate::profile::Phases;
use crate::Tuning;

mod batch_affine;
mod ones;
#[cfg(test)]
mod tests;
mod tuning;

use batch_affine::{ba_bucket_sums, ba_first_round_per};
pub(crate) use batch_affine::{BA_GROUP_LOG, BA_MIN_PER};
pub use ones::{ones_scratch_bytes, ones_sum};
pub use tuning::MsmTuning;

/// How scalars are stored on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarFormat {
    /// blstrs `Scalar` bytes (Montgomery form), e.g. H's coefficients.
    Montgomery = 0,
    /// Canonical little-endian limbs below 2^255 (prep_msm's tail scalars).
    Canonical = 1,
}

/// Window size and the derived counts for an MSM of `n` points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmPlan {
    /// Window bits.
    pub c: u32,
    /// Windows: c · nwin >= 256, so signed digits of a scalar below 2^255 never
    /// carry out of the top window.
    pub nwin: u32,
    /// Buckets per window: digit magnitudes 1..=2^(c-1).
    pub nb: u32,
    /// Segments per window in the bucket reduction.
    pub segs: u32,
    /// Most points (then partial sums) one thread adds up in the bucket sums.
    pub piece: u32,
    /// Cut each bucket into pieces of equal length (at most `piece`) instead of full
    /// pieces and one short rest, so the threads of a warp, which take neighbouring
    /// pieces, finish together when buckets hold a few pieces each (wide windows).
    pub balanced: bool,
}

impl MsmPlan {
    pub fn for_window(c: u32) -> Self {
        let c = c.clamp(2, 22);
        let nb = 1u32 << (c - 1);
        Self {
            c,
            nwin: 256u32.div_ceil(c),
            nb,
            segs: (nb / SEGMENT_LEN).max(1),
            piece: PIECE,
            balanced: false,
        }
    }

    /// This plan with pieces of at most `piece` points, balanced or not.
    pub fn with_pieces(self, piece: u32, balanced: bool) -> Self {
        Self {
            piece: piece.clamp(2, 1024),
            balanced,
            ..self
        }
    }

    /// The default window for `n` points: the c that minimises the modelled cost
    /// W·n + W·2^(c-1)·BUCKET_COST with W = ceil(256 / c) windows — one mixed addition
    /// per (term, window) against the per-bucket work of the level sums and the window
    /// reduction — up to MAX_WINDOW. Only the window count matters for the first
    /// term, so a c that buys no fewer windows than c − 1 never wins.
    pub fn for_size(n: usize) -> Self {
        let n = n.max(1) as u64;
        if n >= WIDE_FROM {
            return Self::for_window(WIDE_WINDOW).with_pieces(32, true);
        }
        let cost = |c: u32| {
            let w = 256u64.div_ceil(c as u64);
            w * n + w * (1u64 << (c - 1)) * BUCKET_COST
        };
        let c = (MIN_WINDOW..=MAX_WINDOW)
            .min_by_key(|&c| (cost(c), c))
            .unwrap_or(MIN_WINDOW);
        // Pieces of 32 where buckets hold a few hundred points at most (measured
        // faster at 2^24, c = 16), 64 where they hold thousands (faster at 2^26).
        let per_bucket = n >> (c - 1);
        let piece = if per_bucket <= 512 { 32 } else { PIECE };
        Self::for_window(c).with_pieces(piece, true)
    }

    /// Device bytes the MSM's scratch buffers take for `n` scalars (G1 points)
    /// with `tuning`.
    pub fn scratch_bytes(&self, tuning: &MsmTuning, n: usize) -> u64 {
        self.scratch_bytes_for(tuning, n, 192)
    }

    /// [`Self::scratch_bytes`] for XYZZ points of `xyzz` bytes (192 for G1, 384
    /// for G2): the XYZZ levels' scratch, and with batch-affine rounds (the
    /// curve's [`SumVariant`] in `tuning`) theirs besides.
    pub fn scratch_bytes_for(&self, tuning: &MsmTuning, n: usize, xyzz: u64) -> u64 {
        self.level_scratch_bytes(n, xyzz)
            + if tuning.batch_affine_for(xyzz) {
                // A window group's first round (affine outputs, half an XYZZ point,
                // and running products, a quarter) and the second round's outputs
                // next to it.
                let group =
                    (tuning.group_entries_for(xyzz) / (n as u64).max(1)).clamp(1, self.nwin as u64);
                let g = group * n as u64 + group * self.nb as u64;
                let affine = xyzz / 2;
                g / 2 * (affine + affine / 2) + g / 4 * affine
            } else {
                0
            }
    }

    /// The scratch of the sort and the XYZZ levels for XYZZ points of `xyzz` bytes.
    fn level_scratch_bytes(&self, n: usize, xyzz: u64) -> u64 {
        let slots = self.nwin as u64 * self.nb as u64;
        let entries = self.nwin as u64 * n as u64;
        // counts/offsets/cursors + two per level, the sorted entries, the first two
        // levels' piece sums (a level and the next coexist), the buckets and the
        // reduction partials.
        slots * 4 * 3
            + slots * 4 * 2 * 6
            + entries * 4
            + (entries / self.piece as u64 + slots) * xyzz
            + (entries / (self.piece as u64 * self.piece as u64) + 2 * slots) * xyzz
            + slots * xyzz
            + self.nwin as u64 * self.segs as u64 * xyzz * 2
    }
}

/// Smallest and largest window the default plan picks. The H200's sweeps found no
/// window above 16 faster, at 2^24 or 2^26: the per-bucket work grows with 2^c and
/// the bucket sums do not shrink with the window count as the model expects (see
/// NOTES.md), so 16 caps the model's choice.
const MIN_WINDOW: u32 = 4;
const MAX_WINDOW: u32 = 16;
/// From 2^25 terms: 13 windows of 20 bits with balanced pieces of 32, the one wide
/// plan that beat c = 16 on the H200 (713 against 731 ms at 2^26).
const WIDE_FROM: u64 = 1 << 25;
const WIDE_WINDOW: u32 = 20;
/// Work per bucket in mixed-addition units (level sums, gather, the running sums of
/// the window reduction): fitted to the window sweep on the H200, where c = 17 cost
/// 12% more than c = 16 at 2^24 for the same window count.
const BUCKET_COST: u64 = 8;

/// Points (then partial sums) one thread adds up in the bucket sums.
const PIECE: u32 = 64;
/// Buckets each thread of the reduction walks.
const SEGMENT_LEN: u32 = 16;
/// Points summed per thread in the tree reductions.
const FAN: u32 = 32;
/// Bitmap words (64 bases) per thread in the ones sum.
const ONES_WORDS_PER_THREAD: u32 = 4;

/// How a curve's bucket sums run (`CudaTuning::msm_sum` for G1, `msm_sum_g2` for
/// G2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SumVariant {
    /// `calls`: XYZZ levels only (for G1 the mixed addition inlined with its Fq
    /// products called, the fastest XYZZ kernel on the H200; the other ways of
    /// compiling it, `inline`, `fcall` and `refs`, were removed: NOTES.md).
    #[serde(rename = "calls")]
    CalledProducts = 1,
    /// `affine`: batch-affine rounds (affine additions sharing one inversion per
    /// thread, ~6 products per addition instead of the mixed addition's 10; in
    /// G2 ~6 Fq2 products instead of 33 Fq ones), then the XYZZ levels for what
    /// they leave.
    #[serde(rename = "affine")]
    BatchAffine = 4,
}

/// The scatter's launches (`CudaTuning::scatter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scatter {
    /// A window per launch where the cursors (all windows) exceed 8 MB.
    Auto,
    /// Always a window per launch.
    Window,
    /// Always all windows in one launch.
    All,
}

fn sum_kernel<C: DeviceCurve>() -> &'static str {
    // Batch-affine hands the XYZZ levels what its rounds leave (and small MSMs
    // whole): G1's one XYZZ kernel.
    C::KERNELS.sum_points
}

/// Cursor bytes (all windows) from which the scatter goes a window per launch: at
/// 2^26 with c = 20 (27 MB of cursors) it took 75 ms against 50 ms with c = 16
/// (2 MB) for more entries. `CudaTuning::scatter` overrides.
const SCATTER_ALL_MAX_BYTES: usize = 8 << 20;

/// An MSM result still on the device.
#[derive(Debug)]
pub struct PendingSum<C: DeviceCurve = G1> {
    sums: CudaSlice<C::Xyzz>,
    count: usize,
    /// Window bits for a Pippenger result; 0 for a plain sum.
    c: u32,
    /// Per-phase device times, when profiling is on.
    phases: Option<Phases>,
}

impl<C: DeviceCurve> PendingSum<C> {
    /// Reads the window sums back (waits for the compute stream up to them) and
    /// combines them: Σ_w 2^(c·w) · S_w.
    pub fn finish(self, gpu: &Gpu) -> Result<C::Projective, CudaError> {
        let sums = gpu.download(&self.sums, self.count)?;
        Phases::finish(self.phases)?;
        let mut acc = C::Projective::identity();
        for s in sums.iter().rev() {
            for _ in 0..self.c {
                acc = acc.double();
            }
            acc += C::to_projective(s);
        }
        Ok(acc)
    }
}

/// What [`prefix_scan`] writes besides the start offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScanMode {
    /// A copy of the starts (msm_scatter's cursors).
    Cursors = 0,
    /// The scanned values ceil(cnt / k) (the next level's per-slot counts).
    Counts = 1,
}

/// Slots per tile of the prefix scan (`SCAN_TILE` in msm.cu).
const SCAN_TILE: u32 = 4096;

/// Enqueues the exclusive prefix sum of ceil(cnt[x] / k) over `slots` slots into
/// `start`, the [`ScanMode`]'s other output into `other` and the sum into `total`:
/// three launches that use the whole device at any slot count.
#[allow(clippy::too_many_arguments)]
fn prefix_scan(
    gpu: &Gpu,
    cnt: &CudaSlice<u32>,
    slots: u32,
    k: u32,
    mode: ScanMode,
    start: &mut CudaSlice<u32>,
    other: &mut CudaSlice<u32>,
    total: &mut CudaSlice<u32>,
) -> Result<(), CudaError> {
    let tiles = slots.div_ceil(SCAN_TILE).max(1);
    let mut tile_sums = gpu.alloc_poisoned::<u32>(tiles as usize)?;
    let per_tile = LaunchConfig {
        grid_dim: (tiles, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    };
    crate::launch!(gpu, "scan_tiles", per_tile, cnt, &slots, &k, &mut tile_sums)?;
    let one_block = LaunchConfig {
        grid_dim: (1, 1, 1),
        ..per_tile
    };
    crate::launch!(
        gpu,
        "scan_tile_sums",
        one_block,
        &mut tile_sums,
        &tiles,
        &mut *total
    )?;
    let mode = mode as u32;
    crate::launch!(
        gpu,
        "scan_apply",
        per_tile,
        cnt,
        &slots,
        &k,
        &tile_sums,
        &mode,
        &mut *start,
        &mut *other
    )
}

/// Sums `count` XYZZ points in groups of `group` (count divisible by group) down to one
/// point per group.
fn reduce_groups<C: DeviceCurve>(
    gpu: &Gpu,
    mut cur: CudaSlice<C::Xyzz>,
    mut count: u32,
    mut group: u32,
) -> Result<CudaSlice<C::Xyzz>, CudaError> {
    while group > 1 {
        let fan = group.min(FAN);
        // Keep groups aligned: fan must divide the group size (both powers of two,
        // or the single-group case where alignment does not matter).
        let fan = if group.is_multiple_of(fan) || count == group {
            fan
        } else {
            1
        };
        let out_count = count.div_ceil(fan);
        let mut out = gpu.alloc_poisoned::<C::Xyzz>(out_count as usize)?;
        crate::launch!(
            gpu,
            C::KERNELS.reduce,
            grid(out_count as usize, 64),
            &cur,
            &mut out,
            &count,
            &fan
        )?;
        cur = out;
        count = out_count;
        group = group.div_ceil(fan);
    }
    Ok(cur)
}

/// The shape errors of [`msm`]: `n` terms need `n` scalars, `n` bases (or `n`
/// indices into them), and fewer than 2^31 sorted entries.
pub fn check_msm_shape(
    n: usize,
    bases: usize,
    scalars: usize,
    indices: Option<usize>,
    plan: MsmPlan,
) -> Result<(), CudaError> {
    if scalars < n || (indices.is_none() && bases < n) {
        return Err(CudaError::Shape(format!(
            "MSM of {n} terms over {bases} bases and {scalars} scalars"
        )));
    }
    if let Some(m) = indices {
        if m < n {
            return Err(CudaError::Shape(format!(
                "MSM of {n} terms with {m} indices"
            )));
        }
    }
    if n as u64 * plan.nwin as u64 >= 1u64 << 31 {
        return Err(CudaError::Shape(format!(
            "MSM of {n} terms is too large for one launch"
        )));
    }
    Ok(())
}

/// Enqueues `Σ scalars[i] · bases[map(i)]` for i < n, where map is `index_map` if
/// given (tail indices) and the identity otherwise. G1 or G2, after the bases; the
/// bucket sums and scatter as `tuning.msm` says, phases timed where
/// `tuning.profiler` is on.
#[allow(clippy::too_many_arguments)]
pub fn msm<A: CurvePoint>(
    gpu: &Gpu,
    tuning: &Tuning,
    bases: &CudaSlice<A>,
    scalars: &CudaSlice<FrRepr>,
    n: usize,
    format: ScalarFormat,
    index_map: Option<&CudaSlice<u32>>,
    plan: MsmPlan,
) -> Result<PendingSum<A::Curve>, CudaError> {
    msm_on::<A::Curve>(gpu, tuning, bases, scalars, n, format, index_map, plan)
}

#[allow(clippy::too_many_arguments)]
fn msm_on<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &Tuning,
    bases: &CudaSlice<C::Affine>,
    scalars: &CudaSlice<FrRepr>,
    n: usize,
    format: ScalarFormat,
    index_map: Option<&CudaSlice<u32>>,
    plan: MsmPlan,
) -> Result<PendingSum<C>, CudaError> {
    check_msm_shape(
        n,
        bases.len(),
        scalars.len(),
        index_map.map(|m| m.len()),
        plan,
    )?;
    let MsmPlan {
        c, nwin, nb, segs, ..
    } = plan;
    if n == 0 {
        let sums = gpu.alloc_zeros::<C::Xyzz>(1)?;
        return Ok(PendingSum {
            sums,
            count: 1,
            c: 0,
            phases: None,
        });
    }
    let slots = (nwin * nb) as usize;
    let nn = n as u32;
    let fmt = format as u32;
    let t = &tuning.msm;
    let mut phases = Phases::start(&tuning.profiler, gpu, || format!("msm n={n} c={c}"))?;

    let mut counts = gpu.alloc_zeros::<u32>(slots)?;
    crate::launch!(
        gpu,
        "msm_histogram",
        grid(n, 256),
        scalars,
        &nn,
        &fmt,
        &c,
        &nwin,
        &mut counts
    )?;
    let mut offsets = gpu.alloc_poisoned::<u32>(slots)?;
    let mut cursors = gpu.alloc_poisoned::<u32>(slots)?;
    let mut entries = gpu.alloc_poisoned::<u32>(1)?;
    prefix_scan(
        gpu,
        &counts,
        slots as u32,
        1,
        ScanMode::Cursors,
        &mut offsets,
        &mut cursors,
        &mut entries,
    )?;
    Phases::mark(&mut phases, gpu, "histogram+scan")?;
    let mut sorted = gpu.alloc_poisoned::<u32>(n * nwin as usize)?;
    // The index map goes in as a raw pointer (0 for none); its guard records the use.
    let (map_ptr, _map_use) = match index_map {
        Some(m) => {
            let (p, g) = m.device_ptr(gpu.compute_stream());
            (p, Some(g))
        }
        None => (0u64, None),
    };
    // One launch per window where all windows' cursors would not stay in L2.
    let windows: Vec<u32> = if t.scatter_per_window(slots) {
        (0..nwin).collect()
    } else {
        vec![u32::MAX]
    };
    for only_w in windows {
        crate::launch!(
            gpu,
            "msm_scatter",
            grid(n, 256),
            scalars,
            &map_ptr,
            &nn,
            &fmt,
            &c,
            &nwin,
            &only_w,
            &mut cursors,
            &mut sorted
        )?;
    }
    Phases::mark(&mut phases, gpu, "scatter")?;
    drop(cursors);
    let batch_affine = t.batch_affine_for(C::XYZZ_BYTES)
        && ba_first_round_per::<C>(gpu, t, n, plan)? >= t.ba_min_per();
    let buckets = if batch_affine {
        let b = ba_bucket_sums::<C>(gpu, t, bases, &sorted, &counts, &offsets, n, plan, None)?;
        drop(sorted);
        Phases::mark(&mut phases, gpu, "batch-affine bucket sums")?;
        b
    } else {
        level_bucket_sums::<C>(
            gpu,
            bases,
            Some(sorted),
            counts,
            offsets,
            n,
            plan,
            &mut phases,
        )?
    };
    let parts = (nwin * segs) as usize;
    let mut partials = gpu.alloc_poisoned::<C::Xyzz>(parts)?;
    crate::launch!(
        gpu,
        C::KERNELS.bucket_segments,
        grid(parts, 64),
        &buckets,
        &nb,
        &segs,
        &nwin,
        &mut partials
    )?;
    drop(buckets);
    Phases::mark(&mut phases, gpu, "bucket segments")?;
    let sums = reduce_groups::<C>(gpu, partials, parts as u32, segs)?;
    Phases::mark(&mut phases, gpu, "window reduction")?;
    Ok(PendingSum {
        sums,
        count: nwin as usize,
        c,
        phases,
    })
}

/// The bucket sums in XYZZ levels (see msm.cu): levels of pieces of at most `piece`
/// points until every bucket has one sum, then one bucket per slot.
#[allow(clippy::too_many_arguments)]
fn level_bucket_sums<C: DeviceCurve>(
    gpu: &Gpu,
    bases: &CudaSlice<C::Affine>,
    sorted: Option<CudaSlice<u32>>,
    counts: CudaSlice<u32>,
    offsets: CudaSlice<u32>,
    n: usize,
    plan: MsmPlan,
    phases: &mut Option<Phases>,
) -> Result<CudaSlice<C::Xyzz>, CudaError> {
    let MsmPlan {
        nwin,
        nb,
        piece,
        balanced,
        ..
    } = plan;
    let balanced = u32::from(balanced);
    let slots = (nwin * nb) as usize;
    // The sorted entries as a raw pointer (0: the bases themselves, in order).
    let (sorted_ptr, sorted_use) = match &sorted {
        Some(v) => {
            let (p, g) = v.device_ptr(gpu.compute_stream());
            (p, Some(g))
        }
        None => (0u64, None),
    };
    // Load-balanced bucket sums (see msm.cu): levels of pieces of at most
    // PIECE points until every bucket has one sum.
    let slots32 = slots as u32;
    let mut cnt_prev = counts;
    let mut start_prev = offsets;
    let mut sums_prev: Option<CudaSlice<C::Xyzz>> = None;
    let mut bound = n as u64 * nwin as u64;
    let mut reach = 1u64;
    loop {
        let mut cnt = gpu.alloc_poisoned::<u32>(slots)?;
        let mut start = gpu.alloc_poisoned::<u32>(slots)?;
        let mut total = gpu.alloc_poisoned::<u32>(1)?;
        prefix_scan(
            gpu,
            &cnt_prev,
            slots32,
            piece,
            ScanMode::Counts,
            &mut start,
            &mut cnt,
            &mut total,
        )?;
        bound = bound.div_ceil(piece as u64) + slots as u64;
        let mut out = gpu.alloc_poisoned::<C::Xyzz>(bound as usize)?;
        match &sums_prev {
            None => crate::launch!(
                gpu,
                sum_kernel::<C>(),
                grid(bound as usize, 128),
                bases,
                &sorted_ptr,
                &start_prev,
                &cnt_prev,
                &start,
                &total,
                &slots32,
                &piece,
                &balanced,
                &mut out
            )?,
            Some(prev) => crate::launch!(
                gpu,
                C::KERNELS.sum_xyzz,
                grid(bound as usize, 128),
                prev,
                &start_prev,
                &cnt_prev,
                &start,
                &total,
                &slots32,
                &piece,
                &balanced,
                &mut out
            )?,
        }
        Phases::mark(
            phases,
            gpu,
            if sums_prev.is_none() {
                "bucket sums level 1"
            } else {
                "bucket sums level 2+"
            },
        )?;
        cnt_prev = cnt;
        start_prev = start;
        sums_prev = Some(out);
        reach *= piece as u64;
        // A bucket holds at most n points: after ceil(log_K n) levels each has one sum.
        if reach >= n as u64 {
            break;
        }
    }
    drop(sorted_use);
    drop(sorted);
    let sums_last = sums_prev.expect("at least one level");
    let mut buckets = gpu.alloc_poisoned::<C::Xyzz>(slots)?;
    crate::launch!(
        gpu,
        C::KERNELS.gather_buckets,
        grid(slots, 128),
        &sums_last,
        &start_prev,
        &cnt_prev,
        &slots32,
        &mut buckets
    )?;
    drop(sums_last);
    Phases::mark(phases, gpu, "gather")?;
    Ok(buckets)
}
