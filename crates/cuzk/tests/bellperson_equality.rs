//! The whole prover against `bellperson::groth16::create_proof`, byte for byte, on
//! circuits of several shapes; every proof is also verified, and a wrong public
//! input must fail.

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use bellperson::groth16::{
    create_proof as bp_create_proof, generate_random_parameters, MappedParameters, Parameters,
    Proof,
};
use blstrs::{Bls12, Scalar};
use cuzk_circuits::{MulChain, Sha256Chain};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn params_for<C: Circuit<Scalar>>(blank: C, seed: u64) -> Parameters<Bls12> {
    generate_random_parameters::<Bls12, _, _>(blank, &mut rng(seed)).unwrap()
}

fn bytes(p: &Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::new();
    p.write(&mut v).unwrap();
    v
}

/// Proves with both provers, checks equal bytes, verification, and rejection of a
/// wrong public input.
fn check<C: Circuit<Scalar> + Clone + Send>(
    circuit: C,
    params: &Parameters<Bls12>,
    inputs: &[Scalar],
    seed: u64,
) {
    let mut g = rng(seed);
    let (r, s) = (Scalar::random(&mut g), Scalar::random(&mut g));
    let ours = cuzk::create_proof(circuit.clone(), params, r, s).unwrap();
    let theirs = bp_create_proof(circuit, params, r, s).unwrap();
    assert_eq!(
        bytes(&ours),
        bytes(&theirs),
        "proof bytes differ from bellperson's"
    );
    assert!(cuzk::verify(&params.vk, &ours, inputs).unwrap());
    let mut wrong = inputs.to_vec();
    wrong[0] += Scalar::ONE;
    assert!(!cuzk::verify(&params.vk, &ours, &wrong).unwrap());
}

#[test]
fn mul_chain_one_public_input() {
    let c = MulChain::new(10, 1, Some(5)).unwrap();
    let params = params_for(MulChain::new(10, 1, None).unwrap(), 1);
    check(c.clone(), &params, &c.public_inputs().unwrap(), 2);
}

#[test]
fn mul_chain_many_public_inputs() {
    let c = MulChain::new(11, 40, Some(6)).unwrap();
    let params = params_for(MulChain::new(11, 40, None).unwrap(), 3);
    check(c.clone(), &params, &c.public_inputs().unwrap(), 4);
}

#[test]
fn sha256_chain_boolean_witness() {
    // 2^15 holds one full compression plus boolean filler.
    let c = Sha256Chain::new(15, Some(7)).unwrap();
    assert!(c.plan().0 >= 1);
    let params = params_for(Sha256Chain::new(15, None).unwrap(), 5);
    check(c.clone(), &params, &c.public_inputs().unwrap(), 6);
}

/// A circuit with the corners: an input used on the B side, zero coefficients,
/// repeated terms, a variable used only in C, constants.
#[derive(Clone)]
struct Corners {
    x: Option<Scalar>,
}

impl Circuit<Scalar> for Corners {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x_val = self.x;
        let x = cs.alloc(|| "x", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        let sq = x_val.map(|x| x.square());
        let y = cs.alloc(|| "y", || sq.ok_or(SynthesisError::AssignmentMissing))?;
        let out_val = sq.zip(x_val).map(|(s, x)| s * x + Scalar::from(3u64));
        let out = cs.alloc_input(
            || "out",
            || out_val.ok_or(SynthesisError::AssignmentMissing),
        )?;
        let unused = cs.alloc(|| "only in C", || Ok(Scalar::from(9u64)))?;
        // x * x = y, with a zero-coefficient term and a repeated term on A.
        cs.enforce(
            || "square",
            |lc| lc + x + (Scalar::ZERO, y) + x - x,
            |lc| lc + x,
            |lc| lc + y,
        );
        // y * x = out - 3, with the public input on the B side of another constraint.
        cs.enforce(
            || "cube",
            |lc| lc + y,
            |lc| lc + x,
            |lc| lc + out - (Scalar::from(3u64), CS::one()),
        );
        cs.enforce(
            || "input on B",
            |lc| lc + CS::one(),
            |lc| lc + out,
            |lc| lc + out + (Scalar::ZERO, unused),
        );
        // 0 * 0 = unused - 9: a variable that appears in C alone.
        cs.enforce(
            || "C only",
            |lc| lc + (Scalar::ZERO, x),
            |lc| lc,
            |lc| lc + unused - (Scalar::from(9u64), CS::one()),
        );
        Ok(())
    }
}

#[test]
fn corner_cases_of_the_r1cs() {
    let x = Scalar::from(5u64);
    let c = Corners { x: Some(x) };
    let params = params_for(Corners { x: None }, 7);
    check(c, &params, &[x * x * x + Scalar::from(3u64)], 8);
}

#[test]
fn batch_equals_bellperson_batch() {
    let circuits: Vec<_> = (0..3)
        .map(|i| MulChain::new(10, 2, Some(100 + i)).unwrap())
        .collect();
    let params = params_for(MulChain::new(10, 2, None).unwrap(), 9);
    let mut g = rng(10);
    let r: Vec<_> = (0..3).map(|_| Scalar::random(&mut g)).collect();
    let s: Vec<_> = (0..3).map(|_| Scalar::random(&mut g)).collect();
    let ours = cuzk::create_proof_batch(circuits.clone(), &params, r.clone(), s.clone()).unwrap();
    let theirs = bellperson::groth16::create_proof_batch(circuits.clone(), &params, r, s).unwrap();
    assert_eq!(ours.len(), 3);
    for ((o, t), c) in ours.iter().zip(&theirs).zip(&circuits) {
        assert_eq!(bytes(o), bytes(t));
        assert!(cuzk::verify(&params.vk, o, &c.public_inputs().unwrap()).unwrap());
    }
}

#[test]
fn mapped_parameters_give_the_same_proof() {
    let c = MulChain::new(10, 3, Some(11)).unwrap();
    let params = params_for(MulChain::new(10, 3, None).unwrap(), 12);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mul.params");
    params.write(std::fs::File::create(&path).unwrap()).unwrap();
    let mapped: MappedParameters<Bls12> =
        Parameters::<Bls12>::build_mapped_parameters(path, false).unwrap();
    let (r, s) = (Scalar::from(3u64), Scalar::from(4u64));
    let a = cuzk::create_proof(c.clone(), &mapped, r, s).unwrap();
    let b = cuzk::create_proof(c, &params, r, s).unwrap();
    assert_eq!(bytes(&a), bytes(&b));
}

#[test]
fn params_of_another_circuit_are_a_typed_error() {
    let params = params_for(MulChain::new(10, 1, None).unwrap(), 13);
    let c = MulChain::new(11, 1, Some(1)).unwrap();
    let err = cuzk::create_proof(c, &params, Scalar::ONE, Scalar::ONE).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("parameters"), "{msg}");
}

/// Parameters of another circuit with the same domain size and input count: every
/// query length but the IC and h ones differ, which must be an error, not a proof
/// that does not verify.
#[test]
fn params_of_another_circuit_of_the_same_size_are_a_typed_error() {
    let params = params_for(MulChain::new(12, 2, None).unwrap(), 16);
    let c = Sha256Chain::new(12, Some(1)).unwrap();
    let err = cuzk::create_proof(c, &params, Scalar::ONE, Scalar::ONE).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("generated for another circuit"), "{msg}");
}

#[test]
fn batch_length_mismatch_is_a_typed_error() {
    let params = params_for(MulChain::new(10, 1, None).unwrap(), 14);
    let c = MulChain::new(10, 1, Some(1)).unwrap();
    let err = cuzk::create_proof_batch(vec![c.clone(), c], &params, vec![Scalar::ONE], vec![])
        .unwrap_err();
    assert!(matches!(
        err,
        cuzk::Error::BatchLength {
            circuits: 2,
            r: 1,
            s: 0
        }
    ));
}

/// A circuit whose witness does not satisfy it.
#[derive(Clone)]
struct Liar;

impl Circuit<Scalar> for Liar {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let a = cs.alloc(|| "a", || Ok(Scalar::from(2u64)))?;
        let b = cs.alloc(|| "b", || Ok(Scalar::from(3u64)))?;
        let c = cs.alloc_input(|| "c", || Ok(Scalar::from(6u64)))?;
        cs.enforce(|| "ok", |lc| lc + a, |lc| lc + b, |lc| lc + c);
        cs.enforce(|| "lie", |lc| lc + a, |lc| lc + a, |lc| lc + c);
        Ok(())
    }
}

#[test]
fn unsatisfied_witness_names_the_constraint() {
    let params = params_for(Liar, 15);
    let engine = cuzk::BatchProver::new(cuzk::BatchProverConfig {
        prover: cuzk::ProverConfig {
            check_witness: true,
            ..Default::default()
        },
        synth_threads: 1,
        b_g2_threads: 1,
        backend_threads: 1,
        ..Default::default()
    })
    .unwrap();
    let err = engine
        .prove_batch(vec![Liar], &&params, vec![Scalar::ONE], vec![Scalar::ONE])
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("constraint 1"), "{msg}");
}

/// `create_random_proof(_batch)` draws r and s as bellperson does: the same RNG
/// state gives the same bytes, and each proof verifies (a wrong input does not).
#[test]
fn random_proofs_equal_bellpersons_for_the_same_rng() {
    let params = params_for(MulChain::new(10, 2, None).unwrap(), 21);
    let c = MulChain::new(10, 2, Some(22)).unwrap();
    let ours = cuzk::create_random_proof(c.clone(), &params, &mut rng(23)).unwrap();
    let theirs =
        bellperson::groth16::create_random_proof(c.clone(), &params, &mut rng(23)).unwrap();
    assert_eq!(bytes(&ours), bytes(&theirs));
    let inputs = c.public_inputs().unwrap();
    assert!(cuzk::verify(&params.vk, &ours, &inputs).unwrap());
    let mut wrong = inputs.clone();
    wrong[0] += Scalar::ONE;
    assert!(!cuzk::verify(&params.vk, &ours, &wrong).unwrap());

    let circuits: Vec<_> = (0..3)
        .map(|i| MulChain::new(10, 2, Some(30 + i)).unwrap())
        .collect();
    let ours = cuzk::create_random_proof_batch(circuits.clone(), &params, &mut rng(24)).unwrap();
    let theirs =
        bellperson::groth16::create_random_proof_batch(circuits.clone(), &params, &mut rng(24))
            .unwrap();
    assert_eq!(ours.len(), 3);
    for ((o, t), c) in ours.iter().zip(&theirs).zip(&circuits) {
        assert_eq!(bytes(o), bytes(t));
        assert!(cuzk::verify(&params.vk, o, &c.public_inputs().unwrap()).unwrap());
    }
}

/// Repeated batches of one shape compile it once; other parameters (another
/// shape) compile again; every proof stays bellperson's.
#[test]
fn repeated_batches_compile_their_shape_once() {
    let prover = cuzk::BatchProver::new(cuzk::BatchProverConfig {
        synth_threads: 1,
        b_g2_threads: 1,
        backend_threads: 1,
        shapes: Some(std::sync::Arc::new(cuzk::ShapeCache::with_capacity(1))),
        ..Default::default()
    })
    .unwrap();
    let p9 = params_for(MulChain::new(10, 2, None).unwrap(), 25);
    let p10 = params_for(MulChain::new(11, 2, None).unwrap(), 26);
    let run = |log: u32, params: &Parameters<Bls12>, round: u64| {
        let circuits: Vec<_> = (0..2)
            .map(|i| MulChain::new(log, 2, Some(40 + round * 10 + i)).unwrap())
            .collect();
        let mut g = rng(27 + round);
        let r: Vec<_> = (0..2).map(|_| Scalar::random(&mut g)).collect();
        let s: Vec<_> = (0..2).map(|_| Scalar::random(&mut g)).collect();
        let ours = prover
            .prove_batch(circuits.clone(), &params, r.clone(), s.clone())
            .unwrap();
        let theirs = bellperson::groth16::create_proof_batch(circuits, params, r, s).unwrap();
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!(bytes(&o.proof), bytes(t), "log {log} round {round}");
        }
    };
    run(10, &p9, 0);
    run(10, &p9, 1);
    run(10, &p9, 2);
    assert_eq!(prover.shapes().compiles(), 1, "one shape, compiled once");
    run(11, &p10, 3);
    assert_eq!(prover.shapes().compiles(), 2);
    // Capacity 1: the first shape was evicted, so it compiles again.
    run(10, &p9, 4);
    assert_eq!(prover.shapes().compiles(), 3);
    assert_eq!(prover.shapes().len(), 1);
}
