//! The backend's tests: the error path of issue #12 on the device, and the host-side
//! bookkeeping (base keys, chunking).

use super::queries::*;
use super::*;
use crate::footprint::{stream_chunk, MAX_AUTO_STREAM_CHUNK};

/// The bug of issue #12: a partition that fails between the a, b, c upload and
/// the end of H must not return while the copies still read the caller's host
/// memory (which the caller unpins and frees as soon as it has the error). The
/// failure is injected right after the upload is enqueued, with the bases
/// resident (the upload overlaps L, A, B) and streamed (H first), with a, b, c
/// staged by the caller and pinned by the backend itself. 3 × 1 GiB of a, b, c
/// take tens of milliseconds to copy: the injected failure comes microseconds
/// after the enqueue.
#[test]
fn a_failure_after_the_upload_returns_only_once_the_copies_are_done() {
    use cuzk_gpu_backend::{AbcRef, GpuBackend, PartitionJobRef, SplitMsm};
    use ff::Field;
    use group::Curve;
    use rand::SeedableRng;
    use std::io::Write as _;

    // stream_chunk 0: bases resident; 2^22: streamed in chunks of 2^22 points.
    let open = |stream_chunk| match CudaBackend::new(CudaConfig {
        stream_chunk,
        ..CudaConfig::default()
    }) {
        Ok(b) => Some(b),
        Err(CudaError::NoDevice(why)) => {
            let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({why})");
            None
        }
        Err(e) => panic!("CUDA backend failed to start: {e}"),
    };
    // Before the inputs (6 GiB of host memory): where there is no device.
    let Some(first) = open(0) else {
        return;
    };
    let mut first = Some(first);
    let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(12);
    let log = 25u32;
    let n = (1usize << log) - 3;
    let x = blstrs::Scalar::random(&mut r);
    let abc: Vec<Vec<blstrs::Scalar>> = (0..3)
        .map(|k| vec![x + blstrs::Scalar::from(k as u64); n])
        .collect();
    let p = (blstrs::G1Projective::generator() * x).to_affine();
    let h_bases = vec![p; (1 << log) - 1];
    let aux: Vec<blstrs::Scalar> = (0..100).map(|_| blstrs::Scalar::random(&mut r)).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let split = cuzk_msm_cpu::prep_msm(&[], None, &aux, None, &pool).unwrap();
    let q_bases = vec![p; aux.len()];
    let q = || SplitMsm {
        bases: &q_bases[..],
        split: split.as_ref(),
    };
    let job = || PartitionJobRef {
        abc: AbcRef {
            a: &abc[0],
            b: &abc[1],
            c: &abc[2],
        },
        h_bases: &h_bases,
        l: q(),
        a: q(),
        b_g1: q(),
        b_g2: None,
    };
    for stream_chunk in [0, 1 << 22] {
        let backend = match first.take() {
            Some(b) => b,
            None => open(stream_chunk).expect("the device was there a moment ago"),
        };
        let bases = backend.lock().placement;
        backend.fail_after_upload(true);
        for staged in [false, true] {
            let guard = if staged {
                Some(backend.stage(job().abc).expect("staging a, b, c"))
            } else {
                None
            };
            let err = backend
                .prove_partition_ref(job())
                .expect_err("the injected failure");
            assert!(err.to_string().contains("injected failure"), "{err}");
            let (in_flight, done) = backend
                .upload_state_after_fault()
                .expect("the failure was injected")
                .expect("querying the upload's event");
            println!(
                "{bases:?}, staged: {staged}: upload in flight at the failure: \
                 {in_flight}, complete at the return: {done}"
            );
            if !in_flight {
                let _ = writeln!(
                    std::io::stderr(),
                    "warning: the upload had finished before the injected failure; \
                     this case proved nothing"
                );
            }
            assert!(
                done,
                "{bases:?}, staged: {staged}: the call returned while the a, b, c \
                 upload was still reading host memory"
            );
            drop(guard);
        }
        // The device is still usable: the same job without the fault.
        backend.fail_after_upload(false);
        backend
            .prove_partition_ref(job())
            .expect("the same partition without the injected failure");
    }
}

#[test]
fn a_slice_that_holds_other_points_has_another_key() {
    use group::{prime::PrimeCurveAffine, Curve};
    let g = G1Affine::generator();
    let mut v: Vec<G1Affine> = (1..=20u64)
        .map(|k| (g * blstrs::Scalar::from(k)).to_affine())
        .collect();
    let before = key::<G1>(&v);
    assert_eq!(before, key::<G1>(&v), "the same points, the same key");
    let last = v[19];
    v[19] = g;
    let after = key::<G1>(&v);
    assert!(after.same_slice(&before));
    assert_ne!(after, before, "the last point changed in place");
    v[19] = last;
    assert_eq!(key::<G1>(&v), before);
    // The limit of a sample: of 20 points, 0, 2, 5, 8, 10, 13, 16 and 19 are
    // read; a change to point 1 alone goes unseen (hence evict_bases).
    v[1] = g;
    assert_eq!(key::<G1>(&v), before);
    assert_eq!(key::<G1>(&[]).len, 0);
}

#[test]
fn chunks_cover_every_point_once_in_multiples_of_64() {
    for (n, chunk) in [
        (0, 960),
        (1, 960),
        (960, 960),
        (961, 1000),
        (5000, 1000),
        (100, 1),
    ] {
        let c: Vec<_> = chunks(n, chunk).collect();
        let mut next = 0;
        for &(lo, hi) in &c {
            assert_eq!(lo, next);
            assert!(lo.is_multiple_of(64) && hi > lo && hi - lo <= (chunk / 64 * 64).max(64));
            next = hi;
        }
        assert_eq!(next, n, "n = {n}, chunk = {chunk}: {c:?}");
    }
}

#[test]
fn the_stream_chunk_fits_two_in_flight_or_says_none() {
    // Too little room for two of the smallest chunks.
    assert_eq!(
        stream_chunk(
            2 * MIN_STREAM_CHUNK as u64 * STREAM_BYTES_PER_POINT - 1,
            None
        ),
        None
    );
    // Room for two: the chunk takes half, rounded to 64.
    let left = 1 << 30;
    let c = stream_chunk(left, None).unwrap();
    assert!(c.is_multiple_of(64) && 2 * c as u64 * STREAM_BYTES_PER_POINT <= left);
    assert!(c > (left / 2 / STREAM_BYTES_PER_POINT) as usize - 64);
    // Unforced chunks stop at MAX_AUTO_STREAM_CHUNK (pinned host memory).
    let left = 64 << 30;
    assert_eq!(stream_chunk(left, None), Some(MAX_AUTO_STREAM_CHUNK));
    assert_eq!(stream_chunk(left, Some(1 << 24)), Some(1 << 24));
    // A forced chunk is honoured below what fits, rounded down to 64.
    assert_eq!(stream_chunk(left, Some(1000)), Some(960));
    assert_eq!(stream_chunk(left, Some(10)), Some(64));
}
