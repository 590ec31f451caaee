//! CPU multi-scalar multiplication over BLS12-381 G1 and G2, and `prep_msm`, the split of
//! a Groth16 query's scalars into zeros, ones and the rest.
//!
//! # Design: Pippenger with batch-affine buckets
//!
//! Pippenger's method spends almost all of its time adding points into buckets. blst (and
//! so blstrs's `multi_exp`) keeps buckets in extended Jacobian (XYZZ) coordinates, where a
//! mixed addition costs about 8 multiplications and 2 squarings in the coordinate field.
//! An affine addition costs only 2 multiplications and 1 squaring — plus an inversion.
//! Collecting a few hundred additions into different buckets and inverting all their
//! slope denominators at once (Montgomery's trick: 3 multiplications per element and one
//! inversion per batch) brings an addition to 5 multiplications and 1 squaring, which is
//! where the speed over blst comes from. The price is bookkeeping: a bucket may appear
//! only once per batch, so a second point for it waits for the next batch, and the
//! doubling and cancelling cases (`P + P`, `P + (-P)`) must be recognised explicitly
//! (see `batch.rs`). The bucket reduction is batch-affine too (lanes of running sums
//! advancing in lock step), and the field arithmetic calls blst with explicit output
//! pointers (`field.rs`): with both, ~85% of the time is blst's multiplication and
//! subtraction.
//!
//! Signed digits in `[-2^(c-1), 2^(c-1)]` halve the bucket count (a negative digit adds
//! the negated point, which in affine form is free). Each window's digits depend only on
//! its own bits and the bit below, so windows are independent tasks on the caller's rayon
//! pool; points are also split into chunks when there are fewer windows than threads
//! (`pippenger::plan`). The combination of windows uses blst's projective arithmetic.
//!
//! Measured (2 threads; blst's `MultiPoint::mult` on affine points, its pool of 2
//! threads), µs per point, cuzk vs blst:
//!
//! | machine | G1 2^16 | G1 2^18 | G1 2^20 | G2 2^16 | G2 2^18 | G2 2^20 |
//! |---|---|---|---|---|---|---|
//! | 2-core Xeon (Sapphire Rapids), shared | 4.1 vs 5.6 | 3.0 vs 4.6 | 3.1 vs 6.7 | 9.6 vs 14.6 | 8.4 vs 18.9 | 6.9 vs 17.9 |
//! | 16-core Xeon host pinned to 2 cores | — | — | 3.5 vs 5.0 | — | — | — |
//!
//! On the 16-core host with all 16 threads, G1 2^20: 0.58 vs 0.85 µs/point. The 2-core
//! machine is shared with other jobs; its numbers move by ±10% between runs.
//!
//! # prep_msm
//!
//! Most witness values of Filecoin circuits are 0 or 1. [`prep_msm`] drops the zeros,
//! marks the ones in a bitmap (their bases are simply added up, again batch-affine) and
//! gathers the remaining scalars in canonical form with their base indices, ready for
//! [`msm_g1_indexed`] here or a GPU backend. The scalars of a witness are read once
//! ([`ScalarClasses`]) for all the queries split from them ([`prep_msm_classified`]).
//!
//! Architecture invariant: this crate knows nothing of circuits, parameters or GPUs; it
//! takes slices and a thread pool and returns points.

// `unsafe` is allowed in two places only: the calls into blst's field arithmetic
// (`field.rs`) and the cache prefetch hint (`batch.rs`).
#![deny(unsafe_code)]

mod batch;
mod curve;
mod field;
#[cfg(test)]
mod parts;
mod pippenger;
mod prep;
mod table;

pub use prep::{prep_msm, prep_msm_classified, ScalarClasses};
pub use table::Table;

/// A table of G1 bases ([`precompute_g1`]).
pub type G1Table = Table<G1Affine>;
/// A table of G2 bases ([`precompute_g2`]).
pub type G2Table = Table<G2Affine>;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
/// The split (in `cuzk-alloc`, which every backend already depends on).
pub use cuzk_alloc::{SplitError, SplitRef, SplitScalars};
use rayon::prelude::*;

use crate::curve::{MsmCurve, G1, G2};
use crate::pippenger::Points;

/// Why an MSM or a split could not be computed. Every variant is a caller error in the
/// shape of the inputs; the arithmetic itself cannot fail.
#[derive(Debug, thiserror::Error)]
pub enum MsmError {
    #[error("the MSM has {bases} bases but {scalars} scalars")]
    LengthMismatch { bases: usize, scalars: usize },
    #[error(
        "the {which} density tracks {density} variables but {scalars} {which} scalars were given"
    )]
    DensityLength {
        /// `"input"` or `"aux"`.
        which: &'static str,
        density: usize,
        scalars: usize,
    },
    #[error("the split indexes {need} bases but only {have} bases were given")]
    BaseCount { need: usize, have: usize },
    #[error("base index {index} is out of range for {bases} bases")]
    IndexOutOfRange { index: usize, bases: usize },
    #[error(transparent)]
    Split(#[from] SplitError),
    #[error("the query has {bases} bases, more than 32-bit base indices can address")]
    TooManyBases { bases: usize },
}

/// `Σ scalars[i] · bases[i]` in G1 on `pool`.
pub fn msm_g1(
    bases: &[G1Affine],
    scalars: &[Scalar],
    pool: &rayon::ThreadPool,
) -> Result<G1Projective, MsmError> {
    msm_dense::<G1>(bases, scalars, pool, "g1")
}

/// `Σ scalars[i] · bases[i]` in G2 on `pool`.
pub fn msm_g2(
    bases: &[G2Affine],
    scalars: &[Scalar],
    pool: &rayon::ThreadPool,
) -> Result<G2Projective, MsmError> {
    msm_dense::<G2>(bases, scalars, pool, "g2")
}

/// `Σ scalars[i] · bases[indices[i]]` in G1, scalars as canonical little-endian limbs (any
/// 256-bit value is accepted; the result is the integer multiple). Used by
/// [`split_msm_g1`]; public for backends and benches.
pub fn msm_g1_indexed(
    bases: &[G1Affine],
    indices: &[u32],
    scalars: &[[u64; 4]],
    pool: &rayon::ThreadPool,
) -> Result<G1Projective, MsmError> {
    msm_indexed::<G1>(bases, indices, scalars, pool, "g1")
}

/// `Σ scalars[i] · bases[indices[i]]` in G2; see [`msm_g1_indexed`].
pub fn msm_g2_indexed(
    bases: &[G2Affine],
    indices: &[u32],
    scalars: &[[u64; 4]],
    pool: &rayon::ThreadPool,
) -> Result<G2Projective, MsmError> {
    msm_indexed::<G2>(bases, indices, scalars, pool, "g2")
}

fn msm_dense<C: MsmCurve>(
    bases: &[C::Affine],
    scalars: &[Scalar],
    pool: &rayon::ThreadPool,
    curve: &'static str,
) -> Result<C::Projective, MsmError> {
    if bases.len() != scalars.len() {
        return Err(MsmError::LengthMismatch {
            bases: bases.len(),
            scalars: scalars.len(),
        });
    }
    let _span = tracing::info_span!("msm", curve, n = scalars.len()).entered();
    let limbs = limbs_of(scalars, pool);
    Ok(pippenger::msm::<C>(Points::Dense(bases), &limbs, pool))
}

fn msm_indexed<C: MsmCurve>(
    bases: &[C::Affine],
    indices: &[u32],
    scalars: &[[u64; 4]],
    pool: &rayon::ThreadPool,
    curve: &'static str,
) -> Result<C::Projective, MsmError> {
    if indices.len() != scalars.len() {
        return Err(MsmError::LengthMismatch {
            bases: indices.len(),
            scalars: scalars.len(),
        });
    }
    if let Some(&index) = indices.iter().find(|&&k| k as usize >= bases.len()) {
        return Err(MsmError::IndexOutOfRange {
            index: index as usize,
            bases: bases.len(),
        });
    }
    let _span = tracing::info_span!("msm", curve, n = scalars.len(), indexed = true).entered();
    Ok(pippenger::msm::<C>(
        Points::Indexed(bases, indices),
        scalars,
        pool,
    ))
}

/// Every scalar's canonical limbs ([`scalar_limbs`]), converted on `pool`.
fn limbs_of(scalars: &[Scalar], pool: &rayon::ThreadPool) -> Vec<[u64; 4]> {
    pool.install(|| {
        scalars
            .par_iter()
            .with_min_len(4096)
            .map(scalar_limbs)
            .collect()
    })
}

/// The canonical (non-Montgomery) little-endian limbs of a scalar.
fn scalar_limbs(s: &Scalar) -> [u64; 4] {
    let b = s.to_bytes_le();
    std::array::from_fn(|i| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[8 * i..8 * i + 8]);
        u64::from_le_bytes(w)
    })
}

/// `Σ ones + Σ tail` in G1: the bases whose scalar is one added up (batch-affine), plus
/// Pippenger over the tail. `bases` is the query's base vector (at least
/// `split.num_bases()` long).
pub fn split_msm_g1(
    bases: &[G1Affine],
    split: SplitRef<'_>,
    pool: &rayon::ThreadPool,
) -> Result<G1Projective, MsmError> {
    split_msm::<G1>(bases, None, split, pool, "g1")
}

/// `Σ ones + Σ tail` in G2; see [`split_msm_g1`].
pub fn split_msm_g2(
    bases: &[G2Affine],
    split: SplitRef<'_>,
    pool: &rayon::ThreadPool,
) -> Result<G2Projective, MsmError> {
    split_msm::<G2>(bases, None, split, pool, "g2")
}

/// Whether a table of `n` bases for `threads` threads speeds up an MSM over `m` of them
/// (a split's tail, or all `n`); the table MSMs make the same choice per call.
pub fn table_pays(n: usize, m: usize, threads: usize) -> bool {
    table::table_pays(n, m, threads)
}

/// The bytes [`precompute_g1`] takes for `n` bases used on `threads` threads.
pub fn table_bytes_g1(n: usize, threads: usize) -> usize {
    table::table_bytes(n, threads, std::mem::size_of::<G1Affine>())
}

/// The bytes [`precompute_g2`] takes for `n` bases used on `threads` threads.
pub fn table_bytes_g2(n: usize, threads: usize) -> usize {
    table::table_bytes(n, threads, std::mem::size_of::<G2Affine>())
}

/// The fixed-base table of G1 `bases` for MSMs on `threads` threads (see [`Table`]),
/// computed on `pool`. `proceed` is called before each chunk of 256 bases: it may block
/// (to yield the cores to other work); once it returns false the table is abandoned and
/// this returns `None`.
pub fn precompute_g1(
    bases: &[G1Affine],
    threads: usize,
    pool: &rayon::ThreadPool,
    proceed: &(dyn Fn() -> bool + Sync),
) -> Option<G1Table> {
    table::precompute::<G1>(bases, threads, pool, proceed)
}

/// The fixed-base table of G2 `bases`; see [`precompute_g1`].
pub fn precompute_g2(
    bases: &[G2Affine],
    threads: usize,
    pool: &rayon::ThreadPool,
    proceed: &(dyn Fn() -> bool + Sync),
) -> Option<G2Table> {
    table::precompute::<G2>(bases, threads, pool, proceed)
}

/// [`msm_g1`] with the table of `bases` (`table` must be [`precompute_g1`] of exactly
/// these bases; only its length can be checked).
pub fn msm_g1_table(
    table: &G1Table,
    bases: &[G1Affine],
    scalars: &[Scalar],
    pool: &rayon::ThreadPool,
) -> Result<G1Projective, MsmError> {
    msm_dense_table::<G1>(table, bases, scalars, pool, "g1")
}

/// [`msm_g2`] with the table of `bases` (see [`msm_g1_table`]).
pub fn msm_g2_table(
    table: &G2Table,
    bases: &[G2Affine],
    scalars: &[Scalar],
    pool: &rayon::ThreadPool,
) -> Result<G2Projective, MsmError> {
    msm_dense_table::<G2>(table, bases, scalars, pool, "g2")
}

fn msm_dense_table<C: MsmCurve>(
    table: &Table<C::Affine>,
    bases: &[C::Affine],
    scalars: &[Scalar],
    pool: &rayon::ThreadPool,
    curve: &'static str,
) -> Result<C::Projective, MsmError> {
    if bases.len() != scalars.len() || table.len() != bases.len() {
        return Err(MsmError::LengthMismatch {
            bases: bases.len().min(table.len()),
            scalars: scalars.len(),
        });
    }
    let _span = tracing::info_span!("msm", curve, n = scalars.len(), table = true).entered();
    let limbs = limbs_of(scalars, pool);
    Ok(table::msm::<C>(table, bases, None, &limbs, pool))
}

/// [`split_msm_g1`] with the table of `bases` (see [`msm_g1_table`]).
pub fn split_msm_g1_table(
    table: &G1Table,
    bases: &[G1Affine],
    split: SplitRef<'_>,
    pool: &rayon::ThreadPool,
) -> Result<G1Projective, MsmError> {
    split_msm::<G1>(bases, Some(table), split, pool, "g1")
}

/// [`split_msm_g2`] with the table of `bases` (see [`msm_g1_table`]).
pub fn split_msm_g2_table(
    table: &G2Table,
    bases: &[G2Affine],
    split: SplitRef<'_>,
    pool: &rayon::ThreadPool,
) -> Result<G2Projective, MsmError> {
    split_msm::<G2>(bases, Some(table), split, pool, "g2")
}

fn split_msm<C: MsmCurve>(
    bases: &[C::Affine],
    table: Option<&Table<C::Affine>>,
    split: SplitRef<'_>,
    pool: &rayon::ThreadPool,
    curve: &'static str,
) -> Result<C::Projective, MsmError> {
    if bases.len() < split.num_bases() {
        return Err(MsmError::BaseCount {
            need: split.num_bases(),
            have: bases.len(),
        });
    }
    if let Some(t) = table {
        if t.len() != bases.len() {
            return Err(MsmError::LengthMismatch {
                bases: bases.len(),
                scalars: t.len(),
            });
        }
    }
    let _span = tracing::info_span!(
        "msm",
        curve,
        n = split.num_bases(),
        ones = split.ones_count(),
        tail = split.tail_indices().len(),
        table = table.is_some()
    )
    .entered();
    // A split's indices are below num_bases <= bases.len() (prep_msm builds them so,
    // from_parts checks them), and its scalars are canonical (SplitRef::checked).
    let mut sum = pippenger::sum_density::<C>(bases, split.ones_words(), pool);
    let tail = match table {
        Some(t) => table::msm::<C>(
            t,
            bases,
            Some(split.tail_indices()),
            split.tail_scalars(),
            pool,
        ),
        None => pippenger::msm::<C>(
            Points::Indexed(bases, split.tail_indices()),
            split.tail_scalars(),
            pool,
        ),
    };
    C::add(&mut sum, &tail);
    Ok(sum)
}
