//! NTTs over Fr on the device and the H computation built from them.
//!
//! Domains up to 2^28. A transform of 2^L points runs as ceil(L / 10) passes, each
//! doing up to 10 radix-2 stages of one chunk of index bits in one kernel launch (see
//! `kernels/ntt.cu` for the decomposition). Pass kernels with bit-identical
//! results: `ntt_pass` (`CUZK_NTT_KERNEL=radix2`) does one radix-2 stage per
//! shared-memory exchange; `ntt_r8_dif`/`ntt_r8_dit` (`CUZK_NTT_KERNEL=r8`) keep 8 elements per
//! thread in registers and do up to 3 stages between exchanges. On the H200 the
//! register kernel measured 1.5× slower (119 against 78 ms at 2^27: 121 registers
//! and 128-thread blocks leave 16 warps per SM to hide the product's carry chains),
//! so it stays an option for other devices and for further work. The warp-shuffle
//! kernels `ntt_r2w_*` (`CUZK_NTT_KERNEL=r2w`) keep `ntt_pass`'s 2 elements per
//! thread but do the stages inside a warp with register shuffles and fuse the top
//! stage with the global access: 4 barriers per 9-bit pass instead of 10; `r2wf` is
//! the same with a cheaper Fr product (`fr_mul_nt`), `r2wf3` that at 3 blocks per SM.
//! On the H200 r2wf measured 7.50 / 32.2 / 65.5 ms at 2^24 / 2^26 / 2^27 against
//! ntt_pass's 8.52 / 37.6 / 78.3 (r2w 8.07 / 34.7 / 71.0, r2wf3 7.58 / 32.3 /
//! 66.1). `r2wg` (`CUZK_NTT_KERNEL=r2wg`, the default) runs r2wf's passes with the
//! plain radix-2 transform's global twiddles, one load each from a per-size table of
//! N/2 roots, and so has no inter-pass twiddle products: 6.83 / 29.8 / 62.0 ms; with
//! the even/odd field products (fifth session) 5.20 / 22.3 / 46.7.
//! Roots of unity come from two device tables
//! of 2^16 powers each (per direction), shared by every domain size, plus a table of
//! the 2^18-th roots so that inter-pass twiddles of order up to 2^18 are one load.
//!
//! Every pass kernel's index math is emulated on the host, line by line, by the `emu`
//! test module below and checked against the CPU NTT for many plans.
//!
//! H uses no bit-reversal pass until the very end: the inverse transform runs as
//! decimation in frequency (natural in, bit-reversed out), the coset factors are
//! applied at bit-reversed positions, and the forward transform runs as decimation in
//! time (bit-reversed in, natural out).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use cudarc::driver::{CudaEvent, CudaSlice, LaunchConfig};
use ff::{Field, PrimeField};

use crate::error::{Ctx, CudaError};
use crate::gpu::{grid, scalar_to_repr, scalars_as_bytes, FrRepr, Gpu};
use crate::raw::{self, HostRegistration};

/// Largest supported domain (log2). The twiddle exponents are formed in 32 bits and
/// the coset power tables cover 2^28 points.
pub const MAX_LOG_DOMAIN: u32 = 28;
/// Stages per pass: 2^10 elements × 32 bytes = 32 KiB of shared memory per block.
const MAX_PASS_BITS: u32 = 10;
const TABLE: usize = 1 << 16;
/// Entries of the 2^18-th-roots table (one load for inter-pass twiddles of order <= 18).
const TABLE18: usize = 1 << 18;
/// Smallest transform for `bitrev_tiled` (two 4-bit ends around the middle bits).
const BITREV_TILED_MIN_LOG: u32 = 8;
/// Vectors shorter than this are copied from pageable memory (pinning costs more
/// than it saves, and small vectors may share pages).
pub(crate) const PIN_MIN_LEN: usize = 1 << 15;
const POW_HI: usize = 1 << (MAX_LOG_DOMAIN - 16);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Inverse,
}

/// Which pass kernel the transforms use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NttKernel {
    /// `ntt_r8_dif` / `ntt_r8_dit`: 8 elements per thread, 3 stages per exchange.
    Radix8,
    /// `ntt_pass`: one radix-2 stage per shared-memory exchange (the first version).
    Radix2,
    /// `ntt_r2w_dif` / `ntt_r2w_dit`: `ntt_pass`'s threads and butterflies, with the
    /// stages inside a warp done through register shuffles, the top stage fused with
    /// the global load (DIF) or store (DIT), and one-load inter-pass twiddles up to
    /// order 2^18.
    Radix2Warp,
    /// `ntt_r2wf_dif` / `ntt_r2wf_dit`: `Radix2Warp` with `fr_mul_nt`, an Fr product
    /// that does the modulus's two low limbs (1 and 2^32 - 1) by additions: 12.5%
    /// fewer multiplier instructions per product.
    Radix2WarpFast,
    /// `ntt_r2wf3_dif` / `ntt_r2wf3_dit`: `Radix2WarpFast` compiled for 3 blocks
    /// (48 warps) per SM instead of 2: 40 registers, with some spilling.
    Radix2WarpFast3,
    /// `ntt_r2wg_dif` / `ntt_r2wg_dit` (and `ntt_pass_g` for tiles under 64
    /// elements): `Radix2WarpFast`'s passes with the plain radix-2 transform's global
    /// twiddles, one load each from a table of N/2 roots per size (N/2 × 32 bytes,
    /// cached), and no inter-pass twiddle products.
    Radix2WarpGlobal,
}

impl NttKernel {
    /// Every kernel, in the order the device check runs them.
    pub const ALL: [NttKernel; 6] = [
        NttKernel::Radix2,
        NttKernel::Radix2Warp,
        NttKernel::Radix2WarpFast,
        NttKernel::Radix2WarpFast3,
        NttKernel::Radix2WarpGlobal,
        NttKernel::Radix8,
    ];

    /// The name `CUZK_NTT_KERNEL` takes (and the device check prints).
    pub fn name(self) -> &'static str {
        match self {
            NttKernel::Radix8 => "r8",
            NttKernel::Radix2 => "radix2",
            NttKernel::Radix2Warp => "r2w",
            NttKernel::Radix2WarpFast => "r2wf",
            NttKernel::Radix2WarpFast3 => "r2wf3",
            NttKernel::Radix2WarpGlobal => "r2wg",
        }
    }

    /// The fastest on the H200 (r2wg: 0.393 / 6.83 / 29.8 / 62.0 ms at 2^20 / 2^24 /
    /// 2^26 / 2^27 against r2wf's 0.421 / 7.49 / 32.2 / 65.5 in the same run, and
    /// radix2's 78.3 at 2^27; NOTES.md). Its table of N/2 roots per size (2 GiB at
    /// 2^27) is the price; `CUZK_NTT_KERNEL=r2wf` runs without it.
    pub const DEFAULT: NttKernel = NttKernel::Radix2WarpGlobal;

    /// [`Self::DEFAULT`], or the one the environment variable `CUZK_NTT_KERNEL`
    /// names (`radix2`, `r2w`, `r2wf`, `r2wf3`, `r2wg`, `r8`).
    pub fn from_env() -> Self {
        let v = std::env::var("CUZK_NTT_KERNEL").unwrap_or_default();
        Self::ALL
            .into_iter()
            .find(|k| k.name() == v)
            .unwrap_or(Self::DEFAULT)
    }

    fn code(self) -> u8 {
        match self {
            NttKernel::Radix8 => 0,
            NttKernel::Radix2 => 1,
            NttKernel::Radix2Warp => 2,
            NttKernel::Radix2WarpFast => 3,
            NttKernel::Radix2WarpFast3 => 4,
            NttKernel::Radix2WarpGlobal => 5,
        }
    }

    fn from_code(v: u8) -> Self {
        match v {
            0 => NttKernel::Radix8,
            2 => NttKernel::Radix2Warp,
            3 => NttKernel::Radix2WarpFast,
            4 => NttKernel::Radix2WarpFast3,
            5 => NttKernel::Radix2WarpGlobal,
            _ => NttKernel::Radix2,
        }
    }

    /// Whether the natural-order transforms use `bitrev_tiled` (the r2w kernels) or
    /// `bitrev_permute` (as measured for radix2 and r8).
    fn tiled_bitrev(self) -> bool {
        self.is_r2w() || self == NttKernel::Radix2WarpGlobal
    }

    /// One of the four-step `ntt_r2w*` kernels (the same index math, see `emu`).
    fn is_r2w(self) -> bool {
        matches!(
            self,
            NttKernel::Radix2Warp | NttKernel::Radix2WarpFast | NttKernel::Radix2WarpFast3
        )
    }

    /// The kernel pass `p` really runs: the register kernels need chunks of >= 3 bits
    /// (r8) or tiles of >= 64 elements (r2w, a full warp); smaller ones use `ntt_pass`.
    /// r2wg is kept: it has its own small-tile kernel (`ntt_pass_g`), since its passes
    /// do not compose with the four-step ones.
    fn for_pass(self, p: &Pass) -> Self {
        match self {
            NttKernel::Radix2WarpGlobal => self,
            NttKernel::Radix8 if p.k >= 3 => NttKernel::Radix8,
            _ if self.is_r2w() && p.k + p.c >= 6 => self,
            _ => NttKernel::Radix2,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pass {
    lo: u32,
    k: u32,
    c: u32,
    prev_k: u32,
}

/// The passes of a 2^log_n transform in decimation-in-frequency order (high bits
/// first); balanced chunk sizes so that no pass is tiny.
fn plan(log_n: u32) -> Vec<Pass> {
    if log_n == 0 {
        return Vec::new();
    }
    let passes = log_n.div_ceil(MAX_PASS_BITS);
    let base = log_n / passes;
    let extra = log_n % passes;
    let mut out = Vec::new();
    let mut hi = log_n;
    let mut prev_k = 0;
    for i in 0..passes {
        let k = base + u32::from(i < extra);
        let lo = hi - k;
        // Neighbouring sub-transforms share a block so that global accesses come in
        // runs of 2^c consecutive elements.
        let c = lo.min(MAX_PASS_BITS - k);
        out.push(Pass { lo, k, c, prev_k });
        prev_k = k;
        hi = lo;
    }
    out
}

/// Powers table pair: P(i) = P0[i & 0xffff] * P1[i >> 16] = s * g^i.
#[derive(Debug)]
struct Pows {
    p0: CudaSlice<FrRepr>,
    p1: CudaSlice<FrRepr>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum PowKind {
    /// g^i (coset forward).
    Coset,
    /// g^i / n (after an unscaled inverse, before a forward coset transform).
    CosetOverN,
    /// g^-i / n (inverse coset transform).
    CosetInvOverN,
}

/// One direction's root tables: T0[i] = w^i, T1[i] = w^(i 2^16) (w the primitive
/// 2^32-th root or its inverse), T18[i] = w^(i 2^14).
#[derive(Debug)]
struct Tables {
    t0: CudaSlice<FrRepr>,
    t1: CudaSlice<FrRepr>,
    t18: CudaSlice<FrRepr>,
}

/// The host values of [`Tables`] for the primitive 2^32-th root `w`.
fn twiddle_tables(w: Scalar) -> [Vec<Scalar>; 3] {
    [
        powers_s(w, Scalar::ONE, TABLE),
        powers_s(pow2k(w, 16), Scalar::ONE, TABLE),
        powers_s(pow2k(w, 14), Scalar::ONE, TABLE18),
    ]
}

/// The device NTT engine: twiddle tables and cached coset tables.
#[derive(Debug)]
pub struct Ntt {
    fwd: Tables,
    inv: Tables,
    pows: Mutex<HashMap<(u32, PowKind), Arc<Pows>>>,
    /// r2wg's tables W[j] = w_N^j (j < N/2) by log N, built on first use and kept,
    /// like `pows` ([`Ntt::global_table_bytes`] each).
    global: Mutex<HashMap<u32, Arc<CudaSlice<FrRepr>>>>,
    /// [`NttKernel`] as a u8 (`NttKernel::code`).
    kernel: AtomicU8,
}

fn powers_s(base: Scalar, scale: Scalar, count: usize) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(count);
    let mut x = scale;
    for _ in 0..count {
        out.push(x);
        x *= base;
    }
    out
}

fn powers(base: Scalar, scale: Scalar, count: usize) -> Vec<FrRepr> {
    let mut out = Vec::with_capacity(count);
    let mut x = scale;
    for _ in 0..count {
        out.push(scalar_to_repr(&x));
        x *= base;
    }
    out
}

fn upload_reprs(gpu: &Gpu, v: &[FrRepr]) -> Result<CudaSlice<FrRepr>, CudaError> {
    // SAFETY: FrRepr is plain u32s.
    let bytes =
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) };
    gpu.upload::<FrRepr>(bytes)
}

fn pow2k(x: Scalar, k: u32) -> Scalar {
    let mut y = x;
    for _ in 0..k {
        y = y.square();
    }
    y
}

impl Ntt {
    pub fn new(gpu: &Gpu) -> Result<Self, CudaError> {
        let mk = |w: Scalar| -> Result<Tables, CudaError> {
            let [t0, t1, t18] =
                twiddle_tables(w).map(|v| v.iter().map(scalar_to_repr).collect::<Vec<_>>());
            Ok(Tables {
                t0: upload_reprs(gpu, &t0)?,
                t1: upload_reprs(gpu, &t1)?,
                t18: upload_reprs(gpu, &t18)?,
            })
        };
        Ok(Self {
            fwd: mk(Scalar::ROOT_OF_UNITY)?,
            inv: mk(Scalar::ROOT_OF_UNITY_INV)?,
            pows: Mutex::new(HashMap::new()),
            global: Mutex::new(HashMap::new()),
            kernel: AtomicU8::new(NttKernel::from_env().code()),
        })
    }

    /// The pass kernel in use (initially [`NttKernel::from_env`]).
    pub fn kernel(&self) -> NttKernel {
        NttKernel::from_code(self.kernel.load(Ordering::Relaxed))
    }

    /// Switches the pass kernel for later calls (all give the same results; the
    /// device check runs every transform with each).
    pub fn set_kernel(&self, k: NttKernel) {
        self.kernel.store(k.code(), Ordering::Relaxed);
    }

    fn pows(&self, gpu: &Gpu, log_n: u32, kind: PowKind) -> Result<Arc<Pows>, CudaError> {
        let mut map = self.pows.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = map.get(&(log_n, kind)) {
            return Ok(p.clone());
        }
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let n_inv = Scalar::from(1u64 << log_n)
            .invert()
            .expect("powers of two are invertible in Fr");
        let (base, scale) = match kind {
            PowKind::Coset => (g, Scalar::ONE),
            PowKind::CosetOverN => (g, n_inv),
            PowKind::CosetInvOverN => (g.invert().expect("g is invertible"), n_inv),
        };
        let p0 = powers(base, scale, TABLE);
        let p1 = powers(pow2k(base, 16), Scalar::ONE, POW_HI);
        let p = Arc::new(Pows {
            p0: upload_reprs(gpu, &p0)?,
            p1: upload_reprs(gpu, &p1)?,
        });
        map.insert((log_n, kind), p.clone());
        Ok(p)
    }

    /// r2wg's table for 2^log_n (log_n >= 1): W[j] = w^j, j < 2^(log_n - 1), w the
    /// forward 2^log_n-th root; the inverse reads it too (w^-j = -W[N/2 - j]).
    fn global_table(&self, gpu: &Gpu, log_n: u32) -> Result<Arc<CudaSlice<FrRepr>>, CudaError> {
        let mut map = self.global.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = map.get(&log_n) {
            return Ok(w.clone());
        }
        let half = 1usize << (log_n - 1);
        let mut w = gpu.alloc_poisoned::<FrRepr>(half)?;
        crate::launch!(
            gpu,
            "ntt_r2wg_table",
            grid(half, 256),
            &mut w,
            &log_n,
            &self.fwd.t0,
            &self.fwd.t1
        )?;
        let w = Arc::new(w);
        map.insert(log_n, w.clone());
        Ok(w)
    }

    /// Device bytes of r2wg's table for a 2^log_n transform (N/2 roots; 2 GiB at
    /// 2^27), kept once built.
    pub fn global_table_bytes(log_n: u32) -> u64 {
        if log_n == 0 {
            0
        } else {
            (1u64 << (log_n - 1)) * 32
        }
    }

    /// A pass of r2wg: `ntt_r2wg_*`, or `ntt_pass_g` for tiles under a full warp.
    fn pass_global(
        &self,
        gpu: &Gpu,
        data: &mut CudaSlice<FrRepr>,
        log_n: u32,
        p: Pass,
        dit: bool,
        dir: Direction,
    ) -> Result<(), CudaError> {
        let w = self.global_table(gpu, log_n)?;
        let w: &CudaSlice<FrRepr> = &w;
        let inv = u32::from(dir == Direction::Inverse);
        let cfg = pass_config(log_n, p, 2);
        if p.k + p.c >= 6 {
            let name = if dit { "ntt_r2wg_dit" } else { "ntt_r2wg_dif" };
            return crate::launch!(gpu, name, cfg, &mut *data, &p.lo, &p.k, &p.c, &log_n, &inv, w);
        }
        let dit = u32::from(dit);
        crate::launch!(
            gpu,
            "ntt_pass_g",
            cfg,
            &mut *data,
            &p.lo,
            &p.k,
            &p.c,
            &dit,
            &log_n,
            &inv,
            w
        )
    }

    fn tables(&self, dir: Direction) -> &Tables {
        match dir {
            Direction::Forward => &self.fwd,
            Direction::Inverse => &self.inv,
        }
    }

    fn pass(
        &self,
        gpu: &Gpu,
        data: &mut CudaSlice<FrRepr>,
        log_n: u32,
        p: Pass,
        dit: bool,
        dir: Direction,
    ) -> Result<(), CudaError> {
        if self.kernel() == NttKernel::Radix2WarpGlobal {
            return self.pass_global(gpu, data, log_n, p, dit, dir);
        }
        let tb = self.tables(dir);
        let (t0, t1, t18) = (&tb.t0, &tb.t1, &tb.t18);
        let kernel = self.kernel().for_pass(&p);
        if kernel != NttKernel::Radix2 {
            let (per_thread, names) = match kernel {
                NttKernel::Radix8 => (8, ["ntt_r8_dif", "ntt_r8_dit"]),
                NttKernel::Radix2WarpFast => (2, ["ntt_r2wf_dif", "ntt_r2wf_dit"]),
                NttKernel::Radix2WarpFast3 => (2, ["ntt_r2wf3_dif", "ntt_r2wf3_dit"]),
                _ => (2, ["ntt_r2w_dif", "ntt_r2w_dit"]),
            };
            let cfg = pass_config(log_n, p, per_thread);
            let args = (&p.lo, &p.k, &p.c, &p.prev_k);
            return if dit {
                crate::launch!(
                    gpu, names[1], cfg, &mut *data, args.0, args.1, args.2, args.3, t0, t1, t18
                )
            } else {
                crate::launch!(
                    gpu, names[0], cfg, &mut *data, args.0, args.1, args.2, args.3, t0, t1, t18
                )
            };
        }
        let cfg = pass_config(log_n, p, 2);
        let dit = u32::from(dit);
        crate::launch!(gpu, "ntt_pass", cfg, &mut *data, &p.lo, &p.k, &p.c, &p.prev_k, &dit, t0, t1)
    }

    /// The passes of a 2^log_n transform in DIF order, as (lo, k, c, prev_k): chunk
    /// [lo, lo + k), 2^c sub-transforms per block (for per-pass benchmarks).
    pub fn passes(log_n: u32) -> Vec<(u32, u32, u32, u32)> {
        plan(log_n)
            .into_iter()
            .map(|p| (p.lo, p.k, p.c, p.prev_k))
            .collect()
    }

    /// Runs pass `index` of [`Ntt::passes`] alone (DIF or DIT flavour), for timing.
    pub fn run_pass(
        &self,
        gpu: &Gpu,
        data: &mut CudaSlice<FrRepr>,
        log_n: u32,
        index: usize,
        dit: bool,
        dir: Direction,
    ) -> Result<(), CudaError> {
        check_len(data, log_n)?;
        let p = *plan(log_n)
            .get(index)
            .ok_or_else(|| CudaError::Shape(format!("no pass {index} for 2^{log_n}")))?;
        self.pass(gpu, data, log_n, p, dit, dir)
    }

    /// Decimation in frequency: natural-order input, bit-reversed output, unscaled.
    pub fn dif(
        &self,
        gpu: &Gpu,
        data: &mut CudaSlice<FrRepr>,
        log_n: u32,
        dir: Direction,
    ) -> Result<(), CudaError> {
        check_len(data, log_n)?;
        for p in plan(log_n) {
            self.pass(gpu, data, log_n, p, false, dir)?;
        }
        Ok(())
    }

    /// Decimation in time: bit-reversed input, natural-order output, unscaled.
    pub fn dit(
        &self,
        gpu: &Gpu,
        data: &mut CudaSlice<FrRepr>,
        log_n: u32,
        dir: Direction,
    ) -> Result<(), CudaError> {
        check_len(data, log_n)?;
        for p in plan(log_n).into_iter().rev() {
            self.pass(gpu, data, log_n, p, true, dir)?;
        }
        Ok(())
    }

    fn scale_by_powers(
        &self,
        gpu: &Gpu,
        data: &mut CudaSlice<FrRepr>,
        log_n: u32,
        bitrev_index: bool,
        kind: PowKind,
    ) -> Result<(), CudaError> {
        let pw = self.pows(gpu, log_n, kind)?;
        let br = u32::from(bitrev_index);
        crate::launch!(
            gpu,
            "scale_by_powers",
            grid(1 << log_n, 256),
            &mut *data,
            &log_n,
            &br,
            &pw.p0,
            &pw.p1
        )
    }

    fn bitrev_permute(
        &self,
        gpu: &Gpu,
        data: &mut CudaSlice<FrRepr>,
        log_n: u32,
        scale: Option<Scalar>,
    ) -> Result<(), CudaError> {
        let s = scalar_to_repr(&scale.unwrap_or(Scalar::ONE));
        let do_scale = u32::from(scale.is_some());
        if self.kernel().tiled_bitrev() && log_n >= BITREV_TILED_MIN_LOG {
            let cfg = LaunchConfig {
                grid_dim: (1u32 << (log_n - 8), 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            return crate::launch!(gpu, "bitrev_tiled", cfg, &mut *data, &log_n, &do_scale, &s);
        }
        crate::launch!(
            gpu,
            "bitrev_permute",
            grid(1 << log_n, 256),
            &mut *data,
            &log_n,
            &do_scale,
            &s
        )
    }

    /// In-place transform of the first 2^log_n elements, natural order in and out,
    /// with bellperson's meanings: forward = `fft`, inverse = `ifft` (scaled by 1/n),
    /// coset forward = `coset_fft` (input times g^i first), coset inverse =
    /// `icoset_fft` (output times g^-i).
    pub fn ntt(
        &self,
        gpu: &Gpu,
        data: &mut CudaSlice<FrRepr>,
        log_n: u32,
        dir: Direction,
        coset: bool,
    ) -> Result<(), CudaError> {
        check_len(data, log_n)?;
        let n_inv = Scalar::from(1u64 << log_n).invert().expect("invertible");
        match (dir, coset) {
            (Direction::Forward, false) => {
                self.dif(gpu, data, log_n, dir)?;
                self.bitrev_permute(gpu, data, log_n, None)
            }
            (Direction::Forward, true) => {
                self.scale_by_powers(gpu, data, log_n, false, PowKind::Coset)?;
                self.dif(gpu, data, log_n, dir)?;
                self.bitrev_permute(gpu, data, log_n, None)
            }
            (Direction::Inverse, false) => {
                self.dif(gpu, data, log_n, dir)?;
                self.bitrev_permute(gpu, data, log_n, Some(n_inv))
            }
            (Direction::Inverse, true) => {
                self.dif(gpu, data, log_n, dir)?;
                self.bitrev_permute(gpu, data, log_n, None)?;
                self.scale_by_powers(gpu, data, log_n, false, PowKind::CosetInvOverN)
            }
        }
    }

    /// Evaluations on the domain → evaluations on the coset g·domain, in place,
    /// without any bit-reversal pass (the H chain's first half for one of a, b, c).
    fn to_coset(
        &self,
        gpu: &Gpu,
        data: &mut CudaSlice<FrRepr>,
        log_n: u32,
    ) -> Result<(), CudaError> {
        self.dif(gpu, data, log_n, Direction::Inverse)?;
        self.scale_by_powers(gpu, data, log_n, true, PowKind::CosetOverN)?;
        self.dit(gpu, data, log_n, Direction::Forward)
    }

    /// Device memory the H computation needs for `n` constraints (bytes), with the
    /// kernel `CUZK_NTT_KERNEL` selects ([`Self::h_device_bytes_with`]).
    pub fn h_device_bytes(n: usize) -> u64 {
        Self::h_device_bytes_with(NttKernel::from_env(), n)
    }

    /// Device memory the H computation needs for `n` constraints with `kernel`: the
    /// three buffers, and for r2wg its table (kept once built).
    pub fn h_device_bytes_with(kernel: NttKernel, n: usize) -> u64 {
        let log_n = crate::log_domain(n);
        let big = 1u64 << log_n;
        let table = match kernel {
            NttKernel::Radix2WarpGlobal => Self::global_table_bytes(log_n),
            _ => 0,
        };
        3 * big * 32 + table
    }

    /// The whole H computation for evaluations `a, b, c` (equal lengths): uploads them
    /// from page-locked host memory on the copy stream while the compute stream works
    /// on the ones already there, and leaves H's coefficients on the device, natural
    /// order, in a buffer of 2^L elements (the H MSM uses the first 2^L − 1).
    ///
    /// Returns once the uploads are done (so the host vectors may be freed); the
    /// kernels may still be running on the compute stream.
    pub fn compute_h(
        &self,
        gpu: &Gpu,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
    ) -> Result<CudaSlice<FrRepr>, CudaError> {
        let upload = Self::upload_abc(gpu, a, b, c)?;
        self.h_from(gpu, upload)
    }

    /// The first half of [`Self::compute_h`]: enqueues the uploads of `a, b, c` on the
    /// copy stream (page-locking those not registered yet) and returns at once, so
    /// the compute stream can take other work (a partition's L, A, B MSMs) while
    /// they travel. Anything else uploaded on the compute stream meanwhile would
    /// queue behind them on the copy engine: upload it first.
    pub fn upload_abc<'a>(
        gpu: &Gpu,
        a: &'a [Scalar],
        b: &'a [Scalar],
        c: &'a [Scalar],
    ) -> Result<AbcUpload<'a>, CudaError> {
        let n = a.len();
        if b.len() != n || c.len() != n {
            return Err(CudaError::Shape(format!(
                "a, b and c have different lengths ({n}, {}, {})",
                b.len(),
                c.len()
            )));
        }
        let log_n = crate::log_domain(n);
        if log_n > MAX_LOG_DOMAIN {
            return Err(CudaError::Shape(format!(
                "the NTT domain 2^{log_n} exceeds 2^{MAX_LOG_DOMAIN}"
            )));
        }
        let big = 1usize << log_n;
        let mut up = AbcUpload {
            bufs: Vec::with_capacity(3),
            uploaded: Vec::with_capacity(3),
            regs: Vec::new(),
            log_n,
            _host: std::marker::PhantomData,
        };
        for _ in 0..3 {
            let mut buf = gpu.alloc_poisoned::<FrRepr>(big)?;
            if n < big {
                zero_tail(gpu, &mut buf, n)?;
            }
            up.bufs.push(buf);
        }
        // Page-lock the host vectors so the copies are asynchronous DMA.
        for v in [a, b, c].into_iter().filter(|v| v.len() >= PIN_MIN_LEN) {
            // SAFETY: the slices are borrowed for 'a, which outlives `up`, and `up`
            // waits for the copies before its registrations go (AbcUpload's Drop).
            up.regs
                .extend(unsafe { HostRegistration::new(&gpu.ctx, scalars_as_bytes(v)) }?);
        }
        // The copies may start only after the stream-ordered allocations above.
        gpu.copy.join(&gpu.compute).ctx("cuStreamWaitEvent")?;
        for (v, buf) in [a, b, c].into_iter().zip(up.bufs.iter_mut()) {
            raw::htod_bytes(&gpu.copy, scalars_as_bytes(v), buf, 0)?;
            up.uploaded
                .push(gpu.copy.record_event(None).ctx("cuEventRecord")?);
        }
        Ok(up)
    }

    /// The second half of [`Self::compute_h`]: the transforms of the uploaded `a, b,
    /// c` (each waiting, on the compute stream, for its own upload) and the combine.
    /// Six transforms, not seven: a and b go to the coset (inverse, scale, forward),
    /// c only to its coefficients, which are subtracted from those of a_c·b_c
    /// (the coset inverse of c's coset evaluations is c's coefficients).
    /// Returns once the uploads are done.
    pub fn h_from(&self, gpu: &Gpu, mut up: AbcUpload<'_>) -> Result<CudaSlice<FrRepr>, CudaError> {
        let log_n = up.log_n;
        let big = 1usize << log_n;
        let mut bufs = std::mem::take(&mut up.bufs).into_iter();
        let (Some(mut ba), Some(mut bb), Some(mut bc), [ua, ub, uc]) =
            (bufs.next(), bufs.next(), bufs.next(), &up.uploaded[..])
        else {
            return Err(CudaError::Shape("a, b, c were not uploaded".into()));
        };
        // a and b to the coset, each once its upload is in; c only to its
        // coefficients (bit-reversed, times n): bitrev_scale_sub_copy subtracts them.
        for (buf, ev) in [(&mut ba, ua), (&mut bb, ub)] {
            gpu.compute.wait(ev).ctx("cuStreamWaitEvent")?;
            self.to_coset(gpu, buf, log_n)?;
        }
        gpu.compute.wait(uc).ctx("cuStreamWaitEvent")?;
        self.dif(gpu, &mut bc, log_n, Direction::Inverse)?;
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let z = g.pow_vartime([big as u64]) - Scalar::ONE;
        let zinv = z.invert().expect("g^n != 1 for n <= 2^32");
        let n_inv = Scalar::from(big as u64)
            .invert()
            .expect("powers of two are invertible in Fr");
        let nn = big as u32;
        let zinv_repr = scalar_to_repr(&zinv);
        crate::launch!(
            gpu,
            "ab_combine",
            grid(big, 256),
            &mut ba,
            &bb,
            &nn,
            &zinv_repr
        )?;
        self.dif(gpu, &mut ba, log_n, Direction::Inverse)?;
        let pw = self.pows(gpu, log_n, PowKind::CosetInvOverN)?;
        let s = scalar_to_repr(&(zinv * n_inv));
        crate::launch!(
            gpu,
            "bitrev_scale_sub_copy",
            grid(big, 256),
            &ba,
            &bc,
            &mut bb,
            &log_n,
            &pw.p0,
            &pw.p1,
            &s
        )?;
        drop(bc);
        drop(ba);
        // Stream-scoped wait for the uploads only; then the host memory may go.
        up.wait_uploads()?;
        Ok(bb)
    }
}

/// `a, b, c` on their way to the device ([`Ntt::upload_abc`]): their device buffers,
/// an event per upload, and the page-lockings made for them. Dropping it before
/// [`Ntt::h_from`] (an error in between) waits for the copies, then unregisters.
#[must_use = "the uploads are waited for and their buffers freed when this is dropped"]
pub struct AbcUpload<'a> {
    bufs: Vec<CudaSlice<FrRepr>>,
    uploaded: Vec<CudaEvent>,
    regs: Vec<HostRegistration>,
    log_n: u32,
    _host: std::marker::PhantomData<&'a [Scalar]>,
}

impl AbcUpload<'_> {
    /// Waits (host side, on the last upload's event: never device-wide) until the
    /// copy engine has read the host vectors, then lets go of their page-locking.
    fn wait_uploads(&mut self) -> Result<(), CudaError> {
        if let Some(last) = self.uploaded.last() {
            last.synchronize().ctx("cuEventSynchronize")?;
        }
        self.regs.clear();
        Ok(())
    }
}

impl Drop for AbcUpload<'_> {
    fn drop(&mut self) {
        // The registrations must outlive the DMA that reads through them. A failed
        // wait leaves nothing better to do than unregister (Drop never panics).
        if !self.regs.is_empty() {
            let _ = self.wait_uploads();
        }
    }
}

/// A pass's launch: a block per tile of 2^(k + c) elements, `per_thread` of them a
/// thread (at least one thread), the tile in shared memory (32 bytes an element).
fn pass_config(log_n: u32, p: Pass, per_thread: u32) -> LaunchConfig {
    let tile = 1u32 << (p.k + p.c);
    LaunchConfig {
        grid_dim: (1u32 << (log_n - p.k - p.c), 1, 1),
        block_dim: ((tile / per_thread).max(1), 1, 1),
        shared_mem_bytes: tile * 32,
    }
}

fn check_len(data: &CudaSlice<FrRepr>, log_n: u32) -> Result<(), CudaError> {
    if log_n > MAX_LOG_DOMAIN || data.len() < (1usize << log_n) {
        return Err(CudaError::Shape(format!(
            "an NTT of 2^{log_n} points needs that many elements (buffer has {}, largest domain 2^{MAX_LOG_DOMAIN})",
            data.len()
        )));
    }
    Ok(())
}

fn zero_tail(gpu: &Gpu, buf: &mut CudaSlice<FrRepr>, from: usize) -> Result<(), CudaError> {
    let mut tail = buf.slice_mut(from..);
    gpu.compute.memset_zeros(&mut tail).ctx("cuMemsetD8Async")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_and_codes_round_trip() {
        for k in NttKernel::ALL {
            assert_eq!(NttKernel::from_code(k.code()), k);
            assert_eq!(
                NttKernel::ALL
                    .iter()
                    .filter(|x| x.name() == k.name())
                    .count(),
                1
            );
        }
    }

    #[test]
    fn plans_cover_every_bit_once() {
        for log_n in 1..=MAX_LOG_DOMAIN {
            let p = plan(log_n);
            assert_eq!(p.iter().map(|x| x.k).sum::<u32>(), log_n);
            assert_eq!(p[0].lo + p[0].k, log_n);
            assert_eq!(p.last().unwrap().lo, 0);
            for w in p.windows(2) {
                assert_eq!(w[1].lo + w[1].k, w[0].lo);
                assert_eq!(w[1].prev_k, w[0].k);
            }
            for x in &p {
                assert!(x.k + x.c <= MAX_PASS_BITS && x.c <= x.lo && x.k >= 1);
            }
        }
    }
}

/// Host emulation of the pass kernels in `kernels/ntt.cu`, written to mirror them line
/// by line (same helper functions, same block/thread/round/element index math, same
/// twiddle exponents and tables, shared memory as slots with race detection), checked
/// against the CPU NTT of `cuzk-gpu-backend` for every plan of 2^1..2^14 and a few
/// larger ones. A change to the kernels' index math must be made here too.
#[cfg(test)]
mod emu {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    fn bitrev(x: u32, bits: u32) -> u32 {
        if bits == 0 {
            0
        } else {
            x.reverse_bits() >> (32 - bits)
        }
    }

    struct Tabs {
        t0: Vec<Scalar>,
        t1: Vec<Scalar>,
        t18: Vec<Scalar>,
        inv: bool,
    }

    impl Tabs {
        fn new(dir: Direction) -> Self {
            let w = match dir {
                Direction::Forward => Scalar::ROOT_OF_UNITY,
                Direction::Inverse => Scalar::ROOT_OF_UNITY_INV,
            };
            let [t0, t1, t18] = twiddle_tables(w);
            Self {
                t0,
                t1,
                t18,
                inv: dir == Direction::Inverse,
            }
        }
    }

    /// Global memory of one pass: reads from the pass's input, writes to its output,
    /// each position exactly once.
    struct Global<'a> {
        src: Vec<Scalar>,
        dst: &'a mut [Scalar],
        reads: Vec<u8>,
        writes: Vec<u8>,
    }

    impl<'a> Global<'a> {
        fn new(dst: &'a mut [Scalar]) -> Self {
            let n = dst.len();
            Self {
                src: dst.to_vec(),
                dst,
                reads: vec![0; n],
                writes: vec![0; n],
            }
        }
        fn load(&mut self, p: u32) -> Scalar {
            self.reads[p as usize] += 1;
            self.src[p as usize]
        }
        fn store(&mut self, p: u32, x: Scalar) {
            self.writes[p as usize] += 1;
            self.dst[p as usize] = x;
        }
        fn finish(self) {
            assert!(
                self.reads.iter().all(|&r| r == 1),
                "a position read != once"
            );
            assert!(
                self.writes.iter().all(|&w| w == 1),
                "a position written != once"
            );
        }
    }

    /// Shared memory as element slots; catches a read of a slot another thread wrote
    /// (or a write to one another thread read or wrote) since the last barrier.
    struct Smem {
        slot: Vec<Option<Scalar>>,
        writer: Vec<(u64, usize)>,
        reader: Vec<(u64, usize)>,
        phase: u64,
    }

    const NOBODY: usize = usize::MAX;
    const MANY: usize = usize::MAX - 1;

    impl Smem {
        fn new(tile: u32) -> Self {
            let n = tile as usize;
            Self {
                slot: vec![None; n],
                writer: vec![(u64::MAX, NOBODY); n],
                reader: vec![(u64::MAX, NOBODY); n],
                phase: 0,
            }
        }
        fn sync(&mut self) {
            self.phase += 1;
        }
        fn store(&mut self, t: usize, s: u32, x: Scalar) {
            let s = s as usize;
            let (wp, wt) = self.writer[s];
            assert!(wp != self.phase || wt == t, "smem write-write race");
            let (rp, rt) = self.reader[s];
            assert!(rp != self.phase || rt == t, "smem read-then-write race");
            self.writer[s] = (self.phase, t);
            self.slot[s] = Some(x);
        }
        fn load(&mut self, t: usize, s: u32) -> Scalar {
            let s = s as usize;
            let (wp, wt) = self.writer[s];
            assert!(wp != self.phase || wt == t, "smem write-then-read race");
            let (rp, rt) = self.reader[s];
            self.reader[s] = if rp == self.phase && rt != t {
                (rp, MANY)
            } else {
                (self.phase, t)
            };
            self.slot[s].expect("smem slot read before any write")
        }
    }

    // ---- mirrors of ntt.cu ----

    fn root_pow(tb: &Tabs, x: u32) -> Scalar {
        let (lo, hi) = (x & 0xffff, x >> 16);
        if lo == 0 {
            return tb.t1[hi as usize];
        }
        if hi == 0 {
            return tb.t0[lo as usize];
        }
        tb.t0[lo as usize] * tb.t1[hi as usize]
    }

    fn pass_twiddle(tb: &Tabs, p: u32, lo: u32, k: u32, prev_k: u32) -> Scalar {
        let below = lo + k;
        let kp = bitrev((p >> below) & ((1u32 << prev_k) - 1), prev_k);
        let irest = p & ((1u32 << below) - 1);
        let order = below + prev_k;
        root_pow(tb, (kp * irest) << (32 - order))
    }

    fn r8_ins3(t: u32, pos: u32) -> u32 {
        ((t >> pos) << (pos + 3)) | (t & ((1u32 << pos) - 1))
    }
    fn r8_elem(t: u32, pos: u32, m: u32) -> u32 {
        r8_ins3(t, pos) | (m << pos)
    }
    fn r8_swz(e: u32) -> u32 {
        e ^ ((e >> 3) & 31)
    }
    fn r8_group_lo(g: u32, r0: u32) -> u32 {
        if g == 0 {
            0
        } else {
            r0 + 3 * (g - 1)
        }
    }
    fn r8_pos(base: u32, lo: u32, c: u32, e: u32) -> u32 {
        base | ((e >> c) << lo) | (e & ((1u32 << c) - 1))
    }

    fn r8_twiddle(tb: &Tabs, p: u32, lo: u32, k: u32, prev_k: u32) -> Scalar {
        let below = lo + k;
        let kp = bitrev((p >> below) & ((1u32 << prev_k) - 1), prev_k);
        let irest = p & ((1u32 << below) - 1);
        let order = below + prev_k;
        let e = kp * irest;
        assert!(order >= 32 || u64::from(e) < 1u64 << order);
        if order <= 16 {
            return tb.t1[(e << (16 - order)) as usize];
        }
        if order <= 18 {
            return tb.t18[(e << (18 - order)) as usize];
        }
        root_pow(tb, e << (32 - order))
    }

    fn t1_at(tb: &Tabs, j: u32, b: u32) -> Scalar {
        let i = (j << (15 - b)) as usize;
        assert!(i < TABLE);
        tb.t1[i]
    }

    fn r8_round(x: &mut [Scalar; 8], t: u32, c: u32, w: u32, r: u32, dit: bool, tb: &Tabs) {
        for ii in 0..3u32 {
            let i = if dit { ii } else { 2 - ii };
            if i < r {
                let b = w + i;
                for m in 0..8u32 {
                    if m & (1 << i) != 0 {
                        continue;
                    }
                    let m2 = (m | (1 << i)) as usize;
                    let mi = m as usize;
                    let q = r8_elem(t, c + w, m) >> c;
                    let j = q & ((1u32 << b) - 1);
                    if dit {
                        let mut y = x[m2];
                        if j != 0 {
                            y *= t1_at(tb, j, b);
                        }
                        x[m2] = x[mi] - y;
                        x[mi] += y;
                    } else {
                        let mut d = x[mi] - x[m2];
                        x[mi] += x[m2];
                        if j != 0 {
                            d *= t1_at(tb, j, b);
                        }
                        x[m2] = d;
                    }
                }
            }
        }
    }

    /// `r8_pass<DIT>` over every block of the grid the host launches.
    fn r8_pass(data: &mut [Scalar], log_n: u32, p: Pass, dit: bool, tb: &Tabs) {
        let Pass { lo, k, c, prev_k } = p;
        assert!(k >= 3 && k + c <= MAX_PASS_BITS && c <= lo);
        let mut g = Global::new(data);
        let grid = 1u32 << (log_n - k - c);
        let tbits = k + c;
        let tile = 1u32 << tbits;
        let threads = tile / 8;
        for blk in 0..grid {
            let base = ((blk >> (lo - c)) << (lo + k)) | ((blk & ((1u32 << (lo - c)) - 1)) << c);
            let nr = k.div_ceil(3); // (k + 2) / 3 in ntt.cu
            let r0 = k - 3 * (nr - 1);
            let mut sm = Smem::new(tile);
            let mut x = vec![[Scalar::ZERO; 8]; threads as usize];
            let mut w = r8_group_lo(if dit { 0 } else { nr - 1 }, r0);
            if c + w >= 3 {
                for t in 0..threads {
                    for m in 0..8u32 {
                        let p = r8_pos(base, lo, c, r8_elem(t, c + w, m));
                        let mut y = g.load(p);
                        if !dit && prev_k != 0 {
                            y *= r8_twiddle(tb, p, lo, k, prev_k);
                        }
                        x[t as usize][m as usize] = y;
                    }
                }
            } else {
                for t in 0..threads {
                    for m in 0..8u32 {
                        let e = t + (m << (tbits - 3));
                        let p = r8_pos(base, lo, c, e);
                        let mut y = g.load(p);
                        if !dit && prev_k != 0 {
                            y *= r8_twiddle(tb, p, lo, k, prev_k);
                        }
                        sm.store(t as usize, r8_swz(e), y);
                    }
                }
                sm.sync();
                for t in 0..threads {
                    for m in 0..8u32 {
                        x[t as usize][m as usize] =
                            sm.load(t as usize, r8_swz(r8_elem(t, c + w, m)));
                    }
                }
            }
            for ri in 0..nr {
                let gi = if dit { ri } else { nr - 1 - ri };
                w = r8_group_lo(gi, r0);
                if ri > 0 {
                    sm.sync();
                    for t in 0..threads {
                        for m in 0..8u32 {
                            x[t as usize][m as usize] =
                                sm.load(t as usize, r8_swz(r8_elem(t, c + w, m)));
                        }
                    }
                }
                for t in 0..threads {
                    let r = if gi == 0 { r0 } else { 3 };
                    r8_round(&mut x[t as usize], t, c, w, r, dit, tb);
                }
                if ri + 1 < nr {
                    for t in 0..threads {
                        for m in 0..8u32 {
                            let s = r8_swz(r8_elem(t, c + w, m));
                            sm.store(t as usize, s, x[t as usize][m as usize]);
                        }
                    }
                }
            }
            if c + w >= 3 {
                for t in 0..threads {
                    for m in 0..8u32 {
                        let p = r8_pos(base, lo, c, r8_elem(t, c + w, m));
                        let mut y = x[t as usize][m as usize];
                        if dit && prev_k != 0 {
                            y *= r8_twiddle(tb, p, lo, k, prev_k);
                        }
                        g.store(p, y);
                    }
                }
            } else {
                for t in 0..threads {
                    for m in 0..8u32 {
                        let s = r8_swz(r8_elem(t, c + w, m));
                        sm.store(t as usize, s, x[t as usize][m as usize]);
                    }
                }
                sm.sync();
                for t in 0..threads {
                    for m in 0..8u32 {
                        let e = t + (m << (tbits - 3));
                        let p = r8_pos(base, lo, c, e);
                        let mut y = sm.load(t as usize, r8_swz(e));
                        if dit && prev_k != 0 {
                            y *= r8_twiddle(tb, p, lo, k, prev_k);
                        }
                        g.store(p, y);
                    }
                }
            }
        }
        g.finish();
    }

    /// `ntt_pass` (the radix-2 kernel) over every block.
    fn radix2_pass(data: &mut [Scalar], log_n: u32, p: Pass, dit: bool, tb: &Tabs) {
        let Pass { lo, k, c, prev_k } = p;
        let mut g = Global::new(data);
        let grid = 1u32 << (log_n - k - c);
        let tile = 1u32 << (k + c);
        let half = tile >> 1;
        let smask = (1u32 << c) - 1;
        for b in 0..grid {
            let sub_base = (b & ((1u32 << (lo - c)) - 1)) << c;
            let high = b >> (lo - c);
            let base = (high << (lo + k)) | sub_base;
            let mut s = vec![Scalar::ZERO; tile as usize];
            for t in 0..half {
                for r in 0..2 {
                    let e = t + r * half;
                    let p = base | ((e >> c) << lo) | (e & smask);
                    let mut x = g.load(p);
                    if !dit && prev_k != 0 {
                        x *= pass_twiddle(tb, p, lo, k, prev_k);
                    }
                    s[e as usize] = x;
                }
            }
            for st in 0..k {
                for t in 0..half {
                    let sidx = t & smask;
                    let q = t >> c;
                    let lh = if dit { st } else { k - 1 - st };
                    let h = 1u32 << lh;
                    let j = q & (h - 1);
                    let l1 = ((q >> lh) << (lh + 1)) | j;
                    let (e1, e2) = (
                        ((l1 << c) | sidx) as usize,
                        (((l1 + h) << c) | sidx) as usize,
                    );
                    let (x, mut y) = (s[e1], s[e2]);
                    if dit {
                        if j != 0 {
                            y *= tb.t1[(j << (15 - lh)) as usize];
                        }
                        s[e1] = x + y;
                        s[e2] = x - y;
                    } else {
                        let mut d = x - y;
                        if j != 0 {
                            d *= tb.t1[(j << (15 - lh)) as usize];
                        }
                        s[e1] = x + y;
                        s[e2] = d;
                    }
                }
            }
            for t in 0..half {
                for r in 0..2 {
                    let e = t + r * half;
                    let p = base | ((e >> c) << lo) | (e & smask);
                    let mut x = s[e as usize];
                    if dit && prev_k != 0 {
                        x *= pass_twiddle(tb, p, lo, k, prev_k);
                    }
                    g.store(p, x);
                }
            }
        }
        g.finish();
    }

    /// `ntt_r2wg_table` from the forward tables.
    fn r2wg_table(fwd: &Tabs, log_n: u32) -> Vec<Scalar> {
        (0..1u32 << (log_n - 1))
            .map(|j| root_pow(fwd, j << (32 - log_n)))
            .collect()
    }

    /// `R2wg`: r2wg's table for this size and the direction.
    struct R2wg<'a> {
        w: &'a [Scalar],
        log_n: u32,
        inv: bool,
    }

    fn r2wg_index(base: u32, lo: u32, c: u32, e1: u32, lh: u32, log_n: u32) -> u32 {
        let b = lo + lh;
        (r8_pos(base, lo, c, e1) & ((1u32 << b) - 1)) << (log_n - 1 - b)
    }

    fn r2wg_bfly(x: &mut Scalar, y: &mut Scalar, wi: u32, dit: bool, g: &R2wg) {
        if wi == 0 {
            let s = *x + *y;
            *y = *x - *y;
            *x = s;
            return;
        }
        let i = if g.inv {
            (1u32 << (g.log_n - 1)) - wi
        } else {
            wi
        };
        assert!((i as usize) < g.w.len(), "W index out of the table");
        let w = g.w[i as usize];
        if dit {
            *y *= w;
            let (a, s) = (*x + *y, *x - *y);
            *x = if g.inv { s } else { a };
            *y = if g.inv { a } else { s };
        } else {
            let d = if g.inv { *y - *x } else { *x - *y };
            *x += *y;
            *y = d * w;
        }
    }

    /// `r2w_bfly_e`: the butterfly on tile elements (e1, e1 + 2^(c + lh)).
    #[allow(clippy::too_many_arguments)]
    fn r2w_bfly_e(
        x: &mut Scalar,
        y: &mut Scalar,
        e1: u32,
        j: u32,
        lh: u32,
        dit: bool,
        tb: &Tabs,
        (base, lo, c): (u32, u32, u32),
        g: Option<&R2wg>,
    ) {
        match g {
            Some(g) => r2wg_bfly(x, y, r2wg_index(base, lo, c, e1, lh, g.log_n), dit, g),
            None => r2w_bfly(x, y, j, lh, dit, tb),
        }
    }

    /// `ntt_pass_g` over every block.
    fn radix2_pass_g(data: &mut [Scalar], log_n: u32, p: Pass, dit: bool, g: &R2wg) {
        let Pass { lo, k, c, .. } = p;
        let mut gm = Global::new(data);
        let grid = 1u32 << (log_n - k - c);
        let tile = 1u32 << (k + c);
        let half = tile >> 1;
        let smask = (1u32 << c) - 1;
        for b in 0..grid {
            let base = ((b >> (lo - c)) << (lo + k)) | ((b & ((1u32 << (lo - c)) - 1)) << c);
            let mut sm = Smem::new(tile);
            for t in 0..half {
                for r in 0..2 {
                    let e = t + r * half;
                    sm.store(t as usize, e, gm.load(r8_pos(base, lo, c, e)));
                }
            }
            sm.sync();
            for st in 0..k {
                for t in 0..half {
                    let s = t & smask;
                    let q = t >> c;
                    let lh = if dit { st } else { k - 1 - st };
                    let h = 1u32 << lh;
                    let l1 = ((q >> lh) << (lh + 1)) | (q & (h - 1));
                    let (e1, e2) = ((l1 << c) | s, ((l1 + h) << c) | s);
                    let mut x = sm.load(t as usize, e1);
                    let mut y = sm.load(t as usize, e2);
                    let wi = r2wg_index(base, lo, c, e1, lh, log_n);
                    r2wg_bfly(&mut x, &mut y, wi, dit, g);
                    sm.store(t as usize, e1, x);
                    sm.store(t as usize, e2, y);
                }
                sm.sync();
            }
            for t in 0..half {
                for r in 0..2 {
                    let e = t + r * half;
                    let x = sm.load(t as usize, e);
                    gm.store(r8_pos(base, lo, c, e), x);
                }
            }
        }
        gm.finish();
    }

    fn r2w_ins1(t: u32, pos: u32) -> u32 {
        ((t >> pos) << (pos + 1)) | (t & ((1u32 << pos) - 1))
    }

    fn r2w_bfly(x: &mut Scalar, y: &mut Scalar, j: u32, lh: u32, dit: bool, tb: &Tabs) {
        if dit {
            if j != 0 {
                *y *= t1_at(tb, j, lh);
            }
            let s = *x + *y;
            *y = *x - *y;
            *x = s;
        } else {
            let mut d = *x - *y;
            *x += *y;
            if j != 0 {
                d *= t1_at(tb, j, lh);
            }
            *y = d;
        }
    }

    /// `r2w_swap` for every lane of one warp at once (`x[lane]` = the lane's x0, x1):
    /// each lane sends, then each receives from lane ^ 2^lb.
    fn r2w_swap(x: &mut [[Scalar; 2]], lb: u32) {
        assert_eq!(x.len(), 32, "shuffles need a full warp");
        let send: Vec<Scalar> = (0..32u32)
            .map(|lane| {
                let v = (lane >> lb) & 1;
                x[lane as usize][(1 - v) as usize]
            })
            .collect();
        for lane in 0..32u32 {
            let v = (lane >> lb) & 1;
            x[lane as usize][(1 - v) as usize] = send[(lane ^ (1 << lb)) as usize];
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn r2w_smem_stage(
        sm: &mut Smem,
        x_threads: u32,
        c: u32,
        p_bit: u32,
        dit: bool,
        tb: &Tabs,
        (base, lo): (u32, u32),
        g: Option<&R2wg>,
    ) {
        for t in 0..x_threads {
            let e1 = r2w_ins1(t, p_bit);
            let e2 = e1 | (1 << p_bit);
            let lh = p_bit - c;
            let mut x = sm.load(t as usize, e1);
            let mut y = sm.load(t as usize, e2);
            let j = (e1 >> c) & ((1u32 << lh) - 1);
            r2w_bfly_e(&mut x, &mut y, e1, j, lh, dit, tb, (base, lo, c), g);
            sm.store(t as usize, e1, x);
            sm.store(t as usize, e2, y);
        }
        sm.sync();
    }

    /// `r2w_pass<DIT>` over every block; threads are kept as `x[t] = [x0, x1]` and the
    /// warp stages run warp by warp (shuffles are warp-synchronous).
    /// With `g`, the r2wg flavour (global twiddles, no inter-pass twiddle).
    fn r2w_pass(data: &mut [Scalar], log_n: u32, p: Pass, dit: bool, tb: &Tabs, rg: Option<&R2wg>) {
        let Pass { lo, k, c, prev_k } = p;
        assert!(k + c >= 6 && k + c <= MAX_PASS_BITS && c <= lo);
        let mut g = Global::new(data);
        let grid = 1u32 << (log_n - k - c);
        let tbits = k + c;
        let tile = 1u32 << tbits;
        let half = tile >> 1;
        let threads = half;
        let top = tbits - 1;
        let cc = c.min(5);
        for blk in 0..grid {
            let base = ((blk >> (lo - c)) << (lo + k)) | ((blk & ((1u32 << (lo - c)) - 1)) << c);
            let mut sm = Smem::new(tile);
            let mut x = vec![[Scalar::ZERO; 2]; threads as usize];
            let lane_of = |t: u32| t & 31;
            let wbase_of = |t: u32| (t >> 5) << 6;
            let jtop = |t: u32| (t >> c) & ((1u32 << (k - 1)) - 1);
            let bc = (base, lo, c);
            // The warp stages of one warp (threads w*32 .. w*32 + 32; wbase = w << 6).
            let warp_stages = |x: &mut [[Scalar; 2]], wbase: u32| {
                if dit {
                    for pb in cc..=5 {
                        if pb > cc {
                            r2w_swap(x, pb - 1);
                        }
                        if pb >= c {
                            let lh = pb - c;
                            for lane in 0..32u32 {
                                let [x0, x1] = &mut x[lane as usize];
                                let (e1, j) =
                                    (wbase | r2w_ins1(lane, pb), (lane >> c) & ((1u32 << lh) - 1));
                                r2w_bfly_e(x0, x1, e1, j, lh, true, tb, bc, rg);
                            }
                        }
                    }
                } else {
                    for pb in (c as i32..=5).rev() {
                        if pb < 5 {
                            r2w_swap(x, pb as u32);
                        }
                        if (pb as u32) < top {
                            let lh = pb as u32 - c;
                            for lane in 0..32u32 {
                                let [x0, x1] = &mut x[lane as usize];
                                let e1 = wbase | r2w_ins1(lane, pb as u32);
                                let j = (lane >> c) & ((1u32 << lh) - 1);
                                r2w_bfly_e(x0, x1, e1, j, lh, false, tb, bc, rg);
                            }
                        }
                    }
                }
            };
            if !dit {
                for t in 0..threads {
                    let (p0, p1) = (r8_pos(base, lo, c, t), r8_pos(base, lo, c, t + half));
                    let (mut x0, mut x1) = (g.load(p0), g.load(p1));
                    if rg.is_none() && prev_k != 0 {
                        x0 *= r8_twiddle(tb, p0, lo, k, prev_k);
                        x1 *= r8_twiddle(tb, p1, lo, k, prev_k);
                    }
                    r2w_bfly_e(&mut x0, &mut x1, t, jtop(t), k - 1, false, tb, bc, rg);
                    x[t as usize] = [x0, x1];
                }
                if top > 5 {
                    for t in 0..threads {
                        sm.store(t as usize, t, x[t as usize][0]);
                        sm.store(t as usize, t + half, x[t as usize][1]);
                    }
                    sm.sync();
                    for pb in (c.max(6)..top).rev() {
                        r2w_smem_stage(&mut sm, threads, c, pb, false, tb, (base, lo), rg);
                    }
                    for t in 0..threads {
                        let e = wbase_of(t) | lane_of(t);
                        x[t as usize] = [sm.load(t as usize, e), sm.load(t as usize, e | 32)];
                    }
                }
                for (wi, w) in x.chunks_mut(32).enumerate() {
                    warp_stages(w, (wi as u32) << 6);
                }
                for t in 0..threads {
                    let e0 = wbase_of(t) | r2w_ins1(lane_of(t), cc);
                    g.store(r8_pos(base, lo, c, e0), x[t as usize][0]);
                    g.store(r8_pos(base, lo, c, e0 | (1 << cc)), x[t as usize][1]);
                }
            } else {
                for t in 0..threads {
                    let e0 = wbase_of(t) | r2w_ins1(lane_of(t), cc);
                    x[t as usize] = [
                        g.load(r8_pos(base, lo, c, e0)),
                        g.load(r8_pos(base, lo, c, e0 | (1 << cc))),
                    ];
                }
                for (wi, w) in x.chunks_mut(32).enumerate() {
                    warp_stages(w, (wi as u32) << 6);
                }
                if top > 5 {
                    for t in 0..threads {
                        let e = wbase_of(t) | lane_of(t);
                        sm.store(t as usize, e, x[t as usize][0]);
                        sm.store(t as usize, e | 32, x[t as usize][1]);
                    }
                    sm.sync();
                    for pb in c.max(6)..top {
                        r2w_smem_stage(&mut sm, threads, c, pb, true, tb, (base, lo), rg);
                    }
                    for t in 0..threads {
                        let (mut x0, mut x1) =
                            (sm.load(t as usize, t), sm.load(t as usize, t + half));
                        r2w_bfly_e(&mut x0, &mut x1, t, jtop(t), k - 1, true, tb, bc, rg);
                        x[t as usize] = [x0, x1];
                    }
                }
                for t in 0..threads {
                    let (p0, p1) = (r8_pos(base, lo, c, t), r8_pos(base, lo, c, t + half));
                    let [mut x0, mut x1] = x[t as usize];
                    if rg.is_none() && prev_k != 0 {
                        x0 *= r8_twiddle(tb, p0, lo, k, prev_k);
                        x1 *= r8_twiddle(tb, p1, lo, k, prev_k);
                    }
                    g.store(p0, x0);
                    g.store(p1, x1);
                }
            }
        }
        g.finish();
    }

    /// A direction's tables, and r2wg's table for the transform's size (`w`, from
    /// `r2wg_table`).
    struct Tw<'a> {
        tb: &'a Tabs,
        w: &'a [Scalar],
    }

    /// `Ntt::pass`'s choice of kernel (and `Ntt::pass_global`'s).
    fn pass(data: &mut [Scalar], log_n: u32, p: Pass, dit: bool, tw: &Tw, kernel: NttKernel) {
        let tb = tw.tb;
        match kernel.for_pass(&p) {
            NttKernel::Radix8 => r8_pass(data, log_n, p, dit, tb),
            // r2wf and r2wf3 are r2w with another (equal-valued) product and another
            // register budget: the same index math.
            NttKernel::Radix2Warp | NttKernel::Radix2WarpFast | NttKernel::Radix2WarpFast3 => {
                r2w_pass(data, log_n, p, dit, tb, None)
            }
            NttKernel::Radix2WarpGlobal => {
                let g = R2wg {
                    w: tw.w,
                    log_n,
                    inv: tb.inv,
                };
                if p.k + p.c >= 6 {
                    r2w_pass(data, log_n, p, dit, tb, Some(&g))
                } else {
                    radix2_pass_g(data, log_n, p, dit, &g)
                }
            }
            NttKernel::Radix2 => radix2_pass(data, log_n, p, dit, tb),
        }
    }

    fn dif(data: &mut [Scalar], log_n: u32, plan: &[Pass], tw: &Tw, kernel: NttKernel) {
        for &p in plan {
            pass(data, log_n, p, false, tw, kernel);
        }
    }

    fn dit(data: &mut [Scalar], log_n: u32, plan: &[Pass], tw: &Tw, kernel: NttKernel) {
        for &p in plan.iter().rev() {
            pass(data, log_n, p, true, tw, kernel);
        }
    }

    /// `plan` with another choice of c (the kernels take any c <= lo with k + c <= 10).
    fn plan_with_c(log_n: u32, f: impl Fn(&Pass) -> u32) -> Vec<Pass> {
        plan(log_n)
            .into_iter()
            .map(|p| Pass { c: f(&p), ..p })
            .collect()
    }

    /// A plan like `plan`'s with a given number of passes (small transforms then have
    /// middle passes, with both a twiddle in and one out, as 2^21 and up do).
    fn plan_split(log_n: u32, passes: u32) -> Vec<Pass> {
        let base = log_n / passes;
        let extra = log_n % passes;
        let mut out = Vec::new();
        let (mut hi, mut prev_k) = (log_n, 0);
        for i in 0..passes {
            let k = base + u32::from(i < extra);
            let lo = hi - k;
            out.push(Pass {
                lo,
                k,
                c: lo.min(MAX_PASS_BITS - k),
                prev_k,
            });
            prev_k = k;
            hi = lo;
        }
        out
    }

    fn check_size(log_n: u32, tabs: &[Tabs; 2], pool: &rayon::ThreadPool, more_plans: bool) {
        let n = 1usize << log_n;
        let mut rng = ChaCha20Rng::seed_from_u64(u64::from(log_n));
        let input: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let dom = cuzk_gpu_backend::ntt::Domain::new(log_n).unwrap();
        let mut fwd = input.clone();
        dom.fft(&mut fwd, pool).unwrap();
        let mut inv = input.clone();
        dom.ifft(&mut inv, pool).unwrap();
        let nn = Scalar::from(n as u64);
        inv.iter_mut().for_each(|x| *x *= nn);
        let br = |v: &[Scalar]| -> Vec<Scalar> {
            (0..n)
                .map(|i| v[bitrev(i as u32, log_n) as usize])
                .collect()
        };
        let input_br = br(&input);
        let mut plans = vec![("default c", plan(log_n))];
        let zero_c =
            |v: Vec<Pass>| -> Vec<Pass> { v.into_iter().map(|p| Pass { c: 0, ..p }).collect() };
        for passes in [3u32, 4] {
            if more_plans && log_n >= 3 * passes {
                plans.push(("split", plan_split(log_n, passes)));
                plans.push(("split, c = 0", zero_c(plan_split(log_n, passes))));
            }
        }
        if more_plans && log_n > 1 {
            plans.push(("c = 0", plan_with_c(log_n, |_| 0)));
            plans.push((
                "c = min(lo, 2)",
                plan_with_c(log_n, |p| p.lo.min(2).min(MAX_PASS_BITS - p.k)),
            ));
        }
        let w = r2wg_table(&tabs[0], log_n);
        for (pname, pl) in &plans {
            // r2wf and r2wf3 run r2w's index math (their product is checked by
            // tests/host_arith.rs).
            let kernels = NttKernel::ALL
                .into_iter()
                .filter(|&k| !matches!(k, NttKernel::Radix2WarpFast | NttKernel::Radix2WarpFast3));
            for kernel in kernels {
                for (dir, want, tb) in [
                    (Direction::Forward, &fwd, &tabs[0]),
                    (Direction::Inverse, &inv, &tabs[1]),
                ] {
                    let what = format!("2^{log_n} {pname} {kernel:?} {dir:?}");
                    let tw = Tw { tb, w: &w };
                    let mut d = input.clone();
                    dif(&mut d, log_n, pl, &tw, kernel);
                    assert!(br(&d) == *want, "dif {what}");
                    let mut d = input_br.clone();
                    dit(&mut d, log_n, pl, &tw, kernel);
                    assert!(d == *want, "dit {what}");
                }
            }
        }
    }

    /// `Ntt::h_from`'s data flow with the kernels' index math (the DIF passes as
    /// emulated above, `ab_combine` and `bitrev_scale_sub_copy` line by line; the
    /// coset transforms of a and b by the CPU domain) against the CPU H chain: c
    /// goes through one inverse transform and is subtracted from the coefficients.
    #[test]
    fn h_with_c_subtracted_from_the_coefficients_matches_the_cpu_chain() {
        let tabs = Tabs::new(Direction::Inverse);
        let pool = pool();
        for (log_n, len) in [(1u32, 2usize), (5, 29), (10, 1024), (12, 3001)] {
            let n = 1usize << log_n;
            let mut rng = ChaCha20Rng::seed_from_u64(u64::from(log_n) + 100);
            let mut abc: [Vec<Scalar>; 3] =
                std::array::from_fn(|_| (0..len).map(|_| Scalar::random(&mut rng)).collect());
            let want = cuzk_gpu_backend::compute_h(
                cuzk_gpu_backend::Abc {
                    a: abc[0].clone(),
                    b: abc[1].clone(),
                    c: abc[2].clone(),
                },
                &pool,
            )
            .unwrap();
            for v in &mut abc {
                v.resize(n, Scalar::ZERO);
            }
            let [mut a, mut b, mut c] = abc;
            let dom = cuzk_gpu_backend::ntt::Domain::new(log_n).unwrap();
            for v in [&mut a, &mut b] {
                dom.ifft(v, &pool).unwrap();
                dom.coset_fft(v, &pool).unwrap();
            }
            let pl = plan(log_n);
            let tw = Tw { tb: &tabs, w: &[] };
            dif(&mut c, log_n, &pl, &tw, NttKernel::Radix2Warp);
            let g = Scalar::MULTIPLICATIVE_GENERATOR;
            let zinv = (g.pow_vartime([n as u64]) - Scalar::ONE).invert().unwrap();
            let n_inv = Scalar::from(n as u64).invert().unwrap();
            // ab_combine
            for (x, y) in a.iter_mut().zip(&b) {
                *x = *x * y * zinv;
            }
            dif(&mut a, log_n, &pl, &tw, NttKernel::Radix2Warp);
            // bitrev_scale_sub_copy (P0, P1: g^-q / n)
            let s = zinv * n_inv;
            let mut out = vec![Scalar::ZERO; n];
            for p in 0..n {
                let q = bitrev(p as u32, log_n) as usize;
                let f = g.invert().unwrap().pow_vartime([q as u64]) * n_inv;
                out[q] = a[p] * f - c[p] * s;
            }
            assert_eq!(out[..n - 1], want[..], "2^{log_n}, {len} constraints");
        }
    }

    fn pool() -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap()
    }

    #[test]
    fn kernels_match_cpu_ntt_small() {
        let tabs = [Tabs::new(Direction::Forward), Tabs::new(Direction::Inverse)];
        let pool = pool();
        for log_n in 1..=14 {
            check_size(log_n, &tabs, &pool, true);
        }
    }

    #[test]
    fn kernels_match_cpu_ntt_large() {
        let tabs = [Tabs::new(Direction::Forward), Tabs::new(Direction::Inverse)];
        let pool = pool();
        for log_n in [16, 17, 19] {
            check_size(log_n, &tabs, &pool, true);
        }
        // The real 3-pass plan (7, 7, 7), default c only.
        check_size(21, &tabs, &pool, false);
    }

    /// `bitrev_tiled` over every block: each block writes exactly the positions it
    /// read, so the in-place kernel has no hazard between blocks.
    fn bitrev_tiled(data: &mut [Scalar], log_n: u32, s: Option<Scalar>) {
        assert!(log_n >= BITREV_TILED_MIN_LOG);
        let mut g = Global::new(data);
        let mb = log_n - 8;
        let sh = log_n - 4;
        for m in 0..1u32 << mb {
            let mr = bitrev(m, mb);
            if mr < m {
                continue;
            }
            let ntile = if mr == m { 1 } else { 2 };
            let mut tile = vec![vec![None; 16 * 17]; 2];
            let (mut read, mut written) = (Vec::new(), Vec::new());
            for i in 0..ntile {
                for t in 0..256u32 {
                    let (hi, lo) = (t >> 4, t & 15);
                    let p = (hi << sh) | ((if i == 1 { mr } else { m }) << 4) | lo;
                    read.push(p);
                    let mut x = g.load(p);
                    if let Some(s) = s {
                        x *= s;
                    }
                    let slot = &mut tile[i][(hi * 17 + lo) as usize];
                    assert!(slot.is_none(), "tile slot written twice");
                    *slot = Some(x);
                }
            }
            for i in 0..ntile {
                for t in 0..256u32 {
                    let (hi, lo) = (t >> 4, t & 15);
                    let (a, b) = (bitrev(lo, 4), bitrev(hi, 4));
                    let x = tile[i][(a * 17 + b) as usize].expect("tile slot read before written");
                    let p = (hi << sh) | ((if i == 1 { m } else { mr }) << 4) | lo;
                    written.push(p);
                    g.store(p, x);
                }
            }
            read.sort_unstable();
            written.sort_unstable();
            assert_eq!(read, written, "block {m} writes what it did not read");
        }
        g.finish();
    }

    #[test]
    fn bitrev_tiled_is_the_bit_reversal() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        for log_n in BITREV_TILED_MIN_LOG..=15 {
            let n = 1usize << log_n;
            let input: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            let s = Scalar::random(&mut rng);
            for scale in [None, Some(s)] {
                let mut d = input.clone();
                bitrev_tiled(&mut d, log_n, scale);
                let f = scale.unwrap_or(Scalar::ONE);
                let ok = (0..n).all(|i| d[bitrev(i as u32, log_n) as usize] == input[i] * f);
                assert!(ok, "2^{log_n} scale {}", scale.is_some());
            }
        }
    }

    /// Every shared-memory access pattern of the register kernel (round windows at any
    /// tile bit, the linear arrangement) hits 32 distinct banks per warp.
    #[test]
    fn r8_smem_is_free_of_bank_conflicts() {
        for tbits in 8..=MAX_PASS_BITS {
            let threads = 1u32 << (tbits - 3);
            for m in 0..8u32 {
                for warp in (0..threads).step_by(32) {
                    let lanes = warp..warp + 32;
                    for pos in 0..=tbits - 3 {
                        let mut banks: Vec<u32> = lanes
                            .clone()
                            .map(|t| r8_swz(r8_elem(t, pos, m)) % 32)
                            .collect();
                        banks.sort_unstable();
                        banks.dedup();
                        assert_eq!(banks.len(), 32, "tile 2^{tbits} window at {pos}");
                    }
                    let mut banks: Vec<u32> =
                        lanes.map(|t| r8_swz(t + (m << (tbits - 3))) % 32).collect();
                    banks.sort_unstable();
                    banks.dedup();
                    assert_eq!(banks.len(), 32, "tile 2^{tbits} linear");
                }
            }
        }
        // The swizzle is a permutation of every tile.
        for tbits in 0..=MAX_PASS_BITS {
            let mut v: Vec<u32> = (0..1u32 << tbits).map(r8_swz).collect();
            v.sort_unstable();
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
        }
    }
}
