//! The witness of bellperson's SHA-256 gadget, computed without the gadget.
//!
//! A 32 GiB PoRep partition is ~90% SHA-256 constraints (each challenge re-derives
//! eleven labels of 20 compression blocks each), and the gadget spends most of its
//! time building linear combinations that a witness-only system throws away:
//! `UInt32::addmany` sums 32-term combinations per operand and `MultiEq` re-clones its
//! growing combination on every addition. The witness is only the values of the
//! variables the gadget allocates, in the order it allocates them, so this module
//! walks the gadget's exact sequence of allocations (the same constant folding of
//! `Boolean::xor`, `and`, `sha256_ch`, `sha256_maj`, the same number of result bits in
//! `addmany`, the same `MultiEq` batching) on plain booleans and `u32`s, and allocates
//! each value through the caller's constraint system, with one `enforce` call per
//! constraint the gadget makes, so that the shape checks of [`crate::R1cs`] still count
//! them.
//!
//! It emits no linear combinations, so it is only for a *witness*: the constraints
//! come from the circuit compiled with the real gadget, and the tests compare this
//! witness with the gadget's, value for value (here on random inputs with constant and
//! negated bits, and in cuzk-filecoin on real PoRep partitions).
//!
//! The gadget it mirrors is bellperson 0.27's `gadgets::sha256::sha256` (the same code
//! as bellpepper 0.2's, which the tests use).

use bellpepper_core::boolean::Boolean;
use bellpepper_core::{ConstraintSystem, SynthesisError};
use ff::PrimeField;

/// SHA-256's round constants (FIPS 180-4, 4.2.2).
#[allow(clippy::unreadable_literal)]
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256's initial hash value (FIPS 180-4, 5.3.3).
#[allow(clippy::unreadable_literal)]
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// A `Boolean` as the gadget sees it: a constant, or an allocated bit (`raw`, the
/// variable's value) read directly or negated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bit {
    Const(bool),
    Var { raw: bool, neg: bool },
}

impl Bit {
    fn value(self) -> bool {
        match self {
            Bit::Const(b) => b,
            Bit::Var { raw, neg } => raw ^ neg,
        }
    }
    fn not(self) -> Bit {
        match self {
            Bit::Const(b) => Bit::Const(!b),
            Bit::Var { raw, neg } => Bit::Var { raw, neg: !neg },
        }
    }
    fn is_const(self) -> bool {
        matches!(self, Bit::Const(_))
    }
    fn from_boolean(b: &Boolean) -> Result<Bit, SynthesisError> {
        Ok(match b {
            Boolean::Constant(c) => Bit::Const(*c),
            Boolean::Is(v) => Bit::Var {
                raw: v.get_value().ok_or(SynthesisError::AssignmentMissing)?,
                neg: false,
            },
            Boolean::Not(v) => Bit::Var {
                raw: v.get_value().ok_or(SynthesisError::AssignmentMissing)?,
                neg: true,
            },
        })
    }
}

/// A `UInt32`: its bits, least significant first (as the gadget keeps them).
#[derive(Clone, Copy)]
struct Word([Bit; 32]);

impl Word {
    fn constant(v: u32) -> Word {
        Word(std::array::from_fn(|i| Bit::Const((v >> i) & 1 == 1)))
    }
    /// `UInt32::from_bits_be`: 32 bits, most significant first.
    fn from_bits_be(bits: &[Bit]) -> Word {
        Word(std::array::from_fn(|i| bits[31 - i]))
    }
    fn value(&self) -> u32 {
        self.0
            .iter()
            .enumerate()
            .fold(0, |v, (i, b)| v | (u32::from(b.value()) << i))
    }
    fn rotr(&self, by: usize) -> Word {
        Word(std::array::from_fn(|i| self.0[(i + by) % 32]))
    }
    fn shr(&self, by: usize) -> Word {
        Word(std::array::from_fn(|i| {
            self.0.get(i + by).copied().unwrap_or(Bit::Const(false))
        }))
    }
}

/// The caller's constraint system, seen as the gadget's sequence of allocations and
/// constraints.
struct Sink<'a, S: PrimeField, CS: ConstraintSystem<S>> {
    cs: &'a mut CS,
    _s: std::marker::PhantomData<S>,
}

impl<S: PrimeField, CS: ConstraintSystem<S>> Sink<'_, S, CS> {
    fn alloc(&mut self, value: bool) -> Result<(), SynthesisError> {
        self.cs
            .alloc(|| "", || Ok(if value { S::ONE } else { S::ZERO }))?;
        Ok(())
    }
    /// One constraint of the gadget (its combinations are the compiled shape's).
    fn constraint(&mut self) {
        self.cs.enforce(|| "", |lc| lc, |lc| lc, |lc| lc);
    }
    /// An `AllocatedBit` made by `alloc`, `xor`, `and`, `and_not` or `nor`: one
    /// variable and its one constraint.
    fn bit(&mut self, raw: bool) -> Result<Bit, SynthesisError> {
        self.alloc(raw)?;
        self.constraint();
        Ok(Bit::Var { raw, neg: false })
    }

    /// `Boolean::xor`.
    fn xor(&mut self, a: Bit, b: Bit) -> Result<Bit, SynthesisError> {
        Ok(match (a, b) {
            (Bit::Const(false), x) | (x, Bit::Const(false)) => x,
            (Bit::Const(true), x) | (x, Bit::Const(true)) => x.not(),
            (Bit::Var { raw: ra, neg: na }, Bit::Var { raw: rb, neg: nb }) => {
                // Is ^ Is and Not ^ Not allocate a ^ b; Is ^ Not allocates a ^ b and
                // negates it.
                self.alloc(ra ^ rb)?;
                self.constraint();
                Bit::Var {
                    raw: ra ^ rb,
                    neg: na ^ nb,
                }
            }
        })
    }

    /// `Boolean::and`: the allocated bit (`and`, `and_not` or `nor`) holds the result.
    fn and(&mut self, a: Bit, b: Bit) -> Result<Bit, SynthesisError> {
        Ok(match (a, b) {
            (Bit::Const(false), _) | (_, Bit::Const(false)) => Bit::Const(false),
            (Bit::Const(true), x) | (x, Bit::Const(true)) => x,
            (x, y) => self.bit(x.value() & y.value())?,
        })
    }

    /// `Boolean::sha256_ch`: (a and b) xor ((not a) and c).
    fn ch(&mut self, a: Bit, b: Bit, c: Bit) -> Result<Bit, SynthesisError> {
        let v = (a.value() & b.value()) ^ (!a.value() & c.value());
        match (a, b, c) {
            (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => Ok(Bit::Const(v)),
            (Bit::Const(false), _, c) => Ok(c),
            (a, Bit::Const(false), c) => self.and(a.not(), c),
            (a, b, Bit::Const(false)) => self.and(a, b),
            (a, b, Bit::Const(true)) => Ok(self.and(a, b.not())?.not()),
            (a, Bit::Const(true), c) => Ok(self.and(a.not(), c.not())?.not()),
            // a constant true `a`, or three variables: one allocated bit.
            _ => self.bit(v),
        }
    }

    /// `Boolean::sha256_maj`: (a and b) xor (a and c) xor (b and c).
    fn maj(&mut self, a: Bit, b: Bit, c: Bit) -> Result<Bit, SynthesisError> {
        let (x, y, z) = (a.value(), b.value(), c.value());
        let v = (x & y) ^ (x & z) ^ (y & z);
        match (a, b, c) {
            (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => Ok(Bit::Const(v)),
            (Bit::Const(false), b, c) => self.and(b, c),
            (a, Bit::Const(false), c) => self.and(a, c),
            (a, b, Bit::Const(false)) => self.and(a, b),
            (a, b, Bit::Const(true)) => Ok(self.and(a.not(), b.not())?.not()),
            (a, Bit::Const(true), c) => Ok(self.and(a.not(), c.not())?.not()),
            (Bit::Const(true), b, c) => Ok(self.and(b.not(), c.not())?.not()),
            _ => {
                // The majority bit, then `b and c`, then the majority's constraint.
                self.alloc(v)?;
                self.and(b, c)?;
                self.constraint();
                Ok(Bit::Var { raw: v, neg: false })
            }
        }
    }

    fn xor_word(&mut self, a: &Word, b: &Word) -> Result<Word, SynthesisError> {
        let mut out = [Bit::Const(false); 32];
        for i in 0..32 {
            out[i] = self.xor(a.0[i], b.0[i])?;
        }
        Ok(Word(out))
    }

    fn triop(
        &mut self,
        a: &Word,
        b: &Word,
        c: &Word,
        f: fn(&mut Self, Bit, Bit, Bit) -> Result<Bit, SynthesisError>,
    ) -> Result<Word, SynthesisError> {
        let mut out = [Bit::Const(false); 32];
        for i in 0..32 {
            out[i] = f(self, a.0[i], b.0[i], c.0[i])?;
        }
        Ok(Word(out))
    }

    /// `UInt32::addmany` inside a `MultiEq`: a constant if every operand bit is, else
    /// as many allocated result bits as the largest possible sum has, whose equality
    /// with the operands is batched into `eq`.
    fn addmany(&mut self, eq: &mut MultiEq, ops: &[Word]) -> Result<Word, SynthesisError> {
        let sum: u64 = ops.iter().map(|w| u64::from(w.value())).sum();
        if ops.iter().all(|w| w.0.iter().all(|b| b.is_const())) {
            return Ok(Word::constant(sum as u32));
        }
        let max = ops.len() as u64 * u64::from(u32::MAX);
        let bits = (u64::BITS - max.leading_zeros()) as usize;
        let mut out = [Bit::Const(false); 32];
        for i in 0..bits {
            let b = self.bit((sum >> i) & 1 == 1)?;
            if i < 32 {
                out[i] = b;
            }
        }
        if eq.add(bits, S::CAPACITY as usize) {
            self.constraint();
        }
        Ok(Word(out))
    }
}

/// `MultiEq`'s batching: equalities are packed into one constraint until the next one
/// would reach the field's capacity, and the last batch is flushed on drop.
struct MultiEq {
    bits_used: usize,
}

impl MultiEq {
    /// Adds an equality of `bits` bits; true when a full batch is flushed first.
    fn add(&mut self, bits: usize, capacity: usize) -> bool {
        let flush = capacity <= self.bits_used + bits;
        if flush {
            self.bits_used = 0;
        }
        self.bits_used += bits;
        flush
    }
}

/// A value of `Maybe` in the gadget's compression loop: a word, or operands whose sum
/// is computed when first used.
enum Maybe {
    Deferred(Vec<Word>),
    Concrete(Word),
}

impl Maybe {
    fn compute<S: PrimeField, CS: ConstraintSystem<S>>(
        self,
        sink: &mut Sink<'_, S, CS>,
        eq: &mut MultiEq,
        others: &[Word],
    ) -> Result<Word, SynthesisError> {
        match self {
            Maybe::Concrete(w) => Ok(w),
            Maybe::Deferred(mut v) => {
                v.extend_from_slice(others);
                sink.addmany(eq, &v)
            }
        }
    }
}

/// `sha256_compression_function`, with its own `MultiEq` flushed at the end.
fn compress<S: PrimeField, CS: ConstraintSystem<S>>(
    sink: &mut Sink<'_, S, CS>,
    block: &[Bit],
    cur: &[Word; 8],
) -> Result<[Word; 8], SynthesisError> {
    let mut eq = MultiEq { bits_used: 0 };
    let mut w: Vec<Word> = block.chunks(32).map(Word::from_bits_be).collect();
    for i in 16..64 {
        let s0 = sink.xor_word(&w[i - 15].rotr(7), &w[i - 15].rotr(18))?;
        let s0 = sink.xor_word(&s0, &w[i - 15].shr(3))?;
        let s1 = sink.xor_word(&w[i - 2].rotr(17), &w[i - 2].rotr(19))?;
        let s1 = sink.xor_word(&s1, &w[i - 2].shr(10))?;
        let next = sink.addmany(&mut eq, &[w[i - 16], s0, w[i - 7], s1])?;
        w.push(next);
    }

    let mut a = Maybe::Concrete(cur[0]);
    let (mut b, mut c, mut d) = (cur[1], cur[2], cur[3]);
    let mut e = Maybe::Concrete(cur[4]);
    let (mut f, mut g, mut h) = (cur[5], cur[6], cur[7]);
    for (i, &k) in K.iter().enumerate() {
        let new_e = e.compute(sink, &mut eq, &[])?;
        let s1 = sink.xor_word(&new_e.rotr(6), &new_e.rotr(11))?;
        let s1 = sink.xor_word(&s1, &new_e.rotr(25))?;
        let ch = sink.triop(&new_e, &f, &g, Sink::ch)?;
        let temp1 = [h, s1, ch, Word::constant(k), w[i]];

        let new_a = a.compute(sink, &mut eq, &[])?;
        let s0 = sink.xor_word(&new_a.rotr(2), &new_a.rotr(13))?;
        let s0 = sink.xor_word(&s0, &new_a.rotr(22))?;
        let maj = sink.triop(&new_a, &b, &c, Sink::maj)?;

        h = g;
        g = f;
        f = new_e;
        e = Maybe::Deferred(temp1.iter().copied().chain([d]).collect());
        d = c;
        c = b;
        b = new_a;
        a = Maybe::Deferred(temp1.iter().copied().chain([s0, maj]).collect());
    }

    let h0 = a.compute(sink, &mut eq, &[cur[0]])?;
    let h1 = sink.addmany(&mut eq, &[cur[1], b])?;
    let h2 = sink.addmany(&mut eq, &[cur[2], c])?;
    let h3 = sink.addmany(&mut eq, &[cur[3], d])?;
    let h4 = e.compute(sink, &mut eq, &[cur[4]])?;
    let h5 = sink.addmany(&mut eq, &[cur[5], f])?;
    let h6 = sink.addmany(&mut eq, &[cur[6], g])?;
    let h7 = sink.addmany(&mut eq, &[cur[7], h])?;
    if eq.bits_used > 0 {
        sink.constraint();
    }
    Ok([h0, h1, h2, h3, h4, h5, h6, h7])
}

/// The witness bellperson's `sha256(cs, input)` allocates, allocated in `cs` in the
/// gadget's order (with one `enforce` per gadget constraint, and no combinations),
/// and the digest. `input` is the gadget's input: its constants, allocated and negated
/// bits are treated as the gadget treats them; every allocated bit needs a value.
///
/// Only for witness synthesis (see the module documentation).
pub fn sha256_witness<S, CS>(cs: &mut CS, input: &[Boolean]) -> Result<[u8; 32], SynthesisError>
where
    S: PrimeField,
    CS: ConstraintSystem<S>,
{
    if !input.len().is_multiple_of(8) {
        return Err(SynthesisError::Unsatisfiable);
    }
    let mut padded = input
        .iter()
        .map(Bit::from_boolean)
        .collect::<Result<Vec<_>, _>>()?;
    let len = input.len() as u64;
    padded.push(Bit::Const(true));
    while !(padded.len() + 64).is_multiple_of(512) {
        padded.push(Bit::Const(false));
    }
    padded.extend((0..64).rev().map(|i| Bit::Const((len >> i) & 1 == 1)));

    let mut sink = Sink {
        cs,
        _s: std::marker::PhantomData,
    };
    let mut cur = IV.map(Word::constant);
    for block in padded.chunks(512) {
        cur = compress(&mut sink, block, &cur)?;
    }
    let mut digest = [0u8; 32];
    for (chunk, word) in digest.chunks_mut(4).zip(cur.iter()) {
        chunk.copy_from_slice(&word.value().to_be_bytes());
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::witness::WitnessCs;
    use bellpepper_core::boolean::AllocatedBit;
    use rand::{Rng, SeedableRng};

    /// Input bits of every kind the gadget distinguishes: constants, allocated bits,
    /// and negated allocated bits, allocated into `cs` first.
    fn input(cs: &mut WitnessCs, rng: &mut impl Rng, bytes: usize) -> Vec<Boolean> {
        (0..bytes * 8)
            .map(|i| {
                let v = rng.gen::<bool>();
                match rng.gen_range(0..4) {
                    0 => Boolean::constant(v),
                    1 => Boolean::from(
                        AllocatedBit::alloc(cs.namespace(|| format!("n{i}")), Some(!v))
                            .expect("alloc"),
                    )
                    .not(),
                    _ => Boolean::from(
                        AllocatedBit::alloc(cs.namespace(|| format!("b{i}")), Some(v))
                            .expect("alloc"),
                    ),
                }
            })
            .collect()
    }

    #[test]
    fn the_witness_is_the_gadgets_value_for_value() {
        // One block, a block boundary, several blocks; and input that is all
        // constants except for a few bits (the PoRep label's padding and layer).
        for bytes in [0usize, 3, 55, 56, 64, 119, 200] {
            let mut gadget = WitnessCs::with_capacity(1, 0);
            let mut native = WitnessCs::with_capacity(1, 0);
            let mut r1 = rand_chacha::ChaCha8Rng::seed_from_u64(bytes as u64);
            let mut r2 = r1.clone();
            let a = input(&mut gadget, &mut r1, bytes);
            let b = input(&mut native, &mut r2, bytes);
            let out = bellpepper::gadgets::sha256::sha256(&mut gadget, &a).expect("gadget");
            let digest = sha256_witness(&mut native, &b).expect("native");
            assert!(gadget.error.is_none() && native.error.is_none());
            assert_eq!(
                native.aux.len(),
                gadget.aux.len(),
                "{bytes} bytes: aux count"
            );
            assert!(native.aux == gadget.aux, "{bytes} bytes: aux values");
            assert_eq!(native.constraints, gadget.constraints, "{bytes} bytes");
            // The digest is SHA-256 of the input's values.
            let bits: Vec<bool> = out.iter().map(|b| b.get_value().expect("v")).collect();
            let gadget_digest: Vec<u8> = bits
                .chunks(8)
                .map(|c| c.iter().fold(0u8, |v, &b| (v << 1) | u8::from(b)))
                .collect();
            assert_eq!(digest.as_slice(), gadget_digest.as_slice());
        }
    }

    #[test]
    fn an_input_of_partial_bytes_is_an_error() {
        let mut cs = WitnessCs::with_capacity(1, 0);
        let odd = vec![Boolean::constant(true); 7];
        assert!(sha256_witness(&mut cs, &odd).is_err());
        assert!(cs.aux.is_empty() && cs.constraints == 0);
    }
}
