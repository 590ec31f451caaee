//! The compiled WGSL kernels and a small recorder of dispatches.
//!
//! Kernels are compiled once per backend (naga validates WGSL; the driver compiles
//! its output, ~0.1 s on lavapipe). A sequence of dispatches (a transform is one per
//! stage and chunk) is recorded as [`Op`]s, then encoded into one compute pass and
//! one submission: wgpu orders the dispatches that share a buffer.

use crate::context::{block_on, Context};
use crate::WgpuError;

/// The WGSL source: the word products (`int64`: u64 products, else 16-bit
/// halves), the field, then the NTT's kernels.
fn source(int64: bool) -> String {
    let wide = if int64 {
        include_str!("../shaders/fp_wide64.wgsl")
    } else {
        include_str!("../shaders/fp_wide16.wgsl")
    };
    [
        wide,
        include_str!("../shaders/fr.wgsl"),
        include_str!("../shaders/ntt.wgsl"),
    ]
    .join("\n")
}

/// Invocations per workgroup (`WG` in `ntt.wgsl`).
const WORKGROUP: u32 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    DifInChunk,
    DitInChunk,
    DifCross,
    DitCross,
    Scale,
    Pointwise,
    Difference,
    FrOps,
    DifBlock,
    DitBlock,
}

impl Kernel {
    const ALL: [Kernel; 10] = [
        Kernel::DifInChunk,
        Kernel::DitInChunk,
        Kernel::DifCross,
        Kernel::DitCross,
        Kernel::Scale,
        Kernel::Pointwise,
        Kernel::Difference,
        Kernel::FrOps,
        Kernel::DifBlock,
        Kernel::DitBlock,
    ];

    fn entry(self) -> &'static str {
        match self {
            Kernel::DifInChunk => "dif_in_chunk",
            Kernel::DitInChunk => "dit_in_chunk",
            Kernel::DifCross => "dif_cross",
            Kernel::DitCross => "dit_cross",
            Kernel::Scale => "scale",
            Kernel::Pointwise => "pointwise",
            Kernel::Difference => "difference",
            Kernel::FrOps => "fr_ops",
            Kernel::DifBlock => "dif_block",
            Kernel::DitBlock => "dit_block",
        }
    }

    /// The bindings after the parameters (binding 0) that the entry point uses,
    /// in order: its bind group has exactly these.
    fn bindings(self) -> &'static [u32] {
        match self {
            Kernel::DifInChunk | Kernel::DitInChunk => &[1, 2, 3, 6],
            Kernel::Scale => &[1, 2, 3],
            Kernel::DifBlock | Kernel::DitBlock => &[3, 6],
            Kernel::DifCross | Kernel::DitCross => &[1, 2, 3, 4, 6],
            Kernel::Pointwise | Kernel::Difference => &[3, 4],
            Kernel::FrOps => &[3, 4, 5],
        }
    }

    /// What `Params::count` counts per workgroup: invocations (64 a group), or
    /// for the block kernels whole blocks (one a group).
    fn per_group(self) -> u32 {
        match self {
            Kernel::DifBlock | Kernel::DitBlock => 1,
            _ => WORKGROUP,
        }
    }
}

/// Scalars of one block kernel's block (`BLOCK` in `ntt.wgsl`), and its stages.
pub(crate) const BLOCK_LOG: u32 = 9;

/// `Params` of `ntt.wgsl`, in its field order.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Params {
    pub log_half: u32,
    pub tw_shift: u32,
    pub base: u32,
    pub count: u32,
    pub lo_bits: u32,
    pub lo_mask: u32,
    pub bitrev: u32,
    pub log_n: u32,
}

impl Params {
    fn bytes(&self) -> [u8; 32] {
        let words = [
            self.log_half,
            self.tw_shift,
            self.base,
            self.count,
            self.lo_bits,
            self.lo_mask,
            self.bitrev,
            self.log_n,
        ];
        let mut out = [0u8; 32];
        for (o, w) in out.chunks_exact_mut(4).zip(words) {
            o.copy_from_slice(&w.to_le_bytes());
        }
        out
    }
}

/// One dispatch: a kernel, its parameters and its buffers (one per binding of
/// [`Kernel::bindings`], in that order).
pub(crate) struct Op<'a> {
    pub kernel: Kernel,
    pub params: Params,
    pub buffers: Vec<&'a wgpu::Buffer>,
}

pub(crate) struct Kernels {
    pipelines: Vec<wgpu::ComputePipeline>,
    /// Word products as u64 (fp_wide64.wgsl).
    pub int64: bool,
}

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernels")
            .field("pipelines", &self.pipelines.len())
            .field("int64", &self.int64)
            .finish()
    }
}

impl Kernels {
    /// Compiles every kernel, its word products as u64 where `int64` (the device
    /// must have SHADER_INT64); a WGSL or pipeline error is returned with its text.
    pub fn new(ctx: &Context, int64: bool) -> Result<Self, WgpuError> {
        let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = ctx
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("cuzk ntt"),
                source: wgpu::ShaderSource::Wgsl(source(int64).into()),
            });
        let pipelines = Kernel::ALL
            .iter()
            .map(|k| {
                ctx.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(k.entry()),
                        layout: None,
                        module: &module,
                        entry_point: Some(k.entry()),
                        compilation_options: Default::default(),
                        cache: None,
                    })
            })
            .collect();
        if let Some(e) = block_on(scope.pop()) {
            return Err(WgpuError::Shader(e.to_string()));
        }
        Ok(Self { pipelines, int64 })
    }

    fn pipeline(&self, k: Kernel) -> &wgpu::ComputePipeline {
        &self.pipelines[Kernel::ALL.iter().position(|x| *x == k).unwrap_or(0)]
    }

    /// Encodes `ops` into one compute pass and submits it; does not wait.
    pub fn submit(&self, ctx: &Context, ops: &[Op<'_>]) -> Result<(), WgpuError> {
        if ops.is_empty() {
            return Ok(());
        }
        let stride = u64::from(ctx.limits.min_uniform_buffer_offset_alignment).max(32);
        let params = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("cuzk dispatch params"),
            size: stride * ops.len() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut bytes = vec![0u8; (stride * ops.len() as u64) as usize];
        for (i, op) in ops.iter().enumerate() {
            let at = i * stride as usize;
            bytes[at..at + 32].copy_from_slice(&op.params.bytes());
        }
        ctx.queue.write_buffer(&params, 0, &bytes);

        let max_dim = ctx.limits.max_compute_workgroups_per_dimension.max(1);
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            for (i, op) in ops.iter().enumerate() {
                let pipeline = self.pipeline(op.kernel);
                let slots = op.kernel.bindings();
                if slots.len() != op.buffers.len() {
                    return Err(WgpuError::Plan(format!(
                        "{} takes {} buffers, given {}",
                        op.kernel.entry(),
                        slots.len(),
                        op.buffers.len()
                    )));
                }
                let mut entries = vec![wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &params,
                        offset: stride * i as u64,
                        size: wgpu::BufferSize::new(32),
                    }),
                }];
                entries.extend(slots.iter().zip(&op.buffers).map(|(&binding, b)| {
                    wgpu::BindGroupEntry {
                        binding,
                        resource: b.as_entire_binding(),
                    }
                }));
                let group = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &pipeline.get_bind_group_layout(0),
                    entries: &entries,
                });
                let groups = op.params.count.div_ceil(op.kernel.per_group());
                if groups == 0 {
                    continue;
                }
                let x = groups.min(max_dim);
                let y = groups.div_ceil(x);
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(x, y, 1);
            }
        }
        ctx.queue.submit([enc.finish()]);
        Ok(())
    }
}
