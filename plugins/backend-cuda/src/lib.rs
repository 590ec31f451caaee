//! Backend plugin `cuda`: [`cuzk_cuda::CudaBackend`] behind the plugin ABI.
//!
//! Parameters: the keys of [`cuzk_cuda::CudaConfig`] and, flat beside them, of
//! [`cuzk_cuda::CudaTuning`] (`[backend.params]` in `cuzk.toml`), read into those
//! typed structs: an unknown key or value is an error that names it. Staged kernels
//! are looked for in `kernels/` beside this `.so`.
//! Where there is no CUDA driver or device, instantiating the plugin fails with the
//! backend's "no CUDA device" error, which the host reports; nothing panics.
//!
//! The crossing is `cuzk_plugin_api::stages`: `a, b, c` stay the host's (the
//! backend pins and uploads them where they are), the splits are rebuilt from their
//! parts, and the bases are the host's slices, so the backend's resident-bases
//! cache (keyed by slice address) works across calls exactly as in-process.
//! `stage` pins the host's `a, b, c` before the host takes its GPU lock (the guard
//! lives in the glue's token map until the host's `unstage`), and
//! `prove_partition_ref` reads them lent, so the host frees them only afterwards.
//! `abc_eval`, `stage_witness` and `prove_partition_witness` are the backend's own
//! (the witness and the host's compiled R1CS lent, validated by the backend once per
//! shape it uploads).

use cuzk_cuda::{CudaBackend, CudaConfig};
use cuzk_gpu_backend::GpuBackend;
use cuzk_plugin_api::{
    stages, AbcEvalC, AbcRefC, AbiError, BackendCaps, BackendPlugin, ErrorCode, ParamDoc, Params,
    PartitionJobC, PartitionJobRefC, PartitionResultC, ScalarRepr, SplitDataC, StageGuard,
    WitnessJobRefC,
};

pub struct Cuda {
    backend: CudaBackend,
    /// Split data checked when staged, not checked again inside the GPU lock.
    checked: stages::CheckedSplits,
}

impl BackendPlugin for Cuda {
    // Every key of `cuzk_cuda::CudaConfig` and `CudaTuning` (flat), with its default;
    // `cuda_params_are_the_config_keys` keeps the two lists equal.
    const PARAMS: &'static [ParamDoc] = &[
        ParamDoc::new("device", "0", "CUDA device ordinal"),
        ParamDoc::new(
            "reserve_gib",
            "2",
            "device memory (GiB) left for other processes and the driver",
        ),
        ParamDoc::new(
            "device_memory_gib",
            "0",
            "0: the device's own memory; N: plan as a card of N GiB would let it (a smaller card emulated: cuzk plan's and scripts/gpu-table.sh's rows)",
        ),
        ParamDoc::new(
            "stream_chunk",
            "0",
            "0: parameter bases resident where they fit, streamed where they do not; N: always streamed in chunks of N points",
        ),
        ParamDoc::new(
            "copy_threads",
            "8",
            "host threads copying streamed bases (and witnesses staged by copy) into pinned buffers",
        ),
        ParamDoc::new(
            "stream_staging",
            "register",
            "streamed parameter bases: register (page-locked in place once, DMA'd straight to the device) or copy (through pinned buffers the backend keeps)",
        ),
        ParamDoc::new(
            "witness_staging",
            "copy",
            "a witness before the GPU lock: copy (into pinned buffers the backend keeps, one a GPU worker) or register (page-locked in place)",
        ),
        ParamDoc::new(
            "split_upload",
            "pinned",
            "a partition's bitmaps and tail terms: pinned (through a page-locked buffer the backend keeps, uploaded while L's ones run) or pageable (from the caller's memory)",
        ),
        ParamDoc::new(
            "host_wait",
            "auto",
            "how a host thread waits for the device: auto (CUDA's choice: spin where the host has more cores than contexts), spin, yield, or block (sleep; the core stays free)",
        ),
        ParamDoc::new(
            "ntt_kernel",
            "r2wg",
            "NTT pass kernel: r2wg (fastest; N/2 roots per size, 2 GiB at 2^27) or r2wf (no table)",
        ),
        ParamDoc::new("g2", "true", "offer the B query in G2 on the device"),
        ParamDoc::new(
            "profile",
            "false",
            "log per-phase device times of every partition and MSM (CUDA events)",
        ),
        ParamDoc::new(
            "kernel_cache_dir",
            "",
            "compiled kernels kept here (empty: $XDG_CACHE_HOME/cuzk/kernels or ~/.cache/cuzk/kernels)",
        ),
        ParamDoc::new(
            "msm_sum",
            "affine",
            "tuning: G1 bucket sums, affine (batch-affine rounds) or calls (XYZZ only)",
        ),
        ParamDoc::new(
            "msm_sum_g2",
            "affine",
            "tuning: G2 bucket sums, affine (batch-affine rounds) or calls (XYZZ only)",
        ),
        ParamDoc::new(
            "ba_min_per",
            "32",
            "tuning: fewest pairs per thread for a batch-affine round",
        ),
        ParamDoc::new(
            "ba_group_log",
            "28",
            "tuning: log2 of the sorted entries of a batch-affine window group (10..=30)",
        ),
        ParamDoc::new(
            "ba_waves",
            "1",
            "tuning: waves of threads per batch-affine round (1..=16)",
        ),
        ParamDoc::new(
            "scatter",
            "auto",
            "tuning: the scatter's launches, auto, window or all",
        ),
    ];

    fn new(params: &Params<'_>) -> Result<Self, AbiError> {
        let mut config = config_from(params)?;
        config.staged_kernels_dir = own_dir().map(|d| d.join("kernels"));
        let backend = CudaBackend::new(config)
            .map_err(|e| AbiError::new(ErrorCode::DEVICE, e.to_string()))?;
        Ok(Self {
            backend,
            checked: stages::CheckedSplits::default(),
        })
    }

    fn capabilities(&self) -> Result<BackendCaps, AbiError> {
        Ok(stages::capabilities(&self.backend.capabilities(), false))
    }

    fn prove_partition(&self, job: PartitionJobC<'_>) -> Result<PartitionResultC, AbiError> {
        stages::InProcessJob::from_c(job)?.run(|job| self.backend.prove_partition_ref(job))
    }

    fn prove_partition_ref(&self, job: PartitionJobRefC<'_>) -> Result<PartitionResultC, AbiError> {
        self.checked
            .job_from_ref_c(job)?
            .run(|job| self.backend.prove_partition_ref(job))
    }

    fn stage(&self, abc: AbcRefC<'_>) -> Result<Option<StageGuard>, AbiError> {
        stages::stage(&self.backend, abc)
    }

    /// [`CudaBackend::sibling`]: the device's memory split between the two.
    fn open_sibling(&self) -> Result<Option<Self>, AbiError> {
        let backend = self
            .backend
            .sibling()
            .map_err(|e| AbiError::new(ErrorCode::DEVICE, e.to_string()))?;
        Ok(Some(Self {
            backend,
            checked: stages::CheckedSplits::default(),
        }))
    }

    fn abc_eval(&self) -> Result<AbcEvalC, AbiError> {
        Ok(stages::abc_eval(&self.backend))
    }

    fn stage_witness(
        &self,
        input: &[ScalarRepr],
        aux: &[ScalarRepr],
    ) -> Result<Option<StageGuard>, AbiError> {
        stages::stage_witness(&self.backend, input, aux)
    }

    fn stage_splits(&self, splits: &[SplitDataC<'_>]) -> Result<Option<StageGuard>, AbiError> {
        self.checked.stage(&self.backend, splits)
    }

    fn prove_partition_witness(
        &self,
        job: WitnessJobRefC<'_>,
    ) -> Result<PartitionResultC, AbiError> {
        self.checked
            .prove_partition_witness(job, |job| self.backend.prove_partition_witness(job))
    }

    fn device_count(&self) -> Result<u32, AbiError> {
        Ok(self.backend.device_count())
    }

    fn pinned_host_bytes(&self) -> Result<u64, AbiError> {
        Ok(self.backend.pinned_host_bytes())
    }

    fn forget_bases(&self, host: &[cuzk_plugin_api::HostRangeC]) -> Result<u64, AbiError> {
        let ranges: Vec<std::ops::Range<usize>> = host
            .iter()
            .map(|r| r.start as usize..r.end as usize)
            .collect();
        Ok(self.backend.forget_bases(&ranges))
    }
}

/// The typed configuration from the parameters (the declared defaults for those not
/// given; an empty `kernel_cache_dir` is the default place).
fn config_from(params: &Params<'_>) -> Result<CudaConfig, AbiError> {
    let texts: Vec<(&str, &str)> = <Cuda as BackendPlugin>::PARAMS
        .iter()
        .map(|d| (d.name.as_str(), params.text(d.name.as_str())))
        .filter(|(k, v)| !(*k == "kernel_cache_dir" && v.is_empty()))
        .collect();
    CudaConfig::from_params(texts)
        .map_err(|e| AbiError::new(ErrorCode::INVALID_PARAMETER, e.to_string()))
}

/// The folder this plugin's `.so` was loaded from (staged kernels ship in `kernels/`
/// beside it), found through the dynamic loader.
fn own_dir() -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    // SAFETY: Dl_info is plain pointers, for which all zeros is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let addr = own_dir as *const () as *const libc::c_void;
    // SAFETY: dladdr reads the loader's tables for an address inside this object and
    // fills `info`; `dli_fname` is a NUL-terminated path owned by the loader.
    let found = unsafe { libc::dladdr(addr, &mut info) } != 0 && !info.dli_fname.is_null();
    if !found {
        return None;
    }
    // SAFETY: checked non-null above; the loader keeps the string alive.
    let path = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
    path.parent().map(std::path::Path::to_path_buf)
}

cuzk_plugin_api::export_plugin! {
    kind: backend,
    name: "cuda",
    description: "the CUDA backend: H (NTT chain), the G1 MSMs and optionally B in G2 on an NVIDIA GPU, kernels compiled by NVRTC",
    type: Cuda,
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_plugin_api::Param;

    /// The declared parameters are exactly the config's keys, with its defaults.
    #[test]
    fn cuda_params_are_the_config_keys() {
        let declared = <Cuda as BackendPlugin>::PARAMS;
        let mut keys: Vec<&str> = declared.iter().map(|d| d.name.as_str()).collect();
        let mut want: Vec<String> = CudaConfig::default()
            .to_params()
            .into_iter()
            .map(|(k, _)| k)
            .chain(["kernel_cache_dir".to_owned()])
            .collect();
        keys.sort_unstable();
        want.sort_unstable();
        want.dedup();
        assert_eq!(keys, want);
        let none: [Param<'_>; 0] = [];
        let defaults = config_from(&Params::new(&none, declared).unwrap()).unwrap();
        assert_eq!(defaults, CudaConfig::default());
        let given = [Param::new("ntt_kernel", "r2wx")];
        let e = config_from(&Params::new(&given, declared).unwrap()).unwrap_err();
        assert!(
            e.message.contains("r2wx") && e.message.contains("r2wf"),
            "{e}"
        );
    }
}
