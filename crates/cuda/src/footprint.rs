//! Device memory a partition needs and keeps, as plain arithmetic over counts.
//!
//! The backend plans each partition with these functions (`CudaBackend::prove`,
//! `prepare_bases`, `prepare_r1cs`), and the planner (`cuzk-plan`) calls the same
//! ones for a card it has never seen, so that what `cuzk plan` promises to fit is
//! what the backend will find fits. Nothing here touches the driver: the module
//! only reads the MSM and NTT engines' own size functions ([`MsmPlan`],
//! [`Ntt::h_device_bytes`], [`msm::ones_scratch_bytes`]), which are arithmetic too.

use crate::msm::{self, MsmPlan};
use crate::ntt::{Ntt, NttKernel};

/// Bytes of an affine G1 point on the device (and on the host: blstrs' layout).
pub const G1_AFFINE_BYTES: u64 = 96;
/// Bytes of an affine G2 point.
pub const G2_AFFINE_BYTES: u64 = 192;
/// Bytes of an XYZZ G1 point (the MSM's buckets).
pub const G1_XYZZ_BYTES: u64 = 192;
/// Bytes of an XYZZ G2 point.
pub const G2_XYZZ_BYTES: u64 = 384;

/// Smallest chunk worth streaming (points); chunks are multiples of 64 so that a
/// chunk's ones are whole bitmap words.
pub const MIN_STREAM_CHUNK: usize = 1 << 12;
/// Largest chunk `BasePlacement::Auto` streams (points). Larger chunks make fewer,
/// more efficient MSMs (on the H200, G1 at 2^22: 11.3 ns a point; 2^24: 9.3) but
/// a longer first chunk that nothing overlaps, and page-locked host memory grows
/// with them: at 2^23, two staging buffers of a chunk's bases and terms, 2.1 GiB
/// for G1 (3.6 GiB once b_g2 streams).
pub const MAX_AUTO_STREAM_CHUNK: usize = 1 << 23;
/// Device bytes per point of a chunk, budgeted twice (two slots): each slot's base
/// buffer (G2's 192 bytes, the largest) with its chunk's terms (37 bytes a point,
/// `streamed::TERM_BYTES_PER_POINT`, counted as 40),
/// and a scalar (H's coefficients of a chunk, one buffer). So 464 bytes a point
/// cover both G2's two slots (458) and G1's two plus H's scalars (298); the two
/// curves' buffers never coexist.
pub const STREAM_BYTES_PER_POINT: u64 = 192 + 40;

/// A split query's sizes: its bases, its tail terms (scalars neither 0 nor 1) and
/// the words of its ones bitmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitCounts {
    pub num_bases: usize,
    pub tail: usize,
    pub ones_words: usize,
}

/// What a partition's device memory depends on: its constraints (the H domain) and
/// its split queries (L, A, B_G1, and B_G2 when the backend does the G2 MSM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionCounts {
    pub constraints: usize,
    pub l: SplitCounts,
    pub a: SplitCounts,
    pub b_g1: SplitCounts,
    pub b_g2: Option<SplitCounts>,
}

/// How [`working_bytes`] counts a partition whose base sets may stream: MSMs of at
/// most `chunk` points over the sets not resident (`resident`: H, L, A, B_G1,
/// B_G2), whole ones over the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamEstimate {
    pub chunk: usize,
    pub resident: [bool; 5],
}

/// Device bytes a partition needs beyond the resident bases and compiled shapes
/// (H buffers, the largest MSM's scratch, the split uploads), with every MSM over
/// whole queries (`stream` `None`: the bases resident), or with the streamed sets'
/// MSMs per chunk. The two chunk buffers of streamed bases are not in it (see
/// [`stream_chunk`]); a witness partition adds [`witness_bytes`].
pub fn working_bytes(
    kernel: NttKernel,
    p: &PartitionCounts,
    stream: Option<StreamEstimate>,
) -> u64 {
    let big = 1usize << crate::log_domain(p.constraints);
    // Points one MSM over query k's bases may take at once: all of them, or a
    // chunk's when they stream.
    let at_once = |k: usize, len: usize| match stream {
        Some(s) if !s.resident[k] => len.min(s.chunk),
        _ => len,
    };
    let h = Ntt::h_device_bytes(kernel, p.constraints);
    // H's coefficients stay while their MSM runs (streamed: a chunk's copy too).
    let hm = at_once(0, big);
    let h_msm = MsmPlan::for_size(hm).scratch_bytes(hm)
        + big as u64 * 32
        + if hm < big { hm as u64 * 32 } else { 0 };
    // A query's ones sum (by batch-affine rounds, or the XYZZ kernel, whose
    // partials are small), then its tail MSM.
    let scratch = |k: usize, m: &SplitCounts, xyzz: u64| {
        let t = at_once(k, m.tail);
        let ones = msm::ones_scratch_bytes(at_once(k, m.num_bases), xyzz);
        MsmPlan::for_size(t).scratch_bytes_for(t, xyzz).max(ones)
    };
    // A query's bitmap and tail terms on the device: whole when its bases are
    // resident; streamed, a chunk's travel in the chunk buffers.
    let data = |k: usize, m: &SplitCounts| {
        if at_once(k, m.num_bases) < m.num_bases {
            0
        } else {
            m.tail as u64 * 36 + m.ones_words as u64 * 8
        }
    };
    let g1 = [&p.l, &p.a, &p.b_g1];
    // One query's MSM scratch at a time; L, A and B's scalars are uploaded
    // together, before a, b, c, and live next to the H buffers.
    let tails = (1..)
        .zip(g1)
        .map(|(k, m)| scratch(k, m, G1_XYZZ_BYTES))
        .chain(
            p.b_g2
                .as_ref()
                .map(|m| scratch(4, m, G2_XYZZ_BYTES) + data(4, m)),
        )
        .max()
        .unwrap_or(0)
        + (1..).zip(g1).map(|(k, m)| data(k, m)).sum::<u64>();
    h.max(h_msm) + tails
}

/// Device bytes of a partition's witness (`[input, aux]`, 32 bytes a value), which
/// lives next to the H buffers while the spmv kernel runs.
pub fn witness_bytes(num_inputs: usize, num_aux: usize) -> u64 {
    (num_inputs + num_aux).max(1) as u64 * 32
}

/// Device bytes of a compiled shape's copy: three row-pointer arrays, the terms
/// (8 bytes each) and the coefficient table.
pub fn r1cs_device_bytes(rows: usize, nnz: [usize; 3], num_coeffs: usize) -> u64 {
    let ptrs = 3 * (rows as u64 + 1) * 4;
    let terms: u64 = nnz.iter().map(|&n| n as u64 * 8).sum();
    ptrs + terms + num_coeffs as u64 * 32
}

/// Points per streamed chunk with `left` device bytes to spare: two slots of
/// [`STREAM_BYTES_PER_POINT`] a point, at most `forced` (or
/// [`MAX_AUTO_STREAM_CHUNK`] without), a multiple of 64; `None` when not even two
/// of the smallest chunks fit.
pub fn stream_chunk(left: u64, forced: Option<usize>) -> Option<usize> {
    let fit = (left / 2 / STREAM_BYTES_PER_POINT) as usize;
    if fit < MIN_STREAM_CHUNK {
        return None;
    }
    let chunk = forced.unwrap_or(MAX_AUTO_STREAM_CHUNK).min(fit).max(64);
    Some(chunk / 64 * 64)
}

/// The chunk cap `BasePlacement::Auto` streams with where `room` device bytes are
/// left for a partition (the budget less what stays resident for it): of the
/// powers of two from [`MAX_AUTO_STREAM_CHUNK`] down to [`MIN_STREAM_CHUNK`], the
/// one whose chunk ([`stream_chunk`] of what its least, `least(cap)`, leaves) is
/// largest, the larger cap on a tie; [`MAX_AUTO_STREAM_CHUNK`] where none fits
/// (the partition then fails with the need at that size). Where 2^23 fits at
/// all this is 2^23, with the chunk what is left (as before: 8.28 M points for
/// the H200's WindowPoSt); a smaller cap shrinks the MSM scratch with it: at the
/// 32 GiB PoRep shape with `a, b, c` from the host, 24.4 GB at 2^23 (issue 33's
/// failure on a 16 GB card) against ~15 GB at 2^18.
pub fn auto_chunk(room: u64, least: impl Fn(usize) -> u64) -> usize {
    let mut best: Option<(usize, usize)> = None;
    let mut cap = MAX_AUTO_STREAM_CHUNK;
    while cap >= MIN_STREAM_CHUNK {
        let need = least(cap);
        if need <= room {
            if let Some(chunk) = stream_chunk(room - need, Some(cap)) {
                if best.is_none_or(|(_, c)| chunk > c) {
                    best = Some((cap, chunk));
                }
            }
        }
        cap /= 2;
    }
    best.map_or(MAX_AUTO_STREAM_CHUNK, |(cap, _)| cap)
}

/// Device bytes a streamed partition needs at least with chunks of `chunk` points:
/// its working memory with every set not in `resident` streamed, and the two chunk
/// buffers.
pub fn streamed_need(
    kernel: NttKernel,
    p: &PartitionCounts,
    resident: [bool; 5],
    chunk: usize,
    witness: u64,
) -> u64 {
    working_bytes(kernel, p, Some(StreamEstimate { chunk, resident }))
        + witness
        + 2 * chunk as u64 * STREAM_BYTES_PER_POINT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_sizes_are_the_device_types() {
        use crate::gpu::{DeviceCurve, G1, G2};
        assert_eq!(G1_AFFINE_BYTES, G1::AFFINE_BYTES);
        assert_eq!(G2_AFFINE_BYTES, G2::AFFINE_BYTES);
        assert_eq!(G1_XYZZ_BYTES, G1::XYZZ_BYTES);
        assert_eq!(G2_XYZZ_BYTES, G2::XYZZ_BYTES);
    }

    #[test]
    fn a_smaller_chunk_never_needs_more() {
        let q = |n: usize, tail: usize| SplitCounts {
            num_bases: n,
            tail,
            ones_words: n.div_ceil(64),
        };
        let p = PartitionCounts {
            constraints: 130_278_869,
            l: q(130_169_893, 1_700_000),
            a: q(130_170_221, 1_600_000),
            b_g1: q(33_000_000, 1_200_000),
            b_g2: Some(q(33_000_000, 1_200_000)),
        };
        let mut last = u64::MAX;
        for log in (12..=23).rev() {
            let need = streamed_need(NttKernel::DEFAULT, &p, [false; 5], 1 << log, 0);
            assert!(need <= last, "2^{log}: {need} > {last}");
            last = need;
        }
        let resident = working_bytes(NttKernel::DEFAULT, &p, None);
        assert!(last <= resident);
    }

    #[test]
    fn auto_chunk_takes_the_largest_chunk_that_fits() {
        // A need of 1000 bytes a point of cap besides the two buffers; the chunk
        // streamed is what stream_chunk makes of what the cap's need leaves.
        let least = |c: usize| c as u64 * 1000;
        let need = |c: usize| least(c) + 2 * c as u64 * STREAM_BYTES_PER_POINT;
        let chunk = |room: u64| {
            let cap = auto_chunk(room, least);
            (
                cap,
                stream_chunk(room.saturating_sub(least(cap)), Some(cap)),
            )
        };
        assert_eq!(auto_chunk(u64::MAX, least), MAX_AUTO_STREAM_CHUNK);
        assert_eq!(chunk(need(1 << 20)), (1 << 20, Some(1 << 20)));
        // A byte short of a whole 2^20 chunk: 2^20 still, less 64 points, beats
        // a whole 2^19.
        assert_eq!(chunk(need(1 << 20) - 1), (1 << 20, Some((1 << 20) - 64)));
        // Where 2^23's need fits but not two whole chunks, 2^23 with what is left
        // (the automatic placement as it was), not a whole 2^22.
        let room = least(1 << 23) + 2 * (3 << 21) as u64 * STREAM_BYTES_PER_POINT;
        assert_eq!(chunk(room), (1 << 23, Some(3 << 21)));
        assert_eq!(chunk(need(MIN_STREAM_CHUNK)).1, Some(MIN_STREAM_CHUNK));
        // Nothing fits: the largest, whose need the failure then reports.
        assert_eq!(
            chunk(need(MIN_STREAM_CHUNK) - 1),
            (MAX_AUTO_STREAM_CHUNK, None)
        );
        assert_eq!(auto_chunk(0, |_| u64::MAX), MAX_AUTO_STREAM_CHUNK);
    }
}
