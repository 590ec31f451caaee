//! A backend plugin as a [`GpuBackend`].

use std::collections::BTreeMap;
use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_gpu_backend::{
    AbcEval, AbcRef, BackendError, Capabilities, DeviceInfo, GpuBackend, PartitionJob,
    PartitionJobRef, PartitionResult, SplitMsm, SplitRef, Staged, WitnessJobRef,
};
use cuzk_plugin_api::abi_stable::std_types::{ROption, RResult, RSlice};
use cuzk_plugin_api::{
    r1cs_to_c, AbcC, AbcEvalC, AbcRefC, BackendMod_Ref, BaseQuery, BasesC, ErrorCode, Instance,
    PartitionJobC, PartitionJobRefC, PartitionResultC, Repr, SplitDataC, SplitMsmC, WitnessJobRefC,
    CURVE,
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
    /// The checked parameters it was instantiated with (a sibling gets the same).
    params: Vec<(String, String)>,
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
        Self::from_instance(name, module, pairs, instance)
    }

    /// Wraps a live `instance` of `module` (destroyed with the backend), reading its
    /// capabilities.
    fn from_instance(
        name: String,
        module: BackendMod_Ref,
        pairs: &[cuzk_plugin_api::Param<'_>],
        instance: Instance,
    ) -> Result<Self, PluginError> {
        let mut this = Self {
            params: pairs
                .iter()
                .map(|p| (p.key.as_str().to_owned(), p.value.as_str().to_owned()))
                .collect(),
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
                g2_preferred: false,
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
            // Not in the ABI: a plugin's G2 is preferred where it drives a device.
            g2_preferred: false,
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

    /// [`GpuBackend::prove_partition_witness`] with `resident` as in
    /// [`PluginBackend::prove_partition_resident`]: the witness and the compiled
    /// R1CS are lent to the plugin, which evaluates `a, b, c` itself. A plugin
    /// built before the call existed refuses it as `Unsupported` (its
    /// [`GpuBackend::abc_eval`] says `No`, so the engine does not ask).
    pub fn prove_partition_witness_resident(
        &self,
        job: WitnessJobRef<'_>,
        resident: Option<u64>,
    ) -> Result<PartitionResult, BackendError> {
        let Some(call) = self.module.prove_partition_witness() else {
            return Err(BackendError::Unsupported(
                "evaluating a, b, c from the witness (the plugin predates it)",
            ));
        };
        if job.b_g2.is_some() && !self.caps.g2 {
            return Err(BackendError::Unsupported("the G2 MSM"));
        }
        let c_job = WitnessJobRefC {
            r1cs: r1cs_to_c(&job.r1cs),
            input: Scalar::slice_to_repr(job.input).into(),
            aux: Scalar::slice_to_repr(job.aux).into(),
            h_bases: G1Affine::slice_to_repr(job.h_bases).into(),
            l: split_c(&job.l),
            a: split_c(&job.a),
            b_g1: split_c(&job.b_g1),
            b_g2: job.b_g2.as_ref().map(split_c).into(),
            resident: resident.into(),
        };
        self.result("prove_partition_witness", call(self.instance(), c_job))
    }

    /// What a staging call (`call`) answered, as a guard that calls the plugin's
    /// `unstage` on its token when dropped (none for token 0, nothing staged).
    fn staged(
        &self,
        call: &'static str,
        answer: RResult<u64, cuzk_plugin_api::AbiError>,
    ) -> Result<Staged, BackendError> {
        let token = answer.into_result().map_err(|e| {
            BackendError::Device(PluginError::from_abi(&self.name, call, e).to_string())
        })?;
        Ok(self.unstaged_on_drop(token))
    }

    /// A guard that calls the plugin's `unstage` on `token` when dropped (none for
    /// token 0, nothing staged).
    fn unstaged_on_drop(&self, token: u64) -> Staged {
        let Some(unstage) = self.module.unstage() else {
            return Staged::none();
        };
        if token == 0 {
            return Staged::none();
        }
        let live = Arc::clone(&self.live);
        let name = self.name.clone();
        Staged::new(move || {
            if let RResult::RErr(e) = unstage(live.instance(), token) {
                tracing::warn!(
                    target: "cuzk::plugin",
                    "{}",
                    PluginError::from_abi(&name, "unstage", e)
                );
            }
        })
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
        ones_words: s.ones_words().into(),
        ones_len: s.num_bases() as u64,
        tail_indices: s.tail_indices().into(),
        tail_scalars: s.tail_scalars().into(),
    }
}

impl GpuBackend for PluginBackend {
    fn capabilities(&self) -> Capabilities {
        self.caps.clone()
    }

    /// A second instance on the same device, its own state inside the plugin, so
    /// its calls do not wait behind this one's: made by this instance where the
    /// plugin offers `open_sibling` (it may then split the device between the two),
    /// else instantiated again with the same parameters.
    fn open_sibling(&self) -> Result<Option<std::sync::Arc<dyn GpuBackend>>, BackendError> {
        let pairs: Vec<cuzk_plugin_api::Param<'_>> = self
            .params
            .iter()
            .map(|(k, v)| cuzk_plugin_api::Param::new(k, v))
            .collect();
        let failed = |e: PluginError| BackendError::Device(format!("a second instance: {e}"));
        let sibling = match self.module.open_sibling() {
            Some(call) => match call(self.instance()) {
                RResult::ROk(ROption::RSome(i)) => {
                    Self::from_instance(self.name.clone(), self.module, &pairs, i)
                        .map_err(failed)?
                }
                RResult::ROk(ROption::RNone) => return Ok(None),
                RResult::RErr(e) => {
                    return Err(failed(PluginError::from_abi(&self.name, "open_sibling", e)))
                }
            },
            None => Self::from_module(self.name.clone(), self.module, &pairs).map_err(failed)?,
        };
        Ok(Some(std::sync::Arc::new(sibling)))
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
        let (Some(stage), Some(_)) = (self.module.stage(), self.module.unstage()) else {
            return Ok(Staged::none());
        };
        if self.module.prove_partition_ref().is_none() {
            return Ok(Staged::none());
        }
        self.staged("stage", stage(self.instance(), abc_c(abc)))
    }

    /// The plugin's; `No` for a plugin built before `abc_eval` existed, one that
    /// lacks `prove_partition_witness`, one whose call fails, or one that answers
    /// a value this host does not know (a newer plugin's; the last two logged).
    fn abc_eval(&self) -> AbcEval {
        let (Some(call), Some(_)) = (
            self.module.abc_eval(),
            self.module.prove_partition_witness(),
        ) else {
            return AbcEval::No;
        };
        match call(self.instance()).into_result() {
            Ok(AbcEvalC::NO) => AbcEval::No,
            Ok(AbcEvalC::HOST) => AbcEval::Host,
            Ok(AbcEvalC::DEVICE) => AbcEval::Device,
            Ok(AbcEvalC(other)) => {
                tracing::warn!(
                    target: "cuzk::plugin",
                    "plugin `{}` evaluates a, b, c in a way this host does not know ({other}); \
                     the host evaluates them",
                    self.name
                );
                AbcEval::No
            }
            Err(e) => {
                tracing::warn!(
                    target: "cuzk::plugin",
                    "{}",
                    PluginError::from_abi(&self.name, "abc_eval", e)
                );
                AbcEval::No
            }
        }
    }

    /// The plugin's `stage_witness`, when it offers it with `unstage` and
    /// `prove_partition_witness`; the guard calls `unstage`. A plugin built before
    /// these calls existed stages nothing.
    fn stage_witness(&self, input: &[Scalar], aux: &[Scalar]) -> Result<Staged, BackendError> {
        let (Some(stage), Some(_), Some(_)) = (
            self.module.stage_witness(),
            self.module.unstage(),
            self.module.prove_partition_witness(),
        ) else {
            return Ok(Staged::none());
        };
        let input = Scalar::slice_to_repr(input).into();
        let aux = Scalar::slice_to_repr(aux).into();
        self.staged("stage_witness", stage(self.instance(), input, aux))
    }

    fn prove_partition_witness(
        &self,
        job: WitnessJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        self.prove_partition_witness_resident(job, None)
    }

    /// The plugin's `stage_splits`, when it offers it with `unstage`; the guard
    /// calls `unstage`. A plugin built before the call existed stages nothing.
    fn stage_splits(&self, splits: &[SplitRef<'_>]) -> Result<Staged, BackendError> {
        let (Some(stage), Some(_)) = (self.module.stage_splits(), self.module.unstage()) else {
            return Ok(Staged::none());
        };
        let data: Vec<SplitDataC<'_>> = splits
            .iter()
            .map(|s| SplitDataC {
                num_bases: s.num_bases() as u64,
                ones_words: s.ones_words().into(),
                tail_indices: s.tail_indices().into(),
                tail_scalars: s.tail_scalars().into(),
            })
            .collect();
        self.staged(
            "stage_splits",
            stage(self.instance(), data.as_slice().into()),
        )
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
mod tests;
