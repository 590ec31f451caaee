//! The CUDA backend's settings, typed: [`CudaConfig`] for the production knobs and
//! [`CudaTuning`] for the experiment knobs of the MSM. Both deserialize with unknown
//! keys and unknown values refused (`ntt_kernel = "r2wx"` is an error that lists
//! `r2wf`, `r2wg`), from a TOML table or from the `cuda` plugin's parameters
//! (`[backend.params]` of `cuzk.toml`, a flat string map: [`CudaConfig::from_params`]),
//! so that every knob of a run is in its configuration, in its manifest, and
//! comparable by `cuzk ab`. No environment variable tunes this crate.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::CudaError;
use crate::ntt::NttKernel;
use crate::BasePlacement;

/// Settings of a [`crate::CudaBackend`] (the `cuda` plugin's parameters).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CudaConfig {
    /// CUDA device ordinal.
    pub device: usize,
    /// Device memory (GiB) left alone (other processes, driver, fragmentation): the
    /// backend plans partitions to fit in the free memory at start minus this.
    pub reserve_gib: u64,
    /// 0: the device's own memory. N: the backend plans as on a card of N GiB
    /// (its free memory at start the card's N GiB less what the context took
    /// here, less `reserve_gib`), if that is less: a smaller card emulated on a
    /// larger one, for the rows of issue 33's table.
    pub device_memory_gib: u64,
    /// 0: parameter bases resident where they fit, streamed from host memory where
    /// they do not; N: always streamed, in chunks of N points (a GPU smaller than
    /// the parameters, the streaming path's checks, the A/B against resident).
    pub stream_chunk: usize,
    /// Host threads copying streamed bases into the pinned staging buffers, and
    /// staged witnesses into theirs (at most the host's cores; 1 copies on the
    /// calling thread).
    pub copy_threads: usize,
    /// How a witness is staged before the GPU lock: `copy` (the default) copies it
    /// into page-locked buffers the backend keeps (`backend/witness_copy.rs`),
    /// `register` page-locks the caller's memory in place (unlocked after the call).
    pub witness_staging: WitnessStaging,
    /// How streamed bases go up: `register` (the default) page-locks each streamed
    /// parameter set in place once (`cuMemHostRegister`, kept until the set is
    /// freed) and DMAs its chunks straight from it, so no host copy bounds the
    /// stream; `copy` copies each chunk into the backend's two page-locked staging
    /// buffers first (no parameter memory locked; the host copy, ~23-30 GB/s on
    /// the H200's host, is then the stream's bound).
    pub stream_staging: StreamStaging,
    /// How a partition's split data (ones bitmaps, tail terms) go up when its bases
    /// are resident: `pinned` (the default) through a page-locked buffer the backend
    /// keeps, L's ones started once its bitmap is in and the rest uploaded while
    /// they run; `pageable` straight from the caller's memory, every bitmap before
    /// the first kernel.
    pub split_upload: SplitUpload,
    /// How a host thread waits for the device: `auto` (CUDA's choice, which spins
    /// while the process has fewer contexts than the host has cores: always here),
    /// `spin`, `yield`, or `block` (sleeps until the device is done, leaving the
    /// core to synthesis). Sets the context's scheduling flag and makes the events
    /// the backend waits on blocking ones.
    pub host_wait: HostWait,
    /// The NTT pass kernel: `r2wg` (fastest; a table of N/2 roots per size, 2 GiB at
    /// 2^27) or `r2wf` (no such table).
    pub ntt_kernel: NttKernel,
    /// Whether the backend offers the B query in G2 (the scheduler's
    /// `b_g2_on_backend` hands it over only where it is offered).
    pub g2: bool,
    /// Per-phase device times of every partition and MSM, recorded with CUDA events
    /// (no synchronisation added) and logged.
    pub profile: bool,
    /// Where compiled kernels are kept between processes (default
    /// `$XDG_CACHE_HOME/cuzk/kernels`, else `~/.cache/cuzk/kernels`).
    pub kernel_cache_dir: Option<PathBuf>,
    /// A folder of staged kernels looked in before the cache (the plugin sets it to
    /// `kernels/` beside its `.so`; `kernels/` beside the executable is always
    /// looked in). Not a configuration key: where the code was loaded from.
    #[serde(skip)]
    pub staged_kernels_dir: Option<PathBuf>,
    /// The MSM's experiment knobs.
    pub tuning: CudaTuning,
}

impl Default for CudaConfig {
    fn default() -> Self {
        Self {
            device: 0,
            reserve_gib: 2,
            device_memory_gib: 0,
            stream_chunk: 0,
            copy_threads: 8,
            witness_staging: WitnessStaging::Copy,
            stream_staging: StreamStaging::Register,
            split_upload: SplitUpload::Pinned,
            host_wait: HostWait::Auto,
            ntt_kernel: NttKernel::DEFAULT,
            g2: true,
            profile: false,
            kernel_cache_dir: None,
            staged_kernels_dir: None,
            tuning: CudaTuning::default(),
        }
    }
}

/// How [`crate::CudaBackend`] streams bases that are not resident
/// ([`CudaConfig::stream_staging`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamStaging {
    /// The streamed parameter sets page-locked in place, chunks DMA'd from them.
    #[default]
    Register,
    /// Chunks copied into two page-locked staging buffers, then DMA'd.
    Copy,
}

/// How [`crate::CudaBackend`] uploads a partition's split data
/// ([`CudaConfig::split_upload`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SplitUpload {
    /// Copied by the backend's threads into a page-locked buffer it keeps (up to
    /// 1 GiB of split data; larger ones go as `pageable`), before the GPU lock
    /// where the engine stages them (`stage_splits`), then uploaded by
    /// asynchronous DMAs: the enqueuing thread waits for no copy, and the device
    /// starts on L's ones once its bitmap is in.
    #[default]
    Pinned,
    /// Uploaded from the caller's (pageable) memory: each copy holds the enqueuing
    /// thread while the driver stages it.
    Pageable,
}

/// How a host thread waits for the device ([`CudaConfig::host_wait`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostWait {
    /// CUDA's heuristic (`CU_CTX_SCHED_AUTO`): spin while the process has fewer
    /// active contexts than the host has cores.
    #[default]
    Auto,
    /// Busy-wait (`CU_CTX_SCHED_SPIN`): the lowest latency, a core per waiting
    /// thread.
    Spin,
    /// Busy-wait, yielding the core between polls (`CU_CTX_SCHED_YIELD`).
    Yield,
    /// Sleep on an OS primitive (`CU_CTX_SCHED_BLOCKING_SYNC`, and events made
    /// with `CU_EVENT_BLOCKING_SYNC`): the waiting thread's core is free for the
    /// host's other work, at some microseconds a wake-up.
    Block,
}

/// How [`crate::CudaBackend`] stages a witness before the GPU lock
/// ([`CudaConfig::witness_staging`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WitnessStaging {
    /// Page-lock the caller's memory in place (`cuMemHostRegister`), undone after
    /// the call: no memory beyond the witness, but ~2 s of driver work a 4.2 GB
    /// witness (32 GiB PoRep) that holds a GPU worker.
    Register,
    /// Copy it into page-locked buffers the backend keeps: no driver call per
    /// partition, a parallel memcpy instead; the buffers (one a GPU worker) count
    /// as the backend's pinned host memory. The default: on the H200 at the 32 GiB
    /// PoRep shape, 15.06 s/proof steady against 17.28 with `register`, same visit
    /// (BENCHMARKS.md, 2026-12-03).
    #[default]
    Copy,
}

/// The MSM's experiment knobs: defaults measured on the H200 (NOTES.md); a value
/// outside the allowed ones is an error, never a silent default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CudaTuning {
    /// G1's bucket sums: `affine` (batch-affine rounds, then XYZZ levels) or `calls`
    /// (XYZZ levels only).
    pub msm_sum: crate::msm::SumVariant,
    /// G2's bucket sums (the B query in G2), `affine` or `calls` likewise.
    pub msm_sum_g2: crate::msm::SumVariant,
    /// Fewest pairs per thread for which a batch-affine round runs (the rest goes
    /// to the XYZZ levels). 1 makes every round affine.
    pub ba_min_per: u64,
    /// Log2 of the most sorted entries in one window group of the batch-affine sums
    /// (10..=30).
    pub ba_group_log: u32,
    /// Waves of threads per batch-affine round (1..=16).
    pub ba_waves: u64,
    /// The scatter's launches: `auto` (a window each where the cursors exceed 8 MB),
    /// `window` or `all`.
    pub scatter: crate::msm::Scatter,
}

impl Default for CudaTuning {
    fn default() -> Self {
        Self {
            msm_sum: crate::msm::SumVariant::BatchAffine,
            msm_sum_g2: crate::msm::SumVariant::BatchAffine,
            ba_min_per: crate::msm::BA_MIN_PER,
            ba_group_log: crate::msm::BA_GROUP_LOG,
            ba_waves: 1,
            scatter: crate::msm::Scatter::Auto,
        }
    }
}

impl CudaTuning {
    /// The keys of this struct, which the plugin's flat parameters route here.
    pub const KEYS: [&'static str; 6] = [
        "msm_sum",
        "msm_sum_g2",
        "ba_min_per",
        "ba_group_log",
        "ba_waves",
        "scatter",
    ];

    /// Refuses values outside their ranges.
    pub fn validate(&self) -> Result<(), CudaError> {
        let bad = |what: String| Err(CudaError::Config(what));
        if self.ba_min_per == 0 {
            return bad("ba_min_per must be at least 1".into());
        }
        if !(10..=30).contains(&self.ba_group_log) {
            return bad(format!(
                "ba_group_log = {} is not in 10..=30",
                self.ba_group_log
            ));
        }
        if !(1..=16).contains(&self.ba_waves) {
            return bad(format!("ba_waves = {} is not in 1..=16", self.ba_waves));
        }
        Ok(())
    }
}

impl CudaConfig {
    /// Reads the `cuda` plugin's parameters (`key = value` text, as `cuzk.toml`'s
    /// `[backend.params]` gives them): each value is read as a TOML value where it
    /// is one (numbers, booleans) and as a string otherwise; [`CudaTuning::KEYS`]
    /// go to `tuning`. Unknown keys and values are errors naming them.
    pub fn from_params<'a>(
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, CudaError> {
        let mut top = toml::Table::new();
        let mut tuning = toml::Table::new();
        for (key, text) in params {
            let value = format!("v = {text}")
                .parse::<toml::Table>()
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(text.to_owned()));
            let table = if CudaTuning::KEYS.contains(&key) {
                &mut tuning
            } else {
                &mut top
            };
            if table.insert(key.to_owned(), value).is_some() {
                return Err(CudaError::Config(format!(
                    "parameter `{key}` is given twice"
                )));
            }
        }
        if !tuning.is_empty() {
            top.insert("tuning".into(), toml::Value::Table(tuning));
        }
        let config: Self = toml::Value::Table(top)
            .try_into()
            .map_err(|e: toml::de::Error| {
                CudaError::Config(format!("cuda backend parameters: {}", e.message()))
            })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads a TOML table of these settings (`[backend.params]`-shaped, with an
    /// optional `[tuning]` table).
    pub fn from_toml(text: &str) -> Result<Self, CudaError> {
        let config: Self = toml::from_str(text)
            .map_err(|e| CudaError::Config(format!("cuda backend settings: {}", e.message())))?;
        config.validate()?;
        Ok(config)
    }

    /// Refuses values outside their ranges.
    pub fn validate(&self) -> Result<(), CudaError> {
        if self.copy_threads == 0 {
            return Err(CudaError::Config("copy_threads must be at least 1".into()));
        }
        self.tuning.validate()
    }

    /// Where the bases live: resident where they fit, or always streamed.
    pub fn bases(&self) -> BasePlacement {
        match self.stream_chunk {
            0 => BasePlacement::Auto,
            n => BasePlacement::Streamed { chunk_bases: n },
        }
    }

    /// Device bytes left alone.
    pub fn reserve_bytes(&self) -> u64 {
        self.reserve_gib << 30
    }

    /// Bytes of device memory the backend plans with on a device of `total` bytes
    /// with `free` free when it opened: free less the reserve or, with
    /// `device_memory_gib`, what a card of that size would have free (its size
    /// less what is taken here already) less the reserve, the smaller.
    pub fn device_budget(&self, total: u64, free: u64) -> u64 {
        let own = free.saturating_sub(self.reserve_bytes());
        match self.device_memory_gib {
            0 => own,
            gib => {
                let taken = total.saturating_sub(free);
                own.min(
                    (gib << 30)
                        .saturating_sub(taken)
                        .saturating_sub(self.reserve_bytes()),
                )
            }
        }
    }

    /// The kernel cache these settings describe.
    pub fn kernel_cache(&self) -> crate::KernelCache {
        let cache = crate::KernelCache::new(self.kernel_cache_dir.as_deref());
        match &self.staged_kernels_dir {
            Some(d) => cache.with_staged(d.clone()),
            None => cache,
        }
    }

    /// Every key with its value, for logs and manifests (`tuning` keys flat, as the
    /// plugin takes them).
    pub fn to_params(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut push = |table: toml::Table| {
            for (k, v) in table {
                match v {
                    toml::Value::Table(t) => {
                        for (k, v) in t {
                            out.push((k, text(v)));
                        }
                    }
                    v => out.push((k, text(v))),
                }
            }
        };
        if let Ok(toml::Value::Table(t)) = toml::Value::try_from(self) {
            push(t);
        }
        out
    }
}

fn text(v: toml::Value) -> String {
    match v {
        toml::Value::String(s) => s,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_parameters_are_typed_and_unknowns_are_errors() {
        let c = CudaConfig::from_params([
            ("ntt_kernel", "r2wf"),
            ("stream_chunk", "4096"),
            ("g2", "false"),
            ("msm_sum", "calls"),
            ("msm_sum_g2", "calls"),
            ("ba_waves", "2"),
            ("kernel_cache_dir", "/tmp/k"),
            ("witness_staging", "register"),
            ("stream_staging", "copy"),
            ("split_upload", "pageable"),
            ("host_wait", "block"),
        ])
        .unwrap();
        assert_eq!(c.host_wait, HostWait::Block);
        assert_eq!(CudaConfig::default().host_wait, HostWait::Auto);
        assert_eq!(c.witness_staging, WitnessStaging::Register);
        assert_eq!(c.stream_staging, StreamStaging::Copy);
        assert_eq!(
            CudaConfig::default().stream_staging,
            StreamStaging::Register
        );
        assert_eq!(c.split_upload, SplitUpload::Pageable);
        assert_eq!(CudaConfig::default().witness_staging, WitnessStaging::Copy);
        assert_eq!(c.ntt_kernel, NttKernel::Radix2WarpFast);
        assert_eq!(c.bases(), BasePlacement::Streamed { chunk_bases: 4096 });
        assert!(!c.g2);
        assert_eq!(c.tuning.msm_sum, crate::msm::SumVariant::CalledProducts);
        assert_eq!(c.tuning.msm_sum_g2, crate::msm::SumVariant::CalledProducts);
        assert_eq!(c.tuning.ba_waves, 2);
        assert_eq!(c.kernel_cache_dir, Some(PathBuf::from("/tmp/k")));
        assert_eq!(CudaConfig::from_params([]).unwrap(), CudaConfig::default());
        // A misspelt value names the allowed ones; a misspelt key is refused.
        let e = CudaConfig::from_params([("ntt_kernel", "r2wx")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("r2wx") && e.contains("r2wf") && e.contains("r2wg"),
            "{e}"
        );
        let e = CudaConfig::from_params([("msm_sum", "inline")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("inline") && e.contains("affine") && e.contains("calls"),
            "{e}"
        );
        let e = CudaConfig::from_params([("witness_staging", "pin")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pin") && e.contains("register") && e.contains("copy"),
            "{e}"
        );
        let e = CudaConfig::from_params([("host_wait", "sleep")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("sleep") && e.contains("block"), "{e}");
        let e = CudaConfig::from_params([("ntt_kernal", "r2wf")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ntt_kernal"), "{e}");
        let e = CudaConfig::from_params([("ba_group_log", "40")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ba_group_log"), "{e}");
        let e = CudaConfig::from_params([("device", "first")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("device") || e.contains("first"), "{e}");
    }

    /// The shipped configurations that use the `cuda` plugin give it parameters it
    /// accepts (an unknown key or value there would fail only on the GPU machine).
    #[test]
    fn the_shipped_cuda_configurations_parameters_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let doc: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let Some(backend) = doc.get("backend").and_then(|b| b.as_table()) else {
                continue;
            };
            if backend.get("plugin").and_then(|p| p.as_str()) != Some("cuda") {
                continue;
            }
            let params: Vec<(String, String)> = backend
                .get("params")
                .and_then(|p| p.as_table())
                .map(|t| {
                    t.iter()
                        .map(|(k, v)| (k.clone(), text(v.clone())))
                        .collect()
                })
                .unwrap_or_default();
            let c = CudaConfig::from_params(params.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            seen.push((path.file_name().unwrap().to_string_lossy().into_owned(), c));
        }
        let copy = seen
            .iter()
            .find(|(name, _)| name == "cuda-copy.toml")
            .expect("configs/cuda-copy.toml");
        assert_eq!(copy.1.witness_staging, WitnessStaging::Copy);
        let register = seen
            .iter()
            .find(|(name, _)| name == "cuda-register.toml")
            .expect("configs/cuda-register.toml");
        assert_eq!(register.1.witness_staging, WitnessStaging::Register);
        let block = seen
            .iter()
            .find(|(name, _)| name == "cuda-block.toml")
            .expect("configs/cuda-block.toml");
        assert_eq!(block.1.host_wait, HostWait::Block);
        assert!(seen.len() >= 4, "{seen:?}");
    }

    #[test]
    fn to_params_round_trips_through_from_params() {
        let c = CudaConfig {
            ntt_kernel: NttKernel::Radix2WarpFast,
            witness_staging: WitnessStaging::Copy,
            kernel_cache_dir: Some("/var/cache/k".into()),
            tuning: CudaTuning {
                scatter: crate::msm::Scatter::Window,
                ..CudaTuning::default()
            },
            ..CudaConfig::default()
        };
        let params = c.to_params();
        assert!(
            params.iter().any(|(k, v)| k == "scatter" && v == "window"),
            "{params:?}"
        );
        let back =
            CudaConfig::from_params(params.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
        assert_eq!(back, c);
    }

    /// `device_memory_gib` emulates a smaller card: what it would have free, less
    /// the reserve; never more than this device's own.
    #[test]
    fn device_memory_gib_plans_as_a_smaller_card() {
        let (total, free) = (80u64 << 30, 79u64 << 30);
        let own = CudaConfig::default();
        assert_eq!(own.device_budget(total, free), 77 << 30);
        let small = CudaConfig::from_params([("device_memory_gib", "16")]).unwrap();
        assert_eq!(small.device_budget(total, free), 13 << 30);
        let big = CudaConfig::from_params([("device_memory_gib", "200")]).unwrap();
        assert_eq!(big.device_budget(total, free), 77 << 30);
    }

    /// Knobs are a configuration's own: setting them on one `CudaConfig` (and
    /// deriving its backend's launch parameters) leaves a second's defaults.
    #[test]
    fn a_knob_set_on_one_config_leaves_anothers_defaults() {
        let mut one = CudaConfig::default();
        let two = CudaConfig::default();
        one.profile = true;
        one.tuning.msm_sum = crate::msm::SumVariant::CalledProducts;
        one.tuning.ba_waves = 8;
        let from_params =
            CudaConfig::from_params([("ba_min_per", "1"), ("profile", "true")]).unwrap();
        let (t1, t2) = (
            crate::Tuning::from_config(&one),
            crate::Tuning::from_config(&two),
        );
        assert_eq!(two, CudaConfig::default());
        assert_eq!(two.tuning, CudaTuning::default());
        assert_eq!(CudaConfig::from_params([]).unwrap(), CudaConfig::default());
        assert_eq!(from_params.tuning.ba_min_per, 1);
        assert_eq!(t1.msm.ba_waves(), 8);
        assert_eq!(t2.msm, crate::msm::MsmTuning::default());
        assert!(t1.profiler.enabled() && !t2.profiler.enabled());
    }

    #[test]
    fn a_toml_table_with_a_tuning_table_reads_too() {
        let c = CudaConfig::from_toml("device = 1\n[tuning]\nscatter = \"all\"\n").unwrap();
        assert_eq!(c.device, 1);
        assert_eq!(c.tuning.scatter, crate::msm::Scatter::All);
        assert!(CudaConfig::from_toml("[tuning]\nwaves = 2\n").is_err());
    }
}
