//! A corrupt count must not cause an allocation: the layout is checked against the
//! file's length first. This binary counts allocations with its own global
//! allocator, so it holds this one test only.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use cuzk_params::{read_params_bytes, ParamsError, Validation};

struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; it only records sizes.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

#[test]
fn huge_count_allocates_nothing_large() {
    let params = common::params_for(2, 3, 30);
    let bytes = common::bellperson_bytes(&params);
    let mut checked = 0;
    for extent in common::extents(&params) {
        let Some(count_offset) = extent.count_offset else {
            continue;
        };
        let mut bad = bytes.clone();
        bad[count_offset..count_offset + 4].copy_from_slice(&[0xff; 4]);
        LARGEST.store(0, Ordering::Relaxed);
        let result = read_params_bytes(&bad, Validation::None);
        let largest = LARGEST.load(Ordering::Relaxed);
        let section = match &result {
            Err(ParamsError::Truncated { section, .. }) => Some(*section),
            _ => None,
        };
        assert!(
            section == Some(extent.section),
            "{}: {:?}",
            extent.section,
            result.map(|_| ())
        );
        // Sections before the bad one are decoded only after the whole layout is
        // checked, so nothing near the file's size is allocated, let alone 4 G points.
        assert!(
            largest < bytes.len(),
            "{}: allocated {largest} bytes",
            extent.section
        );
        checked += 1;
    }
    assert_eq!(checked, 6);
}
