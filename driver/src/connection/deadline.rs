//! A request's deadline on a connection: when it stops waiting, and which
//! timeout (the request's or one attempt's) it then fails with. The
//! deadline costs no timer while the request waits for its answer (the
//! sweeper keeps it, see `stream.rs`); [`bounded`] arms one only for a
//! wait that is not ready at once (for a stream id, or room to write).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Instant;

use crate::error::ExecutionError;

/// When a request stops waiting, and what it then fails with (a
/// request's timeout or an attempt's, as the caller decided).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    /// The instant.
    pub(crate) at: Instant,
    /// Which timeout it is.
    pub(crate) expiry: Expiry,
}

/// Which timeout a [`Deadline`] is. The error is made only when it passed:
/// an error kept ready in every attempt was built and dropped by every
/// request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// The whole request's ([`ExecutionError::Timeout`]).
    Request(std::time::Duration),
    /// One attempt's ([`ExecutionError::AttemptTimeout`]).
    Attempt { after: std::time::Duration, node: SocketAddr, shard: Option<u16> },
}

impl Deadline {
    /// What a request whose deadline passed fails with.
    pub(crate) fn error(&self) -> ExecutionError {
        match self.expiry {
            Expiry::Request(t) => ExecutionError::Timeout(t),
            Expiry::Attempt { after, node, shard } => ExecutionError::AttemptTimeout { after, node, shard },
        }
    }
}

/// `fut`, or `deadline`'s error once it passed. The timer is made only when
/// `fut` is not ready at its first poll: the usual case costs none.
pub(super) async fn bounded<T, F>(deadline: Option<&Deadline>, fut: F) -> Result<T, ExecutionError>
where
    F: Future<Output = Result<T, ExecutionError>>,
{
    let mut fut = pin!(fut);
    let mut timer = pin!(None::<tokio::time::Sleep>);
    std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
        Poll::Ready(v) => Poll::Ready(v),
        Poll::Pending => poll_deadline(deadline, timer.as_mut(), cx).map(Err),
    })
    .await
}

/// `Pending` until `deadline` passed (arming `timer` on the first call),
/// then its error; always `Pending` without a deadline.
pub(super) fn poll_deadline(
    deadline: Option<&Deadline>,
    mut timer: Pin<&mut Option<tokio::time::Sleep>>,
    cx: &mut Context<'_>,
) -> Poll<ExecutionError> {
    let Some(deadline) = deadline else { return Poll::Pending };
    if timer.is_none() {
        timer.set(Some(tokio::time::sleep_until(deadline.at.into())));
    }
    match timer.as_pin_mut().map(|t| t.poll(cx)) {
        Some(Poll::Ready(())) => Poll::Ready(deadline.error()),
        _ => Poll::Pending,
    }
}
