//! Every GPU correctness check and benchmark of the CUDA backend in one run.
//!
//! ```text
//! cuzk-gpu-check [OUT_DIR] [--quick] [--no-bench] [--no-check] [--table-only] [--sweeps]
//!                [--skip fields,ntt,h,msm,g2,partition,
//!                        field-bench,msm-bench,g2-bench,ntt-bench,h-bench,partition-bench]
//! cuzk-gpu-check --compile-only DIR [ARCH]   (writes staged kernels, no GPU needed)
//! ```
//! Checks each kernel against the CPU (blstrs, cuzk-msm-cpu, cuzk-gpu-backend's NTT,
//! compute_h and CpuBackend) on fresh random inputs and 0/1-heavy ones, output
//! buffers poisoned first; then times MSM, NTT and H (warm-up, median of 5, CUDA
//! events). Full log in OUT_DIR/gpu-check.log, the table last on stdout and in
//! OUT_DIR/table.md. Exit status 1 if any check failed, 2 where there is no GPU
//! (nothing was checked). `--seed N` replays a run's inputs.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::CudaSlice;
use cuzk_alloc::{Abc, Density};
use cuzk_cuda::gpu::{
    fq_inverse_gcd_by_default, g2_points_as_bytes, grid, points_as_bytes, scalar_from_repr,
    scalars_as_bytes, xyzz2_to_projective, xyzz_to_projective, Affine2Repr, AffineRepr,
    DeviceCurve, FqRepr, FrRepr, Gpu, Xyzz2Repr, XyzzRepr, G1, G2,
};
use cuzk_cuda::msm::{self, MsmPlan, ScalarFormat, SumVariant};
use cuzk_cuda::ntt::{Direction, Ntt, NttKernel};
use cuzk_cuda::{BasePlacement, CudaBackend, CudaConfig, CudaError};
use cuzk_gpu_backend::{CpuBackend, GpuBackend, PartitionJob, SplitMsm, SplitScalars};
use ff::{Field, PrimeField};
use group::{Curve, Group};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

struct Log {
    file: Mutex<std::fs::File>,
    failures: Mutex<Vec<String>>,
    checks: Mutex<usize>,
    table: Mutex<Vec<[String; 5]>>,
}

impl Log {
    fn line(&self, s: &str) {
        println!("{s}");
        let _ = writeln!(self.file.lock().unwrap(), "{s}");
    }
    fn check(&self, name: &str, ok: bool, detail: &str) {
        *self.checks.lock().unwrap() += 1;
        if ok {
            let _ = writeln!(self.file.lock().unwrap(), "PASS {name} {detail}");
        } else {
            self.line(&format!("FAIL {name} {detail}"));
            self.failures.lock().unwrap().push(name.to_owned());
        }
    }
    fn row(&self, what: &str, size: &str, ms: f64, per: String, peer: &str) {
        self.line(&format!("BENCH {what} {size}: {ms:.3} ms ({per})"));
        self.table.lock().unwrap().push([
            what.into(),
            size.into(),
            format!("{ms:.2}"),
            per,
            peer.into(),
        ]);
    }
}

fn pool() -> Arc<rayon::ThreadPool> {
    Arc::new(
        rayon::ThreadPoolBuilder::new()
            .build()
            .expect("thread pool"),
    )
}

static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// The run's seed: `--seed N` (set in `main`), or the clock read once (logged at
/// the start, so that a failure can be replayed with the same inputs).
fn run_seed() -> u64 {
    *SEED.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    })
}

/// Fresh inputs every run, one stream per section (`tag`), all from the run's seed.
fn rng(tag: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(run_seed() ^ tag.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Uniform-ish scalars fast: random limbs below 2^252 < r read as Montgomery form
/// (every value below r is a valid representation).
fn fast_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(1 << 16).enumerate().for_each(|(ci, ch)| {
        let mut r = ChaCha20Rng::seed_from_u64(seed ^ (ci as u64) << 20);
        for s in ch {
            let mut l = [0u32; 8];
            for x in &mut l {
                *x = r.next_u32();
            }
            l[7] &= 0x0fff_ffff;
            *s = scalar_from_repr(&FrRepr(l));
        }
    });
    v
}

/// Mixed scalars: zeros, ones, minus one, small values, random.
fn heavy_scalars(n: usize, r: &mut ChaCha20Rng) -> Vec<Scalar> {
    (0..n)
        .map(|_| match r.gen_range(0..10) {
            0..=3 => Scalar::ZERO,
            4..=6 => Scalar::ONE,
            7 => -Scalar::ONE,
            8 => Scalar::from(r.gen_range(2..1000u64)),
            _ => Scalar::random(&mut *r),
        })
        .collect()
}

/// `n` distinct random G1 points (see [`random_points_of`]).
fn random_points(n: usize, r: &mut ChaCha20Rng) -> Vec<G1Affine> {
    random_points_of::<G1Projective>(n, r)
}

/// `n` distinct random G2 points.
fn random_points_g2(n: usize, r: &mut ChaCha20Rng) -> Vec<G2Affine> {
    random_points_of::<G2Projective>(n, r)
}

/// `n` distinct random points: a[i / m] + b[i % m] for random a, b (m = sqrt n),
/// one addition each instead of one scalar multiplication each.
fn random_points_of<P>(n: usize, r: &mut ChaCha20Rng) -> Vec<P::AffineRepr>
where
    P: Curve + Send + Sync,
    P::AffineRepr: Send + Sync + Copy,
{
    let m = ((n as f64).sqrt().ceil() as usize).max(1);
    let a: Vec<P> = (0..m).map(|_| P::random(&mut *r)).collect();
    let b: Vec<P> = (0..m).map(|_| P::random(&mut *r)).collect();
    let proj: Vec<P> = (0..n)
        .into_par_iter()
        .map(|i| a[i / m] + b[i % m])
        .collect();
    let mut out = vec![P::identity().to_affine(); n];
    out.par_chunks_mut(1 << 14)
        .zip(proj.par_chunks(1 << 14))
        .for_each(|(o, p)| P::batch_normalize(p, o));
    out
}

fn naive_msm(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
    bases
        .iter()
        .zip(scalars)
        .map(|(b, s)| G1Projective::from(b) * s)
        .sum()
}

fn naive_msm_g2(bases: &[G2Affine], scalars: &[Scalar]) -> G2Projective {
    bases
        .iter()
        .zip(scalars)
        .map(|(b, s)| G2Projective::from(b) * s)
        .sum()
}

fn to_canonical(s: &Scalar) -> [u64; 4] {
    let b = s.to_repr();
    let mut l = [0u64; 4];
    for i in 0..4 {
        l[i] = u64::from_le_bytes(b.as_ref()[8 * i..8 * i + 8].try_into().unwrap());
    }
    l
}

fn bytes_of<T>(v: &[T]) -> &[u8] {
    // SAFETY: only used on plain integer arrays.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

fn download_scalars(gpu: &Gpu, buf: &CudaSlice<FrRepr>, n: usize) -> Result<Vec<Scalar>> {
    Ok(gpu.download(buf, n)?.iter().map(scalar_from_repr).collect())
}

// ---------------------------------------------------------------- field and curve

fn check_fields(gpu: &Gpu, log: &Log) -> Result<()> {
    let mut r = rng(1);
    let n = 4096;
    let mut a: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut r)).collect();
    let mut b: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut r)).collect();
    let edge = [
        Scalar::ZERO,
        Scalar::ONE,
        -Scalar::ONE,
        Scalar::from(2u64),
        -Scalar::from(2u64),
    ];
    for (i, x) in edge.iter().enumerate() {
        for (j, y) in edge.iter().enumerate() {
            a[i * 5 + j] = *x;
            b[i * 5 + j] = *y;
        }
    }
    let da = gpu.upload::<FrRepr>(scalars_as_bytes(&a))?;
    let db = gpu.upload::<FrRepr>(scalars_as_bytes(&b))?;
    let mut out = gpu.alloc_poisoned::<FrRepr>(4 * n)?;
    let nn = n as u32;
    cuzk_cuda::launch!(gpu, "fr_ops_test", grid(n, 256), &da, &db, &mut out, &nn)?;
    let got = gpu.download(&out, 4 * n)?;
    let mut bad = 0;
    for i in 0..n {
        let want = [a[i] + b[i], a[i] - b[i], a[i] * b[i]];
        for k in 0..3 {
            bad += usize::from(scalar_from_repr(&got[4 * i + k]) != want[k]);
        }
        let canon = to_canonical(&a[i]);
        let g = got[4 * i + 3].0;
        let gl: Vec<u64> = (0..4)
            .map(|j| g[2 * j] as u64 | (g[2 * j + 1] as u64) << 32)
            .collect();
        bad += usize::from(gl != canon);
    }
    log.check(
        "fr add/sub/mul/from_mont",
        bad == 0,
        &format!("{n} pairs, {bad} wrong"),
    );

    // Fq through the curve: mixed add, doubling, full add against blstrs.
    let pa = random_points(1024, &mut r);
    let mut pb = random_points(1024, &mut r);
    pb[0] = pa[0]; // P + P takes the doubling branch
    pb[1] = -pa[1]; // P + (-P) = infinity
    pb[2] = <G1Affine as group::prime::PrimeCurveAffine>::identity();
    let mut pa2 = pa.clone();
    pa2[3] = <G1Affine as group::prime::PrimeCurveAffine>::identity();
    let m = pa.len();
    let dpa = gpu.upload::<AffineRepr>(points_as_bytes(&pa2))?;
    let dpb = gpu.upload::<AffineRepr>(points_as_bytes(&pb))?;
    let mut out = gpu.alloc_poisoned::<XyzzRepr>(4 * m)?;
    let mm = m as u32;
    cuzk_cuda::launch!(gpu, "g1_ops_test", grid(m, 64), &dpa, &dpb, &mut out, &mm)?;
    let got = gpu.download(&out, 4 * m)?;
    let mut bad = 0;
    for i in 0..m {
        let p = G1Projective::from(pa2[i]);
        let q = G1Projective::from(pb[i]);
        let want = [p + q, p.double(), p + q + q, (p + q).double()];
        for k in 0..4 {
            bad += usize::from(xyzz_to_projective(&got[4 * i + k]) != want[k]);
        }
    }
    log.check(
        "g1 xyzz add/dbl (Fq mul)",
        bad == 0,
        &format!("{m} pairs, {bad} wrong"),
    );
    check_fq2_and_g2(gpu, log, &mut r)
}

/// Field product throughput (`field-bench`): Fr::mul, fr_mul_nt, and Fq's called and
/// inlined products, each thread two independent chains of products; the row for the
/// variant the modules were compiled with (`CUZK_FIELD_MUL`). The chains' ends are
/// checked on the host for the first 64 threads (x * y^iters).
fn bench_fields(gpu: &Gpu, log: &Log) -> Result<()> {
    use blst::{blst_fp, blst_fp_mul};
    let variant = cuzk_cuda::kernels::field_mul_variant();
    let mut r = rng(11);
    let threads = 132 * 8 * 256; // 8 blocks of 256 per SM of the H200
    let (block, blocks) = (256u32, (threads / 256) as u32);
    let cfg = cudarc::driver::LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    };
    let checked = 64;
    let record = |name: &str, bad: usize, ms: f64, iters: u32| {
        log.check(
            &format!("{name} chains ({variant})"),
            bad == 0,
            &format!("{checked} threads, {bad} wrong"),
        );
        let products = 2.0 * threads as f64 * iters as f64;
        log.row(
            &format!("{name} ({variant} rows)"),
            &format!("{threads} threads"),
            ms,
            format!("{:.2}e9 products/s", products / ms / 1e6),
            "",
        );
    };
    // Fr: x, y, z per thread.
    let iters_fr = 512u32;
    let fr: Vec<Scalar> = (0..3 * threads).map(|_| Scalar::random(&mut r)).collect();
    for (which, name) in [(0u32, "Fr::mul"), (1, "fr_mul_nt")] {
        let mut d = gpu.upload::<FrRepr>(scalars_as_bytes(&fr))?;
        let ms = time5(gpu, || {
            cuzk_cuda::launch!(gpu, "fr_mul_bench", cfg, &mut d, &iters_fr, &which)
        })?;
        // 6 launches so far (warm-up and 5): x * y^(6 iters).
        let got = download_scalars(gpu, &d, 3 * checked)?;
        let e = [6 * iters_fr as u64];
        let bad = (0..checked)
            .filter(|&i| {
                let yp = fr[3 * i + 1].pow_vartime(e);
                got[3 * i] != fr[3 * i] * yp || got[3 * i + 2] != fr[3 * i + 2] * yp
            })
            .count();
        record(name, bad, ms, iters_fr);
    }
    // Fq: the same with blst_fp elements (random points' coordinates are in range).
    let iters_fq = 256u32;
    let pts = random_points(threads, &mut r);
    let mut fq: Vec<blst_fp> = Vec::with_capacity(3 * threads);
    for i in 0..threads {
        let raw: &blst::blst_p1_affine = pts[i].as_ref();
        let other: &blst::blst_p1_affine = pts[(i + 1) % threads].as_ref();
        fq.extend([raw.x, raw.y, other.x]);
    }
    // SAFETY: blst_fp is six u64 limbs, 48 bytes, no padding.
    let fq_bytes = unsafe {
        std::slice::from_raw_parts(fq.as_ptr().cast::<u8>(), std::mem::size_of_val(&fq[..]))
    };
    for (which, name) in [(0u32, "Fq::mul (call)"), (1, "Fq::mul_inl")] {
        let mut d = gpu.upload::<FqRepr>(fq_bytes)?;
        let ms = time5(gpu, || {
            cuzk_cuda::launch!(gpu, "fq_mul_bench", cfg, &mut d, &iters_fq, &which)
        })?;
        let got = gpu.download(&d, 3 * checked)?;
        let as_fp = |x: &FqRepr| {
            let mut f = blst_fp::default();
            for (j, l) in f.l.iter_mut().enumerate() {
                *l = x.0[2 * j] as u64 | (x.0[2 * j + 1] as u64) << 32;
            }
            f
        };
        let bad = (0..checked)
            .filter(|&i| {
                let (mut x, y, mut z) = (fq[3 * i], fq[3 * i + 1], fq[3 * i + 2]);
                for _ in 0..6 * iters_fq {
                    // SAFETY: valid field elements in, one written out.
                    unsafe {
                        blst_fp_mul(&mut x, &x, &y);
                        blst_fp_mul(&mut z, &z, &y);
                    }
                }
                as_fp(&got[3 * i]) != x || as_fp(&got[3 * i + 2]) != z
            })
            .count();
        record(name, bad, ms, iters_fq);
    }
    Ok(())
}

/// Fq2 add/sub/mul/sqr against blst's Fp2, then G2's XYZZ formulas against blstrs.
fn check_fq2_and_g2(gpu: &Gpu, log: &Log, r: &mut ChaCha20Rng) -> Result<()> {
    use blst::{blst_fp2, blst_fp2_add, blst_fp2_cneg, blst_fp2_mul, blst_fp2_sqr, blst_fp2_sub};
    // Random Fq2 elements: the coordinates of random G2 points.
    let m = 1024;
    let pa = random_points_g2(m, r);
    let pb = random_points_g2(m, r);
    let coords = |p: &G2Affine| -> [blst_fp2; 2] {
        let raw: &blst::blst_p2_affine = p.as_ref();
        [raw.x, raw.y]
    };
    let mut a: Vec<blst_fp2> = pa.iter().flat_map(coords).collect();
    let mut b: Vec<blst_fp2> = pb.iter().flat_map(coords).collect();
    a[0] = blst_fp2::default(); // 0 · b, 0 + b
    b[1] = blst_fp2::default();
    b[2] = a[2]; // a · a = a², a - a = 0
                 // SAFETY: valid field elements in, one written out.
    unsafe { blst_fp2_cneg(&mut b[3], &a[3], true) }; // a + (-a) = 0
    b[4].fp[1] = blst::blst_fp::default(); // b real
    a[5].fp[0] = blst::blst_fp::default(); // a imaginary
    let n = a.len();
    // An Fq2 is 24 u32 limbs: the size (and alignment) of AffineRepr.
    let up = |v: &[blst_fp2]| {
        // SAFETY: blst_fp2 is two arrays of six u64, 96 bytes, no padding.
        let bytes = unsafe {
            std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v))
        };
        gpu.upload::<AffineRepr>(bytes)
    };
    let (da, db) = (up(&a)?, up(&b)?);
    let mut out = gpu.alloc_poisoned::<AffineRepr>(4 * n)?;
    let nn = n as u32;
    cuzk_cuda::launch!(gpu, "fq2_ops_test", grid(n, 128), &da, &db, &mut out, &nn)?;
    let got = gpu.download(&out, 4 * n)?;
    let to_fp2 = |x: &AffineRepr| {
        let mut f = blst_fp2::default();
        for k in 0..2 {
            for i in 0..6 {
                f.fp[k].l[i] = x.0[12 * k + 2 * i] as u64 | (x.0[12 * k + 2 * i + 1] as u64) << 32;
            }
        }
        f
    };
    let mut bad = 0;
    for i in 0..n {
        let mut want = [blst_fp2::default(); 4];
        // SAFETY: valid field elements in, one written out.
        unsafe {
            blst_fp2_add(&mut want[0], &a[i], &b[i]);
            blst_fp2_sub(&mut want[1], &a[i], &b[i]);
            blst_fp2_mul(&mut want[2], &a[i], &b[i]);
            blst_fp2_sqr(&mut want[3], &a[i]);
        }
        for k in 0..4 {
            let g = to_fp2(&got[4 * i + k]);
            bad += usize::from(g.fp[0].l != want[k].fp[0].l || g.fp[1].l != want[k].fp[1].l);
        }
    }
    log.check(
        "fq2 add/sub/mul/sqr",
        bad == 0,
        &format!("{n} pairs, {bad} wrong"),
    );

    // G2 through the curve: mixed add, doubling, full add against blstrs.
    let mut pb = pb;
    let mut pa2 = pa.clone();
    pb[0] = pa[0];
    pb[1] = -pa[1];
    pb[2] = G2Affine::default();
    pa2[3] = G2Affine::default();
    let dpa = gpu.upload::<Affine2Repr>(g2_points_as_bytes(&pa2))?;
    let dpb = gpu.upload::<Affine2Repr>(g2_points_as_bytes(&pb))?;
    let mut out = gpu.alloc_poisoned::<Xyzz2Repr>(4 * m)?;
    let mm = m as u32;
    cuzk_cuda::launch!(gpu, "g2_ops_test", grid(m, 64), &dpa, &dpb, &mut out, &mm)?;
    let got = gpu.download(&out, 4 * m)?;
    let mut bad = 0;
    for i in 0..m {
        let p = G2Projective::from(pa2[i]);
        let q = G2Projective::from(pb[i]);
        let want = [p + q, p.double(), p + q + q, (p + q).double()];
        for k in 0..4 {
            bad += usize::from(xyzz2_to_projective(&got[4 * i + k]) != want[k]);
        }
    }
    log.check(
        "g2 xyzz add/dbl (Fq2 mul)",
        bad == 0,
        &format!("{m} pairs, {bad} wrong"),
    );
    Ok(())
}

// ---------------------------------------------------------------- NTT

fn check_ntt(
    gpu: &Gpu,
    ntt: &Ntt,
    log: &Log,
    pool: &rayon::ThreadPool,
    max_log: u32,
) -> Result<()> {
    let mut r = rng(2);
    let mut logs: Vec<u32> = (0..=12).collect();
    logs.extend(
        [14, 16, 18, 20, 22, 24, 26]
            .into_iter()
            .filter(|&l| l <= max_log),
    );
    for lg in logs {
        let n = 1usize << lg;
        let input = if lg <= 18 {
            (0..n).map(|_| Scalar::random(&mut r)).collect::<Vec<_>>()
        } else {
            fast_scalars(n, r.next_u64())
        };
        let dom = cuzk_gpu_backend::ntt::Domain::new(lg).map_err(|e| anyhow!("{e}"))?;
        let variants: &[(Direction, bool, &str)] = if lg <= 20 {
            &[
                (Direction::Forward, false, "fft"),
                (Direction::Inverse, false, "ifft"),
                (Direction::Forward, true, "coset_fft"),
                (Direction::Inverse, true, "icoset_fft"),
            ]
        } else {
            &[
                (Direction::Forward, false, "fft"),
                (Direction::Inverse, true, "icoset_fft"),
            ]
        };
        for &(dir, coset, name) in variants {
            let mut want = input.clone();
            match (dir, coset) {
                (Direction::Forward, false) => dom.fft(&mut want, pool),
                (Direction::Inverse, false) => dom.ifft(&mut want, pool),
                (Direction::Forward, true) => dom.coset_fft(&mut want, pool),
                (Direction::Inverse, true) => dom.icoset_fft(&mut want, pool),
            }
            .map_err(|e| anyhow!("{e}"))?;
            for kernel in KERNELS {
                ntt.set_kernel(kernel);
                let mut d = gpu.upload::<FrRepr>(scalars_as_bytes(&input))?;
                let r = ntt.ntt(gpu, &mut d, lg, dir, coset);
                ntt.set_kernel(NttKernel::from_env());
                r?;
                let got = download_scalars(gpu, &d, n)?;
                let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count();
                log.check(
                    &format!("ntt {name} 2^{lg} {}", kernel_name(kernel)),
                    bad == 0,
                    &format!("{bad} of {n} wrong"),
                );
            }
        }
    }
    Ok(())
}

/// Every NTT pass kernel is checked on every visit (same results bit for bit).
const KERNELS: [NttKernel; NttKernel::ALL.len()] = NttKernel::ALL;

fn kernel_name(k: NttKernel) -> &'static str {
    k.name()
}

fn check_h(gpu: &Gpu, ntt: &Ntt, log: &Log, pool: &rayon::ThreadPool, max_log: u32) -> Result<()> {
    let mut r = rng(3);
    let mut sizes: Vec<usize> = (1..=33).collect();
    sizes.extend([1000, (1 << 16) + 1, (1 << 20) - 3]);
    if max_log >= 24 {
        sizes.push((1 << 24) - 1000);
    }
    for n in sizes {
        let (a, b, c) = if n <= 1 << 16 {
            (
                heavy_scalars(n, &mut r),
                heavy_scalars(n, &mut r),
                heavy_scalars(n, &mut r),
            )
        } else {
            (
                fast_scalars(n, r.next_u64()),
                fast_scalars(n, r.next_u64()),
                fast_scalars(n, r.next_u64()),
            )
        };
        let mut got_all = Vec::new();
        for kernel in KERNELS {
            ntt.set_kernel(kernel);
            let h = ntt.compute_h(gpu, &a, &b, &c);
            ntt.set_kernel(NttKernel::from_env());
            let h = h?;
            got_all.push((kernel, download_scalars(gpu, &h, h.len())?));
        }
        let want =
            cuzk_gpu_backend::compute_h(Abc { a, b, c }, pool).map_err(|e| anyhow!("{e}"))?;
        for (kernel, got) in got_all {
            let got = &got[..want.len().min(got.len())];
            let bad = got.iter().zip(&want).filter(|(x, y)| x != y).count();
            log.check(
                &format!("compute_h n={n} {}", kernel_name(kernel)),
                bad == 0 && got.len() == want.len(),
                &format!("{bad} of {} wrong", want.len()),
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- MSM

/// One MSM case on either curve: Montgomery scalars with the identity map and the
/// default window, then (if `indexed`) canonical scalars through a reversed index map
/// with windows of 3, 8 and 13 bits, each against `want`.
#[allow(clippy::too_many_arguments)]
fn check_msm_of<A: cuzk_cuda::gpu::CurvePoint>(
    gpu: &Gpu,
    log: &Log,
    bases: &CudaSlice<A>,
    scalars: &[Scalar],
    want: <A::Curve as cuzk_cuda::gpu::DeviceCurve>::Projective,
    name: &str,
    kind: &str,
    indexed: bool,
) -> Result<()> {
    let n = scalars.len();
    let ds = gpu.upload::<FrRepr>(scalars_as_bytes(scalars))?;
    let got = msm::msm(
        gpu,
        bases,
        &ds,
        n,
        ScalarFormat::Montgomery,
        None,
        MsmPlan::for_size(n),
    )?
    .finish(gpu)?;
    log.check(&format!("{name} {kind} n={n}"), got == want, "");
    if indexed {
        let idx: Vec<u32> = (0..n as u32).rev().collect();
        let canon: Vec<[u64; 4]> = idx
            .iter()
            .map(|&i| to_canonical(&scalars[i as usize]))
            .collect();
        let di = gpu.upload::<u32>(bytes_of(&idx))?;
        let dc = gpu.upload::<FrRepr>(bytes_of(&canon))?;
        for c in [3u32, 8, 13] {
            let got = msm::msm(
                gpu,
                bases,
                &dc,
                n,
                ScalarFormat::Canonical,
                Some(&di),
                MsmPlan::for_window(c),
            )?
            .finish(gpu)?;
            log.check(
                &format!("{name} indexed c={c} {kind} n={n}"),
                got == want,
                "",
            );
        }
    }
    Ok(())
}

fn check_msm(gpu: &Gpu, log: &Log, pool: &rayon::ThreadPool, max_log: u32) -> Result<()> {
    let mut r = rng(4);
    let big = 1usize << max_log;
    let t = Instant::now();
    let mut points = random_points(big, &mut r);
    // Parameter vectors may hold the point at infinity; so do these.
    for i in (5..points.len().min(4096)).step_by(97) {
        points[i] = <G1Affine as group::prime::PrimeCurveAffine>::identity();
    }
    log.line(&format!(
        "  {} random bases in {:.1?}",
        points.len(),
        t.elapsed()
    ));
    let dbases = gpu.upload::<AffineRepr>(points_as_bytes(&points))?;
    // Where the section's time goes (it is the longest of a visit).
    let clock = Instant::now();
    let mark = |part: &str| log.line(&format!("  msm: {part} done at {:.1?}", clock.elapsed()));

    let mut cases: Vec<(usize, bool)> = (1..=33).flat_map(|n| [(n, false), (n, true)]).collect();
    for lg in [8, 12, 16, 20, 22, 24]
        .into_iter()
        .filter(|&l| l <= max_log)
    {
        cases.push((1 << lg, false));
        if lg <= 20 {
            cases.push((1 << lg, true));
        }
    }
    for (n, heavy) in cases {
        let scalars = if heavy {
            heavy_scalars(n, &mut r)
        } else if n <= 1 << 16 {
            (0..n).map(|_| Scalar::random(&mut r)).collect()
        } else {
            fast_scalars(n, r.next_u64())
        };
        let want = if n <= 64 {
            naive_msm(&points[..n], &scalars)
        } else {
            cuzk_msm_cpu::msm_g1(&points[..n], &scalars, pool)?
        };
        let kind = if heavy { "0/1-heavy" } else { "random" };
        check_msm_of(gpu, log, &dbases, &scalars, want, "msm", kind, n <= 1 << 16)?;
    }

    mark("sizes 1..=33 and powers of two");
    // Skewed digit distributions: every scalar equal (each window's points all in one
    // bucket), and small scalars (everything in the low windows).
    for n in [1000usize, 1 << 16, 1 << 20]
        .into_iter()
        .filter(|&n| n <= big)
    {
        let s = Scalar::random(&mut r);
        let equal = vec![s; n];
        let small: Vec<Scalar> = (0..n)
            .map(|_| Scalar::from(r.gen_range(2..64u64)))
            .collect();
        let random = fast_scalars(n, r.next_u64());
        for (kind, scalars) in [("equal", equal), ("small", small), ("random", random)] {
            let want = cuzk_msm_cpu::msm_g1(&points[..n], &scalars, pool)?;
            let ds = gpu.upload::<FrRepr>(scalars_as_bytes(&scalars))?;
            // The default, an odd window, the wide windows of large MSMs, and balanced
            // pieces (of 64 and of 32 points).
            let plans = [15, 20, 22].map(MsmPlan::for_window).into_iter().chain([
                MsmPlan::for_size(n),
                MsmPlan::for_size(n).with_pieces(64, true),
                MsmPlan::for_window(20).with_pieces(32, true),
                MsmPlan::for_window(13).with_pieces(7, true),
            ]);
            // The batch-affine rounds too, every round affine (min 1 pair per thread)
            // and handing over to the XYZZ levels after a few (min 2): equal scalars
            // give every window one bucket of n points (log2 n rounds in one bucket).
            // And in window groups of 2^10 entries (a window per group), as the
            // large MSMs go.
            // The rounds invert by the binary GCD (the default) but for the last
            // variant, Fermat's (CUZK_FQ_INV=fermat).
            let variants = [
                (SumVariant::CalledProducts, 1, 1u64 << 30, true),
                (SumVariant::BatchAffine, 1, 1 << 30, true),
                (SumVariant::BatchAffine, 2, 1 << 30, true),
                (SumVariant::BatchAffine, 2, 1 << 10, true),
                (SumVariant::BatchAffine, 1, 1 << 30, false),
            ];
            for (plan, (v, min_per, group, gcd)) in plans.flat_map(|p| variants.map(|v| (p, v))) {
                let before = (
                    msm::sum_variant(),
                    msm::batch_affine_min_per(),
                    msm::batch_affine_group_entries(),
                );
                msm::set_sum_variant(v);
                msm::set_batch_affine_min_per(min_per);
                msm::set_batch_affine_group_entries(group);
                gpu.set_device_flag("cuzk_fq_inv_gcd", gcd.into())?;
                let t = Instant::now();
                let got = msm::msm(gpu, &dbases, &ds, n, ScalarFormat::Montgomery, None, plan)
                    .and_then(|p| p.finish(gpu));
                let took = t.elapsed();
                gpu.set_device_flag("cuzk_fq_inv_gcd", fq_inverse_gcd_by_default().into())?;
                msm::set_sum_variant(before.0);
                msm::set_batch_affine_min_per(before.1);
                msm::set_batch_affine_group_entries(before.2);
                log.check(
                    &format!(
                        "msm {kind} {v:?} (min {min_per}, groups {group}, {} inverse) c={} piece={}{} n={n}",
                        if gcd { "gcd" } else { "Fermat" },
                        plan.c,
                        plan.piece,
                        if plan.balanced { " balanced" } else { "" }
                    ),
                    got? == want,
                    &format!("({took:.1?})"),
                );
            }
        }
        mark(&format!("skewed digits n={n}"));
    }

    // Ones and the whole split against cuzk-msm-cpu's split_msm_g1.
    let sizes: Vec<usize> = (1..=33)
        .chain([1000, 1 << 16, 1 << 20])
        .filter(|&n| n <= big)
        .collect();
    check_ones_and_splits::<G1>(
        gpu,
        log,
        &mut r,
        pool,
        &points,
        &dbases,
        &sizes,
        "",
        |p, s, pool| Ok(cuzk_msm_cpu::split_msm_g1(p, s, pool)?),
    )?;
    mark("ones and splits");
    check_ones_affine(gpu, log, &mut r, &points, &dbases)?;
    mark("batch-affine ones");
    // Every bucket-sum kernel (SumVariant) on the same inputs.
    let default_variant = msm::sum_variant();
    for n in [33usize, 1 << 12, 1 << 20]
        .into_iter()
        .filter(|&n| n <= big)
    {
        let scalars = fast_scalars(n, r.next_u64());
        let want = cuzk_msm_cpu::msm_g1(&points[..n], &scalars, pool)?;
        let ds = gpu.upload::<FrRepr>(scalars_as_bytes(&scalars))?;
        for v in [
            SumVariant::Inline,
            SumVariant::CalledProducts,
            SumVariant::CalledFormula,
            SumVariant::CalledProductsByRef,
            SumVariant::BatchAffine,
        ] {
            msm::set_sum_variant(v);
            let got = msm::msm(
                gpu,
                &dbases,
                &ds,
                n,
                ScalarFormat::Montgomery,
                None,
                MsmPlan::for_size(n),
            )?
            .finish(gpu)?;
            log.check(&format!("msm sum kernel {v:?} n={n}"), got == want, "");
        }
    }
    msm::set_sum_variant(default_variant);
    Ok(())
}

/// The G2 MSM (`msm_g2` module) against cuzk-msm-cpu's msm_g2 / split_msm_g2 (a naive
/// sum for n <= 64): n = 1..=33 and 2^8..2^max_log, random and 0/1-heavy scalars,
/// indexed canonical scalars with other windows, equal scalars, ones and the split.
fn check_msm_g2(gpu: &Gpu, log: &Log, pool: &rayon::ThreadPool, max_log: u32) -> Result<()> {
    let mut r = rng(7);
    let big = 1usize << max_log;
    let t = Instant::now();
    let mut points = random_points_g2(big, &mut r);
    for i in (5..points.len().min(4096)).step_by(97) {
        points[i] = G2Affine::default();
    }
    log.line(&format!(
        "  {} random G2 bases in {:.1?}",
        points.len(),
        t.elapsed()
    ));
    let dbases = gpu.upload::<Affine2Repr>(g2_points_as_bytes(&points))?;

    let mut cases: Vec<(usize, bool)> = (1..=33).flat_map(|n| [(n, false), (n, true)]).collect();
    for lg in [8, 12, 16, 18, 20].into_iter().filter(|&l| l <= max_log) {
        cases.push((1 << lg, false));
        if lg <= 16 {
            cases.push((1 << lg, true));
        }
    }
    for (n, heavy) in cases {
        let scalars: Vec<Scalar> = if heavy {
            heavy_scalars(n, &mut r)
        } else if n <= 1 << 16 {
            (0..n).map(|_| Scalar::random(&mut r)).collect()
        } else {
            fast_scalars(n, r.next_u64())
        };
        let want = if n <= 64 {
            naive_msm_g2(&points[..n], &scalars)
        } else {
            cuzk_msm_cpu::msm_g2(&points[..n], &scalars, pool)?
        };
        let kind = if heavy { "0/1-heavy" } else { "random" };
        check_msm_of(
            gpu,
            log,
            &dbases,
            &scalars,
            want,
            "g2 msm",
            kind,
            n <= 1 << 12,
        )?;
    }

    // Every scalar equal: each window's points all in one bucket.
    for n in [1000usize, 1 << 16].into_iter().filter(|&n| n <= big) {
        let scalars = vec![Scalar::random(&mut r); n];
        let want = cuzk_msm_cpu::msm_g2(&points[..n], &scalars, pool)?;
        let ds = gpu.upload::<FrRepr>(scalars_as_bytes(&scalars))?;
        let plan = MsmPlan::for_size(n);
        let got =
            msm::msm(gpu, &dbases, &ds, n, ScalarFormat::Montgomery, None, plan)?.finish(gpu)?;
        log.check(&format!("g2 msm equal c={} n={n}", plan.c), got == want, "");
    }

    // Ones and the whole split against split_msm_g2.
    let sizes: Vec<usize> = (1..=33)
        .chain([1000, 1 << 16])
        .filter(|&n| n <= big)
        .collect();
    check_ones_and_splits::<G2>(
        gpu,
        log,
        &mut r,
        pool,
        &points,
        &dbases,
        &sizes,
        "g2 ",
        |p, s, pool| Ok(cuzk_msm_cpu::split_msm_g2(p, s, pool)?),
    )?;
    Ok(())
}

/// prep_msm's ones (`ones_sum`) and the whole split (ones + the tails' MSM) of curve
/// C on the device, against the CPU's split MSM `cpu_split`, for 0/1-heavy scalars of
/// each size; check names start with `label`.
#[allow(clippy::too_many_arguments)]
fn check_ones_and_splits<C: DeviceCurve>(
    gpu: &Gpu,
    log: &Log,
    r: &mut ChaCha20Rng,
    pool: &rayon::ThreadPool,
    points: &[C::HostAffine],
    dbases: &CudaSlice<C::Affine>,
    sizes: &[usize],
    label: &str,
    cpu_split: impl Fn(&[C::HostAffine], &SplitScalars, &rayon::ThreadPool) -> Result<C::Projective>,
) -> Result<()>
where
    C::Projective: From<C::HostAffine> + std::iter::Sum,
{
    for &n in sizes {
        let scalars = heavy_scalars(n, r);
        let split = cuzk_msm_cpu::prep_msm(&[], None, &scalars, None, pool)?;
        let want = cpu_split(&points[..n], &split, pool)?;
        let words = split.ones().words();
        let dw = gpu.upload::<u64>(bytes_of(words))?;
        let ones = msm::ones_sum(gpu, dbases, &dw, words.len(), split.num_bases())?.finish(gpu)?;
        let want_ones: C::Projective = split
            .ones()
            .iter_ones()
            .map(|i| C::Projective::from(points[i]))
            .sum();
        log.check(&format!("{label}ones n={n}"), ones == want_ones, "");
        let t = split.tail_indices().len();
        let di = gpu.upload::<u32>(bytes_of(split.tail_indices()))?;
        let dc = gpu.upload::<FrRepr>(bytes_of(split.tail_scalars()))?;
        let tail = msm::msm(
            gpu,
            dbases,
            &dc,
            t,
            ScalarFormat::Canonical,
            Some(&di),
            MsmPlan::for_size(t),
        )?
        .finish(gpu)?;
        log.check(
            &format!("{label}split ones+tail n={n}"),
            ones + tail == want,
            &format!("tail {t}"),
        );
    }
    Ok(())
}

/// G1's ones by batch-affine rounds (msm::ones_sum's compaction and one-bucket
/// rounds), forced at every size by a minimum of 1 pair per thread, against the
/// host's sum: bitmaps random, full, empty, one bit, and with bits set past
/// `n_bases` in the last word (which must not count).
fn check_ones_affine(
    gpu: &Gpu,
    log: &Log,
    r: &mut ChaCha20Rng,
    points: &[G1Affine],
    dbases: &CudaSlice<AffineRepr>,
) -> Result<()> {
    let before = msm::batch_affine_min_per();
    msm::set_batch_affine_min_per(1);
    let result = (|| -> Result<()> {
        for n in [1usize, 2, 3, 63, 64, 65, 1000, 4097, (1 << 16) + 5, 1 << 20] {
            let n = n.min(points.len());
            let nw = n.div_ceil(64);
            let random: Vec<u64> = (0..nw).map(|_| r.next_u64()).collect();
            let mut one = vec![0u64; nw];
            one[(n - 1) / 64] = 1 << ((n - 1) % 64);
            for (kind, words) in [
                ("random", random),
                ("full", vec![u64::MAX; nw]),
                ("empty", vec![0u64; nw]),
                ("last bit only", one),
            ] {
                let dw = gpu.upload::<u64>(bytes_of(&words))?;
                let got = msm::ones_sum(gpu, dbases, &dw, nw, n)?.finish(gpu)?;
                let want: G1Projective = (0..n)
                    .filter(|&i| words[i / 64] >> (i % 64) & 1 == 1)
                    .map(|i| G1Projective::from(points[i]))
                    .sum();
                log.check(&format!("batch-affine ones {kind} n={n}"), got == want, "");
            }
        }
        Ok(())
    })();
    msm::set_batch_affine_min_per(before);
    result
}

// ---------------------------------------------------------------- whole partition

fn check_partition(
    backend: &CudaBackend,
    streamed: &CudaBackend,
    log: &Log,
    pool: Arc<rayon::ThreadPool>,
) -> Result<()> {
    let mut r = rng(5);
    let cpu = CpuBackend::new(pool.clone());
    for (n, inputs, aux) in [
        (1usize, 1usize, 3usize),
        (17, 2, 20),
        (33, 3, 40),
        (3000, 4, 5000),
        ((1 << 18) - 7, 5, 300_000),
    ] {
        let abc = Abc {
            a: heavy_scalars(n, &mut r),
            b: heavy_scalars(n, &mut r),
            c: heavy_scalars(n, &mut r),
        };
        let mut inp = heavy_scalars(inputs, &mut r);
        inp[0] = Scalar::ONE;
        let auxv = heavy_scalars(aux, &mut r);
        let mut a_aux = Density::new(aux);
        let mut b_aux = Density::new(aux);
        let mut b_in = Density::new(inputs);
        b_in.set(0);
        for i in 0..aux {
            if r.gen_bool(0.9) {
                a_aux.set(i);
            }
            if r.gen_bool(0.3) {
                b_aux.set(i);
            }
        }
        let l_split = cuzk_msm_cpu::prep_msm(&[], None, &auxv, None, &pool)?;
        let a_split = cuzk_msm_cpu::prep_msm(&inp, None, &auxv, Some(&a_aux), &pool)?;
        let b_split = cuzk_msm_cpu::prep_msm(&inp, Some(&b_in), &auxv, Some(&b_aux), &pool)?;
        let big = 1usize << cuzk_cuda::log_domain(n);
        let h_bases = random_points(big - 1, &mut r);
        let l_bases = random_points(l_split.num_bases(), &mut r);
        let a_bases = random_points(a_split.num_bases(), &mut r);
        let b_bases = random_points(b_split.num_bases(), &mut r);
        let b2_bases = random_points_g2(b_split.num_bases(), &mut r);
        let job = |abc: Abc, g2: bool| PartitionJob {
            abc,
            h_bases: &h_bases,
            l: SplitMsm {
                bases: &l_bases,
                split: &l_split,
            },
            a: SplitMsm {
                bases: &a_bases,
                split: &a_split,
            },
            b_g1: SplitMsm {
                bases: &b_bases,
                split: &b_split,
            },
            b_g2: g2.then_some(SplitMsm {
                bases: &b2_bases,
                split: &b_split,
            }),
        };
        // With B in G2 on the device (b_g2_on_backend), against the CPU backend's
        // split_msm_g2.
        let want = cpu
            .prove_partition(job(abc.clone(), true))
            .map_err(|e| anyhow!("{e}"))?;
        let got = backend
            .prove_partition(job(abc.clone(), true))
            .map_err(|e| anyhow!("{e}"))?;
        log.check(
            &format!("prove_partition n={n}"),
            got == want && got.b_g2.is_some(),
            "with b_g2",
        );
        // Every base vector streamed from host memory in chunks of 960 points
        // (several chunks at the larger shapes, chunk edges cutting the tails).
        let got_streamed = streamed
            .prove_partition(job(abc.clone(), true))
            .map_err(|e| anyhow!("{e}"))?;
        log.check(
            &format!("prove_partition streamed n={n}"),
            got_streamed == want,
            "bases streamed in chunks of 960",
        );
        // Second run hits the resident bases (G1 and G2).
        let again = backend
            .prove_partition(job(abc.clone(), true))
            .map_err(|e| anyhow!("{e}"))?;
        log.check(&format!("prove_partition cached n={n}"), again == want, "");
        // Without b_g2 (the CPU pool runs it): the same G1 sums and no G2 sum.
        let g1_only = backend
            .prove_partition(job(abc.clone(), false))
            .map_err(|e| anyhow!("{e}"))?;
        let want_g1 = cuzk_gpu_backend::PartitionResult {
            b_g2: None,
            ..want.clone()
        };
        log.check(
            &format!("prove_partition no b_g2 n={n}"),
            g1_only == want_g1,
            "",
        );
        // Other points in the same memory (a parameter set unloaded and another
        // loaded where it was): the cached device copy must not be used.
        let mut l_bases = l_bases;
        let fresh = random_points(l_bases.len(), &mut r);
        l_bases.copy_from_slice(&fresh);
        let job = |abc: Abc| PartitionJob {
            abc,
            h_bases: &h_bases,
            l: SplitMsm {
                bases: &l_bases,
                split: &l_split,
            },
            a: SplitMsm {
                bases: &a_bases,
                split: &a_split,
            },
            b_g1: SplitMsm {
                bases: &b_bases,
                split: &b_split,
            },
            b_g2: None,
        };
        let want = cpu
            .prove_partition(job(abc.clone()))
            .map_err(|e| anyhow!("{e}"))?;
        let got = backend
            .prove_partition(job(abc))
            .map_err(|e| anyhow!("{e}"))?;
        log.check(
            &format!("prove_partition n={n}, L's bases changed in place"),
            got == want,
            "",
        );
    }
    backend.evict_bases();
    if backend.cached_base_bytes() != 0 {
        log.check("evict_bases", false, "bases left after evict_bases");
    }
    Ok(())
}

// ---------------------------------------------------------------- benchmarks

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time5(gpu: &Gpu, mut f: impl FnMut() -> Result<(), CudaError>) -> Result<f64> {
    gpu.time_ms(&mut f)?; // warm-up
    let mut v = Vec::new();
    for _ in 0..5 {
        v.push(gpu.time_ms(&mut f)? as f64);
    }
    Ok(median(v))
}

/// The G1 MSM rows of the table and, unless `table_only`, the bucket-sum kernels,
/// the batch-affine windows, one profiled run per size and (with `sweeps`) the
/// piece and window sweeps that picked msm.rs's defaults.
fn bench_msm(
    gpu: &Gpu,
    log: &Log,
    r: &mut ChaCha20Rng,
    dsc: &CudaSlice<FrRepr>,
    max_msm: u32,
    table_only: bool,
    tuning: bool,
) -> Result<()> {
    // MSM: 2^16 distinct points replicated on the device; random scalars.
    let distinct = random_points(1 << 16, r);
    let dsrc = gpu.upload::<AffineRepr>(points_as_bytes(&distinct))?;
    let mut bases = gpu.alloc_poisoned::<AffineRepr>(1 << max_msm)?;
    msm::replicate_bases(gpu, &dsrc, &mut bases)?;
    let peers = [(20, "21.2"), (22, "53.4"), (24, "155"), (26, "606")];
    for (lg, peer) in peers.into_iter().filter(|(l, _)| *l <= max_msm) {
        let n = 1usize << lg;
        let plan = MsmPlan::for_size(n);
        let ms = time5(gpu, || {
            let p = msm::msm(gpu, &bases, dsc, n, ScalarFormat::Montgomery, None, plan)?;
            p.finish(gpu).map(|_| ())
        })?;
        log.row(
            "G1 MSM",
            &format!("2^{lg}"),
            ms,
            format!("{:.1} ns/pt, c={}", ms * 1e6 / n as f64, plan.c),
            peer,
        );
    }
    // The bucket-sum kernels (how the hot mixed addition is compiled) at the default
    // and two fixed windows, then window sweeps, then one profiled run per size: the
    // numbers that pick msm.rs's defaults.
    let timed = |n: usize, plan: MsmPlan| {
        time5(gpu, || {
            msm::msm(gpu, &bases, dsc, n, ScalarFormat::Montgomery, None, plan)?
                .finish(gpu)
                .map(|_| ())
        })
    };
    let default_variant = msm::sum_variant();
    let sweeps = if table_only { vec![] } else { vec![24u32, 26] };
    for lg in sweeps.into_iter().map(|l| l.min(max_msm)) {
        let n = 1usize << lg;
        // The all-inlined and called-formula kernels, 1.3x and 2x slower in every
        // visit so far, only with --sweeps.
        let variants = [
            SumVariant::CalledProducts,
            SumVariant::CalledProductsByRef,
            SumVariant::BatchAffine,
        ]
        .into_iter()
        .chain(
            [SumVariant::Inline, SumVariant::CalledFormula]
                .into_iter()
                .filter(|_| tuning),
        );
        for v in variants {
            msm::set_sum_variant(v);
            for plan in [MsmPlan::for_size(n), MsmPlan::for_window(16)] {
                let ms = timed(n, plan)?;
                log.line(&format!(
                    "BENCH msm sum kernel {v:?} 2^{lg} c={}: {ms:.2} ms",
                    plan.c
                ));
            }
        }
        msm::set_sum_variant(default_variant);
        // Batch-affine rounds at other windows (their per-bucket work differs).
        msm::set_sum_variant(SumVariant::BatchAffine);
        for c in [16u32, 18, 20, 22] {
            let plan = MsmPlan::for_window(c);
            let ms = timed(n, plan)?;
            log.line(&format!(
                "BENCH msm batch-affine 2^{lg} c={c} ({} windows): {ms:.2} ms",
                plan.nwin
            ));
        }
        // How many rounds stay affine before the XYZZ levels take over.
        let min_default = msm::batch_affine_min_per();
        for min_per in [16u64, 64, 128, 256] {
            msm::set_batch_affine_min_per(min_per);
            let plan = MsmPlan::for_size(n);
            let ms = timed(n, plan)?;
            log.line(&format!(
                "BENCH msm batch-affine 2^{lg} c={} min {min_per} pairs/thread: {ms:.2} ms",
                plan.c
            ));
        }
        msm::set_batch_affine_min_per(min_default);
        // The rounds' inversion by Fermat instead of the binary GCD
        // (CUZK_FQ_INV=fermat), at the default round limit and at 64 and 128 (where
        // Fermat was best).
        gpu.set_device_flag("cuzk_fq_inv_gcd", 0)?;
        for min_per in [min_default, 64, 128] {
            msm::set_batch_affine_min_per(min_per);
            let plan = MsmPlan::for_size(n);
            let ms = timed(n, plan)?;
            log.line(&format!(
                "BENCH msm batch-affine 2^{lg} c={} min {min_per} pairs/thread, Fermat inverse: {ms:.2} ms",
                plan.c
            ));
        }
        gpu.set_device_flag("cuzk_fq_inv_gcd", fq_inverse_gcd_by_default().into())?;
        msm::set_batch_affine_min_per(min_default);
        msm::set_sum_variant(default_variant);
        for c in [16u32, 19, 20].into_iter().filter(|_| tuning) {
            for (piece, balanced) in [(64u32, false), (64, true), (32, true), (32, false)] {
                let plan = MsmPlan::for_window(c).with_pieces(piece, balanced);
                let ms = timed(n, plan)?;
                log.line(&format!(
                    "BENCH msm pieces 2^{lg} c={c} piece={piece} balanced={balanced}: {ms:.2} ms"
                ));
            }
        }
        for c in [16u32, 18, 19, 20, 21, 22].into_iter().filter(|_| tuning) {
            let plan = MsmPlan::for_window(c);
            let ms = timed(n, plan)?;
            log.line(&format!(
                "BENCH msm window sweep 2^{lg} c={c} ({} windows): {ms:.2} ms",
                plan.nwin
            ));
        }
        cuzk_cuda::profile::set_enabled(true);
        for v in [default_variant, SumVariant::BatchAffine] {
            msm::set_sum_variant(v);
            for plan in [MsmPlan::for_size(n), MsmPlan::for_window(16)] {
                msm::msm(gpu, &bases, dsc, n, ScalarFormat::Montgomery, None, plan)?.finish(gpu)?;
            }
        }
        msm::set_sum_variant(default_variant);
        cuzk_cuda::profile::set_enabled(false);
        for rep in cuzk_cuda::profile::take() {
            log.line(&format!("BENCH phases {rep}"));
        }
    }
    drop(bases);
    Ok(())
}

/// G1 MSM (`msm-bench`, see bench_msm) and G2 MSM (`g2-bench`) timings.
/// `table_only`: the table's rows without the tuning sweeps (sum kernels, pieces,
/// windows, profiles, the CPU G2 context).
#[allow(clippy::too_many_arguments)]
fn bench(
    gpu: &Gpu,
    log: &Log,
    pool: &rayon::ThreadPool,
    quick: bool,
    table_only: bool,
    sweeps: bool,
    on: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let mut r = rng(6);
    let max_msm = if quick { 22 } else { 26 };
    let all_scalars = fast_scalars(1 << max_msm, r.next_u64());
    let dsc = gpu.upload::<FrRepr>(scalars_as_bytes(&all_scalars))?;
    drop(all_scalars);
    if on("msm-bench") {
        bench_msm(gpu, log, &mut r, &dsc, max_msm, table_only, sweeps)?;
    }

    // G2 MSM: 2^14 distinct random points replicated on the device, the same random
    // scalars; then cuzk-msm-cpu's msm_g2 at the same sizes on this host's threads
    // (once each, bases replicated the same way) for context.
    let distinct2 = random_points_g2(1 << 14, &mut r);
    let dsrc2 = gpu.upload::<Affine2Repr>(g2_points_as_bytes(&distinct2))?;
    let max_g2 = 22usize;
    let mut bases2 = gpu.alloc_poisoned::<Affine2Repr>(1 << max_g2)?;
    msm::replicate_bases(gpu, &dsrc2, &mut bases2)?;
    for lg in [20usize, 22].into_iter().filter(|_| on("g2-bench")) {
        let n = 1usize << lg;
        let plan = MsmPlan::for_size(n);
        let ms = time5(gpu, || {
            let p = msm::msm(gpu, &bases2, &dsc, n, ScalarFormat::Montgomery, None, plan)?;
            p.finish(gpu).map(|_| ())
        })?;
        log.row(
            "G2 MSM",
            &format!("2^{lg}"),
            ms,
            format!("{:.1} ns/pt, c={}", ms * 1e6 / n as f64, plan.c),
            "-",
        );
    }
    drop(bases2);
    let host_scalars = fast_scalars(1 << max_g2, r.next_u64());
    let host_bases: Vec<G2Affine> = (0..1usize << max_g2)
        .into_par_iter()
        .map(|i| distinct2[i % distinct2.len()])
        .collect();
    let context = if table_only || !on("g2-bench") {
        vec![]
    } else {
        vec![20usize, 22]
    };
    for lg in context {
        let n = 1usize << lg;
        let t = Instant::now();
        cuzk_msm_cpu::msm_g2(&host_bases[..n], &host_scalars[..n], pool)?;
        log.line(&format!(
            "BENCH cpu msm_g2 2^{lg}: {:.1} ms ({} threads, once)",
            t.elapsed().as_secs_f64() * 1e3,
            pool.current_num_threads()
        ));
    }
    drop(host_bases);
    drop(dsc);
    Ok(())
}

/// NTT (every kernel, per pass at 2^24 and 2^27) and H timings: its own section
/// (`--skip msm-bench` leaves the MSM timings out of an NTT visit). `table_only`:
/// the default kernel's rows only.
fn bench_ntt(
    gpu: &Gpu,
    ntt: &Ntt,
    log: &Log,
    quick: bool,
    table_only: bool,
    on: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let mut r = rng(7);
    // NTT: forward, natural order in and out, data already on the device.
    let max_ntt = if quick { 24 } else { 27 };
    let data = fast_scalars(1 << max_ntt, r.next_u64());
    let mut d = gpu.upload::<FrRepr>(scalars_as_bytes(&data))?;
    drop(data);
    for (lg, peer) in [(20, "0.28"), (24, "4.75"), (26, "23.8"), (27, "44.4")]
        .into_iter()
        .filter(|(l, _)| *l <= max_ntt && on("ntt-bench"))
    {
        // The table rows are the default kernel; BENCH lines compare all of them.
        for kernel in KERNELS {
            if table_only && kernel != NttKernel::from_env() {
                continue;
            }
            ntt.set_kernel(kernel);
            let r = (|| -> Result<(f64, f64, f64, Vec<String>)> {
                let full = time5(gpu, || ntt.ntt(gpu, &mut d, lg, Direction::Forward, false))?;
                let dif = time5(gpu, || ntt.dif(gpu, &mut d, lg, Direction::Forward))?;
                let dit = time5(gpu, || ntt.dit(gpu, &mut d, lg, Direction::Inverse))?;
                // Each pass of the kernel alone (where the time goes).
                let mut per_pass = Vec::new();
                if !table_only && (lg == 24 || lg == 27) {
                    for (i, (lo, k, c, _)) in Ntt::passes(lg).into_iter().enumerate() {
                        let dif = time5(gpu, || {
                            ntt.run_pass(gpu, &mut d, lg, i, false, Direction::Forward)
                        })?;
                        let dit = time5(gpu, || {
                            ntt.run_pass(gpu, &mut d, lg, i, true, Direction::Forward)
                        })?;
                        per_pass.push(format!(
                            "BENCH ntt {} 2^{lg} pass {i} (lo {lo}, k {k}, c {c}): dif {dif:.3} ms, dit {dit:.3} ms",
                            kernel_name(kernel)
                        ));
                    }
                }
                Ok((full, dif, dit, per_pass))
            })();
            ntt.set_kernel(NttKernel::from_env());
            let (ms, dif, dit, per_pass) = r?;
            let kn = kernel_name(kernel);
            log.line(&format!(
                "BENCH ntt {kn} 2^{lg}: fwd {ms:.3} ms, dif-only {dif:.3} ms, dit-only {dit:.3} ms"
            ));
            if kernel == NttKernel::from_env() {
                log.row(
                    &format!("NTT fwd ({kn} kernel)"),
                    &format!("2^{lg}"),
                    ms,
                    format!("{:.2} ns/elem", ms * 1e6 / (1u64 << lg) as f64),
                    peer,
                );
            }
            for l in per_pass {
                log.line(&l);
            }
        }
    }
    drop(d);

    // H: the whole chain from host a, b, c (upload, 6 transforms, combine) to h on
    // the device, wall clock with the stream synchronised: with a, b, c page-locked
    // by the call (12 GiB at 2^27: the registration is most of it), then registered
    // beforehand, as the engine stages them before its GPU lock.
    for lg in [24u32, 27]
        .into_iter()
        .filter(|&l| l <= max_ntt && on("h-bench"))
    {
        let n = 1usize << lg;
        let a = fast_scalars(n, r.next_u64());
        let b = fast_scalars(n, r.next_u64());
        let c = fast_scalars(n, r.next_u64());
        let timed_h = || -> Result<f64> {
            let mut v = Vec::new();
            for i in 0..6 {
                let t = Instant::now();
                let h = ntt.compute_h(gpu, &a, &b, &c)?;
                gpu.sync()?;
                drop(h);
                if i > 0 {
                    v.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
            Ok(median(v))
        };
        let per = |ms: f64| format!("{:.2} ns/elem", ms * 1e6 / n as f64);
        let ms = timed_h()?;
        log.row(
            "H (pinned by the call + upload + NTTs)",
            &format!("2^{lg}"),
            ms,
            per(ms),
            "-",
        );
        let mut regs = Vec::new();
        for v in [&a, &b, &c] {
            // SAFETY: a, b, c outlive `regs`, dropped right after the timing.
            regs.push(unsafe {
                cuzk_cuda::raw::HostRegistration::new(gpu.context(), scalars_as_bytes(v))
            }?);
        }
        let ms = timed_h()?;
        drop(regs);
        log.row(
            "H (pre-staged: upload + NTTs)",
            &format!("2^{lg}"),
            ms,
            per(ms),
            "-",
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- partition bench

/// A PoRep-shaped aux vector: 95.7% of the values 0 or 1 (the share of the real
/// partition's SHA-256/Poseidon bit gadgets that `PorepLike` reproduces), the rest
/// uniform.
fn porep_aux(n: usize, seed: u64) -> Vec<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(1 << 16).enumerate().for_each(|(ci, ch)| {
        let mut r = ChaCha20Rng::seed_from_u64(seed ^ (ci as u64) << 20);
        for s in ch {
            match r.gen_range(0..1000u32) {
                0..=479 => {}
                480..=956 => *s = Scalar::ONE,
                _ => {
                    let mut l = [0u32; 8];
                    for x in &mut l {
                        *x = r.next_u32();
                    }
                    l[7] &= 0x0fff_ffff;
                    *s = scalar_from_repr(&FrRepr(l));
                }
            }
        }
    });
    v
}

/// `len` bases cycling through `distinct` (timing needs the memory and the sizes,
/// not independent points).
fn cycle_bases(distinct: &[G1Affine], len: usize) -> Vec<G1Affine> {
    (0..len)
        .into_par_iter()
        .map(|i| distinct[i % distinct.len()])
        .collect()
}

/// The GPU region of one PoRep-shaped partition of 2^lg constraints through
/// `CudaBackend::prove_partition_ref` — H (upload a, b, c and the NTT chain), the H
/// MSM, and ones + tails for L, A and B_G1 — with every base vector already resident
/// (the first call uploads them and is not timed). The real partition's shape:
/// 328 public inputs, aux ≈ 99.9% of the domain, A holding 99.7% of the aux, B 25.4%
/// and only ONE among the inputs. Timed twice: with a, b, c page-locked by the call
/// itself, and with them registered beforehand (the engine's pre-staging).
fn bench_partition(
    backend: &CudaBackend,
    streamed: Option<&CudaBackend>,
    log: &Log,
    pool: &Arc<rayon::ThreadPool>,
    lg: u32,
) -> Result<()> {
    let t = Instant::now();
    let mut r = rng(7 + lg as u64);
    let n = 1usize << lg;
    let inputs = 328usize;
    let aux_n = n - n / 1000 - inputs;
    let abc = Abc {
        a: fast_scalars(n, r.next_u64()),
        b: fast_scalars(n, r.next_u64()),
        c: fast_scalars(n, r.next_u64()),
    };
    let mut inp = fast_scalars(inputs, r.next_u64());
    inp[0] = Scalar::ONE;
    let aux = porep_aux(aux_n, r.next_u64());
    let mut a_aux = Density::new(aux_n);
    let mut b_aux = Density::new(aux_n);
    let mut b_in = Density::new(inputs);
    b_in.set(0);
    for i in 0..aux_n {
        let x = r.next_u32() % 1000;
        if x < 997 {
            a_aux.set(i);
        }
        if x < 254 {
            b_aux.set(i);
        }
    }
    let l_split = cuzk_msm_cpu::prep_msm(&[], None, &aux, None, pool)?;
    let a_split = cuzk_msm_cpu::prep_msm(&inp, None, &aux, Some(&a_aux), pool)?;
    let b_split = cuzk_msm_cpu::prep_msm(&inp, Some(&b_in), &aux, Some(&b_aux), pool)?;
    drop(aux);
    let distinct = random_points(1 << 16, &mut r);
    let h_bases = cycle_bases(&distinct, n - 1);
    let l_bases = cycle_bases(&distinct, l_split.num_bases());
    let a_bases = cycle_bases(&distinct, a_split.num_bases());
    let b_bases = cycle_bases(&distinct, b_split.num_bases());
    let tails = [&l_split, &a_split, &b_split].map(|s| s.tail_indices().len());
    log.line(&format!(
        "  partition 2^{lg}: inputs made in {:.1?}; tails L/A/B = {:?}, bases {:.1} GiB",
        t.elapsed(),
        tails,
        (h_bases.len() + l_bases.len() + a_bases.len() + b_bases.len()) as f64 * 96.0
            / (1u64 << 30) as f64
    ));
    let job = || cuzk_gpu_backend::PartitionJobRef {
        abc: cuzk_gpu_backend::AbcRef {
            a: &abc.a,
            b: &abc.b,
            c: &abc.c,
        },
        h_bases: &h_bases,
        l: SplitMsm {
            bases: &l_bases,
            split: &l_split,
        },
        a: SplitMsm {
            bases: &a_bases,
            split: &a_split,
        },
        b_g1: SplitMsm {
            bases: &b_bases,
            split: &b_split,
        },
        b_g2: None,
    };
    let t = Instant::now();
    backend
        .prove_partition_ref(job())
        .map_err(|e| anyhow!("{e}"))?;
    log.line(&format!(
        "  partition 2^{lg}: first call (uploads the bases) {:.1?}",
        t.elapsed()
    ));
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        backend
            .prove_partition_ref(job())
            .map_err(|e| anyhow!("{e}"))?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let ms = median(times);
    log.row(
        "PoRep-shaped partition, GPU region (a, b, c pinned by the call)",
        &format!("2^{lg}"),
        ms,
        format!("{:.2} ns/constraint", ms * 1e6 / n as f64),
        "-",
    );
    // Pre-staged: a, b, c registered before the call (the backend finds them so).
    let ctx = backend.with_gpu(|gpu, _| gpu.context().clone());
    let mut regs = Vec::new();
    let t = Instant::now();
    for v in [&abc.a, &abc.b, &abc.c] {
        // SAFETY: `abc` outlives `regs`, dropped at the end of this function.
        regs.push(unsafe { cuzk_cuda::raw::HostRegistration::new(&ctx, scalars_as_bytes(v)) }?);
    }
    let pin_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        backend
            .prove_partition_ref(job())
            .map_err(|e| anyhow!("{e}"))?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    cuzk_cuda::profile::set_enabled(true);
    backend
        .prove_partition_ref(job())
        .map_err(|e| anyhow!("{e}"))?;
    cuzk_cuda::profile::set_enabled(false);
    for rep in cuzk_cuda::profile::take() {
        log.line(&format!("BENCH phases {rep}"));
    }
    // The same partition with its bases streamed from host memory (the path of GPUs
    // smaller than the parameters), a, b, c still pre-staged. The untimed first call
    // also allocates the backend's pinned staging buffers (kept across partitions).
    if let Some(sb) = streamed {
        let t = Instant::now();
        sb.prove_partition_ref(job()).map_err(|e| anyhow!("{e}"))?;
        let warm = sb.take_stream_stats();
        log.line(&format!(
            "  partition 2^{lg} streamed: first call (pins {:.2} GiB of staging buffers) {:.1?}",
            warm.pinned_bytes as f64 / (1u64 << 30) as f64,
            t.elapsed()
        ));
        let mut st = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            sb.prove_partition_ref(job()).map_err(|e| anyhow!("{e}"))?;
            st.push(t.elapsed().as_secs_f64() * 1e3);
        }
        // Host side of the timed calls: the copies into the staging buffers and the
        // waits for a buffer's previous DMA (per call, averaged).
        let s = sb.take_stream_stats();
        let calls = st.len() as f64;
        let copy_ms = s.host_copy.as_secs_f64() * 1e3 / calls;
        log.line(&format!(
            "BENCH streamed 2^{lg}: per call {} chunks, {:.2} GiB, host copy {copy_ms:.1} ms \
             ({:.1} GB/s), host waits for DMA {:.1} ms; {:.2} GiB pinned",
            s.chunks as f64 / calls,
            s.bytes as f64 / calls / (1u64 << 30) as f64,
            s.bytes as f64 / calls / 1e6 / copy_ms.max(1e-9),
            s.host_wait.as_secs_f64() * 1e3 / calls,
            s.pinned_bytes as f64 / (1u64 << 30) as f64,
        ));
        let ms = median(st);
        log.row(
            "PoRep-shaped partition, GPU region (pre-staged, bases streamed via pinned double buffers, warmed up)",
            &format!("2^{lg}"),
            ms,
            format!("{:.2} ns/constraint", ms * 1e6 / n as f64),
            "-",
        );
    }
    drop(regs);
    let ms = median(times);
    log.row(
        "PoRep-shaped partition, GPU region (a, b, c pre-staged)",
        &format!("2^{lg}"),
        ms,
        format!(
            "{:.2} ns/constraint; pinning took {pin_ms:.0} ms",
            ms * 1e6 / n as f64
        ),
        "-",
    );
    backend.evict_bases();
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--compile-only") {
        // Stage kernels without a device: `--compile-only DIR [ARCH]` writes every
        // module's CUBIN into DIR (scripts/stage-device.sh ships them in `kernels/`
        // beside the binaries, so the device spends no time in NVRTC).
        let dir = args
            .get(i + 1)
            .map(PathBuf::from)
            .ok_or_else(|| anyhow!("--compile-only needs a folder"))?;
        let arch = args.get(i + 2).cloned().unwrap_or_else(|| "sm_90".into());
        for m in cuzk_cuda::kernels::MODULES {
            let t = Instant::now();
            let path = cuzk_cuda::KernelCache::compile_into(&dir, &m, &arch)?;
            println!(
                "{} for {arch}: {} in {:.1?}",
                m.name,
                path.display(),
                t.elapsed()
            );
        }
        return Ok(());
    }
    if let Some(i) = args.iter().position(|a| a == "--seed") {
        let seed = args
            .get(i + 1)
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| anyhow!("--seed needs a number"))?;
        let _ = SEED.set(seed);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let table_only = args.iter().any(|a| a == "--table-only");
    let no_bench = args.iter().any(|a| a == "--no-bench");
    let no_check = args.iter().any(|a| a == "--no-check");
    let sweeps = args.iter().any(|a| a == "--sweeps");
    // --skip fields,ntt,h,msm,partition: leave sections out of this visit.
    let skip: Vec<String> = args
        .iter()
        .position(|a| a == "--skip")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let on = |name: &str| !skip.iter().any(|s| s == name);
    // The one positional argument: what follows no option that takes a value.
    let takes_value = |a: &str| a == "--seed" || a == "--skip";
    let out = PathBuf::from(
        args.iter()
            .enumerate()
            .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || !takes_value(&args[i - 1])))
            .map(|(_, a)| a)
            .next()
            .cloned()
            .unwrap_or_else(|| "gpu-check-out".into()),
    );
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let log = Log {
        file: Mutex::new(std::fs::File::create(out.join("gpu-check.log"))?),
        failures: Mutex::new(Vec::new()),
        checks: Mutex::new(0),
        table: Mutex::new(Vec::new()),
    };
    let t0 = Instant::now();
    let backend = match CudaBackend::new(CudaConfig::default()) {
        Ok(b) => b,
        Err(CudaError::NoDevice(why)) => {
            // A check run that found no device checked nothing: say so, and fail.
            log.line(&format!("no CUDA device ({why}): nothing was checked"));
            std::process::exit(2);
        }
        Err(e) => return Err(e.into()),
    };
    let caps = backend.capabilities();
    log.line(&format!(
        "device: {:?}; opened + kernels ready in {:.2?}",
        caps.devices,
        t0.elapsed()
    ));
    log.line(&format!(
        "seed {} (--seed {} replays this run's inputs)",
        run_seed(),
        run_seed()
    ));
    let pool = pool();
    let (max_msm, max_ntt) = if quick { (20, 22) } else { (24, 26) };
    // A section that errors out is logged as a failure and the run goes on, so one
    // visit to the GPU machine reports on everything.
    let section = |name: &str, r: Result<()>| {
        if let Err(e) = r {
            log.check(&format!("{name} (aborted)"), false, &format!("{e:#}"));
        }
        log.line(&format!("{name} done at {:.1?}", t0.elapsed()));
    };
    if !no_check {
        if on("fields") {
            section("fields", backend.with_gpu(|gpu, _| check_fields(gpu, &log)));
        }
        if on("ntt") {
            section(
                "ntt",
                backend.with_gpu(|gpu, ntt| check_ntt(gpu, ntt, &log, &pool, max_ntt)),
            );
        }
        if on("h") {
            section(
                "h",
                backend.with_gpu(|gpu, ntt| check_h(gpu, ntt, &log, &pool, max_ntt)),
            );
        }
        if on("msm") {
            section(
                "msm",
                backend.with_gpu(|gpu, _| check_msm(gpu, &log, &pool, max_msm)),
            );
        }
        if on("g2") {
            section(
                "g2",
                backend.with_gpu(|gpu, _| check_msm_g2(gpu, &log, &pool, max_msm.min(18))),
            );
        }
        if on("partition") {
            let streamed = CudaBackend::new(CudaConfig {
                bases: BasePlacement::Streamed { chunk_bases: 1000 },
                ..CudaConfig::default()
            })?;
            section(
                "partition",
                check_partition(&backend, &streamed, &log, pool.clone()),
            );
        }
    }
    if !no_bench && on("field-bench") {
        section(
            "field bench",
            backend.with_gpu(|gpu, _| bench_fields(gpu, &log)),
        );
    }
    if !no_bench && (on("msm-bench") || on("g2-bench")) {
        section(
            "bench",
            backend.with_gpu(|gpu, _| bench(gpu, &log, &pool, quick, table_only, sweeps, &on)),
        );
    }
    if !no_bench && (on("ntt-bench") || on("h-bench")) {
        section(
            "ntt bench",
            backend.with_gpu(|gpu, ntt| bench_ntt(gpu, ntt, &log, quick, table_only, &on)),
        );
    }
    if !no_bench && on("partition-bench") {
        // Streamed bases timed at the smaller size only (pageable uploads of the
        // whole 39 GiB set per 2^27 partition would take most of a visit).
        let streamed = CudaBackend::new(CudaConfig {
            bases: BasePlacement::Streamed {
                chunk_bases: 1 << 22,
            },
            ..CudaConfig::default()
        })?;
        for lg in if quick { vec![20u32] } else { vec![24u32, 27] } {
            let sb = (lg <= 24).then_some(&streamed);
            section(
                &format!("partition bench 2^{lg}"),
                bench_partition(&backend, sb, &log, &pool, lg),
            );
        }
    }
    let failures = log.failures.lock().unwrap().clone();
    let checks = *log.checks.lock().unwrap();
    let mut table = String::new();
    writeln!(
        table,
        "| what | size | median ms | per element | sppark peer ms |"
    )?;
    writeln!(table, "|---|---|---|---|---|")?;
    for row in log.table.lock().unwrap().iter() {
        writeln!(
            table,
            "| {} | {} | {} | {} | {} |",
            row[0], row[1], row[2], row[3], row[4]
        )?;
    }
    std::fs::write(out.join("table.md"), &table)?;
    log.line(&format!(
        "\n{} checks, {} failed ({})",
        checks,
        failures.len(),
        failures.join(", ")
    ));
    log.line(&table);
    log.line(&format!("total {:.1?}", t0.elapsed()));
    if !failures.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
