//! SnarkPack aggregation, through filecoin-proofs' own functions: the last step of a
//! non-interactive PoRep C2 (the sector's partition proofs into one aggregate, as
//! `seal_commit_phase2` makes it) and aggregation as a proof kind of its own (many
//! sectors' C2 outputs into one, as `aggregate_seal_commit_proofs` makes it for
//! ProveCommitAggregate).
//!
//! # Why the aggregation is filecoin-proofs', unchanged
//!
//! The aggregate's bytes are consensus: the chain verifies them with
//! filecoin-proofs' `verify_aggregate_seal_commit_proofs`, whose transcript hashes
//! the comm_rs (and, for interactive PoRep, the seeds) in an order and a padding
//! (the last proof repeated to a power of two) that are filecoin-proofs' choices.
//! SnarkPack's prover draws no randomness, so the same partition proofs give the
//! same aggregate: cuzk proves the partitions (the heavy part, 126 circuits per
//! 32 GiB NI-PoRep sector) and hands their bytes to filecoin-proofs, which
//! aggregates them on the CPU.
//!
//! # The SRS
//!
//! SnarkPack needs a structured reference string, which filecoin-proofs reads from
//! its parameter cache (`FIL_PROOFS_PARAMETER_CACHE`) by its official name
//! ([`srs_file`], `v28-fil-inner-product-v1.srs`); it is one file for every sector
//! size and proof count. [`generate_srs`] writes an insecure one under that name for
//! tests (bellperson's `setup_fake_srs`, as filecoin-proofs' own tests and benches
//! get theirs), never anything downloaded.
//!
//! # Timing-only aggregation
//!
//! A sector proved with timing-only parameters (random points) has partition proofs
//! that cannot verify, and filecoin-proofs' `aggregate_seal_commit_proofs` reads the
//! real verifying key and SRS from its parameter cache, a process-wide setting a
//! timing-only prover must never write into. So a timing-only sector is aggregated
//! by [`TimingOnlySrs`]: an SRS made in memory by bellperson's `setup_fake_srs`
//! (once per prover, well under a second for 128 proofs), specialised per proof
//! count as filecoin-proofs does, and bellperson's `aggregate_proofs`, the function
//! filecoin-proofs' aggregation calls and all of its cost, over the same count of
//! proofs (padded to a power of two by repeating the last one, as filecoin-proofs
//! pads). Only the transcript's included bytes differ (a fixed label instead of the
//! hash of the comm_r): such an aggregate never verifies, is never returned as
//! verified, and costs what the real one costs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use bellperson::groth16::aggregate::{AggregateVersion, GenericSRS, ProverSRS};

use filecoin_proofs_api::seal::{self, SealCommitPhase2Output};
use filecoin_proofs_api::{RegisteredAggregationProof, RegisteredSealProof};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::shape::SealPublic;
use crate::{proof_name, FilecoinError, PorepKind};

/// The aggregation non-interactive PoRep's C2 uses (`seal_commit_phase2` passes
/// `AggregateVersion::V2`).
pub const NI_POREP_AGGREGATION: RegisteredAggregationProof =
    RegisteredAggregationProof::SnarkPackV2;

/// The SRS file's official name (`v28-fil-inner-product-v1.srs`), by storage-proofs'
/// own path function (it names one file for every circuit and proof count).
pub fn srs_file() -> String {
    storage_proofs_core::parameter_cache::parameter_cache_srs_key_path("", 0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The SRS in `dir`, or [`FilecoinError::SrsMissing`].
pub fn check_srs(dir: &Path) -> Result<PathBuf, FilecoinError> {
    let path = dir.join(srs_file());
    if path.is_file() {
        Ok(path)
    } else {
        Err(FilecoinError::SrsMissing { path })
    }
}

/// Writes a valid, insecure SRS for aggregating up to `max_proofs` proofs (a power
/// of two) under the official name in `dir`, from `seed` (bellperson's
/// `setup_fake_srs`, the SRS filecoin-proofs' tests generate). Tests and sizes no one
/// has the real file for; returns its path.
pub fn generate_srs(dir: &Path, seed: u64, max_proofs: usize) -> Result<PathBuf, FilecoinError> {
    std::fs::create_dir_all(dir).map_err(|e| FilecoinError::io("creating", dir, e))?;
    let srs = bellperson::groth16::aggregate::setup_fake_srs::<blstrs::Bls12, _>(
        &mut ChaCha20Rng::seed_from_u64(seed),
        max_proofs.next_power_of_two(),
    );
    let path = dir.join(srs_file());
    crate::params::write_atomically(&path, |w| srs.write(w))?;
    Ok(path)
}

/// The SRS in `dir`, generated with [`generate_srs`] if it is missing.
pub fn ensure_srs(dir: &Path, seed: u64, max_proofs: usize) -> Result<PathBuf, FilecoinError> {
    match check_srs(dir) {
        Ok(path) => Ok(path),
        Err(_) => generate_srs(dir, seed, max_proofs),
    }
}

/// A non-interactive PoRep sector's C2 output from its partition proofs (N × 192
/// bytes): filecoin-proofs' `aggregate_seal_commit_proofs` of the one sector, as
/// its `seal_commit_phase2` calls it.
pub(crate) fn aggregate_ni_sector(
    kind: &PorepKind,
    public: &SealPublic,
    partition_proofs: &[u8],
) -> Result<Vec<u8>, FilecoinError> {
    let _span =
        tracing::info_span!("aggregate", proof = %kind.name, sector = public.sector).entered();
    seal::aggregate_seal_commit_proofs(
        kind.registered,
        NI_POREP_AGGREGATION,
        &[public.comm_r],
        &[public.seed],
        &[SealCommitPhase2Output {
            proof: partition_proofs.to_vec(),
        }],
    )
    .map_err(|e| FilecoinError::Aggregate(format!("{e:#}")))
}

/// What a timing-only aggregate's transcript includes in place of the comm_rs' hash:
/// it says what the bytes are to anyone who finds them.
const TIMING_ONLY_TRANSCRIPT: &[u8] = b"cuzk timing-only SnarkPack aggregate (does not verify)";

/// A SnarkPack SRS for timing-only aggregation ([module docs](self)): bellperson's
/// `setup_fake_srs` in memory, never a file, so it can never be mistaken for the
/// official `v28-fil-inner-product-v1.srs` of a parameter cache. Prover keys are
/// specialised once per proof count and kept, as filecoin-proofs keeps its
/// (`lookup_srs_key`), so a stream of sectors pays the specialisation once.
pub struct TimingOnlySrs {
    generic: GenericSRS<blstrs::Bls12>,
    max_proofs: usize,
    keys: Mutex<HashMap<usize, Arc<ProverSRS<blstrs::Bls12>>>>,
}

impl std::fmt::Debug for TimingOnlySrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimingOnlySrs")
            .field("max_proofs", &self.max_proofs)
            .finish()
    }
}

impl TimingOnlySrs {
    /// An SRS for aggregating up to `max_proofs` proofs (rounded up to the power of
    /// two SnarkPack aggregates), from `seed`.
    pub fn generate(seed: u64, max_proofs: usize) -> Self {
        let max_proofs = aggregate_len(max_proofs);
        let t = std::time::Instant::now();
        let generic = bellperson::groth16::aggregate::setup_fake_srs::<blstrs::Bls12, _>(
            &mut ChaCha20Rng::seed_from_u64(seed),
            max_proofs,
        );
        tracing::warn!(max_proofs, took = ?t.elapsed(), "TIMING-ONLY SnarkPack SRS made in memory: aggregates made with it do not verify");
        Self {
            generic,
            max_proofs,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The most proofs it aggregates (a power of two).
    pub fn max_proofs(&self) -> usize {
        self.max_proofs
    }

    fn prover_key(&self, count: usize) -> Arc<ProverSRS<blstrs::Bls12>> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        keys.entry(count)
            .or_insert_with(|| Arc::new(self.generic.specialize_prover(count)))
            .clone()
    }

    /// The aggregate of partition proofs (N × 192 bytes, as the engine's proofs are
    /// written) with bellperson's `aggregate_proofs`, SnarkPack v2 as non-interactive
    /// PoRep uses, over the count filecoin-proofs aggregates (the last proof repeated
    /// to a power of two). The bytes are an `AggregateProof` as filecoin-proofs
    /// writes one; they do not verify.
    pub fn aggregate(
        &self,
        kind: &PorepKind,
        partition_proofs: &[u8],
    ) -> Result<Vec<u8>, FilecoinError> {
        let _span =
            tracing::info_span!("aggregate", proof = %kind.name, timing_only = true).entered();
        if partition_proofs.is_empty()
            || !partition_proofs
                .len()
                .is_multiple_of(crate::PARTITION_PROOF_LEN)
        {
            return Err(FilecoinError::ProofLength {
                proof: kind.name.clone(),
                expected: kind.partitions() * crate::PARTITION_PROOF_LEN,
                actual: partition_proofs.len(),
            });
        }
        let mut proofs = partition_proofs
            .chunks(crate::PARTITION_PROOF_LEN)
            .map(bellperson::groth16::Proof::<blstrs::Bls12>::read)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| FilecoinError::Aggregate(format!("reading a partition proof: {e}")))?;
        let count = aggregate_len(proofs.len());
        if count > self.max_proofs {
            return Err(FilecoinError::AggregateCount {
                proof: kind.name.clone(),
                count: proofs.len(),
                reason: "more proofs than the timing-only SRS was made for",
            });
        }
        let last = proofs[proofs.len() - 1].clone();
        proofs.resize(count, last);
        let key = self.prover_key(count);
        let aggregate = bellperson::groth16::aggregate::aggregate_proofs(
            &key,
            TIMING_ONLY_TRANSCRIPT,
            &proofs,
            AggregateVersion::V2,
        )
        .map_err(|e| FilecoinError::Aggregate(format!("{e:#}")))?;
        let mut bytes = Vec::new();
        aggregate
            .write(&mut bytes)
            .map_err(|e| FilecoinError::Aggregate(format!("writing the aggregate: {e}")))?;
        Ok(bytes)
    }
}

/// How many proofs SnarkPack aggregates for `count` partition proofs: the next power
/// of two, at least 2 (filecoin-proofs' `get_aggregate_target_len`, which is not
/// public).
pub fn aggregate_len(count: usize) -> usize {
    count.next_power_of_two().max(2)
}

/// One sector of an aggregate: what its C2 proved and the proof (interactive PoRep:
/// `seal_commit_phase2`'s output; non-interactive: the partition proofs, as
/// `seal_commit_phase2_circuit_proofs` returns them, since an NI-PoRep C2 output is
/// already an aggregate). Commitments and randomness are arrays of 32 numbers, as in
/// the C1 output's JSON; the proof is standard base64.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggregateSector {
    pub registered_proof: RegisteredSealProof,
    pub sector: u64,
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    pub ticket: [u8; 32],
    pub seed: [u8; 32],
    #[serde(with = "base64_bytes")]
    pub proof: Vec<u8>,
}

impl AggregateSector {
    /// The sector of a C1 output (its commitments, ticket and seed) with its proof.
    pub fn from_c1(
        input: &crate::C1Input,
        sector: Option<u64>,
        proof: Vec<u8>,
    ) -> Result<Self, FilecoinError> {
        Ok(Self {
            registered_proof: input.c1.registered_proof,
            sector: input.sector(sector)?,
            comm_r: input.c1.comm_r,
            comm_d: input.c1.comm_d,
            ticket: input.c1.ticket,
            seed: input.c1.seed,
            proof,
        })
    }

    fn public(&self, prover_id: [u8; 32]) -> SealPublic {
        SealPublic {
            comm_r: self.comm_r,
            comm_d: self.comm_d,
            prover_id,
            sector: self.sector,
            ticket: self.ticket,
            seed: self.seed,
        }
    }
}

/// Many sectors' proofs to aggregate into one (`cuzk aggregate`), as JSON:
/// `{"prover_id": "1000", "aggregation": "SnarkPackV2", "sectors": [...]}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AggregateRequest {
    /// A miner actor id (`1000`, `f01000`) or 32 bytes of hex, as `--miner-id` takes.
    pub prover_id: String,
    /// `SnarkPackV2` (every aggregate the chain takes today) or `SnarkPackV1`.
    #[serde(default = "default_aggregation")]
    pub aggregation: RegisteredAggregationProof,
    /// In the order the chain will list them (the transcript hashes that order).
    pub sectors: Vec<AggregateSector>,
}

fn default_aggregation() -> RegisteredAggregationProof {
    RegisteredAggregationProof::SnarkPackV2
}

impl AggregateRequest {
    /// Parses the JSON form.
    pub fn parse(bytes: &[u8]) -> Result<Self, FilecoinError> {
        serde_json::from_slice(bytes).map_err(|source| FilecoinError::Json {
            what: "aggregate request",
            source,
        })
    }
}

/// An [`AggregateRequest`] checked: one registered proof, a count the aggregation
/// takes, every proof of the right length, a valid prover id.
#[derive(Clone, Debug)]
pub struct CheckedAggregate {
    pub kind: PorepKind,
    pub prover_id: [u8; 32],
    pub aggregation: RegisteredAggregationProof,
    pub sectors: Vec<AggregateSector>,
}

/// Checks everything about `request` that does not need a proof: the typed errors of
/// a request that can never aggregate, before any work.
pub fn check_aggregate_request(
    request: AggregateRequest,
) -> Result<CheckedAggregate, FilecoinError> {
    let prover_id = crate::parse_prover_id(&request.prover_id)?;
    let Some(first) = request.sectors.first() else {
        return Err(FilecoinError::AggregateCount {
            proof: "(none)".into(),
            count: 0,
            reason: "there is nothing to aggregate",
        });
    };
    let registered = first.registered_proof;
    if let Some((index, s)) = request
        .sectors
        .iter()
        .enumerate()
        .find(|(_, s)| s.registered_proof != registered)
    {
        return Err(FilecoinError::MixedProofs {
            first: proof_name(registered),
            index,
            other: proof_name(s.registered_proof),
        });
    }
    let kind = PorepKind::new(registered)?;
    let count = request.sectors.len();
    if kind.is_non_interactive()
        && count > filecoin_proofs::constants::FIP92_MAX_NI_POREP_AGGREGATION_PROOFS
    {
        return Err(FilecoinError::AggregateCount {
            proof: kind.name,
            count,
            reason: "FIP-0092 aggregates at most 65 non-interactive PoRep sectors",
        });
    }
    if count * kind.partitions() < 2 {
        return Err(FilecoinError::AggregateCount {
            proof: kind.name,
            count,
            reason: "SnarkPack aggregates two proofs or more (one partition each: give two sectors or more)",
        });
    }
    for s in &request.sectors {
        if s.proof.len() != kind.proof_len() {
            return Err(FilecoinError::ProofLength {
                proof: kind.name.clone(),
                expected: kind.proof_len(),
                actual: s.proof.len(),
            });
        }
    }
    Ok(CheckedAggregate {
        kind,
        prover_id,
        aggregation: request.aggregation,
        sectors: request.sectors,
    })
}

/// Aggregates the sectors' proofs with filecoin-proofs' `aggregate_seal_commit_proofs`
/// and verifies the aggregate with its `verify_aggregate_seal_commit_proofs` before
/// returning it. Interactive PoRep proofs are each verified first (`verify_seal`), so
/// that a bad one is named ([`FilecoinError::InputNotVerified`]) rather than spoiling
/// the aggregate. `parameter_dir` must be filecoin-proofs' parameter cache (it reads
/// the verifying key and the SRS there).
pub fn aggregate(
    request: &CheckedAggregate,
    parameter_dir: &Path,
) -> Result<Vec<u8>, FilecoinError> {
    let kind = &request.kind;
    let _span =
        tracing::info_span!("aggregate", proof = %kind.name, sectors = request.sectors.len())
            .entered();
    crate::prover::check_parameter_dir(parameter_dir)?;
    check_srs(parameter_dir)?;
    if !kind.is_non_interactive() {
        for (index, s) in request.sectors.iter().enumerate() {
            crate::prover::verify_bytes(
                kind,
                &s.public(request.prover_id),
                &s.proof,
                parameter_dir,
            )
            .map_err(|e| match e {
                FilecoinError::NotVerified { sector } => {
                    FilecoinError::InputNotVerified { index, sector }
                }
                e => e,
            })?;
        }
    }
    let (comm_rs, seeds): (Vec<_>, Vec<_>) =
        request.sectors.iter().map(|s| (s.comm_r, s.seed)).unzip();
    let outputs: Vec<_> = request
        .sectors
        .iter()
        .map(|s| SealCommitPhase2Output {
            proof: s.proof.clone(),
        })
        .collect();
    let bytes = seal::aggregate_seal_commit_proofs(
        kind.registered,
        request.aggregation,
        &comm_rs,
        &seeds,
        &outputs,
    )
    .map_err(|e| FilecoinError::Aggregate(format!("{e:#}")))?;
    verify_aggregate(request, &bytes)?;
    Ok(bytes)
}

/// Verifies an aggregate of the request's sectors (their proofs are not read) with
/// filecoin-proofs' `verify_aggregate_seal_commit_proofs`, the public inputs from its
/// `get_seal_inputs`.
pub fn verify_aggregate(request: &CheckedAggregate, aggregate: &[u8]) -> Result<(), FilecoinError> {
    let kind = &request.kind;
    let verifier = |e: anyhow::Error| FilecoinError::Verifier(format!("{e:#}"));
    let mut inputs = Vec::new();
    for s in &request.sectors {
        inputs.extend(
            seal::get_seal_inputs(
                kind.registered,
                s.comm_r,
                s.comm_d,
                request.prover_id,
                s.sector.into(),
                s.ticket,
                s.seed,
            )
            .map_err(verifier)?,
        );
    }
    let (comm_rs, seeds): (Vec<_>, Vec<_>) =
        request.sectors.iter().map(|s| (s.comm_r, s.seed)).unzip();
    let ok = seal::verify_aggregate_seal_commit_proofs(
        kind.registered,
        request.aggregation,
        aggregate.to_vec(),
        &comm_rs,
        &seeds,
        inputs,
    )
    .map_err(verifier)?;
    if ok {
        Ok(())
    } else {
        Err(FilecoinError::AggregateNotVerified {
            proof: kind.name.clone(),
            sectors: request.sectors.len(),
        })
    }
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::groth16::aggregate::AggregateProof;
    use group::{Curve, Group};

    const NI_2K: RegisteredSealProof =
        RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep;

    /// `n` partition proofs of random points (never all zero), as the engine writes them.
    fn random_proofs(n: usize, seed: u64) -> Vec<u8> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut bytes = Vec::new();
        for _ in 0..n {
            bellperson::groth16::Proof::<blstrs::Bls12> {
                a: blstrs::G1Projective::random(&mut rng).to_affine(),
                b: blstrs::G2Projective::random(&mut rng).to_affine(),
                c: blstrs::G1Projective::random(&mut rng).to_affine(),
            }
            .write(&mut bytes)
            .unwrap();
        }
        bytes
    }

    /// A timing-only aggregate is SnarkPack's over the padded count (13 partitions: 16
    /// proofs, as filecoin-proofs pads them), in the format filecoin-proofs reads; an
    /// SRS too small for a count, and bytes that are not whole proofs, are typed errors.
    #[test]
    fn timing_only_aggregates_have_the_padded_count_and_filecoin_proofs_format() {
        let kind = PorepKind::new(NI_2K).unwrap();
        assert_eq!(kind.partitions(), 13);
        assert_eq!(
            [1, 2, 3, 13, 16, 17, 126].map(aggregate_len),
            [2, 2, 4, 16, 16, 32, 128]
        );
        let srs = TimingOnlySrs::generate(7, kind.partitions());
        assert_eq!(srs.max_proofs(), 16);
        let proofs = random_proofs(13, 1);
        let bytes = srs.aggregate(&kind, &proofs).unwrap();
        let parsed = AggregateProof::<blstrs::Bls12>::read(&bytes[..]).unwrap();
        assert_eq!(parsed.tmipp.gipa.nproofs, 16);
        assert!(!bool::from(parsed.agg_c.is_identity()));
        let mut again = Vec::new();
        parsed.write(&mut again).unwrap();
        assert_eq!(again, bytes, "the aggregate is exactly one AggregateProof");
        // SnarkPack draws no randomness: the same proofs, the same aggregate; other
        // proofs, another one.
        assert_eq!(srs.aggregate(&kind, &proofs).unwrap(), bytes);
        assert_ne!(srs.aggregate(&kind, &random_proofs(13, 2)).unwrap(), bytes);
        // One proof is padded to two.
        let one = srs.aggregate(&kind, &random_proofs(1, 3)).unwrap();
        let one = AggregateProof::<blstrs::Bls12>::read(&one[..]).unwrap();
        assert_eq!(one.tmipp.gipa.nproofs, 2);

        let e = srs.aggregate(&kind, &random_proofs(17, 4));
        assert!(
            matches!(e, Err(FilecoinError::AggregateCount { count: 17, .. })),
            "{e:?}"
        );
        let e = srs.aggregate(&kind, &proofs[..proofs.len() - 1]);
        assert!(matches!(e, Err(FilecoinError::ProofLength { .. })), "{e:?}");
        let e = srs.aggregate(&kind, &[]);
        assert!(
            matches!(e, Err(FilecoinError::ProofLength { actual: 0, .. })),
            "{e:?}"
        );
    }
}
