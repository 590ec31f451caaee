//! `a = A·w, b = B·w, c = C·w` on the device, written straight into the NTT's input
//! buffers ([`AbcUpload`], as [`Ntt::upload_abc`](crate::ntt::Ntt::upload_abc) makes
//! them from host vectors).
//!
//! Central choice: **the compiled matrices stay on the device, the witness travels.**
//! A 32 GiB PoRep partition's `a, b, c` are 12.5 GB of host memory, ~3 s of CPU
//! mat-vec and 1.5–2 s of page-locking; its witness is a third of that. The CSR
//! matrices of a shape (~6.9 GiB at 32 GiB) are uploaded once ([`DeviceR1cs`]) and
//! kept by the backend; per partition only the witness goes up ([`upload_witness`],
//! on the copy stream) and one kernel ([`eval_abc`], `kernels/spmv.cu`) evaluates a
//! row of A, B and C per thread.
//!
//! Safety rests on one rule: a [`DeviceR1cs`] is made only from a [`ValidR1cs`],
//! which only [`ValidR1cs::new`] makes, after [`R1csRef::validate`] passed. Every
//! column is then below the witness length, every coefficient index inside the
//! table and every row inside the terms, and the launch checks every buffer length
//! against the shape on the host.

use std::sync::Arc;

use blstrs::Scalar;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};
use cuzk_gpu_backend::{R1csRef, Term};

use crate::error::{Ctx, CudaError};
use crate::gpu::{grid, scalars_as_bytes, FrRepr, Gpu};
use crate::ntt::{AbcUpload, MAX_LOG_DOMAIN, PIN_MIN_LEN};
use crate::raw::{self, HostRegistration};

/// Threads per block of `spmv_abc` (one row each; the kernel has no shared memory).
const BLOCK: u32 = 256;

/// An R1CS view that passed [`R1csRef::validate`]: the only way to a [`DeviceR1cs`].
#[derive(Clone, Copy, Debug)]
pub struct ValidR1cs<'a>(R1csRef<'a>);

impl<'a> ValidR1cs<'a> {
    /// Validates `view` on the current rayon pool (or rayon's global one outside a
    /// pool): a 32 GiB PoRep shape has ~670 million terms.
    pub fn new(view: R1csRef<'a>) -> Result<Self, cuzk_synth::SynthError> {
        view.validate()?;
        Ok(Self(view))
    }

    pub fn view(&self) -> R1csRef<'a> {
        self.0
    }
}

/// What identifies a compiled shape's device copy: where its matrices live on the
/// host ([`R1csRef::identity`]) and a fingerprint of their shape, so that an R1CS
/// freed and another allocated at the same address is never served the old copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct R1csKey {
    pub addr: usize,
    pub len: usize,
    pub rows: usize,
    pub nnz: [usize; 3],
    pub num_inputs: usize,
    pub num_aux: usize,
    pub num_coeffs: usize,
}

impl R1csKey {
    pub fn of(view: &R1csRef<'_>) -> Self {
        let (addr, len) = view.identity();
        Self {
            addr,
            len,
            rows: view.num_constraints(),
            nnz: view.matrices.map(|m| m.terms.len()),
            num_inputs: view.num_inputs,
            num_aux: view.num_aux,
            num_coeffs: view.coeffs.len(),
        }
    }

    /// The same host matrices (address and length), whatever their shape now.
    pub fn same_place(&self, other: &R1csKey) -> bool {
        self.addr == other.addr && self.len == other.len
    }

    /// Witness columns: inputs then aux.
    pub fn vars(&self) -> usize {
        self.num_inputs + self.num_aux
    }

    /// Device bytes of the copy: three row-pointer arrays, the terms (8 bytes
    /// each) and the coefficient table.
    pub fn device_bytes(&self) -> u64 {
        crate::footprint::r1cs_device_bytes(self.rows, self.nnz, self.num_coeffs)
    }
}

/// One compiled shape on the device: A, B and C in CSR form (row pointers; terms as
/// `(column, coefficient index)` pairs of u32) and the coefficient table.
#[derive(Debug)]
pub struct DeviceR1cs {
    key: R1csKey,
    row_ptr: [CudaSlice<u32>; 3],
    /// Two u32 per term: column, coefficient index (`Term`'s layout).
    terms: [CudaSlice<u32>; 3],
    coeffs: CudaSlice<FrRepr>,
}

/// A term slice as bytes: `Term` is `repr(C)` of two `u32`s.
fn terms_as_bytes(t: &[Term]) -> &[u8] {
    const _: () = assert!(std::mem::size_of::<Term>() == 8 && std::mem::align_of::<Term>() == 4);
    // SAFETY: `Term` is `repr(C)` { u32, u32 }: 8 bytes, no padding, every byte
    // initialised; the length is the slice's size in bytes.
    unsafe { std::slice::from_raw_parts(t.as_ptr().cast::<u8>(), std::mem::size_of_val(t)) }
}

impl DeviceR1cs {
    /// Uploads a validated shape (on the compute stream, from pageable memory: once
    /// per shape, not per partition).
    pub fn upload(gpu: &Gpu, r1cs: ValidR1cs<'_>) -> Result<Self, CudaError> {
        let view = r1cs.view();
        let key = R1csKey::of(&view);
        let [a, b, c] = view.matrices;
        let ptrs = [a, b, c].map(|m| m.row_ptr);
        let terms = [a, b, c].map(|m| m.terms);
        let up_ptr = |p: &[u32]| gpu.upload::<u32>(bytemuck::cast_slice(p));
        let up_terms = |t: &[Term]| gpu.upload::<u32>(terms_as_bytes(t));
        Ok(Self {
            key,
            row_ptr: [up_ptr(ptrs[0])?, up_ptr(ptrs[1])?, up_ptr(ptrs[2])?],
            terms: [
                up_terms(terms[0])?,
                up_terms(terms[1])?,
                up_terms(terms[2])?,
            ],
            coeffs: gpu.upload::<FrRepr>(scalars_as_bytes(view.coeffs))?,
        })
    }

    pub fn key(&self) -> &R1csKey {
        &self.key
    }

    /// Constraints (rows of each matrix).
    #[cfg(feature = "testing")]
    pub fn rows(&self) -> usize {
        self.key.rows
    }

    /// Device bytes held ([`R1csKey::device_bytes`]).
    pub fn device_bytes(&self) -> u64 {
        self.key.device_bytes()
    }

    /// Host-side check of the copy against its key before a launch: every buffer
    /// as long as the validated shape says.
    fn check(&self) -> Result<(), CudaError> {
        let k = &self.key;
        let ok = self.row_ptr.iter().all(|p| p.len() == k.rows + 1)
            && self
                .terms
                .iter()
                .zip(k.nnz)
                .all(|(t, n)| t.len() == (2 * n).max(1))
            && self.coeffs.len() == k.num_coeffs.max(1)
            && k.num_coeffs >= 3;
        if ok {
            Ok(())
        } else {
            Err(CudaError::Shape(
                "the device R1CS does not match its shape".into(),
            ))
        }
    }
}

/// A partition's witness on its way to the device ([`upload_witness`]): the device
/// buffer `[input, aux]`, the event of its copy and the page-lockings made for it.
/// Dropped before [`eval_abc`] took it over, it waits for the copies first (the
/// host memory may go as soon as the call returns).
#[must_use = "the witness copy is waited for when this is dropped"]
pub struct WitnessUpload<'a> {
    w: CudaSlice<FrRepr>,
    /// Recorded on the copy stream after the last copy (`None` if that failed).
    pub(crate) copied: Option<CudaEvent>,
    /// Whether a copy was enqueued that nobody has waited for.
    pending: bool,
    regs: Vec<HostRegistration>,
    copy: Arc<CudaStream>,
    vars: usize,
    _host: std::marker::PhantomData<&'a [Scalar]>,
}

impl WitnessUpload<'_> {
    fn wait(&mut self) -> Result<(), CudaError> {
        if self.pending {
            match &self.copied {
                Some(ev) => ev.synchronize().ctx("cuEventSynchronize")?,
                None => self.copy.synchronize().ctx("cuStreamSynchronize")?,
            }
            self.pending = false;
        }
        self.regs.clear();
        Ok(())
    }
}

impl Drop for WitnessUpload<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.wait() {
            tracing::warn!("waiting for the witness upload while dropping it failed: {e}");
            self.regs.clear();
        }
    }
}

/// Starts copying `input, aux` into one device buffer `[input, aux]` for `r1cs`, on
/// the copy stream (page-locking what is long enough and not registered already),
/// so that the compute stream's work enqueued meanwhile runs during the copy.
/// [`eval_abc`] then evaluates `a, b, c` from it. A witness of another shape is a
/// [`CudaError::Shape`].
///
/// `staged`: the witness already copied, `[input, aux]` as bytes, into page-locked
/// memory that outlives the upload (the backend's witness copies): one DMA from it,
/// nothing registered. Its length must be the witness's.
pub fn upload_witness<'a>(
    gpu: &Gpu,
    r1cs: &DeviceR1cs,
    input: &'a [Scalar],
    aux: &'a [Scalar],
    staged: Option<&'a [u8]>,
) -> Result<WitnessUpload<'a>, CudaError> {
    let k = r1cs.key();
    if input.len() != k.num_inputs || aux.len() != k.num_aux {
        return Err(CudaError::Shape(format!(
            "a witness of {} inputs and {} aux variables for an R1CS of {} and {}",
            input.len(),
            aux.len(),
            k.num_inputs,
            k.num_aux
        )));
    }
    let vars = k.vars();
    // SAFETY: every element is written by the two copies below before the kernel,
    // which waits for them, reads any (and only columns < vars are read).
    let w = unsafe { gpu.alloc_scratch::<FrRepr>(vars) }?;
    let mut up = WitnessUpload {
        w,
        copied: None,
        pending: false,
        regs: Vec::new(),
        copy: Arc::clone(&gpu.copy),
        vars,
        _host: std::marker::PhantomData,
    };
    if let Some(bytes) = staged {
        let want = std::mem::size_of_val(input) + std::mem::size_of_val(aux);
        if bytes.len() != want {
            return Err(CudaError::Shape(format!(
                "a staged witness copy of {} bytes for a witness of {want}",
                bytes.len()
            )));
        }
        // The copies may start only after the stream-ordered allocation above.
        gpu.copy.join(&gpu.compute).ctx("cuStreamWaitEvent")?;
        up.pending = true;
        raw::htod_bytes(&gpu.copy, bytes, &mut up.w, 0)?;
        up.copied = Some(gpu.record(&gpu.copy)?);
        return Ok(up);
    }
    for v in [input, aux].into_iter().filter(|v| v.len() >= PIN_MIN_LEN) {
        // SAFETY: the slices are borrowed for 'a, which outlives `up`, and `up` waits
        // for the copies before its registrations go (its Drop, or eval_abc's
        // AbcUpload, which takes them over).
        up.regs
            .extend(unsafe { HostRegistration::new(&gpu.ctx, scalars_as_bytes(v)) }?);
    }
    // The copies may start only after the stream-ordered allocation above.
    gpu.copy.join(&gpu.compute).ctx("cuStreamWaitEvent")?;
    up.pending = true;
    raw::htod_bytes(&gpu.copy, scalars_as_bytes(input), &mut up.w, 0)?;
    raw::htod_bytes(&gpu.copy, scalars_as_bytes(aux), &mut up.w, input.len())?;
    up.copied = Some(gpu.record(&gpu.copy)?);
    Ok(up)
}

/// Evaluates `a, b, c` of `r1cs` on the uploaded witness into three buffers of the
/// NTT domain (rows past the constraints zero, as [`crate::ntt::Ntt::upload_abc`]
/// pads), on the compute stream once the witness copy is in. The result goes to
/// [`crate::ntt::Ntt::h_from`] like uploaded `a, b, c`; it holds the witness's
/// page-locking until the kernel has run.
pub fn eval_abc<'a>(
    gpu: &Gpu,
    r1cs: &DeviceR1cs,
    mut w: WitnessUpload<'a>,
) -> Result<AbcUpload<'a>, CudaError> {
    r1cs.check()?;
    let k = *r1cs.key();
    if w.vars != k.vars() || w.w.len() != k.vars().max(1) {
        return Err(CudaError::Shape(format!(
            "a witness buffer of {} columns for an R1CS of {}",
            w.vars,
            k.vars()
        )));
    }
    let log_n = crate::log_domain(k.rows);
    if log_n > MAX_LOG_DOMAIN {
        return Err(CudaError::Shape(format!(
            "the NTT domain 2^{log_n} exceeds 2^{MAX_LOG_DOMAIN}"
        )));
    }
    let domain = 1usize << log_n;
    let (rows, dom) = (k.rows as u32, domain as u32);
    // SAFETY: spmv_abc writes every one of the `domain` elements (rows, then zeros)
    // on the compute stream before anything reads them.
    let alloc = || unsafe { gpu.alloc_scratch::<FrRepr>(domain) };
    let (mut ba, mut bb, mut bc) = (alloc()?, alloc()?, alloc()?);
    let Some(copied) = &w.copied else {
        return Err(CudaError::Shape("the witness was not uploaded".into()));
    };
    gpu.compute.wait(copied).ctx("cuStreamWaitEvent")?;
    let [pa, pb, pc] = &r1cs.row_ptr;
    let [ta, tb, tc] = &r1cs.terms;
    // Arguments as spmv_abc declares them; the grid covers `domain` threads, each
    // output buffer has `domain` elements, each row pointer array rows + 1, and the
    // validated terms index only inside the witness (vars) and the table.
    crate::launch!(
        gpu,
        "spmv_abc",
        grid(domain, BLOCK),
        &mut ba,
        &mut bb,
        &mut bc,
        &rows,
        &dom,
        &w.w,
        &r1cs.coeffs,
        pa,
        ta,
        pb,
        tb,
        pc,
        tc
    )?;
    let mut ready = Vec::with_capacity(3);
    for _ in 0..3 {
        ready.push(gpu.record(&gpu.compute)?);
    }
    // The kernel is behind the witness copy on the compute stream: waiting for it
    // (the AbcUpload's events) covers the copy, so the registrations move there.
    let regs = std::mem::take(&mut w.regs);
    w.pending = false;
    Ok(AbcUpload::evaluated(
        gpu,
        vec![ba, bb, bc],
        ready,
        regs,
        log_n,
    ))
}
