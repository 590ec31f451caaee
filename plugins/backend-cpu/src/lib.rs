//! Backend plugin `cpu`: [`cuzk_gpu_backend::CpuBackend`] behind the plugin ABI, on a
//! rayon pool of its own (`threads`).
//!
//! It exists so that every path through the plugin machinery can be checked against
//! the in-process backend bit for bit, and so that the cost of the crossing can be
//! measured with a backend whose work is known.
//!
//! The crossing is `cuzk_plugin_api::stages`: the splits are rebuilt from their
//! parts, checked, and `a, b, c` are copied once into this library's vectors (the
//! CPU backend transforms them in place). A partition handed over as its witness
//! (`prove_partition_witness`) has `a, b, c` evaluated here, on this plugin's pool,
//! after `spmv_slices` validated the host's R1CS.

use std::sync::Arc;

use cuzk_gpu_backend::{CpuBackend, GpuBackend};
use cuzk_plugin_api::{
    stages, AbcEvalC, AbcRefC, AbiError, BackendCaps, BackendPlugin, HostRangeC, ParamDoc, Params,
    PartitionJobC, PartitionJobRefC, PartitionResultC, ScalarRepr, StageGuard, WitnessJobRefC,
};

pub struct Cpu {
    backend: CpuBackend,
}

impl BackendPlugin for Cpu {
    const PARAMS: &'static [ParamDoc] = &[
        ParamDoc::new(
            "threads",
            "0",
            "threads of the backend's rayon pool (0: one per core)",
        ),
        ParamDoc::new(
            "device",
            "0",
            "the device ordinal this instance stands for (`[engine] devices` opens one instance per device; the CPU computes the same on each)",
        ),
        ParamDoc::new(
            "tables_mib",
            "2048",
            "memory for fixed-base tables of the bases proven with, made while idle (0: none; see CpuBackend::with_tables)",
        ),
        ParamDoc::new(
            "devices",
            "1",
            "how many devices it reports (with `[engine] devices` unset, one instance is opened per device: the several-device path without a GPU)",
        ),
    ];

    fn new(params: &Params<'_>) -> Result<Self, AbiError> {
        let threads: usize = params.get("threads")?;
        // A label only: checked to be an ordinal, so a typo is an error.
        let _device: u32 = params.get("device")?;
        let devices: u32 = params.get("devices")?;
        let tables_mib: usize = params.get("tables_mib")?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("cuzk-cpu-backend-{i}"))
            .build()
            .map_err(|e| {
                AbiError::other(format!("could not build the backend's thread pool: {e}"))
            })?;
        Ok(Self {
            backend: CpuBackend::new(Arc::new(pool))
                .with_device_count(devices)
                .with_tables(tables_mib << 20),
        })
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

    /// The same pool, as the in-process CPU backend's sibling.
    fn open_sibling(&self) -> Result<Option<Self>, AbiError> {
        Ok(Some(Self {
            backend: self.backend.clone(),
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

    fn prove_partition_witness(
        &self,
        job: WitnessJobRefC<'_>,
    ) -> Result<PartitionResultC, AbiError> {
        stages::prove_partition_witness(job, |job| self.backend.prove_partition_witness(job))
    }

    fn device_count(&self) -> Result<u32, AbiError> {
        Ok(self.backend.device_count())
    }

    /// Drops the fixed-base tables of those ranges.
    fn forget_bases(&self, host: &[HostRangeC]) -> Result<u64, AbiError> {
        let ranges: Vec<std::ops::Range<usize>> = host
            .iter()
            .map(|r| r.start as usize..r.end as usize)
            .collect();
        Ok(self.backend.forget_bases(&ranges))
    }
}

cuzk_plugin_api::export_plugin! {
    kind: backend,
    name: "cpu",
    description: "the CPU reference backend (NTT + MSMs on a rayon pool of its own)",
    type: Cpu,
}
