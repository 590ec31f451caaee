//! `cuzk plan`: the planner's settings and expected s/proof for this machine (or
//! one described by flags), before anything runs; without `--kind`, also the one
//! set of knobs a daemon or worker with the `--config` runs every kind with
//! (`plan_served.rs`); and the plan a run records in its manifest.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use cuzk_config::Config;
use cuzk_plan::{
    Given, Hardware, Kind, NttKernel, Plan, Shape, Source, StreamStaging, StreamedFrom,
    WitnessStaging,
};

const GIB: f64 = (1u64 << 30) as f64;

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The kind to plan for, at the 32 GiB sector size: porep, snap, window or
    /// winning (default: all four, then the one set of knobs `cuzk serve` and
    /// `cuzk worker` run them all with, for `[plan] kinds`).
    #[arg(long, value_parser = parse_kind)]
    pub kind: Option<Kind>,
    /// A `cuzk.toml`: its `[engine]` knobs and the CUDA backend's parameters are
    /// given (kept as they are, not planned), its backend is asked for its
    /// devices (`[daemon] gpus` picks one, as `cuzk serve` does), and its `[plan]`
    /// table is read under these flags.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Plan for devices of this many GiB instead of asking the backend.
    #[arg(long)]
    pub device_memory_gib: Option<f64>,
    /// Devices (with --device-memory-gib; default 1).
    #[arg(long)]
    pub devices: Option<u32>,
    /// Plan for a host of this many GiB (MemTotal and no cgroup limit) instead of
    /// reading this one.
    #[arg(long)]
    pub host_memory_gib: Option<f64>,
    /// Plan for this many cores instead of this host's.
    #[arg(long)]
    pub cores: Option<u32>,
    /// Plan with the parameters memory-mapped from points files in this
    /// directory, as `--points-dir` of the proving commands (and `[daemon]
    /// points_dir` of the --config) map them: page cache, not anonymous memory.
    /// The directory is not read.
    #[arg(long)]
    pub points_dir: Option<PathBuf>,
    /// How fast the disk under the points files reads back what the page cache
    /// dropped, in GB/s (default: the planner's assumption, 2).
    #[arg(long)]
    pub disk_read_gbps: Option<f64>,
    /// Print the plans as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print the plan of one kind (--kind) as a `cuzk.toml` with the CUDA backend
    /// (every knob, planned and given), to run with.
    #[arg(long, conflicts_with = "json", requires = "kind")]
    pub toml: bool,
}

fn parse_kind(s: &str) -> Result<Kind, String> {
    Kind::parse(s).ok_or_else(|| {
        let names: Vec<_> = Kind::ALL.iter().map(|k| k.name()).collect();
        format!("unknown kind `{s}`: choose one of {}", names.join(", "))
    })
}

pub fn run(mut args: PlanArgs) -> Result<()> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    // `[daemon] gpus` picks the backend's device as `cuzk serve` does.
    crate::serve::daemon_gpus(&mut config)?;
    // `[plan]`'s machine, under the flags.
    if let Some(p) = &config.plan {
        if args.device_memory_gib.is_none() {
            args.device_memory_gib = p.device_memory_gib;
            args.devices = args.devices.or(p.devices);
        }
        args.disk_read_gbps = args.disk_read_gbps.or(p.disk_read_gbps);
    }
    let given = given_of(&config)?;
    let (hw, assumed) = hardware(&args, &config);
    // Without --kind, the kinds a daemon with this configuration serves.
    let kinds = args
        .kind
        .map_or_else(|| crate::plan_served::kinds(&config), |k| vec![k]);
    let plans: Vec<Plan> = kinds
        .iter()
        .map(|&k| cuzk_plan::plan(&Shape::filecoin_32gib(k), &hw, &given))
        .collect();
    if args.toml {
        let p = &plans[0];
        if let Some(why) = &p.fails {
            bail!("{} does not run on this machine: {why}", p.kind.name());
        }
        print!("{}", toml_of(p));
        return Ok(());
    }
    let served = args
        .kind
        .is_none()
        .then(|| cuzk_plan::plan_served(&crate::plan_served::shapes(&config), &hw, &given));
    if args.json {
        let out = serde_json::json!({ "assumed": assumed, "plans": plans, "served": served });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{}", describe(&hw));
    for a in &assumed {
        println!("  assumed: {a}");
    }
    for p in &plans {
        println!();
        print_plan(p);
    }
    if let Some(served) = &served {
        println!();
        print!("{}", crate::plan_served::served_text(&hw, served));
    }
    Ok(())
}

/// The knobs `config` sets: the engine's, and the CUDA backend's where the
/// backend is the `cuda` plugin.
pub(crate) fn given_of(config: &Config) -> Result<Given> {
    let e = &config.engine;
    let mut given = Given {
        abc_on_backend: e.abc_on_backend,
        synth_jobs: e.synth_jobs,
        gpu_workers_per_device: e.gpu_workers_per_device,
        memory_budget: e.memory_budget_gib.map(|g| (g * GIB) as u64),
        ..Given::default()
    };
    if let Some(slot) = config
        .backend
        .as_ref()
        .filter(|s| s.plugin.as_deref() == Some("cuda"))
    {
        let params = slot.text_params("backend")?;
        let num = |k: &str| -> Result<Option<u64>> {
            params
                .get(k)
                .map(|v| {
                    v.parse()
                        .with_context(|| format!("backend parameter {k} = {v:?}"))
                })
                .transpose()
        };
        given.stream_chunk = num("stream_chunk")?.map(|v| v as usize);
        given.reserve_gib = num("reserve_gib")?;
        if let Some(v) = params.get("ntt_kernel") {
            given.ntt_kernel = Some(NttKernel::from_name(v)?);
        }
        given.witness_staging = match params.get("witness_staging").map(String::as_str) {
            None => None,
            Some("copy") => Some(WitnessStaging::Copy),
            Some("register") => Some(WitnessStaging::Register),
            Some(v) => bail!("backend parameter witness_staging = {v:?}: copy or register"),
        };
        given.stream_staging = match params.get("stream_staging").map(String::as_str) {
            None => None,
            Some(v) => Some(stream_staging_of(v)?),
        };
    }
    Ok(given)
}

fn stream_staging_of(v: &str) -> Result<StreamStaging> {
    match v {
        "copy" => Ok(StreamStaging::Copy),
        "register" => Ok(StreamStaging::Register),
        v => bail!("backend parameter stream_staging = {v:?}: copy or register"),
    }
}

fn stream_staging_name(s: StreamStaging) -> &'static str {
    match s {
        StreamStaging::Copy => "copy",
        StreamStaging::Register => "register",
    }
}

/// The CUDA backend's `device_memory_gib` in `config` (a smaller card emulated),
/// where set.
fn emulated_gib(config: &Config) -> Option<u64> {
    let slot = config
        .backend
        .as_ref()
        .filter(|s| s.plugin.as_deref() == Some("cuda"))?;
    let params = slot.text_params("backend").ok()?;
    params
        .get("device_memory_gib")?
        .parse::<u64>()
        .ok()
        .filter(|&g| g > 0)
}

/// `hw` as the backend will plan it where `config` emulates a smaller card.
fn emulate(hw: &mut Hardware, config: &Config) -> Option<u64> {
    let gib = emulated_gib(config)?;
    if hw.devices == 0 || gib << 30 >= hw.device_memory {
        return None;
    }
    hw.device_memory = gib << 30;
    hw.device_free = None;
    Some(gib)
}

/// The machine to plan for: flags first, else this host (MemTotal, the cgroup
/// limit the memory budget reads, the cores) and the configured backend's
/// devices; with what was assumed.
fn hardware(args: &PlanArgs, config: &Config) -> (Hardware, Vec<String>) {
    let mut assumed = Vec::new();
    let cores = args
        .cores
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    let (host_memory, cgroup_limit) = match args.host_memory_gib {
        Some(g) => ((g * GIB) as u64, None),
        None => {
            let total = crate::bench::mem_total().unwrap_or_else(|| {
                assumed.push("8 GiB of host memory (/proc/meminfo unreadable)".into());
                8 << 30
            });
            let limit = cuzk_scheduler::machine_limit().filter(|&l| l < total);
            (total, limit)
        }
    };
    let mapped = args.points_dir.is_some()
        || config
            .daemon
            .as_ref()
            .is_some_and(|d| d.points_dir.is_some());
    let mut hw = Hardware {
        device_memory: 0,
        device_free: None,
        devices: 0,
        device_speed: None,
        host_memory,
        cgroup_limit,
        cores,
        mapped,
        disk_read_bytes_per_s: args.disk_read_gbps.map(|g| g * 1e9),
    };
    if mapped {
        assumed.push(format!(
            "the points files' disk reads back at {:.1} GB/s{}",
            hw.disk_read_bytes_per_s
                .unwrap_or(cuzk_plan::DISK_READ_BYTES_PER_S)
                / 1e9,
            if args.disk_read_gbps.is_some() {
                " (flag)"
            } else {
                " (the planner's assumption; --disk-read-gbps)"
            }
        ));
    }
    match args.device_memory_gib {
        Some(g) => {
            hw.device_memory = (g * GIB) as u64;
            hw.devices = args.devices.unwrap_or(1);
            assumed.push(format!(
                "{} device(s) of {g} GiB (--device-memory-gib or [plan]), {:.2} GiB of it taken by the CUDA context",
                hw.devices,
                cuzk_plan::DEVICE_CONTEXT_BYTES as f64 / GIB
            ));
        }
        None => match devices_to_plan(args, config, &mut assumed) {
            Ok(devices) if !devices.is_empty() => {
                hw.device_memory = devices[0].total_memory;
                hw.device_free = Some(devices[0].free_memory);
                hw.devices = devices.len() as u32;
                assumed.push(format!(
                    "the devices the backend reports ({}), all like the first",
                    devices
                        .iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                if let Some(note) = taken_by_others(&devices[0]) {
                    assumed.push(note);
                }
            }
            Ok(_) => assumed.push(
                "no device: the configured backend drives none (pass --device-memory-gib to plan for a card)"
                    .into(),
            ),
            Err(e) => assumed.push(format!(
                "no device: the configured backend could not be opened ({e:#}); pass --device-memory-gib to plan for a card"
            )),
        },
    }
    if args.device_memory_gib.is_none() {
        if let Some(g) = emulate(&mut hw, config) {
            note_emulated(&mut assumed, g);
        }
    }
    if hw.devices > 0 && hw.device_memory < (100u64 << 30) {
        assumed.push(format!(
            "device time as an H100's ({:.2}x the H200's); consumer cards are not measured",
            cuzk_plan::H100_VS_H200
        ));
    }
    (hw, assumed)
}

/// Memory beyond the CUDA context that another process held on the card when the
/// backend opened it, worth a word from 1 GiB on: the plan leaves it to them, so a
/// plan made while another run was still giving its memory back is a smaller card's
/// (measured on an H100 on 2026-12-07: a 24 GiB card's plan, 41.9 s/proof expected
/// against the idle card's 15.7, made a second after a 70 GiB process exited).
pub(crate) fn taken_by_others(device: &cuzk_gpu_backend::DeviceInfo) -> Option<String> {
    let others = device
        .total_memory
        .saturating_sub(device.free_memory)
        .saturating_sub(cuzk_plan::DEVICE_CONTEXT_BYTES);
    (others >= 1 << 30).then(|| {
        format!(
            "{:.1} of the card's {:.1} GiB were in use by other processes when it was opened: \
             the plan leaves them that; plan again with the card idle, or give --device-memory-gib",
            others as f64 / GIB,
            device.total_memory as f64 / GIB
        )
    })
}

fn note_emulated(assumed: &mut Vec<String>, gib: u64) {
    assumed.push(format!(
        "a card of {gib} GiB: the backend's device_memory_gib emulates one"
    ));
}

/// The configured backend's devices (opening it: a CUDA context per device).
fn backend_devices(config: &Config) -> Result<Vec<cuzk_gpu_backend::DeviceInfo>> {
    let built = config.build_policies(&config.backend_needs(None))?;
    Ok(built.policies.backend.capabilities().devices)
}

/// The devices to plan for: the configured backend's. Without `--config` the
/// configuration is the embedded default, whose CPU backend drives no device, while
/// the plan (and the `cuzk.toml` that `--toml` writes) is the CUDA backend's: then
/// the CUDA backend is asked too, so that `cuzk plan` on a GPU machine plans its
/// card with no flags. (Without this, a plan made there was a host-only plan put
/// in a CUDA configuration: the H100 streams of 2026-12-07 ran with one.)
fn devices_to_plan(
    args: &PlanArgs,
    config: &Config,
    assumed: &mut Vec<String>,
) -> Result<Vec<cuzk_gpu_backend::DeviceInfo>> {
    let devices = backend_devices(config)?;
    if !devices.is_empty() || args.config.is_some() {
        return Ok(devices);
    }
    let mut cuda = config.clone();
    cuda.backend = Some(cuzk_config::Slot::plugin("cuda"));
    match backend_devices(&cuda) {
        Ok(found) if !found.is_empty() => {
            assumed.push(
                "no --config: the CUDA backend's devices, the backend --toml configures".into(),
            );
            Ok(found)
        }
        Ok(_) => Ok(devices),
        Err(e) => {
            assumed.push(format!(
                "no --config: the CUDA backend could not be opened either ({e:#})"
            ));
            Ok(devices)
        }
    }
}

pub(crate) fn describe(hw: &Hardware) -> String {
    let device = if hw.devices == 0 {
        "no device".to_string()
    } else {
        format!(
            "{} device(s) of {:.1} GiB{}",
            hw.devices,
            hw.device_memory as f64 / GIB,
            hw.device_free
                .map(|f| format!(" ({:.1} GiB free)", f as f64 / GIB))
                .unwrap_or_default()
        )
    };
    format!(
        "planning for {device}, a host of {:.1} GiB{}, {} cores, parameters {}",
        hw.host_memory as f64 / GIB,
        hw.cgroup_limit
            .map(|c| format!(" (cgroup limit {:.1} GiB)", c as f64 / GIB))
            .unwrap_or_default(),
        hw.cores,
        if hw.mapped {
            "memory-mapped from points files"
        } else {
            "decoded into memory"
        }
    )
}

pub(crate) fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / GIB)
}

pub(crate) fn source(s: Source) -> &'static str {
    match s {
        Source::Planned => "planned",
        Source::Given => "given",
    }
}

/// The knobs as `(name, value, source)`, in the order the table prints them.
fn knob_rows(p: &Plan) -> Vec<(&'static str, String, Source)> {
    knobs_rows(&p.knobs)
}

/// [`knob_rows`] of a set of knobs.
pub(crate) fn knobs_rows(k: &cuzk_plan::Knobs) -> Vec<(&'static str, String, Source)> {
    vec![
        (
            "abc_on_backend",
            k.abc_on_backend.value.to_string(),
            k.abc_on_backend.source,
        ),
        (
            "stream_chunk",
            k.stream_chunk.value.to_string(),
            k.stream_chunk.source,
        ),
        (
            "ntt_kernel",
            k.ntt_kernel.value.name().to_string(),
            k.ntt_kernel.source,
        ),
        (
            "witness_staging",
            match k.witness_staging.value {
                WitnessStaging::Copy => "copy",
                WitnessStaging::Register => "register",
            }
            .to_string(),
            k.witness_staging.source,
        ),
        (
            "stream_staging",
            stream_staging_name(k.stream_staging.value).to_string(),
            k.stream_staging.source,
        ),
        (
            "reserve_gib",
            k.reserve_gib.value.to_string(),
            k.reserve_gib.source,
        ),
        (
            "synth_jobs",
            k.synth_jobs.value.to_string(),
            k.synth_jobs.source,
        ),
        (
            "gpu_workers_per_device",
            k.gpu_workers_per_device.value.to_string(),
            k.gpu_workers_per_device.source,
        ),
        (
            "memory_budget_gib",
            format!("{:.1}", k.memory_budget.value as f64 / GIB),
            k.memory_budget.source,
        ),
    ]
}

/// A `cuzk.toml` running `p`: the engine's knobs and the CUDA backend's
/// parameters, each with whether it was planned or given.
fn toml_of(p: &Plan) -> String {
    let mut engine = String::new();
    let mut backend = String::new();
    for (name, value, s) in knob_rows(p) {
        let line = format!("{name} = {} # {}\n", quoted(name, &value), source(s));
        match name {
            "stream_chunk" | "ntt_kernel" | "witness_staging" | "stream_staging"
            | "reserve_gib" => backend.push_str(&line),
            _ => engine.push_str(&line),
        }
    }
    format!(
        "# cuzk plan --kind {}: {}\n{}[engine]\n{engine}\n[backend]\nplugin = \"cuda\"\n\n[backend.params]\n{backend}",
        p.kind.name(),
        p.expected
            .as_ref()
            .map_or(String::new(), |e| format!("{:.1} s/proof expected", e.s_per_proof)),
        if p.hardware.mapped {
            "# planned with the parameters memory-mapped from points files: run with --points-dir\n"
        } else {
            ""
        }
    )
}

/// A knob's TOML value: the names are strings, the rest numbers and booleans.
fn quoted(name: &str, value: &str) -> String {
    match name {
        "ntt_kernel" | "witness_staging" | "stream_staging" => format!("\"{value}\""),
        _ => value.to_string(),
    }
}

fn print_plan(p: &Plan) {
    let shape = Shape::filecoin_32gib(p.kind);
    println!(
        "{} ({}, {} partition(s) of {} constraints)",
        p.kind.name(),
        shape.circuit,
        shape.partitions,
        shape.constraints
    );
    if let Some(why) = &p.fails {
        println!("  does not run: {why}");
    }
    if let Some(s) = p.with_points_dir {
        println!(
            "  with --points-dir (parameters memory-mapped from points files, {} written once) this host runs at {s:.1} s/proof",
            gib(p.host.params_bytes)
        );
    }
    println!("  {:<24} {:<10} source", "knob", "value");
    for (name, value, s) in knob_rows(p) {
        println!("  {name:<24} {value:<10} {}", source(s));
    }
    if let Some(d) = &p.device {
        let sets = ["H", "L", "A", "B_G1", "B_G2"];
        let resident: Vec<&str> = sets
            .iter()
            .zip(d.bases_resident)
            .filter(|(_, r)| *r)
            .map(|(s, _)| *s)
            .collect();
        println!(
            "  device: plans with {}; resident: {}{} ({}); a partition {} beside it, H in {} buffers; {}",
            gib(d.budget),
            if d.r1cs_resident { "R1CS, " } else { "" },
            if resident.is_empty() {
                "no bases".to_string()
            } else {
                format!("bases {}", resident.join(" "))
            },
            gib(d.resident_bytes),
            gib(d.partition_bytes),
            d.h_buffers.name(),
            match d.chunk {
                Some(c) => format!(
                    "the rest streamed in chunks of {c} points{}, {:.1} GB over PCIe a partition",
                    match d.split_chunk {
                        Some(s) if s != c => format!(" (L, A, B: {s})"),
                        _ => String::new(),
                    },
                    d.transfer_bytes as f64 / 1e9
                ),
                None => format!(
                    "{:.1} GB over PCIe a partition",
                    d.transfer_bytes as f64 / 1e9
                ),
            }
        );
    }
    if p.runs() {
        let h = &p.host;
        println!(
            "  host: limit {}, budget {}: parameters {}, {} partition(s) of {} in flight, {} page-locked in {} buffer(s)",
            gib(h.limit),
            gib(p.knobs.memory_budget.value),
            if h.mapped {
                format!("{} mapped (page cache, outside the budget)", gib(h.params_bytes))
            } else {
                gib(h.params_bytes)
            },
            h.partitions_in_flight,
            gib(h.partition_bytes),
            gib(h.pinned_bytes),
            h.pinned_buffers
        );
        let from = match h.streamed_from {
            StreamedFrom::Nothing => None,
            StreamedFrom::Memory => Some("from the decoded parameters".to_string()),
            StreamedFrom::Pinned => Some(format!(
                "page-locked in place: {} pinned outside the budget",
                gib(h.registered_bytes)
            )),
            StreamedFrom::PageCache => Some("from the page cache".to_string()),
            StreamedFrom::Disk => Some(format!(
                "{} kept in the page cache, {} read back from disk",
                gib(h.cached_bytes),
                gib(h.disk_bytes)
            )),
        };
        if let Some(from) = from {
            println!(
                "  streamed sets: {} a partition, {from}",
                gib(h.streamed_bytes)
            );
        }
    }
    if let Some(e) = &p.expected {
        println!(
            "  expected: {:.1} s/proof ({:?}-bound: {:.2} s device, {:.2} s host a partition)",
            e.s_per_proof, e.bound, e.device_s, e.host_s
        );
        for b in &e.basis {
            println!("    {b}");
        }
    }
}

/// The configured GPU backend plugin when it is one the planner does not model
/// (its device memory and speed are the CUDA backend's `footprint` and
/// measurements): a plan made for CUDA would set knobs such a backend cannot
/// honour (`abc_on_backend` for one that does not evaluate a, b, c), so none is
/// applied to it.
pub(crate) fn unmodelled_backend(config: &Config) -> Option<String> {
    let plugin = config.backend.as_ref()?.plugin.as_deref()?;
    (plugin != "cuda" && plugin != "cpu").then(|| plugin.to_string())
}

/// The machine a run is on: this host and the backend's devices, its parameters
/// mapped or not.
pub(crate) fn this_machine(
    config: &Config,
    devices: &[cuzk_gpu_backend::DeviceInfo],
    mapped: bool,
) -> Hardware {
    let total = crate::bench::mem_total().unwrap_or(8 << 30);
    let mut hw = Hardware {
        device_memory: devices.first().map_or(0, |d| d.total_memory),
        device_free: devices.first().map(|d| d.free_memory),
        devices: devices.len() as u32,
        device_speed: None,
        host_memory: total,
        cgroup_limit: cuzk_scheduler::machine_limit().filter(|&l| l < total),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        mapped,
        disk_read_bytes_per_s: None,
    };
    let told = config.plan.clone().unwrap_or_default();
    hw.disk_read_bytes_per_s = told.disk_read_gbps.map(|g| g * 1e9);
    match told.device_memory_gib {
        // As `cuzk plan --device-memory-gib`: the card described, not the backend's.
        Some(g) => {
            hw.device_memory = (g * GIB) as u64;
            hw.device_free = None;
            hw.devices = told.devices.unwrap_or(1);
        }
        None => {
            emulate(&mut hw, config);
        }
    }
    hw
}

/// The knobs a run takes from the plan where its configuration left them unset:
/// those that decide whether it fits at all (`abc_on_backend`, GPU workers, and
/// the CUDA backend's `stream_chunk`, `ntt_kernel`, `witness_staging`,
/// `stream_staging`), and the memory budget where the plan cuts it below the
/// engine's default (mapped parameters: pages page-locked in place lie outside the
/// budget, or the page cache is left room for the streamed sets). Synthesis jobs
/// stay the engine's own default. Nothing is applied where the machine planned
/// for has no device (the backend drives none and `[plan]` describes none) or the
/// plan does not run (the run then fails or succeeds as configured;
/// where mapped parameters would run, it says so).
/// Returns the knobs applied and whether a backend parameter changed (the
/// backend must be opened again).
pub(crate) fn apply(
    cfg: &mut crate::runtime::RunConfig,
    counts: &cuzk_plan::Counts,
    devices: &[cuzk_gpu_backend::DeviceInfo],
) -> (Vec<&'static str>, bool) {
    let hw = this_machine(&cfg.config, devices, counts.mapped);
    if hw.devices == 0 {
        return (Vec::new(), false);
    }
    if let Some(other) = unmodelled_backend(&cfg.config) {
        eprintln!(
            "the planner models the CUDA backend's device memory and speed: `{other}` runs with the knobs configured"
        );
        return (Vec::new(), false);
    }
    let Ok(given) = given_of(&cfg.config) else {
        return (Vec::new(), false);
    };
    let p = cuzk_plan::plan(&Shape::from_counts(counts), &hw, &given);
    match (&p.fails, &p.expected, p.with_points_dir) {
        (Some(why), _, Some(s)) => eprintln!(
            "the planner says this run does not fit ({why}); with --points-dir (parameters memory-mapped from points files) it would run at {s:.1} s/proof"
        ),
        (None, Some(e), Some(s)) => eprintln!(
            "the planner expects {:.1} s/proof here, and {s:.1} with --points-dir (parameters memory-mapped from points files)",
            e.s_per_proof
        ),
        _ => {}
    }
    apply_plan(cfg, &p)
}

/// Opens the configured strategies with the planner's knobs where `cfg` leaves
/// them unset ([`apply`]): the backend is opened, asked for its devices, and
/// opened again only where one of its own parameters changes. `cfg` comes back
/// with the knobs set and `applied_plan` naming them; `verify` is kept as it was.
pub(crate) fn load_planned(
    cfg: &mut crate::runtime::RunConfig,
    needs: &cuzk_config::BackendNeeds,
    counts: &cuzk_plan::Counts,
) -> Result<cuzk_config::Built> {
    let built = crate::runtime::load_policies(cfg, needs)?;
    let devices = built.policies.backend.capabilities().devices;
    if let Some(note) = devices.first().and_then(taken_by_others) {
        eprintln!("warning: {note}");
    }
    let verify = cfg.engine.verify;
    let (applied, reopen) = apply(cfg, counts, &devices);
    cfg.engine.verify = verify;
    if !applied.is_empty() {
        eprintln!(
            "planned for this machine (unset in the configuration): {}",
            applied.join(", ")
        );
    }
    cfg.applied_plan = applied;
    if reopen {
        drop(built);
        return crate::runtime::load_policies(cfg, needs);
    }
    Ok(built)
}

/// The counts the planner reads of a compiled shape and its parameters.
pub(crate) fn counts_of(
    r1cs: &cuzk_synth::R1cs,
    srs: &cuzk_scheduler::Srs,
    partitions: usize,
) -> cuzk_plan::Counts {
    cuzk_plan::Counts {
        partitions: partitions as u32,
        constraints: r1cs.num_constraints(),
        inputs: r1cs.num_inputs(),
        aux: r1cs.num_aux(),
        bases: [
            srs.h.len(),
            srs.l.len(),
            srs.a.len(),
            srs.b_g1.len(),
            srs.b_g2.len(),
        ],
        nnz: r1cs.nnz(),
        coeffs: r1cs.num_coefficients(),
        mapped: srs.mapped_bytes() > 0,
    }
}

/// [`apply`] with the plan made: its planned knobs set in `cfg`.
fn apply_plan(cfg: &mut crate::runtime::RunConfig, p: &Plan) -> (Vec<&'static str>, bool) {
    if !p.runs() || p.device.is_none() {
        return (Vec::new(), false);
    }
    apply_knobs(cfg, &p.knobs, p.hardware.host_limit())
}

/// The planned knobs of `k` set in `cfg` (those [`apply`] takes), the given ones
/// left as they are; `host_limit` is the limit the plan was made for.
pub(crate) fn apply_knobs(
    cfg: &mut crate::runtime::RunConfig,
    k: &cuzk_plan::Knobs,
    host_limit: u64,
) -> (Vec<&'static str>, bool) {
    let mut applied = Vec::new();
    let e = &mut cfg.config.engine;
    if k.abc_on_backend.source == Source::Planned {
        e.abc_on_backend = Some(k.abc_on_backend.value);
        applied.push("abc_on_backend");
    }
    if k.gpu_workers_per_device.source == Source::Planned {
        e.gpu_workers_per_device = Some(k.gpu_workers_per_device.value);
        applied.push("gpu_workers_per_device");
    }
    // The budget only where the plan cuts it: else the engine's own default, the
    // same total for the same limit.
    let default_budget = cuzk_scheduler::MemoryBudget::total_for_limit(host_limit);
    if k.memory_budget.source == Source::Planned && k.memory_budget.value < default_budget {
        // Whole MiB, rounded down: the file's GiB read back to the same bytes.
        e.memory_budget_gib = Some((k.memory_budget.value >> 20) as f64 / 1024.0);
        applied.push("memory_budget_gib");
    }
    let mut reopen = false;
    let cuda = cfg
        .config
        .backend
        .as_mut()
        .filter(|s| s.plugin.as_deref() == Some("cuda"));
    if let Some(slot) = cuda {
        // Set only where the plan differs from the backend's default: the same
        // backend otherwise, opened once.
        let mut set = |name: &'static str, value: toml::Value, default: bool| {
            if !default {
                slot.params.insert(name.to_string(), value);
                applied.push(name);
                reopen = true;
            }
        };
        if k.stream_chunk.source == Source::Planned {
            let c = k.stream_chunk.value;
            set("stream_chunk", toml::Value::Integer(c as i64), c == 0);
        }
        if k.ntt_kernel.source == Source::Planned {
            let n = k.ntt_kernel.value;
            set("ntt_kernel", n.name().into(), n == NttKernel::DEFAULT);
        }
        if k.witness_staging.source == Source::Planned {
            let copy = k.witness_staging.value == WitnessStaging::Copy;
            set(
                "witness_staging",
                if copy { "copy" } else { "register" }.into(),
                copy,
            );
        }
        if k.stream_staging.source == Source::Planned {
            let s = k.stream_staging.value;
            set(
                "stream_staging",
                stream_staging_name(s).into(),
                s == StreamStaging::Register,
            );
        }
    }
    cfg.engine = cfg.config.pipeline_config();
    (applied, reopen)
}

/// The plan a run records in its manifest: for its own shape, on this host and
/// the backend's devices, with the run's configuration as the given knobs, and
/// which knobs the configuration gave, which the run took from the plan
/// (`applied`) and which it left to the engine's own defaults (`planned`).
pub(crate) fn manifest_plan(
    cfg: &crate::runtime::RunConfig,
    counts: &cuzk_plan::Counts,
    devices: &[cuzk_gpu_backend::DeviceInfo],
) -> serde_json::Value {
    let given = match given_of(&cfg.config) {
        Ok(g) => g,
        Err(e) => return serde_json::json!({ "error": format!("{e:#}") }),
    };
    let p = cuzk_plan::plan(
        &Shape::from_counts(counts),
        &this_machine(&cfg.config, devices, counts.mapped),
        &given,
    );
    let rows = knob_rows(&p);
    let names = |f: &dyn Fn(&'static str, Source) -> bool| -> Vec<&'static str> {
        rows.iter()
            .filter(|(n, _, s)| f(n, *s))
            .map(|(n, _, _)| *n)
            .collect()
    };
    let applied = &cfg.applied_plan;
    serde_json::json!({
        "given": names(&|n, s| s == Source::Given && !applied.contains(&n)),
        "applied": applied,
        "planned": names(&|_, s| s == Source::Planned),
        "plan": p,
    })
}

#[cfg(test)]
mod tests;
