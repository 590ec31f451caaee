//! `SplitScalars` from its raw parts: how a split that crossed a boundary (a
//! plugin's ABI, a file) becomes one again, checked.

use cuzk_alloc::Density;

use crate::{MsmError, SplitScalars};

/// The scalar field's modulus r, little-endian 64-bit limbs.
const MODULUS: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

fn is_canonical(limbs: &[u64; 4]) -> bool {
    for i in (0..4).rev() {
        if limbs[i] != MODULUS[i] {
            return limbs[i] < MODULUS[i];
        }
    }
    false
}

impl SplitScalars {
    /// Reassembles a split from what its accessors return. Checks everything a
    /// split promises: the bitmap covers `num_bases`, tail indices increase and are
    /// in range and not among the ones, and tail scalars are canonical.
    pub fn from_parts(
        num_bases: usize,
        ones: Density,
        tail_indices: Vec<u32>,
        tail_scalars: Vec<[u64; 4]>,
    ) -> Result<Self, MsmError> {
        let malformed = |why: String| MsmError::MalformedSplit(why);
        if ones.len() != num_bases {
            return Err(malformed(format!(
                "the ones bitmap covers {} bases, the split {num_bases}",
                ones.len()
            )));
        }
        if tail_indices.len() != tail_scalars.len() {
            return Err(malformed(format!(
                "{} tail indices but {} tail scalars",
                tail_indices.len(),
                tail_scalars.len()
            )));
        }
        let mut prev: Option<u32> = None;
        for &i in &tail_indices {
            if (i as usize) >= num_bases {
                return Err(MsmError::IndexOutOfRange {
                    index: i as usize,
                    bases: num_bases,
                });
            }
            if prev.is_some_and(|p| p >= i) {
                return Err(malformed(format!("tail index {i} does not increase")));
            }
            if ones.get(i as usize) {
                return Err(malformed(format!("base {i} is both a one and in the tail")));
            }
            prev = Some(i);
        }
        if let Some(k) = tail_scalars.iter().position(|s| !is_canonical(s)) {
            return Err(malformed(format!(
                "the tail scalar of base {} is not a canonical field element",
                tail_indices[k]
            )));
        }
        let num_zeros = num_bases - ones.count() - tail_indices.len();
        Ok(Self {
            num_bases,
            num_zeros,
            ones,
            tail_indices,
            tail_scalars,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::Scalar;
    use ff::Field;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    #[test]
    fn a_split_survives_its_parts_and_bad_parts_are_errors() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let scalars: Vec<Scalar> = (0..100u64)
            .map(|i| match i % 3 {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                _ => Scalar::random(&mut rng),
            })
            .collect();
        let s = crate::prep_msm(&[], None, &scalars, None, &pool).unwrap();
        let back = SplitScalars::from_parts(
            s.num_bases(),
            s.ones().clone(),
            s.tail_indices().to_vec(),
            s.tail_scalars().to_vec(),
        )
        .unwrap();
        assert_eq!(back, s);

        let parts = || {
            (
                s.ones().clone(),
                s.tail_indices().to_vec(),
                s.tail_scalars().to_vec(),
            )
        };
        let (o, mut i, t) = parts();
        i.swap(0, 1);
        assert!(SplitScalars::from_parts(100, o, i, t).is_err());
        let (o, mut i, t) = parts();
        i[0] = 1; // index 1 is a one
        assert!(SplitScalars::from_parts(100, o, i, t).is_err());
        let (o, i, mut t) = parts();
        t[0] = MODULUS;
        assert!(SplitScalars::from_parts(100, o, i, t).is_err());
        let (o, i, t) = parts();
        assert!(SplitScalars::from_parts(101, o, i, t).is_err());
        let (o, mut i, t) = parts();
        *i.last_mut().unwrap() = 100;
        assert!(matches!(
            SplitScalars::from_parts(100, o, i, t),
            Err(MsmError::IndexOutOfRange { index: 100, .. })
        ));
    }
}
