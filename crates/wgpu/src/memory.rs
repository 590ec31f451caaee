//! How much memory the device has. wgpu reports none, so it is read from the
//! platform where the platform says: on Vulkan, the device-local heaps of the
//! physical device (`vkGetPhysicalDeviceMemoryProperties`) and, where the driver
//! offers `VK_EXT_memory_budget`, the budget left to this process on them. Where
//! the platform gives nothing this crate can read (Metal, DX12), the figure is an
//! estimate, [`MemorySource::Estimate`]: the largest buffer the device allows,
//! which is a lower bound on its memory, never more than it has.

/// The device's memory, in bytes, and where the figures come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    pub total: u64,
    /// What this process may still allocate (the total where unknown).
    pub free: u64,
    pub source: MemorySource,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemorySource {
    /// Vulkan's device-local heaps; `free` is the total.
    VulkanHeaps,
    /// Vulkan's device-local heaps, `free` from `VK_EXT_memory_budget`.
    VulkanBudget,
    /// No platform figure: both are `max_buffer_size`, a lower bound.
    Estimate,
}

pub(crate) fn of_adapter(adapter: &wgpu::Adapter, limits: &wgpu::Limits) -> DeviceMemory {
    #[cfg(not(any(target_vendor = "apple", target_arch = "wasm32")))]
    if let Some(m) = vulkan::heaps(adapter) {
        return m;
    }
    let _ = adapter;
    DeviceMemory {
        total: limits.max_buffer_size,
        free: limits.max_buffer_size,
        source: MemorySource::Estimate,
    }
}

#[cfg(not(any(target_vendor = "apple", target_arch = "wasm32")))]
mod vulkan {
    use super::{DeviceMemory, MemorySource};
    use ash::vk;

    /// The device-local heaps of a Vulkan adapter (`None` for another backend).
    pub(super) fn heaps(adapter: &wgpu::Adapter) -> Option<DeviceMemory> {
        // SAFETY: the guard only lends the hal adapter; nothing here destroys or
        // changes it, and the calls below only read properties of the physical
        // device through the instance wgpu created it from.
        let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
        let phd = hal.raw_physical_device();
        let shared = hal.shared_instance();
        let instance = shared.raw_instance();
        // SAFETY: `phd` was enumerated from `instance`, which is alive (the
        // adapter holds it).
        let props = unsafe { instance.get_physical_device_memory_properties(phd) };
        let local: Vec<usize> = props
            .memory_heaps_as_slice()
            .iter()
            .enumerate()
            .filter(|(_, h)| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|(i, _)| i)
            .collect();
        let heap = |i: usize| props.memory_heaps[i].size;
        let total: u64 = local.iter().map(|&i| heap(i)).sum();
        if total == 0 {
            return None;
        }
        let budget_ok = shared.instance_api_version() >= vk::API_VERSION_1_1
            && hal
                .physical_device_capabilities()
                .supports_extension(vk::EXT_MEMORY_BUDGET_NAME);
        if budget_ok {
            let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
            let mut props2 = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
            // SAFETY: Vulkan 1.1 (checked) has the entry point; the device offers
            // the extension whose structure is chained; both outlive the call.
            unsafe { instance.get_physical_device_memory_properties2(phd, &mut props2) };
            let free: u64 = local
                .iter()
                .map(|&i| budget.heap_budget[i].saturating_sub(budget.heap_usage[i]))
                .sum();
            if free > 0 {
                return Some(DeviceMemory {
                    total,
                    free: free.min(total),
                    source: MemorySource::VulkanBudget,
                });
            }
        }
        Some(DeviceMemory {
            total,
            free: total,
            source: MemorySource::VulkanHeaps,
        })
    }
}
