//! loom models of the driver's shared-state structures: the stream-id
//! table of a connection ([`stream`]), how a connection closes while
//! requests claim ids, send and drop ([`closing`]), the per-shard
//! connection slots of a node's pool ([`slots`]), a node's latency
//! average ([`latency`]), the CDC reader's count of checkpoint saves
//! under way that a lease handover waits for ([`saves`]), the deadlines
//! of its leases that its workers check ([`deadlines`]), the requests
//! waiting for room in the write buffer ([`room`]), whose turn it is to
//! write a connection's socket ([`turn`]) and what a request writing
//! itself hands the writer task (the direct-write path), the monotonic
//! timestamp generator ([`timestamp`]), the deadline sweeper's wake-up
//! handshake ([`sweep`]), a prepared statement's result shape
//! ([`replaced`]), the learned-tablets map ([`tablets`]), the session's
//! cache of prepared statements ([`prepared_cache`]), the CDC
//! reader's stop and leave signals ([`signal`]), the CDC reader's view of
//! the cluster's time ([`clock`]), the request history collector
//! ([`history`]), the latency histogram ([`metrics::histogram`]) and the
//! latency a percentile speculative execution waits ([`metrics::percentile`]).
//!
//! The modules under test are compiled here from their own source files
//! (`#[path]`), against [`sync`], a facade with the same names as the
//! driver's `sync` module but backed by loom. The models therefore check
//! exactly the code that ships, without building tokio under `cfg(loom)`;
//! what tokio does (`Notify`) is a stand-in with its documented guarantee,
//! and what a shipped file does with the driver or the network (a query,
//! a conversion from a protocol type) is left out under `cfg(loom)`.
//! Each model's module says how to see it fail (the ordering or the lock
//! it checks taken out). Run them with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p shardwise-loom-tests --release`
//! (as `cargo xtask test` does).

// The shipped files carry their crates' doc examples, which name those
// crates: rustdoc collecting doc tests (`cargo test --workspace --doc`, which
// runs them whatever `doctest = false` says) sees none of the crate.
#![cfg(not(doctest))]

pub mod sync {
    //! loom versions of the driver's synchronization primitives.

    use loom::cell::UnsafeCell;
    pub use loom::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
    pub use loom::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard};

    /// `std::sync::OnceLock` for models, with its real synchronization: a
    /// state word (uninitialized, running, done) whose `done` is stored with
    /// release once the value is written and read with acquire by `get` (one
    /// load, no lock), and the value in a loom cell, so that the model
    /// reports a read of the value that the state does not order after its
    /// write. Racing initializers: one runs, the others spin until it is
    /// done (std blocks them).
    #[derive(Debug)]
    pub struct OnceLock<T> {
        state: AtomicU8,
        value: UnsafeCell<Option<T>>,
    }

    const UNINIT: u8 = 0;
    const RUNNING: u8 = 1;
    const DONE: u8 = 2;

    // SAFETY: as std's `OnceLock`: the value is written once, by the thread
    // that moved the state from UNINIT to RUNNING, before the release store
    // of DONE; it is only read after an acquire load of DONE.
    unsafe impl<T: Send + Sync> Sync for OnceLock<T> {}
    // SAFETY: the lock owns its value.
    unsafe impl<T: Send> Send for OnceLock<T> {}

    impl<T> OnceLock<T> {
        /// An empty cell.
        pub fn new() -> Self {
            OnceLock { state: AtomicU8::new(UNINIT), value: UnsafeCell::new(None) }
        }

        /// The value, if initialized: one acquire load.
        pub fn get(&self) -> Option<&T> {
            if self.state.load(Ordering::Acquire) != DONE {
                return None;
            }
            // SAFETY: DONE was stored (release) after the value was written
            // and never changes again, so nobody writes the value any more.
            self.value.with(|p| unsafe { (*p).as_ref() })
        }

        /// Sets the value if the cell is empty; else gives it back.
        pub fn set(&self, value: T) -> Result<(), T> {
            let mut value = Some(value);
            self.get_or_init(|| value.take().expect("called once"));
            match value {
                None => Ok(()),
                Some(v) => Err(v),
            }
        }

        /// The value, initializing it with `f` first if needed.
        pub fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
            let mut f = Some(f);
            loop {
                match self.state.compare_exchange(UNINIT, RUNNING, Ordering::Acquire, Ordering::Acquire) {
                    Ok(_) => {
                        let value = (f.take().expect("runs once"))();
                        // SAFETY: only the thread that moved the state to
                        // RUNNING writes, and no reader reads before DONE.
                        self.value.with_mut(|p| unsafe { *p = Some(value) });
                        self.state.store(DONE, Ordering::Release);
                    }
                    Err(DONE) => {}
                    Err(_) => {
                        loom::thread::yield_now();
                        continue;
                    }
                }
                if let Some(v) = self.get() {
                    return v;
                }
            }
        }
    }

    impl<T> Default for OnceLock<T> {
        fn default() -> Self {
            Self::new()
        }
    }
}

// The shipped modules link to their private items, which the driver documents as private
// modules; here they are public, so rustdoc would call those links broken.
#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../driver/src/connection/stream.rs"]
pub mod stream;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../driver/src/pool/slots.rs"]
pub mod slots;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../driver/src/connection/closing.rs"]
pub mod closing;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../driver/src/latency.rs"]
pub mod latency;

#[cfg(test)]
mod stream_slots;

#[cfg(test)]
mod pool_refill;

#[cfg(test)]
mod closing_models;

#[cfg(test)]
mod once_lock;

#[cfg(test)]
mod latency_average;

#[allow(dead_code, unreachable_pub)]
#[path = "../../cdc/src/reader/saves.rs"]
pub mod saves;

#[allow(dead_code, unreachable_pub)]
#[path = "../../cdc/src/reader/deadlines.rs"]
pub mod deadlines;

#[cfg(test)]
mod lease_deadlines;

#[cfg(test)]
mod checkpoint_handover;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../cdc/src/reader/signal.rs"]
pub mod signal;

#[cfg(test)]
mod signal_models;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../driver/src/connection/room.rs"]
pub mod room;

#[cfg(test)]
mod room_models;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../driver/src/connection/turn.rs"]
pub mod turn;

#[cfg(test)]
mod turn_models;

#[cfg(test)]
mod direct_models;

#[allow(dead_code, unreachable_pub, rustdoc::broken_intra_doc_links)]
#[path = "../../driver/src/timestamp.rs"]
pub mod timestamp;

#[cfg(test)]
mod timestamp_models;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../driver/src/connection/sweep.rs"]
pub mod sweep;

#[cfg(test)]
mod sweeper_models;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../driver/src/replaced.rs"]
pub mod replaced;

#[cfg(test)]
mod shape_models;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../driver/src/cluster/tablets.rs"]
pub mod tablets;

#[cfg(test)]
mod tablets_models;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../driver/src/session/prepared_cache.rs"]
pub mod prepared_cache;

#[cfg(test)]
mod prepared_cache_models;

#[cfg(test)]
mod support;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links)]
#[path = "../../cdc/src/time.rs"]
pub mod time;

// Its docs name the query of a node, left out here.
#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links, rustdoc::broken_intra_doc_links)]
#[path = "../../cdc/src/reader/clock.rs"]
pub mod clock;

#[cfg(test)]
mod clock_models;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links, rustdoc::broken_intra_doc_links)]
#[path = "../../driver/src/error.rs"]
pub mod error;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links, rustdoc::broken_intra_doc_links)]
#[path = "../../driver/src/retry.rs"]
pub mod retry;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links, rustdoc::broken_intra_doc_links)]
#[path = "../../driver/src/observer.rs"]
pub mod observer;

#[allow(dead_code, unreachable_pub, rustdoc::private_intra_doc_links, rustdoc::broken_intra_doc_links)]
#[path = "../../driver/src/history.rs"]
pub mod history;

#[cfg(test)]
mod history_models;

// `retry.rs`'s unit tests (plain tests, run here too) name it at the root.
#[cfg(test)]
pub use error::ConnectionError;

pub mod metrics;

#[cfg(test)]
mod histogram_models;

#[cfg(test)]
mod percentile_models;
