//! `[plan]`: what the planner is told rather than finds (`cuzk plan`, and every
//! command that plans: `cuzk serve`, `cuzk worker`, `cuzk c2`, `cuzk bench`).
//!
//! ```toml
//! [plan]
//! kinds = ["porep", "snap"]    # the shapes a daemon or worker plans for
//! disk_read_gbps = 3.0         # the disk under the points files
//! device_memory_gib = 16       # plan for such devices instead of asking the backend
//! devices = 1
//! ```
//!
//! Every key is optional. `cuzk plan`'s flags of the same names set these first.

use serde::{Deserialize, Serialize};

/// A Filecoin kind a daemon or worker plans for, at the 32 GiB sector size (the
/// planner's shapes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanKind {
    Porep,
    Snap,
    Window,
    Winning,
}

impl PlanKind {
    /// The name written in `kinds` (and taken by `cuzk plan --kind`).
    pub fn name(self) -> &'static str {
        match self {
            PlanKind::Porep => "porep",
            PlanKind::Snap => "snap",
            PlanKind::Window => "window",
            PlanKind::Winning => "winning",
        }
    }
}

/// The `[plan]` table as written (every key optional).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlanSection {
    /// The kinds a daemon (`cuzk serve`) or queue worker (`cuzk worker`) plans its
    /// one set of knobs for: each planned at 32 GiB, the knobs combined so that
    /// every one runs (the rule is `cuzk_plan::plan_served`'s). Default: every
    /// Filecoin kind they serve (porep, snap, window, winning). A kind left out is
    /// still served, with the knobs planned for the others. Commands that prove
    /// one shape (`cuzk c2`, `bench`) plan for it and ignore this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<PlanKind>>,
    /// GB a second the disk under the points files (`points_dir`) reads back
    /// what the page cache dropped. Default: the planner's assumption, 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_read_gbps: Option<f64>,
    /// Plan for devices of this many GiB instead of the devices the backend
    /// reports: to see the plan of another card, or to plan on a backend that
    /// reports none (the CPU backend; tests). The backend itself still places
    /// its sets on the card it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_memory_gib: Option<f64>,
    /// Devices, with `device_memory_gib` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<u32>,
}

impl PlanSection {
    /// The checks the types cannot make: positive sizes and speeds, no kind twice.
    pub fn validate(&self) -> Result<(), String> {
        let positive = |name: &str, v: Option<f64>| match v {
            Some(x) if !(x.is_finite() && x > 0.0) => {
                Err(format!("{name} = {x}: a positive number"))
            }
            _ => Ok(()),
        };
        positive("disk_read_gbps", self.disk_read_gbps)?;
        positive("device_memory_gib", self.device_memory_gib)?;
        if self.devices == Some(0) {
            return Err(
                "devices = 0: at least one (leave device_memory_gib out to plan for the backend's)"
                    .into(),
            );
        }
        if self.devices.is_some() && self.device_memory_gib.is_none() {
            return Err("devices needs device_memory_gib".into());
        }
        if let Some(kinds) = &self.kinds {
            if kinds.is_empty() {
                return Err("kinds = []: name at least one kind, or leave it out for all".into());
            }
            for (i, k) in kinds.iter().enumerate() {
                if kinds[..i].contains(k) {
                    return Err(format!("kinds names {} twice", k.name()));
                }
            }
        }
        Ok(())
    }
}
