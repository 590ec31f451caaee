//! Backend plugin `cpu`: [`cuzk_gpu_backend::CpuBackend`] behind the plugin ABI, on a
//! rayon pool of its own (`threads`).
//!
//! It exists so that every path through the plugin machinery can be checked against
//! the in-process backend bit for bit, and so that the cost of the crossing can be
//! measured with a backend whose work is known.
//!
//! Two conversions are not free, and both are linear in the partition (the NTTs and
//! MSMs behind them are not): `CpuBackend` takes `Abc` as owned `Vec`s of this
//! library's allocator, so `a, b, c` are copied out of the host's buffers, one at a
//! time, each into a vector with room for the NTT domain and each host buffer freed
//! right after its copy (in-process, `compute_h` grows synthesis's vectors to the
//! domain, which is a copy too unless synthesis reserved it); and `SplitScalars` has
//! no constructor from its parts, so each split is rebuilt by running `prep_msm`
//! over scalars reassembled from the parts (exact: the split of a split's scalars
//! is that split). A GPU backend reads the host's slices directly and pays neither.

use std::sync::Arc;

use blstrs::{G1Affine, G2Affine, G2Projective, Scalar};
use cuzk_alloc::Abc;
use cuzk_gpu_backend::{
    BackendError, CpuBackend, GpuBackend, PartitionJob, SplitMsm, SplitScalars,
};
use cuzk_plugin_api::abi_stable::std_types::{RString, RVec};
use cuzk_plugin_api::{
    AbiError, BackendCaps, BackendPlugin, ErrorCode, ParamDoc, Params, PartitionJobC,
    PartitionResultC, Repr, ScalarRepr, SplitMsmC, CURVE,
};
use ff::Field;

pub struct Cpu {
    backend: CpuBackend,
    pool: Arc<rayon::ThreadPool>,
}

impl BackendPlugin for Cpu {
    const PARAMS: &'static [ParamDoc] = &[ParamDoc::new(
        "threads",
        "0",
        "threads of the backend's rayon pool (0: one per core)",
    )];

    fn new(params: &Params<'_>) -> Result<Self, AbiError> {
        let threads: usize = params.get("threads")?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("cuzk-cpu-backend-{i}"))
            .build()
            .map_err(|e| {
                AbiError::other(format!("could not build the backend's thread pool: {e}"))
            })?;
        let pool = Arc::new(pool);
        Ok(Self {
            backend: CpuBackend::new(Arc::clone(&pool)),
            pool,
        })
    }

    fn capabilities(&self) -> Result<BackendCaps, AbiError> {
        let c = self.backend.capabilities();
        Ok(BackendCaps {
            name: RString::from(c.name),
            curve: RString::from(CURVE),
            max_log_domain: c.max_log_domain,
            g2: c.g2,
            resident_bases: false,
            devices: RVec::new(),
        })
    }

    fn prove_partition(&self, job: PartitionJobC<'_>) -> Result<PartitionResultC, AbiError> {
        let PartitionJobC {
            abc,
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
            resident: _,
        } = job;
        // Splits first: a malformed one fails before anything is copied.
        let l_split = split_from_parts(&l, &self.pool)?;
        let a_split = split_from_parts(&a, &self.pool)?;
        let b_g1_split = split_from_parts(&b_g1, &self.pool)?;
        let b_g2_split = match &b_g2 {
            cuzk_plugin_api::abi_stable::std_types::RSome(m) => {
                Some(split_from_parts(m, &self.pool)?)
            }
            _ => None,
        };
        let domain = abc.a.len().max(1).next_power_of_two();
        let abc = Abc {
            a: to_vec(abc.a, domain),
            b: to_vec(abc.b, domain),
            c: to_vec(abc.c, domain),
        };
        let job = PartitionJob {
            abc,
            h_bases: G1Affine::slice_from_repr(h_bases.as_slice()),
            l: SplitMsm {
                bases: g1(&l),
                split: &l_split,
            },
            a: SplitMsm {
                bases: g1(&a),
                split: &a_split,
            },
            b_g1: SplitMsm {
                bases: g1(&b_g1),
                split: &b_g1_split,
            },
            b_g2: match (&b_g2, &b_g2_split) {
                (cuzk_plugin_api::abi_stable::std_types::RSome(m), Some(s)) => Some(SplitMsm {
                    bases: G2Affine::slice_from_repr(m.bases.as_slice()),
                    split: s,
                }),
                _ => None,
            },
        };
        let r = self.backend.prove_partition(job).map_err(to_abi)?;
        Ok(PartitionResultC {
            h: r.h.to_repr(),
            l: r.l.to_repr(),
            a: r.a.to_repr(),
            b_g1: r.b_g1.to_repr(),
            b_g2: r.b_g2.map(G2Projective::to_repr).into(),
        })
    }
}

fn g1<'a>(m: &SplitMsmC<'a, cuzk_plugin_api::G1AffineRepr>) -> &'a [G1Affine] {
    G1Affine::slice_from_repr(m.bases.as_slice())
}

/// Copies a host vector into one of this library's with room for the NTT domain
/// (so `compute_h` pads it in place), then frees the host's.
fn to_vec(v: RVec<ScalarRepr>, domain: usize) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(domain.max(v.len()));
    out.extend_from_slice(Scalar::slice_from_repr(v.as_slice()));
    drop(v);
    out
}

/// Rebuilds a `SplitScalars` from its raw parts (see the crate docs for why).
fn split_from_parts<G>(
    m: &SplitMsmC<'_, G>,
    pool: &rayon::ThreadPool,
) -> Result<SplitScalars, AbiError> {
    let n = usize::try_from(m.num_bases)
        .map_err(|_| AbiError::shape("num_bases does not fit in memory"))?;
    if m.ones_len != m.num_bases || m.ones_words.len() != n.div_ceil(64) {
        return Err(AbiError::shape(format!(
            "the ones bitmap covers {} bases in {} words, but the split has {n} bases",
            m.ones_len,
            m.ones_words.len()
        )));
    }
    if m.tail_indices.len() != m.tail_scalars.len() {
        return Err(AbiError::shape(format!(
            "{} tail indices but {} tail scalars",
            m.tail_indices.len(),
            m.tail_scalars.len()
        )));
    }
    let mut scalars = vec![Scalar::ZERO; n];
    for (w, &word) in m.ones_words.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let i = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if i < n {
                scalars[i] = Scalar::ONE;
            }
        }
    }
    for (&i, limbs) in m.tail_indices.iter().zip(m.tail_scalars.iter()) {
        let slot = scalars.get_mut(i as usize).ok_or_else(|| {
            AbiError::shape(format!("tail index {i} is out of range for {n} bases"))
        })?;
        *slot = Option::from(Scalar::from_u64s_le(limbs)).ok_or_else(|| {
            AbiError::shape(format!(
                "the tail scalar at base {i} is not a canonical field element"
            ))
        })?;
    }
    cuzk_msm_cpu::prep_msm(&[], None, &scalars, None, pool)
        .map_err(|e| AbiError::shape(e.to_string()))
}

fn to_abi(e: BackendError) -> AbiError {
    let code = match &e {
        BackendError::DomainTooLarge { .. } | BackendError::Unsupported(_) => {
            ErrorCode::UNSUPPORTED
        }
        BackendError::AbcShape { .. } | BackendError::BaseCount { .. } => ErrorCode::SHAPE,
        BackendError::Device(_) => ErrorCode::DEVICE,
        _ => ErrorCode::OTHER,
    };
    AbiError::new(code, e.to_string())
}

cuzk_plugin_api::export_plugin! {
    kind: backend,
    name: "cpu",
    description: "the CPU reference backend (NTT + MSMs on a rayon pool of its own)",
    type: Cpu,
}
