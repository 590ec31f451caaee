//! A synthetic circuit with the R1CS shape of a 32 GiB PoRep partition, at any 2^k.
//!
//! The real partition (130M constraints, SHA-256 and Poseidon gadgets over bits)
//! has about 2.4 / 1.0 / 2.2 non-zeros per row in A / B / C, 99.7% of its aux
//! variables in A and 25.4% in B, only the constant ONE among the inputs in B, and
//! mostly 0/1 witness values. Those figures decide the prover's cost: the spmv
//! stage is proportional to the non-zeros, the A/B MSMs to the densities, and
//! `prep_msm` pays off in proportion to the 0/1 share. [`PorepLike`] reproduces
//! them at any size so the engine can be measured on the right shape without the
//! 44 GiB parameters.
//!
//! # The round
//!
//! A state of eight 32-bit words (bits) goes through rounds of gadget-style
//! constraint families, each satisfiable by construction:
//!
//! | family | rows | A / B / C non-zeros | new aux |
//! |---|---|---|---|
//! | 4 additions of 4 state words: `(Σ 2^i bits) · 1 = Σ_{i<34} 2^i r_i` | 4 | 128 / 1 / 34 | — |
//! | booleanity of the 34 result bits `(1 − r) · r = 0` | 136 | 2 / 1 / 0 | 136 bits |
//! | 11 words XOR, `(2a) · b = a + b − c` (a state, b a sum) | 352 | 1 / 1 / 3 | 352 bits |
//! | 2 words AND, `a · b = c` | 64 | 1 / 1 / 1 | 64 bits |
//! | 5 packings of a XOR word, `(Σ 2^i x_i) · 1 = num` | 5 | 32 / 1 / 1 | 5 |
//! | S-box `num^5` (3 products) | 15 | 1 / 1 / 1 | 15 |
//! | mixing `y' = y + c·num^5 + num + num^2` | 5 | 4 / 1 / 1 | 5 |
//!
//! 581 rows and 577 aux per round: A = 1395/581 = 2.40, B = 1, C = 1281/581 = 2.20
//! per row; aux in B (the sum bits and the S-box's B operands) 146/577 = 25.3%;
//! 0/1 values 552/577 = 95.7%. Every new variable is read on an A side later
//! (the next state is six XOR words and the two AND words, the other XOR words are
//! packed), so A covers nearly all aux. The figures were found by a small integer
//! search over family counts; the test `porep_like_has_the_porep_shape` measures
//! them on the compiled circuit.
//!
//! Around the rounds: 256 booleanity rows for the seed state, a XOR chain filling
//! the domain exactly, and one `y · 1 = input` row per public input (the mixing
//! accumulator `y` at evenly spaced points). Public inputs: `2^k / 256` clamped to
//! 2..=328 (328 is the real partition's count).

use bellpepper_core::{
    boolean::AllocatedBit, Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError,
    Variable,
};
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

use crate::{check_log, CircuitError};

const STATE_WORDS: usize = 8;
const WORD_BITS: usize = 32;
const ADDS: usize = 4;
const ADD_ARITY: usize = 4;
/// 32 bits plus the carry of adding four words.
const SUM_BITS: usize = 34;
const XORS: usize = 11;
const ANDS: usize = 2;
const PACKS: usize = 5;
/// Rows of one round (see the module table).
pub const POREP_ROUND_ROWS: usize =
    ADDS * (1 + SUM_BITS) + (XORS + ANDS) * WORD_BITS + PACKS * (1 + 3 + 1);
/// Rows before the first round: booleanity of the seed state.
const SEED_ROWS: usize = STATE_WORDS * WORD_BITS;
/// The real partition's public inputs.
const MAX_INPUTS: usize = 328;

/// A PoRep-shaped circuit of 2^`log` constraints (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PorepLike {
    log: u32,
    seed: Option<u64>,
}

/// How a [`PorepLike`] fills its domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PorepPlan {
    pub rounds: usize,
    /// XOR rows after the rounds.
    pub filler: usize,
    pub public_inputs: usize,
}

impl PorepLike {
    /// The circuit at 2^`log` constraints with witness from `seed` (`None`: the
    /// blank circuit for parameter generation).
    pub fn new(log: u32, seed: Option<u64>) -> Result<Self, CircuitError> {
        check_log(log)?;
        Ok(Self { log, seed })
    }

    pub fn log(&self) -> u32 {
        self.log
    }

    /// Rounds, filler and public inputs. The prover sees exactly 2^log
    /// constraints: the circuit's own plus one per input, the one included.
    pub fn plan(&self) -> PorepPlan {
        let n = 1usize << self.log;
        let public_inputs = (n / 256).clamp(2, MAX_INPUTS);
        // Exposing rows, the prover's input rows (ONE included), the seed state.
        let budget = n - public_inputs - (public_inputs + 1) - SEED_ROWS;
        let rounds = budget / POREP_ROUND_ROWS;
        PorepPlan {
            rounds,
            filler: budget - rounds * POREP_ROUND_ROWS,
            public_inputs,
        }
    }

    /// Index in the sequence of mixing values `y` of the `j`-th public input (the
    /// last one is the final value).
    fn exposed(plan: &PorepPlan) -> Vec<usize> {
        let ys = plan.rounds * PACKS;
        (0..plan.public_inputs)
            .map(|j| (j + 1) * ys / plan.public_inputs - 1)
            .collect()
    }

    fn seed_words(&self) -> Option<[u32; STATE_WORDS]> {
        let mut rng = ChaCha20Rng::seed_from_u64(self.seed?);
        let mut w = [0u32; STATE_WORDS];
        for x in &mut w {
            *x = rng.next_u32();
        }
        Some(w)
    }

    /// The public inputs a verifier needs, computed natively on `u32` words (an
    /// implementation independent of the bit-level circuit).
    pub fn public_inputs(&self) -> Result<Vec<Scalar>, CircuitError> {
        let mut w = self.seed_words().ok_or(CircuitError::Blank)?;
        let plan = self.plan();
        let exposed = Self::exposed(&plan);
        let mut ys = Vec::with_capacity(plan.rounds * PACKS);
        let mut y = Scalar::ZERO;
        for _ in 0..plan.rounds {
            let t: [u32; ADDS] = std::array::from_fn(|j| {
                (0..ADD_ARITY).fold(0u32, |acc, m| {
                    acc.wrapping_add(w[(2 * j + m) % STATE_WORDS])
                })
            });
            let x: [u32; XORS] = std::array::from_fn(|i| w[i % STATE_WORDS] ^ t[i % ADDS]);
            let a: [u32; ANDS] =
                std::array::from_fn(|i| w[(i + 3) % STATE_WORDS] & t[(i + 1) % ADDS]);
            for (p, xp) in x.iter().take(PACKS).enumerate() {
                let num = Scalar::from(u64::from(*xp));
                let x2 = num.square();
                let x5 = x2.square() * num;
                y += mix_coeff(p) * x5 + num + x2;
                ys.push(y);
            }
            w = next_state(&x, &a);
        }
        Ok(exposed.into_iter().map(|i| ys[i]).collect())
    }
}

/// The next state: XOR words 5..11 and both AND words (XOR words 0..5 are packed).
fn next_state<T: Clone>(x: &[T], a: &[T]) -> [T; STATE_WORDS] {
    std::array::from_fn(|i| {
        if i < XORS - PACKS {
            x[PACKS + i].clone()
        } else {
            a[i - (XORS - PACKS)].clone()
        }
    })
}

fn mix_coeff(p: usize) -> Scalar {
    Scalar::from(p as u64 + 2)
}

type Word = Vec<AllocatedBit>;

fn word_value(w: &[AllocatedBit]) -> Option<u64> {
    w.iter().enumerate().try_fold(0u64, |acc, (i, b)| {
        b.get_value().map(|v| acc | (u64::from(v) << i))
    })
}

/// `Σ 2^i bits_i` over `words`, each word from bit 0.
fn packed_lc(words: &[&Word]) -> LinearCombination<Scalar> {
    let mut lc = LinearCombination::zero();
    for w in words {
        let mut coeff = Scalar::ONE;
        for b in w.iter() {
            lc = lc + (coeff, b.get_variable());
            coeff = coeff.double();
        }
    }
    lc
}

fn alloc_scalar<CS: ConstraintSystem<Scalar>>(
    cs: &mut CS,
    name: &'static str,
    value: Option<Scalar>,
) -> Result<Variable, SynthesisError> {
    cs.alloc(|| name, || value.ok_or(SynthesisError::AssignmentMissing))
}

impl Circuit<Scalar> for PorepLike {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let plan = self.plan();
        let exposed = Self::exposed(&plan);
        let seed = self.seed_words();

        let mut state: Vec<Word> = Vec::with_capacity(STATE_WORDS);
        for k in 0..STATE_WORDS {
            let mut word = Vec::with_capacity(WORD_BITS);
            for i in 0..WORD_BITS {
                let v = seed.map(|s| (s[k] >> i) & 1 == 1);
                word.push(AllocatedBit::alloc(
                    cs.namespace(|| format!("seed {k} {i}")),
                    v,
                )?);
            }
            state.push(word);
        }

        let mut y: Option<(Variable, Option<Scalar>)> = None;
        // `exposed` is ascending; walk it alongside the sequence of `y`s.
        let mut y_index = 0usize;
        let mut next_exposed = exposed.iter().peekable();
        let mut to_expose: Vec<(Variable, Option<Scalar>)> = Vec::with_capacity(exposed.len());
        for r in 0..plan.rounds {
            let mut cs = cs.namespace(|| format!("round {r}"));
            // Additions of four state words into 34 checked bits; the low 32 are
            // the sum word.
            let mut sums: Vec<Word> = Vec::with_capacity(ADDS);
            for j in 0..ADDS {
                let words: Vec<&Word> = (0..ADD_ARITY)
                    .map(|m| &state[(2 * j + m) % STATE_WORDS])
                    .collect();
                let total = words
                    .iter()
                    .try_fold(0u64, |acc, w| word_value(w).map(|v| acc + v));
                let mut bits = Vec::with_capacity(SUM_BITS);
                for i in 0..SUM_BITS {
                    bits.push(AllocatedBit::alloc(
                        cs.namespace(|| format!("sum {j} bit {i}")),
                        total.map(|t| (t >> i) & 1 == 1),
                    )?);
                }
                let lhs = packed_lc(&words);
                let rhs = packed_lc(&[&bits]);
                cs.enforce(|| format!("sum {j}"), |_| lhs, |lc| lc + CS::one(), |_| rhs);
                bits.truncate(WORD_BITS);
                sums.push(bits);
            }
            let mut xors: Vec<Word> = Vec::with_capacity(XORS);
            for i in 0..XORS {
                let (a, b) = (&state[i % STATE_WORDS], &sums[i % ADDS]);
                let mut out = Vec::with_capacity(WORD_BITS);
                for k in 0..WORD_BITS {
                    out.push(AllocatedBit::xor(
                        cs.namespace(|| format!("xor {i} bit {k}")),
                        &a[k],
                        &b[k],
                    )?);
                }
                xors.push(out);
            }
            let mut ands: Vec<Word> = Vec::with_capacity(ANDS);
            for i in 0..ANDS {
                let (a, b) = (&state[(i + 3) % STATE_WORDS], &sums[(i + 1) % ADDS]);
                let mut out = Vec::with_capacity(WORD_BITS);
                for k in 0..WORD_BITS {
                    out.push(AllocatedBit::and(
                        cs.namespace(|| format!("and {i} bit {k}")),
                        &a[k],
                        &b[k],
                    )?);
                }
                ands.push(out);
            }
            for (p, word) in xors.iter().take(PACKS).enumerate() {
                let mut cs = cs.namespace(|| format!("pack {p}"));
                let num_v = word_value(word).map(Scalar::from);
                let num = alloc_scalar(&mut cs, "num", num_v)?;
                let packed = packed_lc(&[word]);
                cs.enforce(|| "packing", |_| packed, |lc| lc + CS::one(), |lc| lc + num);
                let x2_v = num_v.map(|v| v.square());
                let x2 = alloc_scalar(&mut cs, "x2", x2_v)?;
                cs.enforce(|| "num^2", |lc| lc + num, |lc| lc + num, |lc| lc + x2);
                let x4_v = x2_v.map(|v| v.square());
                let x4 = alloc_scalar(&mut cs, "x4", x4_v)?;
                cs.enforce(|| "num^4", |lc| lc + x2, |lc| lc + x2, |lc| lc + x4);
                let x5_v = x4_v.zip(num_v).map(|(a, b)| a * b);
                let x5 = alloc_scalar(&mut cs, "x5", x5_v)?;
                cs.enforce(|| "num^5", |lc| lc + x4, |lc| lc + num, |lc| lc + x5);
                let c = mix_coeff(p);
                let prev_v = match y {
                    Some((_, v)) => v,
                    None => Some(Scalar::ZERO),
                };
                let y_v = prev_v
                    .zip(x5_v)
                    .zip(num_v.zip(x2_v))
                    .map(|((prev, x5), (num, x2))| prev + c * x5 + num + x2);
                let y_new = alloc_scalar(&mut cs, "y", y_v)?;
                cs.enforce(
                    || "mixing",
                    |lc| match y {
                        Some((prev, _)) => lc + prev + (c, x5) + num + x2,
                        None => lc + (c, x5) + num + x2,
                    },
                    |lc| lc + CS::one(),
                    |lc| lc + y_new,
                );
                y = Some((y_new, y_v));
                while next_exposed.next_if_eq(&&y_index).is_some() {
                    to_expose.push((y_new, y_v));
                }
                y_index += 1;
            }
            state = next_state(&xors, &ands).to_vec();
        }

        // Filler: a XOR chain over the state bits, one row each.
        let bits: Vec<&AllocatedBit> = state.iter().flatten().collect();
        let mut acc: Option<AllocatedBit> = None;
        for i in 0..plan.filler {
            let other = bits[(i * 7 + 1) % bits.len()];
            let a = acc.as_ref().unwrap_or(bits[0]);
            acc = Some(AllocatedBit::xor(
                cs.namespace(|| format!("filler {i}")),
                a,
                other,
            )?);
        }

        for (j, (var, value)) in to_expose.into_iter().enumerate() {
            let input = cs.alloc_input(
                || format!("y {j}"),
                || value.ok_or(SynthesisError::AssignmentMissing),
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

/// The R1CS shape of a circuit as the Groth16 prover sees it (the constraint
/// bellperson appends per public input, the one included, is counted: A = that
/// input, B = C = 0).
#[derive(Clone, Debug, PartialEq)]
pub struct R1csShape {
    /// Constraints including the appended input constraints.
    pub constraints: usize,
    /// Public inputs including ONE.
    pub inputs: usize,
    pub aux: usize,
    /// Non-zeros (distinct variables) over all rows of A, B and C.
    pub nnz_a: usize,
    pub nnz_b: usize,
    pub nnz_c: usize,
    /// Aux variables appearing in some row of A, of B.
    pub a_aux_dense: usize,
    pub b_aux_dense: usize,
    /// Inputs (ONE included) appearing in some row of B.
    pub b_inputs_dense: usize,
    /// Aux values that are 0 or 1 (0 if the circuit is blank).
    pub aux_zero_or_one: usize,
}

impl R1csShape {
    pub fn per_row(&self) -> (f64, f64, f64) {
        let n = self.constraints.max(1) as f64;
        (
            self.nnz_a as f64 / n,
            self.nnz_b as f64 / n,
            self.nnz_c as f64 / n,
        )
    }

    pub fn a_aux_density(&self) -> f64 {
        self.a_aux_dense as f64 / self.aux.max(1) as f64
    }

    pub fn b_aux_density(&self) -> f64 {
        self.b_aux_dense as f64 / self.aux.max(1) as f64
    }

    pub fn zero_or_one_share(&self) -> f64 {
        self.aux_zero_or_one as f64 / self.aux.max(1) as f64
    }
}

impl std::fmt::Display for R1csShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b, c) = self.per_row();
        write!(
            f,
            "{} constraints, {} inputs, {} aux; per row A {a:.3} B {b:.3} C {c:.3}; \
             aux in A {:.2}%, aux in B {:.2}%, inputs in B {} of {}; aux 0/1 {:.1}%",
            self.constraints,
            self.inputs,
            self.aux,
            100.0 * self.a_aux_density(),
            100.0 * self.b_aux_density(),
            self.b_inputs_dense,
            self.inputs,
            100.0 * self.zero_or_one_share()
        )
    }
}

/// Synthesises `circuit` into a constraint system that only measures its shape.
pub fn measure_shape<C: Circuit<Scalar>>(circuit: C) -> Result<R1csShape, SynthesisError> {
    let mut cs = ShapeCs::default();
    circuit.synthesize(&mut cs)?;
    let inputs = cs.inputs_b.len();
    // The prover's appended constraints: one A non-zero each.
    let constraints = cs.constraints + inputs;
    Ok(R1csShape {
        constraints,
        inputs,
        aux: cs.aux_a.len(),
        nnz_a: cs.nnz[0] + inputs,
        nnz_b: cs.nnz[1],
        nnz_c: cs.nnz[2],
        a_aux_dense: cs.aux_a.iter().filter(|&&x| x).count(),
        b_aux_dense: cs.aux_b.iter().filter(|&&x| x).count(),
        b_inputs_dense: cs.inputs_b.iter().filter(|&&x| x).count(),
        aux_zero_or_one: cs.zero_or_one,
    })
}

struct ShapeCs {
    constraints: usize,
    nnz: [usize; 3],
    aux_a: Vec<bool>,
    aux_b: Vec<bool>,
    inputs_b: Vec<bool>,
    zero_or_one: usize,
}

impl Default for ShapeCs {
    fn default() -> Self {
        Self {
            constraints: 0,
            nnz: [0; 3],
            aux_a: Vec::new(),
            aux_b: Vec::new(),
            // Input 0 is ONE.
            inputs_b: vec![false],
            zero_or_one: 0,
        }
    }
}

impl ConstraintSystem<Scalar> for ShapeCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        // Blank circuits have no values; that is not an error for measuring.
        if let Ok(v) = f() {
            if v == Scalar::ZERO || v == Scalar::ONE {
                self.zero_or_one += 1;
            }
        }
        self.aux_a.push(false);
        self.aux_b.push(false);
        Ok(Variable::new_unchecked(Index::Aux(self.aux_a.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs_b.push(false);
        Ok(Variable::new_unchecked(Index::Input(
            self.inputs_b.len() - 1,
        )))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
        let lcs = [
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        ];
        for (k, lc) in lcs.iter().enumerate() {
            self.nnz[k] += lc.iter().count();
            for (var, _) in lc.iter() {
                match (k, var.get_unchecked()) {
                    (0, Index::Aux(i)) => self.aux_a[i] = true,
                    (1, Index::Aux(i)) => self.aux_b[i] = true,
                    (1, Index::Input(i)) => self.inputs_b[i] = true,
                    _ => {}
                }
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prover_constraints;
    use bellpepper_core::test_cs::TestConstraintSystem;

    #[test]
    fn porep_like_is_satisfiable_and_its_inputs_match() {
        for log in 10..=12 {
            for seed in [1u64, 2] {
                let c = PorepLike::new(log, Some(seed)).unwrap();
                let expect = c.public_inputs().unwrap();
                assert_eq!(expect.len(), c.plan().public_inputs);
                let mut cs = TestConstraintSystem::<Scalar>::new();
                c.clone().synthesize(&mut cs).unwrap();
                assert!(
                    cs.is_satisfied(),
                    "2^{log}: {:?}",
                    cs.which_is_unsatisfied()
                );
                assert!(cs.verify(&expect), "2^{log} seed {seed}");
                // A wrong input is caught.
                let mut wrong = expect.clone();
                wrong[0] += Scalar::ONE;
                assert!(!cs.verify(&wrong));
            }
        }
        // Different seeds give different inputs.
        let a = PorepLike::new(12, Some(1))
            .unwrap()
            .public_inputs()
            .unwrap();
        let b = PorepLike::new(12, Some(2))
            .unwrap()
            .public_inputs()
            .unwrap();
        assert_ne!(a, b);
        assert_eq!(
            PorepLike::new(12, None).unwrap().public_inputs(),
            Err(CircuitError::Blank)
        );
        assert!(PorepLike::new(9, Some(1)).is_err());
    }

    #[test]
    fn porep_like_fills_its_domain() {
        for log in [10u32, 11, 12, 14, 16, 20] {
            let c = PorepLike::new(log, None).unwrap();
            let n = prover_constraints(c.clone()).unwrap();
            assert!(n <= 1 << log, "2^{log}: {n}");
            assert!(n > 1 << (log - 1), "2^{log}: {n}");
            // Filled exactly, in fact.
            assert_eq!(n, 1 << log);
            let p = c.plan();
            assert_eq!(
                p.public_inputs,
                ((1usize << log) / 256).clamp(2, MAX_INPUTS)
            );
            assert!(p.rounds >= 1);
        }
        assert_eq!(PorepLike::new(24, None).unwrap().plan().public_inputs, 328);
    }

    #[test]
    fn porep_like_has_the_porep_shape() {
        for log in [12u32, 16, 20] {
            let shape = measure_shape(PorepLike::new(log, Some(5)).unwrap()).unwrap();
            println!("PorepLike 2^{log}: {shape}");
            assert_eq!(shape.constraints, 1 << log);
            let (a, b, c) = shape.per_row();
            // The real partition: 2.4 / 1.0 / 2.2, 99.7% / 25.4% aux in A / B,
            // only ONE of the inputs in B, mostly 0/1 values.
            if log >= 16 {
                assert!((2.35..=2.45).contains(&a), "A {a}");
                assert!((2.15..=2.25).contains(&c), "C {c}");
                assert!((0.245..=0.265).contains(&shape.b_aux_density()));
                assert!(shape.a_aux_density() >= 0.99);
            }
            if log >= 20 {
                // Fixed costs (seed state, inputs, filler) have faded.
                assert!((2.38..=2.42).contains(&a), "A {a}");
                assert!((2.18..=2.22).contains(&c), "C {c}");
                assert!(shape.a_aux_density() >= 0.997);
            }
            assert!((0.97..=1.0).contains(&b), "B {b}");
            assert_eq!(shape.b_inputs_dense, 1);
            assert!(shape.zero_or_one_share() >= 0.9);
            // One aux per row, as in the real partition (130.17M / 130.28M).
            assert!((0.95..=1.0).contains(&(shape.aux as f64 / shape.constraints as f64)));
        }
        // The blank circuit has the same shape (no values).
        let blank = measure_shape(PorepLike::new(12, None).unwrap()).unwrap();
        let full = measure_shape(PorepLike::new(12, Some(5)).unwrap()).unwrap();
        assert_eq!(
            (
                blank.nnz_a,
                blank.nnz_b,
                blank.nnz_c,
                blank.aux,
                blank.b_aux_dense
            ),
            (
                full.nnz_a,
                full.nnz_b,
                full.nnz_c,
                full.aux,
                full.b_aux_dense
            )
        );
        assert_eq!(blank.aux_zero_or_one, 0);
    }

    #[test]
    fn shape_measure_counts_a_known_circuit() {
        // MulChain: x·y = z rows, y·1 = input rows: A 1, B 1, C 1 each, plus the
        // appended input rows (A 1).
        let c = crate::MulChain::new(10, 3, Some(1)).unwrap();
        let s = measure_shape(c).unwrap();
        assert_eq!(s.constraints, 1 << 10);
        assert_eq!(s.inputs, 4);
        assert_eq!(s.nnz_a, 1 << 10);
        assert_eq!(s.nnz_b, (1 << 10) - 4);
        assert_eq!(s.nnz_c, (1 << 10) - 4);
        assert_eq!(s.b_inputs_dense, 1);
    }
}
