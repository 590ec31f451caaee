//! Valid Groth16 parameters, generated fast: the same mathematics as bellperson's
//! `generate_parameters`, with the scalar multiplications done against fixed-base
//! tables.
//!
//! A parameter set is some ten million points `s_i·G`, each a scalar multiplication
//! of one fixed base. bellperson multiplies with a wNAF per point (≈ 255 doublings and
//! ≈ 50 additions). Here the base's multiples `d·2^(16k)·G` (d < 2^16, k < 16) are
//! tabled once, so each point is at most 16 mixed additions of table entries, and
//! points are normalised to affine in batches (one inversion per batch). The QAP is
//! evaluated at τ with the Lagrange basis in closed form,
//! `L_j(τ) = ω^j (τ^n − 1) / (n (τ − ω^j))` (denominators inverted together), which
//! is what bellperson's inverse FFT of the powers of τ computes, over the same
//! domain and ω, so the prover's H (bellperson's and cuzk's) matches.
//!
//! The output has bellperson's layout: `ic` per input, `h` of `n − 1` points, `l` per
//! aux variable, `a`, `b_g1`, `b_g2` with the points of zero scalars left out.
//! Insecure by construction (the caller's rng is the toxic waste): for tests and for
//! circuits no one has real parameters for.

use std::sync::Arc;

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use ff::{BatchInvert, Field, PrimeField};
use group::{Curve, Group};
use rand_core::RngCore;
use rayon::prelude::*;

use crate::{Parameters, ParamsError, VerifyingKey};

/// Bits per table window.
const WINDOW: usize = 16;
const WINDOWS: usize = 256usize.div_ceil(WINDOW);
/// Points normalised together.
const BATCH: usize = 1 << 12;

/// Valid parameters for `circuit` (which is synthesized twice: once to count, once
/// to evaluate the QAP at τ). Runs on the current rayon pool.
pub fn generate_params_fast<C: Circuit<Scalar> + Clone>(
    circuit: C,
    rng: &mut impl RngCore,
) -> Result<Parameters<Bls12>, ParamsError> {
    let _span = tracing::info_span!("generate_params_fast").entered();
    let tau = Scalar::random(&mut *rng);
    let alpha = Scalar::random(&mut *rng);
    let beta = Scalar::random(&mut *rng);
    let gamma = Scalar::random(&mut *rng);
    let delta = Scalar::random(&mut *rng);

    // Pass 1: the counts, hence the domain.
    let mut count = Count::default();
    count.alloc_input(|| "", || Ok(Scalar::ONE)).map_err(ParamsError::Synthesis)?;
    circuit.clone().synthesize(&mut count).map_err(ParamsError::Synthesis)?;
    let rows = count.constraints + count.inputs;
    let n = rows.max(1).next_power_of_two();
    let log_n = n.trailing_zeros();
    if log_n > Scalar::S {
        return Err(ParamsError::Synthesis(SynthesisError::PolynomialDegreeTooLarge));
    }
    let lagrange = lagrange_at(tau, n);

    // Pass 2: A, B and C of every variable at τ.
    let mut eval = Eval {
        lagrange: &lagrange,
        constraint: 0,
        inputs: Vec::with_capacity(count.inputs),
        aux: Vec::with_capacity(count.aux),
    };
    eval.alloc_input(|| "", || Ok(Scalar::ONE)).map_err(ParamsError::Synthesis)?;
    circuit.synthesize(&mut eval).map_err(ParamsError::Synthesis)?;
    let Eval {
        constraint,
        mut inputs,
        aux,
        ..
    } = eval;
    if constraint != count.constraints || inputs.len() != count.inputs || aux.len() != count.aux {
        // A circuit whose shape changes between two syntheses has no parameters.
        return Err(ParamsError::Synthesis(SynthesisError::Unsatisfiable));
    }
    // bellperson's `input_i · 0 = 0` constraints, one per input, after the circuit's.
    for (i, v) in inputs.iter_mut().enumerate() {
        v[0] += lagrange[constraint + i];
    }
    drop(lagrange);

    let g1 = Table::<G1Projective>::new(G1Projective::generator());
    let g2 = Table::<G2Projective>::new(G2Projective::generator());
    let gamma_inv = Option::<Scalar>::from(gamma.invert())
        .ok_or(ParamsError::Synthesis(SynthesisError::UnexpectedIdentity))?;
    let delta_inv = Option::<Scalar>::from(delta.invert())
        .ok_or(ParamsError::Synthesis(SynthesisError::UnexpectedIdentity))?;

    // h_i = τ^i (τ^n − 1) / δ, i < n − 1.
    let coeff = (tau.pow_vartime([n as u64]) - Scalar::ONE) * delta_inv;
    let h_scalars = powers(tau, n - 1, coeff);
    let h = g1.mul_all(&h_scalars);
    drop(h_scalars);

    let ext = |vars: &[[Scalar; 3]], inv: Scalar| -> Vec<Scalar> {
        vars.par_iter()
            .map(|[a, b, c]| (beta * a + alpha * b + c) * inv)
            .collect()
    };
    let ic = g1.mul_all(&ext(&inputs, gamma_inv));
    let l_scalars = ext(&aux, delta_inv);
    if l_scalars.iter().any(|s| s.is_zero_vartime()) {
        return Err(ParamsError::Synthesis(SynthesisError::UnconstrainedVariable));
    }
    let l = g1.mul_all(&l_scalars);
    drop(l_scalars);
    let nonzero = |k: usize| -> Vec<Scalar> {
        inputs
            .iter()
            .chain(&aux)
            .map(|v| v[k])
            .filter(|s| !s.is_zero_vartime())
            .collect()
    };
    let a = g1.mul_all(&nonzero(0));
    let bt = nonzero(1);
    let b_g1 = g1.mul_all(&bt);
    drop(g1);
    let b_g2 = g2.mul_all(&bt);

    let (g1a, g2a) = (
        G1Projective::generator().to_affine(),
        G2Projective::generator().to_affine(),
    );
    let vk = VerifyingKey::<Bls12> {
        alpha_g1: (g1a * alpha).to_affine(),
        beta_g1: (g1a * beta).to_affine(),
        beta_g2: (g2a * beta).to_affine(),
        gamma_g2: (g2a * gamma).to_affine(),
        delta_g1: (g1a * delta).to_affine(),
        delta_g2: (g2a * delta).to_affine(),
        ic,
    };
    Ok(Parameters {
        vk,
        h: Arc::new(h),
        l: Arc::new(l),
        a: Arc::new(a),
        b_g1: Arc::new(b_g1),
        b_g2: Arc::new(b_g2),
    })
}

/// `coeff · x^i` for `i < len`, in parallel chunks.
fn powers(x: Scalar, len: usize, coeff: Scalar) -> Vec<Scalar> {
    let chunk = 1 << 14;
    let mut out = vec![Scalar::ZERO; len];
    out.par_chunks_mut(chunk).enumerate().for_each(|(c, part)| {
        let mut p = coeff * x.pow_vartime([(c * chunk) as u64]);
        for v in part {
            *v = p;
            p *= x;
        }
    });
    out
}

/// The Lagrange basis of the size-`n` domain at `tau` (τ outside the domain).
fn lagrange_at(tau: Scalar, n: usize) -> Vec<Scalar> {
    let mut omega = Scalar::ROOT_OF_UNITY;
    for _ in n.trailing_zeros()..Scalar::S {
        omega = omega.square();
    }
    let omegas = powers(omega, n, Scalar::ONE);
    let n_inv = Scalar::from(n as u64).invert().unwrap_or(Scalar::ZERO);
    let z = (tau.pow_vartime([n as u64]) - Scalar::ONE) * n_inv;
    let mut out: Vec<Scalar> = omegas.par_iter().map(|w| tau - w).collect();
    out.par_chunks_mut(1 << 14).for_each(|c| {
        // τ − ω^j is never zero for a random τ (probability n / r).
        let _ = c.iter_mut().batch_invert();
    });
    out.par_iter_mut()
        .zip(omegas.par_iter())
        .for_each(|(l, w)| *l *= z * w);
    out
}

/// `d · 2^(WINDOW·k) · base` for every window `k` and digit `1 ≤ d < 2^WINDOW`.
struct Table<G: Curve> {
    windows: Vec<Vec<G::AffineRepr>>,
}

impl<G> Table<G>
where
    G: Curve + Send + Sync,
    G::AffineRepr: Send + Sync + Copy + Default,
{
    fn new(base: G) -> Self {
        let mut bases = Vec::with_capacity(WINDOWS);
        let mut b = base;
        for _ in 0..WINDOWS {
            bases.push(b);
            for _ in 0..WINDOW {
                b = b.double();
            }
        }
        let windows = bases
            .into_par_iter()
            .map(|b| {
                let mut proj = Vec::with_capacity((1 << WINDOW) - 1);
                let mut acc = b;
                for _ in 1..(1usize << WINDOW) {
                    proj.push(acc);
                    acc += b;
                }
                let mut affine = vec![G::AffineRepr::default(); proj.len()];
                G::batch_normalize(&proj, &mut affine);
                affine
            })
            .collect();
        Self { windows }
    }

    fn mul(&self, s: &Scalar) -> G {
        let bytes = s.to_repr();
        let bytes = bytes.as_ref();
        let mut acc = G::identity();
        for (k, w) in self.windows.iter().enumerate() {
            let d = u16::from_le_bytes([bytes[2 * k], bytes[2 * k + 1]]) as usize;
            if d != 0 {
                acc += w[d - 1];
            }
        }
        acc
    }

    fn mul_all(&self, scalars: &[Scalar]) -> Vec<G::AffineRepr> {
        let mut out = vec![G::AffineRepr::default(); scalars.len()];
        out.par_chunks_mut(BATCH)
            .zip(scalars.par_chunks(BATCH))
            .for_each(|(o, s)| {
                let proj: Vec<G> = s.iter().map(|s| self.mul(s)).collect();
                G::batch_normalize(&proj, o);
            });
        out
    }
}

/// Counts variables and constraints.
#[derive(Default)]
struct Count {
    inputs: usize,
    aux: usize,
    constraints: usize,
}

impl ConstraintSystem<Scalar> for Count {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
    }

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
}

/// Accumulates `[A(τ), B(τ), C(τ)]` of every variable, constraint by constraint.
struct Eval<'a> {
    lagrange: &'a [Scalar],
    constraint: usize,
    inputs: Vec<[Scalar; 3]>,
    aux: Vec<[Scalar; 3]>,
}

impl Eval<'_> {
    fn add(&mut self, k: usize, lc: &LinearCombination<Scalar>, l: Scalar) {
        for (&i, c) in lc.iter_inputs() {
            if let Some(v) = self.inputs.get_mut(i) {
                v[k] += *c * l;
            }
        }
        for (&i, c) in lc.iter_aux() {
            if let Some(v) = self.aux.get_mut(i) {
                v[k] += *c * l;
            }
        }
    }
}

impl ConstraintSystem<Scalar> for Eval<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push([Scalar::ZERO; 3]);
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push([Scalar::ZERO; 3]);
        Ok(Variable::new_unchecked(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let l = self
            .lagrange
            .get(self.constraint)
            .copied()
            .unwrap_or(Scalar::ZERO);
        self.add(0, &a(LinearCombination::zero()), l);
        self.add(1, &b(LinearCombination::zero()), l);
        self.add(2, &c(LinearCombination::zero()), l);
        self.constraint += 1;
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
}
