//! The compiled shape of a circuit: three CSR matrices over one coefficient table.

use std::collections::HashMap;
use std::fmt;

use blstrs::Scalar;
use cuzk_alloc::{Density, HeapSize};
use ff::{Field, PrimeField};

use crate::{Deferred, SynthError};

/// Coefficient-table index of `1`: the term is added without a multiplication.
pub const COEFF_ONE: u32 = 0;
/// Coefficient-table index of `-1`: the term is subtracted without a multiplication.
pub const COEFF_MINUS_ONE: u32 = 1;
/// Coefficient-table index of `2`: the term is doubled, not multiplied. Boolean gadgets
/// (`xor`, `and` of bits) put a 2 in A: in a SHA-256 circuit, 31k of A's 122k terms,
/// a third of all the terms that would otherwise need a multiplication.
pub const COEFF_TWO: u32 = 2;

/// One non-zero entry of a matrix: a witness column and the index of its coefficient
/// in the shared table. Column and coefficient sit side by side so that the mat-vec
/// reads one sequential stream per matrix. `repr(C)`: two `u32`s, as a device kernel
/// or a plugin reads them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    pub col: u32,
    pub coeff: u32,
}

/// A sparse matrix in compressed sparse row form. `row_ptr` has one entry more than
/// there are rows; row `r` is `terms[row_ptr[r]..row_ptr[r + 1]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Csr {
    pub row_ptr: Vec<u32>,
    pub terms: Vec<Term>,
}

impl Default for Csr {
    fn default() -> Self {
        Self {
            row_ptr: vec![0],
            terms: Vec::new(),
        }
    }
}

impl Csr {
    pub fn view(&self) -> CsrRef<'_> {
        CsrRef {
            row_ptr: &self.row_ptr,
            terms: &self.terms,
        }
    }

    pub fn num_rows(&self) -> usize {
        self.row_ptr.len() - 1
    }

    /// Closes the current row after its terms were pushed.
    pub fn end_row(&mut self) -> Result<(), Deferred> {
        let end = u32::try_from(self.terms.len()).map_err(|_| Deferred::TooLarge {
            what: "non-zero entries in one matrix",
            count: self.terms.len(),
        })?;
        self.row_ptr.push(end);
        Ok(())
    }

    fn shrink_to_fit(&mut self) {
        self.row_ptr.shrink_to_fit();
        self.terms.shrink_to_fit();
    }

    fn heap_size(&self) -> usize {
        self.row_ptr.heap_size() + self.terms.heap_size()
    }
}

/// The distinct non-zero coefficients of a circuit. Circuits use few: ±1 dominate,
/// then powers of two from bit packing and a few hashing constants, so a table index
/// per entry costs 4 bytes where a coefficient would cost 32.
#[derive(Clone)]
pub(crate) struct CoeffTable {
    pub values: Vec<Scalar>,
    index: HashMap<[u8; 32], u32>,
}

impl Default for CoeffTable {
    fn default() -> Self {
        Self {
            values: vec![Scalar::ONE, -Scalar::ONE, Scalar::ONE.double()],
            index: HashMap::new(),
        }
    }
}

impl CoeffTable {
    /// The table index of `c`, which must be non-zero.
    #[inline]
    pub fn intern(&mut self, c: &Scalar) -> Result<u32, Deferred> {
        if *c == Scalar::ONE {
            return Ok(COEFF_ONE);
        }
        if *c == -Scalar::ONE {
            return Ok(COEFF_MINUS_ONE);
        }
        if *c == Scalar::ONE.double() {
            return Ok(COEFF_TWO);
        }
        let next = self.values.len();
        match self.index.entry(c.to_repr()) {
            std::collections::hash_map::Entry::Occupied(e) => Ok(*e.get()),
            std::collections::hash_map::Entry::Vacant(e) => {
                let i = u32::try_from(next).map_err(|_| Deferred::TooLarge {
                    what: "distinct coefficients",
                    count: next,
                })?;
                e.insert(i);
                self.values.push(*c);
                Ok(i)
            }
        }
    }
}

/// A circuit's rank-1 constraint system, compiled once per circuit shape.
///
/// Columns are `[inputs 0..num_inputs, then aux]`, input 0 being the constant one.
/// Rows are the circuit's constraints followed by one `input_i · 0 = 0` constraint per
/// public input (ONE included), as bellperson appends them. Terms whose coefficient is
/// zero are dropped, so every stored term is a non-zero and the densities follow from
/// the stored terms alone.
#[derive(Clone, PartialEq, Eq)]
pub struct R1cs {
    pub(crate) num_inputs: usize,
    pub(crate) num_aux: usize,
    pub(crate) a: Csr,
    pub(crate) b: Csr,
    pub(crate) c: Csr,
    pub(crate) coeffs: Vec<Scalar>,
    pub(crate) a_aux_density: Density,
    pub(crate) b_input_density: Density,
    pub(crate) b_aux_density: Density,
}

impl fmt::Debug for R1cs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("R1cs")
            .field("num_constraints", &self.num_constraints())
            .field("num_inputs", &self.num_inputs)
            .field("num_aux", &self.num_aux)
            .field("nnz", &self.nnz())
            .field("num_coefficients", &self.coeffs.len())
            .finish()
    }
}

impl R1cs {
    /// Builds the matrices from columns still in recording form (see
    /// [`crate::record`]): input `i` tagged as `INPUT_TAG | i`, aux `j` as `j`.
    /// Appends the public-input constraints and computes the densities.
    pub(crate) fn from_recorded(
        num_inputs: usize,
        num_aux: usize,
        mut mats: [Csr; 3],
        coeffs: Vec<Scalar>,
    ) -> Result<Self, SynthError> {
        let num_vars = num_inputs + num_aux;
        if u32::try_from(num_vars).is_err() {
            return Err(SynthError::TooLarge {
                what: "variables",
                count: num_vars,
            });
        }
        let ni = num_inputs as u32;

        // The recorder tags input columns because inputs may still be allocated after
        // aux variables were used; now both counts are final.
        for m in &mut mats {
            for t in &mut m.terms {
                t.col = if t.col & crate::record::INPUT_TAG != 0 {
                    t.col & !crate::record::INPUT_TAG
                } else {
                    ni + t.col
                };
            }
        }

        let [mut a, mut b, mut c] = mats;
        // bellperson's `input_i * 0 = 0`, which makes every input dense in the A query.
        for i in 0..ni {
            a.terms.push(Term {
                col: i,
                coeff: COEFF_ONE,
            });
            a.end_row()?;
            b.end_row()?;
            c.end_row()?;
        }
        for m in [&mut a, &mut b, &mut c] {
            m.shrink_to_fit();
        }

        let mut a_aux_density = Density::new(num_aux);
        let mut b_input_density = Density::new(num_inputs);
        let mut b_aux_density = Density::new(num_aux);
        for t in &a.terms {
            if t.col >= ni {
                a_aux_density.set((t.col - ni) as usize);
            }
        }
        for t in &b.terms {
            if t.col >= ni {
                b_aux_density.set((t.col - ni) as usize);
            } else {
                b_input_density.set(t.col as usize);
            }
        }

        Ok(Self {
            num_inputs,
            num_aux,
            a,
            b,
            c,
            coeffs,
            a_aux_density,
            b_input_density,
            b_aux_density,
        })
    }

    /// Number of constraints, the appended public-input constraints included.
    pub fn num_constraints(&self) -> usize {
        self.a.num_rows()
    }

    /// The matrices and coefficient table as borrowed slices: what a backend that
    /// evaluates `a, b, c` itself (on a device, or behind the plugin boundary) reads.
    pub fn view(&self) -> R1csRef<'_> {
        R1csRef {
            num_inputs: self.num_inputs,
            num_aux: self.num_aux,
            matrices: [self.a.view(), self.b.view(), self.c.view()],
            coeffs: &self.coeffs,
        }
    }

    /// Number of public inputs, ONE included.
    pub fn num_inputs(&self) -> usize {
        self.num_inputs
    }

    /// Number of private (aux) variables.
    pub fn num_aux(&self) -> usize {
        self.num_aux
    }

    /// Aux variables that appear in A with a non-zero coefficient.
    pub fn a_aux_density(&self) -> &Density {
        &self.a_aux_density
    }

    /// Inputs that appear in B with a non-zero coefficient.
    pub fn b_input_density(&self) -> &Density {
        &self.b_input_density
    }

    /// Aux variables that appear in B with a non-zero coefficient.
    pub fn b_aux_density(&self) -> &Density {
        &self.b_aux_density
    }

    /// Non-zero entries of A, B and C.
    pub fn nnz(&self) -> [usize; 3] {
        [self.a.terms.len(), self.b.terms.len(), self.c.terms.len()]
    }

    /// Number of distinct non-zero coefficients (1, -1 and 2 always counted).
    pub fn num_coefficients(&self) -> usize {
        self.coeffs.len()
    }

    /// Bytes held on the heap.
    pub fn heap_size(&self) -> usize {
        self.a.heap_size()
            + self.b.heap_size()
            + self.c.heap_size()
            + self.coeffs.heap_size()
            + self.a_aux_density.heap_size()
            + self.b_input_density.heap_size()
            + self.b_aux_density.heap_size()
    }
}

impl HeapSize for R1cs {
    fn heap_size(&self) -> usize {
        R1cs::heap_size(self)
    }
}

/// A borrowed compressed-sparse-row matrix: row `r` is
/// `terms[row_ptr[r]..row_ptr[r + 1]]`.
#[derive(Clone, Copy, Debug)]
pub struct CsrRef<'a> {
    pub row_ptr: &'a [u32],
    pub terms: &'a [Term],
}

impl CsrRef<'_> {
    /// Rows (0 for a malformed empty `row_ptr`).
    pub fn num_rows(&self) -> usize {
        self.row_ptr.len().saturating_sub(1)
    }

    #[inline]
    pub(crate) fn row(&self, r: usize) -> &[Term] {
        &self.terms[self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize]
    }
}

/// A compiled R1CS as plain slices ([`R1cs::view`]), or as a backend behind the
/// plugin boundary receives it. Columns are `[inputs, then aux]`; each term's
/// `coeff` indexes `coeffs`, whose first three entries are `1`, `-1` and `2`
/// ([`COEFF_ONE`], [`COEFF_MINUS_ONE`], [`COEFF_TWO`]), which an evaluator may apply
/// without a multiplication.
///
/// A view that did not come from [`R1cs::view`] must pass [`R1csRef::validate`]
/// before its terms index anything: a device kernel reads out of bounds otherwise.
#[derive(Clone, Copy, Debug)]
pub struct R1csRef<'a> {
    pub num_inputs: usize,
    pub num_aux: usize,
    /// A, B, C.
    pub matrices: [CsrRef<'a>; 3],
    pub coeffs: &'a [Scalar],
}

impl R1csRef<'_> {
    pub fn num_constraints(&self) -> usize {
        self.matrices[0].num_rows()
    }

    /// Where the matrices live, for a backend that keeps a device copy per compiled
    /// shape: the address and length of A's terms, which no other live R1CS shares
    /// (a compiled shape is immutable and lives as long as it is referenced).
    pub fn identity(&self) -> (usize, usize) {
        let a = self.matrices[0].terms;
        (a.as_ptr() as usize, a.len())
    }

    /// Bytes of the matrices and table (what a device copy costs).
    pub fn bytes(&self) -> usize {
        let m: usize = self
            .matrices
            .iter()
            .map(|m| std::mem::size_of_val(m.row_ptr) + std::mem::size_of_val(m.terms))
            .sum();
        m + std::mem::size_of_val(self.coeffs)
    }

    /// Checks that every index is in bounds: three matrices of the same number of
    /// rows, each `row_ptr` starting at 0, never decreasing and ending at its
    /// number of terms, every column below `num_inputs + num_aux`, every
    /// coefficient index inside `coeffs`, and the table starting with `1, -1, 2`.
    /// Runs on the caller's rayon pool (a 32 GiB PoRep partition has ~670 million
    /// terms).
    pub fn validate(&self) -> Result<(), SynthError> {
        use rayon::prelude::*;
        let bad = |why: String| Err(SynthError::MalformedR1cs(why));
        let rows = self.num_constraints();
        if self.coeffs.len() < 3
            || self.coeffs[COEFF_ONE as usize] != Scalar::ONE
            || self.coeffs[COEFF_MINUS_ONE as usize] != -Scalar::ONE
            || self.coeffs[COEFF_TWO as usize] != Scalar::ONE.double()
        {
            return bad("the coefficient table does not start with 1, -1, 2".into());
        }
        let vars = self.num_inputs.saturating_add(self.num_aux);
        if u32::try_from(vars).is_err() {
            return bad(format!("{vars} variables outgrow 32-bit columns"));
        }
        let n_coeffs = self.coeffs.len();
        for (name, m) in ["A", "B", "C"].iter().zip(&self.matrices) {
            if m.row_ptr.is_empty() || m.num_rows() != rows {
                return bad(format!("{name} has {} rows, A {rows}", m.num_rows()));
            }
            if m.row_ptr[0] != 0 || m.row_ptr[rows] as usize != m.terms.len() {
                return bad(format!(
                    "{name}'s row pointers span {}..{}, its terms 0..{}",
                    m.row_ptr[0],
                    m.row_ptr[rows],
                    m.terms.len()
                ));
            }
            if m.row_ptr.par_windows(2).any(|w| w[0] > w[1]) {
                return bad(format!("{name}'s row pointers decrease"));
            }
            let out = m
                .terms
                .par_iter()
                .any(|t| t.col as usize >= vars || t.coeff as usize >= n_coeffs);
            if out {
                return bad(format!(
                    "{name} has a term outside {vars} columns or {n_coeffs} coefficients"
                ));
            }
        }
        Ok(())
    }
}
