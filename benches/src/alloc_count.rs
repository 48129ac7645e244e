//! A counting global allocator: every `alloc`, `alloc_zeroed` and `realloc`
//! adds one to a per-thread slot (a padded atomic, so threads do not share a
//! cache line), forwarding to the system allocator. A binary installs it
//! with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: shardwise_benches::alloc_count::CountingAllocator =
//!     shardwise_benches::alloc_count::CountingAllocator;
//! ```
//!
//! and reads [`allocations`] before and after the measured phase.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SLOTS: usize = 64;

#[repr(align(128))]
struct Slot(AtomicU64);

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot(AtomicU64::new(0));
static COUNTS: [Slot; SLOTS] = [EMPTY; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // `usize::MAX`: not assigned yet. Const-initialised and without a
    // destructor, so it is usable from inside the allocator.
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[inline]
fn count_one() {
    let slot = MY_SLOT
        .try_with(|s| {
            let mut v = s.get();
            if v == usize::MAX {
                v = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS;
                s.set(v);
            }
            v
        })
        // During thread teardown the thread-local is gone: use slot 0.
        .unwrap_or(0);
    COUNTS[slot].0.fetch_add(1, Ordering::Relaxed);
}

/// Heap allocations (including reallocations) made so far by every thread
/// of the process, when [`CountingAllocator`] is the global allocator.
pub fn allocations() -> u64 {
    COUNTS.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
}

/// The system allocator, counting calls. See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAllocator;

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; counting touches no memory the allocator hands out.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
