//! `SplitScalars`: one query's scalars as `prep_msm` splits them (zeros dropped,
//! ones as a bitmap, the rest as a tail), the data every backend receives.
//!
//! It lives here, with the other buffers stages hand each other, rather than in
//! the CPU MSM crate that produces it: a backend (the CUDA one, a vendor's) reads a
//! split without depending on the CPU implementation. Backends read a split through
//! [`SplitRef`], a borrowed view: [`SplitScalars::as_ref`] for one made here, or
//! [`SplitRef::checked`] for one that crossed a boundary (a plugin's ABI), checked in
//! place rather than copied. At the 32 GiB PoRep shape a partition's four splits are
//! ~0.3 GB: copying them inside the GPU lock cost 0.3-0.7 s a partition on the H200.

use crate::{Density, HeapSize};

/// A split that does not keep what a split promises.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    #[error("tail index {index} is out of range for {bases} bases")]
    IndexOutOfRange { index: usize, bases: usize },
    #[error("the split is malformed: {0}")]
    Malformed(String),
}

/// The result of `prep_msm` for one query. Index space: the query's bases, that is
/// the inputs whose density bit is set, in order, then the aux variables whose bit
/// is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitScalars {
    num_bases: usize,
    num_zeros: usize,
    ones: Density,
    tail_indices: Vec<u32>,
    tail_scalars: Vec<[u64; 4]>,
}

/// The scalar field's modulus r, little-endian 64-bit limbs.
const MODULUS: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

fn is_canonical(limbs: &[u64; 4]) -> bool {
    for i in (0..4).rev() {
        if limbs[i] != MODULUS[i] {
            return limbs[i] < MODULUS[i];
        }
    }
    false
}

/// Fewest tail terms one thread of [`first_error`] checks: below twice this the
/// check runs on the calling thread. 2^16 terms (2.4 MB of indices and scalars) a
/// piece: a 32 GiB PoRep query's 1.2-1.7 M terms, checked on one thread at 2^20,
/// were ~7 ms each on the 2-core machine and the four queries' checks ~55-65 ms
/// of the H200's GPU lock a partition (BENCHMARKS.md).
const CHECK_PIECE: usize = 1 << 16;

/// Runs `check` over `0..n` in ranges, on scoped threads (at most the cores) when
/// `n` is large, and returns the error of the first failing range in order: what
/// one `check(0..n)` that stops at its first error would return, provided `check`
/// reports the first error within its range.
fn first_error(
    n: usize,
    check: impl Fn(std::ops::Range<usize>) -> Result<(), SplitError> + Sync,
) -> Result<(), SplitError> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let pieces = (n / CHECK_PIECE).clamp(1, threads.max(1));
    if pieces == 1 {
        return check(0..n);
    }
    let size = n.div_ceil(pieces);
    let check = &check;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(size)
            .map(|lo| s.spawn(move || check(lo..(lo + size).min(n))))
            .collect();
        // Joined in order: the first failing range's error wins.
        let mut out = Ok(());
        for h in handles {
            let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            if out.is_ok() {
                out = r;
            }
        }
        out
    })
}

/// The tail indices in `range`: in bounds, increasing (from the one before the
/// range), none of them a one.
fn check_indices(
    num_bases: usize,
    ones: &[u64],
    tail_indices: &[u32],
    range: std::ops::Range<usize>,
) -> Result<(), SplitError> {
    let one = |i: usize| ones[i / 64] >> (i % 64) & 1 == 1;
    let mut prev: Option<u32> = range.start.checked_sub(1).map(|k| tail_indices[k]);
    for &i in &tail_indices[range] {
        if (i as usize) >= num_bases {
            return Err(SplitError::IndexOutOfRange {
                index: i as usize,
                bases: num_bases,
            });
        }
        if prev.is_some_and(|p| p >= i) {
            return Err(SplitError::Malformed(format!(
                "tail index {i} does not increase"
            )));
        }
        if one(i as usize) {
            return Err(SplitError::Malformed(format!(
                "base {i} is both a one and in the tail"
            )));
        }
        prev = Some(i);
    }
    Ok(())
}

impl SplitScalars {
    /// A split its producer built: `prep_msm`, which keeps by construction what
    /// [`SplitScalars::from_parts`] checks (so a multi-gigabyte split is not walked
    /// again). A split that breaks them gives a wrong MSM, never unsoundness.
    pub fn from_prepared(
        num_bases: usize,
        num_zeros: usize,
        ones: Density,
        tail_indices: Vec<u32>,
        tail_scalars: Vec<[u64; 4]>,
    ) -> Self {
        debug_assert_eq!(ones.len(), num_bases);
        debug_assert_eq!(tail_indices.len(), tail_scalars.len());
        Self {
            num_bases,
            num_zeros,
            ones,
            tail_indices,
            tail_scalars,
        }
    }

    /// Reassembles a split from what its accessors return. Checks everything a
    /// split promises: the bitmap covers `num_bases`, tail indices increase and are
    /// in range and not among the ones, and tail scalars are canonical.
    pub fn from_parts(
        num_bases: usize,
        ones: Density,
        tail_indices: Vec<u32>,
        tail_scalars: Vec<[u64; 4]>,
    ) -> Result<Self, SplitError> {
        if ones.len() != num_bases {
            return Err(SplitError::Malformed(format!(
                "the ones bitmap covers {} bases, the split {num_bases}",
                ones.len()
            )));
        }
        let num_zeros =
            SplitRef::checked(num_bases, ones.words(), &tail_indices, &tail_scalars)?.num_zeros;
        Ok(Self {
            num_bases,
            num_zeros,
            ones,
            tail_indices,
            tail_scalars,
        })
    }

    /// The borrowed view backends read.
    pub fn as_ref(&self) -> SplitRef<'_> {
        SplitRef {
            num_bases: self.num_bases,
            num_zeros: self.num_zeros,
            ones: self.ones.words(),
            tail_indices: &self.tail_indices,
            tail_scalars: &self.tail_scalars,
        }
    }

    /// Length of the query's base vector this split indexes.
    pub fn num_bases(&self) -> usize {
        self.num_bases
    }

    /// How many of the query's scalars are zero (their bases are skipped).
    pub fn num_zeros(&self) -> usize {
        self.num_zeros
    }

    /// Over base indices: which scalars equal one.
    pub fn ones(&self) -> &Density {
        &self.ones
    }

    /// Base indices of the other scalars, increasing.
    pub fn tail_indices(&self) -> &[u32] {
        &self.tail_indices
    }

    /// The other scalars as canonical little-endian limbs, parallel to `tail_indices`.
    pub fn tail_scalars(&self) -> &[[u64; 4]] {
        &self.tail_scalars
    }

    /// Bytes held on the heap.
    pub fn heap_size(&self) -> usize {
        self.ones.heap_size() + self.tail_indices.heap_size() + self.tail_scalars.heap_size()
    }
}

/// A split borrowed: what a backend reads ([`SplitScalars::as_ref`], or
/// [`SplitRef::checked`] for parts that crossed a boundary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitRef<'a> {
    num_bases: usize,
    num_zeros: usize,
    ones: &'a [u64],
    tail_indices: &'a [u32],
    tail_scalars: &'a [[u64; 4]],
}

impl<'a> SplitRef<'a> {
    /// Views parts that crossed a boundary, checking in place everything a split
    /// promises: the bitmap is `num_bases` bits in whole words (none set past
    /// `num_bases`), tail indices increase and are in range and not among the ones,
    /// and tail scalars are canonical.
    pub fn checked(
        num_bases: usize,
        ones: &'a [u64],
        tail_indices: &'a [u32],
        tail_scalars: &'a [[u64; 4]],
    ) -> Result<Self, SplitError> {
        let malformed = |why: String| SplitError::Malformed(why);
        if ones.len() != num_bases.div_ceil(64) {
            return Err(malformed(format!(
                "the ones bitmap has {} words, {num_bases} bases need {}",
                ones.len(),
                num_bases.div_ceil(64)
            )));
        }
        if !num_bases.is_multiple_of(64) && ones.last().is_some_and(|w| w >> (num_bases % 64) != 0)
        {
            return Err(malformed(format!(
                "the ones bitmap has bits set past its {num_bases} bases"
            )));
        }
        if tail_indices.len() != tail_scalars.len() {
            return Err(malformed(format!(
                "{} tail indices but {} tail scalars",
                tail_indices.len(),
                tail_scalars.len()
            )));
        }
        // In pieces on several threads for a long tail (a WindowPoSt query's is
        // 90-130 M terms, and the check runs inside the host's GPU lock), the first
        // error in index order the same as one pass would find: the indices first,
        // then the scalars.
        first_error(tail_indices.len(), |r| {
            check_indices(num_bases, ones, tail_indices, r)
        })?;
        first_error(tail_scalars.len(), |r| {
            match tail_scalars[r.clone()]
                .iter()
                .position(|s| !is_canonical(s))
            {
                Some(k) => Err(malformed(format!(
                    "the tail scalar of base {} is not a canonical field element",
                    tail_indices[r.start + k]
                ))),
                None => Ok(()),
            }
        })?;
        let count: usize = ones.iter().map(|w| w.count_ones() as usize).sum();
        Ok(Self {
            num_bases,
            num_zeros: num_bases - count - tail_indices.len(),
            ones,
            tail_indices,
            tail_scalars,
        })
    }

    /// Views parts that [`SplitRef::checked`] accepted before, with the zeros it
    /// counted ([`SplitRef::num_zeros`]), and that the caller knows unchanged
    /// since (a boundary's contract: the host keeps staged data unchanged until
    /// it unstages them): no pass over them. Host code does not rely on a split's
    /// promises for memory safety (indices are bounds-checked where the host uses
    /// them); they make the sums right.
    pub fn prechecked(
        num_bases: usize,
        num_zeros: usize,
        ones: &'a [u64],
        tail_indices: &'a [u32],
        tail_scalars: &'a [[u64; 4]],
    ) -> Self {
        Self {
            num_bases,
            num_zeros,
            ones,
            tail_indices,
            tail_scalars,
        }
    }

    /// Length of the query's base vector this split indexes.
    pub fn num_bases(&self) -> usize {
        self.num_bases
    }

    /// How many of the query's scalars are zero (their bases are skipped).
    pub fn num_zeros(&self) -> usize {
        self.num_zeros
    }

    /// Which scalars equal one: 64 base indices a word, least significant bit
    /// first, no bit set past [`SplitRef::num_bases`] (`Density::words`).
    pub fn ones_words(&self) -> &'a [u64] {
        self.ones
    }

    /// How many scalars equal one.
    pub fn ones_count(&self) -> usize {
        self.num_bases - self.num_zeros - self.tail_indices.len()
    }

    /// Base indices of the other scalars, increasing.
    pub fn tail_indices(&self) -> &'a [u32] {
        self.tail_indices
    }

    /// The other scalars as canonical little-endian limbs, parallel to `tail_indices`.
    pub fn tail_scalars(&self) -> &'a [[u64; 4]] {
        self.tail_scalars
    }
}

impl HeapSize for SplitScalars {
    fn heap_size(&self) -> usize {
        SplitScalars::heap_size(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A split of 100 bases: every third a zero, every third a one, the rest in the
    /// tail with small canonical scalars.
    fn parts() -> (Density, Vec<u32>, Vec<[u64; 4]>) {
        let mut ones = Density::new(0);
        let (mut idx, mut tail) = (Vec::new(), Vec::new());
        for i in 0..100u32 {
            ones.push(i % 3 == 1);
            if i % 3 == 2 {
                idx.push(i);
                tail.push([u64::from(i) * 7 + 2, 1, 0, 3]);
            }
        }
        (ones, idx, tail)
    }

    #[test]
    fn good_parts_make_a_split_and_bad_parts_are_errors() {
        let (o, i, t) = parts();
        let s = SplitScalars::from_parts(100, o.clone(), i.clone(), t.clone()).unwrap();
        assert_eq!((s.num_bases(), s.num_zeros()), (100, 34));
        assert_eq!(s, SplitScalars::from_prepared(100, 34, o, i, t));

        let (o, mut i, t) = parts();
        i.swap(0, 1);
        assert!(SplitScalars::from_parts(100, o, i, t).is_err());
        let (o, mut i, t) = parts();
        i[0] = 1; // index 1 is a one
        assert!(SplitScalars::from_parts(100, o, i, t).is_err());
        let (o, i, mut t) = parts();
        t[0] = MODULUS;
        assert!(SplitScalars::from_parts(100, o, i, t).is_err());
        let (o, i, t) = parts();
        assert!(SplitScalars::from_parts(101, o, i, t).is_err());
        // The borrowed check says the same, and a view of a split is that split.
        let (o, i, t) = parts();
        let v = SplitRef::checked(100, o.words(), &i, &t).unwrap();
        assert_eq!(v, s.as_ref());
        assert_eq!((v.num_zeros(), v.ones_count()), (34, 33));
        assert!(SplitRef::checked(100, &o.words()[..1], &i, &t).is_err());
        let mut stray = o.words().to_vec();
        stray[1] |= 1 << 40; // base 104: past the 100
        assert!(SplitRef::checked(100, &stray, &i, &t).is_err());
        assert!(SplitRef::checked(100, o.words(), &i[1..], &t).is_err());
        let mut one = i.clone();
        one[0] = 1;
        assert!(SplitRef::checked(100, o.words(), &one, &t).is_err());
        let (o, mut i, t) = parts();
        *i.last_mut().unwrap() = 100;
        assert_eq!(
            SplitScalars::from_parts(100, o, i, t),
            Err(SplitError::IndexOutOfRange {
                index: 100,
                bases: 100
            })
        );
    }

    /// A tail long enough to be checked in pieces on several threads gives the
    /// error one pass would: the first in index order, indices before scalars, and
    /// a break in the order across two pieces' boundary is seen.
    #[test]
    fn a_long_tail_is_checked_in_pieces_with_one_pass_errors() {
        let n = 5 * CHECK_PIECE + 17;
        let ones = vec![0u64; n.div_ceil(64)];
        let idx: Vec<u32> = (0..n as u32).collect();
        let sc: Vec<[u64; 4]> = (0..n as u64).map(|i| [i, 0, 0, 1]).collect();
        let check = |idx: &[u32], sc: &[[u64; 4]]| SplitRef::checked(n, &ones, idx, sc).map(|_| ());
        // Run on this machine's threads (pieces at most the cores, at least one).
        let pieces =
            (n / CHECK_PIECE).clamp(1, std::thread::available_parallelism().unwrap().get());
        let size = n.div_ceil(pieces);
        assert_eq!(check(&idx, &sc), Ok(()));
        // Out of range late, out of order early: the early one.
        let mut bad = idx.clone();
        bad[n - 3] = n as u32 + 5;
        bad[10] = 9;
        assert_eq!(
            check(&bad, &sc),
            Err(SplitError::Malformed(
                "tail index 9 does not increase".into()
            ))
        );
        // An index error in the last piece beats a scalar error in the first.
        let mut bad_idx = idx.clone();
        bad_idx[n - 1] = n as u32;
        let mut bad_sc = sc.clone();
        bad_sc[1] = MODULUS;
        assert_eq!(
            check(&bad_idx, &bad_sc),
            Err(SplitError::IndexOutOfRange { index: n, bases: n })
        );
        assert_eq!(
            check(&idx, &bad_sc),
            Err(SplitError::Malformed(
                "the tail scalar of base 1 is not a canonical field element".into()
            ))
        );
        // Equal neighbours across the first boundary between pieces (none on one
        // core: then the same pass sees them).
        let mut seam = idx.clone();
        let at = size.min(n - 1);
        seam[at] = seam[at - 1];
        let want = format!("tail index {} does not increase", seam[at]);
        assert_eq!(check(&seam, &sc), Err(SplitError::Malformed(want)));
    }
}
