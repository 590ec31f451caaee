use bellperson::domain::EvaluationDomain;
use blstrs::Scalar;
use ec_gpu_gen::threadpool::Worker;
use ff::{Field, PrimeField};
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

use super::h::compute_h_in;
use super::*;
use crate::Abc;

fn pool() -> ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .expect("test pool")
}

/// Random scalars, none of them zero.
pub(crate) fn random(rng: &mut ChaCha8Rng, n: usize) -> Vec<Scalar> {
    (0..n)
        .map(|_| loop {
            let x = Scalar::random(&mut *rng);
            if !bool::from(x.is_zero()) {
                break x;
            }
        })
        .collect()
}

fn omega(log_n: u32) -> Scalar {
    let mut w = Scalar::ROOT_OF_UNITY;
    for _ in log_n..Scalar::S {
        w = w.square();
    }
    w
}

/// `X[k] = Σ_i x[i]·w^(ik)`, O(n²).
fn naive_dft(x: &[Scalar], w: Scalar) -> Vec<Scalar> {
    let mut wk = Scalar::ONE;
    (0..x.len())
        .map(|_| {
            let mut acc = Scalar::ZERO;
            for c in x.iter().rev() {
                acc = acc * wk + c;
            }
            wk *= w;
            acc
        })
        .collect()
}

/// Domains with the production plan and with plans that force several column
/// passes (and column passes over several blocks) at small sizes.
fn domains(log_n: u32) -> Vec<Domain> {
    let mut v = vec![Domain::new(log_n).unwrap()];
    for (block_log, max_pass_log, col_width) in
        [(0, 1, 1), (1, 1, 8), (2, 2, 2), (3, 2, 3), (3, 3, 8)]
    {
        let config = NttConfig {
            block_log,
            max_pass_log,
            col_width,
        };
        v.push(Domain::with_config(log_n, config).unwrap());
    }
    v
}

#[test]
fn fft_matches_naive_dft() {
    let pool = pool();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for log_n in 0..=8 {
        let n = 1usize << log_n;
        let x = random(&mut rng, n);
        let want = naive_dft(&x, omega(log_n));
        let want_inv: Vec<Scalar> = naive_dft(&x, omega(log_n).invert().unwrap())
            .into_iter()
            .map(|v| v * Scalar::from(n as u64).invert().unwrap())
            .collect();
        for dom in domains(log_n) {
            let plan = format!("2^{log_n} plan {:?}/{}", dom.passes, dom.log_b);
            let mut v = x.clone();
            dom.fft(&mut v, &pool).unwrap();
            assert_eq!(v, want, "fft {plan}");

            let mut v = x.clone();
            dom.ifft(&mut v, &pool).unwrap();
            assert_eq!(v, want_inv, "ifft {plan}");

            // The order-explicit halves: DIF leaves bit-reversed order.
            let mut v = x.clone();
            dom.fft_to_bitrev(&mut v, &pool).unwrap();
            let natural: Vec<Scalar> = (0..n).map(|k| v[kernels::rev(k, log_n)]).collect();
            assert_eq!(natural, want, "fft_to_bitrev {plan}");
            dom.ifft_from_bitrev(&mut v, &pool).unwrap();
            assert_eq!(v, x, "ifft_from_bitrev {plan}");
        }
    }
}

#[test]
fn coset_fft_matches_naive_evaluation() {
    let pool = pool();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    for log_n in [0, 1, 3, 6] {
        let n = 1usize << log_n;
        let x = random(&mut rng, n);
        // Evaluations at g·ω^k: the DFT of x[i]·g^i.
        let shifted: Vec<Scalar> = x
            .iter()
            .enumerate()
            .map(|(i, c)| *c * g.pow_vartime([i as u64]))
            .collect();
        let want = naive_dft(&shifted, omega(log_n));
        for dom in domains(log_n) {
            let mut v = x.clone();
            dom.coset_fft(&mut v, &pool).unwrap();
            assert_eq!(v, want, "2^{log_n}");
            dom.icoset_fft(&mut v, &pool).unwrap();
            assert_eq!(v, x, "2^{log_n}");
        }
    }
}

#[test]
fn round_trips_up_to_2_14() {
    let pool = pool();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for log_n in (0..=14).step_by(1) {
        let x = random(&mut rng, 1 << log_n);
        let dom = Domain::new(log_n).unwrap();
        let mut v = x.clone();
        dom.fft(&mut v, &pool).unwrap();
        dom.ifft(&mut v, &pool).unwrap();
        assert_eq!(v, x, "fft∘ifft 2^{log_n}");
        dom.icoset_fft(&mut v, &pool).unwrap();
        dom.coset_fft(&mut v, &pool).unwrap();
        assert_eq!(v, x, "coset 2^{log_n}");
        dom.fft_to_bitrev(&mut v, &pool).unwrap();
        dom.ifft_from_bitrev(&mut v, &pool).unwrap();
        assert_eq!(v, x, "bitrev 2^{log_n}");
    }
}

/// Sizes with column passes in the production plan, against bellperson's FFT.
#[test]
fn fft_matches_bellperson_with_column_passes() {
    let pool = pool();
    let worker = Worker::new();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    for log_n in [12, 13, 16] {
        let x = random(&mut rng, 1 << log_n);
        let mut bp = EvaluationDomain::from_coeffs(x.clone()).unwrap();
        bp.fft(&worker, &mut None).unwrap();
        let dom = Domain::new(log_n).unwrap();
        assert!(!dom.passes.is_empty());
        let mut v = x.clone();
        dom.fft(&mut v, &pool).unwrap();
        assert!(v == bp.as_ref(), "fft 2^{log_n}");

        let mut bp = EvaluationDomain::from_coeffs(x.clone()).unwrap();
        bp.coset_fft(&worker, &mut None).unwrap();
        let mut v = x.clone();
        dom.coset_fft(&mut v, &pool).unwrap();
        assert!(v == bp.as_ref(), "coset_fft 2^{log_n}");
    }
}

#[test]
fn wrong_lengths_and_sizes_are_errors() {
    let pool = pool();
    let dom = Domain::new(4).unwrap();
    let mut v = vec![Scalar::ONE; 15];
    for r in [
        dom.fft(&mut v, &pool),
        dom.ifft(&mut v, &pool),
        dom.coset_fft(&mut v, &pool),
        dom.icoset_fft(&mut v, &pool),
        dom.fft_to_bitrev(&mut v, &pool),
        dom.ifft_from_bitrev(&mut v, &pool),
    ] {
        assert!(matches!(
            r,
            Err(BackendError::NttLength { got: 15, want: 16 })
        ));
    }
    assert_eq!(v, vec![Scalar::ONE; 15]);
    assert!(Domain::new(32).is_ok());
    assert!(matches!(
        Domain::new(33),
        Err(BackendError::DomainTooLarge { log: 33, max: 32 })
    ));

    let abc = Abc {
        a: vec![Scalar::ONE; 5],
        b: vec![Scalar::ONE; 5],
        c: vec![Scalar::ONE; 4],
    };
    assert!(matches!(
        compute_h(abc, &pool),
        Err(BackendError::AbcShape { a: 5, b: 5, c: 4 })
    ));
}

/// bellperson's `execute_fft` chain, step for step.
pub(crate) fn bellperson_h(abc: &Abc) -> Vec<Scalar> {
    let worker = Worker::new();
    let mut a = EvaluationDomain::from_coeffs(abc.a.clone()).unwrap();
    let mut b = EvaluationDomain::from_coeffs(abc.b.clone()).unwrap();
    let mut c = EvaluationDomain::from_coeffs(abc.c.clone()).unwrap();
    EvaluationDomain::ifft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut None).unwrap();
    EvaluationDomain::coset_fft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut None).unwrap();
    a.mul_assign(&worker, &b);
    a.sub_assign(&worker, &c);
    a.divide_by_z_on_coset(&worker);
    a.icoset_fft(&worker, &mut None).unwrap();
    let mut h = a.into_coeffs();
    h.pop();
    h
}

fn random_abc(rng: &mut ChaCha8Rng, len: usize) -> Abc {
    Abc {
        a: random(rng, len),
        b: random(rng, len),
        c: random(rng, len),
    }
}

#[test]
fn compute_h_matches_bellperson() {
    let pool = pool();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let sizes = (1..=33).chain([64, 100, 1000, 2048, 2049, 5000, 1 << 14]);
    for len in sizes {
        let abc = random_abc(&mut rng, len);
        let want = bellperson_h(&abc);
        let h = compute_h(abc, &pool).unwrap();
        assert_eq!(h.len(), len.next_power_of_two() - 1);
        assert!(h == want, "{len} constraints");
    }
}

#[test]
fn compute_h_matches_bellperson_on_every_plan_shape() {
    let pool = pool();
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    for len in [2, 3, 7, 16, 33, 200, 256] {
        let abc = random_abc(&mut rng, len);
        let want = bellperson_h(&abc);
        for dom in domains(crate::log_domain(len)) {
            let h = compute_h_in(&dom, abc.clone(), &pool).unwrap();
            assert!(
                h == want,
                "{len} constraints, plan {:?}/{}",
                dom.passes,
                dom.log_b
            );
        }
    }
}

/// A satisfied system: H then really is the quotient, so `A·B − C = H·Z` at a
/// random point.
#[test]
fn compute_h_is_the_quotient_for_a_satisfied_system() {
    let pool = pool();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for len in [1, 5, 64, 3000] {
        let a = random(&mut rng, len);
        let b = random(&mut rng, len);
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(a, b)| *a * b).collect();
        let abc = Abc { a, b, c };
        let log_n = crate::log_domain(len);
        let n = 1usize << log_n;
        let dom = Domain::new(log_n).unwrap();
        let coeffs = |v: &[Scalar]| {
            let mut v = v.to_vec();
            v.resize(n, Scalar::ZERO);
            dom.ifft(&mut v, &pool).unwrap();
            v
        };
        let (pa, pb, pc) = (coeffs(&abc.a), coeffs(&abc.b), coeffs(&abc.c));
        let h = compute_h(abc, &pool).unwrap();
        let x = Scalar::random(&mut rng);
        let eval = |p: &[Scalar]| p.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c);
        let z = x.pow_vartime([n as u64]) - Scalar::ONE;
        assert_eq!(eval(&pa) * eval(&pb) - eval(&pc), eval(&h) * z, "{len}");
    }
}
