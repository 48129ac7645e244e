//! The synchronization primitives of the crate's shared state, in one
//! place (as in the driver), so that a loom facade can replace them.

pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
pub(crate) use std::sync::{Mutex, MutexGuard};
