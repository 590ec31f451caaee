//! Witness synthesis of a circuit whose parts are independent, on many cores.
//!
//! A Filecoin PoRep partition is a short prefix (the public commitments) followed by
//! 18 challenge proofs, each of which reads only the prefix's values: synthesized in
//! turn they cost ~40 s on one core for a 32 GiB partition. bellperson's own answer is
//! the *extendable* constraint system (`ConstraintSystem::extend`): synthesize each
//! part into a fresh system whose first input stands in for ONE, then append the parts
//! in order, dropping each stand-in. [`synthesize_witness_split`] does exactly that
//! with the parts on the caller's pool, and writes each part's values straight into
//! its window of the final witness.

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;
use rayon::ThreadPool;

use crate::witness::{AuxValues, WitnessCs};
use crate::{check_shape, run_witness, R1cs, SynthError, Witness};

/// A circuit that can be synthesized as a prefix followed by independent parts.
///
/// The contract: each part's synthesis *begins* with exactly the prefix's synthesis
/// (the same inputs, aux values and constraints, in order), then allocates its own
/// variables, which depend on nothing any other part allocated; synthesizing the
/// prefix once and then every part without its copy of the prefix, in order, gives the
/// whole circuit's synthesis. (A PoRep partition's parts are filecoin-proofs' own
/// one-challenge circuits, which each begin with the commitments' prefix.) Each part's
/// copy of the prefix is checked against the prefix, value for value, and dropped.
pub trait SplitCircuit {
    type Prefix: Circuit<Scalar>;
    type Part: Circuit<Scalar> + Send;
    /// Whether every part allocates as many aux variables as every other (a PoRep
    /// partition's challenges do). Then each part writes its values straight into its
    /// window of the witness: no part holds a system of its own, and nothing is
    /// copied. A part that does not fill its window exactly fails the witness with a
    /// shape mismatch.
    const UNIFORM_PARTS: bool = false;
    /// The prefix alone, and the parts, in synthesis order.
    fn split(self) -> Result<(Self::Prefix, Vec<Self::Part>), SynthesisError>;
    /// Where the parts are not uniform but their sizes can be told before they are
    /// synthesized (a SnapDeals partition: one apex part, then challenges of one
    /// shape): each part's count of aux variables after its copy of the prefix, in
    /// order, given `own`, the aux variables of all the parts together (the compiled
    /// shape's less the prefix's). Each part then writes into a window of its own size,
    /// as uniform parts do, and a part that does not fill it exactly fails the witness
    /// with a shape mismatch. `None` (the default): each part in a system of its own,
    /// copied.
    fn part_sizes(_parts: &[Self::Part], _own: usize) -> Option<Vec<usize>> {
        None
    }
}

/// What a part's synthesis left, less its values: its inputs, its count of aux
/// variables and of constraints (each with the prefix's copy).
struct PartCounts {
    input: Vec<Scalar>,
    aux: usize,
    constraints: usize,
}

/// The witness of `circuit` for the compiled `r1cs`: the prefix on this thread, the
/// parts in parallel on `pool`, then appended in order without their prefixes. The
/// result is the witness of [`crate::synthesize_witness_for`] on the whole circuit,
/// value for value, and is checked against the shape the same way (inputs, aux
/// variables, constraints).
///
/// Memory: with [`SplitCircuit::UNIFORM_PARTS`] or [`SplitCircuit::part_sizes`], the
/// witness alone. Otherwise, while
/// the parts are appended, each part's values exist twice (its own system and its
/// window of the result); a part's system is freed once it is copied.
#[tracing::instrument(name = "synthesis", skip_all, fields(split = true))]
pub fn synthesize_witness_split<C: SplitCircuit>(
    r1cs: &R1cs,
    circuit: C,
    pool: &ThreadPool,
) -> Result<Witness, SynthError> {
    let (prefix, parts) = circuit.split()?;
    let mut cs = WitnessCs::with_capacity(r1cs.num_inputs(), 0);
    cs.alloc_input(|| "", || Ok(Scalar::ONE))?;
    prefix.synthesize(&mut cs)?;
    if let Some(e) = cs.error {
        return Err(e.into());
    }
    let own = r1cs.num_aux().saturating_sub(cs.aux.len());
    let sizes = if C::UNIFORM_PARTS {
        Some(vec![own / parts.len().max(1); parts.len()])
    } else {
        C::part_sizes(&parts, own)
    };
    match sizes {
        Some(sizes) => windowed(r1cs, cs, parts, &sizes, pool),
        None => copied(r1cs, cs, parts, pool),
    }
}

/// The parts each in a system of its own, appended once all are done.
fn copied<P: Circuit<Scalar> + Send>(
    r1cs: &R1cs,
    mut cs: WitnessCs,
    parts: Vec<P>,
    pool: &ThreadPool,
) -> Result<Witness, SynthError> {
    let (prefix_inputs, prefix_aux) = (cs.input.len(), cs.aux.len());
    let n = parts.len().max(1);
    // An even share of what the prefix leaves: the exact size of each part's system
    // where the parts have one shape.
    let aux_hint = prefix_aux + r1cs.num_aux().saturating_sub(prefix_aux) / n;
    let done: Vec<WitnessCs> = pool.install(|| {
        parts
            .into_par_iter()
            .map(|part| {
                let p = run_witness(part, WitnessCs::with_capacity(prefix_inputs, aux_hint))?;
                if p.aux.get(..prefix_aux) != Some(&cs.aux[..]) {
                    return Err(SynthError::SplitPrefix);
                }
                Ok(p)
            })
            .collect::<Result<_, SynthError>>()
    })?;
    let counts: Vec<PartCounts> = done
        .iter()
        .map(|p| PartCounts {
            input: p.input.clone(),
            aux: p.aux.len(),
            constraints: p.constraints,
        })
        .collect();
    check_parts(r1cs, &cs, prefix_aux, &counts)?;
    for p in &counts {
        cs.input.extend_from_slice(&p.input[prefix_inputs..]);
    }
    let mut witness = cs.into_witness();
    append_parallel(
        &mut witness.aux,
        done.into_iter().map(|p| (p.aux, prefix_aux)).collect(),
        pool,
    );
    check_shape(r1cs, &witness)?;
    Ok(witness)
}

/// The parts each writing into its window of the witness, of `sizes[i]` aux values
/// (uniform parts: `(aux variables − prefix's) / parts` each, as the compiled shape
/// sizes them).
fn windowed<P: Circuit<Scalar> + Send>(
    r1cs: &R1cs,
    mut cs: WitnessCs,
    parts: Vec<P>,
    sizes: &[usize],
    pool: &ThreadPool,
) -> Result<Witness, SynthError> {
    let (prefix_inputs, prefix_aux) = (cs.input.len(), cs.aux.len());
    if sizes.len() != parts.len() {
        return Err(SynthError::ShapeMismatch {
            what: "window sizes of the parts",
            compiled: parts.len(),
            actual: sizes.len(),
        });
    }
    let mut aux = std::mem::take(&mut cs.aux);
    // The windows are first written with zeros by a parallel fill, so that none is
    // ever uninitialised (this crate has no `unsafe`); the fill faults the pages in on
    // every thread of the pool.
    let own: usize = sizes.iter().sum();
    aux.reserve_exact(own);
    pool.install(|| aux.par_extend(rayon::iter::repeat_n(Scalar::ZERO, own)));
    let (prefix_values, mut rest) = aux.split_at_mut(prefix_aux);
    let mut windows = Vec::with_capacity(parts.len());
    for &size in sizes {
        let (w, r) = std::mem::take(&mut rest).split_at_mut(size);
        windows.push(w);
        rest = r;
    }
    let prefix_values = &*prefix_values;
    let counts: Vec<PartCounts> = pool.install(|| {
        parts
            .into_par_iter()
            .zip(windows)
            .map(|(part, window)| {
                let p = WitnessCs::in_window(prefix_inputs, prefix_values, window);
                let p = run_witness(part, p)?;
                if p.aux.prefix_differs || p.aux.len() < prefix_aux {
                    return Err(SynthError::SplitPrefix);
                }
                Ok(PartCounts {
                    input: p.input,
                    aux: p.aux.len(),
                    constraints: p.constraints,
                })
            })
            .collect::<Result<_, SynthError>>()
    })?;
    check_parts(r1cs, &cs, prefix_aux, &counts)?;
    // The counts add up to the shape's; each part must also have filled its window.
    if let Some((p, &size)) = counts
        .iter()
        .zip(sizes)
        .find(|(p, &size)| p.aux - prefix_aux != size)
    {
        return Err(SynthError::ShapeMismatch {
            what: "aux variables of a part",
            compiled: size,
            actual: p.aux - prefix_aux,
        });
    }
    for p in &counts {
        cs.input.extend_from_slice(&p.input[prefix_inputs..]);
    }
    cs.aux = aux;
    let witness = cs.into_witness();
    check_shape(r1cs, &witness)?;
    Ok(witness)
}

/// Each part began with the prefix (its inputs and constraints; its aux values are
/// checked as they are allocated), and together with the prefix the parts have the
/// compiled shape's counts.
fn check_parts(
    r1cs: &R1cs,
    prefix: &WitnessCs,
    prefix_aux: usize,
    parts: &[PartCounts],
) -> Result<(), SynthError> {
    let prefix_inputs = prefix.input.len();
    if parts.iter().any(|p| {
        p.input.get(..prefix_inputs) != Some(&prefix.input[..])
            || p.constraints < prefix.constraints
    }) {
        return Err(SynthError::SplitPrefix);
    }
    let input_total = prefix_inputs
        + parts
            .iter()
            .map(|p| p.input.len() - prefix_inputs)
            .sum::<usize>();
    let aux_total = prefix_aux + parts.iter().map(|p| p.aux - prefix_aux).sum::<usize>();
    for (what, compiled, actual) in [
        ("inputs", r1cs.num_inputs(), input_total),
        ("aux variables", r1cs.num_aux(), aux_total),
    ] {
        if compiled != actual {
            return Err(SynthError::ShapeMismatch {
                what,
                compiled,
                actual,
            });
        }
    }
    // As in `synthesize_witness_for`: the compiled shape has one constraint per input.
    let constraints = prefix.constraints
        + input_total
        + parts
            .iter()
            .map(|p| p.constraints - prefix.constraints)
            .sum::<usize>();
    if constraints != r1cs.num_constraints() {
        return Err(SynthError::ShapeMismatch {
            what: "constraints",
            compiled: r1cs.num_constraints(),
            actual: constraints,
        });
    }
    Ok(())
}

/// Appends each `(part, skip)`'s `part[skip..]` to `dst`, in order, each part copied
/// by its own tasks into its window (the copy runs at the memory bandwidth of the
/// pool, not of one core) and freed once copied. The new elements are first written
/// with zeros by a parallel fill, so that no window is ever uninitialised (this crate
/// has no `unsafe`).
fn append_parallel(dst: &mut Vec<Scalar>, parts: Vec<(Vec<Scalar>, usize)>, pool: &ThreadPool) {
    const CHUNK: usize = 1 << 16;
    let start = dst.len();
    let total: usize = parts.iter().map(|(p, skip)| p.len() - skip).sum();
    dst.reserve_exact(total);
    pool.install(|| {
        dst.par_extend(rayon::iter::repeat_n(Scalar::ZERO, total));
        let mut windows = Vec::with_capacity(parts.len());
        let mut rest = &mut dst[start..];
        for (p, skip) in &parts {
            let (w, r) = rest.split_at_mut(p.len() - skip);
            windows.push(w);
            rest = r;
        }
        windows
            .into_par_iter()
            .zip(parts.into_par_iter())
            .for_each(|(w, (p, skip))| {
                w.par_chunks_mut(CHUNK)
                    .zip(p[skip..].par_chunks(CHUNK))
                    .for_each(|(d, s)| d.copy_from_slice(s));
            });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellpepper_core::num::AllocatedNum;

    /// x, then per part: a chain of squarings from x's value, and one input.
    struct Chain {
        x: u64,
        parts: usize,
        len: usize,
    }

    struct Prefix(u64);
    impl Circuit<Scalar> for Prefix {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(self.0)))?;
            x.inputize(cs.namespace(|| "x input"))
        }
    }

    struct Part {
        x: u64,
        i: usize,
        len: usize,
    }
    impl Circuit<Scalar> for Part {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            Prefix(self.x).synthesize(cs)?;
            self.own(cs)
        }
    }

    impl Part {
        fn own<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let mut v = AllocatedNum::alloc(cs.namespace(|| "start"), || {
                Ok(Scalar::from(self.x) + Scalar::from(self.i as u64))
            })?;
            for k in 0..self.len {
                v = v.square(cs.namespace(|| format!("sq {k}")))?;
            }
            v.inputize(cs.namespace(|| "out"))
        }
    }

    impl Circuit<Scalar> for Chain {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            Prefix(self.x).synthesize(cs)?;
            for i in 0..self.parts {
                Part {
                    x: self.x,
                    i,
                    len: self.len,
                }
                .own(&mut cs.namespace(|| format!("part {i}")))?;
            }
            Ok(())
        }
    }

    impl SplitCircuit for Chain {
        type Prefix = Prefix;
        type Part = Part;
        fn split(self) -> Result<(Prefix, Vec<Part>), SynthesisError> {
            let parts = (0..self.parts)
                .map(|i| Part {
                    x: self.x,
                    i,
                    len: self.len,
                })
                .collect();
            Ok((Prefix(self.x), parts))
        }
    }

    /// The same circuit, its parts declared uniform (written into their windows).
    struct Uniform<S>(S);
    impl<S: SplitCircuit> SplitCircuit for Uniform<S> {
        type Prefix = S::Prefix;
        type Part = S::Part;
        const UNIFORM_PARTS: bool = true;
        fn split(self) -> Result<(S::Prefix, Vec<S::Part>), SynthesisError> {
            self.0.split()
        }
    }

    fn pool() -> ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .expect("pool")
    }

    #[test]
    fn split_witness_is_the_sequential_witness() {
        let shape = crate::compile_shape(Chain {
            x: 0,
            parts: 7,
            len: 50,
        })
        .expect("compile");
        let c = || Chain {
            x: 5,
            parts: 7,
            len: 50,
        };
        let sequential = crate::synthesize_witness_for(&shape, c()).expect("sequential");
        let split = synthesize_witness_split(&shape, c(), &pool()).expect("split");
        assert_eq!(split.input, sequential.input);
        assert_eq!(split.aux, sequential.aux);
        assert_eq!(split.input.len(), 1 + 1 + 7);
        let uniform = synthesize_witness_split(&shape, Uniform(c()), &pool()).expect("uniform");
        assert_eq!(uniform, sequential);
        // And the witness satisfies the compiled constraints.
        let abc = crate::spmv_parallel(&shape, &split, &pool(), &crate::NoThrottle).expect("spmv");
        crate::check_witness(&shape, &abc).expect("satisfied");
    }

    #[test]
    fn split_of_another_shape_is_refused() {
        let shape = crate::compile_shape(Chain {
            x: 0,
            parts: 7,
            len: 50,
        })
        .expect("compile");
        let other = |parts| Chain {
            x: 5,
            parts,
            len: 50,
        };
        match synthesize_witness_split(&shape, other(6), &pool()) {
            Err(SynthError::ShapeMismatch { what: "inputs", .. }) => {}
            other => panic!("expected an input-count mismatch, got {other:?}"),
        }
        // Uniform parts: six windows of a seventh more than a part's size each.
        match synthesize_witness_split(&shape, Uniform(other(6)), &pool()) {
            Err(SynthError::ShapeMismatch { what: "inputs", .. }) => {}
            other => panic!("expected an input-count mismatch, got {other:?}"),
        }
    }

    /// Parts of two sizes whose counts add up to the shape's: the copying path takes
    /// them; declared uniform, the first overflows its window and is refused.
    #[test]
    fn uneven_parts_are_refused_when_declared_uniform() {
        let shape = crate::compile_shape(Chain {
            x: 0,
            parts: 2,
            len: 50,
        })
        .expect("compile");
        struct Uneven;
        impl SplitCircuit for Uneven {
            type Prefix = Prefix;
            type Part = Part;
            fn split(self) -> Result<(Prefix, Vec<Part>), SynthesisError> {
                let part = |i, len| Part { x: 5, i, len };
                Ok((Prefix(5), vec![part(0, 51), part(1, 49)]))
            }
        }
        let w = synthesize_witness_split(&shape, Uneven, &pool()).expect("copied");
        assert_eq!(w.aux.len(), shape.num_aux());
        match synthesize_witness_split(&shape, Uniform(Uneven), &pool()) {
            Err(SynthError::ShapeMismatch {
                what: "aux variables of a part",
                compiled: 51,
                actual: 52,
            }) => {}
            other => panic!("expected a part-size mismatch, got {other:?}"),
        }
    }

    /// Parts of two sizes, each in a window of its declared size: the sequential
    /// witness; declared with the sizes swapped, refused.
    #[test]
    fn uneven_parts_in_windows_of_their_sizes_are_the_sequential_witness() {
        let shape = crate::compile_shape(Chain {
            x: 0,
            parts: 2,
            len: 50,
        })
        .expect("compile");
        let sequential = crate::synthesize_witness_for(
            &shape,
            Chain {
                x: 5,
                parts: 2,
                len: 50,
            },
        )
        .expect("sequential");
        // A part of `len` squarings allocates its start and `len` squares.
        struct Declared;
        impl SplitCircuit for Declared {
            type Prefix = Prefix;
            type Part = Part;
            fn split(self) -> Result<(Prefix, Vec<Part>), SynthesisError> {
                let part = |i, len| Part { x: 5, i, len };
                Ok((Prefix(5), vec![part(0, 50), part(1, 50)]))
            }
            fn part_sizes(parts: &[Part], _own: usize) -> Option<Vec<usize>> {
                Some(parts.iter().map(|p| p.len + 1).collect())
            }
        }
        let w = synthesize_witness_split(&shape, Declared, &pool()).expect("windows");
        assert_eq!(w, sequential);

        struct Wrong;
        impl SplitCircuit for Wrong {
            type Prefix = Prefix;
            type Part = Part;
            fn split(self) -> Result<(Prefix, Vec<Part>), SynthesisError> {
                let part = |i, len| Part { x: 5, i, len };
                Ok((Prefix(5), vec![part(0, 51), part(1, 49)]))
            }
            fn part_sizes(parts: &[Part], _own: usize) -> Option<Vec<usize>> {
                Some(parts.iter().rev().map(|p| p.len + 1).collect())
            }
        }
        match synthesize_witness_split(&shape, Wrong, &pool()) {
            Err(SynthError::ShapeMismatch {
                what: "aux variables of a part",
                compiled: 50,
                actual: 52,
            }) => {}
            other => panic!("expected a part-size mismatch, got {other:?}"),
        }
    }

    #[test]
    fn a_failing_part_fails_the_witness() {
        struct Failing;
        impl Circuit<Scalar> for Failing {
            fn synthesize<CS: ConstraintSystem<Scalar>>(
                self,
                cs: &mut CS,
            ) -> Result<(), SynthesisError> {
                AllocatedNum::<Scalar>::alloc(cs.namespace(|| "missing"), || {
                    Err(SynthesisError::AssignmentMissing)
                })?;
                Ok(())
            }
        }
        struct S;
        impl SplitCircuit for S {
            type Prefix = Prefix;
            type Part = Failing;
            fn split(self) -> Result<(Prefix, Vec<Failing>), SynthesisError> {
                Ok((Prefix(1), vec![Failing, Failing]))
            }
        }
        let shape = crate::compile_shape(Prefix(0)).expect("compile");
        match synthesize_witness_split(&shape, S, &pool()) {
            Err(SynthError::Circuit(SynthesisError::AssignmentMissing)) => {}
            other => panic!("expected the part's error, got {other:?}"),
        }
    }

    #[test]
    fn a_part_without_the_prefix_is_refused() {
        struct Bare(Part);
        impl Circuit<Scalar> for Bare {
            fn synthesize<CS: ConstraintSystem<Scalar>>(
                self,
                cs: &mut CS,
            ) -> Result<(), SynthesisError> {
                self.0.own(cs)
            }
        }
        struct S;
        impl SplitCircuit for S {
            type Prefix = Prefix;
            type Part = Bare;
            fn split(self) -> Result<(Prefix, Vec<Bare>), SynthesisError> {
                Ok((Prefix(5), vec![Bare(Part { x: 5, i: 0, len: 3 })]))
            }
        }
        let shape = crate::compile_shape(Chain {
            x: 0,
            parts: 1,
            len: 3,
        })
        .expect("compile");
        match synthesize_witness_split(&shape, S, &pool()) {
            Err(SynthError::SplitPrefix) => {}
            other => panic!("expected SplitPrefix, got {other:?}"),
        }
        match synthesize_witness_split(&shape, Uniform(S), &pool()) {
            Err(SynthError::SplitPrefix) => {}
            other => panic!("expected SplitPrefix, got {other:?}"),
        }
    }
}
