//! A backend plugin as a [`GpuBackend`].

use std::collections::BTreeMap;
use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_gpu_backend::{
    AbcRef, BackendError, Capabilities, DeviceInfo, GpuBackend, PartitionJob, PartitionJobRef,
    PartitionResult, SplitMsm, Staged,
};
use cuzk_plugin_api::abi_stable::std_types::{RResult, RSlice};
use cuzk_plugin_api::{
    AbcC, AbcRefC, BackendMod_Ref, BaseQuery, BasesC, ErrorCode, Instance, PartitionJobC,
    PartitionJobRefC, PartitionResultC, Repr, SplitMsmC, CURVE,
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
    /// Shared with the [`Staged`] guards, which call `unstage` on it: the instance
    /// is destroyed when the backend and every guard are gone.
    live: Arc<Live>,
    caps: Capabilities,
    resident_bases: bool,
}

/// A plugin instance, destroyed on drop.
struct Live {
    module: BackendMod_Ref,
    instance: Option<Instance>,
}

impl Live {
    fn instance(&self) -> &Instance {
        // Only `Drop` takes it.
        self.instance.as_ref().expect("instance present until drop")
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(i) = self.instance.take() {
            (self.module.destroy())(i);
        }
    }
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
        Self::from_module(name, module, &pairs)
    }

    /// Instantiates `module` (of the plugin `name`) with checked parameters.
    pub(crate) fn from_module(
        name: String,
        module: BackendMod_Ref,
        pairs: &[cuzk_plugin_api::Param<'_>],
    ) -> Result<Self, PluginError> {
        let instance = match (module.instantiate())(RSlice::from_slice(pairs)) {
            RResult::ROk(i) => i,
            RResult::RErr(e) => return Err(crate::rejected("backend", &name, e)),
        };
        let mut this = Self {
            name,
            module,
            live: Arc::new(Live {
                module,
                instance: Some(instance),
            }),
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
        self.live.instance()
    }

    /// Whether the plugin offers the pre-staging calls (`prove_partition_ref`,
    /// `stage`, `unstage`); one built before they were added to the ABI does not.
    pub fn offers_staging(&self) -> bool {
        self.module.prove_partition_ref().is_some()
            && self.module.stage().is_some()
            && self.module.unstage().is_some()
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
        let r = (self.module.prove_partition())(self.instance(), c_job);
        self.result("prove_partition", r)
    }

    /// [`GpuBackend::prove_partition_ref`] with `resident` as in
    /// [`PluginBackend::prove_partition_resident`]. `a, b, c` are lent to the
    /// plugin; one that lacks `prove_partition_ref` (built before it was added)
    /// gets a copy through `prove_partition`.
    pub fn prove_partition_ref_resident(
        &self,
        job: PartitionJobRef<'_>,
        resident: Option<u64>,
    ) -> Result<PartitionResult, BackendError> {
        let Some(call) = self.module.prove_partition_ref() else {
            return self.prove_partition_resident(job.to_owned_job(), resident);
        };
        if job.b_g2.is_some() && !self.caps.g2 {
            return Err(BackendError::Unsupported("the G2 MSM"));
        }
        let c_job = PartitionJobRefC {
            abc: abc_c(job.abc),
            h_bases: G1Affine::slice_to_repr(job.h_bases).into(),
            l: split_c(&job.l),
            a: split_c(&job.a),
            b_g1: split_c(&job.b_g1),
            b_g2: job.b_g2.as_ref().map(split_c).into(),
            resident: resident.into(),
        };
        self.result("prove_partition_ref", call(self.instance(), c_job))
    }

    fn result(
        &self,
        call: &'static str,
        r: RResult<PartitionResultC, cuzk_plugin_api::AbiError>,
    ) -> Result<PartitionResult, BackendError> {
        let r = r.into_result().map_err(|e| {
            // The input's fault (a shape the backend refuses) is not the device's:
            // the engine retries only device errors on another device.
            let input = e.code == ErrorCode::SHAPE || e.code == ErrorCode::UNSUPPORTED;
            let message = PluginError::from_abi(&self.name, call, e).to_string();
            if input {
                BackendError::Rejected(message)
            } else {
                BackendError::Device(message)
            }
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

fn abc_c<'a>(abc: AbcRef<'a>) -> AbcRefC<'a> {
    AbcRefC {
        a: Scalar::slice_to_repr(abc.a).into(),
        b: Scalar::slice_to_repr(abc.b).into(),
        c: Scalar::slice_to_repr(abc.c).into(),
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

    fn prove_partition_ref(
        &self,
        job: PartitionJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        self.prove_partition_ref_resident(job, None)
    }

    /// The plugin's count; one for a plugin built before `device_count` existed,
    /// or whose call fails (logged).
    fn device_count(&self) -> u32 {
        let Some(call) = self.module.device_count() else {
            return 1;
        };
        match call(self.instance()).into_result() {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(
                    target: "cuzk::plugin",
                    "{}",
                    PluginError::from_abi(&self.name, "device_count", e)
                );
                1
            }
        }
    }

    /// The plugin's page-locked bytes; none for a plugin built before
    /// `pinned_host_bytes` existed, or whose call fails (logged).
    fn pinned_host_bytes(&self) -> u64 {
        let Some(call) = self.module.pinned_host_bytes() else {
            return 0;
        };
        match call(self.instance()).into_result() {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(
                    target: "cuzk::plugin",
                    "{}",
                    PluginError::from_abi(&self.name, "pinned_host_bytes", e)
                );
                0
            }
        }
    }

    /// The plugin's; nothing for a plugin built before `forget_bases` existed, or
    /// whose call fails (logged).
    fn forget_bases(&self, host: &[std::ops::Range<usize>]) -> u64 {
        let Some(call) = self.module.forget_bases() else {
            return 0;
        };
        let ranges: Vec<cuzk_plugin_api::HostRangeC> = host
            .iter()
            .map(|r| cuzk_plugin_api::HostRangeC {
                start: r.start as u64,
                end: r.end as u64,
            })
            .collect();
        match call(self.instance(), RSlice::from_slice(&ranges)).into_result() {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(
                    target: "cuzk::plugin",
                    "{}",
                    PluginError::from_abi(&self.name, "forget_bases", e)
                );
                0
            }
        }
    }

    /// The plugin's `stage`, when it offers it (with `prove_partition_ref`, so the
    /// staged buffers are the ones the call reads); the guard calls `unstage`.
    /// A plugin built before these calls existed stages nothing.
    fn stage(&self, abc: AbcRef<'_>) -> Result<Staged, BackendError> {
        let (Some(stage), Some(unstage)) = (self.module.stage(), self.module.unstage()) else {
            return Ok(Staged::none());
        };
        if self.module.prove_partition_ref().is_none() {
            return Ok(Staged::none());
        }
        let token = stage(self.instance(), abc_c(abc))
            .into_result()
            .map_err(|e| {
                BackendError::Device(PluginError::from_abi(&self.name, "stage", e).to_string())
            })?;
        if token == 0 {
            return Ok(Staged::none());
        }
        let live = Arc::clone(&self.live);
        let name = self.name.clone();
        Ok(Staged::new(move || {
            if let RResult::RErr(e) = unstage(live.instance(), token) {
                tracing::warn!(
                    target: "cuzk::plugin",
                    "{}",
                    PluginError::from_abi(&name, "unstage", e)
                );
            }
        }))
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

#[cfg(test)]
mod tests {
    //! A plugin built before `prove_partition_ref`, `stage` and `unstage` were
    //! appended to `BackendMod` hands the host a module with six fields; one built
    //! before `device_count` and `pinned_host_bytes`, nine. Built here
    //! in-process from the same functions, declared with the old layout, it must
    //! load and prove through the old calls, staging nothing.

    // The old module's derived accessors go unused: the host reads it as the new one.
    #![allow(non_camel_case_types, dead_code)]

    use super::*;
    use abi_stable::prefix_type::PrefixTypeTrait;
    use abi_stable::std_types::{RString, RVec};
    use abi_stable::StableAbi;
    use cuzk_plugin_api::{
        AbiError, BackendCaps, BackendPlugin, Param, ParamDoc, Params, StageGuard,
    };

    /// Records which call reached it through the error it returns.
    struct Rec;

    impl BackendPlugin for Rec {
        const PARAMS: &'static [ParamDoc] = &[];
        fn new(_: &Params<'_>) -> Result<Self, AbiError> {
            Ok(Rec)
        }
        fn capabilities(&self) -> Result<BackendCaps, AbiError> {
            Ok(BackendCaps {
                name: RString::from("rec"),
                curve: RString::from(CURVE),
                max_log_domain: 10,
                g2: false,
                resident_bases: false,
                devices: RVec::new(),
            })
        }
        fn prove_partition(&self, job: PartitionJobC<'_>) -> Result<PartitionResultC, AbiError> {
            Err(AbiError::other(format!("owned n={}", job.abc.a.len())))
        }
        fn prove_partition_ref(
            &self,
            job: PartitionJobRefC<'_>,
        ) -> Result<PartitionResultC, AbiError> {
            Err(AbiError::other(format!("lent n={}", job.abc.a.len())))
        }
        fn stage(&self, _: AbcRefC<'_>) -> Result<Option<StageGuard>, AbiError> {
            Ok(Some(Box::new(())))
        }
        fn device_count(&self) -> Result<u32, AbiError> {
            Ok(3)
        }
        fn pinned_host_bytes(&self) -> Result<u64, AbiError> {
            Ok(4096)
        }
        /// "Frees" the bytes of the ranges it is given, so the test sees them cross.
        fn forget_bases(&self, host: &[cuzk_plugin_api::HostRangeC]) -> Result<u64, AbiError> {
            Ok(host.iter().map(|r| r.end - r.start).sum())
        }
    }

    /// `BackendMod` as ABI 1 first shipped it.
    #[repr(C)]
    #[derive(StableAbi)]
    #[sabi(kind(Prefix(prefix_ref = OldBackendMod_Ref, prefix_fields = OldBackendMod_Prefix)))]
    #[sabi(missing_field(panic))]
    struct OldBackendMod {
        instantiate: extern "C" fn(params: RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>,
        destroy: extern "C" fn(instance: Instance),
        capabilities: extern "C" fn(instance: &Instance) -> RResult<BackendCaps, AbiError>,
        prove_partition: extern "C" fn(
            instance: &Instance,
            job: PartitionJobC<'_>,
        ) -> RResult<PartitionResultC, AbiError>,
        upload_bases: extern "C" fn(
            instance: &Instance,
            id: u64,
            query: BaseQuery,
            bases: BasesC<'_>,
        ) -> RResult<(), AbiError>,
        #[sabi(last_prefix_field)]
        release_bases: extern "C" fn(instance: &Instance, id: u64) -> RResult<(), AbiError>,
    }

    /// `BackendMod` with the staging calls, before `device_count` and
    /// `pinned_host_bytes` were appended.
    #[repr(C)]
    #[derive(StableAbi)]
    #[sabi(kind(Prefix(prefix_ref = StagingBackendMod_Ref, prefix_fields = StagingBackendMod_Prefix)))]
    #[sabi(missing_field(panic))]
    struct StagingBackendMod {
        instantiate: extern "C" fn(params: RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>,
        destroy: extern "C" fn(instance: Instance),
        capabilities: extern "C" fn(instance: &Instance) -> RResult<BackendCaps, AbiError>,
        prove_partition: extern "C" fn(
            instance: &Instance,
            job: PartitionJobC<'_>,
        ) -> RResult<PartitionResultC, AbiError>,
        upload_bases: extern "C" fn(
            instance: &Instance,
            id: u64,
            query: BaseQuery,
            bases: BasesC<'_>,
        ) -> RResult<(), AbiError>,
        #[sabi(last_prefix_field)]
        release_bases: extern "C" fn(instance: &Instance, id: u64) -> RResult<(), AbiError>,
        #[sabi(missing_field(option))]
        prove_partition_ref: extern "C" fn(
            instance: &Instance,
            job: PartitionJobRefC<'_>,
        ) -> RResult<PartitionResultC, AbiError>,
        #[sabi(missing_field(option))]
        stage: extern "C" fn(instance: &Instance, abc: AbcRefC<'_>) -> RResult<u64, AbiError>,
        #[sabi(missing_field(option))]
        unstage: extern "C" fn(instance: &Instance, token: u64) -> RResult<(), AbiError>,
    }

    fn staging_module() -> BackendMod_Ref {
        let m = new_module();
        let old = StagingBackendMod {
            instantiate: m.instantiate(),
            destroy: m.destroy(),
            capabilities: m.capabilities(),
            prove_partition: m.prove_partition(),
            upload_bases: m.upload_bases(),
            release_bases: m.release_bases(),
            prove_partition_ref: m.prove_partition_ref().unwrap(),
            stage: m.stage().unwrap(),
            unstage: m.unstage().unwrap(),
        }
        .leak_into_prefix();
        // SAFETY: as in `old_module`: the same prefix, nine fields accessible.
        unsafe { std::mem::transmute::<StagingBackendMod_Ref, BackendMod_Ref>(old) }
    }

    fn new_module() -> BackendMod_Ref {
        cuzk_plugin_api::export::backend_root::<Rec>("rec", "records")
            .backend()
            .unwrap()
    }

    fn old_module() -> BackendMod_Ref {
        let m = new_module();
        let old = OldBackendMod {
            instantiate: m.instantiate(),
            destroy: m.destroy(),
            capabilities: m.capabilities(),
            prove_partition: m.prove_partition(),
            upload_bases: m.upload_bases(),
            release_bases: m.release_bases(),
        }
        .leak_into_prefix();
        // SAFETY: both are `PrefixRef`s (one pointer) to a `WithMetadata` whose
        // prefix is field for field the same; the metadata says six fields are
        // accessible, exactly what an old plugin's module says. This is the memory
        // the host gets from a plugin built before the new fields.
        unsafe { std::mem::transmute::<OldBackendMod_Ref, BackendMod_Ref>(old) }
    }

    fn error(r: Result<PartitionResult, BackendError>) -> String {
        match r {
            Err(BackendError::Device(m)) => m,
            other => panic!("expected the recorder's error, got {other:?}"),
        }
    }

    #[test]
    fn a_plugin_without_the_staging_fields_loads_proves_and_stages_nothing() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let split = cuzk_msm_cpu::prep_msm(&[], None, &[], None, &pool).unwrap();
        let v = vec![Scalar::from(3u64); 3];
        let abc = AbcRef {
            a: &v,
            b: &v,
            c: &v,
        };
        let none = SplitMsm {
            bases: &[][..],
            split: &split,
        };
        let job = PartitionJobRef {
            abc,
            h_bases: &[],
            l: none,
            a: none,
            b_g1: none,
            b_g2: None,
        };

        let new = PluginBackend::from_module("rec".into(), new_module(), &[]).unwrap();
        assert!(new.offers_staging());
        assert!(new.stage(abc).unwrap().is_staged());
        assert!(error(new.prove_partition_ref(job)).contains("lent n=3"));

        let old = PluginBackend::from_module("rec".into(), old_module(), &[]).unwrap();
        assert!(old.module.stage().is_none() && old.module.unstage().is_none());
        assert!(!old.offers_staging());
        assert_eq!(old.capabilities().name, "rec");
        assert!(!old.stage(abc).unwrap().is_staged());
        // Lent a, b, c go through the old owned call, copied.
        assert!(error(old.prove_partition_ref(job)).contains("owned n=3"));
        assert!(error(old.prove_partition(job.to_owned_job())).contains("owned n=3"));
        assert_eq!((old.device_count(), old.pinned_host_bytes()), (1, 0));
    }

    /// The newest calls are forwarded; a plugin built before `device_count` and
    /// `pinned_host_bytes` were appended loads, stages and proves as before, and
    /// counts as one device holding no pinned memory.
    #[test]
    fn device_count_and_pinned_bytes_cross_and_default_for_older_plugins() {
        let new = PluginBackend::from_module("rec".into(), new_module(), &[]).unwrap();
        assert_eq!((new.device_count(), new.pinned_host_bytes()), (3, 4096));
        assert_eq!(new.forget_bases(&[16..48, 100..104]), 36);

        let older = PluginBackend::from_module("rec".into(), staging_module(), &[]).unwrap();
        assert!(older.module.device_count().is_none());
        assert!(older.module.pinned_host_bytes().is_none());
        assert!(older.offers_staging());
        let v = vec![Scalar::from(3u64); 3];
        let abc = AbcRef {
            a: &v,
            b: &v,
            c: &v,
        };
        assert!(older.stage(abc).unwrap().is_staged());
        assert_eq!((older.device_count(), older.pinned_host_bytes()), (1, 0));
        // Nor has it `forget_bases`: nothing is freed through it.
        assert!(older.module.forget_bases().is_none());
        assert_eq!(older.forget_bases(&[16..48, 64..80]), 0);
    }
}
