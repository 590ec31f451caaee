//! The parameters as the stages need them: shared base vectors and the verifying
//! key points, without copying what a bellperson `ParameterSource` already holds.

use std::{ops::Range, sync::Arc};

use blstrs::{G1Affine, G2Affine};
use cuzk_assembly::AssemblyKey;

/// Where a parameter set's points live: owned vectors (decoded into anonymous
/// memory) or a memory-mapped points file (`cuzk_params::points`), whose pages the
/// kernel reads on first use and may drop under memory pressure.
pub trait BaseStore<G>: Send + Sync {
    fn points(&self) -> &[G];
    /// Whether the points are file-backed pages (reclaimable) rather than
    /// anonymous memory.
    fn is_mapped(&self) -> bool {
        false
    }
}

impl<G: Send + Sync> BaseStore<G> for Vec<G> {
    fn points(&self) -> &[G] {
        self
    }
}

/// A range of a shared vector of bases: what a bellperson `SourceBuilder` gives
/// (`Arc<Vec<G>>` and an offset), or a mapped query, kept without a copy.
#[derive(Clone)]
pub struct Bases<G> {
    vec: Arc<dyn BaseStore<G>>,
    range: Range<usize>,
}

impl<G> std::fmt::Debug for Bases<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bases")
            .field("range", &self.range)
            .field("mapped", &self.vec.is_mapped())
            .finish()
    }
}

impl<G: Send + Sync + 'static> Bases<G> {
    /// The whole vector.
    pub fn new(vec: Arc<Vec<G>>) -> Self {
        Self::stored(vec)
    }

    /// The bases from `start` to the end of `vec`; `None` if `start` is past the end.
    pub fn from_offset(vec: Arc<Vec<G>>, start: usize) -> Option<Self> {
        let len = vec.len();
        (start <= len).then(|| Self {
            vec,
            range: start..len,
        })
    }

    /// All the points of `store` (a mapped query, say).
    pub fn stored(store: Arc<dyn BaseStore<G>>) -> Self {
        let range = 0..store.points().len();
        Self { vec: store, range }
    }
}

impl<G> Bases<G> {
    /// Whether these bases are pages of a mapped file.
    pub fn is_mapped(&self) -> bool {
        self.vec.is_mapped()
    }

    pub fn as_slice(&self) -> &[G] {
        &self.vec.points()[self.range.clone()]
    }

    pub fn len(&self) -> usize {
        self.range.len()
    }

    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// All the bases, if there are exactly `n`; else an error naming the query.
    ///
    /// Exact, not "at least": parameters for another circuit of the same domain
    /// size (a SHA chain's for a multiplication chain's, say) have other query
    /// lengths, and would otherwise give a proof that does not verify.
    pub fn exactly(&self, query: &'static str, n: usize) -> Result<&[G], SrsError> {
        if self.len() == n {
            Ok(self.as_slice())
        } else {
            Err(SrsError::BaseCount {
                query,
                have: self.len(),
                need: n,
            })
        }
    }
}

/// A parameter set in the form the stages use.
///
/// Each query's bases are laid out as bellperson lays them out: the dense inputs,
/// then the dense aux, so a query's MSM takes a prefix of its vector.
#[derive(Clone, Debug)]
pub struct Srs {
    pub key: AssemblyKey,
    /// Number of IC points in the verifying key (public inputs, the one included).
    pub ic_len: usize,
    pub h: Bases<G1Affine>,
    pub l: Bases<G1Affine>,
    pub a: Bases<G1Affine>,
    pub b_g1: Bases<G1Affine>,
    pub b_g2: Bases<G2Affine>,
}

impl Srs {
    /// The host address ranges of the base vectors behind the queries (whole
    /// vectors, each once): what a backend keeps device copies of, told to forget
    /// them when the set is dropped.
    pub fn host_ranges(&self) -> Vec<Range<usize>> {
        fn range<G>(b: &Bases<G>) -> Range<usize> {
            let all = b.vec.points();
            let start = all.as_ptr() as usize;
            start..start + std::mem::size_of_val(all)
        }
        let mut out = vec![
            range(&self.h),
            range(&self.l),
            range(&self.a),
            range(&self.b_g1),
            range(&self.b_g2),
        ];
        out.retain(|r| !r.is_empty());
        out.sort_by_key(|r| r.start);
        out.dedup();
        out
    }

    /// Anonymous host memory the base vectors hold (the memory budget counts it
    /// once per parameter set in use). Bases sharing one vector are counted by
    /// their range. Mapped bases ([`Srs::mapped_bytes`]) are not in it: their
    /// pages are the kernel's page cache, read back from the points file when
    /// dropped, so they cost a cgroup reclaimable memory, never an OOM kill.
    pub fn host_bytes(&self) -> u64 {
        self.bytes_where(false)
    }

    /// Bytes of the bases that are pages of a mapped points file.
    pub fn mapped_bytes(&self) -> u64 {
        self.bytes_where(true)
    }

    fn bytes_where(&self, mapped: bool) -> u64 {
        let g1 = std::mem::size_of::<G1Affine>();
        let g2 = std::mem::size_of::<G2Affine>();
        let n1: usize = [&self.h, &self.l, &self.a, &self.b_g1]
            .iter()
            .filter(|b| b.is_mapped() == mapped)
            .map(|b| b.len())
            .sum();
        let n2 = if self.b_g2.is_mapped() == mapped {
            self.b_g2.len()
        } else {
            0
        };
        (n1 * g1 + n2 * g2) as u64
    }
}

/// The parameters do not fit the circuit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SrsError {
    #[error("the parameters' {query} query has {have} bases but the circuit needs {need}: were these parameters generated for another circuit?")]
    BaseCount {
        query: &'static str,
        have: usize,
        need: usize,
    },
    #[error("the parameters' h query has {have} bases but a circuit of {constraints} constraints (domain {domain}) needs exactly {need}: were these parameters generated for another circuit?")]
    HLength {
        have: usize,
        need: usize,
        constraints: usize,
        domain: usize,
    },
    #[error("the parameters' verifying key has {have} IC points but the circuit has {need} public inputs (the one included)")]
    IcLength { have: usize, need: usize },
}
