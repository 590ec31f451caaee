//! The plugin author's side: implement one of the traits below on a plain Rust type
//! and call [`export_plugin!`](crate::export_plugin); the glue here turns it into the
//! `extern "C"` module the host loads, catching panics and checking parameters at
//! the edge. The traits never cross the boundary; only the modules do.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RNone, ROption, RResult, RSlice, RSome, RVec};

use crate::module::*;
use crate::WitnessJobRefC;
use crate::{AbcEvalC, AbiError, ErrorCode, Param, ParamDoc, Params, ScalarRepr, ABI_VERSION};

/// A GPU backend (see [`BackendMod`]).
pub trait BackendPlugin: Sized + Send + Sync + 'static {
    const PARAMS: &'static [ParamDoc];
    fn new(params: &Params<'_>) -> Result<Self, AbiError>;
    fn capabilities(&self) -> Result<BackendCaps, AbiError>;
    fn prove_partition(&self, job: PartitionJobC<'_>) -> Result<PartitionResultC, AbiError>;
    /// Default: no residency; the bases of every job are read from the host.
    fn upload_bases(
        &self,
        _id: u64,
        _query: BaseQuery,
        _bases: BasesC<'_>,
    ) -> Result<(), AbiError> {
        Ok(())
    }
    fn release_bases(&self, _id: u64) -> Result<(), AbiError> {
        Ok(())
    }
    /// `prove_partition` with `a, b, c` lent (the host keeps them). Default: copies
    /// them into vectors of this library and calls `prove_partition`; a backend
    /// that only reads them (a GPU uploads them) overrides it and saves the copy.
    fn prove_partition_ref(&self, job: PartitionJobRefC<'_>) -> Result<PartitionResultC, AbiError> {
        let PartitionJobRefC {
            abc,
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
            resident,
        } = job;
        let copy = |v: RSlice<'_, crate::ScalarRepr>| RVec::from(v.as_slice().to_vec());
        self.prove_partition(PartitionJobC {
            abc: AbcC {
                a: copy(abc.a),
                b: copy(abc.b),
                c: copy(abc.c),
            },
            h_bases,
            l,
            a,
            b_g1,
            b_g2,
            resident,
        })
    }
    /// Prepares `a, b, c` for the `prove_partition_ref` that will use them, before
    /// the host takes its GPU lock (see [`BackendMod::stage`]); the returned guard
    /// undoes it when dropped, which the glue does when the host calls `unstage`.
    /// The host keeps `a, b, c` allocated and unmoved until then. Default: nothing
    /// staged. A guard's drop should not panic (if it does, the glue contains it).
    fn stage(&self, _abc: AbcRefC<'_>) -> Result<Option<StageGuard>, AbiError> {
        Ok(None)
    }
    /// How many devices this backend can drive here (see
    /// [`BackendMod::device_count`]). Default: one.
    fn device_count(&self) -> Result<u32, AbiError> {
        Ok(1)
    }
    /// Host memory held page-locked now (see [`BackendMod::pinned_host_bytes`]).
    /// Default: none.
    fn pinned_host_bytes(&self) -> Result<u64, AbiError> {
        Ok(0)
    }
    /// Drops device copies of host bases in `host` (see
    /// [`BackendMod::forget_bases`]); returns the device bytes freed. Default:
    /// none kept, none freed.
    fn forget_bases(&self, _host: &[HostRangeC]) -> Result<u64, AbiError> {
        Ok(0)
    }
    /// A second instance on the same device (see [`BackendMod::open_sibling`]).
    /// Default: not offered.
    fn open_sibling(&self) -> Result<Option<Self>, AbiError>
    where
        Self: Sized,
    {
        Ok(None)
    }
    /// Where this backend evaluates `a, b, c` from a witness (see
    /// [`BackendMod::abc_eval`]). Default: it does not ([`AbcEvalC::NO`]).
    fn abc_eval(&self) -> Result<AbcEvalC, AbiError> {
        Ok(AbcEvalC::NO)
    }
    /// [`BackendPlugin::stage`] for a partition that will be proven from its
    /// witness (see [`BackendMod::stage_witness`]); the guard is kept until the
    /// host's `unstage`, as `stage`'s. Default: nothing staged.
    fn stage_witness(
        &self,
        _input: &[ScalarRepr],
        _aux: &[ScalarRepr],
    ) -> Result<Option<StageGuard>, AbiError> {
        Ok(None)
    }
    /// [`BackendPlugin::stage`] for a partition's split data (see
    /// [`BackendMod::stage_splits`]); the guard is kept until the host's
    /// `unstage`, as `stage`'s. Default: nothing staged.
    fn stage_splits(&self, _splits: &[SplitDataC<'_>]) -> Result<Option<StageGuard>, AbiError> {
        Ok(None)
    }
    /// Evaluates `a, b, c` from the witness and proves (see
    /// [`BackendMod::prove_partition_witness`]). The R1CS is the host's and not
    /// to be trusted: the backend validates it before it uses an index from it
    /// (`cuzk_synth::R1csRef::validate`; the CPU backend does in `spmv_slices`,
    /// a device backend once per shape it uploads). Default: refused as
    /// [`ErrorCode::UNSUPPORTED`].
    fn prove_partition_witness(
        &self,
        _job: WitnessJobRefC<'_>,
    ) -> Result<PartitionResultC, AbiError> {
        Err(AbiError::unsupported(
            "this backend does not evaluate a, b, c from the witness",
        ))
    }
}

/// What [`BackendPlugin::stage`] returns: anything whose drop undoes the staging.
pub type StageGuard = Box<dyn Send>;

/// A backend instance as the glue keeps it: the plugin and its outstanding
/// stagings, token → guard. The stagings are declared first so that a host that
/// destroys the instance without unstaging still undoes them before the backend
/// goes.
struct Hosted<T> {
    staged: Mutex<HashMap<u64, StageGuard>>,
    next_token: AtomicU64,
    plugin: T,
}

impl<T> Hosted<T> {
    /// Keeps a staging's guard until the host's `unstage`; its token (0: nothing
    /// staged, nothing kept).
    fn keep(&self, guard: Option<StageGuard>) -> u64 {
        let Some(g) = guard else {
            return 0;
        };
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        self.staged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token, g);
        token
    }
}

/// A deallocation policy (see [`DeallocMod`]).
pub trait DeallocPlugin: Sized + Send + Sync + 'static {
    const PARAMS: &'static [ParamDoc];
    fn new(params: &Params<'_>) -> Result<Self, AbiError>;
    fn release(&self, buf: ReleasedBuf) -> Result<(), AbiError>;
    fn drain(&self) -> Result<(), AbiError>;
}

/// A throttle policy (see [`ThrottleMod`]).
pub trait ThrottlePlugin: Sized + Send + Sync + 'static {
    const PARAMS: &'static [ParamDoc];
    fn new(params: &Params<'_>) -> Result<Self, AbiError>;
    fn raise(&self);
    fn lower(&self);
    fn checkpoint(&self, worker: u64);
}

/// A GPU-lock policy (see [`GpuLockMod`]).
pub trait GpuLockPlugin: Sized + Send + Sync + 'static {
    const PARAMS: &'static [ParamDoc];
    fn new(params: &Params<'_>) -> Result<Self, AbiError>;
    fn acquire(&self, device: u64, scope: LockScope) -> Result<(), AbiError>;
    fn release(&self, device: u64, scope: LockScope) -> Result<(), AbiError>;
}

/// Runs `f`, turning a panic into an [`ErrorCode::PANIC`] error: nothing unwinds
/// across `extern "C"`.
pub fn guard<T>(f: impl FnOnce() -> Result<T, AbiError>) -> RResult<T, AbiError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.into(),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic with a non-string payload".to_string());
            // Dropping a payload can itself panic; contain that too.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            RResult::RErr(AbiError::new(ErrorCode::PANIC, msg))
        }
    }
}

/// `tracing` events to stderr, filtered by `RUST_LOG` (default: warnings), once per
/// copy of `tracing`. The host calls it at start; a plugin, which links its own copy
/// whose events the host's subscriber never sees, calls it at its first instance.
/// Where a subscriber is already set (a plugin linked into a test binary, say),
/// that one stays.
pub fn log_to_stderr() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init();
    });
}

fn instantiate<T: Send + Sync + 'static>(
    params: RSlice<'_, Param<'_>>,
    declared: &'static [ParamDoc],
    new: impl FnOnce(&Params<'_>) -> Result<T, AbiError>,
) -> RResult<Instance, AbiError> {
    log_to_stderr();
    guard(|| {
        let params = Params::new(params.as_slice(), declared)?;
        Ok(Instance::from_box(Box::new(new(&params)?)))
    })
}

extern "C" fn destroy<T: Send + Sync + 'static>(instance: Instance) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: every instance of this module was made by `instantiate::<T>`, and
        // the host destroys each once.
        drop(unsafe { instance.into_box::<T>() })
    }));
}

/// # Safety
///
/// `i` must be an instance of this module (made for `T`).
unsafe fn this<T>(i: &Instance) -> &T {
    // SAFETY: caller's contract.
    unsafe { i.get::<T>() }
}

mod backend {
    use super::*;

    pub extern "C" fn instantiate<T: BackendPlugin>(
        p: RSlice<'_, Param<'_>>,
    ) -> RResult<Instance, AbiError> {
        super::instantiate(p, T::PARAMS, |params| {
            Ok(Hosted {
                staged: Mutex::new(HashMap::new()),
                // 0 means "nothing staged".
                next_token: AtomicU64::new(1),
                plugin: T::new(params)?,
            })
        })
    }
    /// # Safety
    ///
    /// `i` must be an instance of this module (made by `instantiate::<T>`).
    unsafe fn hosted<T>(i: &Instance) -> &Hosted<T> {
        // SAFETY: caller's contract: instantiate::<T> boxed a Hosted<T>.
        unsafe { this::<Hosted<T>>(i) }
    }
    pub extern "C" fn destroy<T: BackendPlugin>(instance: Instance) {
        super::destroy::<Hosted<T>>(instance)
    }
    pub extern "C" fn capabilities<T: BackendPlugin>(
        i: &Instance,
    ) -> RResult<BackendCaps, AbiError> {
        // SAFETY: the host passes back instances of this module only.
        guard(|| unsafe { hosted::<T>(i) }.plugin.capabilities())
    }
    pub extern "C" fn prove_partition<T: BackendPlugin>(
        i: &Instance,
        job: PartitionJobC<'_>,
    ) -> RResult<PartitionResultC, AbiError> {
        // SAFETY: as above.
        guard(|| unsafe { hosted::<T>(i) }.plugin.prove_partition(job))
    }
    pub extern "C" fn upload_bases<T: BackendPlugin>(
        i: &Instance,
        id: u64,
        query: BaseQuery,
        bases: BasesC<'_>,
    ) -> RResult<(), AbiError> {
        // SAFETY: as above.
        guard(|| {
            unsafe { hosted::<T>(i) }
                .plugin
                .upload_bases(id, query, bases)
        })
    }
    pub extern "C" fn release_bases<T: BackendPlugin>(
        i: &Instance,
        id: u64,
    ) -> RResult<(), AbiError> {
        // SAFETY: as above.
        guard(|| unsafe { hosted::<T>(i) }.plugin.release_bases(id))
    }
    pub extern "C" fn prove_partition_ref<T: BackendPlugin>(
        i: &Instance,
        job: PartitionJobRefC<'_>,
    ) -> RResult<PartitionResultC, AbiError> {
        // SAFETY: as above.
        guard(|| unsafe { hosted::<T>(i) }.plugin.prove_partition_ref(job))
    }
    pub extern "C" fn stage<T: BackendPlugin>(
        i: &Instance,
        abc: AbcRefC<'_>,
    ) -> RResult<u64, AbiError> {
        guard(|| {
            // SAFETY: as above.
            let h = unsafe { hosted::<T>(i) };
            let g = h.plugin.stage(abc)?;
            Ok(h.keep(g))
        })
    }
    pub extern "C" fn stage_witness<T: BackendPlugin>(
        i: &Instance,
        input: RSlice<'_, ScalarRepr>,
        aux: RSlice<'_, ScalarRepr>,
    ) -> RResult<u64, AbiError> {
        guard(|| {
            // SAFETY: as above.
            let h = unsafe { hosted::<T>(i) };
            let g = h.plugin.stage_witness(input.as_slice(), aux.as_slice())?;
            Ok(h.keep(g))
        })
    }
    pub extern "C" fn stage_splits<T: BackendPlugin>(
        i: &Instance,
        splits: RSlice<'_, SplitDataC<'_>>,
    ) -> RResult<u64, AbiError> {
        guard(|| {
            // SAFETY: as above.
            let h = unsafe { hosted::<T>(i) };
            let g = h.plugin.stage_splits(splits.as_slice())?;
            Ok(h.keep(g))
        })
    }
    pub extern "C" fn abc_eval<T: BackendPlugin>(i: &Instance) -> RResult<AbcEvalC, AbiError> {
        // SAFETY: as above.
        guard(|| unsafe { hosted::<T>(i) }.plugin.abc_eval())
    }
    pub extern "C" fn prove_partition_witness<T: BackendPlugin>(
        i: &Instance,
        job: WitnessJobRefC<'_>,
    ) -> RResult<PartitionResultC, AbiError> {
        // SAFETY: as above.
        guard(|| {
            unsafe { hosted::<T>(i) }
                .plugin
                .prove_partition_witness(job)
        })
    }
    pub extern "C" fn device_count<T: BackendPlugin>(i: &Instance) -> RResult<u32, AbiError> {
        // SAFETY: as above.
        guard(|| unsafe { hosted::<T>(i) }.plugin.device_count())
    }
    pub extern "C" fn pinned_host_bytes<T: BackendPlugin>(i: &Instance) -> RResult<u64, AbiError> {
        // SAFETY: as above.
        guard(|| unsafe { hosted::<T>(i) }.plugin.pinned_host_bytes())
    }
    pub extern "C" fn forget_bases<T: BackendPlugin>(
        i: &Instance,
        host: RSlice<'_, HostRangeC>,
    ) -> RResult<u64, AbiError> {
        // SAFETY: as above.
        guard(|| {
            unsafe { hosted::<T>(i) }
                .plugin
                .forget_bases(host.as_slice())
        })
    }
    pub extern "C" fn open_sibling<T: BackendPlugin>(
        i: &Instance,
    ) -> RResult<ROption<Instance>, AbiError> {
        guard(|| {
            // SAFETY: as above.
            let sibling = unsafe { hosted::<T>(i) }.plugin.open_sibling()?;
            Ok(match sibling {
                Some(plugin) => RSome(Instance::from_box(Box::new(Hosted {
                    staged: Mutex::new(HashMap::new()),
                    next_token: AtomicU64::new(1),
                    plugin,
                }))),
                None => RNone,
            })
        })
    }
    pub extern "C" fn unstage<T: BackendPlugin>(i: &Instance, token: u64) -> RResult<(), AbiError> {
        guard(|| {
            // SAFETY: as above.
            let h = unsafe { hosted::<T>(i) };
            let g = h
                .staged
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&token);
            match g {
                // Dropped outside the map's lock; a panic in it is caught by `guard`.
                Some(g) => {
                    drop(g);
                    Ok(())
                }
                None => Err(AbiError::other(format!(
                    "unstage: no staging with token {token}"
                ))),
            }
        })
    }
}

mod dealloc {
    use super::*;

    pub extern "C" fn instantiate<T: DeallocPlugin>(
        p: RSlice<'_, Param<'_>>,
    ) -> RResult<Instance, AbiError> {
        super::instantiate(p, T::PARAMS, T::new)
    }
    pub extern "C" fn release<T: DeallocPlugin>(
        i: &Instance,
        buf: ReleasedBuf,
    ) -> RResult<(), AbiError> {
        // SAFETY: as in `backend`. If the policy panics, unwinding drops `buf`,
        // which frees it here: nothing leaks.
        guard(|| unsafe { this::<T>(i) }.release(buf))
    }
    pub extern "C" fn drain<T: DeallocPlugin>(i: &Instance) -> RResult<(), AbiError> {
        // SAFETY: as above.
        guard(|| unsafe { this::<T>(i) }.drain())
    }
}

mod throttle {
    use super::*;

    pub extern "C" fn instantiate<T: ThrottlePlugin>(
        p: RSlice<'_, Param<'_>>,
    ) -> RResult<Instance, AbiError> {
        super::instantiate(p, T::PARAMS, T::new)
    }
    pub extern "C" fn raise<T: ThrottlePlugin>(i: &Instance) -> RResult<(), AbiError> {
        // SAFETY: as in `backend`.
        guard(|| {
            unsafe { this::<T>(i) }.raise();
            Ok(())
        })
    }
    pub extern "C" fn lower<T: ThrottlePlugin>(i: &Instance) -> RResult<(), AbiError> {
        // SAFETY: as above.
        guard(|| {
            unsafe { this::<T>(i) }.lower();
            Ok(())
        })
    }
    pub extern "C" fn checkpoint<T: ThrottlePlugin>(
        i: &Instance,
        worker: u64,
    ) -> RResult<(), AbiError> {
        // SAFETY: as above.
        guard(|| {
            unsafe { this::<T>(i) }.checkpoint(worker);
            Ok(())
        })
    }
}

mod gpu_lock {
    use super::*;

    pub extern "C" fn instantiate<T: GpuLockPlugin>(
        p: RSlice<'_, Param<'_>>,
    ) -> RResult<Instance, AbiError> {
        super::instantiate(p, T::PARAMS, T::new)
    }
    pub extern "C" fn acquire<T: GpuLockPlugin>(
        i: &Instance,
        device: u64,
        scope: LockScope,
    ) -> RResult<(), AbiError> {
        // SAFETY: as in `backend`.
        guard(|| unsafe { this::<T>(i) }.acquire(device, scope))
    }
    pub extern "C" fn release<T: GpuLockPlugin>(
        i: &Instance,
        device: u64,
        scope: LockScope,
    ) -> RResult<(), AbiError> {
        // SAFETY: as above.
        guard(|| unsafe { this::<T>(i) }.release(device, scope))
    }
}

/// The parts of a root module that do not depend on the kind.
struct Common {
    kind: PluginKind,
    name: &'static str,
    description: &'static str,
    params: &'static [ParamDoc],
}

fn root(
    c: Common,
    backend: ROption<BackendMod_Ref>,
    dealloc: ROption<DeallocMod_Ref>,
    throttle: ROption<ThrottleMod_Ref>,
    gpu_lock: ROption<GpuLockMod_Ref>,
) -> PluginMod_Ref {
    // Leaked once per process: abi_stable calls the root-module loader once per
    // library, and plugins are never unloaded.
    PluginMod {
        abi_version: ABI_VERSION,
        kind: c.kind,
        name: c.name.into(),
        description: c.description.into(),
        params: c.params.into(),
        backend,
        dealloc,
        throttle,
        gpu_lock,
    }
    .leak_into_prefix()
}

/// The root module of a backend plugin of type `T`.
pub fn backend_root<T: BackendPlugin>(
    name: &'static str,
    description: &'static str,
) -> PluginMod_Ref {
    let m = BackendMod {
        instantiate: backend::instantiate::<T>,
        destroy: backend::destroy::<T>,
        capabilities: backend::capabilities::<T>,
        prove_partition: backend::prove_partition::<T>,
        upload_bases: backend::upload_bases::<T>,
        release_bases: backend::release_bases::<T>,
        prove_partition_ref: backend::prove_partition_ref::<T>,
        stage: backend::stage::<T>,
        unstage: backend::unstage::<T>,
        device_count: backend::device_count::<T>,
        pinned_host_bytes: backend::pinned_host_bytes::<T>,
        forget_bases: backend::forget_bases::<T>,
        abc_eval: backend::abc_eval::<T>,
        stage_witness: backend::stage_witness::<T>,
        prove_partition_witness: backend::prove_partition_witness::<T>,
        open_sibling: backend::open_sibling::<T>,
        stage_splits: backend::stage_splits::<T>,
    }
    .leak_into_prefix();
    let c = Common {
        kind: PluginKind::BACKEND,
        name,
        description,
        params: T::PARAMS,
    };
    root(c, RSome(m), RNone, RNone, RNone)
}

/// The root module of a deallocation plugin of type `T`.
pub fn dealloc_root<T: DeallocPlugin>(
    name: &'static str,
    description: &'static str,
) -> PluginMod_Ref {
    let m = DeallocMod {
        instantiate: dealloc::instantiate::<T>,
        destroy: destroy::<T>,
        release: dealloc::release::<T>,
        drain: dealloc::drain::<T>,
    }
    .leak_into_prefix();
    let c = Common {
        kind: PluginKind::DEALLOC,
        name,
        description,
        params: T::PARAMS,
    };
    root(c, RNone, RSome(m), RNone, RNone)
}

/// The root module of a throttle plugin of type `T`.
pub fn throttle_root<T: ThrottlePlugin>(
    name: &'static str,
    description: &'static str,
) -> PluginMod_Ref {
    let m = ThrottleMod {
        instantiate: throttle::instantiate::<T>,
        destroy: destroy::<T>,
        raise: throttle::raise::<T>,
        lower: throttle::lower::<T>,
        checkpoint: throttle::checkpoint::<T>,
    }
    .leak_into_prefix();
    let c = Common {
        kind: PluginKind::THROTTLE,
        name,
        description,
        params: T::PARAMS,
    };
    root(c, RNone, RNone, RSome(m), RNone)
}

/// The root module of a GPU-lock plugin of type `T`.
pub fn gpu_lock_root<T: GpuLockPlugin>(
    name: &'static str,
    description: &'static str,
) -> PluginMod_Ref {
    let m = GpuLockMod {
        instantiate: gpu_lock::instantiate::<T>,
        destroy: destroy::<T>,
        acquire: gpu_lock::acquire::<T>,
        release: gpu_lock::release::<T>,
    }
    .leak_into_prefix();
    let c = Common {
        kind: PluginKind::GPU_LOCK,
        name,
        description,
        params: T::PARAMS,
    };
    root(c, RNone, RNone, RNone, RSome(m))
}

/// Exports a plugin: the `cuzk_plugin_header` static and the abi_stable root module.
/// Use once per library; the crate must depend on `abi_stable` itself (the root
/// module attribute names it by path).
///
/// ```text
/// cuzk_plugin_api::export_plugin! {
///     kind: dealloc,
///     name: "bounded",
///     description: "one dealloc thread behind a bounded queue",
///     type: Bounded,
/// }
/// ```
///
/// `kind` is one of `backend`, `dealloc`, `throttle`, `gpu_lock`; `name` must match
/// the library's file name, `libcuzk_plugin_<kind>_<name>.so`.
#[macro_export]
macro_rules! export_plugin {
    (kind: backend, $($rest:tt)*) => {
        $crate::__export_plugin!(BACKEND, backend_root, $($rest)*);
    };
    (kind: dealloc, $($rest:tt)*) => {
        $crate::__export_plugin!(DEALLOC, dealloc_root, $($rest)*);
    };
    (kind: throttle, $($rest:tt)*) => {
        $crate::__export_plugin!(THROTTLE, throttle_root, $($rest)*);
    };
    (kind: gpu_lock, $($rest:tt)*) => {
        $crate::__export_plugin!(GPU_LOCK, gpu_lock_root, $($rest)*);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_plugin {
    ($kind:ident, $root:ident, name: $name:expr, description: $desc:expr, type: $ty:ty $(,)?) => {
        /// Read by the host before anything else (see `cuzk_plugin_api::PluginHeader`).
        #[export_name = "cuzk_plugin_header"]
        pub static CUZK_PLUGIN_HEADER: $crate::PluginHeader =
            $crate::PluginHeader::new($crate::PluginKind::$kind);

        /// The root module; also callable in-process by the plugin's own tests.
        #[::abi_stable::export_root_module]
        pub fn cuzk_plugin_root() -> $crate::PluginMod_Ref {
            $crate::export::$root::<$ty>($name, $desc)
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_panics_and_errors_into_values() {
        assert_eq!(guard(|| Ok(3)), RResult::ROk(3));
        let e = guard::<()>(|| Err(AbiError::device("no device"))).unwrap_err();
        assert_eq!(e.code, ErrorCode::DEVICE);
        let e = guard::<()>(|| panic!("boom {}", 7)).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (ErrorCode::PANIC, "boom 7"));
        let e = guard::<()>(|| std::panic::panic_any(5u8)).unwrap_err();
        assert_eq!(e.code, ErrorCode::PANIC);
    }
}
