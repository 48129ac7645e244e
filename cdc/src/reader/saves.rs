//! The checkpoint saves under way, counted so that a lease holder hands a
//! group over only once no save is in flight.
//!
//! A worker's save takes the progress of the groups it holds under the
//! planner's lock, then writes it without the lock. The holder gives a
//! group up by leaving it under the same lock, then saves its final
//! progress. A save whose snapshot still had the group could land after
//! that final save and set the group back; so a worker counts its save
//! *before* taking the snapshot, and the holder waits for the count to be
//! zero after leaving the group: a snapshot taken before the group was
//! left is then either counted (waited for) or already written.
//! `loom-tests` models exactly this file.

use crate::sync::{AtomicUsize, Ordering};

/// Saves under way.
#[derive(Debug, Default)]
pub(crate) struct Saves {
    in_flight: AtomicUsize,
}

/// One save under way; ends when dropped.
#[derive(Debug)]
pub(crate) struct Save<'a>(&'a Saves);

impl Saves {
    /// A save starts: call before taking the progress to save.
    pub(crate) fn begin(&self) -> Save<'_> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Save(self)
    }

    /// Whether no save is under way.
    pub(crate) fn quiet(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0
    }
}

impl Drop for Save<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}
