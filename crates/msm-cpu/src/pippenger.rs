//! Pippenger's bucket method with signed digits and batch-affine buckets.

use rayon::prelude::*;

use crate::batch::{sum_affine, BucketAccumulator};
use crate::curve::MsmCurve;
use cuzk_alloc::Density;

/// Where the MSM's points come from: the bases in order, or the bases at given indices
/// (the tail of a split, without gathering the bases into a copy first).
#[derive(Clone, Copy)]
pub(crate) enum Points<'a, A> {
    Dense(&'a [A]),
    Indexed(&'a [A], &'a [u32]),
}

impl<A> Points<'_, A> {
    /// The i-th point. Indices were checked against the bases by the caller.
    #[inline(always)]
    fn get(&self, i: usize) -> &A {
        match self {
            Points::Dense(b) => &b[i],
            Points::Indexed(b, ix) => &b[ix[i] as usize],
        }
    }
}

/// The window width for `n` points (per chunk).
///
/// Cost model, per window: `n` bucket additions (batch-affine, ~1 unit each) plus the
/// running-sum reduction over `2^(c-1)` buckets (a mixed and a full projective addition,
/// ~3.5 units); `256 / c` windows. The minimum sits near `c = log2(n) - 4`.
/// TODO(measure): tuned on the 2-core Xeon (Sapphire Rapids, 2 MiB L2 per core), see
/// `benches/msm.rs`.
pub(crate) fn window_bits(n: usize, nbits: usize) -> usize {
    let mut best = (f64::INFINITY, 2usize);
    for c in 2..=18usize {
        let windows = nbits.div_ceil(c) as f64;
        let cost = windows * (n as f64 + 3.5 * (1u64 << (c - 1)) as f64);
        if cost < best.0 {
            best = (cost, c);
        }
    }
    best.1
}

/// Additions queued per batch inversion. An inversion costs about as much as 60–100
/// multiplications, so a few hundred additions amortise it; larger batches touch more
/// buckets (cache) and conflict more often.
fn batch_size(num_buckets: usize) -> usize {
    (num_buckets / 8).clamp(4, 512)
}

/// The signed base-2^c digit `j` of a scalar: in `[-2^(c-1), 2^(c-1)]`.
///
/// The digit is `raw_j + carry_j - 2^c·top_j` where `raw_j` is bits `[jc, jc + c)`,
/// `top_j` its highest bit and `carry_j = top_{j-1}` (bit `jc - 1`). The sum over the
/// windows telescopes to the scalar as long as the last window's top bit is zero, which
/// the caller guarantees by covering one bit more than the scalars use. Each digit
/// depends only on its own bits, so windows can be processed independently.
#[inline(always)]
fn signed_digit(s: &[u64; 4], lo: usize, c: usize) -> i32 {
    // Read c + 1 bits starting one below the window (bit lo - 1 is the carry).
    let (start, width) = if lo == 0 { (0, c) } else { (lo - 1, c + 1) };
    let limb = start / 64;
    let shift = start % 64;
    let mut v = if limb < 4 { s[limb] >> shift } else { 0 };
    if shift + width > 64 && limb + 1 < 4 {
        v |= s[limb + 1] << (64 - shift);
    }
    v &= (1u64 << width) - 1;
    let (carry, raw) = if lo == 0 { (0, v) } else { (v & 1, v >> 1) };
    let top = raw >> (c - 1);
    raw as i32 + carry as i32 - ((top as i32) << c)
}

/// `Σ scalars[i] · points[i]`: lengths already checked, indices in range.
pub(crate) fn msm<C: MsmCurve>(
    points: Points<'_, C::Affine>,
    scalars: &[[u64; 4]],
    pool: &rayon::ThreadPool,
) -> C::Projective {
    let n = scalars.len();
    if n == 0 {
        return C::identity();
    }
    // Windows need to cover only the bits some scalar uses, plus one for the last carry.
    let used = scalars.iter().fold([0u64; 4], |acc, s| {
        [acc[0] | s[0], acc[1] | s[1], acc[2] | s[2], acc[3] | s[3]]
    });
    let bitlen = (0..4)
        .rev()
        .find(|&i| used[i] != 0)
        .map_or(0, |i| 64 * i + 64 - used[i].leading_zeros() as usize);
    if bitlen == 0 {
        return C::identity();
    }
    let nbits = bitlen + 1;

    let threads = pool.current_num_threads().max(1);
    // Windows are independent tasks; split the points into chunks only when there are
    // too few windows to keep every thread busy (each chunk pays its own reduction).
    let c0 = window_bits(n, nbits);
    let windows0 = nbits.div_ceil(c0);
    let chunks = (2 * threads)
        .div_ceil(windows0)
        .clamp(1, n.div_ceil(1024).max(1));
    let chunk_len = n.div_ceil(chunks);
    let c = if chunks > 1 {
        window_bits(chunk_len, nbits)
    } else {
        c0
    };
    let windows = nbits.div_ceil(c);

    let tasks: Vec<(usize, usize)> = (0..chunks)
        .flat_map(|ch| (0..windows).map(move |w| (w, ch)))
        .collect();
    let sums: Vec<C::Projective> = pool.install(|| {
        tasks
            .par_iter()
            .map(|&(w, ch)| {
                let lo = ch * chunk_len;
                let hi = ((ch + 1) * chunk_len).min(n);
                window_sum::<C>(points, scalars, lo..hi, w * c, c)
            })
            .collect()
    });

    // Horner over the windows, top first: acc = acc · 2^c + W_j.
    let mut acc = C::identity();
    for w in (0..windows).rev() {
        for _ in 0..c {
            acc = C::double(&acc);
        }
        for ch in 0..chunks {
            C::add(&mut acc, &sums[ch * windows + w]);
        }
    }
    acc
}

/// `Σ_i digit_i · point_i` over one window and one chunk of points.
fn window_sum<C: MsmCurve>(
    points: Points<'_, C::Affine>,
    scalars: &[[u64; 4]],
    range: std::ops::Range<usize>,
    lo: usize,
    c: usize,
) -> C::Projective {
    let num_buckets = 1usize << (c - 1);
    let mut acc = BucketAccumulator::<C>::new(num_buckets, batch_size(num_buckets));
    for i in range {
        let d = signed_digit(&scalars[i], lo, c);
        if d == 0 {
            continue;
        }
        let Some((x, y)) = C::coords(points.get(i)) else {
            continue;
        };
        if d > 0 {
            acc.push((d - 1) as u32, x, y);
        } else {
            acc.push((-d - 1) as u32, x, -y);
        }
    }
    acc.weighted_sum()
}

/// `Σ bases[k]` over the set bits `k` of `ones`, in parallel chunks of batch-affine sums.
/// The caller checked that `ones.len() <= bases.len()`.
pub(crate) fn sum_density<C: MsmCurve>(
    bases: &[C::Affine],
    ones: &Density,
    pool: &rayon::ThreadPool,
) -> C::Projective {
    // 256 words = 16 Ki bases per task: at most 1.5 MiB of G1 coordinates gathered, and
    // enough halving rounds that the projective tail of `sum_affine` is negligible.
    const WORDS: usize = 256;
    let partial: Vec<C::Projective> = pool.install(|| {
        ones.words()
            .par_chunks(WORDS)
            .enumerate()
            .map(|(ci, ws)| {
                let mut pts = Vec::with_capacity(ws.iter().map(|w| w.count_ones() as usize).sum());
                for (wi, &w) in ws.iter().enumerate() {
                    let mut w = w;
                    while w != 0 {
                        let k = (ci * WORDS + wi) * 64 + w.trailing_zeros() as usize;
                        w &= w - 1;
                        if let Some(xy) = C::coords(&bases[k]) {
                            pts.push(xy);
                        }
                    }
                }
                sum_affine::<C>(pts)
            })
            .collect()
    });
    let mut total = C::identity();
    for p in &partial {
        C::add(&mut total, p);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_u256(s: &[u64; 4]) -> u128 {
        // Only used with scalars below 2^128.
        s[0] as u128 | (s[1] as u128) << 64
    }

    #[test]
    fn signed_digits_recompose_the_scalar() {
        let samples: [[u64; 4]; 5] = [
            [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210, 0, 0],
            [u64::MAX, u64::MAX, 0, 0],
            [1, 0, 0, 0],
            [0x8000_0000_0000_0000, 0x7fff_ffff_ffff_ffff, 0, 0],
            [0xffff_0000_ffff_0000, 0x0000_ffff_0000_ffff, 0, 0],
        ];
        for s in &samples {
            for c in 2..=18 {
                let windows = 129usize.div_ceil(c);
                let mut acc: i128 = 0;
                for w in (0..windows).rev() {
                    let d = signed_digit(s, w * c, c);
                    assert!(d.unsigned_abs() <= 1 << (c - 1));
                    // Mod 2^128 is enough: the digits are bounded separately.
                    acc = acc.wrapping_shl(c as u32).wrapping_add(d as i128);
                }
                assert_eq!(acc as u128, to_u256(s), "c = {c}");
            }
        }
    }
}
