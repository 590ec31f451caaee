//! The planner: cuzk's settings for the hardware it finds, as a pure function.
//!
//! [`plan`] takes a hardware description ([`Hardware`]: device memory and count,
//! host memory and cgroup limit, cores, whether the parameters are memory-mapped),
//! the shape of a kind to serve ([`Shape`]) and the knobs the user gave
//! ([`Given`]), and returns a [`Plan`]: where `a, b, c` are evaluated, what stays
//! resident on the device, the streamed chunk size, the NTT kernel, how witnesses
//! and streamed bases are staged, the GPU workers and synthesis jobs, the engine's
//! memory budget, where the streamed sets are read from, and the s/proof to expect
//! with its basis.
//!
//! **Central choice: the memory arithmetic is not the planner's own.** What fits
//! on the device is the CUDA backend's `footprint` module, the functions the
//! backend itself plans every partition with (`CudaBackend::prove`); what a
//! partition holds on the host is the scheduler's `partition_bytes_of`, the
//! budget's charge; the budget's total is `MemoryBudget::total_for_limit`. So a
//! plan that says "fits" is one the backend and the budget will admit, and a change
//! to either's arithmetic changes the plans with it. Only the speed model is the
//! planner's: a few measured figures (each cited where it is defined) and PCIe.
//!
//! What stays resident: the compiled R1CS first, then the parameters' bases. The
//! R1CS (6.9 GiB at the 32 GiB PoRep shape) lets the device evaluate `a, b, c`;
//! without it the host's spmv costs ~60 core-s a partition and 12.5 GB of upload
//! (issue 33: 43.1 s/proof against 26.5 on the same H100 with 16 cores), while
//! all 47 GB of PoRep's bases, streamed, cost ~0.95 s a partition of PCIe (the
//! H100's 2.47 s a partition against the H200's 1.42 s, ~10% of which is the
//! card). Which base sets stay resident and whether H takes three or two buffers is
//! `footprint::place`, the backend's own choice (the least-cost subset), so the
//! plan's resident sets are the ones the backend will keep.
//!
//! Host memory: decoded parameters are anonymous memory, counted whole in the
//! budget. Parameters memory-mapped from points files ([`Hardware::mapped`]:
//! `--points-dir`, `[daemon] points_dir`, `cuzk_params::points`) are page cache
//! instead, which the budget does not charge (`Srs::host_bytes`): the sets the
//! device keeps are read once at upload and may then be dropped, and the sets it
//! streams are read again every partition, from the page cache where the plan
//! leaves it room for them (a budget cut by their bytes) or else from disk, at
//! [`DISK_READ_BYTES_PER_S`] (an assumption; `cuzk plan --disk-read-gbps`), which
//! the expected s/proof counts. So a 64 GiB host runs a 32 GiB PoRep sector on a
//! card that keeps the bases, and on a card that streams them pays for the disk.
//!
//! How streamed sets go up (`stream_staging`) is planned with the host: `register`
//! page-locks each streamed set in place and DMAs from it (the faster stream), but
//! for a mapped set that pins the points file's pages, memory the kernel can no
//! longer drop and the budget does not see; the plan then cuts the budget by them,
//! and takes `register` only where what is left still runs at least as fast as
//! `copy`, which pins only two staging buffers and leaves the sets to the page
//! cache (or the disk). Decoded sets are anonymous memory already: `register`
//! costs them nothing. See `host.rs`.
//!
//! A process that serves several shapes (the daemon, the queue worker) has one set
//! of knobs for all: [`plan_served`] plans each shape, combines the knobs towards
//! the choice safe for every one and plans each again with them (`served.rs` gives
//! the rule, knob by knob).
//!
//! Where decoded parameters do not fit, or run slower than mapped ones would, the
//! plan says what mapped ones would give ([`Plan::with_points_dir`]); it does not
//! map them by itself: a points file is a 44 GiB file written once per set, in a
//! directory only the operator can choose.
#![forbid(unsafe_code)]

use cuzk_cuda::footprint;
use cuzk_cuda::HBuffers;
use cuzk_scheduler::MemoryBudget;
use serde::Serialize;

mod host;
mod served;
mod shape;
mod speed;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_mapped;
#[cfg(test)]
mod tests_served;

/// The backend's knob types the plan sets.
pub use cuzk_cuda::{NttKernel, StreamStaging, WitnessStaging};
pub use host::{HostPlan, StreamedFrom};
pub use served::{plan_served, Served};
pub use shape::{Counts, Kind, Measured, Query, Shape};

/// Host-to-device bytes a second: PCIe Gen5 x16 with page-locked buffers
/// (~55 GB/s measured on the H200, REFERENCE.md; 50 to leave room).
pub const PCIE_BYTES_PER_S: f64 = 50e9;
/// Device seconds a streamed chunk costs beyond its bytes: the backend's own
/// figure (`footprint::CHUNK_COST_BYTES`, measured on the H100) over PCIe.
pub const STREAM_CHUNK_S: f64 = footprint::CHUNK_COST_BYTES as f64 / PCIE_BYTES_PER_S;
/// Device memory the CUDA context takes before the backend measures what is free
/// (an assumption: ~0.6 GiB on the H100 and H200).
pub const DEVICE_CONTEXT_BYTES: u64 = 640 << 20;
/// The CUDA backend's default `reserve_gib`.
pub const DEFAULT_RESERVE_GIB: u64 = 2;
/// An H100's device time against the H200's for the same resident partition: the
/// kernel table's MSMs are ~10% slower (issue 33).
pub const H100_VS_H200: f64 = 1.10;
/// Device seconds the `r2wf` NTT kernel adds a 2^27 partition against `r2wg`:
/// 65.5 against 62.0 ms a 2^27 NTT on the H200 (`NttKernel::DEFAULT`'s note), for
/// the seven transforms of H.
pub const R2WF_PENALTY_S_2_27: f64 = 7.0 * 0.0035;
/// Bytes a second the backend's copy threads move streamed bases into its
/// page-locked staging buffers (`stream_staging = "copy"`), the copy stream's
/// bound: a 2^24 PoRep-shaped partition with every set streamed in 2^22 chunks
/// took 379.3 ms copied against 282.1 registered (H100 host, 8 copy threads,
/// BENCHMARKS.md 2026-12-06): ~6.0 GB in the 225 ms left after the chunks' cost,
/// ~27 GB/s (the config's note says 23-30 on the H200's host); 25 to be safe.
pub const COPY_STAGING_BYTES_PER_S: f64 = 25e9;
/// Bytes a second a mapped points file is read back from disk where the page
/// cache cannot keep the streamed sets: an assumption, not measured here (a
/// datacenter NVMe drive read through page faults with readahead by the copy
/// threads; a SATA SSD gives a quarter of it). `cuzk plan --disk-read-gbps`
/// (`Hardware::disk_read_bytes_per_s`) sets another.
pub const DISK_READ_BYTES_PER_S: f64 = 2e9;
/// The backend's default `copy_threads`, busy while a chunk is copied.
pub(crate) const COPY_THREADS: f64 = 8.0;
const GIB: u64 = 1 << 30;
/// How a plan that fails for host memory says so.
pub(crate) const HOST_SHORT: &str = "host memory";
/// How fast a GPU worker stages a partition's host data before the lock (a
/// witness copy into page-locked memory): 4.17 GB in 402 ms on the H200.
pub(crate) const STAGING_BYTES_PER_S: f64 = 10.4e9;

/// The machine a plan is for.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hardware {
    /// Bytes of memory of each device (the card's total); 0 devices: CPU only.
    pub device_memory: u64,
    /// Bytes free on each device when the backend opens it, where the driver was
    /// asked; else the total less [`DEVICE_CONTEXT_BYTES`].
    pub device_free: Option<u64>,
    pub devices: u32,
    /// Device time against the H200's (1.0); unset: an H200 from 100 GiB up, else
    /// an H100's [`H100_VS_H200`] (consumer cards are not measured).
    pub device_speed: Option<f64>,
    /// The host's `MemTotal`.
    pub host_memory: u64,
    /// This process's cgroup memory limit, if any.
    pub cgroup_limit: Option<u64>,
    pub cores: u32,
    /// Whether the parameters are memory-mapped from points files (`--points-dir`,
    /// `[daemon] points_dir`): page cache the kernel may drop and read back, not
    /// anonymous memory the budget charges.
    pub mapped: bool,
    /// Bytes a second the disk under the points files reads back what the page
    /// cache dropped; unset: [`DISK_READ_BYTES_PER_S`].
    pub disk_read_bytes_per_s: Option<f64>,
}

impl Hardware {
    /// The memory limit the budget plans from: `MemTotal` or the cgroup's, the
    /// smaller.
    pub fn host_limit(&self) -> u64 {
        self.cgroup_limit
            .map_or(self.host_memory, |c| c.min(self.host_memory))
    }

    fn device_free(&self) -> u64 {
        self.device_free
            .unwrap_or(self.device_memory.saturating_sub(DEVICE_CONTEXT_BYTES))
    }

    fn disk_read_bytes_per_s(&self) -> f64 {
        self.disk_read_bytes_per_s
            .filter(|b| *b > 0.0)
            .unwrap_or(DISK_READ_BYTES_PER_S)
    }

    fn device_speed(&self) -> f64 {
        self.device_speed
            .unwrap_or(if self.device_memory >= 100 * GIB {
                1.0
            } else {
                H100_VS_H200
            })
    }
}

/// Knobs set explicitly (in `cuzk.toml` or by flags): each wins over the plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Given {
    pub abc_on_backend: Option<bool>,
    /// The CUDA backend's `stream_chunk` (0: resident where the bases fit).
    pub stream_chunk: Option<usize>,
    pub ntt_kernel: Option<NttKernel>,
    pub witness_staging: Option<WitnessStaging>,
    /// The CUDA backend's `stream_staging`.
    pub stream_staging: Option<StreamStaging>,
    pub reserve_gib: Option<u64>,
    pub synth_jobs: Option<usize>,
    pub gpu_workers_per_device: Option<usize>,
    /// The engine's memory budget in bytes.
    pub memory_budget: Option<u64>,
}

/// Whether a knob's value was planned or given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Planned,
    Given,
}

/// A knob's value and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Knob<T> {
    pub value: T,
    pub source: Source,
}

impl<T: Copy> Knob<T> {
    fn of(given: Option<T>, planned: T) -> Self {
        match given {
            Some(value) => Knob {
                value,
                source: Source::Given,
            },
            None => Knob {
                value: planned,
                source: Source::Planned,
            },
        }
    }
}

/// The settings a plan makes: the engine's and the CUDA backend's knobs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Knobs {
    pub abc_on_backend: Knob<bool>,
    /// 0: the bases resident where they fit (else streamed in chunks of up to
    /// 2^23 points); N: always streamed, in chunks of N.
    pub stream_chunk: Knob<usize>,
    pub ntt_kernel: Knob<NttKernel>,
    pub witness_staging: Knob<WitnessStaging>,
    /// How streamed sets go up: `register` where nothing streams (the backend's
    /// default, which then does nothing).
    pub stream_staging: Knob<StreamStaging>,
    pub reserve_gib: Knob<u64>,
    pub synth_jobs: Knob<usize>,
    pub gpu_workers_per_device: Knob<usize>,
    pub memory_budget: Knob<u64>,
}

/// What the plan puts on each device.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DevicePlan {
    /// Bytes the backend plans with: free at start less the reserve.
    pub budget: u64,
    pub r1cs_resident: bool,
    /// H, L, A, B_G1, B_G2: resident (else streamed).
    pub bases_resident: [bool; 5],
    /// H's buffers: three, or two (c evaluated into b's after a·b) where a
    /// streamed partition has no room for a third.
    pub h_buffers: HBuffers,
    /// Bytes kept across partitions (R1CS and resident bases).
    pub resident_bytes: u64,
    /// Bytes a partition needs beside them (working memory, witness, chunk
    /// buffers): the backend's own count.
    pub partition_bytes: u64,
    /// Points a streamed chunk of H's bases holds (the backend's `stream_chunk`
    /// arithmetic), where any set streams.
    pub chunk: Option<usize>,
    /// Points a streamed chunk of a split query's bases holds (at least
    /// `chunk`: `footprint::Placement::split_chunk`), where any set streams.
    pub split_chunk: Option<usize>,
    /// Bytes streamed over PCIe a partition (bases, and `a, b, c` from the host).
    pub transfer_bytes: u64,
}

impl DevicePlan {
    /// Chunks a partition streams: each set not resident, H in chunks of
    /// `chunk`, the split queries in chunks of `split_chunk`.
    pub fn chunks(&self, shape: &Shape) -> u64 {
        let Some(chunk) = self.chunk else { return 0 };
        let split = self.split_chunk.unwrap_or(chunk);
        let lens = [
            shape.h,
            shape.l.bases,
            shape.a.bases,
            shape.b_g1.bases,
            shape.b_g2.bases,
        ];
        lens.iter()
            .zip(self.bases_resident)
            .enumerate()
            .filter(|(_, (_, r))| !r)
            .map(|(k, (n, _))| n.div_ceil(if k == 0 { chunk } else { split }.max(1)) as u64)
            .sum()
    }
}

/// What decides the pace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    Device,
    Host,
    /// One partition in flight: synthesis and the device take turns.
    Serial,
}

/// The speed to expect and how it was reckoned.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Expected {
    pub s_per_proof: f64,
    /// Device seconds a partition (all devices' work, one device's time).
    pub device_s: f64,
    /// Host seconds a partition on all the cores.
    pub host_s: f64,
    pub bound: Bound,
    pub basis: Vec<String>,
}

/// The plan for one kind on one machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub kind: Kind,
    pub hardware: Hardware,
    pub knobs: Knobs,
    pub device: Option<DevicePlan>,
    pub host: HostPlan,
    pub expected: Option<Expected>,
    /// Why nothing runs, where nothing does (the given knobs leave no way, or the
    /// machine is too small).
    pub fails: Option<String>,
    /// Where the parameters are decoded: the s/proof this machine would be
    /// planned at with them memory-mapped from points files (`--points-dir`),
    /// where that runs and this plan does not, or runs at least 5% faster.
    pub with_points_dir: Option<f64>,
}

impl Plan {
    pub fn runs(&self) -> bool {
        self.fails.is_none()
    }
}

/// One way to run a kind, before it is checked and timed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Way {
    pub(crate) abc_on_backend: bool,
    stream_chunk: usize,
    ntt: NttKernel,
    pub(crate) staging: WitnessStaging,
    pub(crate) workers: usize,
    pub(crate) stream_staging: StreamStaging,
    /// Mapped parameters copied through staging: 0, the budget's default total;
    /// N, the budget cut to N partitions in flight, to leave the page cache room
    /// for the streamed sets.
    pub(crate) partitions_cap: u64,
}

/// A way that fits, with what it needs and its speed.
#[derive(Clone, Debug)]
struct Fitted {
    way: Way,
    device: Option<DevicePlan>,
    host: HostPlan,
    expected: Expected,
}

/// Forced chunks (`stream_chunk`, points) the planner tries after the backend's
/// automatic choice (the largest chunk up to 2^23 that fits the device,
/// `footprint::auto_chunk`): a smaller chunk needs less page-locked host memory
/// (two staging buffers of a chunk), which a small host may lack; down to 2^16,
/// where a chunk's MSM is still 2^16 points of work a launch.
const FORCED_CHUNKS: [usize; 7] = [
    1 << 22,
    1 << 21,
    1 << 20,
    1 << 19,
    1 << 18,
    1 << 17,
    1 << 16,
];

/// Budgets the planner tries for mapped parameters that stream (partitions in
/// flight; 0: the budget's default total): fewer partitions leave the page cache
/// more of the streamed sets.
const PARTITION_CAPS: [u64; 5] = [0, 1, 2, 3, 4];

/// Plans `shape` on `hw`, the `given` knobs kept as they are.
pub fn plan(shape: &Shape, hw: &Hardware, given: &Given) -> Plan {
    let mut p = plan_as_is(shape, hw, given);
    if !hw.mapped {
        let mapped = plan_as_is(
            shape,
            &Hardware {
                mapped: true,
                ..hw.clone()
            },
            given,
        );
        p.with_points_dir = match (&p.expected, &mapped.expected) {
            (None, Some(m)) => Some(m.s_per_proof),
            (Some(e), Some(m)) if m.s_per_proof < e.s_per_proof * 0.95 => Some(m.s_per_proof),
            _ => None,
        };
    }
    p
}

/// [`plan`] with the parameters as `hw` has them.
fn plan_as_is(shape: &Shape, hw: &Hardware, given: &Given) -> Plan {
    let reserve_gib = given.reserve_gib.unwrap_or(DEFAULT_RESERVE_GIB);
    let limit = hw.host_limit();
    let has_device = hw.devices > 0 && hw.device_memory > 0;
    let device_budget = hw.device_free().saturating_sub(reserve_gib * GIB);

    let choices = |g: Option<bool>| match g {
        Some(v) => vec![v],
        None => vec![true, false],
    };
    let chunks: Vec<usize> = match given.stream_chunk {
        Some(c) => vec![c],
        None => std::iter::once(0).chain(FORCED_CHUNKS).collect(),
    };
    let ntts = match given.ntt_kernel {
        Some(k) => vec![k],
        None => vec![NttKernel::Radix2WarpGlobal, NttKernel::Radix2WarpFast],
    };
    let stagings = match given.witness_staging {
        Some(s) => vec![s],
        None => vec![WitnessStaging::Copy, WitnessStaging::Register],
    };
    let workers = match given.gpu_workers_per_device {
        Some(w) => vec![w.max(1)],
        None => vec![2, 1],
    };
    let abcs = if has_device {
        choices(given.abc_on_backend)
    } else {
        vec![false]
    };

    let mut best: Option<Fitted> = None;
    let mut shortfall: Option<String> = None;
    // The first way's reason, unless a later way got past the device and fell
    // short on the host: that one says what the machine lacks.
    let mut note = |why: String| match &shortfall {
        Some(s) if s.starts_with(HOST_SHORT) => {}
        _ if why.starts_with(HOST_SHORT) || shortfall.is_none() => shortfall = Some(why),
        _ => {}
    };
    for &abc_on_backend in &abcs {
        for &stream_chunk in &chunks {
            for &ntt in &ntts {
                let mut way = Way {
                    abc_on_backend,
                    stream_chunk,
                    ntt,
                    staging: WitnessStaging::Copy,
                    workers: 2,
                    stream_staging: StreamStaging::Register,
                    partitions_cap: 0,
                };
                let device = if has_device {
                    match fit_device(shape, way, device_budget) {
                        Ok(d) => Some(d),
                        Err(why) => {
                            note(why);
                            continue;
                        }
                    }
                } else {
                    None
                };
                let streams = host::streamed_bytes(shape, device.as_ref()) > 0;
                // Register first: where both run alike, the backend's default.
                let stream_stagings = match given.stream_staging {
                    Some(s) => vec![s],
                    None if device.is_some() && streams => {
                        vec![StreamStaging::Register, StreamStaging::Copy]
                    }
                    None => vec![StreamStaging::Register],
                };
                let caps = if hw.mapped && streams && given.memory_budget.is_none() {
                    PARTITION_CAPS.to_vec()
                } else {
                    vec![0]
                };
                for &staging in &stagings {
                    for &w in &workers {
                        for &stream_staging in &stream_stagings {
                            for &partitions_cap in &caps {
                                way.staging = staging;
                                way.workers = w;
                                way.stream_staging = stream_staging;
                                way.partitions_cap = partitions_cap;
                                match fit(shape, hw, way, device.as_ref(), given.memory_budget) {
                                    Ok(f) => {
                                        // Strictly faster only: ties keep the earlier
                                        // way (device spmv, resident, larger chunks,
                                        // r2wg, copy, two workers, register, the
                                        // budget's default: the measured defaults).
                                        let better = best.as_ref().is_none_or(|b| {
                                            f.expected.s_per_proof < b.expected.s_per_proof * 0.999
                                        });
                                        if better {
                                            best = Some(f);
                                        }
                                    }
                                    Err(why) => note(why),
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    let planned_way = best.as_ref().map(|f| f.way).unwrap_or(Way {
        abc_on_backend: has_device,
        stream_chunk: 0,
        ntt: NttKernel::DEFAULT,
        staging: WitnessStaging::Copy,
        workers: 2,
        stream_staging: StreamStaging::Register,
        partitions_cap: 0,
    });
    let synth_planned = best
        .as_ref()
        .map_or(1, |f| synth_jobs(shape, hw, &f.host, f.way));
    let budget_planned = best
        .as_ref()
        .map_or_else(|| MemoryBudget::total_for_limit(limit), |f| f.host.budget);
    let knobs = Knobs {
        abc_on_backend: Knob::of(given.abc_on_backend, planned_way.abc_on_backend),
        stream_chunk: Knob::of(given.stream_chunk, planned_way.stream_chunk),
        ntt_kernel: Knob::of(given.ntt_kernel, planned_way.ntt),
        witness_staging: Knob::of(given.witness_staging, planned_way.staging),
        stream_staging: Knob::of(given.stream_staging, planned_way.stream_staging),
        reserve_gib: Knob::of(given.reserve_gib, DEFAULT_RESERVE_GIB),
        synth_jobs: Knob::of(given.synth_jobs, synth_planned),
        gpu_workers_per_device: Knob::of(given.gpu_workers_per_device, planned_way.workers),
        memory_budget: Knob::of(given.memory_budget, budget_planned),
    };
    match best {
        Some(f) => Plan {
            kind: shape.kind,
            hardware: hw.clone(),
            knobs,
            device: f.device,
            host: f.host,
            expected: Some(f.expected),
            fails: None,
            with_points_dir: None,
        },
        None => Plan {
            kind: shape.kind,
            hardware: hw.clone(),
            knobs,
            device: None,
            host: HostPlan::nothing(shape, limit, budget_planned, hw.mapped),
            expected: None,
            fails: Some(shortfall.unwrap_or_else(|| "no way to run was tried".into())),
            with_points_dir: None,
        },
    }
}

/// Synthesis jobs: the partitions the budget admits beyond those the GPU workers
/// hold, at most a proof's partitions and 3/8 of the cores (6 on 16 cores, the
/// H200 stream's setting, BENCHMARKS.md 2026-12-03), at least one.
fn synth_jobs(shape: &Shape, hw: &Hardware, host: &HostPlan, way: Way) -> usize {
    let held_by_gpu = (way.workers * hw.devices.max(1) as usize) as u64;
    let room = host.partitions_in_flight.saturating_sub(held_by_gpu).max(1) as usize;
    room.min(shape.partitions as usize)
        .min((hw.cores as usize * 3 / 8).max(1))
        .max(1)
}

/// Checks `way` against the host memory, `device` placed already, and times it.
fn fit(
    shape: &Shape,
    hw: &Hardware,
    way: Way,
    device: Option<&DevicePlan>,
    given_budget: Option<u64>,
) -> Result<Fitted, String> {
    let host = host::fit_host(shape, hw, way, device, given_budget)?;
    let expected = speed::expect(shape, hw, way, device, &host);
    Ok(Fitted {
        way,
        device: device.cloned(),
        host,
        expected,
    })
}

/// The device side, as the backend decides it, by the backend's own function
/// (`footprint::place`): the compiled shape first (it cannot be streamed: the
/// room left beside it is what the bases and the partition share), then every
/// base set resident where all fit beside the whole-query working memory, else the
/// sets that pay most a byte kept and the rest streamed in chunks.
fn fit_device(shape: &Shape, way: Way, budget: u64) -> Result<DevicePlan, String> {
    let counts = shape.counts();
    let witness = if way.abc_on_backend {
        shape.witness_bytes()
    } else {
        0
    };
    let r1cs = if way.abc_on_backend {
        shape.r1cs_device_bytes()
    } else {
        0
    };
    let sets = shape.base_bytes();
    let abc_upload = if way.abc_on_backend {
        0
    } else {
        shape.abc_bytes()
    };
    let placed = footprint::place(&footprint::PlaceInput {
        kernel: way.ntt,
        // The backend's default MSM launch parameters (the planner has no MSM
        // knobs: `CudaTuning`'s experiments are not planned for).
        tuning: &cuzk_cuda::MsmTuning::DEFAULT,
        counts: &counts,
        sets,
        witness,
        room: budget.saturating_sub(r1cs),
        forced_chunk: (way.stream_chunk > 0).then_some(way.stream_chunk),
    })
    .map_err(|need| {
        if r1cs > 0 {
            format!(
                "the compiled R1CS with the partition's working memory needs {} bytes of device memory but only {budget} are available",
                r1cs + need
            )
        } else {
            format!(
                "the partition (H buffers + MSM scratch + two chunks of streamed bases) needs {need} bytes of device memory but only {budget} are available"
            )
        }
    })?;
    let kept = placed.kept_bytes(sets);
    Ok(DevicePlan {
        budget,
        r1cs_resident: way.abc_on_backend,
        bases_resident: placed.resident,
        h_buffers: placed.h_buffers,
        resident_bytes: r1cs + kept,
        partition_bytes: placed.need - kept,
        chunk: placed.chunk,
        split_chunk: placed.split_chunk,
        transfer_bytes: placed.streamed_bytes(sets) + abc_upload,
    })
}
