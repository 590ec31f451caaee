//! The stable ABI between cuzk and its plugins: GPU backends, deallocation policies,
//! throttle policies and GPU-lock policies, each a shared library chosen at run time.
//!
//! cuzk exists to compare proving strategies without rebuilding, and to let a GPU
//! vendor ship a backend as a `.so`. A Rust trait object cannot cross a shared-library
//! boundary (its layout and vtable are not stable across compilers or crate
//! versions), so everything here is `#[repr(C)]` and derives
//! [`StableAbi`](abi_stable::StableAbi): the host checks the plugin's type layouts
//! against its own when it loads it, and refuses a mismatch with an error instead of
//! misreading memory.
//!
//! # Shape
//!
//! A plugin library exports two symbols, both written by [`export_plugin!`]:
//!
//! - `cuzk_plugin_header`, a plain [`PluginHeader`] (magic, [`ABI_VERSION`], kind),
//!   read before anything else so that "not a cuzk plugin" and "built against another
//!   ABI version" are reported as such, not as a layout diff;
//! - abi_stable's root-module loader, returning [`PluginMod_Ref`]: the plugin's
//!   name, description, declared parameters and one kind module
//!   ([`BackendMod`], [`DeallocMod`], [`ThrottleMod`], [`GpuLockMod`]).
//!
//! Every module is a prefix type: a later ABI may append fields after the last
//! prefix field, and an older host or plugin still loads. Anything else bumps
//! [`ABI_VERSION`].
//!
//! A kind module is a table of `extern "C"` functions over an opaque [`Instance`]
//! (the plugin's state, created from a string map of parameters). Errors come back
//! as an [`AbiError`] value (a code and a message); a panic inside a plugin is caught
//! at its edge and becomes an [`ErrorCode::PANIC`] error, so it cannot unwind into
//! the host. Plugins are never unloaded: their code and `'static` strings stay valid
//! for the life of the process.
//!
//! # Data
//!
//! Field elements and points cross as byte-compatible arrays of little-endian `u64`
//! limbs in Montgomery form, exactly blst's layout (see [`repr`]); bases and split
//! scalars cross as borrowed slices (no copy), and the `a, b, c` evaluations as
//! host-owned [`RVec`](abi_stable::std_types::RVec)s that the backend may drop (that
//! is, free on the host's allocator) as soon as it no longer needs them, or lent as
//! slices (`prove_partition_ref`, for a partition the host staged beforehand). A
//! backend that evaluates `a, b, c` itself is lent the witness and the compiled
//! R1CS instead ([`witness`]: `prove_partition_witness`).
//!
//! Architecture invariant: this crate holds types and the glue to export them; no
//! policy, no arithmetic. It is an API boundary: changing a prefix field or a type
//! passed by value is a new [`ABI_VERSION`].

pub mod error;
pub mod export;
pub mod gates;
pub mod module;
pub mod params;
pub mod pending;
pub mod repr;
#[cfg(feature = "stages")]
pub mod stages;
pub mod witness;

pub use error::{AbiError, ErrorCode};
pub use export::{
    log_to_stderr, BackendPlugin, DeallocPlugin, GpuLockPlugin, StageGuard, ThrottlePlugin,
};
pub use module::*;
pub use params::{Param, ParamDoc, Params};
pub use repr::*;
pub use witness::*;

/// Re-exported so that plugins and the host use the exact abi_stable this ABI was
/// built with.
pub use abi_stable;

/// The ABI this crate defines. A host loads only plugins that declare the same
/// number. Appending fields to a module does not change it; anything else does.
///
/// Additions within version 1 (each optional: a plugin built before lacks the
/// fields, the host sees `None` and falls back, and an older host never reads
/// them):
///
/// - `BackendMod::{prove_partition_ref, stage, unstage}` (pre-staging: a backend
///   pins `a, b, c` before the host's GPU lock; `a, b, c` are then lent to the
///   call instead of handed over).
/// - `BackendMod::{device_count, pinned_host_bytes}` (all devices by default, the
///   backend's page-locked memory in the host's budget) and
///   `BackendMod::forget_bases` (freeing device copies of evicted bases).
/// - `BackendMod::{abc_eval, stage_witness, prove_partition_witness}` (proving
///   from the witness: the backend evaluates `a, b, c` from the lent witness and
///   compiled R1CS, [`witness`]; an older plugin reads as not offering it).
///
/// Several devices did not change it either: a backend instance drives one
/// device (the CUDA plugin's `device` parameter), and the host opens one instance
/// per device, so no call needed a device argument.
pub const ABI_VERSION: u32 = 1;

/// The curve every cuzk plugin computes over.
pub const CURVE: &str = "bls12-381";
