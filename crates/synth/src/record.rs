//! The recording constraint system: one synthesis pass that keeps both the shape
//! (every linear combination, as CSR rows) and the witness.

use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use cuzk_alloc::Witness;
use ff::Field;

use crate::r1cs::{CoeffTable, Csr, R1cs, Term};
use crate::{Deferred, SynthError};

/// Marks an input column while recording. Inputs and aux variables interleave freely
/// during synthesis, so their final columns (`[inputs, aux]`) are only known at the end;
/// until then an input column is `INPUT_TAG | index` and an aux column is its index.
pub(crate) const INPUT_TAG: u32 = 1 << 31;

/// Records the R1CS shape and, unless it records the shape only, the witness.
/// `enforce` evaluates the linear-combination closures and appends one row to each
/// matrix; errors that bellperson would panic on (a variable that does not exist yet,
/// an index past 32 bits) are kept and reported when synthesis ends, since `enforce`
/// cannot return them.
///
/// In shape-only mode ([`Recorder::shape_only`]) the allocation closures are never
/// called, as bellperson's `KeypairAssembly` never calls them: a blank circuit (every
/// value `None`, as parameter generation synthesizes it) compiles, where a value
/// closure would fail with `AssignmentMissing`.
pub(crate) struct Recorder {
    num_inputs: usize,
    num_aux: usize,
    /// The witness values, `None` in shape-only mode.
    values: Option<Witness>,
    mats: [Csr; 3],
    coeffs: CoeffTable,
    error: Option<Deferred>,
}

impl Recorder {
    /// Records shape and witness.
    pub fn with_values() -> Self {
        Self {
            num_inputs: 0,
            num_aux: 0,
            values: Some(Witness {
                input: Vec::new(),
                aux: Vec::new(),
            }),
            mats: Default::default(),
            coeffs: CoeffTable::default(),
            error: None,
        }
    }

    /// Records the shape only; allocation closures are not called.
    pub fn shape_only() -> Self {
        Self {
            values: None,
            ..Self::with_values()
        }
    }

    fn fail(&mut self, e: Deferred) {
        self.error.get_or_insert(e);
    }

    fn num_constraints(&self) -> usize {
        self.mats[0].num_rows()
    }

    fn check_count(&mut self, what: &'static str, count: usize) {
        if count > INPUT_TAG as usize {
            self.fail(Deferred::TooLarge { what, count });
        }
    }

    /// Appends `lc` as the next row of matrix `m`. Zero coefficients are dropped: they
    /// add nothing to the value and bellperson does not count them in the densities.
    fn push_row(&mut self, m: usize, lc: &LinearCombination<Scalar>, constraint: usize) {
        let (ni, na) = (self.num_inputs, self.num_aux);
        let mut error = None;
        let mat = &mut self.mats[m];
        let coeffs = &mut self.coeffs;
        let vars = lc
            .iter_inputs()
            .map(|(&i, c)| (i, c, true))
            .chain(lc.iter_aux().map(|(&i, c)| (i, c, false)));
        for (i, c, is_input) in vars {
            if c.is_zero_vartime() {
                continue;
            }
            // The tag check at allocation keeps `i` below 2^31 whenever `i < ni` or `i < na`.
            let col = match (is_input, i < ni, i < na) {
                (true, true, _) => i as u32 | INPUT_TAG,
                (false, _, true) => i as u32,
                _ => {
                    let variable = if is_input {
                        Index::Input(i)
                    } else {
                        Index::Aux(i)
                    };
                    error.get_or_insert(Deferred::UnknownVariable {
                        constraint,
                        variable,
                    });
                    continue;
                }
            };
            match coeffs.intern(c) {
                Ok(coeff) => mat.terms.push(Term { col, coeff }),
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
        if let Err(e) = mat.end_row() {
            error.get_or_insert(e);
        }
        if let Some(e) = error {
            self.fail(e);
        }
    }

    /// Ends synthesis: reports a kept error, else appends the public-input constraints
    /// and returns the compiled shape and the witness (`None` in shape-only mode).
    pub fn finish(self) -> Result<(R1cs, Option<Witness>), SynthError> {
        if let Some(e) = self.error {
            return Err(e.into());
        }
        let values = self.values.map(|mut w| {
            // Growth by doubling leaves up to half the capacity unused, and the memory
            // budget counts capacity. Shrinking a large block is an in-place `mremap`.
            w.input.shrink_to_fit();
            w.aux.shrink_to_fit();
            w
        });
        let r1cs =
            R1cs::from_recorded(self.num_inputs, self.num_aux, self.mats, self.coeffs.values)?;
        Ok((r1cs, values))
    }
}

impl ConstraintSystem<Scalar> for Recorder {
    type Root = Self;

    fn new() -> Self {
        Self::with_values()
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        if let Some(w) = &mut self.values {
            w.aux.push(f()?);
        }
        self.num_aux += 1;
        self.check_count("aux variables", self.num_aux);
        Ok(Variable(Index::Aux(self.num_aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        if let Some(w) = &mut self.values {
            w.input.push(f()?);
        }
        self.num_inputs += 1;
        self.check_count("inputs", self.num_inputs);
        Ok(Variable(Index::Input(self.num_inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        if self.error.is_some() {
            // The result is an error already; stop growing the matrices.
            return;
        }
        // Each combination is dropped before the next is built, so peak memory holds one.
        let constraint = self.num_constraints();
        self.push_row(0, &a(LinearCombination::zero()), constraint);
        self.push_row(1, &b(LinearCombination::zero()), constraint);
        self.push_row(2, &c(LinearCombination::zero()), constraint);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    fn is_extensible() -> bool {
        true
    }

    /// Appends `other` as bellperson's `ProvingAssignment::extend` does: its first input
    /// is a stand-in for ONE and becomes this system's input 0, its other inputs and its
    /// aux variables follow this system's, and its constraints follow this system's.
    fn extend(&mut self, other: &Self) {
        if let Some(e) = other.error {
            let e = match e {
                Deferred::UnknownVariable {
                    constraint,
                    variable,
                } => Deferred::UnknownVariable {
                    constraint: constraint + self.num_constraints(),
                    variable,
                },
                e => e,
            };
            self.fail(e);
        }
        if self.num_inputs == 0 || other.num_inputs == 0 {
            self.fail(Deferred::ExtendWithoutOne);
        }
        if self.error.is_some() {
            return;
        }
        let in_off = self.num_inputs as u32 - 1;
        let aux_off = self.num_aux as u32;
        self.check_count("inputs", self.num_inputs + other.num_inputs - 1);
        self.check_count("aux variables", self.num_aux + other.num_aux);
        if self.error.is_some() {
            return;
        }

        let mut remap = Vec::with_capacity(other.coeffs.values.len());
        for c in &other.coeffs.values {
            match self.coeffs.intern(c) {
                Ok(i) => remap.push(i),
                Err(e) => return self.fail(e),
            }
        }
        for (mine, theirs) in self.mats.iter_mut().zip(&other.mats) {
            let base = mine.terms.len();
            mine.terms.extend(theirs.terms.iter().map(|t| Term {
                col: if t.col & INPUT_TAG == 0 {
                    t.col + aux_off
                } else if t.col == INPUT_TAG {
                    // Other's temporary ONE is this system's ONE.
                    INPUT_TAG
                } else {
                    t.col + in_off
                },
                coeff: remap[t.coeff as usize],
            }));
            if u32::try_from(mine.terms.len()).is_err() {
                let count = mine.terms.len();
                return self.fail(Deferred::TooLarge {
                    what: "non-zero entries in one matrix",
                    count,
                });
            }
            let base = base as u32;
            mine.row_ptr
                .extend(theirs.row_ptr[1..].iter().map(|&p| p + base));
        }
        self.num_inputs += other.num_inputs - 1;
        self.num_aux += other.num_aux;
        match (&mut self.values, &other.values) {
            (Some(mine), Some(theirs)) => {
                mine.input.extend_from_slice(&theirs.input[1..]);
                mine.aux.extend_from_slice(&theirs.aux);
            }
            // `ConstraintSystem::new` makes systems that keep values, so a shape-only
            // system only ever meets such a one here; their values are not wanted.
            (None, _) => {}
            // A system that keeps values extended by a shape-only one cannot happen
            // through the public API (only `compile_shape` makes one, as the root).
            (Some(_), None) => self.fail(Deferred::ExtendWithoutOne),
        }
    }
}

/// A [`Recorder`] in shape-only mode as a type of its own, so that the sub-systems an
/// extensible circuit creates with `CS::new()` (storage-proofs' PoSt circuit
/// synthesizes its sectors in parallel that way) are shape-only too: a blank PoSt
/// circuit then compiles, where a `Recorder`'s sub-system would call a value closure
/// and fail with `AssignmentMissing`.
pub(crate) struct ShapeRecorder(pub(crate) Recorder);

impl ConstraintSystem<Scalar> for ShapeRecorder {
    type Root = Self;

    fn new() -> Self {
        ShapeRecorder(Recorder::shape_only())
    }

    fn alloc<F, A, AR>(&mut self, a: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.0.alloc(a, f)
    }

    fn alloc_input<F, A, AR>(&mut self, a: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.0.alloc_input(a, f)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, n: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.0.enforce(n, a, b, c)
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    fn is_extensible() -> bool {
        true
    }

    fn extend(&mut self, other: &Self) {
        self.0.extend(&other.0)
    }
}
