//! What providers hand over: a C1 output (JSON of filecoin-proofs-api's
//! `SealCommitPhase1Output`) or the envelope lotus-bench and Curio wrap it in, and the
//! prover id as a miner actor id.

use base64::Engine as _;
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::RegisteredSealProof;
use serde::{Deserialize, Serialize};

use crate::FilecoinError;

/// lotus-bench's `Commit2In`, as Curio sends it too: the C1 JSON in standard base64.
/// Field order does not matter (serde matches by name).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(rename = "SectorNum")]
    pub sector_num: u64,
    /// Standard base64 of the C1 output's JSON.
    #[serde(rename = "Phase1Out")]
    pub phase1_out: String,
    #[serde(rename = "SectorSize")]
    pub sector_size: u64,
}

impl Envelope {
    /// The envelope of `c1_json` for sector `sector_num`.
    pub fn wrap(c1_json: &[u8], sector_num: u64, sector_size: u64) -> Self {
        Self {
            sector_num,
            phase1_out: base64::engine::general_purpose::STANDARD.encode(c1_json),
            sector_size,
        }
    }
}

/// A sector's C1 output, parsed, with the sector number if the input carried one.
#[derive(Debug, Clone)]
pub struct C1Input {
    pub c1: SealCommitPhase1Output,
    /// From the envelope; a bare C1 output has none.
    pub sector_num: Option<u64>,
}

impl C1Input {
    /// The registered proof's name, as filecoin-proofs-api spells it
    /// (`StackedDrg32GiBV1_1`).
    pub fn proof_name(&self) -> String {
        proof_name(self.c1.registered_proof)
    }

    /// The sector number: `given` if any (which must agree with the envelope's),
    /// else the envelope's.
    pub fn sector(&self, given: Option<u64>) -> Result<u64, FilecoinError> {
        match (given, self.sector_num) {
            (Some(given), Some(envelope)) if given != envelope => {
                Err(FilecoinError::SectorMismatch { given, envelope })
            }
            (Some(n), _) | (None, Some(n)) => Ok(n),
            (None, None) => Err(FilecoinError::NoSectorNumber),
        }
    }
}

/// `StackedDrg2KiBV1_1`-style name of a registered proof.
pub fn proof_name(proof: RegisteredSealProof) -> String {
    format!("{proof:?}")
}

/// Parses a C1 output or an envelope (told apart by the envelope's `Phase1Out` key).
pub fn parse_c1(bytes: &[u8]) -> Result<C1Input, FilecoinError> {
    if is_envelope(bytes) {
        let env: Envelope =
            serde_json::from_slice(bytes).map_err(|source| FilecoinError::Json {
                what: "envelope",
                source,
            })?;
        let json = base64::engine::general_purpose::STANDARD.decode(env.phase1_out.trim())?;
        let c1 = parse_bare(&json)?;
        let c1_size = u64::from(c1.registered_proof.sector_size());
        if c1_size != env.sector_size {
            return Err(FilecoinError::EnvelopeSizeMismatch {
                envelope: env.sector_size,
                c1: c1_size,
                proof: proof_name(c1.registered_proof),
            });
        }
        Ok(C1Input {
            c1,
            sector_num: Some(env.sector_num),
        })
    } else {
        Ok(C1Input {
            c1: parse_bare(bytes)?,
            sector_num: None,
        })
    }
}

/// Reads and parses a C1 output or envelope file.
pub fn read_c1(path: &std::path::Path) -> Result<C1Input, FilecoinError> {
    let bytes = std::fs::read(path).map_err(|e| FilecoinError::io("reading", path, e))?;
    parse_c1(&bytes)
}

fn parse_bare(bytes: &[u8]) -> Result<SealCommitPhase1Output, FilecoinError> {
    serde_json::from_slice(bytes).map_err(|source| FilecoinError::Json {
        what: "C1 output",
        source,
    })
}

/// Whether the JSON is an envelope: a C1 output never has a `Phase1Out` key (its own
/// keys are snake_case), so looking for the key is enough and costs no second parse
/// of a 50 MB C1 output.
fn is_envelope(bytes: &[u8]) -> bool {
    const KEY: &[u8] = b"\"Phase1Out\"";
    bytes.windows(KEY.len()).any(|w| w == KEY)
}

/// The 32-byte prover id of a miner: the unsigned LEB128 encoding of the actor id
/// (the payload of its `f0…` address), left-aligned in 32 zero bytes, as Filecoin
/// computes it.
pub fn prover_id_from_miner(actor_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut v = actor_id;
    let mut i = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            break;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
    out
}

/// A prover id from text: a miner actor id (`1234`, `f01234` or `t01234`) or 32 bytes
/// of hex (64 characters, an optional `0x`).
pub fn parse_prover_id(text: &str) -> Result<[u8; 32], FilecoinError> {
    let t = text.trim();
    let bad = || FilecoinError::ProverId {
        input: text.to_string(),
    };
    let id = t
        .strip_prefix("f0")
        .or_else(|| t.strip_prefix("t0"))
        .unwrap_or(t);
    if !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit()) {
        return id
            .parse::<u64>()
            .map(prover_id_from_miner)
            .map_err(|_| bad());
    }
    let hex_text = t.strip_prefix("0x").unwrap_or(t);
    let bytes = hex::decode(hex_text).map_err(|_| bad())?;
    bytes.try_into().map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miner_ids_are_leb128_left_aligned() {
        assert_eq!(prover_id_from_miner(0)[..2], [0, 0]);
        assert_eq!(prover_id_from_miner(127)[..2], [0x7f, 0]);
        assert_eq!(prover_id_from_miner(128)[..3], [0x80, 0x01, 0]);
        // f01000: 1000 = 0b111_1101000.
        assert_eq!(prover_id_from_miner(1000)[..3], [0xe8, 0x07, 0]);
        assert_eq!(prover_id_from_miner(u64::MAX)[9], 0x01);
        assert!(prover_id_from_miner(u64::MAX)[10..].iter().all(|&b| b == 0));
        assert_eq!(
            parse_prover_id("f01000").unwrap(),
            prover_id_from_miner(1000)
        );
        assert_eq!(parse_prover_id("1000").unwrap(), prover_id_from_miner(1000));
        let hex32 = "ab".repeat(32);
        assert_eq!(parse_prover_id(&hex32).unwrap(), [0xab; 32]);
        assert!(parse_prover_id("f1abc").is_err());
        assert!(parse_prover_id("abab").is_err());
    }
}
