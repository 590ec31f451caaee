//! A backend plugin as a [`GpuBackend`].

use std::collections::BTreeMap;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_gpu_backend::{
    BackendError, Capabilities, DeviceInfo, GpuBackend, PartitionJob, PartitionResult, SplitMsm,
};
use cuzk_plugin_api::abi_stable::std_types::{RResult, RSlice};
use cuzk_plugin_api::{
    AbcC, BackendMod_Ref, BaseQuery, BasesC, Instance, PartitionJobC, Repr, SplitMsmC, CURVE,
};

use crate::load::Library;
use crate::PluginError;

/// What a run needs from its backend; checked at load against the plugin's
/// capability handshake.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendNeeds {
    /// The largest NTT domain the run will use (log2), if known.
    pub log_domain: Option<u32>,
    /// Whether the run will hand `b_g2` to the backend.
    pub g2: bool,
    /// Whether the run will keep bases resident (`upload_bases`).
    pub resident_bases: bool,
}

/// A loaded backend plugin instance.
///
/// The call costs one indirect call and a few dozen bytes of slice descriptors: the
/// bases and split scalars are passed as borrowed slices and `a, b, c` move over
/// without a copy (their memory stays the host's and is freed by the host's
/// allocator when the backend drops them).
pub struct PluginBackend {
    name: String,
    module: BackendMod_Ref,
    instance: Option<Instance>,
    caps: Capabilities,
    resident_bases: bool,
}

impl PluginBackend {
    pub(crate) fn instantiate(
        lib: Library,
        params: &BTreeMap<String, String>,
    ) -> Result<Self, PluginError> {
        let name = lib.name();
        let Some(module) = lib.root.backend().into_option() else {
            return Err(PluginError::Failed {
                plugin: name,
                call: "load",
                code: "missing module",
                message: "the plugin says it is a backend but has no backend module".into(),
            });
        };
        let pairs = lib.check_params(params)?;
        let instance = match (module.instantiate())(RSlice::from_slice(&pairs)) {
            RResult::ROk(i) => i,
            RResult::RErr(e) => return Err(crate::rejected("backend", &name, e)),
        };
        let mut this = Self {
            name,
            module,
            instance: Some(instance),
            caps: Capabilities {
                name: String::new(),
                max_log_domain: 0,
                g2: false,
                devices: Vec::new(),
            },
            resident_bases: false,
        };
        let caps = match (module.capabilities())(this.instance()) {
            RResult::ROk(c) => c,
            RResult::RErr(e) => return Err(PluginError::from_abi(&this.name, "capabilities", e)),
        };
        if caps.curve.as_str() != CURVE {
            return Err(PluginError::MissingCapability {
                plugin: this.name.clone(),
                missing: format!("it computes over {}, not {CURVE}", caps.curve),
            });
        }
        this.resident_bases = caps.resident_bases;
        this.caps = Capabilities {
            name: caps.name.into_string(),
            max_log_domain: caps.max_log_domain,
            g2: caps.g2,
            devices: caps
                .devices
                .into_iter()
                .map(|d| DeviceInfo {
                    name: d.name.into_string(),
                    total_memory: d.total_memory,
                    free_memory: d.free_memory,
                })
                .collect(),
        };
        Ok(this)
    }

    fn instance(&self) -> &Instance {
        // Only `Drop` takes it.
        self.instance.as_ref().expect("instance present until drop")
    }

    /// The plugin's name (`cpu`).
    pub fn plugin_name(&self) -> &str {
        &self.name
    }

    /// Whether `upload_bases` keeps bases on the device.
    pub fn resident_bases(&self) -> bool {
        self.resident_bases
    }

    /// Refuses a plugin that lacks something the run needs.
    pub fn check_needs(&self, needs: &BackendNeeds) -> Result<(), PluginError> {
        let missing = |m: String| {
            Err(PluginError::MissingCapability {
                plugin: self.name.clone(),
                missing: m,
            })
        };
        if let Some(log) = needs.log_domain {
            if log > self.caps.max_log_domain {
                return missing(format!(
                    "the run needs an NTT domain of 2^{log}, the backend supports up to 2^{}",
                    self.caps.max_log_domain
                ));
            }
        }
        if needs.g2 && !self.caps.g2 {
            return missing(
                "the run puts the G2 MSM on the backend, which does not offer it".into(),
            );
        }
        if needs.resident_bases && !self.resident_bases {
            return missing(
                "the run keeps bases resident, which the backend does not offer".into(),
            );
        }
        Ok(())
    }

    /// Makes one G1 query's bases resident under parameter-set `id`.
    pub fn upload_bases(
        &self,
        id: u64,
        query: BaseQuery,
        bases: &[G1Affine],
    ) -> Result<(), PluginError> {
        let b = BasesC {
            g1: G1Affine::slice_to_repr(bases).into(),
            g2: RSlice::EMPTY,
        };
        self.call_unit(
            "upload_bases",
            (self.module.upload_bases())(self.instance(), id, query, b),
        )
    }

    /// Makes the B_G2 query's bases resident under parameter-set `id`.
    pub fn upload_bases_g2(&self, id: u64, bases: &[G2Affine]) -> Result<(), PluginError> {
        let b = BasesC {
            g1: RSlice::EMPTY,
            g2: G2Affine::slice_to_repr(bases).into(),
        };
        let r = (self.module.upload_bases())(self.instance(), id, BaseQuery::B_G2, b);
        self.call_unit("upload_bases", r)
    }

    /// Drops everything resident under `id`.
    pub fn release_bases(&self, id: u64) -> Result<(), PluginError> {
        self.call_unit(
            "release_bases",
            (self.module.release_bases())(self.instance(), id),
        )
    }

    fn call_unit(
        &self,
        call: &'static str,
        r: RResult<(), cuzk_plugin_api::AbiError>,
    ) -> Result<(), PluginError> {
        r.into_result()
            .map_err(|e| PluginError::from_abi(&self.name, call, e))
    }

    /// [`GpuBackend::prove_partition`], telling the backend that the job's bases are
    /// the ones resident under `resident`.
    pub fn prove_partition_resident(
        &self,
        job: PartitionJob<'_>,
        resident: Option<u64>,
    ) -> Result<PartitionResult, BackendError> {
        if job.b_g2.is_some() && !self.caps.g2 {
            return Err(BackendError::Unsupported("the G2 MSM"));
        }
        let PartitionJob {
            abc,
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
        } = job;
        let c_job = PartitionJobC {
            abc: AbcC {
                a: Scalar::vec_to_rvec(abc.a),
                b: Scalar::vec_to_rvec(abc.b),
                c: Scalar::vec_to_rvec(abc.c),
            },
            h_bases: G1Affine::slice_to_repr(h_bases).into(),
            l: split_c(&l),
            a: split_c(&a),
            b_g1: split_c(&b_g1),
            b_g2: b_g2.as_ref().map(split_c).into(),
            resident: resident.into(),
        };
        let r = (self.module.prove_partition())(self.instance(), c_job)
            .into_result()
            .map_err(|e| {
                BackendError::Device(
                    PluginError::from_abi(&self.name, "prove_partition", e).to_string(),
                )
            })?;
        Ok(PartitionResult {
            h: G1Projective::from_repr(r.h),
            l: G1Projective::from_repr(r.l),
            a: G1Projective::from_repr(r.a),
            b_g1: G1Projective::from_repr(r.b_g1),
            b_g2: r.b_g2.into_option().map(G2Projective::from_repr),
        })
    }
}

fn split_c<'a, G: Repr>(m: &SplitMsm<'a, G>) -> SplitMsmC<'a, G::Repr>
where
    G::Repr: cuzk_plugin_api::abi_stable::StableAbi,
{
    let s = m.split;
    SplitMsmC {
        bases: G::slice_to_repr(m.bases).into(),
        num_bases: s.num_bases() as u64,
        ones_words: s.ones().words().into(),
        ones_len: s.ones().len() as u64,
        tail_indices: s.tail_indices().into(),
        tail_scalars: s.tail_scalars().into(),
    }
}

impl GpuBackend for PluginBackend {
    fn capabilities(&self) -> Capabilities {
        self.caps.clone()
    }

    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        self.prove_partition_resident(job, None)
    }
}

impl Drop for PluginBackend {
    fn drop(&mut self) {
        if let Some(i) = self.instance.take() {
            (self.module.destroy())(i);
        }
    }
}

impl std::fmt::Debug for PluginBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginBackend")
            .field("plugin", &self.name)
            .field("capabilities", &self.caps)
            .finish()
    }
}
