//! `cuzk serve`: the proving daemon. The engine and plugins come from the same
//! `cuzk.toml` tables as every other command; the daemon's own settings from its
//! `[daemon]` table.

use std::{path::Path, sync::Arc};

use anyhow::{Context, Result};
use clap::Args;
use cuzk_daemon::{Bound, DaemonConfig, Shutdown};
use cuzk_filecoin::service_kind::ServiceProvers;
use cuzk_service::{synthetic::SyntheticKind, KindProver, Service, ServiceConfig};

use crate::runtime::{RunArgs, RunConfig};

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Overrides `[daemon] listen`: `host:port` or `unix:///path`.
    #[arg(long)]
    pub listen: Option<String>,
    /// Overrides `[daemon] timing_only_circuits` (benchmarks only): Filecoin
    /// circuit ids, comma-separated (`porep-32g,winning-32g`), proved with
    /// timing-only parameters (random points, no parameter file); their proofs are
    /// returned UNVERIFIED and do not verify. Default: none.
    #[arg(long, value_delimiter = ',')]
    pub timing_only_circuits: Option<Vec<String>>,
}

/// The seed of the timing-only parameters (the one `cuzk bench --timing-only` uses).
const TIMING_ONLY_SEED: u64 = 7;

/// What a process proves: every Filecoin kind over one prover, and (for tests
/// and benchmarks) the synthetic kind. `cuzk serve` and `cuzk worker` both
/// register their kinds through [`service_kinds`], so the daemon and the queue
/// serve the same kinds the same way.
#[derive(Debug)]
pub struct KindsSetup<'a> {
    /// Who asks, for warnings (`cuzk serve`, `worker w1`).
    pub who: &'a str,
    /// Where the parameter directory was set, for errors (`[daemon] param_cache`).
    pub param_cache_key: &'a str,
    /// Filecoin's parameters (and the synthetic kind's cache).
    pub param_cache: &'a Path,
    /// Benchmarks only: circuit ids proved with random-point parameters.
    pub timing_only_circuits: &'a [String],
    /// Serve the synthetic kind (cuzk's built-in circuits), and how.
    pub synthetic: Option<SyntheticSetup>,
    /// Check each parameter file against Filecoin's parameters.json digest as it
    /// is loaded (`cuzk c2 --check-digest`).
    pub check_digest: bool,
    /// Parameters memory-mapped from points files here (`--points-dir`,
    /// `[daemon] points_dir`; `FilecoinProver::with_points_dir`).
    pub points_dir: Option<&'a Path>,
}

/// The kinds a process serves, and the Filecoin provers under them: a command
/// that proves one request compiles its circuit and loads its parameters on the
/// prover the service will use (`ServiceProvers::for_circuit`), so the service
/// finds them loaded.
pub struct ServiceKinds {
    pub kinds: Vec<Arc<dyn KindProver>>,
    pub filecoin: ServiceProvers,
}

/// The synthetic kind's settings.
#[derive(Clone, Copy, Debug)]
pub struct SyntheticSetup {
    pub max_log: u32,
    pub timing_only: bool,
}

/// The service kinds of `setup`. Points filecoin-proofs' verifier at the same
/// parameter directory (`FIL_PROOFS_PARAMETER_CACHE`), refusing a different one.
pub fn service_kinds(setup: &KindsSetup) -> Result<ServiceKinds> {
    // filecoin-proofs' verifier reads the verifying keys from
    // FIL_PROOFS_PARAMETER_CACHE: it must be the prover's parameter directory.
    match std::env::var_os(cuzk_filecoin::PARAMETER_CACHE_VAR) {
        None => std::env::set_var(cuzk_filecoin::PARAMETER_CACHE_VAR, setup.param_cache),
        Some(env) if Path::new(&env) != setup.param_cache => anyhow::bail!(
            "{} is {} but {} is {}: filecoin-proofs' verifier reads the latter; make them the same",
            setup.param_cache_key,
            setup.param_cache.display(),
            cuzk_filecoin::PARAMETER_CACHE_VAR,
            Path::new(&env).display()
        ),
        Some(_) => {}
    }
    let prover = cuzk_filecoin::FilecoinProver::new(cuzk_filecoin::ProverConfig {
        parameter_dir: setup.param_cache.to_path_buf(),
        verify: true,
        check_digest: setup.check_digest,
    });
    let prover = Arc::new(match setup.points_dir {
        Some(dir) => prover.with_points_dir(dir.to_path_buf()),
        None => prover,
    });
    // Every Filecoin kind over one prover: each circuit compiled and its parameters
    // loaded once per process. Timing-only circuits (benchmarks) on a prover of
    // their own, which shares nothing with the real one.
    let provers = ServiceProvers::new(prover)
        .with_timing_only(setup.timing_only_circuits, TIMING_ONLY_SEED)
        .context("timing_only_circuits")?;
    let timing_only = provers.timing_only_circuits();
    if !timing_only.is_empty() {
        eprintln!(
            "{}: WARNING: circuits {} are TIMING-ONLY (random-point parameters, benchmarks only): their proofs are returned UNVERIFIED and do not verify",
            setup.who,
            timing_only.join(", ")
        );
    }
    let mut kinds: Vec<Arc<dyn KindProver>> = provers.kinds();
    if let Some(syn) = setup.synthetic {
        kinds.push(Arc::new(
            SyntheticKind::new(setup.param_cache.to_path_buf())
                .with_max_log(syn.max_log)
                .with_timing_only(syn.timing_only),
        ));
        if syn.timing_only {
            eprintln!(
                "{}: SYNTHETIC proofs are TIMING-ONLY (random-point parameters): they are not verified and do not verify",
                setup.who
            );
        }
    }
    Ok(ServiceKinds {
        kinds,
        filecoin: provers,
    })
}

/// A started service and what it runs on.
pub struct Started {
    pub service: Service,
    /// The strategies' plugins (for a log line or a manifest).
    pub sources: Vec<cuzk_config::PolicySource>,
    /// The engine's backend (to let it settle between timed runs).
    pub backend: Arc<dyn cuzk_gpu_backend::GpuBackend>,
    /// A daemon's or worker's plan ([`Planning::Served`]).
    pub plan: Option<crate::plan_served::StartPlan>,
}

/// What [`start_service`] plans for.
pub enum Planning<'a> {
    /// The one shape a command proves (`cuzk c2`, `snap`, `post`): its counts.
    Shape(&'a cuzk_plan::Counts),
    /// Every shape a daemon or worker serves (`[plan] kinds`), its parameters
    /// memory-mapped from points files or not.
    Served { mapped: bool },
}

/// Starts the proving service every entry proves through (`cuzk serve`, `cuzk
/// worker`, `cuzk c2`, `cuzk snap`, `cuzk post`): the configured strategies
/// opened, every real proof verified (the engine's `verify` on), serving `kinds`.
/// The planner's knobs are taken where the configuration leaves them unset: for
/// the one shape a command proves ([`crate::plan::load_planned`]), or for every
/// shape a daemon or worker serves, one set of knobs for all
/// ([`crate::plan_served::load_served`]). `subscribers` see every TIMELINE event.
pub fn start_service(
    run: &mut RunConfig,
    cfg: ServiceConfig,
    kinds: Vec<Arc<dyn KindProver>>,
    planning: Planning,
    subscribers: Vec<Arc<dyn cuzk_timeline::Subscriber>>,
) -> Result<Started> {
    run.engine.verify = true;
    let (built, plan) = match planning {
        Planning::Shape(counts) => {
            let log = counts.constraints.next_power_of_two().trailing_zeros();
            let needs = run.config.backend_needs(Some(log));
            (crate::plan::load_planned(run, &needs, counts)?, None)
        }
        Planning::Served { mapped } => {
            let needs = run.config.backend_needs(None);
            let (built, plan) = crate::plan_served::load_served(run, &needs, mapped)?;
            (built, Some(plan))
        }
    };
    let backend = built.policies.backend.clone();
    let service = Service::start_with_subscribers(
        cfg,
        run.engine.clone(),
        built.policies,
        kinds,
        subscribers,
    )
    .context("starting the proving service")?;
    Ok(Started {
        service,
        sources: built.sources,
        backend,
        plan,
    })
}

/// `[daemon] gpus` made the backend's `device` parameter (one GPU per daemon),
/// refused where the backend names its device too. `cuzk serve` opens its backend
/// so, and `cuzk plan --config` plans for the same device.
pub fn daemon_gpus(config: &mut cuzk_config::Config) -> Result<()> {
    let gpus = config.daemon.as_ref().and_then(|d| d.gpus.clone());
    if let (Some(gpus), Some(backend)) = (gpus, config.backend.as_mut()) {
        if let Some(g) = gpus.first() {
            if backend.params.contains_key("device") {
                anyhow::bail!("set the GPU either in [daemon] gpus or in the backend's `device` parameter, not both");
            }
            *backend = backend.clone().with_param("device", i64::from(*g));
        }
    }
    Ok(())
}

/// Logs a daemon's or worker's plan at start: the block `cuzk plan --config`
/// prints, and the knobs taken from it.
pub fn log_plan(who: &str, plan: &crate::plan_served::StartPlan) {
    eprint!("{who}: plan\n{}", plan.text);
    eprintln!(
        "{who}: planned for this machine (unset in the configuration): {}",
        if plan.applied.is_empty() {
            "none".to_string()
        } else {
            plan.applied.join(", ")
        }
    );
}

pub fn serve(args: ServeArgs) -> Result<()> {
    let mut run = args.run.resolve()?;
    let mut section = run.config.daemon.clone().unwrap_or_default();
    if let Some(l) = &args.listen {
        section.listen = Some(l.clone());
    }
    if let Some(ids) = &args.timing_only_circuits {
        section.timing_only_circuits = Some(ids.clone());
    }
    let mut cfg = DaemonConfig::from_section(&section)?;
    // The daemon returns only verified proofs, whatever [engine] says (except for
    // the circuits a benchmark configured timing-only, below): `start_service`
    // turns verification on.
    daemon_gpus(&mut run.config)?;
    let kinds = service_kinds(&KindsSetup {
        who: "cuzk serve",
        param_cache_key: "[daemon] param_cache",
        param_cache: &cfg.param_cache,
        timing_only_circuits: &cfg.timing_only_circuits,
        synthetic: cfg.synthetic.then_some(SyntheticSetup {
            max_log: cfg.synthetic_max_log,
            timing_only: cfg.synthetic_timing_only,
        }),
        check_digest: false,
        points_dir: cfg.points_dir.as_deref(),
    })?;
    let started = start_service(
        &mut run,
        cfg.service.clone(),
        kinds.kinds,
        Planning::Served {
            mapped: cfg.points_dir.is_some(),
        },
        Vec::new(),
    )?;
    let service = started.service;
    if let Some(plan) = &started.plan {
        log_plan("cuzk serve", plan);
        // Reported by GetStatus (`cuzk client status`) for as long as it runs.
        cfg.plan = Some(cuzk_daemon::config::StartupPlan {
            text: plan.text.clone(),
            json: plan.json.to_string(),
        });
    }
    eprintln!(
        "cuzk serve: kinds {:?}, parameters from {}, timing-only circuits {:?}, engine {:?}",
        service.kinds(),
        cfg.param_cache.display(),
        service.timing_only_circuits(),
        run.engine
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let served = rt.block_on(async move {
        let bound = Bound::bind_with(&cfg.listen, &cfg.access).await?;
        // Tests and scripts read this line to learn the address (port 0 binds any).
        println!("listening on {}", bound.address());
        let shutdown = Shutdown::default();
        let trigger = shutdown.clone();
        tokio::spawn(async move {
            cuzk_daemon::termination_signal().await;
            trigger.trigger();
        });
        cuzk_daemon::serve(&cfg, service, bound, shutdown).await
    });
    // Blocking work the server stopped without (a parameter preload still
    // compiling) is not waited for: the process ends here.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    served?;
    Ok(())
}
