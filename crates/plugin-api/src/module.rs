//! The root module, the per-kind modules and the values they exchange.

// abi_stable names the generated prefix references `*_Ref`.
#![allow(non_camel_case_types)]

use std::ffi::c_void;

use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{ROption, RResult, RSlice, RStr, RString, RVec};
use abi_stable::StableAbi;

use crate::{AbcEvalC, Param, ParamDoc, ScalarRepr, WitnessJobRefC};
use crate::{AbiError, G1AffineRepr, G1ProjectiveRepr, G2AffineRepr, G2ProjectiveRepr};

// ---------------------------------------------------------------------------------
// Header and root module

/// The first bytes of [`PluginHeader::magic`].
pub const PLUGIN_MAGIC: [u8; 16] = *b"cuzk-plugin\0\0\0\0\0";

/// The exported name of a plugin's [`PluginHeader`] static (nul-terminated).
pub const HEADER_SYMBOL: &[u8] = b"cuzk_plugin_header\0";

/// Read by the host before it trusts anything else in the library: a plain C struct
/// whose layout never changes, so a plugin of any ABI version can be told apart.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PluginHeader {
    pub magic: [u8; 16],
    pub abi_version: u32,
    pub kind: PluginKind,
}

impl PluginHeader {
    /// The header of a plugin of `kind` built against this crate.
    pub const fn new(kind: PluginKind) -> Self {
        Self {
            magic: PLUGIN_MAGIC,
            abi_version: crate::ABI_VERSION,
            kind,
        }
    }
}

/// What a plugin is. A `u32` so that an unknown kind is a value, not UB.
#[repr(transparent)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PluginKind(pub u32);

impl PluginKind {
    pub const BACKEND: Self = Self(1);
    pub const DEALLOC: Self = Self(2);
    pub const THROTTLE: Self = Self(3);
    pub const GPU_LOCK: Self = Self(4);

    /// The kind's name as used in file names (`libcuzk_plugin_<kind>_<name>.so`) and
    /// `cuzk.toml` sections.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BACKEND => "backend",
            Self::DEALLOC => "dealloc",
            Self::THROTTLE => "throttle",
            Self::GPU_LOCK => "gpu_lock",
            _ => "unknown",
        }
    }
}

/// A plugin's root module. Exactly the kind module named by `kind` is `RSome`.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginMod_Ref, prefix_fields = PluginMod_Prefix)))]
#[sabi(missing_field(panic))]
pub struct PluginMod {
    pub abi_version: u32,
    pub kind: PluginKind,
    /// Short name (`cpu`, `bounded`), matching the file name.
    pub name: RStr<'static>,
    /// One line for `cuzk plugins list`.
    pub description: RStr<'static>,
    /// The parameters it accepts, with defaults.
    pub params: RSlice<'static, ParamDoc>,
    pub backend: ROption<BackendMod_Ref>,
    pub dealloc: ROption<DeallocMod_Ref>,
    pub throttle: ROption<ThrottleMod_Ref>,
    #[sabi(last_prefix_field)]
    pub gpu_lock: ROption<GpuLockMod_Ref>,
}

impl RootModule for PluginMod_Ref {
    abi_stable::declare_root_module_statics! {PluginMod_Ref}
    const BASE_NAME: &'static str = "cuzk_plugin";
    const NAME: &'static str = "cuzk plugin";
    const VERSION_STRINGS: VersionStrings = abi_stable::package_version_strings!();
}

/// A plugin's state, opaque to the host: created by a kind module's `instantiate`,
/// passed back to its functions, released by its `destroy`. The plugin guarantees it
/// is safe to use from several threads at once.
#[repr(transparent)]
#[derive(StableAbi, Debug)]
pub struct Instance {
    ptr: *mut c_void,
}

// SAFETY: an Instance is only created by `export` from a `T: Send + Sync`.
unsafe impl Send for Instance {}
// SAFETY: as above.
unsafe impl Sync for Instance {}

impl Instance {
    pub(crate) fn from_box<T: Send + Sync + 'static>(b: Box<T>) -> Self {
        Self {
            ptr: Box::into_raw(b).cast(),
        }
    }

    /// # Safety
    ///
    /// `self` must come from `from_box::<T>` and not have been destroyed.
    pub(crate) unsafe fn get<T>(&self) -> &T {
        // SAFETY: caller's contract.
        unsafe { &*self.ptr.cast::<T>() }
    }

    /// # Safety
    ///
    /// As for `get`; afterwards `self` is gone.
    pub(crate) unsafe fn into_box<T>(self) -> Box<T> {
        // SAFETY: caller's contract.
        unsafe { Box::from_raw(self.ptr.cast::<T>()) }
    }
}

// Every kind module starts with `instantiate` (creates an instance from parameters,
// checked against the plugin's declared ones) and `destroy` (frees it; never fails, a
// panic inside is contained). They are spelled out in each struct because the
// StableAbi derive must see function-pointer types, not aliases.

// ---------------------------------------------------------------------------------
// GPU backends

/// The accelerator half of a partition: `cuzk_gpu_backend::GpuBackend` across the
/// boundary.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = BackendMod_Ref, prefix_fields = BackendMod_Prefix)))]
#[sabi(missing_field(panic))]
pub struct BackendMod {
    pub instantiate: extern "C" fn(params: RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>,
    pub destroy: extern "C" fn(instance: Instance),
    /// The capability handshake: checked by the host at load against what the run
    /// needs.
    pub capabilities: extern "C" fn(instance: &Instance) -> RResult<BackendCaps, AbiError>,
    /// H from `a, b, c` and the MSMs H, L, A, B_G1 (and B_G2 when asked).
    pub prove_partition: extern "C" fn(
        instance: &Instance,
        job: PartitionJobC<'_>,
    ) -> RResult<PartitionResultC, AbiError>,
    /// Makes one query's bases resident under a parameter-set id (a backend without
    /// residency accepts and ignores it).
    pub upload_bases: extern "C" fn(
        instance: &Instance,
        id: u64,
        query: BaseQuery,
        bases: BasesC<'_>,
    ) -> RResult<(), AbiError>,
    /// Drops everything resident under `id`.
    #[sabi(last_prefix_field)]
    pub release_bases: extern "C" fn(instance: &Instance, id: u64) -> RResult<(), AbiError>,

    // Appended in ABI 1 without changing it (pre-staging). A plugin built before
    // lacks them: their accessors return `None` and the host falls back to
    // `prove_partition` and no staging. Always present together in a plugin built
    // with `export_plugin!`.
    /// `prove_partition` with `a, b, c` lent rather than handed over: the host
    /// keeps (and later frees) them, as it must for a partition it staged.
    #[sabi(missing_field(option))]
    pub prove_partition_ref: extern "C" fn(
        instance: &Instance,
        job: PartitionJobRefC<'_>,
    ) -> RResult<PartitionResultC, AbiError>,
    /// Prepares `a, b, c` for a later `prove_partition_ref` on them (a GPU backend
    /// page-locks them) *before* the host takes its GPU lock. Returns a token for
    /// `unstage`, or 0 when nothing was staged (then `unstage` is not called). The
    /// host keeps `a, b, c` allocated and unmoved until `unstage` returns, and calls
    /// it after the backend call that used them. Staging is an optimisation: the
    /// host goes on unstaged after an error.
    #[sabi(missing_field(option))]
    pub stage: extern "C" fn(instance: &Instance, abc: AbcRefC<'_>) -> RResult<u64, AbiError>,
    /// Undoes the staging `token` names; called once per non-zero token.
    #[sabi(missing_field(option))]
    pub unstage: extern "C" fn(instance: &Instance, token: u64) -> RResult<(), AbiError>,

    // Appended in ABI 1 without changing it (all devices by default, pinned memory
    // counted). A plugin built before lacks them: the host takes one device and no
    // pinned memory, as before.
    /// How many devices this backend can drive on this machine (a CUDA backend:
    /// the driver's count). With `[engine] devices` unset the host opens one
    /// instance per device (`device` = its ordinal) when this is more than one; an
    /// instance opened without `device` must drive device 0.
    #[sabi(missing_field(option))]
    pub device_count: extern "C" fn(instance: &Instance) -> RResult<u32, AbiError>,
    /// Host memory the instance holds page-locked now (staging buffers, ranges it
    /// registered); the host's memory budget leaves room for it.
    #[sabi(missing_field(option))]
    pub pinned_host_bytes: extern "C" fn(instance: &Instance) -> RResult<u64, AbiError>,

    // Appended in ABI 1 without changing it (EvictSRS frees device memory). A
    // plugin built before lacks it: the host frees nothing on the device, and the
    // plugin's own cache drops the stale copies when it next needs the room.
    /// Drops the device copies of host bases lying in `host` (address ranges of a
    /// parameter set whose host memory is freed); returns the device bytes freed.
    #[sabi(missing_field(option))]
    pub forget_bases:
        extern "C" fn(instance: &Instance, host: RSlice<'_, HostRangeC>) -> RResult<u64, AbiError>,

    // Appended in ABI 1 without changing it (proving from the witness: the backend
    // evaluates `a, b, c` itself, see `crate::witness`). A plugin built before
    // lacks them: the host reads `abc_eval` as `AbcEvalC::NO` (as it does a value
    // it does not know, or a failed call), stages nothing and never calls
    // `prove_partition_witness` (the in-process backend answers `Unsupported`), so
    // the engine evaluates `a, b, c` and hands them over as before.
    /// Where the backend evaluates `a, b, c` from a witness, if it does.
    #[sabi(missing_field(option))]
    pub abc_eval: extern "C" fn(instance: &Instance) -> RResult<AbcEvalC, AbiError>,
    /// `stage` for a partition that will be proven from its witness: prepares
    /// `input, aux` (a GPU backend page-locks them) before the host's GPU lock.
    /// Returns a token for `unstage` (the same call and contract as `stage`'s), or
    /// 0 when nothing was staged.
    #[sabi(missing_field(option))]
    pub stage_witness: extern "C" fn(
        instance: &Instance,
        input: RSlice<'_, ScalarRepr>,
        aux: RSlice<'_, ScalarRepr>,
    ) -> RResult<u64, AbiError>,
    /// Evaluates `a, b, c` from the witness and the lent R1CS, then proves as
    /// `prove_partition_ref`. The backend validates the R1CS before using an index
    /// from it; a malformed one or a witness of another shape is
    /// `ErrorCode::SHAPE`.
    #[sabi(missing_field(option))]
    pub prove_partition_witness: extern "C" fn(
        instance: &Instance,
        job: WitnessJobRefC<'_>,
    ) -> RResult<PartitionResultC, AbiError>,

    // Appended in ABI 1 without changing it (the engine's critical lane). A plugin
    // built before lacks it: the host opens a second instance itself, with the
    // same parameters, which then plans with the whole device as the first does.
    /// A second instance on the same device, made by this one (so the two can
    /// share the device's memory between them), destroyed with `destroy`; `RNone`:
    /// not offered.
    #[sabi(missing_field(option))]
    pub open_sibling: extern "C" fn(instance: &Instance) -> RResult<ROption<Instance>, AbiError>,

    // Appended in ABI 1 without changing it (split data staged before the GPU
    // lock). A plugin built before lacks it: the host stages no split data, and
    // the backend call copies them as before.
    /// `stage` for a partition's split data: the ones bitmaps and tail terms of
    /// the queries the partition's backend call will take, in its order (L, A,
    /// B_G1, then B_G2 when the job has it), prepared before the host's GPU lock
    /// (a GPU backend copies them into page-locked memory). Returns a token for
    /// `unstage` (the same call and contract as `stage`'s: the host keeps the
    /// arrays unchanged until `unstage` returns), or 0 when nothing was staged.
    #[sabi(missing_field(option))]
    pub stage_splits: extern "C" fn(
        instance: &Instance,
        splits: RSlice<'_, SplitDataC<'_>>,
    ) -> RResult<u64, AbiError>,
}

/// A query's split data without its bases: [`SplitMsmC`]'s ones bitmap and tail
/// terms (`BackendMod::stage_splits`).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct SplitDataC<'a> {
    pub num_bases: u64,
    /// `Density::words()` of the ones bitmap: 64 base indices per word, LSB first.
    pub ones_words: RSlice<'a, u64>,
    pub tail_indices: RSlice<'a, u32>,
    /// Canonical (not Montgomery) little-endian limbs, parallel to `tail_indices`.
    pub tail_scalars: RSlice<'a, [u64; 4]>,
}

/// A range of host addresses, `start..end` (bytes).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostRangeC {
    pub start: u64,
    pub end: u64,
}

/// What a backend offers.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct BackendCaps {
    /// Short name, e.g. `cpu` or `cuda`.
    pub name: RString,
    /// Must be [`crate::CURVE`].
    pub curve: RString,
    /// Largest NTT domain, as log2 of its size.
    pub max_log_domain: u32,
    /// Whether `PartitionJobC::b_g2` may be `RSome`.
    pub g2: bool,
    /// Whether `upload_bases` keeps bases on the device (so a job may name them by
    /// `resident` id).
    pub resident_bases: bool,
    pub devices: RVec<DeviceInfoC>,
}

#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfoC {
    pub name: RString,
    pub total_memory: u64,
    pub free_memory: u64,
}

/// Which query a set of bases belongs to.
#[repr(transparent)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BaseQuery(pub u32);

impl BaseQuery {
    pub const H: Self = Self(0);
    pub const L: Self = Self(1);
    pub const A: Self = Self(2);
    pub const B_G1: Self = Self(3);
    pub const B_G2: Self = Self(4);
}

/// Bases for `upload_bases`: `g1` for H, L, A, B_G1; `g2` for B_G2; the other empty.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct BasesC<'a> {
    pub g1: RSlice<'a, G1AffineRepr>,
    pub g2: RSlice<'a, G2AffineRepr>,
}

/// One MSM whose scalars `prep_msm` split (`cuzk_alloc::SplitScalars`, as raw
/// slices): bases, then which scalars are one (a bitmap over base indices), then the
/// other non-zero scalars (indices and canonical limbs).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct SplitMsmC<'a, G> {
    pub bases: RSlice<'a, G>,
    pub num_bases: u64,
    /// `Density::words()` of the ones bitmap: 64 base indices per word, LSB first.
    pub ones_words: RSlice<'a, u64>,
    /// `Density::len()` of the ones bitmap (= `num_bases`).
    pub ones_len: u64,
    pub tail_indices: RSlice<'a, u32>,
    /// Canonical (not Montgomery) little-endian limbs, parallel to `tail_indices`.
    pub tail_scalars: RSlice<'a, [u64; 4]>,
}

/// `a, b, c` evaluations, one per constraint, owned by the host; dropping them frees
/// the host's memory through the host's allocator.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct AbcC {
    pub a: RVec<ScalarRepr>,
    pub b: RVec<ScalarRepr>,
    pub c: RVec<ScalarRepr>,
}

/// `cuzk_gpu_backend::PartitionJob` across the boundary.
#[repr(C)]
#[derive(StableAbi, Debug)]
pub struct PartitionJobC<'a> {
    pub abc: AbcC,
    pub h_bases: RSlice<'a, G1AffineRepr>,
    pub l: SplitMsmC<'a, G1AffineRepr>,
    pub a: SplitMsmC<'a, G1AffineRepr>,
    pub b_g1: SplitMsmC<'a, G1AffineRepr>,
    pub b_g2: ROption<SplitMsmC<'a, G2AffineRepr>>,
    /// The parameter-set id whose bases the backend holds resident (`upload_bases`),
    /// if any; the slices above are the same bases and may then be ignored.
    pub resident: ROption<u64>,
}

/// `a, b, c` evaluations borrowed from the host (`stage`, `prove_partition_ref`).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct AbcRefC<'a> {
    pub a: RSlice<'a, ScalarRepr>,
    pub b: RSlice<'a, ScalarRepr>,
    pub c: RSlice<'a, ScalarRepr>,
}

/// [`PartitionJobC`] with `a, b, c` lent: `cuzk_gpu_backend::PartitionJobRef`
/// across the boundary.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct PartitionJobRefC<'a> {
    pub abc: AbcRefC<'a>,
    pub h_bases: RSlice<'a, G1AffineRepr>,
    pub l: SplitMsmC<'a, G1AffineRepr>,
    pub a: SplitMsmC<'a, G1AffineRepr>,
    pub b_g1: SplitMsmC<'a, G1AffineRepr>,
    pub b_g2: ROption<SplitMsmC<'a, G2AffineRepr>>,
    /// As in [`PartitionJobC::resident`].
    pub resident: ROption<u64>,
}

/// `cuzk_gpu_backend::PartitionResult` across the boundary.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionResultC {
    pub h: G1ProjectiveRepr,
    pub l: G1ProjectiveRepr,
    pub a: G1ProjectiveRepr,
    pub b_g1: G1ProjectiveRepr,
    pub b_g2: ROption<G2ProjectiveRepr>,
}

// ---------------------------------------------------------------------------------
// Deallocation policies

/// Where and when released buffers are freed.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = DeallocMod_Ref, prefix_fields = DeallocMod_Prefix)))]
#[sabi(missing_field(panic))]
pub struct DeallocMod {
    pub instantiate: extern "C" fn(params: RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>,
    pub destroy: extern "C" fn(instance: Instance),
    /// Takes the buffer; frees it now or later, here or on another thread.
    pub release: extern "C" fn(instance: &Instance, buf: ReleasedBuf) -> RResult<(), AbiError>,
    /// Returns once every buffer released before the call is freed.
    #[sabi(last_prefix_field)]
    pub drain: extern "C" fn(instance: &Instance) -> RResult<(), AbiError>,
}

/// An opaque host buffer, the host's function that frees it, and its size. Freed
/// exactly once: by [`ReleasedBuf::free`], or when dropped (so a policy that fails
/// or panics still frees it, on the thread that drops it).
#[repr(C)]
#[derive(StableAbi)]
pub struct ReleasedBuf {
    ctx: *mut c_void,
    free: extern "C" fn(ctx: *mut c_void),
    bytes: u64,
    label: RStr<'static>,
}

// SAFETY: the host only builds a ReleasedBuf around a buffer that is Send (its
// constructor says so), and `free` may run on any thread.
unsafe impl Send for ReleasedBuf {}

impl ReleasedBuf {
    /// # Safety
    ///
    /// `free(ctx)` must be sound to call exactly once, from any thread, at any time
    /// while the process lives, and must not unwind.
    pub unsafe fn new(
        ctx: *mut c_void,
        free: extern "C" fn(ctx: *mut c_void),
        bytes: u64,
        label: &'static str,
    ) -> Self {
        Self {
            ctx,
            free,
            bytes,
            label: RStr::from_str(label),
        }
    }

    /// Boxes `value`; freeing drops it (a panicking destructor is contained).
    pub fn from_value<T: Send + 'static>(value: T, bytes: u64, label: &'static str) -> Self {
        extern "C" fn free_box<T>(ctx: *mut c_void) {
            // SAFETY: ctx came from Box::<T>::into_raw below, and ReleasedBuf
            // calls this at most once.
            let b = unsafe { Box::from_raw(ctx.cast::<T>()) };
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(b)));
        }
        let ctx = Box::into_raw(Box::new(value)).cast::<c_void>();
        // SAFETY: free_box::<T> frees exactly this box, from any thread (T: Send),
        // and catches panics.
        unsafe { Self::new(ctx, free_box::<T>, bytes, label) }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn label(&self) -> &'static str {
        self.label.as_str()
    }

    /// Frees the buffer now, on this thread.
    pub fn free(mut self) {
        self.run();
    }

    fn run(&mut self) {
        let ctx = std::mem::replace(&mut self.ctx, std::ptr::null_mut());
        if !ctx.is_null() {
            (self.free)(ctx);
        }
    }
}

impl Drop for ReleasedBuf {
    fn drop(&mut self) {
        self.run();
    }
}

impl std::fmt::Debug for ReleasedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleasedBuf")
            .field("label", &self.label)
            .field("bytes", &self.bytes)
            .finish()
    }
}

// ---------------------------------------------------------------------------------
// Throttle policies

/// The flag `b_g2_msm` raises and synthesis workers check between chunks.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = ThrottleMod_Ref, prefix_fields = ThrottleMod_Prefix)))]
#[sabi(missing_field(panic))]
pub struct ThrottleMod {
    pub instantiate: extern "C" fn(params: RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>,
    pub destroy: extern "C" fn(instance: Instance),
    /// Raises nest: the flag is up while any raise is outstanding.
    pub raise: extern "C" fn(instance: &Instance) -> RResult<(), AbiError>,
    pub lower: extern "C" fn(instance: &Instance) -> RResult<(), AbiError>,
    /// Called by synthesis worker `worker` between chunks; may block while raised.
    #[sabi(last_prefix_field)]
    pub checkpoint: extern "C" fn(instance: &Instance, worker: u64) -> RResult<(), AbiError>,
}

// ---------------------------------------------------------------------------------
// GPU-lock policies

/// What a GPU worker holds: the whole partition, or a memory or compute region.
#[repr(transparent)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LockScope(pub u32);

impl LockScope {
    pub const PARTITION: Self = Self(0);
    pub const MEMORY: Self = Self(1);
    pub const COMPUTE: Self = Self(2);
}

/// Acquire and release by (device, scope); the host pairs every successful acquire
/// with one release from an owned guard. A policy may make any scope a no-op.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = GpuLockMod_Ref, prefix_fields = GpuLockMod_Prefix)))]
#[sabi(missing_field(panic))]
pub struct GpuLockMod {
    pub instantiate: extern "C" fn(params: RSlice<'_, Param<'_>>) -> RResult<Instance, AbiError>,
    pub destroy: extern "C" fn(instance: Instance),
    /// Blocks until `scope` on `device` is held.
    pub acquire:
        extern "C" fn(instance: &Instance, device: u64, scope: LockScope) -> RResult<(), AbiError>,
    #[sabi(last_prefix_field)]
    pub release:
        extern "C" fn(instance: &Instance, device: u64, scope: LockScope) -> RResult<(), AbiError>,
}
