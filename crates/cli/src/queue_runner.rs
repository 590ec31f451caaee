//! The queue's one job runner: a job's payload (the daemon's `SubmitProofRequest`,
//! `cuzk_daemon::payload`) submitted to the worker's `cuzk_service::Service`, the
//! same service `cuzk serve` runs, so every kind takes one path from request to
//! proof whether it came over gRPC or through PostgreSQL.

use cuzk_daemon::payload;
use cuzk_queue::{Cancel, ClaimedJob, JobRunner, RunError};
use cuzk_service::{JobStatus, KindProver, Priority, ProofKind, ProofRequest, Service};

/// The engine's priority of a queue priority. The queue stores the levels by
/// their wire numbers (low 1, normal 2, high 3, critical 4: the proto's
/// `Priority`); anything below is low, anything above critical. With
/// [`queue_priority`], the one place the two meet.
pub fn engine_priority(queue: i32) -> Priority {
    match queue {
        i32::MIN..=1 => Priority::Low,
        2 => Priority::Normal,
        3 => Priority::High,
        _ => Priority::Critical,
    }
}

/// The number the queue stores for `p` (claims go highest first).
pub fn queue_priority(p: Priority) -> i32 {
    match p {
        Priority::Low => 1,
        Priority::Normal => 2,
        Priority::High => 3,
        Priority::Critical => 4,
    }
}

/// A priority's name (`low`, `normal`, `high`, `critical`).
pub fn parse_priority(name: &str) -> Result<Priority, String> {
    match name {
        "low" => Ok(Priority::Low),
        "normal" => Ok(Priority::Normal),
        "high" => Ok(Priority::High),
        "critical" => Ok(Priority::Critical),
        _ => Err(format!(
            "unknown priority `{name}`: low, normal, high or critical"
        )),
    }
}

/// The service job id of queue job `id`: `queue-<id>` (A-Z a-z 0-9 . _ : -).
pub fn service_job_id(id: cuzk_queue::JobId) -> String {
    format!("queue-{id}")
}

/// Proves one kind's queue jobs through the service (one runner per kind the
/// service serves, so the worker claims exactly those kinds).
pub struct ServiceRunner {
    service: Service,
    kind: ProofKind,
}

impl ServiceRunner {
    pub fn new(service: Service, kind: ProofKind) -> Self {
        Self { service, kind }
    }

    /// One runner per kind `service` serves.
    pub fn all(service: &Service) -> Vec<ServiceRunner> {
        service
            .kinds()
            .into_iter()
            .map(|k| ServiceRunner::new(service.clone(), k))
            .collect()
    }
}

impl JobRunner for ServiceRunner {
    fn kind(&self) -> &str {
        self.kind.name()
    }

    fn run(&self, job: &ClaimedJob, cancel: &Cancel) -> Result<Vec<u8>, RunError> {
        let (kind, mut request) =
            payload::decode(&job.input).map_err(|e| RunError::from_error(&e))?;
        if kind != self.kind {
            return Err(RunError(format!(
                "the job is queued as {} but its payload is a {kind} request",
                self.kind
            )));
        }
        // The payload's priority wins; else the queue's number.
        request.priority = Some(
            request
                .priority
                .unwrap_or_else(|| engine_priority(job.priority)),
        );
        let id = service_job_id(job.id);
        request.request_id = Some(id.clone());
        self.service
            .submit(kind, request)
            .map_err(|e| RunError::from_error(&e))?;
        let (service, cancel_id) = (self.service.clone(), id.clone());
        cancel.on_cancel(move || {
            // Already finished (and handed over) is fine: nothing to cancel.
            let _ = service.cancel(&cancel_id);
        });
        let result = self
            .service
            .wait_blocking(&id, None)
            .map_err(|e| RunError::from_error(&e))?
            .ok_or_else(|| RunError("internal: a wait without a timeout timed out".into()))?;
        match result.status {
            JobStatus::Completed if result.timing_only => Err(RunError(format!(
                "the {kind} proof was made with timing-only parameters and is not verified: a worker writes only verified proofs"
            ))),
            JobStatus::Completed => Ok(result.proof),
            JobStatus::Failed => Err(RunError(result.error)),
            JobStatus::Cancelled => Err(RunError(format!("cancelled: {}", result.error))),
        }
    }
}

/// Checks `request` of `kind` as the service checks it at submission
/// ([`cuzk_service::check_request`], with the kind's default limits, a worker's),
/// so a request that a worker would refuse is refused before it is queued, and
/// one that a command line proves is refused before its circuit is compiled.
/// Returns the checked request (its circuit id).
pub fn check_request(
    kinds: &[std::sync::Arc<dyn KindProver>],
    kind: ProofKind,
    request: &ProofRequest,
) -> Result<Box<dyn cuzk_service::PreparedProof>, cuzk_service::RequestError> {
    let prover = kinds.iter().find(|k| k.kind() == kind).ok_or_else(|| {
        cuzk_service::RequestError::Unsupported {
            kind,
            why: "no worker of this build serves it".into(),
        }
    })?;
    cuzk_service::check_request(
        &**prover,
        cuzk_service::KindLimits::default_for(kind),
        request.clone(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_priorities_map_to_the_engine_s_and_back() {
        for p in [
            Priority::Low,
            Priority::Normal,
            Priority::High,
            Priority::Critical,
        ] {
            assert_eq!(engine_priority(queue_priority(p)), p);
            assert_eq!(parse_priority(&p.to_string()), Ok(p));
        }
        assert_eq!(engine_priority(-5), Priority::Low);
        assert_eq!(engine_priority(0), Priority::Low);
        assert_eq!(engine_priority(99), Priority::Critical);
        assert!(parse_priority("urgent").is_err());
        let id = service_job_id(i64::MAX);
        assert!(cuzk_daemon::payload::is_valid_request_id(&id), "{id}");
    }
}
