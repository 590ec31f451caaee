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
//! The copy is best made before the GPU lock (`GpuBackend::stage_splits`,
//! [`SplitCopies`]): the backend call then finds the data staged and only queues
//! the DMAs. Measured on the H200 at the 32 GiB shape, the copy inside the call
//! took 16-23 ms a partition, up to 235 ms while synthesis had every core, with the
//! device waiting for the first bitmap. A partition whose data were not staged
//! ahead (another backend call's order, a staging that failed) is copied inside
//! the call as before, through a buffer the staging keeps: before writing into
//! it, a staging waits for the DMAs of the one before (an event recorded after
//! them), which have long finished when that partition's results came back.
//!
//! B's split is the same data for B_G1 and B_G2: it is copied once and sent to
//! both.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice};
use cuzk_gpu_backend::SplitRef;

use super::copies::{Copied, Copies, Token};
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
/// tail indices and tail scalars, and whether they are written there for it (false:
/// an earlier query's same data, already there).
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    words: (usize, usize),
    idx: (usize, usize),
    scalars: (usize, usize),
    written: bool,
}

/// Where a query's split data live in the caller's memory: (address, length) of
/// its bitmap words, tail indices and tail scalars.
type SplitKey = [(usize, usize); 3];

fn split_key(s: &SplitRef<'_>) -> SplitKey {
    [
        (s.ones_words().as_ptr() as usize, s.ones_words().len()),
        (s.tail_indices().as_ptr() as usize, s.tail_indices().len()),
        (s.tail_scalars().as_ptr() as usize, s.tail_scalars().len()),
    ]
}

fn arrays<'s>(s: &SplitRef<'s>) -> [&'s [u8]; 3] {
    [
        u64s_as_bytes(s.ones_words()),
        u32s_as_bytes(s.tail_indices()),
        limbs_as_bytes(s.tail_scalars()),
    ]
}

/// A partition's split data staged ahead: the buffer's layout.
pub(super) type SplitCopy = Copied<Vec<Layout>>;

/// Split data staged before the GPU lock (`GpuBackend::stage_splits`), keyed by
/// where they live in the caller's memory, in the order of the backend call.
#[derive(Debug)]
pub(super) struct SplitCopies(Copies<Vec<SplitKey>, Vec<Layout>>);

impl SplitCopies {
    pub(super) fn new(copy_threads: usize) -> Self {
        Self(Copies::new(copy_threads))
    }

    /// Copies `splits` into a page-locked buffer, kept as their staged copy until
    /// `release`; `None` (nothing staged) when they are too large to stage this way
    /// or there are none. The caller keeps the arrays unchanged until then.
    pub(super) fn stage(
        &self,
        splits: &[SplitRef<'_>],
        alloc: impl FnOnce(usize) -> Result<PinnedBuffer, CudaError>,
    ) -> Result<Option<Token<Vec<SplitKey>>>, CudaError> {
        let Some((layouts, total)) = layout(splits, MAX_STAGED_BYTES) else {
            return Ok(None);
        };
        let key = splits.iter().map(split_key).collect();
        // Allocated in steps, so that shapes a little apart share buffers.
        let alloc = |bytes: usize| alloc(bytes.div_ceil(GROW) * GROW);
        let token = self.0.stage(key, total, alloc, |dst, pool| {
            for (s, l) in splits.iter().zip(&layouts) {
                if !l.written {
                    continue;
                }
                for ((at, len), src) in [l.words, l.idx, l.scalars].into_iter().zip(arrays(s)) {
                    copy_in_pieces(&mut dst[at..at + len], src, pool, MIN_PIECE);
                }
            }
            layouts
        })?;
        Ok(Some(token))
    }

    /// The staged copy of `splits`, if they were staged in this order.
    pub(super) fn find(&self, splits: &[SplitRef<'_>]) -> Option<Arc<SplitCopy>> {
        self.0.find(&splits.iter().map(split_key).collect())
    }

    /// Ends a staging: its buffer goes back to the free ones.
    pub(super) fn release(&self, token: Token<Vec<SplitKey>>) {
        self.0.release(token)
    }
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

    /// Uploads `splits` from their copy staged ahead (`staged`, when they were) or
    /// through the buffer: query 0's bitmap first, then `first` (the caller enqueues
    /// query 0's ones sum, which the compute stream runs once that bitmap is in),
    /// then every other array, which the compute stream waits for before the work
    /// enqueued after this call. `None` when the split data exceed
    /// [`MAX_STAGED_BYTES`] or there are none (the caller uploads them from its
    /// memory).
    pub(super) fn upload<T>(
        &mut self,
        gpu: &Gpu,
        splits: &[SplitRef<'_>],
        staged: Option<&SplitCopy>,
        first: impl FnOnce(&OnesOnDevice) -> Result<T, CudaError>,
    ) -> Result<Option<(T, Uploads)>, CudaError> {
        if staged.is_none() {
            if let Some(e) = self.last.take() {
                e.synchronize().ctx("cuEventSynchronize")?;
            }
        }
        let out = self.stage(gpu, splits, staged, first);
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
        staged: Option<&SplitCopy>,
        first: impl FnOnce(&OnesOnDevice) -> Result<T, CudaError>,
    ) -> Result<Option<(T, Uploads)>, CudaError> {
        // The data go up from their staged copy, or are copied here first.
        let mut src = match staged {
            Some(copy) => Source::Staged(copy),
            None => {
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
                let pool = self
                    .pool
                    .get_or_insert_with(|| copy_pool(self.copy_threads))
                    .as_ref();
                Source::Here {
                    buf: self.buf.insert(buf),
                    pool,
                    layouts,
                }
            }
        };
        if src.layouts().len() != splits.len() {
            return Err(CudaError::Shape(format!(
                "split data staged for {} queries, the call has {}",
                src.layouts().len(),
                splits.len()
            )));
        }
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
        let layouts = src.layouts().to_vec();
        let [w0, _, _] = arrays(&splits[0]);
        src.send(gpu, layouts[0].words, true, w0, &mut ones[0].words)?;
        let bitmap = gpu.record(&gpu.copy)?;
        gpu.compute.wait(&bitmap).ctx("cuStreamWaitEvent")?;
        let out = first(&ones[0])?;
        for (k, (s, l)) in splits.iter().zip(&layouts).enumerate() {
            let [w, i, c] = arrays(s);
            if k > 0 {
                src.send(gpu, l.words, l.written, w, &mut ones[k].words)?;
            }
            src.send(gpu, l.idx, l.written, i, &mut tails[k].idx)?;
            src.send(gpu, l.scalars, l.written, c, &mut tails[k].scalars)?;
        }
        let rest = gpu.record(&gpu.copy)?;
        gpu.compute.wait(&rest).ctx("cuStreamWaitEvent")?;
        match staged {
            Some(copy) => copy.read_until(rest),
            None => self.last = Some(rest),
        }
        Ok(Some((out, Uploads { ones, tails })))
    }
}

/// Where a staging's bytes come from: a copy made before the GPU lock, or the
/// staging's own buffer, written as the arrays are sent.
enum Source<'b> {
    Staged(&'b SplitCopy),
    Here {
        buf: &'b mut PinnedBuffer,
        pool: Option<&'b rayon::ThreadPool>,
        layouts: Vec<Layout>,
    },
}

impl Source<'_> {
    fn layouts(&self) -> &[Layout] {
        match self {
            Source::Staged(copy) => copy.meta(),
            Source::Here { layouts, .. } => layouts,
        }
    }

    /// Sends the array at `(at, len)` of the buffer to `dst` on the copy stream;
    /// copies `src` there first unless it is staged already or `write` is false
    /// (an earlier query's same data, written there before).
    fn send<D>(
        &mut self,
        gpu: &Gpu,
        (at, len): (usize, usize),
        write: bool,
        src: &[u8],
        dst: &mut CudaSlice<D>,
    ) -> Result<(), CudaError> {
        let bytes = match self {
            Source::Staged(copy) => copy
                .bytes()
                .get(at..at + len)
                .ok_or_else(|| CudaError::Shape("split data outside their staged copy".into()))?,
            Source::Here { buf, pool, .. } => {
                if write {
                    copy_in_pieces(
                        &mut buf.as_uninit_mut()[at..at + len],
                        src,
                        *pool,
                        MIN_PIECE,
                    );
                }
                // SAFETY: the range was written just above (or, for data sent
                // twice, before), and nothing writes it again before the DMA has
                // read it (`last`, waited for at the next staging).
                unsafe { buf.assume_init_range(at..at + len) }
            }
        };
        raw::htod_bytes(&gpu.copy, bytes, dst, 0)
    }
}

/// Each split's arrays at aligned offsets (a split that is the same data as an
/// earlier one shares its place), and the bytes in all; `None` when there is no
/// split or they exceed `max` bytes.
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
    let mut layouts: Vec<Layout> = Vec::with_capacity(splits.len());
    for (k, s) in splits.iter().enumerate() {
        let same = splits[..k]
            .iter()
            .position(|e| split_key(e) == split_key(s));
        let l = match same {
            Some(j) => Layout {
                written: false,
                ..layouts[j]
            },
            None => Layout {
                words: place(std::mem::size_of_val(s.ones_words())),
                idx: place(std::mem::size_of_val(s.tail_indices())),
                scalars: place(std::mem::size_of_val(s.tail_scalars())),
                written: true,
            },
        };
        layouts.push(l);
    }
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
        assert!(ls.iter().all(|l| l.written));
        assert!(layout(&[], MAX_STAGED_BYTES).is_none());
        // Past the limit the caller uploads them from its own memory.
        assert!(layout(&[a, b], total).is_some());
        assert!(layout(&[a, b], total - 1).is_none());
    }

    #[test]
    fn a_split_given_twice_takes_one_place_and_is_written_once() {
        let words = [0b1011u64, 0];
        let (idx, sc) = ([2u32, 70], [[1u64, 2, 3, 4]; 2]);
        let a = SplitRef::checked(100, &words, &idx, &sc).unwrap();
        let b = SplitRef::checked(10, &words[..1], &[], &[]).unwrap();
        // The same values at other addresses are other data.
        let (idx2, sc2) = (idx, sc);
        let c = SplitRef::checked(100, &words, &idx2, &sc2).unwrap();
        let (once, once_total) = layout(&[a, b], MAX_STAGED_BYTES).unwrap();
        let (ls, total) = layout(&[a, b, a], MAX_STAGED_BYTES).unwrap();
        assert_eq!(total, once_total);
        assert!(ls[0].written && ls[1].written && !ls[2].written);
        assert_eq!(
            [ls[2].words, ls[2].idx, ls[2].scalars],
            [once[0].words, once[0].idx, once[0].scalars]
        );
        let (ls, total) = layout(&[a, b, c], MAX_STAGED_BYTES).unwrap();
        assert!(ls.iter().all(|l| l.written));
        assert!(total > once_total);
    }
}
