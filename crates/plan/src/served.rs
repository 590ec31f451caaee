//! One set of knobs for several shapes: the plan of a process that serves them all
//! (`cuzk serve`, `cuzk worker`).
//!
//! The engine and the backend have one set of knobs, whichever kind a job is, so a
//! daemon cannot run PoRep on PoRep's plan and WinningPoSt on Winning's. Each
//! served shape is planned alone ([`plan`]), then the knobs are combined, each
//! towards the choice that is safe for every shape, and every shape is planned
//! again with the combined knobs given, which checks that each still runs and
//! gives its s/proof with them. The rule, knob by knob (over the shapes that run
//! alone; a shape that does not is left out of the combination and says why):
//!
//! - `abc_on_backend`: false where any shape's plan has `a, b, c` on the host (its
//!   compiled R1CS does not fit the device beside its partition);
//! - `stream_chunk`: the smallest chunk any shape forces (a smaller chunk needs
//!   less device memory and fewer page-locked bytes), else 0 (the backend's own);
//! - `ntt_kernel`: the table-free `r2wf` where any shape's plan takes it (the
//!   table of the largest domain does not fit);
//! - `witness_staging`: the largest shape's (most constraints) choice;
//! - `stream_staging`: `copy` where any shape's plan copies (it page-locks two
//!   chunks, not the streamed sets);
//! - `reserve_gib`: the largest;
//! - `gpu_workers_per_device`: the fewest (each worker holds a partition);
//! - the memory budget: the smallest (a budget cut for one shape's page-locked or
//!   page-cache bytes is the process's);
//! - `synth_jobs`: the most any shape plans, at most the partitions the budget has
//!   room for beside the GPU workers' with the largest shape's partitions, so the
//!   largest shape fits (the budget admits partitions by their bytes, so a smaller
//!   shape only waits less).
//!
//! A knob given explicitly is kept as given for every shape, as in [`plan`].
//! Each shape is planned as if its parameter set were the only one loaded: a
//! daemon's parameter cache evicts idle sets (`param_memory_gib`), and a job waits
//! in the budget for a set to fit.

use serde::Serialize;

use crate::{plan, Given, Hardware, Kind, Knob, Knobs, NttKernel, Plan, Shape};
use crate::{StreamStaging, WitnessStaging};

/// The plan of a process that serves several shapes with one set of knobs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Served {
    /// The knobs the process runs with: each given, or combined from the shapes'
    /// own plans (`planned`).
    pub knobs: Knobs,
    /// Each served shape planned with [`Served::knobs`] given: its expected
    /// s/proof with them, or why it does not run with them.
    pub plans: Vec<Plan>,
    /// The shapes that do not run on this machine even alone (their plans above
    /// say why): the knobs are combined from the others.
    pub left_out: Vec<Kind>,
}

impl Served {
    /// Whether any served shape runs with the combined knobs.
    pub fn runs(&self) -> bool {
        self.plans.iter().any(Plan::runs)
    }

    /// Whether the machine planned for has a device (else the knobs place
    /// nothing on one, and a process takes none of them, as `cuzk c2` does).
    pub fn has_device(&self) -> bool {
        self.plans
            .iter()
            .any(|p| p.hardware.devices > 0 && p.hardware.device_memory > 0)
    }
}

/// Plans `shapes`, served together by one process on `hw`, with one set of knobs
/// (the rule is this module's), the `given` knobs kept as they are.
pub fn plan_served(shapes: &[Shape], hw: &Hardware, given: &Given) -> Served {
    let alone: Vec<Plan> = shapes.iter().map(|s| plan(s, hw, given)).collect();
    let left_out: Vec<Kind> = alone.iter().filter(|p| !p.runs()).map(|p| p.kind).collect();
    let running: Vec<(&Shape, &Plan)> = shapes
        .iter()
        .zip(&alone)
        .filter(|(_, p)| p.runs())
        .collect();
    let Some(largest) = running
        .iter()
        .max_by_key(|(s, _)| s.constraints)
        .map(|(_, p)| p)
    else {
        // Nothing runs: the first shape's knobs, applied nowhere (`runs` is
        // false); with no shape at all, the smallest kind's, for the same reason.
        let knobs = alone.first().map_or_else(
            || plan(&Shape::filecoin_32gib(Kind::Winning), hw, given).knobs,
            |p| p.knobs.clone(),
        );
        return Served {
            knobs,
            plans: alone,
            left_out,
        };
    };
    let ps = || running.iter().map(|(_, p)| p);
    let forced = ps()
        .map(|p| p.knobs.stream_chunk.value)
        .filter(|&c| c > 0)
        .min();
    let combined = Given {
        abc_on_backend: Some(ps().all(|p| p.knobs.abc_on_backend.value)),
        stream_chunk: Some(forced.unwrap_or(0)),
        ntt_kernel: Some(
            if ps().any(|p| p.knobs.ntt_kernel.value == NttKernel::Radix2WarpFast) {
                NttKernel::Radix2WarpFast
            } else {
                largest.knobs.ntt_kernel.value
            },
        ),
        witness_staging: Some(largest.knobs.witness_staging.value),
        stream_staging: Some(
            if ps().any(|p| p.knobs.stream_staging.value == StreamStaging::Copy) {
                StreamStaging::Copy
            } else {
                StreamStaging::Register
            },
        ),
        reserve_gib: ps().map(|p| p.knobs.reserve_gib.value).max(),
        synth_jobs: None,
        gpu_workers_per_device: ps().map(|p| p.knobs.gpu_workers_per_device.value).min(),
        memory_budget: ps().map(|p| p.knobs.memory_budget.value).min(),
    };
    // The user's knobs first: the combination fills only what they left unset.
    let with = |c: &Given| Given {
        abc_on_backend: given.abc_on_backend.or(c.abc_on_backend),
        stream_chunk: given.stream_chunk.or(c.stream_chunk),
        ntt_kernel: given.ntt_kernel.or(c.ntt_kernel),
        witness_staging: given.witness_staging.or(c.witness_staging),
        stream_staging: given.stream_staging.or(c.stream_staging),
        reserve_gib: given.reserve_gib.or(c.reserve_gib),
        synth_jobs: given.synth_jobs.or(c.synth_jobs),
        gpu_workers_per_device: given.gpu_workers_per_device.or(c.gpu_workers_per_device),
        memory_budget: given.memory_budget.or(c.memory_budget),
    };
    let first = with(&combined);
    let again: Vec<Plan> = shapes.iter().map(|s| plan(s, hw, &first)).collect();
    let synth_jobs = given
        .synth_jobs
        .unwrap_or_else(|| combined_synth_jobs(shapes, hw, &again, &first));
    let all = Given {
        synth_jobs: Some(synth_jobs),
        ..first
    };
    let knobs = Knobs {
        abc_on_backend: Knob::of(given.abc_on_backend, all.abc_on_backend.unwrap_or(false)),
        stream_chunk: Knob::of(given.stream_chunk, all.stream_chunk.unwrap_or(0)),
        ntt_kernel: Knob::of(
            given.ntt_kernel,
            all.ntt_kernel.unwrap_or(NttKernel::DEFAULT),
        ),
        witness_staging: Knob::of(
            given.witness_staging,
            all.witness_staging.unwrap_or(WitnessStaging::Copy),
        ),
        stream_staging: Knob::of(
            given.stream_staging,
            all.stream_staging.unwrap_or(StreamStaging::Register),
        ),
        reserve_gib: Knob::of(
            given.reserve_gib,
            all.reserve_gib.unwrap_or(crate::DEFAULT_RESERVE_GIB),
        ),
        synth_jobs: Knob::of(given.synth_jobs, synth_jobs),
        gpu_workers_per_device: Knob::of(
            given.gpu_workers_per_device,
            all.gpu_workers_per_device.unwrap_or(1),
        ),
        memory_budget: Knob::of(given.memory_budget, all.memory_budget.unwrap_or(0)),
    };
    let plans = shapes
        .iter()
        .map(|s| {
            let mut p = plan(s, hw, &all);
            p.knobs = knobs.clone();
            p
        })
        .collect();
    Served {
        knobs,
        plans,
        left_out,
    }
}

/// The synthesis jobs of the shapes planned with the combined knobs (`plans`,
/// under one budget): the most any shape that runs plans, at most the room the
/// largest one's partitions leave beside the GPU workers'.
fn combined_synth_jobs(shapes: &[Shape], hw: &Hardware, plans: &[Plan], given: &Given) -> usize {
    let held_by_gpu =
        given.gpu_workers_per_device.unwrap_or(1) as u64 * u64::from(hw.devices.max(1));
    let running = || shapes.iter().zip(plans).filter(|(_, p)| p.runs());
    let most = running()
        .map(|(_, p)| p.knobs.synth_jobs.value)
        .max()
        .unwrap_or(1);
    let room = running()
        .max_by_key(|(s, _)| s.constraints)
        .map_or(1, |(_, p)| {
            p.host
                .partitions_in_flight
                .saturating_sub(held_by_gpu)
                .max(1) as usize
        });
    most.min(room).max(1)
}
