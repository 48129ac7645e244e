//! A hook per request and per attempt, for an application's own metrics,
//! logs or traces (the official driver's `HistoryListener`). The session's
//! own counters (`Session::metrics`) need none of this; an observer is for
//! what they do not say: which node each attempt went to, how long it
//! took, what the retry policy decided.
//!
//! Set on the session ([`SessionBuilder::request_observer`]) or on an
//! execution profile ([`ExecutionProfile::request_observer`], which wins).
//! Without one, a request pays one branch per attempt. The calls are made
//! on the request's own task, inline: an observer must not block; it
//! should count or hand off.
//!
//! [`SessionBuilder::request_observer`]: crate::SessionBuilder::request_observer
//! [`ExecutionProfile::request_observer`]: crate::ExecutionProfile::request_observer

use std::net::SocketAddr;
use std::time::Duration;

use shardwise_protocol::consistency::Consistency;

use crate::error::ExecutionError;
use crate::retry::RetryDecision;

/// One attempt of a request: where it went and at which consistency.
#[derive(Debug, Clone, Copy)]
pub struct AttemptInfo<'a> {
    /// The node.
    pub node: SocketAddr,
    /// The shard of the connection, on a sharded node.
    pub shard: Option<u16>,
    /// How many retries preceded this attempt in its run (0 for the first).
    pub retry: u32,
    /// Which run of attempts: 0 for the request's own, 1 and up for the
    /// speculative executions started beside it.
    pub speculative: usize,
    /// The consistency it is sent at.
    pub consistency: Consistency,
    /// The keyspace and table, for a routed (prepared) statement.
    pub table: Option<(&'a str, &'a str)>,
}

/// Receives a request's attempts and outcome. Every method has an empty
/// default: implement those you need.
pub trait RequestObserver: Send + Sync + std::fmt::Debug {
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
    /// The request ended after `took`, with this outcome.
    fn request_finished(&self, outcome: Result<(), &ExecutionError>, took: Duration) {
        let _ = (outcome, took);
    }
}
