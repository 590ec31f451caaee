//! The small safe API the NTT and MSM code is written against: one device with its
//! streams, the compiled kernels, device-side element types, and pinned host ranges.
//!
//! Layers: `cudarc::driver::sys` (raw driver calls, loaded at run time) →
//! `cudarc::driver::result` and [`crate::raw`] (each call → `Result`) → this module
//! (owned handles that free themselves, typed buffers, typed launches). Handles are
//! passed explicitly; there is no global "current device".

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use blst::{
    blst_fp, blst_fp2, blst_fp2_mul, blst_fp2_sqr, blst_fp_mul, blst_fp_sqr, blst_p1, blst_p2,
};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::sys::{CUctx_flags, CUevent_flags};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig,
    ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;

use crate::cache::KernelCache;
use crate::config::HostWait;
use crate::error::{Ctx, CudaError};
use crate::kernels::{self, ModuleSource};
use crate::raw;

/// An Fr element as the kernels see it: 8 × u32, Montgomery form, the bytes of a
/// blstrs `Scalar`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct FrRepr(pub [u32; 8]);
/// An Fq element as the kernels see it: 12 × u32, Montgomery form, the bytes of a
/// `blst_fp`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct FqRepr(pub [u32; 12]);
/// A G1 affine point as the kernels see it: the bytes of a blstrs `G1Affine`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AffineRepr(pub [u32; 24]);
/// A G1 point in XYZZ coordinates (X, Y, ZZ, ZZZ, each 12 × u32 Montgomery).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XyzzRepr(pub [u32; 48]);

impl Default for XyzzRepr {
    fn default() -> Self {
        Self([0; 48])
    }
}

/// A G2 affine point as the kernels see it: the bytes of a blstrs `G2Affine`
/// (`blst_p2_affine`: x then y, each an Fq2 = c0 then c1, 12 × u32 Montgomery each).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Affine2Repr(pub [u32; 48]);
/// A G2 point in XYZZ coordinates (X, Y, ZZ, ZZZ, each an Fq2: c0 then c1).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Xyzz2Repr(pub [u32; 96]);

impl Default for Affine2Repr {
    fn default() -> Self {
        Self([0; 48])
    }
}
impl Default for Xyzz2Repr {
    fn default() -> Self {
        Self([0; 96])
    }
}

// SAFETY: plain arrays of u32, no padding (sizes are multiples of the alignment), any
// bit pattern is a valid value.
unsafe impl DeviceRepr for FrRepr {}
// SAFETY: as above.
unsafe impl DeviceRepr for FqRepr {}
// SAFETY: as above.
unsafe impl DeviceRepr for AffineRepr {}
// SAFETY: as above.
unsafe impl DeviceRepr for XyzzRepr {}
// SAFETY: as above.
unsafe impl DeviceRepr for Affine2Repr {}
// SAFETY: as above.
unsafe impl DeviceRepr for Xyzz2Repr {}
// SAFETY: all-zero u32 arrays are valid.
unsafe impl ValidAsZeroBits for FrRepr {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for FqRepr {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for AffineRepr {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for XyzzRepr {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for Affine2Repr {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for Xyzz2Repr {}

const _: () = assert!(std::mem::size_of::<Scalar>() == 32);
const _: () = assert!(std::mem::size_of::<G1Affine>() == 96);
const _: () = assert!(std::mem::size_of::<FrRepr>() == 32);
const _: () = assert!(std::mem::size_of::<FqRepr>() == 48);
const _: () = assert!(std::mem::size_of::<AffineRepr>() == 96);
const _: () = assert!(std::mem::size_of::<XyzzRepr>() == 192);
const _: () = assert!(std::mem::size_of::<G2Affine>() == 192);
const _: () = assert!(std::mem::size_of::<blst::blst_p2_affine>() == 192);
const _: () = assert!(std::mem::size_of::<Affine2Repr>() == 192);
const _: () = assert!(std::mem::size_of::<Xyzz2Repr>() == 384);

/// The device view of a slice of scalars: the same bytes.
///
/// blstrs' `Scalar` is `repr(transparent)` over `blst_fr`, a `repr(C)` array of four
/// u64 Montgomery limbs; on a little-endian machine that is eight u32 limbs.
pub fn scalars_as_bytes(s: &[Scalar]) -> &[u8] {
    // SAFETY: Scalar is plain old data of size 32 (asserted above); any &[Scalar] is
    // readable as bytes for its whole length.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// The device view of affine G1 points: the same bytes (`blst_p1_affine`, x then y).
pub fn points_as_bytes(p: &[G1Affine]) -> &[u8] {
    // SAFETY: G1Affine is repr(transparent) over blst_p1_affine (two repr(C) arrays of
    // six u64), size 96 (asserted above).
    unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<u8>(), std::mem::size_of_val(p)) }
}

/// The device view of affine G2 points: the same bytes (`blst_p2_affine`).
pub fn g2_points_as_bytes(p: &[G2Affine]) -> &[u8] {
    // SAFETY: G2Affine is repr(transparent) over blst_p2_affine (two repr(C) blst_fp2,
    // each two arrays of six u64), size 192 (asserted above).
    unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<u8>(), std::mem::size_of_val(p)) }
}

pub fn scalar_to_repr(s: &Scalar) -> FrRepr {
    let mut r = FrRepr::default();
    for (i, b) in scalars_as_bytes(std::slice::from_ref(s))
        .chunks_exact(4)
        .enumerate()
    {
        r.0[i] = u32::from_le_bytes(b.try_into().expect("4 bytes"));
    }
    r
}

fn fp_from_u32(l: &[u32]) -> blst_fp {
    let mut w = [0u64; 6];
    for i in 0..6 {
        w[i] = l[2 * i] as u64 | ((l[2 * i + 1] as u64) << 32);
    }
    blst_fp { l: w }
}

fn fp_mul(a: &blst_fp, b: &blst_fp) -> blst_fp {
    let mut r = blst_fp::default();
    // SAFETY: blst reads two valid field elements and writes one.
    unsafe { blst_fp_mul(&mut r, a, b) };
    r
}

fn fp_sqr(a: &blst_fp) -> blst_fp {
    let mut r = blst_fp::default();
    // SAFETY: as above.
    unsafe { blst_fp_sqr(&mut r, a) };
    r
}

/// XYZZ → blstrs' Jacobian point: (X·ZZ², Y·ZZZ², ZZZ) has x = X/ZZ and y = Y/ZZZ
/// because ZZZ² = ZZ³. (blst arithmetic: blstrs does not export its Fp.)
pub fn xyzz_to_projective(p: &XyzzRepr) -> G1Projective {
    use group::Group;
    let mut out = G1Projective::identity();
    // The kernels keep elements fully reduced, so zero is all-zero limbs.
    if p.0[24..36].iter().all(|&w| w == 0) {
        return out;
    }
    let x = fp_from_u32(&p.0[0..12]);
    let y = fp_from_u32(&p.0[12..24]);
    let zz = fp_from_u32(&p.0[24..36]);
    let zzz = fp_from_u32(&p.0[36..48]);
    let jac = blst_p1 {
        x: fp_mul(&x, &fp_sqr(&zz)),
        y: fp_mul(&y, &fp_sqr(&zzz)),
        z: zzz,
    };
    *AsMut::<blst_p1>::as_mut(&mut out) = jac;
    out
}

fn fp2_from_u32(l: &[u32]) -> blst_fp2 {
    blst_fp2 {
        fp: [fp_from_u32(&l[0..12]), fp_from_u32(&l[12..24])],
    }
}

fn fp2_mul(a: &blst_fp2, b: &blst_fp2) -> blst_fp2 {
    let mut r = blst_fp2::default();
    // SAFETY: blst reads two valid field elements and writes one.
    unsafe { blst_fp2_mul(&mut r, a, b) };
    r
}

fn fp2_sqr(a: &blst_fp2) -> blst_fp2 {
    let mut r = blst_fp2::default();
    // SAFETY: as above.
    unsafe { blst_fp2_sqr(&mut r, a) };
    r
}

/// G2's [`xyzz_to_projective`]: the same formulas over Fq2.
pub fn xyzz2_to_projective(p: &Xyzz2Repr) -> G2Projective {
    use group::Group;
    let mut out = G2Projective::identity();
    if p.0[48..72].iter().all(|&w| w == 0) {
        return out;
    }
    let x = fp2_from_u32(&p.0[0..24]);
    let y = fp2_from_u32(&p.0[24..48]);
    let zz = fp2_from_u32(&p.0[48..72]);
    let zzz = fp2_from_u32(&p.0[72..96]);
    let jac = blst_p2 {
        x: fp2_mul(&x, &fp2_sqr(&zz)),
        y: fp2_mul(&y, &fp2_sqr(&zzz)),
        z: zzz,
    };
    *AsMut::<blst_p2>::as_mut(&mut out) = jac;
    out
}

/// The names of one curve's point kernels (`kernels/msm.cu`, `MSM_CURVE_KERNELS`).
#[derive(Clone, Copy, Debug)]
pub struct CurveKernels {
    pub sum_points: &'static str,
    pub sum_xyzz: &'static str,
    pub gather_buckets: &'static str,
    pub bucket_segments: &'static str,
    pub reduce: &'static str,
    pub ones_sum: &'static str,
    /// The batch-affine rounds and their last step into XYZZ buckets.
    pub ba_round: &'static str,
    pub ba_buckets: &'static str,
}

/// A group the MSM kernels are instantiated for: its host and device point types,
/// its kernels, and the conversion of device results into blstrs points. The MSM
/// code (`msm.rs`) is written once over this trait.
pub trait DeviceCurve: Sized + 'static {
    /// The blstrs affine point whose bytes the device reads.
    type HostAffine: Copy + Send + Sync + 'static;
    /// The device's affine point: the bytes of `HostAffine`.
    type Affine: DeviceRepr
        + ValidAsZeroBits
        + Copy
        + Default
        + std::fmt::Debug
        + CurvePoint<Curve = Self>;
    /// The device's XYZZ point.
    type Xyzz: DeviceRepr + ValidAsZeroBits + Copy + Default + std::fmt::Debug;
    /// The blstrs point results come back as.
    type Projective: group::Group + std::fmt::Debug;
    /// `g1` / `g2`, for logs and spans.
    const NAME: &'static str;
    const KERNELS: CurveKernels;
    /// Bytes per device affine point and per XYZZ point (VRAM accounting).
    const AFFINE_BYTES: u64 = std::mem::size_of::<Self::Affine>() as u64;
    const XYZZ_BYTES: u64 = std::mem::size_of::<Self::Xyzz>() as u64;
    fn to_projective(p: &Self::Xyzz) -> Self::Projective;
    fn host_as_bytes(p: &[Self::HostAffine]) -> &[u8];
}

/// The curve of a device affine point type, so that `msm(gpu, &bases, ..)` infers its
/// curve from the bases.
pub trait CurvePoint: DeviceRepr + Sized {
    type Curve: DeviceCurve<Affine = Self>;
}

/// BLS12-381 G1 on the device.
#[derive(Clone, Copy, Debug)]
pub struct G1;
/// BLS12-381 G2 on the device.
#[derive(Clone, Copy, Debug)]
pub struct G2;

impl DeviceCurve for G1 {
    type HostAffine = G1Affine;
    type Affine = AffineRepr;
    type Xyzz = XyzzRepr;
    type Projective = G1Projective;
    const NAME: &'static str = "g1";
    const KERNELS: CurveKernels = CurveKernels {
        sum_points: "msm_sum_points_g1",
        sum_xyzz: "msm_sum_xyzz_g1",
        gather_buckets: "msm_gather_buckets_g1",
        bucket_segments: "msm_bucket_segments_g1",
        reduce: "xyzz_reduce_g1",
        ones_sum: "ones_sum_g1",
        ba_round: "msm_ba_round",
        ba_buckets: "msm_ba_buckets",
    };
    fn to_projective(p: &XyzzRepr) -> G1Projective {
        xyzz_to_projective(p)
    }
    fn host_as_bytes(p: &[G1Affine]) -> &[u8] {
        points_as_bytes(p)
    }
}

impl DeviceCurve for G2 {
    type HostAffine = G2Affine;
    type Affine = Affine2Repr;
    type Xyzz = Xyzz2Repr;
    type Projective = G2Projective;
    const NAME: &'static str = "g2";
    const KERNELS: CurveKernels = CurveKernels {
        sum_points: "msm_sum_points_g2",
        sum_xyzz: "msm_sum_xyzz_g2",
        gather_buckets: "msm_gather_buckets_g2",
        bucket_segments: "msm_bucket_segments_g2",
        reduce: "xyzz_reduce_g2",
        ones_sum: "ones_sum_g2",
        ba_round: "msm_ba_round_g2",
        ba_buckets: "msm_ba_buckets_g2",
    };
    fn to_projective(p: &Xyzz2Repr) -> G2Projective {
        xyzz2_to_projective(p)
    }
    fn host_as_bytes(p: &[G2Affine]) -> &[u8] {
        g2_points_as_bytes(p)
    }
}

impl CurvePoint for AffineRepr {
    type Curve = G1;
}
impl CurvePoint for Affine2Repr {
    type Curve = G2;
}

/// The kernels of every module, looked up once.
#[derive(Debug)]
pub(crate) struct Kernels {
    /// Each function keeps its module loaded (cudarc's `CudaFunction` holds it).
    pub map: HashMap<&'static str, CudaFunction>,
}

/// Per-process cache of compiled CUBINs, keyed by architecture: NVRTC runs once per
/// process (the MSM module takes seconds).
/// Compiled modules of one architecture: each source with its CUBIN.
pub type Cubins = Arc<Vec<(ModuleSource, Vec<u8>)>>;

fn cubin_cache() -> &'static Mutex<HashMap<String, Cubins>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Cubins>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Compiles (or takes from the process cache, or from the disk cache `disk`) every
/// module for `arch`, the modules in parallel.
pub fn compiled_modules(arch: &str, disk: &KernelCache) -> Result<Cubins, CudaError> {
    let mut cache = cubin_cache().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = cache.get(arch) {
        return Ok(c.clone());
    }
    let results: Vec<Result<(ModuleSource, Vec<u8>), CudaError>> = std::thread::scope(|s| {
        let handles: Vec<_> = kernels::MODULES
            .iter()
            .map(|m| s.spawn(move || disk.load_or_compile(m, arch).map(|c| (*m, c))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(CudaError::NoNvrtc("NVRTC panicked".into())))
            })
            .collect()
    });
    let all = Arc::new(results.into_iter().collect::<Result<Vec<_>, _>>()?);
    cache.insert(arch.to_owned(), all.clone());
    Ok(all)
}

/// One CUDA device: its context, two streams (kernels; host→device copies), and the
/// kernels compiled for it.
#[derive(Debug)]
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    /// Kernels and small copies run here, in order.
    pub(crate) compute: Arc<CudaStream>,
    /// Large host→device uploads, overlapped with `compute` through events.
    pub(crate) copy: Arc<CudaStream>,
    pub(crate) k: Kernels,
    pub name: String,
    pub arch: String,
    pub total_memory: u64,
    /// Free device memory when this handle was made (the one memory-info query).
    pub free_memory_at_start: u64,
    pub sm_count: u32,
    /// The flags of the events the host waits on (`None`: cudarc's default, no
    /// timing; [`HostWait::Block`] makes them blocking).
    wait_event: Option<CUevent_flags>,
}

impl Gpu {
    /// The device context (for page-locking host memory with
    /// [`crate::raw::HostRegistration`] ahead of a partition).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Opens device `ordinal`: checks the driver library and the device, compiles the
    /// kernels for its architecture (or finds them in `kernels`), loads them.
    pub fn new(ordinal: usize, kernels: &KernelCache, wait: HostWait) -> Result<Self, CudaError> {
        raw::check_driver()?;
        let count = CudaContext::device_count().map_err(|e| CudaError::NoDevice(e.to_string()))?;
        if count <= 0 || ordinal >= count as usize {
            return Err(CudaError::NoDevice(format!(
                "device {ordinal} requested, {count} present"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::NoDevice(e.to_string()))?;
        // The (primary) context is current on this thread: its scheduling flag is
        // how every thread of the process waits on it.
        let (sched, wait_event) = match wait {
            HostWait::Auto => (CUctx_flags::CU_CTX_SCHED_AUTO, None),
            HostWait::Spin => (CUctx_flags::CU_CTX_SCHED_SPIN, None),
            HostWait::Yield => (CUctx_flags::CU_CTX_SCHED_YIELD, None),
            HostWait::Block => (
                CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC,
                Some(CUevent_flags::CU_EVENT_BLOCKING_SYNC),
            ),
        };
        cudarc::driver::result::ctx::set_flags(sched).ctx("cuCtxSetFlags")?;
        let (major, minor) = ctx.compute_capability().ctx("cuDeviceGetAttribute")?;
        let arch = format!("sm_{major}{minor}");
        let name = ctx.name().ctx("cuDeviceGetName")?;
        let total_memory = ctx.total_mem().ctx("cuDeviceTotalMem")? as u64;
        let (free, _) = ctx.mem_get_info().ctx("cuMemGetInfo")?;
        let sm_count = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .ctx("cuDeviceGetAttribute")? as u32;
        raw::keep_pool_memory(&ctx)?;
        let compute = ctx.new_stream().ctx("cuStreamCreate")?;
        let copy = ctx.new_stream().ctx("cuStreamCreate")?;

        let modules = compiled_modules(&arch, kernels)?;
        let mut map = HashMap::new();
        for (src, cubin) in modules.iter() {
            let module = ctx
                .load_module(Ptx::from_binary(cubin.clone()))
                .ctx("cuModuleLoadData")?;
            for &kname in src.kernels {
                let f = module.load_function(kname).ctx("cuModuleGetFunction")?;
                map.insert(kname, f);
            }
        }
        // The NTT pass uses up to 32 KiB of dynamic shared memory: under the default
        // 48 KiB limit, so no attribute change is needed.
        let gpu = Self {
            ctx,
            compute,
            copy,
            k: Kernels { map },
            name,
            arch,
            total_memory,
            free_memory_at_start: free as u64,
            sm_count,
            wait_event,
        };
        Ok(gpu)
    }

    /// An event recorded on `stream` now, of the kind the host waits on
    /// ([`HostWait`]).
    pub(crate) fn record(&self, stream: &CudaStream) -> Result<CudaEvent, CudaError> {
        stream.record_event(self.wait_event).ctx("cuEventRecord")
    }

    /// An event not yet recorded, of the kind the host waits on ([`HostWait`]).
    pub(crate) fn new_event(&self) -> Result<CudaEvent, CudaError> {
        self.ctx.new_event(self.wait_event).ctx("cuEventCreate")
    }

    pub fn compute_stream(&self) -> &Arc<CudaStream> {
        &self.compute
    }

    /// Allocates `len` elements on the compute stream, poisoned with 0xff bytes (so a
    /// kernel that forgets to write an element is caught by the checks).
    pub fn alloc_poisoned<T: DeviceRepr>(&self, len: usize) -> Result<CudaSlice<T>, CudaError> {
        // SAFETY: the memory is filled right after, on the same stream, before any use.
        let mut buf = unsafe { self.compute.alloc::<T>(len.max(1)) }.ctx("cuMemAllocAsync")?;
        raw::memset_d8(&self.compute, &mut buf, 0xff)?;
        Ok(buf)
    }

    /// Allocates `len` elements on the compute stream and leaves them as they are:
    /// for large scratch that the next kernel writes before anything reads it, where
    /// poisoning would cost a pass over gigabytes.
    ///
    /// # Safety
    /// Every element must be written on the compute stream before it is read.
    pub unsafe fn alloc_scratch<T: DeviceRepr>(
        &self,
        len: usize,
    ) -> Result<CudaSlice<T>, CudaError> {
        // SAFETY: the caller's obligation above.
        unsafe { self.compute.alloc::<T>(len.max(1)) }.ctx("cuMemAllocAsync")
    }

    pub fn alloc_zeros<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> Result<CudaSlice<T>, CudaError> {
        self.compute
            .alloc_zeros::<T>(len.max(1))
            .ctx("cuMemAllocAsync")
    }

    /// Copies `data` (reinterpreted as `T`s) into a new device buffer on the compute
    /// stream. Synchronous with respect to the host buffer (pageable memory).
    pub fn upload<T: DeviceRepr>(&self, bytes: &[u8]) -> Result<CudaSlice<T>, CudaError> {
        let len = bytes.len() / std::mem::size_of::<T>();
        // SAFETY: filled right below on the same stream.
        let mut buf = unsafe { self.compute.alloc::<T>(len.max(1)) }.ctx("cuMemAllocAsync")?;
        raw::htod_bytes(&self.compute, bytes, &mut buf, 0)?;
        Ok(buf)
    }

    /// [`Self::upload`] on the copy stream: the buffer is allocated in the compute
    /// stream's order, the copy waits for the compute stream's work up to the
    /// allocation (everything enqueued there so far), and the compute stream waits
    /// for the copy before its next work. It keeps the copy out of the copy
    /// engine's queue behind a, b, c when issued before them; it does not make the
    /// copy overlap compute work already enqueued. Synchronous with respect to the
    /// host buffer (pageable).
    pub fn upload_on_copy<T: DeviceRepr>(&self, bytes: &[u8]) -> Result<CudaSlice<T>, CudaError> {
        let len = bytes.len() / std::mem::size_of::<T>();
        // SAFETY: filled right below, before the compute stream goes past its wait.
        let mut buf = unsafe { self.compute.alloc::<T>(len.max(1)) }.ctx("cuMemAllocAsync")?;
        self.copy.join(&self.compute).ctx("cuStreamWaitEvent")?;
        raw::htod_bytes(&self.copy, bytes, &mut buf, 0)?;
        self.compute.join(&self.copy).ctx("cuStreamWaitEvent")?;
        Ok(buf)
    }

    /// Reads a device buffer back (waits for the compute stream's work up to here: a
    /// stream-scoped wait, never a device-wide one).
    pub fn download<T: DeviceRepr + Default + Clone>(
        &self,
        buf: &CudaSlice<T>,
        len: usize,
    ) -> Result<Vec<T>, CudaError> {
        let mut out = vec![T::default(); len];
        if len == 0 {
            return Ok(out);
        }
        self.compute
            .memcpy_dtoh(&buf.slice(0..len), &mut out[..])
            .ctx("cuMemcpyDtoHAsync")?;
        self.compute.synchronize().ctx("cuStreamSynchronize")?;
        Ok(out)
    }

    /// Waits for everything queued on this handle's streams.
    pub fn sync(&self) -> Result<(), CudaError> {
        self.copy.synchronize().ctx("cuStreamSynchronize")?;
        self.compute.synchronize().ctx("cuStreamSynchronize")
    }

    /// Kernel `name` of the loaded modules.
    pub fn function(&self, name: &'static str) -> Result<&CudaFunction, CudaError> {
        self.k
            .map
            .get(name)
            .ok_or_else(|| CudaError::Shape(format!("no kernel named {name}")))
    }

    /// Times `f` with CUDA events on the compute stream (milliseconds).
    pub fn time_ms(&self, f: impl FnOnce() -> Result<(), CudaError>) -> Result<f32, CudaError> {
        let start = self
            .compute
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .ctx("cuEventRecord")?;
        f()?;
        let end = self
            .compute
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .ctx("cuEventRecord")?;
        end.synchronize().ctx("cuEventSynchronize")?;
        start.elapsed_ms(&end).ctx("cuEventElapsedTime")
    }
}

/// Launches kernel `$name` (a `&'static str`) on `$gpu`'s compute stream with the given arguments (each
/// pushed with cudarc's `PushKernelArg`), returning `Result<(), CudaError>`.
///
/// Every use passes the arguments its kernel declares, in order, with buffers long
/// enough for the grid it launches: the one obligation of the unsafe launch inside.
/// Crate-internal: what leaves the crate are safe functions over it.
macro_rules! launch {
    ($gpu:expr, $name:expr, $cfg:expr, $($arg:expr),* $(,)?) => {{
        use cudarc::driver::PushKernelArg as _;
        let gpu: &$crate::gpu::Gpu = $gpu;
        let name: &'static str = $name;
        match gpu.function(name) {
            Err(e) => Err(e),
            Ok(f) => {
                let mut b = gpu.compute_stream().launch_builder(f);
                $( b.arg($arg); )*
                let cfg: cudarc::driver::LaunchConfig = $cfg;
                // SAFETY: see the macro's documentation; checked by the call site.
                unsafe { b.launch(cfg) }
                    .map(|_| ())
                    .map_err(|source| $crate::error::CudaError::Driver { call: name, source })
            }
        }
    }};
}

pub(crate) use launch;

/// A launch over `n` threads in blocks of `block`.
pub fn grid(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n as u64).div_ceil(block as u64).max(1) as u32, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Group;
    use rand::SeedableRng;

    fn to_u32(f: &blst_fp, out: &mut [u32]) {
        for i in 0..6 {
            out[2 * i] = f.l[i] as u32;
            out[2 * i + 1] = (f.l[i] >> 32) as u32;
        }
    }

    /// A Jacobian (X, Y, Z) is the XYZZ point (X, Y, Z², Z³); the conversion back
    /// must give the same group element.
    #[test]
    fn xyzz_round_trips_through_jacobian() {
        let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        for i in 0..33 {
            let p = G1Projective::random(&mut r) * Scalar::from(i as u64 + 1);
            let j: &blst_p1 = p.as_ref();
            let zz = fp_sqr(&j.z);
            let zzz = fp_mul(&zz, &j.z);
            let mut x = XyzzRepr::default();
            to_u32(&j.x, &mut x.0[0..12]);
            to_u32(&j.y, &mut x.0[12..24]);
            to_u32(&zz, &mut x.0[24..36]);
            to_u32(&zzz, &mut x.0[36..48]);
            assert_eq!(xyzz_to_projective(&x), p);
        }
        assert_eq!(
            xyzz_to_projective(&XyzzRepr::default()),
            G1Projective::identity()
        );
    }

    fn fp2_to_u32(f: &blst_fp2, out: &mut [u32]) {
        to_u32(&f.fp[0], &mut out[0..12]);
        to_u32(&f.fp[1], &mut out[12..24]);
    }

    /// G2's conversion: a Jacobian (X, Y, Z) over Fq2 is (X, Y, Z², Z³) in XYZZ.
    #[test]
    fn xyzz2_round_trips_through_jacobian() {
        let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        for i in 0..17 {
            let p = G2Projective::random(&mut r) * Scalar::from(i as u64 + 1);
            let j: &blst_p2 = p.as_ref();
            let zz = fp2_sqr(&j.z);
            let zzz = fp2_mul(&zz, &j.z);
            let mut x = Xyzz2Repr::default();
            fp2_to_u32(&j.x, &mut x.0[0..24]);
            fp2_to_u32(&j.y, &mut x.0[24..48]);
            fp2_to_u32(&zz, &mut x.0[48..72]);
            fp2_to_u32(&zzz, &mut x.0[72..96]);
            assert_eq!(xyzz2_to_projective(&x), p);
        }
        assert_eq!(
            xyzz2_to_projective(&Xyzz2Repr::default()),
            G2Projective::identity()
        );
    }

    /// The kernels read a G2Affine as x.c0, x.c1, y.c0, y.c1 (12 u32 limbs each,
    /// Montgomery), and infinity as all zeros: check that against blst's struct.
    #[test]
    fn g2_affine_layout_is_blst_p2_affine() {
        use group::Curve;
        let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(4);
        let pts: Vec<G2Affine> = (0..3)
            .map(|_| G2Projective::random(&mut r).to_affine())
            .chain([G2Affine::default()])
            .collect();
        let bytes = g2_points_as_bytes(&pts);
        assert_eq!(bytes.len(), 4 * 192);
        for (k, p) in pts.iter().enumerate() {
            let raw: &blst::blst_p2_affine = p.as_ref();
            let mut want = Affine2Repr::default();
            fp2_to_u32(&raw.x, &mut want.0[0..24]);
            fp2_to_u32(&raw.y, &mut want.0[24..48]);
            let got: Vec<u32> = bytes[192 * k..192 * (k + 1)]
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(got, want.0.to_vec());
        }
        // Infinity: all-zero coordinates, as the kernels' is_inf expects.
        assert!(bool::from(group::prime::PrimeCurveAffine::is_identity(
            &pts[3]
        )));
        assert!(bytes[3 * 192..].iter().all(|&b| b == 0));
    }

    #[test]
    fn curve_constants() {
        assert_eq!(G1::AFFINE_BYTES, 96);
        assert_eq!(G1::XYZZ_BYTES, 192);
        assert_eq!(G2::AFFINE_BYTES, 192);
        assert_eq!(G2::XYZZ_BYTES, 384);
        // Every kernel name the host launches is in a module's list.
        for k in [G1::KERNELS, G2::KERNELS] {
            for name in [
                k.sum_points,
                k.sum_xyzz,
                k.gather_buckets,
                k.bucket_segments,
                k.reduce,
                k.ones_sum,
            ] {
                assert!(
                    kernels::MODULES.iter().any(|m| m.kernels.contains(&name)),
                    "{name} is in no module"
                );
            }
        }
    }
}
