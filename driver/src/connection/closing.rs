//! How a connection closes while requests come and go: the steps of
//! `Inner::close`, of claiming a stream id and of dropping a request's
//! future that touch shared state, kept free of tokio so that `loom-tests`
//! can model them together with the stream table (`stream.rs`).
//!
//! The guarantee: a request never waits for an answer that cannot come.
//! Either it claims its stream id before the close fails every pending id
//! (and is failed with them), or it sees the connection closed and claims
//! nothing. The slot's mutex orders the two: whoever takes it first, the
//! other sees what it did.

use super::stream::{Streams, Tick};
use crate::sync::{AtomicBool, OnceLock, Ordering};

/// The error requests on a closed connection get: the first close reason,
/// else `fallback`.
pub(crate) fn closed_error<E: Clone>(error: &OnceLock<E>, fallback: impl FnOnce() -> E) -> E {
    error.get().cloned().unwrap_or_else(fallback)
}

/// Records `reason` (the first one wins) and marks the connection closed.
/// Returns the error to fail in-flight requests with on the first close
/// only; the caller then closes the write path, fails every pending id
/// ([`Streams::fail_all`]) and wakes whoever waits.
pub(crate) fn begin_close<E: Clone>(
    closed: &AtomicBool,
    error: &OnceLock<E>,
    reason: E,
    fallback: impl FnOnce() -> E,
) -> Option<E> {
    let _ = error.set(reason);
    if closed.swap(true, Ordering::AcqRel) {
        return None;
    }
    Some(closed_error(error, fallback))
}

/// Claims a stream id for a request that expires at `deadline`: `Ok(None)`
/// when every id is in use (wait for one to be freed, then try again), an
/// error when the connection is closed. The check after claiming catches a
/// close that ran between the first check and the claim, whose `fail_all`
/// missed the new id: the id is given back and the request fails instead of
/// waiting forever.
pub(crate) fn claim<T, E: Clone>(
    closed: &AtomicBool,
    error: &OnceLock<E>,
    streams: &Streams<T>,
    deadline: Tick,
    fallback: impl Fn() -> E,
) -> Result<Option<i16>, E> {
    if closed.load(Ordering::Acquire) {
        return Err(closed_error(error, fallback));
    }
    let Some(id) = streams.allocate_until(deadline) else { return Ok(None) };
    if closed.load(Ordering::Acquire) {
        streams.cancel(id);
        return Err(closed_error(error, fallback));
    }
    Ok(Some(id))
}

/// What dropping a request's future before its answer did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// Never sent: the id is free again (wake a request waiting for one).
    Cancelled,
    /// Sent: the id stays reserved until the answer comes (or the
    /// connection fails); `orphans` is the count after this one.
    Abandoned {
        /// Requests abandoned and still unanswered.
        orphans: usize,
    },
}

/// The shared-state part of dropping a request's future that did not
/// take its answer.
pub(crate) fn drop_request<T>(streams: &Streams<T>, id: i16, sent: bool) -> Dropped {
    if sent {
        streams.abandon(id);
        Dropped::Abandoned { orphans: streams.orphans() }
    } else {
        streams.cancel(id);
        Dropped::Cancelled
    }
}
