//! The plan of a daemon (`cuzk serve`) or a queue worker (`cuzk worker`): every
//! shape it serves, one set of knobs (`cuzk_plan::plan_served`'s rule), taken
//! where the configuration leaves them unset, as `cuzk c2` takes its one shape's.
//!
//! Which shapes: the 32 GiB shapes of `[plan] kinds`, by default every Filecoin
//! kind they serve (PoRep, SnapDeals, WindowPoSt, WinningPoSt). NI-PoRep,
//! aggregation and the synthetic kind are served with the knobs planned for these.
//! `cuzk plan --config` (no `--kind`) prints the same plan from the same functions
//! ([`shapes`], [`served_text`]), so what it prints is what the daemon logs.

use anyhow::Result;
use cuzk_config::{Config, PlanKind};
use cuzk_plan::{Hardware, Kind, Served, Shape};

use crate::plan::{describe, gib, knobs_rows, source};

/// The shapes a daemon or worker with `config` plans for.
pub(crate) fn shapes(config: &Config) -> Vec<Shape> {
    kinds(config)
        .into_iter()
        .map(Shape::filecoin_32gib)
        .collect()
}

/// The kinds of [`shapes`].
pub(crate) fn kinds(config: &Config) -> Vec<Kind> {
    match config.plan.as_ref().and_then(|p| p.kinds.as_ref()) {
        Some(kinds) => kinds.iter().map(|&k| kind_of(k)).collect(),
        None => Kind::ALL.to_vec(),
    }
}

fn kind_of(k: PlanKind) -> Kind {
    match k {
        PlanKind::Porep => Kind::Porep,
        PlanKind::Snap => Kind::Snap,
        PlanKind::Window => Kind::Window,
        PlanKind::Winning => Kind::Winning,
    }
}

/// The served plan as text: the machine, the knobs and, for each shape, its
/// s/proof with them. `cuzk plan` prints it and a daemon logs it at start.
pub(crate) fn served_text(hw: &Hardware, s: &Served) -> String {
    let names: Vec<&str> = s.plans.iter().map(|p| p.kind.name()).collect();
    let mut out = format!(
        "served together by cuzk serve and cuzk worker ({} at 32 GiB), one set of knobs:\n  {}\n",
        names.join(", "),
        describe(hw)
    );
    out.push_str(&format!("  {:<24} {:<10} source\n", "knob", "value"));
    for (name, value, src) in knobs_rows(&s.knobs) {
        out.push_str(&format!("  {name:<24} {value:<10} {}\n", source(src)));
    }
    for p in &s.plans {
        let line = match (&p.expected, &p.fails) {
            (Some(e), _) => format!(
                "{:.1} s/proof expected ({:?}-bound), {} partition(s) of {} in flight",
                e.s_per_proof,
                e.bound,
                p.host.partitions_in_flight,
                gib(p.host.partition_bytes)
            ),
            (None, Some(why)) if s.left_out.contains(&p.kind) => {
                format!("does not run on this machine, left out of the knobs: {why}")
            }
            (None, Some(why)) => format!("does not run with these knobs: {why}"),
            (None, None) => "not planned".to_string(),
        };
        let mapped = p.with_points_dir.map_or(String::new(), |s| {
            format!("; with points_dir (parameters memory-mapped) {s:.1} s/proof")
        });
        out.push_str(&format!("  {:<8} {line}{mapped}\n", p.kind.name()));
    }
    if !s.has_device() {
        out.push_str(
            "  no device: nothing is applied (the engine's defaults and the configuration)\n",
        );
    } else if !s.runs() {
        out.push_str("  nothing runs with these knobs: nothing is applied\n");
    }
    out
}

/// The served plan of `config` on the machine a process finds (`devices`: its
/// backend's; `mapped`: parameters memory-mapped from points files).
pub(crate) fn served_plan(
    config: &Config,
    devices: &[cuzk_gpu_backend::DeviceInfo],
    mapped: bool,
) -> Result<(Hardware, Served)> {
    let given = crate::plan::given_of(config)?;
    let hw = crate::plan::this_machine(config, devices, mapped);
    let served = cuzk_plan::plan_served(&shapes(config), &hw, &given);
    Ok((hw, served))
}

/// What a daemon or worker planned at start, for its log and its status.
pub struct StartPlan {
    /// [`served_text`], as logged.
    pub text: String,
    /// The knobs taken from the plan (unset in the configuration).
    pub applied: Vec<&'static str>,
    /// The plan as JSON: the machine, the knobs with their sources, each shape's
    /// plan with them.
    pub json: serde_json::Value,
}

/// Opens the configured strategies with the served plan's knobs where `cfg`
/// leaves them unset: as [`crate::plan::load_planned`] for one shape, the backend
/// opened again only where one of its own parameters changes. Nothing is applied
/// where the plan has no device or nothing runs.
pub(crate) fn load_served(
    cfg: &mut crate::runtime::RunConfig,
    needs: &cuzk_config::BackendNeeds,
    mapped: bool,
) -> Result<(cuzk_config::Built, StartPlan)> {
    let built = crate::runtime::load_policies(cfg, needs)?;
    let devices = built.policies.backend.capabilities().devices;
    let (hw, served) = served_plan(&cfg.config, &devices, mapped)?;
    let verify = cfg.engine.verify;
    let unmodelled = crate::plan::unmodelled_backend(&cfg.config);
    let (applied, reopen) = if unmodelled.is_none() && served.has_device() && served.runs() {
        crate::plan::apply_knobs(cfg, &served.knobs, hw.host_limit())
    } else {
        (Vec::new(), false)
    };
    cfg.engine.verify = verify;
    cfg.applied_plan = applied.clone();
    let mut text = match unmodelled {
        Some(other) => format!(
            "the planner models the CUDA backend: nothing of this plan is applied to `{other}`\n{}",
            served_text(&hw, &served)
        ),
        None => served_text(&hw, &served),
    };
    if let Some(note) = devices.first().and_then(crate::plan::taken_by_others) {
        text = format!("warning: {note}\n{text}");
    }
    let plan = StartPlan {
        text,
        json: serde_json::json!({ "applied": applied, "hardware": hw, "served": served }),
        applied,
    };
    if reopen {
        drop(built);
        return Ok((crate::runtime::load_policies(cfg, needs)?, plan));
    }
    Ok((built, plan))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::from_toml(text, "test").unwrap()
    }

    /// A 16 GiB card on a 128 GiB host serving PoRep and WinningPoSt (whose own
    /// plan keeps `a, b, c` on the device): the CUDA configuration takes PoRep's
    /// way for both where it is silent, and keeps its own `synth_jobs`.
    #[test]
    fn a_daemons_silent_knobs_take_the_served_plan() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut cfg = crate::runtime::RunArgs {
            config: Some(dir.join("cuda.toml")),
            ..crate::runtime::RunArgs::default()
        }
        .resolve()
        .unwrap();
        let hw = Hardware {
            device_memory: 16 << 30,
            device_free: None,
            devices: 1,
            device_speed: None,
            host_memory: 128 << 30,
            cgroup_limit: None,
            cores: 16,
            mapped: false,
            disk_read_bytes_per_s: None,
        };
        let given = crate::plan::given_of(&cfg.config).unwrap();
        let winning = cuzk_plan::plan(&Shape::filecoin_32gib(Kind::Winning), &hw, &given);
        assert!(winning.knobs.abc_on_backend.value);
        let mut two = cfg.config.clone();
        two.plan = Some(cuzk_config::PlanSection {
            kinds: Some(vec![PlanKind::Porep, PlanKind::Winning]),
            ..Default::default()
        });
        let served = cuzk_plan::plan_served(&shapes(&two), &hw, &given);
        assert!(served.has_device() && served.runs());
        let (applied, reopen) = crate::plan::apply_knobs(&mut cfg, &served.knobs, hw.host_limit());
        assert!(reopen);
        assert_eq!(applied, ["abc_on_backend", "ntt_kernel"]);
        assert_eq!(cfg.engine.abc_on_backend, Some(false));
        assert_eq!(cfg.engine.synth_jobs, Some(6), "the file's value stays");
    }

    /// `[plan] kinds` picks the shapes, in its order; left out, all four.
    #[test]
    fn the_shapes_are_plan_kinds_or_all() {
        let all: Vec<Kind> = shapes(&Config::default()).iter().map(|s| s.kind).collect();
        assert_eq!(all, Kind::ALL);
        let two = config("[plan]\nkinds = [\"winning\", \"porep\"]\n");
        let kinds: Vec<Kind> = shapes(&two).iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [Kind::Winning, Kind::Porep]);
    }

    /// A `[plan]` device stands for the backend's (the CPU backend has none), so a
    /// configuration on the CPU backend plans as `cuzk plan --device-memory-gib`.
    #[test]
    fn a_plan_device_stands_for_the_backends() {
        let c = config("[plan]\nkinds = [\"porep\"]\ndevice_memory_gib = 16\n");
        let (hw, served) = served_plan(&c, &[], false).unwrap();
        assert_eq!(hw.devices, 1);
        assert_eq!(hw.device_memory, 16 << 30);
        assert!(served.has_device());
        let (hw, served) = served_plan(&Config::default(), &[], false).unwrap();
        assert_eq!(hw.devices, 0);
        assert!(!served.has_device());
        assert!(served_text(&hw, &served).contains("no device: nothing is applied"));
    }
}
