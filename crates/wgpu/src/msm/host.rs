//! Host-side conversions between blstrs' types and the device layout.

use blstrs::{G1Affine, G1Projective};
use group::Group;

/// u32 words of one affine base on the device: x then y, 12 words each.
pub(crate) const AFFINE_WORDS: usize = 24;
/// u32 words of one XYZZ point on the device: X, Y, ZZ, ZZZ, 12 words each.
pub(crate) const XYZZ_WORDS: usize = 48;

/// The 12 little-endian u32 words of `f`'s Montgomery representation (blst's six
/// u64 limbs, each split low half first).
fn fp_words(f: blst::blst_fp, out: &mut [u32]) {
    let limbs = f.l;
    for (k, l) in limbs.iter().enumerate() {
        out[2 * k] = *l as u32;
        out[2 * k + 1] = (*l >> 32) as u32;
    }
}

/// A blst field element from 12 words of Montgomery representation (the
/// device keeps them fully reduced).
fn fp_from_words(w: &[u32]) -> blst::blst_fp {
    let mut l = [0u64; 6];
    for k in 0..6 {
        l[k] = u64::from(w[2 * k]) | (u64::from(w[2 * k + 1]) << 32);
    }
    blst::blst_fp { l }
}

/// Appends `bases` in the device layout. The point at infinity is blst's (0, 0).
pub(crate) fn affine_words(bases: &[G1Affine], out: &mut Vec<u32>) {
    let start = out.len();
    out.resize(start + bases.len() * AFFINE_WORDS, 0);
    for (p, w) in bases
        .iter()
        .zip(out[start..].chunks_exact_mut(AFFINE_WORDS))
    {
        fp_words(p.x().into(), &mut w[..12]);
        fp_words(p.y().into(), &mut w[12..]);
    }
}

/// The point an XYZZ quadruple (X/ZZ, Y/ZZZ) stands for. As blst's Jacobian
/// (X', Y', Z') with x = X'/Z'^2, y = Y'/Z'^3: Z' = ZZZ, X' = X ZZ^2 and
/// Y' = Y ZZZ^2 (ZZZ^2 = ZZ^3); blstrs takes it back through affine bytes
/// (blstrs keeps its own Fp private), one inversion per window sum.
pub(crate) fn xyzz_to_projective(w: &[u32]) -> Option<G1Projective> {
    let zz = fp_from_words(&w[24..36]);
    if zz.l == [0; 6] {
        return Some(G1Projective::identity());
    }
    let (x, y, zzz) = (
        fp_from_words(&w[..12]),
        fp_from_words(&w[12..24]),
        fp_from_words(&w[36..48]),
    );
    let mut p = blst::blst_p1 {
        z: zzz,
        ..Default::default()
    };
    let mut t = blst::blst_fp::default();
    let mut a = blst::blst_p1_affine::default();
    let mut bytes = [0u8; 96];
    // SAFETY: every pointer is to a distinct, initialised local of the type blst
    // expects (`bytes` is the 96 bytes of an uncompressed G1 point).
    unsafe {
        blst::blst_fp_sqr(&mut t, &zz);
        blst::blst_fp_mul(&mut p.x, &x, &t);
        blst::blst_fp_sqr(&mut t, &zzz);
        blst::blst_fp_mul(&mut p.y, &y, &t);
        blst::blst_p1_to_affine(&mut a, &p);
        blst::blst_p1_affine_serialize(bytes.as_mut_ptr(), &a);
    }
    let affine: Option<G1Affine> = G1Affine::from_uncompressed_unchecked(&bytes).into();
    affine.map(|a| -> G1Projective { a.into() })
}
