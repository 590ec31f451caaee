//! Test support shared by the tests and the bench: the oracle constraint system and
//! the test circuits.
#![allow(dead_code)]

use bellpepper::gadgets::multipack;
use bellpepper::gadgets::sha256::sha256;
use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::Scalar;
use cuzk_synth::{Abc, Density, Witness};
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// bellperson's density tracker, extend quirks included.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tracker {
    bv: Vec<bool>,
    total: usize,
}

impl Tracker {
    fn add_element(&mut self) {
        self.bv.push(false);
    }

    fn inc(&mut self, i: usize) {
        if !self.bv[i] {
            self.bv[i] = true;
            self.total += 1;
        }
    }

    fn extend(&mut self, other: &Self, is_input_density: bool) {
        if other.bv.is_empty() {
            return;
        }
        if self.bv.is_empty() {
            *self = other.clone();
            return;
        }
        if is_input_density {
            if other.bv[0] {
                if self.bv[0] {
                    self.total -= 1;
                } else {
                    self.bv[0] = true;
                }
            }
            self.bv.extend(other.bv.iter().skip(1));
        } else {
            self.bv.extend(other.bv.iter());
        }
        self.total += other.total;
    }

    pub fn to_density(&self) -> Density {
        assert_eq!(self.total, self.bv.iter().filter(|&&b| b).count());
        let mut d = Density::new(0);
        for &b in &self.bv {
            d.push(b);
        }
        d
    }
}

/// The oracle: bellperson 0.27's `ProvingAssignment`, written out. Every constraint's
/// combinations are evaluated when it is enforced, against the assignment so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RefCs {
    pub a_aux_density: Tracker,
    pub b_input_density: Tracker,
    pub b_aux_density: Tracker,
    pub a: Vec<Scalar>,
    pub b: Vec<Scalar>,
    pub c: Vec<Scalar>,
    pub input: Vec<Scalar>,
    pub aux: Vec<Scalar>,
    /// Terms with a non-zero coefficient in A, B, C (not a bellperson field: checks nnz).
    pub nnz: [usize; 3],
}

impl RefCs {
    pub fn abc(&self) -> Abc {
        Abc {
            a: self.a.clone(),
            b: self.b.clone(),
            c: self.c.clone(),
        }
    }

    pub fn witness(&self) -> Witness {
        Witness {
            input: self.input.clone(),
            aux: self.aux.clone(),
        }
    }
}

fn eval_with_trackers(
    lc: &LinearCombination<Scalar>,
    mut input_density: Option<&mut Tracker>,
    mut aux_density: Option<&mut Tracker>,
    input: &[Scalar],
    aux: &[Scalar],
    nnz: &mut usize,
) -> Scalar {
    let mut acc = Scalar::ZERO;
    for (&i, coeff) in lc.iter_inputs() {
        if !coeff.is_zero_vartime() {
            acc += input[i] * coeff;
            *nnz += 1;
            if let Some(d) = input_density.as_mut() {
                d.inc(i);
            }
        }
    }
    for (&i, coeff) in lc.iter_aux() {
        if !coeff.is_zero_vartime() {
            acc += aux[i] * coeff;
            *nnz += 1;
            if let Some(d) = aux_density.as_mut() {
                d.inc(i);
            }
        }
    }
    acc
}

impl ConstraintSystem<Scalar> for RefCs {
    type Root = Self;

    fn new() -> Self {
        Self::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        self.a_aux_density.add_element();
        self.b_aux_density.add_element();
        Ok(Variable(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        self.b_input_density.add_element();
        Ok(Variable(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        let [na, nb, nc] = &mut self.nnz;
        let a = eval_with_trackers(
            &a,
            None,
            Some(&mut self.a_aux_density),
            &self.input,
            &self.aux,
            na,
        );
        let b = eval_with_trackers(
            &b,
            Some(&mut self.b_input_density),
            Some(&mut self.b_aux_density),
            &self.input,
            &self.aux,
            nb,
        );
        let c = eval_with_trackers(&c, None, None, &self.input, &self.aux, nc);
        self.a.push(a);
        self.b.push(b);
        self.c.push(c);
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
        self.a_aux_density.extend(&other.a_aux_density, false);
        self.b_input_density.extend(&other.b_input_density, true);
        self.b_aux_density.extend(&other.b_aux_density, false);
        self.a.extend(&other.a);
        self.b.extend(&other.b);
        self.c.extend(&other.c);
        self.input.extend(&other.input[1..]);
        self.aux.extend(&other.aux);
        for i in 0..3 {
            self.nnz[i] += other.nnz[i];
        }
    }
}

/// What bellperson's `synthesize_circuits_batch` does to one circuit.
pub fn reference<C: Circuit<Scalar>>(circuit: C) -> Result<RefCs, SynthesisError> {
    let mut cs = RefCs::new();
    cs.alloc_input(|| "", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    for i in 0..cs.input.len() {
        cs.enforce(|| "", |lc| lc + Variable(Index::Input(i)), |lc| lc, |lc| lc);
    }
    Ok(cs)
}

pub fn nonzero(rng: &mut impl RngCore) -> Scalar {
    loop {
        let s = Scalar::random(&mut *rng);
        if !s.is_zero_vartime() {
            return s;
        }
    }
}

/// A chain `x_{i+1} = f_i(x_i)` cycling through constraint styles: squares, public
/// inputs and ONE in B, zero coefficients, duplicated and cancelling terms, random
/// and negative coefficients, public inputs in A and C, unused aux variables.
/// Coefficients come from a fixed seed (they are the shape); values from `seed`.
#[derive(Clone, Debug)]
pub struct MulChain {
    pub len: usize,
    pub publics: usize,
    pub seed: u64,
    /// One more constraint at the end, no new variable.
    pub extra: bool,
}

impl MulChain {
    pub fn new(len: usize, publics: usize, seed: u64) -> Self {
        Self {
            len,
            publics,
            seed,
            extra: false,
        }
    }
}

impl Circuit<Scalar> for MulChain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut vals = ChaCha8Rng::seed_from_u64(self.seed);
        let mut shape = ChaCha8Rng::seed_from_u64(0xc0ef ^ self.len as u64);
        let one = CS::one();
        let mut pubs = Vec::new();
        for i in 0..self.publics {
            let v = nonzero(&mut vals);
            pubs.push((cs.alloc_input(|| format!("pub {i}"), || Ok(v))?, v));
        }
        let mut xv = nonzero(&mut vals);
        let mut x = cs.alloc(|| "x0", || Ok(xv))?;
        let mut prev = x;
        for i in 0..self.len {
            let (p, pv) = if pubs.is_empty() {
                (one, Scalar::ONE)
            } else {
                pubs[i % pubs.len()]
            };
            let k = nonzero(&mut shape);
            let cs = &mut cs.namespace(|| format!("step {i}"));
            let (y, yv);
            match i % 6 {
                0 => {
                    yv = xv.square();
                    y = cs.alloc(|| "y", || Ok(yv))?;
                    cs.enforce(|| "sq", |lc| lc + x, |lc| lc + x, |lc| lc + y);
                }
                1 => {
                    let two = Scalar::from(2u64);
                    yv = xv * (pv + two);
                    y = cs.alloc(|| "y", || Ok(yv))?;
                    cs.enforce(
                        || "input in B",
                        |lc| lc + x,
                        |lc| lc + p + (two, one),
                        |lc| lc + y,
                    );
                }
                2 => {
                    yv = xv * (xv - Scalar::ONE);
                    y = cs.alloc(|| "y", || Ok(yv))?;
                    cs.enforce(
                        || "zero coefficients",
                        |lc| lc + x + (Scalar::ZERO, prev),
                        |lc| lc + x - one + (Scalar::ZERO, p),
                        |lc| lc + y + (Scalar::ZERO, x),
                    );
                }
                3 => {
                    yv = xv.double();
                    y = cs.alloc(|| "y", || Ok(yv))?;
                    cs.enforce(
                        || "duplicated terms",
                        |lc| lc + x + x,
                        |lc| lc + one,
                        |lc| lc + y + x - x,
                    );
                }
                4 => {
                    let k2 = nonzero(&mut shape);
                    yv = k * xv * (k2 - xv);
                    y = cs.alloc(|| "y", || Ok(yv))?;
                    cs.enforce(
                        || "random coefficients",
                        |lc| lc + (k, x),
                        |lc| lc - x + (k2, one),
                        |lc| lc + y,
                    );
                }
                _ => {
                    let unused = nonzero(&mut vals);
                    cs.alloc(|| "unused", || Ok(unused))?;
                    yv = (pv + xv) * xv + pv;
                    y = cs.alloc(|| "y", || Ok(yv))?;
                    cs.enforce(
                        || "input in A and C",
                        |lc| lc + p + x,
                        |lc| lc + x,
                        |lc| lc + y - p,
                    );
                }
            }
            prev = x;
            x = y;
            xv = yv;
        }
        if self.extra {
            cs.enforce(|| "extra", |lc| lc + x, |lc| lc + one, |lc| lc + x);
        }
        Ok(())
    }
}

/// SHA-256 of `blocks * 64 - 9` random bytes (exactly `blocks` compressions after
/// padding), the digest packed into public inputs.
#[derive(Clone, Debug)]
pub struct Sha {
    pub blocks: usize,
    pub seed: u64,
}

impl Circuit<Scalar> for Sha {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut bytes = vec![0u8; self.blocks * 64 - 9];
        rng.fill_bytes(&mut bytes);
        let bits = bytes
            .iter()
            .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1 == 1))
            .enumerate()
            .map(|(i, b)| {
                AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), Some(b)).map(Boolean::from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let hash = sha256(cs.namespace(|| "sha256"), &bits)?;
        multipack::pack_into_inputs(cs.namespace(|| "digest"), &hash)
    }
}

/// Some top-level constraints, then `parts` synthesized each in its own sub-system
/// (`CS::new()` with a temporary ONE) and appended with `extend`, the way
/// storage-proofs' PoSt circuits synthesize in parallel; then more top-level
/// constraints using variables from before. With `use_extend = false` the parts are
/// synthesized in place, which must give the same result.
#[derive(Clone, Debug)]
pub struct Extending {
    pub parts: Vec<MulChain>,
    pub use_extend: bool,
}

impl Circuit<Scalar> for Extending {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let v = Scalar::from(7u64);
        let top_in = cs.alloc_input(|| "top", || Ok(v))?;
        let top = cs.alloc(|| "t", || Ok(v.square()))?;
        cs.enforce(|| "t", |lc| lc + top_in, |lc| lc + top_in, |lc| lc + top);
        if self.use_extend && CS::is_extensible() {
            for part in self.parts {
                let mut sub = CS::new();
                sub.alloc_input(|| "temp ONE", || Ok(Scalar::ONE))?;
                part.synthesize(&mut sub)?;
                cs.extend(&sub);
            }
        } else {
            for (i, part) in self.parts.into_iter().enumerate() {
                part.synthesize(&mut cs.namespace(|| format!("part {i}")))?;
            }
        }
        let w = cs.alloc(|| "w", || Ok(v.square() * v))?;
        cs.enforce(|| "w", |lc| lc + top, |lc| lc + top_in, |lc| lc + w);
        let out = cs.alloc_input(|| "out", || Ok(v.square() * v))?;
        cs.enforce(|| "out", |lc| lc + w, |lc| lc + CS::one(), |lc| lc + out);
        Ok(())
    }
}
