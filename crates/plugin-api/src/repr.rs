//! Field elements and points as they cross the boundary.
//!
//! Layout (identical to blst's C structs, which blstrs wraps with
//! `#[repr(transparent)]`):
//!
//! | type | layout | bytes |
//! |---|---|---|
//! | [`ScalarRepr`] | 4 × u64, little-endian limbs, Montgomery form (blst_fr) | 32 |
//! | [`FpRepr`] | 6 × u64, little-endian limbs, Montgomery form (blst_fp) | 48 |
//! | [`Fp2Repr`] | c0, c1: 2 × Fp (blst_fp2) | 96 |
//! | [`G1AffineRepr`] | x, y: 2 × Fp (blst_p1_affine); infinity is (0, 0) | 96 |
//! | [`G1ProjectiveRepr`] | x, y, z: 3 × Fp, Jacobian (blst_p1) | 144 |
//! | [`G2AffineRepr`] | x, y: 2 × Fp2 (blst_p2_affine) | 192 |
//! | [`G2ProjectiveRepr`] | x, y, z: 3 × Fp2, Jacobian (blst_p2) | 288 |
//!
//! All are 8-byte aligned. The split scalars' tail (`[u64; 4]`) is different: those
//! are *canonical* (not Montgomery) limbs, as `prep_msm` produces them for Pippenger.
//!
//! With the `blstrs` feature, [`Repr`] converts between these and blstrs types
//! without copying slices.

use abi_stable::StableAbi;

/// An element of the BLS12-381 scalar field (blst_fr).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScalarRepr {
    pub limbs: [u64; 4],
}

/// An element of the BLS12-381 base field (blst_fp).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FpRepr {
    pub limbs: [u64; 6],
}

/// An element of the quadratic extension, c0 + c1·u (blst_fp2).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fp2Repr {
    pub c: [FpRepr; 2],
}

/// A G1 point in affine coordinates (blst_p1_affine).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct G1AffineRepr {
    pub x: FpRepr,
    pub y: FpRepr,
}

/// A G1 point in Jacobian coordinates (blst_p1).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct G1ProjectiveRepr {
    pub x: FpRepr,
    pub y: FpRepr,
    pub z: FpRepr,
}

/// A G2 point in affine coordinates (blst_p2_affine).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct G2AffineRepr {
    pub x: Fp2Repr,
    pub y: Fp2Repr,
}

/// A G2 point in Jacobian coordinates (blst_p2).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct G2ProjectiveRepr {
    pub x: Fp2Repr,
    pub y: Fp2Repr,
    pub z: Fp2Repr,
}

macro_rules! assert_layout {
    ($($t:ty => $size:expr),* $(,)?) => {$(
        const _: () = assert!(std::mem::size_of::<$t>() == $size);
        const _: () = assert!(std::mem::align_of::<$t>() == 8);
    )*};
}

assert_layout! {
    ScalarRepr => 32,
    FpRepr => 48,
    Fp2Repr => 96,
    G1AffineRepr => 96,
    G1ProjectiveRepr => 144,
    G2AffineRepr => 192,
    G2ProjectiveRepr => 288,
}

#[cfg(feature = "blstrs")]
pub use self::blstrs_repr::Repr;

#[cfg(feature = "blstrs")]
mod blstrs_repr {
    use super::*;
    use abi_stable::std_types::RVec;
    use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

    /// A blstrs type and its ABI twin.
    ///
    /// # Safety
    ///
    /// `Self` and `Self::Repr` must have the same size and alignment, and every bit
    /// pattern of one must be a valid value of the other. Implemented here only for
    /// blstrs types, which are `#[repr(transparent)]` over blst's `#[repr(C)]`
    /// structs of `u64` limbs, of which the `*Repr` types are field-for-field copies
    /// (sizes and alignments are asserted at compile time below). A value that is
    /// not reduced or not on the curve is still memory-safe; it only computes
    /// garbage, as it would in blst.
    pub unsafe trait Repr: Copy + Sized + 'static {
        type Repr: Copy + Sized + 'static;

        fn to_repr(self) -> Self::Repr {
            // SAFETY: same size and any bit pattern is valid (trait contract).
            unsafe { std::mem::transmute_copy(&self) }
        }

        fn from_repr(r: Self::Repr) -> Self {
            // SAFETY: as above.
            unsafe { std::mem::transmute_copy(&r) }
        }

        fn slice_to_repr(s: &[Self]) -> &[Self::Repr] {
            // SAFETY: same size, alignment and validity (trait contract), so the
            // same memory is a valid slice of the same length of the other type.
            unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
        }

        fn slice_from_repr(s: &[Self::Repr]) -> &[Self] {
            // SAFETY: as above.
            unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
        }

        /// Moves a `Vec` into an `RVec` of the twin type without copying: the
        /// allocation stays the host's and is freed by the host's allocator wherever
        /// the `RVec` is dropped.
        fn vec_to_rvec(v: Vec<Self>) -> RVec<Self::Repr> {
            let mut v = std::mem::ManuallyDrop::new(v);
            let (ptr, len, cap) = (v.as_mut_ptr(), v.len(), v.capacity());
            // SAFETY: the allocation came from a Vec<Self> of the global allocator;
            // Self::Repr has the same size and alignment, so the layout the
            // allocator sees on free is unchanged, and the elements are valid
            // values of Self::Repr (trait contract). `v` is not dropped.
            let repr = unsafe { Vec::from_raw_parts(ptr.cast::<Self::Repr>(), len, cap) };
            RVec::from(repr)
        }
    }

    macro_rules! repr_impl {
        ($($t:ty => $r:ty),* $(,)?) => {$(
            const _: () = assert!(std::mem::size_of::<$t>() == std::mem::size_of::<$r>());
            const _: () = assert!(std::mem::align_of::<$t>() == std::mem::align_of::<$r>());
            // SAFETY: see the trait: a repr(transparent) blst struct and its copy.
            unsafe impl Repr for $t {
                type Repr = $r;
            }
        )*};
    }

    repr_impl! {
        Scalar => ScalarRepr,
        G1Affine => G1AffineRepr,
        G1Projective => G1ProjectiveRepr,
        G2Affine => G2AffineRepr,
        G2Projective => G2ProjectiveRepr,
    }
}

#[cfg(all(test, feature = "blstrs"))]
mod tests {
    use super::*;
    use blstrs::{G1Projective, G2Projective, Scalar};
    use ff::Field;
    use group::{Curve, Group};
    use rand_chacha::rand_core::SeedableRng;

    #[test]
    fn reprs_round_trip_blstrs_values() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        for _ in 0..8 {
            let s = Scalar::random(&mut rng);
            assert_eq!(Scalar::from_repr(s.to_repr()), s);
            // Montgomery form: the repr of 1 is R mod r, not [1, 0, 0, 0].
            assert_ne!(Scalar::ONE.to_repr().limbs, [1, 0, 0, 0]);
            let p = G1Projective::random(&mut rng);
            assert_eq!(G1Projective::from_repr(p.to_repr()), p);
            let a = [p.to_affine(), (p + p).to_affine()];
            let back = blstrs::G1Affine::slice_from_repr(blstrs::G1Affine::slice_to_repr(&a));
            assert_eq!(back, &a);
            let q = G2Projective::random(&mut rng);
            assert_eq!(G2Projective::from_repr(q.to_repr()), q);
            assert_eq!(
                blstrs::G2Affine::from_repr(q.to_affine().to_repr()),
                q.to_affine()
            );
        }
        let v: Vec<Scalar> = (1..=33u64).map(Scalar::from).collect();
        let rv = Scalar::vec_to_rvec(v.clone());
        assert_eq!(Scalar::slice_from_repr(rv.as_slice()), &v[..]);
    }
}
