//! Radix-2 NTTs over Fr on the device, and H from them.
//!
//! # Design: one dispatch per stage and chunk, no bit reversal on the device
//!
//! The forward transform is decimation in frequency (natural order in,
//! bit-reversed out) and the inverse decimation in time (bit-reversed in, natural
//! out), as in `cuzk_gpu_backend::ntt`; H chains inverse DIF, coset shift, forward
//! DIT, `(a·b − c)/Z`, inverse DIF and the shift back, so no permutation runs on the
//! device at all, and the one the chain needs (bit-reversed coefficients to natural
//! order) is the host's gather when `h` is read back. The bottom nine stages run
//! in workgroup memory, a block of 512 scalars (16 KiB, WebGPU's guaranteed
//! minimum) per workgroup, one read and one write of the vector (`dif_block`,
//! `dit_block`); every stage above is a dispatch per chunk (or chunk pair, see
//! `buffers.rs`) reading and writing the vector once: `log n − 8` passes per
//! transform. A butterfly of a stage with half-span below 2^16 loads its root
//! from one table of those roots (the same for every domain, 2 MiB a direction);
//! above, it multiplies two entries of a two-level table (2 × 2^14 at 2^27), so no
//! `n/2` table is ever built. That is a simple, portable shape, correct on any adapter; fusing
//! more of the top stages per pass (as the CPU's column passes and the CUDA
//! kernels do) is where more speed would come from.
//!
//! # Host vectors and resident ones
//!
//! `fft_to_bitrev` and its siblings take a host slice: upload, transform, read
//! back, the whole round trip in one call. Their `*_resident` twins transform an
//! [`FrVec`] already on the device (from [`Ntt::upload`]) in place and only submit
//! the work, so a caller that chains transforms, or a benchmark that holds the
//! transform against a device-resident one (the CUDA backend's), pays for the
//! copies once or not at all.
//!
//! # Measured
//!
//! Only on lavapipe so far (Mesa's software Vulkan on the development machine's
//! two shared cores, `benches/wgpu.rs`, medians): H at 2^16 0.84 s beside the CPU
//! backend's 0.11 s on the same cores, a forward transform 0.11 s with upload and
//! read-back. Loading small-stage roots from one table instead of multiplying two
//! entries cut H from 9.7× to 7.4× the CPU's time. A 2 KiB PoRep C2 through the
//! plugin: 134 s beside the CPU backend's 46 s (the difference is H on the
//! software device; the MSMs run on the host either way until the device MSM is
//! merged).
//!
//! On the H100 through Vulkan (2026-12-07, `NOTES.md`): a 2^24 forward transform
//! on a resident vector ([`Ntt::fft_to_bitrev_resident`]) 78.4 ms, against 903 ms
//! with upload and read-back and the CUDA backend's 4.96 ms. Its 16 passes over
//! memory are ~6 ms of that; the rest is the Fr products, so fusing more stages
//! per pass (tried: four passes instead of 16) gained nothing there. Those
//! products were built from 16-bit halves; they are u64 products now where the
//! device has SHADER_INT64 (`WgpuConfig::int64_products`), not yet measured on
//! a card (~11% on lavapipe at 2^16).
//!
//! Every result is Fr arithmetic, exact, so the device's H equals the CPU
//! backend's bit for bit whatever the order of the passes (checked in
//! `tests/ntt.rs` against `cuzk_gpu_backend::compute_h`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use blstrs::Scalar;
use cuzk_gpu_backend::{log_domain, AbcRef};
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::buffers::{chunk_len, FrVec, FR_BYTES};
use crate::context::{Context, WgpuConfig};
use crate::kernels::{Kernel, Kernels, Op, Params, BLOCK_LOG};
use crate::WgpuError;

/// Largest domain, log2: indices are 32-bit on the device.
pub const MAX_LOG_DOMAIN: u32 = 31;

/// `base^e · scale` for `e < 2^log_n` as two tables: `lo[e mod 2^lo_bits]` times
/// `hi[e >> lo_bits]` (the scale folded into `hi`).
#[derive(Debug)]
struct PowerTable {
    lo: wgpu::Buffer,
    hi: wgpu::Buffer,
    lo_bits: u32,
}

impl PowerTable {
    fn new(ctx: &Context, base: Scalar, scale: Scalar, log_n: u32) -> Result<Self, WgpuError> {
        let lo_bits = log_n.div_ceil(2);
        let powers = |b: Scalar, count: usize, start: Scalar| {
            let mut v = Vec::with_capacity(count);
            let mut x = start;
            for _ in 0..count {
                v.push(x);
                x *= b;
            }
            v
        };
        let lo = powers(base, 1 << lo_bits, Scalar::ONE);
        let hi = powers(
            base.pow_vartime([1u64 << lo_bits]),
            1 << (log_n - lo_bits),
            scale,
        );
        let one = |v: &[Scalar]| FrVec::upload(ctx, v, v.len(), v.len()).map(|f| f.chunks);
        Ok(Self {
            lo: one(&lo)?.swap_remove(0),
            hi: one(&hi)?.swap_remove(0),
            lo_bits,
        })
    }

    fn params(&self) -> Params {
        Params {
            lo_bits: self.lo_bits,
            lo_mask: (1u32 << self.lo_bits) - 1,
            ..Params::default()
        }
    }
}

/// The tables of one domain size.
#[derive(Debug)]
struct DomainTables {
    log_n: u32,
    /// Powers of ω (forward twiddles) and of ω⁻¹ (inverse).
    fwd: PowerTable,
    inv: PowerTable,
    /// g^k, g^k/n, g^−k/n and 1/n (g = 7, Fr's multiplicative generator).
    coset: PowerTable,
    coset_n: PowerTable,
    uncoset_n: PowerTable,
    unit_n: PowerTable,
    /// H's: g^−k/(n·Z) and 1/(n·Z), Z = g^n − 1 (the vanishing polynomial on the
    /// coset, a constant there).
    uncoset_nz: PowerTable,
    unit_nz: PowerTable,
}

impl DomainTables {
    fn new(ctx: &Context, log_n: u32) -> Result<Self, WgpuError> {
        let n = 1u64 << log_n;
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            omega = omega.square();
        }
        // ω, n, g and g^n − 1 are non-zero in Fr (g is not in ⟨ω⟩): the inverses exist.
        let inv = |x: Scalar| x.invert().unwrap_or(Scalar::ONE);
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let n_inv = inv(Scalar::from(n));
        let z_inv = inv(g.pow_vartime([n]) - Scalar::ONE);
        Ok(Self {
            log_n,
            fwd: PowerTable::new(ctx, omega, Scalar::ONE, log_n)?,
            inv: PowerTable::new(ctx, inv(omega), Scalar::ONE, log_n)?,
            coset: PowerTable::new(ctx, g, Scalar::ONE, log_n)?,
            coset_n: PowerTable::new(ctx, g, n_inv, log_n)?,
            uncoset_n: PowerTable::new(ctx, inv(g), n_inv, log_n)?,
            unit_n: PowerTable::new(ctx, Scalar::ONE, n_inv, log_n)?,
            uncoset_nz: PowerTable::new(ctx, inv(g), n_inv * z_inv, log_n)?,
            unit_nz: PowerTable::new(ctx, Scalar::ONE, n_inv * z_inv, log_n)?,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Dif,
    Dit,
}

/// Which roots a transform's butterflies take: ω (forward) or ω⁻¹ (inverse).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Roots {
    Fwd,
    Inv,
}

/// The public transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transform {
    Fft,
    Ifft,
    CosetFft,
    IcosetIfft,
}

/// Log2 of the small-stage root tables' size (`SMALL_LOG` in `ntt.wgsl`).
const SMALL_LOG: u32 = 16;

/// `small[h + t] = w_2h^t` for every power of two `h < 2^SMALL_LOG` and `t < h`,
/// `w_2h` the primitive 2h-th root of unity (`inverse`: its inverse), the same
/// for every domain; `small[0]` is unused.
fn small_roots(ctx: &Context, inverse: bool) -> Result<wgpu::Buffer, WgpuError> {
    let size = 1usize << SMALL_LOG;
    let mut v = vec![Scalar::ONE; size];
    let mut half = 1usize;
    let mut k = 0u32;
    while half < size {
        // w_2h: ROOT_OF_UNITY (order 2^S) squared S − (k + 1) times.
        let mut w = Scalar::ROOT_OF_UNITY;
        for _ in (k + 1)..Scalar::S {
            w = w.square();
        }
        if inverse {
            w = w.invert().unwrap_or(Scalar::ONE);
        }
        let mut x = Scalar::ONE;
        for t in 0..half {
            v[half + t] = x;
            x *= w;
        }
        half *= 2;
        k += 1;
    }
    Ok(FrVec::upload(ctx, &v, size, size)?.chunks.swap_remove(0))
}

/// The NTT and H on one device: its kernels, the binding plan and a table cache.
pub struct Ntt {
    ctx: Arc<Context>,
    kernels: Kernels,
    /// Roots of the small stages, forward and inverse.
    small_fwd: wgpu::Buffer,
    small_inv: wgpu::Buffer,
    max_binding: u64,
    domains: Mutex<HashMap<u32, Arc<DomainTables>>>,
}

impl std::fmt::Debug for Ntt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ntt")
            .field("max_binding", &self.max_binding)
            .finish()
    }
}

impl Ntt {
    /// Compiles the kernels on `ctx`'s device; bindings planned per `config`.
    pub fn new(ctx: Arc<Context>, config: &WgpuConfig) -> Result<Self, WgpuError> {
        let has_int64 = ctx.device.features().contains(wgpu::Features::SHADER_INT64);
        let int64 = config.int64_products.unwrap_or(has_int64);
        if int64 && !has_int64 {
            return Err(WgpuError::Device(format!(
                "u64 word products were asked for, but {} has no SHADER_INT64",
                ctx.info.name
            )));
        }
        let kernels = Kernels::new(&ctx, int64)?;
        let max_binding = ctx.max_binding_bytes(config);
        Ok(Self {
            small_fwd: small_roots(&ctx, false)?,
            small_inv: small_roots(&ctx, true)?,
            ctx,
            kernels,
            max_binding,
            domains: Mutex::new(HashMap::new()),
        })
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Whether the kernels multiply words as u64 (else as 16-bit halves).
    pub fn uses_int64(&self) -> bool {
        self.kernels.int64
    }

    /// Scalars per chunk for a vector of `n`.
    pub fn chunk_len(&self, n: usize) -> Result<usize, WgpuError> {
        chunk_len(n, self.max_binding)
    }

    fn domain(&self, log_n: u32) -> Result<Arc<DomainTables>, WgpuError> {
        if log_n > MAX_LOG_DOMAIN {
            return Err(WgpuError::DomainTooLarge {
                log: log_n,
                max: MAX_LOG_DOMAIN,
            });
        }
        let mut cache = self.domains.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(d) = cache.get(&log_n) {
            return Ok(Arc::clone(d));
        }
        let d = Arc::new(DomainTables::new(&self.ctx, log_n)?);
        cache.insert(log_n, Arc::clone(&d));
        Ok(d)
    }

    /// Every stage of one transform of `v` in direction `dir` with `roots`.
    fn stages<'a>(
        &'a self,
        ops: &mut Vec<Op<'a>>,
        v: &'a FrVec,
        dom: &'a DomainTables,
        which: Roots,
        dir: Dir,
    ) {
        let (roots, small) = match which {
            Roots::Fwd => (&dom.fwd, &self.small_fwd),
            Roots::Inv => (&dom.inv, &self.small_inv),
        };
        let log_n = dom.log_n;
        let c = v.chunk;
        // The bottom BLOCK_LOG stages in workgroup memory where a chunk holds a
        // block; the rest one dispatch a stage.
        let fused = c >= 1 << BLOCK_LOG;
        let first = if fused { BLOCK_LOG } else { 0 };
        let block = |ops: &mut Vec<Op<'a>>| {
            if !fused {
                return;
            }
            for chunk in &v.chunks {
                ops.push(Op {
                    kernel: match dir {
                        Dir::Dif => Kernel::DifBlock,
                        Dir::Dit => Kernel::DitBlock,
                    },
                    params: Params {
                        count: (c >> BLOCK_LOG) as u32,
                        log_n,
                        ..roots.params()
                    },
                    buffers: vec![chunk, small],
                });
            }
        };
        let order: Vec<u32> = match dir {
            Dir::Dif => (first..log_n).rev().collect(),
            Dir::Dit => {
                block(ops);
                (first..log_n).collect()
            }
        };
        for log_half in order {
            let half = 1usize << log_half;
            let base = Params {
                log_half,
                tw_shift: log_n - 1 - log_half,
                log_n,
                ..roots.params()
            };
            if half < c {
                let kernel = match dir {
                    Dir::Dif => Kernel::DifInChunk,
                    Dir::Dit => Kernel::DitInChunk,
                };
                for (k, chunk) in v.chunks.iter().enumerate() {
                    ops.push(Op {
                        kernel,
                        params: Params {
                            base: (k * c) as u32,
                            count: (c / 2) as u32,
                            ..base
                        },
                        buffers: vec![&roots.lo, &roots.hi, chunk, small],
                    });
                }
            } else {
                let kernel = match dir {
                    Dir::Dif => Kernel::DifCross,
                    Dir::Dit => Kernel::DitCross,
                };
                let apart = half / c;
                for k in (0..v.chunks.len()).filter(|k| (k / apart).is_multiple_of(2)) {
                    ops.push(Op {
                        kernel,
                        params: Params {
                            base: (k * c) as u32,
                            count: c as u32,
                            ..base
                        },
                        buffers: vec![
                            &roots.lo,
                            &roots.hi,
                            &v.chunks[k],
                            &v.chunks[k + apart],
                            small,
                        ],
                    });
                }
            }
        }
        if dir == Dir::Dif {
            block(ops);
        }
    }

    /// `v[i] *= table(e)`, `e = i` or its bit reversal.
    fn scale<'a>(
        ops: &mut Vec<Op<'a>>,
        v: &'a FrVec,
        table: &'a PowerTable,
        log_n: u32,
        bitrev: bool,
    ) {
        for (k, chunk) in v.chunks.iter().enumerate() {
            ops.push(Op {
                kernel: Kernel::Scale,
                params: Params {
                    base: (k * v.chunk) as u32,
                    count: v.chunk as u32,
                    bitrev: u32::from(bitrev),
                    log_n,
                    ..table.params()
                },
                buffers: vec![&table.lo, &table.hi, chunk],
            });
        }
    }

    /// Records transform `kind` of the device vector `v`, `dom` its domain.
    fn record<'a>(
        &'a self,
        ops: &mut Vec<Op<'a>>,
        v: &'a FrVec,
        dom: &'a DomainTables,
        kind: Transform,
    ) {
        let log_n = dom.log_n;
        match kind {
            Transform::Fft => self.stages(ops, v, dom, Roots::Fwd, Dir::Dif),
            Transform::Ifft => {
                self.stages(ops, v, dom, Roots::Inv, Dir::Dit);
                Self::scale(ops, v, &dom.unit_n, log_n, false);
            }
            Transform::CosetFft => {
                Self::scale(ops, v, &dom.coset, log_n, false);
                self.stages(ops, v, dom, Roots::Fwd, Dir::Dif);
            }
            Transform::IcosetIfft => {
                self.stages(ops, v, dom, Roots::Inv, Dir::Dit);
                Self::scale(ops, v, &dom.uncoset_n, log_n, false);
            }
        }
    }

    /// Runs transform `kind` on `v` uploaded, and reads it back into `v`.
    fn transform(&self, v: &mut [Scalar], kind: Transform) -> Result<(), WgpuError> {
        let mut dev = self.upload(v)?;
        self.transform_resident(&mut dev, kind)?;
        let out = dev.download(&self.ctx, v.len())?;
        v.copy_from_slice(&out);
        Ok(())
    }

    /// Submits transform `kind` of the device vector `v` (checked first); does
    /// not wait.
    fn transform_resident(&self, v: &mut FrVec, kind: Transform) -> Result<(), WgpuError> {
        let dom = self.domain(self.check_resident(v)?)?;
        let mut ops = Vec::new();
        self.record(&mut ops, v, &dom, kind);
        self.kernels.submit(&self.ctx, &ops)
    }

    /// The log2 length of `v` if the transforms can run on it: a power of two
    /// long, whole chunks of a power of two each that one binding of this device
    /// holds (as [`Ntt::upload`] plans them).
    fn check_resident(&self, v: &FrVec) -> Result<u32, WgpuError> {
        let n = v.len;
        if !n.is_power_of_two() {
            return Err(WgpuError::NttLength {
                got: n,
                want: n.next_power_of_two(),
            });
        }
        let device = self
            .ctx
            .limits
            .max_storage_buffer_binding_size
            .min(self.ctx.limits.max_buffer_size);
        let c = v.chunk;
        if !c.is_power_of_two() || v.chunks.len() * c != n || c as u64 * FR_BYTES > device {
            return Err(WgpuError::Plan(format!(
                "a device vector of {n} scalars in {} chunks of {c} cannot be transformed \
                 (chunks must be a power of two, cover the vector and bind within {device} bytes)",
                v.chunks.len()
            )));
        }
        Ok(n.trailing_zeros())
    }

    /// Uploads `v` (a power of two long) as a device vector in this NTT's chunk
    /// plan: the input of the `*_resident` transforms, which then run without
    /// copying it back and forth. Returns once the data is queued; a later
    /// submission orders after it.
    pub fn upload(&self, v: &[Scalar]) -> Result<FrVec, WgpuError> {
        let n = v.len();
        if !n.is_power_of_two() {
            return Err(WgpuError::NttLength {
                got: n,
                want: n.next_power_of_two(),
            });
        }
        FrVec::upload(&self.ctx, v, n, self.chunk_len(n)?)
    }

    /// Reads a device vector back, after every transform submitted before it.
    pub fn download(&self, v: &FrVec) -> Result<Vec<Scalar>, WgpuError> {
        v.download(&self.ctx, v.len)
    }

    /// Forward transform, natural order in, bit-reversed out (as
    /// `cuzk_gpu_backend::ntt::Domain::fft_to_bitrev`).
    pub fn fft_to_bitrev(&self, v: &mut [Scalar]) -> Result<(), WgpuError> {
        self.transform(v, Transform::Fft)
    }

    /// Inverse transform, bit-reversed in, natural out, scaled by 1/n.
    pub fn ifft_from_bitrev(&self, v: &mut [Scalar]) -> Result<(), WgpuError> {
        self.transform(v, Transform::Ifft)
    }

    /// The evaluations on the coset `g·⟨ω⟩` (g = 7) of the polynomial with
    /// coefficients `v`, bit-reversed out.
    pub fn coset_fft_to_bitrev(&self, v: &mut [Scalar]) -> Result<(), WgpuError> {
        self.transform(v, Transform::CosetFft)
    }

    /// Undoes [`Ntt::coset_fft_to_bitrev`]: coefficients, natural order, from
    /// bit-reversed evaluations on the coset.
    pub fn icoset_ifft_from_bitrev(&self, v: &mut [Scalar]) -> Result<(), WgpuError> {
        self.transform(v, Transform::IcosetIfft)
    }

    /// [`Ntt::fft_to_bitrev`] of a vector already on the device (from
    /// [`Ntt::upload`], or an `FrVec` of this device planned alike), in place:
    /// no upload, no read-back. The work is submitted, not waited for:
    /// [`Ntt::download`] or [`Ntt::sync`] waits. A vector whose length is not a
    /// power of two, or whose chunks the kernels cannot bind, is an error before
    /// anything is submitted.
    pub fn fft_to_bitrev_resident(&self, v: &mut FrVec) -> Result<(), WgpuError> {
        self.transform_resident(v, Transform::Fft)
    }

    /// [`Ntt::ifft_from_bitrev`] of a device vector, as
    /// [`Ntt::fft_to_bitrev_resident`].
    pub fn ifft_from_bitrev_resident(&self, v: &mut FrVec) -> Result<(), WgpuError> {
        self.transform_resident(v, Transform::Ifft)
    }

    /// [`Ntt::coset_fft_to_bitrev`] of a device vector, as
    /// [`Ntt::fft_to_bitrev_resident`].
    pub fn coset_fft_to_bitrev_resident(&self, v: &mut FrVec) -> Result<(), WgpuError> {
        self.transform_resident(v, Transform::CosetFft)
    }

    /// [`Ntt::icoset_ifft_from_bitrev`] of a device vector, as
    /// [`Ntt::fft_to_bitrev_resident`].
    pub fn icoset_ifft_from_bitrev_resident(&self, v: &mut FrVec) -> Result<(), WgpuError> {
        self.transform_resident(v, Transform::IcosetIfft)
    }

    /// The `n − 1` coefficients of H = (A·B − C)/Z from the evaluations `a, b, c`,
    /// `n` their length rounded up to a power of two: the same scalars as
    /// `cuzk_gpu_backend::compute_h`. The bit-reversed result is gathered into
    /// natural order on `pool`.
    pub fn compute_h(
        &self,
        abc: AbcRef<'_>,
        pool: &rayon::ThreadPool,
    ) -> Result<Vec<Scalar>, WgpuError> {
        if !abc.is_consistent() {
            return Err(WgpuError::AbcShape {
                a: abc.a.len(),
                b: abc.b.len(),
                c: abc.c.len(),
            });
        }
        let log_n = log_domain(abc.len());
        let dom = self.domain(log_n)?;
        let n = 1usize << log_n;
        let need = 3 * n as u64 * FR_BYTES;
        let have = self.ctx.memory.free;
        if need > have {
            return Err(WgpuError::TooLarge {
                what: "a, b and c of the H computation",
                need,
                have,
            });
        }
        let _span = tracing::info_span!("compute_h", backend = "wgpu", log_n).entered();
        let chunk = self.chunk_len(n)?;
        let a = FrVec::upload(&self.ctx, abc.a, n, chunk)?;
        let b = FrVec::upload(&self.ctx, abc.b, n, chunk)?;
        let c = FrVec::upload(&self.ctx, abc.c, n, chunk)?;
        // Six transforms, not seven (as cuzk_gpu_backend::compute_h): H =
        // coset⁻¹((A'·B' − C')/Z), Z constant on the coset and the inverse coset
        // transform linear, so H = coset⁻¹(A'·B')/Z − C/Z with C the coefficients
        // that c's inverse transform gives: c never goes to the coset.
        let mut ops = Vec::new();
        for v in [&a, &b] {
            // Coefficients (bit-reversed, times n), shifted to the coset (times
            // g^k/n), evaluated there (natural order).
            self.stages(&mut ops, v, &dom, Roots::Inv, Dir::Dif);
            Self::scale(&mut ops, v, &dom.coset_n, log_n, true);
            self.stages(&mut ops, v, &dom, Roots::Fwd, Dir::Dit);
        }
        // C/Z: c's coefficients (bit-reversed), times 1/(n·Z).
        self.stages(&mut ops, &c, &dom, Roots::Inv, Dir::Dif);
        Self::scale(&mut ops, &c, &dom.unit_nz, log_n, true);
        fn pairwise<'a>(ops: &mut Vec<Op<'a>>, kernel: Kernel, x: &'a FrVec, y: &'a FrVec) {
            for k in 0..x.chunks.len() {
                ops.push(Op {
                    kernel,
                    params: Params {
                        count: x.chunk as u32,
                        ..Params::default()
                    },
                    buffers: vec![&x.chunks[k], &y.chunks[k]],
                });
            }
        }
        pairwise(&mut ops, Kernel::Pointwise, &a, &b);
        // Back to coefficients: bit-reversed, times g^−k/(n·Z); then less C/Z.
        self.stages(&mut ops, &a, &dom, Roots::Inv, Dir::Dif);
        Self::scale(&mut ops, &a, &dom.uncoset_nz, log_n, true);
        pairwise(&mut ops, Kernel::Difference, &a, &c);
        self.kernels.submit(&self.ctx, &ops)?;
        drop(ops);
        drop((b, c));
        let bitrev = a.download(&self.ctx, n)?;
        drop(a);
        let rev = |i: usize| {
            if log_n == 0 {
                0
            } else {
                i.reverse_bits() >> (usize::BITS - log_n)
            }
        };
        Ok(pool.install(|| {
            (0..n.saturating_sub(1))
                .into_par_iter()
                .map(|i| bitrev[rev(i)])
                .collect()
        }))
    }

    /// `[a·b, a + b, a − b]` for every pair, on the device: the field kernels'
    /// check against blstrs.
    pub fn fr_ops(&self, a: &[Scalar], b: &[Scalar]) -> Result<Vec<[Scalar; 3]>, WgpuError> {
        if a.len() != b.len() || a.is_empty() {
            return Err(WgpuError::NttLength {
                got: b.len(),
                want: a.len(),
            });
        }
        let n = a.len();
        let x = FrVec::upload(&self.ctx, a, n, n)?;
        let y = FrVec::upload(&self.ctx, b, n, n)?;
        let z = FrVec::zeroed(&self.ctx, 3 * n, 3 * n)?;
        let ops = [Op {
            kernel: Kernel::FrOps,
            params: Params {
                count: n as u32,
                ..Params::default()
            },
            buffers: vec![&x.chunks[0], &y.chunks[0], &z.chunks[0]],
        }];
        self.kernels.submit(&self.ctx, &ops)?;
        let out = z.download(&self.ctx, 3 * n)?;
        Ok(out.chunks_exact(3).map(|t| [t[0], t[1], t[2]]).collect())
    }

    /// Waits for the device and reports an error it raised.
    pub fn sync(&self) -> Result<(), WgpuError> {
        self.ctx.sync()
    }
}
