//! The crate's one error type.

/// What went wrong on the way to (or on) the GPU.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// No usable driver library or no device: the machine cannot run this backend.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// NVRTC (libnvrtc.so) is not on the loader path.
    #[error("NVRTC is not available: {0}")]
    NoNvrtc(String),
    /// A kernel source did not compile; the full compiler log follows.
    #[error("NVRTC could not compile {module} for {arch}:\n{log}")]
    Compile {
        module: &'static str,
        arch: String,
        log: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA call {call} failed: {source}")]
    Driver {
        call: &'static str,
        source: cudarc::driver::DriverError,
    },
    /// The work needs more device memory than this backend may use.
    #[error("the {what} needs {need} bytes of device memory but only {available} are available")]
    OutOfMemory {
        what: &'static str,
        need: u64,
        available: u64,
    },
    /// A setting of the backend is unknown or out of range.
    #[error("{0}")]
    Config(String),
    /// The kernel cache could not be written where it was asked to be.
    #[error("kernel cache: {0}")]
    Cache(String),
    /// Caller input has the wrong shape.
    #[error("{0}")]
    Shape(String),
}

/// Attaches the name of the driver call to a driver error.
pub(crate) trait Ctx<T> {
    fn ctx(self, call: &'static str) -> Result<T, CudaError>;
}

impl<T> Ctx<T> for Result<T, cudarc::driver::DriverError> {
    fn ctx(self, call: &'static str) -> Result<T, CudaError> {
        self.map_err(|source| CudaError::Driver { call, source })
    }
}
