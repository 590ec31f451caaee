//! Backends through the plugin boundary: the cpu plugin proves exactly what the
//! in-process CpuBackend proves; a plugin that panics or fails mid-proof fails that
//! call only; the out-of-tree vendor example builds and loads.

mod common;

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_alloc::{Abc, Density};
use cuzk_gpu_backend::{
    log_domain, AbcRef, BackendError, CpuBackend, GpuBackend, PartitionJob, PartitionJobRef,
    PartitionResult, SplitMsm,
};
use cuzk_msm_cpu::{prep_msm, SplitScalars};
use cuzk_plugin_host::{
    check_plugin, load_backend, BackendNeeds, BaseQuery, PluginSpec, SearchPath,
};
use ff::Field;
use group::{Curve, Group};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

fn search() -> SearchPath {
    SearchPath::dir(common::plugin_dir())
}

fn pool() -> Arc<rayon::ThreadPool> {
    Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap(),
    )
}

/// Mostly random scalars, with zeros and ones mixed in (the split treats them apart).
fn scalars(rng: &mut ChaCha20Rng, n: usize) -> Vec<Scalar> {
    (0..n)
        .map(|_| match rng.next_u32() % 4 {
            0 => Scalar::ZERO,
            1 => Scalar::ONE,
            _ => Scalar::random(&mut *rng),
        })
        .collect()
}

fn density(rng: &mut ChaCha20Rng, n: usize) -> Density {
    let mut d = Density::new(0);
    for _ in 0..n {
        d.push(!rng.next_u32().is_multiple_of(3));
    }
    d
}

fn g1s(rng: &mut ChaCha20Rng, n: usize) -> Vec<G1Affine> {
    (0..n)
        .map(|_| G1Projective::random(&mut *rng).to_affine())
        .collect()
}

/// Everything a PartitionJob borrows, for `n` constraints.
struct Inputs {
    abc: Abc,
    h: Vec<G1Affine>,
    splits: [SplitScalars; 4],
    bases: [Vec<G1Affine>; 3],
    g2: Vec<G2Affine>,
}

impl Inputs {
    fn random(rng: &mut ChaCha20Rng, n: usize, pool: &rayon::ThreadPool) -> Self {
        let abc = Abc {
            a: scalars(rng, n),
            b: scalars(rng, n),
            c: scalars(rng, n),
        };
        let h = g1s(rng, (1 << log_domain(n)) - 1);
        let (ni, na) = (1 + n % 3, n);
        let input = scalars(rng, ni);
        let aux = scalars(rng, na);
        let (di, da) = (density(rng, ni), density(rng, na));
        let l = prep_msm(&[], None, &aux, None, pool).unwrap();
        let a = prep_msm(&input, None, &aux, Some(&da), pool).unwrap();
        let b = prep_msm(&input, Some(&di), &aux, Some(&da), pool).unwrap();
        let b2 = b.clone();
        let bases = [
            g1s(rng, l.num_bases()),
            g1s(rng, a.num_bases()),
            g1s(rng, b.num_bases()),
        ];
        let g2 = (0..b.num_bases())
            .map(|_| G2Projective::random(&mut *rng).to_affine())
            .collect();
        Self {
            abc,
            h,
            splits: [l, a, b, b2],
            bases,
            g2,
        }
    }

    fn job(&self, g2: bool) -> PartitionJob<'_> {
        PartitionJob {
            abc: self.abc.clone(),
            h_bases: &self.h,
            l: SplitMsm {
                bases: &self.bases[0],
                split: self.splits[0].as_ref(),
            },
            a: SplitMsm {
                bases: &self.bases[1],
                split: self.splits[1].as_ref(),
            },
            b_g1: SplitMsm {
                bases: &self.bases[2],
                split: self.splits[2].as_ref(),
            },
            b_g2: g2.then(|| SplitMsm {
                bases: &self.g2[..],
                split: self.splits[3].as_ref(),
            }),
        }
    }
}

#[test]
fn cpu_plugin_proves_what_the_in_process_backend_proves() {
    let pool = pool();
    let native = CpuBackend::new(Arc::clone(&pool));
    let spec = PluginSpec::new("cpu").with_param("threads", "2");
    let plugin = load_backend(&spec, &search(), &BackendNeeds::default()).unwrap();
    assert_eq!(plugin.capabilities(), native.capabilities());

    let mut rng = ChaCha20Rng::seed_from_u64(0xc0ffee);
    let sizes: Vec<usize> = (1..=33).chain([64, 256]).collect();
    for n in sizes {
        let inputs = Inputs::random(&mut rng, n, &pool);
        let g2 = n % 2 == 1;
        let want: PartitionResult = native.prove_partition(inputs.job(g2)).unwrap();
        let got = plugin.prove_partition(inputs.job(g2)).unwrap();
        assert_eq!(got, want, "n = {n}");
        assert_eq!(got.b_g2.is_some(), g2);
        assert!(
            !bool::from(got.h.is_identity()) || n == 1,
            "n = {n}: a trivial H"
        );
    }
}

#[test]
fn backend_shape_errors_come_back_as_errors() {
    let pool = pool();
    let plugin =
        load_backend(&PluginSpec::new("cpu"), &search(), &BackendNeeds::default()).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let inputs = Inputs::random(&mut rng, 9, &pool);
    let mut job = inputs.job(false);
    job.abc.c.pop();
    // The input's fault, not the device's: `Rejected` (the engine does not retry it
    // on another device).
    match plugin.prove_partition(job) {
        Err(BackendError::Rejected(msg)) => {
            assert!(
                msg.contains("plugin `cpu` failed in prove_partition"),
                "{msg}"
            );
            assert!(msg.contains("different lengths"), "{msg}");
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
    // Residency calls reach the plugin (the cpu backend accepts and ignores them).
    plugin.upload_bases(7, BaseQuery::H, &inputs.h).unwrap();
    plugin.upload_bases_g2(7, &inputs.g2).unwrap();
    plugin.release_bases(7).unwrap();
}

#[test]
fn a_backend_that_panics_or_fails_mid_proof_fails_that_call_only() {
    let pool = pool();
    let faulty = common::lib_path("cuzk_fixture_faulty_backend");
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let inputs = Inputs::random(&mut rng, 12, &pool);
    for (mode, expect) in [
        ("panic", "panicked in prove_partition: the faulty backend panicked in the middle of a proof of 12 constraints"),
        ("error", "failed in prove_partition: the faulty backend's device fell over (12 constraints) (device error)"),
    ] {
        let spec = PluginSpec::new(faulty.to_str().unwrap()).with_param("mode", mode);
        let b = load_backend(&spec, &search(), &BackendNeeds::default()).unwrap();
        for _ in 0..2 {
            match b.prove_partition(inputs.job(false)) {
                Err(BackendError::Device(msg)) => assert!(msg.contains(expect), "{msg}"),
                other => panic!("{mode}: expected an error, got {other:?}"),
            }
        }
        // It offers no G2: asking is refused before the plugin is called.
        assert!(matches!(b.prove_partition(inputs.job(true)), Err(BackendError::Unsupported(_))));
    }
    // The process goes on: a good backend still proves.
    let cpu = load_backend(&PluginSpec::new("cpu"), &search(), &BackendNeeds::default()).unwrap();
    cpu.prove_partition(inputs.job(true)).unwrap();
}

/// `job` with its `a, b, c` borrowed from `inputs`.
fn lent<'a>(inputs: &'a Inputs, job: &PartitionJob<'a>) -> PartitionJobRef<'a> {
    PartitionJobRef {
        abc: AbcRef::new(&inputs.abc),
        h_bases: job.h_bases,
        l: job.l,
        a: job.a,
        b_g1: job.b_g1,
        b_g2: job.b_g2,
    }
}

fn device_error(r: Result<PartitionResult, BackendError>) -> String {
    match r {
        Err(BackendError::Device(msg)) => msg,
        other => panic!("expected a device error, got {other:?}"),
    }
}

#[test]
fn the_plugin_boundary_forwards_stage_and_unstage() {
    let pool = pool();
    let faulty = common::lib_path("cuzk_fixture_faulty_backend");
    let spec = PluginSpec::new(faulty.to_str().unwrap()).with_param("mode", "stage_record");
    let b = load_backend(&spec, &search(), &BackendNeeds::default()).unwrap();
    assert!(b.offers_staging());
    let mut rng = ChaCha20Rng::seed_from_u64(17);
    let inputs = Inputs::random(&mut rng, 12, &pool);
    let job = inputs.job(false);

    let staged = b.stage(AbcRef::new(&inputs.abc)).unwrap();
    assert!(staged.is_staged());
    // The lent call reaches the plugin's prove_partition_ref, on the staged buffers.
    let msg = device_error(b.prove_partition_ref(lent(&inputs, &job)));
    assert!(msg.contains("failed in prove_partition_ref"), "{msg}");
    assert!(msg.contains("stage n=12;prove_ref staged=true"), "{msg}");
    // Dropping the guard calls unstage; the buffers are no longer staged.
    drop(staged);
    let msg = device_error(b.prove_partition_ref(lent(&inputs, &job)));
    assert!(
        msg.contains("stage n=12;prove_ref staged=true;unstage;prove_ref staged=false"),
        "{msg}"
    );
    // The owned call is the old one.
    let msg = device_error(b.prove_partition(job));
    assert!(msg.contains(";prove ("), "{msg}");

    // A guard may outlive the backend handle: the instance goes with the last one.
    let staged = b.stage(AbcRef::new(&inputs.abc)).unwrap();
    drop(b);
    drop(staged);
}

#[test]
fn staging_errors_and_panics_at_the_plugin_edge_come_back_as_errors() {
    let pool = pool();
    let faulty = common::lib_path("cuzk_fixture_faulty_backend");
    let mut rng = ChaCha20Rng::seed_from_u64(19);
    let inputs = Inputs::random(&mut rng, 12, &pool);
    for (mode, expect) in [
        (
            "stage_error",
            "failed in stage: the faulty backend could not pin (device error)",
        ),
        (
            "stage_panic",
            "panicked in stage: the faulty backend panicked while staging",
        ),
    ] {
        let spec = PluginSpec::new(faulty.to_str().unwrap()).with_param("mode", mode);
        let b = load_backend(&spec, &search(), &BackendNeeds::default()).unwrap();
        match b.stage(AbcRef::new(&inputs.abc)) {
            Err(BackendError::Device(msg)) => assert!(msg.contains(expect), "{msg}"),
            other => panic!("{mode}: expected an error, got {other:?}"),
        }
        // The call goes on, unstaged.
        let job = inputs.job(false);
        let msg = device_error(b.prove_partition_ref(lent(&inputs, &job)));
        assert!(msg.contains("fell over (12 constraints, lent)"), "{msg}");
    }
}

#[test]
fn the_cpu_plugin_proves_lent_abc_and_stages_nothing() {
    let pool = pool();
    let native = CpuBackend::new(Arc::clone(&pool));
    let plugin =
        load_backend(&PluginSpec::new("cpu"), &search(), &BackendNeeds::default()).unwrap();
    assert!(plugin.offers_staging());
    let mut rng = ChaCha20Rng::seed_from_u64(23);
    for n in [1, 7, 33] {
        let inputs = Inputs::random(&mut rng, n, &pool);
        let g2 = n % 2 == 1;
        let staged = plugin.stage(AbcRef::new(&inputs.abc)).unwrap();
        assert!(!staged.is_staged());
        let job = inputs.job(g2);
        let got = plugin.prove_partition_ref(lent(&inputs, &job)).unwrap();
        assert_eq!(
            got,
            native.prove_partition(inputs.job(g2)).unwrap(),
            "n = {n}"
        );
    }
}

#[test]
fn the_vendor_example_builds_out_of_tree_and_loads() {
    let path = common::vendor_example();
    let info = check_plugin(&path).unwrap();
    assert_eq!(info.name, "vendor_example");
    let caps = info.capabilities.unwrap();
    assert_eq!(caps.devices.len(), 1);

    let spec = PluginSpec::new(path.to_str().unwrap()).with_param("devices", "2");
    let needs = BackendNeeds {
        resident_bases: true,
        ..Default::default()
    };
    let b = load_backend(&spec, &search(), &needs).unwrap();
    assert_eq!(b.capabilities().devices.len(), 2);
    let pool = pool();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let inputs = Inputs::random(&mut rng, 5, &pool);
    b.upload_bases(1, BaseQuery::L, &inputs.bases[0]).unwrap();
    b.release_bases(1).unwrap();
    let e = b.release_bases(1).unwrap_err();
    assert!(
        e.to_string().contains("nothing is resident under id 1"),
        "{e}"
    );
    match b.prove_partition(inputs.job(false)) {
        // UNSUPPORTED is the input's failure (no device would do better).
        Err(BackendError::Rejected(msg)) => assert!(msg.contains("unsupported"), "{msg}"),
        other => panic!("expected the template's error, got {other:?}"),
    }
}
