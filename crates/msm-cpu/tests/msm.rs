//! Differential tests: every MSM against a naive `Σ base · scalar` (blstrs scalar
//! multiplication), or against blst's Pippenger where the naive sum would be too slow.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_alloc::Density;
use cuzk_msm_cpu::*;
use ff::Field;
use group::{Curve, Group};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// `n` random points: hashing to the curve is slow, so draw a few and fill the rest with
/// sums of them (still distinct, random-looking points).
fn g1_points(n: usize, rng: &mut ChaCha8Rng) -> Vec<G1Affine> {
    let seeds: Vec<G1Projective> = (0..8).map(|_| G1Projective::random(&mut *rng)).collect();
    let mut acc = G1Projective::random(&mut *rng);
    let proj: Vec<G1Projective> = (0..n)
        .map(|_| {
            acc += seeds[(rng.next_u32() % 8) as usize];
            acc
        })
        .collect();
    let mut out = vec![G1Affine::default(); n];
    G1Projective::batch_normalize(&proj, &mut out);
    out
}

fn g2_points(n: usize, rng: &mut ChaCha8Rng) -> Vec<G2Affine> {
    let seeds: Vec<G2Projective> = (0..8).map(|_| G2Projective::random(&mut *rng)).collect();
    let mut acc = G2Projective::random(&mut *rng);
    let proj: Vec<G2Projective> = (0..n)
        .map(|_| {
            acc += seeds[(rng.next_u32() % 8) as usize];
            acc
        })
        .collect();
    let mut out = vec![G2Affine::default(); n];
    G2Projective::batch_normalize(&proj, &mut out);
    out
}

fn naive_g1(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
    bases
        .iter()
        .zip(scalars)
        .map(|(b, s)| G1Projective::from(b) * s)
        .sum()
}

fn naive_g2(bases: &[G2Affine], scalars: &[Scalar]) -> G2Projective {
    bases
        .iter()
        .zip(scalars)
        .map(|(b, s)| G2Projective::from(b) * s)
        .sum()
}

fn limbs(s: &Scalar) -> [u64; 4] {
    let b = s.to_bytes_le();
    std::array::from_fn(|i| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap()))
}

/// The scalar families the brief asks for.
#[derive(Clone, Copy, Debug)]
enum Family {
    Random,
    /// 90% zero or one, the rest random.
    ZeroOneHeavy,
    /// r - 1, r - 2, ...: the largest scalars.
    NearModulus,
    /// Below 16: few buckets, many conflicts in the batch.
    Small,
}

const FAMILIES: [Family; 4] = [
    Family::Random,
    Family::ZeroOneHeavy,
    Family::NearModulus,
    Family::Small,
];

fn scalars(n: usize, family: Family, rng: &mut ChaCha8Rng) -> Vec<Scalar> {
    let mut v: Vec<Scalar> = (0..n)
        .map(|_| match family {
            Family::Random => Scalar::random(&mut *rng),
            Family::ZeroOneHeavy => match rng.next_u32() % 10 {
                0..=4 => Scalar::ZERO,
                5..=8 => Scalar::ONE,
                _ => Scalar::random(&mut *rng),
            },
            Family::NearModulus => -Scalar::from(1 + rng.next_u64() % 4),
            Family::Small => Scalar::from(1 + rng.next_u64() % 15),
        })
        .collect();
    // Never all zero.
    if v.iter().all(|s| bool::from(s.is_zero())) {
        v[0] = Scalar::from(7);
    }
    v
}

fn sizes() -> Vec<usize> {
    (1..=33).chain([64, 128, 256, 512, 1024]).collect()
}

#[test]
fn g1_matches_naive_sum() {
    let mut r = rng(1);
    let bases = g1_points(1024, &mut r);
    let p = pool(2);
    for n in sizes() {
        for family in FAMILIES {
            let s = scalars(n, family, &mut r);
            let got = msm_g1(&bases[..n], &s, &p).unwrap();
            assert_eq!(got, naive_g1(&bases[..n], &s), "n = {n}, {family:?}");
        }
    }
}

#[test]
fn g2_matches_naive_sum() {
    let mut r = rng(2);
    let bases = g2_points(512, &mut r);
    let p = pool(2);
    for n in (1..=33).chain([64, 128, 512]) {
        for family in FAMILIES {
            let s = scalars(n, family, &mut r);
            let got = msm_g2(&bases[..n], &s, &p).unwrap();
            assert_eq!(got, naive_g2(&bases[..n], &s), "n = {n}, {family:?}");
        }
    }
}

/// Identity bases (blst's all-zero affine encoding) must contribute nothing.
#[test]
fn identity_bases_are_skipped() {
    let mut r = rng(3);
    let mut g1 = g1_points(300, &mut r);
    let mut g2 = g2_points(300, &mut r);
    for i in (0..300).step_by(3) {
        g1[i] = G1Affine::default();
        g2[i] = G2Affine::default();
    }
    let p = pool(2);
    for n in [1, 2, 5, 33, 300] {
        let s = scalars(n, Family::Random, &mut r);
        assert_eq!(msm_g1(&g1[..n], &s, &p).unwrap(), naive_g1(&g1[..n], &s));
        assert_eq!(msm_g2(&g2[..n], &s, &p).unwrap(), naive_g2(&g2[..n], &s));
    }
}

/// The same point many times, also with its negation: the batch meets `P + P` (the
/// tangent, not the chord) and `P + (-P)` (the identity) in its buckets.
#[test]
fn duplicate_and_opposite_bases() {
    let mut r = rng(4);
    let pts1 = g1_points(3, &mut r);
    let pts2 = g2_points(3, &mut r);
    let p = pool(2);
    for n in [2, 3, 17, 64, 700] {
        // Same scalar on the same point: every window sends all points to one bucket.
        let same = vec![Scalar::from(5); n];
        let g1: Vec<G1Affine> = vec![pts1[0]; n];
        let g2: Vec<G2Affine> = vec![pts2[0]; n];
        assert_eq!(msm_g1(&g1, &same, &p).unwrap(), naive_g1(&g1, &same));
        assert_eq!(msm_g2(&g2, &same, &p).unwrap(), naive_g2(&g2, &same));

        // A handful of points and their negations, random and repeated scalars.
        let g1: Vec<G1Affine> = (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    pts1[i % 3]
                } else {
                    -pts1[i % 3]
                }
            })
            .collect();
        let g2: Vec<G2Affine> = (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    pts2[i % 3]
                } else {
                    -pts2[i % 3]
                }
            })
            .collect();
        for family in FAMILIES {
            let s = scalars(n, family, &mut r);
            assert_eq!(
                msm_g1(&g1, &s, &p).unwrap(),
                naive_g1(&g1, &s),
                "{n} {family:?}"
            );
            assert_eq!(
                msm_g2(&g2, &s, &p).unwrap(),
                naive_g2(&g2, &s),
                "{n} {family:?}"
            );
        }
        // P·s + (-P)·s = 0 pairwise.
        let s: Vec<Scalar> = (0..n).map(|i| Scalar::from(3 + (i / 2) as u64)).collect();
        let g1: Vec<G1Affine> = (0..n)
            .map(|i| if i % 2 == 0 { pts1[0] } else { -pts1[0] })
            .collect();
        assert_eq!(msm_g1(&g1, &s, &p).unwrap(), naive_g1(&g1, &s));
    }
}

/// Larger sizes (window widths the small tests never choose, chunked windows on a wide
/// pool) against blst's own Pippenger.
#[test]
fn larger_sizes_match_blst() {
    let mut r = rng(5);
    let n = 1 << 14;
    let bases = g1_points(n, &mut r);
    let proj: Vec<G1Projective> = bases.iter().map(G1Projective::from).collect();
    for (threads, family) in [
        (2, Family::Random),
        (2, Family::Small),
        (16, Family::Random),
        (16, Family::ZeroOneHeavy),
    ] {
        let s = scalars(n, family, &mut r);
        let want = G1Projective::multi_exp(&proj, &s);
        assert_eq!(
            msm_g1(&bases, &s, &pool(threads)).unwrap(),
            want,
            "{threads} threads, {family:?}"
        );
    }
    let n2 = 1 << 11;
    let bases2 = g2_points(n2, &mut r);
    let proj2: Vec<G2Projective> = bases2.iter().map(G2Projective::from).collect();
    let s = scalars(n2, Family::Random, &mut r);
    assert_eq!(
        msm_g2(&bases2, &s, &pool(2)).unwrap(),
        G2Projective::multi_exp(&proj2, &s)
    );
}

#[test]
fn one_and_two_threads_agree() {
    let mut r = rng(6);
    let bases = g1_points(1000, &mut r);
    let bases2 = g2_points(200, &mut r);
    for family in FAMILIES {
        let s = scalars(1000, family, &mut r);
        assert_eq!(
            msm_g1(&bases, &s, &pool(1)).unwrap(),
            msm_g1(&bases, &s, &pool(2)).unwrap()
        );
        assert_eq!(
            msm_g2(&bases2, &s[..200], &pool(1)).unwrap(),
            msm_g2(&bases2, &s[..200], &pool(2)).unwrap()
        );
    }
}

#[test]
fn indexed_msm_matches_gathered() {
    let mut r = rng(7);
    let bases = g1_points(200, &mut r);
    let bases2 = g2_points(200, &mut r);
    let p = pool(2);
    for n in [1, 9, 33, 150] {
        let idx: Vec<u32> = (0..n).map(|_| r.next_u32() % 200).collect();
        let s = scalars(n, Family::Random, &mut r);
        let l: Vec<[u64; 4]> = s.iter().map(limbs).collect();
        let g1: Vec<G1Affine> = idx.iter().map(|&k| bases[k as usize]).collect();
        let g2: Vec<G2Affine> = idx.iter().map(|&k| bases2[k as usize]).collect();
        assert_eq!(
            msm_g1_indexed(&bases, &idx, &l, &p).unwrap(),
            naive_g1(&g1, &s)
        );
        assert_eq!(
            msm_g2_indexed(&bases2, &idx, &l, &p).unwrap(),
            naive_g2(&g2, &s)
        );
    }
    // Limbs at or above r (up to 2^256 - 1) are integer multipliers.
    let big = [[u64::MAX; 4], [0, 0, 0, 1 << 63], [1, 2, 3, u64::MAX]];
    let idx = [3u32, 4, 5];
    let want: G1Projective = big
        .iter()
        .zip(idx)
        .map(|(l, k)| G1Projective::from(bases[k as usize]) * limbs_mod_r(l))
        .sum();
    assert_eq!(msm_g1_indexed(&bases, &idx, &big, &p).unwrap(), want);
}

/// The integer with these little-endian limbs, reduced mod r.
fn limbs_mod_r(l: &[u64; 4]) -> Scalar {
    let two64 = Scalar::from(1u64 << 32).square();
    l.iter()
        .rev()
        .fold(Scalar::ZERO, |acc, &w| acc * two64 + Scalar::from(w))
}

fn random_density(len: usize, percent: u32, rng: &mut ChaCha8Rng) -> Density {
    let mut d = Density::new(0);
    for _ in 0..len {
        d.push(rng.next_u32() % 100 < percent);
    }
    d
}

fn filtered(scalars: &[Scalar], d: Option<&Density>) -> Vec<Scalar> {
    match d {
        None => scalars.to_vec(),
        Some(d) => d.iter_ones().map(|i| scalars[i]).collect(),
    }
}

#[test]
fn split_msm_matches_filtered_msm() {
    let mut r = rng(8);
    let bases = g1_points(1100, &mut r);
    let bases2 = g2_points(300, &mut r);
    let p = pool(2);
    for (n_in, n_aux, pct, family) in [
        (1, 1, 100, Family::ZeroOneHeavy),
        (3, 30, 60, Family::ZeroOneHeavy),
        (33, 200, 40, Family::Random),
        (5, 1000, 90, Family::ZeroOneHeavy),
        (70, 130, 25, Family::Small),
    ] {
        let inputs = scalars(n_in, family, &mut r);
        let aux = scalars(n_aux, family, &mut r);
        let d_in = random_density(n_in, pct, &mut r);
        let d_aux = random_density(n_aux, pct, &mut r);
        for (din, daux) in [
            (None, Some(&d_aux)),
            (Some(&d_in), Some(&d_aux)),
            (Some(&d_in), None),
            (None, None),
        ] {
            let q: Vec<Scalar> = filtered(&inputs, din)
                .into_iter()
                .chain(filtered(&aux, daux))
                .collect();
            let split = prep_msm(&inputs, din, &aux, daux, &p).unwrap();
            assert_eq!(split.num_bases(), q.len());
            let zeros = q.iter().filter(|s| bool::from(s.is_zero())).count();
            let ones: Vec<usize> = (0..q.len()).filter(|&k| q[k] == Scalar::ONE).collect();
            assert_eq!(split.num_zeros(), zeros);
            assert_eq!(split.ones().iter_ones().collect::<Vec<_>>(), ones);
            assert_eq!(split.ones().len(), q.len());
            assert_eq!(split.tail_indices().len(), q.len() - zeros - ones.len());
            assert!(split.tail_indices().windows(2).all(|w| w[0] < w[1]));
            for (&k, l) in split.tail_indices().iter().zip(split.tail_scalars()) {
                assert_eq!(*l, limbs(&q[k as usize]));
            }
            assert!(split.heap_size() >= split.tail_scalars().len() * 32);

            let b1 = &bases[..q.len()];
            assert_eq!(
                split_msm_g1(b1, split.as_ref(), &p).unwrap(),
                naive_g1(b1, &q)
            );
            assert_eq!(
                split_msm_g1(b1, split.as_ref(), &p).unwrap(),
                msm_g1(b1, &q, &p).unwrap()
            );
            if q.len() <= bases2.len() {
                let b2 = &bases2[..q.len()];
                assert_eq!(
                    split_msm_g2(b2, split.as_ref(), &p).unwrap(),
                    naive_g2(b2, &q)
                );
            }
            // Single-threaded pools give the same split.
            assert_eq!(prep_msm(&inputs, din, &aux, daux, &pool(1)).unwrap(), split);
            // So do the classes of the scalars, made once and shared by the queries.
            let (c_in, c_aux) = (ScalarClasses::of(&inputs, &p), ScalarClasses::of(&aux, &p));
            assert_eq!(
                prep_msm_classified(&c_in, din, &c_aux, daux, &pool(1)).unwrap(),
                split
            );
        }
    }
}

/// Many ones (the batch-affine tree sum) including repeated and opposite bases.
#[test]
fn ones_sum_handles_repeats() {
    let mut r = rng(9);
    let pts = g1_points(2, &mut r);
    let n = 5000;
    let bases: Vec<G1Affine> = (0..n)
        .map(|i| match i % 5 {
            0 | 1 => pts[0],
            2 => -pts[0],
            3 => G1Affine::default(),
            _ => pts[1],
        })
        .collect();
    let s = vec![Scalar::ONE; n];
    let split = prep_msm(&[], None, &s, None, &pool(2)).unwrap();
    assert_eq!(split.ones().count(), n);
    assert_eq!(
        split_msm_g1(&bases, split.as_ref(), &pool(2)).unwrap(),
        naive_g1(&bases, &s)
    );
}

/// A split larger than one prep task (64 Ki variables), so task boundaries that fall
/// inside a bitmap word are exercised.
#[test]
fn prep_msm_across_task_boundaries() {
    let mut r = rng(10);
    let n_in = 1 << 17;
    let n_aux = (1 << 17) + 77;
    let inputs = scalars(n_in, Family::ZeroOneHeavy, &mut r);
    let aux = scalars(n_aux, Family::ZeroOneHeavy, &mut r);
    let d_in = random_density(n_in, 37, &mut r);
    let d_aux = random_density(n_aux, 81, &mut r);
    let q: Vec<Scalar> = filtered(&inputs, Some(&d_in))
        .into_iter()
        .chain(aux.iter().copied())
        .collect();
    let split = prep_msm(&inputs, Some(&d_in), &aux, None, &pool(2)).unwrap();
    let ones: Vec<usize> = (0..q.len()).filter(|&k| q[k] == Scalar::ONE).collect();
    assert_eq!(split.ones().iter_ones().collect::<Vec<_>>(), ones);
    let tail: Vec<u32> = (0..q.len() as u32)
        .filter(|&k| !bool::from(q[k as usize].is_zero()) && q[k as usize] != Scalar::ONE)
        .collect();
    assert_eq!(split.tail_indices(), &tail[..]);
    let split2 = prep_msm(&inputs, Some(&d_in), &aux, Some(&d_aux), &pool(1)).unwrap();
    assert_eq!(split2.num_bases(), d_in.count() + d_aux.count());
    let q2: Vec<Scalar> = filtered(&inputs, Some(&d_in))
        .into_iter()
        .chain(filtered(&aux, Some(&d_aux)))
        .collect();
    let ones2: Vec<usize> = (0..q2.len()).filter(|&k| q2[k] == Scalar::ONE).collect();
    assert_eq!(split2.ones().iter_ones().collect::<Vec<_>>(), ones2);
    let tail2: Vec<[u64; 4]> = q2
        .iter()
        .filter(|s| !bool::from(s.is_zero()) && **s != Scalar::ONE)
        .map(limbs)
        .collect();
    assert_eq!(split2.tail_scalars(), &tail2[..]);
}

#[test]
fn shape_errors_are_reported() {
    let mut r = rng(11);
    let bases = g1_points(4, &mut r);
    let bases2 = g2_points(4, &mut r);
    let s = scalars(5, Family::Random, &mut r);
    let p = pool(1);
    assert!(matches!(
        msm_g1(&bases, &s, &p),
        Err(MsmError::LengthMismatch {
            bases: 4,
            scalars: 5
        })
    ));
    assert_eq!(
        msm_g2(&bases2, &s, &p).unwrap_err().to_string(),
        "the MSM has 4 bases but 5 scalars"
    );
    assert!(matches!(
        msm_g1_indexed(&bases, &[0, 4], &[[1, 0, 0, 0]; 2], &p),
        Err(MsmError::IndexOutOfRange { index: 4, bases: 4 })
    ));
    assert!(matches!(
        msm_g1_indexed(&bases, &[0], &[[1, 0, 0, 0]; 2], &p),
        Err(MsmError::LengthMismatch { .. })
    ));
    let d = Density::full(4);
    assert!(matches!(
        prep_msm(&s, Some(&d), &[], None, &p),
        Err(MsmError::DensityLength {
            which: "input",
            density: 4,
            scalars: 5
        })
    ));
    assert!(matches!(
        prep_msm(&[], None, &s, Some(&d), &p),
        Err(MsmError::DensityLength { which: "aux", .. })
    ));
    let split = prep_msm(&s, None, &[], None, &p).unwrap();
    assert!(matches!(
        split_msm_g1(&bases, split.as_ref(), &p),
        Err(MsmError::BaseCount { need: 5, have: 4 })
    ));
    assert!(matches!(
        split_msm_g2(&bases2, split.as_ref(), &p),
        Err(MsmError::BaseCount { need: 5, have: 4 })
    ));
    // Empty MSMs are the identity, not errors.
    assert_eq!(msm_g1(&[], &[], &p).unwrap(), G1Projective::identity());
    assert_eq!(
        split_msm_g2(
            &[],
            prep_msm(&[], None, &[], None, &p).unwrap().as_ref(),
            &p
        )
        .unwrap(),
        G2Projective::identity()
    );
}

#[test]
fn affine_result_round_trips() {
    // The result is a genuine curve point (not just equal to the reference by accident of
    // representation): its affine form is on the curve and in the subgroup.
    let mut r = rng(12);
    let bases = g1_points(100, &mut r);
    let s = scalars(100, Family::Random, &mut r);
    let got = msm_g1(&bases, &s, &pool(2)).unwrap().to_affine();
    assert!(bool::from(got.is_on_curve()) && bool::from(got.is_torsion_free()));
}
