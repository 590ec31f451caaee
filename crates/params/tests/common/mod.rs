//! Shared by the tests and the bench: a small circuit to generate parameters for,
//! and an independent description of where each section lies in a file.

#![allow(dead_code)]

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use cuzk_params::{generate_params, Parameters, Section};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// `v0 = x0`, then `v(i+1) = v(i) * (v(i) + x((i+1) mod k))` for `steps` steps over
/// `k` public inputs: every variable is constrained, so bellperson's generator
/// accepts it, and the inputs appear in both A and B.
#[derive(Clone, Debug)]
pub struct MulChain {
    pub inputs: Vec<Scalar>,
    pub steps: usize,
}

impl MulChain {
    pub fn new(num_inputs: usize, steps: usize, seed: u64) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let inputs = (0..num_inputs).map(|_| Scalar::random(&mut rng)).collect();
        Self { inputs, steps }
    }
}

impl Circuit<Scalar> for MulChain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut xs = Vec::with_capacity(self.inputs.len());
        for (i, x) in self.inputs.iter().enumerate() {
            let var = cs.alloc_input(|| format!("x{i}"), || Ok(*x))?;
            xs.push((var, *x));
        }
        let (x0_var, x0) = *xs.first().ok_or(SynthesisError::Unsatisfiable)?;
        let mut value = x0;
        let mut var = cs.alloc(|| "v0", || Ok(value))?;
        cs.enforce(
            || "v0 = x0",
            |lc| lc + var,
            |lc| lc + CS::one(),
            |lc| lc + x0_var,
        );
        for i in 0..self.steps {
            let (x_var, x) = xs[(i + 1) % xs.len()];
            let next = value * (value + x);
            let next_var = cs.alloc(|| format!("v{}", i + 1), || Ok(next))?;
            cs.enforce(
                || format!("step {i}"),
                |lc| lc + var,
                |lc| lc + var + x_var,
                |lc| lc + next_var,
            );
            value = next;
            var = next_var;
        }
        Ok(())
    }
}

/// Parameters for a [`MulChain`], from a seeded rng.
pub fn params_for(num_inputs: usize, steps: usize, seed: u64) -> Parameters<Bls12> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    generate_params(MulChain::new(num_inputs, steps, seed), &mut rng).expect("generate")
}

/// The file bellperson writes for `params`.
pub fn bellperson_bytes(params: &Parameters<Bls12>) -> Vec<u8> {
    let mut bytes = Vec::new();
    params.write(&mut bytes).expect("write to a Vec");
    bytes
}

/// Where a section lies: its count field (`None` for the six single points), the
/// start of its points, how many and how large.
#[derive(Clone, Copy, Debug)]
pub struct Extent {
    pub section: Section,
    pub count_offset: Option<usize>,
    pub points_offset: usize,
    pub count: usize,
    pub point_bytes: usize,
}

impl Extent {
    pub fn start(&self) -> usize {
        self.count_offset.unwrap_or(self.points_offset)
    }
    pub fn end(&self) -> usize {
        self.points_offset + self.count * self.point_bytes
    }
    pub fn point(&self, index: usize) -> usize {
        self.points_offset + index * self.point_bytes
    }
}

/// The extents of every section of `params`' file, computed from the lengths of
/// its vectors (independently of the crate's own layout code).
pub fn extents(params: &Parameters<Bls12>) -> Vec<Extent> {
    let mut out = Vec::new();
    let mut offset = 0;
    for (section, point_bytes) in [
        (Section::AlphaG1, 96),
        (Section::BetaG1, 96),
        (Section::BetaG2, 192),
        (Section::GammaG2, 192),
        (Section::DeltaG1, 96),
        (Section::DeltaG2, 192),
    ] {
        out.push(Extent {
            section,
            count_offset: None,
            points_offset: offset,
            count: 1,
            point_bytes,
        });
        offset += point_bytes;
    }
    for (section, count, point_bytes) in [
        (Section::Ic, params.vk.ic.len(), 96),
        (Section::H, params.h.len(), 96),
        (Section::L, params.l.len(), 96),
        (Section::A, params.a.len(), 96),
        (Section::BG1, params.b_g1.len(), 96),
        (Section::BG2, params.b_g2.len(), 192),
    ] {
        out.push(Extent {
            section,
            count_offset: Some(offset),
            points_offset: offset + 4,
            count,
            point_bytes,
        });
        offset += 4 + count * point_bytes;
    }
    out
}
