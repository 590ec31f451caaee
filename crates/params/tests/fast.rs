//! Fast-generated parameters are valid: bellperson proves with them and its verifier
//! accepts the proofs (and rejects a wrong public input), for circuits of several
//! sizes, inputs and coefficient patterns.

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use bellperson::groth16::{create_random_proof, prepare_verifying_key, verify_proof};
use blstrs::{Bls12, Scalar};
use cuzk_params::generate_params_fast;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// `y = x^(len+1)` with `y` public, plus `publics − 1` more public copies of
/// intermediate powers, and a linear constraint with a big coefficient per step.
#[derive(Clone)]
struct Powers {
    x: Option<Scalar>,
    len: usize,
    publics: usize,
}

impl Powers {
    fn outputs(&self) -> Vec<Scalar> {
        let x = self.x.unwrap();
        let mut acc = x;
        let mut all = Vec::new();
        for _ in 0..self.len {
            acc *= x;
            all.push(acc);
        }
        all.iter().rev().take(self.publics).copied().collect()
    }
}

impl Circuit<Scalar> for Powers {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x_val = self.x;
        let x = cs.alloc(|| "x", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        let mut vals = Vec::new();
        let (mut acc, mut acc_val) = (x, x_val);
        let mut vars = Vec::new();
        for _ in 0..self.len {
            let v = acc_val.zip(x_val).map(|(a, b)| a * b);
            let next = cs.alloc(|| "p", || v.ok_or(SynthesisError::AssignmentMissing))?;
            cs.enforce(|| "mul", |lc| lc + acc, |lc| lc + x, |lc| lc + next);
            let k = Scalar::from(0x1234_5678_9abc_def1u64);
            cs.enforce(|| "lin", |lc| lc + (k, next), |lc| lc + CS::one(), |lc| lc + (k, next));
            vars.push(next);
            vals.push(v);
            (acc, acc_val) = (next, v);
        }
        for (var, val) in vars.iter().rev().zip(vals.iter().rev()).take(self.publics) {
            let input = cs.alloc_input(|| "out", || val.ok_or(SynthesisError::AssignmentMissing))?;
            cs.enforce(|| "pub", |lc| lc + *var, |lc| lc + CS::one(), |lc| lc + input);
        }
        Ok(())
    }
}

#[test]
fn fast_parameters_prove_and_verify() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    for (len, publics) in [(1, 1), (5, 2), (100, 3), (700, 4)] {
        let blank = Powers { x: None, len, publics };
        let params = generate_params_fast(blank, &mut rng).unwrap();
        assert_eq!(params.vk.ic.len(), publics + 1);
        let pvk = prepare_verifying_key(&params.vk);
        let c = Powers { x: Some(Scalar::random(&mut rng)), len, publics };
        let inputs = c.outputs();
        let proof = create_random_proof(c, &params, &mut rng).unwrap();
        assert!(verify_proof(&pvk, &proof, &inputs).unwrap(), "len {len}");
        let mut wrong = inputs.clone();
        wrong[0] += Scalar::ONE;
        assert!(!verify_proof(&pvk, &proof, &wrong).unwrap(), "len {len}");
    }
}
