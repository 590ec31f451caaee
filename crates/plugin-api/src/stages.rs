//! Glue for plugins that wrap one of cuzk's in-process backends (feature `stages`):
//! a [`PartitionJobC`] turned into a `cuzk_gpu_backend::PartitionJob`, and the
//! result and errors turned back.
//!
//! `a, b, c` are handed to the backend as borrowed slices of the host's vectors
//! (`GpuBackend::prove_partition_ref`): a GPU backend uploads them without a copy;
//! a backend that transforms them in place (the CPU reference) copies them into its
//! own vectors, the trait's default. Each split is rebuilt as a `SplitScalars` from
//! its raw parts (checked: a malformed split from a buggy host is an error, not
//! undefined behaviour); the parts are small next to the evaluations.

use abi_stable::std_types::{RSome, RString};
use blstrs::{G1Affine, G2Affine, G2Projective, Scalar};
use cuzk_alloc::Density;
use cuzk_gpu_backend::{
    AbcRef, BackendError, Capabilities, GpuBackend, PartitionJobRef, PartitionResult, SplitMsm,
    SplitScalars,
};

use crate::{
    AbcC, AbcRefC, AbiError, BackendCaps, DeviceInfoC, ErrorCode, PartitionJobC, PartitionJobRefC,
    PartitionResultC, Repr, SplitMsmC, StageGuard, CURVE,
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

/// A split MSM with its split owned.
struct Owned<'a, G> {
    bases: &'a [G],
    split: SplitScalars,
}

/// A [`PartitionJobC`] in cuzk's in-process types.
pub struct InProcessJob<'a> {
    abc: AbcIn<'a>,
    h_bases: &'a [G1Affine],
    l: Owned<'a, G1Affine>,
    a: Owned<'a, G1Affine>,
    b_g1: Owned<'a, G1Affine>,
    b_g2: Option<Owned<'a, G2Affine>>,
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
        Self::new(AbcIn::Owned(abc), h_bases, l, a, b_g1, b_g2)
    }

    /// As [`InProcessJob::from_c`], for a job whose `a, b, c` the host lends
    /// (`prove_partition_ref`).
    pub fn from_ref_c(job: PartitionJobRefC<'a>) -> Result<Self, AbiError> {
        let PartitionJobRefC {
            abc,
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
            resident: _,
        } = job;
        Self::new(AbcIn::Lent(abc), h_bases, l, a, b_g1, b_g2)
    }

    fn new(
        abc: AbcIn<'a>,
        h_bases: abi_stable::std_types::RSlice<'a, crate::G1AffineRepr>,
        l: SplitMsmC<'a, crate::G1AffineRepr>,
        a: SplitMsmC<'a, crate::G1AffineRepr>,
        b_g1: SplitMsmC<'a, crate::G1AffineRepr>,
        b_g2: abi_stable::std_types::ROption<SplitMsmC<'a, crate::G2AffineRepr>>,
    ) -> Result<Self, AbiError> {
        let l = owned(&l, G1Affine::slice_from_repr)?;
        let a = owned(&a, G1Affine::slice_from_repr)?;
        let b_g1 = owned(&b_g1, G1Affine::slice_from_repr)?;
        let b_g2 = match &b_g2 {
            RSome(m) => Some(owned(m, G2Affine::slice_from_repr)?),
            _ => None,
        };
        Ok(Self {
            abc,
            h_bases: G1Affine::slice_from_repr(h_bases.as_slice()),
            l,
            a,
            b_g1,
            b_g2,
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
        let job = PartitionJobRef {
            abc,
            h_bases: self.h_bases,
            l: SplitMsm {
                bases: self.l.bases,
                split: &self.l.split,
            },
            a: SplitMsm {
                bases: self.a.bases,
                split: &self.a.split,
            },
            b_g1: SplitMsm {
                bases: self.b_g1.bases,
                split: &self.b_g1.split,
            },
            b_g2: self.b_g2.as_ref().map(|m| SplitMsm {
                bases: m.bases,
                split: &m.split,
            }),
        };
        let r = prove(job).map_err(backend_error)?;
        Ok(PartitionResultC {
            h: r.h.to_repr(),
            l: r.l.to_repr(),
            a: r.a.to_repr(),
            b_g1: r.b_g1.to_repr(),
            b_g2: r.b_g2.map(G2Projective::to_repr).into(),
        })
    }
}

fn owned<'a, R, G: 'a>(
    m: &SplitMsmC<'a, R>,
    bases: impl FnOnce(&'a [R]) -> &'a [G],
) -> Result<Owned<'a, G>, AbiError> {
    let n = usize::try_from(m.num_bases)
        .map_err(|_| AbiError::shape("num_bases does not fit in memory"))?;
    if m.ones_len != m.num_bases || m.ones_words.len() != n.div_ceil(64) {
        return Err(AbiError::shape(format!(
            "the ones bitmap covers {} bases in {} words, but the split has {n} bases",
            m.ones_len,
            m.ones_words.len()
        )));
    }
    let ones = Density::from_words(m.ones_words.as_slice().to_vec(), n);
    let split = SplitScalars::from_parts(
        n,
        ones,
        m.tail_indices.as_slice().to_vec(),
        m.tail_scalars.as_slice().to_vec(),
    )
    .map_err(|e| AbiError::shape(e.to_string()))?;
    Ok(Owned {
        bases: bases(m.bases.as_slice()),
        split,
    })
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
