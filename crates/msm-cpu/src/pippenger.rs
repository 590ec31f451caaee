//! Pippenger's bucket method with signed digits and batch-affine buckets.

use rayon::prelude::*;

use crate::batch::{sum_affine, BucketAccumulator};
use crate::curve::MsmCurve;

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

/// How an MSM is cut into tasks: `windows` windows of `c` bits, points in `chunks`
/// chunks of `chunk_len`; one task per (window, chunk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub c: usize,
    pub windows: usize,
    pub chunks: usize,
    pub chunk_len: usize,
}

/// Widest window tried. G1 buckets at c = 16 take 3 MiB, beyond the 2 MiB L2 of both
/// machines measured; the prefetch in `batch.rs` hides that. On the Xeon host (2 threads,
/// G1) c = 17 measured 3.28 µs/point at 2^20 against 3.51 for 16, and c = 18 3.30 at 2^22
/// against 3.43 — within that machine's run-to-run noise (~5%), while G2 buckets at
/// c = 18 would take 25 MiB per task, so the cap stays at 16.
const MAX_C: usize = 16;

/// Chooses the window width and the chunking for `n` points whose scalars use `nbits`
/// bits (carry bit included) on `threads` threads.
///
/// Cost model in bucket additions: a task over `m` points with `2^(c-1)` buckets costs
/// `m + 2·2^(c-1)` (the batch-affine reduction does two additions per bucket); tasks of
/// one plan all cost the same, so the wall time is `ceil(tasks / threads)` of them. The
/// model's minimum sits near `c = log2(n) - 4` and matched the measured optima: c = 13
/// at 2^16 (12, 14 slower), 15–16 at 2^18, 16 at 2^20, for G1 and G2 with 2 threads, on
/// the 2-core Xeon (Sapphire Rapids, 2 MiB L2 per core) and on a 16-core Xeon host
/// pinned to 2 cores. Points are split into chunks only when that shortens the wall
/// time, since each chunk pays its own reduction (16 threads at 2^20: one task per
/// window, no chunks).
pub(crate) fn plan(n: usize, nbits: usize, threads: usize) -> Plan {
    let mut best = (
        u128::MAX,
        u128::MAX,
        Plan {
            c: 2,
            windows: nbits.div_ceil(2),
            chunks: 1,
            chunk_len: n,
        },
    );
    for c in 2..=MAX_C {
        let windows = nbits.div_ceil(c);
        for chunks in 1..=threads.clamp(1, n.max(1)) {
            let chunk_len = n.div_ceil(chunks);
            let task = (chunk_len + 2 * (1usize << (c - 1))) as u128;
            let tasks = (windows * chunks) as u128;
            let wall = tasks.div_ceil(threads as u128) * task;
            let work = tasks * task;
            if (wall, work) < (best.0, best.1) {
                let p = Plan {
                    c,
                    windows,
                    chunks,
                    chunk_len,
                };
                best = (wall, work, p);
            }
        }
    }
    best.2
}

/// The windows of `bits` bits in `windows` windows: each window's lowest bit and width,
/// the widths as equal as they can be (`⌈bits/windows⌉` for the low ones, one less for
/// the rest). With equal widths the top window would hold only what is left over (1-4
/// bits of a random 255-bit scalar at c = 15, 14, 12, 11, 9): its digits would all fall
/// into a handful of buckets, the accumulator's slow case (a batch of a few additions
/// per inversion, then every point added projectively).
pub(crate) fn spans(bits: usize, windows: usize) -> Vec<(usize, usize)> {
    let windows = windows.max(1);
    let (base, extra) = (bits / windows, bits % windows);
    let mut lo = 0;
    (0..windows)
        .map(|j| {
            let width = base + usize::from(j < extra);
            let span = (lo, width);
            lo += width;
            span
        })
        .collect()
}

/// Additions queued per batch inversion. An inversion costs about 80 multiplications
/// (4.4 µs against 55 ns for Fp, 4.9 µs against 171 ns for Fp2, on the Xeon host), so 512
/// additions amortise it to 2% in G1. Larger batches measured slower (Xeon host, G1 2^20,
/// c = 16: 3.72 µs/point with 512, 3.85 with 1024, 3.94 with 2048; the 2-core Xeon: 2.72
/// with 512, 2.86 with 1024, 2.90 with 256): the batch outgrows L1 and conflicts more
/// often. Small windows keep the batch at most an eighth of the buckets, where a point
/// rarely meets a busy bucket.
pub(crate) fn batch_size(num_buckets: usize) -> usize {
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
pub(crate) fn signed_digit(s: &[u64; 4], lo: usize, c: usize) -> i32 {
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

    let Plan {
        c,
        windows,
        chunks,
        chunk_len,
    } = plan(n, nbits, pool.current_num_threads().max(1));

    // At most c bits each: the plan's bucket counts hold.
    let spans = spans(nbits, windows);
    let tasks: Vec<(usize, usize)> = (0..chunks)
        .flat_map(|ch| (0..windows).map(move |w| (w, ch)))
        .collect();
    let sums: Vec<C::Projective> = pool.install(|| {
        tasks
            .par_iter()
            .map(|&(w, ch)| {
                let lo = ch * chunk_len;
                let hi = ((ch + 1) * chunk_len).min(n);
                let (bit, width) = spans[w];
                window_sum::<C>(points, scalars, lo..hi, bit, width)
            })
            .collect()
    });
    debug_assert!(spans.iter().all(|&(_, width)| width <= c));

    // Horner over the windows, top first: acc = acc · 2^width_j + W_j.
    let mut acc = C::identity();
    for w in (0..windows).rev() {
        for _ in 0..spans[w].1 {
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
        acc.push(d.unsigned_abs() - 1, x, y, d < 0);
    }
    acc.weighted_sum()
}

/// `Σ bases[k]` over the set bits `k` of `ones`, in parallel chunks of batch-affine sums.
/// The caller checked that `ones.len() <= bases.len()`.
pub(crate) fn sum_density<C: MsmCurve>(
    bases: &[C::Affine],
    ones: &[u64],
    pool: &rayon::ThreadPool,
) -> C::Projective {
    // 256 words = 16 Ki bases per task: at most 1.5 MiB of G1 coordinates gathered, and
    // enough halving rounds that the projective tail of `sum_affine` is negligible.
    const WORDS: usize = 256;
    let partial: Vec<C::Projective> = pool.install(|| {
        ones.par_chunks(WORDS)
            .enumerate()
            .map(|(ci, ws)| {
                let mut pts = Vec::with_capacity(ws.iter().map(|w| w.count_ones() as usize).sum());
                for (wi, &w) in ws.iter().enumerate() {
                    let mut w = w;
                    while w != 0 {
                        let k = (ci * WORDS + wi) * 64 + w.trailing_zeros() as usize;
                        w &= w - 1;
                        if let Some((x, y)) = C::coords(&bases[k]) {
                            pts.push((*x, *y));
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

    fn to_u128(s: &[u64; 4]) -> u128 {
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
                assert_eq!(acc as u128, to_u128(s), "c = {c}");
            }
        }
    }

    #[test]
    fn spans_tile_the_bits_in_near_equal_widths() {
        for bits in [1usize, 3, 10, 129, 255, 256] {
            for c in 2..=16 {
                let windows = bits.div_ceil(c);
                let spans = spans(bits, windows);
                assert_eq!(spans.len(), windows);
                let mut next = 0;
                for &(lo, width) in &spans {
                    assert_eq!(lo, next, "bits {bits}, c {c}");
                    assert!(
                        width <= c && width + 1 >= bits / windows,
                        "bits {bits}, c {c}"
                    );
                    next = lo + width;
                }
                assert_eq!(next, bits, "bits {bits}, c {c}");
            }
        }
        // 256 bits in 18 windows (c = 15): no 1-bit top window.
        assert_eq!(*spans(256, 18).last().unwrap(), (242, 14));
    }

    #[test]
    fn plans_match_the_measured_optima_and_fill_the_threads() {
        // Measured best widths with 2 threads (see `plan`).
        assert_eq!(plan(1 << 16, 256, 2).c, 13);
        assert_eq!(plan(1 << 20, 256, 2).c, 16);
        for threads in [1, 2, 3, 16, 96] {
            for npow in [0, 3, 10, 16, 20, 24] {
                let n = 1usize << npow;
                let p = plan(n, 256, threads);
                assert!((2..=MAX_C).contains(&p.c));
                assert_eq!(p.windows, 256usize.div_ceil(p.c));
                assert!(p.chunks * p.chunk_len >= n);
                // Large MSMs occupy (nearly) every thread.
                if npow >= 16 {
                    let tasks = p.windows * p.chunks;
                    assert!(
                        10 * tasks >= 9 * threads,
                        "{threads} threads, 2^{npow}: {p:?}"
                    );
                }
            }
        }
        // Few windows (small scalars) are made up for by chunks.
        let p = plan(1 << 16, 5, 2);
        assert_eq!(p.windows * p.chunks % 2, 0);
    }
}
