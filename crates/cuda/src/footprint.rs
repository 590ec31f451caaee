//! Device memory a partition needs and keeps, as plain arithmetic over counts.
//!
//! The backend plans each partition with these functions (`CudaBackend::prove`,
//! `prepare_bases`, `prepare_r1cs`), and the planner (`cuzk-plan`) calls the same
//! ones for a card it has never seen, so that what `cuzk plan` promises to fit is
//! what the backend will find fits. Nothing here touches the driver: the module
//! only reads the MSM and NTT engines' own size functions (`MsmPlan`,
//! `Ntt::h_device_bytes`, `msm::ones_scratch_bytes`), which are arithmetic too.
//! The MSM's scratch depends on its launch parameters ([`MsmTuning`]: batch-affine
//! or not, the window group), so every function here that counts it takes them:
//! the backend passes its own, the planner the defaults it plans for.

use crate::msm::{self, MsmPlan, MsmTuning};
use crate::ntt::{HBuffers, Ntt, NttKernel};

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
    /// The H computation's buffers ([`HBuffers::Two`] where three do not fit).
    pub h_buffers: HBuffers,
}

/// Device bytes a partition needs beyond the resident bases and compiled shapes
/// (H buffers, the largest MSM's scratch, the split uploads), with every MSM over
/// whole queries (`stream` `None`: the bases resident), or with the streamed sets'
/// MSMs per chunk. The two chunk buffers of streamed bases are not in it (see
/// [`stream_chunk`]); a witness partition adds [`witness_bytes`]. The MSMs' scratch
/// is `tuning`'s.
pub fn working_bytes(
    kernel: NttKernel,
    tuning: &MsmTuning,
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
    let h = Ntt::h_device_bytes(
        kernel,
        p.constraints,
        stream.map_or(HBuffers::Three, |s| s.h_buffers),
    );
    // H's coefficients stay while their MSM runs (streamed: a chunk's copy too).
    let hm = at_once(0, big);
    let h_msm = MsmPlan::for_size(hm).scratch_bytes(tuning, hm)
        + big as u64 * 32
        + if hm < big { hm as u64 * 32 } else { 0 };
    // r2wg's table, kept once built, is still there while H's MSM runs.
    h.max(h_msm + Ntt::kept_table_bytes(kernel, p.constraints)) + split_bytes(tuning, p, at_once)
}

/// Device bytes of the split queries (L, A, B_G1 and B_G2 where the backend does
/// it) beside their bases: the largest query's MSM scratch (one query at a time)
/// and every query's bitmap and tail terms, with `at_once(k, len)` the points
/// query k's MSMs take at once (all of `len` resident, a chunk's streamed).
fn split_bytes(
    tuning: &MsmTuning,
    p: &PartitionCounts,
    at_once: impl Fn(usize, usize) -> usize,
) -> u64 {
    // A query's ones sum (by batch-affine rounds, or the XYZZ kernel, whose
    // partials are small), then its tail MSM.
    let scratch = |k: usize, m: &SplitCounts, xyzz: u64| {
        let t = at_once(k, m.tail);
        let ones = msm::ones_scratch_bytes(tuning, at_once(k, m.num_bases), xyzz);
        MsmPlan::for_size(t)
            .scratch_bytes_for(tuning, t, xyzz)
            .max(ones)
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
    (1..)
        .zip(g1)
        .map(|(k, m)| scratch(k, m, G1_XYZZ_BYTES))
        .chain(
            p.b_g2
                .as_ref()
                .map(|m| scratch(4, m, G2_XYZZ_BYTES) + data(4, m)),
        )
        .max()
        .unwrap_or(0)
        + (1..).zip(g1).map(|(k, m)| data(k, m)).sum::<u64>()
}

/// Device bytes of the split queries' phase with the streamed ones in chunks of
/// `split` points (`resident`: H, L, A, B_G1, B_G2 kept on the device): H's
/// coefficients (computed before the queries run, kept for H's MSM after them),
/// r2wg's table where it runs (kept once built), and the split queries' scratch
/// and data (`split_bytes`) at that chunk. The two chunk buffers are not in it. H's
/// other buffers and its MSM's scratch are not alive then (the transforms have
/// freed them, the MSM comes after), so the split queries may stream in larger
/// chunks than H's MSM, whose scratch bounds its own chunk.
pub fn split_phase_bytes(
    kernel: NttKernel,
    tuning: &MsmTuning,
    p: &PartitionCounts,
    resident: [bool; 5],
    split: usize,
) -> u64 {
    let big = 1u64 << crate::log_domain(p.constraints);
    let at_once = |k: usize, len: usize| if resident[k] { len } else { len.min(split) };
    big * 32 + Ntt::kept_table_bytes(kernel, p.constraints) + split_bytes(tuning, p, at_once)
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
    tuning: &MsmTuning,
    p: &PartitionCounts,
    resident: [bool; 5],
    chunk: usize,
    witness: u64,
) -> u64 {
    let estimate = StreamEstimate {
        chunk,
        resident,
        h_buffers: HBuffers::Three,
    };
    working_bytes(kernel, tuning, p, Some(estimate))
        + witness
        + 2 * chunk as u64 * STREAM_BYTES_PER_POINT
}

/// What a streamed chunk costs beyond its bytes, in bytes over PCIe: the waits
/// between its DMA and its MSM, per-launch MSM overheads. Measured on the H100
/// (2026-12-06, `cuzk-gpu-check` partition bench): a 2^27 PoRep-shaped partition
/// with every set streamed from registered memory in 105 chunks of 2^22 took
/// 2182 ms against 1604 resident, `(bases + a, b, c + chunks x this) / 50 GB/s`
/// with this at ~11 ms a chunk. (Copied through staging buffers, the first
/// visit's engine cells implied ~28 ms a chunk.)
pub const CHUNK_COST_BYTES: u64 = 550_000_000;

/// Chunks a partition streams with `resident` kept: H in chunks of `chunk`, the
/// split queries in chunks of `split`.
pub fn streamed_chunks(sets: [u64; 5], resident: [bool; 5], chunk: usize, split: usize) -> u64 {
    (0..5)
        .filter(|&k| !resident[k] && sets[k] > 0)
        .map(|k| {
            let point = if k == 4 {
                G2_AFFINE_BYTES
            } else {
                G1_AFFINE_BYTES
            };
            let c = if k == 0 { chunk } else { split };
            (sets[k] / point).div_ceil(c.max(1) as u64)
        })
        .sum()
}

/// What a partition needs placed: its counts, the device bytes of its base sets
/// (H, L, A, B_G1, B_G2; 0 for a set it does not have), its witness bytes
/// (device spmv, which evaluates a, b, c into three buffers; 0 for a, b, c from
/// the host), and the device bytes it may use (the budget less what must stay
/// for it: its compiled shape).
#[derive(Clone, Copy, Debug)]
pub struct PlaceInput<'a> {
    pub kernel: NttKernel,
    /// The MSM launch parameters the partition runs with (its scratch).
    pub tuning: &'a MsmTuning,
    pub counts: &'a PartitionCounts,
    pub sets: [u64; 5],
    pub witness: u64,
    pub room: u64,
    /// `BasePlacement::Streamed`'s chunk: nothing resident, chunks of this size.
    pub forced_chunk: Option<usize>,
}

/// Where a partition's bases live and how it runs ([`place`]); the backend
/// (`CudaBackend::prove`) runs it and the planner (`cuzk-plan`) predicts it from
/// the same function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The base sets kept on the device (H, L, A, B_G1, B_G2).
    pub resident: [bool; 5],
    /// Points a streamed chunk of H's bases holds; `None` when nothing streams.
    pub chunk: Option<usize>,
    /// Points a streamed chunk of a split query's bases (L, A, B_G1, B_G2)
    /// holds, at least `chunk`: their MSMs need less scratch than H's and run
    /// while H's transforms and MSM hold none ([`split_phase_bytes`]); `None`
    /// when nothing streams.
    pub split_chunk: Option<usize>,
    /// The largest chunk the partition's MSM scratch was counted for (the chunk
    /// cap the backend streams with).
    pub cap: usize,
    pub h_buffers: HBuffers,
    /// Device bytes: the resident sets, the working memory and the two chunk
    /// buffers.
    pub need: u64,
    /// The least the partition runs in at this cap (everything streamed, the
    /// working memory only): what a compiled shape must leave room for.
    pub least: u64,
}

impl Placement {
    /// What [`place`] minimises, in bytes over PCIe: the sets streamed, each chunk
    /// at [`CHUNK_COST_BYTES`], and with two H buffers `c`'s upload (32 bytes a
    /// row), which then no longer overlaps `a`'s and `b`'s transforms.
    pub fn stream_cost(&self, sets: [u64; 5], rows: usize) -> u64 {
        let chunks = streamed_chunks(
            sets,
            self.resident,
            self.chunk.unwrap_or(usize::MAX),
            self.split_chunk.unwrap_or(usize::MAX),
        );
        let c = match self.h_buffers {
            HBuffers::Two => rows as u64 * 32,
            HBuffers::Three => 0,
        };
        self.streamed_bytes(sets) + chunks * CHUNK_COST_BYTES + c
    }

    /// Bytes of the sets kept on the device.
    pub fn kept_bytes(&self, sets: [u64; 5]) -> u64 {
        sets.iter().sum::<u64>() - self.streamed_bytes(sets)
    }

    /// Bytes of the sets that stream (the transfer a partition makes).
    pub fn streamed_bytes(&self, sets: [u64; 5]) -> u64 {
        sets.iter()
            .zip(self.resident)
            .filter(|(_, r)| !r)
            .map(|(b, _)| b)
            .sum()
    }
}

/// Places a partition ([`PlaceInput`]): every set resident where they all fit
/// beside the whole-query working memory; else, of every choice of sets kept
/// resident and of three or two H buffers, the one that fits whose stream costs
/// least ([`Placement::stream_cost`]: the bytes streamed, a chunk's
/// [`CHUNK_COST_BYTES`], `c`'s upload where two H buffers leave it unoverlapped).
/// A choice's cost falls as the room grows (a larger chunk fits), so more room
/// never places a partition that streams more. `Err` carries the least the
/// partition needs at all.
pub fn place(inp: &PlaceInput<'_>) -> Result<Placement, u64> {
    let absent = |k: usize| k == 4 && inp.counts.b_g2.is_none();
    let all: u64 = inp.sets.iter().sum();
    if inp.forced_chunk.is_none() {
        let working = working_bytes(inp.kernel, inp.tuning, inp.counts, None) + inp.witness;
        if all + working <= inp.room {
            return Ok(Placement {
                resident: [true; 5],
                chunk: None,
                split_chunk: None,
                cap: MAX_AUTO_STREAM_CHUNK,
                h_buffers: HBuffers::Three,
                need: all + working,
                least: working,
            });
        }
    }
    // Streamed with `resident` kept: the largest chunk that fits beside them.
    let streamed = |resident: [bool; 5], h_buffers: HBuffers| -> Option<Placement> {
        let kept: u64 = inp
            .sets
            .iter()
            .zip(resident)
            .filter(|(_, r)| *r)
            .map(|(b, _)| b)
            .sum();
        let left = inp.room.checked_sub(kept)?;
        let least = |chunk: usize| {
            let e = StreamEstimate {
                chunk,
                resident,
                h_buffers,
            };
            working_bytes(inp.kernel, inp.tuning, inp.counts, Some(e)) + inp.witness
        };
        let cap = inp.forced_chunk.unwrap_or_else(|| auto_chunk(left, least));
        let l = least(cap);
        let chunk = stream_chunk(left.checked_sub(l)?, Some(cap))?;
        let need = kept + l + 2 * chunk as u64 * STREAM_BYTES_PER_POINT;
        // The split queries' chunk: the largest their own phase fits (never
        // smaller than H's, which `l` already counts them at); a forced chunk is
        // every set's.
        let split_least = |s: usize| {
            split_phase_bytes(inp.kernel, inp.tuning, inp.counts, resident, s) + inp.witness
        };
        let split = match inp.forced_chunk {
            Some(_) => chunk,
            None if resident[1..].iter().all(|r| *r) => chunk,
            None => {
                let cap = auto_chunk(left, split_least);
                left.checked_sub(split_least(cap))
                    .and_then(|rest| stream_chunk(rest, Some(cap)))
                    .map_or(chunk, |s| s.max(chunk))
            }
        };
        let split_need = kept + split_least(split) + 2 * split as u64 * STREAM_BYTES_PER_POINT;
        Some(Placement {
            resident,
            chunk: Some(chunk),
            split_chunk: Some(split),
            cap,
            h_buffers,
            need: need.max(split_need),
            least: l,
        })
    };
    // The device spmv evaluates a, b, c into three buffers: two only for a, b, c
    // from the host.
    let buffers: &[HBuffers] = if inp.witness > 0 {
        &[HBuffers::Three]
    } else {
        &[HBuffers::Three, HBuffers::Two]
    };
    // A forced chunk keeps nothing resident (`BasePlacement::Streamed`).
    let masks = if inp.forced_chunk.is_some() {
        0..1
    } else {
        0..32u32
    };
    let mut best: Option<(u64, Placement)> = None;
    for mask in masks {
        let resident: [bool; 5] = std::array::from_fn(|k| absent(k) || mask >> k & 1 == 1);
        if (0..5).any(|k| absent(k) && mask >> k & 1 == 1) {
            continue;
        }
        for &h in buffers {
            if let Some(p) = streamed(resident, h) {
                let cost = p.stream_cost(inp.sets, inp.counts.constraints);
                if best.is_none_or(|(c, _)| cost < c) {
                    best = Some((cost, p));
                }
            }
        }
    }
    if let Some((_, p)) = best {
        return Ok(p);
    }
    let none = [false, false, false, false, absent(4)];
    let least = |h_buffers| {
        let e = StreamEstimate {
            chunk: MIN_STREAM_CHUNK,
            resident: none,
            h_buffers,
        };
        working_bytes(inp.kernel, inp.tuning, inp.counts, Some(e))
            + inp.witness
            + 2 * MIN_STREAM_CHUNK as u64 * STREAM_BYTES_PER_POINT
    };
    Err(buffers.iter().map(|&h| least(h)).min().unwrap_or(0))
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
            let need = streamed_need(
                NttKernel::DEFAULT,
                &MsmTuning::DEFAULT,
                &p,
                [false; 5],
                1 << log,
                0,
            );
            assert!(need <= last, "2^{log}: {need} > {last}");
            last = need;
        }
        let resident = working_bytes(NttKernel::DEFAULT, &MsmTuning::DEFAULT, &p, None);
        assert!(last <= resident);
    }

    /// The 32 GiB PoRep partition's counts (the planner's shape table has the
    /// same), a, b, c from the host, b_g2 on the device.
    fn porep32() -> (PartitionCounts, [u64; 5]) {
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
        let sets = [
            ((1u64 << 27) - 1) * G1_AFFINE_BYTES,
            130_169_893 * G1_AFFINE_BYTES,
            130_170_221 * G1_AFFINE_BYTES,
            33_000_000 * G1_AFFINE_BYTES,
            33_000_000 * G2_AFFINE_BYTES,
        ];
        (p, sets)
    }

    fn input<'a>(p: &'a PartitionCounts, sets: [u64; 5], gib: f64) -> PlaceInput<'a> {
        PlaceInput {
            kernel: NttKernel::Radix2WarpFast,
            tuning: &MsmTuning::DEFAULT,
            counts: p,
            sets,
            witness: 0,
            room: (gib * (1u64 << 30) as f64) as u64,
            forced_chunk: None,
        }
    }

    /// Every card from 11.5 GiB of room up runs the 32 GiB partition, within its
    /// room; more room never keeps fewer sets.
    #[test]
    fn placements_fit_and_stream_less_as_the_card_grows() {
        let (p, sets) = porep32();
        let mut cost_before = u64::MAX;
        for gib in [11.5, 14.0, 20.0, 28.0, 44.0, 60.0, 76.0, 130.0] {
            let inp = input(&p, sets, gib);
            let pl = place(&inp).unwrap_or_else(|n| panic!("{gib} GiB: needs {n}"));
            assert!(pl.need <= inp.room, "{gib} GiB: {pl:?}");
            let cost = pl.stream_cost(sets, p.constraints);
            assert!(
                cost <= cost_before,
                "{gib} GiB streams {cost} > {cost_before}"
            );
            cost_before = cost;
            // Nothing left out that would have fitted: a set streamed would not
            // fit beside the placement's need.
            if pl.chunk.is_some() {
                for k in (0..5).filter(|&k| !pl.resident[k]) {
                    assert!(
                        pl.need + sets[k] > inp.room,
                        "{gib} GiB: {k} streams with room to spare: {pl:?}"
                    );
                }
            }
        }
        // A 16 GB card (~11.8 GiB of room): everything streams, H in two buffers
        // (three of 4 GiB do not fit beside anything).
        let small = place(&input(&p, sets, 11.8)).unwrap();
        assert_eq!(small.h_buffers, HBuffers::Two);
        assert_eq!(small.resident, [false; 5]);
        // An 80 GB card (~76 GiB of room) cannot keep all 44 GiB of bases beside
        // the whole-query working memory (~64 GiB: the 2^27 MSM's scratch alone
        // is 46 GiB), so it streams, keeping some sets resident.
        let h100 = place(&input(&p, sets, 76.0)).unwrap();
        assert!(
            h100.chunk.is_some() && h100.resident.iter().any(|r| *r),
            "{h100:?}"
        );
        // A card with room for both keeps everything and streams nothing.
        let big = place(&input(&p, sets, 130.0)).unwrap();
        assert_eq!((big.resident, big.chunk), ([true; 5], None));
        // Too small: the least it needs, more than the room.
        let tiny = input(&p, sets, 6.0);
        assert!(place(&tiny).unwrap_err() > tiny.room);
    }

    /// At the least any placement needs (what `place` errs with), every set
    /// streams and H takes two buffers, at the 32 GiB shape and at the device
    /// test's largest (2^20): what that test relies on to find a two-buffer
    /// placement. At 2^18 the MSM scratch of even the smallest chunk outweighs
    /// H's third buffer, and two buffers never pay.
    #[test]
    fn the_least_placement_takes_two_h_buffers() {
        let q = |n: usize, tail: usize| SplitCounts {
            num_bases: n,
            tail,
            ones_words: n.div_ceil(64),
        };
        let n = (1 << 20) - 7;
        let small = PartitionCounts {
            constraints: n,
            l: q(n - 300, n / 80),
            a: q(n - 30, n / 80),
            b_g1: q(n / 4, n / 100),
            b_g2: Some(q(n / 4, n / 100)),
        };
        let small_sets = [
            ((1u64 << 20) - 1) * G1_AFFINE_BYTES,
            (n as u64 - 300) * G1_AFFINE_BYTES,
            (n as u64 - 30) * G1_AFFINE_BYTES,
            (n as u64 / 4) * G1_AFFINE_BYTES,
            (n as u64 / 4) * G2_AFFINE_BYTES,
        ];
        let (p, sets) = porep32();
        for (p, sets) in [(small, small_sets), (p, sets)] {
            let mut inp = input(&p, sets, 0.0);
            let least = place(&inp).unwrap_err();
            inp.room = least;
            let pl = place(&inp).unwrap();
            assert_eq!(pl.h_buffers, HBuffers::Two, "{pl:?}");
            assert_eq!(pl.resident, [false; 5], "{pl:?}");
            assert!(pl.need <= least);
        }
    }

    /// A small card's H chunk is bounded by H's MSM scratch; its split queries
    /// stream in larger chunks, in a phase that fits the room by itself, and never
    /// in smaller ones than H's. A forced chunk is every set's.
    #[test]
    fn split_queries_stream_in_chunks_no_smaller_than_h() {
        let (p, sets) = porep32();
        for witness in [0, 4_200_000_000] {
            for gib in [13.4, 16.0, 21.4, 28.0, 44.0, 60.0, 76.0] {
                let mut inp = input(&p, sets, gib);
                inp.witness = witness;
                let Ok(pl) = place(&inp) else { continue };
                let (Some(h), Some(split)) = (pl.chunk, pl.split_chunk) else {
                    assert_eq!((pl.chunk, pl.split_chunk), (None, None));
                    continue;
                };
                assert!(
                    split >= h && split <= MAX_AUTO_STREAM_CHUNK,
                    "{gib} GiB: {pl:?}"
                );
                let phase = pl.kept_bytes(sets)
                    + split_phase_bytes(inp.kernel, &MsmTuning::DEFAULT, &p, pl.resident, split)
                    + witness
                    + 2 * split as u64 * STREAM_BYTES_PER_POINT;
                assert!(phase <= pl.need && pl.need <= inp.room, "{gib} GiB: {pl:?}");
                if pl.resident[1..].iter().all(|r| *r) {
                    assert_eq!(split, h, "{gib} GiB: nothing split streams");
                }
            }
        }
        // The 16 GB card (13.4 GiB planned, a, b, c from the host): H's MSM scratch
        // keeps its chunk under 2^21 points; L, A and B go in chunks of 2^23, so a
        // partition streams ~115 chunks instead of ~259.
        let pl = place(&input(&p, sets, 13.4)).unwrap();
        assert!(pl.chunk.unwrap() < 1 << 21, "{pl:?}");
        assert_eq!(pl.split_chunk, Some(MAX_AUTO_STREAM_CHUNK), "{pl:?}");
        let n = streamed_chunks(
            sets,
            pl.resident,
            pl.chunk.unwrap(),
            pl.split_chunk.unwrap(),
        );
        assert!((100..130).contains(&n), "{n} chunks: {pl:?}");
        let mut inp = input(&p, sets, 76.0);
        inp.forced_chunk = Some(1 << 20);
        let pl = place(&inp).unwrap();
        assert_eq!(pl.split_chunk, pl.chunk);
    }

    #[test]
    fn a_forced_chunk_keeps_nothing() {
        let (p, sets) = porep32();
        let mut inp = input(&p, sets, 130.0);
        inp.forced_chunk = Some(1 << 20);
        let pl = place(&inp).unwrap();
        assert_eq!(pl.resident, [false; 5]);
        assert!(pl.chunk.is_some_and(|c| c <= 1 << 20));
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
