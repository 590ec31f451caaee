//! Bases streamed from pinned host memory, double-buffered: the path of a partition
//! whose parameter bases do not fit in device memory (or that
//! `BasePlacement::Streamed` forces).
//!
//! Each chunk of bases goes parameter slice (pageable host memory) → a page-locked
//! staging buffer (a host copy, in parallel pieces) → a device chunk buffer (DMA on
//! the copy stream) → its MSM (compute stream). Two **slots**, each a pinned buffer
//! and a device buffer, alternate: while chunk k's MSM runs, chunk k+1's DMA runs on
//! the copy engine, and the host copies chunk k+2 into the pinned buffer that chunk
//! k's DMA has finished reading. [`plan`] is the order of the steps.
//!
//! Why stage through pinned buffers: a copy from pageable memory is staged by the
//! driver through its own small pinned buffers, synchronously with the host, on the
//! compute stream; measured on the H200, a 2^24 partition streamed that way took
//! 941 ms against 285 ms with its bases resident. Registering the parameter slices
//! themselves ([`crate::raw::HostRegistration`], as `a, b, c` are) would page-lock
//! the whole parameter set, which in this case is the set too large for the device.
//!
//! A split query's chunk also carries its own terms (the ones bitmap's words and
//! the tail's indices and scalars whose bases fall in it, [`ChunkTerms`]): they are
//! written into the same pinned buffer after the bases (the indices rebased to the
//! chunk as they are written) and travel in the same DMA step into per-slot device
//! buffers. Uploaded from pageable memory on the compute stream instead, they were
//! synchronous with it: on the H200 a 32 GiB WindowPoSt partition's ~195 MB of
//! tail terms a chunk cost ~45 ms each, ~0.8-1 s a query, serialized with the MSMs.
//!
//! Two events per slot order the streams; nothing waits for the whole device:
//! - `copied[s]`, recorded on the copy stream after the DMA out of slot s's pinned
//!   buffer. The host waits for it (`cuEventSynchronize`) before writing that
//!   buffer again; the compute stream waits for it (`cuStreamWaitEvent`) before the
//!   chunk's MSM.
//! - `consumed[s]`, recorded on the compute stream after the MSM kernels that read
//!   slot s's device buffer. The copy stream waits for it before the next DMA into
//!   that buffer.
//!
//! (cudarc's own per-buffer event tracking adds the same two device-side waits;
//! these are explicit so the order does not depend on it and can be tested.)
//!
//! Ownership: the pinned buffers and their `copied` events are the backend's
//! [`Stager`], kept across partitions (allocated at the first streamed chunk, grown
//! when a chunk needs more bytes, never shrunk: page-locked host memory of
//! [`SLOTS`] × chunk × (a point's size where the bases are copied through them, and
//! a chunk's terms)). The device buffers and their `consumed` events are a
//! [`BaseStream`]'s, one partition, one curve and one chunk size; borrowing the
//! stager mutably, one stream must be gone before the next is made (the split
//! queries' G1 stream, H's, G2's), so no two hold device memory at once (the
//! budget in `footprint.rs` counts one pair of slots per phase).

use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaEvent, CudaSlice};
use rayon::prelude::*;

use crate::error::{Ctx, CudaError};
use crate::gpu::{DeviceCurve, FrRepr, Gpu};
use crate::raw::{self, PinnedBuffer};

/// Slots (pinned buffer + device buffer) chunks alternate through.
pub const SLOTS: usize = 2;
/// Chunks staged ahead of the MSM being enqueued. With `SLOTS - 1`, a chunk is
/// staged into a slot only after the MSM of the chunk that used the slot before has
/// been enqueued, so the copy stream's wait finds that MSM's `consumed` event.
const LOOKAHEAD: usize = SLOTS - 1;
/// Smallest piece one thread copies (4 MiB): pieces are few and large.
const MIN_COPY_PIECE: usize = 4 << 20;

/// Device bytes a chunk's terms take per point at most, rounded up: a tail index
/// (4) and scalar (32) for every point, and a bitmap word (8) per 64 points.
pub const TERM_BYTES_PER_POINT: u64 = 4 + 32 + 1;

/// A split query's terms whose bases fall in one chunk `[lo, hi)`: the ones
/// bitmap's words of the chunk (the chunk starts at a multiple of 64), and the run
/// of tail terms with their indices (absolute: each is written as `index - lo`).
#[derive(Clone, Copy, Debug)]
pub struct ChunkTerms<'a> {
    pub words: &'a [u64],
    pub idx: &'a [u32],
    pub scalars: &'a [[u64; 4]],
}

impl ChunkTerms<'_> {
    /// The most bytes the terms of a chunk of `points` take: every point in the
    /// tail, and its bitmap's words.
    fn most_bytes(points: usize) -> usize {
        points.div_ceil(64) * 8 + points * (4 + 32)
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(self.words)
            + std::mem::size_of_val(self.idx)
            + std::mem::size_of_val(self.scalars)
    }
}

/// A chunk's terms on the device, valid for the MSMs `per_chunk` enqueues on the
/// compute stream: the first `nwords` words and `nterms` tail terms (indices
/// rebased to the chunk, canonical scalars) of the slot's buffers.
pub struct TermsOnDevice<'b> {
    pub words: &'b CudaSlice<u64>,
    pub nwords: usize,
    pub idx: &'b CudaSlice<u32>,
    pub scalars: &'b CudaSlice<FrRepr>,
    pub nterms: usize,
}

/// One step of streaming a run of chunks through the slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The host waits for `copied[slot]` (the slot's last DMA has read its pinned
    /// buffer) and copies chunk `chunk`'s points into that buffer; the copy stream
    /// waits for `consumed[slot]` (the last MSM that read the slot's device buffer),
    /// copies pinned → device and records `copied[slot]`.
    Stage { chunk: usize, slot: usize },
    /// The compute stream waits for `copied[slot]`, runs chunk `chunk`'s MSM over
    /// the slot's device buffer and records `consumed[slot]`.
    Msm { chunk: usize, slot: usize },
}

/// The steps for `chunks` chunks, the first in slot `first_slot`: chunk k in slot
/// `(first_slot + k) % SLOTS`, staged SLOTS − 1 chunks before its MSM is enqueued
/// (stage 0; stage 1, MSM 0; stage 2, MSM 1; ...). Runs continue the slot order of
/// the one before (the stager's cursor), so a run's first chunk does not wait for
/// the previous run's last MSM.
pub fn plan(chunks: usize, first_slot: usize) -> impl Iterator<Item = Step> {
    let slot = move |k: usize| (first_slot + k) % SLOTS;
    let stage = move |k: usize| Step::Stage {
        chunk: k,
        slot: slot(k),
    };
    (0..LOOKAHEAD.min(chunks))
        .map(stage)
        .chain((0..chunks).flat_map(move |k| {
            let ahead = (k + LOOKAHEAD < chunks).then(|| stage(k + LOOKAHEAD));
            ahead.into_iter().chain(std::iter::once(Step::Msm {
                chunk: k,
                slot: slot(k),
            }))
        }))
}

/// What the stager did since it was last asked (for benchmarks and logs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Chunks staged.
    pub chunks: u64,
    /// Bytes of bases copied host → pinned → device.
    pub bytes: u64,
    /// Of those, bytes DMA'd straight from page-locked parameter memory (no host
    /// copy: `stream_staging = "register"`).
    pub direct_bytes: u64,
    /// Host time copying into the pinned buffers.
    pub host_copy: Duration,
    /// Host time waiting for a pinned buffer's previous DMA to finish.
    pub host_wait: Duration,
    /// Page-locked host bytes the stager holds now.
    pub pinned_bytes: u64,
}

/// A pinned staging buffer and the event of the last DMA reading it.
#[derive(Debug)]
struct StagingSlot {
    mem: PinnedBuffer,
    copied: CudaEvent,
}

impl Drop for StagingSlot {
    fn drop(&mut self) {
        // The memory is freed right after: let the DMA that reads it finish (a wait
        // bounded by work already queued; an error means the context is gone).
        let _ = self.copied.synchronize();
    }
}

/// The host side of streamed bases, kept by the backend across partitions: the
/// [`SLOTS`] pinned staging buffers with their `copied` events, the threads that
/// copy into them, and the slot the next chunk goes to.
#[derive(Debug, Default)]
pub struct Stager {
    /// Host threads for the copies (`CudaConfig::copy_threads`, at most the cores):
    /// a memory-bound copy, so a few threads reach the host's bandwidth. The
    /// default 8 is not measured yet (NOTES.md).
    copy_threads: usize,
    slots: Vec<StagingSlot>,
    /// Slot of the next chunk staged.
    cursor: usize,
    /// Threads for the host copies (`None`: on the calling thread).
    pool: Option<rayon::ThreadPool>,
    pool_built: bool,
    stats: StreamStats,
}

impl Stager {
    /// A stager that copies with `copy_threads` host threads.
    pub fn new(copy_threads: usize) -> Self {
        Self {
            copy_threads,
            ..Self::default()
        }
    }

    /// Page-locked host bytes held.
    pub fn pinned_bytes(&self) -> u64 {
        self.slots.iter().map(|s| s.mem.len() as u64).sum()
    }

    /// The counts since the last call, and resets them.
    pub fn take_stats(&mut self) -> StreamStats {
        let pinned_bytes = self.pinned_bytes();
        StreamStats {
            pinned_bytes,
            ..std::mem::take(&mut self.stats)
        }
    }

    /// Makes every slot's pinned buffer at least `bytes` long. Buffers that are too
    /// small are replaced, after waiting for the DMAs that read them.
    fn reserve(&mut self, gpu: &Gpu, bytes: usize) -> Result<(), CudaError> {
        if self.slots.len() == SLOTS && self.slots.iter().all(|s| s.mem.len() >= bytes) {
            return Ok(());
        }
        for s in &self.slots {
            s.copied.synchronize().ctx("cuEventSynchronize")?;
        }
        self.slots.clear();
        for _ in 0..SLOTS {
            self.slots.push(StagingSlot {
                mem: PinnedBuffer::new(&gpu.ctx, bytes)?,
                copied: gpu.new_event()?,
            });
        }
        if !self.pool_built {
            self.pool_built = true;
            self.pool = copy_pool(self.copy_threads);
        }
        Ok(())
    }

    /// [`Step::Stage`]: `write` fills the first `len` bytes of slot `slot`'s
    /// pinned buffer (with the copy threads, once the slot's last DMA has read it),
    /// then `dma` enqueues the copies out of them on the copy stream (after
    /// `consumed`), and `copied[slot]` is recorded after those.
    fn stage(
        &mut self,
        gpu: &Gpu,
        slot: usize,
        len: usize,
        consumed: &CudaEvent,
        write: impl FnOnce(&mut [MaybeUninit<u8>], Option<&rayon::ThreadPool>),
        dma: impl FnOnce(&[u8]) -> Result<(), CudaError>,
    ) -> Result<(), CudaError> {
        let Self {
            slots, pool, stats, ..
        } = self;
        let s = slots
            .get_mut(slot)
            .ok_or_else(|| CudaError::Shape(format!("no staging slot {slot}")))?;
        let t0 = Instant::now();
        s.copied.synchronize().ctx("cuEventSynchronize")?;
        let t1 = Instant::now();
        let room = s.mem.len();
        let dst_host = s.mem.as_uninit_mut().get_mut(..len).ok_or_else(|| {
            CudaError::Shape(format!(
                "a chunk of {len} bytes does not fit a staging buffer of {room}"
            ))
        })?;
        write(dst_host, pool.as_ref());
        // SAFETY: `write` wrote the first `len` bytes (every caller's writer fills
        // the layout it measured `len` from).
        let staged = unsafe { s.mem.assume_init_prefix(len) };
        let t2 = Instant::now();
        gpu.copy.wait(consumed).ctx("cuStreamWaitEvent")?;
        // Asynchronous (pinned source): the buffer is not written or freed again
        // before `copied` says the copies have read it. Without the event (a copy
        // or the record failed) the DMAs already enqueued would go unseen by the
        // next write into this buffer and by its free: wait for them here (the copy
        // stream only).
        let recorded = dma(staged).and_then(|()| {
            s.copied.record(&gpu.copy).map_err(|e| CudaError::Driver {
                call: "cuEventRecord",
                source: e,
            })
        });
        if let Err(e) = recorded {
            gpu.ctx.record_err(gpu.copy.synchronize());
            return Err(e);
        }
        stats.chunks += 1;
        stats.bytes += len as u64;
        stats.host_wait += t1 - t0;
        stats.host_copy += t2 - t1;
        Ok(())
    }
}

/// Writes `terms` into `dst` as `[words, idx - lo, scalars]` (native byte order,
/// as the device reads them); `dst` is exactly `terms.bytes()` long.
fn write_terms(
    dst: &mut [MaybeUninit<u8>],
    terms: &ChunkTerms<'_>,
    lo: u32,
    pool: Option<&rayon::ThreadPool>,
) {
    let (words, rest) = dst.split_at_mut(std::mem::size_of_val(terms.words));
    let (idx, scalars) = rest.split_at_mut(std::mem::size_of_val(terms.idx));
    copy_in_pieces(
        words,
        bytemuck::cast_slice(terms.words),
        pool,
        MIN_COPY_PIECE,
    );
    let rebase = |d: &mut [MaybeUninit<u8>], s: &[u32]| {
        for (d, &i) in d.chunks_exact_mut(4).zip(s) {
            // The run holds only indices in [lo, hi) (the caller's partition
            // points): the difference never wraps.
            d.write_copy_of_slice(&i.wrapping_sub(lo).to_ne_bytes());
        }
    };
    match pool {
        Some(p) if idx.len() > MIN_COPY_PIECE => {
            let piece = terms.idx.len().div_ceil(p.current_num_threads());
            p.install(|| {
                idx.par_chunks_mut(piece * 4)
                    .zip(terms.idx.par_chunks(piece))
                    .for_each(|(d, s)| rebase(d, s))
            });
        }
        _ => rebase(idx, terms.idx),
    }
    copy_in_pieces(
        scalars,
        bytemuck::cast_slice(terms.scalars),
        pool,
        MIN_COPY_PIECE,
    );
}

/// The threads of the host copies, or `None` to copy on the calling thread (one
/// core, or the pool could not be built).
pub(crate) fn copy_pool(threads: usize) -> Option<rayon::ThreadPool> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads.min(cores);
    if threads <= 1 {
        return None;
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("cuzk-stage-{i}"))
        .build()
        .map_err(|e| tracing::warn!("staging copy threads not started ({e}): copying on one"))
        .ok()
}

/// Copies `src` into `dst` (the same length; past the shorter one nothing is
/// written), in at most one piece per thread of `pool` and pieces of at least
/// `min_piece` bytes.
pub(crate) fn copy_in_pieces(
    dst: &mut [MaybeUninit<u8>],
    src: &[u8],
    pool: Option<&rayon::ThreadPool>,
    min_piece: usize,
) {
    let n = src.len().min(dst.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    match pool {
        Some(p) if n > min_piece => {
            let piece = n.div_ceil(p.current_num_threads()).max(min_piece);
            p.install(|| {
                dst.par_chunks_mut(piece)
                    .zip(src.par_chunks(piece))
                    .for_each(|(d, s)| {
                        d.write_copy_of_slice(s);
                    })
            });
        }
        _ => {
            dst.write_copy_of_slice(src);
        }
    }
}

/// The device side of one curve's streamed bases in one partition: [`SLOTS`] chunk
/// buffers with their `consumed` events, allocated at the first chunk; the host
/// side borrowed from the backend's [`Stager`].
pub struct BaseStream<'a, C: DeviceCurve> {
    gpu: &'a Gpu,
    stager: &'a mut Stager,
    /// Most points a chunk holds.
    chunk: usize,
    device: Option<DeviceSlots<C>>,
    /// Host ranges (address, bytes) page-locked for as long as this stream lives:
    /// bases inside one are DMA'd from where they are, not copied first.
    direct: Vec<(usize, usize)>,
}

struct DeviceSlots<C: DeviceCurve> {
    bufs: Vec<CudaSlice<C::Affine>>,
    consumed: Vec<CudaEvent>,
    /// Per slot, the buffers of a chunk's terms (made at the first split run).
    terms: Option<Vec<DeviceTerms>>,
}

/// One slot's device buffers for a chunk's [`ChunkTerms`].
struct DeviceTerms {
    words: CudaSlice<u64>,
    idx: CudaSlice<u32>,
    scalars: CudaSlice<FrRepr>,
}

impl DeviceTerms {
    fn new(gpu: &Gpu, chunk: usize) -> Result<Self, CudaError> {
        // SAFETY: a chunk's MSMs read only the prefixes its DMA wrote, after
        // waiting for that DMA (`copied`).
        unsafe {
            Ok(Self {
                words: gpu.alloc_scratch::<u64>(chunk.div_ceil(64))?,
                idx: gpu.alloc_scratch::<u32>(chunk)?,
                scalars: gpu.alloc_scratch::<FrRepr>(chunk)?,
            })
        }
    }
}

impl<C: DeviceCurve> DeviceSlots<C> {
    fn new(gpu: &Gpu, chunk: usize) -> Result<Self, CudaError> {
        let mut bufs = Vec::with_capacity(SLOTS);
        let mut consumed = Vec::with_capacity(SLOTS);
        for _ in 0..SLOTS {
            // SAFETY: a chunk's MSM reads only the prefix its DMA wrote, after
            // waiting for that DMA (`copied`).
            bufs.push(unsafe { gpu.alloc_scratch::<C::Affine>(chunk) }?);
            consumed.push(gpu.new_event()?);
        }
        // The allocations are ordered on the compute stream: the DMAs into them, on
        // the copy stream, come after.
        gpu.copy.join(&gpu.compute).ctx("cuStreamWaitEvent")?;
        Ok(Self {
            bufs,
            consumed,
            terms: None,
        })
    }

    /// Makes the slots' terms buffers (in compute-stream order, before the copy
    /// stream's DMAs into them) unless made already.
    fn make_terms(&mut self, gpu: &Gpu, chunk: usize) -> Result<(), CudaError> {
        if self.terms.is_none() {
            let t = (0..SLOTS)
                .map(|_| DeviceTerms::new(gpu, chunk))
                .collect::<Result<Vec<_>, _>>()?;
            gpu.copy.join(&gpu.compute).ctx("cuStreamWaitEvent")?;
            self.terms = Some(t);
        }
        Ok(())
    }
}

impl<'a, C: DeviceCurve> BaseStream<'a, C> {
    /// Streams in chunks of at most `chunk` points; allocates nothing yet.
    pub fn new(gpu: &'a Gpu, stager: &'a mut Stager, chunk: usize) -> Self {
        Self {
            gpu,
            stager,
            chunk: chunk.max(1),
            device: None,
            direct: Vec::new(),
        }
    }

    /// Bases inside `ranges` (address, bytes) are DMA'd straight from host memory.
    ///
    /// # Safety
    ///
    /// Every range must be page-locked (`cuMemHostRegister`) and stay allocated
    /// and registered until this stream is dropped and the DMAs it enqueued are
    /// done (the backend keeps the registrations across partitions and drops them
    /// only after waiting for the copy stream).
    pub unsafe fn with_direct(mut self, ranges: Vec<(usize, usize)>) -> Self {
        self.direct = ranges;
        self
    }

    fn is_direct(&self, bytes: &[u8]) -> bool {
        let (at, len) = (bytes.as_ptr() as usize, bytes.len());
        self.direct
            .iter()
            .any(|&(a, l)| a <= at && at.saturating_add(len) <= a.saturating_add(l))
    }

    pub fn gpu(&self) -> &'a Gpu {
        self.gpu
    }

    /// Most points a chunk holds.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Streams `host[lo..hi]` for each range of `ranges` (at most [`Self::chunk`]
    /// points each) and calls `per_chunk((lo, hi), bases)` once each chunk's points
    /// are ordered on the compute stream, where `per_chunk` enqueues its MSMs over
    /// `bases[..hi - lo]`.
    pub fn run(
        &mut self,
        host: &[C::HostAffine],
        ranges: &[(usize, usize)],
        mut per_chunk: impl FnMut((usize, usize), &CudaSlice<C::Affine>) -> Result<(), CudaError>,
    ) -> Result<(), CudaError> {
        self.run_inner(host, ranges, None, &mut |r, bases, _| per_chunk(r, bases))
    }

    /// [`Self::run`] for a split query: each chunk's [`ChunkTerms`] (`terms((lo,
    /// hi))`) travel with its bases, through the same pinned buffer and DMA step,
    /// and `per_chunk` gets them on the device beside the bases.
    pub fn run_split<'t>(
        &mut self,
        host: &[C::HostAffine],
        ranges: &[(usize, usize)],
        terms: impl Fn((usize, usize)) -> ChunkTerms<'t>,
        mut per_chunk: impl FnMut(
            (usize, usize),
            &CudaSlice<C::Affine>,
            TermsOnDevice<'_>,
        ) -> Result<(), CudaError>,
    ) -> Result<(), CudaError> {
        self.run_inner(host, ranges, Some(&terms), &mut |r, bases, t| match t {
            Some(t) => per_chunk(r, bases, t),
            None => Err(CudaError::Shape("a split chunk without its terms".into())),
        })
    }

    #[allow(clippy::type_complexity)]
    fn run_inner<'t>(
        &mut self,
        host: &[C::HostAffine],
        ranges: &[(usize, usize)],
        terms: Option<&dyn Fn((usize, usize)) -> ChunkTerms<'t>>,
        per_chunk: &mut dyn FnMut(
            (usize, usize),
            &CudaSlice<C::Affine>,
            Option<TermsOnDevice<'_>>,
        ) -> Result<(), CudaError>,
    ) -> Result<(), CudaError> {
        if ranges.is_empty() {
            return Ok(());
        }
        if let Some(&(lo, hi)) = ranges.iter().find(|&&(lo, hi)| {
            lo > hi || hi > host.len() || hi - lo > self.chunk || u32::try_from(lo).is_err()
        }) {
            return Err(CudaError::Shape(format!(
                "a streamed chunk [{lo}, {hi}) of {} bases in chunks of {}",
                host.len(),
                self.chunk
            )));
        }
        let _span =
            tracing::debug_span!("stream_bases", curve = C::NAME, chunks = ranges.len()).entered();
        let gpu = self.gpu;
        let chunk = self.chunk;
        // Page-locked where they lie: only the terms go through the staging buffer.
        let direct = self.is_direct(C::host_as_bytes(host));
        // Room for a chunk's terms always: split queries and the dense one (H)
        // share the buffers in every partition, and buffers sized for H alone
        // would be made anew. Bases DMA'd in place take no room.
        let affine = if direct {
            0
        } else {
            std::mem::size_of::<C::Affine>()
        };
        self.stager
            .reserve(gpu, chunk * affine + ChunkTerms::most_bytes(chunk))?;
        let device = match &mut self.device {
            Some(d) => d,
            none => none.insert(DeviceSlots::new(gpu, chunk)?),
        };
        if terms.is_some() {
            device.make_terms(gpu, chunk)?;
        }
        // Each chunk's (words, tail terms), counted when it is staged, for its MSMs.
        let mut counts = vec![(0, 0); ranges.len()];
        let first = self.stager.cursor;
        for step in plan(ranges.len(), first) {
            match step {
                Step::Stage { chunk: k, slot } => {
                    let (lo, hi) = ranges[k];
                    let bases = C::host_as_bytes(&host[lo..hi]);
                    let t = terms.map(|f| f((lo, hi)));
                    if let Some(t) = &t {
                        let (nw, nt) = (t.words.len(), t.idx.len());
                        if nw > (hi - lo).div_ceil(64) || nt > hi - lo || t.scalars.len() != nt {
                            return Err(CudaError::Shape(format!(
                                "chunk [{lo}, {hi}) with {nw} bitmap words and {nt} tail indices for {} scalars",
                                t.scalars.len()
                            )));
                        }
                    }
                    counts[k] = t.as_ref().map_or((0, 0), |t| (t.words.len(), t.idx.len()));
                    let staged_bases = if direct { 0 } else { bases.len() };
                    let len = staged_bases + t.as_ref().map_or(0, ChunkTerms::bytes);
                    let (buf, slot_terms) = (
                        &mut device.bufs[slot],
                        device.terms.as_mut().map(|v| &mut v[slot]),
                    );
                    self.stager.stage(
                        gpu,
                        slot,
                        len,
                        &device.consumed[slot],
                        |dst, pool| {
                            let (b, rest) = dst.split_at_mut(staged_bases);
                            if !direct {
                                copy_in_pieces(b, bases, pool, MIN_COPY_PIECE);
                            }
                            if let Some(t) = &t {
                                // `lo` fits a u32 (checked above).
                                write_terms(rest, t, lo as u32, pool);
                            }
                        },
                        |staged| {
                            let (b, rest) = staged.split_at(staged_bases);
                            // Registered bases: asynchronous DMA from the parameter
                            // memory itself (the caller's `with_direct` contract).
                            raw::htod_bytes(&gpu.copy, if direct { bases } else { b }, buf, 0)?;
                            if let (Some(t), Some(d)) = (&t, slot_terms) {
                                let (w, rest) = rest.split_at(std::mem::size_of_val(t.words));
                                let (i, sc) = rest.split_at(std::mem::size_of_val(t.idx));
                                raw::htod_bytes(&gpu.copy, w, &mut d.words, 0)?;
                                raw::htod_bytes(&gpu.copy, i, &mut d.idx, 0)?;
                                raw::htod_bytes(&gpu.copy, sc, &mut d.scalars, 0)?;
                            }
                            Ok(())
                        },
                    )?;
                    if direct {
                        self.stager.stats.bytes += bases.len() as u64;
                        self.stager.stats.direct_bytes += bases.len() as u64;
                    }
                    self.stager.cursor = (slot + 1) % SLOTS;
                }
                Step::Msm { chunk: k, slot } => {
                    gpu.compute
                        .wait(&self.stager.slots[slot].copied)
                        .ctx("cuStreamWaitEvent")?;
                    let (lo, hi) = ranges[k];
                    let (nwords, nterms) = counts[k];
                    let split = terms.is_some();
                    let on_device =
                        device
                            .terms
                            .as_ref()
                            .filter(|_| split)
                            .map(|d| TermsOnDevice {
                                words: &d[slot].words,
                                nwords,
                                idx: &d[slot].idx,
                                scalars: &d[slot].scalars,
                                nterms,
                            });
                    per_chunk((lo, hi), &device.bufs[slot], on_device)?;
                    device.consumed[slot]
                        .record(&gpu.compute)
                        .ctx("cuEventRecord")?;
                }
            }
        }
        Ok(())
    }
}

impl<C: DeviceCurve> Drop for BaseStream<'_, C> {
    fn drop(&mut self) {
        if self.device.is_none() {
            return;
        }
        // The device buffers are freed in compute-stream order: put every DMA into
        // them before that (each is followed by an MSM that waits for it, except
        // after an error). A failure is recorded in the context, not raised.
        for s in &self.stager.slots {
            self.gpu.ctx.record_err(self.gpu.compute.wait(&s.copied));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays plans against a model of the events: which chunk each event last
    /// recorded, and so which chunk each wait waits for.
    #[derive(Default)]
    struct Model {
        /// Per slot: the chunk (run, index) whose DMA `copied` last recorded.
        copied: [Option<(usize, usize)>; SLOTS],
        /// Per slot: the chunk whose MSM `consumed` last recorded.
        consumed: [Option<(usize, usize)>; SLOTS],
        /// Per slot: the chunk last staged in it.
        staged: [Option<(usize, usize)>; SLOTS],
        cursor: usize,
    }

    impl Model {
        /// Plays one run of `n` chunks; returns the steps.
        fn run(&mut self, run: usize, n: usize) -> Vec<Step> {
            let steps: Vec<Step> = plan(n, self.cursor).collect();
            let mut next_msm = 0;
            let mut staged_chunks = vec![false; n];
            for (i, &step) in steps.iter().enumerate() {
                match step {
                    Step::Stage { chunk, slot } => {
                        assert_eq!(slot, (self.cursor + chunk) % SLOTS);
                        assert!(!staged_chunks[chunk], "chunk {chunk} staged twice");
                        staged_chunks[chunk] = true;
                        // The slot's previous chunk: the host's wait (copied) is
                        // for its DMA and the copy stream's wait (consumed) for its
                        // MSM, both already recorded, not an older use.
                        let before = self.staged[slot];
                        assert_eq!(self.copied[slot], before, "step {i}: {step:?}");
                        assert_eq!(self.consumed[slot], before, "step {i}: {step:?}");
                        self.staged[slot] = Some((run, chunk));
                        self.copied[slot] = Some((run, chunk));
                    }
                    Step::Msm { chunk, slot } => {
                        assert_eq!(chunk, next_msm, "MSMs in chunk order");
                        next_msm += 1;
                        // The compute stream waits for this chunk's own DMA.
                        assert_eq!(self.copied[slot], Some((run, chunk)), "step {i}");
                        assert_eq!(self.staged[slot], Some((run, chunk)));
                        self.consumed[slot] = Some((run, chunk));
                    }
                }
            }
            assert_eq!(next_msm, n);
            assert!(staged_chunks.iter().all(|&s| s));
            self.cursor = (self.cursor + n) % SLOTS;
            steps
        }
    }

    #[test]
    fn each_wait_is_for_the_chunk_that_used_the_slot_before() {
        let mut m = Model::default();
        // Runs of many lengths one after another, as a partition's queries and
        // consecutive partitions share the stager.
        for (run, n) in [0, 1, 2, 3, 7, 1, 1, 4, 0, 5, 2].into_iter().enumerate() {
            m.run(run, n);
        }
    }

    #[test]
    fn the_next_chunk_is_staged_before_this_chunks_msm() {
        let steps: Vec<Step> = plan(4, 1).collect();
        use Step::*;
        assert_eq!(
            steps,
            [
                Stage { chunk: 0, slot: 1 },
                Stage { chunk: 1, slot: 0 },
                Msm { chunk: 0, slot: 1 },
                Stage { chunk: 2, slot: 1 },
                Msm { chunk: 1, slot: 0 },
                Stage { chunk: 3, slot: 0 },
                Msm { chunk: 2, slot: 1 },
                Msm { chunk: 3, slot: 0 },
            ]
        );
        assert_eq!(plan(0, 0).count(), 0);
        assert_eq!(
            plan(1, 0).collect::<Vec<_>>(),
            [Stage { chunk: 0, slot: 0 }, Msm { chunk: 0, slot: 0 }]
        );
    }

    /// A chunk's terms are laid out as the DMAs read them: words, indices less the
    /// chunk's start, scalars; the same with and without copy threads and across
    /// the parallel rebase's threshold.
    #[test]
    fn terms_are_written_words_rebased_indices_scalars() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let lo = 1 << 20;
        for n in [0usize, 1, 5, (MIN_COPY_PIECE / 4) + 7] {
            let words: Vec<u64> = (0..n.div_ceil(64) as u64).map(|w| w * 31 + 1).collect();
            let idx: Vec<u32> = (0..n as u32).map(|i| lo + 2 * i + 1).collect();
            let scalars: Vec<[u64; 4]> = (0..n as u64).map(|i| [i, !i, i << 7, 3]).collect();
            let t = ChunkTerms {
                words: &words,
                idx: &idx,
                scalars: &scalars,
            };
            let mut want = Vec::new();
            want.extend_from_slice(bytemuck::cast_slice(&words));
            for &i in &idx {
                want.extend_from_slice(&(i - lo).to_ne_bytes());
            }
            want.extend_from_slice(bytemuck::cast_slice(&scalars));
            assert_eq!(want.len(), t.bytes());
            for p in [None, Some(&pool)] {
                let mut dst = vec![MaybeUninit::<u8>::uninit(); t.bytes()];
                write_terms(&mut dst, &t, lo, p);
                // SAFETY: every byte was written above (compared in full).
                let got: Vec<u8> = dst.iter().map(|b| unsafe { b.assume_init() }).collect();
                assert!(got == want, "n = {n}, pool: {}", p.is_some());
            }
        }
    }

    #[test]
    fn pieces_copy_every_byte() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for (n, min_piece) in [(0, 1), (1, 1), (1000, 64), (1001, 100), (5000, 4096)] {
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            for p in [None, Some(&pool)] {
                let mut dst = vec![MaybeUninit::<u8>::uninit(); n];
                copy_in_pieces(&mut dst, &src, p, min_piece);
                // SAFETY: every byte was written above.
                let got: Vec<u8> = dst.iter().map(|b| unsafe { b.assume_init() }).collect();
                assert_eq!(got, src, "n = {n}");
            }
        }
    }
}
