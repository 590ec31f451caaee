//! What the device checks and the benchmarks share: the log, seeded inputs, naive
//! references and timing.

use std::io::Write as _;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::CudaSlice;
use cuzk_cuda::testing::gpu::{scalar_from_repr, FrRepr, Gpu};
use cuzk_cuda::testing::ntt::NttKernel;
use ff::{Field, PrimeField};
use group::Curve;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

/// Every check and benchmark row of a run: to the log file, failures and the table
/// kept for the summary.
pub struct Log {
    pub file: Mutex<std::fs::File>,
    pub failures: Mutex<Vec<String>>,
    pub checks: Mutex<usize>,
    pub table: Mutex<Vec<[String; 5]>>,
}

impl Log {
    pub fn line(&self, s: &str) {
        println!("{s}");
        let _ = writeln!(self.file.lock().unwrap(), "{s}");
    }
    pub fn check(&self, name: &str, ok: bool, detail: &str) {
        *self.checks.lock().unwrap() += 1;
        if ok {
            let _ = writeln!(self.file.lock().unwrap(), "PASS {name} {detail}");
        } else {
            self.line(&format!("FAIL {name} {detail}"));
            self.failures.lock().unwrap().push(name.to_owned());
        }
    }
    pub fn row(&self, what: &str, size: &str, ms: f64, per: String, peer: &str) {
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

pub fn pool() -> Arc<rayon::ThreadPool> {
    Arc::new(
        rayon::ThreadPoolBuilder::new()
            .build()
            .expect("thread pool"),
    )
}

pub static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// The run's seed: `--seed N` (set in `main`), or the clock read once (logged at
/// the start, so that a failure can be replayed with the same inputs).
pub fn run_seed() -> u64 {
    *SEED.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    })
}

/// Fresh inputs every run, one stream per section (`tag`), all from the run's seed.
pub fn rng(tag: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(run_seed() ^ tag.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Uniform-ish scalars fast: random limbs below 2^252 < r read as Montgomery form
/// (every value below r is a valid representation).
pub fn fast_scalars(n: usize, seed: u64) -> Vec<Scalar> {
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
pub fn heavy_scalars(n: usize, r: &mut ChaCha20Rng) -> Vec<Scalar> {
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
pub fn random_points(n: usize, r: &mut ChaCha20Rng) -> Vec<G1Affine> {
    random_points_of::<G1Projective>(n, r)
}

/// `n` distinct random G2 points.
pub fn random_points_g2(n: usize, r: &mut ChaCha20Rng) -> Vec<G2Affine> {
    random_points_of::<G2Projective>(n, r)
}

/// `n` distinct random points: a[i / m] + b[i % m] for random a, b (m = sqrt n),
/// one addition each instead of one scalar multiplication each.
pub fn random_points_of<P>(n: usize, r: &mut ChaCha20Rng) -> Vec<P::AffineRepr>
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

pub fn naive_msm(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
    bases
        .iter()
        .zip(scalars)
        .map(|(b, s)| G1Projective::from(b) * s)
        .sum()
}

pub fn naive_msm_g2(bases: &[G2Affine], scalars: &[Scalar]) -> G2Projective {
    bases
        .iter()
        .zip(scalars)
        .map(|(b, s)| G2Projective::from(b) * s)
        .sum()
}

pub fn to_canonical(s: &Scalar) -> [u64; 4] {
    let b = s.to_repr();
    let mut l = [0u64; 4];
    for i in 0..4 {
        l[i] = u64::from_le_bytes(b.as_ref()[8 * i..8 * i + 8].try_into().unwrap());
    }
    l
}

pub fn bytes_of<T>(v: &[T]) -> &[u8] {
    // SAFETY: only used on plain integer arrays.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

pub fn download_scalars(gpu: &Gpu, buf: &CudaSlice<FrRepr>, n: usize) -> Result<Vec<Scalar>> {
    Ok(gpu.download(buf, n)?.iter().map(scalar_from_repr).collect())
}

/// Every NTT pass kernel is checked on every visit (same results bit for bit).
pub const KERNELS: [NttKernel; NttKernel::ALL.len()] = NttKernel::ALL;

pub fn kernel_name(k: NttKernel) -> &'static str {
    k.name()
}
