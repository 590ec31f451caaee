//! The parameters as the stages need them: shared base vectors and the verifying
//! key points, without copying what a bellperson `ParameterSource` already holds.

use std::{ops::Range, sync::Arc};

use blstrs::{G1Affine, G2Affine};
use cuzk_assembly::AssemblyKey;

/// A range of a shared vector of bases: what a bellperson `SourceBuilder` gives
/// (`Arc<Vec<G>>` and an offset), kept without a copy.
#[derive(Clone, Debug)]
pub struct Bases<G> {
    vec: Arc<Vec<G>>,
    range: Range<usize>,
}

impl<G> Bases<G> {
    /// The whole vector.
    pub fn new(vec: Arc<Vec<G>>) -> Self {
        let range = 0..vec.len();
        Self { vec, range }
    }

    /// The bases from `start` to the end of `vec`; `None` if `start` is past the end.
    pub fn from_offset(vec: Arc<Vec<G>>, start: usize) -> Option<Self> {
        (start <= vec.len()).then(|| {
            let range = start..vec.len();
            Self { vec, range }
        })
    }

    pub fn as_slice(&self) -> &[G] {
        &self.vec[self.range.clone()]
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
            let start = b.vec.as_ptr() as usize;
            start..start + std::mem::size_of_val(&b.vec[..])
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

    /// Host memory the base vectors hold (the memory budget counts it once per
    /// parameter set in use). Bases sharing one vector are counted by their range.
    pub fn host_bytes(&self) -> u64 {
        let g1 = std::mem::size_of::<G1Affine>();
        let g2 = std::mem::size_of::<G2Affine>();
        let n1 = self.h.len() + self.l.len() + self.a.len() + self.b_g1.len();
        (n1 * g1 + self.b_g2.len() * g2) as u64
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
