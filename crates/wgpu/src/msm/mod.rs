//! The G1 multi-scalar multiplication `sum_i s_i P_i` on a wgpu device, in WGSL.
//!
//! # Algorithm
//!
//! Pippenger with signed digits, every step but the last few additions on the GPU:
//!
//! 1. **Digits** (`msm_digits.wgsl`): each scalar is cut into `W = ceil(256 / c)`
//!    windows of `c` bits, each digit moved into `[-2^(c-1), 2^(c-1)]` with a carry
//!    into the next window, so a window needs only `2^(c-1)` buckets and a
//!    negative digit adds the negated base (`(x, -y)`, free in affine). `c` is
//!    chosen from the number of terms ([`MsmConfig::window_bits`] overrides it).
//! 2. **Sort** (`msm_digits.wgsl`, `msm_scan.wgsl`): a counting sort of the (bucket,
//!    base) entries by bucket: a histogram (one atomic add an entry, spread over
//!    all buckets of the windows in flight), a scan of the counts, and a scatter.
//! 3. **Bucket sums** (`msm_segments.wgsl`): every thread adds up a fixed run of
//!    64 sorted entries (affine bases into an XYZZ accumulator, mixed addition),
//!    whatever the digits look like: one bucket holding all the entries (all
//!    scalars equal, or the ones of a split) costs the same as an even spread.
//!    Runs inside a thread's range are whole buckets and go straight to the
//!    bucket (a store for the first chunk of bases, an addition for later ones);
//!    the first and last runs of every range are written out as partial sums, a
//!    list again sorted by bucket, reduced the same way (32 a thread) until one
//!    range is left. No atomics on points, and no thread waits on a long bucket.
//! 4. **Window sums** (`msm_reduce.wgsl`): `sum_d d S_d` per window, each thread
//!    taking 16 buckets (running sums plus one double-and-add by its offset), then
//!    sums of 16 partials at a time until one point a window is left.
//! 5. **Host**: the `W` window sums are read back and combined by Horner's rule
//!    (`c` doublings a window) with blstrs.
//!
//! A split MSM ([`G1Msm::split_msm`]) runs the same passes: the tail's scalars
//! index their bases, and each set bit of the ones bitmap becomes an entry in
//! window 0's bucket for digit 1 (step 3 keeps that large bucket balanced).
//!
//! # API
//!
//! Everything takes the caller's `&wgpu::Device` and `&wgpu::Queue`; there is no
//! device context here.
//!
//! - [`G1Msm::new`] / [`G1Msm::with_config`] build the pipelines of one device
//!   (lavapipe takes tens of seconds; build once), [`G1Msm::configured`] the
//!   same pipelines with other settings.
//! - [`G1Msm::upload`] converts and uploads bases once: [`DeviceBases`], resident
//!   until dropped ([`DeviceBases::bytes`] says how much device memory).
//! - [`G1Msm::msm`]: canonical little-endian `[u64; 4]` scalars over the first
//!   `scalars.len()` bases; [`G1Msm::msm_scalars`]: blstrs `Scalar`s, converted
//!   from Montgomery form on the device; [`G1Msm::split_msm`]: a
//!   [`SplitRef`].
//!
//! Calls block until the result is read back; they do not synchronise with
//! other work the caller submits to the same queue beyond queue order.
//!
//! # Layout
//!
//! Fp (`fp.wgsl`) is 12 little-endian u32 limbs in Montgomery form with
//! `R = 2^384`: the same integers as blst's six u64 limbs, so bases upload as
//! blst holds them, and results read back without conversion. Multiplication is
//! CIOS with the spare-bit shortcut. A 32x32-bit word product is a u64 product
//! where the device was created with `Features::SHADER_INT64` (Vulkan's
//! shaderInt64: NVIDIA, AMD, lavapipe), else four 16x16-bit ones (core WGSL has
//! no 64-bit integers and no mul-hi): [`MsmConfig::int64_products`]. Points are affine
//! `(x, y)` (24 words; blst's infinity `(0, 0)`) for bases and XYZZ
//! `(X, Y, ZZ, ZZZ)` (48 words; infinity when `ZZ = 0`) for sums (`g1.wgsl`);
//! every addition handles infinity, `P + P` and `P + (-P)`. Scalars are
//! canonical little-endian `[u64; 4]`, read as eight u32 words.
//!
//! # Device limits
//!
//! Every buffer stays within `min(max_buffer_size,
//! max_storage_buffer_binding_size)` (and [`MsmConfig::max_buffer_bytes`]):
//!
//! - [`G1Msm::upload`] splits the bases into chunks of at most that many bytes
//!   (a multiple of 64 bases each); an MSM runs its passes chunk by chunk into
//!   the same buckets (a sum is linear in its terms).
//! - The windows are processed in groups, as many at a time as let the sorted
//!   entries, the partial sums and the buckets fit; the groups share buffers.
//! - Dispatches larger than `max_compute_workgroups_per_dimension` workgroups
//!   are laid out in two dimensions; the workgroup size (64 threads unless
//!   [`MsmConfig::workgroup_size`] says otherwise) is a pipeline constant.
//! - No buffer passes 4 GiB (WGSL indexes words with u32), so a chunk holds
//!   at most ~44 M bases and a base index fits 31 bits (the top bit of an entry
//!   is the digit's sign).
//!
//! At 2^24 bases with the adapter's limits (c = 20, 13 windows in one group
//! where a binding may hold 4 GiB) an MSM holds about 4.5 GB of scratch (sorted
//! entries 1.7 GB, partial sums 1.3 GB, buckets 1.3 GB) besides the 1.6 GB of
//! resident bases and the 0.5 GB of scalars; smaller bindings mean more groups
//! and less scratch, not failure.
//!
//! A buffer that cannot be made small enough is [`MsmError::BufferTooBig`];
//! allocation failures, validation failures and a lost device are errors too,
//! caught with wgpu error scopes, never panics. Devices should be created with
//! the adapter's limits (`required_limits: adapter.limits()`): wgpu's defaults
//! cap bindings at 128 MiB.

//! # Performance
//!
//! Measured on lavapipe (Mesa 22.3, LLVM 15, 2 cores shared with other
//! builds): 2^16 in 2.3 s with u64 word products and 5.8 s with 16-bit ones, run
//! one after the other (4-16 s for the latter in other runs, depending on the
//! load); building the pipelines takes lavapipe 20-60 s. Not yet measured on a
//! real GPU: the cost is the Montgomery product (288 word products) and ~10 of
//! them a mixed addition, about 2^24 x 13 additions at 2^24. Code size is kept
//! down on purpose (see `g1.wgsl`): every formula runs around one inlined
//! fp_mul.

mod host;
mod pipelines;
mod plan;
mod run;

use blstrs::{G1Affine, G1Projective, Scalar};
use cuzk_alloc::SplitRef;

#[cfg(target_endian = "big")]
compile_error!("scalars and bases are uploaded as little-endian words");

/// Why an MSM did not run.
#[derive(Debug, thiserror::Error)]
pub enum MsmError {
    #[error("{what} need a {bytes}-byte buffer, over the limit of {limit} bytes")]
    BufferTooBig {
        what: &'static str,
        bytes: u64,
        limit: u64,
    },
    #[error("the GPU ran out of memory: {0}")]
    OutOfMemory(String),
    #[error("the GPU device was lost or failed: {0}")]
    DeviceLost(String),
    #[error("wgpu refused a call: {0}")]
    Device(String),
    #[error("{scalars} scalars for {bases} bases")]
    LengthMismatch { scalars: usize, bases: usize },
    #[error("the split indexes {split} bases, but {bases} bases are uploaded")]
    SplitMismatch { split: usize, bases: usize },
}

/// Settings of one [`G1Msm`].
#[derive(Clone, Debug, Default)]
pub struct MsmConfig {
    /// Window width in bits (2..=20); `None` picks it from the number of terms.
    pub window_bits: Option<u32>,
    /// A cap on every buffer below the device's limits (tests use it to force
    /// chunked bases and window groups on small inputs).
    pub max_buffer_bytes: Option<u64>,
    /// Threads a workgroup (default 64), a pipeline constant: set by
    /// [`G1Msm::with_config`]; [`G1Msm::configured`] keeps the pipelines' own.
    pub workgroup_size: Option<u32>,
    /// A cap on workgroups a dispatch dimension below the device's
    /// `max_compute_workgroups_per_dimension` (tests use it to force 2-D grids).
    pub max_workgroups_per_dimension: Option<u32>,
    /// Word products as u64 (`fp_wide64.wgsl`) rather than from 16-bit halves
    /// (`fp_wide16.wgsl`). `None`: where the device was created with
    /// `Features::SHADER_INT64`; `Some(true)` on a device without it is an
    /// error. Set by [`G1Msm::with_config`]; [`G1Msm::configured`] keeps the
    /// pipelines' own.
    pub int64_products: Option<bool>,
}

/// The MSM pipelines of one device.
pub struct G1Msm {
    pipelines: pipelines::Pipelines,
    config: MsmConfig,
}

impl std::fmt::Debug for G1Msm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("G1Msm")
            .field("config", &self.config)
            .finish()
    }
}

/// One chunk of uploaded bases.
pub(crate) struct BaseChunk {
    buffer: wgpu::Buffer,
    /// Index of the chunk's first base (a multiple of 64).
    first: usize,
    len: usize,
}

/// Bases resident on the device, in the device layout, in one or more buffers.
/// Valid with the device (and any [`G1Msm`] on it) that uploaded them.
pub struct DeviceBases {
    chunks: Vec<BaseChunk>,
    len: usize,
}

impl std::fmt::Debug for DeviceBases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBases")
            .field("len", &self.len)
            .field("chunks", &self.chunks.len())
            .finish()
    }
}

impl DeviceBases {
    /// How many bases.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many buffers hold them.
    pub fn chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Device memory they hold, in bytes (freed when they are dropped).
    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.buffer.size()).sum()
    }
}

/// Bases converted and written a piece at a time.
const UPLOAD_PIECE: usize = 1 << 16;

impl G1Msm {
    /// The pipelines for `device`, with the default [`MsmConfig`].
    pub fn new(device: &wgpu::Device) -> Result<Self, MsmError> {
        Self::with_config(device, MsmConfig::default())
    }

    /// The pipelines for `device`, with `config`.
    pub fn with_config(device: &wgpu::Device, config: MsmConfig) -> Result<Self, MsmError> {
        let workgroup = config.workgroup_size.unwrap_or(64);
        let most = device.limits().max_compute_invocations_per_workgroup;
        if workgroup == 0 || workgroup > most.min(1024) {
            return Err(MsmError::Device(format!(
                "a workgroup of {workgroup} threads (this device allows 1..={most})"
            )));
        }
        let has_int64 = device.features().contains(wgpu::Features::SHADER_INT64);
        let int64 = config.int64_products.unwrap_or(has_int64);
        if int64 && !has_int64 {
            return Err(MsmError::Device(
                "u64 word products need a device created with Features::SHADER_INT64".into(),
            ));
        }
        let pipelines = run::scoped(device, || {
            Ok(pipelines::Pipelines::new(device, workgroup, int64))
        })?;
        Ok(Self { pipelines, config })
    }

    /// The same pipelines (no compilation) with another `config`.
    pub fn configured(&self, config: MsmConfig) -> Self {
        Self {
            pipelines: self.pipelines.clone(),
            config,
        }
    }

    /// How dispatches are laid out on `device`.
    fn grid(&self, device: &wgpu::Device) -> run::Grid {
        let most = device.limits().max_compute_workgroups_per_dimension;
        run::Grid {
            max_dim: self
                .config
                .max_workgroups_per_dimension
                .map_or(most, |cap| cap.clamp(1, most)),
            workgroup: self.pipelines.workgroup,
        }
    }

    /// The largest buffer this MSM makes on `device`.
    fn limit(&self, device: &wgpu::Device) -> u64 {
        let l = device.limits();
        // WGSL indexes u32 words with u32 and the kernels scale indices (a base
        // is 24 words): no binding past 4 GiB whatever the device allows.
        let mut limit = l
            .max_buffer_size
            .min(l.max_storage_buffer_binding_size)
            .min(u64::from(u32::MAX) & !3);
        if let Some(cap) = self.config.max_buffer_bytes {
            limit = limit.min(cap);
        }
        limit
    }

    /// Uploads `bases` once, converted to the device layout; they stay resident
    /// until the returned value is dropped.
    pub fn upload(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        bases: &[G1Affine],
    ) -> Result<DeviceBases, MsmError> {
        let _span = tracing::info_span!("wgpu_upload_bases", n = bases.len()).entered();
        let bytes = (host::AFFINE_WORDS * 4) as u64;
        let limit = self.limit(device);
        // A multiple of 64 bases (the ones bitmap's words), and 31-bit indices.
        let per_chunk = ((limit / bytes) as usize / 64 * 64).min(1 << 31);
        if per_chunk == 0 && !bases.is_empty() {
            return Err(MsmError::BufferTooBig {
                what: "64 bases",
                bytes: 64 * bytes,
                limit,
            });
        }
        run::scoped(device, || {
            let mut chunks = Vec::new();
            let mut words = Vec::new();
            let mut staged = 0;
            for (k, chunk) in bases.chunks(per_chunk.max(1)).enumerate() {
                let buffer = run::storage(device, "msm bases", chunk.len() as u64 * bytes);
                for (j, piece) in chunk.chunks(UPLOAD_PIECE).enumerate() {
                    words.clear();
                    host::affine_words(piece, &mut words);
                    let at = (j * UPLOAD_PIECE) as u64 * bytes;
                    queue.write_buffer(&buffer, at, bytemuck::cast_slice(&words));
                    // Staged writes are held in host memory until a submission.
                    staged += words.len() * 4;
                    if staged >= run::FLUSH_BYTES {
                        queue.submit([]);
                        staged = 0;
                    }
                }
                chunks.push(BaseChunk {
                    buffer,
                    first: k * per_chunk,
                    len: chunk.len(),
                });
            }
            queue.submit([]);
            Ok(DeviceBases {
                chunks,
                len: bases.len(),
            })
        })
    }

    /// `sum_i scalars[i] bases[i]` over the first `scalars.len()` bases (the H
    /// MSM has one base more than scalars); scalars are canonical little-endian
    /// limbs. More scalars than bases is an error.
    pub fn msm(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        bases: &DeviceBases,
        scalars: &[[u64; 4]],
    ) -> Result<G1Projective, MsmError> {
        if scalars.len() > bases.len {
            return Err(MsmError::LengthMismatch {
                scalars: scalars.len(),
                bases: bases.len,
            });
        }
        let _span = tracing::info_span!("wgpu_g1_msm", n = scalars.len()).entered();
        self.dense(device, queue, bases, scalars, false)
    }

    /// [`G1Msm::msm`] for blstrs scalars: their Montgomery limbs are uploaded as
    /// they are and converted on the device (on the host, `to_bytes_le` costs
    /// ~30 ns a scalar: half a second of one core at 2^24).
    pub fn msm_scalars(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        bases: &DeviceBases,
        scalars: &[Scalar],
    ) -> Result<G1Projective, MsmError> {
        if scalars.len() > bases.len {
            return Err(MsmError::LengthMismatch {
                scalars: scalars.len(),
                bases: bases.len,
            });
        }
        let _span = tracing::info_span!("wgpu_g1_msm", n = scalars.len()).entered();
        let raw: Vec<[u64; 4]> = scalars.iter().map(|s| blst::blst_fr::from(*s).l).collect();
        self.dense(device, queue, bases, &raw, true)
    }

    fn dense(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        bases: &DeviceBases,
        scalars: &[[u64; 4]],
        montgomery: bool,
    ) -> Result<G1Projective, MsmError> {
        let terms: Vec<run::ChunkTerms<'_>> = bases
            .chunks
            .iter()
            .filter(|c| c.first < scalars.len())
            .map(|c| run::ChunkTerms {
                chunk: c,
                scalars: &scalars[c.first..(c.first + c.len).min(scalars.len())],
                indices: None,
                ones: None,
                montgomery,
            })
            .collect();
        let most = terms.iter().map(|t| t.scalars.len()).max().unwrap_or(0) as u64;
        let plan = plan::Plan::new(
            scalars.len() as u64,
            most,
            0,
            self.config.window_bits,
            self.limit(device),
        )?;
        run::run(
            device,
            queue,
            &self.pipelines,
            self.grid(device),
            &plan,
            &terms,
        )
    }

    /// The engine's split form: the bases whose bit is set in the ones bitmap
    /// summed, plus `sum_k tail_scalars[k] bases[tail_indices[k]]`.
    pub fn split_msm(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        bases: &DeviceBases,
        split: SplitRef<'_>,
    ) -> Result<G1Projective, MsmError> {
        if split.num_bases() != bases.len {
            return Err(MsmError::SplitMismatch {
                split: split.num_bases(),
                bases: bases.len,
            });
        }
        let _span = tracing::info_span!(
            "wgpu_g1_split_msm",
            n = split.num_bases(),
            tail = split.tail_indices().len()
        )
        .entered();
        let (idx, sc, ones) = (
            split.tail_indices(),
            split.tail_scalars(),
            split.ones_words(),
        );
        let mut terms = Vec::with_capacity(bases.chunks.len());
        let (mut most_tail, mut most_ones) = (0u64, 0u64);
        for c in &bases.chunks {
            let lo = idx.partition_point(|&i| (i as usize) < c.first);
            let hi = idx.partition_point(|&i| (i as usize) < c.first + c.len);
            let words = &ones[c.first / 64..(c.first + c.len).div_ceil(64)];
            let set: u64 = words.iter().map(|w| u64::from(w.count_ones())).sum();
            most_tail = most_tail.max((hi - lo) as u64);
            most_ones = most_ones.max(set);
            terms.push(run::ChunkTerms {
                chunk: c,
                scalars: &sc[lo..hi],
                indices: Some(&idx[lo..hi]),
                ones: Some((words, set)),
                montgomery: false,
            });
        }
        let plan = plan::Plan::new(
            idx.len() as u64,
            most_tail,
            most_ones,
            self.config.window_bits,
            self.limit(device),
        )?;
        run::run(
            device,
            queue,
            &self.pipelines,
            self.grid(device),
            &plan,
            &terms,
        )
    }
}

/// The WGSL of Fp and G1 arithmetic and the host conversions, for tests that
/// check them with small kernels of their own. Not part of the API.
#[doc(hidden)]
pub mod testing {
    pub const G1_WGSL: &str = super::pipelines::G1_WGSL;

    /// fp.wgsl with its word products: u64 (`int64`) or 16-bit halves.
    pub fn fp_wgsl(int64: bool) -> String {
        use super::pipelines::{FP_WGSL, FP_WIDE16_WGSL, FP_WIDE64_WGSL};
        let wide = if int64 {
            FP_WIDE64_WGSL
        } else {
            FP_WIDE16_WGSL
        };
        format!("{FP_WGSL}{wide}")
    }

    /// Whether `msm` multiplies words as u64.
    pub fn uses_int64(msm: &super::G1Msm) -> bool {
        msm.pipelines.int64
    }

    /// Bases in the device layout: 24 words each.
    pub fn affine_words(bases: &[blstrs::G1Affine]) -> Vec<u32> {
        let mut out = Vec::new();
        super::host::affine_words(bases, &mut out);
        out
    }

    /// The point 48 words of XYZZ stand for (`None`: not a point).
    pub fn xyzz_to_projective(words: &[u32]) -> Option<blstrs::G1Projective> {
        super::host::xyzz_to_projective(words)
    }

    pub use super::run::block_on;
}
