//! loom models of the driver's shared-state structures: the stream-id
//! table of a connection ([`stream`]) and the per-shard connection slots of
//! a node's pool ([`slots`]).
//!
//! The modules under test are compiled here from their own source files
//! (`#[path]`), against [`sync`], a facade with the same names as the
//! driver's `sync` module but backed by loom. The models therefore check
//! exactly the code that ships, without building tokio under `cfg(loom)`.
//! Run them with `cargo test -p shardwise-loom-tests --release`.

pub mod sync {
    //! loom versions of the driver's synchronization primitives.

    pub use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    pub use loom::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard};

    /// A `OnceLock` for models: the value lives in a std `OnceLock`, and
    /// every access goes through a loom mutex so the model sees the
    /// synchronization that initialization implies.
    #[derive(Debug)]
    pub struct OnceLock<T> {
        lock: Mutex<()>,
        value: std::sync::OnceLock<T>,
    }

    impl<T> OnceLock<T> {
        /// An empty cell.
        pub fn new() -> Self {
            OnceLock { lock: Mutex::new(()), value: std::sync::OnceLock::new() }
        }
        /// The value, if initialized.
        pub fn get(&self) -> Option<&T> {
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.value.get()
        }
        /// The value, initializing it with `f` first if needed.
        pub fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.value.get_or_init(f)
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

#[cfg(test)]
mod stream_slots;

#[cfg(test)]
mod pool_refill;
