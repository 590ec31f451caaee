//! Batch-affine point addition: many independent affine additions share one field
//! inversion (Montgomery's trick), so each costs 5 multiplications and 1 squaring (plus
//! a 512th of an inversion) instead of the ~10 of a projective mixed addition.
//!
//! Users: [`BucketAccumulator`] (the Pippenger buckets of one window, and their
//! reduction) and [`sum_affine`] (adding up the bases whose scalar is one).
//!
//! All arithmetic writes into its final destination (see `field.rs` for why).

use crate::curve::MsmCurve;
use crate::field::Coord;

/// What an addition in a batch turned out to be once both operands were known.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Different x: the chord slope `(y2 - y1) / (x2 - x1)`.
    Add,
    /// The same point twice: the tangent slope `3x² / 2y`.
    Double,
    /// `P + (-P)` (or a 2-torsion point doubled): the identity.
    Cancel,
    /// Nothing left to do: the target was empty and simply took the point.
    Assigned,
}

/// Classifies `(x1, y1) + (x2, y2)`; for `Add` and `Double` writes the slope's
/// denominator into `den`.
#[inline(always)]
fn classify<F: Coord>(x1: &F, y1: &F, x2: &F, y2: &F, den: &mut F) -> Kind {
    if !F::eq_vartime(x1, x2) {
        F::sub_to(den, x2, x1);
        Kind::Add
    } else if F::eq_vartime(y1, y2) && !F::is_zero(y1) {
        F::add_to(den, y1, y1);
        Kind::Double
    } else {
        Kind::Cancel
    }
}

/// The denominator again, in the backward pass (cheaper than storing it).
#[inline(always)]
fn denominator<F: Coord>(kind: Kind, x1: &F, y1: &F, x2: &F, den: &mut F) {
    if kind == Kind::Add {
        F::sub_to(den, x2, x1);
    } else {
        F::add_to(den, y1, y1);
    }
}

/// `p1 += (x2, y2)` in place for `Add` and `Double`, given `inv = 1 / denominator`.
#[inline(always)]
fn finish_in_place<F: Coord>(kind: Kind, p1: &mut (F, F), x2: &F, y2: &F, inv: &F) {
    let mut l = F::ZERO;
    let mut t = F::ZERO;
    if kind == Kind::Add {
        F::sub_to(&mut l, y2, &p1.1);
    } else {
        F::sqr_to(&mut t, &p1.0);
        F::add_to(&mut l, &t, &t);
        F::add_assign(&mut l, &t);
    }
    F::mul_assign(&mut l, inv);
    let x1 = p1.0;
    // x3 = λ² - x1 - x2
    F::sqr_to(&mut t, &l);
    F::sub_from(&mut p1.0, &t);
    F::sub_assign(&mut p1.0, x2);
    // y3 = λ·(x1 - x3) - y1
    F::sub_to(&mut t, &x1, &p1.0);
    F::mul_assign(&mut t, &l);
    F::sub_from(&mut p1.1, &t);
}

/// Asks the CPU to bring `*r` into L1 ahead of use: the batch reads each bucket only when
/// it is flushed, hundreds of insertions later, so the random bucket accesses (the buckets
/// of a window outgrow L2 from c = 15 in G1) stop stalling the flush. Measured on the
/// Xeon host, 2 threads, G1 2^20: 3.92 → 3.50 µs/point at c = 16, 5.29 → 3.54 at c = 17.
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = r as *const T as *const i8;
        let size = std::mem::size_of::<T>();
        let mut off = 0;
        while off < size {
            // SAFETY: SSE is part of the x86_64 baseline, and a prefetch has no effect on
            // memory or program state; the addresses lie inside `*r`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off)) };
            off += 64;
        }
        // SAFETY: as above; the last byte covers an object that straddles one more line.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(size - 1)) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

const OCCUPIED: u8 = 1;
const BUSY: u8 = 2;

struct Entry<F> {
    bucket: u32,
    kind: Kind,
    x: F,
    y: F,
}

/// The buckets of one Pippenger window (or one chunk of it), kept affine.
///
/// Additions are queued until `batch_cap` of them are pending, then all slope
/// denominators are inverted at once. A bucket may appear only once per batch (its new
/// value depends on the previous addition), so a second point for a busy bucket waits in
/// `pending` for the next batch. Pathological inputs (a few buckets receiving most points,
/// e.g. small scalars) would make `pending` grow without bound and degrade every batch to
/// a handful of additions each paying a whole inversion; past `pending_cap` such points
/// go instead to a per-bucket projective accumulator, so the worst case costs one
/// projective mixed addition per point, as plain Pippenger does.
pub(crate) struct BucketAccumulator<C: MsmCurve> {
    buckets: Vec<(C::F, C::F)>,
    state: Vec<u8>,
    batch: Vec<Entry<C::F>>,
    /// `prefix[k]` = product of the first `k` denominators of the batch.
    prefix: Vec<C::F>,
    pending: Vec<(u32, C::F, C::F)>,
    spare: Vec<(u32, C::F, C::F)>,
    /// Empty until the first overflow, then one projective sum per bucket.
    overflow: Vec<C::Projective>,
    batch_cap: usize,
    pending_cap: usize,
    one: C::F,
}

impl<C: MsmCurve> BucketAccumulator<C> {
    pub(crate) fn new(num_buckets: usize, batch_cap: usize) -> Self {
        let batch_cap = batch_cap.max(1);
        Self {
            buckets: vec![(C::F::ZERO, C::F::ZERO); num_buckets],
            state: vec![0; num_buckets],
            batch: Vec::with_capacity(batch_cap),
            prefix: Vec::with_capacity(batch_cap + 1),
            pending: Vec::new(),
            spare: Vec::new(),
            overflow: Vec::new(),
            batch_cap,
            pending_cap: batch_cap,
            one: C::F::one(),
        }
    }

    /// Adds the point `(x, -y if negate else y)` to bucket `b` (eventually).
    #[inline(always)]
    pub(crate) fn push(&mut self, b: u32, x: &C::F, y: &C::F, negate: bool) {
        self.insert(b, x, y, negate);
        if self.batch.len() >= self.batch_cap {
            self.flush_cycle();
        }
    }

    #[inline(always)]
    fn insert(&mut self, b: u32, x: &C::F, y: &C::F, negate: bool) {
        let bi = b as usize;
        let s = self.state[bi];
        if s & BUSY != 0 {
            self.defer(b, x, y, negate);
        } else if s & OCCUPIED == 0 {
            self.state[bi] = OCCUPIED;
            let slot = &mut self.buckets[bi];
            *slot = (*x, *y);
            if negate {
                C::F::neg_assign(&mut slot.1);
            }
        } else {
            self.state[bi] = OCCUPIED | BUSY;
            prefetch(&self.buckets[bi]);
            self.batch.push(Entry {
                bucket: b,
                kind: Kind::Add,
                x: *x,
                y: *y,
            });
            if negate {
                if let Some(e) = self.batch.last_mut() {
                    C::F::neg_assign(&mut e.y);
                }
            }
        }
    }

    #[cold]
    fn defer(&mut self, b: u32, x: &C::F, y: &C::F, negate: bool) {
        let mut y = *y;
        if negate {
            C::F::neg_assign(&mut y);
        }
        if self.pending.len() < self.pending_cap {
            self.pending.push((b, *x, y));
        } else {
            if self.overflow.is_empty() {
                self.overflow = vec![C::identity(); self.buckets.len()];
            }
            C::add_affine(&mut self.overflow[b as usize], &C::from_coords(x, &y));
        }
    }

    /// Applies the batch, then offers the deferred points to the next one.
    fn flush_cycle(&mut self) {
        self.flush();
        let mut pend = std::mem::replace(&mut self.pending, std::mem::take(&mut self.spare));
        for (b, x, y) in &pend {
            self.insert(*b, x, y, false);
            if self.batch.len() >= self.batch_cap {
                self.flush();
            }
        }
        pend.clear();
        self.spare = pend;
    }

    /// Performs every queued addition with one inversion.
    fn flush(&mut self) {
        let m = self.batch.len();
        if m == 0 {
            return;
        }
        self.prefix.clear();
        self.prefix.resize(m + 1, C::F::ZERO);
        self.prefix[0] = self.one;
        let mut den = C::F::ZERO;
        for (k, e) in self.batch.iter_mut().enumerate() {
            let (bx, by) = &self.buckets[e.bucket as usize];
            e.kind = classify(bx, by, &e.x, &e.y, &mut den);
            let (done, next) = self.prefix.split_at_mut(k + 1);
            if e.kind == Kind::Cancel {
                next[0] = done[k];
            } else {
                C::F::mul_to(&mut next[0], &done[k], &den);
            }
        }
        // Never zero: every denominator is a non-zero difference or 2y with y != 0.
        let mut inv = C::F::ZERO;
        C::F::inverse_to(&mut inv, &self.prefix[m]);
        let mut inv_k = C::F::ZERO;
        for (k, e) in self.batch.iter().enumerate().rev() {
            let bi = e.bucket as usize;
            match e.kind {
                Kind::Cancel => self.state[bi] = 0,
                Kind::Assigned => {}
                kind @ (Kind::Add | Kind::Double) => {
                    let bucket = &mut self.buckets[bi];
                    denominator(kind, &bucket.0, &bucket.1, &e.x, &mut den);
                    C::F::mul_to(&mut inv_k, &inv, &self.prefix[k]);
                    C::F::mul_assign(&mut inv, &den);
                    finish_in_place(kind, bucket, &e.x, &e.y, &inv_k);
                    self.state[bi] = OCCUPIED;
                }
            }
        }
        self.batch.clear();
    }

    /// Drains the batch and the deferred points and returns `Σ (b + 1) · bucket[b]`.
    pub(crate) fn weighted_sum(self) -> C::Projective {
        self.weighted_sums().0
    }

    /// Drains the batch and the deferred points and returns `Σ (b + 1) · bucket[b]` and
    /// `Σ bucket[b]` (the running sum's last value, free).
    pub(crate) fn weighted_sums(mut self) -> (C::Projective, C::Projective) {
        while !self.batch.is_empty() || !self.pending.is_empty() {
            self.flush_cycle();
        }
        let occupied: Vec<bool> = self.state.iter().map(|s| s & OCCUPIED != 0).collect();
        let (mut total, mut sum) = weighted_sum_affine::<C>(&self.buckets, &occupied, &self.one);
        if !self.overflow.is_empty() {
            // Rare (see `defer`), and then usually a few crowded buckets (small digits):
            // each one times its weight, or the projective running sum if many.
            let touched: Vec<usize> = (0..self.overflow.len())
                .filter(|&b| !C::F::is_zero(C::jacobian(&self.overflow[b]).2))
                .collect();
            if touched.len() * 16 < self.overflow.len() {
                for b in touched {
                    let p = &self.overflow[b];
                    C::add(&mut total, &C::mul_small(p, b as u64 + 1));
                    C::add(&mut sum, p);
                }
            } else {
                let mut running = C::identity();
                for p in self.overflow.iter().rev() {
                    C::add(&mut running, p);
                    C::add(&mut total, &running);
                }
                C::add(&mut sum, &running);
            }
        }
        (total, sum)
    }
}

/// `slots[t] += (x, y)` for every `(t, _, x, y)` in `ops`, with one inversion; the targets
/// must be distinct. Empty slots (`occupied[t] == false`) take the point as it is.
fn batch_add_into<F: Coord>(
    slots: &mut [(F, F)],
    occupied: &mut [bool],
    ops: &mut [(usize, Kind, F, F)],
    prefix: &mut Vec<F>,
    one: &F,
) {
    prefix.clear();
    prefix.resize(ops.len() + 1, F::ZERO);
    prefix[0] = *one;
    let mut den = F::ZERO;
    for (k, op) in ops.iter_mut().enumerate() {
        let t = op.0;
        let kind = if occupied[t] {
            classify(&slots[t].0, &slots[t].1, &op.2, &op.3, &mut den)
        } else {
            slots[t] = (op.2, op.3);
            occupied[t] = true;
            Kind::Assigned
        };
        op.1 = kind;
        let (done, next) = prefix.split_at_mut(k + 1);
        if matches!(kind, Kind::Add | Kind::Double) {
            F::mul_to(&mut next[0], &done[k], &den);
        } else {
            next[0] = done[k];
        }
    }
    let mut inv = F::ZERO;
    F::inverse_to(&mut inv, &prefix[ops.len()]);
    let mut inv_k = F::ZERO;
    for (k, op) in ops.iter().enumerate().rev() {
        let (t, kind, x, y) = op;
        match *kind {
            Kind::Assigned => {}
            Kind::Cancel => occupied[*t] = false,
            kind @ (Kind::Add | Kind::Double) => {
                let slot = &mut slots[*t];
                denominator(kind, &slot.0, &slot.1, x, &mut den);
                F::mul_to(&mut inv_k, &inv, &prefix[k]);
                F::mul_assign(&mut inv, &den);
                finish_in_place(kind, slot, x, y, &inv_k);
            }
        }
    }
}

/// `Σ (b + 1) · buckets[b]` and `Σ buckets[b]` over the occupied buckets.
///
/// The textbook running sum (`running += bucket; total += running`, top down) is
/// sequential and so projective: ~25 multiplications per bucket, a fifth of a G1 MSM's
/// time at 2^16. Here the buckets are cut into `K` lanes of `L` consecutive buckets whose
/// running sums advance in lock step; each step's `2K` additions (`T += R` with the old
/// `R`, and `R += bucket`) are independent and share one inversion. Lane `k` then holds
/// `T_k = Σ_t (t + 1)·bucket[kL + t]` and `R_k = Σ_t bucket[kL + t]`, and the result is
/// `Σ_k T_k + L · Σ_k k·R_k`, a few projective operations per lane.
fn weighted_sum_affine<C: MsmCurve>(
    buckets: &[(C::F, C::F)],
    occupied: &[bool],
    one: &C::F,
) -> (C::Projective, C::Projective) {
    let nb = buckets.len();
    // Bucket counts are powers of two, so lanes divide them.
    let lanes = (nb / 16).clamp(1, 256);
    let len = nb / lanes;
    // Slots 0..lanes hold R_k, lanes..2·lanes hold T_k.
    let mut slots = vec![(C::F::ZERO, C::F::ZERO); 2 * lanes];
    let mut occ = vec![false; 2 * lanes];
    let mut ops: Vec<(usize, Kind, C::F, C::F)> = Vec::with_capacity(2 * lanes);
    let mut prefix = Vec::with_capacity(2 * lanes + 1);
    for t in (0..len).rev() {
        ops.clear();
        for k in 0..lanes {
            if occ[k] {
                ops.push((lanes + k, Kind::Add, slots[k].0, slots[k].1));
            }
            let b = k * len + t;
            if occupied[b] {
                ops.push((k, Kind::Add, buckets[b].0, buckets[b].1));
            }
        }
        batch_add_into(&mut slots, &mut occ, &mut ops, &mut prefix, one);
    }
    // The last `T += R` (the loop added R before each bucket, not after the lowest).
    ops.clear();
    for k in 0..lanes {
        if occ[k] {
            ops.push((lanes + k, Kind::Add, slots[k].0, slots[k].1));
        }
    }
    batch_add_into(&mut slots, &mut occ, &mut ops, &mut prefix, one);

    let point = |i: usize| occ[i].then(|| C::from_coords(&slots[i].0, &slots[i].1));
    // Σ_k k·R_k by a running sum over the lanes, then times L (a power of two).
    let mut running = C::identity();
    let mut weighted = C::identity();
    for k in (1..lanes).rev() {
        if let Some(p) = point(k) {
            C::add_affine(&mut running, &p);
        }
        C::add(&mut weighted, &running);
    }
    let mut total = weighted;
    for _ in 0..len.trailing_zeros() {
        total = C::double(&total);
    }
    for k in 0..lanes {
        if let Some(p) = point(lanes + k) {
            C::add_affine(&mut total, &p);
        }
    }
    // Σ_k R_k: the lanes' running sum over 1.. plus lane 0.
    if let Some(p) = point(0) {
        C::add_affine(&mut running, &p);
    }
    (total, running)
}

/// The sum of affine points (identity excluded by the caller) by rounds of pairwise
/// batch-affine additions: each round halves the list with one inversion. The last few
/// points, where an inversion would no longer pay, are added projectively.
pub(crate) fn sum_affine<C: MsmCurve>(mut points: Vec<(C::F, C::F)>) -> C::Projective {
    // Below this many points a round's inversion costs more than the projective
    // additions it saves.
    const PROJECTIVE_BELOW: usize = 32;
    let one = C::F::one();
    let mut out: Vec<(C::F, C::F)> = Vec::with_capacity(points.len() / 2 + 1);
    let mut prefix: Vec<C::F> = Vec::with_capacity(points.len() / 2 + 1);
    let mut kinds: Vec<Kind> = Vec::with_capacity(points.len() / 2);
    while points.len() >= PROJECTIVE_BELOW {
        let pairs = points.len() / 2;
        prefix.clear();
        prefix.resize(pairs + 1, C::F::ZERO);
        prefix[0] = one;
        kinds.clear();
        let mut den = C::F::ZERO;
        for (i, pair) in points.chunks_exact(2).enumerate() {
            let (x1, y1) = &pair[0];
            let (x2, y2) = &pair[1];
            let kind = classify(x1, y1, x2, y2, &mut den);
            kinds.push(kind);
            let (done, next) = prefix.split_at_mut(i + 1);
            if kind == Kind::Cancel {
                next[0] = done[i];
            } else {
                C::F::mul_to(&mut next[0], &done[i], &den);
            }
        }
        let mut inv = C::F::ZERO;
        C::F::inverse_to(&mut inv, &prefix[pairs]);
        let mut inv_i = C::F::ZERO;
        out.clear();
        out.resize(pairs, (C::F::ZERO, C::F::ZERO));
        let mut w = 0;
        for i in (0..pairs).rev() {
            let kind = kinds[i];
            if !matches!(kind, Kind::Add | Kind::Double) {
                continue;
            }
            let (x2, y2) = &points[2 * i + 1];
            let dst = &mut out[w];
            *dst = points[2 * i];
            denominator(kind, &dst.0, &dst.1, x2, &mut den);
            C::F::mul_to(&mut inv_i, &inv, &prefix[i]);
            C::F::mul_assign(&mut inv, &den);
            finish_in_place(kind, dst, x2, y2, &inv_i);
            w += 1;
        }
        out.truncate(w);
        if points.len() % 2 == 1 {
            out.push(points[points.len() - 1]);
        }
        std::mem::swap(&mut points, &mut out);
    }
    let mut total = C::identity();
    for (x, y) in &points {
        C::add_affine(&mut total, &C::from_coords(x, y));
    }
    total
}
