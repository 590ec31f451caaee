//! Staging a witness by copying it into page-locked buffers the backend keeps
//! (`witness_staging = "copy"`), instead of page-locking the caller's memory in place.
//!
//! At the 32 GiB PoRep shape a partition's witness is 4.2 GB. Registered in place
//! (`cuMemHostRegister`) before the GPU lock and unregistered after the call, it
//! costs ~0.7 s of driver work a partition that takes the process's memory-map lock
//! and has to fit between other partitions' launches (`gate.rs`): measured on the
//! H200, each GPU worker's round was page-lock 0.42 s + GPU stage 1.79 s + unlock
//! 1.59 s, and with two workers the device got a partition every ~1.9 s against
//! 1.47 s of device work (BENCHMARKS.md). Copied instead, staging is a parallel
//! memcpy into a buffer allocated once (no driver call, no memory-map lock), and
//! unstaging hands the buffer back.
//!
//! The buffer holds `[input, aux]` as the device buffer does, so the upload is one
//! DMA. A staged copy is keyed by the witness's address and lengths; the partition
//! that proves that witness finds it ([`WitnessCopies::find`]) and uploads from it,
//! page-locking nothing. The buffers are the backend's page-locked memory
//! (`pinned_host_bytes`, which the engine's memory budget leaves room for): as many
//! as witnesses staged at once (one a GPU worker), each kept for the next
//! partition.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use blstrs::Scalar;

use crate::error::CudaError;
use crate::gpu::scalars_as_bytes;
use crate::raw::PinnedBuffer;
use crate::streamed::{copy_in_pieces, copy_pool};

/// Smallest piece one copy thread takes (16 MiB).
const MIN_PIECE: usize = 16 << 20;

/// A witness copied into a page-locked buffer: `[input, aux]`, `bytes` long.
#[derive(Debug)]
pub(crate) struct WitnessCopy {
    buf: PinnedBuffer,
    bytes: usize,
}

impl WitnessCopy {
    /// `[input, aux]` as bytes, ready for a DMA.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `stage` wrote the first `bytes` bytes before the copy was shared.
        unsafe { self.buf.assume_init_prefix(self.bytes) }
    }
}

/// Where a witness lives and how long its parts are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    input: (usize, usize),
    aux: (usize, usize),
}

impl Key {
    fn of(input: &[Scalar], aux: &[Scalar]) -> Self {
        Self {
            input: (input.as_ptr() as usize, input.len()),
            aux: (aux.as_ptr() as usize, aux.len()),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Buffers no staged witness holds, kept for the next one.
    free: Vec<PinnedBuffer>,
    /// The witnesses staged now, each with the number of its staging.
    staged: HashMap<Key, (u64, Arc<WitnessCopy>)>,
    /// Stagings so far.
    count: u64,
}

/// One staging of a witness, for [`WitnessCopies::release`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Token {
    key: Key,
    number: u64,
}

/// The backend's witness copies and the buffers they go into.
#[derive(Debug)]
pub(crate) struct WitnessCopies {
    copy_threads: usize,
    /// The copy threads, made at the first copy (`None` inside: copy on the
    /// calling thread).
    pool: Mutex<Option<Option<rayon::ThreadPool>>>,
    state: Mutex<State>,
}

impl WitnessCopies {
    pub(crate) fn new(copy_threads: usize) -> Self {
        Self {
            copy_threads,
            pool: Mutex::new(None),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A free buffer of at least `bytes`, or a new one (`alloc` runs the
    /// allocation: the backend puts it behind its launch gate). Free buffers too
    /// small for it (another shape's) are freed.
    fn buffer(
        &self,
        bytes: usize,
        alloc: impl FnOnce() -> Result<PinnedBuffer, CudaError>,
    ) -> Result<PinnedBuffer, CudaError> {
        let small = {
            let mut st = self.state();
            let fits = st
                .free
                .iter()
                .enumerate()
                .filter(|(_, b)| b.len() >= bytes)
                .min_by_key(|(_, b)| b.len())
                .map(|(i, _)| i);
            if let Some(i) = fits {
                return Ok(st.free.swap_remove(i));
            }
            let (small, keep): (Vec<_>, Vec<_>) = st.free.drain(..).partition(|b| b.len() < bytes);
            st.free = keep;
            small
        };
        drop(small);
        alloc()
    }

    /// Copies `[input, aux]` into a page-locked buffer and records it as the staged
    /// copy of this witness until `release` (the `Staged` guard) hands it back.
    /// The caller keeps `input` and `aux` unchanged until then.
    pub(crate) fn stage(
        &self,
        input: &[Scalar],
        aux: &[Scalar],
        alloc: impl FnOnce(usize) -> Result<PinnedBuffer, CudaError>,
    ) -> Result<Token, CudaError> {
        let key = Key::of(input, aux);
        let (ib, ab) = (std::mem::size_of_val(input), std::mem::size_of_val(aux));
        let bytes = ib + ab;
        let mut buf = self.buffer(bytes, || alloc(bytes))?;
        {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            let pool = pool.get_or_insert_with(|| copy_pool(self.copy_threads));
            let dst = buf.as_uninit_mut();
            let (head, rest) = dst.split_at_mut(ib);
            copy_in_pieces(head, scalars_as_bytes(input), pool.as_ref(), MIN_PIECE);
            copy_in_pieces(
                &mut rest[..ab],
                scalars_as_bytes(aux),
                pool.as_ref(),
                MIN_PIECE,
            );
        }
        let copy = Arc::new(WitnessCopy { buf, bytes });
        let (number, old) = {
            let mut st = self.state();
            st.count += 1;
            let number = st.count;
            (number, st.staged.insert(key, (number, copy)))
        };
        // The same witness staged twice (the engine never does): the newer copy
        // serves; the older one's release finds it gone.
        if let Some((_, old)) = old {
            self.give_back(old);
        }
        Ok(Token { key, number })
    }

    /// The staged copy of this witness, if any.
    pub(crate) fn find(&self, input: &[Scalar], aux: &[Scalar]) -> Option<Arc<WitnessCopy>> {
        let st = self.state();
        st.staged
            .get(&Key::of(input, aux))
            .map(|(_, c)| Arc::clone(c))
    }

    /// Ends a staging: its buffer goes back to the free ones (once no upload holds
    /// the copy; the backend call that used it has returned by then).
    pub(crate) fn release(&self, token: Token) {
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

    fn give_back(&self, copy: Arc<WitnessCopy>) {
        if let Ok(copy) = Arc::try_unwrap(copy) {
            self.state().free.push(copy.buf);
        }
    }
}
