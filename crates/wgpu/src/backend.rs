//! [`WgpuBackend`]: `cuzk_gpu_backend::GpuBackend` on one wgpu device.
//!
//! One partition is: shapes checked (before any device work, as the CPU backend
//! does), H on the device (`Ntt::compute_h`), then the H, L, A and B_G1 MSMs
//! through the G1 engine over resident bases. B in G2 stays on the engine's CPU
//! stage (`g2: false`): no G2 kernel is written for WGSL, and the CPU's G2 MSM
//! overlaps the backend call anyway.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use blstrs::G1Affine;
use cuzk_gpu_backend::{
    BackendError, Capabilities, DeviceInfo, GpuBackend, PartitionJob, PartitionJobRef,
    PartitionResult, SplitMsm,
};

use crate::context::{Context, WgpuConfig};
use crate::msm_bridge::{Engine, G1MsmEngine};
use crate::ntt::{Ntt, MAX_LOG_DOMAIN};
use crate::WgpuError;

type Resident = <Engine as G1MsmEngine>::Resident;

/// A base vector's host address range: the key of its resident copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct HostKey {
    start: usize,
    len: usize,
}

impl HostKey {
    fn of(bases: &[G1Affine]) -> Self {
        Self {
            start: bases.as_ptr() as usize,
            len: bases.len(),
        }
    }

    fn bytes(&self) -> Range<usize> {
        self.start..self.start + self.len * std::mem::size_of::<G1Affine>()
    }
}

/// The backend on one device: the NTT kernels, the G1 engine, the resident
/// bases, and a host pool for the host's share (gathering `h`; the engine's MSMs
/// until the device MSM is merged).
pub struct WgpuBackend {
    ntt: Ntt,
    msm: Engine,
    resident: Mutex<HashMap<HostKey, Arc<Resident>>>,
    /// One partition's device work at a time: the buffers are planned against the
    /// whole device.
    device_lock: Mutex<()>,
    pool: Arc<rayon::ThreadPool>,
}

impl std::fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuBackend")
            .field("context", self.ntt.context())
            .field("ntt", &self.ntt)
            .finish()
    }
}

impl WgpuBackend {
    /// Opens the configured adapter and compiles the kernels.
    pub fn new(config: &WgpuConfig, pool: Arc<rayon::ThreadPool>) -> Result<Self, WgpuError> {
        let ctx = Arc::new(Context::new(config)?);
        let msm =
            Engine::new(&ctx, Arc::clone(&pool)).map_err(|e| WgpuError::Device(e.to_string()))?;
        Ok(Self {
            ntt: Ntt::new(ctx, config)?,
            msm,
            resident: Mutex::new(HashMap::new()),
            device_lock: Mutex::new(()),
            pool,
        })
    }

    pub fn context(&self) -> &Arc<Context> {
        self.ntt.context()
    }

    pub fn ntt(&self) -> &Ntt {
        &self.ntt
    }

    /// The resident copy of `bases`, uploaded on first use.
    fn resident(&self, bases: &[G1Affine]) -> Result<Arc<Resident>, BackendError> {
        let key = HostKey::of(bases);
        let mut map = self.resident.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = map.get(&key) {
            return Ok(Arc::clone(r));
        }
        let r = Arc::new(self.msm.upload_bases(bases)?);
        map.insert(key, Arc::clone(&r));
        Ok(r)
    }

    fn split_msm(
        &self,
        m: SplitMsm<'_, G1Affine>,
        name: &'static str,
    ) -> Result<blstrs::G1Projective, BackendError> {
        let _span = tracing::info_span!("msm", query = name, backend = "wgpu").entered();
        let resident = self.resident(m.bases)?;
        self.msm.split_msm(m.bases, &resident, m.split)
    }
}

impl GpuBackend for WgpuBackend {
    fn capabilities(&self) -> Capabilities {
        let ctx = self.ntt.context();
        Capabilities {
            name: "wgpu".to_owned(),
            max_log_domain: MAX_LOG_DOMAIN,
            g2: false,
            g2_preferred: false,
            devices: vec![DeviceInfo {
                name: ctx.info.name.clone(),
                total_memory: ctx.memory.total,
                free_memory: ctx.memory.free,
            }],
        }
    }

    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        self.prove_partition_ref(job.as_ref())
    }

    /// `a, b, c` are only read (uploaded), so nothing is copied on the host.
    fn prove_partition_ref(
        &self,
        job: PartitionJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        // Every shape is checked before any device work; G2 is this backend's own
        // refusal.
        job.check_shapes()?;
        let PartitionJobRef {
            abc,
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
        } = job;
        if b_g2.is_some() {
            return Err(BackendError::Unsupported("the B query in G2"));
        }

        let _span = tracing::info_span!("prove_partition", backend = "wgpu").entered();
        let h_scalars = {
            let _device = self
                .device_lock
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.ntt.compute_h(abc, &self.pool)?
        };
        let h = {
            let _span = tracing::info_span!("h_msm", backend = "wgpu").entered();
            let resident = self.resident(h_bases)?;
            self.msm.msm(h_bases, &resident, &h_scalars)?
        };
        drop(h_scalars);
        Ok(PartitionResult {
            h,
            l: self.split_msm(l, "l")?,
            a: self.split_msm(a, "a")?,
            b_g1: self.split_msm(b_g1, "b_g1")?,
            b_g2: None,
        })
    }

    /// The adapters matching this instance's name filter: with `[engine] devices`
    /// unset, one instance is opened per adapter.
    fn device_count(&self) -> u32 {
        self.ntt.context().matching_adapters
    }

    /// Releases the resident bases lying in `host`.
    fn forget_bases(&self, host: &[Range<usize>]) -> u64 {
        let mut map = self.resident.lock().unwrap_or_else(PoisonError::into_inner);
        let gone: Vec<HostKey> = map
            .keys()
            .filter(|k| {
                let b = k.bytes();
                host.iter().any(|r| r.start <= b.start && b.end <= r.end)
            })
            .copied()
            .collect();
        let mut freed = 0;
        for k in gone {
            if let Some(r) = map.remove(&k) {
                // Still lent to a running MSM: freed when that call drops it.
                if let Ok(r) = Arc::try_unwrap(r) {
                    freed += self.msm.release_bases(r);
                }
            }
        }
        freed
    }
}
