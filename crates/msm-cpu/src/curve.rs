//! The few operations the MSM needs from a curve, so one batch-affine implementation serves
//! G1 (coordinates in Fp) and G2 (coordinates in Fp2).

use blst::{blst_fp, blst_fp2, blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use group::Group;

use crate::field::Coord;

/// A short Weierstrass curve over `F` as blstrs represents it: affine points for the
/// inputs, projective points for sums.
pub(crate) trait MsmCurve: 'static {
    /// The coordinate field (Fp for G1, Fp2 for G2), as blst's limbs.
    type F: Coord;
    type Affine: Copy + Send + Sync;
    type Projective: Copy + Send + Sync;

    /// The coordinates of `p`, or `None` for the identity (blst's all-zero encoding).
    fn coords(p: &Self::Affine) -> Option<(&Self::F, &Self::F)>;
    /// The affine point with these coordinates (not checked to be on the curve).
    fn from_coords(x: &Self::F, y: &Self::F) -> Self::Affine;
    fn identity() -> Self::Projective;
    /// `acc += p`, correct for every input (doubling, inverses, identity).
    fn add_affine(acc: &mut Self::Projective, p: &Self::Affine);
    fn add(acc: &mut Self::Projective, p: &Self::Projective);
    fn double(p: &Self::Projective) -> Self::Projective;
    fn neg(p: &Self::Projective) -> Self::Projective;
    /// `k · p` for a small `k`, by doubling and adding (variable time: MSM inputs are
    /// public).
    fn mul_small(p: &Self::Projective, k: u64) -> Self::Projective {
        let mut acc = Self::identity();
        for bit in (0..u64::BITS - k.leading_zeros()).rev() {
            acc = Self::double(&acc);
            if k >> bit & 1 == 1 {
                Self::add(&mut acc, p);
            }
        }
        acc
    }
    /// Jacobian coordinates `(X, Y, Z)` of `p`: the point `(X/Z², Y/Z³)`, the identity
    /// when `Z = 0` (blst's representation).
    fn jacobian(p: &Self::Projective) -> (&Self::F, &Self::F, &Self::F);
}

/// BLS12-381 G1.
pub(crate) struct G1;
/// BLS12-381 G2.
pub(crate) struct G2;

impl MsmCurve for G1 {
    type F = blst_fp;
    type Affine = G1Affine;
    type Projective = G1Projective;

    #[inline(always)]
    fn coords(p: &G1Affine) -> Option<(&blst_fp, &blst_fp)> {
        let raw: &blst_p1_affine = p.as_ref();
        let zero = blst_fp::is_zero(&raw.x) && blst_fp::is_zero(&raw.y);
        (!zero).then_some((&raw.x, &raw.y))
    }
    #[inline(always)]
    fn from_coords(x: &blst_fp, y: &blst_fp) -> G1Affine {
        let mut p = G1Affine::default();
        *p.as_mut() = blst_p1_affine { x: *x, y: *y };
        p
    }
    fn identity() -> G1Projective {
        G1Projective::identity()
    }
    #[inline(always)]
    fn add_affine(acc: &mut G1Projective, p: &G1Affine) {
        *acc += p;
    }
    #[inline(always)]
    fn add(acc: &mut G1Projective, p: &G1Projective) {
        *acc += p;
    }
    #[inline(always)]
    fn double(p: &G1Projective) -> G1Projective {
        p.double()
    }
    #[inline(always)]
    fn neg(p: &G1Projective) -> G1Projective {
        -p
    }
    #[inline(always)]
    fn jacobian(p: &G1Projective) -> (&blst_fp, &blst_fp, &blst_fp) {
        let raw: &blst_p1 = p.as_ref();
        (&raw.x, &raw.y, &raw.z)
    }
}

impl MsmCurve for G2 {
    type F = blst_fp2;
    type Affine = G2Affine;
    type Projective = G2Projective;

    #[inline(always)]
    fn coords(p: &G2Affine) -> Option<(&blst_fp2, &blst_fp2)> {
        let raw: &blst_p2_affine = p.as_ref();
        let zero = blst_fp2::is_zero(&raw.x) && blst_fp2::is_zero(&raw.y);
        (!zero).then_some((&raw.x, &raw.y))
    }
    #[inline(always)]
    fn from_coords(x: &blst_fp2, y: &blst_fp2) -> G2Affine {
        let mut p = G2Affine::default();
        *p.as_mut() = blst_p2_affine { x: *x, y: *y };
        p
    }
    fn identity() -> G2Projective {
        G2Projective::identity()
    }
    #[inline(always)]
    fn add_affine(acc: &mut G2Projective, p: &G2Affine) {
        *acc += p;
    }
    #[inline(always)]
    fn add(acc: &mut G2Projective, p: &G2Projective) {
        *acc += p;
    }
    #[inline(always)]
    fn double(p: &G2Projective) -> G2Projective {
        p.double()
    }
    #[inline(always)]
    fn neg(p: &G2Projective) -> G2Projective {
        -p
    }
    #[inline(always)]
    fn jacobian(p: &G2Projective) -> (&blst_fp2, &blst_fp2, &blst_fp2) {
        let raw: &blst_p2 = p.as_ref();
        (&raw.x, &raw.y, &raw.z)
    }
}
