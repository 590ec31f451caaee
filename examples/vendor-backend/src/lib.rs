//! A template backend plugin for cuzk: everything but the device code.
//!
//! It declares parameters, answers the capability handshake with its devices,
//! tracks resident bases per parameter-set id, and checks the shape of every job;
//! `prove_partition` then says that the computation is not written yet. Replace
//! `compute` with calls into your device library. Keep the rules of the ABI: no
//! panic needs handling (the glue catches them), but never let a device error abort
//! the process; return it as an `AbiError`.

use std::collections::HashMap;
use std::sync::Mutex;

use cuzk_plugin_api::abi_stable::std_types::{RString, RVec};
use cuzk_plugin_api::{
    AbiError, BackendCaps, BackendPlugin, BaseQuery, BasesC, DeviceInfoC, ParamDoc, Params,
    PartitionJobC, PartitionResultC, CURVE,
};

pub struct VendorBackend {
    devices: Vec<(String, u64)>,
    /// Parameter-set id → the queries uploaded under it. A real backend would keep
    /// device buffers here.
    resident: Mutex<HashMap<u64, Vec<BaseQuery>>>,
}

impl BackendPlugin for VendorBackend {
    const PARAMS: &'static [ParamDoc] = &[
        ParamDoc::new("devices", "1", "how many devices to drive"),
        ParamDoc::new("memory_gib", "16", "memory per device, GiB"),
    ];

    fn new(params: &Params<'_>) -> Result<Self, AbiError> {
        let n: usize = params.get("devices")?;
        let gib: u64 = params.get("memory_gib")?;
        Ok(Self {
            devices: (0..n)
                .map(|i| (format!("example device {i}"), gib << 30))
                .collect(),
            resident: Mutex::new(HashMap::new()),
        })
    }

    fn capabilities(&self) -> Result<BackendCaps, AbiError> {
        Ok(BackendCaps {
            name: RString::from("vendor-example"),
            curve: RString::from(CURVE),
            max_log_domain: 27,
            g2: false,
            resident_bases: true,
            devices: self
                .devices
                .iter()
                .map(|(name, mem)| DeviceInfoC {
                    name: RString::from(name.as_str()),
                    total_memory: *mem,
                    free_memory: *mem,
                })
                .collect::<RVec<_>>(),
        })
    }

    fn upload_bases(&self, id: u64, query: BaseQuery, bases: BasesC<'_>) -> Result<(), AbiError> {
        let g2 = query == BaseQuery::B_G2;
        if (g2 && !bases.g1.is_empty()) || (!g2 && !bases.g2.is_empty()) {
            return Err(AbiError::shape("bases of the wrong group for the query"));
        }
        let mut r = self
            .resident
            .lock()
            .map_err(|_| AbiError::other("poisoned"))?;
        r.entry(id).or_default().push(query);
        Ok(())
    }

    fn release_bases(&self, id: u64) -> Result<(), AbiError> {
        let mut r = self
            .resident
            .lock()
            .map_err(|_| AbiError::other("poisoned"))?;
        match r.remove(&id) {
            Some(_) => Ok(()),
            None => Err(AbiError::other(format!(
                "nothing is resident under id {id}"
            ))),
        }
    }

    fn prove_partition(&self, job: PartitionJobC<'_>) -> Result<PartitionResultC, AbiError> {
        let n = job.abc.a.len();
        if job.abc.b.len() != n || job.abc.c.len() != n {
            return Err(AbiError::shape("a, b and c have different lengths"));
        }
        let domain = n.max(1).next_power_of_two();
        if job.h_bases.len() != domain - 1 {
            return Err(AbiError::shape(format!(
                "{} h bases for a domain of {domain}",
                job.h_bases.len()
            )));
        }
        compute(job)
    }
}

/// Where the device work goes: upload `a, b, c` (then drop them: that frees the
/// host's memory at once), three NTTs and the H MSM, then the L, A and B_G1 split
/// MSMs (ones summed, tail through Pippenger), results back as Jacobian points.
fn compute(_job: PartitionJobC<'_>) -> Result<PartitionResultC, AbiError> {
    Err(AbiError::unsupported(
        "the vendor example is a template: its device code is not written",
    ))
}

cuzk_plugin_api::export_plugin! {
    kind: backend,
    name: "vendor_example",
    description: "template for an out-of-tree backend (no device code)",
    type: VendorBackend,
}
