//! Batch-affine point addition: many independent affine additions share one field
//! inversion (Montgomery's trick), so each costs about 5 multiplications and 1 squaring
//! instead of the 8–11 multiplications of a projective mixed addition.
//!
//! Two users: [`BucketAccumulator`] (the Pippenger buckets of one window) and
//! [`sum_affine`] (adding up the bases whose scalar is one).

use ff::Field;

use crate::curve::MsmCurve;

/// What an addition in a batch turned out to be once both operands were known.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Different x: the chord slope `(y2 - y1) / (x2 - x1)`.
    Add,
    /// The same point twice: the tangent slope `3x² / 2y`.
    Double,
    /// `P + (-P)` (or a 2-torsion point doubled): the identity.
    Cancel,
}

/// Classifies the addition `(x1, y1) + (x2, y2)` and returns the slope denominator
/// (one for `Cancel`, which needs no inversion).
#[inline(always)]
fn classify<F: Field>(x1: &F, y1: &F, x2: &F, y2: &F) -> (Kind, F) {
    if x1 != x2 {
        (Kind::Add, *x2 - x1)
    } else if y1 == y2 && !bool::from(y1.is_zero()) {
        (Kind::Double, y1.double())
    } else {
        (Kind::Cancel, F::ONE)
    }
}

/// Finishes an addition given `inv = 1 / denominator`.
#[inline(always)]
fn finish_add<F: Field>(kind: Kind, x1: &F, y1: &F, x2: &F, y2: &F, inv: &F) -> (F, F) {
    let lambda = match kind {
        Kind::Add => (*y2 - y1) * inv,
        _ => {
            let xx = x1.square();
            (xx.double() + xx) * inv
        }
    };
    let x3 = lambda.square() - x1 - x2;
    let y3 = lambda * (*x1 - x3) - y1;
    (x3, y3)
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
    prefix: Vec<C::F>,
    pending: Vec<(u32, C::F, C::F)>,
    spare: Vec<(u32, C::F, C::F)>,
    /// Empty until the first overflow, then one projective sum per bucket.
    overflow: Vec<C::Projective>,
    batch_cap: usize,
    pending_cap: usize,
}

impl<C: MsmCurve> BucketAccumulator<C> {
    pub(crate) fn new(num_buckets: usize, batch_cap: usize) -> Self {
        let batch_cap = batch_cap.max(1);
        Self {
            buckets: vec![(C::F::ZERO, C::F::ZERO); num_buckets],
            state: vec![0; num_buckets],
            batch: Vec::with_capacity(batch_cap),
            prefix: Vec::with_capacity(batch_cap),
            pending: Vec::new(),
            spare: Vec::new(),
            overflow: Vec::new(),
            batch_cap,
            pending_cap: batch_cap,
        }
    }

    /// Adds the point `(x, y)` to bucket `b` (eventually).
    #[inline(always)]
    pub(crate) fn push(&mut self, b: u32, x: C::F, y: C::F) {
        self.insert(b, x, y);
        if self.batch.len() >= self.batch_cap {
            self.flush_cycle();
        }
    }

    #[inline(always)]
    fn insert(&mut self, b: u32, x: C::F, y: C::F) {
        let bi = b as usize;
        let s = self.state[bi];
        if s & BUSY != 0 {
            self.defer(b, x, y);
        } else if s & OCCUPIED == 0 {
            self.state[bi] = OCCUPIED;
            self.buckets[bi] = (x, y);
        } else {
            self.state[bi] = OCCUPIED | BUSY;
            self.batch.push(Entry {
                bucket: b,
                kind: Kind::Add,
                x,
                y,
            });
        }
    }

    #[cold]
    fn defer(&mut self, b: u32, x: C::F, y: C::F) {
        if self.pending.len() < self.pending_cap {
            self.pending.push((b, x, y));
        } else {
            if self.overflow.is_empty() {
                self.overflow = vec![C::identity(); self.buckets.len()];
            }
            C::add_affine(&mut self.overflow[b as usize], &C::from_coords(x, y));
        }
    }

    /// Applies the batch, then offers the deferred points to the next one.
    fn flush_cycle(&mut self) {
        self.flush();
        let mut pend = std::mem::replace(&mut self.pending, std::mem::take(&mut self.spare));
        for (b, x, y) in pend.drain(..) {
            self.insert(b, x, y);
            if self.batch.len() >= self.batch_cap {
                self.flush();
            }
        }
        self.spare = pend;
    }

    /// Performs every queued addition with one inversion.
    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        self.prefix.clear();
        let mut acc = C::F::ONE;
        for e in self.batch.iter_mut() {
            let (bx, by) = &self.buckets[e.bucket as usize];
            let (kind, den) = classify(bx, by, &e.x, &e.y);
            e.kind = kind;
            self.prefix.push(acc);
            if kind != Kind::Cancel {
                acc *= den;
            }
        }
        // Never zero: every denominator is a non-zero difference or 2y with y != 0.
        let mut inv = acc.invert().unwrap_or(C::F::ZERO);
        for (e, pre) in self.batch.iter().zip(&self.prefix).rev() {
            let bi = e.bucket as usize;
            let (bx, by) = self.buckets[bi];
            match e.kind {
                Kind::Cancel => self.state[bi] = 0,
                kind => {
                    let den = if kind == Kind::Add {
                        e.x - bx
                    } else {
                        by.double()
                    };
                    let inv_k = inv * pre;
                    inv *= den;
                    self.buckets[bi] = finish_add(kind, &bx, &by, &e.x, &e.y, &inv_k);
                    self.state[bi] = OCCUPIED;
                }
            }
        }
        self.batch.clear();
    }

    /// Drains the batch and the deferred points and returns `Σ (b + 1) · bucket[b]`.
    pub(crate) fn weighted_sum(mut self) -> C::Projective {
        while !self.batch.is_empty() || !self.pending.is_empty() {
            self.flush_cycle();
        }
        // Running-sum reduction from the top bucket down: running = Σ_{j>=b} bucket[j],
        // total = Σ_b running.
        let mut running = C::identity();
        let mut total = C::identity();
        let mut started = false;
        for b in (0..self.buckets.len()).rev() {
            if self.state[b] & OCCUPIED != 0 {
                let (x, y) = self.buckets[b];
                C::add_affine(&mut running, &C::from_coords(x, y));
                started = true;
            }
            if !self.overflow.is_empty() {
                C::add(&mut running, &self.overflow[b]);
                started = true;
            }
            if started {
                C::add(&mut total, &running);
            }
        }
        total
    }
}

/// The sum of affine points (identity excluded by the caller) by rounds of pairwise
/// batch-affine additions: each round halves the list with one inversion. The last few
/// points, where an inversion would no longer pay, are added projectively.
pub(crate) fn sum_affine<C: MsmCurve>(mut points: Vec<(C::F, C::F)>) -> C::Projective {
    // Below this many points a round's inversion costs more than the projective
    // additions it saves.
    const PROJECTIVE_BELOW: usize = 32;
    let mut out: Vec<(C::F, C::F)> = Vec::with_capacity(points.len() / 2 + 1);
    let mut prefix: Vec<C::F> = Vec::with_capacity(points.len() / 2);
    let mut kinds: Vec<Kind> = Vec::with_capacity(points.len() / 2);
    while points.len() >= PROJECTIVE_BELOW {
        let pairs = points.len() / 2;
        prefix.clear();
        kinds.clear();
        let mut acc = C::F::ONE;
        for pair in points.chunks_exact(2) {
            let (x1, y1) = &pair[0];
            let (x2, y2) = &pair[1];
            let (kind, den) = classify(x1, y1, x2, y2);
            kinds.push(kind);
            prefix.push(acc);
            if kind != Kind::Cancel {
                acc *= den;
            }
        }
        let mut inv = acc.invert().unwrap_or(C::F::ZERO);
        out.clear();
        for i in (0..pairs).rev() {
            let (x1, y1) = points[2 * i];
            let (x2, y2) = points[2 * i + 1];
            let kind = kinds[i];
            if kind == Kind::Cancel {
                continue;
            }
            let den = if kind == Kind::Add {
                x2 - x1
            } else {
                y1.double()
            };
            let inv_i = inv * prefix[i];
            inv *= den;
            out.push(finish_add(kind, &x1, &y1, &x2, &y2, &inv_i));
        }
        if points.len() % 2 == 1 {
            out.push(points[points.len() - 1]);
        }
        std::mem::swap(&mut points, &mut out);
    }
    let mut total = C::identity();
    for (x, y) in points {
        C::add_affine(&mut total, &C::from_coords(x, y));
    }
    total
}
