//! The speed model: what a plan expects a partition to take on the device and on
//! the host, and so the s/proof, with the basis of every figure.

use cuzk_cuda::{footprint, HBuffers};

use crate::host::{self, HostPlan};
use crate::{
    Bound, DevicePlan, Expected, Hardware, NttKernel, Shape, StreamStaging, Way,
    COPY_STAGING_BYTES_PER_S, COPY_THREADS, PCIE_BYTES_PER_S, R2WF_PENALTY_S_2_27,
    STAGING_BYTES_PER_S, STREAM_CHUNK_S,
};

/// The speed model: a partition's device time is its measured time on the H200
/// scaled to the card or its stream, the longer. The stream's bytes (streamed
/// bases and `a, b, c` from the host) go at the slowest of PCIe, the staging copy
/// (`stream_staging = "copy"`) and the disk (mapped sets the page cache cannot
/// keep), and each streamed chunk costs its own time beyond them. Its host time is
/// its measured core-seconds (and the copy threads') over the cores. With room
/// for a partition beyond those the GPU workers hold, the two overlap and the
/// slower sets the pace; else they take turns.
pub(crate) fn expect(
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
            let copied = match way.stream_staging {
                StreamStaging::Copy => host.streamed_bytes,
                StreamStaging::Register => 0,
            };
            let disk_bps = hw.disk_read_bytes_per_s();
            let bytes_s = (d.transfer_bytes as f64 / PCIE_BYTES_PER_S)
                .max(copied as f64 / COPY_STAGING_BYTES_PER_S)
                .max(host.disk_bytes as f64 / disk_bps);
            let stream = bytes_s
                + (chunks * footprint::CHUNK_COST_BYTES + unoverlapped_c) as f64 / PCIE_BYTES_PER_S;
            basis.push(format!(
                "device: max({:.3} s measured on the H200 x {speed:.2} (the card){}, {:.2} GB over PCIe at {:.0} GB/s{}{}{}{})",
                m.device_s_h200,
                if ntt > 0.0 { " + r2wf's slower NTT passes" } else { "" },
                d.transfer_bytes as f64 / 1e9,
                PCIE_BYTES_PER_S / 1e9,
                if copied > 0 {
                    format!(
                        ", or copied through staging at {:.0} GB/s",
                        COPY_STAGING_BYTES_PER_S / 1e9
                    )
                } else {
                    String::new()
                },
                if host.disk_bytes > 0 {
                    format!(
                        ", or read back from disk at {:.1} GB/s (assumed)",
                        disk_bps / 1e9
                    )
                } else {
                    String::new()
                },
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
            // The copy threads are busy while they copy.
            let copy_core_s = copied as f64 / COPY_STAGING_BYTES_PER_S * COPY_THREADS;
            if copy_core_s > 0.0 {
                basis.push(format!(
                    "host: the {COPY_THREADS} copy threads' {copy_core_s:.1} core-s a partition"
                ));
            }
            (compute.max(stream), core_s + copy_core_s)
        }
        None => {
            basis.push("no device: the CPU backend's time is not modelled".into());
            (0.0, m.host_core_s_cpu_spmv)
        }
    };
    // Without a device the CPU reads every set a partition: from disk, where the
    // page cache cannot keep them, before its MSMs can finish.
    let disk_s = match device {
        None => host.disk_bytes as f64 / hw.disk_read_bytes_per_s(),
        Some(_) => 0.0,
    };
    if disk_s > 0.0 {
        basis.push(format!(
            "host: {:.1} GB of mapped parameters read back from disk a partition at {:.1} GB/s (assumed)",
            host.disk_bytes as f64 / 1e9,
            hw.disk_read_bytes_per_s() / 1e9
        ));
    }
    basis.push(format!(
        "host: {host_core_s:.1} core-s a partition over {} cores",
        hw.cores
    ));
    if host.streamed_from == host::StreamedFrom::Pinned {
        // CUDA page-locks read-only pages (a points file is mapped read-only) only
        // with CU_MEMHOSTREGISTER_READ_ONLY on x86 hosts; where the backend's
        // registration is refused it copies through staging, from the page cache
        // the budget's cut leaves room for: slower than planned, never more memory.
        basis.push(format!(
            "host: {:.1} GB of mapped sets page-locked in place, outside the budget (copied through staging where the driver refuses)",
            host.registered_bytes as f64 / 1e9
        ));
    }
    let host_s = host_core_s / cores + disk_s;
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
