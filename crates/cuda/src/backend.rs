//! [`CudaBackend`]: the [`GpuBackend`] implementation over one CUDA device.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blstrs::{G1Affine, G2Affine};
use cudarc::driver::{CudaContext, CudaSlice};
use cuzk_gpu_backend::{
    AbcRef, BackendError, Capabilities, DeviceInfo, GpuBackend, PartitionJob, PartitionJobRef,
    PartitionResult, SplitMsm, SplitScalars, Staged,
};
use group::Group;

use crate::cache::KernelCache;
use crate::error::{Ctx, CudaError};
use crate::gpu::{scalars_as_bytes, Affine2Repr, AffineRepr, DeviceCurve, FrRepr, Gpu, G1, G2};
use crate::msm::{self, MsmPlan, PendingSum, ScalarFormat};
use crate::ntt::{AbcUpload, Ntt, MAX_LOG_DOMAIN};
use crate::profile::Phases;
use crate::raw::HostRegistration;
use crate::streamed::{BaseStream, Stager, StreamStats};

/// Settings of a [`CudaBackend`].
#[derive(Clone, Debug)]
pub struct CudaConfig {
    /// CUDA device ordinal.
    pub device: usize,
    /// Device bytes left alone (other processes, driver, fragmentation): the backend
    /// plans partitions to fit in the free memory at start minus this.
    pub reserve_bytes: u64,
    /// Where base vectors live.
    pub bases: BasePlacement,
    /// Where compiled kernels are kept between processes (`None`:
    /// [`KernelCache::default_dir`]).
    pub kernel_cache_dir: Option<std::path::PathBuf>,
    /// A folder of staged kernels looked in first (the plugin sets it to the
    /// `kernels/` folder beside its `.so`); `kernels/` beside the executable is
    /// always looked in.
    pub staged_kernels_dir: Option<std::path::PathBuf>,
}

impl Default for CudaConfig {
    fn default() -> Self {
        Self {
            device: 0,
            reserve_bytes: 2 << 30,
            bases: BasePlacement::Auto,
            kernel_cache_dir: None,
            staged_kernels_dir: None,
        }
    }
}

impl CudaConfig {
    /// The kernel cache these settings describe.
    pub fn kernel_cache(&self) -> KernelCache {
        let cache = KernelCache::new(self.kernel_cache_dir.as_deref());
        match &self.staged_kernels_dir {
            Some(d) => cache.with_staged(d.clone()),
            None => cache,
        }
    }
}

/// Where a partition's base vectors (the parameter queries) live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BasePlacement {
    /// Resident when they fit (uploaded once, kept); when a partition's sets do not
    /// fit next to its working memory, the ones not already resident are streamed
    /// from host memory in chunks of at most 2^23 points, one MSM per chunk.
    Auto,
    /// Always streamed, in chunks of at most `chunk_bases` points (a GPU smaller than
    /// the parameters, the streaming path's checks, or the A/B against resident).
    ///
    /// Streaming page-locks two host staging buffers of a chunk each (2 × chunk ×
    /// 96 bytes, 192 when b_g2 is streamed), kept by the backend.
    Streamed { chunk_bases: usize },
}

/// The GPU backend on one CUDA device.
///
/// **Bases stay on the device.** The parameter queries (h, l, a, b_g1, and b_g2
/// when the scheduler hands the G2 MSM to the backend) are uploaded
/// the first time a partition uses them and kept, keyed by the address and length
/// of the slice passed in (`PartitionJob::h_bases`, `SplitMsm::bases`) and a
/// fingerprint of eight of its points: a slice at the same address that holds
/// other points (a parameter set unloaded and another loaded in its place) is
/// uploaded anew and the stale copy dropped. Only a change that leaves all eight
/// sampled points equal would go unseen, so after unloading a parameter set call
/// [`CudaBackend::evict_bases`] all the same, which also frees the memory. When a new set does not fit next to the cached ones,
/// the sets this partition does not use are evicted first; when the partition's own
/// sets still do not fit (a GPU smaller than the parameters), those not resident are
/// **streamed** from host memory in chunks, one MSM per chunk ([`BasePlacement`]),
/// instead of failing. `BasePlacement::Streamed` streams always. Streamed chunks go
/// through two page-locked staging buffers the backend keeps ([`crate::streamed`]):
/// the host copy of one chunk, the DMA of the next and the MSM of the one before
/// overlap.
///
/// One partition at a time runs on the device (an internal mutex); the scheduler's
/// GPU lock decides who calls.
#[derive(Debug)]
pub struct CudaBackend {
    inner: Mutex<Inner>,
    /// The device context, outside the mutex: page-locking a partition's a, b, c
    /// needs it and is done before the device is taken.
    ctx: Arc<CudaContext>,
    caps: Capabilities,
    /// Failures the error-path tests inject (test builds and the `fault-injection`
    /// feature only).
    #[cfg(any(test, feature = "fault-injection"))]
    faults: FaultInjection,
}

/// Test-only failure injection: where a partition fails on purpose, and what the
/// device was doing then. Only in the crate's own tests and with the
/// `fault-injection` feature; production builds have no such field or branch.
#[cfg(any(test, feature = "fault-injection"))]
#[derive(Debug, Default)]
pub struct FaultInjection {
    fail_after_upload: std::sync::atomic::AtomicBool,
    /// Recorded on the copy stream right behind the a, b, c upload, at the injected
    /// failure: complete once every copy of it has read the host vectors.
    after_upload: Mutex<Option<cudarc::driver::CudaEvent>>,
    /// Whether the copies were still running when the failure was injected (if
    /// not, a test of the error path proves nothing).
    in_flight_at_fault: std::sync::atomic::AtomicBool,
}

#[cfg(any(test, feature = "fault-injection"))]
impl CudaBackend {
    /// Makes every later partition fail right after its a, b, c upload was enqueued
    /// (`on = true`), before H and the MSMs are done.
    pub fn fail_after_upload(&self, on: bool) {
        use std::sync::atomic::Ordering;
        self.faults.fail_after_upload.store(on, Ordering::SeqCst);
    }

    /// After an injected failure: (whether the upload was still in flight when it
    /// was injected, whether it is complete now). `None` if none was injected.
    pub fn upload_state_after_fault(&self) -> Option<Result<(bool, bool), CudaError>> {
        use std::sync::atomic::Ordering;
        let ev = self
            .faults
            .after_upload
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let ev = ev.as_ref()?;
        let was = self.faults.in_flight_at_fault.load(Ordering::SeqCst);
        Some(
            ev.try_is_complete()
                .ctx("cuEventQuery")
                .map(|done| (was, done)),
        )
    }
}

impl CudaBackend {
    /// The injected failure right after the a, b, c upload, when a test asked for
    /// one; nothing in other builds.
    #[cfg(any(test, feature = "fault-injection"))]
    fn fault_after_upload(&self, gpu: &Gpu) -> Result<(), CudaError> {
        use std::sync::atomic::Ordering;
        if !self.faults.fail_after_upload.load(Ordering::SeqCst) {
            return Ok(());
        }
        let ev = gpu.copy.record_event(None).ctx("cuEventRecord")?;
        let done = ev.try_is_complete().ctx("cuEventQuery")?;
        self.faults
            .in_flight_at_fault
            .store(!done, Ordering::SeqCst);
        *self
            .faults
            .after_upload
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(ev);
        Err(CudaError::Shape(
            "injected failure right after the a, b, c upload".into(),
        ))
    }

    #[cfg(not(any(test, feature = "fault-injection")))]
    #[inline(always)]
    fn fault_after_upload(&self, _gpu: &Gpu) -> Result<(), CudaError> {
        Ok(())
    }
}

#[derive(Debug)]
struct Inner {
    gpu: Gpu,
    ntt: Ntt,
    bases: HashMap<BaseKey, CudaSlice<AffineRepr>>,
    /// Resident G2 bases (b_g2), keyed the same way; 192 bytes a point.
    bases_g2: HashMap<BaseKey, CudaSlice<Affine2Repr>>,
    /// Bytes of device memory this backend may plan with.
    budget: u64,
    placement: BasePlacement,
    /// Pinned staging buffers of streamed bases, kept across partitions.
    stager: Stager,
}

fn dev(e: CudaError) -> BackendError {
    BackendError::Device(e.to_string())
}

/// A resident base set's key: the host slice's address and length, and a
/// fingerprint of its contents (eight points spread over it), so that a slice
/// freed and another allocated at the same address with other points is not
/// served the old set's device copy (it is uploaded anew, and the stale copy
/// dropped).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct BaseKey {
    addr: usize,
    len: usize,
    print: u64,
}

impl BaseKey {
    /// The same slice (address and length), whatever it holds now.
    fn same_slice(&self, other: &BaseKey) -> bool {
        self.addr == other.addr && self.len == other.len
    }
}

fn key<C: DeviceCurve>(s: &[C::HostAffine]) -> BaseKey {
    use std::hash::{Hash, Hasher};
    let bytes = C::host_as_bytes(s);
    let size = bytes.len() / s.len().max(1);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.len().hash(&mut h);
    if !s.is_empty() {
        for k in 0..8 {
            let i = k * (s.len() - 1) / 7;
            bytes[i * size..(i + 1) * size].hash(&mut h);
        }
    }
    BaseKey {
        addr: s.as_ptr() as usize,
        len: s.len(),
        print: h.finish(),
    }
}

impl CudaBackend {
    /// Opens the device, compiles the kernels, builds the twiddle tables. Fails with
    /// [`CudaError::NoDevice`] where there is no driver or no device.
    pub fn new(config: CudaConfig) -> Result<Self, CudaError> {
        let gpu = Gpu::new(config.device, &config.kernel_cache())?;
        let ntt = Ntt::new(&gpu)?;
        gpu.sync()?;
        let budget = gpu
            .free_memory_at_start
            .saturating_sub(config.reserve_bytes);
        let caps = Capabilities {
            name: "cuda".to_owned(),
            max_log_domain: MAX_LOG_DOMAIN,
            g2: true,
            devices: vec![DeviceInfo {
                name: gpu.name.clone(),
                total_memory: gpu.total_memory,
                free_memory: gpu.free_memory_at_start,
            }],
        };
        Ok(Self {
            ctx: gpu.ctx.clone(),
            inner: Mutex::new(Inner {
                gpu,
                ntt,
                bases: HashMap::new(),
                bases_g2: HashMap::new(),
                budget,
                placement: config.bases,
                stager: Stager::new(),
            }),
            caps,
            #[cfg(any(test, feature = "fault-injection"))]
            faults: FaultInjection::default(),
        })
    }

    /// Drops every cached base vector (device memory is returned at once to the
    /// stream-ordered pool).
    pub fn evict_bases(&self) {
        let mut inner = self.lock();
        inner.bases.clear();
        inner.bases_g2.clear();
    }

    /// Bytes of bases currently resident.
    pub fn cached_base_bytes(&self) -> u64 {
        self.lock().cached_bytes()
    }

    /// What streaming bases did since the last call (chunks, bytes, host copy and
    /// wait times, pinned bytes held); resets the counts.
    pub fn take_stream_stats(&self) -> StreamStats {
        self.lock().stager.take_stats()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with the device handle and NTT engine (for checks and benchmarks).
    pub fn with_gpu<R>(&self, f: impl FnOnce(&Gpu, &Ntt) -> R) -> R {
        let inner = self.lock();
        f(&inner.gpu, &inner.ntt)
    }

    /// Device bytes `prove_partition` needs for `job` beyond the bases (H buffers, the
    /// largest MSM's scratch, the split uploads).
    pub fn working_bytes(job: &PartitionJobRef<'_>) -> u64 {
        let n = job.abc.len();
        let big = 1usize << crate::log_domain(n);
        let h = Ntt::h_device_bytes(n);
        let h_msm = MsmPlan::for_size(big).scratch_bytes(big) + big as u64 * 32;
        // A query's ones sum, then its tail MSM (G1's ones by batch-affine rounds,
        // G2's by the XYZZ kernel, whose partials are small).
        let scratch = |m: &SplitScalars, xyzz: u64| {
            let t = m.tail_indices().len();
            let ones = if xyzz == G1::XYZZ_BYTES {
                msm::ones_scratch_bytes(m.num_bases())
            } else {
                0
            };
            MsmPlan::for_size(t).scratch_bytes_for(t, xyzz).max(ones)
        };
        let data = |m: &SplitScalars| {
            m.tail_indices().len() as u64 * 36 + m.ones().words().len() as u64 * 8
        };
        let g1 = [&job.l, &job.a, &job.b_g1];
        // One query's MSM scratch at a time; L, A and B's scalars are uploaded
        // together, before a, b, c, and live next to the H buffers.
        let tails = g1
            .map(|m| scratch(m.split, G1::XYZZ_BYTES))
            .into_iter()
            .chain(
                job.b_g2
                    .map(|m| scratch(m.split, G2::XYZZ_BYTES) + data(m.split)),
            )
            .max()
            .unwrap_or(0)
            + g1.map(|m| data(m.split)).iter().sum::<u64>();
        h.max(h_msm) + tails
    }
}

impl Inner {
    fn cached_bytes(&self) -> u64 {
        self.bases
            .values()
            .map(|b| b.len() as u64 * G1::AFFINE_BYTES)
            .sum::<u64>()
            + self
                .bases_g2
                .values()
                .map(|b| b.len() as u64 * G2::AFFINE_BYTES)
                .sum::<u64>()
    }

    /// Makes every base vector of the job (G1 `sets`, G2 `sets_g2`) resident if they
    /// all fit next to `working` bytes (evicting sets this job does not use first),
    /// and returns the chunk size (in points) for the sets that are not: those are
    /// streamed, one chunk at a time, through what memory is left.
    fn prepare_bases(
        &mut self,
        sets: &[&[G1Affine]],
        sets_g2: &[&[G2Affine]],
        working: u64,
    ) -> Result<usize, BackendError> {
        let wanted: Vec<BaseKey> = sets.iter().map(|s| key::<G1>(s)).collect();
        let wanted_g2: Vec<BaseKey> = sets_g2.iter().map(|s| key::<G2>(s)).collect();
        // A cached copy of a slice that now holds other points is garbage.
        let stale = |k: &BaseKey, want: &[BaseKey]| want.iter().any(|w| w.same_slice(k) && w != k);
        self.bases.retain(|k, _| !stale(k, &wanted));
        self.bases_g2.retain(|k, _| !stale(k, &wanted_g2));
        let missing: u64 = sets
            .iter()
            .zip(&wanted)
            .filter(|(_, k)| !self.bases.contains_key(k))
            .map(|(s, _)| s.len() as u64 * G1::AFFINE_BYTES)
            .sum::<u64>()
            + sets_g2
                .iter()
                .zip(&wanted_g2)
                .filter(|(_, k)| !self.bases_g2.contains_key(k))
                .map(|(s, _)| s.len() as u64 * G2::AFFINE_BYTES)
                .sum::<u64>();
        if self.cached_bytes() + missing + working > self.budget {
            self.bases.retain(|k, _| wanted.contains(k));
            self.bases_g2.retain(|k, _| wanted_g2.contains(k));
        }
        let forced = match self.placement {
            BasePlacement::Auto => None,
            BasePlacement::Streamed { chunk_bases } => Some(chunk_bases),
        };
        let resident_fits = self.cached_bytes() + missing + working <= self.budget;
        if resident_fits && forced.is_none() {
            for (s, k) in sets.iter().zip(wanted) {
                if !self.bases.contains_key(&k) {
                    let buf = self
                        .gpu
                        .upload::<AffineRepr>(G1::host_as_bytes(s))
                        .map_err(dev)?;
                    self.bases.insert(k, buf);
                }
            }
            for (s, k) in sets_g2.iter().zip(wanted_g2) {
                if !self.bases_g2.contains_key(&k) {
                    let buf = self
                        .gpu
                        .upload::<Affine2Repr>(G2::host_as_bytes(s))
                        .map_err(dev)?;
                    self.bases_g2.insert(k, buf);
                }
            }
            return Ok(MIN_STREAM_CHUNK);
        }
        let left = self
            .budget
            .saturating_sub(self.cached_bytes())
            .saturating_sub(working);
        stream_chunk(left, forced).ok_or_else(|| {
            dev(CudaError::OutOfMemory {
                what: "partition (H buffers + MSM scratch + two chunks of streamed bases)",
                need: self.cached_bytes()
                    + working
                    + 2 * MIN_STREAM_CHUNK as u64 * STREAM_BYTES_PER_POINT,
                available: self.budget,
            })
        })
    }
}

/// Ones and tail of a split query: over its resident bases, or streamed through
/// `stream`.
fn query<C: DeviceCurve>(
    gpu: &Gpu,
    resident: Option<&CudaSlice<C::Affine>>,
    stream: &mut BaseStream<'_, C>,
    m: &SplitMsm<'_, C::HostAffine>,
) -> Result<Vec<PendingSum<C>>, CudaError> {
    match resident {
        Some(bases) => {
            let (ones, tail) = split_msm::<C>(gpu, bases, m)?;
            Ok(vec![ones, tail])
        }
        None => streamed_split(stream, m),
    }
}

/// Σ scalars[i] · host[i] for i < n with the bases streamed from `host` in chunks
/// (scalars on the device, Montgomery form: H's coefficients).
fn streamed_dense<C: DeviceCurve>(
    stream: &mut BaseStream<'_, C>,
    host: &[C::HostAffine],
    scalars: &CudaSlice<FrRepr>,
    n: usize,
) -> Result<Vec<PendingSum<C>>, CudaError> {
    if n > host.len() || n > scalars.len() {
        return Err(CudaError::Shape(format!(
            "a streamed MSM of {n} terms over {} bases and {} scalars",
            host.len(),
            scalars.len()
        )));
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    let gpu = stream.gpu();
    let ranges: Vec<(usize, usize)> = chunks(n, stream.chunk()).collect();
    // A chunk's scalars are copied out of H's coefficients on the compute stream (an
    // MSM takes a whole buffer). One buffer is enough: chunk k+1's copy is ordered
    // after chunk k's MSM on that stream.
    let mut part = gpu.alloc_poisoned::<FrRepr>(stream.chunk().min(n))?;
    let mut out = Vec::with_capacity(ranges.len());
    stream.run(host, &ranges, |(lo, hi), bases| {
        gpu.compute_stream()
            .memcpy_dtod(&scalars.slice(lo..hi), &mut part.slice_mut(..hi - lo))
            .ctx("cuMemcpyDtoDAsync")?;
        out.push(msm::msm(
            gpu,
            bases,
            &part,
            hi - lo,
            ScalarFormat::Montgomery,
            None,
            MsmPlan::for_size(hi - lo),
        )?);
        Ok(())
    })?;
    Ok(out)
}

/// A split query with its bases streamed in chunks: per chunk, the ones whose bit
/// falls in it and the run of tail terms whose index does (rebased to the chunk).
fn streamed_split<C: DeviceCurve>(
    stream: &mut BaseStream<'_, C>,
    m: &SplitMsm<'_, C::HostAffine>,
) -> Result<Vec<PendingSum<C>>, CudaError> {
    let gpu = stream.gpu();
    let split = m.split;
    let words = split.ones().words();
    let (idx, sc) = (split.tail_indices(), split.tail_scalars());
    let ranges: Vec<(usize, usize)> = chunks(split.num_bases(), stream.chunk()).collect();
    let mut out = Vec::new();
    stream.run(m.bases, &ranges, |(lo, hi), bases| {
        // The chunk's bitmap words and tail terms are small plain uploads on the
        // compute stream: after its wait for the chunk's bases, before the MSMs that
        // read them, and freed in that stream's order after those MSMs.
        // Chunks start at multiples of 64: word k of the chunk is word lo/64 + k.
        let w = &words[(lo / 64).min(words.len())..hi.div_ceil(64).min(words.len())];
        if !w.is_empty() {
            let words_dev = gpu.upload::<u64>(u64s_as_bytes(w))?;
            out.push(msm::ones_sum(gpu, bases, &words_dev, w.len(), hi - lo)?);
        }
        // Tail indices increase (a SplitScalars invariant): the chunk's terms are
        // one run of them.
        let t0 = idx.partition_point(|&i| (i as usize) < lo);
        let t1 = idx.partition_point(|&i| (i as usize) < hi);
        let ci: Vec<u32> = idx[t0..t1].iter().map(|&i| i - lo as u32).collect();
        if !ci.is_empty() {
            let idx_dev = gpu.upload::<u32>(u32s_as_bytes(&ci))?;
            let sc_dev = gpu.upload::<FrRepr>(limbs_as_bytes(&sc[t0..t1]))?;
            out.push(msm::msm(
                gpu,
                bases,
                &sc_dev,
                ci.len(),
                ScalarFormat::Canonical,
                Some(&idx_dev),
                MsmPlan::for_size(ci.len()),
            )?);
        }
        Ok(())
    })?;
    Ok(out)
}

/// Ones and tail of a split query whose bases are resident (`bases`): the bitmap
/// uploaded, the ones enqueued, then the tail terms uploaded on the copy stream
/// while the ones run, then the tail MSM.
fn split_msm<C: DeviceCurve>(
    gpu: &Gpu,
    bases: &CudaSlice<C::Affine>,
    m: &SplitMsm<'_, C::HostAffine>,
) -> Result<(PendingSum<C>, PendingSum<C>), CudaError> {
    let ones = ones_msm(gpu, bases, &upload_ones(gpu, m.split)?)?;
    let tail = tail_msm(gpu, bases, &upload_tail(gpu, m.split)?)?;
    Ok((ones, tail))
}

/// A split query's ones bitmap on the device; freed in stream order after the
/// ones sum that reads it.
struct OnesOnDevice {
    words: CudaSlice<u64>,
    nwords: usize,
    num_bases: usize,
}

/// A split query's tail terms on the device (indices, canonical scalars).
struct TailOnDevice {
    idx: CudaSlice<u32>,
    scalars: CudaSlice<FrRepr>,
    len: usize,
}

/// The ones bitmap, copied on the compute stream (small: 2^21 words at 2^27).
fn upload_ones(gpu: &Gpu, split: &SplitScalars) -> Result<OnesOnDevice, CudaError> {
    let words = split.ones().words();
    Ok(OnesOnDevice {
        words: gpu.upload::<u64>(u64s_as_bytes(words))?,
        nwords: words.len(),
        num_bases: split.num_bases(),
    })
}

/// The tail terms, copied on the copy stream (a query's 0.2 GB at 2^27): they
/// travel while the compute stream sums ones, and the compute stream waits for
/// them before its next work.
fn upload_tail(gpu: &Gpu, split: &SplitScalars) -> Result<TailOnDevice, CudaError> {
    Ok(TailOnDevice {
        idx: gpu.upload_on_copy::<u32>(u32s_as_bytes(split.tail_indices()))?,
        scalars: gpu.upload_on_copy::<FrRepr>(limbs_as_bytes(split.tail_scalars()))?,
        len: split.tail_indices().len(),
    })
}

fn ones_msm<C: DeviceCurve>(
    gpu: &Gpu,
    bases: &CudaSlice<C::Affine>,
    up: &OnesOnDevice,
) -> Result<PendingSum<C>, CudaError> {
    msm::ones_sum(gpu, bases, &up.words, up.nwords, up.num_bases)
}

fn tail_msm<C: DeviceCurve>(
    gpu: &Gpu,
    bases: &CudaSlice<C::Affine>,
    up: &TailOnDevice,
) -> Result<PendingSum<C>, CudaError> {
    msm::msm(
        gpu,
        bases,
        &up.scalars,
        up.len,
        ScalarFormat::Canonical,
        Some(&up.idx),
        MsmPlan::for_size(up.len),
    )
}

/// H of a partition: its a, b, c on their way to the device, or its coefficients.
enum HStage<'a> {
    Uploading(AbcUpload<'a>),
    Done(CudaSlice<FrRepr>),
}

fn u64s_as_bytes(v: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding; reading its bytes is always valid.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}
fn u32s_as_bytes(v: &[u32]) -> &[u8] {
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}
fn limbs_as_bytes(v: &[[u64; 4]]) -> &[u8] {
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Smallest chunk worth streaming (points); chunks are multiples of 64 so that a
/// chunk's ones are whole bitmap words.
const MIN_STREAM_CHUNK: usize = 1 << 12;
/// Largest chunk `BasePlacement::Auto` streams (points). Larger chunks make fewer,
/// more efficient MSMs (on the H200, G1 at 2^22: 11.3 ns a point; 2^24: 9.3) but
/// a longer first chunk that nothing overlaps, and page-locked host memory grows
/// with them: at 2^23, 1.5 GiB of staging buffers for G1 (3 GiB once b_g2 streams).
const MAX_AUTO_STREAM_CHUNK: usize = 1 << 23;
/// Device bytes per point of a chunk, budgeted twice (two slots): each slot's base
/// buffer (G2's 192 bytes, the largest) and a scalar (H's coefficients of a chunk,
/// one buffer). So 448 bytes a point cover both G2's two base buffers (384) and
/// G1's two plus H's scalars (224); the two curves' buffers never coexist.
const STREAM_BYTES_PER_POINT: u64 = 192 + 32;
const _: () = {
    let budget = crate::streamed::SLOTS as u64 * STREAM_BYTES_PER_POINT;
    let slots = crate::streamed::SLOTS as u64;
    assert!(budget >= slots * <G2 as DeviceCurve>::AFFINE_BYTES);
    assert!(budget >= slots * <G1 as DeviceCurve>::AFFINE_BYTES + 32);
};

/// Points per streamed chunk with `left` device bytes to spare: two slots of
/// [`STREAM_BYTES_PER_POINT`] a point, at most `forced` (or
/// [`MAX_AUTO_STREAM_CHUNK`] without), a multiple of 64; `None` when not even two
/// of the smallest chunks fit.
fn stream_chunk(left: u64, forced: Option<usize>) -> Option<usize> {
    let fit = (left / 2 / STREAM_BYTES_PER_POINT) as usize;
    if fit < MIN_STREAM_CHUNK {
        return None;
    }
    let chunk = forced.unwrap_or(MAX_AUTO_STREAM_CHUNK).min(fit).max(64);
    Some(chunk / 64 * 64)
}

/// [lo, hi) ranges of at most `chunk` (rounded down to a multiple of 64, at least
/// 64) covering 0..n.
fn chunks(n: usize, chunk: usize) -> impl Iterator<Item = (usize, usize)> {
    let c = (chunk / 64 * 64).max(64);
    (0..n).step_by(c).map(move |lo| (lo, (lo + c).min(n)))
}

fn check_split<G>(query: &'static str, m: &SplitMsm<'_, G>) -> Result<(), BackendError> {
    let want = m.split.num_bases();
    if m.bases.len() < want {
        return Err(BackendError::BaseCount {
            query,
            got: m.bases.len(),
            want,
        });
    }
    Ok(())
}

impl CudaBackend {
    /// Page-locks those of `a, b, c` long enough to be worth it (`PIN_MIN_LEN`);
    /// ranges registered already (by a `stage` guard) are skipped and not owned.
    ///
    /// # Safety
    ///
    /// `abc` must stay allocated and unmoved until every returned registration is
    /// dropped.
    unsafe fn pin(&self, abc: AbcRef<'_>) -> Result<Vec<HostRegistration>, CudaError> {
        let mut pinned = Vec::new();
        for v in [abc.a, abc.b, abc.c] {
            if v.len() >= crate::ntt::PIN_MIN_LEN {
                // SAFETY: the caller's contract.
                if let Some(r) = unsafe { HostRegistration::new(&self.ctx, scalars_as_bytes(v)) }? {
                    pinned.push(r);
                }
            }
        }
        Ok(pinned)
    }
}

impl GpuBackend for CudaBackend {
    fn capabilities(&self) -> Capabilities {
        self.caps.clone()
    }

    /// Page-locks `a, b, c` (the same `PIN_MIN_LEN` rule as `prove_partition_ref`),
    /// so the pinning runs before the caller's GPU lock; `prove_partition_ref` then
    /// finds the ranges registered and skips them. The guard unregisters them.
    fn stage(&self, abc: AbcRef<'_>) -> Result<Staged, BackendError> {
        if !abc.is_consistent() {
            return Err(BackendError::AbcShape {
                a: abc.a.len(),
                b: abc.b.len(),
                c: abc.c.len(),
            });
        }
        // SAFETY: `GpuBackend::stage`'s contract: the caller keeps `a, b, c`
        // allocated and unmoved until it drops the returned guard, which owns the
        // registrations and is the only thing that unregisters them.
        let pinned = unsafe { self.pin(abc) }.map_err(dev)?;
        if pinned.is_empty() {
            return Ok(Staged::none());
        }
        let ctx = Arc::clone(&self.ctx);
        Ok(Staged::new(move || {
            // The guard may be dropped on another thread than the one that
            // registered: make the context current there for the unregister calls.
            let _ = ctx.bind_to_thread();
            drop(pinned);
        }))
    }

    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        // The device only reads a, b, c: the borrowed path does all the work, and the
        // evaluations go when it returns.
        let PartitionJob {
            abc,
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
        } = job;
        self.prove_partition_ref(PartitionJobRef {
            abc: AbcRef::new(&abc),
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
        })
    }

    fn prove_partition_ref(
        &self,
        job: PartitionJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        if !job.abc.is_consistent() {
            return Err(BackendError::AbcShape {
                a: job.abc.a.len(),
                b: job.abc.b.len(),
                c: job.abc.c.len(),
            });
        }
        let log = crate::log_domain(job.abc.len());
        if log > MAX_LOG_DOMAIN {
            return Err(BackendError::DomainTooLarge {
                log,
                max: MAX_LOG_DOMAIN,
            });
        }
        let want_h = (1usize << log) - 1;
        if job.h_bases.len() != want_h {
            return Err(BackendError::BaseCount {
                query: "h",
                got: job.h_bases.len(),
                want: want_h,
            });
        }
        check_split("l", &job.l)?;
        check_split("a", &job.a)?;
        check_split("b_g1", &job.b_g1)?;
        if let Some(b_g2) = &job.b_g2 {
            check_split("b_g2", b_g2)?;
        }
        let _span = tracing::info_span!("prove_partition", backend = "cuda", log_n = log).entered();
        let working = Self::working_bytes(&job);
        let PartitionJobRef {
            abc,
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
        } = job;
        // Page-lock a, b, c before taking the device (phase 9 of the C2 history): the
        // pinning of ~12 GiB overlaps another partition's GPU work, and compute_h's
        // own registration finds the ranges registered and skips it. When the caller
        // staged them (`stage`, before its GPU lock) they are registered already and
        // this registers nothing.
        // SAFETY: the borrowed `abc` outlives this call, and `pinned` is dropped
        // within it (explicitly below, or on an early return).
        let pinned = unsafe { self.pin(abc) }.map_err(dev)?;
        let mut inner = self.lock();
        let g2_sets: Vec<&[G2Affine]> = b_g2.iter().map(|m| m.bases).collect();
        let chunk =
            inner.prepare_bases(&[h_bases, l.bases, a.bases, b_g1.bases], &g2_sets, working)?;
        let Inner {
            gpu,
            ntt,
            bases,
            bases_g2,
            stager,
            ..
        } = &mut *inner;
        let gpu = &*gpu;

        let mut phases = Phases::start(gpu, || format!("partition 2^{log}")).map_err(dev)?;
        // G1 sets not resident stream through one pair of chunk buffers (allocated
        // at the first streamed chunk, kept for L, A, B_G1 and H).
        let mut g1_stream = BaseStream::<G1>::new(gpu, stager, chunk);
        // With L, A and B resident, a, b, c (12 GiB at 2^27) travel on the copy stream
        // while the compute stream does L, A and B, and the transforms follow. The
        // queries' own data goes first: behind a, b, c on the copy engine it waited
        // ~230 ms at 2^27 (H200, third session). The bitmaps go up, L's ones start,
        // and the tail terms travel (copy stream) while they run. With any of L, A,
        // B streamed (their chunks upload as they go), H comes first.
        let g1_sets = [&l, &a, &b_g1];
        let resident: Vec<&CudaSlice<AffineRepr>> = g1_sets
            .iter()
            .filter_map(|m| bases.get(&key::<G1>(m.bases)))
            .collect();
        let (h, l_p, a_p, b_p) = if let [rl, ra, rb] = resident[..] {
            let ones = g1_sets
                .iter()
                .map(|m| upload_ones(gpu, m.split))
                .collect::<Result<Vec<_>, _>>()
                .map_err(dev)?;
            let l_ones = ones_msm::<G1>(gpu, rl, &ones[0]).map_err(dev)?;
            let tails = g1_sets
                .iter()
                .map(|m| upload_tail(gpu, m.split))
                .collect::<Result<Vec<_>, _>>()
                .map_err(dev)?;
            let h = HStage::Uploading(Ntt::upload_abc(gpu, abc.a, abc.b, abc.c).map_err(dev)?);
            self.fault_after_upload(gpu).map_err(dev)?;
            let l_p = vec![l_ones, tail_msm(gpu, rl, &tails[0]).map_err(dev)?];
            Phases::mark(&mut phases, gpu, "L").map_err(dev)?;
            let mut both = |r: &CudaSlice<AffineRepr>, k: usize, name| {
                let p = vec![
                    ones_msm::<G1>(gpu, r, &ones[k]).map_err(dev)?,
                    tail_msm(gpu, r, &tails[k]).map_err(dev)?,
                ];
                Phases::mark(&mut phases, gpu, name).map_err(dev)?;
                Ok::<_, BackendError>(p)
            };
            let a_p = both(ra, 1, "A")?;
            let b_p = both(rb, 2, "B_G1")?;
            (h, l_p, a_p, b_p)
        } else {
            let up = Ntt::upload_abc(gpu, abc.a, abc.b, abc.c).map_err(dev)?;
            self.fault_after_upload(gpu).map_err(dev)?;
            let h = HStage::Done(ntt.h_from(gpu, up).map_err(dev)?);
            Phases::mark(&mut phases, gpu, "H (upload + NTTs)").map_err(dev)?;
            let mut g1 = |m: &SplitMsm<'_, G1Affine>, name| {
                let p = query::<G1>(gpu, bases.get(&key::<G1>(m.bases)), &mut g1_stream, m)
                    .map_err(dev)?;
                Phases::mark(&mut phases, gpu, name).map_err(dev)?;
                Ok::<_, BackendError>(p)
            };
            let l_p = g1(&l, "L")?;
            let a_p = g1(&a, "A")?;
            let b_p = g1(&b_g1, "B_G1")?;
            (h, l_p, a_p, b_p)
        };
        let h_coeffs = match h {
            HStage::Done(coeffs) => coeffs,
            HStage::Uploading(up) => {
                let coeffs = ntt.h_from(gpu, up).map_err(dev)?;
                Phases::mark(
                    &mut phases,
                    gpu,
                    "H (NTTs; a, b, c uploaded during L, A, B)",
                )
                .map_err(dev)?;
                coeffs
            }
        };
        // Uploads are done: unpin while the device works.
        drop(pinned);
        let h_pending = match bases.get(&key::<G1>(h_bases)) {
            Some(resident) => vec![msm::msm(
                gpu,
                resident,
                &h_coeffs,
                want_h,
                ScalarFormat::Montgomery,
                None,
                MsmPlan::for_size(want_h),
            )
            .map_err(dev)?],
            None => streamed_dense(&mut g1_stream, h_bases, &h_coeffs, want_h).map_err(dev)?,
        };
        Phases::mark(&mut phases, gpu, "H MSM").map_err(dev)?;
        drop(h_coeffs);
        // The G1 chunk buffers go (in stream order) before G2's are made: the budget
        // counts one curve's pair.
        drop(g1_stream);
        // The B query in G2 (when the scheduler hands it over): the same split MSM
        // over the G2 bases, enqueued behind the G1 ones.
        let b2_p = match &b_g2 {
            Some(m) => {
                let mut g2_stream = BaseStream::<G2>::new(gpu, stager, chunk);
                Some(
                    query::<G2>(gpu, bases_g2.get(&key::<G2>(m.bases)), &mut g2_stream, m)
                        .map_err(dev)?,
                )
            }
            None => None,
        };
        if b2_p.is_some() {
            Phases::mark(&mut phases, gpu, "B_G2").map_err(dev)?;
        }

        /// The sum of a query's pending parts (ones, tails; per chunk when streamed).
        fn total<C: DeviceCurve>(
            gpu: &Gpu,
            parts: Vec<PendingSum<C>>,
        ) -> Result<C::Projective, BackendError> {
            let mut acc = C::Projective::identity();
            for p in parts {
                acc += p.finish(gpu).map_err(dev)?;
            }
            Ok(acc)
        }
        let h = total(gpu, h_pending)?;
        Phases::finish(phases).map_err(dev)?;
        Ok(PartitionResult {
            h,
            l: total(gpu, l_p)?,
            a: total(gpu, a_p)?,
            b_g1: total(gpu, b_p)?,
            b_g2: b2_p.map(|p| total(gpu, p)).transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bug of issue #12: a partition that fails between the a, b, c upload and
    /// the end of H must not return while the copies still read the caller's host
    /// memory (which the caller unpins and frees as soon as it has the error). The
    /// failure is injected right after the upload is enqueued, with the bases
    /// resident (the upload overlaps L, A, B) and streamed (H first), with a, b, c
    /// staged by the caller and pinned by the backend itself. 3 × 1 GiB of a, b, c
    /// take tens of milliseconds to copy: the injected failure comes microseconds
    /// after the enqueue.
    #[test]
    fn a_failure_after_the_upload_returns_only_once_the_copies_are_done() {
        use cuzk_gpu_backend::{AbcRef, GpuBackend, PartitionJobRef, SplitMsm};
        use ff::Field;
        use group::Curve;
        use rand::SeedableRng;
        use std::io::Write as _;

        let open = |bases| match CudaBackend::new(CudaConfig {
            bases,
            ..CudaConfig::default()
        }) {
            Ok(b) => Some(b),
            Err(CudaError::NoDevice(why)) => {
                let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({why})");
                None
            }
            Err(e) => panic!("CUDA backend failed to start: {e}"),
        };
        // Before the inputs (6 GiB of host memory): where there is no device.
        let Some(first) = open(BasePlacement::Auto) else {
            return;
        };
        let mut first = Some(first);
        let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(12);
        let log = 25u32;
        let n = (1usize << log) - 3;
        let x = blstrs::Scalar::random(&mut r);
        let abc: Vec<Vec<blstrs::Scalar>> = (0..3)
            .map(|k| vec![x + blstrs::Scalar::from(k as u64); n])
            .collect();
        let p = (blstrs::G1Projective::generator() * x).to_affine();
        let h_bases = vec![p; (1 << log) - 1];
        let aux: Vec<blstrs::Scalar> = (0..100).map(|_| blstrs::Scalar::random(&mut r)).collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let split = cuzk_msm_cpu::prep_msm(&[], None, &aux, None, &pool).unwrap();
        let q_bases = vec![p; aux.len()];
        let q = || SplitMsm {
            bases: &q_bases[..],
            split: &split,
        };
        let job = || PartitionJobRef {
            abc: AbcRef {
                a: &abc[0],
                b: &abc[1],
                c: &abc[2],
            },
            h_bases: &h_bases,
            l: q(),
            a: q(),
            b_g1: q(),
            b_g2: None,
        };
        for bases in [
            BasePlacement::Auto,
            BasePlacement::Streamed {
                chunk_bases: 1 << 22,
            },
        ] {
            let backend = match first.take() {
                Some(b) => b,
                None => open(bases).expect("the device was there a moment ago"),
            };
            backend.fail_after_upload(true);
            for staged in [false, true] {
                let guard = if staged {
                    Some(backend.stage(job().abc).expect("staging a, b, c"))
                } else {
                    None
                };
                let err = backend
                    .prove_partition_ref(job())
                    .expect_err("the injected failure");
                assert!(err.to_string().contains("injected failure"), "{err}");
                let (in_flight, done) = backend
                    .upload_state_after_fault()
                    .expect("the failure was injected")
                    .expect("querying the upload's event");
                println!(
                    "{bases:?}, staged: {staged}: upload in flight at the failure: \
                     {in_flight}, complete at the return: {done}"
                );
                if !in_flight {
                    let _ = writeln!(
                        std::io::stderr(),
                        "warning: the upload had finished before the injected failure; \
                         this case proved nothing"
                    );
                }
                assert!(
                    done,
                    "{bases:?}, staged: {staged}: the call returned while the a, b, c \
                     upload was still reading host memory"
                );
                drop(guard);
            }
            // The device is still usable: the same job without the fault.
            backend.fail_after_upload(false);
            backend
                .prove_partition_ref(job())
                .expect("the same partition without the injected failure");
        }
    }

    #[test]
    fn a_slice_that_holds_other_points_has_another_key() {
        use group::{prime::PrimeCurveAffine, Curve};
        let g = G1Affine::generator();
        let mut v: Vec<G1Affine> = (1..=20u64)
            .map(|k| (g * blstrs::Scalar::from(k)).to_affine())
            .collect();
        let before = key::<G1>(&v);
        assert_eq!(before, key::<G1>(&v), "the same points, the same key");
        let last = v[19];
        v[19] = g;
        let after = key::<G1>(&v);
        assert!(after.same_slice(&before));
        assert_ne!(after, before, "the last point changed in place");
        v[19] = last;
        assert_eq!(key::<G1>(&v), before);
        // The limit of a sample: of 20 points, 0, 2, 5, 8, 10, 13, 16 and 19 are
        // read; a change to point 1 alone goes unseen (hence evict_bases).
        v[1] = g;
        assert_eq!(key::<G1>(&v), before);
        assert_eq!(key::<G1>(&[]).len, 0);
    }

    #[test]
    fn chunks_cover_every_point_once_in_multiples_of_64() {
        for (n, chunk) in [
            (0, 960),
            (1, 960),
            (960, 960),
            (961, 1000),
            (5000, 1000),
            (100, 1),
        ] {
            let c: Vec<_> = chunks(n, chunk).collect();
            let mut next = 0;
            for &(lo, hi) in &c {
                assert_eq!(lo, next);
                assert!(lo.is_multiple_of(64) && hi > lo && hi - lo <= (chunk / 64 * 64).max(64));
                next = hi;
            }
            assert_eq!(next, n, "n = {n}, chunk = {chunk}: {c:?}");
        }
    }

    #[test]
    fn the_stream_chunk_fits_two_in_flight_or_says_none() {
        // Too little room for two of the smallest chunks.
        assert_eq!(
            stream_chunk(
                2 * MIN_STREAM_CHUNK as u64 * STREAM_BYTES_PER_POINT - 1,
                None
            ),
            None
        );
        // Room for two: the chunk takes half, rounded to 64.
        let left = 1 << 30;
        let c = stream_chunk(left, None).unwrap();
        assert!(c.is_multiple_of(64) && 2 * c as u64 * STREAM_BYTES_PER_POINT <= left);
        assert!(c > (left / 2 / STREAM_BYTES_PER_POINT) as usize - 64);
        // Unforced chunks stop at MAX_AUTO_STREAM_CHUNK (pinned host memory).
        let left = 64 << 30;
        assert_eq!(stream_chunk(left, None), Some(MAX_AUTO_STREAM_CHUNK));
        assert_eq!(stream_chunk(left, Some(1 << 24)), Some(1 << 24));
        // A forced chunk is honoured below what fits, rounded down to 64.
        assert_eq!(stream_chunk(left, Some(1000)), Some(960));
        assert_eq!(stream_chunk(left, Some(10)), Some(64));
    }
}
