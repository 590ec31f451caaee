//! `a = A·w, b = B·w, c = C·w`: the per-proof half of synthesis.

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::r1cs::{CsrRef, R1cs, R1csRef, COEFF_MINUS_ONE, COEFF_ONE, COEFF_TWO};
use crate::{check_shape, Abc, SynthError, Witness};

/// Where a stage that shares the machine can slow the mat-vec down: every worker calls
/// [`Throttle::checkpoint`] with its index in the pool between chunks of rows, and an
/// implementation may block there (a later plugin parks some workers while `b_g2_msm`
/// needs the cores).
pub trait Throttle: Send + Sync {
    fn checkpoint(&self, worker: usize);
}

/// The throttle that never waits.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoThrottle;

impl Throttle for NoThrottle {
    #[inline]
    fn checkpoint(&self, _worker: usize) {}
}

/// Rows a worker takes at least at a time. Large enough that splitting costs nothing
/// next to the field arithmetic (a row is ~3 to 10 additions), small enough that
/// work stealing evens out circuits whose long rows cluster (bit packing).
const CHUNK_ROWS: usize = 1024;
/// A worker checkpoints at the start of each piece of work and then every this many
/// rows (64 chunks, a few milliseconds).
const CHECKPOINT_ROWS: usize = 64 * CHUNK_ROWS;

struct Eval<'a> {
    ni: usize,
    input: &'a [Scalar],
    aux: &'a [Scalar],
    coeffs: &'a [Scalar],
}

impl Eval<'_> {
    #[inline(always)]
    fn value(&self, col: u32) -> &Scalar {
        let col = col as usize;
        if col < self.ni {
            &self.input[col]
        } else {
            &self.aux[col - self.ni]
        }
    }

    /// One row's dot product with the witness. The first term initialises the sum
    /// instead of being added to zero: most rows have one to three terms (B is often a
    /// single variable or ONE), so that saves up to a third of the additions.
    #[inline(always)]
    fn row(&self, m: &CsrRef<'_>, r: usize) -> Scalar {
        let Some((first, rest)) = m.row(r).split_first() else {
            return Scalar::ZERO;
        };
        let v = self.value(first.col);
        let mut acc = match first.coeff {
            COEFF_ONE => *v,
            COEFF_MINUS_ONE => -v,
            COEFF_TWO => v.double(),
            k => *v * self.coeffs[k as usize],
        };
        for t in rest {
            let v = self.value(t.col);
            match t.coeff {
                COEFF_ONE => acc += v,
                COEFF_MINUS_ONE => acc -= v,
                COEFF_TWO => acc += v.double(),
                k => acc += *v * self.coeffs[k as usize],
            }
        }
        acc
    }
}

/// Per piece of work: which worker runs it and how many rows remain until its next
/// checkpoint (0: at the next row).
struct Ticker<'a> {
    throttle: &'a dyn Throttle,
    worker: usize,
    until_checkpoint: usize,
}

impl Ticker<'_> {
    #[inline(always)]
    fn tick(&mut self) {
        if self.until_checkpoint == 0 {
            self.throttle.checkpoint(self.worker);
            self.until_checkpoint = CHECKPOINT_ROWS;
        }
        self.until_checkpoint -= 1;
    }
}

/// Evaluates `a, b, c` on `pool`.
///
/// Rows are split into pieces of at least 1024 by rayon's work stealing; each
/// row computes its `a`, `b` and `c` together, so a variable shared by the three
/// (`x · (1 - x) = 0`) is read from memory once, and the results are written straight
/// into the output vectors, which are allocated once at their final size and never
/// zero-filled (a zero fill would be one more pass over 12 GiB for a PoRep partition).
///
/// Errors with [`SynthError::ShapeMismatch`] when the witness does not have the
/// compiled shape.
#[tracing::instrument(name = "spmv", skip_all, fields(constraints = r1cs.num_constraints()))]
pub fn spmv_parallel(
    r1cs: &R1cs,
    witness: &Witness,
    pool: &rayon::ThreadPool,
    throttle: &dyn Throttle,
) -> Result<Abc, SynthError> {
    check_shape(r1cs, witness)?;
    Ok(eval(
        r1cs.view(),
        &witness.input,
        &witness.aux,
        pool,
        throttle,
    ))
}

/// [`spmv_parallel`] on a borrowed R1CS and witness slices (what a backend that
/// evaluates `a, b, c` itself receives). The view is validated first
/// ([`R1csRef::validate`]); a witness of another shape is
/// [`SynthError::ShapeMismatch`].
pub fn spmv_slices(
    r1cs: R1csRef<'_>,
    input: &[Scalar],
    aux: &[Scalar],
    pool: &rayon::ThreadPool,
    throttle: &dyn Throttle,
) -> Result<Abc, SynthError> {
    pool.install(|| r1cs.validate())?;
    for (what, compiled, actual) in [
        ("inputs", r1cs.num_inputs, input.len()),
        ("aux variables", r1cs.num_aux, aux.len()),
    ] {
        if compiled != actual {
            return Err(SynthError::ShapeMismatch {
                what,
                compiled,
                actual,
            });
        }
    }
    Ok(eval(r1cs, input, aux, pool, throttle))
}

/// The mat-vec itself, on a view whose indices are in bounds for these slices.
fn eval(
    r1cs: R1csRef<'_>,
    input: &[Scalar],
    aux: &[Scalar],
    pool: &rayon::ThreadPool,
    throttle: &dyn Throttle,
) -> Abc {
    let ev = Eval {
        ni: r1cs.num_inputs,
        input,
        aux,
        coeffs: r1cs.coeffs,
    };
    let [ma, mb, mc] = &r1cs.matrices;
    let n = r1cs.num_constraints();
    // Sized exactly up front: `par_extend` of an indexed iterator then writes each row's
    // results in place (no zero fill, no growth, no spare capacity).
    let mut out = (
        Vec::with_capacity(n),
        (Vec::with_capacity(n), Vec::with_capacity(n)),
    );
    pool.install(|| {
        out.par_extend((0..n).into_par_iter().with_min_len(CHUNK_ROWS).map_init(
            || Ticker {
                throttle,
                worker: rayon::current_thread_index().unwrap_or(0),
                until_checkpoint: 0,
            },
            |ticker, r| {
                ticker.tick();
                (ev.row(ma, r), (ev.row(mb, r), ev.row(mc, r)))
            },
        ))
    });
    let (a, (b, c)) = out;
    Abc { a, b, c }
}

/// Checks `a[i] · b[i] = c[i]` for every constraint, in order; the first that fails
/// gives [`SynthError::Unsatisfied`]. Opt-in: one multiplication per constraint, run on
/// the calling thread.
pub fn check_witness(r1cs: &R1cs, abc: &Abc) -> Result<(), SynthError> {
    let n = r1cs.num_constraints();
    for len in [abc.a.len(), abc.b.len(), abc.c.len()] {
        if len != n {
            return Err(SynthError::ShapeMismatch {
                what: "constraints",
                compiled: n,
                actual: len,
            });
        }
    }
    match (abc.a.iter().zip(&abc.b).zip(&abc.c)).position(|((a, b), c)| *a * b != *c) {
        Some(constraint) => Err(SynthError::Unsatisfied { constraint }),
        None => Ok(()),
    }
}
