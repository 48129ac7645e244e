//! The requests waiting for room in a connection's write buffer. They are
//! woken together whenever the writer swaps the buffers, which is when
//! swap-buffer-queue calls `notify_enqueue`.
//!
//! The wakers are kept in a list under a mutex, behind a flag, so a swap
//! with nobody waiting reads one word. The module is kept free of tokio so
//! that `loom-tests` can model a request registering while the writer swaps.
//!
//! Neither side may miss the other. A request registers, then tries the
//! buffer again. A swap makes room, then wakes. Each side writes its own
//! word, puts a `SeqCst` fence, then reads the other's word. So either the
//! retry sees the room, or the wake sees the waiter.

use std::task::Waker;

use crate::sync::{fence, AtomicBool, Mutex, Ordering};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct WaitingForRoom {
    wakers: Mutex<Vec<Waker>>,
    /// Some waker is in `wakers`.
    any: AtomicBool,
}

impl WaitingForRoom {
    /// Registers `waker` for the next swap. The caller then tries the
    /// buffer again, and waits only when that fails too. A task polled
    /// twice may be listed twice and then woken twice, which does no harm.
    /// The list keeps its capacity, so after warm-up no allocation is made.
    pub(crate) fn register(&self, waker: &Waker) {
        let mut wakers = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
        wakers.push(waker.clone());
        self.any.store(true, Ordering::SeqCst);
        drop(wakers);
        fence(Ordering::SeqCst);
    }

    /// Wakes every registered request. Called after the buffers were
    /// swapped.
    pub(crate) fn wake_all(&self) {
        fence(Ordering::SeqCst);
        if !self.any.load(Ordering::Relaxed) {
            return;
        }
        let mut wakers = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
        self.any.store(false, Ordering::Relaxed);
        for waker in wakers.drain(..) {
            waker.wake();
        }
    }
}
