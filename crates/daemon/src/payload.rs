//! The queue's job payload format: a job's input in the PostgreSQL queue
//! (`cuzk queue submit`, `cuzk worker`) is the daemon's own wire message, a
//! protobuf `cuzk.v1.SubmitProofRequest`, encoded as on the wire.
//!
//! One format for every entry: a request that Curio would send to `cuzk serve`
//! is, byte for byte, a job the queue can hold, and both decode through the same
//! mapping (the daemon's `convert::request`) into the service's [`ProofRequest`]. The
//! queue's `kind` column holds the kind's name ([`ProofKind::name`]:
//! `POREP_SEAL_COMMIT`, `SNAP_DEALS_UPDATE`, `WINDOW_POST_PARTITION`,
//! `WINNING_POST`, cuzk's `NI_POREP_SEAL_COMMIT` and `SEAL_AGGREGATE`,
//! `SYNTHETIC`), so a worker claims only the kinds it serves.
//!
//! Decoding never trusts the bytes: junk, an unknown kind or priority, or a
//! request id that breaks the service's rule ([`cuzk_service::check_request_id`],
//! the one check every entry point applies) is a [`PayloadError`], never a panic.

use cuzk_service::{Priority, ProofKind, ProofRequest};
use prost::Message;

use crate::wire as pb;

/// The longest request id a payload may carry (the service's limit).
pub const MAX_REQUEST_ID: usize = cuzk_service::MAX_REQUEST_ID_BYTES;

/// Why bytes are not a job payload.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// Not a protobuf message of this shape at all.
    #[error(
        "the job's payload is not a protobuf cuzk.v1.SubmitProofRequest ({len} bytes): {source}"
    )]
    NotProtobuf {
        len: usize,
        #[source]
        source: prost::DecodeError,
    },
    /// A protobuf message, but not a request the service can take (no or an
    /// unknown kind, an unknown priority).
    #[error("the job's payload is not a valid request: {0}")]
    Invalid(String),
    /// The request id breaks the rule.
    #[error("the job's payload has a request id of {len} bytes that is not 1 to {MAX_REQUEST_ID} bytes of printable ASCII without spaces (it starts {head:?})")]
    BadRequestId { len: usize, head: String },
}

/// A kind by its name (`POREP_SEAL_COMMIT`, ...), as the queue's `kind` column
/// holds it.
pub fn kind_by_name(name: &str) -> Option<ProofKind> {
    ProofKind::ALL.into_iter().find(|k| k.name() == name)
}

/// `r` as a job payload of `kind`.
pub fn encode(kind: ProofKind, r: &ProofRequest) -> Vec<u8> {
    let proof_kind = crate::convert::wire_kind(kind);
    let priority = match r.priority {
        None => pb::Priority::Unspecified,
        Some(Priority::Low) => pb::Priority::Low,
        Some(Priority::Normal) => pb::Priority::Normal,
        Some(Priority::High) => pb::Priority::High,
        Some(Priority::Critical) => pb::Priority::Critical,
    };
    pb::SubmitProofRequest {
        request_id: r.request_id.clone().unwrap_or_default(),
        proof_kind: proof_kind as i32,
        sector_size: r.sector_size,
        registered_proof: r.registered_proof,
        priority: priority as i32,
        vanilla_proof: r.vanilla_proof.clone(),
        vanilla_proofs: r.vanilla_proofs.clone(),
        sector_number: r.sector_number,
        miner_id: r.miner_id,
        randomness: r.randomness.clone(),
        partition_index: r.partition_index,
        comm_r_old: r.comm_r_old.clone(),
        comm_r_new: r.comm_r_new.clone(),
        comm_d_new: r.comm_d_new.clone(),
    }
    .encode_to_vec()
}

/// A job payload as the service's kind and request.
pub fn decode(bytes: &[u8]) -> Result<(ProofKind, ProofRequest), PayloadError> {
    let message =
        pb::SubmitProofRequest::decode(bytes).map_err(|source| PayloadError::NotProtobuf {
            len: bytes.len(),
            source,
        })?;
    let (kind, request) =
        crate::convert::request(message).map_err(|s| PayloadError::Invalid(s.message().into()))?;
    if let Some(id) = &request.request_id {
        if !is_valid_request_id(id) {
            return Err(PayloadError::BadRequestId {
                len: id.len(),
                head: id.chars().take(32).flat_map(char::escape_default).collect(),
            });
        }
    }
    Ok((kind, request))
}

/// Whether `id` passes the service's request-id check
/// ([`cuzk_service::check_request_id`]).
pub fn is_valid_request_id(id: &str) -> bool {
    cuzk_service::check_request_id(id).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ProofRequest {
        ProofRequest {
            request_id: Some("queue-7".into()),
            priority: Some(Priority::High),
            sector_size: 2048,
            registered_proof: 10,
            vanilla_proof: b"c1".to_vec(),
            vanilla_proofs: vec![vec![1, 2], vec![3]],
            sector_number: 7,
            miner_id: 1000,
            randomness: vec![9; 32],
            partition_index: 2,
            comm_r_old: vec![1; 32],
            comm_r_new: vec![2; 32],
            comm_d_new: vec![3; 32],
        }
    }

    #[test]
    fn every_kind_round_trips_with_every_field() {
        for kind in ProofKind::ALL {
            let (k, r) = decode(&encode(kind, &request())).unwrap();
            assert_eq!(k, kind);
            assert_eq!(kind_by_name(kind.name()), Some(kind));
            let want = request();
            assert_eq!(r.request_id, want.request_id);
            assert_eq!(r.priority, want.priority);
            assert_eq!(
                (
                    r.sector_size,
                    r.registered_proof,
                    r.sector_number,
                    r.miner_id
                ),
                (2048, 10, 7, 1000)
            );
            assert_eq!(r.vanilla_proof, want.vanilla_proof);
            assert_eq!(r.vanilla_proofs, want.vanilla_proofs);
            assert_eq!(r.randomness, want.randomness);
            assert_eq!(r.partition_index, 2);
            assert_eq!(
                (r.comm_r_old, r.comm_r_new, r.comm_d_new),
                (want.comm_r_old, want.comm_r_new, want.comm_d_new)
            );
        }
        // cuzk's extensions keep their wire numbers (Curio's proto has no such
        // kinds; queued payloads and clients depend on the numbers).
        for (kind, number) in [
            (ProofKind::NiPorepSealCommit, 1000),
            (ProofKind::SealAggregate, 1001),
            (ProofKind::Synthetic, 100),
        ] {
            let m = pb::SubmitProofRequest::decode(&encode(kind, &request())[..]).unwrap();
            assert_eq!(m.proof_kind, number, "{kind}");
        }
        // Unset priority and request id stay unset.
        let bare = ProofRequest::default();
        let (_, r) = decode(&encode(ProofKind::WinningPost, &bare)).unwrap();
        assert_eq!((r.request_id, r.priority), (None, None));
        assert_eq!(kind_by_name("porep-c2"), None);
    }

    #[test]
    fn hostile_bytes_are_errors_that_say_what_is_wrong() {
        for junk in [
            &b"\xff\xff\xff\xff"[..],
            b"\x0a\x80",
            b"not protobuf at all \xff",
        ] {
            let e = decode(junk).unwrap_err();
            assert!(matches!(e, PayloadError::NotProtobuf { .. }), "{e}");
        }
        // Empty bytes decode as an empty message: no kind.
        let e = decode(b"").unwrap_err();
        assert!(e.to_string().contains("proof_kind is not set"), "{e}");
        let unknown = pb::SubmitProofRequest {
            proof_kind: 77,
            ..Default::default()
        }
        .encode_to_vec();
        assert!(decode(&unknown)
            .unwrap_err()
            .to_string()
            .contains("77 is not a ProofKind"));
        let mut huge = request();
        huge.request_id = Some("x".repeat(100_000));
        let e = decode(&encode(ProofKind::WinningPost, &huge)).unwrap_err();
        assert!(
            matches!(e, PayloadError::BadRequestId { len: 100_000, .. }),
            "{e}"
        );
        assert!(e.to_string().len() < 300, "{e}");
        let mut odd = request();
        odd.request_id = Some("a\0b".into());
        assert!(decode(&encode(ProofKind::WinningPost, &odd)).is_err());
    }
}
