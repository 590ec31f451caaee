//! The ones of a split query: the plain sum of the bases whose bit is set in a
//! density bitmap (prep_msm's "ones"), by batch-affine rounds where they pay off.

use super::*;

/// Enqueues the plain sum of the bases whose bit is set in `words` (a density bitmap
/// over the first `n_bases` bases): prep_msm's "ones". G1 or G2, after the bases;
/// batch-affine or not as `tuning` says.
pub fn ones_sum<A: CurvePoint>(
    gpu: &Gpu,
    tuning: &MsmTuning,
    bases: &CudaSlice<A>,
    words: &CudaSlice<u64>,
    n_words: usize,
    n_bases: usize,
) -> Result<PendingSum<A::Curve>, CudaError> {
    ones_sum_on::<A::Curve>(gpu, tuning, bases, words, n_words, n_bases)
}

pub(super) fn ones_sum_on<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &MsmTuning,
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
    if let Some(sum) = ones_sum_affine::<C>(gpu, tuning, bases, words, n_words, n_bases)? {
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
pub(super) const ONES_PLAN: MsmPlan = MsmPlan {
    c: 1,
    nwin: 1,
    nb: 1,
    segs: 1,
    piece: 32,
    balanced: true,
};

/// The ones by batch-affine rounds (the curve's [`SumVariant::BatchAffine`]): the set
/// bits' indices compacted out of the bitmap as one bucket's sorted entries (a
/// count per word, a scan, a write-out), then the bucket sums' rounds and XYZZ
/// levels, ~6 products per addition instead of the mixed addition's 10. One more
/// readback (the count of ones) to size the rounds. `None` for the other sum
/// variant, and where the first round would give a thread fewer pairs than
/// `tuning`'s `ba_min_per` (the one-thread-per-words XYZZ kernel then).
pub(super) fn ones_sum_affine<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &MsmTuning,
    bases: &CudaSlice<C::Affine>,
    words: &CudaSlice<u64>,
    n_words: usize,
    n_bases: usize,
) -> Result<Option<PendingSum<C>>, CudaError> {
    if !tuning.batch_affine_for(C::XYZZ_BYTES)
        || ba_first_round_per::<C>(gpu, tuning, n_bases, ONES_PLAN)? < tuning.ba_min_per()
    {
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
    if ba_first_round_per::<C>(gpu, tuning, m, ONES_PLAN)? < tuning.ba_min_per() {
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
        tuning,
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

/// Device bytes [`ones_sum`] may take for `n_bases` bases over XYZZ points of
/// `xyzz` bytes with `tuning` (batch-affine: the compacted entries and the first
/// rounds' outputs and running products; the XYZZ kernel's partials are far
/// fewer).
pub fn ones_scratch_bytes(tuning: &MsmTuning, n_bases: usize, xyzz: u64) -> u64 {
    if !tuning.batch_affine_for(xyzz) {
        return 0;
    }
    let n = n_bases as u64;
    // Per word: count, start and its copy; per entry: the index, then
    // ONES_PLAN's share of scratch_bytes_for (96 bytes an entry in G1).
    n.div_ceil(64) * 12 + n * 4 + ONES_PLAN.scratch_bytes_for(tuning, n_bases, xyzz)
}
