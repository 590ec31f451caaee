//! Synthesis: a circuit's R1CS is compiled once into CSR matrices; each proof then
//! only computes the witness and evaluates `a = A·w`, `b = B·w`, `c = C·w` with a
//! parallel sparse matrix-vector product.
//!
//! # Why compile the shape
//!
//! bellperson synthesizes every proof the same way: each `enforce` builds three
//! `LinearCombination`s (heap-allocated, sorted, merged), evaluates them against the
//! assignment so far, and updates three density trackers. For a PoRep partition that
//! is ~130 million constraints of allocation-heavy, single-threaded work per proof,
//! although the combinations are the same for every proof of a circuit shape: only the
//! values of the variables change. So the combinations are recorded once ([`compile`])
//! into compressed-sparse-row matrices over a small deduplicated coefficient table,
//! with the densities, which depend on the shape alone. Each later proof runs the
//! circuit through a constraint system that keeps the allocated values and skips the
//! combinations ([`synthesize_witness`]), then multiplies the matrices by the witness
//! on many cores ([`spmv_parallel`]). Field arithmetic is exact, so summing terms in
//! another order gives the same `a, b, c` as bellperson, bit for bit.
//!
//! The cost of the split: a circuit whose constraints themselves depend on the witness
//! values (a data-dependent branch) would be evaluated with the compiled shape. Such a
//! circuit cannot be proven with Groth16 anyway (the proving key fixes the shape), but a
//! mis-keyed shape cache is a real risk, so shapes are checked: [`spmv_parallel`]
//! refuses a witness whose input or aux count differs from the compiled one, and
//! [`synthesize_witness_for`] also compares the number of constraints; a mismatch is
//! [`SynthError::ShapeMismatch`].
//!
//! Architecture invariant: `synth` knows nothing about proving keys, GPUs or the
//! scheduler; it turns circuits into `R1cs`, `Witness` and `Abc` and nothing else. It
//! owns no threads: the caller passes the pool.

#![forbid(unsafe_code)]

mod r1cs;
mod record;
pub mod sha256;
mod split;
mod spmv;
mod witness;

use bellpepper_core::{Circuit, ConstraintSystem, Index, SynthesisError};
use blstrs::Scalar;
use ff::Field;

pub use cuzk_alloc::{Abc, Density, Witness};
pub use r1cs::{CsrRef, R1cs, R1csRef, Term, COEFF_MINUS_ONE, COEFF_ONE, COEFF_TWO};
pub use split::{synthesize_witness_split, SplitCircuit};
pub use spmv::{check_witness, spmv_parallel, spmv_slices, NoThrottle, Throttle};

/// The errors of synthesis.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The circuit's own code returned an error (typically a missing assignment).
    #[error("During synthesis, the circuit failed: {0}")]
    Circuit(#[from] SynthesisError),
    /// A witness or an `a, b, c` does not have the compiled circuit's shape: the circuit
    /// differs from the one that was compiled.
    #[error("During synthesis, the circuit's shape differed from the compiled one: {actual} {what} in this proof, {compiled} compiled")]
    ShapeMismatch {
        /// `"inputs"`, `"aux variables"` or `"constraints"`.
        what: &'static str,
        compiled: usize,
        actual: usize,
    },
    /// `a[i] · b[i] ≠ c[i]` (see [`check_witness`]).
    #[error("the witness does not satisfy constraint {constraint}")]
    Unsatisfied { constraint: usize },
    /// A count outgrew the 32-bit indices of the CSR matrices (2^31 inputs or aux
    /// variables, 2^32 variables or non-zeros in one matrix).
    #[error("During synthesis, the circuit outgrew 32-bit matrix indices: {count} {what}")]
    TooLarge { what: &'static str, count: usize },
    /// A constraint used a variable that was not allocated (bellperson panics here).
    #[error(
        "During synthesis, constraint {constraint} used {variable:?}, which was never allocated"
    )]
    UnknownVariable { constraint: usize, variable: Index },
    /// `ConstraintSystem::extend` was called with (or on) a system without the leading
    /// ONE input that bellperson's `extend` drops (bellperson panics here).
    #[error(
        "During synthesis, a constraint system was extended with one that has no leading ONE input"
    )]
    ExtendWithoutOne,
    /// `ConstraintSystem::extend` was called on a system that says it is not
    /// extensible (a uniform part of a [`SplitCircuit`]).
    #[error("During synthesis, a constraint system that is not extensible was extended")]
    NotExtensible,
    /// A [`SplitCircuit`]'s part did not begin with its prefix's synthesis (the
    /// split does not describe the circuit).
    #[error(
        "During synthesis, a part of a split circuit did not begin with the prefix's variables"
    )]
    SplitPrefix,
    /// A borrowed R1CS ([`R1csRef`]) whose indices are out of bounds (one that did
    /// not come from a compiled [`R1cs`]: a plugin's caller, say).
    #[error("malformed R1CS: {0}")]
    MalformedR1cs(String),
}

/// An error noticed inside `enforce` or `extend`, which cannot return one; kept in
/// the constraint system and reported when synthesis ends.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Deferred {
    UnknownVariable { constraint: usize, variable: Index },
    TooLarge { what: &'static str, count: usize },
    ExtendWithoutOne,
    NotExtensible,
}

impl From<Deferred> for SynthError {
    fn from(d: Deferred) -> Self {
        match d {
            Deferred::UnknownVariable {
                constraint,
                variable,
            } => SynthError::UnknownVariable {
                constraint,
                variable,
            },
            Deferred::TooLarge { what, count } => SynthError::TooLarge { what, count },
            Deferred::ExtendWithoutOne => SynthError::ExtendWithoutOne,
            Deferred::NotExtensible => SynthError::NotExtensible,
        }
    }
}

/// A circuit's compiled shape and the witness of the synthesis that compiled it.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub r1cs: R1cs,
    pub witness: Witness,
}

/// One synthesis pass recording shape and witness together (the first proof of a
/// shape). Slower than [`synthesize_witness`]: it builds every linear combination.
/// Memory: 8 bytes per non-zero, 12 per constraint, plus the witness.
#[tracing::instrument(name = "synthesis", skip_all, fields(compile = true))]
pub fn compile<C: Circuit<Scalar>>(circuit: C) -> Result<Compiled, SynthError> {
    let mut cs = record::Recorder::with_values();
    cs.alloc_input(|| "", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    let (r1cs, witness) = cs.finish()?;
    Ok(Compiled {
        r1cs,
        // `with_values` keeps the values, so there is always a witness here.
        witness: witness.unwrap_or_default(),
    })
}

/// The shape alone, from a circuit that may carry no values: the allocation closures
/// are never called (as bellperson's parameter generator never calls them), so a
/// *blank* circuit, whose every value is `None`, compiles. This is how a proof type's
/// R1CS is compiled once, at start-up, before any input exists; it is the same R1CS
/// [`compile`] records from a circuit with values, for a circuit whose constraints do
/// not depend on its values (every Groth16 circuit, since the proving key fixes the
/// shape). Memory: the matrices only, no witness.
#[tracing::instrument(
    name = "synthesis",
    skip_all,
    fields(compile = true, shape_only = true)
)]
pub fn compile_shape<C: Circuit<Scalar>>(circuit: C) -> Result<R1cs, SynthError> {
    let mut cs = record::ShapeRecorder(record::Recorder::shape_only());
    cs.alloc_input(|| "", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    Ok(cs.0.finish()?.0)
}

/// Witness only: `alloc`/`alloc_input` record values, `enforce` is skipped (only
/// counted). The witness vectors grow as synthesis goes; when the shape is known, use
/// [`synthesize_witness_for`].
#[tracing::instrument(name = "synthesis", skip_all)]
pub fn synthesize_witness<C: Circuit<Scalar>>(circuit: C) -> Result<Witness, SynthError> {
    let mut w = run_witness(circuit, witness::WitnessCs::new())?.into_witness();
    // Growth by doubling leaves up to half the capacity unused, and the memory budget
    // counts capacity. Shrinking a large block is an in-place `mremap`.
    w.input.shrink_to_fit();
    w.aux.shrink_to_fit();
    Ok(w)
}

/// [`synthesize_witness`] for a circuit of a compiled shape: the witness vectors are
/// allocated at their final size up front (no reallocation, no spare capacity on a
/// multi-gigabyte witness), and the result is checked against the shape, the number of
/// constraints included.
#[tracing::instrument(name = "synthesis", skip_all)]
pub fn synthesize_witness_for<C: Circuit<Scalar>>(
    r1cs: &R1cs,
    circuit: C,
) -> Result<Witness, SynthError> {
    let cs = witness::WitnessCs::with_capacity(r1cs.num_inputs(), r1cs.num_aux());
    let cs = run_witness(circuit, cs)?;
    let constraints = cs.constraints + cs.input.len();
    let witness = cs.into_witness();
    check_shape(r1cs, &witness)?;
    if constraints != r1cs.num_constraints() {
        return Err(SynthError::ShapeMismatch {
            what: "constraints",
            compiled: r1cs.num_constraints(),
            actual: constraints,
        });
    }
    Ok(witness)
}

/// `circuit` synthesized into `cs` after the input standing for ONE, with any error
/// the system deferred.
pub(crate) fn run_witness<C: Circuit<Scalar>, A: witness::AuxValues>(
    circuit: C,
    mut cs: witness::WitnessCs<A>,
) -> Result<witness::WitnessCs<A>, SynthError> {
    cs.alloc_input(|| "", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    match cs.error {
        Some(e) => Err(e.into()),
        None => Ok(cs),
    }
}

/// Checks that a witness has the R1cs's shape: as many inputs (ONE included) and aux
/// variables.
pub fn check_shape(r1cs: &R1cs, witness: &Witness) -> Result<(), SynthError> {
    for (what, compiled, actual) in [
        ("inputs", r1cs.num_inputs(), witness.input.len()),
        ("aux variables", r1cs.num_aux(), witness.aux.len()),
    ] {
        if compiled != actual {
            return Err(SynthError::ShapeMismatch {
                what,
                compiled,
                actual,
            });
        }
    }
    Ok(())
}
