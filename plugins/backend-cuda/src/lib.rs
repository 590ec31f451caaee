//! Backend plugin `cuda`: [`cuzk_cuda::CudaBackend`] behind the plugin ABI.
//!
//! Parameters: `device` (CUDA ordinal), `reserve_gib` (device memory left alone) and
//! `stream_chunk` (0: bases resident where they fit, streamed where they do not; N:
//! always streamed from host memory in chunks of N points, for small GPUs and the
//! resident-against-streamed A/B).
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

use cuzk_cuda::{BasePlacement, CudaBackend, CudaConfig};
use cuzk_gpu_backend::GpuBackend;
use cuzk_plugin_api::{
    stages, AbcRefC, AbiError, BackendCaps, BackendPlugin, ErrorCode, ParamDoc, Params,
    PartitionJobC, PartitionJobRefC, PartitionResultC, StageGuard,
};

pub struct Cuda {
    backend: CudaBackend,
}

impl BackendPlugin for Cuda {
    const PARAMS: &'static [ParamDoc] = &[
        ParamDoc::new("device", "0", "CUDA device ordinal"),
        ParamDoc::new(
            "reserve_gib",
            "2",
            "device memory (GiB) left for other processes and the driver",
        ),
        ParamDoc::new(
            "stream_chunk",
            "0",
            "0: parameter bases resident where they fit, streamed where they do not; N: always streamed in chunks of N points",
        ),
    ];

    fn new(params: &Params<'_>) -> Result<Self, AbiError> {
        let device: usize = params.get("device")?;
        let reserve_gib: u64 = params.get("reserve_gib")?;
        let stream_chunk: usize = params.get("stream_chunk")?;
        let backend = CudaBackend::new(CudaConfig {
            device,
            reserve_bytes: reserve_gib << 30,
            bases: match stream_chunk {
                0 => BasePlacement::Auto,
                n => BasePlacement::Streamed { chunk_bases: n },
            },
            staged_kernels_dir: own_dir().map(|d| d.join("kernels")),
            ..CudaConfig::default()
        })
        .map_err(|e| AbiError::new(ErrorCode::DEVICE, e.to_string()))?;
        Ok(Self { backend })
    }

    fn capabilities(&self) -> Result<BackendCaps, AbiError> {
        Ok(stages::capabilities(&self.backend.capabilities(), false))
    }

    fn prove_partition(&self, job: PartitionJobC<'_>) -> Result<PartitionResultC, AbiError> {
        stages::InProcessJob::from_c(job)?.run(|job| self.backend.prove_partition_ref(job))
    }

    fn prove_partition_ref(&self, job: PartitionJobRefC<'_>) -> Result<PartitionResultC, AbiError> {
        stages::InProcessJob::from_ref_c(job)?.run(|job| self.backend.prove_partition_ref(job))
    }

    fn stage(&self, abc: AbcRefC<'_>) -> Result<Option<StageGuard>, AbiError> {
        stages::stage(&self.backend, abc)
    }
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
