//! The cross-shard miss penalty: requests that reached the wrong shard are
//! forwarded after a fixed delay by one thread of their own, so the delay
//! holds back neither the connection's other requests nor the runtime.
//! Kept apart from the proxy so that the shared state can own one without
//! importing the connection code.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;

/// Bytes on their way to one socket.
pub(crate) type Outbox = UnboundedSender<Bytes>;

/// Forwards delayed requests (cross-shard misses) after their deadline. One
/// OS thread, because tokio timers have millisecond resolution and a miss
/// penalty is typically tens of microseconds; all delays are equal, so the
/// queue is in deadline order.
pub(crate) struct DelayLine {
    tx: Mutex<std::sync::mpsc::Sender<(Instant, Outbox, Bytes)>>,
    pub(crate) delay: Duration,
}

impl DelayLine {
    pub(crate) fn start(delay: Duration) -> DelayLine {
        let (tx, rx) = std::sync::mpsc::channel::<(Instant, Outbox, Bytes)>();
        let _ = std::thread::Builder::new().name("emu-miss-delay".into()).spawn(move || {
            while let Ok((deadline, out, frame)) = rx.recv() {
                let now = Instant::now();
                if deadline > now {
                    std::thread::sleep(deadline - now);
                }
                let _ = out.send(frame);
            }
        });
        DelayLine { tx: Mutex::new(tx), delay }
    }

    pub(crate) fn push(&self, out: &Outbox, frame: Bytes) {
        let item = (Instant::now() + self.delay, out.clone(), frame);
        if let Ok(tx) = self.tx.lock() {
            if let Err(e) = tx.send(item) {
                let (_, out, frame) = e.0;
                let _ = out.send(frame);
            }
        }
    }
}
