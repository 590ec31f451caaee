//! `cuzk serve`: the proving daemon. The engine and plugins come from the same
//! `cuzk.toml` tables as every other command; the daemon's own settings from its
//! `[daemon]` table.

use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use cuzk_daemon::{Bound, DaemonTable, Shutdown};
use cuzk_plugin_host::BackendNeeds;
use cuzk_service::{synthetic::SyntheticKind, KindProver, Service};

use crate::runtime::{load_policies, RunArgs};

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Overrides `[daemon] listen`: `host:port` or `unix:///path`.
    #[arg(long)]
    pub listen: Option<String>,
}

pub fn serve(args: ServeArgs) -> Result<()> {
    let mut table = match &args.run.config {
        Some(path) => DaemonTable::load(path)?,
        None => DaemonTable::default(),
    };
    if let Some(l) = &args.listen {
        table.listen = Some(l.clone());
    }
    let cfg = table.resolve()?;
    let mut run = args.run.resolve()?;
    // The daemon returns only verified proofs, whatever [engine] says.
    run.engine.verify = true;
    if let (Some(gpus), Some(backend)) = (&cfg.gpus, run.plugins.backend.as_mut()) {
        if let Some(g) = gpus.first() {
            if backend.params.contains_key("device") {
                anyhow::bail!("set the GPU either in [daemon] gpus or in the backend's `device` parameter, not both");
            }
            backend.params.insert("device".into(), g.to_string());
        }
    }
    let needs = BackendNeeds {
        log_domain: None,
        g2: run.engine.b_g2_on_backend,
        resident_bases: false,
    };
    let loaded = load_policies(&run, &needs)?;
    let mut kinds: Vec<Arc<dyn KindProver>> = Vec::new();
    if cfg.synthetic {
        kinds.push(Arc::new(
            SyntheticKind::new(cfg.param_cache.clone())
                .with_max_log(cfg.synthetic_max_log)
                .with_timing_only(cfg.synthetic_timing_only),
        ));
        if cfg.synthetic_timing_only {
            eprintln!("cuzk serve: SYNTHETIC proofs are TIMING-ONLY (random-point parameters): they are not verified and do not verify");
        }
    }
    let service = Service::start(cfg.service.clone(), run.engine.clone(), loaded.policies, kinds)
        .context("starting the proving service")?;
    eprintln!(
        "cuzk serve: kinds {:?}, parameters from {}, engine {:?}",
        service.kinds(),
        cfg.param_cache.display(),
        run.engine
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let bound = Bound::bind(&cfg.listen).await?;
        // Tests and scripts read this line to learn the address (port 0 binds any).
        println!("listening on {}", bound.address());
        let shutdown = Shutdown::default();
        let trigger = shutdown.clone();
        tokio::spawn(async move {
            cuzk_daemon::termination_signal().await;
            trigger.trigger();
        });
        cuzk_daemon::serve(&cfg, service, bound, shutdown).await
    })?;
    Ok(())
}
