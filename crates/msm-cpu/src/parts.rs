//! `prep_msm`'s splits survive being taken apart and put together again (what a
//! plugin's ABI does), through `SplitScalars::from_parts` (in `cuzk-alloc`, whose
//! tests cover the malformed cases).

use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

use crate::SplitScalars;

#[test]
fn a_split_survives_its_parts() {
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
    assert_eq!((s.num_zeros(), s.ones().count()), (34, 33));
    let back = SplitScalars::from_parts(
        s.num_bases(),
        s.ones().clone(),
        s.tail_indices().to_vec(),
        s.tail_scalars().to_vec(),
    )
    .unwrap();
    assert_eq!(back, s);
}
