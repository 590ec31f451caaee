//! [`CudaBackend`]: the [`GpuBackend`] implementation over one CUDA device.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use blstrs::{G1Affine, G2Affine};
use cudarc::driver::{CudaContext, CudaSlice};
use cuzk_gpu_backend::{
    AbcEval, AbcRef, BackendError, Capabilities, DeviceInfo, GpuBackend, PartitionJob,
    PartitionJobRef, PartitionResult, R1csRef, SplitMsm, SplitRef, Staged, WitnessJobRef,
};
use group::Group;

use crate::config::CudaConfig;
use crate::error::{Ctx, CudaError};
use crate::footprint::{self, StreamEstimate};
use crate::gpu::{scalars_as_bytes, Affine2Repr, AffineRepr, DeviceCurve, FrRepr, Gpu, G1, G2};
use crate::msm::{self, MsmPlan, PendingSum, ScalarFormat};
use crate::ntt::{AbcUpload, Ntt, MAX_LOG_DOMAIN};
use crate::profile::{HostMarks, Phases};
use crate::raw::HostRegistration;
use crate::spmv::{self, DeviceR1cs, R1csKey, WitnessUpload};
use crate::streamed::{BaseStream, ChunkTerms, Stager, StreamStats, TERM_BYTES_PER_POINT};
use crate::Tuning;

mod copies;
#[cfg(any(test, feature = "fault-injection"))]
mod faults;
mod gate;
mod prove;
mod queries;
mod r1cs;
mod split_staging;
#[cfg(test)]
mod tests;
mod witness_copy;

#[cfg(any(test, feature = "fault-injection"))]
pub use faults::FaultInjection;
use prove::{AbcSource, Queries};
use queries::{
    ones_msm, query, streamed_dense, tail_msm, upload_ones, upload_tail, MIN_STREAM_CHUNK,
};

/// Where a partition's base vectors (the parameter queries) live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BasePlacement {
    /// Resident when they fit (uploaded once, kept); when a partition's sets do not
    /// fit next to its working memory, the ones not already resident are streamed
    /// from host memory in chunks of at most 2^23 points, one MSM per chunk; of at
    /// most a smaller power of two where the partition fits only with the smaller
    /// MSM scratch of smaller chunks (`footprint::auto_chunk`: a 16 GB card).
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
/// through two page-locked staging buffers the backend keeps (`crate::streamed`):
/// the host copy of one chunk, the DMA of the next and the MSM of the one before
/// overlap.
///
/// **Compiled shapes stay on the device too.** `prove_partition_witness` evaluates
/// `a, b, c` here (`AbcEval::Device`, `crate::spmv`) from the partition's witness
/// and a device copy of its R1CS's matrices, uploaded the first time the shape is
/// seen (after `R1csRef::validate`) and kept, keyed by where the host matrices live
/// and their shape (`R1csKey`), so a shape freed and another compiled at its
/// address is uploaded anew. The copies count with the bases against the device
/// budget: a new shape that does not fit evicts the other shapes' copies first,
/// then the base sets (which the partition then streams where they no longer fit);
/// a shape that does not fit alone with a partition is a device error.
///
/// One partition at a time runs on the device (an internal mutex); the scheduler's
/// GPU lock decides who calls.
#[derive(Debug)]
pub struct CudaBackend {
    inner: Mutex<Inner>,
    /// A partition's launches before another's host memory work (backend/gate.rs).
    gate: Arc<gate::Gate>,
    /// Witnesses staged by copy (`witness_staging = "copy"`) and their buffers.
    copies: Arc<witness_copy::WitnessCopies>,
    /// Split data staged before the GPU lock (`stage_splits`) and their buffers.
    split_copies: Arc<split_staging::SplitCopies>,
    /// The device context, outside the mutex: page-locking a partition's a, b, c
    /// needs it and is done before the device is taken.
    ctx: Arc<CudaContext>,
    caps: Capabilities,
    /// The NTT kernel the backend was configured with (its memory need).
    ntt_kernel: crate::ntt::NttKernel,
    /// What it was opened with (a sibling is opened the same way).
    config: CudaConfig,
    /// This instance's MSM launch parameters and profiler (from `config`), handed
    /// to every MSM it enqueues: another backend in the process has its own.
    tuning: Tuning,
    /// Failures the error-path tests inject (test builds and the `fault-injection`
    /// feature only).
    #[cfg(any(test, feature = "fault-injection"))]
    faults: FaultInjection,
}

#[derive(Debug)]
struct Inner {
    gpu: Gpu,
    ntt: Ntt,
    bases: HashMap<BaseKey, CudaSlice<AffineRepr>>,
    /// Resident G2 bases (b_g2), keyed the same way; 192 bytes a point.
    bases_g2: HashMap<BaseKey, CudaSlice<Affine2Repr>>,
    /// Resident compiled shapes (CSR matrices and coefficients) for
    /// `prove_partition_witness`, keyed by where their host matrices live and their
    /// shape ([`R1csKey`]); counted with the bases in the memory planning.
    r1cs: HashMap<R1csKey, DeviceR1cs>,
    /// Bytes of device memory this backend may plan with.
    budget: u64,
    placement: BasePlacement,
    /// Pinned staging buffers of streamed bases, kept across partitions.
    stager: Stager,
    /// The pinned buffer a partition's split data go up through
    /// (`split_upload = "pinned"`), kept across partitions.
    splits: split_staging::SplitStaging,
    /// Streamed parameter sets page-locked in place (`stream_staging =
    /// "register"`), keyed like the resident ones; kept until the set is freed
    /// (`forget_bases`), found stale, or made resident.
    registered: HashMap<BaseKey, HostRegistration>,
    /// Streamed sets the driver refused to page-lock: copied through the staging
    /// buffers without asking (and warning) again each partition; forgotten with
    /// the set.
    refused: std::collections::HashSet<BaseKey>,
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
        config.validate()?;
        let gpu = Gpu::new(config.device, &config.kernel_cache(), config.host_wait)?;
        let ntt = Ntt::new(&gpu, config.ntt_kernel)?;
        gpu.sync()?;
        tracing::info!(
            "cuda backend on {}: {}",
            gpu.name,
            config
                .to_params()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let budget = config.device_budget(gpu.total_memory, gpu.free_memory_at_start);
        let caps = Capabilities {
            name: "cuda".to_owned(),
            max_log_domain: MAX_LOG_DOMAIN,
            g2: config.g2,
            g2_preferred: false,
            devices: vec![DeviceInfo {
                name: gpu.name.clone(),
                total_memory: gpu.total_memory,
                free_memory: gpu.free_memory_at_start,
            }],
        };
        Ok(Self {
            ctx: gpu.ctx.clone(),
            gate: Arc::default(),
            copies: Arc::new(witness_copy::WitnessCopies::new(config.copy_threads)),
            split_copies: Arc::new(split_staging::SplitCopies::new(config.copy_threads)),
            inner: Mutex::new(Inner {
                gpu,
                ntt,
                bases: HashMap::new(),
                bases_g2: HashMap::new(),
                r1cs: HashMap::new(),
                budget,
                placement: config.bases(),
                stager: Stager::new(config.copy_threads),
                splits: split_staging::SplitStaging::new(config.copy_threads),
                registered: HashMap::new(),
                refused: Default::default(),
            }),
            caps,
            ntt_kernel: config.ntt_kernel,
            tuning: Tuning::from_config(&config),
            config,
            #[cfg(any(test, feature = "fault-injection"))]
            faults: FaultInjection::default(),
        })
    }

    /// A second backend on the same device (its own streams, buffers, resident
    /// bases, and [`Tuning`]: the same settings, its own profiler and reports),
    /// for the engine's critical lane. The device memory this one
    /// plans with is split: the sibling gets an eighth (a 32 GiB WinningPoSt needs
    /// well under 1 GiB; an eighth of an H200 is ~17 GiB) and this one keeps the
    /// rest, so neither plans with memory the other may be using.
    pub fn sibling(&self) -> Result<CudaBackend, CudaError> {
        let sibling = CudaBackend::new(self.config.clone())?;
        let mut inner = self.lock();
        let share = inner.budget / 8;
        inner.budget -= share;
        sibling.lock().budget = share;
        tracing::info!(
            "cuda backend: a second instance on the device for critical work plans with {:.1} GiB, this one with {:.1} GiB",
            share as f64 / (1u64 << 30) as f64,
            inner.budget as f64 / (1u64 << 30) as f64
        );
        Ok(sibling)
    }

    /// This backend's MSM launch parameters and profiler (its [`crate::Tuning`]):
    /// [`crate::profile::Profiler::take`] on `tuning().profiler` reads the
    /// profile reports of this instance only.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// Bytes of device memory this backend plans with (see [`CudaBackend::sibling`]).
    pub fn device_budget(&self) -> u64 {
        self.lock().budget
    }

    /// Plans with `bytes` of device memory from the next partition on, if less
    /// than now (the device checks' tight budgets: partial residency and the
    /// two-buffer H on a small shape).
    pub fn limit_device_budget(&self, bytes: u64) {
        let mut inner = self.lock();
        inner.budget = inner.budget.min(bytes);
    }

    /// Where `job`'s bases would live and how it would run within `budget` device
    /// bytes ([`footprint::place`], as `prove_partition_ref` decides it); `Err`
    /// the least it needs.
    pub fn placement(
        &self,
        job: &PartitionJobRef<'_>,
        budget: u64,
    ) -> Result<footprint::Placement, u64> {
        let placement = self.lock().placement;
        self.place(budget, placement, job.abc.len(), &Queries::of(job), 0, 0)
    }

    /// Drops every cached base vector (device memory is returned at once to the
    /// stream-ordered pool).
    pub fn evict_bases(&self) {
        let mut inner = self.lock();
        inner.bases.clear();
        inner.bases_g2.clear();
        inner.unregister(|_| true);
    }

    /// Bytes of bases currently resident.
    pub fn cached_base_bytes(&self) -> u64 {
        self.lock().base_bytes()
    }

    /// Drops every resident compiled shape (`prove_partition_witness` uploads a
    /// shape again when it next sees it).
    pub fn evict_r1cs(&self) {
        self.lock().r1cs.clear();
    }

    /// The compiled shapes resident now: their keys and device bytes.
    pub fn resident_r1cs(&self) -> Vec<(R1csKey, u64)> {
        let inner = self.lock();
        inner
            .r1cs
            .iter()
            .map(|(k, r)| (*k, r.device_bytes()))
            .collect()
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
    pub fn working_bytes(&self, job: &PartitionJobRef<'_>) -> u64 {
        self.working_bytes_for(job.abc.len(), &Queries::of(job), None)
    }

    /// [`Self::working_bytes`] for `n` constraints and the job's queries, with every
    /// MSM over whole queries (`stream` `None`: the bases resident), or with the
    /// streamed sets' MSMs per chunk.
    fn working_bytes_for(
        &self,
        n: usize,
        job: &Queries<'_>,
        stream: Option<StreamEstimate>,
    ) -> u64 {
        footprint::working_bytes(self.ntt_kernel, &self.tuning.msm, &job.counts(n), stream)
    }
}

impl Inner {
    /// Device bytes kept across partitions: resident bases and compiled shapes.
    fn cached_bytes(&self) -> u64 {
        self.base_bytes()
            + self
                .r1cs
                .values()
                .map(DeviceR1cs::device_bytes)
                .sum::<u64>()
    }

    fn base_bytes(&self) -> u64 {
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

    /// Makes the job's base vectors (G1 `sets`: H, L, A, B_G1; G2 `sets_g2`: B_G2
    /// or none) that `placement` keeps resident (uploading those missing), drops
    /// the job's others (they stream), and returns the chunk size (in points) the
    /// streamed ones go in.
    ///
    /// The compiled shape `keep` (the job's own, for a partition proven from its
    /// witness) stays resident; where the placement does not fit beside what else
    /// is cached, the other shapes' device copies go first, then the sets this job
    /// does not use.
    fn prepare_bases(
        &mut self,
        sets: &[&[G1Affine]],
        sets_g2: &[&[G2Affine]],
        placement: &footprint::Placement,
        keep: Option<&R1csKey>,
    ) -> Result<usize, BackendError> {
        let wanted: Vec<BaseKey> = sets.iter().map(|s| key::<G1>(s)).collect();
        let wanted_g2: Vec<BaseKey> = sets_g2.iter().map(|s| key::<G2>(s)).collect();
        // A cached copy of a slice that now holds other points is garbage.
        let stale = |k: &BaseKey, want: &[BaseKey]| want.iter().any(|w| w.same_slice(k) && w != k);
        self.bases.retain(|k, _| !stale(k, &wanted));
        self.bases_g2.retain(|k, _| !stale(k, &wanted_g2));
        // The job's sets the placement streams go (a set kept for a partition
        // that had more room).
        let keep_g1: Vec<BaseKey> = wanted
            .iter()
            .zip(placement.resident)
            .filter(|(_, r)| *r)
            .map(|(k, _)| *k)
            .collect();
        let keep_g2: Vec<BaseKey> = wanted_g2
            .iter()
            .filter(|_| placement.resident[4])
            .copied()
            .collect();
        self.bases
            .retain(|k, _| !wanted.contains(k) || keep_g1.contains(k));
        self.bases_g2
            .retain(|k, _| !wanted_g2.contains(k) || keep_g2.contains(k));
        // Everything cached but the job's own sets and shape, beside the placement.
        let own: u64 = keep_g1
            .iter()
            .filter_map(|k| self.bases.get(k))
            .map(|b| b.len() as u64 * G1::AFFINE_BYTES)
            .sum::<u64>()
            + keep_g2
                .iter()
                .filter_map(|k| self.bases_g2.get(k))
                .map(|b| b.len() as u64 * G2::AFFINE_BYTES)
                .sum::<u64>()
            + keep
                .and_then(|k| self.r1cs.get(k))
                .map_or(0, DeviceR1cs::device_bytes);
        let fits = |inner: &Inner| inner.cached_bytes() - own + placement.need <= inner.budget;
        if !fits(self) {
            self.r1cs.retain(|k, _| Some(k) == keep);
        }
        if !fits(self) {
            self.bases.retain(|k, _| wanted.contains(k));
            self.bases_g2.retain(|k, _| wanted_g2.contains(k));
        }
        for ((s, k), resident) in sets.iter().zip(&wanted).zip(placement.resident) {
            if resident && !self.bases.contains_key(k) {
                let buf = self
                    .gpu
                    .upload::<AffineRepr>(G1::host_as_bytes(s))
                    .map_err(dev)?;
                self.bases.insert(*k, buf);
            }
        }
        for (s, k) in sets_g2.iter().zip(&wanted_g2) {
            if placement.resident[4] && !self.bases_g2.contains_key(k) {
                let buf = self
                    .gpu
                    .upload::<Affine2Repr>(G2::host_as_bytes(s))
                    .map_err(dev)?;
                self.bases_g2.insert(*k, buf);
            }
        }
        Ok(placement.chunk.unwrap_or(MIN_STREAM_CHUNK))
    }

    /// Drops the registrations `gone` says go, after the DMAs that may read them.
    fn unregister(&mut self, gone: impl Fn(&BaseKey) -> bool) {
        self.refused.retain(|k| !gone(k));
        if self.registered.keys().any(&gone) {
            self.gpu.ctx.record_err(self.gpu.copy.synchronize());
            self.registered.retain(|k, _| !gone(k));
        }
    }

    /// Page-locks in place the sets `placement` streams (`stream_staging =
    /// "register"`: once per set, kept), and returns the host ranges the
    /// partition's streams may DMA from directly. A set that cannot be
    /// registered (the driver refuses) streams through the staging copies.
    ///
    /// # Safety
    ///
    /// The sets must stay allocated and unmoved until their registrations are
    /// dropped: the engine calls `forget_bases` before it frees a parameter set
    /// (a slice found holding other points is unregistered here too).
    unsafe fn register_streamed(
        &mut self,
        sets: &[&[G1Affine]],
        sets_g2: &[&[G2Affine]],
        placement: &footprint::Placement,
    ) -> Vec<(usize, usize)> {
        let streamed: Vec<(BaseKey, &[u8])> = sets
            .iter()
            .zip(placement.resident)
            .filter(|(_, r)| !r)
            .map(|(s, _)| (key::<G1>(s), G1::host_as_bytes(s)))
            .chain(
                sets_g2
                    .iter()
                    .filter(|_| !placement.resident[4])
                    .map(|s| (key::<G2>(s), G2::host_as_bytes(s))),
            )
            .filter(|(_, b)| !b.is_empty())
            .collect();
        let stale = |k: &BaseKey| streamed.iter().any(|(w, _)| w.same_slice(k) && w != k);
        self.unregister(stale);
        let mut ranges = Vec::new();
        for (k, bytes) in streamed {
            if !self.registered.contains_key(&k) && !self.refused.contains(&k) {
                let t = std::time::Instant::now();
                // SAFETY: the caller's contract.
                match unsafe { HostRegistration::new(&self.gpu.ctx, bytes) } {
                    Ok(Some(r)) => {
                        tracing::info!(
                            "cuda backend: {:.1} GiB of streamed bases page-locked in place in {:.1?}",
                            bytes.len() as f64 / (1u64 << 30) as f64,
                            t.elapsed()
                        );
                        self.registered.insert(k, r);
                    }
                    // Registered by someone else, who may let go: not ours to DMA
                    // from without a copy.
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(
                            "cuda backend: streamed bases not page-locked ({e}); copying them through the staging buffers"
                        );
                        self.refused.insert(k);
                    }
                }
            }
            if self.registered.contains_key(&k) {
                ranges.push((bytes.as_ptr() as usize, bytes.len()));
            }
        }
        ranges
    }
}

#[cfg(not(any(test, feature = "fault-injection")))]
impl CudaBackend {
    /// Where the tests inject a failure right after the a, b, c upload: nothing in
    /// this build (backend/faults.rs).
    #[inline(always)]
    fn fault_after_upload(&self, _gpu: &Gpu) -> Result<(), CudaError> {
        Ok(())
    }
}

impl CudaBackend {
    /// Page-locks those of `vectors` (`a, b, c`, or a witness's input and aux) long
    /// enough to be worth it (`PIN_MIN_LEN`); ranges registered already (by a
    /// `stage` guard) are skipped and not owned.
    ///
    /// # Safety
    ///
    /// `vectors` must stay allocated and unmoved until every returned registration
    /// is dropped.
    unsafe fn pin(&self, vectors: &[&[Scalar]]) -> Result<Vec<HostRegistration>, CudaError> {
        let mut pinned = Vec::new();
        for &v in vectors {
            if v.len() >= crate::ntt::PIN_MIN_LEN {
                // SAFETY: the caller's contract.
                if let Some(r) = unsafe { HostRegistration::new(&self.ctx, scalars_as_bytes(v)) }? {
                    pinned.push(r);
                }
            }
        }
        Ok(pinned)
    }

    /// The guard of a `stage` call: unregisters `pinned` (`bytes` in all) when
    /// dropped.
    fn staged(&self, pinned: Vec<HostRegistration>, bytes: usize) -> Staged {
        if pinned.is_empty() {
            return Staged::none();
        }
        let ctx = Arc::clone(&self.ctx);
        let gate = Arc::clone(&self.gate);
        Staged::new(move || {
            // The guard may be dropped on another thread than the one that
            // registered: make the context current there for the unregister calls.
            let _ = ctx.bind_to_thread();
            // After the next partition's launches (backend/gate.rs), unless small.
            gate.memory_of(bytes, || drop(pinned));
        })
    }
}

impl GpuBackend for CudaBackend {
    fn capabilities(&self) -> Capabilities {
        self.caps.clone()
    }

    /// [`CudaBackend::sibling`].
    fn open_sibling(&self) -> Result<Option<Arc<dyn GpuBackend>>, BackendError> {
        Ok(Some(Arc::new(self.sibling().map_err(dev)?)))
    }

    /// The driver's device count (`crate::raw::device_count`).
    fn device_count(&self) -> u32 {
        crate::raw::device_count()
    }

    /// Page-locked host memory allocated for this backend's device: the streamed
    /// bases' staging buffers (`crate::raw::pinned_bytes`; counted per device
    /// ordinal, so two backends opened on one device each report both's). The
    /// `a, b, c` ranges registered by [`GpuBackend::stage`] or a running partition
    /// are the caller's memory and are counted apart
    /// (`crate::raw::registered_bytes`).
    fn pinned_host_bytes(&self) -> u64 {
        crate::raw::pinned_bytes(self.ctx.ordinal())
    }

    /// Drops the resident copies of the bases whose host slices lie inside
    /// `host` (a parameter set being freed), at once rather than when a later
    /// partition would find them stale or need the room; returns their device
    /// bytes.
    fn forget_bases(&self, host: &[std::ops::Range<usize>]) -> u64 {
        let inside = |k: &BaseKey, point: usize| {
            let end = k.addr.saturating_add(k.len.saturating_mul(point));
            host.iter().any(|r| r.start <= k.addr && end <= r.end)
        };
        let mut inner = self.lock();
        // Page-locked streamed sets inside the freed memory let go first (after
        // the DMAs that read them).
        inner.unregister(|k| {
            inside(k, std::mem::size_of::<G1Affine>()) || inside(k, std::mem::size_of::<G2Affine>())
        });
        let mut freed = 0;
        inner.bases.retain(|k, b| {
            let gone = inside(k, std::mem::size_of::<G1Affine>());
            if gone {
                freed += b.len() as u64 * G1::AFFINE_BYTES;
            }
            !gone
        });
        inner.bases_g2.retain(|k, b| {
            let gone = inside(k, std::mem::size_of::<G2Affine>());
            if gone {
                freed += b.len() as u64 * G2::AFFINE_BYTES;
            }
            !gone
        });
        freed
    }

    /// Page-locks `a, b, c` (the same `PIN_MIN_LEN` rule as `prove_partition_ref`),
    /// so the pinning runs before the caller's GPU lock; `prove_partition_ref` then
    /// finds the ranges registered and skips them. The guard unregisters them.
    fn stage(&self, abc: AbcRef<'_>) -> Result<Staged, BackendError> {
        abc.check_shape()?;
        let bytes = (abc.a.len() + abc.b.len() + abc.c.len()) * std::mem::size_of::<Scalar>();
        // SAFETY: `GpuBackend::stage`'s contract: the caller keeps `a, b, c`
        // allocated and unmoved until it drops the returned guard, which owns the
        // registrations and is the only thing that unregisters them.
        let pinned = self
            .gate
            .memory_of(bytes, || unsafe { self.pin(&[abc.a, abc.b, abc.c]) })
            .map_err(dev)?;
        Ok(self.staged(pinned, bytes))
    }

    fn abc_eval(&self) -> AbcEval {
        AbcEval::Device
    }

    /// Stages the witness as `witness_staging` says: page-locks it in place (`aux`,
    /// and `input` when long enough) as [`GpuBackend::stage`] does `a, b, c`,
    /// counted as registered (the caller's memory) and undone by the guard; or
    /// copies `[input, aux]` into a page-locked buffer the backend keeps, which the
    /// guard hands back (`backend/witness_copy.rs`). A witness shorter than
    /// `PIN_MIN_LEN` is not staged.
    fn stage_witness(&self, input: &[Scalar], aux: &[Scalar]) -> Result<Staged, BackendError> {
        if self.config.witness_staging == crate::WitnessStaging::Copy {
            if aux.len() < crate::ntt::PIN_MIN_LEN {
                return Ok(Staged::none());
            }
            // A new buffer is the only driver call: behind the gate unless small,
            // like page-locking (backend/gate.rs); the copy itself is not.
            let ctx = &self.ctx;
            let token = self
                .copies
                .stage(input, aux, |bytes| {
                    self.gate
                        .memory_of(bytes, || crate::raw::PinnedBuffer::new(ctx, bytes))
                })
                .map_err(dev)?;
            let copies = Arc::clone(&self.copies);
            return Ok(Staged::new(move || copies.release(token)));
        }
        // SAFETY: `GpuBackend::stage_witness`'s contract, as in `stage`: the caller
        // keeps `input, aux` allocated and unmoved until it drops the guard, which
        // owns the registrations.
        // Not while another partition is being launched (backend/gate.rs), unless
        // small.
        let bytes = (input.len() + aux.len()) * std::mem::size_of::<Scalar>();
        let pinned = self
            .gate
            .memory_of(bytes, || unsafe { self.pin(&[input, aux]) })
            .map_err(dev)?;
        Ok(self.staged(pinned, bytes))
    }

    /// With `split_upload = "pinned"`, copies the split data into a page-locked
    /// buffer the backend keeps (`backend/split_staging.rs`), which the backend
    /// call that takes them in this order uploads from; the guard hands the
    /// buffer back. Data too large to stage this way (a Poseidon witness's tails)
    /// are not staged.
    fn stage_splits(&self, splits: &[SplitRef<'_>]) -> Result<Staged, BackendError> {
        if self.config.split_upload != crate::SplitUpload::Pinned {
            return Ok(Staged::none());
        }
        let ctx = &self.ctx;
        // A new buffer is the only driver call: behind the gate unless small
        // (backend/gate.rs).
        let token = self
            .split_copies
            .stage(splits, |bytes| {
                self.gate
                    .memory_of(bytes, || crate::raw::PinnedBuffer::new(ctx, bytes))
            })
            .map_err(dev)?;
        Ok(match token {
            Some(token) => {
                let copies = Arc::clone(&self.split_copies);
                Staged::new(move || copies.release(token))
            }
            None => Staged::none(),
        })
    }

    /// Evaluates `a, b, c` on the device from the witness and the resident copy of
    /// the compiled shape (uploaded, after [`R1csRef::validate`], the first time the
    /// shape is seen), then proves as [`GpuBackend::prove_partition_ref`]. A
    /// malformed shape or a witness of another shape is [`BackendError::Rejected`],
    /// before anything is launched.
    fn prove_partition_witness(
        &self,
        job: WitnessJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        let r1cs = job.r1cs;
        for (what, compiled, actual) in [
            ("inputs", r1cs.num_inputs, job.input.len()),
            ("aux variables", r1cs.num_aux, job.aux.len()),
        ] {
            if compiled != actual {
                return Err(BackendError::Rejected(format!(
                    "the witness has {actual} {what} but the R1CS was compiled for {compiled}"
                )));
            }
        }
        job.check_shapes()?;
        self.prove(
            AbcSource::Witness {
                r1cs,
                input: job.input,
                aux: job.aux,
            },
            Queries::of_witness(&job),
        )
    }

    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        // The device only reads a, b, c: the borrowed path does all the work, and the
        // evaluations go when it returns.
        self.prove_partition_ref(job.as_ref())
    }

    fn prove_partition_ref(
        &self,
        job: PartitionJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        job.check_shapes()?;
        self.prove(AbcSource::Host(job.abc), Queries::of(&job))
    }
}
