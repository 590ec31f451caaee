//! The kernels' field and curve arithmetic, compiled for the host and checked
//! against blstrs, so that CI (no GPU) catches arithmetic mistakes in the `.cu`
//! sources.
//!
//! `tests/host/arith_host.cpp` includes `kernels/field.cu` and `kernels/ec.cu` as
//! they are (the carry-flag instructions emulated, see field.cu) and answers one
//! operation per line on stdin. Needs a C++17 compiler (`$CXX`, else `c++`): without
//! one these tests fail (they need no GPU, so they never skip).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use blst::{
    blst_fp, blst_fp2, blst_fp2_mul, blst_fp2_sqr, blst_fp_add, blst_fp_cneg, blst_fp_mul,
    blst_fp_sqr, blst_fp_sub, blst_p1_affine, blst_p2_affine,
};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_cuda::testing::gpu::{
    g2_points_as_bytes, points_as_bytes, scalar_from_repr, scalar_to_repr, xyzz2_to_projective,
    xyzz_to_projective, FrRepr, Xyzz2Repr, XyzzRepr,
};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn compiler() -> Option<String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    Command::new(&cxx)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| cxx)
}

/// The harness, built once per test binary run (the tests share it).
fn harness() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_harness).clone()
}

fn build_harness() -> PathBuf {
    let cxx = compiler().expect("no C++17 compiler (set CXX) to build the host arithmetic harness");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cuzk-arith-host");
    let status = Command::new(cxx)
        .args(["-std=c++17", "-O1", "-I"])
        .arg(dir.join("kernels"))
        .arg(dir.join("tests/host/arith_host.cpp"))
        .arg("-o")
        .arg(&out)
        .status()
        .expect("running the C++ compiler");
    assert!(status.success(), "the kernels do not compile for the host");
    out
}

/// Runs `lines` through the harness, one result line per input line.
fn run(harness: &Path, lines: &[String]) -> Vec<Vec<u8>> {
    let mut child = Command::new(harness)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the harness");
    let mut input = child.stdin.take().expect("stdin");
    let text = lines.join("\n") + "\n";
    let writer = std::thread::spawn(move || input.write_all(text.as_bytes()));
    let out = child.wait_with_output().expect("harness output");
    writer
        .join()
        .expect("writer")
        .expect("writing to the harness");
    assert!(out.status.success(), "harness failed: {:?}", out.status);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let res: Vec<Vec<u8>> = text.lines().map(unhex).collect();
    assert_eq!(res.len(), lines.len(), "one answer per operation");
    res
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn bytes_of<T: Copy>(t: &T) -> Vec<u8> {
    // SAFETY: T is one of the plain-data field, point or repr types of this test
    // (arrays of machine words, no padding); reading its bytes is always valid.
    unsafe { std::slice::from_raw_parts((t as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
        .to_vec()
}

fn from_bytes<T: Copy>(b: &[u8]) -> T {
    assert_eq!(b.len(), std::mem::size_of::<T>());
    // SAFETY: the length is checked; every bit pattern is a value of these types
    // (the harness writes reduced Montgomery values, which is what they hold).
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) }
}

// Fq and Fq2 through blst (blstrs keeps its field types private): the same
// Montgomery representation as the kernels'.
fn fp_mul(a: &blst_fp, b: &blst_fp) -> blst_fp {
    let mut o = blst_fp::default();
    // SAFETY: blst reads the two inputs and writes the output, all valid.
    unsafe { blst_fp_mul(&mut o, a, b) };
    o
}
fn fp_sqr(a: &blst_fp) -> blst_fp {
    let mut o = blst_fp::default();
    // SAFETY: as above.
    unsafe { blst_fp_sqr(&mut o, a) };
    o
}
fn fp_add(a: &blst_fp, b: &blst_fp) -> blst_fp {
    let mut o = blst_fp::default();
    // SAFETY: as above.
    unsafe { blst_fp_add(&mut o, a, b) };
    o
}
fn fp_sub(a: &blst_fp, b: &blst_fp) -> blst_fp {
    let mut o = blst_fp::default();
    // SAFETY: as above.
    unsafe { blst_fp_sub(&mut o, a, b) };
    o
}
fn fp_neg(a: &blst_fp) -> blst_fp {
    let mut o = blst_fp::default();
    // SAFETY: as above.
    unsafe { blst_fp_cneg(&mut o, a, true) };
    o
}
fn fp2_mul(a: &blst_fp2, b: &blst_fp2) -> blst_fp2 {
    let mut o = blst_fp2::default();
    // SAFETY: as above.
    unsafe { blst_fp2_mul(&mut o, a, b) };
    o
}
fn fp2_sqr(a: &blst_fp2) -> blst_fp2 {
    let mut o = blst_fp2::default();
    // SAFETY: as above.
    unsafe { blst_fp2_sqr(&mut o, a) };
    o
}

fn p1(p: &G1Affine) -> blst_p1_affine {
    from_bytes(points_as_bytes(std::slice::from_ref(p)))
}
fn p2(p: &G2Affine) -> blst_p2_affine {
    from_bytes(g2_points_as_bytes(std::slice::from_ref(p)))
}
/// Field elements that are uniform enough: coordinates of random points.
fn random_fp(r: &mut ChaCha20Rng) -> blst_fp {
    p1(&G1Projective::random(&mut *r).to_affine()).x
}
fn random_fp2(r: &mut ChaCha20Rng) -> blst_fp2 {
    p2(&G2Projective::random(&mut *r).to_affine()).y
}

fn fr(b: &[u8]) -> Scalar {
    scalar_from_repr(&from_bytes::<FrRepr>(b))
}

/// An XYZZ representation of `p` with a random Z: (x z², y z³, z², z³).
fn xyzz_g1(p: &G1Affine, r: &mut ChaCha20Rng) -> Vec<u8> {
    if bool::from(p.is_identity()) {
        return vec![0; 192];
    }
    let a = p1(p);
    let z = random_fp(r);
    let zz = fp_sqr(&z);
    let zzz = fp_mul(&zz, &z);
    [fp_mul(&a.x, &zz), fp_mul(&a.y, &zzz), zz, zzz]
        .iter()
        .flat_map(bytes_of)
        .collect()
}

fn xyzz_g2(p: &G2Affine, r: &mut ChaCha20Rng) -> Vec<u8> {
    if bool::from(p.is_identity()) {
        return vec![0; 384];
    }
    let a = p2(p);
    let z = random_fp2(r);
    let zz = fp2_sqr(&z);
    let zzz = fp2_mul(&zz, &z);
    [fp2_mul(&a.x, &zz), fp2_mul(&a.y, &zzz), zz, zzz]
        .iter()
        .flat_map(bytes_of)
        .collect()
}

fn g1(b: &[u8]) -> G1Projective {
    xyzz_to_projective(&from_bytes::<XyzzRepr>(b))
}

fn g2(b: &[u8]) -> G2Projective {
    xyzz2_to_projective(&from_bytes::<Xyzz2Repr>(b))
}

#[test]
fn field_arithmetic_matches_blstrs() {
    let h = harness();
    field_arithmetic(&h);
}

fn field_arithmetic(h: &Path) {
    let mut r = ChaCha20Rng::seed_from_u64(1);
    let mut lines = Vec::new();
    let mut want_fr = Vec::new();
    // Besides 0, 1 and -1: small integers and R^-1-ish values whose Montgomery limbs
    // make some CIOS rounds start with t[0] = 0 (fr_mul_nt special-cases that).
    let specials = [
        Scalar::ZERO,
        Scalar::ONE,
        -Scalar::ONE,
        Scalar::from(2u64),
        Scalar::from(1u64 << 32),
        -Scalar::from(1u64 << 32),
    ];
    let ns = specials.len();
    for i in 0..300 + ns * ns {
        let (a, b) = if i < ns * ns {
            (specials[i / ns], specials[i % ns])
        } else {
            (Scalar::random(&mut r), Scalar::random(&mut r))
        };
        let (ha, hb) = (
            hex(&bytes_of(&scalar_to_repr(&a))),
            hex(&bytes_of(&scalar_to_repr(&b))),
        );
        lines.push(format!("fr_mul {ha} {hb}"));
        want_fr.push(a * b);
        lines.push(format!("fr_mul_nt {ha} {hb}"));
        want_fr.push(a * b);
        lines.push(format!("fr_add {ha} {hb}"));
        want_fr.push(a + b);
        lines.push(format!("fr_sub {ha} {hb}"));
        want_fr.push(a - b);
        lines.push(format!("fr_sqr {ha}"));
        want_fr.push(a.square());
    }
    let got = run(h, &lines);
    for (k, (g, w)) in got.iter().zip(&want_fr).enumerate() {
        assert_eq!(fr(g), *w, "{}", lines[k]);
    }

    let mut lines = Vec::new();
    let mut want_fq = Vec::new();
    let zero = blst_fp::default();
    // One in Montgomery form (R mod p), from blst.
    let one = {
        let mut o = blst_fp::default();
        // SAFETY: blst writes the output from a valid u64 array.
        unsafe { blst::blst_fp_from_uint64(&mut o, [1u64, 0, 0, 0, 0, 0].as_ptr()) };
        o
    };
    // The largest limbs an element can have (p - 1 as raw Montgomery limbs), for
    // the bounds of the square's doubled cross sum and the reductions.
    let p_minus_1 = blst_fp {
        l: [
            0xb9feffffffffaaaa,
            0x1eabfffeb153ffff,
            0x6730d2a0f6b0f624,
            0x64774b84f38512bf,
            0x4b1ba7b6434bacd7,
            0x1a0111ea397fe69a,
        ],
    };
    let fq_specials = [zero, one, fp_neg(&one), p_minus_1];
    let nq = fq_specials.len();
    for i in 0..300 {
        let (a, b) = if i < nq * nq {
            (fq_specials[i / nq], fq_specials[i % nq])
        } else {
            (random_fp(&mut r), random_fp(&mut r))
        };
        let (ha, hb) = (hex(&bytes_of(&a)), hex(&bytes_of(&b)));
        for (op, w) in [
            ("fq_mul", fp_mul(&a, &b)),
            ("fq_sqr", fp_sqr(&a)),
            ("fq_add", fp_add(&a, &b)),
            ("fq_sub", fp_sub(&a, &b)),
            ("fq_neg", fp_neg(&a)),
        ] {
            lines.push(format!("{op} {ha} {hb}"));
            want_fq.push(w);
        }
    }
    let got = run(h, &lines);
    for (k, (g, w)) in got.iter().zip(&want_fq).enumerate() {
        assert_eq!(g, &bytes_of(w), "{}", lines[k]);
    }

    let mut lines = Vec::new();
    let mut want_fq2 = Vec::new();
    for _ in 0..200 {
        let (a, b) = (random_fp2(&mut r), random_fp2(&mut r));
        let (ha, hb) = (hex(&bytes_of(&a)), hex(&bytes_of(&b)));
        lines.push(format!("fq2_mul {ha} {hb}"));
        want_fq2.push(fp2_mul(&a, &b));
        lines.push(format!("fq2_sqr {ha}"));
        want_fq2.push(fp2_sqr(&a));
    }
    let got = run(h, &lines);
    for (k, (g, w)) in got.iter().zip(&want_fq2).enumerate() {
        assert_eq!(g, &bytes_of(w), "{}", lines[k]);
    }
}

#[test]
fn curve_formulas_match_blstrs_including_the_special_cases() {
    let h = harness();
    let mut r = ChaCha20Rng::seed_from_u64(2);
    let mut lines = Vec::new();
    let mut want = Vec::new();
    let inf = G1Affine::identity();
    for i in 0..120 {
        let p = G1Projective::random(&mut r).to_affine();
        // Special pairs: equal points (the doubling path), opposite points (the
        // identity), and either side the identity.
        let q = match i {
            0..=9 => p,
            10..=19 => -p,
            20..=24 => inf,
            _ => G1Projective::random(&mut r).to_affine(),
        };
        let p = if (25..30).contains(&i) { inf } else { p };
        let (xp, hq) = (hex(&xyzz_g1(&p, &mut r)), hex(&bytes_of(&q)));
        let sum = G1Projective::from(p) + q;
        for op in ["g1_madd", "g1_madd_calls"] {
            lines.push(format!("{op} {xp} {hq}"));
            want.push(sum);
        }
        let xq = hex(&xyzz_g1(&q, &mut r));
        lines.push(format!("g1_add {xp} {xq}"));
        want.push(sum);
        lines.push(format!("g1_dbl {xp}"));
        want.push(G1Projective::from(p).double());
    }
    let got = run(&h, &lines);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g1(g), *w, "{}", &lines[k][..20]);
    }

    let mut lines = Vec::new();
    let mut want = Vec::new();
    let inf2 = G2Affine::identity();
    for i in 0..40 {
        let p = G2Projective::random(&mut r).to_affine();
        let q = match i {
            0..=4 => p,
            5..=9 => -p,
            10..=11 => inf2,
            _ => G2Projective::random(&mut r).to_affine(),
        };
        let (xp, hq) = (hex(&xyzz_g2(&p, &mut r)), hex(&bytes_of(&q)));
        let sum = G2Projective::from(p) + q;
        lines.push(format!("g2_madd {xp} {hq}"));
        want.push(sum);
        lines.push(format!("g2_add {xp} {}", hex(&xyzz_g2(&q, &mut r))));
        want.push(sum);
        lines.push(format!("g2_dbl {xp}"));
        want.push(G2Projective::from(p).double());
    }
    let got = run(&h, &lines);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g2(g), *w, "{}", &lines[k][..20]);
    }
}

#[test]
fn batch_affine_pairs_and_the_inversion_match_blstrs() {
    let h = harness();
    let mut r = ChaCha20Rng::seed_from_u64(3);
    // Random elements, then raw limbs at the edges of the binary GCD's ranges: 1, 2,
    // a power of two, p - 1, p - 2 and all-ones low limbs.
    let mut xs: Vec<blst_fp> = (0..40).map(|_| random_fp(&mut r)).collect();
    let p = [
        0xb9feffffffffaaabu64,
        0x1eabfffeb153ffff,
        0x6730d2a0f6b0f624,
        0x64774b84f38512bf,
        0x4b1ba7b6434bacd7,
        0x1a0111ea397fe69a,
    ];
    for l in [
        [1u64, 0, 0, 0, 0, 0],
        [2, 0, 0, 0, 0, 0],
        [0, 0, 0, 1 << 17, 0, 0],
        [p[0] - 1, p[1], p[2], p[3], p[4], p[5]],
        [p[0] - 2, p[1], p[2], p[3], p[4], p[5]],
        [u64::MAX, u64::MAX, 0, 0, 0, 0],
    ] {
        xs.push(blst_fp { l });
    }
    for op in ["fq_inv_gcd"] {
        let mut lines: Vec<String> = xs
            .iter()
            .map(|a| format!("{op} {}", hex(&bytes_of(a))))
            .collect();
        lines.push(format!("{op} {}", hex(&[0u8; 48])));
        let got = run(&h, &lines);
        let one = fp_mul(&xs[0], &from_bytes::<blst_fp>(&got[0]));
        for (k, (a, g)) in xs.iter().zip(&got).enumerate() {
            // a * a^-1 is the same (Montgomery-form) one for every a.
            let prod = fp_mul(a, &from_bytes::<blst_fp>(g));
            assert_eq!(bytes_of(&prod), bytes_of(&one), "{op} of element {k}");
        }
        // ... and that is one: it leaves another element unchanged.
        assert_eq!(bytes_of(&fp_mul(&one, &xs[1])), bytes_of(&xs[1]));
        assert!(got[xs.len()].iter().all(|&b| b == 0), "{op}: 1/0 is 0");
    }

    let inf = G1Affine::identity();
    let mut lines = Vec::new();
    let mut want = Vec::new();
    for i in 0..60 {
        let p = G1Projective::random(&mut r).to_affine();
        // Equal points (the doubling), opposite points (the identity), either or
        // both sides the identity, and plain additions.
        let q = match i {
            0..=9 => p,
            10..=19 => -p,
            20..=24 => inf,
            _ => G1Projective::random(&mut r).to_affine(),
        };
        let p = if (25..32).contains(&i) { inf } else { p };
        let q = if i == 31 { inf } else { q };
        lines.push(format!(
            "g1_pair {} {}",
            hex(&bytes_of(&p)),
            hex(&bytes_of(&q))
        ));
        want.push((G1Projective::from(p) + q).to_affine());
    }
    let got = run(&h, &lines);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(from_bytes::<G1Affine>(g), *w, "pair {k}");
    }
}

/// The batch-affine bucket sums (msm.cu's `msm_ba_round` rounds and
/// `msm_ba_buckets`), run on the host as msm.rs launches them, against blstrs:
/// skewed buckets (one of 70 entries, empty ones, single entries), negated entries,
/// the identity among the bases, and neighbours that are equal or opposite points
/// (the doubling and identity cases of a pair), with 1, 3 and 512 outputs per thread.
#[test]
fn batch_affine_bucket_sums_match_blstrs() {
    let h = harness();
    let mut r = ChaCha20Rng::seed_from_u64(4);
    let mut bases: Vec<G1Affine> = (0..40)
        .map(|_| G1Projective::random(&mut r).to_affine())
        .collect();
    bases[7] = G1Affine::identity();
    bases[8] = bases[9];
    // Runs of empty slots longer than the rounds' walk (BA_WALK = 8 in msm.cu), so
    // a thread crossing them searches instead of stepping.
    let mut counts: Vec<u32> = vec![70, 0, 1, 2, 2, 2, 3, 0, 5, 17, 1, 4];
    counts.extend([0; 20]);
    counts.push(3);
    counts.extend([0; 12]);
    counts.push(2);
    let mut sorted = Vec::new();
    let mut want = Vec::new();
    for (x, &c) in counts.iter().enumerate() {
        let mut sum = G1Projective::identity();
        for k in 0..c {
            let (point, neg) = match (x, k) {
                // Pairs of a round: (8, 9) are equal points, then a point and its
                // negation, then the identity with a point.
                (3, _) => (8 + k, false),
                (4, _) => (3, k == 1),
                (5, _) => (7, false),
                _ => (
                    rand::Rng::gen_range(&mut r, 0..40u32),
                    rand::Rng::gen(&mut r),
                ),
            };
            let p = G1Projective::from(bases[point as usize]);
            sum += if neg { -p } else { p };
            sorted.push(point | (u32::from(neg) << 31));
        }
        want.push(sum);
    }
    let bases_hex: String = bases.iter().map(|p| hex(&bytes_of(p))).collect();
    let counts_hex: String = counts.iter().map(|c| hex(&c.to_le_bytes())).collect();
    let sorted_hex: String = sorted.iter().map(|c| hex(&c.to_le_bytes())).collect();
    let lines: Vec<String> = [("g1_ba", 1), ("g1_ba", 3), ("g1_ba", 512)]
        .iter()
        .map(|(op, per)| format!("{op} {per} {bases_hex} {counts_hex} {sorted_hex}"))
        .collect();
    for (k, got) in run(&h, &lines).iter().enumerate() {
        assert_eq!(got.len(), counts.len() * std::mem::size_of::<XyzzRepr>());
        for (x, b) in got.chunks(std::mem::size_of::<XyzzRepr>()).enumerate() {
            assert_eq!(g1(b), want[x], "launch {k}, bucket {x}");
        }
    }
}

/// The ones' compaction (ones_count, the scan, ones_entries): every set bit below
/// n_bases, in order, none past it, for bitmaps with full, empty, partial and
/// random words.
#[test]
fn ones_entries_are_the_set_bits_below_n_bases() {
    let h = harness();
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let mut cases: Vec<(u32, Vec<u64>)> = vec![
        (1, vec![u64::MAX]),
        (64, vec![u64::MAX]),
        (65, vec![u64::MAX, u64::MAX]),
        (100, vec![0, 0]),
        (130, vec![1 << 63, 0, u64::MAX]),
    ];
    for n in [1000u32, 4097, 9999] {
        let nw = n.div_ceil(64) as usize;
        cases.push((n, (0..nw).map(|_| rng.next_u64()).collect()));
    }
    let lines: Vec<String> = cases
        .iter()
        .map(|(n, w)| {
            let words: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
            format!("ones_entries {n} {}", hex(&words))
        })
        .collect();
    for ((n, words), got) in cases.iter().zip(run(&h, &lines)) {
        let want: Vec<u8> = (0..*n)
            .filter(|&i| words[i as usize / 64] >> (i % 64) & 1 == 1)
            .flat_map(|i| i.to_le_bytes())
            .collect();
        assert_eq!(got, want, "n_bases {n}");
    }
}
