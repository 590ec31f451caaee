//! The owned buffers cuzk's stages pass to each other.
//!
//! A 32 GiB PoRep partition carries ~12 GiB of `a, b, c` evaluations and ~8 GiB of
//! witness between stages. Who owns those bytes, when they are freed and on which
//! thread is a first-order performance question (munmap storms, see the Phase 11
//! notes), so the buffers are plain owned values defined once, here, and every
//! stage says in its signature whether it borrows or consumes them.
//!
//! Architecture invariant: this crate knows no stage. It has no arithmetic beyond
//! counting bytes, and depends on nothing but the field types.

#![forbid(unsafe_code)]

use blstrs::Scalar;

pub mod dealloc;
pub mod split;
pub mod throttle;

pub use dealloc::{BoundedDealloc, DeallocPolicy, InlineDealloc, Released};
pub use split::{SplitError, SplitRef, SplitScalars};
pub use throttle::{NoThrottle, Raised, ThrottleControl};

/// Evaluations of the A, B and C polynomials over the constraint domain, one value
/// per constraint (public-input constraints included), as produced by synthesis and
/// consumed by the H computation. Not yet padded to the NTT domain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Abc {
    pub a: Vec<Scalar>,
    pub b: Vec<Scalar>,
    pub c: Vec<Scalar>,
}

impl Abc {
    /// Number of constraints (the common length of `a`, `b`, `c`).
    pub fn len(&self) -> usize {
        self.a.len()
    }

    pub fn is_empty(&self) -> bool {
        self.a.is_empty()
    }

    /// Whether `a`, `b` and `c` have the same length.
    pub fn is_consistent(&self) -> bool {
        self.a.len() == self.b.len() && self.b.len() == self.c.len()
    }
}

/// A circuit's variable assignment: `input[0]` is the constant one that every
/// Groth16 circuit carries, followed by the public inputs; `aux` holds the private
/// variables in allocation order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Witness {
    pub input: Vec<Scalar>,
    pub aux: Vec<Scalar>,
}

/// Which variables of one kind (inputs or aux) appear with a non-zero coefficient
/// in a query (A or B). The MSM over that query only uses the bases of the set bits,
/// and the parameters store bases for exactly those variables, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Density {
    words: Vec<u64>,
    len: usize,
}

impl Density {
    /// A density of `len` variables with none set.
    pub fn new(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// A density of `len` variables with all set (used for queries that are dense by
    /// construction, such as the A query over the public inputs).
    pub fn full(len: usize) -> Self {
        let mut d = Self {
            words: vec![u64::MAX; len.div_ceil(64)],
            len,
        };
        d.clear_tail();
        d
    }

    fn clear_tail(&mut self) {
        let rem = self.len % 64;
        if rem != 0 {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u64 << rem) - 1;
            }
        }
    }

    /// Number of variables tracked.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends one variable, unset.
    pub fn push(&mut self, set: bool) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        self.len += 1;
        if set {
            self.set(self.len - 1);
        }
    }

    /// Marks variable `i` as present. Out-of-range indices are ignored by design:
    /// the producer (synthesis) checks indices against its own counts first.
    pub fn set(&mut self, i: usize) {
        if i < self.len {
            self.words[i / 64] |= 1u64 << (i % 64);
        }
    }

    /// Whether variable `i` is present; `false` past the end.
    pub fn get(&self, i: usize) -> bool {
        i < self.len && (self.words[i / 64] >> (i % 64)) & 1 == 1
    }

    /// Number of variables present (the number of bases the query's MSM uses).
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The raw bitmap, 64 variables per word, least significant bit first.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Builds a density from raw words; bits past `len` are cleared.
    pub fn from_words(mut words: Vec<u64>, len: usize) -> Self {
        words.resize(len.div_ceil(64), 0);
        let mut d = Self { words, len };
        d.clear_tail();
        d
    }

    /// Iterates over the indices of the set bits in increasing order.
    pub fn iter_ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    None
                } else {
                    let b = w.trailing_zeros() as usize;
                    w &= w - 1;
                    Some(wi * 64 + b)
                }
            })
        })
    }
}

/// Bytes a buffer holds on the heap; what the memory budget counts.
pub trait HeapSize {
    fn heap_size(&self) -> usize;
}

impl<T> HeapSize for Vec<T> {
    fn heap_size(&self) -> usize {
        self.capacity() * std::mem::size_of::<T>()
    }
}

impl HeapSize for Abc {
    fn heap_size(&self) -> usize {
        self.a.heap_size() + self.b.heap_size() + self.c.heap_size()
    }
}

impl HeapSize for Witness {
    fn heap_size(&self) -> usize {
        self.input.heap_size() + self.aux.heap_size()
    }
}

impl HeapSize for Density {
    fn heap_size(&self) -> usize {
        self.words.heap_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn density_push_set_count_iter() {
        for len in [0usize, 1, 63, 64, 65, 130] {
            let mut d = Density::new(0);
            for i in 0..len {
                d.push(i % 3 == 0);
            }
            assert_eq!(d.len(), len);
            let expect: Vec<usize> = (0..len).filter(|i| i % 3 == 0).collect();
            assert_eq!(d.iter_ones().collect::<Vec<_>>(), expect);
            assert_eq!(d.count(), expect.len());
            assert!(!d.get(len));
        }
    }

    #[test]
    fn full_density_has_no_stray_bits() {
        let d = Density::full(70);
        assert_eq!(d.count(), 70);
        assert_eq!(d.words()[1], (1u64 << 6) - 1);
        assert_eq!(Density::from_words(vec![u64::MAX; 3], 65).count(), 65);
    }
}
