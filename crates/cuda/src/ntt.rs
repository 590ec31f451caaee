//! NTTs over Fr on the device and the H computation built from them.
//!
//! Domains up to 2^28. A transform of 2^L points runs as ceil(L / 10) passes, each
//! doing up to 10 radix-2 stages of one chunk of index bits in one kernel launch (see
//! `kernels/ntt.cu` for the decomposition). Two pass kernels with bit-identical
//! results (`CudaConfig::ntt_kernel`): `r2wg` (the default) and `r2wf`. Both keep 2
//! elements per thread, do the stages inside a warp with register shuffles and fuse
//! the top stage with the global access (4 barriers per 9-bit pass instead of 10),
//! with the cheaper Fr product `fr_mul_nt`. `r2wf` applies the four-step split's
//! inter-pass twiddles (tiles under a warp go to `ntt_pass`, one stage per
//! exchange); `r2wg` uses the plain radix-2 transform's global twiddles, one load
//! each from a per-size table of N/2 roots, and has no inter-pass products. On the
//! H200 (fifth session, even/odd products) r2wg took 5.20 / 22.3 / 46.7 ms at 2^24 /
//! 2^26 / 2^27; in the same earlier run r2wg 6.83 / 29.8 / 62.0 and r2wf 7.50 /
//! 32.2 / 65.5. r2wf stays because its table-free passes need no 2 GiB of device
//! memory at 2^27 (r2wg's table): the choice for a GPU where that does not fit.
//! Variants that never won (`r8`, `radix2`, `r2w`, `r2wf3`) are gone; their numbers
//! are in `NOTES.md` with the commit that last had them.
//! Roots of unity come from two device tables
//! of 2^16 powers each (per direction), shared by every domain size, plus a table of
//! the 2^18-th roots so that inter-pass twiddles of order up to 2^18 are one load.
//!
//! Every pass kernel runs on the host in the tests (module `host`: `kernels/ntt.cu`
//! compiled by the system C++ compiler, a block's threads as host threads) with the
//! launches [`Ntt`] makes, and is checked against the CPU NTT for many plans.
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

/// Which pass kernel the transforms use (`CudaConfig::ntt_kernel`: `"r2wg"`,
/// `"r2wf"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NttKernel {
    /// `ntt_r2wf_dif` / `ntt_r2wf_dit` (and `ntt_pass` for tiles under a full
    /// warp): the four-step split with inter-pass twiddles from the shared root
    /// tables, one load up to order 2^18. Needs no per-size table: the kernel for a
    /// device where r2wg's N/2 roots (2 GiB at 2^27) do not fit.
    #[serde(rename = "r2wf")]
    Radix2WarpFast,
    /// `ntt_r2wg_dif` / `ntt_r2wg_dit` (and `ntt_pass_g` for tiles under 64
    /// elements): `Radix2WarpFast`'s passes with the plain radix-2 transform's global
    /// twiddles, one load each from a table of N/2 roots per size (N/2 × 32 bytes,
    /// cached), and no inter-pass twiddle products.
    #[serde(rename = "r2wg")]
    Radix2WarpGlobal,
}

impl NttKernel {
    /// Every kernel, in the order the device checks run them.
    pub const ALL: [NttKernel; 2] = [NttKernel::Radix2WarpFast, NttKernel::Radix2WarpGlobal];

    /// The name the configuration uses (`ntt_kernel = "r2wg"`).
    pub fn name(self) -> &'static str {
        match self {
            NttKernel::Radix2WarpFast => "r2wf",
            NttKernel::Radix2WarpGlobal => "r2wg",
        }
    }

    /// The kernel named `name` (`r2wg`, `r2wf`), or an error that lists them.
    pub fn from_name(name: &str) -> Result<Self, CudaError> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                CudaError::Config(format!(
                    "unknown NTT kernel {name:?} (one of: {})",
                    Self::ALL.map(Self::name).join(", ")
                ))
            })
    }

    /// The fastest on the H200 (r2wg: 0.393 / 6.83 / 29.8 / 62.0 ms at 2^20 / 2^24 /
    /// 2^26 / 2^27 against r2wf's 0.421 / 7.49 / 32.2 / 65.5 in the same run;
    /// NOTES.md). Its table of N/2 roots per size (2 GiB at 2^27) is the price;
    /// `r2wf` runs without it.
    pub const DEFAULT: NttKernel = NttKernel::Radix2WarpGlobal;

    fn code(self) -> u8 {
        match self {
            NttKernel::Radix2WarpFast => 0,
            NttKernel::Radix2WarpGlobal => 1,
        }
    }

    fn from_code(v: u8) -> Self {
        match v {
            0 => NttKernel::Radix2WarpFast,
            _ => NttKernel::Radix2WarpGlobal,
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

/// How many device buffers of the whole domain H's computation takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HBuffers {
    /// `a`, `b` and `c` at once: `c`'s upload and transform overlap `a`'s and
    /// `b`'s (12 GiB at 2^27).
    Three,
    /// Two: `c` goes up into `b`'s buffer once `a_c·b_c` is combined, and the last
    /// step runs in place (`bitrev_scale_sub`): 8 GiB at 2^27, what a 16 GB card
    /// has room for, at the cost of `c`'s upload no longer overlapped.
    Two,
}

impl HBuffers {
    pub fn count(self) -> u64 {
        match self {
            HBuffers::Three => 3,
            HBuffers::Two => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HBuffers::Three => "three",
            HBuffers::Two => "two",
        }
    }
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
    gpu.upload::<FrRepr>(bytemuck::cast_slice(v))
}

fn pow2k(x: Scalar, k: u32) -> Scalar {
    let mut y = x;
    for _ in 0..k {
        y = y.square();
    }
    y
}

impl Ntt {
    /// Builds the root tables on `gpu`; transforms run with `kernel`.
    pub fn new(gpu: &Gpu, kernel: NttKernel) -> Result<Self, CudaError> {
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
            kernel: AtomicU8::new(kernel.code()),
        })
    }

    /// The pass kernel in use (initially the one [`Ntt::new`] was given).
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
        let l = pass_launch(self.kernel(), log_n, p, dit, dir);
        let (name, cfg) = (l.name, l.cfg);
        match l.args {
            PassArgs::Global([lo, k, c, log_n, inv]) => {
                let w = self.global_table(gpu, log_n)?;
                let w: &CudaSlice<FrRepr> = &w;
                crate::launch!(gpu, name, cfg, &mut *data, &lo, &k, &c, &log_n, &inv, w)
            }
            PassArgs::GlobalSmall([lo, k, c, dit, log_n, inv]) => {
                let w = self.global_table(gpu, log_n)?;
                let w: &CudaSlice<FrRepr> = &w;
                crate::launch!(gpu, name, cfg, &mut *data, &lo, &k, &c, &dit, &log_n, &inv, w)
            }
            PassArgs::Tables([lo, k, c, prev_k]) => {
                let tb = self.tables(dir);
                crate::launch!(
                    gpu, name, cfg, &mut *data, &lo, &k, &c, &prev_k, &tb.t0, &tb.t1, &tb.t18
                )
            }
            PassArgs::Radix2([lo, k, c, prev_k, dit]) => {
                let tb = self.tables(dir);
                crate::launch!(
                    gpu, name, cfg, &mut *data, &lo, &k, &c, &prev_k, &dit, &tb.t0, &tb.t1
                )
            }
        }
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
        let (name, cfg) = bitrev_launch(log_n);
        crate::launch!(gpu, name, cfg, &mut *data, &log_n, &do_scale, &s)
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

    /// Device memory the H computation needs for `n` constraints with `kernel`
    /// (bytes): the three buffers, and for r2wg its table (kept once built).
    pub fn h_device_bytes(kernel: NttKernel, n: usize, buffers: HBuffers) -> u64 {
        let big = 1u64 << crate::log_domain(n);
        buffers.count() * big * 32 + Self::kept_table_bytes(kernel, n)
    }

    /// Device memory `kernel` keeps for transforms of `n` constraints once it has
    /// run one (r2wg's table; none for r2wf): alive through every later phase.
    pub fn kept_table_bytes(kernel: NttKernel, n: usize) -> u64 {
        match kernel {
            NttKernel::Radix2WarpGlobal => Self::global_table_bytes(crate::log_domain(n)),
            _ => 0,
        }
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
        buffers: HBuffers,
    ) -> Result<CudaSlice<FrRepr>, CudaError> {
        let upload = Self::upload_abc(gpu, a, b, c, buffers)?;
        self.h_from(gpu, upload)
    }

    /// The first half of [`Self::compute_h`]: enqueues the uploads of `a, b, c` on the
    /// copy stream (page-locking those not registered yet) and returns at once, so
    /// the compute stream can take other work (a partition's L, A, B MSMs) while
    /// they travel. Anything else uploaded on the compute stream meanwhile would
    /// queue behind them on the copy engine: upload it first.
    ///
    /// With [`HBuffers::Two`] only `a` and `b` go up now, into two buffers; `c`
    /// (page-locked here all the same) goes up in [`Self::h_from`], into `b`'s
    /// buffer once `b` is spent.
    pub fn upload_abc<'a>(
        gpu: &Gpu,
        a: &'a [Scalar],
        b: &'a [Scalar],
        c: &'a [Scalar],
        buffers: HBuffers,
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
            copy: Arc::clone(&gpu.copy),
            enqueued: 0,
            log_n,
            deferred: (buffers == HBuffers::Two).then_some(c),
            len: n,
        };
        for _ in 0..buffers.count() {
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
        // (With two buffers the zip stops after b: c waits in `deferred`.)
        for (v, buf) in [a, b, c].into_iter().zip(up.bufs.iter_mut()) {
            // From here on a DMA may read the caller's memory (registered by us, by
            // the backend, or by the caller): any return waits for it first.
            up.enqueued += 1;
            raw::htod_bytes(&gpu.copy, scalars_as_bytes(v), buf, 0)?;
            up.uploaded.push(gpu.record(&gpu.copy)?);
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
        if up.deferred.is_some() {
            return self.h_from_two(gpu, up);
        }
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

    /// [`Self::h_from`] in two buffers ([`HBuffers::Two`]): a and b to the coset,
    /// combined into a's buffer; then c's upload into b's buffer (the copy stream
    /// waits for the combine) while a's product goes back to coefficients; c to
    /// its coefficients; the last step in place in a's buffer.
    fn h_from_two(&self, gpu: &Gpu, mut up: AbcUpload<'_>) -> Result<CudaSlice<FrRepr>, CudaError> {
        let log_n = up.log_n;
        let big = 1usize << log_n;
        let c = up
            .deferred
            .take()
            .ok_or_else(|| CudaError::Shape("no deferred c for a two-buffer H".into()))?;
        let mut bufs = std::mem::take(&mut up.bufs).into_iter();
        let (Some(mut ba), Some(mut bb), [ua, ub]) = (bufs.next(), bufs.next(), &up.uploaded[..])
        else {
            return Err(CudaError::Shape("a, b were not uploaded".into()));
        };
        for (buf, ev) in [(&mut ba, ua), (&mut bb, ub)] {
            gpu.compute.wait(ev).ctx("cuStreamWaitEvent")?;
            self.to_coset(gpu, buf, log_n)?;
        }
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
        // b's buffer is free once the combine has read it: c goes up into it (its
        // padding zeroed first, on the compute stream too).
        if up.len < big {
            zero_tail(gpu, &mut bb, up.len)?;
        }
        gpu.copy.join(&gpu.compute).ctx("cuStreamWaitEvent")?;
        up.enqueued += 1;
        raw::htod_bytes(&gpu.copy, scalars_as_bytes(c), &mut bb, 0)?;
        let uc = gpu.record(&gpu.copy)?;
        up.uploaded.push(uc);
        self.dif(gpu, &mut ba, log_n, Direction::Inverse)?;
        if let Some(uc) = up.uploaded.last() {
            gpu.compute.wait(uc).ctx("cuStreamWaitEvent")?;
        }
        self.dif(gpu, &mut bb, log_n, Direction::Inverse)?;
        let pw = self.pows(gpu, log_n, PowKind::CosetInvOverN)?;
        let s = scalar_to_repr(&(zinv * n_inv));
        crate::launch!(
            gpu,
            "bitrev_scale_sub",
            grid(big, 256),
            &mut ba,
            &bb,
            &log_n,
            &pw.p0,
            &pw.p1,
            &s
        )?;
        drop(bb);
        up.wait_uploads()?;
        Ok(ba)
    }
}

/// `a, b, c` on their way to the device ([`Ntt::upload_abc`]): their device buffers,
/// an event per upload, and the page-lockings made for them.
///
/// Dropping it before [`Ntt::h_from`] has waited (an error anywhere in between, in
/// `h_from` or in the caller) waits for every copy it enqueued, whoever page-locked
/// the host vectors: the backend pins a, b, c itself before it calls
/// [`Ntt::upload_abc`] (or the caller did, through `GpuBackend::stage`), so this
/// guard often owns no registration, yet the DMA still reads memory that the caller
/// unpins and frees as soon as the call returns.
#[must_use = "the uploads are waited for and their buffers freed when this is dropped"]
pub struct AbcUpload<'a> {
    bufs: Vec<CudaSlice<FrRepr>>,
    uploaded: Vec<CudaEvent>,
    regs: Vec<HostRegistration>,
    /// The stream the copies were enqueued on (waited for whole when a copy was
    /// enqueued but its event could not be recorded).
    copy: Arc<cudarc::driver::CudaStream>,
    /// Copies enqueued and not waited for yet (counted before each is enqueued, so
    /// a failed enqueue is waited for too: harmless).
    enqueued: usize,
    log_n: u32,
    /// With [`HBuffers::Two`]: c, uploaded later by [`Ntt::h_from`] (page-locked
    /// with a and b, in `regs`).
    deferred: Option<&'a [Scalar]>,
    /// Elements of a, b, c (the domain past them is zero).
    len: usize,
}

impl<'a> AbcUpload<'a> {
    /// `a, b, c` evaluated on the device ([`crate::spmv::eval_abc`]): `bufs` of the
    /// 2^log_n domain, zero-padded, each ready at its event in `ready` (recorded on
    /// the compute stream after the kernel, which itself waited for the witness
    /// copy), and the witness's page-locking, held until the last event has passed.
    pub(crate) fn evaluated(
        gpu: &Gpu,
        bufs: Vec<CudaSlice<FrRepr>>,
        ready: Vec<CudaEvent>,
        regs: Vec<HostRegistration>,
        log_n: u32,
    ) -> Self {
        Self {
            enqueued: ready.len(),
            bufs,
            uploaded: ready,
            regs,
            copy: Arc::clone(&gpu.copy),
            log_n,
            deferred: None,
            len: 1 << log_n,
        }
    }
}

impl AbcUpload<'_> {
    /// The three device buffers (a, b, c over the whole domain), for checks.
    #[cfg(feature = "testing")]
    pub(crate) fn buffers(&self) -> &[CudaSlice<FrRepr>] {
        &self.bufs
    }

    /// Waits (host side, on the last upload's event: never device-wide) until the
    /// copy engine has read the host vectors, then lets go of their page-locking.
    fn wait_uploads(&mut self) -> Result<(), CudaError> {
        if self.enqueued > 0 {
            if self.uploaded.len() == self.enqueued {
                // Every copy has its event; the last one covers them all (one stream).
                if let Some(last) = self.uploaded.last() {
                    last.synchronize().ctx("cuEventSynchronize")?;
                }
            } else {
                // A copy without its event (an error between the two): the copy
                // stream as a whole, still a stream-scoped wait.
                self.copy.synchronize().ctx("cuStreamSynchronize")?;
            }
            self.enqueued = 0;
        }
        self.regs.clear();
        Ok(())
    }
}

impl Drop for AbcUpload<'_> {
    fn drop(&mut self) {
        // Every DMA must be done before the host memory may go, whoever registered
        // it. A failed wait (the context is broken, so no DMA progresses) leaves
        // nothing better to do than unregister (Drop never panics).
        if let Err(e) = self.wait_uploads() {
            tracing::warn!("waiting for the a, b, c upload while dropping it failed: {e}");
            self.regs.clear();
        }
    }
}

/// What one pass launches: the kernel, its shape, and its arguments after the data
/// (and before the tables). [`Ntt::pass`] runs it on the device; the tests run the
/// same on the host (`tests/host/ntt_host.cpp`).
#[derive(Clone, Copy, Debug)]
struct PassLaunch {
    name: &'static str,
    cfg: LaunchConfig,
    args: PassArgs,
}

/// A pass kernel's scalar arguments, by kernel family.
#[derive(Clone, Copy, Debug)]
enum PassArgs {
    /// `ntt_r2wg_*`: lo, k, c, log_n, inv; then W.
    Global([u32; 5]),
    /// `ntt_pass_g`: lo, k, c, dit, log_n, inv; then W.
    GlobalSmall([u32; 6]),
    /// `ntt_r2wf_*`: lo, k, c, prev_k; then T0, T1, T18.
    Tables([u32; 4]),
    /// `ntt_pass`: lo, k, c, prev_k, dit; then T0, T1.
    Radix2([u32; 5]),
}

/// The launch of pass `p` of a 2^log_n transform with `kernel` (DIF or DIT).
fn pass_launch(kernel: NttKernel, log_n: u32, p: Pass, dit: bool, dir: Direction) -> PassLaunch {
    let (lo, k, c, prev_k) = (p.lo, p.k, p.c, p.prev_k);
    let d = u32::from(dit);
    if kernel == NttKernel::Radix2WarpGlobal {
        let inv = u32::from(dir == Direction::Inverse);
        let cfg = pass_config(log_n, p, 2);
        return if k + c >= 6 {
            let name = if dit { "ntt_r2wg_dit" } else { "ntt_r2wg_dif" };
            PassLaunch {
                name,
                cfg,
                args: PassArgs::Global([lo, k, c, log_n, inv]),
            }
        } else {
            PassLaunch {
                name: "ntt_pass_g",
                cfg,
                args: PassArgs::GlobalSmall([lo, k, c, d, log_n, inv]),
            }
        };
    }
    // r2wf: its warp kernel needs a tile of a full warp's 64 elements; smaller
    // tiles take ntt_pass (the same four-step passes, one stage per exchange).
    if k + c >= 6 {
        PassLaunch {
            name: if dit { "ntt_r2wf_dit" } else { "ntt_r2wf_dif" },
            cfg: pass_config(log_n, p, 2),
            args: PassArgs::Tables([lo, k, c, prev_k]),
        }
    } else {
        PassLaunch {
            name: "ntt_pass",
            cfg: pass_config(log_n, p, 2),
            args: PassArgs::Radix2([lo, k, c, prev_k, d]),
        }
    }
}

/// The natural-order transforms' bit reversal: `bitrev_tiled` from 2^8, else
/// `bitrev_permute`. Arguments: data, log_n, do_scale, s.
fn bitrev_launch(log_n: u32) -> (&'static str, LaunchConfig) {
    if log_n >= BITREV_TILED_MIN_LOG {
        let cfg = LaunchConfig {
            grid_dim: (1u32 << (log_n - 8), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        ("bitrev_tiled", cfg)
    } else {
        ("bitrev_permute", grid(1 << log_n, 256))
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

#[cfg(test)]
mod host;
