//! The settings a request runs with: each one the statement's own option,
//! else its execution profile's, else the session's. Resolved once per
//! request, as it starts ([`Settings::of`]); the part each attempt reads
//! ([`AttemptSettings`]) is handed to the retry loop by value, so nothing is
//! resolved again per attempt, and nothing is allocated (references into the
//! statement and the session, and small copies).
//!
//! The resolution is a pure function of the statement's options and the
//! session's configuration, tested here without a session.

use std::sync::Arc;
use std::time::Duration;

use shardwise_protocol::consistency::Consistency;

use crate::latency::LatencyAwareness;
use crate::observer::RequestObserver;
use crate::profile::SpeculativePolicy;
use crate::retry::RetryPolicy;
use crate::session::SessionConfig;
use crate::statement::StatementOptions;

/// The settings of one request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings<'a> {
    pub(crate) consistency: Consistency,
    pub(crate) serial_consistency: Option<Consistency>,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) speculative: Option<SpeculativePolicy>,
    /// What each attempt reads.
    pub(crate) attempts: AttemptSettings<'a>,
}

/// The settings each attempt of a request reads: small and `Copy`, handed
/// to the retry loop (and to each speculative execution) by value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttemptSettings<'a> {
    pub(crate) attempt_timeout: Option<Duration>,
    pub(crate) retry_policy: &'a Arc<dyn RetryPolicy>,
    pub(crate) latency_awareness: Option<LatencyAwareness>,
    pub(crate) observer: Option<&'a Arc<dyn RequestObserver>>,
}

impl<'a> Settings<'a> {
    /// Resolves each setting: the statement's option, else its profile's,
    /// else the session's.
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
            speculative: profile.and_then(|p| p.speculative).unwrap_or(config.speculative),
            attempts: AttemptSettings {
                // The default attempt timeout is there to move an
                // idempotent statement to the next node; a statement that
                // is not idempotent could not be retried, and runs to the
                // request timeout as with the official driver, unless it
                // sets an attempt timeout itself.
                attempt_timeout: options.attempt_timeout.or(if options.idempotent {
                    profile.and_then(|p| p.attempt_timeout).unwrap_or(config.attempt_timeout)
                } else {
                    None
                }),
                retry_policy: profile.and_then(|p| p.retry_policy.as_ref()).unwrap_or(&config.retry_policy),
                latency_awareness: profile.and_then(|p| p.latency_awareness).unwrap_or(config.latency_awareness),
                observer: profile.and_then(|p| p.observer.as_ref()).or(config.observer.as_ref()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ExecutionProfile;
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
        assert!(session.speculative.is_some() && Arc::ptr_eq(session.attempts.retry_policy, &config.retry_policy));

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
        let options =
            StatementOptions { profile: Some(profile.clone()), idempotent: true, ..StatementOptions::default() };
        let p = Settings::of(&options, &config);
        assert_eq!((p.consistency, p.serial_consistency), (Consistency::One, Some(Consistency::LocalSerial)));
        assert_eq!(
            (p.request_timeout, p.attempts.attempt_timeout),
            (None, Some(Duration::from_secs(1))),
            "a profile can unset"
        );
        assert!(p.speculative.is_none() && Arc::ptr_eq(p.attempts.retry_policy, &retry));
        // The attempt timeouts of the profile and of the session are for
        // idempotent statements: another statement could not be retried,
        // and runs to its request timeout (as with the official driver).
        let once = StatementOptions { idempotent: false, ..options.clone() };
        assert_eq!(Settings::of(&once, &config).attempts.attempt_timeout, None, "not idempotent");
        assert_eq!(
            Settings::of(&StatementOptions::default(), &SessionConfig::default()).attempts.attempt_timeout,
            None
        );
        let idempotent = StatementOptions { idempotent: true, ..StatementOptions::default() };
        assert_eq!(
            Settings::of(&idempotent, &SessionConfig::default()).attempts.attempt_timeout,
            SessionConfig::default().attempt_timeout
        );
        assert_eq!(p.attempts.latency_awareness, Some(LatencyAwareness::default()));
        assert_eq!(session.attempts.latency_awareness, None);

        let own = StatementOptions {
            consistency: Some(Consistency::All),
            timeout: Some(Duration::from_millis(7)),
            attempt_timeout: Some(Duration::from_millis(3)),
            profile: Some(profile),
            ..StatementOptions::default()
        };
        let o = Settings::of(&own, &config);
        assert_eq!(
            (o.consistency, o.request_timeout, o.attempts.attempt_timeout),
            (Consistency::All, Some(Duration::from_millis(7)), Some(Duration::from_millis(3)))
        );
        let empty =
            StatementOptions { profile: Some(Arc::new(ExecutionProfile::new("empty"))), ..StatementOptions::default() };
        let empty = Settings::of(&empty, &config);
        assert_eq!((empty.consistency, empty.request_timeout), (Consistency::Quorum, Some(Duration::from_secs(12))));
    }
}
