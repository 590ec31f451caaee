//! `prep_msm`: a query's scalars split into zeros (dropped), ones (a bitmap) and the
//! rest (the tail: base indices and canonical limbs).
//!
//! A Groth16 proof splits the same aux scalars three times (the L, A and B queries,
//! which differ only in which variables they take: their densities). So the scalars
//! are classified once, into [`ScalarClasses`]: a bitmap of the ones and a bitmap of
//! the others, without a branch per scalar. A query's split is then made from the
//! bitmaps, 64 variables a step: its ones are the ones bitmap compressed to the
//! query's variables (the identity where the density word is full), its tail the
//! others bitmap's set bits, each with its query index (a popcount in the density
//! word), and only the tail's scalars are read again (converted out of Montgomery
//! form per query: storing them converted would cost a copy of a dense witness). On
//! a PoRep partition (98% zeros and ones, L over every aux variable, A over 99.7%, B
//! over 25.4%) the three splits read the 32-byte scalars once instead of three times.

use blst::blst_fr;
use blstrs::Scalar;
use cuzk_alloc::{Density, SplitScalars};
use ff::Field;
use rayon::prelude::*;

use crate::{scalar_limbs, MsmError};

/// Variables per task; a multiple of 64 so tasks own whole bitmap words.
const PREP_CHUNK: usize = 1 << 16;

/// A vector of scalars sorted into zeros, ones and others, from which the split of any
/// query over them is made reading only the others again ([`prep_msm_classified`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScalarClasses<'a> {
    scalars: &'a [Scalar],
    /// Bit `i` set: scalar `i` is one.
    ones: Vec<u64>,
    /// Bit `i` set: scalar `i` is neither zero nor one.
    others: Vec<u64>,
}

impl<'a> ScalarClasses<'a> {
    /// Classifies `scalars` in parallel on `pool`.
    pub fn of(scalars: &'a [Scalar], pool: &rayon::ThreadPool) -> Self {
        let _span = tracing::info_span!("classify", n = scalars.len()).entered();
        let words = scalars.len().div_ceil(64);
        let mut ones = vec![0u64; words];
        let mut others = vec![0u64; words];
        let one = blst_fr::from(Scalar::ONE).l;
        pool.install(|| {
            scalars
                .par_chunks(64)
                .zip(ones.par_iter_mut())
                .zip(others.par_iter_mut())
                .with_min_len(PREP_CHUNK / 64)
                .for_each(|((w, o), t)| (*o, *t) = classify(w, &one))
        });
        Self {
            scalars,
            ones,
            others,
        }
    }

    /// Number of scalars classified.
    pub fn len(&self) -> usize {
        self.scalars.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scalars.is_empty()
    }

    /// Number of scalars that are neither zero nor one.
    pub fn num_others(&self) -> usize {
        self.others.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// The ones and others words of (up to) 64 scalars; `one` is one's Montgomery limbs.
fn classify(w: &[Scalar], one: &[u64; 4]) -> (u64, u64) {
    let (mut ones, mut others) = (0u64, 0u64);
    for (b, x) in w.iter().enumerate() {
        // Scalars are kept fully reduced, so equal values have equal limbs.
        let l = blst_fr::from(*x).l;
        let is_zero = (l[0] | l[1] | l[2] | l[3]) == 0;
        let is_one = ((l[0] ^ one[0]) | (l[1] ^ one[1]) | (l[2] ^ one[2]) | (l[3] ^ one[3])) == 0;
        ones |= (is_one as u64) << b;
        others |= (!(is_zero | is_one) as u64) << b;
    }
    (ones, others)
}

/// The bits of `x` where `mask` is set, packed into the low bits (x86's `pext`).
fn compress(x: u64, mask: u64) -> u64 {
    let mut out = 0;
    let mut bits = x & mask;
    while bits != 0 {
        let b = bits.trailing_zeros();
        bits &= bits - 1;
        out |= 1 << (mask & ((1u64 << b) - 1)).count_ones();
    }
    out
}

/// ORs the low `count` bits of `v` into `words` at bit `pos`.
fn push_bits(words: &mut [u64], pos: usize, v: u64, count: usize) {
    if count == 0 {
        return;
    }
    let (i, s) = (pos / 64, pos % 64);
    words[i] |= v << s;
    if s != 0 && s + count > 64 {
        words[i + 1] |= v >> (64 - s);
    }
}

/// One task of a split: up to `PREP_CHUNK` variables of one kind (inputs or aux).
struct SplitPart<'a> {
    classes: &'a ScalarClasses<'a>,
    /// The task's first bitmap word in `classes`.
    first_word: usize,
    vars: usize,
    /// The density words of this range (None: every variable is in the query).
    density: Option<&'a [u64]>,
    /// Query index of the first query variable in this range.
    base_start: usize,
    /// Query variables in this range.
    count: usize,
}

struct PartOut {
    base_start: usize,
    zeros: usize,
    /// The ones, as bits of the query's bitmap starting at word `base_start / 64`.
    ones_words: Vec<u64>,
    tail_indices: Vec<u32>,
    tail_scalars: Vec<[u64; 4]>,
}

impl SplitPart<'_> {
    fn run(&self) -> PartOut {
        let c = self.classes;
        let shift = self.base_start % 64;
        let mut ones_words = vec![0u64; (shift + self.count).div_ceil(64)];
        let (mut pos, mut k, mut zeros) = (shift, self.base_start, 0);
        let (mut tail_indices, mut tail_scalars) = (Vec::new(), Vec::new());
        let words = self.vars.div_ceil(64);
        for j in 0..words {
            let valid = match self.vars % 64 {
                r if r != 0 && j == words - 1 => (1u64 << r) - 1,
                _ => u64::MAX,
            };
            let d = self.density.map_or(valid, |d| d[j] & valid);
            let wi = self.first_word + j;
            let (o, t) = (c.ones[wi] & d, c.others[wi] & d);
            let count = d.count_ones() as usize;
            // A density word of contiguous low bits keeps the bits where they are.
            let packed = if d & d.wrapping_add(1) == 0 {
                o
            } else {
                compress(o, d)
            };
            push_bits(&mut ones_words, pos, packed, count);
            zeros += count - (o.count_ones() + t.count_ones()) as usize;
            let mut bits = t;
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                tail_indices.push((k + (d & ((1u64 << b) - 1)).count_ones() as usize) as u32);
                tail_scalars.push(scalar_limbs(&c.scalars[wi * 64 + b]));
            }
            pos += count;
            k += count;
        }
        PartOut {
            base_start: self.base_start,
            zeros,
            ones_words,
            tail_indices,
            tail_scalars,
        }
    }
}

fn check_density(
    classes: &ScalarClasses<'_>,
    density: Option<&Density>,
    which: &'static str,
) -> Result<usize, MsmError> {
    match density {
        None => Ok(classes.len()),
        Some(d) if d.len() == classes.len() => Ok(d.count()),
        Some(d) => Err(MsmError::DensityLength {
            which,
            density: d.len(),
            scalars: classes.len(),
        }),
    }
}

/// Splits one kind's variables into tasks; returns the query index after them.
fn split_parts<'a>(
    classes: &'a ScalarClasses<'a>,
    density: Option<&'a Density>,
    mut base_start: usize,
    parts: &mut Vec<SplitPart<'a>>,
) -> usize {
    for ci in 0..classes.len().div_ceil(PREP_CHUNK) {
        let first_word = ci * PREP_CHUNK / 64;
        let vars = PREP_CHUNK.min(classes.len() - ci * PREP_CHUNK);
        let density = density.map(|d| &d.words()[first_word..first_word + vars.div_ceil(64)]);
        let count = density.map_or(vars, |ws| ws.iter().map(|w| w.count_ones() as usize).sum());
        parts.push(SplitPart {
            classes,
            first_word,
            vars,
            density,
            base_start,
            count,
        });
        base_start += count;
    }
    base_start
}

/// The split of a query over classified input and aux scalars, each with its density
/// (`None`: every variable is in the query), made in parallel on `pool`.
pub fn prep_msm_classified(
    inputs: &ScalarClasses<'_>,
    input_density: Option<&Density>,
    aux: &ScalarClasses<'_>,
    aux_density: Option<&Density>,
    pool: &rayon::ThreadPool,
) -> Result<SplitScalars, MsmError> {
    let num_inputs = check_density(inputs, input_density, "input")?;
    let num_aux = check_density(aux, aux_density, "aux")?;
    let num_bases = num_inputs + num_aux;
    if num_bases > u32::MAX as usize + 1 {
        return Err(MsmError::TooManyBases { bases: num_bases });
    }
    let _span = tracing::info_span!("prep_msm", num_bases).entered();

    let mut parts = Vec::new();
    let after_inputs = split_parts(inputs, input_density, 0, &mut parts);
    split_parts(aux, aux_density, after_inputs, &mut parts);
    let outs: Vec<PartOut> = pool.install(|| parts.par_iter().map(SplitPart::run).collect());

    let num_zeros = outs.iter().map(|o| o.zeros).sum();
    let num_tail = outs.iter().map(|o| o.tail_indices.len()).sum();
    let mut words = vec![0u64; num_bases.div_ceil(64)];
    for o in &outs {
        // Tasks need not start on a word boundary of the query's bitmap, so
        // neighbouring tasks may share a word: OR, never assign.
        for (i, w) in o.ones_words.iter().enumerate() {
            words[o.base_start / 64 + i] |= w;
        }
    }
    // The tasks' tails go to their places in parallel: a dense witness (a WindowPoSt
    // at 32 GiB) has tails of tens of millions of terms a query, and one thread
    // copying them (into fresh pages) was most of prep_msm's 12-14 s on the H200.
    let mut tail_indices = vec![0u32; num_tail];
    let mut tail_scalars = vec![[0u64; 4]; num_tail];
    let mut places = Vec::with_capacity(outs.len());
    let (mut idx, mut sc) = (&mut tail_indices[..], &mut tail_scalars[..]);
    for o in &outs {
        let n = o.tail_indices.len();
        let (i, rest_i) = std::mem::take(&mut idx).split_at_mut(n);
        let (c, rest_c) = std::mem::take(&mut sc).split_at_mut(n);
        (idx, sc) = (rest_i, rest_c);
        places.push((o, i, c));
    }
    pool.install(|| {
        places.into_par_iter().for_each(|(o, i, c)| {
            i.copy_from_slice(&o.tail_indices);
            c.copy_from_slice(&o.tail_scalars);
        })
    });
    Ok(SplitScalars::from_prepared(
        num_bases,
        num_zeros,
        Density::from_words(words, num_bases),
        tail_indices,
        tail_scalars,
    ))
}

/// The split of one query from the input scalars with their density (`None`: every
/// input is in the query) and the aux scalars with theirs, in parallel on `pool`. To
/// split several queries over the same scalars, classify them once
/// ([`ScalarClasses::of`]) and call [`prep_msm_classified`] for each.
pub fn prep_msm(
    inputs: &[Scalar],
    input_density: Option<&Density>,
    aux: &[Scalar],
    aux_density: Option<&Density>,
    pool: &rayon::ThreadPool,
) -> Result<SplitScalars, MsmError> {
    let inputs = ScalarClasses::of(inputs, pool);
    let aux = ScalarClasses::of(aux, pool);
    prep_msm_classified(&inputs, input_density, &aux, aux_density, pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compress_packs_the_masked_bits() {
        assert_eq!(compress(0b1011_0110, 0b1111_0000), 0b1011);
        assert_eq!(compress(0b1010, 0b1010), 0b11);
        assert_eq!(compress(u64::MAX, 1 << 63), 1);
        assert_eq!(compress(1 << 63, u64::MAX), 1 << 63);
        assert_eq!(compress(0x5555_5555_5555_5555, 0xAAAA_AAAA_AAAA_AAAA), 0);
    }

    #[test]
    fn push_bits_straddles_words() {
        let mut w = [0u64; 2];
        push_bits(&mut w, 60, 0b1_1111, 5);
        assert_eq!(w, [0xF << 60, 1]);
        push_bits(&mut w, 0, 0, 0);
        push_bits(&mut w, 64, u64::MAX, 0);
        assert_eq!(w, [0xF << 60, 1]);
    }

    #[test]
    fn classes_mark_ones_and_others() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let n = PREP_CHUNK + 100;
        let s: Vec<Scalar> = (0..n as u64)
            .map(|i| match i % 7 {
                0..=2 => Scalar::ZERO,
                3 | 4 => Scalar::ONE,
                _ => Scalar::from(i),
            })
            .collect();
        let c = ScalarClasses::of(&s, &pool);
        for i in 0..n {
            let bit = |w: &[u64]| (w[i / 64] >> (i % 64)) & 1 == 1;
            let class = (bit(&c.ones), bit(&c.others));
            assert_eq!(class, (matches!(i % 7, 3 | 4), i % 7 >= 5), "scalar {i}");
        }
        assert_eq!(c.num_others(), (0..n).filter(|i| i % 7 >= 5).count());
        assert_eq!(ScalarClasses::of(&[], &pool), ScalarClasses::default());
    }
}
