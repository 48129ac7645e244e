//! Execution profiles: named bundles of how a request runs (consistency,
//! serial consistency, request and attempt timeouts, retry policy,
//! speculative execution, latency awareness). A statement carries one
//! ([`with_profile`](crate::Statement::with_profile)); the session has a
//! default one ([`SessionBuilder::default_profile`](crate::SessionBuilder::default_profile)).
//! For each setting the statement's own option wins, then its profile's,
//! then the session's; a profile leaves unset what it does not say.

use std::sync::Arc;
use std::time::Duration;

use shardwise_protocol::consistency::Consistency;

use super::config::{SessionConfig, SpeculativePolicy};
use crate::latency::LatencyAwareness;
use crate::observer::RequestObserver;
use crate::retry::RetryPolicy;
use crate::statement::StatementOptions;

/// A named bundle of execution settings: consistency, serial consistency,
/// request and attempt timeouts, retry policy, speculative execution,
/// latency awareness (the load-balancing setting a request can change). For
/// each setting a statement's own option wins, then its profile's, then the
/// session's; a profile leaves unset what it does not say.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use shardwise::protocol::consistency::Consistency;
/// use shardwise::{ExecutionProfile, Statement};
///
/// let analytics = Arc::new(
///     ExecutionProfile::new("analytics")
///         .consistency(Consistency::One)
///         .request_timeout(Some(Duration::from_secs(60)))
///         .speculative_execution(None),
/// );
/// let scan = Statement::new("SELECT * FROM ks.events").with_profile(analytics);
/// # let _ = scan;
/// ```
#[derive(Debug, Clone, Default)]
pub struct ExecutionProfile {
    name: String,
    pub(crate) consistency: Option<Consistency>,
    pub(crate) serial_consistency: Option<Consistency>,
    pub(crate) request_timeout: Option<Option<Duration>>,
    pub(crate) attempt_timeout: Option<Option<Duration>>,
    pub(crate) retry_policy: Option<Arc<dyn RetryPolicy>>,
    pub(crate) speculative: Option<Option<SpeculativePolicy>>,
    pub(crate) latency_awareness: Option<Option<LatencyAwareness>>,
    pub(crate) observer: Option<Arc<dyn RequestObserver>>,
}

impl ExecutionProfile {
    /// A profile that sets nothing yet.
    pub fn new(name: impl Into<String>) -> Self {
        ExecutionProfile { name: name.into(), ..ExecutionProfile::default() }
    }
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Consistency level.
    pub fn consistency(mut self, c: Consistency) -> Self {
        self.consistency = Some(c);
        self
    }
    /// Serial consistency of conditional statements.
    pub fn serial_consistency(mut self, c: Consistency) -> Self {
        self.serial_consistency = Some(c);
        self
    }
    /// Request timeout (`None`: no timeout).
    pub fn request_timeout(mut self, t: Option<Duration>) -> Self {
        self.request_timeout = Some(t);
        self
    }
    /// Timeout of each attempt (`None`: none).
    pub fn attempt_timeout(mut self, t: Option<Duration>) -> Self {
        self.attempt_timeout = Some(t);
        self
    }
    /// Retry policy.
    pub fn retry_policy(mut self, p: Arc<dyn RetryPolicy>) -> Self {
        self.retry_policy = Some(p);
        self
    }
    /// Speculative execution (`None`: off).
    pub fn speculative_execution(mut self, p: Option<SpeculativePolicy>) -> Self {
        self.speculative = Some(p);
        self
    }
    /// Latency awareness (`None`: off).
    pub fn latency_awareness(mut self, l: Option<LatencyAwareness>) -> Self {
        self.latency_awareness = Some(l);
        self
    }
    /// An observer of each request's attempts (see [`crate::observer`]),
    /// instead of the session's.
    pub fn request_observer(mut self, o: Arc<dyn RequestObserver>) -> Self {
        self.observer = Some(o);
        self
    }
}

/// Profiles are equal when they set the same things (the same retry policy
/// object).
impl PartialEq for ExecutionProfile {
    fn eq(&self, other: &Self) -> bool {
        let same_retry = match (&self.retry_policy, &other.retry_policy) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        let same_observer = match (&self.observer, &other.observer) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same_retry
            && same_observer
            && self.name == other.name
            && self.consistency == other.consistency
            && self.serial_consistency == other.serial_consistency
            && self.request_timeout == other.request_timeout
            && self.attempt_timeout == other.attempt_timeout
            && self.speculative == other.speculative
            && self.latency_awareness == other.latency_awareness
    }
}

impl Eq for ExecutionProfile {}

/// The settings a request runs with: each from the statement's options,
/// else its profile, else the session.
#[derive(Debug)]
pub(crate) struct Settings<'a> {
    pub(crate) consistency: Consistency,
    pub(crate) serial_consistency: Option<Consistency>,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) attempt_timeout: Option<Duration>,
    pub(crate) retry_policy: &'a Arc<dyn RetryPolicy>,
    pub(crate) speculative: Option<SpeculativePolicy>,
    pub(crate) latency_awareness: Option<LatencyAwareness>,
    pub(crate) observer: Option<&'a Arc<dyn RequestObserver>>,
}

impl<'a> Settings<'a> {
    pub(crate) fn of(options: &'a StatementOptions, config: &'a SessionConfig) -> Settings<'a> {
        let profile = options.profile.as_deref();
        Settings {
            consistency: options.consistency.or(profile.and_then(|p| p.consistency)).unwrap_or(config.consistency),
            serial_consistency: options
                .serial_consistency
                .or(profile.and_then(|p| p.serial_consistency))
                .or(config.serial_consistency),
            request_timeout: options
                .timeout
                .or(profile.and_then(|p| p.request_timeout).unwrap_or(config.request_timeout)),
            attempt_timeout: options
                .attempt_timeout
                .or(profile.and_then(|p| p.attempt_timeout).unwrap_or(config.attempt_timeout)),
            retry_policy: profile.and_then(|p| p.retry_policy.as_ref()).unwrap_or(&config.retry_policy),
            speculative: profile.and_then(|p| p.speculative).unwrap_or(config.speculative),
            latency_awareness: profile.and_then(|p| p.latency_awareness).unwrap_or(config.latency_awareness),
            observer: profile.and_then(|p| p.observer.as_ref()).or(config.observer.as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::FallthroughRetryPolicy;

    #[test]
    fn the_statement_wins_then_its_profile_then_the_session() {
        let config = SessionConfig {
            consistency: Consistency::Quorum,
            request_timeout: Some(Duration::from_secs(12)),
            speculative: Some(SpeculativePolicy { delay: Duration::from_millis(5), max_extra: 1 }),
            ..SessionConfig::default()
        };
        let none = StatementOptions::default();
        let session = Settings::of(&none, &config);
        assert_eq!(
            (session.consistency, session.request_timeout),
            (Consistency::Quorum, Some(Duration::from_secs(12)))
        );
        assert!(session.speculative.is_some() && Arc::ptr_eq(session.retry_policy, &config.retry_policy));

        let retry: Arc<dyn RetryPolicy> = Arc::new(FallthroughRetryPolicy);
        let profile = Arc::new(
            ExecutionProfile::new("p")
                .consistency(Consistency::One)
                .serial_consistency(Consistency::LocalSerial)
                .request_timeout(None)
                .attempt_timeout(Some(Duration::from_secs(1)))
                .retry_policy(retry.clone())
                .speculative_execution(None)
                .latency_awareness(Some(LatencyAwareness::default())),
        );
        let options = StatementOptions { profile: Some(profile.clone()), ..StatementOptions::default() };
        let p = Settings::of(&options, &config);
        assert_eq!((p.consistency, p.serial_consistency), (Consistency::One, Some(Consistency::LocalSerial)));
        assert_eq!((p.request_timeout, p.attempt_timeout), (None, Some(Duration::from_secs(1))), "a profile can unset");
        assert!(p.speculative.is_none() && Arc::ptr_eq(p.retry_policy, &retry));
        assert_eq!(p.latency_awareness, Some(LatencyAwareness::default()));
        assert_eq!(session.latency_awareness, None);

        let own = StatementOptions {
            consistency: Some(Consistency::All),
            timeout: Some(Duration::from_millis(7)),
            attempt_timeout: Some(Duration::from_millis(3)),
            profile: Some(profile),
            ..StatementOptions::default()
        };
        let o = Settings::of(&own, &config);
        assert_eq!(
            (o.consistency, o.request_timeout, o.attempt_timeout),
            (Consistency::All, Some(Duration::from_millis(7)), Some(Duration::from_millis(3)))
        );
        let empty =
            StatementOptions { profile: Some(Arc::new(ExecutionProfile::new("empty"))), ..StatementOptions::default() };
        let empty = Settings::of(&empty, &config);
        assert_eq!((empty.consistency, empty.request_timeout), (Consistency::Quorum, Some(Duration::from_secs(12))));
    }
}
