//! The planner: cuzk's settings for the hardware it finds, as a pure function.
//!
//! [`plan`] takes a hardware description ([`Hardware`]: device memory and count,
//! host memory and cgroup limit, cores), the shape of a kind to serve ([`Shape`])
//! and the knobs the user gave ([`Given`]), and returns a [`Plan`]: where `a, b,
//! c` are evaluated, what stays resident on the device, the streamed chunk size,
//! the NTT kernel, how witnesses are staged, the GPU workers and synthesis jobs,
//! the engine's memory budget, and the s/proof to expect with its basis.
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
//! Host memory: the parameters are counted whole in the budget, as decoded sets
//! are anonymous memory. Parameters memory-mapped from points files
//! (`--points-dir`, `[daemon] points_dir`: `cuzk_params::points`) are page cache
//! instead, which the budget does not charge (`Srs::host_bytes`); the plan does
//! not model that yet, so where it says a host is short, mapped parameters may
//! still run (reading back from disk what the kernel dropped).
#![forbid(unsafe_code)]

use cuzk_cuda::footprint;
use cuzk_cuda::HBuffers;
use cuzk_scheduler::{partition_bytes_of, Held, MemoryBudget};
use serde::Serialize;

mod shape;
#[cfg(test)]
mod tests;

/// The backend's knob types the plan sets.
pub use cuzk_cuda::{NttKernel, WitnessStaging};
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
/// Most witness copies (`witness_staging = "copy"`) and split buffers the backend
/// keeps per GPU worker.
const COPIES_PER_WORKER: u64 = 1;
/// The split staging buffer's ceiling (`split_upload = "pinned"`).
const SPLIT_STAGING_MAX: u64 = 1 << 30;
const GIB: u64 = 1 << 30;
/// How a plan that fails for host memory says so.
const HOST_SHORT: &str = "host memory";
/// How fast a GPU worker stages a partition's host data before the lock (a
/// witness copy into page-locked memory): 4.17 GB in 402 ms on the H200.
const STAGING_BYTES_PER_S: f64 = 10.4e9;

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
    /// Points a streamed chunk holds (the backend's `stream_chunk` arithmetic),
    /// where any set streams.
    pub chunk: Option<usize>,
    /// Bytes streamed over PCIe a partition (bases, and `a, b, c` from the host).
    pub transfer_bytes: u64,
}

impl DevicePlan {
    /// Chunks a partition streams: each set not resident, in chunks of `chunk`.
    pub fn chunks(&self, shape: &Shape) -> u64 {
        let Some(chunk) = self.chunk else { return 0 };
        let lens = [
            shape.h,
            shape.l.bases,
            shape.a.bases,
            shape.b_g1.bases,
            shape.b_g2.bases,
        ];
        lens.iter()
            .zip(self.bases_resident)
            .filter(|(_, r)| !r)
            .map(|(n, _)| n.div_ceil(chunk.max(1)) as u64)
            .sum()
    }
}

/// What the plan holds in host memory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostPlan {
    /// `MemTotal` or the cgroup limit, the smaller.
    pub limit: u64,
    /// The parameter set's points (counted once).
    pub params_bytes: u64,
    /// What the budget charges a partition (the scheduler's arithmetic).
    pub partition_bytes: u64,
    /// Page-locked buffers the backend keeps (chunk staging, witness copies,
    /// split staging) and their bytes, all devices.
    pub pinned_buffers: u32,
    pub pinned_bytes: u64,
    /// Partitions the budget admits at once beside the parameters and pinned
    /// memory.
    pub partitions_in_flight: u64,
    /// Parameters + partitions in flight + pinned: at most the budget.
    pub peak_bytes: u64,
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
}

impl Plan {
    pub fn runs(&self) -> bool {
        self.fails.is_none()
    }
}

/// One way to run a kind, before it is checked and timed.
#[derive(Clone, Copy, Debug)]
struct Way {
    abc_on_backend: bool,
    stream_chunk: usize,
    ntt: NttKernel,
    staging: WitnessStaging,
    workers: usize,
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

/// Plans `shape` on `hw`, the `given` knobs kept as they are.
pub fn plan(shape: &Shape, hw: &Hardware, given: &Given) -> Plan {
    let reserve_gib = given.reserve_gib.unwrap_or(DEFAULT_RESERVE_GIB);
    let limit = hw.host_limit();
    let memory_budget = given
        .memory_budget
        .unwrap_or_else(|| MemoryBudget::total_for_limit(limit));
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
    for &abc_on_backend in &abcs {
        for &stream_chunk in &chunks {
            for &ntt in &ntts {
                for &staging in &stagings {
                    for &w in &workers {
                        let way = Way {
                            abc_on_backend,
                            stream_chunk,
                            ntt,
                            staging,
                            workers: w,
                        };
                        match fit(shape, hw, way, device_budget, memory_budget) {
                            Ok(f) => {
                                // Strictly faster only: ties keep the earlier way
                                // (device spmv, resident, larger chunks, r2wg,
                                // copy, two workers: the measured defaults).
                                let better = best.as_ref().is_none_or(|b| {
                                    f.expected.s_per_proof < b.expected.s_per_proof * 0.999
                                });
                                if better {
                                    best = Some(f);
                                }
                            }
                            // The first way's reason, unless a later way got past
                            // the device and fell short on the host: that one
                            // says what the machine lacks.
                            Err(why) => match &shortfall {
                                Some(s) if s.starts_with(HOST_SHORT) => {}
                                _ if why.starts_with(HOST_SHORT) || shortfall.is_none() => {
                                    shortfall = Some(why)
                                }
                                _ => {}
                            },
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
    });
    let synth_planned = best
        .as_ref()
        .map_or(1, |f| synth_jobs(shape, hw, &f.host, f.way));
    let knobs = Knobs {
        abc_on_backend: Knob::of(given.abc_on_backend, planned_way.abc_on_backend),
        stream_chunk: Knob::of(given.stream_chunk, planned_way.stream_chunk),
        ntt_kernel: Knob::of(given.ntt_kernel, planned_way.ntt),
        witness_staging: Knob::of(given.witness_staging, planned_way.staging),
        reserve_gib: Knob::of(given.reserve_gib, DEFAULT_RESERVE_GIB),
        synth_jobs: Knob::of(given.synth_jobs, synth_planned),
        gpu_workers_per_device: Knob::of(given.gpu_workers_per_device, planned_way.workers),
        memory_budget: Knob::of(given.memory_budget, memory_budget),
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
        },
        None => Plan {
            kind: shape.kind,
            hardware: hw.clone(),
            knobs,
            device: None,
            host: HostPlan {
                limit,
                params_bytes: shape.params_bytes(),
                partition_bytes: 0,
                pinned_buffers: 0,
                pinned_bytes: 0,
                partitions_in_flight: 0,
                peak_bytes: 0,
            },
            expected: None,
            fails: Some(shortfall.unwrap_or_else(|| "no way to run was tried".into())),
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

/// Checks `way` against the device and host memory and times it.
fn fit(
    shape: &Shape,
    hw: &Hardware,
    way: Way,
    device_budget: u64,
    memory_budget: u64,
) -> Result<Fitted, String> {
    let has_device = hw.devices > 0 && hw.device_memory > 0;
    let device = if has_device {
        Some(fit_device(shape, way, device_budget)?)
    } else {
        None
    };
    let host = fit_host(shape, hw, way, device.as_ref(), memory_budget)?;
    let expected = expect(shape, hw, way, device.as_ref(), &host);
    Ok(Fitted {
        way,
        device,
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
    let kept: u64 = sets
        .iter()
        .zip(placed.resident)
        .filter(|(_, r)| *r)
        .map(|(b, _)| b)
        .sum();
    Ok(DevicePlan {
        budget,
        r1cs_resident: way.abc_on_backend,
        bases_resident: placed.resident,
        h_buffers: placed.h_buffers,
        resident_bytes: r1cs + kept,
        partition_bytes: placed.need - kept,
        chunk: placed.chunk,
        transfer_bytes: placed.streamed_bytes(sets) + abc_upload,
    })
}

/// The host side, as the budget counts it: the parameters once, each partition
/// at the scheduler's charge, the backend's page-locked buffers.
fn fit_host(
    shape: &Shape,
    hw: &Hardware,
    way: Way,
    device: Option<&DevicePlan>,
    budget: u64,
) -> Result<HostPlan, String> {
    let devices = hw.devices.max(1) as u64;
    let held = match (device.is_some(), way.abc_on_backend) {
        (true, true) => Held::Witness,
        (true, false) => Held::Abc { host_h: false },
        (false, _) => Held::Abc { host_h: true },
    };
    let partition = partition_bytes_of(shape.partition_shape(), held, Some(shape.split_bytes()));
    let mut buffers = 0u32;
    let mut pinned = 0u64;
    if let Some(d) = device {
        let workers = way.workers as u64 * COPIES_PER_WORKER;
        // Streamed: two staging buffers of a chunk's bases (G2's 192 bytes, the
        // largest) and terms (37 bytes a point), per device.
        if let Some(c) = d.chunk {
            buffers += 2 * devices as u32;
            pinned += devices * 2 * c as u64 * (192 + 37);
        }
        // A witness copy per GPU worker (`witness_staging = "copy"`).
        if way.abc_on_backend && way.staging == WitnessStaging::Copy {
            buffers += (workers * devices) as u32;
            pinned += workers * devices * shape.witness_bytes();
        }
        // Split data staged through pinned buffers where the bases are resident.
        if d.chunk.is_none() {
            buffers += (workers * devices) as u32;
            pinned += workers * devices * shape.split_bytes().min(SPLIT_STAGING_MAX);
        }
    }
    let params = shape.params_bytes();
    let room = budget.saturating_sub(params).saturating_sub(pinned);
    let in_flight = room / partition.max(1);
    // A GPU worker holds its partition while the next is synthesized: two workers
    // want room for at least two partitions.
    let wanted = if device.is_some() {
        way.workers as u64
    } else {
        1
    };
    if in_flight < wanted {
        return Err(format!(
            "{HOST_SHORT}: the parameters ({params} bytes), {wanted} partition(s) of {partition} bytes and {pinned} bytes of page-locked buffers do not fit the memory budget of {budget} bytes"
        ));
    }
    Ok(HostPlan {
        limit: hw.host_limit(),
        params_bytes: params,
        partition_bytes: partition,
        pinned_buffers: buffers,
        pinned_bytes: pinned,
        partitions_in_flight: in_flight,
        peak_bytes: params + pinned + in_flight * partition,
    })
}

/// The speed model: a partition's device time is its measured time on the H200
/// scaled to the card or its stream (streamed bases and `a, b, c` from the host
/// over PCIe, each streamed chunk at its own cost), the longer; its host time is its measured core-seconds over the cores. With room for
/// a partition beyond those the GPU workers hold, the two overlap and the slower
/// sets the pace; else they take turns.
fn expect(
    shape: &Shape,
    hw: &Hardware,
    way: Way,
    device: Option<&DevicePlan>,
    host: &HostPlan,
) -> Expected {
    let m = shape.measured;
    let mut basis = vec![format!("shape: {}", shape.basis)];
    let cores = hw.cores.max(1) as f64;
    let devices = hw.devices.max(1) as f64;
    let (device_s, host_core_s) = match device {
        Some(d) => {
            let speed = hw.device_speed();
            let ntt = if way.ntt == NttKernel::Radix2WarpFast {
                R2WF_PENALTY_S_2_27 * shape.constraints as f64 / (1u64 << 27) as f64
            } else {
                0.0
            };
            let chunks = d.chunks(shape);
            let compute = m.device_s_h200 * speed + ntt;
            // The stream as the backend's placement costs it (`Placement::stream_cost`):
            // its bytes, its chunks, `c`'s upload where two H buffers leave it alone.
            let unoverlapped_c = match d.h_buffers {
                HBuffers::Two => shape.constraints as u64 * 32,
                HBuffers::Three => 0,
            };
            let stream = (d.transfer_bytes + chunks * footprint::CHUNK_COST_BYTES + unoverlapped_c)
                as f64
                / PCIE_BYTES_PER_S;
            basis.push(format!(
                "device: max({:.3} s measured on the H200 x {speed:.2} (the card){}, {:.2} GB over PCIe at {:.0} GB/s{}{})",
                m.device_s_h200,
                if ntt > 0.0 { " + r2wf's slower NTT passes" } else { "" },
                d.transfer_bytes as f64 / 1e9,
                PCIE_BYTES_PER_S / 1e9,
                if chunks > 0 {
                    format!(" + {chunks} streamed chunks x {:.0} ms", STREAM_CHUNK_S * 1e3)
                } else {
                    String::new()
                },
                if unoverlapped_c > 0 { " + c's upload (two H buffers)" } else { "" }
            ));
            let core_s = if way.abc_on_backend {
                m.host_core_s
            } else {
                m.host_core_s_cpu_spmv
            };
            (compute.max(stream), core_s)
        }
        None => {
            basis.push("no device: the CPU backend's time is not modelled".into());
            (0.0, m.host_core_s_cpu_spmv)
        }
    };
    basis.push(format!(
        "host: {host_core_s:.1} core-s a partition over {} cores",
        hw.cores
    ));
    let host_s = host_core_s / cores;
    // One GPU worker stages its next partition (the witness copy, page-locking)
    // only after the device is done with the last: 402 ms p50 for PoRep's 4.2 GB
    // witness on the H200 (BENCHMARKS.md 2026-12-03, `STAGED`), so ~10 GB/s.
    let staging_s = match device {
        Some(_) if way.workers < 2 => {
            let bytes = if way.abc_on_backend {
                shape.witness_bytes()
            } else {
                shape.abc_bytes()
            };
            basis.push("one GPU worker: staging not overlapped with the device".into());
            bytes as f64 / STAGING_BYTES_PER_S
        }
        _ => 0.0,
    };
    let device_period = (device_s + staging_s) / devices;
    let (period, bound) = if host.partitions_in_flight < 2 {
        // The device waits for each partition's synthesis, the host for the device.
        (device_period + host_s, Bound::Serial)
    } else if device_period >= host_s {
        (device_period, Bound::Device)
    } else {
        (host_s, Bound::Host)
    };
    Expected {
        s_per_proof: period * shape.partitions as f64,
        device_s,
        host_s,
        bound,
        basis,
    }
}
