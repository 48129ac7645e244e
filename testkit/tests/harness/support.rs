//! What the test modules share.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Held by a test while it starts and uses Cassandra nodes of its own (not
/// the shared one): a few JVMs starting at once on a small machine would
/// compete for it and could miss their startup timeout.
pub fn own_nodes() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A test that failed while holding it leaves nothing behind to protect.
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}
