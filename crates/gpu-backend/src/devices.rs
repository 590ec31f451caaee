//! Several devices behind one backend: one backend instance per device.
//!
//! A backend instance drives one device (the CUDA backend opens one context and
//! keeps one set of resident bases per instance), so several devices are several
//! instances. [`DeviceSet`] holds them with their ordinals; the engine asks it for
//! its lanes ([`GpuBackend::device_lanes`]) and runs workers, a lock and a
//! TIMELINE lane per device. Called directly as a [`GpuBackend`], the set uses its
//! first lane (the first device of the list it was given, not device 0).

use std::sync::Arc;

use blstrs::Scalar;

use crate::{
    AbcEval, AbcRef, BackendError, Capabilities, GpuBackend, PartitionJob, PartitionJobRef,
    PartitionResult, SplitRef, Staged, WitnessJobRef,
};

/// One device's backend and the ordinal it was opened on.
#[derive(Clone)]
pub struct DeviceLane {
    /// The device's ordinal (CUDA's numbering; for CPU lanes, their index). Locks
    /// and TIMELINE events are keyed by it.
    pub ordinal: u32,
    pub backend: Arc<dyn GpuBackend>,
}

impl std::fmt::Debug for DeviceLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceLane")
            .field("ordinal", &self.ordinal)
            .field("backend", &self.backend.capabilities().name)
            .finish()
    }
}

/// Why a [`DeviceSet`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DeviceSetError {
    #[error("a device set needs at least one device")]
    Empty,
    #[error("device {0} is listed twice")]
    Duplicate(u32),
    #[error(
        "the devices' backends differ ({first} offers {first_caps}, {other} offers {other_caps}); one set runs one kind of backend"
    )]
    Mixed {
        first: u32,
        first_caps: String,
        other: u32,
        other_caps: String,
    },
}

/// A backend per device, as one [`GpuBackend`].
#[derive(Clone, Debug)]
pub struct DeviceSet {
    lanes: Vec<DeviceLane>,
}

impl DeviceSet {
    /// The set of `lanes`, in the order given. Every lane runs the same kind of
    /// backend (same name, G2 support and domain limit): a partition may run on any.
    pub fn new(lanes: Vec<DeviceLane>) -> Result<Self, DeviceSetError> {
        let Some(first) = lanes.first() else {
            return Err(DeviceSetError::Empty);
        };
        let fc = first.backend.capabilities();
        let describe = |c: &Capabilities| format!("{} g2={} 2^{}", c.name, c.g2, c.max_log_domain);
        for (i, lane) in lanes.iter().enumerate() {
            if lanes[..i].iter().any(|l| l.ordinal == lane.ordinal) {
                return Err(DeviceSetError::Duplicate(lane.ordinal));
            }
            let c = lane.backend.capabilities();
            if (c.name.as_str(), c.g2, c.max_log_domain)
                != (fc.name.as_str(), fc.g2, fc.max_log_domain)
            {
                return Err(DeviceSetError::Mixed {
                    first: first.ordinal,
                    first_caps: describe(&fc),
                    other: lane.ordinal,
                    other_caps: describe(&c),
                });
            }
        }
        Ok(Self { lanes })
    }

    pub fn lanes(&self) -> &[DeviceLane] {
        &self.lanes
    }

    fn first(&self) -> &dyn GpuBackend {
        self.lanes[0].backend.as_ref()
    }
}

impl GpuBackend for DeviceSet {
    /// The first lane's, with every lane's devices.
    fn capabilities(&self) -> Capabilities {
        let mut caps = self.first().capabilities();
        caps.devices = self
            .lanes
            .iter()
            .flat_map(|l| l.backend.capabilities().devices)
            .collect();
        caps
    }

    fn stage(&self, abc: AbcRef<'_>) -> Result<Staged, BackendError> {
        self.first().stage(abc)
    }

    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        self.first().prove_partition(job)
    }

    fn prove_partition_ref(
        &self,
        job: PartitionJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        self.first().prove_partition_ref(job)
    }

    fn abc_eval(&self) -> AbcEval {
        self.first().abc_eval()
    }

    fn stage_witness(&self, input: &[Scalar], aux: &[Scalar]) -> Result<Staged, BackendError> {
        self.first().stage_witness(input, aux)
    }

    fn prove_partition_witness(
        &self,
        job: WitnessJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        self.first().prove_partition_witness(job)
    }

    fn stage_splits(&self, splits: &[SplitRef<'_>]) -> Result<Staged, BackendError> {
        self.first().stage_splits(splits)
    }

    fn pinned_host_bytes(&self) -> u64 {
        self.lanes
            .iter()
            .map(|l| l.backend.pinned_host_bytes())
            .sum()
    }

    fn device_lanes(&self) -> Vec<DeviceLane> {
        self.lanes.clone()
    }

    /// The lanes it holds.
    fn device_count(&self) -> u32 {
        self.lanes.len() as u32
    }

    /// Every lane's.
    fn forget_bases(&self, host: &[std::ops::Range<usize>]) -> u64 {
        self.lanes
            .iter()
            .map(|l| l.backend.forget_bases(host))
            .sum()
    }

    /// Every lane's.
    fn settle(&self) {
        for l in &self.lanes {
            l.backend.settle();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;

    fn cpu() -> Arc<dyn GpuBackend> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        Arc::new(CpuBackend::new(Arc::new(pool)))
    }

    #[test]
    fn a_set_keeps_its_order_and_refuses_duplicates_and_empties() {
        let set = DeviceSet::new(vec![
            DeviceLane {
                ordinal: 3,
                backend: cpu(),
            },
            DeviceLane {
                ordinal: 1,
                backend: cpu(),
            },
        ])
        .unwrap();
        let ordinals: Vec<u32> = set.device_lanes().iter().map(|l| l.ordinal).collect();
        assert_eq!(ordinals, [3, 1]);
        assert_eq!(set.capabilities().name, "cpu");
        assert!(cpu().device_lanes().is_empty());
        assert!(matches!(
            DeviceSet::new(Vec::new()),
            Err(DeviceSetError::Empty)
        ));
        let dup = DeviceSet::new(vec![
            DeviceLane {
                ordinal: 2,
                backend: cpu(),
            },
            DeviceLane {
                ordinal: 2,
                backend: cpu(),
            },
        ]);
        assert!(matches!(dup, Err(DeviceSetError::Duplicate(2))));
    }

    #[test]
    fn only_device_errors_are_the_devices() {
        assert!(BackendError::Device("lost".into()).is_device());
        assert!(!BackendError::Rejected("shape".into()).is_device());
        assert!(!BackendError::AbcShape { a: 1, b: 2, c: 3 }.is_device());
    }
}
