//! A partition's split data through page-locked memory (`split_upload = "pinned"`):
//! the ones bitmaps and tail terms of L, A, B_G1 (and B_G2) copied by the backend's
//! threads into one page-locked buffer it keeps, and from there to the device by
//! asynchronous DMAs on the copy stream.
//!
//! At the 32 GiB PoRep shape these are ~280 MB a partition (four bitmaps of 2^21
//! words, four tails of ~1.5 M terms). Uploaded from the caller's pageable memory,
//! each copy holds the enqueuing thread while the driver stages it, and the first
//! kernel can start only once B_G2's and the three G1 bitmaps are up: measured on the
//! H200, the GPU stage was ~65 ms a partition longer than the device's work
//! (NOTES.md). Here the first query's bitmap goes up alone (16 MB), its ones sum is
//! enqueued, and the rest is copied and uploaded while the device sums them: the
//! enqueuing thread blocks on nothing but the memcpy.
//!
//! The buffer is reused by every partition: before writing into it, a staging
//! waits for the DMAs of the one before (an event recorded after them), which
//! have long finished when that partition's results came back.

use cudarc::driver::{CudaEvent, CudaSlice};
use cuzk_gpu_backend::SplitRef;

use super::queries::{limbs_as_bytes, u32s_as_bytes, u64s_as_bytes, OnesOnDevice, TailOnDevice};
use crate::error::{Ctx, CudaError};
use crate::gpu::{FrRepr, Gpu};
use crate::raw::{self, PinnedBuffer};
use crate::streamed::{copy_in_pieces, copy_pool};

/// Most bytes of split data staged this way. Larger (a Poseidon witness's tails,
/// hundreds of millions of terms) they are uploaded from the caller's memory.
pub(super) const MAX_STAGED_BYTES: usize = 1 << 30;
/// Smallest piece one copy thread takes.
const MIN_PIECE: usize = 4 << 20;
/// Each array starts at a multiple of this (DMA-friendly).
const ALIGN: usize = 256;
/// The buffer grows in steps of this, so that shapes a little apart share it.
const GROW: usize = 64 << 20;

/// Where one query's arrays lie in the buffer: (offset, bytes) of its bitmap words,
/// tail indices and tail scalars.
#[derive(Clone, Copy, Debug)]
struct Layout {
    words: (usize, usize),
    idx: (usize, usize),
    scalars: (usize, usize),
}

/// The queries' device copies, ready for their MSMs in stream order.
pub(super) struct Uploads {
    pub(super) ones: Vec<OnesOnDevice>,
    pub(super) tails: Vec<TailOnDevice>,
}

/// The backend's page-locked buffer for split data and its copy threads.
#[derive(Debug, Default)]
pub(super) struct SplitStaging {
    copy_threads: usize,
    buf: Option<PinnedBuffer>,
    /// The copy threads, made at the first staging (`None` inside: on the calling
    /// thread).
    pool: Option<Option<rayon::ThreadPool>>,
    /// Recorded on the copy stream after the last DMA out of `buf`.
    last: Option<CudaEvent>,
}

impl SplitStaging {
    pub(super) fn new(copy_threads: usize) -> Self {
        Self {
            copy_threads,
            ..Self::default()
        }
    }

    /// Uploads `splits` through the buffer: query 0's bitmap first, then `first`
    /// (the caller enqueues query 0's ones sum, which the compute stream runs once
    /// that bitmap is in), then every other array, which the compute stream waits
    /// for before the work enqueued after this call. `None` when the split data
    /// exceed [`MAX_STAGED_BYTES`] or there are none (the caller uploads them from
    /// its memory).
    pub(super) fn upload<T>(
        &mut self,
        gpu: &Gpu,
        splits: &[SplitRef<'_>],
        first: impl FnOnce(&OnesOnDevice) -> Result<T, CudaError>,
    ) -> Result<Option<(T, Uploads)>, CudaError> {
        if let Some(e) = self.last.take() {
            e.synchronize().ctx("cuEventSynchronize")?;
        }
        let out = self.stage(gpu, splits, first);
        if out.is_err() {
            // DMAs out of the buffer may be queued with no `last` event to wait
            // for: let them finish before the next staging writes into it.
            if let Err(e) = gpu.copy.synchronize() {
                tracing::warn!("the copy stream after a failed split staging: {e}");
            }
        }
        out
    }

    fn stage<T>(
        &mut self,
        gpu: &Gpu,
        splits: &[SplitRef<'_>],
        first: impl FnOnce(&OnesOnDevice) -> Result<T, CudaError>,
    ) -> Result<Option<(T, Uploads)>, CudaError> {
        let Some((layouts, total)) = layout(splits, MAX_STAGED_BYTES) else {
            return Ok(None);
        };
        let buf = match self.buf.take() {
            Some(b) if b.len() >= total => b,
            old => {
                drop(old);
                PinnedBuffer::new(&gpu.ctx, total.div_ceil(GROW) * GROW)?
            }
        };
        let buf = self.buf.insert(buf);
        let pool = self
            .pool
            .get_or_insert_with(|| copy_pool(self.copy_threads))
            .as_ref();
        // The device buffers, in the compute stream's order; the DMAs wait for the
        // allocations, and for nothing enqueued after them.
        let mut ones = Vec::with_capacity(splits.len());
        let mut tails = Vec::with_capacity(splits.len());
        for s in splits {
            let len = s.tail_indices().len();
            // SAFETY: every element is written by the DMAs below, which the compute
            // stream waits for before any kernel reads the buffers.
            unsafe {
                ones.push(OnesOnDevice {
                    words: gpu.alloc_scratch::<u64>(s.ones_words().len())?,
                    nwords: s.ones_words().len(),
                    num_bases: s.num_bases(),
                });
                tails.push(TailOnDevice {
                    idx: gpu.alloc_scratch::<u32>(len)?,
                    scalars: gpu.alloc_scratch::<FrRepr>(len)?,
                    len,
                });
            }
        }
        gpu.copy.join(&gpu.compute).ctx("cuStreamWaitEvent")?;
        fn arrays<'s>(s: &SplitRef<'s>) -> [&'s [u8]; 3] {
            [
                u64s_as_bytes(s.ones_words()),
                u32s_as_bytes(s.tail_indices()),
                limbs_as_bytes(s.tail_scalars()),
            ]
        }
        // Copies `src` into its place, then sends it to `dst` on the copy stream.
        fn send<D>(
            gpu: &Gpu,
            buf: &mut PinnedBuffer,
            pool: Option<&rayon::ThreadPool>,
            (at, len): (usize, usize),
            src: &[u8],
            dst: &mut CudaSlice<D>,
        ) -> Result<(), CudaError> {
            copy_in_pieces(&mut buf.as_uninit_mut()[at..at + len], src, pool, MIN_PIECE);
            // SAFETY: the range was written just above, and nothing writes it again
            // before the DMA has read it (`last`, waited for at the next staging).
            let bytes = unsafe { buf.assume_init_range(at..at + len) };
            raw::htod_bytes(&gpu.copy, bytes, dst, 0)
        }
        let [w0, _, _] = arrays(&splits[0]);
        send(gpu, buf, pool, layouts[0].words, w0, &mut ones[0].words)?;
        let bitmap = gpu.copy.record_event(None).ctx("cuEventRecord")?;
        gpu.compute.wait(&bitmap).ctx("cuStreamWaitEvent")?;
        let out = first(&ones[0])?;
        for (k, (s, l)) in splits.iter().zip(&layouts).enumerate() {
            let [w, i, c] = arrays(s);
            if k > 0 {
                send(gpu, buf, pool, l.words, w, &mut ones[k].words)?;
            }
            send(gpu, buf, pool, l.idx, i, &mut tails[k].idx)?;
            send(gpu, buf, pool, l.scalars, c, &mut tails[k].scalars)?;
        }
        let rest = gpu.copy.record_event(None).ctx("cuEventRecord")?;
        gpu.compute.wait(&rest).ctx("cuStreamWaitEvent")?;
        self.last = Some(rest);
        Ok(Some((out, Uploads { ones, tails })))
    }
}

/// Each split's arrays at aligned offsets, and the bytes in all; `None` when there
/// is no split or they exceed `max` bytes.
fn layout(splits: &[SplitRef<'_>], max: usize) -> Option<(Vec<Layout>, usize)> {
    if splits.is_empty() {
        return None;
    }
    let mut at = 0usize;
    let mut place = |bytes: usize| {
        let here = at;
        at = (at + bytes).div_ceil(ALIGN) * ALIGN;
        (here, bytes)
    };
    let layouts = splits
        .iter()
        .map(|s| Layout {
            words: place(std::mem::size_of_val(s.ones_words())),
            idx: place(std::mem::size_of_val(s.tail_indices())),
            scalars: place(std::mem::size_of_val(s.tail_scalars())),
        })
        .collect();
    (at > 0 && at <= max).then_some((layouts, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_are_aligned_disjoint_and_large_splits_are_left_to_the_caller() {
        let words = [0b1011u64, 0];
        let (idx, sc) = ([2u32, 70], [[1u64, 2, 3, 4]; 2]);
        let a = SplitRef::checked(100, &words, &idx, &sc).unwrap();
        let b = SplitRef::checked(10, &words[..1], &[], &[]).unwrap();
        let (ls, total) = layout(&[a, b], MAX_STAGED_BYTES).unwrap();
        let spans: Vec<(usize, usize)> = ls
            .iter()
            .flat_map(|l| [l.words, l.idx, l.scalars])
            .collect();
        assert_eq!(
            spans.iter().map(|s| s.1).collect::<Vec<_>>(),
            [16, 8, 64, 8, 0, 0]
        );
        for w in spans.windows(2) {
            assert_eq!(w[0].0 % ALIGN, 0);
            assert!(w[0].0 + w[0].1 <= w[1].0 || w[0].1 == 0);
        }
        assert!(total >= spans.last().unwrap().0 && total % ALIGN == 0);
        assert!(layout(&[], MAX_STAGED_BYTES).is_none());
        // Past the limit the caller uploads them from its own memory.
        assert!(layout(&[a, b], total).is_some());
        assert!(layout(&[a, b], total - 1).is_none());
    }
}
