//! Assembly: the Groth16 proof `(A, B, C)` from the MSM sums and the blinding `r, s`.
//!
//! With `Σa, Σb₁, Σb₂` the A and B query sums, `H` and `L` the h and l sums:
//! ```text
//! A = α₁ + Σa + r·δ₁
//! B = β₂ + Σb₂ + s·δ₂
//! C = s·A + r·B₁ − r·s·δ₁ + H + L,   B₁ = β₁ + Σb₁ + s·δ₁
//! ```
//! which expands to bellperson's `s·Σa + r·Σb₁ + r·s·δ₁ + s·α₁ + r·β₁ + H + L`. Affine
//! encodings are canonical, so computing the same group elements in any order gives
//! the very bytes bellperson writes.
//!
//! Architecture invariant: assembly does a constant number of group operations per
//! proof and nothing else; it never sees a vector.

#![forbid(unsafe_code)]

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::{prime::PrimeCurveAffine, Curve};

/// The verifying-key points the prover needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssemblyKey {
    pub alpha_g1: G1Affine,
    pub beta_g1: G1Affine,
    pub beta_g2: G2Affine,
    pub delta_g1: G1Affine,
    pub delta_g2: G2Affine,
}

/// The query sums of one proof, as the MSM stages return them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmSums {
    pub h: G1Projective,
    pub l: G1Projective,
    pub a: G1Projective,
    pub b_g1: G1Projective,
    pub b_g2: G2Projective,
}

/// The three proof points, in the form bellperson's `Proof` holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProofPoints {
    pub a: G1Affine,
    pub b: G2Affine,
    pub c: G1Affine,
}

/// Errors of assembly.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssemblyError {
    /// δ is the identity: the parameters are malformed or a subversion attempt.
    #[error("the parameters' delta is the identity point; refusing to prove (subverted or corrupt parameters)")]
    IdentityDelta,
}

/// Assembles one proof.
pub fn assemble(
    key: &AssemblyKey,
    sums: &MsmSums,
    r: Scalar,
    s: Scalar,
) -> Result<ProofPoints, AssemblyError> {
    if bool::from(key.delta_g1.is_identity() | key.delta_g2.is_identity()) {
        return Err(AssemblyError::IdentityDelta);
    }
    let delta_g1 = G1Projective::from(key.delta_g1);

    let a = G1Projective::from(key.alpha_g1) + sums.a + delta_g1 * r;
    let b = G2Projective::from(key.beta_g2) + sums.b_g2 + G2Projective::from(key.delta_g2) * s;
    let c = sums.a * s
        + sums.b_g1 * r
        + delta_g1 * (r * s)
        + G1Projective::from(key.alpha_g1) * s
        + G1Projective::from(key.beta_g1) * r
        + sums.h
        + sums.l;

    Ok(ProofPoints {
        a: a.to_affine(),
        b: b.to_affine(),
        c: c.to_affine(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use group::Group;

    fn key_with(delta: Option<G1Affine>) -> AssemblyKey {
        let g1 = G1Projective::generator();
        let g2 = G2Projective::generator();
        AssemblyKey {
            alpha_g1: (g1 * Scalar::from(3u64)).to_affine(),
            beta_g1: (g1 * Scalar::from(5u64)).to_affine(),
            beta_g2: (g2 * Scalar::from(5u64)).to_affine(),
            delta_g1: delta.unwrap_or((g1 * Scalar::from(7u64)).to_affine()),
            delta_g2: (g2 * Scalar::from(7u64)).to_affine(),
        }
    }

    /// The textbook form `C = s·A + r·B₁ − r·s·δ + H + L` must agree with the
    /// expanded one used above, in the exponent: everything is a multiple of the
    /// generator, so compare discrete logs.
    #[test]
    fn matches_textbook_formula_in_the_exponent() {
        let key = key_with(None);
        let g1 = G1Projective::generator();
        let g2 = G2Projective::generator();
        let (sa, sb, h, l) = (11u64, 13u64, 17u64, 19u64);
        let sums = MsmSums {
            h: g1 * Scalar::from(h),
            l: g1 * Scalar::from(l),
            a: g1 * Scalar::from(sa),
            b_g1: g1 * Scalar::from(sb),
            b_g2: g2 * Scalar::from(sb),
        };
        let (r, s) = (Scalar::from(23u64), Scalar::from(29u64));
        let p = assemble(&key, &sums, r, s).unwrap();
        let a_log = Scalar::from(3 + sa) + Scalar::from(7u64) * r;
        let b_log = Scalar::from(5 + sb) + Scalar::from(7u64) * s;
        let c_log = s * a_log + r * b_log - r * s * Scalar::from(7u64) + Scalar::from(h + l);
        assert_eq!(p.a, (g1 * a_log).to_affine());
        assert_eq!(p.b, (g2 * b_log).to_affine());
        assert_eq!(p.c, (g1 * c_log).to_affine());
        assert_ne!(p.a, (g1 * (a_log + Scalar::ONE)).to_affine());
    }

    #[test]
    fn identity_delta_is_refused() {
        let key = key_with(Some(G1Affine::identity()));
        let z1 = G1Projective::identity();
        let sums = MsmSums {
            h: z1,
            l: z1,
            a: z1,
            b_g1: z1,
            b_g2: G2Projective::identity(),
        };
        assert_eq!(
            assemble(&key, &sums, Scalar::ONE, Scalar::ONE),
            Err(AssemblyError::IdentityDelta)
        );
    }
}
