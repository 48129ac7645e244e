//! A hook per request and per attempt, for an application's own metrics,
//! logs or traces (the official driver's `HistoryListener`). The session's
//! own counters (`Session::metrics`) need none of this; an observer is for
//! what they do not say: which node each attempt went to, how long it
//! took, what the retry policy decided.
//!
//! Set on the session ([`SessionBuilder::request_observer`]), on an
//! execution profile ([`ExecutionProfile::request_observer`], which wins
//! over the session's) or on one statement
//! ([`Statement::with_request_observer`], which wins over both). Without
//! one, a request pays one branch per attempt; with one, it also takes a
//! [`RequestId`] (one shared counter's increment), so that an observer
//! shared by concurrent requests can tell their calls apart.
//! [`HistoryCollector`] is an observer that keeps every call, as the
//! official `HistoryCollector` does. The calls are made on the request's own
//! task, inline: an observer must not block; it should count or hand off.
//!
//! [`SessionBuilder::request_observer`]: crate::SessionBuilder::request_observer
//! [`ExecutionProfile::request_observer`]: crate::ExecutionProfile::request_observer
//! [`Statement::with_request_observer`]: crate::Statement::with_request_observer
//! [`HistoryCollector`]: crate::history::HistoryCollector

use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shardwise_protocol::consistency::Consistency;

use crate::error::ExecutionError;
use crate::retry::RetryDecision;

/// Names one request among those an observer hears of: unique within the
/// process, increasing in the order requests started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(NonZeroU64);

impl RequestId {
    /// The next request's id. Made only for a request with an observer.
    pub(crate) fn next() -> RequestId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // 2^64 requests do not happen; were the counter to wrap, 0 is skipped.
        RequestId(NonZeroU64::new(n).unwrap_or(NonZeroU64::MIN))
    }

    /// The id as a number.
    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One attempt of a request: where it went and at which consistency.
#[derive(Debug, Clone, Copy)]
pub struct AttemptInfo<'a> {
    /// The request it is an attempt of.
    pub request: RequestId,
    /// The node, by its address as the driver knows it (the topology's,
    /// after address translation; not the shard-aware port a connection
    /// may have been opened to).
    pub node: SocketAddr,
    /// The shard of the connection, on a sharded node.
    pub shard: Option<u16>,
    /// How many retries preceded this attempt in its run (0 for the first).
    pub retry: u32,
    /// Which run of attempts (fiber): 0 for the request's own, 1 and up
    /// for the speculative executions started beside it, in the order they
    /// started.
    pub speculative: usize,
    /// The consistency it is sent at.
    pub consistency: Consistency,
    /// The keyspace and table, for a routed (prepared) statement.
    pub table: Option<(&'a str, &'a str)>,
}

/// Receives a request's attempts and outcome. Every method has an empty
/// default: implement those you need.
pub trait RequestObserver: Send + Sync + std::fmt::Debug {
    /// A request started (before its first attempt is planned).
    fn request_started(&self, request: RequestId) {
        let _ = request;
    }
    /// An attempt is about to be sent.
    fn attempt_started(&self, attempt: &AttemptInfo<'_>) {
        let _ = attempt;
    }
    /// An attempt succeeded after `took`.
    fn attempt_succeeded(&self, attempt: &AttemptInfo<'_>, took: Duration) {
        let _ = (attempt, took);
    }
    /// An attempt failed after `took`, and the retry policy decided
    /// `decision` (`None` when the error ended the request without asking:
    /// the request's own timeout).
    fn attempt_failed(
        &self,
        attempt: &AttemptInfo<'_>,
        error: &ExecutionError,
        took: Duration,
        decision: Option<RetryDecision>,
    ) {
        let _ = (attempt, error, took, decision);
    }
    /// The request ended after `took`, with this outcome (a request whose
    /// plan found no node ends without any attempt).
    fn request_finished(&self, request: RequestId, outcome: Result<(), &ExecutionError>, took: Duration) {
        let _ = (request, outcome, took);
    }
}
