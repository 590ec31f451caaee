//! Reading bellperson parameter files: differential against bellperson's own
//! reader, and every kind of damaged file.

mod common;

use std::io::Write;

use blstrs::{Bls12, Fp, G1Affine, Scalar};
use common::{bellperson_bytes, extents, params_for, Extent, MulChain};
use cuzk_params::{
    generate_params, load_or_generate, read_params, read_params_bytes, summarize, write_params,
    Parameters, ParamsError, PointError, Section, Validation,
};
use ff::Field;
use group::prime::PrimeCurveAffine;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const ALL: [Validation; 3] = [Validation::None, Validation::OnCurve, Validation::Subgroup];

fn bellperson_read(bytes: &[u8], checked: bool) -> std::io::Result<Parameters<Bls12>> {
    Parameters::<Bls12>::read(bytes, checked)
}

/// A few shapes: 1..=3 public inputs, chains from 1 to 64 steps.
fn shapes() -> Vec<(usize, usize)> {
    vec![
        (1, 1),
        (2, 2),
        (3, 3),
        (1, 5),
        (2, 8),
        (3, 17),
        (2, 33),
        (1, 64),
    ]
}

#[test]
fn reads_what_bellperson_reads() {
    let dir = tempfile::tempdir().unwrap();
    for (seed, (inputs, steps)) in shapes().into_iter().enumerate() {
        let params = params_for(inputs, steps, seed as u64);
        let bytes = bellperson_bytes(&params);
        let expected = bellperson_read(&bytes, false).unwrap();
        assert!(expected == params);
        assert!(bellperson_read(&bytes, true).unwrap() == params);
        for validation in ALL {
            let ours = read_params_bytes(&bytes, validation).unwrap();
            assert!(
                ours == expected,
                "{inputs} inputs, {steps} steps, {validation:?}"
            );
        }

        let path = dir.path().join(format!("p{seed}.params"));
        std::fs::write(&path, &bytes).unwrap();
        assert!(read_params(&path, Validation::Subgroup).unwrap() == expected);

        let summary = summarize(&path).unwrap();
        assert_eq!(summary.ic, params.vk.ic.len());
        assert_eq!(summary.ic, inputs + 1);
        assert_eq!(summary.h, params.h.len());
        assert_eq!(summary.l, params.l.len());
        assert_eq!(summary.l, steps + 1);
        assert_eq!(summary.a, params.a.len());
        assert_eq!(summary.b_g1, params.b_g1.len());
        assert_eq!(summary.b_g2, params.b_g2.len());
        assert_eq!(summary.file_bytes, bytes.len() as u64);

        // Our writer produces bellperson's bytes.
        let written = dir.path().join(format!("w{seed}.params"));
        write_params(&params, &written).unwrap();
        assert_eq!(std::fs::read(&written).unwrap(), bytes);
    }
}

/// Byte lengths at which to cut a section: at its start, inside its count field,
/// right after the count, inside the first and last points, one byte short.
fn cuts(extent: &Extent) -> Vec<usize> {
    let mut cuts = vec![extent.start(), extent.points_offset, extent.end() - 1];
    if let Some(count_offset) = extent.count_offset {
        cuts.extend([count_offset + 1, count_offset + 3]);
    }
    if extent.count > 0 {
        let size = extent.point_bytes;
        cuts.extend([
            extent.points_offset + 1,
            extent.points_offset + size / 2,
            extent.point(extent.count - 1) + size / 2,
        ]);
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts.retain(|&cut| cut >= extent.start() && cut < extent.end());
    cuts
}

#[test]
fn truncation_names_the_section() {
    let params = params_for(2, 9, 11);
    let bytes = bellperson_bytes(&params);
    let extents = extents(&params);
    assert_eq!(extents.last().unwrap().end(), bytes.len());
    let mut checked = 0;
    for extent in &extents {
        for cut in cuts(extent) {
            for validation in ALL {
                match read_params_bytes(&bytes[..cut], validation) {
                    Err(ParamsError::Truncated {
                        section,
                        offset,
                        needed,
                        available,
                    }) => {
                        assert_eq!(section, extent.section, "cut at {cut}");
                        assert!(offset as usize <= cut);
                        assert_eq!(available as usize, cut - offset as usize);
                        assert!(needed > available);
                        assert!(offset as usize >= extent.start());
                    }
                    other => panic!(
                        "cut at {cut} in {}: {:?}",
                        extent.section,
                        other.map(|_| ())
                    ),
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 60, "{checked} cuts");

    // Exactly at a boundary the next section's count (or point) is missing.
    let h = extents.iter().find(|e| e.section == Section::H).unwrap();
    assert!(matches!(
        read_params_bytes(&bytes[..h.start()], Validation::None),
        Err(ParamsError::Truncated { section: Section::H, offset, needed: 4, available: 0 })
            if offset as usize == h.start()
    ));
}

#[test]
fn summarize_sees_truncation() {
    let params = params_for(1, 4, 12);
    let bytes = bellperson_bytes(&params);
    let dir = tempfile::tempdir().unwrap();
    for extent in extents(&params) {
        let path = dir.path().join("cut.params");
        std::fs::write(&path, &bytes[..extent.end() - 1]).unwrap();
        match summarize(&path) {
            Err(ParamsError::Truncated { section, .. }) => assert_eq!(section, extent.section),
            other => panic!("{}: {:?}", extent.section, other.map(|_| ())),
        }
    }
}

/// Flips the low bit of the last byte (the low byte of y, or of y's real part in
/// G2): the coordinates stay canonical and the point leaves the curve.
#[test]
fn corrupted_point_names_section_and_index() {
    let params = params_for(3, 6, 13);
    let bytes = bellperson_bytes(&params);
    for extent in extents(&params) {
        assert!(
            extent.count >= 2 || extent.count_offset.is_none(),
            "{extent:?}"
        );
        let index = if extent.count_offset.is_some() { 1 } else { 0 };
        let offset = extent.point(index);
        let mut bad = bytes.clone();
        bad[offset + extent.point_bytes - 1] ^= 1;
        for validation in ALL {
            match read_params_bytes(&bad, validation) {
                Err(ParamsError::InvalidPoint {
                    section,
                    index: got_index,
                    offset: got_offset,
                    reason,
                }) => {
                    assert_eq!(section, extent.section);
                    assert_eq!(got_index, index);
                    assert_eq!(got_offset as usize, offset);
                    assert_eq!(reason, PointError::NotOnCurve);
                }
                other => panic!("{}: {:?}", extent.section, other.map(|_| ())),
            }
        }
        // bellperson refuses these as well.
        assert!(bellperson_read(&bad, false).is_err());
    }
}

/// A point on y^2 = x^3 + 4 outside the prime-order subgroup (the cofactor is
/// ~2^126, so a random curve point is almost surely outside it).
fn non_subgroup_g1(seed: u64) -> [u8; 96] {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    loop {
        let x = Fp::random(&mut rng);
        let rhs = x.square() * x + Fp::from(4u64);
        if let Some(y) = Option::<Fp>::from(rhs.sqrt()) {
            let p = G1Affine::from_raw_unchecked(x, y, false);
            assert!(bool::from(p.is_on_curve()));
            if !bool::from(p.is_torsion_free()) {
                return p.to_uncompressed();
            }
        }
    }
}

#[test]
fn subgroup_check_only_with_subgroup_validation() {
    let params = params_for(2, 7, 14);
    let bytes = bellperson_bytes(&params);
    let outsider = non_subgroup_g1(1);
    for extent in extents(&params) {
        if extent.point_bytes != 96 {
            continue;
        }
        let index = extent.count.min(3) - 1;
        let offset = extent.point(index);
        let mut bad = bytes.clone();
        bad[offset..offset + 96].copy_from_slice(&outsider);
        // The verifying key is checked fully whatever the validation, as bellperson does.
        let always = extent.count_offset.is_none() || extent.section == Section::Ic;
        for validation in ALL {
            let result = read_params_bytes(&bad, validation);
            if always || validation == Validation::Subgroup {
                match result {
                    Err(ParamsError::InvalidPoint {
                        section,
                        index: i,
                        reason: PointError::NotInSubgroup,
                        ..
                    }) => {
                        assert_eq!((section, i), (extent.section, index));
                    }
                    other => panic!("{} {validation:?}: {:?}", extent.section, other.map(|_| ())),
                }
            } else {
                let theirs = bellperson_read(&bad, false).unwrap();
                assert!(result.unwrap() == theirs, "{}", extent.section);
            }
        }
        assert!(bellperson_read(&bad, true).is_err());
        assert_eq!(bellperson_read(&bad, false).is_err(), always);
    }
}

#[test]
fn identity_points_mirror_bellperson() {
    let params = params_for(2, 5, 15);
    let bytes = bellperson_bytes(&params);
    let identity = G1Affine::identity().to_uncompressed();
    for extent in extents(&params) {
        if extent.point_bytes != 96 {
            continue;
        }
        let index = extent.count - 1;
        let offset = extent.point(index);
        let mut bad = bytes.clone();
        bad[offset..offset + 96].copy_from_slice(&identity);
        let counted = extent.count_offset.is_some();
        for validation in ALL {
            match read_params_bytes(&bad, validation) {
                Err(ParamsError::InvalidPoint {
                    section,
                    index: i,
                    reason: PointError::Identity,
                    ..
                }) if counted => assert_eq!((section, i), (extent.section, index)),
                // bellperson allows the six single points to be the identity.
                Ok(ours) if !counted => {
                    assert!(ours == bellperson_read(&bad, true).unwrap());
                }
                other => panic!("{} {validation:?}: {:?}", extent.section, other.map(|_| ())),
            }
        }
        assert_eq!(bellperson_read(&bad, false).is_err(), counted);
    }
}

#[test]
fn huge_counts_are_truncation() {
    let params = params_for(2, 4, 16);
    let bytes = bellperson_bytes(&params);
    for extent in extents(&params) {
        let Some(count_offset) = extent.count_offset else {
            continue;
        };
        let mut bad = bytes.clone();
        bad[count_offset..count_offset + 4].copy_from_slice(&[0xff; 4]);
        match read_params_bytes(&bad, Validation::None) {
            Err(ParamsError::Truncated {
                section,
                offset,
                needed,
                available,
            }) => {
                assert_eq!(section, extent.section);
                assert_eq!(offset as usize, extent.points_offset);
                assert_eq!(needed, 0xffff_ffff * extent.point_bytes as u64);
                assert_eq!(available as usize, bytes.len() - extent.points_offset);
            }
            other => panic!("{}: {:?}", extent.section, other.map(|_| ())),
        }
    }
}

#[test]
fn not_a_parameters_file() {
    let dir = tempfile::tempdir().unwrap();

    let empty = dir.path().join("empty.params");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        read_params(&empty, Validation::None),
        Err(ParamsError::Truncated {
            section: Section::AlphaG1,
            offset: 0,
            needed: 96,
            available: 0
        })
    ));
    assert!(matches!(
        summarize(&empty),
        Err(ParamsError::Truncated {
            section: Section::AlphaG1,
            ..
        })
    ));

    let text = dir.path().join("readme.params");
    let mut file = std::fs::File::create(&text).unwrap();
    for i in 0..40 {
        writeln!(file, "line {i}: these are not Groth16 parameters").unwrap();
    }
    drop(file);
    for validation in ALL {
        assert!(matches!(
            read_params(&text, validation),
            Err(ParamsError::InvalidPoint {
                section: Section::AlphaG1,
                index: 0,
                offset: 0,
                reason: PointError::InvalidEncoding
            })
        ));
    }
    let short = dir.path().join("short.params");
    std::fs::write(&short, b"hello\n").unwrap();
    assert!(matches!(
        read_params(&short, Validation::None),
        Err(ParamsError::Truncated {
            section: Section::AlphaG1,
            offset: 0,
            needed: 96,
            available: 6
        })
    ));

    let missing = dir.path().join("missing.params");
    for result in [
        read_params(&missing, Validation::None).map(|_| ()),
        summarize(&missing).map(|_| ()),
    ] {
        match result {
            Err(ParamsError::Io { path, source }) => {
                assert_eq!(path, missing);
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
    let message = read_params(&missing, Validation::None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("cannot read parameters file "),
        "{message}"
    );
    assert!(message.contains("missing.params"), "{message}");
}

#[test]
fn trailing_bytes() {
    let params = params_for(1, 3, 17);
    let mut bytes = bellperson_bytes(&params);
    let len = bytes.len() as u64;
    for extra in [1u64, 95, 96, 4096] {
        bytes.resize(len as usize + extra as usize, 0x5a);
        match read_params_bytes(&bytes, Validation::None) {
            Err(ParamsError::TrailingBytes { offset, count }) => {
                assert_eq!((offset, count), (len, extra));
            }
            other => panic!("{extra}: {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn error_messages_read_like_sentences() {
    let params = params_for(1, 3, 18);
    let bytes = bellperson_bytes(&params);
    let h = extents(&params)
        .into_iter()
        .find(|e| e.section == Section::H)
        .unwrap();
    let message = read_params_bytes(&bytes[..h.points_offset + 10], Validation::None)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        message,
        format!(
            "the parameters file ends inside section h at byte {}: {} bytes are needed \
             from there but only 10 remain",
            h.points_offset,
            h.count * 96
        )
    );
    let mut bad = bytes.clone();
    bad[h.point(1) + 95] ^= 1;
    let message = read_params_bytes(&bad, Validation::None)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        message,
        format!(
            "in section h, point 1 at byte {} is invalid: the point is not on the curve",
            h.point(1)
        )
    );
    assert_eq!(Section::BG2.to_string(), "b_g2");
    assert_eq!(Section::GammaG2.to_string(), "vk.gamma_g2");
}

/// Sections larger than a rayon task, with several bad points: the lowest index is
/// reported whatever the thread timing.
#[test]
fn lowest_bad_index_in_a_parallel_section() {
    let params = params_for(2, 3000, 19);
    let bytes = bellperson_bytes(&params);
    let extents = extents(&params);
    let h = extents.iter().find(|e| e.section == Section::H).unwrap();
    assert!(h.count > 4000, "{}", h.count);
    assert!(read_params_bytes(&bytes, Validation::None).unwrap() == params);
    let mut bad = bytes.clone();
    for index in [3900, 2100, 3100, 4000] {
        bad[h.point(index) + 95] ^= 1;
    }
    for _ in 0..3 {
        assert!(matches!(
            read_params_bytes(&bad, Validation::None),
            Err(ParamsError::InvalidPoint {
                section: Section::H,
                index: 2100,
                ..
            })
        ));
    }
    let b_g2 = extents.iter().find(|e| e.section == Section::BG2).unwrap();
    let mut bad = bytes.clone();
    bad[b_g2.point(b_g2.count - 1) + 191] ^= 1;
    assert!(matches!(
        read_params_bytes(&bad, Validation::Subgroup),
        Err(ParamsError::InvalidPoint { section: Section::BG2, index, .. })
            if index == b_g2.count - 1
    ));
}

/// Random damage: whenever we accept a file, bellperson accepts it too and reads
/// the same parameters; nothing panics.
#[test]
fn random_damage_never_accepted_differently() {
    let params = params_for(2, 6, 20);
    let bytes = bellperson_bytes(&params);
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let mut rejected = 0;
    for round in 0..300 {
        let mut bad = bytes.clone();
        match round % 3 {
            0 => {
                let at = rng.gen_range(0..bad.len());
                bad[at] ^= 1 << rng.gen_range(0..8);
            }
            1 => {
                let at = rng.gen_range(0..bad.len());
                bad[at] = rng.gen();
                bad.truncate(rng.gen_range(at..=bytes.len()));
            }
            _ => {
                // Rewrite a count field to a nearby value.
                let counts: Vec<usize> = extents(&params)
                    .iter()
                    .filter_map(|e| e.count_offset)
                    .collect();
                let at = counts[rng.gen_range(0..counts.len())];
                let delta: i64 = rng.gen_range(-2..=2);
                let old = u32::from_be_bytes(bad[at..at + 4].try_into().unwrap());
                let new = (old as i64 + delta).max(0) as u32;
                bad[at..at + 4].copy_from_slice(&new.to_be_bytes());
            }
        }
        for validation in ALL {
            match read_params_bytes(&bad, validation) {
                Ok(ours) => {
                    let theirs = bellperson_read(&bad, validation == Validation::Subgroup)
                        .expect("bellperson refused a file we accepted");
                    assert!(ours == theirs);
                }
                Err(_) => rejected += 1,
            }
        }
    }
    assert!(rejected > 600, "{rejected}");
}

#[test]
fn write_params_is_atomic_and_reports_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.params");
    let first = params_for(1, 2, 22);
    let second = params_for(2, 3, 23);
    write_params(&first, &path).unwrap();
    // Replacing a file that is being read (mapped) leaves the reader's view intact.
    write_params(&second, &path).unwrap();
    assert!(read_params(&path, Validation::None).unwrap() == second);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["w.params"], "temporary files left behind");

    let nowhere = dir.path().join("no/such/dir/w.params");
    match write_params(&first, &nowhere) {
        Err(ParamsError::Write { path, source }) => {
            assert!(path.starts_with(dir.path().join("no/such/dir")));
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn load_or_generate_caches_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache/mulchain.params");
    let circuit = MulChain::new(2, 10, 24);
    let generated = load_or_generate(&path, circuit.clone(), 7).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    assert!(generated == generate_params(circuit.clone(), &mut rng).unwrap());
    assert!(read_params(&path, Validation::Subgroup).unwrap() == generated);

    // The second call reads the file rather than generating: prove it by planting
    // other parameters there.
    let other = params_for(1, 2, 25);
    write_params(&other, &path).unwrap();
    assert!(load_or_generate(&path, circuit.clone(), 7).unwrap() == other);

    // A damaged cache is regenerated and replaced.
    let mut damaged = bellperson_bytes(&other);
    damaged.truncate(damaged.len() - 1);
    std::fs::write(&path, damaged).unwrap();
    assert!(load_or_generate(&path, circuit, 7).unwrap() == generated);
    assert!(read_params(&path, Validation::None).unwrap() == generated);
}

/// A circuit with an unconstrained variable: bellperson's generator refuses it.
struct Unconstrained;

impl bellpepper_core::Circuit<Scalar> for Unconstrained {
    fn synthesize<CS: bellpepper_core::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellpepper_core::SynthesisError> {
        cs.alloc_input(|| "x", || Ok(Scalar::ONE))?;
        cs.alloc(|| "free", || Ok(Scalar::ONE))?;
        Ok(())
    }
}

#[test]
fn generation_failure_is_typed() {
    let mut rng = ChaCha20Rng::seed_from_u64(26);
    match generate_params(Unconstrained, &mut rng) {
        Err(ParamsError::Synthesis(bellpepper_core::SynthesisError::UnconstrainedVariable)) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
}
