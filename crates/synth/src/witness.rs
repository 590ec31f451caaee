//! The witness constraint system: what each proof pays for synthesis.

use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use cuzk_alloc::Witness;

use crate::Deferred;

/// Records variable values and nothing else. `enforce` neither calls the
/// linear-combination closures nor evaluates anything, it only counts: bellperson's
/// witness values come only from the allocation closures, and the shape, built once by
/// [`crate::compile`], turns the witness into `a, b, c` far faster than building and
/// evaluating every combination again.
pub(crate) struct WitnessCs {
    pub(crate) input: Vec<Scalar>,
    pub(crate) aux: Vec<Scalar>,
    pub(crate) constraints: usize,
    pub(crate) error: Option<Deferred>,
}

impl WitnessCs {
    /// A system whose vectors already hold room for the expected counts, so that a
    /// multi-gigabyte witness grows without reallocation or spare capacity.
    pub fn with_capacity(inputs: usize, aux: usize) -> Self {
        Self {
            input: Vec::with_capacity(inputs),
            aux: Vec::with_capacity(aux),
            constraints: 0,
            error: None,
        }
    }

    pub(crate) fn into_witness(self) -> Witness {
        Witness {
            input: self.input,
            aux: self.aux,
        }
    }
}

impl ConstraintSystem<Scalar> for WitnessCs {
    type Root = Self;

    fn new() -> Self {
        Self::with_capacity(0, 0)
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        Ok(Variable(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        Ok(Variable(Index::Input(self.input.len() - 1)))
    }

    #[inline]
    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
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

    /// As bellperson's `ProvingAssignment::extend`: `other`'s first input, a stand-in
    /// for ONE, is dropped; everything else is appended.
    fn extend(&mut self, other: &Self) {
        if let Some(e) = other.error {
            self.error.get_or_insert(e);
        }
        if self.input.is_empty() || other.input.is_empty() {
            self.error.get_or_insert(Deferred::ExtendWithoutOne);
            return;
        }
        self.input.extend_from_slice(&other.input[1..]);
        self.aux.extend_from_slice(&other.aux);
        self.constraints += other.constraints;
    }
}
