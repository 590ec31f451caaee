//! Parameters of the right sizes, for timing only: proofs made with them do not
//! verify.
//!
//! Measuring the prover at 2^20..2^27 needs parameter sets of those sizes, and
//! real ones cost a trusted setup: bellperson's generator does one scalar
//! multiplication per point (3.4 million of them at 2^20, 500 million for a PoRep
//! partition), and the 44 GiB files
//! of a real partition are not at hand for synthetic circuits. MSM, NTT and memory
//! traffic do not care what the points are, only how many there are and that they
//! are valid, distinct curve points. So [`timing_only_params`] builds each section
//! from consecutive multiples of the generator, `P_i = (s + i)·G` with a random
//! offset `s`: a table `T_j = (j + 1)·G` of 2^14 points is made once, then each
//! chunk of 2^14 points is one scalar multiple `B` plus the table, `B + T_j`,
//! added in affine coordinates with all slope denominators inverted together
//! (Montgomery's trick): about six field multiplications per point and no scalar
//! multiplication per point. Chunks run in parallel on the current rayon pool.
//!
//! The random offset matters: with `P_i = i·G`, a bucket sum of a few bases is
//! itself a small multiple of `G` and can equal the next base (a doubling, or the
//! identity for opposite points), cases that real parameters practically never
//! hit and that batch-affine accumulation handles on a slow path; with a random
//! `s` a collision needs `(m − 1)·s` to land on a small integer, which it does
//! with negligible probability.
//!
//! The verifying key is random too (random multiples of the generators), so a
//! proof is well formed but fails verification. [`TimingParams`] wraps the
//! parameters so that this cannot be forgotten: its `Debug` and
//! [`label`](TimingParams::label) say so, and callers must ask for the inner
//! [`Parameters`] explicitly.
//!
//! Measured on the 2-core development machine while other builds ran (load ≈ 4):
//! the set of a 2^20 PoRep-shaped circuit (`PorepLike` at 2^20: h 2^20 − 1, l 1.04M,
//! a 1.04M, b_g1 and b_g2 264K points, 3.4M G1 + 0.26M G2 points) takes 2.1 s wall
//! and 1.8 s of CPU; the first version (a Jacobian addition chain, then batch
//! normalisation) took 4.2 s.

use std::fmt;
use std::sync::Arc;

use blstrs::{Bls12, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use rayon::prelude::*;

use crate::{Parameters, VerifyingKey};

/// What the parameters returned by [`TimingParams::label`] are.
pub const TIMING_ONLY_LABEL: &str = "timing-only (random points; proofs do not verify)";

/// Points per parallel chunk: one scalar multiplication (~0.1 ms) and one field
/// inversion each, negligible against 2^14 additions.
const CHUNK: usize = 1 << 14;

/// The sizes a parameter set must have for a circuit, as its compiled R1CS gives
/// them (bellperson's generator filters the points at infinity out of `a` and
/// `b`, so those follow the densities).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimingShape {
    /// Public inputs, the constant ONE included (the `ic` length).
    pub num_inputs: usize,
    /// Aux variables (the `l` length).
    pub num_aux: usize,
    /// Aux variables used in A (every input is used in A).
    pub a_aux_dense: usize,
    /// Inputs used in B (PoRep: 1, the constant ONE).
    pub b_inputs_dense: usize,
    /// Aux variables used in B.
    pub b_aux_dense: usize,
    /// The evaluation domain (a power of two); `h` has `domain − 1` points.
    pub domain: usize,
}

impl TimingShape {
    pub fn h_len(&self) -> usize {
        self.domain.saturating_sub(1)
    }

    pub fn l_len(&self) -> usize {
        self.num_aux
    }

    pub fn a_len(&self) -> usize {
        self.num_inputs + self.a_aux_dense
    }

    /// Length of `b_g1` and of `b_g2`.
    pub fn b_len(&self) -> usize {
        self.b_inputs_dense + self.b_aux_dense
    }

    /// Checks the shape describes a possible circuit.
    pub fn check(&self) -> Result<(), TimingShapeError> {
        use TimingShapeError::*;
        if self.num_inputs == 0 {
            return Err(NoInputs);
        }
        if self.domain < 2 || !self.domain.is_power_of_two() {
            return Err(Domain(self.domain));
        }
        let constraints = self.domain; // at most; the domain holds them all
        if self.num_inputs > constraints {
            return Err(InputsExceedDomain {
                inputs: self.num_inputs,
                domain: self.domain,
            });
        }
        for (query, dense, of, what) in [
            ("A", self.a_aux_dense, self.num_aux, "aux"),
            ("B", self.b_aux_dense, self.num_aux, "aux"),
            ("B", self.b_inputs_dense, self.num_inputs, "inputs"),
        ] {
            if dense > of {
                return Err(Density {
                    query,
                    what,
                    dense,
                    of,
                });
            }
        }
        Ok(())
    }
}

/// A [`TimingShape`] that no circuit can have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingShapeError {
    #[error("a circuit has at least one public input (the constant ONE), but the shape has none")]
    NoInputs,
    #[error("the domain must be a power of two of at least 2, not {0}")]
    Domain(usize),
    #[error("{inputs} public inputs need their own constraints, more than a domain of {domain}")]
    InputsExceedDomain { inputs: usize, domain: usize },
    #[error("the shape has {dense} {what} used in {query}, but only {of} {what}")]
    Density {
        query: &'static str,
        what: &'static str,
        dense: usize,
        of: usize,
    },
}

/// Parameters whose points are valid but unrelated to any circuit: for timing the
/// prover only. Proofs made with them are well formed and **do not verify**.
#[derive(Clone)]
pub struct TimingParams {
    params: Parameters<Bls12>,
    shape: TimingShape,
}

impl TimingParams {
    /// [`TIMING_ONLY_LABEL`]: say this wherever results made with these
    /// parameters are reported.
    pub fn label(&self) -> &'static str {
        TIMING_ONLY_LABEL
    }

    /// The parameters, to hand to a prover. Proofs from them do not verify.
    pub fn params(&self) -> &Parameters<Bls12> {
        &self.params
    }

    /// The parameters by value. Proofs from them do not verify.
    pub fn into_params(self) -> Parameters<Bls12> {
        self.params
    }

    pub fn shape(&self) -> &TimingShape {
        &self.shape
    }
}

impl fmt::Debug for TimingParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimingParams")
            .field("label", &TIMING_ONLY_LABEL)
            .field("ic", &self.params.vk.ic.len())
            .field("h", &self.params.h.len())
            .field("l", &self.params.l.len())
            .field("a", &self.params.a.len())
            .field("b_g1", &self.params.b_g1.len())
            .field("b_g2", &self.params.b_g2.len())
            .finish()
    }
}

/// Timing-only parameters of `shape`'s sizes, deterministic in `seed` (see the
/// module docs for how and why). Runs on the current rayon pool.
///
/// Every G1 point of the set (`ic`, `h`, `l`, `a`, `b_g1`) is a different
/// multiple of the generator, and so is every `b_g2` point in G2.
pub fn timing_only_params(
    shape: &TimingShape,
    seed: u64,
) -> Result<TimingParams, TimingShapeError> {
    shape.check()?;
    let _span = tracing::info_span!("timing_only_params").entered();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let g1_offset = Scalar::random(&mut rng);
    let g2_offset = Scalar::random(&mut rng);

    let vk = VerifyingKey::<Bls12> {
        alpha_g1: (G1Projective::generator() * Scalar::random(&mut rng)).to_affine(),
        beta_g1: (G1Projective::generator() * Scalar::random(&mut rng)).to_affine(),
        beta_g2: (G2Projective::generator() * Scalar::random(&mut rng)).to_affine(),
        gamma_g2: (G2Projective::generator() * Scalar::random(&mut rng)).to_affine(),
        delta_g1: (G1Projective::generator() * Scalar::random(&mut rng)).to_affine(),
        delta_g2: (G2Projective::generator() * Scalar::random(&mut rng)).to_affine(),
        ic: Vec::new(),
    };

    // Consecutive, disjoint ranges of multiples: one per G1 section.
    let mut next = 0usize;
    let mut g1_section = |len: usize| {
        let start = next;
        next += len;
        g1_run(g1_offset, start, len)
    };
    let ic = g1_section(shape.num_inputs);
    let h = g1_section(shape.h_len());
    let l = g1_section(shape.l_len());
    let a = g1_section(shape.a_len());
    let b_g1 = g1_section(shape.b_len());
    let b_g2 = g2_run(g2_offset, 0, shape.b_len());

    Ok(TimingParams {
        params: Parameters {
            vk: VerifyingKey { ic, ..vk },
            h: Arc::new(h),
            l: Arc::new(l),
            a: Arc::new(a),
            b_g1: Arc::new(b_g1),
            b_g2: Arc::new(b_g2),
        },
        shape: *shape,
    })
}

/// What the generation needs of a curve: affine coordinates, the generator's
/// multiples, and Jacobian coordinates of blst's projective points.
trait Point: Copy + Default + Send + Sync + PartialEq {
    type Base: Field;
    type Proj: Copy + Send + Sync;
    fn xy(&self) -> (Self::Base, Self::Base);
    fn from_xy(x: Self::Base, y: Self::Base) -> Self;
    /// `k·G`.
    fn multiple(k: Scalar) -> Self::Proj;
    fn plus(p: &Self::Proj, a: &Self) -> Self::Proj;
    fn normalize(p: &Self::Proj) -> Self;
    fn jacobian(p: &Self::Proj) -> (Self::Base, Self::Base, Self::Base);
}

macro_rules! impl_point {
    ($affine:ty, $proj:ty, $base:ty) => {
        impl Point for $affine {
            type Base = $base;
            type Proj = $proj;
            fn xy(&self) -> ($base, $base) {
                (self.x(), self.y())
            }
            fn from_xy(x: $base, y: $base) -> Self {
                <$affine>::from_raw_unchecked(x, y, false)
            }
            fn multiple(k: Scalar) -> $proj {
                <$proj>::generator() * k
            }
            fn plus(p: &$proj, a: &Self) -> $proj {
                p + a
            }
            fn normalize(p: &$proj) -> Self {
                p.to_affine()
            }
            fn jacobian(p: &$proj) -> ($base, $base, $base) {
                (p.x(), p.y(), p.z())
            }
        }
    };
}

impl_point!(G1Affine, G1Projective, blstrs::Fp);
impl_point!(G2Affine, G2Projective, blstrs::Fp2);

/// `(offset + start + i)·G` for `i < len`.
///
/// A table `T_j = (j + 1)·G` for one chunk is made first (a chain of mixed
/// additions, normalised together). Each chunk then starts from one scalar
/// multiple `B` and computes `B + T_j` for all `j` in affine coordinates, the
/// slopes' denominators inverted together: about six field multiplications per
/// point, a third of a Jacobian addition followed by normalisation.
fn multiples<A: Point>(offset: Scalar, start: usize, len: usize) -> Vec<A> {
    let table = chain::<A>(A::multiple(Scalar::ONE), len.min(CHUNK));
    run(len, |chunk_start, out: &mut [A]| {
        let k = offset + Scalar::from((start + chunk_start) as u64) - Scalar::ONE;
        let base = A::normalize(&A::multiple(k));
        let (bx, by) = base.xy();
        // Denominators x_T − x_B, inverted together.
        let mut inv: Vec<A::Base> = table[..out.len()].iter().map(|t| t.xy().0 - bx).collect();
        batch_invert(&mut inv);
        for (j, o) in out.iter_mut().enumerate() {
            let (tx, ty) = table[j].xy();
            if bool::from(inv[j].is_zero()) {
                // B = ±T_j: a doubling or the identity. Only for offsets within
                // CHUNK of a multiple of the group order, never in practice.
                *o = A::normalize(&A::plus(&A::multiple(k), &table[j]));
                continue;
            }
            let lambda = (ty - by) * inv[j];
            let x = lambda.square() - bx - tx;
            let y = lambda * (bx - x) - by;
            *o = A::from_xy(x, y);
        }
    })
}

/// `first, first + G, first + 2G, ...` (`len` points), normalised together.
fn chain<A: Point>(first: A::Proj, len: usize) -> Vec<A> {
    let g = A::normalize(&A::multiple(Scalar::ONE));
    let mut proj = Vec::with_capacity(len);
    let mut p = first;
    for _ in 0..len {
        proj.push(p);
        p = A::plus(&p, &g);
    }
    let mut out = vec![A::default(); len];
    batch_to_affine::<A>(&proj, &mut out);
    out
}

fn g1_run(offset: Scalar, start: usize, len: usize) -> Vec<G1Affine> {
    multiples(offset, start, len)
}

fn g2_run(offset: Scalar, start: usize, len: usize) -> Vec<G2Affine> {
    multiples(offset, start, len)
}

/// Fills a vector of `len` points chunk by chunk in parallel; `fill(chunk_start,
/// out)` writes the chunk.
fn run<A: Copy + Default + Send + Sync>(
    len: usize,
    fill: impl Fn(usize, &mut [A]) + Sync,
) -> Vec<A> {
    let mut v = vec![A::default(); len];
    v.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(k, out)| fill(k * CHUNK, out));
    v
}

/// Replaces every non-zero element by its inverse with one field inversion
/// (Montgomery's trick); zeros stay zero.
fn batch_invert<F: Field>(v: &mut [F]) {
    // prefix[i] = product of the non-zero elements before i.
    let mut prefix = Vec::with_capacity(v.len());
    let mut acc = F::ONE;
    for x in v.iter() {
        prefix.push(acc);
        if !bool::from(x.is_zero()) {
            acc *= x;
        }
    }
    // A product of non-zero elements is invertible.
    let mut inv = acc.invert().unwrap_or(F::ZERO);
    for i in (0..v.len()).rev() {
        let x = v[i];
        if bool::from(x.is_zero()) {
            continue;
        }
        v[i] = inv * prefix[i];
        inv *= x;
    }
}

/// Jacobian `(X, Y, Z)` to affine `(X/Z², Y/Z³)`, all `Z` inverted together.
/// blst keeps points in Jacobian coordinates; the test
/// `generation_matches_scalar_multiplication` pins that down. The identity
/// (`Z = 0`, not produced here in practice) is normalised on its own.
fn batch_to_affine<A: Point>(points: &[A::Proj], out: &mut [A]) {
    let mut z_inv: Vec<A::Base> = points.iter().map(|p| A::jacobian(p).2).collect();
    batch_invert(&mut z_inv);
    for ((p, zi), o) in points.iter().zip(z_inv).zip(out.iter_mut()) {
        if bool::from(zi.is_zero()) {
            *o = A::normalize(p);
            continue;
        }
        let (x, y, _) = A::jacobian(p);
        let zi2 = zi.square();
        *o = A::from_xy(x * zi2, y * zi2 * zi);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::prime::PrimeCurveAffine;
    use std::collections::HashSet;

    fn shape() -> TimingShape {
        TimingShape {
            num_inputs: 5,
            num_aux: 3000,
            a_aux_dense: 2990,
            b_inputs_dense: 1,
            b_aux_dense: 760,
            domain: 4096,
        }
    }

    #[test]
    fn sections_have_the_shape_sizes() {
        let s = shape();
        let p = timing_only_params(&s, 1).unwrap();
        let q = p.params();
        assert_eq!(q.vk.ic.len(), 5);
        assert_eq!(q.h.len(), 4095);
        assert_eq!(q.l.len(), 3000);
        assert_eq!(q.a.len(), 5 + 2990);
        assert_eq!(q.b_g1.len(), 761);
        assert_eq!(q.b_g2.len(), 761);
        assert_eq!(p.shape(), &s);
        assert_eq!(p.label(), TIMING_ONLY_LABEL);
        assert!(format!("{p:?}").contains("proofs do not verify"));
    }

    #[test]
    fn points_are_on_the_curve_in_the_subgroup_and_distinct() {
        let p = timing_only_params(&shape(), 2).unwrap();
        let q = p.params();
        let g1: Vec<&G1Affine> =
            q.vk.ic
                .iter()
                .chain(q.h.iter())
                .chain(q.l.iter())
                .chain(q.a.iter())
                .chain(q.b_g1.iter())
                .collect();
        let mut seen = HashSet::new();
        for (i, pt) in g1.iter().enumerate() {
            assert!(bool::from(pt.is_on_curve()), "G1 point {i}");
            assert!(!bool::from(pt.is_identity()), "G1 point {i}");
            assert!(seen.insert(pt.to_compressed()), "G1 point {i} repeats");
        }
        let mut seen2 = HashSet::new();
        for (i, pt) in q.b_g2.iter().enumerate() {
            assert!(bool::from(pt.is_on_curve()), "G2 point {i}");
            assert!(seen2.insert(pt.to_compressed()), "G2 point {i} repeats");
        }
        // Subgroup membership costs a scalar multiplication: check a sample.
        for pt in g1.iter().step_by(97) {
            assert!(bool::from(pt.is_torsion_free()));
        }
        for pt in q.b_g2.iter().step_by(97) {
            assert!(bool::from(pt.is_torsion_free()));
        }
        // Consecutive multiples across a chunk boundary and between sections.
        let g = G1Projective::generator();
        assert_eq!(
            G1Projective::from(q.h[0]) - G1Projective::from(*q.vk.ic.last().unwrap()),
            g
        );
        for i in [1usize, 100, 4094] {
            assert_eq!(
                G1Projective::from(q.h[i]) - G1Projective::from(q.h[i - 1]),
                g
            );
        }
        assert_eq!(
            G2Projective::from(q.b_g2[1]) - G2Projective::from(q.b_g2[0]),
            G2Projective::generator()
        );
    }

    #[test]
    fn generation_matches_scalar_multiplication() {
        // More than one chunk, the last one partial.
        let n = CHUNK + 33;
        let offset = Scalar::from(123_456_789u64);
        let pts = g1_run(offset, 7, n);
        for i in [0, 1, CHUNK - 1, CHUNK, n - 1] {
            let want =
                (G1Projective::generator() * (offset + Scalar::from(7 + i as u64))).to_affine();
            assert_eq!(pts[i], want, "point {i}");
        }
        let pts2 = g2_run(offset, 3, 40);
        for i in [0, 17, 39] {
            let want =
                (G2Projective::generator() * (offset + Scalar::from(3 + i as u64))).to_affine();
            assert_eq!(pts2[i], want, "G2 point {i}");
        }
        // Offset 5: the chunk's base is 4·G, equal to table entry 3 (a doubling),
        // and -3: the base is −4·G, so base + T_3 is the identity.
        let doubling = g1_run(Scalar::from(5u64), 0, 10);
        assert_eq!(
            doubling[3],
            (G1Projective::generator() * Scalar::from(8u64)).to_affine()
        );
        assert_eq!(
            doubling[9],
            (G1Projective::generator() * Scalar::from(14u64)).to_affine()
        );
        let through_zero = g2_run(-Scalar::from(3u64), 0, 10);
        assert!(bool::from(through_zero[3].is_identity()));
        assert_eq!(through_zero[4], G2Affine::generator());
        // Jacobian normalisation, the identity included.
        let proj = [G1Projective::generator().double(), G1Projective::identity()];
        let mut out = [G1Affine::default(); 2];
        batch_to_affine::<G1Affine>(&proj, &mut out);
        assert_eq!(out, [proj[0].to_affine(), G1Affine::identity()]);
        let mut v = [Scalar::from(3u64), Scalar::ZERO, Scalar::from(7u64)];
        batch_invert(&mut v);
        assert_eq!(v[0] * Scalar::from(3u64), Scalar::ONE);
        assert_eq!(v[1], Scalar::ZERO);
        assert_eq!(v[2] * Scalar::from(7u64), Scalar::ONE);
    }

    #[test]
    fn seeds_decide_the_points() {
        let a = timing_only_params(&shape(), 3).unwrap();
        let b = timing_only_params(&shape(), 3).unwrap();
        let c = timing_only_params(&shape(), 4).unwrap();
        assert!(a.params() == b.params());
        assert!(a.params().h[0] != c.params().h[0]);
        assert!(a.params().vk.alpha_g1 != c.params().vk.alpha_g1);
    }

    #[test]
    fn impossible_shapes_are_errors() {
        let ok = shape();
        let cases = [
            (
                TimingShape {
                    num_inputs: 0,
                    ..ok
                },
                TimingShapeError::NoInputs,
            ),
            (
                TimingShape { domain: 3000, ..ok },
                TimingShapeError::Domain(3000),
            ),
            (TimingShape { domain: 1, ..ok }, TimingShapeError::Domain(1)),
            (
                TimingShape {
                    num_inputs: 5000,
                    b_inputs_dense: 1,
                    ..ok
                },
                TimingShapeError::InputsExceedDomain {
                    inputs: 5000,
                    domain: 4096,
                },
            ),
            (
                TimingShape {
                    a_aux_dense: 3001,
                    ..ok
                },
                TimingShapeError::Density {
                    query: "A",
                    what: "aux",
                    dense: 3001,
                    of: 3000,
                },
            ),
            (
                TimingShape {
                    b_inputs_dense: 6,
                    ..ok
                },
                TimingShapeError::Density {
                    query: "B",
                    what: "inputs",
                    dense: 6,
                    of: 5,
                },
            ),
        ];
        for (s, e) in cases {
            assert_eq!(timing_only_params(&s, 1).unwrap_err(), e);
        }
    }
}
