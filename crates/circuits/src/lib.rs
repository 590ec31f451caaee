//! Built-in circuits for demos, tests and benchmarks.
//!
//! Two shapes bracket what a Groth16 prover meets in Filecoin:
//! - [`Sha256Chain`]: SHA-256 compressions from bellpepper's gadgets; nearly every
//!   witness value is 0 or 1, the case `prep_msm` exists for (PoRep is made of such
//!   gadgets).
//! - [`MulChain`]: `x_{i+1} = x_i · y_i` over random field elements; every witness value
//!   is a random scalar, so every MSM is a full Pippenger (the worst case).
//!
//! Both are sized by `log_constraints`: the circuit fills the NTT domain 2^k as
//! closely as it can, counting the constraint bellperson appends per public input,
//! so a "2^16 circuit" really has a 2^16 domain. Each carries an optional seed:
//! `None` is the blank circuit used to generate parameters (no witness values).

#![forbid(unsafe_code)]

use std::sync::OnceLock;

use bellpepper::gadgets::{multipack, sha256::sha256_compression_function, uint32::UInt32};
use bellpepper_core::{
    boolean::{AllocatedBit, Boolean},
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

/// Smallest and largest supported `log_constraints`.
pub const MIN_LOG: u32 = 10;
pub const MAX_LOG: u32 = 26;

/// The circuits the CLI and benches know by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    Sha256Chain,
    MulChain,
}

impl Builtin {
    pub const ALL: [Builtin; 2] = [Builtin::Sha256Chain, Builtin::MulChain];

    pub fn name(self) -> &'static str {
        match self {
            Builtin::Sha256Chain => "sha256",
            Builtin::MulChain => "mul",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// Either built-in circuit, so callers can hold one without generics.
#[derive(Clone, Debug)]
pub enum AnyCircuit {
    Sha256Chain(Sha256Chain),
    MulChain(MulChain),
}

impl AnyCircuit {
    /// The circuit `kind` at 2^`log` constraints with witness from `seed` (`None`:
    /// the blank circuit for parameter generation).
    pub fn new(kind: Builtin, log: u32, seed: Option<u64>) -> Result<Self, CircuitError> {
        Ok(match kind {
            Builtin::Sha256Chain => AnyCircuit::Sha256Chain(Sha256Chain::new(log, seed)?),
            Builtin::MulChain => AnyCircuit::MulChain(MulChain::new(log, 2, seed)?),
        })
    }

    /// The public inputs (without the leading one) a verifier needs.
    pub fn public_inputs(&self) -> Result<Vec<Scalar>, CircuitError> {
        match self {
            AnyCircuit::Sha256Chain(c) => c.public_inputs(),
            AnyCircuit::MulChain(c) => c.public_inputs(),
        }
    }
}

impl Circuit<Scalar> for AnyCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            AnyCircuit::Sha256Chain(c) => c.synthesize(cs),
            AnyCircuit::MulChain(c) => c.synthesize(cs),
        }
    }
}

/// Errors building a circuit.
#[derive(Debug, PartialEq, Eq)]
pub enum CircuitError {
    /// The size is outside what the circuit supports.
    Size { log: u32, min: u32, max: u32 },
    /// A blank circuit (no seed) has no public input values.
    Blank,
    /// More public inputs than constraints to carry them.
    TooManyInputs { inputs: usize, log: u32 },
}

impl std::fmt::Display for CircuitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CircuitError::Size { log, min, max } => write!(
                f,
                "a circuit of 2^{log} constraints is not supported: choose 2^{min} to 2^{max}"
            ),
            CircuitError::Blank => {
                write!(
                    f,
                    "the blank circuit (no witness seed) has no public inputs"
                )
            }
            CircuitError::TooManyInputs { inputs, log } => write!(
                f,
                "{inputs} public inputs do not fit a circuit of 2^{log} constraints"
            ),
        }
    }
}

impl std::error::Error for CircuitError {}

fn check_log(log: u32) -> Result<(), CircuitError> {
    if (MIN_LOG..=MAX_LOG).contains(&log) {
        Ok(())
    } else {
        Err(CircuitError::Size {
            log,
            min: MIN_LOG,
            max: MAX_LOG,
        })
    }
}

fn random_scalar(rng: &mut ChaCha20Rng) -> Scalar {
    Scalar::random(&mut *rng)
}

/// A chain of multiplications over random field elements: for `i` in `0..len`,
/// `x_i · y_i = x_{i+1}`, with `x_0` and every `y_i` private and random. The last
/// `x` and `public_inputs − 1` earlier ones are exposed as public inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MulChain {
    log: u32,
    public_inputs: usize,
    seed: Option<u64>,
}

impl MulChain {
    /// A chain filling the 2^`log` domain with `public_inputs` (≥ 1) public inputs.
    pub fn new(log: u32, public_inputs: usize, seed: Option<u64>) -> Result<Self, CircuitError> {
        check_log(log)?;
        let public_inputs = public_inputs.max(1);
        if 2 * (public_inputs + 1) > (1usize << log) {
            return Err(CircuitError::TooManyInputs {
                inputs: public_inputs,
                log,
            });
        }
        Ok(Self {
            log,
            public_inputs,
            seed,
        })
    }

    /// Multiplications in the chain: the domain less one constraint per public
    /// input for exposing it, and one per input (the one included) that the
    /// prover appends.
    pub fn len(&self) -> usize {
        (1usize << self.log) - 2 * self.public_inputs - 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Index in the chain of the `j`-th exposed value (the last is the output).
    fn exposed(&self, j: usize) -> usize {
        let len = self.len();
        if j + 1 == self.public_inputs {
            len
        } else {
            (j + 1) * len / self.public_inputs
        }
    }

    fn values(&self) -> Option<impl Iterator<Item = (Scalar, Scalar)>> {
        let seed = self.seed?;
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut x = random_scalar(&mut rng);
        Some(std::iter::from_fn(move || {
            let y = random_scalar(&mut rng);
            let cur = x;
            x *= y;
            Some((cur, y))
        }))
    }

    /// The public inputs a verifier needs, computed natively.
    pub fn public_inputs(&self) -> Result<Vec<Scalar>, CircuitError> {
        let mut values = self.values().ok_or(CircuitError::Blank)?;
        let len = self.len();
        let wanted: Vec<usize> = (0..self.public_inputs).map(|j| self.exposed(j)).collect();
        let mut out = Vec::with_capacity(wanted.len());
        let mut x = Scalar::ZERO;
        for i in 0..=len {
            if i < len {
                let (xi, yi) = values.next().expect("the value iterator is endless");
                x = xi;
                if wanted.contains(&i) {
                    out.push(x);
                }
                x = xi * yi;
            } else if wanted.contains(&i) {
                out.push(x);
            }
        }
        Ok(out)
    }
}

impl Circuit<Scalar> for MulChain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let len = self.len();
        let mut values = self.values();
        let mut next = || values.as_mut().map(|v| v.next().expect("endless"));
        let exposed: Vec<usize> = (0..self.public_inputs).map(|j| self.exposed(j)).collect();

        let (mut x_val, mut y_val) = match next() {
            Some((x, y)) => (Some(x), Some(y)),
            None => (None, None),
        };
        let mut x = cs.alloc(|| "x0", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        let mut exposed_vars = Vec::with_capacity(exposed.len());
        for i in 0..len {
            if exposed.contains(&i) {
                exposed_vars.push((x, x_val));
            }
            let y = cs.alloc(
                || format!("y{i}"),
                || y_val.ok_or(SynthesisError::AssignmentMissing),
            )?;
            let z_val = x_val.zip(y_val).map(|(a, b)| a * b);
            let z = cs.alloc(
                || format!("z{i}"),
                || z_val.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(|| format!("mul {i}"), |lc| lc + x, |lc| lc + y, |lc| lc + z);
            x = z;
            x_val = z_val;
            if i + 1 < len {
                y_val = next().map(|(_, y)| y);
            }
        }
        exposed_vars.push((x, x_val));
        for (j, (var, val)) in exposed_vars.into_iter().enumerate() {
            let input = cs.alloc_input(
                || format!("out {j}"),
                || val.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(
                || format!("expose {j}"),
                |lc| lc + var,
                |lc| lc + CS::one(),
                |lc| lc + input,
            );
        }
        Ok(())
    }
}

const SHA256_IV: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

/// A chain of SHA-256 compressions: the state starts as 256 private random bits and
/// each round compresses `state ‖ state` from the standard IV. The rest of the domain
/// is filled with boolean XORs of the state bits (one constraint each), and the final
/// state is packed into two public inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sha256Chain {
    log: u32,
    seed: Option<u64>,
}

/// Public inputs of the packed 256-bit state (254 bits per field element).
const SHA_INPUTS: usize = 2;
const SEED_BITS: usize = 256;

impl Sha256Chain {
    pub fn new(log: u32, seed: Option<u64>) -> Result<Self, CircuitError> {
        check_log(log)?;
        Ok(Self { log, seed })
    }

    /// (compressions, filler XORs) filling the 2^log domain.
    pub fn plan(&self) -> (usize, usize) {
        let per = compression_constraints();
        // Budget: the domain, less the packing constraints and the constraints the
        // prover appends for the inputs (the one included), less the seed bits.
        let budget = (1usize << self.log) - 2 * SHA_INPUTS - 1 - SEED_BITS;
        let rounds = budget / per;
        (rounds, budget - rounds * per)
    }

    fn seed_bits(&self) -> Option<[u8; 32]> {
        let seed = self.seed?;
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        Some(bytes)
    }

    /// The public inputs a verifier needs, computed natively with `sha2`.
    pub fn public_inputs(&self) -> Result<Vec<Scalar>, CircuitError> {
        let mut state = self.seed_bits().ok_or(CircuitError::Blank)?;
        let (rounds, _) = self.plan();
        for _ in 0..rounds {
            let mut h = SHA256_IV;
            let mut block = [0u8; 64];
            block[..32].copy_from_slice(&state);
            block[32..].copy_from_slice(&state);
            sha2::compress256(&mut h, &[block.into()]);
            for (i, w) in h.iter().enumerate() {
                state[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
            }
        }
        let bits = multipack::bytes_to_bits(&state);
        Ok(multipack::compute_multipacking(&bits))
    }
}

impl Circuit<Scalar> for Sha256Chain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let (rounds, filler) = self.plan();
        let seed = self.seed_bits();
        let mut state = Vec::with_capacity(SEED_BITS);
        for i in 0..SEED_BITS {
            let value = seed.map(|b| (b[i / 8] >> (7 - i % 8)) & 1 == 1);
            let bit = AllocatedBit::alloc(cs.namespace(|| format!("seed {i}")), value)?;
            state.push(Boolean::from(bit));
        }
        let iv: Vec<UInt32> = SHA256_IV.iter().map(|&w| UInt32::constant(w)).collect();
        for r in 0..rounds {
            let block: Vec<Boolean> = state.iter().chain(state.iter()).cloned().collect();
            let out =
                sha256_compression_function(cs.namespace(|| format!("round {r}")), &block, &iv)?;
            state = out.into_iter().flat_map(|w| w.into_bits_be()).collect();
        }
        // Filler: XOR chains over the state bits, one constraint each. Constant bits
        // (possible only when there were no rounds) cost nothing, so start from an
        // allocated bit.
        let mut acc = state
            .iter()
            .find(|b| matches!(b, Boolean::Is(_)))
            .cloned()
            .unwrap_or(Boolean::constant(false));
        for i in 0..filler {
            let other = &state[(i * 7 + 1) % state.len()];
            acc = Boolean::xor(cs.namespace(|| format!("filler {i}")), &acc, other)?;
            if let Boolean::Constant(_) = acc {
                // Keep every filler step a real constraint.
                acc = Boolean::from(AllocatedBit::alloc(
                    cs.namespace(|| format!("filler bit {i}")),
                    acc.get_value(),
                )?);
            }
        }
        multipack::pack_into_inputs(cs.namespace(|| "pack"), &state)
    }
}

/// Constraints of one `sha256_compression_function` call over allocated bits,
/// counted once per process.
fn compression_constraints() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        let mut cs = CountingCs::default();
        let bits: Vec<Boolean> = (0..512)
            .map(|i| {
                Boolean::from(
                    AllocatedBit::alloc(cs.namespace(|| format!("b{i}")), Some(false))
                        .expect("the counting system never fails an allocation"),
                )
            })
            .collect();
        let before = cs.constraints;
        let iv: Vec<UInt32> = SHA256_IV.iter().map(|&w| UInt32::constant(w)).collect();
        sha256_compression_function(&mut cs, &bits, &iv)
            .expect("the counting system never fails a constraint");
        cs.constraints - before
    })
}

/// A constraint system that only counts; used to size circuits.
#[derive(Default)]
pub struct CountingCs {
    pub inputs: usize,
    pub aux: usize,
    pub constraints: usize,
}

impl ConstraintSystem<Scalar> for CountingCs {
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
        Ok(Variable::new_unchecked(Index::Input(self.inputs)))
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

/// Constraints the Groth16 prover will see for `circuit`: the circuit's own plus
/// one per public input, the one included.
pub fn prover_constraints<C: Circuit<Scalar>>(circuit: C) -> Result<usize, SynthesisError> {
    let mut cs = CountingCs::default();
    circuit.synthesize(&mut cs)?;
    Ok(cs.constraints + cs.inputs + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn circuits_fill_their_domain() {
        for log in [10u32, 12, 15, 16] {
            for kind in Builtin::ALL {
                let c = AnyCircuit::new(kind, log, Some(1)).unwrap();
                let n = prover_constraints(c).unwrap();
                assert!(n <= 1 << log, "{kind:?} 2^{log}: {n}");
                assert!(n > 1 << (log - 1), "{kind:?} 2^{log}: {n}");
            }
        }
        // A SHA chain at 2^16 has full compressions in it.
        assert!(Sha256Chain::new(16, None).unwrap().plan().0 >= 2);
    }

    #[test]
    fn sizes_out_of_range_are_errors() {
        assert_eq!(
            MulChain::new(3, 1, None).unwrap_err(),
            CircuitError::Size {
                log: 3,
                min: MIN_LOG,
                max: MAX_LOG
            }
        );
        assert!(Sha256Chain::new(40, None).is_err());
        assert_eq!(
            MulChain::new(10, 1, None).unwrap().public_inputs(),
            Err(CircuitError::Blank)
        );
    }

    #[test]
    fn mul_chain_public_inputs_match_its_witness() {
        let c = MulChain::new(10, 3, Some(7)).unwrap();
        let expect = c.public_inputs().unwrap();
        assert_eq!(expect.len(), 3);
        let mut cs = bellpepper_core::test_cs::TestConstraintSystem::<Scalar>::new();
        c.synthesize(&mut cs).unwrap();
        assert!(cs.is_satisfied());
        for (j, v) in expect.iter().enumerate() {
            assert_eq!(cs.get_input(j + 1, &format!("out {j}")), *v);
        }
    }

    #[test]
    fn sha_chain_public_inputs_match_its_witness() {
        let c = Sha256Chain::new(16, Some(3)).unwrap();
        let expect = c.public_inputs().unwrap();
        let mut cs = bellpepper_core::test_cs::TestConstraintSystem::<Scalar>::new();
        c.synthesize(&mut cs).unwrap();
        assert!(cs.is_satisfied());
        assert!(cs.verify(&expect));
        // A different seed gives different inputs.
        assert_ne!(
            Sha256Chain::new(16, Some(4))
                .unwrap()
                .public_inputs()
                .unwrap(),
            expect
        );
    }
}

mod porep_like;
pub use porep_like::*;
