//! What to do when an attempt fails: retry on the same node or the next
//! node of the plan (at the same or another consistency), give up, or
//! (for a write) treat the error as success. The default policy follows
//! the official drivers'; statements that are not idempotent are never
//! retried after their request may have been applied.
//!
//! The shape is the official driver's: a [`RetryPolicy`] makes one
//! [`RetrySession`] per request, which keeps whatever state the policy
//! needs across that request's attempts. The session is made at the
//! request's first failure, so a request that succeeds at once costs
//! nothing; the built-in sessions hold no state and are never allocated.

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::response::{ErrorKind, WriteType};

use crate::error::ExecutionError;

/// A retry decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Try the same node again, at this consistency (`None`: unchanged).
    RetrySameNode(Option<Consistency>),
    /// Try the next node of the query plan, at this consistency (`None`:
    /// unchanged).
    RetryNextNode(Option<Consistency>),
    /// Return the error.
    DontRetry,
    /// Return an empty (void) result instead of the error: for writes whose
    /// failure the application tolerates (the official driver's
    /// `IgnoreWriteError`).
    IgnoreWriteError,
}

/// What a retry session is asked about: one failed attempt.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    /// The attempt's error.
    pub error: &'a ExecutionError,
    /// Whether the statement is idempotent (may be applied twice).
    pub idempotent: bool,
    /// The consistency the failed attempt was sent at.
    pub consistency: Consistency,
    /// How many retries this request made before this failure (0 for the
    /// first attempt's).
    pub attempt: u32,
}

/// Makes a [`RetrySession`] per request.
pub trait RetryPolicy: Send + Sync + std::fmt::Debug {
    /// A session for one request, made at its first failed attempt.
    fn new_session(&self) -> Box<dyn RetrySession>;
}

/// Decides a request's retries, keeping state across its attempts.
pub trait RetrySession: Send + Sync {
    /// Decides what follows a failed attempt.
    fn decide(&mut self, request: RequestInfo<'_>) -> RetryDecision;
}

/// The usual policy: one retry for the timeouts and unavailability that a
/// retry can fix, node failover for idempotent statements (after a server
/// error, a lost connection or an attempt timeout); at most 3 retries.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRetryPolicy;

impl DefaultRetryPolicy {
    /// The decision for one failed attempt (the session holds no state:
    /// `request.attempt` says all it needs).
    pub fn decide(request: RequestInfo<'_>) -> RetryDecision {
        use RetryDecision::*;
        let RequestInfo { error, idempotent, attempt, .. } = request;
        if attempt >= 3 {
            return DontRetry;
        }
        match error {
            ExecutionError::Db(e) => match &e.kind {
                ErrorKind::Unavailable { .. } if attempt == 0 => RetryNextNode(None),
                ErrorKind::ReadTimeout { received, block_for, data_present, .. }
                    if attempt == 0 && received >= block_for && !data_present =>
                {
                    RetrySameNode(None)
                }
                ErrorKind::WriteTimeout { write_type: WriteType::BatchLog, .. } if attempt == 0 && idempotent => {
                    RetrySameNode(None)
                }
                ErrorKind::IsBootstrapping => RetryNextNode(None),
                ErrorKind::Overloaded | ErrorKind::ServerError | ErrorKind::TruncateError if idempotent => {
                    RetryNextNode(None)
                }
                _ => DontRetry,
            },
            ExecutionError::Connection(_) | ExecutionError::AttemptTimeout { .. } if idempotent => RetryNextNode(None),
            ExecutionError::NoConnection => RetryNextNode(None),
            _ => DontRetry,
        }
    }
}

impl RetryPolicy for DefaultRetryPolicy {
    fn new_session(&self) -> Box<dyn RetrySession> {
        // A zero-sized session: `Box::new` allocates nothing for it.
        Box::new(DefaultRetryPolicy)
    }
}

impl RetrySession for DefaultRetryPolicy {
    fn decide(&mut self, request: RequestInfo<'_>) -> RetryDecision {
        DefaultRetryPolicy::decide(request)
    }
}

/// Never retries.
#[derive(Debug, Clone, Copy, Default)]
pub struct FallthroughRetryPolicy;

impl RetryPolicy for FallthroughRetryPolicy {
    fn new_session(&self) -> Box<dyn RetrySession> {
        Box::new(FallthroughRetryPolicy)
    }
}

impl RetrySession for FallthroughRetryPolicy {
    fn decide(&mut self, _: RequestInfo<'_>) -> RetryDecision {
        RetryDecision::DontRetry
    }
}

/// The official driver's downgrading policy: when the replicas alive or
/// answering are fewer than the consistency needs, retry once at the
/// consistency they can meet (`THREE`, `TWO` or `ONE`); a write that
/// reached at least one replica counts as done (for the write types where
/// that is safe). Otherwise as [`DefaultRetryPolicy`].
///
/// It trades consistency for availability: a read retried at `ONE` may
/// miss the newest write. Use it only where that is acceptable.
#[derive(Debug, Clone, Copy, Default)]
pub struct DowngradingConsistencyRetryPolicy;

/// The session of [`DowngradingConsistencyRetryPolicy`]: whether it has
/// already downgraded (it does so once per request).
#[derive(Debug, Default)]
struct Downgrading {
    downgraded: bool,
}

impl RetryPolicy for DowngradingConsistencyRetryPolicy {
    fn new_session(&self) -> Box<dyn RetrySession> {
        Box::new(Downgrading::default())
    }
}

/// The consistency `alive` replicas can meet, if any.
fn reachable(alive: i32) -> Option<Consistency> {
    match alive {
        3.. => Some(Consistency::Three),
        2 => Some(Consistency::Two),
        1 => Some(Consistency::One),
        _ => None,
    }
}

impl RetrySession for Downgrading {
    fn decide(&mut self, request: RequestInfo<'_>) -> RetryDecision {
        use RetryDecision::*;
        let serial = matches!(request.consistency, Consistency::Serial | Consistency::LocalSerial);
        let ExecutionError::Db(e) = request.error else { return DefaultRetryPolicy::decide(request) };
        if self.downgraded || serial {
            return match e.kind {
                ErrorKind::Unavailable { .. } | ErrorKind::ReadTimeout { .. } | ErrorKind::WriteTimeout { .. } => {
                    DontRetry
                }
                _ => DefaultRetryPolicy::decide(request),
            };
        }
        let decision = match &e.kind {
            ErrorKind::Unavailable { alive, .. } => reachable(*alive).map_or(DontRetry, |c| RetrySameNode(Some(c))),
            ErrorKind::ReadTimeout { received, block_for, data_present, .. } => {
                if received < block_for {
                    reachable(*received).map_or(DontRetry, |c| RetrySameNode(Some(c)))
                } else if !*data_present {
                    RetrySameNode(None)
                } else {
                    DontRetry
                }
            }
            ErrorKind::WriteTimeout { write_type, received, .. } if request.idempotent => match write_type {
                WriteType::Simple | WriteType::Batch if *received > 0 => IgnoreWriteError,
                WriteType::UnloggedBatch => reachable(*received).map_or(DontRetry, |c| RetrySameNode(Some(c))),
                WriteType::BatchLog => RetrySameNode(None),
                _ => DontRetry,
            },
            ErrorKind::WriteTimeout { .. } => DontRetry,
            _ => return DefaultRetryPolicy::decide(request),
        };
        self.downgraded = matches!(decision, RetrySameNode(_));
        decision
    }
}

#[cfg(test)]
mod tests {
    use shardwise_protocol::consistency::Consistency;
    use shardwise_protocol::response::ErrorResponse;

    use super::*;

    fn db(kind: ErrorKind) -> ExecutionError {
        ErrorResponse { code: 0, message: String::new(), kind }.into()
    }

    fn ask(session: &mut dyn RetrySession, error: &ExecutionError, attempt: u32, idempotent: bool) -> RetryDecision {
        session.decide(RequestInfo { error, idempotent, consistency: Consistency::Quorum, attempt })
    }

    #[test]
    fn default_policy_decisions() {
        let mut p = DefaultRetryPolicy.new_session();
        let p = p.as_mut();
        let cl = Consistency::Quorum;
        let read_timeout =
            |data_present| db(ErrorKind::ReadTimeout { consistency: cl, received: 2, block_for: 2, data_present });
        assert_eq!(ask(p, &read_timeout(false), 0, false), RetryDecision::RetrySameNode(None));
        assert_eq!(ask(p, &read_timeout(true), 0, false), RetryDecision::DontRetry);
        assert_eq!(ask(p, &read_timeout(false), 1, false), RetryDecision::DontRetry);
        let unavailable = db(ErrorKind::Unavailable { consistency: cl, required: 2, alive: 1 });
        assert_eq!(ask(p, &unavailable, 0, false), RetryDecision::RetryNextNode(None));
        assert_eq!(ask(p, &db(ErrorKind::Overloaded), 0, false), RetryDecision::DontRetry);
        assert_eq!(ask(p, &db(ErrorKind::Overloaded), 0, true), RetryDecision::RetryNextNode(None));
        assert_eq!(ask(p, &db(ErrorKind::SyntaxError), 0, true), RetryDecision::DontRetry);
        let closed = ExecutionError::Connection(crate::ConnectionError::Closed);
        assert_eq!(ask(p, &closed, 0, false), RetryDecision::DontRetry);
        assert_eq!(ask(p, &closed, 0, true), RetryDecision::RetryNextNode(None));
        let silent = ExecutionError::AttemptTimeout {
            after: std::time::Duration::from_secs(1),
            node: ([127, 0, 0, 1], 9042).into(),
            shard: None,
        };
        assert_eq!(ask(p, &silent, 0, false), RetryDecision::DontRetry);
        assert_eq!(ask(p, &silent, 0, true), RetryDecision::RetryNextNode(None));
        assert_eq!(ask(p, &silent, 3, true), RetryDecision::DontRetry);
    }

    #[test]
    fn the_downgrading_policy_downgrades_once_per_request() {
        let cl = Consistency::Quorum;
        let unavailable = db(ErrorKind::Unavailable { consistency: cl, required: 2, alive: 1 });
        let mut s = DowngradingConsistencyRetryPolicy.new_session();
        assert_eq!(ask(s.as_mut(), &unavailable, 0, false), RetryDecision::RetrySameNode(Some(Consistency::One)));
        // The session remembers: a second failure of the same request is final.
        assert_eq!(ask(s.as_mut(), &unavailable, 1, false), RetryDecision::DontRetry);
        // A new request gets a new session.
        let mut s = DowngradingConsistencyRetryPolicy.new_session();
        let none_alive = db(ErrorKind::Unavailable { consistency: cl, required: 2, alive: 0 });
        assert_eq!(ask(s.as_mut(), &none_alive, 0, false), RetryDecision::DontRetry);
        let read_timeout =
            db(ErrorKind::ReadTimeout { consistency: cl, received: 2, block_for: 3, data_present: true });
        let mut s = DowngradingConsistencyRetryPolicy.new_session();
        assert_eq!(ask(s.as_mut(), &read_timeout, 0, false), RetryDecision::RetrySameNode(Some(Consistency::Two)));
        let write_timeout = |write_type| {
            db(ErrorKind::WriteTimeout { consistency: cl, received: 1, block_for: 2, write_type, contentions: None })
        };
        let mut s = DowngradingConsistencyRetryPolicy.new_session();
        assert_eq!(ask(s.as_mut(), &write_timeout(WriteType::Simple), 0, true), RetryDecision::IgnoreWriteError);
        assert_eq!(ask(s.as_mut(), &write_timeout(WriteType::Simple), 0, false), RetryDecision::DontRetry);
        assert_eq!(
            ask(s.as_mut(), &write_timeout(WriteType::UnloggedBatch), 0, true),
            RetryDecision::RetrySameNode(Some(Consistency::One))
        );
    }
}
