//! The spmv row of the table: `a, b, c = A·w, B·w, C·w` on the device for a
//! random R1CS of 2^k rows shaped like a PoRep partition's, checked against the
//! CPU mat-vec (`cuzk_synth::spmv_slices`) and timed next to it.

use std::time::Instant;

use anyhow::{ensure, Result};
use blstrs::Scalar;
use cuzk_cuda::testing::gpu::Gpu;
use cuzk_cuda::testing::spmv::{self, DeviceR1cs, ValidR1cs};
use cuzk_gpu_backend::{CsrRef, R1csRef, Term};
use cuzk_synth::{NoThrottle, COEFF_MINUS_ONE, COEFF_ONE, COEFF_TWO};
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use crate::bench::median;
use crate::common::{fast_scalars, run_seed, Log};

/// Terms per row of A, B and C drawn from 1..=max: 2.5, 1.5 and 2 on average, ~6
/// a row in all (a 32 GiB PoRep partition: ~670 million terms over 130 million
/// rows, ~5.2 a row). Columns are uniform over the witness, which is worse for the
/// kernel's reads than a real circuit's neighbouring columns.
const MAX_TERMS: [u32; 3] = [4, 2, 3];

fn random_matrix(
    rows: usize,
    vars: u32,
    coeffs: u32,
    max: u32,
    seed: u64,
) -> (Vec<u32>, Vec<Term>) {
    const CHUNK: usize = 1 << 16;
    let parts: Vec<(Vec<u32>, Vec<Term>)> = (0..rows.div_ceil(CHUNK))
        .into_par_iter()
        .map(|ci| {
            let mut r = ChaCha20Rng::seed_from_u64(seed ^ ((ci as u64) << 24));
            let n = CHUNK.min(rows - ci * CHUNK);
            let mut lens = Vec::with_capacity(n);
            let mut terms = Vec::with_capacity(n * (max as usize + 1) / 2);
            for _ in 0..n {
                let len = r.gen_range(1..=max);
                for _ in 0..len {
                    let coeff = match r.gen_range(0..20) {
                        0..=8 => COEFF_ONE,
                        9..=13 => COEFF_MINUS_ONE,
                        14..=16 => COEFF_TWO,
                        _ => r.gen_range(3..coeffs),
                    };
                    terms.push(Term {
                        col: r.gen_range(0..vars),
                        coeff,
                    });
                }
                lens.push(len);
            }
            (lens, terms)
        })
        .collect();
    let mut row_ptr = Vec::with_capacity(rows + 1);
    let mut terms = Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum());
    row_ptr.push(0u32);
    for (lens, t) in parts {
        for len in lens {
            let last = *row_ptr.last().unwrap_or(&0);
            row_ptr.push(last + len);
        }
        terms.extend(t);
    }
    (row_ptr, terms)
}

/// Times the spmv kernel (median of 5 after a warm-up) at 2^lg rows with as many
/// aux variables, checks one run against the CPU, and logs the CPU's time too.
pub fn bench_spmv(gpu: &Gpu, log: &Log, pool: &rayon::ThreadPool, lg: u32) -> Result<()> {
    let rows = (1usize << lg) - 1;
    let num_inputs = 2;
    let num_aux = 1usize << lg;
    let vars = (num_inputs + num_aux) as u32;
    let seed = run_seed() ^ 0x5b3;
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    let mut coeffs = vec![Scalar::ONE, -Scalar::ONE, Scalar::ONE.double()];
    coeffs.extend((0..61).map(|_| Scalar::random(&mut r)));
    let t = Instant::now();
    let mats: Vec<(Vec<u32>, Vec<Term>)> = pool.install(|| {
        (0..3)
            .map(|m| {
                random_matrix(
                    rows,
                    vars,
                    coeffs.len() as u32,
                    MAX_TERMS[m],
                    seed + m as u64,
                )
            })
            .collect()
    });
    let mut input = fast_scalars(num_inputs, seed ^ 1);
    input[0] = Scalar::ONE;
    let aux = fast_scalars(num_aux, seed ^ 2);
    let view = R1csRef {
        num_inputs,
        num_aux,
        matrices: [0, 1, 2].map(|m| CsrRef {
            row_ptr: &mats[m].0,
            terms: &mats[m].1,
        }),
        coeffs: &coeffs,
    };
    let nnz: usize = mats.iter().map(|m| m.1.len()).sum();
    log.line(&format!(
        "spmv 2^{lg}: {rows} rows, {nnz} terms, {} MiB of matrices (made in {:.1?})",
        view.bytes() >> 20,
        t.elapsed()
    ));
    let t = Instant::now();
    let want = cuzk_synth::spmv_slices(view, &input, &aux, pool, &NoThrottle)?;
    let cpu_ms = t.elapsed().as_secs_f64() * 1e3;
    let valid = pool.install(|| ValidR1cs::new(view))?;
    let t = Instant::now();
    let dev = DeviceR1cs::upload(gpu, valid)?;
    gpu.sync()?;
    log.line(&format!(
        "spmv 2^{lg}: matrices uploaded in {:.1?} (once per shape)",
        t.elapsed()
    ));
    let (got, _) = spmv::eval_abc_to_host(gpu, &dev, &input, &aux)?;
    let ok = got[0][..rows] == want.a[..]
        && got[1][..rows] == want.b[..]
        && got[2][..rows] == want.c[..]
        && got
            .iter()
            .all(|v| v[rows..].iter().all(|x| *x == Scalar::ZERO));
    log.check(&format!("spmv 2^{lg} = spmv_slices"), ok, "");
    ensure!(ok, "the device's a, b, c differ from the CPU's at 2^{lg}");
    drop(got);
    spmv::time_spmv(gpu, &dev, &input, &aux)?; // warm-up
    let mut v = Vec::new();
    for _ in 0..5 {
        v.push(f64::from(spmv::time_spmv(gpu, &dev, &input, &aux)?));
    }
    let ms = median(v);
    log.row(
        "spmv (a, b, c from the witness; ~6 random terms a row)",
        &format!("2^{lg}"),
        ms,
        format!(
            "{:.2} ns/row; CPU spmv_slices {cpu_ms:.1} ms",
            ms * 1e6 / rows as f64
        ),
        "",
    );
    Ok(())
}
