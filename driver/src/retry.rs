//! What to do when an attempt fails: retry on the same node, on the next
//! node of the plan, or give up. Decisions follow the official drivers'
//! default policy; statements that are not idempotent are never retried
//! after their request may have been applied.

use shardwise_protocol::response::{ErrorKind, WriteType};

use crate::error::ExecutionError;

/// A retry decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Try the same node again.
    RetrySameNode,
    /// Try the next node of the query plan.
    RetryNextNode,
    /// Return the error.
    DontRetry,
}

/// Decides whether a failed attempt is retried.
pub trait RetryPolicy: Send + Sync + std::fmt::Debug {
    /// `attempt` counts the attempts already retried (0 for the first failure).
    fn decide(&self, error: &ExecutionError, attempt: u32, idempotent: bool) -> RetryDecision;
}

/// The usual policy: one retry for the timeouts and unavailability that a
/// retry can fix, node failover for idempotent statements (after a server
/// error, a lost connection or an attempt timeout); at most 3 retries.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRetryPolicy;

impl RetryPolicy for DefaultRetryPolicy {
    fn decide(&self, error: &ExecutionError, attempt: u32, idempotent: bool) -> RetryDecision {
        use RetryDecision::*;
        if attempt >= 3 {
            return DontRetry;
        }
        match error {
            ExecutionError::Db(e) => match &e.kind {
                ErrorKind::Unavailable { .. } if attempt == 0 => RetryNextNode,
                ErrorKind::ReadTimeout { received, block_for, data_present, .. }
                    if attempt == 0 && received >= block_for && !data_present =>
                {
                    RetrySameNode
                }
                ErrorKind::WriteTimeout { write_type: WriteType::BatchLog, .. } if attempt == 0 && idempotent => {
                    RetrySameNode
                }
                ErrorKind::IsBootstrapping => RetryNextNode,
                ErrorKind::Overloaded | ErrorKind::ServerError | ErrorKind::TruncateError if idempotent => {
                    RetryNextNode
                }
                _ => DontRetry,
            },
            ExecutionError::Connection(_) | ExecutionError::AttemptTimeout { .. } if idempotent => RetryNextNode,
            ExecutionError::NoConnection => RetryNextNode,
            _ => DontRetry,
        }
    }
}

/// Never retries.
#[derive(Debug, Clone, Copy, Default)]
pub struct FallthroughRetryPolicy;

impl RetryPolicy for FallthroughRetryPolicy {
    fn decide(&self, _: &ExecutionError, _: u32, _: bool) -> RetryDecision {
        RetryDecision::DontRetry
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

    #[test]
    fn default_policy_decisions() {
        let p = DefaultRetryPolicy;
        let cl = Consistency::Quorum;
        let read_timeout =
            |data_present| db(ErrorKind::ReadTimeout { consistency: cl, received: 2, block_for: 2, data_present });
        assert_eq!(p.decide(&read_timeout(false), 0, false), RetryDecision::RetrySameNode);
        assert_eq!(p.decide(&read_timeout(true), 0, false), RetryDecision::DontRetry);
        assert_eq!(p.decide(&read_timeout(false), 1, false), RetryDecision::DontRetry);
        let unavailable = db(ErrorKind::Unavailable { consistency: cl, required: 2, alive: 1 });
        assert_eq!(p.decide(&unavailable, 0, false), RetryDecision::RetryNextNode);
        assert_eq!(p.decide(&db(ErrorKind::Overloaded), 0, false), RetryDecision::DontRetry);
        assert_eq!(p.decide(&db(ErrorKind::Overloaded), 0, true), RetryDecision::RetryNextNode);
        assert_eq!(p.decide(&db(ErrorKind::SyntaxError), 0, true), RetryDecision::DontRetry);
        let closed = ExecutionError::Connection(crate::ConnectionError::Closed);
        assert_eq!(p.decide(&closed, 0, false), RetryDecision::DontRetry);
        assert_eq!(p.decide(&closed, 0, true), RetryDecision::RetryNextNode);
        let silent = ExecutionError::AttemptTimeout {
            after: std::time::Duration::from_secs(1),
            node: ([127, 0, 0, 1], 9042).into(),
            shard: None,
        };
        assert_eq!(p.decide(&silent, 0, false), RetryDecision::DontRetry);
        assert_eq!(p.decide(&silent, 0, true), RetryDecision::RetryNextNode);
        assert_eq!(p.decide(&silent, 3, true), RetryDecision::DontRetry);
    }
}
