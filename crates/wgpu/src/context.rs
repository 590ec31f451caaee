//! The device: an instance, the chosen adapter, and a device opened with that
//! adapter's own limits, plus what it reports about itself (name, memory).
//!
//! Adapters are ordered high-performance first (discrete GPUs, then integrated,
//! virtual, CPU), the order `wgpu::PowerPreference::HighPerformance` expresses;
//! `WgpuConfig::adapter` filters them by a piece of their name and
//! `WgpuConfig::device` picks one of those left by position, so `device = 1` on a
//! machine with two discrete cards is the second card.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context as TaskContext, Poll, Waker};

use crate::memory::{self, DeviceMemory};
use crate::WgpuError;

/// Which adapter to open and how to plan buffers on it. `Default` is the first
/// adapter, high-performance first, with the device's own binding limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WgpuConfig {
    /// Only adapters whose name contains this (case-insensitive); empty: all.
    pub adapter: String,
    /// Position among the adapters left after the name filter, best first.
    pub device: u32,
    /// Largest storage binding to plan with, in bytes (0: the device's own limit).
    /// A smaller value splits vectors into more chunks: for tests, and for a driver
    /// whose advertised limit is larger than what it allocates well.
    pub max_binding_bytes: u64,
    /// The NTT's word products as u64 products (`Some(true)`: the device must
    /// have SHADER_INT64) or 16-bit halves (`Some(false)`); `None`: u64 wherever
    /// the device has them. On the H100 through Vulkan the 16-bit halves made a
    /// resident 2^24 transform 78.4 ms (crates/wgpu/NOTES.md).
    pub int64_products: Option<bool>,
}

/// An open device and what it says about itself.
pub struct Context {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub memory: DeviceMemory,
    /// How many adapters matched the configuration's name filter.
    pub matching_adapters: u32,
    /// The first error the device reported outside an error scope (validation,
    /// out of memory, an internal one), kept until the next [`Context::sync`].
    uncaptured: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .field("memory", &self.memory)
            .finish()
    }
}

/// Rank of a device type, high-performance first.
fn rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// The backends to look on: `WGPU_BACKEND` if set (wgpu's own variable, e.g.
/// `vulkan`, `metal`, `dx12`), else the primary ones (no OpenGL: its compute
/// shaders lack what the kernels need).
fn backends() -> wgpu::Backends {
    wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY)
}

fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: backends(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    })
}

/// The adapters of this machine, high-performance first, with their info. A
/// software adapter (lavapipe, WARP) comes last but is listed: CI has no other.
pub fn adapters() -> Vec<wgpu::AdapterInfo> {
    sorted_adapters(&instance())
        .iter()
        .map(|a| a.get_info())
        .collect()
}

fn sorted_adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    let mut all = block_on(instance.enumerate_adapters(backends()));
    all.retain(|a| a.get_info().backend != wgpu::Backend::Gl);
    // Stable: within a rank, the driver's order.
    all.sort_by_key(|a| rank(a.get_info().device_type));
    all
}

fn matches(info: &wgpu::AdapterInfo, filter: &str) -> bool {
    filter.is_empty() || info.name.to_lowercase().contains(&filter.to_lowercase())
}

impl Context {
    /// Opens the adapter the configuration names, with its own limits (wgpu's
    /// defaults are far below a GPU's: 128 MiB bindings), and no optional features.
    pub fn new(config: &WgpuConfig) -> Result<Self, WgpuError> {
        let instance = instance();
        let all = sorted_adapters(&instance);
        let names: Vec<String> = all
            .iter()
            .map(|a| {
                let i = a.get_info();
                format!("{} ({:?})", i.name, i.backend)
            })
            .collect();
        let mut matching: Vec<wgpu::Adapter> = all
            .into_iter()
            .filter(|a| matches(&a.get_info(), &config.adapter))
            .collect();
        let count = matching.len() as u32;
        if config.device >= count {
            return Err(WgpuError::NoAdapter {
                filter: config.adapter.clone(),
                device: config.device,
                found: names,
            });
        }
        let adapter = matching.swap_remove(config.device as usize);
        let info = adapter.get_info();
        let limits = adapter.limits();
        let memory = memory::of_adapter(&adapter, &limits);
        let (device, queue) = block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("cuzk-wgpu"),
            // 64-bit integers where offered: the MSM's word products use them.
            required_features: adapter.features() & wgpu::Features::SHADER_INT64,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| WgpuError::Device(format!("opening {}: {e}", info.name)))?;
        let uncaptured = Arc::new(Mutex::new(None::<String>));
        let sink = Arc::clone(&uncaptured);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut slot = sink.lock().unwrap_or_else(PoisonError::into_inner);
            if slot.is_none() {
                *slot = Some(e.to_string());
            }
        }));
        tracing::info!(
            adapter = %info.name,
            backend = ?info.backend,
            total_memory = memory.total,
            memory_source = ?memory.source,
            max_binding = limits.max_storage_buffer_binding_size,
            max_buffer = limits.max_buffer_size,
            "wgpu device opened"
        );
        Ok(Self {
            device,
            queue,
            info,
            limits,
            memory,
            matching_adapters: count,
            uncaptured,
        })
    }

    /// Waits for all submitted work, then reports the first error the device
    /// raised since the last sync (validation, out of memory, a lost device).
    pub fn sync(&self) -> Result<(), WgpuError> {
        let polled = self.device.poll(wgpu::PollType::wait_indefinitely());
        if let Some(e) = self
            .uncaptured
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            return Err(WgpuError::Device(e));
        }
        polled.map_err(|e| WgpuError::Device(format!("waiting for the device: {e}")))?;
        Ok(())
    }

    /// The largest storage binding the plan may use, in bytes: the device's
    /// binding and buffer limits, and the configuration's cap.
    pub fn max_binding_bytes(&self, config: &WgpuConfig) -> u64 {
        let device = self
            .limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size);
        if config.max_binding_bytes == 0 {
            device
        } else {
            device.min(config.max_binding_bytes)
        }
    }
}

/// Runs a future to completion on this thread. wgpu's native futures are ready
/// at once or after a device poll, so a loop that polls and yields is enough; no
/// executor crate is needed.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = TaskContext::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}
