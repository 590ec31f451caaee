//! The few driver calls cudarc's safe layer does not offer, as `Result`-returning
//! functions: library presence, pool threshold, byte copies and memsets into typed
//! buffers, page-locking (registering) host memory, and page-locked host buffers
//! allocated by the driver.

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
    // With several devices in one process, the calling thread's current context
    // may be another device's: make the stream's current first.
    stream.context().bind_to_thread().ctx("cuCtxSetCurrent")?;
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
    stream.context().bind_to_thread().ctx("cuCtxSetCurrent")?;
    let (ptr, _rec) = buf.device_ptr_mut(stream);
    // SAFETY: the destination range lies inside the allocation (checked above).
    unsafe { result::memcpy_htod_async(ptr + at as u64, bytes, stream.cu_stream()) }
        .ctx("cuMemcpyHtoDAsync")
}

/// Page-locked host bytes held in this process, per device ordinal, in two kinds:
/// what the driver allocated ([`PinnedBuffer`]: staging buffers no one else counts)
/// and caller memory made page-locked in place ([`HostRegistration`]: `a, b, c`,
/// already held by whoever allocated them). Read by [`pinned_bytes`] and
/// [`registered_bytes`] without taking any lock the GPU work holds, so the engine's
/// memory budget can poll it while a partition runs.
static PINNED: std::sync::Mutex<Vec<Pinned>> = std::sync::Mutex::new(Vec::new());

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pinned {
    allocated: u64,
    pub(crate) registered: u64,
}

#[derive(Clone, Copy)]
enum PinKind {
    Allocated,
    Registered,
}

fn count_pinned(ordinal: usize, kind: PinKind, bytes: u64, add: bool) {
    let mut v = PINNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if v.len() <= ordinal {
        v.resize(ordinal + 1, Pinned::default());
    }
    let slot = match kind {
        PinKind::Allocated => &mut v[ordinal].allocated,
        PinKind::Registered => &mut v[ordinal].registered,
    };
    *slot = if add {
        slot.saturating_add(bytes)
    } else {
        slot.saturating_sub(bytes)
    };
}

pub(crate) fn read_pinned(ordinal: usize) -> Pinned {
    PINNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(ordinal)
        .copied()
        .unwrap_or_default()
}

/// Page-locked host bytes this process allocated for device `ordinal` (the
/// staging buffers of [`PinnedBuffer`]): memory that exists only because of the
/// backend, which a host memory budget must leave room for.
pub fn pinned_bytes(ordinal: usize) -> u64 {
    read_pinned(ordinal).allocated
}

/// How many CUDA devices the driver sees: 0 without a driver library or device.
pub fn device_count() -> u32 {
    if check_driver().is_err() {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| u32::try_from(n).unwrap_or(0))
}

/// Page-locks a host byte range for the lifetime of the guard, so copies from it run
/// at full PCIe speed and asynchronously (the supraseal pattern: register a, b, c
/// before the GPU work). Unregisters on drop; a failure there is ignored (Drop never
/// panics) since the memory stays valid either way.
#[derive(Debug)]
pub struct HostRegistration {
    ptr: *mut std::ffi::c_void,
    /// Bytes registered (counted in [`registered_bytes`] while the guard lives).
    len: usize,
    /// The context it was registered in (the unregister runs there: with several
    /// devices the dropping thread's current context may be another one).
    ctx: Arc<CudaContext>,
}

// SAFETY: the guard only holds an address used for the unregister call.
unsafe impl Send for HostRegistration {}

/// Start addresses of the ranges live [`HostRegistration`]s hold: a range this
/// process registered is known here without asking the driver. A partition staged
/// before the GPU lock (`stage_witness`) is pinned again at the start of its
/// backend call, inside the lock; the driver answers "already registered", but that
/// call waited up to ~70 ms on the H200 while another thread registered the next
/// partition's 4 GB witness.
static LIVE: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<usize>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

impl HostRegistration {
    /// # Safety
    /// `bytes` must stay allocated, unmoved, for the guard's lifetime.
    pub unsafe fn new(ctx: &Arc<CudaContext>, bytes: &[u8]) -> Result<Option<Self>, CudaError> {
        if bytes.is_empty() {
            return Ok(None);
        }
        let ptr = bytes.as_ptr() as *mut std::ffi::c_void;
        // Registered here already (and not unregistered since): what the driver
        // would answer, without the driver.
        if live().contains(&(ptr as usize)) {
            return Ok(None);
        }
        ctx.bind_to_thread().ctx("cuCtxSetCurrent")?;
        // SAFETY: the caller keeps the range alive; flags 0 = plain page-locking.
        let mut r = unsafe { sys::cuMemHostRegister_v2(ptr, bytes.len(), 0) };
        if !matches!(
            r,
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
        ) {
            // A read-only mapping (a points file's parameter set) is refused
            // without the read-only flag on platforms that do not page-lock such
            // pages otherwise. Every range registered here is only read by the
            // device (host-to-device copies), so the flag promises nothing we
            // break; where the driver refuses it too, the first error is reported.
            // SAFETY: as above.
            let ro = unsafe {
                sys::cuMemHostRegister_v2(ptr, bytes.len(), sys::CU_MEMHOSTREGISTER_READ_ONLY)
            };
            if ro == sys::CUresult::CUDA_SUCCESS {
                tracing::debug!(
                    "cuda: {} bytes page-locked read-only (plain registration answered {r:?})",
                    bytes.len()
                );
                r = ro;
            }
        }
        match r {
            sys::CUresult::CUDA_SUCCESS => {
                live().push(ptr as usize);
                count_pinned(ctx.ordinal(), PinKind::Registered, bytes.len() as u64, true);
                Ok(Some(Self {
                    ptr,
                    len: bytes.len(),
                    ctx: Arc::clone(ctx),
                }))
            }
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
        let _ = self.ctx.bind_to_thread();
        // Out of the list first: from here the range may be unregistered.
        {
            let mut live = live();
            if let Some(k) = live.iter().position(|&p| p == self.ptr as usize) {
                live.swap_remove(k);
            }
        }
        // SAFETY: `ptr` was registered by `new` and not unregistered since.
        let _ = unsafe { sys::cuMemHostUnregister(self.ptr) };
        count_pinned(
            self.ctx.ordinal(),
            PinKind::Registered,
            self.len as u64,
            false,
        );
    }
}

/// Page-locked host memory allocated by the driver (`cuMemHostAlloc`): the staging
/// buffers streamed bases are copied through, so that their host→device copies are
/// asynchronous DMA at full PCIe speed. It starts uninitialised: written through
/// [`PinnedBuffer::as_uninit_mut`], read by the device through
/// [`PinnedBuffer::assume_init_prefix`].
///
/// Dropping frees the memory at once (`cuMemFreeHost`; a failure there is logged,
/// never a panic): the owner first waits for every queued copy that reads it.
#[derive(Debug)]
pub(crate) struct PinnedBuffer {
    ptr: std::ptr::NonNull<std::mem::MaybeUninit<u8>>,
    len: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: the buffer owns its allocation, which any thread may access and free
// (page-locked host memory has no thread affinity).
unsafe impl Send for PinnedBuffer {}
// SAFETY: through a shared reference the buffer is only read
// (`assume_init_prefix`, `len`); writing takes `&mut self`, as for a `Vec<u8>`.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocates `len` page-locked bytes (flags 0: cacheable, this context only).
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self, CudaError> {
        if len == 0 || len > isize::MAX as usize {
            return Err(CudaError::Shape(format!(
                "a pinned host buffer of {len} bytes"
            )));
        }
        ctx.bind_to_thread().ctx("cuCtxSetCurrent")?;
        // SAFETY: a plain allocation; the pointer is only used by this owner.
        let ptr = unsafe { result::malloc_host(len, 0) }.ctx("cuMemHostAlloc")?;
        let ptr = std::ptr::NonNull::new(ptr.cast()).ok_or(CudaError::Driver {
            call: "cuMemHostAlloc",
            source: result::DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        })?;
        count_pinned(ctx.ordinal(), PinKind::Allocated, len as u64, true);
        Ok(Self {
            ptr,
            len,
            ctx: Arc::clone(ctx),
        })
    }

    /// Bytes allocated.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The whole buffer, for writing. The caller must not write while a queued copy
    /// still reads it.
    pub fn as_uninit_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        // SAFETY: `len` bytes allocated by `new`, exclusively borrowed through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The first `len` bytes (at most the buffer's length), as written.
    ///
    /// # Safety
    /// Every one of those bytes must have been written through
    /// [`PinnedBuffer::as_uninit_mut`].
    pub unsafe fn assume_init_prefix(&self, len: usize) -> &[u8] {
        // SAFETY: in bounds (clamped), initialised by the caller's contract.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u8>(), len.min(self.len)) }
    }

    /// Bytes `range` (clamped to the buffer), as written.
    ///
    /// # Safety
    /// Every one of those bytes must have been written through
    /// [`PinnedBuffer::as_uninit_mut`].
    pub unsafe fn assume_init_range(&self, range: std::ops::Range<usize>) -> &[u8] {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        // SAFETY: in bounds (clamped), initialised by the caller's contract.
        unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u8>().add(start), end - start)
        }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by `cuMemHostAlloc` in `new`, freed only here.
        if let Err(e) = unsafe { result::free_host(self.ptr.as_ptr().cast()) } {
            tracing::warn!(
                "cuMemFreeHost of a {}-byte staging buffer failed: {e}",
                self.len
            );
        }
        count_pinned(
            self.ctx.ordinal(),
            PinKind::Allocated,
            self.len as u64,
            false,
        );
    }
}
