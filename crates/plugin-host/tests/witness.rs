//! Proving from the witness through the plugin boundary: the cpu plugin, handed a
//! compiled circuit's R1CS and witness, proves exactly what the in-process
//! CpuBackend proves from them and what either proves from `a, b, c` evaluated on
//! the host; a malformed R1CS or a witness of another shape is refused as the
//! input's fault, and the process goes on.

mod common;

use std::sync::Arc;

use bellpepper_core::Circuit;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_circuits::{MulChain, Sha256Chain};
use cuzk_gpu_backend::{
    log_domain, AbcEval, AbcRef, BackendError, CpuBackend, CsrRef, GpuBackend, PartitionResult,
    R1csRef, SplitMsm, Term, WitnessJobRef,
};
use cuzk_msm_cpu::{prep_msm, SplitScalars};
use cuzk_plugin_host::{load_backend, BackendNeeds, PluginBackend, PluginSpec, SearchPath};
use cuzk_synth::{R1cs, Witness};
use group::{Curve, Group};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

fn pool() -> Arc<rayon::ThreadPool> {
    Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap(),
    )
}

fn cpu_plugin() -> Arc<PluginBackend> {
    let spec = PluginSpec::new("cpu").with_param("threads", "2");
    let search = SearchPath::dir(common::plugin_dir());
    load_backend(&spec, &search, &BackendNeeds::default()).unwrap()
}

/// `n` distinct points, cheaply: a running sum over 16 random points (random
/// points cost a hash to the curve each; 10^5 of them would dominate the test).
fn points<G>(rng: &mut ChaCha20Rng, n: usize) -> Vec<G::AffineRepr>
where
    G: Group + Curve,
    G::AffineRepr: Default + Clone,
{
    let steps: Vec<G> = (0..16).map(|_| G::random(&mut *rng)).collect();
    let mut acc = G::random(&mut *rng);
    let proj: Vec<G> = (0..n)
        .map(|i| {
            acc += steps[i % 16];
            acc
        })
        .collect();
    let mut out = vec![G::AffineRepr::default(); n];
    G::batch_normalize(&proj, &mut out);
    out
}

/// A compiled circuit, its witness and random bases for every query.
struct Partition {
    r1cs: R1cs,
    witness: Witness,
    h: Vec<G1Affine>,
    /// L, A, B (G1), B (G2).
    splits: [SplitScalars; 4],
    bases: [Vec<G1Affine>; 3],
    g2: Vec<G2Affine>,
}

impl Partition {
    fn new(circuit: impl Circuit<Scalar>, rng: &mut ChaCha20Rng, pool: &rayon::ThreadPool) -> Self {
        let compiled = cuzk_synth::compile(circuit).unwrap();
        let (r1cs, witness) = (compiled.r1cs, compiled.witness);
        let (input, aux) = (&witness.input, &witness.aux);
        let l = prep_msm(&[], None, aux, None, pool).unwrap();
        let a = prep_msm(input, None, aux, Some(r1cs.a_aux_density()), pool).unwrap();
        let b = prep_msm(
            input,
            Some(r1cs.b_input_density()),
            aux,
            Some(r1cs.b_aux_density()),
            pool,
        )
        .unwrap();
        let h = points::<G1Projective>(rng, (1 << log_domain(r1cs.num_constraints())) - 1);
        let bases = [
            points::<G1Projective>(rng, l.num_bases()),
            points::<G1Projective>(rng, a.num_bases()),
            points::<G1Projective>(rng, b.num_bases()),
        ];
        let g2 = points::<G2Projective>(rng, b.num_bases());
        Self {
            r1cs,
            witness,
            h,
            splits: [l, a, b.clone(), b],
            bases,
            g2,
        }
    }

    fn job<'a>(&'a self, r1cs: R1csRef<'a>, g2: bool) -> WitnessJobRef<'a> {
        WitnessJobRef {
            r1cs,
            input: &self.witness.input,
            aux: &self.witness.aux,
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

fn rejected(r: Result<PartitionResult, BackendError>) -> String {
    match r {
        Err(BackendError::Rejected(m)) => m,
        other => panic!("expected the input to be rejected, got {other:?}"),
    }
}

#[test]
fn the_cpu_plugin_proves_from_the_witness_what_the_host_proves_from_abc() {
    let pool = pool();
    let native = CpuBackend::new(Arc::clone(&pool));
    let plugin = cpu_plugin();
    // `abc_eval` crosses: the cpu backend evaluates on the host.
    assert_eq!(plugin.abc_eval(), AbcEval::Host);
    assert_eq!(plugin.abc_eval(), native.abc_eval());

    let mut rng = ChaCha20Rng::seed_from_u64(0x5eed);
    // A chain of random products (every coefficient 1) with three public inputs,
    // and a SHA-256 compression (coefficients from the table: 2, -1, powers of 2).
    let partitions = [
        Partition::new(MulChain::new(10, 3, Some(1)).unwrap(), &mut rng, &pool),
        Partition::new(Sha256Chain::new(15, Some(2)).unwrap(), &mut rng, &pool),
    ];
    for (i, p) in partitions.iter().enumerate() {
        assert!(p.r1cs.num_coefficients() > 3 || i == 0);
        let g2 = i == 0;
        let job = p.job(p.r1cs.view(), g2);
        // The witness is staged as the backend stages it (the cpu one: nothing).
        let staged = plugin
            .stage_witness(&p.witness.input, &p.witness.aux)
            .unwrap();
        assert!(!staged.is_staged());
        let got = plugin.prove_partition_witness(job).unwrap();
        drop(staged);

        let want = native.prove_partition_witness(job).unwrap();
        assert_eq!(got, want, "partition {i}");
        let abc =
            cuzk_synth::spmv_parallel(&p.r1cs, &p.witness, &pool, &cuzk_synth::NoThrottle).unwrap();
        cuzk_synth::check_witness(&p.r1cs, &abc).unwrap();
        let lent = job.with_abc(AbcRef::new(&abc));
        assert_eq!(
            plugin.prove_partition_ref(lent).unwrap(),
            want,
            "partition {i}"
        );
        assert_eq!(
            native.prove_partition_ref(lent).unwrap(),
            want,
            "partition {i}"
        );
        // A second instance, made by the plugin (the engine's critical lane),
        // proves the same.
        let sibling = plugin
            .open_sibling()
            .unwrap()
            .expect("the cpu plugin offers one");
        assert_eq!(sibling.capabilities(), plugin.capabilities());
        assert_eq!(sibling.prove_partition_witness(job).unwrap(), want);
        assert_eq!(got.b_g2.is_some(), g2);
        assert!(
            !bool::from(got.h.is_identity()),
            "partition {i}: a trivial H"
        );
        assert!(
            !bool::from(got.l.is_identity()),
            "partition {i}: a trivial L"
        );
    }
}

#[test]
fn a_malformed_r1cs_or_witness_is_rejected_at_the_plugin_and_the_process_goes_on() {
    let pool = pool();
    let plugin = cpu_plugin();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let p = Partition::new(MulChain::new(10, 2, Some(3)).unwrap(), &mut rng, &pool);
    let view = p.r1cs.view();

    // One column just past the witness, in B: a device kernel would read out of
    // bounds; the plugin refuses it before any index is used.
    let vars = (view.num_inputs + view.num_aux) as u32;
    let mut terms: Vec<Term> = view.matrices[1].terms.to_vec();
    let mid = terms.len() / 2;
    terms[mid].col = vars;
    let mut bad = view;
    bad.matrices[1] = CsrRef {
        row_ptr: view.matrices[1].row_ptr,
        terms: &terms,
    };
    let m = rejected(plugin.prove_partition_witness(p.job(bad, false)));
    assert!(
        m.contains("plugin `cpu` failed in prove_partition_witness"),
        "{m}"
    );
    assert!(m.contains(&format!("outside {vars} columns")), "{m}");

    // A coefficient index past the table.
    let mut terms: Vec<Term> = view.matrices[2].terms.to_vec();
    terms[0].coeff = view.coeffs.len() as u32;
    let mut bad = view;
    bad.matrices[2] = CsrRef {
        row_ptr: view.matrices[2].row_ptr,
        terms: &terms,
    };
    let m = rejected(plugin.prove_partition_witness(p.job(bad, false)));
    assert!(m.contains("coefficients"), "{m}");

    // Row pointers past the terms.
    let mut row_ptr: Vec<u32> = view.matrices[0].row_ptr.to_vec();
    *row_ptr.last_mut().unwrap() += 1;
    let mut bad = view;
    bad.matrices[0] = CsrRef {
        row_ptr: &row_ptr,
        terms: view.matrices[0].terms,
    };
    rejected(plugin.prove_partition_witness(p.job(bad, false)));

    // A witness of another shape.
    let mut job = p.job(view, false);
    job.aux = &p.witness.aux[1..];
    let m = rejected(plugin.prove_partition_witness(job));
    assert!(m.contains("aux variables"), "{m}");

    // The same plugin still proves a good partition.
    let native = CpuBackend::new(Arc::clone(&pool));
    let job = p.job(view, true);
    assert_eq!(
        plugin.prove_partition_witness(job).unwrap(),
        native.prove_partition_witness(job).unwrap()
    );
}
