//! One set of knobs for the shapes a daemon serves (`served.rs`): each knob
//! combined towards the choice every shape runs with, the given ones kept.

use super::*;

fn machine(device_gib: u64, host_gib: u64, cores: u32, mapped: bool) -> Hardware {
    Hardware {
        device_memory: device_gib * GIB,
        device_free: None,
        devices: 1,
        device_speed: None,
        host_memory: host_gib * GIB,
        cgroup_limit: None,
        cores,
        mapped,
        disk_read_bytes_per_s: None,
    }
}

fn shapes(kinds: &[Kind]) -> Vec<Shape> {
    kinds.iter().map(|&k| Shape::filecoin_32gib(k)).collect()
}

/// Served alone, a shape gets the knobs its own plan gives (what `cuzk c2` takes):
/// the combination changes nothing where there is nothing to combine.
#[test]
fn one_shape_served_is_planned_as_alone() {
    for (d, h, mapped) in [
        (16, 128, false),
        (16, 64, true),
        (80, 256, false),
        (139, 256, false),
    ] {
        let hw = machine(d, h, 16, mapped);
        for kind in Kind::ALL {
            let s = Shape::filecoin_32gib(kind);
            let alone = plan(&s, &hw, &Given::default());
            let served = plan_served(std::slice::from_ref(&s), &hw, &Given::default());
            assert_eq!(
                served.knobs, alone.knobs,
                "{kind:?} on {d}/{h} mapped {mapped}"
            );
            assert_eq!(
                served.plans[0].expected, alone.expected,
                "{kind:?} on {d}/{h}"
            );
        }
    }
}

/// On a 16 GiB card PoRep's R1CS does not fit beside its partition (a, b, c on the
/// host, and the table-free NTT) while WinningPoSt's does: served together, both
/// run PoRep's way, and Winning's s/proof is the one with those knobs.
#[test]
fn a_small_card_runs_every_shape_the_largest_ones_way() {
    let hw = machine(16, 128, 16, false);
    let porep = plan(&Shape::filecoin_32gib(Kind::Porep), &hw, &Given::default());
    let winning = plan(
        &Shape::filecoin_32gib(Kind::Winning),
        &hw,
        &Given::default(),
    );
    assert!(porep.runs() && winning.runs());
    assert!(!porep.knobs.abc_on_backend.value);
    assert!(
        winning.knobs.abc_on_backend.value,
        "the test needs shapes that differ"
    );
    assert_eq!(porep.knobs.ntt_kernel.value, NttKernel::Radix2WarpFast);

    let served = plan_served(
        &shapes(&[Kind::Winning, Kind::Porep]),
        &hw,
        &Given::default(),
    );
    assert!(served.left_out.is_empty());
    assert!(!served.knobs.abc_on_backend.value);
    assert_eq!(served.knobs.abc_on_backend.source, Source::Planned);
    assert_eq!(served.knobs.ntt_kernel.value, NttKernel::Radix2WarpFast);
    for p in &served.plans {
        assert!(p.runs(), "{:?}: {:?}", p.kind, p.fails);
        assert_eq!(p.knobs, served.knobs);
        assert!(!p.device.as_ref().unwrap().r1cs_resident, "{:?}", p.kind);
    }
    let w = served
        .plans
        .iter()
        .find(|p| p.kind == Kind::Winning)
        .unwrap();
    assert!(
        w.expected.as_ref().unwrap().s_per_proof
            >= winning.expected.as_ref().unwrap().s_per_proof * 0.999,
        "Winning cannot be faster with PoRep's knobs than with its own"
    );
}

/// The budget is the smallest any shape plans (mapped PoRep's, cut by the pages it
/// page-locks), and synthesis jobs the most any shape plans where the budget has
/// room: one-partition WinningPoSt's single job does not throttle PoRep.
#[test]
fn the_budget_is_the_smallest_and_synthesis_the_largest_shapes() {
    let hw = machine(16, 256, 16, true);
    let alone: Vec<Plan> = shapes(&[Kind::Porep, Kind::Winning])
        .iter()
        .map(|s| plan(s, &hw, &Given::default()))
        .collect();
    assert!(alone.iter().all(Plan::runs));
    let budgets: Vec<u64> = alone.iter().map(|p| p.knobs.memory_budget.value).collect();
    assert!(
        budgets[0] < budgets[1],
        "PoRep's budget is cut: {budgets:?}"
    );
    assert_eq!(alone[1].knobs.synth_jobs.value, 1);
    assert!(alone[0].knobs.synth_jobs.value > 1);

    let served = plan_served(
        &shapes(&[Kind::Porep, Kind::Winning]),
        &hw,
        &Given::default(),
    );
    assert_eq!(served.knobs.memory_budget.value, budgets[0]);
    assert_eq!(
        served.knobs.synth_jobs.value,
        alone[0].knobs.synth_jobs.value
    );
    assert!(served.plans.iter().all(Plan::runs));
}

/// A knob given is kept for every shape, and the others are still combined.
#[test]
fn a_given_knob_wins_for_every_shape() {
    let hw = machine(16, 128, 16, false);
    let given = Given {
        gpu_workers_per_device: Some(1),
        synth_jobs: Some(3),
        ..Given::default()
    };
    let served = plan_served(&shapes(&Kind::ALL), &hw, &given);
    assert_eq!(served.knobs.gpu_workers_per_device.value, 1);
    assert_eq!(served.knobs.gpu_workers_per_device.source, Source::Given);
    assert_eq!(served.knobs.synth_jobs.value, 3);
    assert_eq!(served.knobs.synth_jobs.source, Source::Given);
    assert_eq!(served.knobs.abc_on_backend.source, Source::Planned);
    assert!(!served.knobs.abc_on_backend.value);
}

/// A shape that does not run even alone (decoded PoRep on a 64 GiB host) is left
/// out of the combination: the others keep their own way.
#[test]
fn a_shape_that_cannot_run_is_left_out() {
    let hw = machine(16, 64, 16, false);
    let winning = plan(
        &Shape::filecoin_32gib(Kind::Winning),
        &hw,
        &Given::default(),
    );
    let served = plan_served(
        &shapes(&[Kind::Porep, Kind::Winning]),
        &hw,
        &Given::default(),
    );
    assert_eq!(served.left_out, [Kind::Porep]);
    assert!(served.runs());
    assert!(!served.plans[0].runs());
    assert_eq!(
        served.knobs.abc_on_backend.value,
        winning.knobs.abc_on_backend.value
    );
    assert_eq!(
        served.knobs.memory_budget.value,
        winning.knobs.memory_budget.value
    );
}
