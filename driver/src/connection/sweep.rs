//! When the connection's sweeper wakes next, and the handshake with the
//! requests that store a deadline (`io::sweeper`, `Inner::send_with`),
//! kept free of tokio so that `loom-tests` can model it over the stream
//! table (`stream.rs`).
//!
//! No deadline may be missed. A request whose deadline is earlier than the
//! sweeper's next wake-up pings it; while a sweep is under way, the wake-up
//! reads `MAX`, so that a request the sweep may not see pings too. Each
//! side writes its own words (the sweeper its wake-up, the request its id
//! and deadline), puts a `SeqCst` fence, then reads the other's: either the
//! sweep sees the deadline, or the request sees the sweep and pings. The
//! fences matter: `SeqCst` loads and stores alone would not order the
//! request's claim of its id (a `fetch_or` of the page's bitmap) before the
//! sweep's read of that bitmap. A ping the sweeper does not wait for yet is
//! kept (`Notify::notify_one` stores a permit).

use super::stream::{Tick, NO_DEADLINE};
use crate::sync::{fence, AtomicU64, Ordering};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct NextSweep(AtomicU64);

impl Default for NextSweep {
    /// Not before a ping: nothing to sweep yet.
    fn default() -> Self {
        NextSweep(AtomicU64::new(Tick::MAX))
    }
}

impl NextSweep {
    /// The sweeper starts a sweep; call before `Streams::expire`.
    pub(crate) fn begin(&self) {
        self.0.store(Tick::MAX, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// The sweep found `next` the earliest deadline to come: the sweeper
    /// sleeps until then, or until pinged.
    pub(crate) fn end(&self, next: Option<Tick>) {
        self.0.store(next.unwrap_or(Tick::MAX), Ordering::Relaxed);
    }

    /// Whether a request that claimed its id with `deadline` must ping the
    /// sweeper: it sleeps past that deadline, or sweeps and may not see it.
    pub(crate) fn must_ping(&self, deadline: Tick) -> bool {
        if deadline == NO_DEADLINE {
            return false;
        }
        fence(Ordering::SeqCst);
        deadline < self.0.load(Ordering::Relaxed)
    }
}
