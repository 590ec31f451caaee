//! Whole proofs: cuzk beside bellperson's CPU prover on the same circuit,
//! parameters, r and s, in the same run; and cuzk through the `cpu` backend plugin
//! beside the in-process backend (the cost of crossing the plugin boundary).
//!
//! Run: `BENCH_NPOW=16 cargo bench -p cuzk --bench prove` (sizes 10..=20; the
//! parameters are generated once per size and cached in `target/bench-params`).
//! `BENCH_CIRCUITS=sha256,mul` picks the circuits. The plugin comparison needs the
//! plugins built (`cargo build --release --workspace`).

use std::{path::PathBuf, time::Duration};

use blstrs::Scalar;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use cuzk::{BatchProver, BatchProverConfig};
use cuzk_circuits::{AnyCircuit, Builtin};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

fn npow() -> u32 {
    std::env::var("BENCH_NPOW")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16)
}

fn circuits() -> Vec<Builtin> {
    std::env::var("BENCH_CIRCUITS")
        .ok()
        .map(|s| s.split(',').filter_map(Builtin::from_name).collect())
        .unwrap_or_else(|| Builtin::ALL.to_vec())
}

fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("bench executable");
    // <target>/<profile>/deps/<bench>
    exe.parent()
        .and_then(|p| p.parent())
        .expect("profile dir")
        .to_path_buf()
}

fn bench_prove(c: &mut Criterion) {
    let log = npow();
    let cache = target_dir().join("../bench-params");
    let mut group = c.benchmark_group(format!("2^{log}"));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));

    let in_process = BatchProver::new(BatchProverConfig::default()).expect("engine");
    let plugin = cuzk_plugin_host::load_backend(
        &cuzk_plugin_host::PluginSpec::new("cpu"),
        &cuzk_plugin_host::SearchPath::dir(target_dir()),
        &Default::default(),
    )
    .ok()
    .map(|b| {
        BatchProver::new(BatchProverConfig {
            backend: Some(b),
            ..BatchProverConfig::default()
        })
        .expect("engine")
    });

    for kind in circuits() {
        let path = cache.join(format!("{}-2^{log}.params", kind.name()));
        let params =
            cuzk_params::load_or_generate(&path, AnyCircuit::new(kind, log, None).unwrap(), 0)
                .expect("parameters");
        let circuit = AnyCircuit::new(kind, log, Some(1)).unwrap();
        let name = kind.name();
        group.bench_function(BenchmarkId::new("bellperson", name), |b| {
            b.iter(|| bellperson::groth16::create_proof(circuit.clone(), &params, r, s).unwrap())
        });
        group.bench_function(BenchmarkId::new("cuzk", name), |b| {
            b.iter(|| {
                in_process
                    .prove_batch(vec![circuit.clone()], &&params, vec![r], vec![s])
                    .unwrap()
            })
        });
        match &plugin {
            Some(engine) => {
                group.bench_function(BenchmarkId::new("cuzk-cpu-plugin", name), |b| {
                    b.iter(|| {
                        engine
                            .prove_batch(vec![circuit.clone()], &&params, vec![r], vec![s])
                            .unwrap()
                    })
                });
            }
            None => eprintln!("skipped the plugin comparison: build the plugins first"),
        }
    }
    group.finish();
}

criterion_group!(benches, bench_prove);
criterion_main!(benches);
