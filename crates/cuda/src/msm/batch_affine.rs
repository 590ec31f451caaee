//! Bucket sums by batch-affine rounds (`ba_round` in msm.cu, G1 and G2): affine
//! additions sharing one inversion per thread, the default
//! ([`SumVariant::BatchAffine`]); their knobs are the caller's [`MsmTuning`].

use super::*;

/// Most sorted entries one window group of the batch-affine sums takes by default
/// (`CudaTuning::ba_group_log`): its first round writes half as many affine points
/// (96 bytes) and as many running products (48 bytes) per pair, ~20 GB at 2^28, so
/// large MSMs go a window or a few at a time. Larger groups share each inversion
/// among more pairs: on the H200 2^28 gave 155.6 / 577.2 ms at 2^24 / 2^26 against
/// 161.5 / 583.5 for 2^27 and 176.9 / 613.4 for 2^26.
pub(crate) const BA_GROUP_LOG: u32 = 28;

/// Pairs per thread in a batch-affine round: one wave of threads (as many as the
/// device holds at once) shares the round's pairs, so each thread's inversion
/// (binary GCD) is shared by `per` pairs. Rounds run while `per` is at least
/// `CudaTuning::ba_min_per`, by default this; the buckets' last few entries go to
/// the XYZZ levels, whose pieces need no inversion. 32 with the binary-GCD
/// inversion (H200: 148.6 / 540.7 ms at 2^24 / 2^26 against 148.2 / 548.3 with
/// 64); with Fermat's 64 was best.
pub(crate) const BA_MIN_PER: u64 = 32;
pub(super) const BA_BLOCK: u32 = 128;

/// Threads of one wave of the curve's batch-affine round (blocks of BA_BLOCK) on
/// this device, times `tuning`'s waves.
pub(super) fn ba_wave<C: DeviceCurve>(gpu: &Gpu, tuning: &MsmTuning) -> Result<u64, CudaError> {
    let blocks = gpu
        .function(C::KERNELS.ba_round)?
        .occupancy_max_active_blocks_per_multiprocessor(BA_BLOCK, 0, None)
        .map_err(|source| CudaError::Driver {
            call: "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            source,
        })?;
    Ok(tuning.ba_round_threads(gpu.sm_count, blocks.max(1)))
}

/// Pairs per thread of the first batch-affine round of an MSM of `n` terms.
pub(super) fn ba_first_round_per<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &MsmTuning,
    n: usize,
    plan: MsmPlan,
) -> Result<u64, CudaError> {
    Ok(tuning.ba_first_round_per(C::XYZZ_BYTES, ba_wave::<C>(gpu, tuning)?, n, plan))
}

/// The bucket sums by batch-affine rounds (see `ba_round` in msm.cu): per
/// group of windows, rounds that halve every bucket's entries with affine additions
/// sharing one inversion per thread, while a round has at least `tuning`'s
/// `ba_min_per` pairs per thread of a wave; then each bucket's one point becomes its XYZZ bucket, or, where
/// buckets still hold several, the XYZZ levels sum what the rounds left. The
/// fullest bucket (how many rounds finish the job) is the one value read back (a
/// stream-scoped wait for the histogram).
#[allow(clippy::too_many_arguments)]
pub(super) fn ba_bucket_sums<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &MsmTuning,
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
    let group = (tuning.group_entries_for(C::XYZZ_BYTES) / n as u64).clamp(1, nwin as u64) as u32;
    let wave = ba_wave::<C>(gpu, tuning)?;
    // A running product per output: one base-field element, half an affine point.
    let field_u64s = (C::AFFINE_BYTES / 16) as usize;
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
            if per < tuning.ba_min_per() && prev.is_some() {
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
            let mut scratch =
                unsafe { gpu.alloc_scratch::<u64>((per * threads) as usize * field_u64s) }?;
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
                C::KERNELS.ba_round,
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
                C::KERNELS.ba_buckets,
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
