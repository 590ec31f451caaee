//! `a, b, c` evaluated on the device from the witness (`kernels/spmv.cu`) against
//! the CPU mat-vec (`cuzk_synth::spmv_slices`), and `prove_partition_witness`
//! against `prove_partition_ref` on host-evaluated `a, b, c` and against the CPU
//! backend. Where there is no GPU each test prints `skipped: no CUDA device`.

use std::io::Write as _;
use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_cuda::testing::spmv::{self, DeviceR1cs, R1csKey, ValidR1cs};
use cuzk_cuda::{CudaBackend, CudaConfig, CudaError, SplitUpload, WitnessStaging};
use cuzk_gpu_backend::{
    AbcEval, AbcRef, BackendError, CpuBackend, CsrRef, GpuBackend, R1csRef, SplitMsm, Term,
    WitnessJobRef,
};
use cuzk_synth::{NoThrottle, COEFF_MINUS_ONE, COEFF_ONE, COEFF_TWO};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// The tests of this binary run one at a time: the staging test counts the
/// process's registered bytes, which the others' witness uploads change.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn open(config: CudaConfig) -> Option<CudaBackend> {
    match CudaBackend::new(config) {
        Ok(b) => Some(b),
        Err(CudaError::NoDevice(why)) => {
            // Straight to stderr, past the test harness's capture, so CI logs say it.
            let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({why})");
            None
        }
        Err(e) => panic!("CUDA backend failed to start: {e}"),
    }
}

fn pool() -> Arc<rayon::ThreadPool> {
    Arc::new(rayon::ThreadPoolBuilder::new().build().unwrap())
}

/// A witness value: 0, 1 and random, never all zero.
fn scalar(r: &mut ChaCha20Rng) -> Scalar {
    match r.gen_range(0..5) {
        0 => Scalar::ZERO,
        1 => Scalar::ONE,
        _ => Scalar::random(&mut *r),
    }
}

/// `n` distinct points, cheaply: a random walk of additions, normalised together.
fn points(n: usize, r: &mut ChaCha20Rng) -> Vec<G1Affine> {
    let step = G1Projective::random(&mut *r);
    let mut p = G1Projective::random(&mut *r);
    let proj: Vec<G1Projective> = (0..n)
        .map(|_| {
            p += step;
            p
        })
        .collect();
    let mut out = vec![G1Affine::identity(); n];
    G1Projective::batch_normalize(&proj, &mut out);
    out
}

fn points_g2(n: usize, r: &mut ChaCha20Rng) -> Vec<G2Affine> {
    let step = G2Projective::random(&mut *r);
    let mut p = G2Projective::random(&mut *r);
    let proj: Vec<G2Projective> = (0..n)
        .map(|_| {
            p += step;
            p
        })
        .collect();
    let mut out = vec![G2Affine::identity(); n];
    G2Projective::batch_normalize(&proj, &mut out);
    out
}

/// An R1CS with its storage, for views made by hand.
struct Matrices {
    num_inputs: usize,
    num_aux: usize,
    row_ptr: [Vec<u32>; 3],
    terms: [Vec<Term>; 3],
    coeffs: Vec<Scalar>,
}

impl Matrices {
    fn view(&self) -> R1csRef<'_> {
        R1csRef {
            num_inputs: self.num_inputs,
            num_aux: self.num_aux,
            matrices: [0, 1, 2].map(|m| CsrRef {
                row_ptr: &self.row_ptr[m],
                terms: &self.terms[m],
            }),
            coeffs: &self.coeffs,
        }
    }

    /// `rows` rows with every kind of term (1, -1, 2 and table coefficients),
    /// empty rows in each matrix (a whole row empty in all three too), and long
    /// rows (up to `long` terms, columns repeated) among them.
    fn mixed(rows: usize, num_inputs: usize, num_aux: usize, long: usize, seed: u64) -> Self {
        let mut r = ChaCha20Rng::seed_from_u64(seed);
        let mut coeffs = vec![Scalar::ONE, -Scalar::ONE, Scalar::ONE.double()];
        coeffs.extend((0..29).map(|_| Scalar::random(&mut r)));
        let vars = (num_inputs + num_aux) as u32;
        let mut row_ptr = [vec![0u32], vec![0u32], vec![0u32]];
        let mut terms: [Vec<Term>; 3] = Default::default();
        for row in 0..rows {
            for m in 0..3 {
                let len = match (row % 97, r.gen_range(0..10)) {
                    (0, _) => 0,
                    (13, _) if m == 1 => long,
                    (50, _) if m == 0 => long / 2 + 1,
                    (_, 0) => 0,
                    (_, k) => k,
                };
                for _ in 0..len {
                    let coeff = match r.gen_range(0..6) {
                        0 => COEFF_ONE,
                        1 => COEFF_MINUS_ONE,
                        2 => COEFF_TWO,
                        _ => r.gen_range(0..coeffs.len() as u32),
                    };
                    terms[m].push(Term {
                        col: r.gen_range(0..vars),
                        coeff,
                    });
                }
                row_ptr[m].push(terms[m].len() as u32);
            }
        }
        Self {
            num_inputs,
            num_aux,
            row_ptr,
            terms,
            coeffs,
        }
    }

    fn witness(&self, seed: u64) -> (Vec<Scalar>, Vec<Scalar>) {
        let mut r = ChaCha20Rng::seed_from_u64(seed);
        let mut input: Vec<Scalar> = (0..self.num_inputs).map(|_| scalar(&mut r)).collect();
        if let Some(one) = input.first_mut() {
            *one = Scalar::ONE;
        }
        let aux = (0..self.num_aux).map(|_| scalar(&mut r)).collect();
        (input, aux)
    }
}

/// The device's `a, b, c` (the whole domain read back) against `spmv_slices`, and
/// zeros past the constraints.
fn check_spmv(backend: &CudaBackend, view: R1csRef<'_>, input: &[Scalar], aux: &[Scalar]) {
    let pool = pool();
    let want = cuzk_synth::spmv_slices(view, input, aux, &pool, &NoThrottle).unwrap();
    let n = view.num_constraints();
    let (got, ms) = backend.with_gpu(|gpu, _| {
        let valid = pool.install(|| ValidR1cs::new(view)).unwrap();
        let dev = DeviceR1cs::upload(gpu, valid).unwrap();
        assert_eq!(*dev.key(), R1csKey::of(&view));
        spmv::eval_abc_to_host(gpu, &dev, input, aux).unwrap()
    });
    let domain = 1usize << cuzk_cuda::log_domain(n);
    for (name, got, want) in [
        ("a", &got[0], &want.a),
        ("b", &got[1], &want.b),
        ("c", &got[2], &want.c),
    ] {
        assert_eq!(got.len(), domain, "{name}");
        assert_eq!(&got[..n], &want[..], "{name} over {n} rows");
        assert!(
            got[n..].iter().all(|x| *x == Scalar::ZERO),
            "{name}'s padding"
        );
    }
    println!("spmv of {n} rows: {ms:.3} ms");
}

/// A SHA-256 chain compiled by cuzk-synth: A's 2s of the boolean gadgets, ±1, the
/// bit-packing powers of two and the hashing constants of the table.
#[test]
fn spmv_matches_the_cpu_on_a_compiled_sha256_circuit_or_no_device() {
    let _turn = one_at_a_time();
    let Some(backend) = open(CudaConfig::default()) else {
        return;
    };
    let circuit = cuzk_circuits::Sha256Chain::new(16, Some(3)).unwrap();
    let compiled = cuzk_synth::compile(circuit).unwrap();
    let view = compiled.r1cs.view();
    assert!(view.coeffs.len() > 3, "the table has more than 1, -1, 2");
    check_spmv(
        &backend,
        view,
        &compiled.witness.input,
        &compiled.witness.aux,
    );
}

/// Empty rows, rows of thousands of terms, every coefficient kind, and row counts
/// from 1 to a power of two and one past it (no padding, full padding).
#[test]
fn spmv_matches_the_cpu_on_empty_and_long_rows_or_no_device() {
    let _turn = one_at_a_time();
    let Some(backend) = open(CudaConfig::default()) else {
        return;
    };
    for (i, rows) in [1usize, 2, 3, 17, 33, 256, 257, 4096, 5000]
        .into_iter()
        .enumerate()
    {
        let m = Matrices::mixed(rows, 3, 7000, 6000, i as u64);
        let (input, aux) = m.witness(100 + i as u64);
        check_spmv(&backend, m.view(), &input, &aux);
    }
}

/// Everything a partition needs besides the R1CS and witness.
struct Params {
    h_bases: Vec<G1Affine>,
    q_bases: Vec<G1Affine>,
    q_bases_g2: Vec<G2Affine>,
}

impl Params {
    fn new(rows: usize, vars: usize, seed: u64) -> Self {
        let mut r = ChaCha20Rng::seed_from_u64(seed);
        Self {
            h_bases: points((1 << cuzk_cuda::log_domain(rows)) - 1, &mut r),
            q_bases: points(vars, &mut r),
            q_bases_g2: points_g2(vars, &mut r),
        }
    }
}

/// `prove_partition_witness` on the device = `prove_partition_ref` on the host's
/// `a, b, c` = the CPU backend's `prove_partition_witness`, with the bases resident
/// (the witness uploads during L, A, B) and streamed (H first), B in G2 on the
/// device and not.
fn check_prove(
    backends: &[&CudaBackend],
    view: R1csRef<'_>,
    input: &[Scalar],
    aux: &[Scalar],
    seed: u64,
) {
    let pool = pool();
    let cpu = CpuBackend::new(pool.clone());
    let params = Params::new(view.num_constraints(), input.len() + aux.len(), seed);
    let split = cuzk_msm_cpu::prep_msm(input, None, aux, None, &pool).unwrap();
    let abc = cuzk_synth::spmv_slices(view, input, aux, &pool, &NoThrottle).unwrap();
    for g2 in [true, false] {
        let q = SplitMsm {
            bases: &params.q_bases[..],
            split: split.as_ref(),
        };
        let job = WitnessJobRef {
            r1cs: view,
            input,
            aux,
            h_bases: &params.h_bases,
            l: q,
            a: q,
            b_g1: q,
            b_g2: g2.then_some(SplitMsm {
                bases: &params.q_bases_g2[..],
                split: split.as_ref(),
            }),
        };
        let want = cpu.prove_partition_witness(job).unwrap();
        for backend in backends {
            assert_eq!(backend.abc_eval(), AbcEval::Device);
            let host = backend
                .prove_partition_ref(job.with_abc(AbcRef::new(&abc)))
                .unwrap();
            assert_eq!(host, want, "host a, b, c (g2 = {g2})");
            // Staged by the caller and not: the same result.
            let staged = backend.stage_witness(input, aux).unwrap();
            let got = backend.prove_partition_witness(job).unwrap();
            drop(staged);
            assert_eq!(got, want, "witness, staged (g2 = {g2})");
            assert_eq!(
                backend.prove_partition_witness(job).unwrap(),
                want,
                "witness (g2 = {g2})"
            );
        }
    }
    // The parameters are freed next: every backend forgets them first, as the
    // engine makes it (a streamed set's host memory is page-locked where it lies
    // until then, and must not be freed while registered).
    let bytes = |p: *const u8, n: usize| p as usize..p as usize + n;
    let ranges = [
        bytes(
            params.h_bases.as_ptr().cast(),
            std::mem::size_of_val(&params.h_bases[..]),
        ),
        bytes(
            params.q_bases.as_ptr().cast(),
            std::mem::size_of_val(&params.q_bases[..]),
        ),
        bytes(
            params.q_bases_g2.as_ptr().cast(),
            std::mem::size_of_val(&params.q_bases_g2[..]),
        ),
    ];
    for backend in backends {
        backend.forget_bases(&ranges);
    }
}

#[test]
fn prove_partition_witness_matches_host_abc_and_the_cpu_backend_or_no_device() {
    let _turn = one_at_a_time();
    let Some(resident) = open(CudaConfig::default()) else {
        return;
    };
    let Some(streamed) = open(CudaConfig {
        stream_chunk: 1 << 12,
        ..CudaConfig::default()
    }) else {
        return;
    };
    // The default stages by copy; the other way, page-locking in place, too.
    let Some(registering) = open(CudaConfig {
        witness_staging: WitnessStaging::Register,
        ..CudaConfig::default()
    }) else {
        return;
    };
    // Split data through the backend's pinned buffer (the default) and from the
    // caller's memory.
    let Some(pageable) = open(CudaConfig {
        split_upload: SplitUpload::Pageable,
        ..CudaConfig::default()
    }) else {
        return;
    };
    assert_eq!(streamed.capabilities().name, "cuda");
    let backends = [&resident, &streamed, &registering, &pageable];
    let compiled =
        cuzk_synth::compile(cuzk_circuits::Sha256Chain::new(15, Some(9)).unwrap()).unwrap();
    check_prove(
        &backends,
        compiled.r1cs.view(),
        &compiled.witness.input,
        &compiled.witness.aux,
        1,
    );
    for (i, rows) in [1usize, 300, 3000].into_iter().enumerate() {
        let m = Matrices::mixed(rows, 2, 500, 700, 20 + i as u64);
        let (input, aux) = m.witness(30 + i as u64);
        check_prove(&backends, m.view(), &input, &aux, 40 + i as u64);
    }
}

/// A view with a column outside the witness is refused before anything reaches
/// the device, as is a witness of another shape; a good job then still proves.
#[test]
fn a_malformed_r1cs_or_witness_is_rejected_without_a_launch_or_no_device() {
    let _turn = one_at_a_time();
    let Some(backend) = open(CudaConfig::default()) else {
        return;
    };
    let pool = pool();
    let good = Matrices::mixed(100, 2, 300, 50, 5);
    let (input, aux) = good.witness(6);
    let params = Params::new(100, input.len() + aux.len(), 7);
    let split = cuzk_msm_cpu::prep_msm(&input, None, &aux, None, &pool).unwrap();
    let q = SplitMsm {
        bases: &params.q_bases[..],
        split: split.as_ref(),
    };
    let job = |view, input, aux| WitnessJobRef {
        r1cs: view,
        input,
        aux,
        h_bases: &params.h_bases,
        l: q,
        a: q,
        b_g1: q,
        b_g2: None,
    };
    // A column one past the last variable, in C.
    let mut bad = Matrices::mixed(100, 2, 300, 50, 5);
    let last = bad.terms[2].len() - 1;
    bad.terms[2][last].col = (bad.num_inputs + bad.num_aux) as u32;
    let err = backend
        .prove_partition_witness(job(bad.view(), &input, &aux))
        .unwrap_err();
    assert!(matches!(err, BackendError::Rejected(_)), "{err}");
    // A coefficient index past the table, in A.
    let mut bad = Matrices::mixed(100, 2, 300, 50, 5);
    bad.terms[0][0].coeff = bad.coeffs.len() as u32;
    let err = backend
        .prove_partition_witness(job(bad.view(), &input, &aux))
        .unwrap_err();
    assert!(matches!(err, BackendError::Rejected(_)), "{err}");
    // A row pointer past the terms, in B.
    let mut bad = Matrices::mixed(100, 2, 300, 50, 5);
    bad.row_ptr[1][50] = u32::MAX;
    let err = backend
        .prove_partition_witness(job(bad.view(), &input, &aux))
        .unwrap_err();
    assert!(matches!(err, BackendError::Rejected(_)), "{err}");
    assert!(backend.resident_r1cs().is_empty(), "nothing was uploaded");
    // A witness one aux variable short.
    let err = backend
        .prove_partition_witness(job(good.view(), &input, &aux[1..]))
        .unwrap_err();
    assert!(matches!(err, BackendError::Rejected(_)), "{err}");
    assert!(backend.resident_r1cs().is_empty(), "nothing was uploaded");
    // The good job proves as the CPU does.
    let cpu = CpuBackend::new(pool.clone());
    let want = cpu
        .prove_partition_witness(job(good.view(), &input, &aux))
        .unwrap();
    assert_eq!(
        backend
            .prove_partition_witness(job(good.view(), &input, &aux))
            .unwrap(),
        want
    );
    assert_eq!(backend.resident_r1cs().len(), 1);
}

/// Two shapes stay resident side by side (the H200 has room for both) and each
/// proves with its own matrices; a shape at the same host address with another
/// shape (an R1CS freed and another compiled in its place) replaces the stale
/// copy instead of being served it; evicting drops them all.
#[test]
fn shapes_coexist_and_a_stale_copy_is_replaced_or_no_device() {
    let _turn = one_at_a_time();
    let Some(backend) = open(CudaConfig::default()) else {
        return;
    };
    let pool = pool();
    let cpu = CpuBackend::new(pool.clone());
    let prove = |m: &Matrices, seed: u64| {
        let (input, aux) = m.witness(seed);
        let params = Params::new(m.view().num_constraints(), input.len() + aux.len(), seed);
        let split = cuzk_msm_cpu::prep_msm(&input, None, &aux, None, &pool).unwrap();
        let q = SplitMsm {
            bases: &params.q_bases[..],
            split: split.as_ref(),
        };
        let job = WitnessJobRef {
            r1cs: m.view(),
            input: &input,
            aux: &aux,
            h_bases: &params.h_bases,
            l: q,
            a: q,
            b_g1: q,
            b_g2: None,
        };
        let want = cpu.prove_partition_witness(job).unwrap();
        assert_eq!(backend.prove_partition_witness(job).unwrap(), want);
    };
    let one = Matrices::mixed(200, 2, 400, 30, 1);
    let mut two = Matrices::mixed(500, 3, 900, 30, 2);
    prove(&one, 11);
    prove(&two, 12);
    let keys: Vec<R1csKey> = backend
        .resident_r1cs()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys.len(), 2);
    assert!(keys.contains(&R1csKey::of(&one.view())));
    assert!(keys.contains(&R1csKey::of(&two.view())));
    for (k, bytes) in backend.resident_r1cs() {
        assert_eq!(bytes, k.device_bytes());
    }
    prove(&one, 13);
    assert_eq!(backend.resident_r1cs().len(), 2);
    // `two`'s A terms stay where they are; its rows and witness change (a row
    // dropped from each matrix, one aux variable more).
    for m in 0..3 {
        let end = two.row_ptr[m][two.row_ptr[m].len() - 2] as usize;
        two.row_ptr[m].pop();
        if m > 0 {
            two.terms[m].truncate(end);
        }
    }
    // A keeps its allocation: the last row's terms rewritten into the ones before.
    let a_end = *two.row_ptr[0].last().unwrap() as usize;
    let a_len = two.terms[0].len();
    for t in &mut two.terms[0][a_end..] {
        t.col = 0;
    }
    *two.row_ptr[0].last_mut().unwrap() = a_len as u32;
    two.num_aux += 1;
    let stale = keys
        .iter()
        .find(|k| k.same_place(&R1csKey::of(&two.view())))
        .copied()
        .expect("the second shape's A terms did not move");
    prove(&two, 14);
    let now: Vec<R1csKey> = backend
        .resident_r1cs()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(now.len(), 2);
    assert!(!now.contains(&stale), "the stale copy is gone");
    assert!(now.contains(&R1csKey::of(&two.view())));
    backend.evict_r1cs();
    assert!(backend.resident_r1cs().is_empty());
    prove(&one, 15);
}

/// `stage_witness` page-locks the witness in place (aux; input too when long
/// enough): counted as registered, the caller's memory, never as memory the
/// backend allocated, and undone when the guard goes.
#[test]
fn staging_a_witness_registers_it_in_place_or_no_device() {
    let _turn = one_at_a_time();
    let Some(backend) = open(CudaConfig {
        witness_staging: WitnessStaging::Register,
        ..CudaConfig::default()
    }) else {
        return;
    };
    let mut r = ChaCha20Rng::seed_from_u64(21);
    // Input below the page-locking threshold (1 << 15 scalars), aux above it.
    let input: Vec<Scalar> = (0..3).map(|_| scalar(&mut r)).collect();
    let aux: Vec<Scalar> = (0..1 << 16).map(|_| scalar(&mut r)).collect();
    let ordinal = 0;
    let registered = cuzk_cuda::testing::raw::registered_bytes(ordinal);
    let pinned = backend.pinned_host_bytes();
    let staged = backend.stage_witness(&input, &aux).unwrap();
    assert!(staged.is_staged());
    assert_eq!(
        cuzk_cuda::testing::raw::registered_bytes(ordinal),
        registered + 32 * aux.len() as u64
    );
    assert_eq!(backend.pinned_host_bytes(), pinned);
    drop(staged);
    assert_eq!(
        cuzk_cuda::testing::raw::registered_bytes(ordinal),
        registered
    );
    // Nothing long enough: nothing staged.
    assert!(!backend
        .stage_witness(&input, &aux[..10])
        .unwrap()
        .is_staged());
}

/// `witness_staging = "copy"`: `stage_witness` copies `[input, aux]` into a
/// page-locked buffer the backend allocates (counted as its pinned memory, nothing
/// registered), the partition uploads from that copy, and the guard hands the buffer
/// back for the next witness, which reuses it.
#[test]
fn staging_a_witness_by_copy_uploads_the_copy_and_reuses_its_buffer_or_no_device() {
    let _turn = one_at_a_time();
    // Split data from the caller's memory: the pinned bytes counted here are the
    // witness copies' alone (the split buffer has a test of its own).
    let Some(backend) = open(CudaConfig {
        witness_staging: WitnessStaging::Copy,
        split_upload: SplitUpload::Pageable,
        ..CudaConfig::default()
    }) else {
        return;
    };
    let ordinal = 0;
    // 2^16 constraints: an aux of more than the 2^15 scalars staging starts at (a
    // 2^15 chain's aux is shorter, and was not staged).
    let compiled =
        cuzk_synth::compile(cuzk_circuits::Sha256Chain::new(16, Some(9)).unwrap()).unwrap();
    let view = compiled.r1cs.view();
    let input = compiled.witness.input.clone();
    let mut aux = compiled.witness.aux.clone();
    assert!(aux.len() >= 1 << 15, "long enough to be staged");
    let bytes = 32 * (input.len() + aux.len()) as u64;

    let pool = pool();
    let cpu = CpuBackend::new(pool.clone());
    let params = Params::new(view.num_constraints(), input.len() + aux.len(), 7);
    let split = cuzk_msm_cpu::prep_msm(&input, None, &aux, None, &pool).unwrap();
    let q = SplitMsm {
        bases: &params.q_bases[..],
        split: split.as_ref(),
    };
    // Every job of this test but for its aux (which changes between them).
    let base = WitnessJobRef {
        r1cs: view,
        input: &input,
        aux: &[],
        h_bases: &params.h_bases,
        l: q,
        a: q,
        b_g1: q,
        b_g2: None,
    };
    let want = cpu
        .prove_partition_witness(WitnessJobRef { aux: &aux, ..base })
        .unwrap();

    let registered = cuzk_cuda::testing::raw::registered_bytes(ordinal);
    let pinned = backend.pinned_host_bytes();
    let staged = backend.stage_witness(&input, &aux).unwrap();
    assert!(staged.is_staged());
    assert_eq!(
        cuzk_cuda::testing::raw::registered_bytes(ordinal),
        registered
    );
    assert_eq!(backend.pinned_host_bytes(), pinned + bytes);
    // The caller's copy changes after staging (the contract forbids it; here it
    // shows where the upload reads): the device evaluates a, b, c from the staged
    // copy, so the proof is still the one of the original witness.
    let original = aux[7];
    aux[7] += Scalar::ONE;
    let got = backend
        .prove_partition_witness(WitnessJobRef { aux: &aux, ..base })
        .unwrap();
    assert_eq!(got, want, "proved from the staged copy");
    assert_eq!(
        cuzk_cuda::testing::raw::registered_bytes(ordinal),
        registered
    );
    drop(staged);
    aux[7] = original;
    // Handed back and kept: the next witness of the size reuses the buffer.
    assert_eq!(backend.pinned_host_bytes(), pinned + bytes);
    let again = backend.stage_witness(&input, &aux).unwrap();
    assert_eq!(backend.pinned_host_bytes(), pinned + bytes);
    let got = backend
        .prove_partition_witness(WitnessJobRef { aux: &aux, ..base })
        .unwrap();
    assert_eq!(got, want, "a reused buffer");
    drop(again);
    // Nothing long enough: nothing staged, nothing allocated.
    assert!(!backend
        .stage_witness(&input, &aux[..10])
        .unwrap()
        .is_staged());
    assert_eq!(backend.pinned_host_bytes(), pinned + bytes);
}

/// A small witness (a PoSt's) staged by copy takes no free buffer sized for a large
/// one (a PoRep partition's), which the large one's next staging would then have to
/// allocate again; it gets a buffer of its own (allocated without waiting for the
/// launch gate: `UNGATED_BYTES`).
#[test]
fn a_small_witness_copy_leaves_large_buffers_to_large_ones_or_no_device() {
    let _turn = one_at_a_time();
    let Some(backend) = open(CudaConfig {
        witness_staging: WitnessStaging::Copy,
        split_upload: SplitUpload::Pageable,
        ..CudaConfig::default()
    }) else {
        return;
    };
    let input = vec![Scalar::ONE];
    // 80 MiB, over the 64 MiB up to which staging is not gated; 2 MiB.
    let large_aux = vec![Scalar::ONE; (80 << 20) / 32];
    let small_aux = vec![Scalar::ONE; 1 << 16];
    let (large, small) = (
        32 * (1 + large_aux.len()) as u64,
        32 * (1 + small_aux.len()) as u64,
    );
    let pinned = backend.pinned_host_bytes();
    drop(backend.stage_witness(&input, &large_aux).unwrap());
    assert_eq!(backend.pinned_host_bytes(), pinned + large);
    let staged_small = backend.stage_witness(&input, &small_aux).unwrap();
    assert!(staged_small.is_staged());
    assert_eq!(
        backend.pinned_host_bytes(),
        pinned + large + small,
        "a buffer of its own"
    );
    // The large buffer stayed free: the next large staging allocates nothing.
    let staged_large = backend.stage_witness(&input, &large_aux).unwrap();
    assert_eq!(backend.pinned_host_bytes(), pinned + large + small);
    drop(staged_large);
    drop(staged_small);
}

/// A 2^15 SHA-256 chain compiled with its witness (seed `seed`), parameters of its
/// shape, and its witness split as `prep_msm` splits it.
fn sha_chain(
    seed: u64,
    pool: &rayon::ThreadPool,
) -> (cuzk_synth::Compiled, Params, cuzk_gpu_backend::SplitScalars) {
    let compiled =
        cuzk_synth::compile(cuzk_circuits::Sha256Chain::new(15, Some(seed)).unwrap()).unwrap();
    let (input, aux) = (&compiled.witness.input, &compiled.witness.aux);
    let params = Params::new(
        compiled.r1cs.view().num_constraints(),
        input.len() + aux.len(),
        11,
    );
    let split = cuzk_msm_cpu::prep_msm(input, None, aux, None, pool).unwrap();
    (compiled, params, split)
}

/// `split_upload = "pinned"`: a partition's bitmaps and tail terms go up through
/// one page-locked buffer the backend allocates at the first partition (counted as
/// its pinned memory, in steps of 64 MiB) and reuses for the next, whose results
/// are the CPU backend's.
#[test]
fn split_data_go_up_through_one_kept_pinned_buffer_or_no_device() {
    let _turn = one_at_a_time();
    let Some(backend) = open(CudaConfig {
        witness_staging: WitnessStaging::Register,
        split_upload: SplitUpload::Pinned,
        ..CudaConfig::default()
    }) else {
        return;
    };
    let pool = pool();
    let cpu = CpuBackend::new(pool.clone());
    let (compiled, params, split) = sha_chain(5, &pool);
    let view = compiled.r1cs.view();
    let (input, aux) = (&compiled.witness.input, &compiled.witness.aux);
    let q = SplitMsm {
        bases: &params.q_bases[..],
        split: split.as_ref(),
    };
    let job = WitnessJobRef {
        r1cs: view,
        input,
        aux,
        h_bases: &params.h_bases,
        l: q,
        a: q,
        b_g1: q,
        b_g2: Some(SplitMsm {
            bases: &params.q_bases_g2[..],
            split: split.as_ref(),
        }),
    };
    let want = cpu.prove_partition_witness(job).unwrap();
    let before = backend.pinned_host_bytes();
    assert_eq!(backend.prove_partition_witness(job).unwrap(), want);
    let grown = backend.pinned_host_bytes() - before;
    assert!(grown > 0 && grown % (64 << 20) == 0, "{grown} bytes");
    // The second partition reuses the buffer.
    assert_eq!(backend.prove_partition_witness(job).unwrap(), want);
    assert_eq!(backend.pinned_host_bytes() - before, grown);
}

/// Split data staged before the GPU lock (`stage_splits`): copied into a
/// page-locked buffer at the staging (B's split, given twice for B_G1 and B_G2,
/// copied once), found by the backend call, which then allocates no buffer of its
/// own, and handed back by the guard for the next staging. Data staged in another
/// order than the call's are not found, and the call copies them itself. The
/// results are the CPU backend's either way; `pageable` stages nothing.
#[test]
fn split_data_staged_before_the_lock_go_up_from_their_copy_or_no_device() {
    let _turn = one_at_a_time();
    let Some(backend) = open(CudaConfig {
        witness_staging: WitnessStaging::Register,
        split_upload: SplitUpload::Pinned,
        ..CudaConfig::default()
    }) else {
        return;
    };
    let pool = pool();
    let cpu = CpuBackend::new(pool.clone());
    let (compiled, params, split) = sha_chain(6, &pool);
    let view = compiled.r1cs.view();
    let (input, aux) = (&compiled.witness.input, &compiled.witness.aux);
    let l_split = cuzk_msm_cpu::prep_msm(input, None, aux, None, &pool).unwrap();
    let (l, q) = (
        SplitMsm {
            bases: &params.q_bases[..],
            split: l_split.as_ref(),
        },
        SplitMsm {
            bases: &params.q_bases[..],
            split: split.as_ref(),
        },
    );
    let job = WitnessJobRef {
        r1cs: view,
        input,
        aux,
        h_bases: &params.h_bases,
        l,
        a: q,
        b_g1: q,
        b_g2: Some(SplitMsm {
            bases: &params.q_bases_g2[..],
            split: split.as_ref(),
        }),
    };
    let order = [
        l_split.as_ref(),
        split.as_ref(),
        split.as_ref(),
        split.as_ref(),
    ];
    let want = cpu.prove_partition_witness(job).unwrap();

    let before = backend.pinned_host_bytes();
    let staged = backend.stage_splits(&order).unwrap();
    assert!(staged.is_staged());
    let copy = backend.pinned_host_bytes() - before;
    assert!(copy > 0 && copy % (64 << 20) == 0, "{copy} bytes");
    assert_eq!(backend.prove_partition_witness(job).unwrap(), want);
    // Uploaded from the staged copy: the call allocated no buffer of its own.
    assert_eq!(backend.pinned_host_bytes() - before, copy);
    drop(staged);
    // The next staging takes the buffer handed back.
    let staged = backend.stage_splits(&order).unwrap();
    assert_eq!(backend.pinned_host_bytes() - before, copy);
    assert_eq!(backend.prove_partition_witness(job).unwrap(), want);
    drop(staged);

    // Staged in another order: not found, so the call copies them through its own
    // buffer.
    let other = [
        split.as_ref(),
        l_split.as_ref(),
        split.as_ref(),
        split.as_ref(),
    ];
    let staged = backend.stage_splits(&other).unwrap();
    let with_other = backend.pinned_host_bytes() - before;
    assert_eq!(backend.prove_partition_witness(job).unwrap(), want);
    assert!(backend.pinned_host_bytes() - before > with_other);
    drop(staged);

    let Some(pageable) = open(CudaConfig {
        split_upload: SplitUpload::Pageable,
        ..CudaConfig::default()
    }) else {
        return;
    };
    assert!(!pageable.stage_splits(&order).unwrap().is_staged());
}
