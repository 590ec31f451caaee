//! A partition's queries on the device: the split MSMs (ones and tail) over
//! resident bases or over bases streamed in chunks, the dense streamed MSM of H, and
//! the chunk sizes streaming uses.

use super::*;

/// Ones and tail of a split query: over its resident bases, or streamed through
/// `stream`.
pub(super) fn query<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &Tuning,
    resident: Option<&CudaSlice<C::Affine>>,
    stream: &mut BaseStream<'_, C>,
    m: &SplitMsm<'_, C::HostAffine>,
) -> Result<Vec<PendingSum<C>>, CudaError> {
    match resident {
        Some(bases) => {
            let (ones, tail) = split_msm::<C>(gpu, tuning, bases, m)?;
            Ok(vec![ones, tail])
        }
        None => streamed_split(tuning, stream, m),
    }
}

/// Σ scalars[i] · host[i] for i < n with the bases streamed from `host` in chunks
/// (scalars on the device, Montgomery form: H's coefficients).
pub(super) fn streamed_dense<C: DeviceCurve>(
    tuning: &Tuning,
    stream: &mut BaseStream<'_, C>,
    host: &[C::HostAffine],
    scalars: &CudaSlice<FrRepr>,
    n: usize,
) -> Result<Vec<PendingSum<C>>, CudaError> {
    if n > host.len() || n > scalars.len() {
        return Err(CudaError::Shape(format!(
            "a streamed MSM of {n} terms over {} bases and {} scalars",
            host.len(),
            scalars.len()
        )));
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    let gpu = stream.gpu();
    let ranges: Vec<(usize, usize)> = chunks(n, stream.chunk()).collect();
    // A chunk's scalars are copied out of H's coefficients on the compute stream (an
    // MSM takes a whole buffer). One buffer is enough: chunk k+1's copy is ordered
    // after chunk k's MSM on that stream.
    let mut part = gpu.alloc_poisoned::<FrRepr>(stream.chunk().min(n))?;
    let mut out = Vec::with_capacity(ranges.len());
    stream.run(host, &ranges, |(lo, hi), bases| {
        gpu.compute_stream()
            .memcpy_dtod(&scalars.slice(lo..hi), &mut part.slice_mut(..hi - lo))
            .ctx("cuMemcpyDtoDAsync")?;
        out.push(msm::msm(
            gpu,
            tuning,
            bases,
            &part,
            hi - lo,
            ScalarFormat::Montgomery,
            None,
            MsmPlan::for_size(hi - lo),
        )?);
        Ok(())
    })?;
    Ok(out)
}

/// A split query with its bases streamed in chunks: per chunk, the ones whose bit
/// falls in it and the run of tail terms whose index does (rebased to the chunk).
pub(super) fn streamed_split<C: DeviceCurve>(
    tuning: &Tuning,
    stream: &mut BaseStream<'_, C>,
    m: &SplitMsm<'_, C::HostAffine>,
) -> Result<Vec<PendingSum<C>>, CudaError> {
    let gpu = stream.gpu();
    let split = m.split;
    let words = split.ones_words();
    let (idx, sc) = (split.tail_indices(), split.tail_scalars());
    let ranges: Vec<(usize, usize)> = chunks(split.num_bases(), stream.chunk()).collect();
    // The chunk's bitmap words and its run of tail terms (tail indices increase, a
    // SplitScalars invariant) travel with its bases (`ChunkTerms`). Chunks start at
    // multiples of 64: word k of the chunk is word lo/64 + k.
    let terms = |(lo, hi): (usize, usize)| {
        let t0 = idx.partition_point(|&i| (i as usize) < lo);
        let t1 = idx.partition_point(|&i| (i as usize) < hi);
        ChunkTerms {
            words: &words[(lo / 64).min(words.len())..hi.div_ceil(64).min(words.len())],
            idx: &idx[t0..t1],
            scalars: &sc[t0..t1],
        }
    };
    let mut out = Vec::new();
    stream.run_split(m.bases, &ranges, terms, |(lo, hi), bases, t| {
        if t.nwords > 0 {
            out.push(msm::ones_sum(
                gpu,
                &tuning.msm,
                bases,
                t.words,
                t.nwords,
                hi - lo,
            )?);
        }
        if t.nterms > 0 {
            out.push(msm::msm(
                gpu,
                tuning,
                bases,
                t.scalars,
                t.nterms,
                ScalarFormat::Canonical,
                Some(t.idx),
                MsmPlan::for_size(t.nterms),
            )?);
        }
        Ok(())
    })?;
    Ok(out)
}

/// Ones and tail of a split query whose bases are resident (`bases`): the bitmap
/// uploaded, the ones enqueued, then the tail terms uploaded on the copy stream
/// while the ones run, then the tail MSM.
pub(super) fn split_msm<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &Tuning,
    bases: &CudaSlice<C::Affine>,
    m: &SplitMsm<'_, C::HostAffine>,
) -> Result<(PendingSum<C>, PendingSum<C>), CudaError> {
    let ones = ones_msm(gpu, tuning, bases, &upload_ones(gpu, m.split)?)?;
    let tail = tail_msm(gpu, tuning, bases, &upload_tail(gpu, m.split)?)?;
    Ok((ones, tail))
}

/// A split query's ones bitmap on the device; freed in stream order after the
/// ones sum that reads it.
pub(super) struct OnesOnDevice {
    pub(super) words: CudaSlice<u64>,
    pub(super) nwords: usize,
    pub(super) num_bases: usize,
}

/// A split query's tail terms on the device (indices, canonical scalars).
pub(super) struct TailOnDevice {
    pub(super) idx: CudaSlice<u32>,
    pub(super) scalars: CudaSlice<FrRepr>,
    pub(super) len: usize,
}

/// The ones bitmap, copied on the compute stream (small: 2^21 words at 2^27).
pub(super) fn upload_ones(gpu: &Gpu, split: SplitRef<'_>) -> Result<OnesOnDevice, CudaError> {
    let words = split.ones_words();
    Ok(OnesOnDevice {
        words: gpu.upload::<u64>(u64s_as_bytes(words))?,
        nwords: words.len(),
        num_bases: split.num_bases(),
    })
}

/// The tail terms, copied on the copy stream (a query's 0.2 GB at 2^27): they
/// travel while the compute stream sums ones, and the compute stream waits for
/// them before its next work.
pub(super) fn upload_tail(gpu: &Gpu, split: SplitRef<'_>) -> Result<TailOnDevice, CudaError> {
    Ok(TailOnDevice {
        idx: gpu.upload_on_copy::<u32>(u32s_as_bytes(split.tail_indices()))?,
        scalars: gpu.upload_on_copy::<FrRepr>(limbs_as_bytes(split.tail_scalars()))?,
        len: split.tail_indices().len(),
    })
}

pub(super) fn ones_msm<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &Tuning,
    bases: &CudaSlice<C::Affine>,
    up: &OnesOnDevice,
) -> Result<PendingSum<C>, CudaError> {
    msm::ones_sum(gpu, &tuning.msm, bases, &up.words, up.nwords, up.num_bases)
}

pub(super) fn tail_msm<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &Tuning,
    bases: &CudaSlice<C::Affine>,
    up: &TailOnDevice,
) -> Result<PendingSum<C>, CudaError> {
    msm::msm(
        gpu,
        tuning,
        bases,
        &up.scalars,
        up.len,
        ScalarFormat::Canonical,
        Some(&up.idx),
        MsmPlan::for_size(up.len),
    )
}

pub(super) fn u64s_as_bytes(v: &[u64]) -> &[u8] {
    bytemuck::cast_slice(v)
}
pub(super) fn u32s_as_bytes(v: &[u32]) -> &[u8] {
    bytemuck::cast_slice(v)
}
pub(super) fn limbs_as_bytes(v: &[[u64; 4]]) -> &[u8] {
    bytemuck::cast_slice(v)
}

pub(super) use crate::footprint::{MIN_STREAM_CHUNK, STREAM_BYTES_PER_POINT};
const _: () = {
    let budget = crate::streamed::SLOTS as u64 * STREAM_BYTES_PER_POINT;
    let slots = crate::streamed::SLOTS as u64;
    assert!(budget >= slots * (<G2 as DeviceCurve>::AFFINE_BYTES + TERM_BYTES_PER_POINT));
    assert!(budget >= slots * (<G1 as DeviceCurve>::AFFINE_BYTES + TERM_BYTES_PER_POINT) + 32);
};

/// [lo, hi) ranges of at most `chunk` (rounded down to a multiple of 64, at least
/// 64) covering 0..n.
pub(super) fn chunks(n: usize, chunk: usize) -> impl Iterator<Item = (usize, usize)> {
    let c = (chunk / 64 * 64).max(64);
    (0..n).step_by(c).map(move |lo| (lo, (lo + c).min(n)))
}
