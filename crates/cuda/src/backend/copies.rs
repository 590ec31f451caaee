//! Host data staged before the GPU lock by copying it into page-locked buffers the
//! backend keeps: what a witness staged by copy (`witness_copy.rs`) and a
//! partition's split data staged ahead (`split_staging.rs`) share.
//!
//! A staging copies its data into a free buffer (or a new one) and keeps the copy
//! under a key that says where the data live in the caller's memory; the backend
//! call that proves that data finds the copy by the same key and uploads from it.
//! The `Staged` guard hands the buffer back to the free ones, for the next
//! staging. The buffers are the backend's page-locked memory (`pinned_host_bytes`,
//! which the engine's memory budget leaves room for): as many as stagings alive at
//! once (one a GPU worker), each kept for the next.

use std::collections::HashMap;
use std::hash::Hash;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::CudaEvent;

use crate::error::{Ctx, CudaError};
use crate::raw::PinnedBuffer;
use crate::streamed::copy_pool;

/// Staged data: the first `bytes` bytes of a page-locked buffer, written, and what
/// the staging says of them (`meta`).
#[derive(Debug)]
pub(crate) struct Copied<M> {
    buf: PinnedBuffer,
    bytes: usize,
    meta: M,
    /// Recorded after the last copy to the device that reads the buffer: the
    /// buffer is written again only once it has completed (a backend call that
    /// failed may leave its DMAs queued when the guard hands the buffer back).
    reads: Mutex<Option<CudaEvent>>,
}

impl<M> Copied<M> {
    /// The staged bytes, ready for a DMA.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `Copies::stage` wrote the first `bytes` bytes before the copy
        // was shared.
        unsafe { self.buf.assume_init_prefix(self.bytes) }
    }

    /// What the staging recorded of the data.
    pub(crate) fn meta(&self) -> &M {
        &self.meta
    }

    /// `event`, recorded after the DMAs queued from this copy, is waited for
    /// before its buffer is written again.
    pub(crate) fn read_until(&self, event: CudaEvent) {
        *self.reads.lock().unwrap_or_else(|e| e.into_inner()) = Some(event);
    }
}

/// A free buffer with the event its last DMAs recorded, if any.
type Free = (PinnedBuffer, Option<CudaEvent>);

/// A free buffer once its last DMAs have completed.
fn settled((buf, reads): Free) -> Result<PinnedBuffer, CudaError> {
    if let Some(e) = reads {
        e.synchronize().ctx("cuEventSynchronize")?;
    }
    Ok(buf)
}

#[derive(Debug)]
struct State<K, M> {
    /// Buffers no staging holds, kept for the next one.
    free: Vec<Free>,
    /// The stagings alive, each with its number.
    staged: HashMap<K, (u64, Arc<Copied<M>>)>,
    /// Stagings so far.
    count: u64,
}

/// One staging, for [`Copies::release`].
#[derive(Clone, Debug)]
pub(crate) struct Token<K> {
    key: K,
    number: u64,
}

/// The backend's staged copies of one kind and the buffers they go into.
#[derive(Debug)]
pub(crate) struct Copies<K, M> {
    copy_threads: usize,
    /// The copy threads, made at the first copy (`None` inside: copy on the
    /// calling thread).
    pool: Mutex<Option<Option<rayon::ThreadPool>>>,
    state: Mutex<State<K, M>>,
}

impl<K: Hash + Eq + Clone, M> Copies<K, M> {
    pub(crate) fn new(copy_threads: usize) -> Self {
        Self {
            copy_threads,
            pool: Mutex::new(None),
            state: Mutex::new(State {
                free: Vec::new(),
                staged: HashMap::new(),
                count: 0,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<K, M>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A free buffer of at least `bytes` whose DMAs have completed, or a new one
    /// (`alloc` runs the allocation: the backend puts it behind its launch gate
    /// unless small).
    /// Free buffers too small for it (another shape's) are freed.
    fn buffer(
        &self,
        bytes: usize,
        alloc: impl FnOnce(usize) -> Result<PinnedBuffer, CudaError>,
    ) -> Result<PinnedBuffer, CudaError> {
        let (fit, small) = {
            let mut st = self.state();
            // A small copy (a PoSt's witness) takes no buffer sized for a large one
            // (a PoRep partition's 4 GB), which that one's next staging would have to
            // allocate again, behind the launch gate.
            let small = bytes <= super::gate::UNGATED_BYTES;
            let fits = st
                .free
                .iter()
                .enumerate()
                .filter(|(_, (b, _))| {
                    b.len() >= bytes && (!small || b.len() <= super::gate::UNGATED_BYTES)
                })
                .min_by_key(|(_, (b, _))| b.len())
                .map(|(i, _)| i);
            match fits {
                Some(i) => (Some(st.free.swap_remove(i)), Vec::new()),
                None => {
                    let (small, keep): (Vec<_>, Vec<_>) =
                        st.free.drain(..).partition(|(b, _)| b.len() < bytes);
                    st.free = keep;
                    (None, small)
                }
            }
        };
        // Freed only once nothing reads them any more.
        for free in small {
            drop(settled(free)?);
        }
        match fit {
            Some(free) => settled(free),
            None => alloc(bytes),
        }
    }

    /// Copies `bytes` bytes of data into a page-locked buffer (`fill` writes them,
    /// on the copy threads given, and returns what the copy should remember of
    /// them) and keeps the copy as `key`'s until `release` hands it back. The
    /// caller keeps the data `key` names unchanged until then.
    pub(crate) fn stage(
        &self,
        key: K,
        bytes: usize,
        alloc: impl FnOnce(usize) -> Result<PinnedBuffer, CudaError>,
        fill: impl FnOnce(&mut [MaybeUninit<u8>], Option<&rayon::ThreadPool>) -> M,
    ) -> Result<Token<K>, CudaError> {
        let mut buf = self.buffer(bytes, alloc)?;
        let meta = {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            let pool = pool.get_or_insert_with(|| copy_pool(self.copy_threads));
            fill(&mut buf.as_uninit_mut()[..bytes], pool.as_ref())
        };
        let copy = Arc::new(Copied {
            buf,
            bytes,
            meta,
            reads: Mutex::new(None),
        });
        let (number, old) = {
            let mut st = self.state();
            st.count += 1;
            let number = st.count;
            (number, st.staged.insert(key.clone(), (number, copy)))
        };
        // The same data staged twice (the engine never does): the newer copy
        // serves; the older one's release finds it gone.
        if let Some((_, old)) = old {
            self.give_back(old);
        }
        Ok(Token { key, number })
    }

    /// The staged copy of `key`'s data, if any.
    pub(crate) fn find(&self, key: &K) -> Option<Arc<Copied<M>>> {
        self.state().staged.get(key).map(|(_, c)| Arc::clone(c))
    }

    /// Ends a staging: its buffer goes back to the free ones (once no upload holds
    /// the copy; the backend call that used it has returned by then).
    pub(crate) fn release(&self, token: Token<K>) {
        let copy = {
            let mut st = self.state();
            match st.staged.get(&token.key) {
                Some((n, _)) if *n == token.number => st.staged.remove(&token.key),
                _ => None,
            }
        };
        if let Some((_, copy)) = copy {
            self.give_back(copy);
        }
    }

    fn give_back(&self, copy: Arc<Copied<M>>) {
        if let Ok(copy) = Arc::try_unwrap(copy) {
            let reads = copy.reads.into_inner().unwrap_or_else(|e| e.into_inner());
            self.state().free.push((copy.buf, reads));
        }
    }
}
