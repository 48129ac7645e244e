//! The reader's stop and leave signals: a flag raised once, and the wake-up
//! of whoever sleeps meanwhile (the workers for the stop, the lease holder
//! or the assignment follower for the leave).
//!
//! A loop checks the flag, works, then sleeps until woken or its timer.
//! Checked first and waited for after, a raise between the check and the
//! wait would be missed until the timer (`Notify::notify_waiters` keeps no
//! permit): so [`Signal::ticket`] takes what to wait on *before* it reads
//! the flag, and any raise or wake-up after that ends the wait at once.
//! Kept free of tokio so that `loom-tests` can model it.

use crate::sync::{AtomicBool, Ordering};

/// What wakes the sleepers: tokio's `Notify` in the reader.
pub(crate) trait Wakes {
    /// What a sleeper waits on: ended by every
    /// [`wake_all`](Self::wake_all) after it was taken.
    type Ticket<'a>
    where
        Self: 'a;
    /// A ticket for the next wait.
    fn ticket(&self) -> Self::Ticket<'_>;
    /// Wakes every ticket taken so far.
    fn wake_all(&self);
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Signal<W> {
    raised: AtomicBool,
    wakes: W,
}

impl<W: Wakes> Signal<W> {
    /// Raises the flag and wakes every sleeper.
    pub(crate) fn raise(&self) {
        self.raised.store(true, Ordering::Release);
        self.wakes.wake_all();
    }

    /// Wakes every sleeper without raising the flag (there is work).
    pub(crate) fn wake(&self) {
        self.wakes.wake_all();
    }

    /// Whether the flag is raised.
    pub(crate) fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire)
    }

    /// What to wait on until the next raise or wake-up, taken before the
    /// flag is read; `None` when the flag is raised.
    pub(crate) fn ticket(&self) -> Option<W::Ticket<'_>> {
        let ticket = self.wakes.ticket();
        (!self.is_raised()).then_some(ticket)
    }
}
