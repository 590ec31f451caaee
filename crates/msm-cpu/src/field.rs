//! Coordinate-field arithmetic on blst's limb types, each result written straight into
//! its destination.
//!
//! Why not blstrs's `Fp`/`Fp2` operators: they copy an operand into a temporary, let blst
//! write the result there with 8-byte stores, and return it by value; the compiler then
//! moves it with 16-byte loads that cannot be forwarded from those stores. Profiled on the
//! 2-core Xeon, those stalls were most of the batch flush's own 16% of a G1 MSM at 2^16.
//! Calling blst with explicit output pointers removes the copies.
//!
//! blst's functions read their inputs and write their output through the given pointers
//! and nothing else, and accept an output that aliases an input (blstrs relies on the
//! same, e.g. `blst_fp_mul(&mut self.0, &self.0, &rhs.0)`).

#![allow(unsafe_code)]

use blst::{
    blst_fp, blst_fp2, blst_fp2_add, blst_fp2_cneg, blst_fp2_eucl_inverse, blst_fp2_mul,
    blst_fp2_sqr, blst_fp2_sub, blst_fp_add, blst_fp_cneg, blst_fp_eucl_inverse,
    blst_fp_from_uint64, blst_fp_mul, blst_fp_sqr, blst_fp_sub,
};

/// A coordinate field (Fp for G1, Fp2 for G2) in blst's Montgomery representation.
/// `_to` functions write `out`; `_assign` functions update their first argument.
pub(crate) trait Coord: Copy + Send + Sync + 'static {
    const ZERO: Self;
    fn one() -> Self;
    /// `out = a · b`
    fn mul_to(out: &mut Self, a: &Self, b: &Self);
    /// `a = a · b`
    fn mul_assign(a: &mut Self, b: &Self);
    /// `out = a²`
    fn sqr_to(out: &mut Self, a: &Self);
    /// `out = a + b`
    fn add_to(out: &mut Self, a: &Self, b: &Self);
    /// `a = a + b`
    fn add_assign(a: &mut Self, b: &Self);
    /// `out = a - b`
    fn sub_to(out: &mut Self, a: &Self, b: &Self);
    /// `a = a - b`
    fn sub_assign(a: &mut Self, b: &Self);
    /// `a = b - a`
    fn sub_from(a: &mut Self, b: &Self);
    /// `a = -a`
    fn neg_assign(a: &mut Self);
    /// `out = 1 / a` (zero for zero).
    fn inverse_to(out: &mut Self, a: &Self);
    /// Equality of representations, variable time (MSM inputs are public). blstrs's `==`
    /// is constant time, with an optimisation barrier per limb.
    fn eq_vartime(a: &Self, b: &Self) -> bool;
    fn is_zero(a: &Self) -> bool;
}

/// Limb-wise equality without a call to `memcmp` (which `[u64; 6] ==` compiles to).
#[inline(always)]
fn limbs_eq(a: &[u64; 6], b: &[u64; 6]) -> bool {
    a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[inline(always)]
fn limbs_zero(a: &[u64; 6]) -> bool {
    a.iter().fold(0, |acc, x| acc | x) == 0
}

/// Implements an operation with an output pointer and input pointers on top of one blst
/// function; `$assign` variants alias the output with the first input.
macro_rules! blst_ops {
    ($t:ty, mul: $mul:ident, sqr: $sqr:ident, add: $add:ident, sub: $sub:ident,
     cneg: $cneg:ident, inv: $inv:ident) => {
        #[inline(always)]
        fn mul_to(out: &mut $t, a: &$t, b: &$t) {
            // SAFETY: valid pointers to initialised elements; see the module docs.
            unsafe { $mul(out, a, b) }
        }
        #[inline(always)]
        fn mul_assign(a: &mut $t, b: &$t) {
            let p: *mut $t = a;
            // SAFETY: as above; blst allows the output to alias an input.
            unsafe { $mul(p, p, b) }
        }
        #[inline(always)]
        fn sqr_to(out: &mut $t, a: &$t) {
            // SAFETY: valid pointers to initialised elements; see the module docs.
            unsafe { $sqr(out, a) }
        }
        #[inline(always)]
        fn add_to(out: &mut $t, a: &$t, b: &$t) {
            // SAFETY: valid pointers to initialised elements; see the module docs.
            unsafe { $add(out, a, b) }
        }
        #[inline(always)]
        fn add_assign(a: &mut $t, b: &$t) {
            let p: *mut $t = a;
            // SAFETY: as above; blst allows the output to alias an input.
            unsafe { $add(p, p, b) }
        }
        #[inline(always)]
        fn sub_to(out: &mut $t, a: &$t, b: &$t) {
            // SAFETY: valid pointers to initialised elements; see the module docs.
            unsafe { $sub(out, a, b) }
        }
        #[inline(always)]
        fn sub_assign(a: &mut $t, b: &$t) {
            let p: *mut $t = a;
            // SAFETY: as above; blst allows the output to alias an input.
            unsafe { $sub(p, p, b) }
        }
        #[inline(always)]
        fn sub_from(a: &mut $t, b: &$t) {
            let p: *mut $t = a;
            // SAFETY: as above; blst allows the output to alias an input.
            unsafe { $sub(p, b, p) }
        }
        #[inline(always)]
        fn neg_assign(a: &mut $t) {
            let p: *mut $t = a;
            // SAFETY: as above; blst allows the output to alias an input.
            unsafe { $cneg(p, p, true) }
        }
        fn inverse_to(out: &mut $t, a: &$t) {
            // SAFETY: valid pointers to initialised elements; see the module docs.
            unsafe { $inv(out, a) }
        }
    };
}

impl Coord for blst_fp {
    const ZERO: Self = blst_fp { l: [0; 6] };

    fn one() -> Self {
        let mut out = Self::ZERO;
        let one = [1u64, 0, 0, 0, 0, 0];
        // SAFETY: `one` holds the six limbs blst reads; `out` is a valid output.
        unsafe { blst_fp_from_uint64(&mut out, one.as_ptr()) };
        out
    }

    blst_ops!(blst_fp, mul: blst_fp_mul, sqr: blst_fp_sqr, add: blst_fp_add, sub: blst_fp_sub,
              cneg: blst_fp_cneg, inv: blst_fp_eucl_inverse);

    #[inline(always)]
    fn eq_vartime(a: &Self, b: &Self) -> bool {
        limbs_eq(&a.l, &b.l)
    }
    #[inline(always)]
    fn is_zero(a: &Self) -> bool {
        limbs_zero(&a.l)
    }
}

impl Coord for blst_fp2 {
    const ZERO: Self = blst_fp2 {
        fp: [blst_fp::ZERO; 2],
    };

    fn one() -> Self {
        blst_fp2 {
            fp: [blst_fp::one(), blst_fp::ZERO],
        }
    }

    blst_ops!(blst_fp2, mul: blst_fp2_mul, sqr: blst_fp2_sqr, add: blst_fp2_add,
              sub: blst_fp2_sub, cneg: blst_fp2_cneg, inv: blst_fp2_eucl_inverse);

    #[inline(always)]
    fn eq_vartime(a: &Self, b: &Self) -> bool {
        limbs_eq(&a.fp[0].l, &b.fp[0].l) && limbs_eq(&a.fp[1].l, &b.fp[1].l)
    }
    #[inline(always)]
    fn is_zero(a: &Self) -> bool {
        limbs_zero(&a.fp[0].l) && limbs_zero(&a.fp[1].l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Affine, G2Affine};
    use group::prime::PrimeCurveAffine;

    /// The generator satisfies y² = x³ + 4 (G1) and y² = x³ + 4(1 + u) (G2): exercises
    /// mul, sqr, add, sub against known values; inversion and negation by round trips.
    fn check<F: Coord>(x: &F, y: &F, b: &F) {
        let mut lhs = F::ZERO;
        F::sqr_to(&mut lhs, y);
        let mut rhs = F::ZERO;
        F::sqr_to(&mut rhs, x);
        F::mul_assign(&mut rhs, x);
        F::add_assign(&mut rhs, b);
        assert!(F::eq_vartime(&lhs, &rhs));

        let mut inv = F::ZERO;
        F::inverse_to(&mut inv, x);
        let mut prod = F::ZERO;
        F::mul_to(&mut prod, &inv, x);
        assert!(F::eq_vartime(&prod, &F::one()));

        let mut d = *x;
        F::neg_assign(&mut d);
        F::add_assign(&mut d, x);
        assert!(F::is_zero(&d));
        let mut s = F::ZERO;
        F::add_to(&mut s, x, y);
        F::sub_assign(&mut s, y);
        assert!(F::eq_vartime(&s, x));
        let mut t = *y;
        F::sub_from(&mut t, x); // x - y
        let mut u = F::ZERO;
        F::sub_to(&mut u, x, y);
        assert!(F::eq_vartime(&t, &u) && !F::is_zero(&t));
    }

    #[test]
    fn field_ops_satisfy_the_curve_equations() {
        let g1 = G1Affine::generator();
        let g1: &blst::blst_p1_affine = g1.as_ref();
        let mut four = blst_fp::one();
        let one = blst_fp::one();
        for _ in 0..3 {
            blst_fp::add_assign(&mut four, &one);
        }
        check(&g1.x, &g1.y, &four);

        let g2 = G2Affine::generator();
        let g2: &blst::blst_p2_affine = g2.as_ref();
        let b2 = blst_fp2 { fp: [four, four] };
        check(&g2.x, &g2.y, &b2);
    }
}
