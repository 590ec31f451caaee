//! A plugin built before `prove_partition_ref`, `stage` and `unstage` were
//! appended to `BackendMod` hands the host a module with six fields; one built
//! before `device_count` and `pinned_host_bytes`, nine; one built before
//! `abc_eval`, `stage_witness` and `prove_partition_witness`, twelve. Built here
//! in-process from the same functions, declared with the old layout, it must
//! load and prove through the old calls, staging nothing, and never be asked to
//! prove from a witness.

// The old module's derived accessors go unused: the host reads it as the new one.
#![allow(non_camel_case_types, dead_code)]

use super::*;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RString, RVec};
use abi_stable::StableAbi;
use cuzk_gpu_backend::{CsrRef, R1csRef, Term};
use cuzk_plugin_api::{AbiError, BackendCaps, BackendPlugin, Param, ParamDoc, Params, StageGuard};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Records which call reached it through the error it returns.
struct Rec {
    abc_eval: u32,
    /// Witness stagings not yet undone.
    staged: Arc<AtomicUsize>,
    /// Split data stagings not yet undone.
    staged_splits: Arc<AtomicUsize>,
    /// What the last split data staging was given.
    splits_seen: Arc<std::sync::Mutex<String>>,
}

/// Undoes a `Rec` witness staging.
struct Unstage(Arc<AtomicUsize>);

impl Drop for Unstage {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl BackendPlugin for Rec {
    const PARAMS: &'static [ParamDoc] = &[ParamDoc::new(
        "abc_eval",
        "2",
        "what abc_eval answers (2: on the device)",
    )];
    fn new(p: &Params<'_>) -> Result<Self, AbiError> {
        Ok(Rec {
            abc_eval: p.get("abc_eval")?,
            staged: Arc::new(AtomicUsize::new(0)),
            staged_splits: Arc::new(AtomicUsize::new(0)),
            splits_seen: Arc::default(),
        })
    }
    fn capabilities(&self) -> Result<BackendCaps, AbiError> {
        Ok(BackendCaps {
            name: RString::from("rec"),
            curve: RString::from(CURVE),
            max_log_domain: 10,
            g2: false,
            resident_bases: false,
            devices: RVec::new(),
        })
    }
    fn prove_partition(&self, job: PartitionJobC<'_>) -> Result<PartitionResultC, AbiError> {
        Err(AbiError::other(format!("owned n={}", job.abc.a.len())))
    }
    fn prove_partition_ref(&self, job: PartitionJobRefC<'_>) -> Result<PartitionResultC, AbiError> {
        Err(AbiError::other(format!("lent n={}", job.abc.a.len())))
    }
    fn stage(&self, _: AbcRefC<'_>) -> Result<Option<StageGuard>, AbiError> {
        Ok(Some(Box::new(())))
    }
    fn device_count(&self) -> Result<u32, AbiError> {
        Ok(3)
    }
    fn pinned_host_bytes(&self) -> Result<u64, AbiError> {
        Ok(4096)
    }
    /// "Frees" the bytes of the ranges it is given, so the test sees them cross.
    fn forget_bases(&self, host: &[cuzk_plugin_api::HostRangeC]) -> Result<u64, AbiError> {
        Ok(host.iter().map(|r| r.end - r.start).sum())
    }
    fn abc_eval(&self) -> Result<AbcEvalC, AbiError> {
        Ok(AbcEvalC(self.abc_eval))
    }
    fn stage_witness(
        &self,
        _: &[cuzk_plugin_api::ScalarRepr],
        _: &[cuzk_plugin_api::ScalarRepr],
    ) -> Result<Option<StageGuard>, AbiError> {
        self.staged.fetch_add(1, Ordering::SeqCst);
        Ok(Some(Box::new(Unstage(Arc::clone(&self.staged)))))
    }
    /// Notes what crossed; its error says so, with the stagings outstanding.
    fn stage_splits(
        &self,
        splits: &[cuzk_plugin_api::SplitDataC<'_>],
    ) -> Result<Option<StageGuard>, AbiError> {
        let seen: Vec<String> = splits
            .iter()
            .map(|d| {
                format!(
                    "{}:{}:{}",
                    d.num_bases,
                    d.ones_words.len(),
                    d.tail_indices.len()
                )
            })
            .collect();
        *self.splits_seen.lock().unwrap() = seen.join(",");
        self.staged_splits.fetch_add(1, Ordering::SeqCst);
        Ok(Some(Box::new(Unstage(Arc::clone(&self.staged_splits)))))
    }
    /// Refuses the shape (so the host's mapping to `Rejected` shows), saying
    /// what crossed and how many witness and split stagings are outstanding.
    fn prove_partition_witness(
        &self,
        job: WitnessJobRefC<'_>,
    ) -> Result<PartitionResultC, AbiError> {
        Err(AbiError::shape(format!(
            "witness rows={} inputs={}+{} aux={}+{} staged={} splits staged={} [{}]",
            job.r1cs.a.row_ptr.len() - 1,
            job.r1cs.num_inputs,
            job.input.len(),
            job.r1cs.num_aux,
            job.aux.len(),
            self.staged.load(Ordering::SeqCst),
            self.staged_splits.load(Ordering::SeqCst),
            self.splits_seen.lock().unwrap()
        )))
    }
}

/// `BackendMod` as ABI 1 first shipped it.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = OldBackendMod_Ref, prefix_fields = OldBackendMod_Prefix)))]
#[sabi(missing_field(panic))]
struct OldBackendMod {
    instantiate: extern "C" fn(params: RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>,
    destroy: extern "C" fn(instance: Instance),
    capabilities: extern "C" fn(instance: &Instance) -> RResult<BackendCaps, AbiError>,
    prove_partition: extern "C" fn(
        instance: &Instance,
        job: PartitionJobC<'_>,
    ) -> RResult<PartitionResultC, AbiError>,
    upload_bases: extern "C" fn(
        instance: &Instance,
        id: u64,
        query: BaseQuery,
        bases: BasesC<'_>,
    ) -> RResult<(), AbiError>,
    #[sabi(last_prefix_field)]
    release_bases: extern "C" fn(instance: &Instance, id: u64) -> RResult<(), AbiError>,
}

/// `BackendMod` with the staging calls, before `device_count` and
/// `pinned_host_bytes` were appended.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = StagingBackendMod_Ref, prefix_fields = StagingBackendMod_Prefix)))]
#[sabi(missing_field(panic))]
struct StagingBackendMod {
    instantiate: extern "C" fn(params: RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>,
    destroy: extern "C" fn(instance: Instance),
    capabilities: extern "C" fn(instance: &Instance) -> RResult<BackendCaps, AbiError>,
    prove_partition: extern "C" fn(
        instance: &Instance,
        job: PartitionJobC<'_>,
    ) -> RResult<PartitionResultC, AbiError>,
    upload_bases: extern "C" fn(
        instance: &Instance,
        id: u64,
        query: BaseQuery,
        bases: BasesC<'_>,
    ) -> RResult<(), AbiError>,
    #[sabi(last_prefix_field)]
    release_bases: extern "C" fn(instance: &Instance, id: u64) -> RResult<(), AbiError>,
    #[sabi(missing_field(option))]
    prove_partition_ref: extern "C" fn(
        instance: &Instance,
        job: PartitionJobRefC<'_>,
    ) -> RResult<PartitionResultC, AbiError>,
    #[sabi(missing_field(option))]
    stage: extern "C" fn(instance: &Instance, abc: AbcRefC<'_>) -> RResult<u64, AbiError>,
    #[sabi(missing_field(option))]
    unstage: extern "C" fn(instance: &Instance, token: u64) -> RResult<(), AbiError>,
}

/// `BackendMod` before `abc_eval`, `stage_witness` and
/// `prove_partition_witness` were appended (the cuda plugin as first deployed).
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PreWitnessBackendMod_Ref, prefix_fields = PreWitnessBackendMod_Prefix)))]
#[sabi(missing_field(panic))]
struct PreWitnessBackendMod {
    instantiate: extern "C" fn(params: RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>,
    destroy: extern "C" fn(instance: Instance),
    capabilities: extern "C" fn(instance: &Instance) -> RResult<BackendCaps, AbiError>,
    prove_partition: extern "C" fn(
        instance: &Instance,
        job: PartitionJobC<'_>,
    ) -> RResult<PartitionResultC, AbiError>,
    upload_bases: extern "C" fn(
        instance: &Instance,
        id: u64,
        query: BaseQuery,
        bases: BasesC<'_>,
    ) -> RResult<(), AbiError>,
    #[sabi(last_prefix_field)]
    release_bases: extern "C" fn(instance: &Instance, id: u64) -> RResult<(), AbiError>,
    #[sabi(missing_field(option))]
    prove_partition_ref: extern "C" fn(
        instance: &Instance,
        job: PartitionJobRefC<'_>,
    ) -> RResult<PartitionResultC, AbiError>,
    #[sabi(missing_field(option))]
    stage: extern "C" fn(instance: &Instance, abc: AbcRefC<'_>) -> RResult<u64, AbiError>,
    #[sabi(missing_field(option))]
    unstage: extern "C" fn(instance: &Instance, token: u64) -> RResult<(), AbiError>,
    #[sabi(missing_field(option))]
    device_count: extern "C" fn(instance: &Instance) -> RResult<u32, AbiError>,
    #[sabi(missing_field(option))]
    pinned_host_bytes: extern "C" fn(instance: &Instance) -> RResult<u64, AbiError>,
    #[sabi(missing_field(option))]
    forget_bases: extern "C" fn(
        instance: &Instance,
        host: RSlice<'_, cuzk_plugin_api::HostRangeC>,
    ) -> RResult<u64, AbiError>,
}

fn pre_witness_module() -> BackendMod_Ref {
    let m = new_module();
    let old = PreWitnessBackendMod {
        instantiate: m.instantiate(),
        destroy: m.destroy(),
        capabilities: m.capabilities(),
        prove_partition: m.prove_partition(),
        upload_bases: m.upload_bases(),
        release_bases: m.release_bases(),
        prove_partition_ref: m.prove_partition_ref().unwrap(),
        stage: m.stage().unwrap(),
        unstage: m.unstage().unwrap(),
        device_count: m.device_count().unwrap(),
        pinned_host_bytes: m.pinned_host_bytes().unwrap(),
        forget_bases: m.forget_bases().unwrap(),
    }
    .leak_into_prefix();
    // SAFETY: as in `old_module`: the same prefix, twelve fields accessible.
    unsafe { std::mem::transmute::<PreWitnessBackendMod_Ref, BackendMod_Ref>(old) }
}

fn staging_module() -> BackendMod_Ref {
    let m = new_module();
    let old = StagingBackendMod {
        instantiate: m.instantiate(),
        destroy: m.destroy(),
        capabilities: m.capabilities(),
        prove_partition: m.prove_partition(),
        upload_bases: m.upload_bases(),
        release_bases: m.release_bases(),
        prove_partition_ref: m.prove_partition_ref().unwrap(),
        stage: m.stage().unwrap(),
        unstage: m.unstage().unwrap(),
    }
    .leak_into_prefix();
    // SAFETY: as in `old_module`: the same prefix, nine fields accessible.
    unsafe { std::mem::transmute::<StagingBackendMod_Ref, BackendMod_Ref>(old) }
}

fn new_module() -> BackendMod_Ref {
    cuzk_plugin_api::export::backend_root::<Rec>("rec", "records")
        .backend()
        .unwrap()
}

fn old_module() -> BackendMod_Ref {
    let m = new_module();
    let old = OldBackendMod {
        instantiate: m.instantiate(),
        destroy: m.destroy(),
        capabilities: m.capabilities(),
        prove_partition: m.prove_partition(),
        upload_bases: m.upload_bases(),
        release_bases: m.release_bases(),
    }
    .leak_into_prefix();
    // SAFETY: both are `PrefixRef`s (one pointer) to a `WithMetadata` whose
    // prefix is field for field the same; the metadata says six fields are
    // accessible, exactly what an old plugin's module says. This is the memory
    // the host gets from a plugin built before the new fields.
    unsafe { std::mem::transmute::<OldBackendMod_Ref, BackendMod_Ref>(old) }
}

fn error(r: Result<PartitionResult, BackendError>) -> String {
    match r {
        Err(BackendError::Device(m)) => m,
        other => panic!("expected the recorder's error, got {other:?}"),
    }
}

#[test]
fn a_plugin_without_the_staging_fields_loads_proves_and_stages_nothing() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let split = cuzk_msm_cpu::prep_msm(&[], None, &[], None, &pool).unwrap();
    let v = vec![Scalar::from(3u64); 3];
    let abc = AbcRef {
        a: &v,
        b: &v,
        c: &v,
    };
    let none = SplitMsm {
        bases: &[][..],
        split: split.as_ref(),
    };
    let job = PartitionJobRef {
        abc,
        h_bases: &[],
        l: none,
        a: none,
        b_g1: none,
        b_g2: None,
    };

    let new = PluginBackend::from_module("rec".into(), new_module(), &[]).unwrap();
    assert!(new.offers_staging());
    assert!(new.stage(abc).unwrap().is_staged());
    assert!(error(new.prove_partition_ref(job)).contains("lent n=3"));

    let old = PluginBackend::from_module("rec".into(), old_module(), &[]).unwrap();
    assert!(old.module.stage().is_none() && old.module.unstage().is_none());
    assert!(!old.offers_staging());
    assert_eq!(old.capabilities().name, "rec");
    assert!(!old.stage(abc).unwrap().is_staged());
    // Lent a, b, c go through the old owned call, copied.
    assert!(error(old.prove_partition_ref(job)).contains("owned n=3"));
    assert!(error(old.prove_partition(job.to_owned_job())).contains("owned n=3"));
    assert_eq!((old.device_count(), old.pinned_host_bytes()), (1, 0));
    assert_no_witness_calls(&old);
}

/// A one-row R1CS (`x · 1 = x`) over one input and `aux` aux variables.
struct TinyR1cs {
    row_ptr: [u32; 2],
    terms: [Term; 1],
    coeffs: [Scalar; 3],
}

impl TinyR1cs {
    fn new() -> Self {
        Self {
            row_ptr: [0, 1],
            terms: [Term { col: 1, coeff: 0 }],
            coeffs: [Scalar::from(1u64), -Scalar::from(1u64), Scalar::from(2u64)],
        }
    }

    fn view(&self, aux: usize) -> R1csRef<'_> {
        let m = CsrRef {
            row_ptr: &self.row_ptr,
            terms: &self.terms,
        };
        R1csRef {
            num_inputs: 1,
            num_aux: aux,
            matrices: [m, m, m],
            coeffs: &self.coeffs,
        }
    }
}

/// Split data staged through a plugin: they cross (two queries here: 200 bases
/// with 4 bitmap words and 2 tail terms, 64 with 1 and none), `unstage` undoes the
/// staging when the guard goes; a plugin built before `stage_splits` stages
/// nothing.
#[test]
fn split_data_staging_crosses_and_defaults_for_older_plugins() {
    let (words, idx, sc) = ([0b110u64, 0, 0, 1 << 7], [0u32, 9], [[5u64, 0, 0, 0]; 2]);
    let a = SplitRef::checked(200, &words, &idx, &sc).unwrap();
    let b = SplitRef::checked(64, &words[..1], &[], &[]).unwrap();
    let new = PluginBackend::from_module("rec".into(), new_module(), &[]).unwrap();
    let staged = new.stage_splits(&[a, b]).unwrap();
    assert!(staged.is_staged());
    let w = [Scalar::from(5u64); 4];
    with_witness_job(&w[..1], &w[1..], |job, _| {
        let said = |job| match new.prove_partition_witness(job) {
            Err(BackendError::Rejected(m)) => m,
            other => panic!("expected the recorder's rejection, got {other:?}"),
        };
        let m = said(job);
        assert!(m.contains("splits staged=1 [200:4:2,64:1:0]"), "{m}");
        drop(staged);
        assert!(said(job).contains("splits staged=0"));
    });

    let older = PluginBackend::from_module("rec".into(), pre_witness_module(), &[]).unwrap();
    assert!(older.module.stage_splits().is_none());
    assert!(!older.stage_splits(&[a, b]).unwrap().is_staged());
}

/// What a plugin without the witness calls answers: not offered, nothing staged,
/// the call refused before it reaches the plugin.
fn assert_no_witness_calls(b: &PluginBackend) {
    assert!(b.module.abc_eval().is_none());
    assert!(b.module.stage_witness().is_none());
    assert!(b.module.prove_partition_witness().is_none());
    assert_eq!(b.abc_eval(), AbcEval::No);
    let w = vec![Scalar::from(5u64); 2];
    assert!(!b.stage_witness(&w[..1], &w).unwrap().is_staged());
    with_witness_job(&w[..1], &w, |job, _| match b.prove_partition_witness(job) {
        Err(BackendError::Unsupported(what)) => assert!(what.contains("witness"), "{what}"),
        other => panic!("expected Unsupported, got {other:?}"),
    })
}

/// Runs `f` on a witness job over [`TinyR1cs`] (with as many aux variables as
/// `aux`) whose queries are empty, with the empty split they use.
fn with_witness_job<R>(
    input: &[Scalar],
    aux: &[Scalar],
    f: impl FnOnce(WitnessJobRef<'_>, SplitRef<'_>) -> R,
) -> R {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let split = cuzk_msm_cpu::prep_msm(&[], None, &[], None, &pool).unwrap();
    let none = SplitMsm {
        bases: &[][..],
        split: split.as_ref(),
    };
    let r1cs = TinyR1cs::new();
    let job = WitnessJobRef {
        r1cs: r1cs.view(aux.len()),
        input,
        aux,
        h_bases: &[],
        l: none,
        a: none,
        b_g1: none,
        b_g2: None,
    };
    f(job, split.as_ref())
}

/// The witness calls cross: `abc_eval` as the plugin answers it (a value this host
/// does not know reads as `No`), `stage_witness` staged and undone through
/// `unstage`, `prove_partition_witness` with the R1CS and witness it was given
/// (its SHAPE error the input's fault: `Rejected`). A plugin built before them
/// (twelve fields, the last three calls before these present) answers as one
/// without them.
#[test]
fn witness_calls_cross_and_default_for_older_plugins() {
    let new = PluginBackend::from_module("rec".into(), new_module(), &[]).unwrap();
    assert_eq!(new.abc_eval(), AbcEval::Device);
    for (answer, want) in [
        ("0", AbcEval::No),
        ("1", AbcEval::Host),
        ("2", AbcEval::Device),
        ("7", AbcEval::No),
    ] {
        let p = [Param::new("abc_eval", answer)];
        let b = PluginBackend::from_module("rec".into(), new_module(), &p).unwrap();
        assert_eq!(b.abc_eval(), want, "abc_eval answered {answer}");
    }
    let w = [Scalar::from(5u64); 4];
    let staged = new.stage_witness(&w[..1], &w[1..]).unwrap();
    assert!(staged.is_staged());

    with_witness_job(&w[..1], &w[1..], |job, split| {
        let rejected = |job| match new.prove_partition_witness(job) {
            Err(BackendError::Rejected(m)) => {
                assert!(m.contains("failed in prove_partition_witness"), "{m}");
                m
            }
            other => panic!("expected the recorder's rejection, got {other:?}"),
        };
        let m = rejected(job);
        assert!(
            m.contains("witness rows=1 inputs=1+1 aux=3+3 staged=1 "),
            "{m}"
        );
        // Dropping the guard reaches the plugin's `unstage`, through the token map
        // `stage` uses.
        drop(staged);
        assert!(rejected(job).contains("3+3 staged=0 "));
        // It offers no G2: asking is refused before the plugin is called.
        let g2 = WitnessJobRef {
            b_g2: Some(SplitMsm {
                bases: &[][..],
                split,
            }),
            ..job
        };
        assert!(matches!(
            new.prove_partition_witness(g2),
            Err(BackendError::Unsupported("the G2 MSM"))
        ));
    });

    let older = PluginBackend::from_module("rec".into(), pre_witness_module(), &[]).unwrap();
    assert!(older.offers_staging());
    assert_eq!(
        (older.device_count(), older.forget_bases(&[0..8, 16..24])),
        (3, 16)
    );
    assert_no_witness_calls(&older);
}

/// The newest calls are forwarded; a plugin built before `device_count` and
/// `pinned_host_bytes` were appended loads, stages and proves as before, and
/// counts as one device holding no pinned memory.
#[test]
fn device_count_and_pinned_bytes_cross_and_default_for_older_plugins() {
    let new = PluginBackend::from_module("rec".into(), new_module(), &[]).unwrap();
    assert_eq!((new.device_count(), new.pinned_host_bytes()), (3, 4096));
    assert_eq!(new.forget_bases(&[16..48, 100..104]), 36);

    let older = PluginBackend::from_module("rec".into(), staging_module(), &[]).unwrap();
    assert!(older.module.device_count().is_none());
    assert!(older.module.pinned_host_bytes().is_none());
    assert!(older.offers_staging());
    let v = vec![Scalar::from(3u64); 3];
    let abc = AbcRef {
        a: &v,
        b: &v,
        c: &v,
    };
    assert!(older.stage(abc).unwrap().is_staged());
    assert_eq!((older.device_count(), older.pinned_host_bytes()), (1, 0));
    // Nor has it `forget_bases`: nothing is freed through it.
    assert!(older.module.forget_bases().is_none());
    assert_eq!(older.forget_bases(&[16..48, 64..80]), 0);
    assert_no_witness_calls(&older);
}
