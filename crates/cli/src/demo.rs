//! `cuzk demo`: the README's main command.

use std::{path::PathBuf, time::Instant};

use anyhow::{bail, Result};
use clap::Args;
use cuzk::{BatchProver, BatchProverConfig};
use cuzk_circuits::AnyCircuit;

use crate::{
    progress,
    prove::{blinding, default_cache_dir, load_params},
    table, CircuitArgs,
};

#[derive(Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// How many proofs (each with its own witness seed and blinding).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=64))]
    proofs: u64,
    /// A `.params` file for the circuit; by default parameters are generated once
    /// and cached.
    #[arg(long)]
    params: Option<PathBuf>,
    /// The cache folder for generated parameters.
    #[arg(long, default_value_os_t = default_cache_dir())]
    cache_dir: PathBuf,
    /// Skip proving the first proof again with bellperson's prover to compare bytes.
    #[arg(long)]
    no_compare: bool,
    /// Backend plugin (`cpu`, `cuda`, or a path to a .so); default: the CPU backend
    /// built into cuzk.
    #[arg(long)]
    backend: Option<String>,
    /// Where named plugins are looked up (default: next to the cuzk binary).
    #[arg(long)]
    plugin_dir: Option<PathBuf>,
}

pub fn run(args: DemoArgs) -> Result<()> {
    let c = &args.circuit;
    let backend = match &args.backend {
        Some(name) => {
            let search = match &args.plugin_dir {
                Some(d) => cuzk_plugin_host::SearchPath::dir(d),
                None => cuzk_plugin_host::SearchPath::next_to_exe(),
            };
            let needs = cuzk_plugin_host::BackendNeeds {
                log_domain: Some(c.log),
                ..Default::default()
            };
            let b = cuzk_plugin_host::load_backend(
                &cuzk_plugin_host::PluginSpec::new(name.clone()),
                &search,
                &needs,
            )?;
            Some(b as std::sync::Arc<dyn cuzk::GpuBackend>)
        }
        None => None,
    };
    let backend_name = backend
        .as_ref()
        .map(|b| {
            let caps = b.capabilities();
            match caps.devices.first() {
                Some(d) => format!("{} backend plugin on {}", caps.name, d.name),
                None => format!("{} backend plugin", caps.name),
            }
        })
        .unwrap_or_else(|| "built-in CPU backend".into());
    println!(
        "cuzk demo: {} circuit, 2^{} constraints, {} proofs, {backend_name}, {} CPU threads",
        c.circuit.name(),
        c.log,
        args.proofs,
        rayon::current_num_threads()
    );
    let t = Instant::now();
    let params = load_params(args.params.as_deref(), &args.cache_dir, c)?;
    println!("parameters ready in {:.1} s", t.elapsed().as_secs_f64());

    let engine = BatchProver::new(BatchProverConfig {
        backend,
        ..BatchProverConfig::default()
    })?;
    let seeds: Vec<u64> = (1..=args.proofs).collect();
    let circuits = seeds
        .iter()
        .map(|&seed| AnyCircuit::new(c.circuit, c.log, Some(seed)))
        .collect::<Result<Vec<_>, _>>()?;
    let inputs = circuits
        .iter()
        .map(|c| c.public_inputs())
        .collect::<Result<Vec<_>, _>>()?;
    let (r, s): (Vec<_>, Vec<_>) = seeds.iter().map(|&seed| blinding(seed)).unzip();

    let pb = progress::spinner(format!("proving {} proofs", args.proofs));
    let t = Instant::now();
    let proofs = engine.prove_batch(circuits.clone(), &&params, r.clone(), s.clone())?;
    let wall = t.elapsed();
    pb.finish_and_clear();

    let mut all_valid = true;
    for (i, (p, inputs)) in proofs.iter().zip(&inputs).enumerate() {
        let valid = cuzk::verify(&params.vk, &p.proof, inputs)?;
        all_valid &= valid;
        let mut bytes = Vec::new();
        p.proof.write(&mut bytes)?;
        println!(
            "proof {}: {} by bellperson's verifier\n  {}",
            i + 1,
            if valid { "VERIFIED" } else { "INVALID" },
            hex::encode(&bytes)
        );
    }
    println!();
    let times: Vec<_> = proofs.iter().map(|p| p.times).collect();
    print!("{}", table::stage_table(&times));
    println!(
        "{} proofs in {:.2} s wall ({:.2} s/proof)",
        proofs.len(),
        wall.as_secs_f64(),
        wall.as_secs_f64() / proofs.len() as f64
    );

    if !args.no_compare {
        let pb = progress::spinner("proving proof 1 again with bellperson's CPU prover");
        let t = Instant::now();
        let theirs = bellperson::groth16::create_proof(circuits[0].clone(), &params, r[0], s[0])?;
        let their_time = t.elapsed();
        pb.finish_and_clear();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        theirs.write(&mut a)?;
        proofs[0].proof.write(&mut b)?;
        println!(
            "bellperson's prover: {:.2} s for proof 1; cuzk: {:.2} s ({:.2}x); bytes {}",
            their_time.as_secs_f64(),
            proofs[0].times.total.as_secs_f64(),
            their_time.as_secs_f64() / proofs[0].times.total.as_secs_f64(),
            if a == b { "IDENTICAL" } else { "DIFFERENT" }
        );
        if a != b {
            bail!("cuzk's proof differs from bellperson's for the same r and s");
        }
    }
    if !all_valid {
        bail!("some proofs did not verify");
    }
    Ok(())
}
