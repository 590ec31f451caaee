//! Opening a device for the tests. No adapter is a failure, not a skip: CI has
//! lavapipe (Debian's mesa-vulkan-drivers). A machine without any Vulkan, Metal or
//! DX12 device skips only where `CUZK_WGPU_ALLOW_NO_ADAPTER=1` says so, and says it.

#![allow(dead_code)]

use std::sync::Arc;

use blstrs::Scalar;
use cuzk_wgpu::{Context, Ntt, WgpuConfig, WgpuError};
use ff::Field;
use rand_chacha::ChaCha8Rng;

pub const ALLOW_NO_ADAPTER: &str = "CUZK_WGPU_ALLOW_NO_ADAPTER";

/// The configured context, `None` (with a printed "skipped") only where allowed.
pub fn context(config: &WgpuConfig) -> Option<Arc<Context>> {
    match Context::new(config) {
        Ok(ctx) => {
            eprintln!(
                "wgpu adapter: {} ({:?}), memory {:?}",
                ctx.info.name, ctx.info.backend, ctx.memory
            );
            Some(Arc::new(ctx))
        }
        Err(e @ WgpuError::NoAdapter { .. })
            if std::env::var(ALLOW_NO_ADAPTER).as_deref() == Ok("1") =>
        {
            eprintln!("skipped: no wgpu adapter ({e})");
            None
        }
        Err(e) => panic!(
            "no usable wgpu adapter: {e}. Install a Vulkan driver (CI: mesa-vulkan-drivers, \
             lavapipe) or set {ALLOW_NO_ADAPTER}=1 to skip on a machine without one"
        ),
    }
}

/// The NTT on the default adapter with at most `max_binding_bytes` per binding
/// (0: the device's limit).
pub fn ntt(max_binding_bytes: u64) -> Option<Ntt> {
    let config = WgpuConfig {
        max_binding_bytes,
        ..WgpuConfig::default()
    };
    let ctx = context(&config)?;
    Some(Ntt::new(ctx, &config).expect("the kernels compile"))
}

/// The kernels of `ntt`'s device with the word products as 16-bit halves (the
/// path of devices without SHADER_INT64), checked to be that path.
pub fn ntt_16bit(ntt: &Ntt) -> Ntt {
    let halves = Ntt::new(
        ntt.context().clone(),
        &WgpuConfig {
            int64_products: Some(false),
            ..WgpuConfig::default()
        },
    )
    .expect("the kernels compile");
    assert!(!halves.uses_int64());
    halves
}

/// Random scalars with a few edge values mixed in, never all zero.
pub fn scalars(rng: &mut ChaCha8Rng, n: usize) -> Vec<Scalar> {
    let edges = [Scalar::ONE, -Scalar::ONE, Scalar::ZERO, Scalar::from(2u64)];
    let mut v: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut *rng)).collect();
    for (x, e) in v.iter_mut().step_by(7).zip(edges.iter().cycle()) {
        *x = *e;
    }
    if let Some(x) = v.last_mut() {
        *x = Scalar::random(&mut *rng) + Scalar::ONE;
    }
    v
}

pub fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("test pool")
}

// The MSM's tests open their device directly (`Gpu`, `gpu`): a wgpu device and
// queue, the adapter's own limits, and SHADER_INT64 where offered.

use cuzk_wgpu::msm::testing::block_on;

pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
}

/// The device every test shares (pipelines compile once: lavapipe takes tens of
/// seconds for the MSM's), or `None` when there is no adapter and the
/// environment allows it.
pub fn gpu() -> Option<&'static Gpu> {
    static GPU: std::sync::OnceLock<Option<Gpu>> = std::sync::OnceLock::new();
    GPU.get_or_init(open).as_ref()
}

/// The MSM pipelines on [`gpu`], compiled once.
pub fn msm(g: &Gpu) -> &'static cuzk_wgpu::msm::G1Msm {
    static MSM: std::sync::OnceLock<cuzk_wgpu::msm::G1Msm> = std::sync::OnceLock::new();
    MSM.get_or_init(|| cuzk_wgpu::msm::G1Msm::new(&g.device).expect("MSM pipelines"))
}

fn open() -> Option<Gpu> {
    let instance = wgpu::Instance::default();
    let adapter = match block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    })) {
        Ok(a) => a,
        Err(e) => {
            if std::env::var("CUZK_WGPU_ALLOW_NO_ADAPTER").as_deref() == Ok("1") {
                eprintln!("no wgpu adapter ({e}); skipped: CUZK_WGPU_ALLOW_NO_ADAPTER=1");
                return None;
            }
            panic!(
                "no wgpu adapter ({e}): install a Vulkan driver (Mesa's lavapipe: \
                 VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json), or set \
                 CUZK_WGPU_ALLOW_NO_ADAPTER=1 to skip"
            );
        }
    };
    let info = adapter.get_info();
    eprintln!(
        "wgpu adapter: {} ({:?}), SHADER_INT64: {}",
        info.name,
        info.backend,
        adapter.features().contains(wgpu::Features::SHADER_INT64)
    );
    let (device, queue) = block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("cuzk-wgpu tests"),
        required_limits: adapter.limits(),
        // u64 word products where the adapter has them (lavapipe does); the
        // 16-bit path is tested through MsmConfig::int64_products.
        required_features: adapter.features() & wgpu::Features::SHADER_INT64,
        ..Default::default()
    }))
    .expect("the adapter gives a device with its own limits");
    Some(Gpu { device, queue })
}

fn storage(device: &wgpu::Device, words: &[u32]) -> wgpu::Buffer {
    use wgpu::util::DeviceExt;
    let mut w = words.to_vec();
    if w.is_empty() {
        w.push(0);
    }
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: None,
        contents: bytemuck::cast_slice(&w),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    })
}

/// Runs `entry` of `source` once per thread over `threads` threads (workgroups of
/// 64), with the read-only `inputs` at bindings 0.. and a zeroed output of
/// `out_words` words at the next binding; returns the output.
pub fn run_kernel(
    gpu: &Gpu,
    source: &str,
    entry: &str,
    inputs: &[&[u32]],
    out_words: usize,
    threads: u32,
) -> Vec<u32> {
    let device = &gpu.device;
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(entry),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(entry),
        layout: None,
        module: &module,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache: None,
    });
    let ins: Vec<_> = inputs.iter().map(|w| storage(device, w)).collect();
    let out = storage(device, &vec![0; out_words]);
    let mut entries: Vec<_> = ins
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: b.as_entire_binding(),
        })
        .collect();
    entries.push(wgpu::BindGroupEntry {
        binding: ins.len() as u32,
        resource: out.as_entire_binding(),
    });
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    });
    let read = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: out.size(),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_workgroups(threads.div_ceil(64), 1, 1);
    }
    enc.copy_buffer_to_buffer(&out, 0, &read, 0, out.size());
    gpu.queue.submit([enc.finish()]);
    read.slice(..)
        .map_async(wgpu::MapMode::Read, |r| r.expect("map"));
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .expect("poll");
    let view = read.slice(..).get_mapped_range().expect("mapped");
    let words: &[u32] = bytemuck::cast_slice(&view);
    words[..out_words].to_vec()
}
