//! Plans for the cells of issue 33's table (device memory × host memory × cores,
//! each kind at 32 GiB), checked against the memory they must fit and against
//! what was measured.

use super::*;

const DEVICE_GIB: [u64; 6] = [16, 24, 32, 48, 80, 139];
const HOST_GIB: [u64; 4] = [64, 96, 128, 256];
const CORES: [u32; 2] = [8, 16];

fn machine(device_gib: u64, host_gib: u64, cores: u32) -> Hardware {
    Hardware {
        device_memory: device_gib * GIB,
        device_free: None,
        devices: 1,
        device_speed: None,
        host_memory: host_gib * GIB,
        cgroup_limit: None,
        cores,
        mapped: false,
        disk_read_bytes_per_s: None,
    }
}

fn cells() -> impl Iterator<Item = (Kind, u64, u64, u32)> {
    Kind::ALL.into_iter().flat_map(|k| {
        DEVICE_GIB.into_iter().flat_map(move |d| {
            HOST_GIB
                .into_iter()
                .flat_map(move |h| CORES.into_iter().map(move |c| (k, d, h, c)))
        })
    })
}

/// Every plan that runs fits its device (the backend's budget: free at start less
/// the reserve) and its host (the budget's total, itself under the limit).
#[test]
fn every_cell_fits_its_device_and_host() {
    for (kind, d, h, c) in cells() {
        let p = plan(
            &Shape::filecoin_32gib(kind),
            &machine(d, h, c),
            &Given::default(),
        );
        let cell = format!("{kind:?} {d} GiB card, {h} GiB host, {c} cores");
        let Some(dev) = &p.device else {
            assert!(!p.runs(), "{cell}: runs without a device plan");
            continue;
        };
        let reserve = p.knobs.reserve_gib.value * GIB;
        assert!(
            dev.budget + reserve + DEVICE_CONTEXT_BYTES <= d * GIB,
            "{cell}"
        );
        assert!(
            dev.resident_bytes + dev.partition_bytes <= dev.budget,
            "{cell}: {} + {} > {}",
            dev.resident_bytes,
            dev.partition_bytes,
            dev.budget
        );
        let budget = p.knobs.memory_budget.value;
        assert!(budget <= MemoryBudget::total_for_limit(h * GIB), "{cell}");
        assert!(p.host.peak_bytes <= budget, "{cell}");
        assert!(p.host.partitions_in_flight >= 1, "{cell}");
        let e = p.expected.as_ref().unwrap();
        assert!(e.s_per_proof.is_finite() && e.s_per_proof > 0.0, "{cell}");
        assert!(p.knobs.synth_jobs.value >= 1, "{cell}");
    }
}

/// Every kind runs on every card from a 96 GiB host up, and SnapDeals and
/// WinningPoSt on a 64 GiB host too. On 64 GiB, WindowPoSt's 56.6 GiB of
/// parameters leave no room for a partition, and PoRep on a card that cannot hold
/// the compiled R1CS (16, 24 GiB) needs its `a, b, c` on the host, 12.5 GB a
/// partition beside 44 GiB of parameters: the host is what they lack.
#[test]
fn which_cells_run() {
    for (kind, d, h, c) in cells() {
        let p = plan(
            &Shape::filecoin_32gib(kind),
            &machine(d, h, c),
            &Given::default(),
        );
        let should =
            h > 64 || kind == Kind::Snap || kind == Kind::Winning || kind == Kind::Porep && d > 24;
        assert_eq!(
            p.runs(),
            should,
            "{kind:?} {d} GiB, {h} GiB host, {c} cores: {:?}",
            p.fails
        );
        if !should {
            assert!(p.fails.as_ref().unwrap().contains("host memory"));
        }
    }
}

/// A bigger card never streams more, never plans a slower proof.
#[test]
fn a_bigger_card_never_streams_more_nor_runs_slower() {
    for kind in Kind::ALL {
        let shape = Shape::filecoin_32gib(kind);
        for h in HOST_GIB {
            for c in CORES {
                let mut last: Option<Plan> = None;
                for d in DEVICE_GIB {
                    let p = plan(
                        &Shape::filecoin_32gib(kind),
                        &machine(d, h, c),
                        &Given::default(),
                    );
                    if let (Some(prev), true) = (&last, p.runs()) {
                        let (a, b) = (prev.device.as_ref().unwrap(), p.device.as_ref().unwrap());
                        let cell = format!("{kind:?} {d} GiB, {h} GiB host, {c} cores");
                        assert!(b.r1cs_resident >= a.r1cs_resident, "{cell}");
                        // No more streamed, where both keep the compiled shape alike (a
                        // card that first holds the R1CS has that much less room
                        // for bases, and chose it as the faster way).
                        if a.r1cs_resident == b.r1cs_resident {
                            let cost = |d: &DevicePlan| {
                                d.transfer_bytes + d.chunks(&shape) * footprint::CHUNK_COST_BYTES
                            };
                            assert!(cost(b) <= cost(a), "{cell}");
                        }
                        let (ta, tb) = (
                            prev.expected.as_ref().unwrap().s_per_proof,
                            p.expected.as_ref().unwrap().s_per_proof,
                        );
                        assert!(tb <= ta * 1.0001, "{cell}: {tb} s/proof after {ta}");
                    }
                    if p.runs() {
                        last = Some(p);
                    }
                }
            }
        }
    }
}

/// The 16 GB card of issue 33 gets a plan that runs: the CPU spmv, the bases
/// streamed in chunks smaller than the automatic 2^23 (whose MSM scratch made the
/// 24.4 GB the issue reports), H in two buffers; the H200 keeps everything.
#[test]
fn a_16_gib_card_streams_and_evaluates_abc_on_the_cpu() {
    let p = plan(
        &Shape::filecoin_32gib(Kind::Porep),
        &machine(16, 128, 16),
        &Given::default(),
    );
    assert!(p.runs(), "{:?}", p.fails);
    assert!(!p.knobs.abc_on_backend.value);
    let d = p.device.as_ref().unwrap();
    assert!(!d.r1cs_resident && d.bases_resident == [false; 5]);
    // Streamed with automatic placement: the backend shrinks the chunk to fit.
    assert_eq!(p.knobs.stream_chunk.value, 0);
    assert!(d
        .chunk
        .is_some_and(|c| c < footprint::MAX_AUTO_STREAM_CHUNK));
    assert_eq!(d.h_buffers, HBuffers::Two);

    let p = plan(
        &Shape::filecoin_32gib(Kind::Porep),
        &machine(139, 128, 16),
        &Given::default(),
    );
    let d = p.device.as_ref().unwrap();
    assert!(p.knobs.abc_on_backend.value && d.r1cs_resident && d.bases_resident == [true; 5]);
    assert_eq!(p.knobs.stream_chunk.value, 0);
}

/// Issue 33's 16 GB failures (an H100 limited to 14716936192 bytes): with the
/// device spmv the compiled R1CS and the partition's least still do not fit, and
/// the plan says so in the backend's words; with `a, b, c` from the host, which
/// failed then at 24375565440 bytes (three H buffers, 2^23 chunks), the partition
/// now fits: H in two buffers, every set streamed in smaller chunks.
#[test]
fn the_issues_16_gb_card_runs_with_abc_from_the_host() {
    let hw = Hardware {
        device_free: Some(14_716_936_192 + 2 * GIB),
        ..machine(80, 125, 16)
    };
    let defaults = Given {
        abc_on_backend: Some(true),
        stream_chunk: Some(0),
        ntt_kernel: Some(NttKernel::DEFAULT),
        witness_staging: Some(WitnessStaging::Copy),
        ..Given::default()
    };
    let p = plan(&Shape::filecoin_32gib(Kind::Porep), &hw, &defaults);
    let why = p.fails.expect("the device spmv does not fit");
    assert!(why.contains("the compiled R1CS"), "{why}");
    assert!(why.contains("but only 14716936192 are available"), "{why}");
    let p = plan(
        &Shape::filecoin_32gib(Kind::Porep),
        &hw,
        &Given {
            abc_on_backend: Some(false),
            ..defaults
        },
    );
    assert!(p.runs(), "{:?}", p.fails);
    let d = p.device.unwrap();
    assert_eq!(d.budget, 14_716_936_192);
    assert_eq!((d.h_buffers, d.bases_resident), (HBuffers::Two, [false; 5]));
    assert!(d.resident_bytes + d.partition_bytes <= d.budget);
}

/// The model against the measured figures (32 GiB PoRep, 16 cores, 125 GiB host),
/// each in the configuration it was measured in: the H200, everything resident,
/// 14.2 s/proof (BENCHMARKS.md); the H100 with every set streamed from registered
/// memory in chunks of 2^22 and `a, b, c` from the host, 2.18 s a partition's GPU
/// region (BENCHMARKS.md, 2026-12-06, second visit).
#[test]
fn the_model_meets_the_measurements() {
    let porep = Shape::filecoin_32gib(Kind::Porep);
    let within = |got: f64, want: f64, tol: f64| (got / want - 1.0).abs() <= tol;
    let h200 = Hardware {
        device_memory: 150_109_880_320,
        ..machine(0, 125, 16)
    };
    let got = plan(&porep, &h200, &Given::default())
        .expected
        .unwrap()
        .s_per_proof;
    assert!(within(got, 14.24, 0.1), "H200: {got}");
    let p = plan(
        &porep,
        &machine(80, 125, 16),
        &Given {
            abc_on_backend: Some(false),
            stream_chunk: Some(1 << 22),
            ntt_kernel: Some(NttKernel::DEFAULT),
            ..Given::default()
        },
    );
    assert!(p.runs(), "{:?}", p.fails);
    let got = p.expected.unwrap().device_s;
    assert!(within(got, 2.18, 0.2), "H100, every set streamed: {got}");
}

/// A knob given wins and is marked given; the others are planned.
#[test]
fn given_knobs_win() {
    let given = Given {
        synth_jobs: Some(3),
        gpu_workers_per_device: Some(1),
        ..Given::default()
    };
    let p = plan(
        &Shape::filecoin_32gib(Kind::Porep),
        &machine(80, 128, 16),
        &given,
    );
    assert_eq!(
        p.knobs.synth_jobs,
        Knob {
            value: 3,
            source: Source::Given
        }
    );
    assert_eq!(p.knobs.gpu_workers_per_device.value, 1);
    assert_eq!(p.knobs.gpu_workers_per_device.source, Source::Given);
    assert_eq!(p.knobs.abc_on_backend.source, Source::Planned);
    // A given way that cannot run is reported, not replaced.
    let p = plan(
        &Shape::filecoin_32gib(Kind::Porep),
        &machine(16, 128, 16),
        &Given {
            abc_on_backend: Some(true),
            ..Given::default()
        },
    );
    assert!(!p.runs());
    assert!(p.fails.unwrap().contains("compiled R1CS"));
}

/// More host memory never makes a plan slower or admit fewer partitions.
#[test]
fn a_bigger_host_never_runs_slower() {
    for kind in Kind::ALL {
        for d in DEVICE_GIB {
            let mut last: Option<(f64, u64)> = None;
            for h in HOST_GIB {
                let p = plan(
                    &Shape::filecoin_32gib(kind),
                    &machine(d, h, 16),
                    &Given::default(),
                );
                let Some(e) = p.expected else { continue };
                if let Some((s, n)) = last {
                    assert!(
                        e.s_per_proof <= s * 1.0001,
                        "{kind:?} {d} GiB, {h} GiB host"
                    );
                    assert!(p.host.partitions_in_flight >= n || e.s_per_proof < s);
                }
                last = Some((e.s_per_proof, p.host.partitions_in_flight));
            }
        }
    }
}

#[test]
fn a_plan_serializes() {
    let p = plan(
        &Shape::filecoin_32gib(Kind::Snap),
        &machine(24, 96, 8),
        &Given::default(),
    );
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["kind"], "snap");
    assert!(json["knobs"]["synth_jobs"]["source"] == "planned");
}

/// A run's own counts of the 32 GiB PoRep shape plan as the built-in shape does.
#[test]
fn a_runs_counts_plan_like_the_kind() {
    let porep = Shape::filecoin_32gib(Kind::Porep);
    let own = Shape::from_counts(&Counts {
        partitions: porep.partitions,
        constraints: porep.constraints,
        inputs: porep.inputs,
        aux: porep.aux,
        bases: [
            porep.h,
            porep.l.bases,
            porep.a.bases,
            porep.b_g1.bases,
            porep.b_g2.bases,
        ],
        nnz: porep.nnz,
        coeffs: porep.coeffs,
        mapped: false,
    });
    assert_eq!(own.kind, Kind::Porep);
    let hw = machine(80, 128, 16);
    let (a, b) = (
        plan(&porep, &hw, &Given::default()),
        plan(&own, &hw, &Given::default()),
    );
    assert_eq!(a.knobs, b.knobs);
    assert_eq!(a.device, b.device);
}

/// Random machines (seeded): whatever the plan, what runs fits the backend's and
/// the budget's own counts, given knobs are kept, and one more GiB of device
/// memory never makes it slower.
#[test]
fn random_machines_plan_within_their_memory() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(33);
    for _ in 0..300 {
        let kind = Kind::ALL[rng.gen_range(0..4)];
        let hw = Hardware {
            device_memory: rng.gen_range(8u64..160) << 30,
            device_free: None,
            devices: rng.gen_range(1..=4),
            device_speed: None,
            host_memory: rng.gen_range(32u64..512) << 30,
            cgroup_limit: rng.gen_bool(0.5).then(|| rng.gen_range(32u64..512) << 30),
            cores: rng.gen_range(2..=128),
            mapped: rng.gen_bool(0.5),
            disk_read_bytes_per_s: None,
        };
        let given = Given {
            synth_jobs: rng.gen_bool(0.3).then(|| rng.gen_range(1..8)),
            reserve_gib: rng.gen_bool(0.3).then(|| rng.gen_range(0..4)),
            ..Given::default()
        };
        let shape = Shape::filecoin_32gib(kind);
        let p = plan(&shape, &hw, &given);
        let cell = format!("{kind:?} {hw:?} {given:?}");
        if let Some(g) = given.synth_jobs {
            assert_eq!(p.knobs.synth_jobs.value, g, "{cell}");
        }
        if let Some(g) = given.reserve_gib {
            assert_eq!(p.knobs.reserve_gib.value, g, "{cell}");
        }
        if !p.runs() {
            continue;
        }
        let d = p.device.as_ref().unwrap();
        assert!(d.resident_bytes + d.partition_bytes <= d.budget, "{cell}");
        assert!(p.host.peak_bytes <= p.knobs.memory_budget.value, "{cell}");
        assert!(p.knobs.memory_budget.value <= hw.host_limit(), "{cell}");
        // Mapped pages page-locked in place lie outside the budget: with the page
        // cache the plan counts on, still within the budget's total.
        assert!(
            p.host.unevictable_bytes + p.host.cached_bytes
                <= MemoryBudget::total_for_limit(hw.host_limit()),
            "{cell}"
        );
        let bigger = Hardware {
            device_memory: hw.device_memory + (1 << 30),
            ..hw.clone()
        };
        let q = plan(&shape, &bigger, &given);
        let (a, b) = (
            p.expected.unwrap().s_per_proof,
            q.expected
                .expect("a bigger card runs what a smaller one does")
                .s_per_proof,
        );
        assert!(b <= a * 1.0001, "{cell}: {b} after {a}");
    }
}
