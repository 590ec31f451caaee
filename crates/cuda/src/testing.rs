//! What the device checks (`tests/*.rs`) and cuzk-gpu-check reach below
//! [`crate::CudaBackend`]: the engines themselves (device handle and device-side
//! types, NTT, MSM, spmv, streaming, page-locked host memory, the kernel modules)
//! and the launches of the kernels that exist only for the checks and benchmarks.
//!
//! Behind the `testing` feature, which this crate's integration tests (through a
//! dev-dependency on the crate itself) and the cuzk-gpu-check binary
//! (`required-features`) turn on, and nothing else does: the plugin and the planner
//! build without it and see only the backend. A feature rather than `#[cfg(test)]`
//! because `cfg(test)` code is invisible to integration tests and to binaries,
//! which are exactly the users; and a module of its own so that the production
//! modules carry no test-only code and the surface a user can rely on is the crate
//! root.

mod launches;
mod spmv_timing;

/// The small safe API over one device (`Gpu`), the device-side element and point
/// types, their conversions, and the compiled-modules cache.
pub mod gpu {
    use blstrs::Scalar;

    pub use crate::gpu::*;

    /// Limbs (u64, little-endian, Montgomery) → Scalar.
    pub fn scalar_from_repr(r: &FrRepr) -> Scalar {
        let mut l = [0u64; 4];
        for i in 0..4 {
            l[i] = r.0[2 * i] as u64 | ((r.0[2 * i + 1] as u64) << 32);
        }
        // SAFETY: Scalar has the layout of [u64; 4] (see scalars_as_bytes).
        unsafe { std::mem::transmute::<[u64; 4], Scalar>(l) }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use rand::SeedableRng;

        #[test]
        fn scalar_repr_round_trips() {
            let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(2);
            for _ in 0..33 {
                let s = <Scalar as ff::Field>::random(&mut r);
                assert_eq!(scalar_from_repr(&scalar_to_repr(&s)), s);
            }
        }
    }
}

/// The G1 and G2 MSM engine.
pub mod msm {
    pub use crate::msm::*;

    pub use super::launches::{replicate_bases, Replicate};
}

/// The NTT engine and the H chain.
pub mod ntt {
    pub use crate::ntt::*;
}

/// The device spmv (`a, b, c` from a witness) and validated compiled shapes.
pub mod spmv {
    pub use crate::spmv::*;

    pub use super::spmv_timing::{eval_abc_to_host, time_spmv};
}

/// Bases streamed from host memory in chunks.
pub mod streamed {
    pub use crate::streamed::*;
}

/// Page-locked host memory and the driver's device count.
pub mod raw {
    pub use crate::raw::*;

    /// Caller memory page-locked in place for device `ordinal` now (ranges registered
    /// with [`HostRegistration`]: staged `a, b, c`). Not new memory: whoever allocated
    /// the ranges already counts them, so a budget that added these would count them
    /// twice (it did, on the H200: ~12.5 GB a staged 32 GiB-sector partition).
    pub fn registered_bytes(ordinal: usize) -> u64 {
        crate::raw::read_pinned(ordinal).registered
    }
}

/// The kernel modules' sources and NVRTC.
pub mod kernels {
    pub use crate::kernels::*;
}

/// Per-phase device times ([`crate::Profiler`]'s reports and marks).
pub mod profile {
    pub use crate::profile::*;
}
