//! Models of the requests waiting for room in the write buffer
//! (`room.rs`): a request that finds the buffer full registers and tries
//! again, while the writer swaps the buffers and wakes whoever registered.
//! The swap is a stand-in: one word of room, changed with the
//! acquire-release compare-and-swap swap-buffer-queue swaps with, and read
//! with acquire as its enqueue reads it.

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::room::WaitingForRoom;
use crate::support::{flagged_waker, model};

/// A request that does not get room either waits to be woken, or got the
/// room on its retry: it is never left waiting after a swap made room.
#[test]
fn a_request_waiting_for_room_is_woken_by_the_swap_or_sees_the_room() {
    model(|| {
        let room = Arc::new(AtomicUsize::new(0));
        let waiting = Arc::new(WaitingForRoom::default());
        let (flag, waker) = flagged_waker();
        let request = {
            let (room, waiting) = (room.clone(), waiting.clone());
            thread::spawn(move || {
                if room.load(Ordering::Acquire) > 0 {
                    return true;
                }
                waiting.register(&waker);
                room.load(Ordering::Acquire) > 0
            })
        };
        // The writer swaps: room, then the wake.
        let _ = room.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed);
        waiting.wake_all();
        let got_room = request.join().expect("thread");
        let woken = flag.0.load(std::sync::atomic::Ordering::SeqCst);
        assert!(got_room || woken, "the request waits for a swap that already happened");
    });
}
