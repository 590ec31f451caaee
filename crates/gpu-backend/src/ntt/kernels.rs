//! The butterflies, and the two kinds of memory pass the transforms are made of.
//!
//! Every function here runs inside the caller's rayon pool (`ThreadPool::install`),
//! so `rayon::join` and `par_*` iterators use that pool.

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::fr;
use super::{ColPass, Domain, Roots};

/// `(l, h) ← (l + h, (l − h)·w)`.
#[inline(always)]
fn dif_butterfly(l: &mut Scalar, h: &mut Scalar, w: &Scalar) {
    let (u, v) = (fr::from_scalar(l), fr::from_scalar(h));
    *l = fr::to_scalar(fr::add(&u, &v));
    *h = fr::to_scalar(fr::sub(&u, &v)) * w;
}

/// `(l, h) ← (l + h·w, l − h·w)`.
#[inline(always)]
fn dit_butterfly(l: &mut Scalar, h: &mut Scalar, w: &Scalar) {
    let u = fr::from_scalar(l);
    let v = fr::from_scalar(&(*h * w));
    *l = fr::to_scalar(fr::add(&u, &v));
    *h = fr::to_scalar(fr::sub(&u, &v));
}

/// `(l, h) ← (l + h, l − h)`: both butterflies with a unit twiddle.
#[inline(always)]
fn unit_butterfly(l: &mut Scalar, h: &mut Scalar) {
    let (u, v) = (fr::from_scalar(l), fr::from_scalar(h));
    *l = fr::to_scalar(fr::add(&u, &v));
    *h = fr::to_scalar(fr::sub(&u, &v));
}

/// `k`-bit reversal of `x` (`x < 2^k`).
#[inline]
pub(super) fn rev(x: usize, k: u32) -> usize {
    if k == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - k)
    }
}

/// Decimation-in-frequency butterflies over a whole contiguous slice of length
/// `2^k`: natural-order input, bit-reversed output. Stage with half-span `half` uses
/// `tw[half + t]` for the pair `(t, t + half)` of each `2·half` block.
///
/// `unit_last` says that `tw[1]` is one (true for the plain root table), so the last
/// stage's products can be skipped: that is one stage in `k` without a product.
#[inline]
pub(super) fn dif(x: &mut [Scalar], tw: &[Scalar], unit_last: bool) {
    let mut half = x.len() / 2;
    while half >= 1 {
        if half == 1 && unit_last {
            for pair in x.chunks_exact_mut(2) {
                let (l, h) = pair.split_at_mut(1);
                unit_butterfly(&mut l[0], &mut h[0]);
            }
            break;
        }
        let w = &tw[half..2 * half];
        for block in x.chunks_exact_mut(2 * half) {
            let (lo, hi) = block.split_at_mut(half);
            for ((l, h), w) in lo.iter_mut().zip(hi.iter_mut()).zip(w) {
                dif_butterfly(l, h, w);
            }
        }
        half /= 2;
    }
}

/// Decimation-in-time butterflies, the exact reverse of [`dif`]: bit-reversed input,
/// natural-order output, same twiddle layout.
#[inline]
pub(super) fn dit(x: &mut [Scalar], tw: &[Scalar], unit_first: bool) {
    let n = x.len();
    let mut half = 1;
    while half < n {
        if half == 1 && unit_first {
            for pair in x.chunks_exact_mut(2) {
                let (l, h) = pair.split_at_mut(1);
                unit_butterfly(&mut l[0], &mut h[0]);
            }
            half = 2;
            continue;
        }
        let w = &tw[half..2 * half];
        for block in x.chunks_exact_mut(2 * half) {
            let (lo, hi) = block.split_at_mut(half);
            for ((l, h), w) in lo.iter_mut().zip(hi.iter_mut()).zip(w) {
                dit_butterfly(l, h, w);
            }
        }
        half *= 2;
    }
}

/// The twiddles of one column `j` of a column pass, laid out like the root table
/// (`out[2^s + m]` for local stage `s` and pair offset `m < 2^s`), so that
/// [`dif`]/[`dit`] run the pass's `L` stages on the gathered column unchanged.
///
/// In global terms stage `s` of the pass has half-span `H = 2^s·h` and the element
/// pair at local offset `m`, column `j` needs `ω_{2H}^{m·h + j} = ω_{2^{s+1}}^m ·
/// ω_{2H}^j`: a small-table root times a column factor, and the column factors of
/// the `L` stages are successive squares of `β = ω_{K·h}^j`. So a column costs
/// `K − 1` products however many blocks share it.
fn column_twiddles(out: &mut [Scalar], roots: &Roots, pass: &ColPass, log_n: u32, j: usize) {
    let mut b = roots.pow(j << (log_n - pass.log_h - pass.log_k));
    for s in (0..pass.log_k).rev() {
        let half = 1usize << s;
        out[half] = b;
        for m in 1..half {
            out[half + m] = roots.small[half + m] * b;
        }
        b = b.square();
    }
}

/// Splits `K·blocks·vectors` equal slices into column chunks of at most `width`
/// columns and calls `leaf(j0, chunks)` on each chunk set, in parallel. The
/// recursion hands out disjoint `&mut` chunks without `unsafe`: every level splits
/// every slice at the same column.
fn for_each_column_chunk<F>(slices: Vec<&mut [Scalar]>, j0: usize, width: usize, leaf: &F)
where
    F: Fn(usize, &mut [&mut [Scalar]]) + Sync,
{
    let len = slices[0].len();
    if len <= width {
        let mut slices = slices;
        leaf(j0, &mut slices);
        return;
    }
    let mid = len / 2;
    let mut left = Vec::with_capacity(slices.len());
    let mut right = Vec::with_capacity(slices.len());
    for s in slices {
        let (l, r) = s.split_at_mut(mid);
        left.push(l);
        right.push(r);
    }
    rayon::join(
        || for_each_column_chunk(left, j0, width, leaf),
        || for_each_column_chunk(right, j0 + mid, width, leaf),
    );
}

/// Direction of the butterflies in a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Butterfly {
    Dif,
    Dit,
}

/// One column pass over `v`: the pass's `L` stages, run on every column of every
/// block, with the column's twiddles computed once per leaf and reused by all blocks.
pub(super) fn column_pass(
    v: &mut [Scalar],
    dom: &Domain,
    pass: &ColPass,
    roots: &Roots,
    dir: Butterfly,
) {
    let log_n = dom.log_n;
    let k = 1usize << pass.log_k;
    let h = 1usize << pass.log_h;
    let blocks = v.len() / (k * h);
    let leaf = |j0: usize, chunks: &mut [&mut [Scalar]]| {
        let w = chunks[0].len();
        let mut tw = vec![Scalar::ZERO; w * k];
        for (t, col) in tw.chunks_exact_mut(k).enumerate() {
            column_twiddles(col, roots, pass, log_n, j0 + t);
        }
        let mut x = vec![Scalar::ZERO; k];
        for blk in chunks.chunks_exact_mut(k) {
            for (t, tw) in tw.chunks_exact(k).enumerate() {
                for (x, c) in x.iter_mut().zip(blk.iter()) {
                    *x = c[t];
                }
                match dir {
                    Butterfly::Dif => dif(&mut x, tw, false),
                    Butterfly::Dit => dit(&mut x, tw, false),
                }
                for (x, c) in x.iter().zip(blk.iter_mut()) {
                    c[t] = *x;
                }
            }
        }
    };
    debug_assert_eq!(blocks * k * h, v.len());
    for_each_column_chunk(v.chunks_mut(h).collect(), 0, dom.col_width, &leaf);
}

/// The middle of the H chain, fused into one pass over the top column pass: finish
/// the forward coset transform of `a` and `b` (DIT, forward roots), form `a·b`
/// pointwise, and start the inverse transform of the product (DIF, inverse roots),
/// written to `a`. `b` is read once and never written.
pub(super) fn fused_top_pass(a: &mut [Scalar], b: &mut [Scalar], dom: &Domain, pass: &ColPass) {
    let (fwd, inv, log_n) = (&dom.fwd, &dom.inv, dom.log_n);
    let k = 1usize << pass.log_k;
    let h = 1usize << pass.log_h;
    debug_assert_eq!(k * h, a.len(), "the top pass spans the whole vector");
    let leaf = |j0: usize, chunks: &mut [&mut [Scalar]]| {
        let w = chunks[0].len();
        let mut twf = vec![Scalar::ZERO; w * k];
        let mut twi = vec![Scalar::ZERO; w * k];
        for t in 0..w {
            column_twiddles(&mut twf[t * k..(t + 1) * k], fwd, pass, log_n, j0 + t);
            column_twiddles(&mut twi[t * k..(t + 1) * k], inv, pass, log_n, j0 + t);
        }
        let (ca, cb) = chunks.split_at_mut(k);
        let mut xa = vec![Scalar::ZERO; k];
        let mut xb = vec![Scalar::ZERO; k];
        for t in 0..w {
            for m in 0..k {
                xa[m] = ca[m][t];
                xb[m] = cb[m][t];
            }
            let twf = &twf[t * k..(t + 1) * k];
            dit(&mut xa, twf, false);
            dit(&mut xb, twf, false);
            for (a, b) in xa.iter_mut().zip(&xb) {
                *a *= b;
            }
            dif(&mut xa, &twi[t * k..(t + 1) * k], false);
            for (x, c) in xa.iter().zip(ca.iter_mut()) {
                c[t] = *x;
            }
        }
    };
    let slices: Vec<&mut [Scalar]> = a.chunks_mut(h).chain(b.chunks_mut(h)).collect();
    for_each_column_chunk(slices, 0, dom.col_width, &leaf);
}

/// Runs `f(block_index, block)` on every contiguous block of `2^log_b` scalars, in
/// parallel: the pass where the bottom stages run in L1/L2.
pub(super) fn block_pass<F>(v: &mut [Scalar], log_b: u32, f: F)
where
    F: Fn(usize, &mut [Scalar]) + Sync,
{
    v.par_chunks_mut(1usize << log_b)
        .enumerate()
        .for_each(|(i, x)| f(i, x));
}

/// `v[i] *= scale·g^i`, in parallel chunks; two products per element.
pub(super) fn distribute_powers(v: &mut [Scalar], g: Scalar, scale: Scalar) {
    const CHUNK: usize = 1 << 12;
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, x)| {
        let mut u = g.pow_vartime([(i * CHUNK) as u64]) * scale;
        for x in x {
            *x *= u;
            u *= g;
        }
    });
}

/// Bit-reversal permutation of `v` (length `2^log_n`), through a scratch copy: a
/// gather in parallel, then a parallel copy back. The H chain never calls it; it
/// serves the natural-order public transforms.
pub(super) fn bit_reverse(v: &mut [Scalar], log_n: u32) {
    if log_n <= 10 {
        for i in 0..v.len() {
            let r = rev(i, log_n);
            if i < r {
                v.swap(i, r);
            }
        }
        return;
    }
    let tmp: Vec<Scalar> = (0..v.len())
        .into_par_iter()
        .map(|i| v[rev(i, log_n)])
        .collect();
    v.par_chunks_mut(1 << 12)
        .zip(tmp.par_chunks(1 << 12))
        .for_each(|(d, s)| d.copy_from_slice(s));
}
