//! compile + spmv against the oracle (bellperson's `ProvingAssignment`, written out in
//! `common`), witness-only synthesis, shape checks, errors, pools and the throttle.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use bellpepper_core::{Circuit, ConstraintSystem, Index, SynthesisError, Variable};
use blstrs::Scalar;
use common::{reference, Extending, MulChain, Sha};
use cuzk_alloc::HeapSize;
use cuzk_synth::{
    check_shape, check_witness, compile, compile_shape, spmv_parallel, spmv_slices,
    synthesize_witness, synthesize_witness_for, Abc, CsrRef, NoThrottle, R1csRef, SynthError, Term,
    Throttle,
};
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// Compiles `make()`, evaluates it, and compares everything with the oracle; a second
/// and third instance go through the witness-only paths.
fn check_against_reference<C: Circuit<Scalar>>(make: impl Fn() -> C, pool: &rayon::ThreadPool) {
    let want = reference(make()).unwrap();
    let compiled = compile(make()).unwrap();
    let r1cs = &compiled.r1cs;
    assert_eq!(compiled.witness, want.witness());
    assert_eq!(r1cs.num_constraints(), want.a.len());
    assert_eq!(r1cs.num_inputs(), want.input.len());
    assert_eq!(r1cs.num_aux(), want.aux.len());
    assert_eq!(r1cs.nnz(), want.nnz);
    assert_eq!(*r1cs.a_aux_density(), want.a_aux_density.to_density());
    assert_eq!(*r1cs.b_input_density(), want.b_input_density.to_density());
    assert_eq!(*r1cs.b_aux_density(), want.b_aux_density.to_density());

    let abc = spmv_parallel(r1cs, &compiled.witness, pool, &NoThrottle).unwrap();
    assert_eq!(abc, want.abc());
    // Written in place at the final size: no spare capacity.
    assert_eq!(
        abc.heap_size(),
        3 * abc.len() * std::mem::size_of::<Scalar>()
    );
    check_witness(r1cs, &abc).unwrap();
    // The borrowed view (what a backend evaluating a, b, c itself receives) validates
    // and gives the same a, b, c.
    let view = r1cs.view();
    view.validate().unwrap();
    assert_eq!(view.num_constraints(), r1cs.num_constraints());
    let w = &compiled.witness;
    assert_eq!(
        spmv_slices(view, &w.input, &w.aux, pool, &NoThrottle).unwrap(),
        abc
    );

    assert_eq!(compiled.witness.aux.capacity(), compiled.witness.aux.len());
    let w = synthesize_witness(make()).unwrap();
    assert_eq!(w, compiled.witness);
    assert_eq!(w.aux.capacity(), w.aux.len());
    let sized = synthesize_witness_for(r1cs, make()).unwrap();
    assert_eq!(sized, compiled.witness);
    assert_eq!(sized.aux.capacity(), sized.aux.len());
}

#[test]
fn mul_chain_matches_reference() {
    let pool = pool(2);
    for len in (1..=33).chain([64, 256, 1024, 4096]) {
        for publics in [0, 1, 3, 40] {
            check_against_reference(|| MulChain::new(len, publics, len as u64), &pool);
        }
    }
}

#[test]
fn sha256_matches_reference() {
    let pool = pool(2);
    for blocks in 1..=3 {
        check_against_reference(
            || Sha {
                blocks,
                seed: blocks as u64,
            },
            &pool,
        );
    }
}

fn extending(use_extend: bool) -> Extending {
    Extending {
        parts: vec![
            MulChain::new(7, 2, 1),
            MulChain::new(12, 0, 2),
            MulChain::new(33, 5, 3),
            MulChain::new(1, 1, 4),
        ],
        use_extend,
    }
}

#[test]
fn extend_matches_reference_and_in_place_synthesis() {
    let pool = pool(2);
    // The oracle itself: extending is the same as synthesizing in place.
    assert_eq!(
        reference(extending(true)).unwrap(),
        reference(extending(false)).unwrap()
    );
    check_against_reference(|| extending(true), &pool);
    check_against_reference(|| extending(false), &pool);
    assert_eq!(
        compile(extending(true)).unwrap().r1cs,
        compile(extending(false)).unwrap().r1cs
    );
}

/// The use case: the shape compiled from one instance, the witness of another.
#[test]
fn witness_of_another_instance_gives_its_reference() {
    let pool = pool(2);
    let compiled = compile(MulChain::new(100, 3, 1)).unwrap();
    let other = MulChain::new(100, 3, 2);
    let want = reference(other.clone()).unwrap();
    let w = synthesize_witness_for(&compiled.r1cs, other).unwrap();
    assert_ne!(w, compiled.witness);
    let abc = spmv_parallel(&compiled.r1cs, &w, &pool, &NoThrottle).unwrap();
    assert_eq!(abc, want.abc());

    let compiled = compile(Sha { blocks: 2, seed: 1 }).unwrap();
    let other = Sha { blocks: 2, seed: 2 };
    let want = reference(other.clone()).unwrap();
    let w = synthesize_witness(other).unwrap();
    let abc = spmv_parallel(&compiled.r1cs, &w, &pool, &NoThrottle).unwrap();
    assert_eq!(abc, want.abc());
}

#[test]
fn check_witness_finds_the_first_bad_constraint() {
    let pool = pool(2);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let compiled = compile(MulChain::new(300, 2, 5)).unwrap();
    let r1cs = &compiled.r1cs;
    let abc = spmv_parallel(r1cs, &compiled.witness, &pool, &NoThrottle).unwrap();
    let n = abc.len();
    for round in 0..20 {
        let mut bad = abc.clone();
        let mut first = usize::MAX;
        for _ in 0..1 + round % 4 {
            let i = rng.next_u32() as usize % n;
            let v = match rng.next_u32() % 3 {
                0 => &mut bad.a[i],
                1 => &mut bad.b[i],
                _ => &mut bad.c[i],
            };
            // Changing a factor whose partner is zero keeps the constraint satisfied, so
            // the expectation is computed, not assumed.
            *v += common::nonzero(&mut rng);
            if bad.a[i] * bad.b[i] != bad.c[i] {
                first = first.min(i);
            }
        }
        match check_witness(r1cs, &bad) {
            Ok(()) => assert_eq!(first, usize::MAX),
            Err(SynthError::Unsatisfied { constraint }) => assert_eq!(constraint, first),
            Err(e) => panic!("{e}"),
        }
    }

    // A wrong witness value: x0 (aux 0) enters constraint 0, `x0 · x0 = x1`.
    let mut w = compiled.witness.clone();
    w.aux[0] += Scalar::ONE;
    let abc = spmv_parallel(r1cs, &w, &pool, &NoThrottle).unwrap();
    let e = check_witness(r1cs, &abc).unwrap_err();
    assert!(matches!(e, SynthError::Unsatisfied { constraint: 0 }));
    assert_eq!(e.to_string(), "the witness does not satisfy constraint 0");

    let mut short = abc.clone();
    short.c.pop();
    assert!(matches!(
        check_witness(r1cs, &short),
        Err(SynthError::ShapeMismatch {
            what: "constraints",
            ..
        })
    ));
}

#[test]
fn a_circuit_of_another_shape_is_a_shape_mismatch() {
    let pool = pool(1);
    let r1cs = compile(MulChain::new(10, 2, 1)).unwrap().r1cs;

    let longer = synthesize_witness(MulChain::new(11, 2, 1)).unwrap();
    let e = spmv_parallel(&r1cs, &longer, &pool, &NoThrottle).unwrap_err();
    assert!(
        matches!(
            e,
            SynthError::ShapeMismatch {
                what: "aux variables",
                compiled,
                actual,
            } if actual > compiled
        ),
        "{e}"
    );

    let more_inputs = MulChain::new(10, 3, 1);
    assert!(matches!(
        synthesize_witness_for(&r1cs, more_inputs.clone()),
        Err(SynthError::ShapeMismatch {
            what: "inputs",
            compiled: 3,
            actual: 4,
        })
    ));
    let w = synthesize_witness(more_inputs).unwrap();
    assert!(check_shape(&r1cs, &w).is_err());

    // Same variables, one constraint more: only the constraint count tells.
    let extra = MulChain {
        extra: true,
        ..MulChain::new(10, 2, 1)
    };
    let w = synthesize_witness(extra.clone()).unwrap();
    check_shape(&r1cs, &w).unwrap();
    let e = synthesize_witness_for(&r1cs, extra).unwrap_err();
    assert!(matches!(
        e,
        SynthError::ShapeMismatch {
            what: "constraints",
            compiled,
            actual,
        } if actual == compiled + 1
    ));
    assert!(e.to_string().contains("constraints"), "{e}");
}

/// Fails in an allocation after `after` constraints.
struct Failing {
    after: usize,
}

impl Circuit<Scalar> for Failing {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        MulChain::new(self.after, 1, 3).synthesize(cs)?;
        cs.alloc(|| "missing", || Err(SynthesisError::AssignmentMissing))?;
        Ok(())
    }
}

#[test]
fn circuit_errors_propagate() {
    let r1cs = compile(MulChain::new(5, 1, 3)).unwrap().r1cs;
    for after in [0, 5] {
        let is_missing = |r: Result<_, SynthError>| {
            matches!(
                r,
                Err(SynthError::Circuit(SynthesisError::AssignmentMissing))
            )
        };
        assert!(is_missing(compile(Failing { after }).map(|_| ())));
        assert!(is_missing(
            synthesize_witness(Failing { after }).map(|_| ())
        ));
        assert!(is_missing(
            synthesize_witness_for(&r1cs, Failing { after }).map(|_| ())
        ));
    }
    let e = compile(Failing { after: 1 }).unwrap_err();
    assert_eq!(
        e.to_string(),
        "During synthesis, the circuit failed: an assignment for a variable could not be computed"
    );
}

/// Uses a variable that was never allocated (bellperson panics).
struct Unknown {
    variable: Index,
}

impl Circuit<Scalar> for Unknown {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        MulChain::new(4, 2, 3).synthesize(cs)?;
        let v = Variable::new_unchecked(self.variable);
        cs.enforce(|| "bad", |lc| lc + CS::one(), |lc| lc + v, |lc| lc);
        MulChain::new(4, 2, 3).synthesize(cs)
    }
}

#[test]
fn an_unallocated_variable_is_an_error() {
    // MulChain(4, 2) allocates 3 inputs (ONE included), 5 aux, 4 constraints.
    for variable in [Index::Aux(5), Index::Aux(1000), Index::Input(3)] {
        let e = compile(Unknown { variable }).unwrap_err();
        assert!(
            matches!(e, SynthError::UnknownVariable { constraint: 4, variable: v } if v == variable),
            "{e}"
        );
    }
    // The largest allocated ones are fine.
    compile(Unknown {
        variable: Index::Aux(4),
    })
    .unwrap();
    compile(Unknown {
        variable: Index::Input(2),
    })
    .unwrap();
}

/// Extends with a sub-system that lacks the temporary ONE (bellperson panics).
struct ExtendWithoutOne;

impl Circuit<Scalar> for ExtendWithoutOne {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let sub = CS::new();
        cs.extend(&sub);
        Ok(())
    }
}

#[test]
fn extending_without_one_is_an_error() {
    assert!(matches!(
        compile(ExtendWithoutOne),
        Err(SynthError::ExtendWithoutOne)
    ));
    assert!(matches!(
        synthesize_witness(ExtendWithoutOne),
        Err(SynthError::ExtendWithoutOne)
    ));
}

#[derive(Default)]
struct Counting {
    calls: AtomicUsize,
    max_worker: AtomicUsize,
}

impl Throttle for Counting {
    fn checkpoint(&self, worker: usize) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.max_worker.fetch_max(worker, Ordering::Relaxed);
    }
}

#[test]
fn pools_agree_and_the_throttle_sees_every_stretch_of_rows() {
    let compiled = compile(MulChain::new(150_000, 3, 9)).unwrap();
    let r1cs = &compiled.r1cs;
    let n = r1cs.num_constraints();
    let mut results: Vec<Abc> = Vec::new();
    for threads in [1, 2] {
        let throttle = Counting::default();
        let abc = spmv_parallel(r1cs, &compiled.witness, &pool(threads), &throttle).unwrap();
        // A checkpoint at least every 64 chunks of 1024 rows.
        assert!(throttle.calls.load(Ordering::Relaxed) >= n.div_ceil(64 * 1024));
        assert!(throttle.max_worker.load(Ordering::Relaxed) < threads);
        results.push(abc);
    }
    assert_eq!(results[0], results[1]);
    check_witness(r1cs, &results[0]).unwrap();
}

#[test]
fn heap_size_counts_the_matrices() {
    let r1cs = compile(MulChain::new(1000, 2, 1)).unwrap().r1cs;
    let nnz: usize = r1cs.nnz().iter().sum();
    // 8 bytes per non-zero, 4 per row pointer of each matrix.
    assert!(r1cs.heap_size() >= 8 * nnz + 3 * 4 * (r1cs.num_constraints() + 1));
}

/// A multiplication chain whose values may be missing, as a blank circuit's are
/// (parameter generation synthesizes circuits with every value `None`).
struct MaybeBlank {
    len: usize,
    x: Option<Scalar>,
}

impl Circuit<Scalar> for MaybeBlank {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x_val = self.x;
        let x = cs.alloc(|| "x", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        let (mut acc, mut acc_val) = (x, x_val);
        for i in 0..self.len {
            let next_val = acc_val.zip(x_val).map(|(a, b)| a * b);
            let next = if i + 1 == self.len {
                cs.alloc_input(
                    || "out",
                    || next_val.ok_or(SynthesisError::AssignmentMissing),
                )?
            } else {
                cs.alloc(
                    || "acc",
                    || next_val.ok_or(SynthesisError::AssignmentMissing),
                )?
            };
            cs.enforce(|| "mul", |lc| lc + acc, |lc| lc + x, |lc| lc + next);
            // A coefficient other than ±1 and 2, so the table is exercised too.
            cs.enforce(
                || "lin",
                |lc| lc + (Scalar::from(7u64), acc) + CS::one(),
                |lc| lc + CS::one(),
                |lc| lc + (Scalar::from(7u64), acc) + CS::one(),
            );
            (acc, acc_val) = (next, next_val);
        }
        Ok(())
    }
}

#[test]
fn a_blank_circuit_compiles_to_the_shape_of_a_full_one() {
    let full = compile(MaybeBlank {
        len: 9,
        x: Some(Scalar::from(3u64)),
    })
    .unwrap()
    .r1cs;
    // The values are never asked for: a blank circuit compiles.
    let blank = compile_shape(MaybeBlank { len: 9, x: None }).unwrap();
    assert_eq!(blank, full);
    assert_eq!(blank.num_inputs(), 2);
    assert_eq!(blank.num_aux(), 9);
    // The full compile still asks, and a missing value is still its error.
    assert!(matches!(
        compile(MaybeBlank { len: 9, x: None }),
        Err(SynthError::Circuit(SynthesisError::AssignmentMissing))
    ));
    // A witness computed for the blank-compiled shape fits it.
    let w = synthesize_witness_for(
        &blank,
        MaybeBlank {
            len: 9,
            x: Some(Scalar::from(5u64)),
        },
    )
    .unwrap();
    let abc = spmv_parallel(&blank, &w, &pool(2), &NoThrottle).unwrap();
    check_witness(&blank, &abc).unwrap();
}

/// A view with any index out of bounds is refused before anything is read through
/// it, and a witness of another shape is a shape mismatch.
#[test]
fn malformed_views_and_witnesses_are_refused() {
    let compiled = compile(MulChain::new(20, 2, 3)).unwrap();
    let good = compiled.r1cs.view();
    let w = &compiled.witness;
    let pool = pool(2);
    let malformed = |v: R1csRef<'_>| match spmv_slices(v, &w.input, &w.aux, &pool, &NoThrottle) {
        Err(SynthError::MalformedR1cs(why)) => why,
        other => panic!("expected MalformedR1cs, got {other:?}"),
    };
    // A column past the variables.
    let mut terms: Vec<Term> = good.matrices[1].terms.to_vec();
    terms[0].col = (good.num_inputs + good.num_aux) as u32;
    let mut v = good;
    v.matrices[1] = CsrRef {
        row_ptr: good.matrices[1].row_ptr,
        terms: &terms,
    };
    assert!(malformed(v).contains("outside"), "{}", malformed(v));
    // A coefficient index past the table.
    let mut terms: Vec<Term> = good.matrices[0].terms.to_vec();
    terms[0].coeff = good.coeffs.len() as u32;
    let mut v = good;
    v.matrices[0].terms = &terms;
    malformed(v);
    // Row pointers that decrease, or do not end at the terms' count.
    let mut ptr: Vec<u32> = good.matrices[2].row_ptr.to_vec();
    let last = ptr.len() - 1;
    ptr.swap(1, last);
    let mut v = good;
    v.matrices[2].row_ptr = &ptr;
    malformed(v);
    let mut v = good;
    v.matrices[2].terms = &good.matrices[2].terms[1..];
    malformed(v);
    // Matrices of different row counts; a table without 1, -1, 2 first.
    let mut v = good;
    v.matrices[1].row_ptr = &good.matrices[1].row_ptr[..2];
    malformed(v);
    let mut v = good;
    v.coeffs = &good.coeffs[..2];
    malformed(v);
    // A witness of another shape.
    match spmv_slices(good, &w.input, &w.aux[1..], &pool, &NoThrottle) {
        Err(SynthError::ShapeMismatch { what, .. }) => assert_eq!(what, "aux variables"),
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
}
