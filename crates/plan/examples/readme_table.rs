//! README's table of what the planner expects for a 32 GiB PoRep sector, per card,
//! host and cores, printed from the planner (the README is this output, which
//! `tests/readme.rs` checks):
//!
//!     cargo run -p cuzk-plan --example readme_table
//!
//! Each cell is `cuzk plan --kind porep --device-memory-gib D --host-memory-gib H
//! --cores C` (with `--points-dir` in the mapped columns).

use cuzk_plan::{plan, Given, Hardware, Kind, Plan, Shape, StreamStaging, StreamedFrom};

const GIB: u64 = 1 << 30;
const CARDS: [(u64, &str); 6] = [
    (16, "16 GiB (5070 Ti)"),
    (24, "24 GiB (4090)"),
    (32, "32 GiB (5090)"),
    (48, "48 GiB (L40S)"),
    (80, "80 GiB (H100)"),
    (139, "139 GiB (H200)"),
];
const HOSTS: [u64; 4] = [64, 96, 128, 256];

fn cell(device_gib: u64, host_gib: u64, cores: u32, mapped: bool) -> Plan {
    let hw = Hardware {
        device_memory: device_gib * GIB,
        device_free: None,
        devices: 1,
        device_speed: None,
        host_memory: host_gib * GIB,
        cgroup_limit: None,
        cores,
        mapped,
        disk_read_bytes_per_s: None,
    };
    plan(&Shape::filecoin_32gib(Kind::Porep), &hw, &Given::default())
}

fn seconds(p: &Plan) -> String {
    match &p.expected {
        Some(e) => format!("{:.0}", e.s_per_proof),
        None => "does not run".into(),
    }
}

/// How a plan runs, in a few words.
fn how(p: &Plan) -> String {
    let Some(d) = &p.device else {
        return String::new();
    };
    let sets = ["H", "L", "A", "B_G1", "B_G2"];
    let resident: Vec<&str> = sets
        .iter()
        .zip(d.bases_resident)
        .filter(|(_, r)| *r)
        .map(|(s, _)| *s)
        .collect();
    let mut parts = vec![if d.r1cs_resident {
        "R1CS resident".to_string()
    } else {
        "CPU spmv".to_string()
    }];
    parts.push(match resident.len() {
        5 => "every base set resident".into(),
        0 => "every base set streamed".into(),
        _ => format!("{} resident", resident.join(", ")),
    });
    if d.h_buffers == cuzk_cuda::HBuffers::Two {
        parts.push("H in two buffers".into());
    }
    let h = &p.host;
    if h.streamed_from != StreamedFrom::Nothing {
        parts.push(
            match p.knobs.stream_staging.value {
                StreamStaging::Register => "streamed from page-locked memory",
                StreamStaging::Copy => "copied through staging",
            }
            .into(),
        );
    }
    match h.streamed_from {
        StreamedFrom::Disk => parts.push("read back from disk".into()),
        StreamedFrom::PageCache => parts.push("from the page cache".into()),
        _ => {}
    }
    if h.partitions_in_flight < 2 {
        parts.push("one partition at a time".into());
    }
    parts.join(", ")
}

/// The table, as README.md has it.
pub fn table() -> String {
    let mut out = String::from(
        "| card | cores | 64 GiB host | 64 GiB, mapped | 96 GiB | 128 GiB | 256 GiB | 256 GiB, mapped |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for cores in [16, 8] {
        for (gib, name) in CARDS {
            let mut row = format!("| {name} | {cores} |");
            for (i, h) in HOSTS.into_iter().enumerate() {
                let p = cell(gib, h, cores, false);
                row += &format!(" {} |", seconds(&p));
                if i == 0 {
                    let m = cell(gib, h, cores, true);
                    row += &format!(" {}: {} |", seconds(&m), how(&m));
                }
            }
            let m = cell(gib, 256, cores, true);
            row += &format!(" {} |", seconds(&m));
            out += &row;
            out.push('\n');
        }
    }
    out
}

#[allow(dead_code)] // the README test includes this file for `table` alone
fn main() {
    print!("{}", table());
}
