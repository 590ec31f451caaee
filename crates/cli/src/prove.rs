//! `cuzk prove`, `cuzk verify`, `cuzk params ...`.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use blstrs::{Bls12, Scalar};
use clap::Args;
use cuzk::{BatchProver, BatchProverConfig, Parameters};
use cuzk_circuits::{AnyCircuit, Builtin};
use cuzk_params::Validation;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::{progress, table, CircuitArgs};

/// Where parameters are cached when no `--params` is given.
pub fn default_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CUZK_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(home) = std::env::var_os("HOME") {
        return PathBuf::from(home).join(".cache").join("cuzk");
    }
    PathBuf::from(".cuzk-cache")
}

/// The cached parameter file of a built-in circuit.
pub fn cached_params_path(dir: &Path, circuit: Builtin, log: u32) -> PathBuf {
    dir.join(format!("cuzk-{}-2^{log}.params", circuit.name()))
}

/// Loads `--params FILE` or the cached parameters, generating them on first use.
pub fn load_params(
    params: Option<&Path>,
    cache_dir: &Path,
    c: &CircuitArgs,
) -> Result<Parameters<Bls12>> {
    if let Some(path) = params {
        let pb = progress::spinner(format!("reading {}", path.display()));
        let p = cuzk_params::read_params(path, Validation::None)
            .with_context(|| format!("reading parameters from {}", path.display()))?;
        pb.finish_and_clear();
        return Ok(p);
    }
    fs::create_dir_all(cache_dir)
        .with_context(|| format!("creating the cache folder {}", cache_dir.display()))?;
    let path = cached_params_path(cache_dir, c.circuit, c.log);
    let msg = if path.exists() {
        format!("reading cached parameters {}", path.display())
    } else {
        format!(
            "generating parameters for {} at 2^{} (once; cached in {})",
            c.circuit.name(),
            c.log,
            path.display()
        )
    };
    let pb = progress::spinner(msg);
    let blank = AnyCircuit::new(c.circuit, c.log, None)?;
    let p = cuzk_params::load_or_generate(&path, blank, 0)
        .with_context(|| format!("parameters at {}", path.display()))?;
    pb.finish_and_clear();
    Ok(p)
}

/// The blinding of proof number `seed`: deterministic, so runs can be compared
/// with bellperson's prover byte for byte.
pub fn blinding(seed: u64) -> (Scalar, Scalar) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0x6375_7a6b);
    (Scalar::random(&mut rng), Scalar::random(&mut rng))
}

#[derive(Args, Debug)]
pub struct ProveArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// Witness seed: different seeds give different witnesses and public inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A `.params` file for this circuit; without it parameters are generated once
    /// and cached.
    #[arg(long)]
    params: Option<PathBuf>,
    /// The cache folder for generated parameters.
    #[arg(long, default_value_os_t = default_cache_dir())]
    cache_dir: PathBuf,
    /// Where to write the proof.
    #[arg(long, short, default_value = "proof.bin")]
    out: PathBuf,
    /// Check a·b = c for every constraint before proving (names the first failure).
    #[arg(long)]
    check_witness: bool,
}

pub fn prove(args: ProveArgs) -> Result<()> {
    let params = load_params(args.params.as_deref(), &args.cache_dir, &args.circuit)?;
    let engine = BatchProver::new(BatchProverConfig {
        prover: cuzk::ProverConfig {
            check_witness: args.check_witness,
            ..Default::default()
        },
        ..BatchProverConfig::default()
    })?;
    let circuit = AnyCircuit::new(args.circuit.circuit, args.circuit.log, Some(args.seed))?;
    let (r, s) = blinding(args.seed);
    let pb = progress::spinner("proving");
    let proved = engine.prove_batch(vec![circuit], &&params, vec![r], vec![s])?;
    pb.finish_and_clear();
    let proved = &proved[0];
    let mut bytes = Vec::new();
    proved.proof.write(&mut bytes)?;
    fs::write(&args.out, &bytes)
        .with_context(|| format!("writing the proof to {}", args.out.display()))?;
    print!("{}", table::stage_table(&[proved.times]));
    println!(
        "proof ({} bytes) written to {}",
        bytes.len(),
        args.out.display()
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// The witness seed the proof was made with (it fixes the public inputs).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long)]
    params: Option<PathBuf>,
    #[arg(long, default_value_os_t = default_cache_dir())]
    cache_dir: PathBuf,
    /// The proof file.
    #[arg(long, default_value = "proof.bin")]
    proof: PathBuf,
}

pub fn verify(args: VerifyArgs) -> Result<()> {
    let params = load_params(args.params.as_deref(), &args.cache_dir, &args.circuit)?;
    let bytes =
        fs::read(&args.proof).with_context(|| format!("reading {}", args.proof.display()))?;
    let proof = bellperson::groth16::Proof::<Bls12>::read(&bytes[..])
        .with_context(|| format!("{} is not a Groth16 proof", args.proof.display()))?;
    let circuit = AnyCircuit::new(args.circuit.circuit, args.circuit.log, Some(args.seed))?;
    let inputs = circuit.public_inputs()?;
    if cuzk::verify(&params.vk, &proof, &inputs)? {
        println!("valid: the proof verifies with bellperson's verifier");
        Ok(())
    } else {
        bail!("INVALID: the proof does not verify for these parameters and public inputs")
    }
}

#[derive(Args, Debug)]
pub struct ParamsGenArgs {
    #[command(flatten)]
    circuit: CircuitArgs,
    /// Seed of the toxic waste (for reproducible test parameters only).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output file (built-in circuits).
    #[arg(long, short, required_unless_present = "proof")]
    out: Option<PathBuf>,
    /// A registered Filecoin PoRep proof (StackedDrg2KiBV1_1, ...): writes its
    /// `.params` and `.vk` under their official names in the parameter cache.
    #[arg(long, conflicts_with = "out")]
    proof: Option<String>,
    /// With `--proof`: which kind of registered proof it is (`snap`: update proofs
    /// 0-4; `window`, `winning`: PoSt proofs as Filecoin's Go enum numbers them).
    #[arg(long, default_value = "porep", value_parser = ["porep", "snap", "window", "winning"], requires = "proof")]
    kind: String,
    #[command(flatten)]
    param_cache: crate::filecoin::ParamCacheArgs,
}

pub fn params_gen(args: ParamsGenArgs) -> Result<()> {
    let out = match (&args.proof, &args.out) {
        (Some(proof), _) => {
            let which = match args.kind.as_str() {
                "snap" => crate::kinds::Which::Snap,
                "window" => crate::kinds::Which::Window,
                "winning" => crate::kinds::Which::Winning,
                _ => return crate::filecoin::params_gen(proof, &args.param_cache, args.seed),
            };
            return crate::kinds::params_gen(which, proof, &args.param_cache, args.seed);
        }
        (None, Some(out)) => out.clone(),
        (None, None) => bail!("give --out FILE, or --proof for Filecoin parameters"),
    };
    let blank = AnyCircuit::new(args.circuit.circuit, args.circuit.log, None)?;
    let pb = progress::spinner(format!(
        "generating parameters for {} at 2^{}",
        args.circuit.circuit.name(),
        args.circuit.log
    ));
    let mut rng = ChaCha20Rng::seed_from_u64(args.seed);
    let params = cuzk_params::generate_params(blank, &mut rng)?;
    cuzk_params::write_params(&params, &out)?;
    pb.finish_and_clear();
    println!("wrote {}", out.display());
    params_info(&out)
}

pub fn params_info(file: &Path) -> Result<()> {
    let s = cuzk_params::summarize(file)?;
    println!("{}: {} bytes", file.display(), s.file_bytes);
    println!("  ic (public inputs + 1) {:>12}", s.ic);
    println!("  h                      {:>12}", s.h);
    println!("  l                      {:>12}", s.l);
    println!("  a                      {:>12}", s.a);
    println!("  b_g1                   {:>12}", s.b_g1);
    println!("  b_g2                   {:>12}", s.b_g2);
    Ok(())
}
