//! The few driver calls cudarc's safe layer does not offer, as `Result`-returning
//! functions: library presence, pool threshold, byte copies and memsets into typed
//! buffers, and page-locking (registering) host memory.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, CudaSlice, CudaStream, DevicePtrMut};

use crate::error::{Ctx, CudaError};

/// Fails with [`CudaError::NoDevice`] when `libcuda.so` cannot be loaded. cudarc
/// panics on first use of a missing library, so presence is checked first (and the
/// check itself is guarded against panics).
pub fn check_driver() -> Result<(), CudaError> {
    // SAFETY: only tries to dlopen the driver library by its usual names.
    let present = std::panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
    if !present {
        return Err(CudaError::NoDevice(
            "the CUDA driver library (libcuda.so) is not installed".into(),
        ));
    }
    std::panic::catch_unwind(result::init)
        .map_err(|_| CudaError::NoDevice("cuInit panicked".into()))?
        .map_err(|e| CudaError::NoDevice(format!("cuInit failed: {e}")))
}

/// Keeps freed stream-ordered allocations in the device's default pool instead of
/// returning them to the driver at every synchronisation, so the next partition's
/// buffers are reused without new mappings. One call at start, not in the hot path.
pub fn keep_pool_memory(ctx: &Arc<CudaContext>) -> Result<(), CudaError> {
    if !ctx.has_async_alloc() {
        return Ok(());
    }
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut threshold: u64 = u64::MAX;
    // SAFETY: the device handle comes from a live context; `pool` and `threshold` are
    // valid for writes/reads of their types.
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device())
            .result()
            .ctx("cuDeviceGetDefaultMemPool")?;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
        .result()
        .ctx("cuMemPoolSetAttribute")?;
    }
    Ok(())
}

/// Fills `buf` with the byte `value`, in order on `stream`.
pub fn memset_d8<T>(
    stream: &Arc<CudaStream>,
    buf: &mut CudaSlice<T>,
    value: u8,
) -> Result<(), CudaError> {
    let bytes = buf.num_bytes();
    let (ptr, _rec) = buf.device_ptr_mut(stream);
    // SAFETY: `ptr` addresses `bytes` bytes of a live allocation.
    unsafe { result::memset_d8_async(ptr, value, bytes, stream.cu_stream()) }.ctx("cuMemsetD8Async")
}

/// Copies `bytes` into `buf` starting at element `offset`, in order on `stream`.
///
/// For pageable host memory the driver stages the data before returning; for
/// registered memory ([`HostRegistration`]) the copy is asynchronous and the caller
/// must keep the host memory alive (and registered) until `stream` has passed it.
pub fn htod_bytes<T>(
    stream: &Arc<CudaStream>,
    bytes: &[u8],
    buf: &mut CudaSlice<T>,
    offset: usize,
) -> Result<(), CudaError> {
    let at = offset * std::mem::size_of::<T>();
    if at + bytes.len() > buf.num_bytes() {
        return Err(CudaError::Shape(format!(
            "copy of {} bytes at {at} overruns a device buffer of {} bytes",
            bytes.len(),
            buf.num_bytes()
        )));
    }
    if bytes.is_empty() {
        return Ok(());
    }
    let (ptr, _rec) = buf.device_ptr_mut(stream);
    // SAFETY: the destination range lies inside the allocation (checked above).
    unsafe { result::memcpy_htod_async(ptr + at as u64, bytes, stream.cu_stream()) }
        .ctx("cuMemcpyHtoDAsync")
}

/// Page-locks a host byte range for the lifetime of the guard, so copies from it run
/// at full PCIe speed and asynchronously (the supraseal pattern: register a, b, c
/// before the GPU work). Unregisters on drop; a failure there is ignored (Drop never
/// panics) since the memory stays valid either way.
#[derive(Debug)]
pub struct HostRegistration {
    ptr: *mut std::ffi::c_void,
}

// SAFETY: the guard only holds an address used for the unregister call.
unsafe impl Send for HostRegistration {}

impl HostRegistration {
    /// # Safety
    /// `bytes` must stay allocated, unmoved, for the guard's lifetime.
    pub unsafe fn new(ctx: &Arc<CudaContext>, bytes: &[u8]) -> Result<Option<Self>, CudaError> {
        if bytes.is_empty() {
            return Ok(None);
        }
        ctx.bind_to_thread().ctx("cuCtxSetCurrent")?;
        let ptr = bytes.as_ptr() as *mut std::ffi::c_void;
        // SAFETY: the caller keeps the range alive; flags 0 = plain page-locking.
        let r = unsafe { sys::cuMemHostRegister_v2(ptr, bytes.len(), 0) };
        match r {
            sys::CUresult::CUDA_SUCCESS => Ok(Some(Self { ptr })),
            // Already registered by the caller: nothing to do, nothing to undo.
            sys::CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED => Ok(None),
            e => Err(CudaError::Driver {
                call: "cuMemHostRegister",
                source: result::DriverError(e),
            }),
        }
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        // SAFETY: `ptr` was registered by `new` and not unregistered since.
        let _ = unsafe { sys::cuMemHostUnregister(self.ptr) };
    }
}
