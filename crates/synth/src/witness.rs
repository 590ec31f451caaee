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

/// The witness system of one part of a split circuit whose parts are uniform
/// ([`crate::SplitCircuit::UNIFORM_PARTS`]): the part's first aux values (its copy of
/// the prefix) are compared with the prefix's and dropped, the rest written straight
/// into the part's window of the whole witness. Values past the window are counted
/// and dropped: the caller reports the part's size as a shape mismatch.
pub(crate) struct PartCs<'w> {
    pub(crate) input: Vec<Scalar>,
    prefix: &'w [Scalar],
    window: &'w mut [Scalar],
    /// Aux variables allocated, the prefix's copy included.
    pub(crate) aux: usize,
    pub(crate) constraints: usize,
    /// A value of the prefix's copy differed from the prefix's.
    pub(crate) prefix_differs: bool,
    pub(crate) error: Option<Deferred>,
}

impl<'w> PartCs<'w> {
    pub(crate) fn new(inputs: usize, prefix: &'w [Scalar], window: &'w mut [Scalar]) -> Self {
        Self {
            input: Vec::with_capacity(inputs),
            prefix,
            window,
            aux: 0,
            constraints: 0,
            prefix_differs: false,
            error: None,
        }
    }
}

impl ConstraintSystem<Scalar> for PartCs<'_> {
    type Root = Self;

    fn new() -> Self {
        Self::new(0, &[], &mut [])
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = f()?;
        let k = self.aux;
        self.aux += 1;
        match k.checked_sub(self.prefix.len()) {
            None => self.prefix_differs |= v != self.prefix[k],
            Some(own) => {
                if let Some(slot) = self.window.get_mut(own) {
                    *slot = v;
                }
            }
        }
        Ok(Variable(Index::Aux(k)))
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

    /// Not extensible: a part's values go to a window of fixed size. Gadgets only
    /// extend systems that say they are; one that does anyway fails the witness.
    fn is_extensible() -> bool {
        false
    }

    fn extend(&mut self, _: &Self) {
        self.error.get_or_insert(Deferred::NotExtensible);
    }
}
