//! The host side of a plan: what the engine's memory budget charges, what the
//! backend page-locks, and where a partition reads the parameters it streams.
//!
//! Decoded parameters are anonymous memory the budget charges once. Mapped ones
//! (points files, `--points-dir`) are page cache the budget does not charge
//! (`Srs::host_bytes`): the sets the device keeps are read once at upload and may
//! then be dropped; the sets it streams are read again every partition, from the
//! page cache where it can keep them beside the anonymous memory, and what it
//! cannot keep from disk. The model takes the cache to keep as much of the
//! streamed sets as the room beside the anonymous memory holds, what Linux's
//! refault detection gives a cyclic read not much larger than the cache (a
//! refaulting page whose refault distance is within the active list is activated
//! and stays); for a read many times the cache it is optimistic (plain LRU keeps
//! none of it). The engine fills its budget with partitions, so the plan also tries
//! budgets cut to a few partitions in flight, leaving the cache room: fewer
//! partitions overlap, less is read back. Page-locking a streamed set in place
//! (`stream_staging = "register"`) pins its pages: for a mapped set, memory the
//! kernel can no longer drop and the budget does not see (the backend's
//! `pinned_host_bytes` counts only its own buffers), so the plan's budget is cut
//! by it; `copy` pins only the staging buffers and leaves the set to the cache.

use cuzk_scheduler::{partition_bytes_of, Held, MemoryBudget};
use serde::Serialize;

use crate::{DevicePlan, Shape, StreamStaging, Way, WitnessStaging, HOST_SHORT};

/// Most witness copies (`witness_staging = "copy"`) and split buffers the backend
/// keeps per GPU worker.
const COPIES_PER_WORKER: u64 = 1;
/// The split staging buffer's ceiling (`split_upload = "pinned"`).
const SPLIT_STAGING_MAX: u64 = 1 << 30;

/// Where a partition reads the parameter sets it streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamedFrom {
    /// Nothing streams: the device keeps every set.
    Nothing,
    /// Decoded parameters: anonymous memory (page-locked in place or copied).
    Memory,
    /// Mapped parameters page-locked in place (`stream_staging = "register"`):
    /// read from disk once, then held.
    Pinned,
    /// Mapped parameters the page cache keeps beside the anonymous memory.
    PageCache,
    /// Mapped parameters the page cache cannot keep whole: what it does not keep
    /// ([`HostPlan::disk_bytes`]) is read back from disk every partition.
    Disk,
}

/// What the plan holds in host memory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostPlan {
    /// `MemTotal` or the cgroup limit, the smaller.
    pub limit: u64,
    /// The engine's memory budget the plan runs with (given, or planned: the
    /// budget's default total for the limit, less mapped pages page-locked in place
    /// (they lie outside it and must stay), or cut to a few partitions in flight to
    /// leave the page cache room for the streamed sets).
    pub budget: u64,
    /// Whether the parameters are memory-mapped from points files (page cache) or
    /// decoded (anonymous memory the budget charges).
    pub mapped: bool,
    /// The parameter set's points (counted once; for mapped parameters the points
    /// file's bytes, which the budget does not charge).
    pub params_bytes: u64,
    /// What the budget charges a partition (the scheduler's arithmetic).
    pub partition_bytes: u64,
    /// Page-locked buffers the backend keeps (chunk staging, witness copies,
    /// split staging) and their bytes, all devices.
    pub pinned_buffers: u32,
    pub pinned_bytes: u64,
    /// Parameter bytes read again every partition: the sets the device streams
    /// (every set without a device).
    pub streamed_bytes: u64,
    /// Of those, bytes page-locked in place (`stream_staging = "register"`).
    pub registered_bytes: u64,
    /// Where the streamed sets are read from.
    pub streamed_from: StreamedFrom,
    /// Bytes read back from disk a partition ([`StreamedFrom::Disk`]).
    pub disk_bytes: u64,
    /// Partitions the budget admits at once beside the parameters and pinned
    /// memory.
    pub partitions_in_flight: u64,
    /// What the budget charges at its fullest: anonymous parameters + partitions
    /// in flight + pinned buffers: at most the budget.
    pub peak_bytes: u64,
    /// Memory the kernel cannot drop at that peak: `peak_bytes` and mapped pages
    /// page-locked in place. With `cached_bytes`, at most the budget's total for
    /// the limit (the rest is the budget's margin).
    pub unevictable_bytes: u64,
    /// Page cache the plan counts on for the streamed sets (mapped, copied).
    pub cached_bytes: u64,
}

impl HostPlan {
    /// The host side of a plan that does not run: the parameters and the limit.
    pub(crate) fn nothing(shape: &Shape, limit: u64, budget: u64, mapped: bool) -> Self {
        HostPlan {
            limit,
            budget,
            mapped,
            params_bytes: shape.params_bytes(),
            partition_bytes: 0,
            pinned_buffers: 0,
            pinned_bytes: 0,
            streamed_bytes: 0,
            registered_bytes: 0,
            streamed_from: StreamedFrom::Nothing,
            disk_bytes: 0,
            partitions_in_flight: 0,
            peak_bytes: 0,
            unevictable_bytes: 0,
            cached_bytes: 0,
        }
    }
}

/// Parameter bytes a partition reads again: the sets `device` streams, or every
/// set without a device (the CPU backend reads them all).
pub(crate) fn streamed_bytes(shape: &Shape, device: Option<&DevicePlan>) -> u64 {
    match device {
        Some(d) => shape
            .base_bytes()
            .iter()
            .zip(d.bases_resident)
            .filter(|(_, r)| !r)
            .map(|(b, _)| b)
            .sum(),
        None => shape.params_bytes(),
    }
}

/// The host side, as the budget counts it: the parameters once where decoded,
/// each partition at the scheduler's charge, the backend's page-locked buffers;
/// beside the budget, mapped pages page-locked in place and the page cache kept
/// for the streamed sets. `given_budget`: the budget the configuration sets.
pub(crate) fn fit_host(
    shape: &Shape,
    hw: &crate::Hardware,
    way: Way,
    device: Option<&DevicePlan>,
    given_budget: Option<u64>,
) -> Result<HostPlan, String> {
    let limit = hw.host_limit();
    let total = MemoryBudget::total_for_limit(limit);
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
        // Streamed: two staging buffers of the larger chunk's terms (37 bytes a
        // point) per device, and of its bases (G2's 192 bytes, the largest) where
        // they are copied through them; DMA'd in place (`register`), they take
        // no room there.
        if let Some(c) = d.split_chunk.or(d.chunk) {
            let point = match way.stream_staging {
                StreamStaging::Register => 37,
                _ => 192 + 37,
            };
            buffers += 2 * devices as u32;
            pinned += devices * 2 * c as u64 * point;
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
    let streamed = streamed_bytes(shape, device);
    let registered = match device {
        Some(_) if way.stream_staging == StreamStaging::Register => streamed,
        _ => 0,
    };
    // Mapped pages page-locked in place: outside the budget, never dropped.
    let locked = if hw.mapped { registered } else { 0 };
    let params = if hw.mapped { 0 } else { shape.params_bytes() };
    let budget = match given_budget {
        Some(b) => {
            if b + locked > total {
                return Err(format!(
                    "{HOST_SHORT}: the streamed sets' {locked} bytes of mapped pages, page-locked in place, beside the memory budget of {b} bytes exceed the {total} bytes the limit allows"
                ));
            }
            b
        }
        None => match way.partitions_cap {
            0 => total.saturating_sub(locked),
            cap => (params + pinned + cap * partition).min(total.saturating_sub(locked)),
        },
    };
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
        let beside = match (hw.mapped, locked) {
            (false, _) => format!("the parameters ({params} bytes), "),
            (true, 0) => String::new(),
            (true, _) => format!("beside {locked} bytes of mapped sets page-locked in place, "),
        };
        return Err(format!(
            "{HOST_SHORT}: {beside}{wanted} partition(s) of {partition} bytes and {pinned} bytes of page-locked buffers do not fit the memory budget of {budget} bytes"
        ));
    }
    let peak = params + pinned + in_flight * partition;
    let unevictable = peak + locked;
    // The page cache: what the budget's total leaves beside what cannot be dropped.
    let cached = match (hw.mapped, registered) {
        (true, 0) => streamed.min(total.saturating_sub(unevictable)),
        _ => 0,
    };
    let streamed_from = match (streamed, hw.mapped) {
        (0, _) => StreamedFrom::Nothing,
        (_, false) => StreamedFrom::Memory,
        _ if registered > 0 => StreamedFrom::Pinned,
        _ if cached == streamed => StreamedFrom::PageCache,
        _ => StreamedFrom::Disk,
    };
    Ok(HostPlan {
        limit,
        budget,
        mapped: hw.mapped,
        params_bytes: shape.params_bytes(),
        partition_bytes: partition,
        pinned_buffers: buffers,
        pinned_bytes: pinned,
        streamed_bytes: streamed,
        registered_bytes: registered,
        streamed_from,
        disk_bytes: if streamed_from == StreamedFrom::Disk {
            streamed - cached
        } else {
            0
        },
        partitions_in_flight: in_flight,
        peak_bytes: peak,
        unevictable_bytes: unevictable,
        cached_bytes: cached,
    })
}
