//! The H computation: the coefficients of `(A·B − C)/Z`.

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;
use rayon::ThreadPool;

use super::kernels::{self, rev, Butterfly};
use super::Domain;
use crate::{log_domain, Abc, AbcRef, BackendError};

/// Computes the `n − 1` coefficients of H from the evaluations `a, b, c` of one
/// circuit, `n` being the constraint count rounded up to a power of two. Equal to
/// bellperson's chain (iFFT a, b, c; coset FFT; `a·b − c`; divide by
/// `Z(g·ω^i) = g^n − 1`; coset iFFT; drop the last coefficient) bit for bit, in six
/// transforms instead of its seven (`h_chain` says why).
///
/// Consumes `abc`: `b` is freed halfway, and `a` and `c` once `h` has been
/// gathered out of them. Padding grows the vectors in place when their capacity
/// allows (synthesis may reserve `n`).
pub fn compute_h(abc: Abc, pool: &ThreadPool) -> Result<Vec<Scalar>, BackendError> {
    AbcRef::new(&abc).check_shape()?;
    compute_h_in(&Domain::new(log_domain(abc.len()))?, abc, pool)
}

/// [`compute_h`] on a given domain (of size `n`), so tests can choose the plan.
pub(crate) fn compute_h_in(
    dom: &Domain,
    abc: Abc,
    pool: &ThreadPool,
) -> Result<Vec<Scalar>, BackendError> {
    let log_n = dom.log_n;
    debug_assert_eq!(log_n, log_domain(abc.len()));
    let _span = tracing::info_span!("compute_h", log_n, constraints = abc.len()).entered();
    let Abc {
        mut a,
        mut b,
        mut c,
    } = abc;
    Ok(pool.install(|| {
        for v in [&mut a, &mut b, &mut c] {
            v.resize(dom.n, Scalar::ZERO);
        }
        h_chain(dom, a, b, c)
    }))
}

/// The pass schedule of [`compute_h`]; runs inside the pool.
///
/// Six transforms, not bellperson's seven: H = coset⁻¹((A'·B' − C')/Z) where `'`
/// marks evaluations on the coset and Z there is the constant `g^n − 1`, and the
/// inverse coset transform is linear, so H = (coset⁻¹(A'·B') − coset⁻¹(C'))/Z; and
/// coset⁻¹(C') is C's coefficients, which the inverse transform of `c` already
/// gave. So `c` goes only to its coefficients (times `1/Z`), and is subtracted from
/// the inverse coset transform of `A'·B'` as H is gathered: the forward coset
/// transform of `c` is never made. The field is exact, so H is the same bit for bit.
fn h_chain(
    dom: &Domain,
    mut a: Vec<Scalar>,
    mut b: Vec<Scalar>,
    mut c: Vec<Scalar>,
) -> Vec<Scalar> {
    let log_n = dom.log_n;
    let n = dom.n;
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    let g_inv = g.invert().unwrap_or(Scalar::ONE);
    // Z(g·ω^i) = g^n − 1 for every i; non-zero because g is not in ⟨ω⟩.
    let z_inv = (g.pow_vartime([n as u64]) - Scalar::ONE)
        .invert()
        .unwrap_or(Scalar::ONE);
    let shift = CosetShift::new(dom, g, dom.n_inv);
    // Back from the coset, with 1/n and 1/Z folded into the same factors.
    let unshift = CosetShift::new(dom, g_inv, dom.n_inv * z_inv);
    let c_scale = dom.n_inv * z_inv;

    // 1. Inverse transform of a, b, c (DIF with ω⁻¹): column passes top-down.
    for v in [&mut a, &mut b, &mut c] {
        for pass in &dom.passes {
            kernels::column_pass(v, dom, pass, &dom.inv, Butterfly::Dif);
        }
    }
    // 2. One block pass: finish the inverse (bit-reversed coefficients times n).
    //    For a and b: shift to the coset (coefficient k times g^k/n) and start the
    //    forward transform (DIT with ω, bit-reversed in). For c: its coefficients
    //    times 1/Z, kept in bit-reversed order until H is gathered.
    for v in [&mut a, &mut b] {
        kernels::block_pass(v, dom.log_b, |blk, x| {
            kernels::dif(x, &dom.inv.small, true);
            shift.apply(blk, x);
            kernels::dit(x, &dom.fwd.small, true);
        });
    }
    kernels::block_pass(&mut c, dom.log_b, |_, x| {
        kernels::dif(x, &dom.inv.small, true);
        for x in x.iter_mut() {
            *x *= c_scale;
        }
    });
    // 3. The forward transform's middle column passes, bottom-up.
    for v in [&mut a, &mut b] {
        for pass in dom.passes.iter().skip(1).rev() {
            kernels::column_pass(v, dom, pass, &dom.fwd, Butterfly::Dit);
        }
    }
    // 4. Top column pass: finish the coset evaluations, a·b, and start the inverse
    //    coset transform. Without column passes the block pass of step 2 already
    //    finished the evaluations.
    match dom.passes.first() {
        Some(top) => kernels::fused_top_pass(&mut a, &mut b, dom, top),
        None => a
            .par_iter_mut()
            .zip(b.par_iter())
            .for_each(|(a, b)| *a *= b),
    }
    drop(b);
    // 5. The rest of the inverse coset transform: column passes top-down after the
    //    first, then the block pass with the shift back (coefficient k times
    //    g^−k/(n·Z)).
    for pass in dom.passes.iter().skip(1) {
        kernels::column_pass(&mut a, dom, pass, &dom.inv, Butterfly::Dif);
    }
    kernels::block_pass(&mut a, dom.log_b, |blk, x| {
        kernels::dif(x, &dom.inv.small, true);
        unshift.apply(blk, x);
    });
    // 6. `a` and `c` hold coset⁻¹(A'·B')/Z and C/Z in bit-reversed order: H is their
    //    difference; gather the first n − 1 coefficients.
    (0..n.saturating_sub(1))
        .into_par_iter()
        .map(|i| {
            let r = rev(i, log_n);
            a[r] - c[r]
        })
        .collect()
}

/// Multiplies bit-reversed coefficients by `g^k · scale`, `k` being the coefficient's
/// natural index, block by block. Position `blk·B + q` holds coefficient
/// `k = rev_b(q)·(n/B) + rev(blk)`, so the factor splits into a per-position table
/// (`(g^(n/B))^rev_b(q)`) times a per-block one (`g^rev(blk)·scale`).
struct CosetShift {
    in_block: Vec<Scalar>,
    per_block: Vec<Scalar>,
}

impl CosetShift {
    fn new(dom: &Domain, g: Scalar, scale: Scalar) -> Self {
        let log_b = dom.log_b;
        let log_blocks = dom.log_n - log_b;
        let powers = |base: Scalar, log: u32, scale: Scalar| {
            let count = 1usize << log;
            let mut p = Vec::with_capacity(count);
            let mut x = scale;
            for _ in 0..count {
                p.push(x);
                x *= base;
            }
            (0..count).map(|i| p[rev(i, log)]).collect::<Vec<_>>()
        };
        Self {
            in_block: powers(g.pow_vartime([1u64 << log_blocks]), log_b, Scalar::ONE),
            per_block: powers(g, log_blocks, scale),
        }
    }

    #[inline]
    fn apply(&self, blk: usize, x: &mut [Scalar]) {
        let base = self.per_block[blk];
        for (x, f) in x.iter_mut().zip(&self.in_block) {
            *x *= base * f;
        }
    }
}
