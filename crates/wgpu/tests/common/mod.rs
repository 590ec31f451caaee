//! A wgpu device for the tests: the first adapter wgpu finds (Mesa's lavapipe in
//! CI: `VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json`), opened
//! with the adapter's own limits (wgpu's defaults cap bindings at 128 MiB).
//!
//! No adapter is a failure, not a skip: CI installs lavapipe, so a missing one is
//! a broken setup. `CUZK_WGPU_ALLOW_NO_ADAPTER=1` turns it into a skip for
//! machines with no Vulkan, Metal or DX12 at all.

#![allow(dead_code)]

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
