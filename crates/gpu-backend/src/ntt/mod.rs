//! Radix-2 number-theoretic transforms over Fr (`blstrs::Scalar`), on a rayon pool
//! the caller passes in, and the H computation built from them.
//!
//! # Design: few passes over memory, no bit reversal inside the H chain
//!
//! A 2^27-point transform is 4 GiB; a textbook radix-2 FFT walks it 27 times and the
//! large strides of the first stages miss every cache. Here a transform of size
//! `n = 2^log_n` is a short plan of passes, each of which reads and writes the
//! vector once:
//!
//! * **column passes** for the top stages, at most 8 stages each: the
//!   vector is seen as blocks of `K = 2^L` slices of length `h`; a leaf task owns
//!   the same few adjacent columns of every slice, gathers one column (`K` scalars,
//!   one per slice) at a time and runs the pass's `L` stages on it in registers and
//!   L1. The column's twiddles (`K − 1` products, from a two-level power table of
//!   `ω`) are computed once per leaf and shared by all blocks, so no `n/2`-entry
//!   twiddle table is ever built (it would be 2 GiB at 2^27);
//! * one **block pass** for the bottom 11 stages: contiguous blocks that
//!   fit in L2, with a precomputed root table.
//!
//! At 2^27 that is two column passes and one block pass instead of 27 stage sweeps.
//!
//! The forward transform is decimation in frequency (natural order in, bit-reversed
//! out: [`Domain::fft_to_bitrev`]) and the inverse is decimation in time
//! (bit-reversed in, natural out: [`Domain::ifft_from_bitrev`]). The pointwise step
//! of the H chain does not care about order, so [`compute_h`] chains DIF → DIT → DIF
//! and the passes of neighbouring transforms meet on the same data: the end of the
//! first inverse, the coset shift and the start of the coset transform share one
//! block pass; the end of the coset transform, `a·b − c`, the division by `Z` and
//! the start of the last inverse share one column pass. Natural order in and out
//! with three transforms needs exactly one permutation, and that one is the final
//! gather into the returned `h`.
//!
//! The natural-order [`Domain::fft`], [`Domain::ifft`], [`Domain::coset_fft`] and
//! [`Domain::icoset_fft`] (same results as bellperson's `EvaluationDomain`) add a
//! bit-reversal permutation to the same passes.
//!
//! No `unsafe`: the column tasks get disjoint `&mut` chunks by splitting every slice
//! at the same column, recursively (`rayon::join`).
//!
//! # Measured
//!
//! On the GPU machine's host (16 vCPUs of an Intel Xeon, 2 MiB L2 each), median of
//! several runs, beside bellperson 0.27's `EvaluationDomain` on the same 16 threads:
//!
//! | size | `fft_to_bitrev` | `fft` | bellperson `fft` | `compute_h` | bellperson H chain |
//! |---|---|---|---|---|---|
//! | 2^16 | 1.8 ms | 2.4 ms | 13.1 ms | 16.2 ms | 81 ms |
//! | 2^20 | 32.7 ms | 36.8 ms | 182 ms | 248 ms | 1377 ms |
//! | 2^24 | 638 ms | 700 ms | 3.9 s | 4.9 s | 28.5 s |
//! | 2^26 | 2.67 s | 3.34 s | – | 20.3 s | – |
//!
//! One thread at 2^20: 422 ms (≈ 40 ns a butterfly) against bellperson's 1009 ms, so
//! 16 threads run 12.9× faster than one. The pass shape hardly matters there: at
//! 2^22, `block_log` 9–13, `max_pass_log` 5–10 and `col_width` 2–32 all landed
//! within ±6% of the default; the butterflies' arithmetic, not memory, sets the pace
//! (inlining the Fr sum and difference, see `fr.rs`, took 2^24 from 1006 to 638 ms).
//! The H chain costs about seven transforms, as it must: fusing passes saves memory
//! traffic, which this machine has to spare.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::ThreadPool;

use crate::BackendError;

mod fr;
mod h;
mod kernels;

pub use h::compute_h;

use kernels::Butterfly;

/// Largest domain, as log2 of its size: Fr's two-adicity.
pub const MAX_LOG_DOMAIN: u32 = Scalar::S;

/// The shape of a transform's passes. The defaults suit CPUs with ≥ 1 MiB of L2 per
/// core; other values exist for tuning and for tests, and never change results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NttConfig {
    /// Log2 of the contiguous block the bottom stages run in (the block pass).
    /// 2^11 scalars are 64 KiB, which stays in L2 beside the root table.
    pub block_log: u32,
    /// Most stages one column pass runs (`K = 2^max_pass_log` slices per column,
    /// at most `2^block_log`). 2^8 keeps a column (8 KiB) and a leaf's twiddles in
    /// L1/L2, and a 2^27 transform needs only two column passes.
    pub max_pass_log: u32,
    /// Adjacent columns one column task owns. Eight scalars are 256 bytes, four
    /// cache lines, so a task reads whole lines in runs the prefetcher follows.
    pub col_width: usize,
}

impl Default for NttConfig {
    fn default() -> Self {
        Self {
            block_log: 11,
            max_pass_log: 8,
            col_width: 8,
        }
    }
}

/// One column pass: `2^log_k` slices of `2^log_h` scalars per block.
#[derive(Clone, Debug)]
struct ColPass {
    log_k: u32,
    log_h: u32,
}

/// The roots one direction (forward `ω` or inverse `ω⁻¹`) needs.
#[derive(Clone, Debug)]
struct Roots {
    /// `small[h + t] = ω_{2h}^t` for `h = 1, 2, …, B/2` and `t < h` (`small[0]` is
    /// unused): the twiddles of every stage whose half-span is below the block size.
    small: Vec<Scalar>,
    /// `ω^e = lo[e mod 2^lo_bits] · hi[e >> lo_bits]` for `e < n`.
    lo: Vec<Scalar>,
    hi: Vec<Scalar>,
    lo_bits: u32,
}

impl Roots {
    fn new(omega: Scalar, log_n: u32, log_b: u32) -> Self {
        let powers = |base: Scalar, count: usize| {
            let mut v = Vec::with_capacity(count);
            let mut x = Scalar::ONE;
            for _ in 0..count {
                v.push(x);
                x *= base;
            }
            v
        };
        // ω_B = ω^(n/B); each stage's roots are powers of ω_{2h} = ω_B^(B/2h).
        let b = 1usize << log_b;
        let omega_b = omega.pow_vartime([1u64 << (log_n - log_b)]);
        let mut small = vec![Scalar::ONE; b.max(1)];
        let mut half = 1;
        while half < b {
            let w = omega_b.pow_vartime([(b / (2 * half)) as u64]);
            small[half..2 * half].copy_from_slice(&powers(w, half));
            half *= 2;
        }
        let lo_bits = log_n.div_ceil(2);
        let lo = powers(omega, 1 << lo_bits);
        let hi = powers(omega.pow_vartime([1u64 << lo_bits]), 1 << (log_n - lo_bits));
        Self {
            small,
            lo,
            hi,
            lo_bits,
        }
    }

    /// `ω^e` for `e < n`: one product.
    #[inline]
    fn pow(&self, e: usize) -> Scalar {
        self.lo[e & ((1 << self.lo_bits) - 1)] * self.hi[e >> self.lo_bits]
    }
}

/// A radix-2 evaluation domain of size `2^log_n` with its twiddle tables.
///
/// Uses the same `ω` as bellperson (`ROOT_OF_UNITY` squared `32 − log_n` times), so
/// every transform here equals bellperson's `EvaluationDomain` bit for bit.
#[derive(Clone, Debug)]
pub struct Domain {
    log_n: u32,
    n: usize,
    n_inv: Scalar,
    fwd: Roots,
    inv: Roots,
    /// Log2 of the block pass's block.
    log_b: u32,
    /// Column passes, top stages first.
    passes: Vec<ColPass>,
    col_width: usize,
}

impl Domain {
    /// The domain of `2^log_n` points with the default [`NttConfig`]; the tables
    /// cost `O(2^block_log + 2^(log_n/2))` scalars.
    pub fn new(log_n: u32) -> Result<Self, BackendError> {
        Self::with_config(log_n, NttConfig::default())
    }

    /// The domain of `2^log_n` points with the given pass shape. Out-of-range
    /// values are clamped (`max_pass_log` to `1..=max(block_log, 1)`, `col_width`
    /// to at least one).
    pub fn with_config(log_n: u32, config: NttConfig) -> Result<Self, BackendError> {
        let NttConfig {
            block_log,
            max_pass_log,
            col_width,
        } = config;
        if log_n > MAX_LOG_DOMAIN {
            return Err(BackendError::DomainTooLarge {
                log: log_n,
                max: MAX_LOG_DOMAIN,
            });
        }
        let n = 1usize << log_n;
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            omega = omega.square();
        }
        // ω and n are non-zero in Fr, so both inverses exist.
        let omega_inv = omega.invert().unwrap_or(Scalar::ONE);
        let n_inv = Scalar::from(n as u64).invert().unwrap_or(Scalar::ONE);

        // A column pass's small roots come from the block table, so K ≤ B.
        let max_pass_log = max_pass_log.clamp(1, block_log.max(1));
        let log_b = log_n.min(block_log);
        let col = log_n - log_b;
        let count = col.div_ceil(max_pass_log);
        let mut passes = Vec::with_capacity(count as usize);
        let mut top = log_n;
        for p in 0..count {
            // Spread the column stages evenly: 16 → 8 + 8, 9 → 5 + 4.
            let done = log_n - top;
            let log_k = (col - done).div_ceil(count - p);
            top -= log_k;
            passes.push(ColPass { log_k, log_h: top });
        }
        debug_assert_eq!(top, log_b);

        Ok(Self {
            log_n,
            n,
            n_inv,
            fwd: Roots::new(omega, log_n, log_b),
            inv: Roots::new(omega_inv, log_n, log_b),
            log_b,
            passes,
            col_width: col_width.max(1),
        })
    }

    /// Log2 of the domain size.
    pub fn log_n(&self) -> u32 {
        self.log_n
    }

    /// Number of points.
    pub fn size(&self) -> usize {
        self.n
    }

    fn check(&self, v: &[Scalar]) -> Result<(), BackendError> {
        if v.len() == self.n {
            Ok(())
        } else {
            Err(BackendError::NttLength {
                got: v.len(),
                want: self.n,
            })
        }
    }

    /// Forward transform, natural order in, **bit-reversed** order out
    /// (decimation in frequency): `v[rev(k)] = Σ_i v[i]·ω^(ik)`.
    pub fn fft_to_bitrev(&self, v: &mut [Scalar], pool: &ThreadPool) -> Result<(), BackendError> {
        self.check(v)?;
        let _span = tracing::debug_span!("ntt", log_n = self.log_n, dir = "fwd").entered();
        pool.install(|| self.dif_all(v, &self.fwd));
        Ok(())
    }

    /// Inverse transform, **bit-reversed** order in, natural order out (decimation in
    /// time), scaled by `1/n`: undoes [`Domain::fft_to_bitrev`].
    pub fn ifft_from_bitrev(
        &self,
        v: &mut [Scalar],
        pool: &ThreadPool,
    ) -> Result<(), BackendError> {
        self.check(v)?;
        let _span = tracing::debug_span!("ntt", log_n = self.log_n, dir = "inv").entered();
        pool.install(|| self.dit_all(v, &self.inv, Some(self.n_inv)));
        Ok(())
    }

    /// Forward transform, natural order in and out: `v[k] = Σ_i v[i]·ω^(ik)`.
    pub fn fft(&self, v: &mut [Scalar], pool: &ThreadPool) -> Result<(), BackendError> {
        self.check(v)?;
        let _span = tracing::debug_span!("ntt", log_n = self.log_n, dir = "fwd").entered();
        pool.install(|| {
            self.dif_all(v, &self.fwd);
            kernels::bit_reverse(v, self.log_n);
        });
        Ok(())
    }

    /// Inverse transform, natural order in and out: `v[i] = (1/n)·Σ_k v[k]·ω^(−ik)`.
    pub fn ifft(&self, v: &mut [Scalar], pool: &ThreadPool) -> Result<(), BackendError> {
        self.check(v)?;
        let _span = tracing::debug_span!("ntt", log_n = self.log_n, dir = "inv").entered();
        pool.install(|| {
            kernels::bit_reverse(v, self.log_n);
            self.dit_all(v, &self.inv, Some(self.n_inv));
        });
        Ok(())
    }

    /// Evaluates the polynomial with coefficients `v` on the coset `g·⟨ω⟩` with
    /// `g = Scalar::MULTIPLICATIVE_GENERATOR` (7), like bellperson's `coset_fft`.
    pub fn coset_fft(&self, v: &mut [Scalar], pool: &ThreadPool) -> Result<(), BackendError> {
        self.check(v)?;
        pool.install(|| {
            kernels::distribute_powers(v, Scalar::MULTIPLICATIVE_GENERATOR, Scalar::ONE)
        });
        self.fft(v, pool)
    }

    /// Undoes [`Domain::coset_fft`]: coefficients from evaluations on `g·⟨ω⟩`.
    pub fn icoset_fft(&self, v: &mut [Scalar], pool: &ThreadPool) -> Result<(), BackendError> {
        self.check(v)?;
        let _span = tracing::debug_span!("ntt", log_n = self.log_n, dir = "inv").entered();
        let g_inv = Scalar::MULTIPLICATIVE_GENERATOR
            .invert()
            .unwrap_or(Scalar::ONE);
        pool.install(|| {
            kernels::bit_reverse(v, self.log_n);
            // The 1/n folds into the coset shift.
            self.dit_all(v, &self.inv, None);
            kernels::distribute_powers(v, g_inv, self.n_inv);
        });
        Ok(())
    }

    /// All stages, DIF: column passes top-down, then the block pass.
    fn dif_all(&self, v: &mut [Scalar], roots: &Roots) {
        for pass in &self.passes {
            kernels::column_pass(v, self, pass, roots, Butterfly::Dif);
        }
        kernels::block_pass(v, self.log_b, |_, x| kernels::dif(x, &roots.small, true));
    }

    /// All stages, DIT: the block pass (scaling by `scale` first), then the column
    /// passes bottom-up.
    fn dit_all(&self, v: &mut [Scalar], roots: &Roots, scale: Option<Scalar>) {
        kernels::block_pass(v, self.log_b, |_, x| {
            if let Some(s) = scale {
                for x in x.iter_mut() {
                    *x *= s;
                }
            }
            kernels::dit(x, &roots.small, true)
        });
        for pass in self.passes.iter().rev() {
            kernels::column_pass(v, self, pass, roots, Butterfly::Dit);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
