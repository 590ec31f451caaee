//! Wire messages to service calls and back, and service errors to gRPC codes.
//! The only place both kinds of types meet.

use cuzk_service::{
    JobLookupError, JobResult, JobStatus, ParamsError, Priority, ProofKind, ProofRequest,
    RequestError, Status as ServiceStatus,
};
use tonic::Status;

use crate::wire as pb;

/// A `SubmitProofRequest` as the service's kind and request.
pub fn request(r: pb::SubmitProofRequest) -> Result<(ProofKind, ProofRequest), Status> {
    let kind = match pb::ProofKind::try_from(r.proof_kind) {
        Ok(pb::ProofKind::PorepSealCommit) => ProofKind::PorepSealCommit,
        Ok(pb::ProofKind::SnapDealsUpdate) => ProofKind::SnapDealsUpdate,
        Ok(pb::ProofKind::WindowPostPartition) => ProofKind::WindowPostPartition,
        Ok(pb::ProofKind::WinningPost) => ProofKind::WinningPost,
        Ok(pb::ProofKind::NiPorepSealCommit) => ProofKind::NiPorepSealCommit,
        Ok(pb::ProofKind::SealAggregate) => ProofKind::SealAggregate,
        Ok(pb::ProofKind::Synthetic) => ProofKind::Synthetic,
        Ok(pb::ProofKind::Unspecified) => {
            return Err(Status::invalid_argument(
                "proof_kind is not set: use POREP_SEAL_COMMIT, SNAP_DEALS_UPDATE, WINDOW_POST_PARTITION or WINNING_POST (or cuzk's NI_POREP_SEAL_COMMIT = 1000, SEAL_AGGREGATE = 1001)",
            ))
        }
        Err(_) => {
            return Err(Status::invalid_argument(format!(
                "proof_kind {} is not a ProofKind value",
                r.proof_kind
            )))
        }
    };
    let priority = match pb::Priority::try_from(r.priority) {
        Ok(pb::Priority::Unspecified) => None,
        Ok(pb::Priority::Low) => Some(Priority::Low),
        Ok(pb::Priority::Normal) => Some(Priority::Normal),
        Ok(pb::Priority::High) => Some(Priority::High),
        Ok(pb::Priority::Critical) => Some(Priority::Critical),
        Err(_) => {
            return Err(Status::invalid_argument(format!(
                "priority {} is not a Priority value (0 to 4)",
                r.priority
            )))
        }
    };
    Ok((
        kind,
        ProofRequest {
            request_id: (!r.request_id.is_empty()).then_some(r.request_id),
            priority,
            sector_size: r.sector_size,
            registered_proof: r.registered_proof,
            vanilla_proof: r.vanilla_proof,
            vanilla_proofs: r.vanilla_proofs,
            sector_number: r.sector_number,
            miner_id: r.miner_id,
            randomness: r.randomness,
            partition_index: r.partition_index,
            comm_r_old: r.comm_r_old,
            comm_r_new: r.comm_r_new,
            comm_d_new: r.comm_d_new,
        },
    ))
}

/// The wire's value of a service kind (the inverse of `request`'s mapping).
pub fn wire_kind(kind: ProofKind) -> pb::ProofKind {
    match kind {
        ProofKind::PorepSealCommit => pb::ProofKind::PorepSealCommit,
        ProofKind::SnapDealsUpdate => pb::ProofKind::SnapDealsUpdate,
        ProofKind::WindowPostPartition => pb::ProofKind::WindowPostPartition,
        ProofKind::WinningPost => pb::ProofKind::WinningPost,
        ProofKind::NiPorepSealCommit => pb::ProofKind::NiPorepSealCommit,
        ProofKind::SealAggregate => pb::ProofKind::SealAggregate,
        ProofKind::Synthetic => pb::ProofKind::Synthetic,
    }
}

/// A finished job as an `AwaitProofResponse`.
pub fn result(r: JobResult) -> pb::AwaitProofResponse {
    let status = match r.status {
        JobStatus::Completed => pb::await_proof_response::Status::Completed,
        JobStatus::Failed => pb::await_proof_response::Status::Failed,
        JobStatus::Cancelled => pb::await_proof_response::Status::Cancelled,
    };
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    pb::AwaitProofResponse {
        job_id: r.job_id,
        status: status as i32,
        proof: r.proof,
        timing_only: r.timing_only,
        error_message: r.error,
        queue_wait_ms: ms(r.timings.queue_wait),
        srs_load_ms: ms(r.timings.srs_load),
        synthesis_ms: ms(r.timings.synthesis),
        gpu_compute_ms: ms(r.timings.gpu_compute),
        total_ms: ms(r.timings.total),
    }
}

/// The answer when `timeout_ms` ran out first.
pub fn timed_out(job_id: String) -> pb::AwaitProofResponse {
    pb::AwaitProofResponse {
        job_id,
        status: pb::await_proof_response::Status::Timeout as i32,
        ..Default::default()
    }
}

pub fn request_error(e: RequestError) -> Status {
    match e {
        RequestError::Unsupported { .. } => Status::unimplemented(e.to_string()),
        RequestError::Malformed { .. } => Status::invalid_argument(e.to_string()),
        RequestError::DuplicateId(_) => Status::already_exists(e.to_string()),
        RequestError::ShuttingDown => Status::unavailable(e.to_string()),
        RequestError::BadRequestId(_) => Status::invalid_argument(e.to_string()),
        RequestError::TooLarge { .. } | RequestError::QueueFull { .. } => {
            Status::resource_exhausted(e.to_string())
        }
    }
}

pub fn lookup_error(e: JobLookupError) -> Status {
    match e {
        JobLookupError::NotFound(_) => Status::not_found(e.to_string()),
    }
}

pub fn params_error(e: ParamsError) -> Status {
    match e {
        ParamsError::UnknownCircuit { .. } => Status::invalid_argument(e.to_string()),
        ParamsError::Load { .. } | ParamsError::Evict(_) => {
            Status::failed_precondition(e.to_string())
        }
    }
}

/// Service status as `GetStatusResponse`.
pub fn status(s: ServiceStatus) -> pb::GetStatusResponse {
    pb::GetStatusResponse {
        gpus: s
            .gpus
            .into_iter()
            .map(|g| {
                let (job, kind) = g
                    .current_job
                    .map(|(j, k)| (j, k.name().to_owned()))
                    .unwrap_or_default();
                pb::GpuStatus {
                    ordinal: g.info.ordinal,
                    name: g.info.name,
                    vram_total_bytes: g.info.vram_total_bytes,
                    vram_free_bytes: g.info.vram_free_bytes,
                    current_job_id: job,
                    current_proof_kind: kind,
                }
            })
            .collect(),
        loaded_srs: s
            .params
            .into_iter()
            .map(|p| pb::SrsStatus {
                circuit_id: p.circuit_id,
                // In use by a job: hot; resident and idle: warm.
                tier: if p.ref_count > 0 {
                    pb::srs_status::Tier::Hot
                } else {
                    pb::srs_status::Tier::Warm
                } as i32,
                size_bytes: p.bytes,
                ref_count: p.ref_count,
                timing_only: p.timing_only,
            })
            .collect(),
        queues: s
            .queues
            .into_iter()
            .map(|q| pb::QueueStatus {
                proof_kind: q.kind.name().to_owned(),
                pending: q.pending,
                in_progress: q.in_progress,
            })
            .collect(),
        total_proofs_completed: s.completed,
        total_proofs_failed: s.failed,
        uptime_seconds: s.uptime_seconds,
        pinned_memory_bytes: s.budget_used_bytes,
        pinned_memory_limit_bytes: s.budget_total_bytes,
        timing_only_circuits: s.timing_only_circuits,
        // The process's plan, which the service does not know: the API adds it.
        plan: String::new(),
        plan_json: String::new(),
    }
}
