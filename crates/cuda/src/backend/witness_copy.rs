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
//! page-locking nothing. The buffers are kept as `copies.rs` keeps them: as many as
//! witnesses staged at once (one a GPU worker), each kept for the next partition.

use blstrs::Scalar;

use super::copies::{Copied, Copies, Token};
use crate::error::CudaError;
use crate::gpu::scalars_as_bytes;
use crate::raw::PinnedBuffer;
use crate::streamed::copy_in_pieces;

/// Smallest piece one copy thread takes (16 MiB).
const MIN_PIECE: usize = 16 << 20;

/// A witness copied into a page-locked buffer: `[input, aux]`.
pub(crate) type WitnessCopy = Copied<()>;

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

/// The backend's witness copies and the buffers they go into.
#[derive(Debug)]
pub(crate) struct WitnessCopies(Copies<Key, ()>);

impl WitnessCopies {
    pub(crate) fn new(copy_threads: usize) -> Self {
        Self(Copies::new(copy_threads))
    }

    /// Copies `[input, aux]` into a page-locked buffer and records it as the staged
    /// copy of this witness until `release` (the `Staged` guard) hands it back.
    /// The caller keeps `input` and `aux` unchanged until then.
    pub(crate) fn stage(
        &self,
        input: &[Scalar],
        aux: &[Scalar],
        alloc: impl FnOnce(usize) -> Result<PinnedBuffer, CudaError>,
    ) -> Result<Token<Key>, CudaError> {
        let (ib, ab) = (std::mem::size_of_val(input), std::mem::size_of_val(aux));
        self.0
            .stage(Key::of(input, aux), ib + ab, alloc, |dst, pool| {
                let (head, rest) = dst.split_at_mut(ib);
                copy_in_pieces(head, scalars_as_bytes(input), pool, MIN_PIECE);
                copy_in_pieces(rest, scalars_as_bytes(aux), pool, MIN_PIECE);
            })
    }

    /// The staged copy of this witness, if any.
    pub(crate) fn find(
        &self,
        input: &[Scalar],
        aux: &[Scalar],
    ) -> Option<std::sync::Arc<WitnessCopy>> {
        self.0.find(&Key::of(input, aux))
    }

    /// Ends a staging: its buffer goes back to the free ones.
    pub(crate) fn release(&self, token: Token<Key>) {
        self.0.release(token)
    }
}
