//! The CPU reference backend: the same call as a GPU backend, computed with this
//! crate's NTT and `cuzk-msm-cpu`. Every GPU result is checked against it, and a
//! machine without a GPU proves with it.

use std::sync::Arc;

use cuzk_msm_cpu::{
    msm_g1, msm_g1_table, split_msm_g1, split_msm_g1_table, split_msm_g2, split_msm_g2_table,
};

use crate::tables::Tables;
use crate::{
    compute_h, AbcEval, BackendError, Capabilities, GpuBackend, PartitionJob, PartitionResult,
    WitnessJobRef,
};

/// [`GpuBackend`] on the CPU, on a pool the scheduler owns.
#[derive(Clone)]
pub struct CpuBackend {
    pool: Arc<rayon::ThreadPool>,
    /// What [`GpuBackend::device_count`] reports (1 unless configured).
    devices: u32,
    /// Fixed-base tables of the bases seen (`with_tables`), shared by clones.
    tables: Option<Arc<Tables>>,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("threads", &self.pool.current_num_threads())
            .field("devices", &self.devices)
            .field("table_bytes", &self.tables.as_ref().map(|t| t.bytes()))
            .finish()
    }
}

impl CpuBackend {
    pub fn new(pool: Arc<rayon::ThreadPool>) -> Self {
        Self {
            pool,
            devices: 1,
            tables: None,
        }
    }

    /// The same backend keeping fixed-base tables (`cuzk_msm_cpu::Table`, 16× the
    /// bases' memory at most) of the base vectors it proves with, up to `budget` bytes
    /// in all (0: none). A table is made on threads of its own while no partition is
    /// being proven here, and used from the first partition after it is ready: the
    /// MSMs of small circuits proved again and again (PoSt) get 1.3-1.4× faster. With
    /// tables, B in G2 is best computed here too (`Capabilities::g2_preferred`).
    pub fn with_tables(mut self, budget: usize) -> Self {
        self.tables = (budget > 0).then(|| Tables::new(budget, self.pool.current_num_threads()));
        self
    }

    /// The same backend reporting `devices` devices (at least one), so that a
    /// machine without a GPU runs the engine's several-device path: every
    /// instance computes the same on the CPU.
    pub fn with_device_count(mut self, devices: u32) -> Self {
        self.devices = devices.max(1);
        self
    }
}

impl GpuBackend for CpuBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            name: "cpu".to_owned(),
            max_log_domain: crate::ntt::MAX_LOG_DOMAIN,
            g2: true,
            g2_preferred: self.tables.is_some(),
            devices: Vec::new(),
        }
    }

    fn abc_eval(&self) -> AbcEval {
        AbcEval::Host
    }

    /// The same pool: a CPU "device" runs calls side by side anyway.
    fn open_sibling(&self) -> Result<Option<Arc<dyn GpuBackend>>, BackendError> {
        Ok(Some(Arc::new(self.clone())))
    }

    /// The engine's own mat-vec on this backend's pool, then the partition as
    /// [`GpuBackend::prove_partition`] proves it (the NTT pads `a, b, c` in place).
    fn prove_partition_witness(
        &self,
        job: WitnessJobRef<'_>,
    ) -> Result<PartitionResult, BackendError> {
        let abc = cuzk_synth::spmv_slices(
            job.r1cs,
            job.input,
            job.aux,
            &self.pool,
            &cuzk_synth::NoThrottle,
        )
        .map_err(|e| BackendError::Rejected(e.to_string()))?;
        self.prove_partition(PartitionJob {
            abc,
            h_bases: job.h_bases,
            l: job.l,
            a: job.a,
            b_g1: job.b_g1,
            b_g2: job.b_g2,
        })
    }

    fn prove_partition(&self, job: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
        // Every shape is checked before any work, so a bad job fails in microseconds.
        job.as_ref().check_shapes()?;
        let PartitionJob {
            abc,
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
        } = job;

        let pool = &*self.pool;
        let _span = tracing::info_span!("prove_partition", backend = "cpu").entered();
        // Table builds wait while this partition is proven.
        let _busy = self.tables.as_ref().map(|t| t.busy());
        let g1_split = |m: crate::SplitMsm<'_, blstrs::G1Affine>| match self
            .tables
            .as_ref()
            .and_then(|t| t.g1(m.bases, m.split.tail_indices().len()))
        {
            Some(t) => split_msm_g1_table(&t, m.bases, m.split, pool),
            None => split_msm_g1(m.bases, m.split, pool),
        };
        // compute_h consumes abc (b and c die inside it, a with the gather of h), and
        // h dies right after its MSM: the partition's big buffers are gone before the
        // query MSMs start.
        let h_scalars = compute_h(abc, pool)?;
        let h = {
            let _span = tracing::info_span!("h_msm").entered();
            match self
                .tables
                .as_ref()
                .and_then(|t| t.g1(h_bases, h_bases.len()))
            {
                Some(t) => msm_g1_table(&t, h_bases, &h_scalars, pool)?,
                None => msm_g1(h_bases, &h_scalars, pool)?,
            }
        };
        drop(h_scalars);
        let l = {
            let _span = tracing::info_span!("l_msm").entered();
            g1_split(l)?
        };
        let a = {
            let _span = tracing::info_span!("a_msm").entered();
            g1_split(a)?
        };
        let b_g1 = {
            let _span = tracing::info_span!("b_g1_msm").entered();
            g1_split(b_g1)?
        };
        let b_g2 = match b_g2 {
            Some(m) => {
                let _span = tracing::info_span!("b_g2_msm").entered();
                Some(
                    match self
                        .tables
                        .as_ref()
                        .and_then(|t| t.g2(m.bases, m.split.tail_indices().len()))
                    {
                        Some(t) => split_msm_g2_table(&t, m.bases, m.split, pool)?,
                        None => split_msm_g2(m.bases, m.split, pool)?,
                    },
                )
            }
            None => None,
        };
        Ok(PartitionResult {
            h,
            l,
            a,
            b_g1,
            b_g2,
        })
    }

    fn settle(&self) {
        if let Some(t) = &self.tables {
            t.settle();
        }
    }

    fn forget_bases(&self, host: &[std::ops::Range<usize>]) -> u64 {
        self.tables.as_ref().map_or(0, |t| t.forget(host))
    }

    fn device_count(&self) -> u32 {
        self.devices
    }
}

#[cfg(test)]
mod tests {
    use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
    use cuzk_alloc::{Abc, Density};
    use cuzk_msm_cpu::{prep_msm, SplitScalars};
    use ff::Field;
    use group::{Curve, Group};
    use rand::Rng;
    use rand_chacha::ChaCha8Rng;
    use rand_core::SeedableRng;

    use super::*;
    use crate::ntt::tests::{bellperson_h, random};
    use crate::SplitMsm;

    fn pool() -> Arc<rayon::ThreadPool> {
        Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(3)
                .build()
                .expect("test pool"),
        )
    }

    /// Witness-like scalars: zeros, ones and random values mixed, never all zero.
    fn witness(rng: &mut ChaCha8Rng, n: usize) -> Vec<Scalar> {
        let mut v: Vec<Scalar> = (0..n)
            .map(|_| match rng.gen_range(0..4) {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                _ => Scalar::random(&mut *rng),
            })
            .collect();
        if let Some(first) = v.first_mut() {
            *first = Scalar::random(&mut *rng);
        }
        v
    }

    fn density(rng: &mut ChaCha8Rng, n: usize) -> Density {
        let mut d = Density::new(0);
        for i in 0..n {
            d.push(i == 0 || rng.gen_bool(0.6));
        }
        d
    }

    /// The scalars of a query in its base index space: the inputs with their bit set,
    /// then the aux with theirs.
    fn query_scalars(
        inputs: &[Scalar],
        input_density: Option<&Density>,
        aux: &[Scalar],
        aux_density: Option<&Density>,
    ) -> Vec<Scalar> {
        let pick = |v: &[Scalar], d: Option<&Density>| -> Vec<Scalar> {
            v.iter()
                .enumerate()
                .filter(|(i, _)| d.map(|d| d.get(*i)).unwrap_or(true))
                .map(|(_, s)| *s)
                .collect()
        };
        let mut s = pick(inputs, input_density);
        s.extend(pick(aux, aux_density));
        s
    }

    fn naive<G: Group<Scalar = Scalar>>(bases: &[G], scalars: &[Scalar]) -> G {
        bases.iter().zip(scalars).map(|(b, s)| *b * s).sum()
    }

    struct Query<G> {
        bases: Vec<G>,
        split: SplitScalars,
        want: G,
    }

    fn query<G: Group<Scalar = Scalar>>(
        rng: &mut ChaCha8Rng,
        inputs: &[Scalar],
        input_density: Option<&Density>,
        aux: &[Scalar],
        aux_density: Option<&Density>,
        pool: &rayon::ThreadPool,
    ) -> Query<G> {
        let scalars = query_scalars(inputs, input_density, aux, aux_density);
        let bases: Vec<G> = (0..scalars.len()).map(|_| G::random(&mut *rng)).collect();
        let split = prep_msm(inputs, input_density, aux, aux_density, pool).unwrap();
        assert_eq!(split.num_bases(), bases.len());
        let want = naive(&bases, &scalars);
        Query { bases, split, want }
    }

    fn to_affine1(v: &[G1Projective]) -> Vec<G1Affine> {
        v.iter().map(|p| p.to_affine()).collect()
    }

    #[test]
    fn prove_partition_equals_naive_sums() {
        let pool = pool();
        let backend = CpuBackend::new(pool.clone());
        let mut rng = ChaCha8Rng::seed_from_u64(10);
        for (constraints, num_inputs, num_aux) in [(1, 1, 1), (5, 2, 7), (33, 3, 40), (100, 4, 90)]
        {
            let inputs = witness(&mut rng, num_inputs);
            let aux = witness(&mut rng, num_aux);
            let (a_aux, b_in, b_aux) = (
                density(&mut rng, num_aux),
                density(&mut rng, num_inputs),
                density(&mut rng, num_aux),
            );
            let l = query::<G1Projective>(&mut rng, &[], None, &aux, None, &pool);
            let a = query::<G1Projective>(&mut rng, &inputs, None, &aux, Some(&a_aux), &pool);
            let b1 =
                query::<G1Projective>(&mut rng, &inputs, Some(&b_in), &aux, Some(&b_aux), &pool);
            let b2 =
                query::<G2Projective>(&mut rng, &inputs, Some(&b_in), &aux, Some(&b_aux), &pool);
            let abc = Abc {
                a: random(&mut rng, constraints),
                b: random(&mut rng, constraints),
                c: random(&mut rng, constraints),
            };
            let h_scalars = bellperson_h(&abc);
            let h_bases: Vec<G1Projective> = (0..h_scalars.len())
                .map(|_| G1Projective::random(&mut rng))
                .collect();
            let want_h = naive(&h_bases, &h_scalars);

            let (h_aff, l_aff, a_aff, b1_aff) = (
                to_affine1(&h_bases),
                to_affine1(&l.bases),
                to_affine1(&a.bases),
                to_affine1(&b1.bases),
            );
            let b2_aff: Vec<G2Affine> = b2.bases.iter().map(|p| p.to_affine()).collect();
            for with_g2 in [true, false] {
                let job = PartitionJob {
                    abc: abc.clone(),
                    h_bases: &h_aff,
                    l: SplitMsm {
                        bases: &l_aff,
                        split: l.split.as_ref(),
                    },
                    a: SplitMsm {
                        bases: &a_aff,
                        split: a.split.as_ref(),
                    },
                    b_g1: SplitMsm {
                        bases: &b1_aff,
                        split: b1.split.as_ref(),
                    },
                    b_g2: with_g2.then_some(SplitMsm {
                        bases: &b2_aff,
                        split: b2.split.as_ref(),
                    }),
                };
                // The borrowed entry point (what a plugin calls) gives the same sums.
                let by_ref = backend.prove_partition_ref(job.as_ref()).unwrap();
                let got = backend.prove_partition(job).unwrap();
                assert_eq!(by_ref, got);
                assert_eq!(
                    got,
                    PartitionResult {
                        h: want_h,
                        l: l.want,
                        a: a.want,
                        b_g1: b1.want,
                        b_g2: with_g2.then_some(b2.want),
                    },
                    "{constraints} constraints, g2 {with_g2}"
                );
            }
        }
    }

    #[test]
    fn bad_shapes_are_errors_before_any_work() {
        let pool = pool();
        let backend = CpuBackend::new(pool.clone());
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let aux = witness(&mut rng, 6);
        let l = query::<G1Projective>(&mut rng, &[], None, &aux, None, &pool);
        let l_aff = to_affine1(&l.bases);
        let h_aff = to_affine1(&[G1Projective::generator(); 7]);
        let abc = |len_c: usize| Abc {
            a: vec![Scalar::ONE; 5],
            b: vec![Scalar::ONE; 5],
            c: vec![Scalar::ONE; len_c],
        };
        let job = |abc: Abc, h: &'static str, l_len: usize| PartitionJob {
            abc,
            h_bases: if h == "short" { &h_aff[..6] } else { &h_aff },
            l: SplitMsm {
                bases: &l_aff[..l_len],
                split: l.split.as_ref(),
            },
            a: SplitMsm {
                bases: &l_aff,
                split: l.split.as_ref(),
            },
            b_g1: SplitMsm {
                bases: &l_aff,
                split: l.split.as_ref(),
            },
            b_g2: None,
        };
        assert!(matches!(
            backend.prove_partition(job(abc(4), "ok", 6)),
            Err(BackendError::AbcShape { a: 5, b: 5, c: 4 })
        ));
        assert!(matches!(
            backend.prove_partition(job(abc(5), "short", 6)),
            Err(BackendError::BaseCount {
                query: "h",
                got: 6,
                want: 7
            })
        ));
        assert!(matches!(
            backend.prove_partition(job(abc(5), "ok", 5)),
            Err(BackendError::BaseCount {
                query: "l",
                got: 5,
                want: 6
            })
        ));
        assert!(backend.prove_partition(job(abc(5), "ok", 6)).is_ok());
    }

    #[test]
    fn capabilities_describe_the_cpu() {
        let caps = CpuBackend::new(pool()).capabilities();
        assert_eq!(caps.name, "cpu");
        assert_eq!(caps.max_log_domain, 32);
        assert!(caps.g2);
        assert!(caps.devices.is_empty());
        assert!(!caps.g2_preferred);
        assert!(
            CpuBackend::new(pool())
                .with_tables(1 << 30)
                .capabilities()
                .g2_preferred
        );
    }

    /// Random affine points, made in one batch.
    fn points<P: Group + Curve>(rng: &mut ChaCha8Rng, n: usize) -> Vec<P::AffineRepr>
    where
        P::AffineRepr: Default + Clone,
    {
        let proj: Vec<P> = (0..n).map(|_| P::random(&mut *rng)).collect();
        let mut out = vec![<P::AffineRepr as Default>::default(); n];
        P::batch_normalize(&proj, &mut out);
        out
    }

    /// With tables the sums are the plain backend's: before the tables are made, after
    /// (`settle`), and after `forget_bases` dropped them; a budget too small makes none.
    #[test]
    fn tables_give_the_plain_sums_and_are_forgotten() {
        let pool = pool();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let (constraints, num_inputs, num_aux) = (1500, 3, 1400);
        let inputs = witness(&mut rng, num_inputs);
        let aux = witness(&mut rng, num_aux);
        let (a_aux, b_in, b_aux) = (
            density(&mut rng, num_aux),
            density(&mut rng, num_inputs),
            density(&mut rng, num_aux),
        );
        let split = |d_in: Option<&Density>, d_aux: Option<&Density>, ins: &[Scalar]| {
            prep_msm(ins, d_in, &aux, d_aux, &pool).unwrap()
        };
        let (l, a, b) = (
            split(None, None, &[]),
            split(None, Some(&a_aux), &inputs),
            split(Some(&b_in), Some(&b_aux), &inputs),
        );
        let abc = Abc {
            a: random(&mut rng, constraints),
            b: random(&mut rng, constraints),
            c: random(&mut rng, constraints),
        };
        let h_bases = points::<G1Projective>(&mut rng, 2047);
        let l_bases = points::<G1Projective>(&mut rng, l.num_bases());
        let a_bases = points::<G1Projective>(&mut rng, a.num_bases());
        let b1_bases = points::<G1Projective>(&mut rng, b.num_bases());
        let b2_bases = points::<G2Projective>(&mut rng, b.num_bases());
        let job = || PartitionJob {
            abc: abc.clone(),
            h_bases: &h_bases,
            l: SplitMsm {
                bases: &l_bases,
                split: l.as_ref(),
            },
            a: SplitMsm {
                bases: &a_bases,
                split: a.as_ref(),
            },
            b_g1: SplitMsm {
                bases: &b1_bases,
                split: b.as_ref(),
            },
            b_g2: Some(SplitMsm {
                bases: &b2_bases,
                split: b.as_ref(),
            }),
        };
        let want = CpuBackend::new(pool.clone())
            .prove_partition(job())
            .unwrap();
        let backend = CpuBackend::new(pool.clone()).with_tables(1 << 30);
        let tables = backend.tables.clone().unwrap();
        assert_eq!(backend.prove_partition(job()).unwrap(), want);
        backend.settle();
        assert!(tables.bytes() > 16 * 2047 * 96, "{} bytes", tables.bytes());
        assert_eq!(backend.prove_partition(job()).unwrap(), want);
        let everything = std::iter::once(0..usize::MAX).collect::<Vec<_>>();
        let freed = backend.forget_bases(&everything);
        assert!(freed > 0);
        assert_eq!(tables.bytes(), 0);
        assert_eq!(backend.prove_partition(job()).unwrap(), want);
        backend.settle();
        assert_eq!(backend.prove_partition(job()).unwrap(), want);

        let small = CpuBackend::new(pool.clone()).with_tables(1);
        assert_eq!(small.prove_partition(job()).unwrap(), want);
        small.settle();
        assert_eq!(small.tables.as_ref().unwrap().bytes(), 0);
    }
}
