//! NTTs over Fr on the device and the H computation built from them.
//!
//! Domains up to 2^28. A transform of 2^L points runs as ceil(L / 10) passes of
//! `ntt_pass`, each doing up to 10 radix-2 stages of one chunk of index bits in shared
//! memory (see `kernels/ntt.cu` for the decomposition). Roots of unity come from two
//! device tables of 2^16 powers each (per direction), shared by every domain size.
//!
//! H uses no bit-reversal pass until the very end: the inverse transform runs as
//! decimation in frequency (natural in, bit-reversed out), the coset factors are
//! applied at bit-reversed positions, and the forward transform runs as decimation in
//! time (bit-reversed in, natural out).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use cudarc::driver::{CudaSlice, LaunchConfig};
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
/// Vectors shorter than this are copied from pageable memory (pinning costs more
/// than it saves, and small vectors may share pages).
pub(crate) const PIN_MIN_LEN: usize = 1 << 15;
const POW_HI: usize = 1 << (MAX_LOG_DOMAIN - 16);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Inverse,
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

/// The device NTT engine: twiddle tables and cached coset tables.
#[derive(Debug)]
pub struct Ntt {
    fwd: (CudaSlice<FrRepr>, CudaSlice<FrRepr>),
    inv: (CudaSlice<FrRepr>, CudaSlice<FrRepr>),
    pows: Mutex<HashMap<(u32, PowKind), Arc<Pows>>>,
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
        let mk = |w: Scalar| -> Result<(CudaSlice<FrRepr>, CudaSlice<FrRepr>), CudaError> {
            let t0 = powers(w, Scalar::ONE, TABLE);
            let t1 = powers(pow2k(w, 16), Scalar::ONE, TABLE);
            Ok((upload_reprs(gpu, &t0)?, upload_reprs(gpu, &t1)?))
        };
        Ok(Self {
            fwd: mk(Scalar::ROOT_OF_UNITY)?,
            inv: mk(Scalar::ROOT_OF_UNITY_INV)?,
            pows: Mutex::new(HashMap::new()),
        })
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

    fn tables(&self, dir: Direction) -> &(CudaSlice<FrRepr>, CudaSlice<FrRepr>) {
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
        let tile = 1u32 << (p.k + p.c);
        let cfg = LaunchConfig {
            grid_dim: (1u32 << (log_n - p.k - p.c), 1, 1),
            block_dim: ((tile / 2).max(1), 1, 1),
            shared_mem_bytes: tile * 32,
        };
        let (t0, t1) = self.tables(dir);
        let dit = u32::from(dit);
        crate::launch!(gpu, "ntt_pass", cfg, &mut *data, &p.lo, &p.k, &p.c, &p.prev_k, &dit, t0, t1)
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

    /// Device memory the H computation needs for `n` constraints (bytes).
    pub fn h_device_bytes(n: usize) -> u64 {
        let big = 1u64 << crate::log_domain(n);
        3 * big * 32
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
        let mut bufs = Vec::with_capacity(3);
        for _ in 0..3 {
            let mut buf = gpu.alloc_poisoned::<FrRepr>(big)?;
            if n < big {
                zero_tail(gpu, &mut buf, n)?;
            }
            bufs.push(buf);
        }
        // Page-lock the host vectors so the copies are asynchronous DMA.
        let mut regs = Vec::new();
        for v in [a, b, c].into_iter().filter(|v| v.len() >= PIN_MIN_LEN) {
            // SAFETY: the slices outlive `regs`, which is dropped at the end of this
            // function after the copy stream has finished with them.
            regs.push(unsafe { HostRegistration::new(&gpu.ctx, scalars_as_bytes(v)) }?);
        }
        // The copies may start only after the stream-ordered allocations above.
        gpu.copy.join(&gpu.compute).ctx("cuStreamWaitEvent")?;
        let mut uploaded = Vec::with_capacity(3);
        for (v, buf) in [a, b, c].into_iter().zip(bufs.iter_mut()) {
            raw::htod_bytes(&gpu.copy, scalars_as_bytes(v), buf, 0)?;
            uploaded.push(gpu.copy.record_event(None).ctx("cuEventRecord")?);
        }
        for (buf, ev) in bufs.iter_mut().zip(&uploaded) {
            gpu.compute.wait(ev).ctx("cuStreamWaitEvent")?;
            self.to_coset(gpu, buf, log_n)?;
        }
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let z = g.pow_vartime([big as u64]) - Scalar::ONE;
        let zinv = scalar_to_repr(&z.invert().expect("g^n != 1 for n <= 2^32"));
        let mut it = bufs.into_iter();
        let (mut ba, mut bb, bc) = (
            it.next().expect("3"),
            it.next().expect("3"),
            it.next().expect("3"),
        );
        let nn = big as u32;
        crate::launch!(
            gpu,
            "abc_combine",
            grid(big, 256),
            &mut ba,
            &bb,
            &bc,
            &nn,
            &zinv
        )?;
        drop(bc);
        self.dif(gpu, &mut ba, log_n, Direction::Inverse)?;
        let pw = self.pows(gpu, log_n, PowKind::CosetInvOverN)?;
        crate::launch!(
            gpu,
            "bitrev_scale_copy",
            grid(big, 256),
            &ba,
            &mut bb,
            &log_n,
            &pw.p0,
            &pw.p1
        )?;
        drop(ba);
        // Stream-scoped wait for the uploads only; then the host memory may go.
        if let Some(last) = uploaded.last() {
            last.synchronize().ctx("cuEventSynchronize")?;
        }
        drop(regs);
        Ok(bb)
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
