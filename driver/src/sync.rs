//! The synchronization primitives shared-state modules use. `loom-tests`
//! compiles those modules (by `#[path]`) against a facade of the same names
//! backed by loom, so the models check exactly the code that ships.

pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
pub(crate) use std::sync::{Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard};
