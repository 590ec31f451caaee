//! [`CudaBackend`]: the [`GpuBackend`] implementation over one CUDA device.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blstrs::{G1Affine, G2Affine};
use cudarc::driver::{CudaContext, CudaSlice};
use cuzk_gpu_backend::{
    AbcRef, BackendError, Capabilities, DeviceInfo, GpuBackend, PartitionJob, PartitionJobRef,
    PartitionResult, SplitMsm, Staged,
};

use crate::error::CudaError;
use crate::gpu::{scalars_as_bytes, Affine2Repr, AffineRepr, DeviceCurve, FrRepr, Gpu, G1, G2};
use crate::msm::{self, MsmPlan, PendingSum, ScalarFormat};
use crate::ntt::{Ntt, MAX_LOG_DOMAIN};
use crate::profile::Phases;
use crate::raw::HostRegistration;

/// Settings of a [`CudaBackend`].
#[derive(Clone, Debug)]
pub struct CudaConfig {
    /// CUDA device ordinal.
    pub device: usize,
    /// Device bytes left alone (other processes, driver, fragmentation): the backend
    /// plans partitions to fit in the free memory at start minus this.
    pub reserve_bytes: u64,
}

impl Default for CudaConfig {
    fn default() -> Self {
        Self {
            device: 0,
            reserve_bytes: 2 << 30,
        }
    }
}

/// The GPU backend on one CUDA device.
///
/// **Bases stay on the device.** The parameter queries (h, l, a, b_g1, and b_g2
/// when the scheduler hands the G2 MSM to the backend) are uploaded
/// the first time a partition uses them and kept, keyed by the address and length
/// of the slice passed in (`PartitionJob::h_bases`, `SplitMsm::bases`). The caller
/// promises that while this backend lives, one (address, length) always holds the
/// same points, which is true of parameters that stay loaded or memory-mapped for
/// the daemon's lifetime. After unloading a parameter set call
/// [`CudaBackend::evict_bases`]. When a new set does not fit next to the cached ones,
/// the sets this partition does not use are evicted first.
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
}

#[derive(Debug)]
struct Inner {
    gpu: Gpu,
    ntt: Ntt,
    bases: HashMap<(usize, usize), CudaSlice<AffineRepr>>,
    /// Resident G2 bases (b_g2), keyed the same way; 192 bytes a point.
    bases_g2: HashMap<(usize, usize), CudaSlice<Affine2Repr>>,
    /// Bytes of device memory this backend may plan with.
    budget: u64,
}

fn dev(e: CudaError) -> BackendError {
    BackendError::Device(e.to_string())
}

fn key<T>(s: &[T]) -> (usize, usize) {
    (s.as_ptr() as usize, s.len())
}

impl CudaBackend {
    /// Opens the device, compiles the kernels, builds the twiddle tables. Fails with
    /// [`CudaError::NoDevice`] where there is no driver or no device.
    pub fn new(config: CudaConfig) -> Result<Self, CudaError> {
        let gpu = Gpu::new(config.device)?;
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
            }),
            caps,
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
        let split = |m: &cuzk_gpu_backend::SplitScalars, xyzz: u64| {
            let t = m.tail_indices().len();
            MsmPlan::for_size(t).scratch_bytes_for(t, xyzz)
                + t as u64 * 36
                + m.ones().words().len() as u64 * 8
        };
        let tails = [&job.l, &job.a, &job.b_g1]
            .map(|m| split(m.split, G1::XYZZ_BYTES))
            .into_iter()
            .chain(job.b_g2.map(|m| split(m.split, G2::XYZZ_BYTES)))
            .max()
            .unwrap_or(0);
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

    /// Makes sure every base vector of the job (G1 `sets`, G2 `sets_g2`) is resident
    /// and the rest fits.
    fn prepare_bases(
        &mut self,
        sets: &[&[G1Affine]],
        sets_g2: &[&[G2Affine]],
        working: u64,
    ) -> Result<(), BackendError> {
        let wanted: Vec<(usize, usize)> = sets.iter().map(|s| key(s)).collect();
        let wanted_g2: Vec<(usize, usize)> = sets_g2.iter().map(|s| key(s)).collect();
        let missing: u64 = sets
            .iter()
            .filter(|s| !self.bases.contains_key(&key(s)))
            .map(|s| s.len() as u64 * G1::AFFINE_BYTES)
            .sum::<u64>()
            + sets_g2
                .iter()
                .filter(|s| !self.bases_g2.contains_key(&key(s)))
                .map(|s| s.len() as u64 * G2::AFFINE_BYTES)
                .sum::<u64>();
        if self.cached_bytes() + missing + working > self.budget {
            self.bases.retain(|k, _| wanted.contains(k));
            self.bases_g2.retain(|k, _| wanted_g2.contains(k));
        }
        let need = self.cached_bytes() + missing + working;
        if need > self.budget {
            return Err(dev(CudaError::OutOfMemory {
                what: "partition (resident bases + H buffers + MSM scratch)",
                need,
                available: self.budget,
            }));
        }
        for s in sets {
            if !self.bases.contains_key(&key(s)) {
                let buf = self
                    .gpu
                    .upload::<AffineRepr>(G1::host_as_bytes(s))
                    .map_err(dev)?;
                self.bases.insert(key(s), buf);
            }
        }
        for s in sets_g2 {
            if !self.bases_g2.contains_key(&key(s)) {
                let buf = self
                    .gpu
                    .upload::<Affine2Repr>(G2::host_as_bytes(s))
                    .map_err(dev)?;
                self.bases_g2.insert(key(s), buf);
            }
        }
        Ok(())
    }

    /// Ones and tail of a split query whose bases are resident (`bases`).
    fn split_msm<C: DeviceCurve>(
        &self,
        bases: &CudaSlice<C::Affine>,
        m: &SplitMsm<'_, C::HostAffine>,
    ) -> Result<(PendingSum<C>, PendingSum<C>), CudaError> {
        let split = m.split;
        let words = split.ones().words();
        let words_dev = self.gpu.upload::<u64>(u64s_as_bytes(words))?;
        let ones = msm::ones_sum(&self.gpu, bases, &words_dev, words.len(), split.num_bases())?;
        let idx = split.tail_indices();
        let t = idx.len();
        let idx_dev = self.gpu.upload::<u32>(u32s_as_bytes(idx))?;
        let sc_dev = self
            .gpu
            .upload::<FrRepr>(limbs_as_bytes(split.tail_scalars()))?;
        let tail = msm::msm(
            &self.gpu,
            bases,
            &sc_dev,
            t,
            ScalarFormat::Canonical,
            Some(&idx_dev),
            MsmPlan::for_size(t),
        )?;
        Ok((ones, tail))
    }
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
        inner.prepare_bases(&[h_bases, l.bases, a.bases, b_g1.bases], &g2_sets, working)?;
        let inner = &*inner;
        let gpu = &inner.gpu;

        let mut phases = Phases::start(gpu, || format!("partition 2^{log}")).map_err(dev)?;
        let h_coeffs = inner.ntt.compute_h(gpu, abc.a, abc.b, abc.c).map_err(dev)?;
        Phases::mark(&mut phases, gpu, "H (upload + NTTs)").map_err(dev)?;
        // Uploads are done: unpin while the device works.
        drop(pinned);
        let h_pending = msm::msm(
            gpu,
            &inner.bases[&key(h_bases)],
            &h_coeffs,
            want_h,
            ScalarFormat::Montgomery,
            None,
            MsmPlan::for_size(want_h),
        )
        .map_err(dev)?;
        Phases::mark(&mut phases, gpu, "H MSM").map_err(dev)?;
        drop(h_coeffs);
        let g1 = |m: &SplitMsm<'_, G1Affine>| inner.split_msm::<G1>(&inner.bases[&key(m.bases)], m);
        let l_p = g1(&l).map_err(dev)?;
        Phases::mark(&mut phases, gpu, "L").map_err(dev)?;
        let a_p = g1(&a).map_err(dev)?;
        Phases::mark(&mut phases, gpu, "A").map_err(dev)?;
        let b_p = g1(&b_g1).map_err(dev)?;
        Phases::mark(&mut phases, gpu, "B_G1").map_err(dev)?;
        // The B query in G2 (when the scheduler hands it over): the same split MSM
        // over the resident G2 bases, enqueued behind the G1 ones.
        let b2_p = match &b_g2 {
            Some(m) => Some(
                inner
                    .split_msm::<G2>(&inner.bases_g2[&key(m.bases)], m)
                    .map_err(dev)?,
            ),
            None => None,
        };
        if b2_p.is_some() {
            Phases::mark(&mut phases, gpu, "B_G2").map_err(dev)?;
        }

        fn pair<C: DeviceCurve>(
            gpu: &Gpu,
            (ones, tail): (PendingSum<C>, PendingSum<C>),
        ) -> Result<C::Projective, BackendError> {
            Ok(ones.finish(gpu).map_err(dev)? + tail.finish(gpu).map_err(dev)?)
        }
        let h = h_pending.finish(gpu).map_err(dev)?;
        Phases::finish(phases).map_err(dev)?;
        Ok(PartitionResult {
            h,
            l: pair(gpu, l_p)?,
            a: pair(gpu, a_p)?,
            b_g1: pair(gpu, b_p)?,
            b_g2: b2_p.map(|p| pair(gpu, p)).transpose()?,
        })
    }
}
