//! Glue for plugins that wrap one of cuzk's in-process backends (feature `stages`):
//! a [`PartitionJobC`] turned into a `cuzk_gpu_backend::PartitionJob` (a
//! [`WitnessJobRefC`] into a `WitnessJobRef`), and the result and errors turned
//! back.
//!
//! `a, b, c` are handed to the backend as borrowed slices of the host's vectors
//! (`GpuBackend::prove_partition_ref`): a GPU backend uploads them without a copy;
//! a backend that transforms them in place (the CPU reference) copies them into its
//! own vectors, the trait's default. Each split is viewed in place as a `SplitRef`
//! over the host's parts (checked: a malformed split from a buggy host is an error,
//! not undefined behaviour), never copied: at the 32 GiB PoRep shape a partition's
//! splits are ~0.3 GB, and copying them inside the GPU lock cost 0.3-0.7 s a
//! partition on the H200.

use abi_stable::std_types::{ROption, RSlice, RSome, RString};
use blstrs::{G1Affine, G2Affine, G2Projective, Scalar};
use cuzk_gpu_backend::{
    AbcEval, AbcRef, BackendError, Capabilities, GpuBackend, PartitionJobRef, PartitionResult,
    SplitMsm, SplitRef, Staged, WitnessJobRef,
};

use crate::{
    AbcC, AbcEvalC, AbcRefC, AbiError, BackendCaps, DeviceInfoC, ErrorCode, G1AffineRepr,
    G2AffineRepr, PartitionJobC, PartitionJobRefC, PartitionResultC, Repr, ScalarRepr, SplitDataC,
    SplitMsmC, StageGuard, WitnessJobRefC, CURVE,
};

/// `a, b, c` of a job: handed over by the host (`prove_partition`, freed when the
/// job is done) or lent (`prove_partition_ref`).
enum AbcIn<'a> {
    Owned(AbcC),
    Lent(AbcRefC<'a>),
}

/// The host's `a, b, c` as the in-process view, without a copy.
pub fn abc_ref<'a>(abc: &AbcRefC<'a>) -> AbcRef<'a> {
    AbcRef {
        a: Scalar::slice_from_repr(abc.a.as_slice()),
        b: Scalar::slice_from_repr(abc.b.as_slice()),
        c: Scalar::slice_from_repr(abc.c.as_slice()),
    }
}

/// `BackendPlugin::stage` for a plugin wrapping an in-process backend: its
/// `GpuBackend::stage`, the guard boxed for the glue (which keeps it until the
/// host's `unstage`), `None` when the backend staged nothing.
pub fn stage(backend: &dyn GpuBackend, abc: AbcRefC<'_>) -> Result<Option<StageGuard>, AbiError> {
    let staged = backend.stage(abc_ref(&abc)).map_err(backend_error)?;
    Ok(staged.is_staged().then(|| Box::new(staged) as StageGuard))
}

/// `BackendPlugin::stage_witness` for a plugin wrapping an in-process backend: its
/// `GpuBackend::stage_witness`, boxed as [`stage`]'s.
pub fn stage_witness(
    backend: &dyn GpuBackend,
    input: &[ScalarRepr],
    aux: &[ScalarRepr],
) -> Result<Option<StageGuard>, AbiError> {
    let staged = backend
        .stage_witness(Scalar::slice_from_repr(input), Scalar::slice_from_repr(aux))
        .map_err(backend_error)?;
    Ok(staged.is_staged().then(|| Box::new(staged) as StageGuard))
}

/// Where a query's split data live in the host's memory, with its length:
/// (address, length) of its bitmap words, tail indices and tail scalars.
type SplitKey = (u64, [(usize, usize); 3]);

fn split_key(
    num_bases: u64,
    ones_words: &RSlice<'_, u64>,
    tail_indices: &RSlice<'_, u32>,
    tail_scalars: &RSlice<'_, [u64; 4]>,
) -> SplitKey {
    (
        num_bases,
        [
            (ones_words.as_ptr() as usize, ones_words.len()),
            (tail_indices.as_ptr() as usize, tail_indices.len()),
            (tail_scalars.as_ptr() as usize, tail_scalars.len()),
        ],
    )
}

/// Split data a plugin checked when the host staged them
/// (`BackendPlugin::stage_splits`), by where they live, while the staging
/// lasts: a job converted inside the host's GPU lock takes them as checked
/// ([`SplitRef::prechecked`]) instead of checking them again. The host keeps
/// staged data unchanged until it unstages them (the ABI's contract). Measured on
/// the H200 at the 32 GiB PoRep shape, checking a partition's four splits inside
/// the lock took 20-60 ms, up to 300 ms while synthesis had every core.
#[derive(Debug, Default)]
pub struct CheckedSplits {
    /// Per split: stagings alive that checked it, and its zeros.
    map: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<SplitKey, (usize, usize)>>>,
}

impl CheckedSplits {
    fn map(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<SplitKey, (usize, usize)>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `BackendPlugin::stage_splits` for a plugin wrapping an in-process backend:
    /// each query's split data checked as a job's are and recorded as checked,
    /// then its `GpuBackend::stage_splits`; the guard (boxed as [`stage`]'s)
    /// undoes both.
    pub fn stage(
        &self,
        backend: &dyn GpuBackend,
        splits: &[SplitDataC<'_>],
    ) -> Result<Option<StageGuard>, AbiError> {
        let refs = splits
            .iter()
            .map(|d| {
                split_ref(
                    d.num_bases,
                    d.ones_words,
                    d.tail_indices,
                    d.tail_scalars,
                    None,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let staged = backend.stage_splits(&refs).map_err(backend_error)?;
        let keys: Vec<SplitKey> = splits
            .iter()
            .map(|d| split_key(d.num_bases, &d.ones_words, &d.tail_indices, &d.tail_scalars))
            .collect();
        {
            let mut map = self.map();
            for (k, r) in keys.iter().zip(&refs) {
                map.entry(*k).or_insert((0, r.num_zeros())).0 += 1;
            }
        }
        let map = std::sync::Arc::clone(&self.map);
        let forget = Staged::new(move || {
            let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
            for k in &keys {
                if let Some(e) = map.get_mut(k) {
                    e.0 -= 1;
                    if e.0 == 0 {
                        map.remove(k);
                    }
                }
            }
        });
        Ok(Some(Box::new(staged.and(forget)) as StageGuard))
    }

    /// [`prove_partition_witness`], taking the splits staged and checked as such.
    pub fn prove_partition_witness(
        &self,
        job: WitnessJobRefC<'_>,
        prove: impl FnOnce(WitnessJobRef<'_>) -> Result<PartitionResult, BackendError>,
    ) -> Result<PartitionResultC, AbiError> {
        witness_job(job, Some(self), prove)
    }

    /// [`InProcessJob::from_ref_c`], taking the splits staged and checked as such.
    pub fn job_from_ref_c<'a>(
        &self,
        job: PartitionJobRefC<'a>,
    ) -> Result<InProcessJob<'a>, AbiError> {
        InProcessJob::from_ref_c_with(job, Some(self))
    }

    /// The split as checked at its staging, if it was.
    fn get(&self, key: &SplitKey) -> Option<usize> {
        self.map().get(key).map(|e| e.1)
    }
}

/// `BackendPlugin::abc_eval` for a plugin wrapping an in-process backend.
pub fn abc_eval(backend: &dyn GpuBackend) -> AbcEvalC {
    match backend.abc_eval() {
        AbcEval::No => AbcEvalC::NO,
        AbcEval::Host => AbcEvalC::HOST,
        AbcEval::Device => AbcEvalC::DEVICE,
    }
}

/// `BackendPlugin::prove_partition_witness` for a plugin wrapping an in-process
/// backend: the job in cuzk's types (the splits checked as [`InProcessJob`]
/// checks them), handed to `prove` (the backend's `prove_partition_witness`).
///
/// The R1CS is not validated here: every in-process backend that evaluates `a, b,
/// c` validates it itself before it uses an index (the CPU backend in
/// `spmv_slices`, on every call; the CUDA backend once per shape it uploads), so
/// validating here too would be a second pass over the matrices for every
/// partition (~670 million terms for a 32 GiB PoRep partition).
pub fn prove_partition_witness(
    job: WitnessJobRefC<'_>,
    prove: impl FnOnce(WitnessJobRef<'_>) -> Result<PartitionResult, BackendError>,
) -> Result<PartitionResultC, AbiError> {
    witness_job(job, None, prove)
}

fn witness_job(
    job: WitnessJobRefC<'_>,
    checked: Option<&CheckedSplits>,
    prove: impl FnOnce(WitnessJobRef<'_>) -> Result<PartitionResult, BackendError>,
) -> Result<PartitionResultC, AbiError> {
    let WitnessJobRefC {
        r1cs,
        input,
        aux,
        h_bases,
        l,
        a,
        b_g1,
        b_g2,
        resident: _,
    } = job;
    let t = std::time::Instant::now();
    let r1cs = r1cs.to_ref()?;
    let msms = Msms::new(h_bases, l, a, b_g1, b_g2, checked)?;
    // Inside the host's GPU lock: what the job's conversion costs (the splits are
    // checked in place) is time the device may wait; so is the result's.
    let converted = t.elapsed();
    let r = prove(WitnessJobRef {
        r1cs,
        input: Scalar::slice_from_repr(input.as_slice()),
        aux: Scalar::slice_from_repr(aux.as_slice()),
        h_bases: msms.h_bases,
        l: msms.l,
        a: msms.a,
        b_g1: msms.b_g1,
        b_g2: msms.b_g2,
    })
    .map_err(backend_error)?;
    let proved = t.elapsed();
    let out = result_c(r);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    tracing::info!(
        target: "cuzk_plugin_api::profile",
        "witness job converted in {:.2} ms, proved in {:.2} ms, result converted in {:.2} ms",
        ms(converted),
        ms(proved - converted),
        ms(t.elapsed() - proved)
    );
    Ok(out)
}

/// The MSM queries of a job in cuzk's in-process types, splits checked in place
/// (borrowed from the host, not copied).
struct Msms<'a> {
    h_bases: &'a [G1Affine],
    l: SplitMsm<'a, G1Affine>,
    a: SplitMsm<'a, G1Affine>,
    b_g1: SplitMsm<'a, G1Affine>,
    b_g2: Option<SplitMsm<'a, G2Affine>>,
}

impl<'a> Msms<'a> {
    fn new(
        h_bases: RSlice<'a, G1AffineRepr>,
        l: SplitMsmC<'a, G1AffineRepr>,
        a: SplitMsmC<'a, G1AffineRepr>,
        b_g1: SplitMsmC<'a, G1AffineRepr>,
        b_g2: ROption<SplitMsmC<'a, G2AffineRepr>>,
        checked: Option<&CheckedSplits>,
    ) -> Result<Self, AbiError> {
        Ok(Self {
            h_bases: G1Affine::slice_from_repr(h_bases.as_slice()),
            l: borrowed(&l, G1Affine::slice_from_repr, checked)?,
            a: borrowed(&a, G1Affine::slice_from_repr, checked)?,
            b_g1: borrowed(&b_g1, G1Affine::slice_from_repr, checked)?,
            b_g2: match &b_g2 {
                RSome(m) => Some(borrowed(m, G2Affine::slice_from_repr, checked)?),
                _ => None,
            },
        })
    }
}

/// A [`PartitionJobC`] in cuzk's in-process types.
pub struct InProcessJob<'a> {
    abc: AbcIn<'a>,
    msms: Msms<'a>,
}

impl<'a> InProcessJob<'a> {
    /// Converts (and checks) a job from the host. Splits are checked before
    /// anything is copied.
    pub fn from_c(job: PartitionJobC<'a>) -> Result<Self, AbiError> {
        let PartitionJobC {
            abc,
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
            resident: _,
        } = job;
        Self::new(AbcIn::Owned(abc), h_bases, l, a, b_g1, b_g2, None)
    }

    /// As [`InProcessJob::from_c`], for a job whose `a, b, c` the host lends
    /// (`prove_partition_ref`).
    pub fn from_ref_c(job: PartitionJobRefC<'a>) -> Result<Self, AbiError> {
        Self::from_ref_c_with(job, None)
    }

    fn from_ref_c_with(
        job: PartitionJobRefC<'a>,
        checked: Option<&CheckedSplits>,
    ) -> Result<Self, AbiError> {
        let PartitionJobRefC {
            abc,
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
            resident: _,
        } = job;
        Self::new(AbcIn::Lent(abc), h_bases, l, a, b_g1, b_g2, checked)
    }

    fn new(
        abc: AbcIn<'a>,
        h_bases: RSlice<'a, G1AffineRepr>,
        l: SplitMsmC<'a, G1AffineRepr>,
        a: SplitMsmC<'a, G1AffineRepr>,
        b_g1: SplitMsmC<'a, G1AffineRepr>,
        b_g2: ROption<SplitMsmC<'a, G2AffineRepr>>,
        checked: Option<&CheckedSplits>,
    ) -> Result<Self, AbiError> {
        Ok(Self {
            abc,
            msms: Msms::new(h_bases, l, a, b_g1, b_g2, checked)?,
        })
    }

    /// Runs `prove` (a backend's `prove_partition_ref`) on the job and converts its
    /// result for the host. `a, b, c` handed over are freed when this returns; lent
    /// ones stay the host's.
    pub fn run(
        self,
        prove: impl FnOnce(PartitionJobRef<'_>) -> Result<PartitionResult, BackendError>,
    ) -> Result<PartitionResultC, AbiError> {
        let abc = match &self.abc {
            AbcIn::Owned(abc) => AbcRef {
                a: Scalar::slice_from_repr(abc.a.as_slice()),
                b: Scalar::slice_from_repr(abc.b.as_slice()),
                c: Scalar::slice_from_repr(abc.c.as_slice()),
            },
            AbcIn::Lent(abc) => abc_ref(abc),
        };
        let m = &self.msms;
        let job = PartitionJobRef {
            abc,
            h_bases: m.h_bases,
            l: m.l,
            a: m.a,
            b_g1: m.b_g1,
            b_g2: m.b_g2,
        };
        let r = prove(job).map_err(backend_error)?;
        Ok(result_c(r))
    }
}

fn result_c(r: PartitionResult) -> PartitionResultC {
    PartitionResultC {
        h: r.h.to_repr(),
        l: r.l.to_repr(),
        a: r.a.to_repr(),
        b_g1: r.b_g1.to_repr(),
        b_g2: r.b_g2.map(G2Projective::to_repr).into(),
    }
}

fn borrowed<'a, R, G: 'a>(
    m: &SplitMsmC<'a, R>,
    bases: impl FnOnce(&'a [R]) -> &'a [G],
    checked: Option<&CheckedSplits>,
) -> Result<SplitMsm<'a, G>, AbiError> {
    if m.ones_len != m.num_bases {
        return Err(AbiError::shape(format!(
            "the ones bitmap covers {} bases, but the split has {} bases",
            m.ones_len, m.num_bases,
        )));
    }
    let split = split_ref(
        m.num_bases,
        m.ones_words,
        m.tail_indices,
        m.tail_scalars,
        checked,
    )?;
    Ok(SplitMsm {
        bases: bases(m.bases.as_slice()),
        split,
    })
}

/// A query's split data from the host, checked ([`SplitRef::checked`]) unless
/// `checked` has them checked at their staging.
fn split_ref<'a>(
    num_bases: u64,
    ones_words: RSlice<'a, u64>,
    tail_indices: RSlice<'a, u32>,
    tail_scalars: RSlice<'a, [u64; 4]>,
    checked: Option<&CheckedSplits>,
) -> Result<SplitRef<'a>, AbiError> {
    let n = usize::try_from(num_bases)
        .map_err(|_| AbiError::shape("num_bases does not fit in memory"))?;
    let key = split_key(num_bases, &ones_words, &tail_indices, &tail_scalars);
    if let Some(zeros) = checked.and_then(|c| c.get(&key)) {
        return Ok(SplitRef::prechecked(
            n,
            zeros,
            ones_words.as_slice(),
            tail_indices.as_slice(),
            tail_scalars.as_slice(),
        ));
    }
    SplitRef::checked(
        n,
        ones_words.as_slice(),
        tail_indices.as_slice(),
        tail_scalars.as_slice(),
    )
    .map_err(|e| AbiError::shape(e.to_string()))
}

/// A backend error as an ABI error with the matching code.
pub fn backend_error(e: BackendError) -> AbiError {
    let code = match &e {
        BackendError::DomainTooLarge { .. } | BackendError::Unsupported(_) => {
            ErrorCode::UNSUPPORTED
        }
        BackendError::AbcShape { .. }
        | BackendError::BaseCount { .. }
        | BackendError::NttLength { .. }
        | BackendError::Rejected(_) => ErrorCode::SHAPE,
        BackendError::Device(_) => ErrorCode::DEVICE,
        _ => ErrorCode::OTHER,
    };
    AbiError::new(code, e.to_string())
}

/// A backend's capabilities for the handshake.
pub fn capabilities(c: &Capabilities, resident_bases: bool) -> BackendCaps {
    BackendCaps {
        name: RString::from(c.name.as_str()),
        curve: RString::from(CURVE),
        max_log_domain: c.max_log_domain,
        g2: c.g2,
        resident_bases,
        devices: c
            .devices
            .iter()
            .map(|d| DeviceInfoC {
                name: RString::from(d.name.as_str()),
                total_memory: d.total_memory,
                free_memory: d.free_memory,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_gpu_backend::PartitionJob;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts the split data stagings that reach it, alive and in all.
    #[derive(Default)]
    struct Counting {
        alive: Arc<AtomicUsize>,
        calls: AtomicUsize,
    }

    impl GpuBackend for Counting {
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                name: "counting".into(),
                max_log_domain: 10,
                g2: false,
                g2_preferred: false,
                devices: Vec::new(),
            }
        }
        fn prove_partition(&self, _: PartitionJob<'_>) -> Result<PartitionResult, BackendError> {
            Err(BackendError::Unsupported("proving"))
        }
        fn stage_splits(
            &self,
            _: &[SplitRef<'_>],
        ) -> Result<cuzk_gpu_backend::Staged, BackendError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.alive.fetch_add(1, Ordering::SeqCst);
            let alive = Arc::clone(&self.alive);
            Ok(cuzk_gpu_backend::Staged::new(move || {
                alive.fetch_sub(1, Ordering::SeqCst);
            }))
        }
    }

    fn data<'a>(n: u64, words: &'a [u64], idx: &'a [u32], sc: &'a [[u64; 4]]) -> SplitDataC<'a> {
        SplitDataC {
            num_bases: n,
            ones_words: words.into(),
            tail_indices: idx.into(),
            tail_scalars: sc.into(),
        }
    }

    /// Well-formed split data reach the backend and are unstaged with the guard;
    /// malformed ones (a tail index among the ones, out of range, a bitmap of the
    /// wrong length) are a SHAPE error before the backend sees any of them.
    #[test]
    fn split_data_are_checked_before_the_backend_stages_them() {
        let b = Counting::default();
        let (words, sc) = ([0b101u64], [[7u64, 0, 0, 0]]);
        let good = data(10, &words, &[1], &sc);
        let checked = CheckedSplits::default();
        let guard = checked.stage(&b, &[good, good]).unwrap();
        assert!(guard.is_some());
        assert_eq!(b.alive.load(Ordering::SeqCst), 1);
        drop(guard);
        assert_eq!(b.alive.load(Ordering::SeqCst), 0);
        for bad in [
            data(10, &words, &[2], &sc),
            data(10, &words, &[10], &sc),
            data(100, &words, &[1], &sc),
        ] {
            let e = checked.stage(&b, &[good, bad]).err().expect("refused");
            assert_eq!(e.code, ErrorCode::SHAPE, "{e:?}");
        }
        assert_eq!(b.calls.load(Ordering::SeqCst), 1);
        assert!(checked.map().is_empty());
    }

    /// Split data checked at their staging are taken as checked by a job converted
    /// while the staging lasts, the zeros as counted then; after it, checked again.
    /// (Changed in between, against the host's contract, they would go through:
    /// which shows the job does not check them twice.)
    #[test]
    fn a_job_takes_its_staged_split_data_as_checked_until_they_are_unstaged() {
        let b = Counting::default();
        let checked = CheckedSplits::default();
        let mut words = vec![0b101u64];
        let (idx, sc) = ([1u32], [[7u64, 0, 0, 0]]);
        let guard = checked.stage(&b, &[data(10, &words, &idx, &sc)]).unwrap();
        fn at<'a>(
            w: &'a [u64],
            idx: &'a [u32],
            sc: &'a [[u64; 4]],
            checked: &CheckedSplits,
        ) -> Result<SplitRef<'a>, AbiError> {
            split_ref(10, w.into(), idx.into(), sc.into(), Some(checked))
        }
        assert_eq!(at(&words, &idx, &sc, &checked).unwrap().num_zeros(), 7);
        // The host breaks its promise: base 1, a tail term, is now also a one.
        words[0] = 0b111;
        assert_eq!(at(&words, &idx, &sc, &checked).unwrap().num_zeros(), 7);
        drop(guard);
        assert_eq!(
            at(&words, &idx, &sc, &checked).err().map(|e| e.code),
            Some(ErrorCode::SHAPE)
        );
        words[0] = 0b101;
        assert_eq!(at(&words, &idx, &sc, &checked).unwrap().num_zeros(), 7);
    }
}
