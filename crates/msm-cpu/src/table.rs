//! Fixed-base tables: a query's bases with their window multiples, computed once, so an
//! MSM over them is one bucket pass instead of one per window.
//!
//! Pippenger over `W` windows of `c` bits costs `W·(n + 2^c)` bucket additions plus
//! `W·c` doublings. A Groth16 query's bases never change between proofs, so each base
//! `P` can be stored with `2^(jc)·P` for every window `j`; `Σ s_i·P_i` is then
//! `Σ_i Σ_j d_ij·(2^(jc)·P_i)` with the same signed digits `d_ij`: one window over `W·n`
//! points and no doublings. The `T` tasks share the buckets out (each owns every `T`-th
//! one and skips the other digits), so the reduction is paid once in all: `(W·n + 2^c)/T`
//! additions a task, and `c` can be wide (16 at 2^15-2^17 points where plain Pippenger
//! stops at 13). Measured on the 2-core dev machine (BENCHMARKS.md): 1.35-1.41× on G1
//! and 1.27-1.33× on G2 at 2^16-2^17 over plain Pippenger. Sharing the buckets out
//! (instead of each task taking a chunk of the points with every bucket) measured
//! 1.0-1.2× at 2^14-2^15 and even at 2^16; the windows' widths (`pippenger::spans`)
//! mattered more: with equal widths the model's choice at 2^15 (c = 15) left one bit
//! in the top window, all its points in one bucket (1.3-1.4× slower).
//!
//! The price is memory, `W` copies of the bases (16 at `c = 16`), and the time to make
//! them (`c·(W-1)` doublings a base: ~10 s for 2^17 G1 bases on 2 cores): tables suit
//! small circuits proved again and again (PoSt), which is how the CPU backend uses them.

use rayon::prelude::*;

use crate::batch::BucketAccumulator;
use crate::curve::MsmCurve;
use crate::pippenger::{self, signed_digit, Points};

/// The bits a table's windows cover: every canonical scalar (below 2^255) with the
/// signed digits' carry.
const TABLE_BITS: usize = 256;

/// Narrowest and widest table windows considered. Above 16 the bucket set outgrows the
/// caches (2^16 G1 buckets take 6 MiB) and the model below stops predicting the time.
const MIN_C: usize = 8;
const MAX_C: usize = 16;

/// A query's bases with their window multiples, point-major: `points[i·windows + j]` is
/// `2^lo_j·P_i` with `lo_j` window `j`'s lowest bit (the windows tile the 256 bits with
/// widths `c` and `c - 1`, `pippenger::spans`, so that the top one is as full as the
/// others), so one base's multiples are read together.
pub struct Table<A> {
    c: usize,
    windows: usize,
    n: usize,
    points: Vec<A>,
}

impl<A> std::fmt::Debug for Table<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("c", &self.c)
            .field("windows", &self.windows)
            .field("n", &self.n)
            .finish()
    }
}

impl<A> Table<A> {
    /// The number of bases.
    pub fn len(&self) -> usize {
        self.n
    }
    /// Whether the table has no bases.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// The window width in bits.
    pub fn window_bits(&self) -> usize {
        self.c
    }
    /// Bytes of points held.
    pub fn bytes(&self) -> usize {
        self.points.len() * std::mem::size_of::<A>()
    }
}

/// The cost of an MSM over `m` of a table's points with `c`-bit windows, per task on
/// `threads` tasks, in bucket additions: `W·m` into the buckets and one per bucket for
/// the reduction (it does two, in sequential lanes that measured about twice as cheap as
/// the scattered ones), the buckets shared out among the tasks (see [`msm`]).
fn table_cost(c: usize, m: usize, threads: usize) -> usize {
    (TABLE_BITS.div_ceil(c) * m + (1usize << (c - 1))).div_ceil(threads.max(1))
}

/// The window width for a table of `n` bases used on `threads` threads: the least
/// [`table_cost`] of a dense MSM.
pub(crate) fn table_c(n: usize, threads: usize) -> usize {
    (MIN_C..=MAX_C)
        .min_by_key(|&c| table_cost(c, n, threads))
        .unwrap_or(MAX_C)
}

/// Whether an MSM over `m` of a table's points (window width `c`) costs less through the
/// table than by plain Pippenger: a short tail (most scalars zeros and ones) is cheaper
/// with narrow windows than through the table's wide buckets.
fn pays(c: usize, m: usize, threads: usize) -> bool {
    let threads = threads.max(1);
    let plain = pippenger::plan(m, TABLE_BITS, threads);
    let plain_cost =
        (plain.windows * plain.chunks).div_ceil(threads) * (plain.chunk_len + (1usize << plain.c));
    table_cost(c, m, threads) < plain_cost
}

/// Whether a table of `n` bases for `threads` threads would speed up an MSM over `m` of
/// them (the same choice [`msm`] makes).
pub(crate) fn table_pays(n: usize, m: usize, threads: usize) -> bool {
    pays(table_c(n, threads), m, threads)
}

/// The bytes a table of `n` bases of `point_bytes` each takes for `threads` threads.
pub(crate) fn table_bytes(n: usize, threads: usize, point_bytes: usize) -> usize {
    n * TABLE_BITS.div_ceil(table_c(n, threads)) * point_bytes
}

/// Computes the table of `bases` for MSMs on `threads` threads, on `pool`. `proceed` is
/// called before each chunk of bases: it may block (to yield to other work), and once
/// it returns false the table is abandoned and this returns `None`.
pub(crate) fn precompute<C: MsmCurve>(
    bases: &[C::Affine],
    threads: usize,
    pool: &rayon::ThreadPool,
    proceed: &(dyn Fn() -> bool + Sync),
) -> Option<Table<C::Affine>> {
    let n = bases.len();
    let c = table_c(n, threads);
    let windows = TABLE_BITS.div_ceil(c);
    let spans = pippenger::spans(TABLE_BITS, windows);
    let Some(&first) = bases.first() else {
        return Some(Table {
            c,
            windows,
            n,
            points: Vec::new(),
        });
    };
    // Every slot is overwritten below.
    let mut points: Vec<C::Affine> = vec![first; n * windows];
    const CHUNK: usize = 256;
    let cancelled = std::sync::atomic::AtomicBool::new(false);
    let stop = std::sync::atomic::Ordering::Relaxed;
    pool.install(|| {
        points
            .par_chunks_mut(CHUNK * windows)
            .zip(bases.par_chunks(CHUNK))
            .for_each(|(out, bs)| {
                if cancelled.load(stop) || !proceed() {
                    cancelled.store(true, stop);
                    return;
                }
                let mut proj: Vec<C::Projective> = Vec::with_capacity(bs.len() * windows);
                for b in bs {
                    let mut p = C::identity();
                    C::add_affine(&mut p, b);
                    for j in 0..windows {
                        proj.push(p);
                        if j + 1 < windows {
                            for _ in 0..spans[j].1 {
                                p = C::double(&p);
                            }
                        }
                    }
                }
                batch_to_affine::<C>(&proj, out);
            })
    });
    (!cancelled.load(stop)).then_some(Table {
        c,
        windows,
        n,
        points,
    })
}

/// `out[i] = proj[i]` in affine form, with one field inversion for all of them
/// (Montgomery's trick; `group`'s default `batch_normalize`, which blstrs keeps, inverts
/// once per point and made a table's construction half inversions).
pub(crate) fn batch_to_affine<C: MsmCurve>(proj: &[C::Projective], out: &mut [C::Affine]) {
    use crate::field::Coord;
    debug_assert_eq!(proj.len(), out.len());
    // prefix[i]: the product of the non-zero Z of the first i points.
    let mut prefix = Vec::with_capacity(proj.len() + 1);
    let mut acc = C::F::one();
    prefix.push(acc);
    for p in proj {
        let (_, _, z) = C::jacobian(p);
        if !C::F::is_zero(z) {
            let prev = acc;
            C::F::mul_to(&mut acc, &prev, z);
        }
        prefix.push(acc);
    }
    let mut inv = C::F::ZERO;
    C::F::inverse_to(&mut inv, &acc);
    let (mut zinv, mut zinv2, mut x, mut y) = (C::F::ZERO, C::F::ZERO, C::F::ZERO, C::F::ZERO);
    for (i, p) in proj.iter().enumerate().rev() {
        let (px, py, z) = C::jacobian(p);
        if C::F::is_zero(z) {
            out[i] = C::from_coords(&C::F::ZERO, &C::F::ZERO);
            continue;
        }
        // 1/Z_i = (1/prefix[i+1]) · prefix[i]; then 1/prefix[i] = (1/prefix[i+1]) · Z_i.
        C::F::mul_to(&mut zinv, &inv, &prefix[i]);
        C::F::mul_assign(&mut inv, z);
        C::F::sqr_to(&mut zinv2, &zinv);
        C::F::mul_to(&mut x, px, &zinv2);
        C::F::mul_to(&mut y, py, &zinv2);
        C::F::mul_assign(&mut y, &zinv);
        out[i] = C::from_coords(&x, &y);
    }
}

/// `Σ scalars[k] · P_{idx(k)}` with `idx(k)` = `k` (`indices` None) or `indices[k]`,
/// over the table where that is cheaper than plain Pippenger over `bases` (the table's
/// bases), else plain Pippenger. Indices are in range and scalars canonical (below
/// 2^255): the caller checked.
pub(crate) fn msm<C: MsmCurve>(
    table: &Table<C::Affine>,
    bases: &[C::Affine],
    indices: Option<&[u32]>,
    scalars: &[[u64; 4]],
    pool: &rayon::ThreadPool,
) -> C::Projective {
    let m = scalars.len();
    let threads = pool.current_num_threads().max(1);
    if m == 0 {
        return C::identity();
    }
    let (c, windows) = (table.c, table.windows);
    // The windows cover 256 bits with the carry only for scalars below 2^255.
    let canonical = scalars.iter().all(|s| s[3] >> 63 == 0);
    if !pays(c, m, threads) || !canonical {
        let points = match indices {
            Some(ix) => Points::Indexed(bases, ix),
            None => Points::Dense(bases),
        };
        return pippenger::msm::<C>(points, scalars, pool);
    }
    let num_buckets = 1usize << (c - 1);
    let spans = pippenger::spans(TABLE_BITS, windows);
    if !share_buckets(c, m, threads) {
        return by_points::<C>(table, indices, scalars, &spans, pool);
    }
    // Each task owns every `tasks`-th bucket (interleaved, so that small digits, which
    // crowd the low buckets, still spread) and reads every digit, adding only its own.
    // Against tasks that own a chunk of the points each with all the buckets, the bucket
    // reduction is paid once in all instead of once a task.
    let tasks = threads.min(num_buckets);
    // A power of two, which the reduction's lanes need; the top ones may stay empty.
    let local = num_buckets.div_ceil(tasks).next_power_of_two();
    let sums: Vec<C::Projective> = pool.install(|| {
        (0..tasks)
            .into_par_iter()
            .map(|t| {
                let mut acc = BucketAccumulator::<C>::new(local, pippenger::batch_size(local));
                for k in 0..scalars.len() {
                    digits::<C>(table, indices, scalars, &spans, k, |b, x, y, negate| {
                        let b = b as usize;
                        if b % tasks == t {
                            acc.push((b / tasks) as u32, x, y, negate);
                        }
                    });
                }
                // Local bucket `l` is bucket `t + tasks·l`, of weight `tasks·(l + 1) -
                // (tasks - 1 - t)`: the sum is `tasks·W - (tasks - 1 - t)·S` with `W` the
                // local weighted sum and `S` the plain one.
                let (w, sum) = acc.weighted_sums();
                let mut total = C::mul_small(&w, tasks as u64);
                let lower = (tasks - 1 - t) as u64;
                if lower > 0 {
                    C::add(&mut total, &C::neg(&C::mul_small(&sum, lower)));
                }
                total
            })
            .collect()
    });
    let mut total = C::identity();
    for s in &sums {
        C::add(&mut total, s);
    }
    total
}

/// Calls `add(bucket, x, y, negate)` for each non-zero digit of scalar `k` with its
/// window's table entry (the identity skipped): the bucket is the digit's magnitude
/// less one, `negate` its sign.
#[inline(always)]
fn digits<C: MsmCurve>(
    table: &Table<C::Affine>,
    indices: Option<&[u32]>,
    scalars: &[[u64; 4]],
    spans: &[(usize, usize)],
    k: usize,
    mut add: impl FnMut(u32, &C::F, &C::F, bool),
) {
    let i = indices.map_or(k, |ix| ix[k] as usize);
    let entries = &table.points[i * table.windows..(i + 1) * table.windows];
    for (p, &(lo, width)) in entries.iter().zip(spans) {
        let d = signed_digit(&scalars[k], lo, width);
        if d == 0 {
            continue;
        }
        if let Some((x, y)) = C::coords(p) {
            add(d.unsigned_abs() - 1, x, y, d < 0);
        }
    }
}

/// Whether a table MSM over `m` points with `c`-bit windows on `threads` threads shares
/// the buckets out among its tasks ([`msm`]) rather than giving each task a chunk of
/// the points and every bucket ([`by_points`]): where the reduction, which sharing
/// divides among the tasks, is over 1/16 of a task's additions. Below that, every task
/// reading every digit and every base's table entries costs more than sharing saves
/// (dev, 2 threads: shared 1.06-1.25× faster at 2^14, 1.0-1.2× at 2^15, 0.96-0.98×
/// at 2^16, all at c = 16).
fn share_buckets(c: usize, m: usize, threads: usize) -> bool {
    threads > 1 && 16 << (c - 1) > TABLE_BITS.div_ceil(c) * m.div_ceil(threads)
}

/// A table MSM whose tasks each take a chunk of the points, with every bucket.
fn by_points<C: MsmCurve>(
    table: &Table<C::Affine>,
    indices: Option<&[u32]>,
    scalars: &[[u64; 4]],
    spans: &[(usize, usize)],
    pool: &rayon::ThreadPool,
) -> C::Projective {
    let m = scalars.len();
    let num_buckets = 1usize << (table.c - 1);
    let chunk = m.div_ceil(pool.current_num_threads().max(1));
    let sums: Vec<C::Projective> = pool.install(|| {
        (0..m.div_ceil(chunk))
            .into_par_iter()
            .map(|t| {
                let mut acc =
                    BucketAccumulator::<C>::new(num_buckets, pippenger::batch_size(num_buckets));
                for k in t * chunk..((t + 1) * chunk).min(m) {
                    digits::<C>(table, indices, scalars, spans, k, |b, x, y, negate| {
                        acc.push(b, x, y, negate)
                    });
                }
                acc.weighted_sum()
            })
            .collect()
    });
    let mut total = C::identity();
    for s in &sums {
        C::add(&mut total, s);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curve::{G1, G2};
    use blstrs::{G1Projective, G2Projective, Scalar};
    use ff::Field;
    use group::{Curve, Group};
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};

    fn pool() -> rayon::ThreadPool {
        pool_of(2)
    }

    fn pool_of(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    fn points<P: Group + Curve>(n: usize, rng: &mut ChaCha8Rng) -> Vec<P::AffineRepr>
    where
        P::AffineRepr: Default + Clone,
    {
        let proj: Vec<P> = (0..n).map(|_| P::random(&mut *rng)).collect();
        let mut out = vec![<P::AffineRepr as Default>::default(); n];
        P::batch_normalize(&proj, &mut out);
        out
    }

    fn limbs(s: &Scalar) -> [u64; 4] {
        crate::scalar_limbs(s)
    }

    /// The table's sums against plain Pippenger over the same bases: dense, indexed,
    /// a short tail (the plain path), and identity bases among the points.
    fn agrees<C: MsmCurve, P: Group + Curve<AffineRepr = C::Affine>>(n: usize)
    where
        C::Projective: group::Curve<AffineRepr = C::Affine> + PartialEq + std::fmt::Debug,
        C::Affine: Default,
    {
        let mut rng = ChaCha8Rng::seed_from_u64(n as u64);
        let pool = pool();
        let mut bases = points::<P>(n, &mut rng);
        bases[3] = C::Affine::default();
        let table = precompute::<C>(&bases, 2, &pool, &|| true).unwrap();
        assert_eq!(table.len(), n);
        let scalars: Vec<[u64; 4]> = (0..n)
            .map(|i| match i % 7 {
                0 => [0; 4],
                1 => [1, 0, 0, 0],
                2 => limbs(&-Scalar::ONE),
                _ => limbs(&Scalar::random(&mut rng)),
            })
            .collect();
        let dense = msm::<C>(&table, &bases, None, &scalars, &pool);
        let want = pippenger::msm::<C>(Points::Dense(&bases), &scalars, &pool);
        assert_eq!(dense, want);
        let ix: Vec<u32> = (0..n as u32).rev().step_by(2).collect();
        let sub: Vec<[u64; 4]> = ix
            .iter()
            .map(|_| limbs(&Scalar::random(&mut rng)))
            .collect();
        assert_eq!(
            msm::<C>(&table, &bases, Some(&ix), &sub, &pool),
            pippenger::msm::<C>(Points::Indexed(&bases, &ix), &sub, &pool)
        );
        let few = &ix[..5];
        assert_eq!(
            msm::<C>(&table, &bases, Some(few), &sub[..5], &pool),
            pippenger::msm::<C>(Points::Indexed(&bases, few), &sub[..5], &pool)
        );
        // A non-canonical 256-bit scalar takes the plain path and stays right.
        let mut big = scalars.clone();
        big[10] = [u64::MAX; 4];
        assert_eq!(
            msm::<C>(&table, &bases, None, &big, &pool),
            pippenger::msm::<C>(Points::Dense(&bases), &big, &pool)
        );
        let _ = rng.next_u32();
    }

    #[test]
    fn windows_tile_the_bits_and_the_top_one_is_full() {
        for c in MIN_C..=MAX_C {
            let windows = TABLE_BITS.div_ceil(c);
            let spans = pippenger::spans(TABLE_BITS, windows);
            let mut next = 0;
            for j in 0..windows {
                let (lo, width) = spans[j];
                assert_eq!(lo, next, "c = {c}, window {j}");
                assert!(width == c || width == c - 1, "c = {c}, window {j}: {width}");
                next = lo + width;
            }
            assert_eq!(next, TABLE_BITS, "c = {c}");
            // The top window holds at least c - 2 of a canonical scalar's 255 bits.
            let (lo, _) = spans[windows - 1];
            assert!(255 - lo >= c - 2, "c = {c}: top window from bit {lo}");
        }
    }

    /// The table's sums on pools of 1, 3 and 4 threads (the buckets shared out among
    /// that many tasks, 3 not dividing them), with random scalars and with small ones
    /// (all in a few buckets: the accumulator's projective overflow).
    #[test]
    fn table_sums_do_not_depend_on_the_tasks() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let n = 2000;
        let bases = points::<G1Projective>(n, &mut rng);
        let random: Vec<[u64; 4]> = (0..n).map(|_| limbs(&Scalar::random(&mut rng))).collect();
        let small: Vec<[u64; 4]> = (0..n as u64).map(|i| [2 + i % 5, 0, 0, 0]).collect();
        for scalars in [&random, &small] {
            let want = pippenger::msm::<G1>(Points::Dense(&bases), scalars, &pool());
            // 2000 points in 2 tasks: buckets shared out below 2^13 bases' worth a
            // task, points chunked above (`share_buckets`); both ways here.
            let pool2 = pool();
            let table = precompute::<G1>(&bases, 2, &pool2, &|| true).unwrap();
            let spans = pippenger::spans(TABLE_BITS, table.windows);
            assert_eq!(by_points::<G1>(&table, None, scalars, &spans, &pool2), want);
            for threads in [1, 3, 4] {
                let pool = pool_of(threads);
                let table = precompute::<G1>(&bases, threads, &pool, &|| true).unwrap();
                assert_eq!(
                    msm::<G1>(&table, &bases, None, scalars, &pool),
                    want,
                    "{threads} threads"
                );
            }
        }
    }

    #[test]
    fn batch_to_affine_is_to_affine() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut g1: Vec<G1Projective> = (0..50).map(|_| G1Projective::random(&mut rng)).collect();
        g1[7] = G1Projective::identity();
        g1[8] = g1[9].double();
        let mut out = vec![blstrs::G1Affine::default(); g1.len()];
        batch_to_affine::<G1>(&g1, &mut out);
        for (p, a) in g1.iter().zip(&out) {
            assert_eq!(p.to_affine(), *a);
        }
        let g2: Vec<G2Projective> = (0..20).map(|_| G2Projective::random(&mut rng)).collect();
        let mut out2 = vec![blstrs::G2Affine::default(); g2.len()];
        batch_to_affine::<G2>(&g2, &mut out2);
        for (p, a) in g2.iter().zip(&out2) {
            assert_eq!(p.to_affine(), *a);
        }
    }

    #[test]
    fn g1_tables_sum_like_pippenger() {
        agrees::<G1, G1Projective>(3000);
    }

    #[test]
    fn g2_tables_sum_like_pippenger() {
        agrees::<G2, G2Projective>(1200);
    }

    #[test]
    fn a_cancelled_precompute_is_none() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let bases = points::<G1Projective>(600, &mut rng);
        assert!(precompute::<G1>(&bases, 2, &pool(), &|| false).is_none());
        let empty = precompute::<G1>(&[], 2, &pool(), &|| true).unwrap();
        assert!(empty.is_empty());
        assert_eq!(msm::<G1>(&empty, &[], None, &[], &pool()), G1::identity());
    }

    #[test]
    fn table_windows_follow_the_cost_model() {
        // 2^16-2^17 points on 2 threads: 16-bit windows (measured best).
        assert_eq!(table_c(1 << 16, 2), 16);
        assert_eq!(table_c(1 << 17, 2), 16);
        // Fewer points, narrower windows: the reduction weighs more.
        assert!(table_c(1 << 12, 2) < 14);
        // Dense MSMs pay, a tail of 0.1% of the bases does not (the table's 2^15
        // buckets would be reduced for a thousand points).
        assert!(table_pays(1 << 17, 1 << 17, 2));
        assert!(!table_pays(1 << 20, 1 << 10, 2));
        assert_eq!(
            table_bytes(1000, 2, 96),
            1000 * 256usize.div_ceil(table_c(1000, 2)) * 96
        );
    }
}
