//! The device NTT against the CPU backend's (`cuzk_gpu_backend::ntt::Domain`), and
//! H against `cuzk_gpu_backend::compute_h`, bit for bit: 2^12 and 2^16, forward,
//! inverse and coset, with the device's own binding limit and with bindings forced
//! small so that vectors split into chunks and the cross-chunk stages run; the
//! resident transforms (`*_resident`, on a vector uploaded once) against the same.

mod common;

use blstrs::Scalar;
use cuzk_gpu_backend::ntt::Domain;
use cuzk_gpu_backend::{compute_h, Abc, AbcRef};
use cuzk_wgpu::{FrVec, Ntt};
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

fn rev(i: usize, log: u32) -> usize {
    if log == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - log)
    }
}

fn bitrev(v: &[Scalar]) -> Vec<Scalar> {
    let log = v.len().trailing_zeros();
    (0..v.len()).map(|i| v[rev(i, log)]).collect()
}

fn check_transforms(ntt: &Ntt, log_n: u32, seed: u64) {
    let pool = common::pool();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = 1usize << log_n;
    let dom = Domain::new(log_n).unwrap();
    let x = common::scalars(&mut rng, n);

    let mut want = x.clone();
    dom.fft_to_bitrev(&mut want, &pool).unwrap();
    let mut got = x.clone();
    ntt.fft_to_bitrev(&mut got).unwrap();
    assert!(got == want, "fft_to_bitrev 2^{log_n}");

    let mut back = got.clone();
    ntt.ifft_from_bitrev(&mut back).unwrap();
    let mut want_back = want.clone();
    dom.ifft_from_bitrev(&mut want_back, &pool).unwrap();
    assert!(back == want_back, "ifft_from_bitrev 2^{log_n}");
    assert!(back == x, "the inverse undoes the forward 2^{log_n}");

    let mut want = x.clone();
    dom.coset_fft(&mut want, &pool).unwrap();
    let mut got = x.clone();
    ntt.coset_fft_to_bitrev(&mut got).unwrap();
    assert!(bitrev(&got) == want, "coset_fft 2^{log_n}");

    let mut want_coeffs = want.clone();
    dom.icoset_fft(&mut want_coeffs, &pool).unwrap();
    let mut coeffs = got.clone();
    ntt.icoset_ifft_from_bitrev(&mut coeffs).unwrap();
    assert!(coeffs == want_coeffs && coeffs == x, "icoset_fft 2^{log_n}");
}

/// The resident transforms chained on one upload (forward, inverse, coset
/// forward, coset inverse, read back after each pair and at the end) against the
/// CPU's, and the host path's forward transform against the resident one.
fn check_resident(ntt: &Ntt, log_n: u32, seed: u64) {
    let pool = common::pool();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = 1usize << log_n;
    let dom = Domain::new(log_n).unwrap();
    let x = common::scalars(&mut rng, n);

    let mut v = ntt.upload(&x).unwrap();
    assert_eq!(v.len(), n);
    ntt.fft_to_bitrev_resident(&mut v).unwrap();
    let mut want = x.clone();
    dom.fft_to_bitrev(&mut want, &pool).unwrap();
    let got = ntt.download(&v).unwrap();
    assert!(got == want, "resident fft_to_bitrev 2^{log_n}");
    let mut host = x.clone();
    ntt.fft_to_bitrev(&mut host).unwrap();
    assert!(host == got, "host and resident fft_to_bitrev 2^{log_n}");

    // Inverse, then the coset pair, with no read-back between them.
    ntt.ifft_from_bitrev_resident(&mut v).unwrap();
    ntt.coset_fft_to_bitrev_resident(&mut v).unwrap();
    let mut want = x.clone();
    dom.coset_fft(&mut want, &pool).unwrap();
    let got = ntt.download(&v).unwrap();
    assert!(
        bitrev(&got) == want,
        "resident ifft then coset_fft 2^{log_n}"
    );
    ntt.icoset_ifft_from_bitrev_resident(&mut v).unwrap();
    ntt.sync().unwrap();
    assert!(
        ntt.download(&v).unwrap() == x,
        "resident round trip 2^{log_n}"
    );
}

fn check_h(ntt: &Ntt, len: usize, seed: u64) {
    let pool = common::pool();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let abc = Abc {
        a: common::scalars(&mut rng, len),
        b: common::scalars(&mut rng, len),
        c: common::scalars(&mut rng, len),
    };
    let got = ntt.compute_h(AbcRef::new(&abc), &pool).unwrap();
    let want = compute_h(abc, &pool).unwrap();
    assert_eq!(got.len(), want.len(), "h length for {len} constraints");
    assert!(got == want, "h differs for {len} constraints");
}

#[test]
fn transforms_at_2_12_match_the_cpu() {
    let Some(ntt) = common::ntt(0) else { return };
    check_transforms(&ntt, 12, 1);
}

#[test]
fn transforms_at_2_16_match_the_cpu() {
    let Some(ntt) = common::ntt(0) else { return };
    check_transforms(&ntt, 16, 2);
}

/// 2^12 scalars in chunks of 2^8 (8 KiB bindings): the top four stages of every
/// transform pair elements of two bindings.
/// The kernels with the other word products (16-bit halves where the device has
/// u64 products, as lavapipe and NVIDIA do) give the same transforms and H.
#[test]
fn transforms_with_16_bit_word_products_match_the_cpu() {
    let Some(ntt) = common::ntt(0) else { return };
    let halves = common::ntt_16bit(&ntt);
    check_transforms(&halves, 12, 1612);
    check_h(&halves, 3000, 1613);
}

#[test]
fn transforms_split_across_bindings_match_the_cpu() {
    let Some(ntt) = common::ntt(8 << 10) else {
        return;
    };
    assert_eq!(ntt.chunk_len(1 << 12).unwrap(), 1 << 8);
    check_transforms(&ntt, 12, 3);
    check_transforms(&ntt, 9, 4);
    check_transforms(&ntt, 8, 5);
    check_transforms(&ntt, 3, 6);
}

/// 2^12 scalars in chunks of 2^10 (32 KiB bindings): the bottom nine stages in
/// workgroup memory inside each chunk, the top two across chunks.
#[test]
fn transforms_in_blocks_and_across_bindings_match_the_cpu() {
    let Some(ntt) = common::ntt(32 << 10) else {
        return;
    };
    assert_eq!(ntt.chunk_len(1 << 12).unwrap(), 1 << 10);
    check_transforms(&ntt, 12, 7);
    check_transforms(&ntt, 10, 8);
    check_transforms(&ntt, 9, 9);
}

#[test]
fn small_transforms_match_the_cpu() {
    let Some(ntt) = common::ntt(0) else { return };
    for log_n in 0..=5 {
        check_transforms(&ntt, log_n, 10 + log_n as u64);
    }
}

#[test]
fn resident_transforms_match_the_cpu() {
    let Some(ntt) = common::ntt(0) else { return };
    for (log_n, seed) in [(0, 30), (5, 31), (12, 32), (16, 33)] {
        check_resident(&ntt, log_n, seed);
    }
}

/// Resident vectors in chunks: 2^8 scalars a chunk (every stage above the
/// eighth across bindings), then 2^10 (blocks in each chunk, two stages across).
#[test]
fn resident_transforms_split_across_bindings_match_the_cpu() {
    for (binding, log_n, seed) in [(8 << 10, 12, 40), (32 << 10, 13, 41)] {
        let Some(ntt) = common::ntt(binding) else {
            return;
        };
        let v = ntt.upload(&[Scalar::ONE; 1 << 12]).unwrap();
        assert!(v.device_bytes() == 1 << 17 && ntt.chunk_len(1 << 12).unwrap() < 1 << 12);
        check_resident(&ntt, log_n, seed);
    }
}

/// Device vectors the transforms cannot take are errors, and nothing runs.
#[test]
fn bad_resident_vectors_are_errors() {
    let Some(ntt) = common::ntt(0) else { return };
    let ctx = ntt.context();
    let x = vec![Scalar::from(5u64); 12];
    assert!(
        ntt.upload(&x).is_err(),
        "a length that is not a power of two"
    );
    let mut odd = FrVec::upload(ctx, &x, 12, 12).unwrap();
    assert!(ntt.fft_to_bitrev_resident(&mut odd).is_err());
    // 16 scalars in chunks of 6: not a power of two.
    let mut ragged = FrVec::upload(ctx, &x, 16, 6).unwrap();
    let e = ntt.ifft_from_bitrev_resident(&mut ragged).unwrap_err();
    assert!(e.to_string().contains("cannot be transformed"), "{e}");
    ntt.sync().unwrap();
    let mut fine = FrVec::upload(ctx, &x, 16, 4).unwrap();
    ntt.coset_fft_to_bitrev_resident(&mut fine).unwrap();
    ntt.icoset_ifft_from_bitrev_resident(&mut fine).unwrap();
    let mut padded = x.clone();
    padded.resize(16, Scalar::ZERO);
    assert!(ntt.download(&fine).unwrap() == padded);
}

#[test]
fn h_matches_the_cpu() {
    let Some(ntt) = common::ntt(0) else { return };
    for (i, len) in [1usize, 2, 3, 5, 17, 33, 1000, 4096]
        .into_iter()
        .enumerate()
    {
        check_h(&ntt, len, 100 + i as u64);
    }
    check_h(&ntt, (1 << 16) - 3, 120);
    // 2^17: the top stage's half-span, 2^16, takes its roots from the two-level
    // table (below it, from the small-stage table).
    check_h(&ntt, (1 << 16) + 1, 121);
}

#[test]
fn h_split_across_bindings_matches_the_cpu() {
    // Chunks of 128 scalars (no block kernel), then of 512 (one block each).
    let Some(ntt) = common::ntt(4 << 10) else {
        return;
    };
    for (i, len) in [129usize, 3000, 4096].into_iter().enumerate() {
        check_h(&ntt, len, 200 + i as u64);
    }
    let Some(ntt) = common::ntt(16 << 10) else {
        return;
    };
    for (i, len) in [513usize, 4096].into_iter().enumerate() {
        check_h(&ntt, len, 210 + i as u64);
    }
}

#[test]
fn bad_shapes_are_errors() {
    let Some(ntt) = common::ntt(0) else { return };
    let pool = common::pool();
    let v = vec![Scalar::from(3u64); 6];
    let mut odd = v.clone();
    assert!(ntt.fft_to_bitrev(&mut odd).is_err());
    let e = ntt
        .compute_h(
            AbcRef {
                a: &v,
                b: &v[..5],
                c: &v,
            },
            &pool,
        )
        .unwrap_err();
    assert!(e.to_string().contains("different lengths"), "{e}");
}
