//! The CUDA backend against the CPU backend on a small partition, where a GPU exists;
//! elsewhere, that `CudaBackend::new` fails with a clear "no CUDA device" error
//! instead of panicking. (The full check with every size and the benchmarks is the
//! `cuzk-gpu-check` binary, run on the GPU machine.)

use std::io::Write as _;
use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_alloc::Abc;
use cuzk_cuda::{CudaBackend, CudaConfig, CudaError};
use cuzk_gpu_backend::{CpuBackend, GpuBackend, PartitionJob, SplitMsm};
use ff::Field;
use group::{Curve, Group};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn scalars(n: usize, r: &mut ChaCha20Rng) -> Vec<Scalar> {
    (0..n)
        .map(|_| match r.gen_range(0..4) {
            0 => Scalar::ZERO,
            1 => Scalar::ONE,
            _ => Scalar::random(&mut *r),
        })
        .collect()
}

fn points(n: usize, r: &mut ChaCha20Rng) -> Vec<G1Affine> {
    (0..n)
        .map(|_| G1Projective::random(&mut *r).to_affine())
        .collect()
}

fn points_g2(n: usize, r: &mut ChaCha20Rng) -> Vec<G2Affine> {
    (0..n)
        .map(|_| G2Projective::random(&mut *r).to_affine())
        .collect()
}

#[test]
fn cuda_backend_matches_cpu_backend_or_reports_no_device() {
    let backend = match CudaBackend::new(CudaConfig::default()) {
        Ok(b) => b,
        Err(CudaError::NoDevice(why)) => {
            assert!(!why.is_empty());
            // Straight to stderr, past the test harness's capture, so CI logs say it.
            let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({why})");
            return;
        }
        Err(e) => panic!("CUDA backend failed to start: {e}"),
    };
    let pool = Arc::new(rayon::ThreadPoolBuilder::new().build().unwrap());
    let cpu = CpuBackend::new(pool.clone());
    let mut r = ChaCha20Rng::seed_from_u64(7);
    for n in [1usize, 2, 5, 17, 33, 300] {
        let abc = Abc {
            a: scalars(n, &mut r),
            b: scalars(n, &mut r),
            c: scalars(n, &mut r),
        };
        let aux = scalars(n + 3, &mut r);
        let split = cuzk_msm_cpu::prep_msm(&[], None, &aux, None, &pool).unwrap();
        let h_bases = points((1 << cuzk_cuda::log_domain(n)) - 1, &mut r);
        let q_bases = points(aux.len(), &mut r);
        let q_bases_g2 = points_g2(aux.len(), &mut r);
        // B in G2 on the device for odd n, on nobody for even n.
        let g2 = n % 2 == 1;
        let job = |abc: Abc| PartitionJob {
            abc,
            h_bases: &h_bases,
            l: SplitMsm {
                bases: &q_bases,
                split: split.as_ref(),
            },
            a: SplitMsm {
                bases: &q_bases,
                split: split.as_ref(),
            },
            b_g1: SplitMsm {
                bases: &q_bases,
                split: split.as_ref(),
            },
            b_g2: g2.then_some(SplitMsm {
                bases: &q_bases_g2,
                split: split.as_ref(),
            }),
        };
        let want = cpu.prove_partition(job(abc.clone())).unwrap();
        let got = backend.prove_partition(job(abc)).unwrap();
        assert_eq!(got, want, "n = {n}");
    }
}

/// The backend reports the driver's device count (0 exactly when it cannot open
/// a device) and the host memory it holds page-locked: `a, b, c` it staged count
/// as registered (the caller's memory) until the guard is dropped, not as memory the
/// backend allocated.
#[test]
fn device_count_and_pinned_bytes_are_reported_or_no_device() {
    let count = cuzk_cuda::testing::raw::device_count();
    let backend = match CudaBackend::new(CudaConfig::default()) {
        Ok(b) => b,
        Err(CudaError::NoDevice(why)) => {
            assert_eq!(count, 0, "no device opened, yet {count} counted: {why}");
            let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({why})");
            return;
        }
        Err(e) => panic!("CUDA backend failed to start: {e}"),
    };
    assert!(count >= 1);
    assert_eq!(backend.device_count(), count);
    let before = backend.pinned_host_bytes();
    let registered_before = cuzk_cuda::testing::raw::registered_bytes(0);
    // Long enough to be page-locked by `stage` (1 << 15 scalars each).
    let mut r = ChaCha20Rng::seed_from_u64(11);
    let n = 1 << 15;
    let (a, b, c) = (scalars(n, &mut r), scalars(n, &mut r), scalars(n, &mut r));
    let staged = backend
        .stage(cuzk_gpu_backend::AbcRef {
            a: &a,
            b: &b,
            c: &c,
        })
        .unwrap();
    assert!(staged.is_staged());
    // Registered in place, counted apart: the caller's memory, not the backend's.
    let ordinal = 0;
    assert_eq!(
        cuzk_cuda::testing::raw::registered_bytes(ordinal),
        registered_before + 3 * 32 * n as u64
    );
    assert_eq!(backend.pinned_host_bytes(), before);
    drop(staged);
    assert_eq!(
        cuzk_cuda::testing::raw::registered_bytes(ordinal),
        registered_before
    );
    assert_eq!(backend.pinned_host_bytes(), before);
}

/// Bases made resident by a partition are dropped by `forget_bases` for their
/// host range (the device bytes freed reported), only theirs, and a later
/// partition uploads them again and still matches the CPU.
#[test]
fn forgetting_a_parameter_sets_bases_frees_their_device_copies_or_no_device() {
    let backend = match CudaBackend::new(CudaConfig::default()) {
        Ok(b) => b,
        Err(CudaError::NoDevice(why)) => {
            let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({why})");
            return;
        }
        Err(e) => panic!("CUDA backend failed to start: {e}"),
    };
    let pool = Arc::new(rayon::ThreadPoolBuilder::new().build().unwrap());
    let cpu = CpuBackend::new(pool.clone());
    let mut r = ChaCha20Rng::seed_from_u64(12);
    let n = 300;
    let abc = Abc {
        a: scalars(n, &mut r),
        b: scalars(n, &mut r),
        c: scalars(n, &mut r),
    };
    let aux = scalars(n + 3, &mut r);
    let split = cuzk_msm_cpu::prep_msm(&[], None, &aux, None, &pool).unwrap();
    let h_bases = points((1 << cuzk_cuda::log_domain(n)) - 1, &mut r);
    let q_bases = points(aux.len(), &mut r);
    let q_bases_g2 = points_g2(aux.len(), &mut r);
    let job = |abc: Abc| PartitionJob {
        abc,
        h_bases: &h_bases,
        l: SplitMsm {
            bases: &q_bases,
            split: split.as_ref(),
        },
        a: SplitMsm {
            bases: &q_bases,
            split: split.as_ref(),
        },
        b_g1: SplitMsm {
            bases: &q_bases,
            split: split.as_ref(),
        },
        b_g2: Some(SplitMsm {
            bases: &q_bases_g2,
            split: split.as_ref(),
        }),
    };
    let want = cpu.prove_partition(job(abc.clone())).unwrap();
    assert_eq!(backend.prove_partition(job(abc.clone())).unwrap(), want);
    let resident = backend.cached_base_bytes();
    assert!(resident > 0);
    // A host vector's address range, as the engine hands it over.
    let bytes_of = |p: *const u8, len: usize| p as usize..p as usize + len;
    let h = bytes_of(h_bases.as_ptr().cast(), std::mem::size_of_val(&h_bases[..]));
    // Only the h set first; then the query sets (G1 and G2).
    let freed_h = backend.forget_bases(std::slice::from_ref(&h));
    assert!(freed_h > 0 && freed_h < resident, "{freed_h} of {resident}");
    assert_eq!(backend.cached_base_bytes(), resident - freed_h);
    let q = bytes_of(q_bases.as_ptr().cast(), std::mem::size_of_val(&q_bases[..]));
    let q2 = bytes_of(
        q_bases_g2.as_ptr().cast(),
        std::mem::size_of_val(&q_bases_g2[..]),
    );
    assert_eq!(backend.forget_bases(&[q, q2]), resident - freed_h);
    assert_eq!(backend.cached_base_bytes(), 0);
    assert_eq!(backend.forget_bases(std::slice::from_ref(&h)), 0);
    assert_eq!(backend.prove_partition(job(abc)).unwrap(), want);
    assert_eq!(backend.cached_base_bytes(), resident);
}

/// Two backends in one process each run with their own tuning and profiler: one
/// with G1's XYZZ bucket sums, every batch-affine round forced (G2) and profiling
/// on, the other with the defaults, both match the CPU backend on the same
/// partition, and only the profiled one has reports; switching profiling over
/// switches the reports over.
#[test]
fn two_backends_keep_their_own_tuning_and_profiles_or_no_device() {
    let tuned = CudaConfig {
        profile: true,
        tuning: cuzk_cuda::CudaTuning {
            msm_sum: cuzk_cuda::testing::msm::SumVariant::CalledProducts,
            ba_min_per: 1,
            ..cuzk_cuda::CudaTuning::default()
        },
        ..CudaConfig::default()
    };
    let a = match CudaBackend::new(tuned) {
        Ok(b) => b,
        Err(CudaError::NoDevice(why)) => {
            let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({why})");
            return;
        }
        Err(e) => panic!("CUDA backend failed to start: {e}"),
    };
    let b = CudaBackend::new(CudaConfig::default()).expect("a second backend");
    assert_ne!(a.tuning().msm, b.tuning().msm);
    let pool = Arc::new(rayon::ThreadPoolBuilder::new().build().unwrap());
    let cpu = CpuBackend::new(pool.clone());
    let mut r = ChaCha20Rng::seed_from_u64(13);
    let n = 3000;
    let abc = Abc {
        a: scalars(n, &mut r),
        b: scalars(n, &mut r),
        c: scalars(n, &mut r),
    };
    let aux = scalars(n + 3, &mut r);
    let split = cuzk_msm_cpu::prep_msm(&[], None, &aux, None, &pool).unwrap();
    let h_bases = points((1 << cuzk_cuda::log_domain(n)) - 1, &mut r);
    let q_bases = points(aux.len(), &mut r);
    let q_bases_g2 = points_g2(aux.len(), &mut r);
    let job = |abc: Abc| PartitionJob {
        abc,
        h_bases: &h_bases,
        l: SplitMsm {
            bases: &q_bases,
            split: split.as_ref(),
        },
        a: SplitMsm {
            bases: &q_bases,
            split: split.as_ref(),
        },
        b_g1: SplitMsm {
            bases: &q_bases,
            split: split.as_ref(),
        },
        b_g2: Some(SplitMsm {
            bases: &q_bases_g2,
            split: split.as_ref(),
        }),
    };
    let want = cpu.prove_partition(job(abc.clone())).unwrap();
    let prove_both = || {
        assert_eq!(a.prove_partition(job(abc.clone())).unwrap(), want, "tuned");
        assert_eq!(
            b.prove_partition(job(abc.clone())).unwrap(),
            want,
            "default"
        );
    };
    prove_both();
    let (pa, pb) = (a.tuning().profiler.take(), b.tuning().profiler.take());
    assert!(pa.iter().any(|r| r.what.starts_with("partition")), "{pa:?}");
    assert!(pb.is_empty(), "the default backend profiled: {pb:?}");
    a.tuning().profiler.set_enabled(false);
    b.tuning().profiler.set_enabled(true);
    prove_both();
    let (pa, pb) = (a.tuning().profiler.take(), b.tuning().profiler.take());
    assert!(pa.is_empty(), "{pa:?}");
    assert!(pb.iter().any(|r| r.what.starts_with("partition")), "{pb:?}");
}
