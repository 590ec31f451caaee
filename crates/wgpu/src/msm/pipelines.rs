//! The compute pipelines of one device, built from the WGSL in `shaders/`.

/// Field and curve arithmetic every MSM kernel includes, with one of the two
/// word-product files.
pub(crate) const FP_WGSL: &str = include_str!("../../shaders/fp.wgsl");
pub(crate) const FP_WIDE16_WGSL: &str = include_str!("../../shaders/fp_wide16.wgsl");
pub(crate) const FP_WIDE64_WGSL: &str = include_str!("../../shaders/fp_wide64.wgsl");
pub(crate) const G1_WGSL: &str = include_str!("../../shaders/g1.wgsl");
const DIGITS_WGSL: &str = include_str!("../../shaders/msm_digits.wgsl");
const SCAN_WGSL: &str = include_str!("../../shaders/msm_scan.wgsl");
const SEGMENTS_WGSL: &str = include_str!("../../shaders/msm_segments.wgsl");
const ACCUMULATE_WGSL: &str = include_str!("../../shaders/msm_accumulate.wgsl");
const COMBINE_WGSL: &str = include_str!("../../shaders/msm_combine.wgsl");
const REDUCE_WGSL: &str = include_str!("../../shaders/msm_reduce.wgsl");

/// How a kernel sees one binding.
#[derive(Clone, Copy)]
pub(crate) enum Slot {
    Uniform,
    Read,
    ReadWrite,
}

pub(crate) fn bind_group_layout(
    device: &wgpu::Device,
    label: &str,
    slots: &[Slot],
) -> wgpu::BindGroupLayout {
    let entries: Vec<_> = slots
        .iter()
        .enumerate()
        .map(|(i, s)| wgpu::BindGroupLayoutEntry {
            binding: i as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: match s {
                    Slot::Uniform => wgpu::BufferBindingType::Uniform,
                    Slot::Read => wgpu::BufferBindingType::Storage { read_only: true },
                    Slot::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        })
        .collect();
    device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some(label),
        entries: &entries,
    })
}

/// One shader module's kernels and the bind group layout they share.
#[derive(Clone)]
pub(crate) struct Kernels {
    pub layout: wgpu::BindGroupLayout,
    pub pipelines: Vec<wgpu::ComputePipeline>,
}

pub(crate) fn kernels(
    device: &wgpu::Device,
    label: &str,
    sources: &[&str],
    slots: &[Slot],
    entry_points: &[&str],
    workgroup: u32,
) -> Kernels {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(label),
        source: wgpu::ShaderSource::Wgsl(sources.concat().into()),
    });
    let layout = bind_group_layout(device, label, slots);
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(label),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipelines = entry_points
        .iter()
        .map(|e| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(e),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(e),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &[("WG", f64::from(workgroup))],
                    ..Default::default()
                },
                cache: None,
            })
        })
        .collect();
    Kernels { layout, pipelines }
}

/// Every MSM kernel of one device.
#[derive(Clone)]
pub(crate) struct Pipelines {
    /// `count`, `scatter`: params, scalars, indices, ones, cursor, sorted.
    pub digits: Kernels,
    /// `block_sums`, `scan_blocks`, `block_offsets`: params, cursor, blocks, level counts.
    pub scan: Kernels,
    /// `reduce_segments` on affine bases: params, sorted, bases, level counts,
    /// buckets, out keys, out points.
    pub accumulate: Kernels,
    /// `reduce_segments` on partial sums: params, in keys, in points, level
    /// counts, buckets, out keys, out points.
    pub combine: Kernels,
    /// `bucket_reduce`, `group_sum`: params, points in, points out.
    pub reduce: Kernels,
    /// Threads a workgroup of every kernel but `scan_blocks` (256).
    pub workgroup: u32,
    /// Word products as u64 (fp_wide64.wgsl).
    pub int64: bool,
}

impl Pipelines {
    /// `int64`: word products as u64 (the device must have SHADER_INT64).
    pub(crate) fn new(device: &wgpu::Device, workgroup: u32, int64: bool) -> Self {
        use Slot::*;
        let wide = if int64 {
            FP_WIDE64_WGSL
        } else {
            FP_WIDE16_WGSL
        };
        let segments = [
            Uniform, Read, Read, ReadWrite, ReadWrite, ReadWrite, ReadWrite,
        ];
        Self {
            digits: kernels(
                device,
                "msm_digits",
                &[FP_WGSL, wide, DIGITS_WGSL],
                &[Uniform, Read, Read, Read, ReadWrite, ReadWrite],
                &["count", "scatter"],
                workgroup,
            ),
            scan: kernels(
                device,
                "msm_scan",
                &[SCAN_WGSL],
                &[Uniform, ReadWrite, ReadWrite, ReadWrite],
                &["block_sums", "scan_blocks", "block_offsets"],
                workgroup,
            ),
            accumulate: kernels(
                device,
                "msm_accumulate",
                &[FP_WGSL, wide, G1_WGSL, SEGMENTS_WGSL, ACCUMULATE_WGSL],
                &segments,
                &["reduce_segments"],
                workgroup,
            ),
            combine: kernels(
                device,
                "msm_combine",
                &[FP_WGSL, wide, G1_WGSL, SEGMENTS_WGSL, COMBINE_WGSL],
                &segments,
                &["reduce_segments"],
                workgroup,
            ),
            reduce: kernels(
                device,
                "msm_reduce",
                &[FP_WGSL, wide, G1_WGSL, REDUCE_WGSL],
                &[Uniform, Read, ReadWrite],
                &["bucket_reduce", "group_sum"],
                workgroup,
            ),
            workgroup,
            int64,
        }
    }
}
