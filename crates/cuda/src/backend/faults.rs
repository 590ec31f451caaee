//! Test-only failure injection (`cfg(test)` or the `fault-injection` feature): a
//! partition made to fail right after its a, b, c upload, for the error-path test of
//! issue #12. Production builds have neither the field nor the branch.

use super::*;

/// Test-only failure injection: where a partition fails on purpose, and what the
/// device was doing then. Only in the crate's own tests and with the
/// `fault-injection` feature; production builds have no such field or branch.
#[cfg(any(test, feature = "fault-injection"))]
#[derive(Debug, Default)]
pub struct FaultInjection {
    fail_after_upload: std::sync::atomic::AtomicBool,
    /// Recorded on the copy stream right behind the a, b, c upload, at the injected
    /// failure: complete once every copy of it has read the host vectors.
    after_upload: Mutex<Option<cudarc::driver::CudaEvent>>,
    /// Whether the copies were still running when the failure was injected (if
    /// not, a test of the error path proves nothing).
    in_flight_at_fault: std::sync::atomic::AtomicBool,
}

#[cfg(any(test, feature = "fault-injection"))]
impl CudaBackend {
    /// Makes every later partition fail right after its a, b, c upload was enqueued
    /// (`on = true`), before H and the MSMs are done.
    pub fn fail_after_upload(&self, on: bool) {
        use std::sync::atomic::Ordering;
        self.faults.fail_after_upload.store(on, Ordering::SeqCst);
    }

    /// After an injected failure: (whether the upload was still in flight when it
    /// was injected, whether it is complete now). `None` if none was injected.
    pub fn upload_state_after_fault(&self) -> Option<Result<(bool, bool), CudaError>> {
        use std::sync::atomic::Ordering;
        let ev = self
            .faults
            .after_upload
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let ev = ev.as_ref()?;
        let was = self.faults.in_flight_at_fault.load(Ordering::SeqCst);
        Some(
            ev.try_is_complete()
                .ctx("cuEventQuery")
                .map(|done| (was, done)),
        )
    }
}

impl CudaBackend {
    /// The injected failure right after the a, b, c upload, when a test asked for
    /// one (other builds have a no-op in backend.rs).
    pub(super) fn fault_after_upload(&self, gpu: &Gpu) -> Result<(), CudaError> {
        use std::sync::atomic::Ordering;
        if !self.faults.fail_after_upload.load(Ordering::SeqCst) {
            return Ok(());
        }
        let ev = gpu.record(&gpu.copy)?;
        let done = ev.try_is_complete().ctx("cuEventQuery")?;
        self.faults
            .in_flight_at_fault
            .store(!done, Ordering::SeqCst);
        *self
            .faults
            .after_upload
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(ev);
        Err(CudaError::Shape(
            "injected failure right after the a, b, c upload".into(),
        ))
    }
}
