//! The spmv kernel (`kernels/spmv.cu`) compiled for the host and checked against
//! `cuzk_synth::spmv_slices`, so that CI (no GPU) catches mistakes in its row
//! evaluation: every coefficient kind (1, -1, 2 and the table), empty and long
//! rows, the zero padding up to the domain, and a SHA-256 circuit compiled by
//! cuzk-synth. `tests/host/spmv_host.cpp` runs every thread of the launch one after
//! another. Needs a C++17 compiler (`$CXX`, else `c++`): without one these tests
//! fail (they need no GPU, so they never skip). The same checks on the device are
//! `tests/spmv.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use blstrs::Scalar;
use cuzk_cuda::testing::gpu::{scalar_from_repr, scalars_as_bytes, FrRepr};
use cuzk_gpu_backend::{CsrRef, R1csRef, Term};
use cuzk_synth::{NoThrottle, COEFF_MINUS_ONE, COEFF_ONE, COEFF_TWO};
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn harness() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuzk-spmv-host");
            let status = Command::new(cxx)
                .args(["-std=c++17", "-O2", "-I"])
                .arg(dir.join("kernels"))
                .arg(dir.join("tests/host/spmv_host.cpp"))
                .arg("-o")
                .arg(&out)
                .status()
                .expect("running the C++ compiler (set CXX)");
            assert!(
                status.success(),
                "kernels/spmv.cu does not compile for the host"
            );
            out
        })
        .clone()
}

/// The kernel's a, b, c over the whole domain, run on the host.
fn run_kernel(view: R1csRef<'_>, input: &[Scalar], aux: &[Scalar], tag: &str) -> [Vec<Scalar>; 3] {
    let rows = view.num_constraints();
    let domain = 1usize << cuzk_cuda::log_domain(rows);
    let mut bytes = Vec::new();
    let nnz = view.matrices.map(|m| m.terms.len() as u32);
    for v in [
        rows as u32,
        domain as u32,
        (input.len() + aux.len()) as u32,
        view.coeffs.len() as u32,
        nnz[0],
        nnz[1],
        nnz[2],
    ] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes.extend_from_slice(scalars_as_bytes(input));
    bytes.extend_from_slice(scalars_as_bytes(aux));
    bytes.extend_from_slice(scalars_as_bytes(view.coeffs));
    for m in view.matrices {
        for p in m.row_ptr {
            bytes.extend_from_slice(&p.to_le_bytes());
        }
        for t in m.terms {
            bytes.extend_from_slice(&t.col.to_le_bytes());
            bytes.extend_from_slice(&t.coeff.to_le_bytes());
        }
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let (inp, outp) = (
        dir.join(format!("spmv-{tag}.in")),
        dir.join(format!("spmv-{tag}.out")),
    );
    std::fs::write(&inp, &bytes).unwrap();
    let status = Command::new(harness())
        .arg(&inp)
        .arg(&outp)
        .status()
        .unwrap();
    assert!(status.success(), "the host harness failed: {status:?}");
    let out = std::fs::read(&outp).unwrap();
    assert_eq!(out.len(), 3 * domain * 32);
    let reprs: Vec<FrRepr> = out
        .chunks_exact(32)
        .map(|c| FrRepr(bytemuck::pod_read_unaligned(c)))
        .collect();
    let _ = std::fs::remove_file(&inp);
    let _ = std::fs::remove_file(&outp);
    let mut it = reprs
        .chunks_exact(domain)
        .map(|c| c.iter().map(scalar_from_repr).collect());
    [it.next().unwrap(), it.next().unwrap(), it.next().unwrap()]
}

fn check(view: R1csRef<'_>, input: &[Scalar], aux: &[Scalar], tag: &str) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let want = cuzk_synth::spmv_slices(view, input, aux, &pool, &NoThrottle).unwrap();
    let got = run_kernel(view, input, aux, tag);
    let n = view.num_constraints();
    for (name, got, want) in [
        ("a", &got[0], &want.a),
        ("b", &got[1], &want.b),
        ("c", &got[2], &want.c),
    ] {
        assert_eq!(&got[..n], &want[..], "{tag}: {name}");
        assert!(
            got[n..].iter().all(|x| *x == Scalar::ZERO),
            "{tag}: {name}'s padding"
        );
    }
}

fn scalar(r: &mut ChaCha20Rng) -> Scalar {
    match r.gen_range(0..5) {
        0 => Scalar::ZERO,
        1 => Scalar::ONE,
        _ => Scalar::random(&mut *r),
    }
}

#[test]
fn the_host_built_kernel_matches_the_cpu_on_empty_long_and_mixed_rows() {
    for (i, rows) in [1usize, 2, 3, 17, 33, 64, 65, 1000].into_iter().enumerate() {
        let mut r = ChaCha20Rng::seed_from_u64(i as u64);
        let (num_inputs, num_aux) = (3usize, 2000usize);
        let mut coeffs = vec![Scalar::ONE, -Scalar::ONE, Scalar::ONE.double()];
        coeffs.extend((0..13).map(|_| Scalar::random(&mut r)));
        let vars = (num_inputs + num_aux) as u32;
        let mut row_ptr = [vec![0u32], vec![0u32], vec![0u32]];
        let mut terms: [Vec<Term>; 3] = Default::default();
        for row in 0..rows {
            for m in 0..3 {
                let len = match (row % 31, r.gen_range(0..8)) {
                    (0, _) => 0,
                    (7, _) if m == 2 => 1500,
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
        let mut input: Vec<Scalar> = (0..num_inputs).map(|_| scalar(&mut r)).collect();
        input[0] = Scalar::ONE;
        let aux: Vec<Scalar> = (0..num_aux).map(|_| scalar(&mut r)).collect();
        let view = R1csRef {
            num_inputs,
            num_aux,
            matrices: [0, 1, 2].map(|m| CsrRef {
                row_ptr: &row_ptr[m],
                terms: &terms[m],
            }),
            coeffs: &coeffs,
        };
        check(view, &input, &aux, &format!("mixed-{rows}"));
    }
}

#[test]
fn the_host_built_kernel_matches_the_cpu_on_a_compiled_sha256_circuit() {
    let circuit = cuzk_circuits::Sha256Chain::new(15, Some(4)).unwrap();
    let compiled = cuzk_synth::compile(circuit).unwrap();
    let view = compiled.r1cs.view();
    assert!(view.coeffs.len() > 3, "the table has more than 1, -1, 2");
    check(
        view,
        &compiled.witness.input,
        &compiled.witness.aux,
        "sha256",
    );
}
