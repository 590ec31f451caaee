//! The device checks: every kernel against the CPU implementation on fresh random
//! inputs (and 0/1-heavy ones), output buffers poisoned first: the bodies of the
//! `tests/device.rs` tests.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Result};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::CudaSlice;
use cuzk_alloc::{Abc, Density};
use cuzk_cuda::testing::gpu::{
    g2_points_as_bytes, points_as_bytes, scalar_from_repr, scalars_as_bytes, xyzz2_to_projective,
    xyzz_to_projective, Affine2Repr, AffineRepr, DeviceCurve, FrRepr, Gpu, Xyzz2Repr, XyzzRepr, G1,
    G2,
};
use cuzk_cuda::testing::msm::{self, MsmPlan, ScalarFormat, SumVariant};
use cuzk_cuda::testing::ntt::{Direction, HBuffers, Ntt, NttKernel};
use cuzk_cuda::{CudaBackend, CudaConfig, Tuning};
use cuzk_gpu_backend::{CpuBackend, GpuBackend, PartitionJob, SplitMsm, SplitScalars};
use ff::Field;
use group::Group;
use rand::{Rng, RngCore};
use rand_chacha::ChaCha20Rng;

use crate::common::*;

/// The bucket sums the MSM checks run, as (variant, least pairs per thread of a
/// batch-affine round, entries of a window group): the XYZZ levels; every round
/// affine (min 1); handing over to the levels after a few (min 2); and in window
/// groups of 2^10 entries (a window per group), as the large MSMs go.
const SUM_VARIANTS: [(SumVariant, u64, u64); 4] = [
    (SumVariant::CalledProducts, 1, 1 << 30),
    (SumVariant::BatchAffine, 1, 1 << 30),
    (SumVariant::BatchAffine, 2, 1 << 30),
    (SumVariant::BatchAffine, 2, 1 << 10),
];

// ---------------------------------------------------------------- field and curve

pub fn check_fields(gpu: &Gpu, log: &Log) -> Result<()> {
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
    gpu.fr_ops_test(&da, &db, &mut out, n)?;
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
    gpu.g1_ops_test(&dpa, &dpb, &mut out, m)?;
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

/// Fq2 add/sub/mul/sqr against blst's Fp2, then G2's XYZZ formulas against blstrs.
pub fn check_fq2_and_g2(gpu: &Gpu, log: &Log, r: &mut ChaCha20Rng) -> Result<()> {
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
    gpu.fq2_ops_test(&da, &db, &mut out, n)?;
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
    gpu.g2_ops_test(&dpa, &dpb, &mut out, m)?;
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

pub fn check_ntt(
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
                ntt.set_kernel(NttKernel::DEFAULT);
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
pub fn check_h(
    gpu: &Gpu,
    ntt: &Ntt,
    log: &Log,
    pool: &rayon::ThreadPool,
    max_log: u32,
) -> Result<()> {
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
            for buffers in [HBuffers::Three, HBuffers::Two] {
                ntt.set_kernel(kernel);
                let h = ntt.compute_h(gpu, &a, &b, &c, buffers);
                ntt.set_kernel(NttKernel::DEFAULT);
                let h = h?;
                got_all.push((kernel, buffers, download_scalars(gpu, &h, h.len())?));
            }
        }
        let want =
            cuzk_gpu_backend::compute_h(Abc { a, b, c }, pool).map_err(|e| anyhow!("{e}"))?;
        for (kernel, buffers, got) in got_all {
            let got = &got[..want.len().min(got.len())];
            let bad = got.iter().zip(&want).filter(|(x, y)| x != y).count();
            log.check(
                &format!(
                    "compute_h n={n} {} {} buffers",
                    kernel_name(kernel),
                    buffers.name()
                ),
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
pub fn check_msm_of<A: cuzk_cuda::testing::gpu::CurvePoint>(
    gpu: &Gpu,
    tuning: &Tuning,
    log: &Log,
    bases: &CudaSlice<A>,
    scalars: &[Scalar],
    want: <A::Curve as cuzk_cuda::testing::gpu::DeviceCurve>::Projective,
    name: &str,
    kind: &str,
    indexed: bool,
) -> Result<()> {
    let n = scalars.len();
    let ds = gpu.upload::<FrRepr>(scalars_as_bytes(scalars))?;
    let got = msm::msm(
        gpu,
        tuning,
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
                tuning,
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

/// `tuning`: the backend's, which the checks vary (SUM_VARIANTS) one MSM at a time.
pub fn check_msm(
    gpu: &Gpu,
    tuning: &Tuning,
    log: &Log,
    pool: &rayon::ThreadPool,
    max_log: u32,
) -> Result<()> {
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
        check_msm_of(
            gpu,
            tuning,
            log,
            &dbases,
            &scalars,
            want,
            "msm",
            kind,
            n <= 1 << 16,
        )?;
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
            // Every bucket sum of SUM_VARIANTS: equal scalars give every window one
            // bucket of n points (log2 n rounds in one bucket).
            for (plan, (v, min_per, group)) in plans.flat_map(|p| SUM_VARIANTS.map(|v| (p, v))) {
                let varied = tuning.with_msm(
                    tuning
                        .msm
                        .with_sum(v)
                        .with_ba_min_per(min_per)
                        .with_ba_group_entries(group),
                );
                let t = Instant::now();
                let got = msm::msm(
                    gpu,
                    &varied,
                    &dbases,
                    &ds,
                    n,
                    ScalarFormat::Montgomery,
                    None,
                    plan,
                )
                .and_then(|p| p.finish(gpu));
                let took = t.elapsed();
                log.check(
                    &format!(
                        "msm {kind} {v:?} (min {min_per}, groups {group}) c={} piece={}{} n={n}",
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
        tuning,
        log,
        &mut r,
        pool,
        &points,
        &dbases,
        &sizes,
        "",
        |p, s, pool| Ok(cuzk_msm_cpu::split_msm_g1(p, s.as_ref(), pool)?),
    )?;
    mark("ones and splits");
    check_ones_affine::<G1>(gpu, tuning, log, &mut r, &points, &dbases, "")?;
    mark("batch-affine ones");
    // Every bucket-sum kernel (SumVariant) on the same inputs.
    for n in [33usize, 1 << 12, 1 << 20]
        .into_iter()
        .filter(|&n| n <= big)
    {
        let scalars = fast_scalars(n, r.next_u64());
        let want = cuzk_msm_cpu::msm_g1(&points[..n], &scalars, pool)?;
        let ds = gpu.upload::<FrRepr>(scalars_as_bytes(&scalars))?;
        for v in [SumVariant::CalledProducts, SumVariant::BatchAffine] {
            let varied = tuning.with_msm(tuning.msm.with_sum(v));
            let got = msm::msm(
                gpu,
                &varied,
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
    Ok(())
}

/// The G2 MSM (`msm_g2` module) against cuzk-msm-cpu's msm_g2 / split_msm_g2 (a naive
/// sum for n <= 64): n = 1..=33 and 2^8..2^max_log, random and 0/1-heavy scalars,
/// indexed canonical scalars with other windows, equal scalars, ones and the split.
pub fn check_msm_g2(
    gpu: &Gpu,
    tuning: &Tuning,
    log: &Log,
    pool: &rayon::ThreadPool,
    max_log: u32,
) -> Result<()> {
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
            tuning,
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
        let got = msm::msm(
            gpu,
            tuning,
            &dbases,
            &ds,
            n,
            ScalarFormat::Montgomery,
            None,
            plan,
        )?
        .finish(gpu)?;
        log.check(&format!("g2 msm equal c={} n={n}", plan.c), got == want, "");
    }

    // G2's bucket sums (`msm_sum_g2`), every one of SUM_VARIANTS: random, equal
    // (one bucket of n points a window) and 0/1-heavy scalars, and the identity
    // among the bases (every 97th of the first 4096).
    for n in [2usize, 33, 1000, 1 << 12, 1 << 16]
        .into_iter()
        .filter(|&n| n <= big)
    {
        let random: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut r)).collect();
        let equal = vec![Scalar::random(&mut r); n];
        let heavy = heavy_scalars(n, &mut r);
        for (kind, scalars) in [("random", random), ("equal", equal), ("0/1-heavy", heavy)] {
            let want = if n <= 64 {
                naive_msm_g2(&points[..n], &scalars)
            } else {
                cuzk_msm_cpu::msm_g2(&points[..n], &scalars, pool)?
            };
            let ds = gpu.upload::<FrRepr>(scalars_as_bytes(&scalars))?;
            for (v, min_per, group) in SUM_VARIANTS {
                let varied = tuning.with_msm(
                    tuning
                        .msm
                        .with_sum_g2(v)
                        .with_ba_min_per(min_per)
                        .with_ba_group_entries(group),
                );
                let plan = MsmPlan::for_size(n);
                let got = msm::msm(
                    gpu,
                    &varied,
                    &dbases,
                    &ds,
                    n,
                    ScalarFormat::Montgomery,
                    None,
                    plan,
                )
                .and_then(|p| p.finish(gpu));
                log.check(
                    &format!(
                        "g2 msm {kind} {v:?} (min {min_per}, groups {group}) c={} n={n}",
                        plan.c
                    ),
                    got? == want,
                    "",
                );
            }
        }
    }
    check_ones_affine::<G2>(gpu, tuning, log, &mut r, &points, &dbases, "g2 ")?;

    // Ones and the whole split against split_msm_g2.
    let sizes: Vec<usize> = (1..=33)
        .chain([1000, 1 << 16])
        .filter(|&n| n <= big)
        .collect();
    check_ones_and_splits::<G2>(
        gpu,
        tuning,
        log,
        &mut r,
        pool,
        &points,
        &dbases,
        &sizes,
        "g2 ",
        |p, s, pool| Ok(cuzk_msm_cpu::split_msm_g2(p, s.as_ref(), pool)?),
    )?;
    Ok(())
}

/// prep_msm's ones (`ones_sum`) and the whole split (ones + the tails' MSM) of curve
/// C on the device, against the CPU's split MSM `cpu_split`, for 0/1-heavy scalars of
/// each size; check names start with `label`.
#[allow(clippy::too_many_arguments)]
pub fn check_ones_and_splits<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &Tuning,
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
        let ones = msm::ones_sum(
            gpu,
            &tuning.msm,
            dbases,
            &dw,
            words.len(),
            split.num_bases(),
        )?
        .finish(gpu)?;
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
            tuning,
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
#[allow(clippy::too_many_arguments)]
pub fn check_ones_affine<C: DeviceCurve>(
    gpu: &Gpu,
    tuning: &Tuning,
    log: &Log,
    r: &mut ChaCha20Rng,
    points: &[C::HostAffine],
    dbases: &CudaSlice<C::Affine>,
    label: &str,
) -> Result<()>
where
    C::Projective: From<C::HostAffine> + std::iter::Sum,
{
    let every_round = tuning.msm.with_ba_min_per(1);
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
                let got = msm::ones_sum(gpu, &every_round, dbases, &dw, nw, n)?.finish(gpu)?;
                let want: C::Projective = (0..n)
                    .filter(|&i| words[i / 64] >> (i % 64) & 1 == 1)
                    .map(|i| C::Projective::from(points[i]))
                    .sum();
                log.check(
                    &format!("{label}batch-affine ones {kind} n={n}"),
                    got == want,
                    "",
                );
            }
        }
        Ok(())
    })();
    result
}

// ---------------------------------------------------------------- whole partition

/// The host bytes of a vector, as `forget_bases` takes them.
fn host_range<T>(v: &[T]) -> std::ops::Range<usize> {
    let at = v.as_ptr() as usize;
    at..at + std::mem::size_of_val(v)
}

pub fn check_partition(
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
        // The largest: big enough that H's third buffer outweighs a small
        // chunk's MSM scratch, so that a tight budget takes two H buffers
        // (`footprint`'s the_least_placement_takes_two_h_buffers; at 2^18 it never
        // does, and the visit of 2026-12-07 found none there).
        ((1 << 20) - 7, 5, 1_200_000),
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
                split: l_split.as_ref(),
            },
            a: SplitMsm {
                bases: &a_bases,
                split: a_split.as_ref(),
            },
            b_g1: SplitMsm {
                bases: &b_bases,
                split: b_split.as_ref(),
            },
            b_g2: g2.then_some(SplitMsm {
                bases: &b2_bases,
                split: b_split.as_ref(),
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
        // Freed at the end of this round: forgotten first, as the engine makes it
        // (streamed sets stay page-locked where they lie until then).
        streamed.forget_bases(&[
            host_range(&h_bases),
            host_range(&l_bases),
            host_range(&a_bases),
            host_range(&b_bases),
            host_range(&b2_bases),
        ]);
        // Tight device budgets (the largest shape: a small card's placements on a
        // small partition): some sets resident and the others streamed, then H
        // in two buffers with everything streamed; each against the CPU.
        if n > 1 << 17 {
            let view = cuzk_gpu_backend::PartitionJobRef {
                abc: cuzk_gpu_backend::AbcRef {
                    a: &abc.a,
                    b: &abc.b,
                    c: &abc.c,
                },
                h_bases: &h_bases,
                l: SplitMsm {
                    bases: &l_bases,
                    split: l_split.as_ref(),
                },
                a: SplitMsm {
                    bases: &a_bases,
                    split: a_split.as_ref(),
                },
                b_g1: SplitMsm {
                    bases: &b_bases,
                    split: b_split.as_ref(),
                },
                b_g2: Some(SplitMsm {
                    bases: &b2_bases,
                    split: b_split.as_ref(),
                }),
            };
            let full = backend.device_budget();
            let mut partial = None;
            let mut two = None;
            // Budgets shrinking by 1/32 from the whole-resident need.
            let start = match backend.placement(&view, full) {
                Ok(p) => p.need,
                Err(need) => need,
            };
            let mut budget = start;
            while budget > start / 64 && (partial.is_none() || two.is_none()) {
                if let Ok(p) = backend.placement(&view, budget) {
                    let kept = p.resident.iter().filter(|r| **r).count();
                    if p.chunk.is_some() && kept > 0 && partial.is_none() {
                        partial = Some((budget, p));
                    }
                    if p.h_buffers == cuzk_cuda::testing::ntt::HBuffers::Two && two.is_none() {
                        two = Some((budget, p));
                    }
                }
                budget -= start / 32;
            }
            // Two H buffers fit only in a window about one H buffer wide, which
            // steps of start/32 can miss: at the least any placement needs, every
            // set streams and H takes two buffers (its transforms being the larger
            // phase at this size).
            if two.is_none() {
                if let Err(least) = backend.placement(&view, 0) {
                    if let Ok(p) = backend.placement(&view, least) {
                        if p.h_buffers == cuzk_cuda::testing::ntt::HBuffers::Two {
                            two = Some((least, p));
                        }
                    }
                }
            }
            log.check(
                &format!("placements n={n}: partial residency and two H buffers found"),
                partial.is_some() && two.is_some(),
                &format!("partial {partial:?}, two {two:?}"),
            );
            for (what, case) in [("partially resident", partial), ("two H buffers", two)] {
                let Some((budget, p)) = case else { continue };
                let tight = CudaBackend::new(CudaConfig::default())?;
                tight.limit_device_budget(budget);
                let got = tight
                    .prove_partition(job(abc.clone(), true))
                    .map_err(|e| anyhow!("{e}"))?;
                let stats = tight.take_stream_stats();
                log.check(
                    &format!("prove_partition {what} n={n}"),
                    got == want,
                    &format!(
                        "budget {budget}: resident {:?}, chunk {:?}, H in {} buffers; {} chunks, {} bytes DMA'd in place",
                        p.resident,
                        p.chunk,
                        p.h_buffers.name(),
                        stats.chunks,
                        stats.direct_bytes
                    ),
                );
                // The same through the staging copies (`stream_staging = "copy"`).
                let copying = CudaBackend::new(CudaConfig {
                    stream_staging: cuzk_cuda::StreamStaging::Copy,
                    ..CudaConfig::default()
                })?;
                copying.limit_device_budget(budget);
                let got = copying
                    .prove_partition(job(abc.clone(), true))
                    .map_err(|e| anyhow!("{e}"))?;
                log.check(
                    &format!("prove_partition {what}, staged copies n={n}"),
                    got == want && copying.take_stream_stats().direct_bytes == 0,
                    "",
                );
            }
        }
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
                split: l_split.as_ref(),
            },
            a: SplitMsm {
                bases: &a_bases,
                split: a_split.as_ref(),
            },
            b_g1: SplitMsm {
                bases: &b_bases,
                split: b_split.as_ref(),
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
