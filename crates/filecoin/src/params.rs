//! Filecoin's parameter files: their official names (from filecoin-proofs' own
//! functions), where they are, their digests, and test parameters written under the
//! same names.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use filecoin_proofs::PoRepConfig;
use filecoin_proofs_api::RegisteredSealProof;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use storage_proofs_core::api_version::ApiFeature;
use storage_proofs_core::parameter_cache::{get_parameter_data, get_verifying_key_data};

use crate::kind::CircuitKind;
use crate::shape::{self, BlankUser};
use crate::{proof_name, FilecoinError};

/// Every registered PoRep proof, in filecoin-proofs-api's order.
pub const ALL_POREP: [RegisteredSealProof; 20] = {
    use RegisteredSealProof::*;
    [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
        StackedDrg2KiBV1_1,
        StackedDrg8MiBV1_1,
        StackedDrg512MiBV1_1,
        StackedDrg32GiBV1_1,
        StackedDrg64GiBV1_1,
        StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
        StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
    ]
};

/// A registered PoRep proof as this crate proves it: filecoin-proofs' configuration
/// and the cache identifier that names its circuit (and its parameter files).
#[derive(Clone, Debug)]
pub struct PorepKind {
    pub registered: RegisteredSealProof,
    pub config: PoRepConfig,
    /// `StackedDrg32GiBV1_1`.
    pub name: String,
    /// `stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-<hash>`.
    pub cache_id: String,
}

impl PorepKind {
    /// The kind of `registered`, or [`FilecoinError::Unsupported`].
    pub fn new(registered: RegisteredSealProof) -> Result<Self, FilecoinError> {
        let name = proof_name(registered);
        if !ALL_POREP.contains(&registered) {
            return Err(FilecoinError::Unsupported {
                proof: name,
                reason: "not a registered PoRep proof of filecoin-proofs 19",
            });
        }
        // Non-interactive PoRep proves the interactive circuit (the same number of
        // challenges per partition, so the same cache identifier and parameter files:
        // filecoin-proofs' `get_porep_non_interactive_partitions` picks its partition
        // counts for exactly that), only more partitions of it, and then aggregates
        // them (`crate::aggregate`).
        let config = registered.as_v1_config();
        let cache_id = shape::cache_identifier(&config, name.clone())?;
        Ok(Self {
            registered,
            config,
            name,
            cache_id,
        })
    }

    /// Partitions of one proof.
    pub fn partitions(&self) -> usize {
        usize::from(self.config.partitions)
    }

    /// The parameter file's name (`v28-….params`), by filecoin-proofs' own function.
    pub fn params_file(&self) -> String {
        CircuitKind::params_file(self)
    }

    /// The verifying key's file name (`v28-….vk`).
    pub fn vk_file(&self) -> String {
        CircuitKind::vk_file(self)
    }

    /// Whether this is non-interactive PoRep, whose C2 output is a SnarkPack
    /// aggregate of its partition proofs.
    pub fn is_non_interactive(&self) -> bool {
        self.config.feature_enabled(ApiFeature::NonInteractivePoRep)
    }

    /// Bytes of the partition proofs: 192 per partition. This is the C2 output of
    /// interactive PoRep; non-interactive PoRep's is their aggregate.
    pub fn proof_len(&self) -> usize {
        self.partitions() * crate::PARTITION_PROOF_LEN
    }
}

impl CircuitKind for PorepKind {
    fn name(&self) -> &str {
        &self.name
    }
    fn cache_id(&self) -> &str {
        &self.cache_id
    }
    fn with_blank<U: BlankUser>(&self, user: U) -> Result<U::Out, FilecoinError> {
        shape::with_blank_circuit(&self.config, self.name.clone(), user)
    }
}

/// filecoin-proofs' parameter cache directory: `FIL_PROOFS_PARAMETER_CACHE` or its
/// default `/var/tmp/filecoin-proof-parameters` (as filecoin-proofs' settings read it,
/// so that its verifier reads the verifying key from the same place).
pub fn default_parameter_dir() -> PathBuf {
    PathBuf::from(&storage_proofs_core::settings::SETTINGS.parameter_cache)
}

/// The digest Filecoin's `parameters.json` uses: the first 32 hex characters of the
/// file's BLAKE2b-512.
pub fn file_digest(path: &Path) -> Result<String, FilecoinError> {
    let mut file = File::open(path).map_err(|e| FilecoinError::io("opening", path, e))?;
    let mut state = blake2b_simd::Params::new().hash_length(64).to_state();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| FilecoinError::io("reading", path, e))?;
        if n == 0 {
            break;
        }
        state.update(&buf[..n]);
    }
    Ok(state.finalize().to_hex()[..32].to_string())
}

/// Checks a parameter or verifying-key file of `kind` in `dir` against the digest
/// Filecoin's `parameters.json` lists for it (the copy compiled into
/// storage-proofs-core).
pub fn check_digest<K: CircuitKind>(kind: &K, dir: &Path, vk: bool) -> Result<(), FilecoinError> {
    let (file, data) = if vk {
        (kind.vk_file(), get_verifying_key_data(kind.cache_id()))
    } else {
        (kind.params_file(), get_parameter_data(kind.cache_id()))
    };
    let data = data.ok_or_else(|| FilecoinError::DigestUnknown { file: file.clone() })?;
    let path = dir.join(&file);
    let actual = file_digest(&path)?;
    if actual != data.digest {
        return Err(FilecoinError::DigestMismatch {
            path,
            expected: data.digest.clone(),
            actual,
        });
    }
    Ok(())
}

/// Generates a valid parameter set for `kind` from its blank circuit (cuzk-params'
/// fixed-base-table generator, seeded: insecure, for tests and for sizes no one has
/// downloaded) and
/// writes the `.params` and `.vk` files under their official names in `dir`.
/// Returns the `.params` path.
pub fn generate_params<K: CircuitKind>(
    kind: &K,
    dir: &Path,
    seed: u64,
) -> Result<PathBuf, FilecoinError> {
    struct Gen(u64);
    impl BlankUser for Gen {
        type Out = Result<cuzk_params::Parameters<blstrs::Bls12>, cuzk_params::ParamsError>;
        fn with<C: bellpepper_core::Circuit<blstrs::Scalar> + Clone + Send + 'static>(
            self,
            circuit: C,
        ) -> Self::Out {
            cuzk_params::generate_params_fast(circuit, &mut ChaCha20Rng::seed_from_u64(self.0))
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| FilecoinError::io("creating", dir, e))?;
    let params = kind
        .with_blank(Gen(seed))?
        .map_err(|source| FilecoinError::ParamsRead {
            path: dir.join(kind.params_file()),
            source,
        })?;
    let params_path = dir.join(kind.params_file());
    let tmp = dir.join(format!("{}.partial", kind.params_file()));
    cuzk_params::write_params(&params, &tmp).map_err(|source| FilecoinError::ParamsRead {
        path: tmp.clone(),
        source,
    })?;
    std::fs::rename(&tmp, &params_path).map_err(|e| FilecoinError::io("renaming", &tmp, e))?;
    let vk_path = dir.join(kind.vk_file());
    write_atomically(&vk_path, |w| params.vk.write(w))?;
    Ok(params_path)
}

pub(crate) fn write_atomically(
    path: &Path,
    f: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), FilecoinError> {
    let tmp = path.with_extension("partial");
    let file = File::create(&tmp).map_err(|e| FilecoinError::io("creating", &tmp, e))?;
    let mut w = BufWriter::new(file);
    f(&mut w)
        .and_then(|_| w.flush())
        .map_err(|e| FilecoinError::io("writing", &tmp, e))?;
    drop(w);
    std::fs::rename(&tmp, path).map_err(|e| FilecoinError::io("renaming", &tmp, e))
}

/// The parameters of `kind` in `dir`, generated with `seed` if either file is
/// missing (tests and `cuzk params gen`); returns the `.params` path.
pub fn ensure_params<K: CircuitKind>(
    kind: &K,
    dir: &Path,
    seed: u64,
) -> Result<PathBuf, FilecoinError> {
    let params = dir.join(kind.params_file());
    if params.exists() && dir.join(kind.vk_file()).exists() {
        return Ok(params);
    }
    generate_params(kind, dir, seed)
}
