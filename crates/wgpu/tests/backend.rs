//! `WgpuBackend` as the engine sees it: whole partitions equal to the CPU
//! backend's sums, its device reported, adapters chosen by name and position, and
//! bad jobs refused before any device work.

mod common;

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk_alloc::{Abc, Density, SplitScalars};
use cuzk_gpu_backend::{
    AbcRef, BackendError, CpuBackend, GpuBackend, PartitionJob, PartitionJobRef, SplitMsm,
};
use cuzk_msm_cpu::prep_msm;
use cuzk_wgpu::{WgpuBackend, WgpuConfig, WgpuError};
use group::{Curve, Group};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;

struct Partition {
    abc: Abc,
    h: Vec<G1Affine>,
    bases: [Vec<G1Affine>; 3],
    splits: [SplitScalars; 3],
    g2: Vec<G2Affine>,
}

fn bases(rng: &mut ChaCha8Rng, n: usize) -> Vec<G1Affine> {
    let p: Vec<G1Projective> = (0..n).map(|_| G1Projective::random(&mut *rng)).collect();
    let mut out = vec![G1Affine::default(); n];
    G1Projective::batch_normalize(&p, &mut out);
    out
}

fn density(rng: &mut ChaCha8Rng, n: usize) -> Density {
    let mut d = Density::new(0);
    for i in 0..n {
        d.push(i == 0 || rng.gen_bool(0.6));
    }
    d
}

fn partition(rng: &mut ChaCha8Rng, constraints: usize, inputs: usize, aux: usize) -> Partition {
    let pool = common::pool();
    let abc = Abc {
        a: common::scalars(rng, constraints),
        b: common::scalars(rng, constraints),
        c: common::scalars(rng, constraints),
    };
    let h = bases(rng, constraints.next_power_of_two() - 1);
    let ins = common::scalars(rng, inputs);
    let auxs = common::scalars(rng, aux);
    let (da, dbi, dba) = (density(rng, aux), density(rng, inputs), density(rng, aux));
    let splits = [
        prep_msm(&[], None, &auxs, None, &pool).unwrap(),
        prep_msm(&ins, None, &auxs, Some(&da), &pool).unwrap(),
        prep_msm(&ins, Some(&dbi), &auxs, Some(&dba), &pool).unwrap(),
    ];
    let bases = [
        bases(rng, splits[0].num_bases()),
        bases(rng, splits[1].num_bases()),
        bases(rng, splits[2].num_bases()),
    ];
    let g2 = (0..splits[2].num_bases())
        .map(|_| G2Projective::random(&mut *rng).to_affine())
        .collect();
    Partition {
        abc,
        h,
        bases,
        splits,
        g2,
    }
}

impl Partition {
    fn job(&self, g2: bool) -> PartitionJobRef<'_> {
        let q = |i: usize| SplitMsm {
            bases: &self.bases[i][..],
            split: self.splits[i].as_ref(),
        };
        PartitionJobRef {
            abc: AbcRef::new(&self.abc),
            h_bases: &self.h,
            l: q(0),
            a: q(1),
            b_g1: q(2),
            b_g2: g2.then(|| SplitMsm {
                bases: &self.g2[..],
                split: self.splits[2].as_ref(),
            }),
        }
    }
}

fn backend(config: &WgpuConfig) -> Option<WgpuBackend> {
    common::context(config)?;
    Some(WgpuBackend::new(config, Arc::new(common::pool())).expect("the backend opens"))
}

#[test]
fn partitions_equal_the_cpu_backends() {
    let Some(gpu) = backend(&WgpuConfig::default()) else {
        return;
    };
    let cpu = CpuBackend::new(Arc::new(common::pool()));
    let mut rng = ChaCha8Rng::seed_from_u64(36);
    for (constraints, inputs, aux) in [(1, 1, 1), (5, 2, 7), (100, 3, 90), (1000, 4, 700)] {
        let p = partition(&mut rng, constraints, inputs, aux);
        let got = gpu.prove_partition_ref(p.job(false)).unwrap();
        let want = cpu.prove_partition_ref(p.job(false)).unwrap();
        assert_eq!(got, want, "{constraints} constraints");
        // The owned call and a second call (bases now resident) agree.
        let owned = gpu.prove_partition(p.job(false).to_owned_job()).unwrap();
        assert_eq!(owned, want);
    }
    // Forgetting the bases' memory drops their resident copies (device memory
    // once the device MSM is merged; the host bridge keeps none), and the next
    // partition uploads them again and proves the same sums.
    let p = partition(&mut rng, 300, 2, 200);
    let want = cpu.prove_partition_ref(p.job(false)).unwrap();
    assert_eq!(gpu.prove_partition_ref(p.job(false)).unwrap(), want);
    let span = |v: &[G1Affine]| {
        let start = v.as_ptr() as usize;
        start..start + std::mem::size_of_val(v)
    };
    let ranges: Vec<_> = [&p.h, &p.bases[0], &p.bases[1], &p.bases[2]]
        .into_iter()
        .map(|v| span(v))
        .collect();
    let _freed = gpu.forget_bases(&ranges);
    assert_eq!(gpu.prove_partition_ref(p.job(false)).unwrap(), want);
}

#[test]
fn reports_its_device_and_refuses_bad_jobs() {
    let Some(gpu) = backend(&WgpuConfig::default()) else {
        return;
    };
    let caps = gpu.capabilities();
    assert_eq!(caps.name, "wgpu");
    assert!(!caps.g2);
    assert_eq!(caps.devices.len(), 1);
    let dev = &caps.devices[0];
    assert_eq!(dev.name, gpu.context().info.name);
    assert!(!dev.name.is_empty());
    assert!(
        dev.total_memory > 0 && dev.free_memory <= dev.total_memory,
        "{dev:?}"
    );
    assert!(gpu.device_count() >= 1);
    // On Vulkan the figure is the device's own heaps, not an estimate.
    let ctx = gpu.context();
    if ctx.info.backend == wgpu::Backend::Vulkan {
        assert_ne!(ctx.memory.source, cuzk_wgpu::MemorySource::Estimate);
    }

    let mut rng = ChaCha8Rng::seed_from_u64(37);
    let p = partition(&mut rng, 20, 2, 10);
    assert!(matches!(
        gpu.prove_partition_ref(p.job(true)),
        Err(BackendError::Unsupported(_))
    ));
    let mut job = p.job(false);
    job.abc.c = &p.abc.c[..19];
    assert!(matches!(
        gpu.prove_partition_ref(job),
        Err(BackendError::AbcShape { .. })
    ));
    let mut job = p.job(false);
    job.h_bases = &p.h[..10];
    assert!(matches!(
        gpu.prove_partition_ref(job),
        Err(BackendError::BaseCount { query: "h", .. })
    ));
    let mut job = p.job(false);
    job.l.bases = &p.bases[0][..1];
    assert!(matches!(
        gpu.prove_partition_ref(job),
        Err(BackendError::BaseCount { query: "l", .. })
    ));
    // An owned job with a bad shape is the same error.
    let owned: PartitionJob<'_> = p.job(true).to_owned_job();
    assert!(gpu.prove_partition(owned).is_err());
}

#[test]
fn adapters_are_chosen_by_name_and_position() {
    let Some(ctx) = common::context(&WgpuConfig::default()) else {
        return;
    };
    let name = ctx.info.name.clone();
    let listed = cuzk_wgpu::adapters();
    assert!(listed.iter().any(|a| a.name == name), "{listed:?}");
    // A piece of the name, in another case, finds it.
    let piece: String = name.chars().take(4).collect::<String>().to_uppercase();
    let by_name = WgpuConfig {
        adapter: piece,
        ..WgpuConfig::default()
    };
    assert_eq!(common::context(&by_name).unwrap().info.name, name);
    for bad in [
        WgpuConfig {
            adapter: "no such adapter".into(),
            ..WgpuConfig::default()
        },
        WgpuConfig {
            device: listed.len() as u32,
            ..WgpuConfig::default()
        },
    ] {
        match cuzk_wgpu::Context::new(&bad) {
            Err(e @ WgpuError::NoAdapter { .. }) => {
                assert!(e.to_string().contains(&name), "{e}")
            }
            other => panic!("expected no adapter, got {other:?}"),
        }
    }
}
