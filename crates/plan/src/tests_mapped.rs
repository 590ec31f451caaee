//! Plans with the parameters memory-mapped from points files: page cache instead
//! of anonymous memory, the streamed sets' staging planned with the host.

use super::*;

const POREP: Kind = Kind::Porep;

fn host(device_gib: u64, host_gib: u64, mapped: bool) -> Hardware {
    Hardware {
        device_memory: device_gib * GIB,
        device_free: None,
        devices: 1,
        device_speed: None,
        host_memory: host_gib * GIB,
        cgroup_limit: None,
        cores: 16,
        mapped,
        disk_read_bytes_per_s: None,
    }
}

fn porep(hw: &Hardware, given: &Given) -> Plan {
    plan(&Shape::filecoin_32gib(POREP), hw, given)
}

/// What every plan that runs must keep: the budget's charge within the budget,
/// and what the kernel cannot drop plus the page cache the plan counts on within
/// the budget's total for the limit (the rest is its margin).
fn check_memory(p: &Plan, cell: &str) {
    let h = &p.host;
    let total = MemoryBudget::total_for_limit(p.hardware.host_limit());
    assert!(h.peak_bytes <= p.knobs.memory_budget.value, "{cell}: {h:?}");
    assert!(
        h.unevictable_bytes + h.cached_bytes <= total,
        "{cell}: {h:?}"
    );
    if h.mapped {
        // The parameters are not anonymous memory: the peak is partitions and
        // buffers only.
        assert_eq!(
            h.peak_bytes,
            h.pinned_bytes + h.partitions_in_flight * h.partition_bytes,
            "{cell}"
        );
    }
}

/// A 64 GiB host with a 16 GB card runs a 32 GiB PoRep sector with mapped
/// parameters and not with decoded ones (44 GiB of them beside a 12.5 GB `a, b,
/// c` on the host), and says so; with an 80 GB card, which keeps the bases, the
/// mapped plan runs and is faster than the decoded one's partition at a time.
#[test]
fn a_64_gib_host_runs_porep_with_mapped_parameters() {
    let decoded = porep(&host(16, 64, false), &Given::default());
    assert!(!decoded.runs());
    assert!(decoded.fails.as_ref().unwrap().contains("host memory"));
    let mapped = porep(&host(16, 64, true), &Given::default());
    assert!(mapped.runs(), "{:?}", mapped.fails);
    check_memory(&mapped, "16 GB, 64 GiB, mapped");
    let s = mapped.expected.as_ref().unwrap().s_per_proof;
    assert_eq!(decoded.with_points_dir, Some(s));
    assert_eq!(mapped.with_points_dir, None, "mapped already");

    let decoded = porep(&host(80, 64, false), &Given::default());
    let mapped = porep(&host(80, 64, true), &Given::default());
    assert!(mapped.runs(), "{:?}", mapped.fails);
    check_memory(&mapped, "80 GB, 64 GiB, mapped");
    let m = mapped.expected.as_ref().unwrap();
    let d = decoded.expected.as_ref().unwrap();
    assert!(m.s_per_proof < d.s_per_proof * 0.95, "{m:?} {d:?}");
    assert!(mapped.host.partitions_in_flight > decoded.host.partitions_in_flight);
    assert_eq!(decoded.with_points_dir, Some(m.s_per_proof));
    // Where the device keeps everything it needs no points file to run fast.
    let h200 = porep(&host(139, 256, false), &Given::default());
    assert_eq!(h200.with_points_dir, None);
}

/// On a short host the streamed sets cannot be page-locked beside the partitions:
/// `copy`; on a 256 GiB host they can, with room to spare: `register`, and the
/// budget is cut by them (the budget does not see them). Decoded sets are
/// anonymous memory already: `register` costs them nothing, whatever the host.
#[test]
fn stream_staging_is_copy_on_a_short_host_and_register_on_a_large_one() {
    let short = porep(&host(16, 64, true), &Given::default());
    assert_eq!(
        short.knobs.stream_staging,
        Knob {
            value: StreamStaging::Copy,
            source: Source::Planned
        }
    );
    assert_eq!(short.host.registered_bytes, 0);
    let large = porep(&host(16, 256, true), &Given::default());
    assert!(large.runs(), "{:?}", large.fails);
    assert_eq!(large.knobs.stream_staging.value, StreamStaging::Register);
    assert_eq!(large.host.streamed_from, StreamedFrom::Pinned);
    let registered = large.host.registered_bytes;
    assert_eq!(registered, large.host.streamed_bytes);
    assert!(registered > 40 * GIB, "every set streams on a 16 GB card");
    assert_eq!(
        large.knobs.memory_budget.value,
        MemoryBudget::total_for_limit(256 * GIB) - registered
    );
    check_memory(&large, "16 GB, 256 GiB, mapped");
    for h in [64, 128, 256] {
        let p = porep(&host(16, h, false), &Given::default());
        if p.runs() {
            assert_eq!(p.knobs.stream_staging.value, StreamStaging::Register, "{h}");
            assert_eq!(p.host.streamed_from, StreamedFrom::Memory);
        }
    }
    // Nothing streams on the H200: the backend's default stays.
    let h200 = porep(&host(139, 64, true), &Given::default());
    assert_eq!(h200.host.streamed_from, StreamedFrom::Nothing);
    assert_eq!(h200.knobs.stream_staging.value, StreamStaging::Register);
}

/// The short host's streamed sets do not fit the page cache beside a partition:
/// what it cannot keep is read back from disk every partition, and the s/proof
/// says what that costs at the disk's speed.
#[test]
fn streamed_sets_the_cache_cannot_keep_cost_their_read_back() {
    let slow = porep(&host(16, 64, true), &Given::default());
    let h = &slow.host;
    assert_eq!(h.streamed_from, StreamedFrom::Disk);
    assert!(h.disk_bytes > 0 && h.cached_bytes > 0, "{h:?}");
    assert_eq!(h.disk_bytes + h.cached_bytes, h.streamed_bytes);
    let e = slow.expected.as_ref().unwrap();
    assert!(e.basis.iter().any(|b| b.contains("from disk")), "{e:?}");
    let disk_s = h.disk_bytes as f64 / DISK_READ_BYTES_PER_S;
    assert!(e.device_s >= disk_s, "{e:?}");
    // A slower disk plans a slower proof (or fewer partitions in flight).
    let slower = porep(
        &Hardware {
            disk_read_bytes_per_s: Some(0.2e9),
            ..host(16, 64, true)
        },
        &Given::default(),
    );
    let s = slower.expected.unwrap().s_per_proof;
    assert!(s > e.s_per_proof * 1.2, "{s} against {}", e.s_per_proof);
    // With room, the page cache keeps them: no disk, a budget cut to leave it.
    let roomy = porep(
        &host(16, 128, true),
        &Given {
            stream_staging: Some(StreamStaging::Copy),
            ..Given::default()
        },
    );
    assert_eq!(roomy.host.streamed_from, StreamedFrom::PageCache);
    assert_eq!(roomy.host.disk_bytes, 0);
    assert_eq!(roomy.host.cached_bytes, roomy.host.streamed_bytes);
    check_memory(&roomy, "16 GB, 128 GiB, mapped, copy");
}

/// An explicit `stream_staging` wins: `register` on the short host is not
/// replaced by `copy` (here it does not fit, and the plan says so in the host's
/// words), `copy` on the large host is kept and planned around.
#[test]
fn an_explicit_stream_staging_wins() {
    let register = Given {
        stream_staging: Some(StreamStaging::Register),
        ..Given::default()
    };
    let p = porep(&host(16, 64, true), &register);
    assert_eq!(p.knobs.stream_staging.source, Source::Given);
    assert_eq!(p.knobs.stream_staging.value, StreamStaging::Register);
    let why = p
        .fails
        .expect("44 GB page-locked beside a partition on 64 GiB");
    assert!(why.contains("page-locked in place"), "{why}");
    let copy = Given {
        stream_staging: Some(StreamStaging::Copy),
        ..Given::default()
    };
    let p = porep(&host(16, 256, true), &copy);
    assert!(p.runs());
    assert_eq!(
        p.knobs.stream_staging,
        Knob {
            value: StreamStaging::Copy,
            source: Source::Given
        }
    );
    assert_eq!(p.host.registered_bytes, 0);
    // A given budget is kept too: register beside it must fit the limit.
    let budget = Given {
        memory_budget: Some(200 * GIB),
        ..Given::default()
    };
    let p = porep(&host(16, 256, true), &budget);
    assert_eq!(p.knobs.memory_budget.value, 200 * GIB);
    assert_eq!(p.knobs.stream_staging.value, StreamStaging::Copy);
}

/// The cgroup's limit, not `MemTotal`, is what a plan fits: a 256 GiB host
/// limited to 64 GiB plans as a 64 GiB host does.
#[test]
fn the_cgroup_limit_is_what_is_used() {
    let limited = Hardware {
        cgroup_limit: Some(64 * GIB),
        ..host(16, 256, true)
    };
    let p = porep(&limited, &Given::default());
    let q = porep(&host(16, 64, true), &Given::default());
    assert_eq!(p.host.limit, 64 * GIB);
    assert_eq!(p.knobs, q.knobs);
    assert_eq!(p.host, q.host);
    assert_eq!(p.knobs.stream_staging.value, StreamStaging::Copy);
    assert!(p.knobs.memory_budget.value <= MemoryBudget::total_for_limit(64 * GIB));
    let decoded = Hardware {
        mapped: false,
        ..limited
    };
    assert!(!porep(&decoded, &Given::default()).runs());
}

/// The copy stream's model against its measurement (H100 host, BENCHMARKS.md
/// 2026-12-06): a 2^24 PoRep-shaped partition with every set streamed in 2^22
/// chunks took 282.1 ms registered and 379.3 ms copied through staging, against
/// 205.7 resident (the shape's device time here, so that only the stream is
/// modelled).
#[test]
fn the_copy_stream_meets_its_measurement() {
    let porep = Shape::filecoin_32gib(POREP);
    let n = 1usize << 24;
    let scale = |q: Query| Query {
        bases: (q.bases as f64 * n as f64 / porep.constraints as f64) as usize,
        tail: (q.tail as f64 * n as f64 / porep.constraints as f64) as usize,
    };
    let shape = Shape {
        constraints: n,
        aux: n,
        h: n - 1,
        l: scale(porep.l),
        a: scale(porep.a),
        b_g1: scale(porep.b_g1),
        b_g2: scale(porep.b_g2),
        nnz: porep.nnz.map(|z| z >> 3),
        measured: Measured {
            device_s_h200: 0.2057 / H100_VS_H200,
            ..porep.measured
        },
        ..porep
    };
    let timed = |staging| {
        let p = plan(
            &shape,
            &host(80, 125, false),
            &Given {
                abc_on_backend: Some(true),
                stream_chunk: Some(1 << 22),
                stream_staging: Some(staging),
                ..Given::default()
            },
        );
        assert!(p.runs(), "{:?}", p.fails);
        assert_eq!(p.device.unwrap().bases_resident, [false; 5]);
        p.expected.unwrap().device_s
    };
    let within = |got: f64, want: f64| (got / want - 1.0).abs() <= 0.15;
    let register = timed(StreamStaging::Register);
    assert!(within(register, 0.2821), "registered: {register}");
    let copy = timed(StreamStaging::Copy);
    assert!(within(copy, 0.3793), "copied: {copy}");
}

/// Over issue 33's table, every kind: mapped parameters never plan a slower
/// proof than decoded ones (page-locking a mapped set pins no more than the
/// decoded set holds), run wherever decoded ones do, and a bigger host never
/// plans them slower; every mapped plan keeps its memory.
#[test]
fn mapped_parameters_never_plan_slower() {
    for kind in Kind::ALL {
        let shape = Shape::filecoin_32gib(kind);
        for d in [16, 24, 32, 48, 80, 139] {
            let mut last: Option<f64> = None;
            for h in [64, 96, 128, 256] {
                let cell = format!("{kind:?} {d} GiB card, {h} GiB host");
                let decoded = plan(&shape, &host(d, h, false), &Given::default());
                let mapped = plan(&shape, &host(d, h, true), &Given::default());
                if decoded.runs() {
                    assert!(mapped.runs(), "{cell}: {:?}", mapped.fails);
                }
                let Some(m) = &mapped.expected else { continue };
                check_memory(&mapped, &cell);
                if let Some(e) = &decoded.expected {
                    assert!(m.s_per_proof <= e.s_per_proof * 1.0001, "{cell}");
                }
                if let Some(s) = last {
                    assert!(
                        m.s_per_proof <= s * 1.0001,
                        "{cell}: {} after {s}",
                        m.s_per_proof
                    );
                }
                last = Some(m.s_per_proof);
            }
        }
    }
}
