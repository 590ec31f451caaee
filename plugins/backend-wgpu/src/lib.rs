//! Backend plugin `wgpu`: [`cuzk_wgpu::WgpuBackend`] behind the plugin ABI, the
//! portable GPU backend (Vulkan, Metal, DX12; kernels in WGSL).
//!
//! Parameters pick the adapter (`adapter`, a piece of its name; `device`, its
//! position among those left, best first), cap the binding size the buffers are
//! planned with (`max_binding_mib`) and size the host pool (`threads`). Where no
//! adapter matches, instantiating the plugin fails with an error listing the
//! adapters found; nothing panics.
//!
//! The crossing is `cuzk_plugin_api::stages`: `a, b, c` are lent and only read
//! (uploaded), the splits are rebuilt from their parts and checked, and the bases
//! are the host's slices, so the backend's resident bases (keyed by slice
//! address) persist across calls exactly as in-process.

use std::sync::Arc;

use cuzk_gpu_backend::GpuBackend;
use cuzk_plugin_api::{
    stages, AbiError, BackendCaps, BackendPlugin, ErrorCode, HostRangeC, ParamDoc, Params,
    PartitionJobC, PartitionJobRefC, PartitionResultC,
};
use cuzk_wgpu::{WgpuBackend, WgpuConfig};

pub struct Wgpu {
    backend: WgpuBackend,
}

impl BackendPlugin for Wgpu {
    const PARAMS: &'static [ParamDoc] = &[
        ParamDoc::new(
            "adapter",
            "",
            "only adapters whose name contains this, case-insensitive (e.g. nvidia, radeon, apple, llvmpipe); empty: all",
        ),
        ParamDoc::new(
            "device",
            "0",
            "position of the adapter among those matching, high-performance first (discrete, integrated, virtual, CPU)",
        ),
        ParamDoc::new(
            "max_binding_mib",
            "0",
            "largest storage binding to plan vectors with, MiB (0: the device's own limit); smaller splits vectors into more chunks",
        ),
        ParamDoc::new(
            "threads",
            "0",
            "threads of the backend's host pool (gathering h; the G1 MSMs until the device MSM lands), 0: one per core",
        ),
    ];

    fn new(params: &Params<'_>) -> Result<Self, AbiError> {
        let config = config_from(params)?;
        let threads: usize = params.get("threads")?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("cuzk-wgpu-{i}"))
            .build()
            .map_err(|e| {
                AbiError::other(format!("could not build the backend's thread pool: {e}"))
            })?;
        let backend = WgpuBackend::new(&config, Arc::new(pool))
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

    fn device_count(&self) -> Result<u32, AbiError> {
        Ok(self.backend.device_count())
    }

    fn forget_bases(&self, host: &[HostRangeC]) -> Result<u64, AbiError> {
        let ranges: Vec<std::ops::Range<usize>> = host
            .iter()
            .map(|r| r.start as usize..r.end as usize)
            .collect();
        Ok(self.backend.forget_bases(&ranges))
    }
}

/// The typed configuration from the parameters.
fn config_from(params: &Params<'_>) -> Result<WgpuConfig, AbiError> {
    let mib: u64 = params.get("max_binding_mib")?;
    Ok(WgpuConfig {
        adapter: params.text("adapter").to_owned(),
        device: params.get("device")?,
        max_binding_bytes: mib << 20,
        int64_products: None,
    })
}

cuzk_plugin_api::export_plugin! {
    kind: backend,
    name: "wgpu",
    description: "the portable GPU backend: H (NTTs in WGSL) on any Vulkan, Metal or DX12 device through wgpu; G1 MSMs through its MSM seam",
    type: Wgpu,
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_plugin_api::Param;

    #[test]
    fn parameters_become_the_config() {
        let declared = <Wgpu as BackendPlugin>::PARAMS;
        let none: [Param<'_>; 0] = [];
        let defaults = config_from(&Params::new(&none, declared).unwrap()).unwrap();
        assert_eq!(defaults, WgpuConfig::default());
        let given = [
            Param::new("adapter", "llvmpipe"),
            Param::new("device", "1"),
            Param::new("max_binding_mib", "64"),
        ];
        let c = config_from(&Params::new(&given, declared).unwrap()).unwrap();
        assert_eq!(
            c,
            WgpuConfig {
                adapter: "llvmpipe".into(),
                device: 1,
                max_binding_bytes: 64 << 20,
                int64_products: None,
            }
        );
        let bad = [Param::new("device", "first")];
        assert!(config_from(&Params::new(&bad, declared).unwrap()).is_err());
    }
}
