//! The WGSL field (Fr on 8×u32 limbs, Montgomery with R = 2^256) against blstrs:
//! every product, sum and difference of edge values and random elements.

mod common;

use blstrs::Scalar;
use cuzk_wgpu::Ntt;
use ff::{Field, PrimeField};
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

#[test]
fn mul_add_sub_match_blstrs() {
    let Some(ntt) = common::ntt(0) else { return };
    check(&ntt);
    // The other word products: 16-bit halves where the device multiplies as u64.
    if ntt.uses_int64() {
        check(&common::ntt_16bit(&ntt));
    }
}

fn check(ntt: &Ntt) {
    let mut rng = ChaCha8Rng::seed_from_u64(36);
    // Values whose limbs carry and borrow everywhere: 0, 1, −1, −2, 2^k − 1, q − 2^k.
    let mut edges = vec![
        Scalar::ZERO,
        Scalar::ONE,
        -Scalar::ONE,
        -Scalar::from(2u64),
        Scalar::from(u64::MAX),
        Scalar::from(u32::MAX as u64),
        Scalar::ROOT_OF_UNITY,
        Scalar::MULTIPLICATIVE_GENERATOR,
    ];
    for k in [31u64, 32, 63, 64, 127, 128, 200, 254] {
        let p = Scalar::from(2u64).pow_vartime([k]);
        edges.push(p - Scalar::ONE);
        edges.push(-p);
    }
    let mut a = Vec::new();
    let mut b = Vec::new();
    for x in &edges {
        for y in &edges {
            a.push(*x);
            b.push(*y);
        }
    }
    for _ in 0..4000 {
        a.push(Scalar::random(&mut rng));
        b.push(Scalar::random(&mut rng));
    }
    let got = ntt.fr_ops(&a, &b).unwrap();
    for (i, ((x, y), [m, s, d])) in a.iter().zip(&b).zip(&got).enumerate() {
        assert_eq!(*m, x * y, "product {i}: {x:?} · {y:?}");
        assert_eq!(*s, x + y, "sum {i}: {x:?} + {y:?}");
        assert_eq!(*d, x - y, "difference {i}: {x:?} − {y:?}");
    }
    // Sizes 1..=33: the dispatch's bounds check.
    for n in 1..=33 {
        let got = ntt.fr_ops(&a[..n], &b[..n]).unwrap();
        assert_eq!(got.len(), n);
        assert_eq!(got[n - 1][0], a[n - 1] * b[n - 1]);
    }
}
