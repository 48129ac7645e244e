//! The counting global allocator of the allocation tests: the system
//! allocator, with every `alloc`, `alloc_zeroed` and `realloc` counted twice —
//! once for the calling thread and once for the process (in per-thread slots,
//! padded so that threads do not share a cache line). A test binary installs
//! it with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: testkit::alloc::CountingAllocator = testkit::alloc::CountingAllocator;
//! ```
//!
//! and measures with [`on_this_thread`] (what one thread allocates: a codec
//! loop, or a request path on a current-thread runtime) or with
//! [`allocations`] before and after a phase (every thread of the process).
//! The counters only ever grow, so nested or concurrent measurements do not
//! reset each other; a test that needs the process to itself takes turns.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SLOTS: usize = 64;

#[repr(align(128))]
struct Slot(AtomicU64);

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot(AtomicU64::new(0));
static COUNTS: [Slot; SLOTS] = [EMPTY; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // `usize::MAX`: not assigned yet. Both are const-initialised and have no
    // destructor, so they are usable from inside the allocator.
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
    static MINE: Cell<u64> = const { Cell::new(0) };
}

#[inline]
fn count_one() {
    let slot = MY_SLOT
        .try_with(|s| {
            MINE.with(|m| m.set(m.get() + 1));
            let mut v = s.get();
            if v == usize::MAX {
                v = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS;
                s.set(v);
            }
            v
        })
        // During thread teardown the thread-locals are gone: slot 0.
        .unwrap_or(0);
    if let Some(s) = COUNTS.get(slot) {
        s.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Heap allocations (reallocations included) made so far by every thread of
/// the process, when [`CountingAllocator`] is the global allocator.
pub fn allocations() -> u64 {
    COUNTS.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
}

/// Heap allocations made so far by the calling thread.
pub fn thread_allocations() -> u64 {
    MINE.try_with(Cell::get).unwrap_or(0)
}

/// Runs `f`; returns its value and the allocations it made on this thread.
pub fn on_this_thread<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = thread_allocations();
    let value = f();
    (value, thread_allocations().saturating_sub(before))
}

/// Awaits `f`; returns its value and the allocations made on this thread
/// meanwhile (with a current-thread runtime: the future and every task the
/// runtime polls while it waits).
pub async fn on_this_thread_async<R>(f: impl Future<Output = R>) -> (R, u64) {
    let before = thread_allocations();
    let value = f.await;
    (value, thread_allocations().saturating_sub(before))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static GLOBAL: CountingAllocator = CountingAllocator;

    #[test]
    fn counts_this_thread_and_the_process() {
        let (v, n) = on_this_thread(|| std::hint::black_box(vec![1u8; 64]));
        assert_eq!(v.len(), 64);
        assert!(n >= 1, "a vector is an allocation");
        let (_, none) = on_this_thread(|| std::hint::black_box(1 + 1));
        assert_eq!(none, 0);

        let before = allocations();
        let (_, here) = on_this_thread(|| {
            std::thread::spawn(|| std::hint::black_box(vec![0u8; 4096]).len()).join().map_err(|_| "panicked")
        });
        assert!(allocations() - before > here, "the other thread's allocations count for the process only");
    }
}
