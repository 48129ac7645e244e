//! The history of each request, kept by a shipped observer: every attempt's
//! node, when it started, how it ended and what the retry policy decided,
//! grouped by run of attempts (the request's own and each speculative
//! execution), as the official driver's `HistoryCollector` and
//! `StructuredHistory` give it.
//!
//! Why an observer and not a second hook: [`RequestObserver`] already hears
//! every attempt on the request's own task, and costs a request without one
//! a branch per attempt. [`HistoryCollector`] is one such observer that
//! writes down what it hears; a service that wants less (a counter, a log
//! line) writes its own observer instead. Set it on one statement
//! ([`Statement::with_request_observer`]), on a profile or on the session.
//!
//! The collector reads the wall clock once per request and per attempt, and
//! keeps every request it heard of until [`HistoryCollector::take_structured_history`]
//! hands them over: meant for a statement under investigation or a test,
//! not for every request of a busy service.
//!
//! [`Statement::with_request_observer`]: crate::Statement::with_request_observer

use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use shardwise_protocol::consistency::Consistency;

use crate::error::ExecutionError;
use crate::observer::{AttemptInfo, RequestId, RequestObserver};
use crate::retry::RetryDecision;
use crate::sync::{Mutex, MutexGuard};

/// Collects the history of every request it observes.
///
/// ```
/// use std::sync::Arc;
/// use shardwise::history::HistoryCollector;
/// use shardwise::Statement;
///
/// let history = Arc::new(HistoryCollector::new());
/// let select = Statement::new("SELECT * FROM ks.t").with_request_observer(history.clone());
/// // session.execute(&select, ()).await?;
/// for request in history.clone_structured_history().requests {
///     for attempt in request.attempts() {
///         println!("{} {:?}", attempt.node, attempt.result);
///     }
/// }
/// # let _ = select;
/// ```
#[derive(Debug, Default)]
pub struct HistoryCollector {
    requests: Mutex<Vec<RequestHistory>>,
}

impl HistoryCollector {
    /// A collector that has heard nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the history so far.
    pub fn clone_structured_history(&self) -> StructuredHistory {
        StructuredHistory { requests: self.lock().clone() }
    }

    /// The history so far, which the collector forgets. A request still
    /// running (or an attempt a speculative rival outran, still unanswered)
    /// may report more afterwards: what belongs to a request taken away is
    /// dropped.
    pub fn take_structured_history(&self) -> StructuredHistory {
        StructuredHistory { requests: std::mem::take(&mut *self.lock()) }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<RequestHistory>> {
        // A panic while holding it leaves whole entries: keep them.
        self.requests.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `f` of the attempt `attempt` names, if its request is still kept.
    fn with_attempt(&self, attempt: &AttemptInfo<'_>, f: impl FnOnce(&mut AttemptHistory)) {
        let mut requests = self.lock();
        let Some(request) = find(&mut requests, attempt.request) else { return };
        let Some(fiber) = request.fiber_mut(attempt.speculative) else { return };
        if let Some(a) = fiber.attempts.iter_mut().rev().find(|a| a.retry == attempt.retry) {
            f(a);
        }
    }
}

/// The kept request `id`: a recent one, looked for from the end.
fn find(requests: &mut [RequestHistory], id: RequestId) -> Option<&mut RequestHistory> {
    requests.iter_mut().rev().find(|r| r.id == id)
}

impl RequestObserver for HistoryCollector {
    fn request_started(&self, request: RequestId) {
        let started = SystemTime::now();
        self.lock().push(RequestHistory {
            id: request,
            started,
            result: None,
            fiber: FiberHistory { started, attempts: Vec::new() },
            speculative_fibers: Vec::new(),
        });
    }

    fn attempt_started(&self, attempt: &AttemptInfo<'_>) {
        let started = SystemTime::now();
        let mut requests = self.lock();
        let Some(request) = find(&mut requests, attempt.request) else { return };
        let fiber = match attempt.speculative {
            0 => &mut request.fiber,
            n => {
                // Speculative executions start one at a time, in order; a
                // fiber starts with its first attempt.
                while request.speculative_fibers.len() < n {
                    request.speculative_fibers.push(FiberHistory { started, attempts: Vec::new() });
                }
                &mut request.speculative_fibers[n - 1]
            }
        };
        fiber.attempts.push(AttemptHistory {
            node: attempt.node,
            shard: attempt.shard,
            consistency: attempt.consistency,
            retry: attempt.retry,
            started,
            result: None,
        });
    }

    fn attempt_succeeded(&self, attempt: &AttemptInfo<'_>, took: Duration) {
        self.with_attempt(attempt, |a| a.result = Some(AttemptResult::Success { took }));
    }

    fn attempt_failed(
        &self,
        attempt: &AttemptInfo<'_>,
        error: &ExecutionError,
        took: Duration,
        decision: Option<RetryDecision>,
    ) {
        self.with_attempt(attempt, |a| a.result = Some(AttemptResult::Error { took, error: error.clone(), decision }));
    }

    fn request_finished(&self, request: RequestId, outcome: Result<(), &ExecutionError>, took: Duration) {
        let mut requests = self.lock();
        if let Some(r) = find(&mut requests, request) {
            r.result = Some(match outcome {
                Ok(()) => RequestResult::Success { took },
                Err(error) => RequestResult::Error { took, error: error.clone() },
            });
        }
    }
}

/// Every request a [`HistoryCollector`] heard of, in the order they
/// started. Its `Display` writes one line per request and per attempt.
#[derive(Debug, Clone, Default)]
pub struct StructuredHistory {
    /// The requests.
    pub requests: Vec<RequestHistory>,
}

/// One request: its runs of attempts and how it ended.
#[derive(Debug, Clone)]
pub struct RequestHistory {
    /// The id its observer calls carried.
    pub id: RequestId,
    /// When it started (the wall clock, read by the collector).
    pub started: SystemTime,
    /// How it ended; `None` while it runs.
    pub result: Option<RequestResult>,
    /// The request's own run of attempts (the official
    /// `non_speculative_fiber`).
    pub fiber: FiberHistory,
    /// The speculative executions started beside it, in order.
    pub speculative_fibers: Vec<FiberHistory>,
}

impl RequestHistory {
    /// Every attempt, the request's own run first, then each speculative
    /// execution's.
    pub fn attempts(&self) -> impl Iterator<Item = &AttemptHistory> + '_ {
        std::iter::once(&self.fiber).chain(&self.speculative_fibers).flat_map(|f| &f.attempts)
    }

    /// The run of attempts `speculative` names (0: the request's own).
    fn fiber_mut(&mut self, speculative: usize) -> Option<&mut FiberHistory> {
        match speculative {
            0 => Some(&mut self.fiber),
            n => self.speculative_fibers.get_mut(n - 1),
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone)]
pub enum RequestResult {
    /// It succeeded after `took` (a write error the retry policy chose to
    /// ignore included).
    Success {
        /// From its start to its end.
        took: Duration,
    },
    /// It failed after `took` with `error`.
    Error {
        /// From its start to its end.
        took: Duration,
        /// What the caller got.
        error: ExecutionError,
    },
}

/// One run of attempts: the request's own, or a speculative execution.
#[derive(Debug, Clone)]
pub struct FiberHistory {
    /// When it started: the request's start for its own run, the first
    /// attempt's for a speculative one.
    pub started: SystemTime,
    /// Its attempts, each retry after the one before.
    pub attempts: Vec<AttemptHistory>,
}

/// One attempt: where it went and how it ended.
#[derive(Debug, Clone)]
pub struct AttemptHistory {
    /// The node (the address the driver connects to).
    pub node: SocketAddr,
    /// The shard, on a sharded node.
    pub shard: Option<u16>,
    /// The consistency it was sent at (a retry policy may lower it).
    pub consistency: Consistency,
    /// How many retries preceded it in its run.
    pub retry: u32,
    /// When it was sent (the wall clock, read by the collector).
    pub started: SystemTime,
    /// How it ended; `None` while unanswered, or for good when the request
    /// ended without it (a speculative rival succeeded first, or the
    /// request timed out).
    pub result: Option<AttemptResult>,
}

/// How an attempt ended.
#[derive(Debug, Clone)]
pub enum AttemptResult {
    /// Answered after `took`.
    Success {
        /// From when it was sent to its answer.
        took: Duration,
    },
    /// Failed after `took`.
    Error {
        /// From when it was sent to its failure.
        took: Duration,
        /// The error.
        error: ExecutionError,
        /// What the retry policy decided; `None` when the error ended the
        /// request without asking it (the request timed out).
        decision: Option<RetryDecision>,
    },
}

impl fmt::Display for StructuredHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for request in &self.requests {
            write!(f, "request {}: ", request.id)?;
            match &request.result {
                None => writeln!(f, "running")?,
                Some(RequestResult::Success { took }) => writeln!(f, "succeeded after {took:?}")?,
                Some(RequestResult::Error { took, error }) => writeln!(f, "failed after {took:?}: {error}")?,
            }
            let fibers = std::iter::once(&request.fiber).chain(&request.speculative_fibers);
            for (n, fiber) in fibers.enumerate() {
                if n > 0 {
                    let after = fiber.started.duration_since(request.started).unwrap_or_default();
                    writeln!(f, "  speculative execution {n}, {after:?} after the start:")?;
                }
                for attempt in &fiber.attempts {
                    write_attempt(f, request.started, attempt)?;
                }
            }
        }
        Ok(())
    }
}

/// One line for `attempt`, its start relative to the request's `start`.
fn write_attempt(f: &mut fmt::Formatter<'_>, start: SystemTime, attempt: &AttemptHistory) -> fmt::Result {
    let at = attempt.started.duration_since(start).unwrap_or_default();
    write!(f, "  attempt {} at +{at:?} to {}", attempt.retry, attempt.node)?;
    if let Some(shard) = attempt.shard {
        write!(f, " shard {shard}")?;
    }
    write!(f, " ({:?}): ", attempt.consistency)?;
    match &attempt.result {
        None => writeln!(f, "no answer"),
        Some(AttemptResult::Success { took }) => writeln!(f, "answered after {took:?}"),
        Some(AttemptResult::Error { took, error, decision: Some(d) }) => {
            writeln!(f, "failed after {took:?}: {error}; then {d:?}")
        }
        Some(AttemptResult::Error { took, error, decision: None }) => writeln!(f, "failed after {took:?}: {error}"),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::error::ConnectionError;

    fn attempt(request: RequestId, retry: u32, speculative: usize, port: u16) -> AttemptInfo<'static> {
        AttemptInfo {
            request,
            node: SocketAddr::from(([127, 0, 0, 1], port)),
            shard: None,
            retry,
            speculative,
            consistency: Consistency::Quorum,
            table: Some(("ks", "t")),
        }
    }

    #[test]
    fn a_retried_request_keeps_each_attempt_with_its_decision() {
        let history = HistoryCollector::new();
        let id = RequestId::next();
        history.request_started(id);
        let first = attempt(id, 0, 0, 1);
        history.attempt_started(&first);
        let lost = ExecutionError::Connection(ConnectionError::Closed);
        let decision = Some(RetryDecision::RetryNextNode(Some(Consistency::One)));
        history.attempt_failed(&first, &lost, Duration::from_millis(3), decision);
        let second = AttemptInfo { consistency: Consistency::One, ..attempt(id, 1, 0, 2) };
        history.attempt_started(&second);
        history.attempt_succeeded(&second, Duration::from_millis(1));
        history.request_finished(id, Ok(()), Duration::from_millis(5));

        let h = history.clone_structured_history();
        let [request] = &h.requests[..] else { panic!("one request: {h:?}") };
        assert!(matches!(request.result, Some(RequestResult::Success { took }) if took == Duration::from_millis(5)));
        let attempts: Vec<_> = request.attempts().collect();
        assert_eq!(attempts.len(), 2);
        assert_eq!((attempts[0].node.port(), attempts[0].consistency), (1, Consistency::Quorum));
        assert!(matches!(
            &attempts[0].result,
            Some(AttemptResult::Error { error: ExecutionError::Connection(_), decision: Some(d), .. }) if Some(*d) == decision
        ));
        assert_eq!((attempts[1].node.port(), attempts[1].consistency, attempts[1].retry), (2, Consistency::One, 1));
        assert!(matches!(attempts[1].result, Some(AttemptResult::Success { .. })));
        let text = h.to_string();
        assert!(text.contains("succeeded after") && text.contains("then RetryNextNode"), "{text}");
    }

    #[test]
    fn speculative_executions_are_fibers_of_their_own() {
        let history = HistoryCollector::new();
        let id = RequestId::next();
        history.request_started(id);
        history.attempt_started(&attempt(id, 0, 0, 1));
        history.attempt_started(&attempt(id, 0, 1, 2));
        history.attempt_succeeded(&attempt(id, 0, 1, 2), Duration::from_millis(1));
        history.request_finished(id, Ok(()), Duration::from_millis(2));

        let h = history.take_structured_history();
        let request = &h.requests[0];
        assert_eq!(request.fiber.attempts.len(), 1);
        assert!(request.fiber.attempts[0].result.is_none(), "the outrun attempt stays unanswered");
        let [spec] = &request.speculative_fibers[..] else { panic!("one speculative fiber: {request:?}") };
        assert_eq!(spec.attempts[0].node.port(), 2);
        assert!(matches!(spec.attempts[0].result, Some(AttemptResult::Success { .. })));
        assert!(h.to_string().contains("speculative execution 1"), "{h}");
        assert!(history.clone_structured_history().requests.is_empty(), "taken");
    }

    #[test]
    fn concurrent_requests_are_told_apart_and_a_taken_one_is_not_revived() {
        let history = HistoryCollector::new();
        let (a, b) = (RequestId::next(), RequestId::next());
        assert!(a < b);
        history.request_started(a);
        history.request_started(b);
        history.attempt_started(&attempt(b, 0, 0, 2));
        history.attempt_started(&attempt(a, 0, 0, 1));
        let timeout = ExecutionError::Timeout(Duration::from_secs(1));
        history.attempt_failed(&attempt(a, 0, 0, 1), &timeout, Duration::from_secs(1), None);
        history.request_finished(a, Err(&timeout), Duration::from_secs(1));
        let h = history.take_structured_history();
        assert_eq!(h.requests.iter().map(|r| r.id).collect::<Vec<_>>(), [a, b]);
        assert!(matches!(h.requests[0].result, Some(RequestResult::Error { error: ExecutionError::Timeout(_), .. })));
        assert_eq!(h.requests[0].fiber.attempts[0].node.port(), 1);
        assert!(h.requests[1].result.is_none() && h.requests[1].fiber.attempts[0].node.port() == 2);

        // b finishes after it was taken: nothing is kept for it.
        history.attempt_succeeded(&attempt(b, 0, 0, 2), Duration::from_millis(1));
        history.request_finished(b, Ok(()), Duration::from_millis(1));
        assert!(history.clone_structured_history().requests.is_empty());
    }
}
