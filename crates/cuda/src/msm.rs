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

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig};
use group::Group;

use crate::error::CudaError;
use crate::gpu::{grid, CurvePoint, DeviceCurve, FrRepr, Gpu, G1};
use crate::profile::Phases;

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

    /// Device bytes the MSM's scratch buffers take for `n` scalars (G1 points).
    pub fn scratch_bytes(&self, n: usize) -> u64 {
        self.scratch_bytes_for(n, 192)
    }

    /// [`Self::scratch_bytes`] for XYZZ points of `xyzz` bytes (192 for G1, 384
    /// for G2): the XYZZ levels' scratch, and for G1 with batch-affine rounds
    /// theirs besides.
    pub fn scratch_bytes_for(&self, n: usize, xyzz: u64) -> u64 {
        self.level_scratch_bytes(n, xyzz)
            + if sum_variant() == SumVariant::BatchAffine && xyzz == G1::XYZZ_BYTES {
                // A window group's first round (affine outputs and running products)
                // and the second round's outputs next to it.
                let group =
                    (batch_affine_group_entries() / (n as u64).max(1)).clamp(1, self.nwin as u64);
                let g = group * n as u64 + group * self.nb as u64;
                g / 2 * (96 + 48) + g / 4 * 96
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

/// How G1's bucket sums run (`CudaTuning::msm_sum`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SumVariant {
    /// `calls`: XYZZ levels only, the mixed addition inlined with its Fq products
    /// called (the fastest XYZZ kernel on the H200; the other ways of compiling it,
    /// `inline`, `fcall` and `refs`, were removed: NOTES.md).
    #[serde(rename = "calls")]
    CalledProducts = 1,
    /// `affine`: batch-affine rounds (affine additions sharing one inversion per
    /// thread, ~6 products per addition instead of 10), then the XYZZ levels for
    /// what they leave; G2 MSMs run the XYZZ levels.
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

/// The G1 bucket sums of every later MSM of this process (set from the backend's
/// [`crate::CudaTuning`] by [`apply_tuning`]).
static SUM_VARIANT: AtomicU8 = AtomicU8::new(SumVariant::BatchAffine as u8);
/// [`Scatter`] as 0, 1, 2.
static SCATTER: AtomicU8 = AtomicU8::new(0);
/// Waves of threads per batch-affine round.
static BA_WAVES: AtomicU64 = AtomicU64::new(1);

/// Applies `t` to every later MSM of this process. The knobs are process-wide (one
/// backend per process in practice; a second backend with other tuning would
/// override the first's): the MSM code reads them where no backend is at hand.
pub fn apply_tuning(t: &crate::CudaTuning) {
    set_sum_variant(t.msm_sum);
    set_batch_affine_min_per(t.ba_min_per);
    set_batch_affine_group_entries(1u64 << t.ba_group_log.clamp(10, 30));
    BA_WAVES.store(t.ba_waves.clamp(1, 16), Ordering::Relaxed);
    SCATTER.store(t.scatter as u8, Ordering::Relaxed);
}

/// Selects the G1 bucket sums for every later MSM of this process.
pub fn set_sum_variant(v: SumVariant) {
    SUM_VARIANT.store(v as u8, Ordering::Relaxed);
}

/// The G1 bucket sums in use.
pub fn sum_variant() -> SumVariant {
    match SUM_VARIANT.load(Ordering::Relaxed) {
        1 => SumVariant::CalledProducts,
        _ => SumVariant::BatchAffine,
    }
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

fn scatter_per_window(slots: usize) -> bool {
    match SCATTER.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => slots * 4 > SCATTER_ALL_MAX_BYTES,
    }
}

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
/// given (tail indices) and the identity otherwise. G1 or G2, after the bases.
pub fn msm<A: CurvePoint>(
    gpu: &Gpu,
    bases: &CudaSlice<A>,
    scalars: &CudaSlice<FrRepr>,
    n: usize,
    format: ScalarFormat,
    index_map: Option<&CudaSlice<u32>>,
    plan: MsmPlan,
) -> Result<PendingSum<A::Curve>, CudaError> {
    msm_on::<A::Curve>(gpu, bases, scalars, n, format, index_map, plan)
}

fn msm_on<C: DeviceCurve>(
    gpu: &Gpu,
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
    let mut phases = Phases::start(gpu, || format!("msm n={n} c={c}"))?;

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
    let windows: Vec<u32> = if scatter_per_window(slots) {
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
    let batch_affine = C::KERNELS.sum_points == G1::KERNELS.sum_points
        && sum_variant() == SumVariant::BatchAffine
        && ba_first_round_per(gpu, n, plan)? >= batch_affine_min_per();
    let buckets = if batch_affine {
        let b = ba_bucket_sums::<C>(gpu, bases, &sorted, &counts, &offsets, n, plan, None)?;
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

/// Most sorted entries one window group of the batch-affine sums takes: its first
/// round writes half as many affine points (96 bytes) and as many running products
/// (48 bytes) per pair, ~20 GB at 2^28, so large MSMs go a window or a few at a time.
/// Larger groups share each inversion among more pairs: on the H200 2^28 gave
/// 155.6 / 577.2 ms at 2^24 / 2^26 against 161.5 / 583.5 for 2^27 and 176.9 /
/// 613.4 for 2^26.
const BA_GROUP_ENTRIES: u64 = 1 << 28;

/// The batch-affine window group's entries (`CudaTuning::ba_group_log`).
static BA_GROUP_SETTING: AtomicU64 = AtomicU64::new(BA_GROUP_ENTRIES);

/// Sets how many sorted entries a window group of the batch-affine sums may hold
/// (at least one window always goes in a group) for every later MSM of this
/// process: small values make small MSMs go a window at a time, as the checks use
/// to reach the grouping with small inputs.
pub fn set_batch_affine_group_entries(entries: u64) {
    BA_GROUP_SETTING.store(entries.max(1), Ordering::Relaxed);
}

/// The most sorted entries of a batch-affine window group.
pub fn batch_affine_group_entries() -> u64 {
    BA_GROUP_SETTING.load(Ordering::Relaxed)
}
/// Pairs per thread in a batch-affine round: one wave of threads (as many as the
/// device holds at once) shares the round's pairs, so each thread's inversion
/// (binary GCD) is shared by `per` pairs. Rounds run while `per` is at least
/// BA_MIN_PER; the buckets' last few entries go to the XYZZ levels, whose pieces
/// need no inversion. 32 with the binary-GCD inversion (H200: 148.6 / 540.7 ms at
/// 2^24 / 2^26 against 148.2 / 548.3 with 64); with Fermat's 64 was best.
const BA_MIN_PER: u64 = 32;
const BA_BLOCK: u32 = 128;

/// The least pairs per thread for a batch-affine round (`CudaTuning::ba_min_per`).
static BA_MIN_PER_SETTING: AtomicU64 = AtomicU64::new(BA_MIN_PER);

/// Sets the least pairs per thread for which a batch-affine round runs (the rest
/// goes to the XYZZ levels) for every later MSM of this process. 1 makes every
/// round affine, at any size: what the checks use to reach the rounds with small
/// inputs.
pub fn set_batch_affine_min_per(per: u64) {
    BA_MIN_PER_SETTING.store(per.max(1), Ordering::Relaxed);
}

/// The least pairs per thread for which a batch-affine round runs.
pub fn batch_affine_min_per() -> u64 {
    BA_MIN_PER_SETTING.load(Ordering::Relaxed)
}

/// Threads of one wave of `msm_ba_round` (blocks of BA_BLOCK) on this device.
fn ba_wave(gpu: &Gpu) -> Result<u64, CudaError> {
    let blocks = gpu
        .function("msm_ba_round")?
        .occupancy_max_active_blocks_per_multiprocessor(BA_BLOCK, 0, None)
        .map_err(|source| CudaError::Driver {
            call: "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            source,
        })?;
    // `CudaTuning::ba_waves` = k: k waves' worth of threads per round (k times
    // fewer pairs per thread), for the A/B against one wave.
    let waves = BA_WAVES.load(Ordering::Relaxed);
    Ok(gpu.sm_count as u64 * blocks.max(1) as u64 * BA_BLOCK as u64 * waves)
}

/// Pairs per thread of the first batch-affine round of an MSM of `n` terms.
fn ba_first_round_per(gpu: &Gpu, n: usize, plan: MsmPlan) -> Result<u64, CudaError> {
    let group = (batch_affine_group_entries() / (n as u64).max(1)).clamp(1, plan.nwin as u64);
    Ok((group * n as u64 / 2).div_ceil(ba_wave(gpu)?))
}

/// The bucket sums by batch-affine rounds (G1; see `msm_ba_round` in msm.cu): per
/// group of windows, rounds that halve every bucket's entries with affine additions
/// sharing one inversion per thread, while a round has at least BA_MIN_PER pairs per
/// thread of a wave; then each bucket's one point becomes its XYZZ bucket, or, where
/// buckets still hold several, the XYZZ levels sum what the rounds left. The
/// fullest bucket (how many rounds finish the job) is the one value read back (a
/// stream-scoped wait for the histogram).
#[allow(clippy::too_many_arguments)]
fn ba_bucket_sums<C: DeviceCurve>(
    gpu: &Gpu,
    bases: &CudaSlice<C::Affine>,
    sorted: &CudaSlice<u32>,
    counts: &CudaSlice<u32>,
    offsets: &CudaSlice<u32>,
    n: usize,
    plan: MsmPlan,
    fullest: Option<u32>,
) -> Result<CudaSlice<C::Xyzz>, CudaError> {
    let MsmPlan { nwin, nb, .. } = plan;
    let slots = (nwin * nb) as usize;
    // The fullest bucket's count: given by a caller that read it back already.
    let fullest = match fullest {
        Some(f) => f,
        None => {
            let slots32 = slots as u32;
            let mut f = gpu.alloc_zeros::<u32>(1)?;
            crate::launch!(gpu, "max_u32", grid(slots, 256), counts, &slots32, &mut f)?;
            gpu.download(&f, 1)?[0]
        }
    }
    .max(2);
    let rounds_needed = 32 - (fullest - 1).leading_zeros();
    let mut buckets = gpu.alloc_poisoned::<C::Xyzz>(slots)?;
    let group = (batch_affine_group_entries() / n as u64).clamp(1, nwin as u64) as u32;
    let wave = ba_wave(gpu)?;
    let (sorted_ptr, _sorted_use) = sorted.device_ptr(gpu.compute_stream());
    let dtod = |source| CudaError::Driver {
        call: "cuMemcpyDtoDAsync",
        source,
    };
    for w0 in (0..nwin).step_by(group as usize) {
        let w1 = (w0 + group).min(nwin);
        let (s0, s1) = ((w0 * nb) as usize, (w1 * nb) as usize);
        let gs = (s1 - s0) as u32;
        let mut cnt = gpu.alloc_poisoned::<u32>(gs as usize)?;
        let mut start = gpu.alloc_poisoned::<u32>(gs as usize)?;
        let stream = gpu.compute_stream();
        stream
            .memcpy_dtod(&counts.slice(s0..s1), &mut cnt)
            .map_err(dtod)?;
        stream
            .memcpy_dtod(&offsets.slice(s0..s1), &mut start)
            .map_err(dtod)?;
        let mut bound = n as u64 * (w1 - w0) as u64;
        let mut prev: Option<CudaSlice<C::Affine>> = None;
        let mut done = 0;
        while done < rounds_needed {
            let next_bound = (bound + gs as u64).div_ceil(2);
            let per = next_bound.div_ceil(wave);
            if per < batch_affine_min_per() && prev.is_some() {
                break;
            }
            bound = next_bound;
            let mut ocnt = gpu.alloc_poisoned::<u32>(gs as usize)?;
            let mut ostart = gpu.alloc_poisoned::<u32>(gs as usize)?;
            let mut total = gpu.alloc_poisoned::<u32>(1)?;
            prefix_scan(
                gpu,
                &cnt,
                gs,
                2,
                ScanMode::Counts,
                &mut ostart,
                &mut ocnt,
                &mut total,
            )?;
            let blocks = bound.div_ceil(per).div_ceil(BA_BLOCK as u64).max(1);
            let threads = blocks * BA_BLOCK as u64;
            // SAFETY: msm_ba_round writes a thread's running product of output o
            // before it reads it back, and every output below the round's total; the
            // next round and the final kernels read only those.
            let mut scratch = unsafe { gpu.alloc_scratch::<[u64; 6]>((per * threads) as usize) }?;
            let mut out = unsafe { gpu.alloc_scratch::<C::Affine>(bound as usize) }?;
            let (in_ptr, in_use) = match &prev {
                Some(p) => {
                    let (ptr, g) = p.device_ptr(gpu.compute_stream());
                    (ptr, Some(g))
                }
                None => (0u64, None),
            };
            let sp = if prev.is_none() { sorted_ptr } else { 0u64 };
            let per32 = per as u32;
            let cfg = LaunchConfig {
                grid_dim: (blocks as u32, 1, 1),
                block_dim: (BA_BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            crate::launch!(
                gpu,
                "msm_ba_round",
                cfg,
                bases,
                &sp,
                &in_ptr,
                &start,
                &cnt,
                &ostart,
                &total,
                &gs,
                &per32,
                &mut scratch,
                &mut out
            )?;
            drop(in_use);
            prev = Some(out);
            cnt = ocnt;
            start = ostart;
            done += 1;
        }
        let last = prev.expect("the first round always runs");
        if done == rounds_needed {
            let mut view = buckets.slice_mut(s0..s1);
            crate::launch!(
                gpu,
                "msm_ba_buckets",
                grid(gs as usize, 128),
                &last,
                &start,
                &cnt,
                &gs,
                &mut view
            )?;
        } else {
            // The rounds' output in bucket order is the level sums' input: no
            // sorted entries, the points themselves. n terms per window still
            // bound what any bucket or window holds.
            let group_plan = MsmPlan {
                nwin: w1 - w0,
                ..plan
            };
            let sums =
                level_bucket_sums::<C>(gpu, &last, None, cnt, start, n, group_plan, &mut None)?;
            stream
                .memcpy_dtod(&sums, &mut buckets.slice_mut(s0..s1))
                .map_err(dtod)?;
        }
    }
    Ok(buckets)
}

/// Enqueues the plain sum of the bases whose bit is set in `words` (a density bitmap
/// over the first `n_bases` bases): prep_msm's "ones". G1 or G2, after the bases.
pub fn ones_sum<A: CurvePoint>(
    gpu: &Gpu,
    bases: &CudaSlice<A>,
    words: &CudaSlice<u64>,
    n_words: usize,
    n_bases: usize,
) -> Result<PendingSum<A::Curve>, CudaError> {
    ones_sum_on::<A::Curve>(gpu, bases, words, n_words, n_bases)
}

fn ones_sum_on<C: DeviceCurve>(
    gpu: &Gpu,
    bases: &CudaSlice<C::Affine>,
    words: &CudaSlice<u64>,
    n_words: usize,
    n_bases: usize,
) -> Result<PendingSum<C>, CudaError> {
    if bases.len() < n_bases || words.len() < n_words || n_words * 64 < n_bases {
        return Err(CudaError::Shape(format!(
            "ones sum over {n_bases} bases with {} bases and {n_words} bitmap words",
            bases.len()
        )));
    }
    if let Some(sum) = ones_sum_affine::<C>(gpu, bases, words, n_words, n_bases)? {
        return Ok(sum);
    }
    let parts = n_words.div_ceil(ONES_WORDS_PER_THREAD as usize).max(1);
    let mut partials = gpu.alloc_poisoned::<C::Xyzz>(parts)?;
    let (nw, nbs, wpt, np) = (
        n_words as u32,
        n_bases as u32,
        ONES_WORDS_PER_THREAD,
        parts as u32,
    );
    crate::launch!(
        gpu,
        C::KERNELS.ones_sum,
        grid(parts, 64),
        bases,
        words,
        &nw,
        &nbs,
        &wpt,
        &mut partials,
        &np
    )?;
    let sums = reduce_groups::<C>(gpu, partials, np, np)?;
    Ok(PendingSum {
        sums,
        count: 1,
        c: 0,
        phases: None,
    })
}

/// The plan of the ones as one bucket: a single slot, whose sum is the result.
const ONES_PLAN: MsmPlan = MsmPlan {
    c: 1,
    nwin: 1,
    nb: 1,
    segs: 1,
    piece: 32,
    balanced: true,
};

/// The ones by batch-affine rounds (G1 with [`SumVariant::BatchAffine`]): the set
/// bits' indices compacted out of the bitmap as one bucket's sorted entries (a
/// count per word, a scan, a write-out), then the bucket sums' rounds and XYZZ
/// levels, ~6 products per addition instead of the mixed addition's 10. One more
/// readback (the count of ones) to size the rounds. `None` for G2, for another sum
/// variant, and where the first round would give a thread fewer pairs than
/// [`batch_affine_min_per`] (the one-thread-per-words XYZZ kernel then).
fn ones_sum_affine<C: DeviceCurve>(
    gpu: &Gpu,
    bases: &CudaSlice<C::Affine>,
    words: &CudaSlice<u64>,
    n_words: usize,
    n_bases: usize,
) -> Result<Option<PendingSum<C>>, CudaError> {
    let affine =
        C::KERNELS.sum_points == G1::KERNELS.sum_points && sum_variant() == SumVariant::BatchAffine;
    if !affine || ba_first_round_per(gpu, n_bases, ONES_PLAN)? < batch_affine_min_per() {
        return Ok(None);
    }
    let (nw, nbs) = (n_words as u32, n_bases as u32);
    let mut counts = gpu.alloc_poisoned::<u32>(n_words)?;
    crate::launch!(
        gpu,
        "ones_count",
        grid(n_words, 256),
        words,
        &nw,
        &nbs,
        &mut counts
    )?;
    let mut start = gpu.alloc_poisoned::<u32>(n_words)?;
    let mut copy = gpu.alloc_poisoned::<u32>(n_words)?;
    let mut total = gpu.alloc_poisoned::<u32>(1)?;
    prefix_scan(
        gpu,
        &counts,
        nw,
        1,
        ScanMode::Cursors,
        &mut start,
        &mut copy,
        &mut total,
    )?;
    drop((counts, copy));
    let m = gpu.download(&total, 1)?[0] as usize;
    if ba_first_round_per(gpu, m, ONES_PLAN)? < batch_affine_min_per() {
        return Ok(None);
    }
    let mut sorted = gpu.alloc_poisoned::<u32>(m)?;
    crate::launch!(
        gpu,
        "ones_entries",
        grid(n_words, 256),
        words,
        &nw,
        &nbs,
        &start,
        &mut sorted
    )?;
    let offsets = gpu.alloc_zeros::<u32>(1)?;
    // One bucket: its count is the fullest, read back above.
    let sums = ba_bucket_sums::<C>(
        gpu,
        bases,
        &sorted,
        &total,
        &offsets,
        m,
        ONES_PLAN,
        Some(m as u32),
    )?;
    Ok(Some(PendingSum {
        sums,
        count: 1,
        c: 0,
        phases: None,
    }))
}

/// Device bytes [`ones_sum`] may take for `n_bases` bases (G1, batch-affine: the
/// compacted entries and the first rounds' outputs and running products; the XYZZ
/// kernel's partials are far fewer).
pub fn ones_scratch_bytes(n_bases: usize) -> u64 {
    let n = n_bases as u64;
    // Per word: count, start and its copy; per entry: the index, then
    // ONES_PLAN's share of scratch_bytes_for (96 bytes an entry).
    n.div_ceil(64) * 12 + n * 4 + ONES_PLAN.scratch_bytes(n_bases)
}

/// Fills `out` with copies of `src` (benchmark bases).
pub fn replicate_bases<A: CurvePoint>(
    gpu: &Gpu,
    src: &CudaSlice<A>,
    out: &mut CudaSlice<A>,
) -> Result<(), CudaError> {
    let (m, n) = (src.len() as u32, out.len() as u32);
    crate::launch!(
        gpu,
        <A::Curve as DeviceCurve>::KERNELS.replicate,
        grid(n as usize, 256),
        src,
        &m,
        &mut *out,
        &n
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_windows_follow_the_window_count() {
        let c = |log: u32| MsmPlan::for_size(1usize << log).c;
        // Small MSMs keep small windows; sizes between grow the window.
        assert!(c(4) <= 6, "2^4 -> c = {}", c(4));
        assert!((14..=16).contains(&c(20)), "2^20 -> c = {}", c(20));
        // Large MSMs take the one wide plan, in balanced pieces of 32.
        let big = MsmPlan::for_size(1 << 26);
        assert_eq!((big.c, big.piece, big.balanced), (WIDE_WINDOW, 32, true));
        assert_eq!(c(24), 16);
        assert_eq!(MsmPlan::for_size(1 << 24).piece, 32);
        // Never a window that buys no fewer windows than the one below it.
        for log in 1..=24 {
            let p = MsmPlan::for_size(1usize << log);
            let fewer = 256u32.div_ceil(p.c - 1);
            assert!(
                p.nwin < fewer || p.c == MIN_WINDOW,
                "2^{log}: c = {} is wasted",
                p.c
            );
            assert!(p.c * p.nwin >= 256);
        }
    }

    #[test]
    fn shape_errors() {
        let plan = MsmPlan::for_size(100);
        assert!(check_msm_shape(100, 100, 100, None, plan).is_ok());
        assert!(check_msm_shape(0, 0, 0, None, plan).is_ok());
        // Too few scalars, too few bases without a map, too few indices.
        assert!(check_msm_shape(100, 100, 99, None, plan).is_err());
        assert!(check_msm_shape(100, 99, 100, None, plan).is_err());
        assert!(check_msm_shape(100, 5, 100, Some(99), plan).is_err());
        // With a map the bases may be fewer than the terms (indices repeat).
        assert!(check_msm_shape(100, 5, 100, Some(100), plan).is_ok());
        // n · nwin sorted entries must stay below 2^31.
        let big = MsmPlan::for_window(4);
        let n = (1usize << 31) / big.nwin as usize + 1;
        assert!(check_msm_shape(n, n, n, None, big).is_err());
    }

    #[test]
    fn g2_scratch_is_twice_g1_in_points() {
        let plan = MsmPlan::for_size(1 << 20);
        let n = 1 << 20;
        assert_eq!(
            plan.scratch_bytes(n),
            plan.scratch_bytes_for(n, G1::XYZZ_BYTES)
        );
        // The levels' scratch: twice the point size, less than twice the bytes.
        let g1 = plan.level_scratch_bytes(n, G1::XYZZ_BYTES);
        let g2 = plan.level_scratch_bytes(n, crate::gpu::G2::XYZZ_BYTES);
        assert!(g2 > g1 && g2 < 2 * g1);
        // G2 never takes batch-affine rounds; G1 may, on top of its levels.
        assert_eq!(g2, plan.scratch_bytes_for(n, crate::gpu::G2::XYZZ_BYTES));
        assert!(plan.scratch_bytes_for(n, G1::XYZZ_BYTES) >= g1);
    }
}
