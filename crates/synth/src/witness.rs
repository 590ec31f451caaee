//! The witness constraint system: what each proof pays for synthesis.

use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use cuzk_alloc::Witness;

use crate::Deferred;

/// Where a witness system keeps its aux values.
pub(crate) trait AuxValues: Default + Send {
    /// Whether `ConstraintSystem::extend` can append another system's values.
    const EXTENSIBLE: bool;
    /// Keeps the next aux value.
    fn push(&mut self, v: Scalar);
    /// Aux values allocated so far.
    fn len(&self) -> usize;
    /// Appends `other`'s values (only called where `EXTENSIBLE`).
    fn append(&mut self, other: &Self);
}

impl AuxValues for Vec<Scalar> {
    const EXTENSIBLE: bool = true;
    fn push(&mut self, v: Scalar) {
        Vec::push(self, v)
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn append(&mut self, other: &Self) {
        self.extend_from_slice(other)
    }
}

/// The aux values of one part of a split circuit whose parts are uniform
/// ([`crate::SplitCircuit::UNIFORM_PARTS`]): the part's first values (its copy of the
/// prefix) are compared with the prefix's and dropped, the rest written straight
/// into the part's window of the whole witness. Values past the window are counted
/// and dropped: the caller reports the part's size as a shape mismatch. Not
/// extensible: the window has a fixed size.
#[derive(Default)]
pub(crate) struct Window<'w> {
    prefix: &'w [Scalar],
    window: &'w mut [Scalar],
    len: usize,
    /// A value of the prefix's copy differed from the prefix's.
    pub(crate) prefix_differs: bool,
}

impl<'w> Window<'w> {
    pub(crate) fn new(prefix: &'w [Scalar], window: &'w mut [Scalar]) -> Self {
        Self {
            prefix,
            window,
            len: 0,
            prefix_differs: false,
        }
    }
}

impl AuxValues for Window<'_> {
    const EXTENSIBLE: bool = false;
    fn push(&mut self, v: Scalar) {
        match self.len.checked_sub(self.prefix.len()) {
            None => self.prefix_differs |= v != self.prefix[self.len],
            Some(own) => {
                if let Some(slot) = self.window.get_mut(own) {
                    *slot = v;
                }
            }
        }
        self.len += 1;
    }
    fn len(&self) -> usize {
        self.len
    }
    fn append(&mut self, _: &Self) {}
}

/// Records variable values and nothing else. `enforce` neither calls the
/// linear-combination closures nor evaluates anything, it only counts: bellperson's
/// witness values come only from the allocation closures, and the shape, built once by
/// [`crate::compile`], turns the witness into `a, b, c` far faster than building and
/// evaluating every combination again. The aux values go to a vector, or to a part's
/// window of a witness ([`Window`]).
pub(crate) struct WitnessCs<A = Vec<Scalar>> {
    pub(crate) input: Vec<Scalar>,
    pub(crate) aux: A,
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

impl<'w> WitnessCs<Window<'w>> {
    /// A part's system writing into `window` (see [`Window`]).
    pub(crate) fn in_window(inputs: usize, prefix: &'w [Scalar], window: &'w mut [Scalar]) -> Self {
        Self {
            input: Vec::with_capacity(inputs),
            aux: Window::new(prefix, window),
            constraints: 0,
            error: None,
        }
    }
}

impl<V: AuxValues> ConstraintSystem<Scalar> for WitnessCs<V> {
    type Root = Self;

    fn new() -> Self {
        Self {
            input: Vec::new(),
            aux: V::default(),
            constraints: 0,
            error: None,
        }
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
        V::EXTENSIBLE
    }

    /// As bellperson's `ProvingAssignment::extend`: `other`'s first input, a stand-in
    /// for ONE, is dropped; everything else is appended. Gadgets extend only systems
    /// that say they are extensible; one that extends a window anyway fails the
    /// witness.
    fn extend(&mut self, other: &Self) {
        if let Some(e) = other.error {
            self.error.get_or_insert(e);
        }
        if !V::EXTENSIBLE {
            self.error.get_or_insert(Deferred::NotExtensible);
            return;
        }
        if self.input.is_empty() || other.input.is_empty() {
            self.error.get_or_insert(Deferred::ExtendWithoutOne);
            return;
        }
        self.input.extend_from_slice(&other.input[1..]);
        self.aux.append(&other.aux);
        self.constraints += other.constraints;
    }
}
