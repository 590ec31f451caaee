//! Fr addition and subtraction on Montgomery limbs, inlined into the butterflies.
//!
//! blstrs calls blst's assembly for every Fr operation; for an addition the call
//! and its argument traffic cost more than the arithmetic. A butterfly is one
//! product, one sum and one difference: keeping blst's product (its mulx/adx
//! assembly beat a u128 Rust CIOS by ~20% here) and inlining the sum and the
//! difference made a butterfly ~1.6× faster in a single-thread loop on the
//! development machine (≈ 65 → 40 ns). The limbs are blst's own representation
//! (Montgomery, `R = 2^256`, fully reduced), reached through `blst_fr` without
//! `unsafe`; the conversions compile to nothing.

use blst::blst_fr;
use blstrs::Scalar;

/// The Fr modulus, little-endian limbs.
const Q: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

pub(super) type Fr = [u64; 4];

#[inline(always)]
pub(super) fn from_scalar(s: &Scalar) -> Fr {
    blst_fr::from(*s).l
}

#[inline(always)]
pub(super) fn to_scalar(l: Fr) -> Scalar {
    Scalar::from(blst_fr { l })
}

#[inline(always)]
fn adc(a: u64, b: u64, carry: u64) -> (u64, u64) {
    let t = a as u128 + b as u128 + carry as u128;
    (t as u64, (t >> 64) as u64)
}

#[inline(always)]
fn sbb(a: u64, b: u64, borrow: u64) -> (u64, u64) {
    let t = (a as u128).wrapping_sub(b as u128 + (borrow >> 63) as u128);
    (t as u64, (t >> 64) as u64)
}

/// `x − q` if that does not underflow, else `x`.
#[inline(always)]
fn reduce(x: Fr) -> Fr {
    let (d0, b) = sbb(x[0], Q[0], 0);
    let (d1, b) = sbb(x[1], Q[1], b);
    let (d2, b) = sbb(x[2], Q[2], b);
    let (d3, b) = sbb(x[3], Q[3], b);
    // b is all ones when x < q.
    let keep = b;
    [
        (x[0] & keep) | (d0 & !keep),
        (x[1] & keep) | (d1 & !keep),
        (x[2] & keep) | (d2 & !keep),
        (x[3] & keep) | (d3 & !keep),
    ]
}

/// `a + b mod q`; `a + b < 2q < 2^256`, so one conditional subtraction.
#[inline(always)]
pub(super) fn add(a: &Fr, b: &Fr) -> Fr {
    let (s0, c) = adc(a[0], b[0], 0);
    let (s1, c) = adc(a[1], b[1], c);
    let (s2, c) = adc(a[2], b[2], c);
    let (s3, _) = adc(a[3], b[3], c);
    reduce([s0, s1, s2, s3])
}

/// `a − b mod q`.
#[inline(always)]
pub(super) fn sub(a: &Fr, b: &Fr) -> Fr {
    let (d0, w) = sbb(a[0], b[0], 0);
    let (d1, w) = sbb(a[1], b[1], w);
    let (d2, w) = sbb(a[2], b[2], w);
    let (d3, w) = sbb(a[3], b[3], w);
    // On underflow add q back (w is all ones then).
    let (r0, c) = adc(d0, Q[0] & w, 0);
    let (r1, c) = adc(d1, Q[1] & w, c);
    let (r2, c) = adc(d2, Q[2] & w, c);
    let (r3, _) = adc(d3, Q[3] & w, c);
    [r0, r1, r2, r3]
}

#[cfg(test)]
mod tests {
    use ff::Field;
    use rand_chacha::ChaCha8Rng;
    use rand_core::SeedableRng;

    use super::*;

    #[test]
    fn add_and_sub_match_blstrs() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let edges = [
            Scalar::ONE,
            -Scalar::ONE,
            -Scalar::from(2u64),
            Scalar::from(2u64),
        ];
        let mut xs: Vec<Scalar> = edges.to_vec();
        xs.extend((0..60).map(|_| Scalar::random(&mut rng)));
        for a in &xs {
            for b in &xs {
                let (la, lb) = (from_scalar(a), from_scalar(b));
                assert_eq!(to_scalar(add(&la, &lb)), a + b);
                assert_eq!(to_scalar(sub(&la, &lb)), a - b);
            }
        }
    }
}
