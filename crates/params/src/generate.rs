//! Fresh random parameters for a circuit, and a file cache of them.
//!
//! Real deployments download Filecoin's parameters; demos, tests and benches need
//! parameters for circuits that have none. These are made by bellperson's own
//! generator, so they are exactly what bellperson would use, and they are insecure
//! by construction (whoever knows the seed knows the toxic waste).

use std::path::Path;

use bellpepper_core::Circuit;
use blstrs::{Bls12, Scalar};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

use crate::{read_params, write_params, Parameters, ParamsError, Validation};

/// Random parameters for `circuit` (bellperson's `generate_random_parameters`).
/// Deterministic given the rng's stream.
pub fn generate_params<C: Circuit<Scalar>>(
    circuit: C,
    rng: &mut impl RngCore,
) -> Result<Parameters<Bls12>, ParamsError> {
    let _span = tracing::info_span!("generate_params").entered();
    bellperson::groth16::generate_random_parameters::<Bls12, _, _>(circuit, rng)
        .map_err(ParamsError::Synthesis)
}

/// The parameters cached at `path` if that file reads cleanly; otherwise parameters
/// generated for `circuit` from a ChaCha20 rng seeded with `seed`, written to `path`
/// atomically (its directory is created if missing) and returned.
///
/// The cache is keyed by `path` alone: the caller must put whatever identifies the
/// circuit's shape and the seed into the file name. A cached file is read with
/// [`Validation::None`] (it is our own output), and one that fails to read, for
/// instance an older file of another layout, is regenerated and replaced.
pub fn load_or_generate<C: Circuit<Scalar>>(
    path: &Path,
    circuit: C,
    seed: u64,
) -> Result<Parameters<Bls12>, ParamsError> {
    match read_params(path, Validation::None) {
        Ok(params) => {
            tracing::info!(path = %path.display(), "reusing cached parameters");
            return Ok(params);
        }
        Err(ParamsError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            tracing::warn!(
                path = %path.display(),
                %error,
                "cached parameters unusable, regenerating"
            );
        }
    }
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let params = generate_params(circuit, &mut rng)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| ParamsError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    write_params(&params, path)?;
    tracing::info!(path = %path.display(), "generated and cached parameters");
    Ok(params)
}
