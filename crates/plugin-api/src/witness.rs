//! A partition handed to a backend as its witness and the compiled matrices
//! (`BackendMod::{abc_eval, stage_witness, prove_partition_witness}`): the backend
//! evaluates `a = A·w, b = B·w, c = C·w` itself. For the 32 GiB PoRep shape on the
//! H200 the host then never holds a partition's 12.5 GB of `a, b, c`, only its
//! witness (a third of that).
//!
//! The matrices cross as borrowed slices of the host's compiled R1CS, as they lie
//! in memory: nothing is copied per call, so a backend that keeps a device copy per
//! compiled shape can recognise the shape by its address
//! (`cuzk_synth::R1csRef::identity`).
//!
//! The backend must not trust them: a buggy or hostile host could send a column or
//! coefficient index out of range, which a device kernel would read out of bounds.
//! The backend validates (`cuzk_synth::R1csRef::validate`) before any index is used:
//! the CPU backend in `spmv_slices` on every call, a device backend once per shape
//! it uploads. A malformed view comes back as [`crate::ErrorCode::SHAPE`].

use abi_stable::std_types::{ROption, RSlice};
use abi_stable::StableAbi;

use crate::{G1AffineRepr, G2AffineRepr, ScalarRepr, SplitMsmC};

/// Where a backend evaluates `a, b, c` from a witness: `cuzk_gpu_backend::AbcEval`
/// across the boundary. A `u32` so that a value from a newer plugin is a value,
/// not UB; the host reads one it does not know as [`AbcEvalC::NO`] (and logs it).
#[repr(transparent)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AbcEvalC(pub u32);

impl AbcEvalC {
    /// Not offered: the host evaluates `a, b, c` and hands them over.
    pub const NO: Self = Self(0);
    /// On the host's CPU, inside the plugin (the CPU backend).
    pub const HOST: Self = Self(1);
    /// On the device: the host never holds `a, b, c`.
    pub const DEVICE: Self = Self(2);
}

/// One non-zero entry of a compiled matrix: its witness column and the index of its
/// coefficient in [`R1csRefC::coeffs`]. The layout of `cuzk_synth::Term` (two
/// `u32`s, `repr(C)`), so the host's terms cross without a copy (feature `synth`:
/// `Repr for Term`, layout checked at compile time).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TermC {
    pub col: u32,
    pub coeff: u32,
}

/// A compressed-sparse-row matrix: row `r` is `terms[row_ptr[r]..row_ptr[r + 1]]`
/// (`cuzk_synth::CsrRef`).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct CsrRefC<'a> {
    pub row_ptr: RSlice<'a, u32>,
    pub terms: RSlice<'a, TermC>,
}

/// A compiled R1CS lent by the host (`cuzk_synth::R1csRef`): columns are
/// `[inputs, then aux]`, each term's `coeff` indexes `coeffs`, whose first three
/// entries are `1, -1, 2`. Unchecked: see the module documentation.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct R1csRefC<'a> {
    pub num_inputs: u64,
    pub num_aux: u64,
    pub a: CsrRefC<'a>,
    pub b: CsrRefC<'a>,
    pub c: CsrRefC<'a>,
    /// The coefficient table, Montgomery form.
    pub coeffs: RSlice<'a, ScalarRepr>,
}

/// `cuzk_gpu_backend::WitnessJobRef` across the boundary: the witness
/// (`input, aux`, columns `[input, aux]`) and the R1CS to evaluate `a, b, c` from,
/// then the MSM queries of [`crate::PartitionJobRefC`]. Everything is lent: the
/// host keeps it allocated and unmoved until the call returns (and, for `input`
/// and `aux` it staged, until its `unstage`).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct WitnessJobRefC<'a> {
    pub r1cs: R1csRefC<'a>,
    pub input: RSlice<'a, ScalarRepr>,
    pub aux: RSlice<'a, ScalarRepr>,
    pub h_bases: RSlice<'a, G1AffineRepr>,
    pub l: SplitMsmC<'a, G1AffineRepr>,
    pub a: SplitMsmC<'a, G1AffineRepr>,
    pub b_g1: SplitMsmC<'a, G1AffineRepr>,
    pub b_g2: ROption<SplitMsmC<'a, G2AffineRepr>>,
    /// As in [`crate::PartitionJobC::resident`].
    pub resident: ROption<u64>,
}

#[cfg(feature = "synth")]
pub use self::synth::r1cs_to_c;

#[cfg(feature = "synth")]
mod synth {
    use super::*;
    use crate::{AbiError, Repr};
    use blstrs::Scalar;
    use cuzk_synth::{CsrRef, R1csRef, Term};

    // `Term` and `TermC`: two `u32`s at the same offsets, so every bit pattern of
    // one is a valid value of the other.
    const _: () = assert!(std::mem::size_of::<Term>() == std::mem::size_of::<TermC>());
    const _: () = assert!(std::mem::align_of::<Term>() == std::mem::align_of::<TermC>());
    const _: () = assert!(std::mem::offset_of!(Term, col) == std::mem::offset_of!(TermC, col));
    const _: () = assert!(std::mem::offset_of!(Term, coeff) == std::mem::offset_of!(TermC, coeff));

    // SAFETY: both are `repr(C)` structs of two `u32`s with the same size, alignment
    // and field offsets (asserted above); any bit pattern is valid for either.
    unsafe impl Repr for Term {
        type Repr = TermC;
    }

    fn csr_to_c<'a>(m: &CsrRef<'a>) -> CsrRefC<'a> {
        CsrRefC {
            row_ptr: m.row_ptr.into(),
            terms: Term::slice_to_repr(m.terms).into(),
        }
    }

    fn csr_from_c<'a>(m: &CsrRefC<'a>) -> CsrRef<'a> {
        CsrRef {
            row_ptr: m.row_ptr.as_slice(),
            terms: Term::slice_from_repr(m.terms.as_slice()),
        }
    }

    /// The host's view as it crosses, without a copy.
    pub fn r1cs_to_c<'a>(r: &R1csRef<'a>) -> R1csRefC<'a> {
        let [a, b, c] = &r.matrices;
        R1csRefC {
            num_inputs: r.num_inputs as u64,
            num_aux: r.num_aux as u64,
            a: csr_to_c(a),
            b: csr_to_c(b),
            c: csr_to_c(c),
            coeffs: Scalar::slice_to_repr(r.coeffs).into(),
        }
    }

    impl<'a> R1csRefC<'a> {
        /// The in-process view, without a copy. Only the counts are checked (they
        /// must fit a `usize`); the indices are not: validate before use (see the
        /// module documentation).
        pub fn to_ref(&self) -> Result<R1csRef<'a>, AbiError> {
            let count = |n: u64, what: &str| {
                usize::try_from(n)
                    .map_err(|_| AbiError::shape(format!("{n} {what} do not fit in memory")))
            };
            Ok(R1csRef {
                num_inputs: count(self.num_inputs, "inputs")?,
                num_aux: count(self.num_aux, "aux variables")?,
                matrices: [
                    csr_from_c(&self.a),
                    csr_from_c(&self.b),
                    csr_from_c(&self.c),
                ],
                coeffs: Scalar::slice_from_repr(self.coeffs.as_slice()),
            })
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn terms_cross_in_place_and_round_trip() {
            let terms = [
                Term { col: 7, coeff: 2 },
                Term {
                    col: u32::MAX,
                    coeff: 0,
                },
            ];
            let row_ptr = [0u32, 1, 2];
            let coeffs = [Scalar::from(1u64), -Scalar::from(1u64), Scalar::from(2u64)];
            let empty = CsrRef {
                row_ptr: &[0, 0, 0],
                terms: &[],
            };
            let r = R1csRef {
                num_inputs: 3,
                num_aux: 5,
                matrices: [
                    CsrRef {
                        row_ptr: &row_ptr,
                        terms: &terms,
                    },
                    empty,
                    empty,
                ],
                coeffs: &coeffs,
            };
            let c = r1cs_to_c(&r);
            assert_eq!(c.a.terms.as_ptr().cast::<Term>(), terms.as_ptr());
            assert_eq!(
                c.a.terms[1],
                TermC {
                    col: u32::MAX,
                    coeff: 0
                }
            );
            let back = c.to_ref().unwrap();
            assert_eq!((back.num_inputs, back.num_aux), (3, 5));
            assert_eq!(back.matrices[0].terms, &terms);
            assert_eq!(back.matrices[0].row_ptr, &row_ptr);
            assert_eq!(back.matrices[1].row_ptr, &[0, 0, 0]);
            assert_eq!(back.coeffs, &coeffs);
            assert_eq!(back.identity(), r.identity());
        }
    }
}
