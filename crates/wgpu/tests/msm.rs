//! The G1 MSM on a wgpu device against blstrs and the CPU backend, and its Fp and
//! G1 arithmetic in small kernels against blst.
//!
//! Run: `VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json cargo test -p cuzk-wgpu`
//! (Mesa's lavapipe; see `common` for what happens without an adapter).

mod common;

use blstrs::{G1Affine, G1Projective, Scalar};
use common::{gpu, msm as shared_msm, run_kernel, Gpu};
use cuzk_alloc::{Density, SplitScalars};
use cuzk_wgpu::msm::testing::{affine_words, fp_wgsl, uses_int64, xyzz_to_projective, G1_WGSL};
use cuzk_wgpu::msm::{G1Msm, MsmConfig, MsmError};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// r - 1, the largest scalar.
const R_MINUS_1: [u64; 4] = [
    0xffff_ffff_0000_0000,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

fn limbs(s: &Scalar) -> [u64; 4] {
    let b = s.to_bytes_le();
    std::array::from_fn(|k| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().unwrap()))
}

fn scalar(l: &[u64; 4]) -> Scalar {
    Option::from(Scalar::from_u64s_le(l)).expect("a canonical scalar")
}

/// Distinct random points, cheaply: a walk over sums of 16 random points.
fn points(n: usize, rng: &mut ChaCha8Rng) -> Vec<G1Affine> {
    let seeds: Vec<G1Projective> = (0..16).map(|_| G1Projective::random(&mut *rng)).collect();
    let mut acc = G1Projective::random(&mut *rng);
    let proj: Vec<G1Projective> = (0..n)
        .map(|_| {
            acc += seeds[(rng.next_u32() % 16) as usize];
            acc
        })
        .collect();
    let mut out = vec![G1Affine::identity(); n];
    G1Projective::batch_normalize(&proj, &mut out);
    out
}

fn random_scalars(n: usize, rng: &mut ChaCha8Rng) -> Vec<[u64; 4]> {
    (0..n).map(|_| limbs(&Scalar::random(&mut *rng))).collect()
}

/// The sum one term at a time: the reference for small inputs.
fn naive(bases: &[G1Affine], scalars: &[[u64; 4]]) -> G1Projective {
    bases
        .iter()
        .zip(scalars)
        .map(|(b, s)| G1Projective::from(b) * scalar(s))
        .sum()
}

fn multi_exp(bases: &[G1Affine], scalars: &[[u64; 4]]) -> G1Projective {
    let proj: Vec<G1Projective> = bases.iter().map(G1Projective::from).collect();
    let s: Vec<Scalar> = scalars.iter().map(scalar).collect();
    G1Projective::multi_exp(&proj, &s)
}

fn gpu_msm(g: &Gpu, msm: &G1Msm, bases: &[G1Affine], scalars: &[[u64; 4]]) -> G1Projective {
    let d = msm.upload(&g.device, &g.queue, bases).unwrap();
    msm.msm(&g.device, &g.queue, &d, scalars).unwrap()
}

// ---- Fp ----------------------------------------------------------------------

/// The word-product variants `g` runs: 16-bit halves always, u64 where the
/// device has SHADER_INT64 (lavapipe does).
fn variants(g: &Gpu) -> Vec<bool> {
    let mut v = vec![false];
    if g.device.features().contains(wgpu::Features::SHADER_INT64) {
        v.push(true);
    }
    v
}

const FP_KERNEL: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<u32>;
@group(0) @binding(1) var<storage, read> b: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

fn load(which: u32, i: u32) -> Fp {
    var x: Fp;
    for (var k = 0u; k < 12u; k++) {
        if which == 0u { x[k] = a[i * 12u + k]; } else { x[k] = b[i * 12u + k]; }
    }
    return x;
}

fn store(slot: u32, x: Fp) {
    for (var k = 0u; k < 12u; k++) { out[slot * 12u + k] = x[k]; }
}

@compute @workgroup_size(64)
fn fp_ops(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= arrayLength(&a) / 12u { return; }
    let x = load(0u, i);
    let y = load(1u, i);
    store(6u * i, fp_mul(x, y));
    store(6u * i + 1u, fp_add(x, y));
    store(6u * i + 2u, fp_sub(x, y));
    store(6u * i + 3u, fp_sqr(x));
    store(6u * i + 4u, fp_neg(x));
    var flags = Fp();
    flags[0] = select(0u, 1u, fp_is_zero(x));
    flags[1] = select(0u, 1u, fp_eq(x, y));
    store(6u * i + 5u, flags);
}

@compute @workgroup_size(64)
fn wide(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= arrayLength(&a) { return; }
    let p = mul_wide(a[i], b[i]);
    out[2u * i] = p.x;
    out[2u * i + 1u] = p.y;
}
"#;

type Fp = blst::blst_fp;

fn fp_from_words(w: &[u32]) -> Fp {
    Fp {
        l: std::array::from_fn(|k| u64::from(w[2 * k]) | (u64::from(w[2 * k + 1]) << 32)),
    }
}

fn fp_to_words(f: &Fp, out: &mut Vec<u32>) {
    for l in f.l {
        out.push(l as u32);
        out.push((l >> 32) as u32);
    }
}

/// p, as Montgomery limbs of p - 1 are a valid element.
const P: [u64; 6] = [
    0xb9fe_ffff_ffff_aaab,
    0x1eab_fffe_b153_ffff,
    0x6730_d2a0_f6b0_f624,
    0x6477_4b84_f385_12bf,
    0x4b1b_a7b6_434b_acd7,
    0x1a01_11ea_397f_e69a,
];

#[test]
fn mul_wide_is_the_full_product() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut a = vec![
        0,
        1,
        u32::MAX,
        u32::MAX,
        0xffff,
        0x10000,
        0x8000_0000,
        0xffff_0000,
    ];
    let mut b = vec![
        u32::MAX,
        u32::MAX,
        u32::MAX,
        1,
        0xffff,
        0xffff,
        0x8000_0000,
        0x0001_ffff,
    ];
    for _ in 0..1000 {
        a.push(rng.next_u32());
        b.push(rng.next_u32());
    }
    for int64 in variants(g) {
        let src = format!("{}{FP_KERNEL}", fp_wgsl(int64));
        let out = run_kernel(g, &src, "wide", &[&a, &b], 2 * a.len(), a.len() as u32);
        for i in 0..a.len() {
            let want = u64::from(a[i]) * u64::from(b[i]);
            let got = u64::from(out[2 * i]) | (u64::from(out[2 * i + 1]) << 32);
            assert_eq!(got, want, "{:#x} * {:#x}, int64 {int64}", a[i], b[i]);
        }
    }
}

#[test]
fn fp_arithmetic_matches_blst() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut p_minus_1 = P;
    p_minus_1[0] -= 1;
    let zero = Fp::default();
    let one: Fp = G1Affine::generator().x().into(); // any element; `one` below is R
    let r = {
        let mut f = Fp::default();
        // SAFETY: blst writes one initialised field element.
        unsafe { blst::blst_fp_from_uint64(&mut f, [1u64, 0, 0, 0, 0, 0].as_ptr()) };
        f
    };
    let pm1 = Fp { l: p_minus_1 };
    let mut xs = vec![zero, r, pm1, pm1, pm1, zero, one, r];
    let mut ys = vec![zero, r, pm1, r, zero, pm1, one, pm1];
    for _ in 0..300 {
        let p = G1Projective::random(&mut rng).to_affine();
        xs.push(p.x().into());
        ys.push(p.y().into());
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (x, y) in xs.iter().zip(&ys) {
        fp_to_words(x, &mut a);
        fp_to_words(y, &mut b);
    }
    let n = xs.len();
    for int64 in variants(g) {
        let src = format!("{}{FP_KERNEL}", fp_wgsl(int64));
        let out = run_kernel(g, &src, "fp_ops", &[&a, &b], 6 * 12 * n, n as u32);
        check_fp_ops(&xs, &ys, &out, int64);
    }
}

fn check_fp_ops(xs: &[Fp], ys: &[Fp], out: &[u32], int64: bool) {
    let n = xs.len();
    for i in 0..n {
        let (x, y): (&Fp, &Fp) = (&xs[i], &ys[i]);
        let mut want = [Fp::default(); 5];
        // SAFETY: blst reads and writes initialised field elements, distinct
        // outputs from inputs.
        unsafe {
            blst::blst_fp_mul(&mut want[0], x, y);
            blst::blst_fp_add(&mut want[1], x, y);
            blst::blst_fp_sub(&mut want[2], x, y);
            blst::blst_fp_sqr(&mut want[3], x);
            blst::blst_fp_cneg(&mut want[4], x, true);
        }
        for (op, w) in ["mul", "add", "sub", "sqr", "neg"].iter().zip(&want) {
            let k = 6 * i
                + ["mul", "add", "sub", "sqr", "neg"]
                    .iter()
                    .position(|o| o == op)
                    .unwrap();
            let got = fp_from_words(&out[12 * k..12 * k + 12]);
            assert_eq!(
                got.l, w.l,
                "{op} of case {i} (int64 {int64}): {:x?} {:x?}",
                x.l, y.l
            );
        }
        let flags = &out[12 * (6 * i + 5)..];
        assert_eq!(flags[0] == 1, x.l == [0; 6], "is_zero of case {i}");
        assert_eq!(flags[1] == 1, x.l == y.l, "eq of case {i}");
    }
}

// ---- G1 ----------------------------------------------------------------------

const G1_KERNEL: &str = r#"
@group(0) @binding(0) var<storage, read> ps: array<u32>;
@group(0) @binding(1) var<storage, read> qs: array<u32>;
@group(0) @binding(2) var<storage, read> zero: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

fn opaque_zero() -> u32 {
    return zero[0];
}

fn load(which: u32, i: u32) -> Affine {
    var q: Affine;
    for (var k = 0u; k < 12u; k++) {
        if which == 0u {
            q.x[k] = ps[i * 24u + k];
            q.y[k] = ps[i * 24u + 12u + k];
        } else {
            q.x[k] = qs[i * 24u + k];
            q.y[k] = qs[i * 24u + 12u + k];
        }
    }
    return q;
}

fn store(slot: u32, p: Xyzz) {
    for (var k = 0u; k < 12u; k++) {
        out[slot * 48u + k] = p.x[k];
        out[slot * 48u + 12u + k] = p.y[k];
        out[slot * 48u + 24u + k] = p.zz[k];
        out[slot * 48u + 36u + k] = p.zzz[k];
    }
}

@compute @workgroup_size(64)
fn g1_ops(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if i >= arrayLength(&ps) / 24u { return; }
    let p = load(0u, i);
    let q = load(1u, i);
    let pp = xyzz_from_affine(p);
    let qq = xyzz_from_affine(q);
    let p2 = xyzz_double(pp);
    store(7u * i, xyzz_add_affine(pp, q));
    store(7u * i + 1u, xyzz_add(pp, qq));
    store(7u * i + 2u, p2);
    store(7u * i + 3u, xyzz_add_affine(p2, q));
    store(7u * i + 4u, xyzz_add(p2, xyzz_double(qq)));
    store(7u * i + 5u, xyzz_add_affine(xyzz_infinity(), q));
    store(7u * i + 6u, xyzz_add(p2, xyzz_add_affine(xyzz_double(qq), q)));
}
"#;

#[test]
fn g1_additions_handle_every_special_case() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let inf = G1Projective::identity();
    let a = G1Projective::random(&mut rng);
    let b = G1Projective::random(&mut rng);
    // (P, Q): random; P = Q; Q = -P; infinity either side or both; Q = 2P and
    // Q = -2P (the additions to 2P then double or cancel); Q = -3P/2... (3Q + 2P).
    let mut pairs = vec![
        (a, b),
        (a, a),
        (a, -a),
        (inf, b),
        (a, inf),
        (inf, inf),
        (a, a.double()),
        (a, -a.double()),
        (a.double(), -a),
    ];
    for _ in 0..20 {
        pairs.push((
            G1Projective::random(&mut rng),
            G1Projective::random(&mut rng),
        ));
    }
    let ps: Vec<G1Affine> = pairs.iter().map(|(p, _)| p.to_affine()).collect();
    let qs: Vec<G1Affine> = pairs.iter().map(|(_, q)| q.to_affine()).collect();
    // u64 word products where the device has them: the 16-bit ones are checked
    // above and in msm_with_another_workgroup_size_matches.
    let int64 = *variants(g).last().unwrap();
    let src = format!("{}{G1_WGSL}{G1_KERNEL}", fp_wgsl(int64));
    let n = pairs.len();
    let out = run_kernel(
        g,
        &src,
        "g1_ops",
        &[&affine_words(&ps), &affine_words(&qs), &[0]],
        7 * 48 * n,
        n as u32,
    );
    for (i, (p, q)) in pairs.iter().enumerate() {
        let want = [
            p + q,
            p + q,
            p.double(),
            p.double() + q,
            p.double() + q.double(),
            *q,
            p.double() + q.double() + q,
        ];
        for (k, w) in want.iter().enumerate() {
            let slot = 7 * i + k;
            let got = xyzz_to_projective(&out[48 * slot..48 * slot + 48])
                .unwrap_or_else(|| panic!("case {i} op {k}: not a point"));
            assert_eq!(got, *w, "case {i} op {k}");
        }
    }
}

// ---- MSM ---------------------------------------------------------------------

#[test]
fn msm_of_small_sizes_matches_the_naive_sum() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let bases = points(33, &mut rng);
    let scalars = random_scalars(33, &mut rng);
    // The default window, a small odd one and one wider than the terms.
    for window in [None, Some(3), Some(13)] {
        let msm = shared_msm(g).configured(MsmConfig {
            window_bits: window,
            ..Default::default()
        });
        let d = msm.upload(&g.device, &g.queue, &bases).unwrap();
        for n in (1..=33).step_by(4) {
            let d = if n == 33 {
                &d
            } else {
                &msm.upload(&g.device, &g.queue, &bases[..n]).unwrap()
            };
            let got = msm.msm(&g.device, &g.queue, d, &scalars[..n]).unwrap();
            assert_eq!(
                got,
                naive(&bases[..n], &scalars[..n]),
                "n = {n}, window {window:?}"
            );
        }
    }
}

#[test]
fn msm_of_special_scalars_and_bases() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let msm = shared_msm(g);
    let n = 300;
    let mut bases = points(n, &mut rng);
    // Bases at infinity, and repeated bases (100..120 copy 0..20, infinity too).
    bases[7] = G1Affine::identity();
    bases[150] = G1Affine::identity();
    for i in 0..20 {
        bases[100 + i] = bases[i];
    }
    let r1 = R_MINUS_1;
    let cases: Vec<(&str, Vec<[u64; 4]>)> = vec![
        ("all zero", vec![[0; 4]; n]),
        ("all one", vec![[1, 0, 0, 0]; n]),
        ("all r - 1", vec![r1; n]),
        ("all equal", vec![[0xdead_beef, 7, 0, 1 << 40]; n]),
        (
            "mixed",
            (0..n)
                .map(|i| match i % 6 {
                    0 => [0; 4],
                    1 => [1, 0, 0, 0],
                    2 => r1,
                    3 => [i as u64, 0, 0, 0],
                    // Digit patterns that carry through every window.
                    4 => [u64::MAX, u64::MAX, u64::MAX, 0x0fff_ffff_ffff_ffff],
                    _ => limbs(&Scalar::random(&mut rng)),
                })
                .collect(),
        ),
        // The same scalar twice on the same base: P + P inside one bucket.
        (
            "pairs",
            (0..n).map(|i| [(i / 2) as u64 + 1, 0, 0, 0]).collect(),
        ),
        // r - 1 on a base and 1 on its copy: P + (-P) in a bucket.
        (
            "cancel",
            (0..n)
                .map(|i| {
                    if i < 20 {
                        r1
                    } else if (100..120).contains(&i) {
                        [1, 0, 0, 0]
                    } else {
                        [0; 4]
                    }
                })
                .collect(),
        ),
    ];
    let d = msm.upload(&g.device, &g.queue, &bases).unwrap();
    for (name, scalars) in &cases {
        let got = msm.msm(&g.device, &g.queue, &d, scalars).unwrap();
        assert_eq!(got, naive(&bases, scalars), "{name}");
    }
    let cancel = msm.msm(&g.device, &g.queue, &d, &cases[6].1).unwrap();
    assert!(bool::from(cancel.is_identity()), "P + (-P) terms cancel");
}

#[test]
fn msm_2_12_matches_blstrs() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let n = 1 << 12;
    let bases = points(n, &mut rng);
    let scalars = random_scalars(n, &mut rng);
    let msm = shared_msm(g);
    let t = std::time::Instant::now();
    let got = gpu_msm(g, msm, &bases, &scalars);
    eprintln!(
        "2^12 MSM (upload included): {:?} (u64 word products: {})",
        t.elapsed(),
        uses_int64(msm)
    );
    assert_eq!(got, multi_exp(&bases, &scalars));
}

#[test]
fn msm_2_16_matches_blstrs() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let n = 1 << 16;
    let bases = points(n, &mut rng);
    let scalars = random_scalars(n, &mut rng);
    let msm = shared_msm(g);
    let d = msm.upload(&g.device, &g.queue, &bases).unwrap();
    let t = std::time::Instant::now();
    let got = msm.msm(&g.device, &g.queue, &d, &scalars).unwrap();
    eprintln!(
        "2^16 MSM: {:?} (u64 word products: {})",
        t.elapsed(),
        uses_int64(msm)
    );
    assert_eq!(got, multi_exp(&bases, &scalars));
}

/// Another workgroup size (a pipeline constant) and word products from 16-bit
/// halves (the shared pipelines use u64 ones where the device has them): the
/// same sums.
#[test]
fn msm_with_another_workgroup_size_matches() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let n = 700;
    let bases = points(n, &mut rng);
    let scalars = random_scalars(n, &mut rng);
    let msm = G1Msm::with_config(
        &g.device,
        MsmConfig {
            workgroup_size: Some(128),
            window_bits: Some(7),
            int64_products: Some(false),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!uses_int64(&msm));
    assert_eq!(
        gpu_msm(g, &msm, &bases, &scalars),
        multi_exp(&bases, &scalars)
    );
    // A workgroup the device cannot run is an error.
    let too_big = MsmConfig {
        workgroup_size: Some(1 << 20),
        ..Default::default()
    };
    assert!(matches!(
        G1Msm::with_config(&g.device, too_big),
        Err(MsmError::Device(_))
    ));
}

/// blstrs scalars in Montgomery form, converted on the device.
#[test]
fn msm_of_blstrs_scalars_matches() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let n = 1000;
    let bases = points(n, &mut rng);
    let mut scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    scalars[0] = Scalar::ZERO;
    scalars[1] = Scalar::ONE;
    scalars[2] = -Scalar::ONE;
    scalars[3] = Scalar::from(u64::MAX);
    let msm = shared_msm(g);
    let d = msm.upload(&g.device, &g.queue, &bases).unwrap();
    let got = msm.msm_scalars(&g.device, &g.queue, &d, &scalars).unwrap();
    let proj: Vec<G1Projective> = bases.iter().map(G1Projective::from).collect();
    assert_eq!(got, G1Projective::multi_exp(&proj, &scalars));
}

/// A buffer cap far below the device's: the bases in several buffers and the
/// windows in several groups, the answer unchanged; and dispatches as 2-D grids.
#[test]
fn msm_in_chunks_and_window_groups_matches() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let n = 1000;
    let bases = points(n, &mut rng);
    let mut scalars = random_scalars(n, &mut rng);
    scalars[3] = [1, 0, 0, 0];
    scalars[500] = [0; 4];
    // Grids of at most 3 workgroups a row: every dispatch is 2-D.
    let msm = shared_msm(g).configured(MsmConfig {
        window_bits: Some(8),
        max_buffer_bytes: Some(24 * 1024),
        max_workgroups_per_dimension: Some(3),
        ..Default::default()
    });
    let d = msm.upload(&g.device, &g.queue, &bases).unwrap();
    assert!(d.chunks() >= 4, "{} chunks", d.chunks());
    let got = msm.msm(&g.device, &g.queue, &d, &scalars).unwrap();
    assert_eq!(got, multi_exp(&bases, &scalars));
    // A prefix ending inside the third chunk.
    let got = msm.msm(&g.device, &g.queue, &d, &scalars[..700]).unwrap();
    assert_eq!(got, multi_exp(&bases[..700], &scalars[..700]));
}

fn split_of(scalars: &[[u64; 4]]) -> SplitScalars {
    let mut ones = Density::new(0);
    let (mut idx, mut tail) = (Vec::new(), Vec::new());
    let mut zeros = 0;
    for (i, s) in scalars.iter().enumerate() {
        ones.push(*s == [1, 0, 0, 0]);
        if *s == [0; 4] {
            zeros += 1;
        } else if *s != [1, 0, 0, 0] {
            idx.push(i as u32);
            tail.push(*s);
        }
    }
    let s = SplitScalars::from_parts(scalars.len(), ones, idx, tail).unwrap();
    assert_eq!(s.num_zeros(), zeros);
    s
}

#[test]
fn split_msm_matches_the_cpu_backend() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let n = 3000;
    let bases = points(n, &mut rng);
    // 40% zeros, 40% ones (the split's bitmap), the rest random.
    let scalars: Vec<[u64; 4]> = (0..n)
        .map(|_| match rng.next_u32() % 10 {
            0..4 => [0; 4],
            4..8 => [1, 0, 0, 0],
            _ => limbs(&Scalar::random(&mut rng)),
        })
        .collect();
    let split = split_of(&scalars);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let cpu = cuzk_msm_cpu::split_msm_g1(&bases, split.as_ref(), &pool).unwrap();
    assert_eq!(cpu, naive(&bases, &scalars));
    for config in [
        MsmConfig::default(),
        MsmConfig {
            window_bits: Some(7),
            max_buffer_bytes: Some(40 * 1024),
            ..Default::default()
        },
    ] {
        let msm = shared_msm(g).configured(config.clone());
        let d = msm.upload(&g.device, &g.queue, &bases).unwrap();
        let got = msm
            .split_msm(&g.device, &g.queue, &d, split.as_ref())
            .unwrap();
        assert_eq!(got, cpu, "{config:?} ({} chunks)", d.chunks());
    }
    // Only ones, only zeros.
    let msm = shared_msm(g);
    let d = msm.upload(&g.device, &g.queue, &bases).unwrap();
    for s in [[1, 0, 0, 0], [0; 4]] {
        let all = vec![s; n];
        let got = msm
            .split_msm(&g.device, &g.queue, &d, split_of(&all).as_ref())
            .unwrap();
        assert_eq!(got, naive(&bases, &all), "all {s:?}");
    }
}

#[test]
fn the_api_types_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<G1Msm>();
    send_sync::<cuzk_wgpu::msm::DeviceBases>();
    send_sync::<MsmError>();
}

#[test]
fn bad_inputs_are_errors() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let bases = points(100, &mut rng);
    let msm = shared_msm(g);
    let d = msm.upload(&g.device, &g.queue, &bases).unwrap();
    assert!(matches!(
        msm.msm(&g.device, &g.queue, &d, &random_scalars(101, &mut rng)),
        Err(MsmError::LengthMismatch {
            scalars: 101,
            bases: 100
        })
    ));
    // Fewer scalars than bases: the first bases (the H MSM's shape).
    let fewer = random_scalars(99, &mut rng);
    let got = msm.msm(&g.device, &g.queue, &d, &fewer).unwrap();
    assert_eq!(got, naive(&bases[..99], &fewer));
    assert!(d.bytes() >= 100 * 96);
    let split = split_of(&random_scalars(101, &mut rng));
    assert!(matches!(
        msm.split_msm(&g.device, &g.queue, &d, split.as_ref()),
        Err(MsmError::SplitMismatch { .. })
    ));
    // No bases, no terms: the identity, not an error.
    let empty = msm.upload(&g.device, &g.queue, &[]).unwrap();
    assert!(empty.is_empty());
    let zero = msm.msm(&g.device, &g.queue, &empty, &[]).unwrap();
    assert!(bool::from(zero.is_identity()));
    let zero = msm
        .split_msm(&g.device, &g.queue, &empty, split_of(&[]).as_ref())
        .unwrap();
    assert!(bool::from(zero.is_identity()));
    // A cap too small for one window's buffers.
    let tiny = shared_msm(g).configured(MsmConfig {
        window_bits: Some(16),
        max_buffer_bytes: Some(64 * 96),
        ..Default::default()
    });
    let d = tiny.upload(&g.device, &g.queue, &bases).unwrap();
    assert!(matches!(
        tiny.msm(&g.device, &g.queue, &d, &random_scalars(100, &mut rng)),
        Err(MsmError::BufferTooBig { .. })
    ));
}
