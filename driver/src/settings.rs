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
use crate::load_balancing::LoadBalancingPolicy;
use crate::observer::{RequestId, RequestObserver};
use crate::profile::{ExecutionProfile, SpeculativePolicy};
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
    /// The request's id, which the observer's calls carry: set as the
    /// request starts when it has an observer (resolving the settings
    /// makes none).
    pub(crate) request: Option<RequestId>,
    /// The policy that plans each attempt's node; `None`: the built-in
    /// plan, walked in place.
    pub(crate) load_balancing: Option<&'a Arc<dyn LoadBalancingPolicy>>,
}

impl<'a> AttemptSettings<'a> {
    /// The observer with the request's id, once the request has one.
    pub(crate) fn observed(&self) -> Option<(&'a Arc<dyn RequestObserver>, RequestId)> {
        self.observer.zip(self.request)
    }
}

/// The profiles a request consults, as their handles pointed as it
/// started: the statement's, then the session's default handle's
/// ([`SessionBuilder::default_execution_profile_handle`](crate::SessionBuilder::default_execution_profile_handle)).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Profiles<'a>(pub(crate) Option<&'a ExecutionProfile>, pub(crate) Option<&'a ExecutionProfile>);

impl<'a> Profiles<'a> {
    /// The first profile's setting `f`, if either sets it.
    fn get<T>(self, f: impl Fn(&'a ExecutionProfile) -> Option<T>) -> Option<T> {
        self.0.and_then(&f).or_else(|| self.1.and_then(&f))
    }
}

impl<'a> From<Option<&'a ExecutionProfile>> for Profiles<'a> {
    fn from(statement: Option<&'a ExecutionProfile>) -> Self {
        Profiles(statement, None)
    }
}

impl<'a> Settings<'a> {
    /// Resolves each setting: the statement's option, else its profile's,
    /// else the session's default profile's, else the session's.
    pub(crate) fn of(
        options: &'a StatementOptions,
        profiles: impl Into<Profiles<'a>>,
        config: &'a SessionConfig,
    ) -> Settings<'a> {
        let profiles = profiles.into();
        Settings {
            consistency: options.consistency.or(profiles.get(|p| p.consistency)).unwrap_or(config.consistency),
            serial_consistency: options
                .serial_consistency
                .or(profiles.get(|p| p.serial_consistency))
                .unwrap_or(config.serial_consistency),
            request_timeout: options.timeout.or(profiles.get(|p| p.request_timeout).unwrap_or(config.request_timeout)),
            speculative: profiles.get(|p| p.speculative).unwrap_or(config.speculative),
            attempts: AttemptSettings {
                // The default attempt timeout is there to move an
                // idempotent statement to the next node; a statement that
                // is not idempotent could not be retried, and runs to the
                // request timeout as with the official driver, unless it
                // sets an attempt timeout itself.
                attempt_timeout: options.attempt_timeout.or(if options.idempotent {
                    profiles.get(|p| p.attempt_timeout).unwrap_or(config.attempt_timeout)
                } else {
                    None
                }),
                retry_policy: profiles.get(|p| p.retry_policy.as_ref()).unwrap_or(&config.retry_policy),
                latency_awareness: profiles.get(|p| p.latency_awareness).unwrap_or(config.latency_awareness),
                observer: options
                    .request_observer
                    .as_ref()
                    .or_else(|| profiles.get(|p| p.observer.as_ref()))
                    .or(config.observer.as_ref()),
                request: None,
                load_balancing: profiles.get(|p| p.load_balancing.as_ref()).or(config.load_balancing.as_ref()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ExecutionProfileHandle;
    use crate::retry::FallthroughRetryPolicy;

    #[test]
    fn the_statement_wins_then_its_profile_then_the_session() {
        let config = SessionConfig {
            consistency: Consistency::Quorum,
            request_timeout: Some(Duration::from_secs(12)),
            speculative: Some(SpeculativePolicy::fixed(1, Duration::from_millis(5))),
            ..SessionConfig::default()
        };
        let none = StatementOptions::default();
        let session = Settings::of(&none, None, &config);
        assert_eq!(
            (session.consistency, session.request_timeout),
            (Consistency::Quorum, Some(Duration::from_secs(12)))
        );
        assert!(session.speculative.is_some() && Arc::ptr_eq(session.attempts.retry_policy, &config.retry_policy));

        let retry: Arc<dyn RetryPolicy> = Arc::new(FallthroughRetryPolicy);
        let profile = ExecutionProfile::new("p")
            .consistency(Consistency::One)
            .serial_consistency(Consistency::LocalSerial)
            .request_timeout(None)
            .attempt_timeout(Some(Duration::from_secs(1)))
            .retry_policy(retry.clone())
            .speculative_execution(None)
            .latency_awareness(Some(LatencyAwareness::default()));
        let options = StatementOptions { idempotent: true, ..StatementOptions::default() };
        let p = Settings::of(&options, Some(&profile), &config);
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
        assert_eq!(Settings::of(&once, Some(&profile), &config).attempts.attempt_timeout, None, "not idempotent");
        assert_eq!(
            Settings::of(&StatementOptions::default(), None, &SessionConfig::default()).attempts.attempt_timeout,
            None
        );
        let idempotent = StatementOptions { idempotent: true, ..StatementOptions::default() };
        assert_eq!(
            Settings::of(&idempotent, None, &SessionConfig::default()).attempts.attempt_timeout,
            SessionConfig::default().attempt_timeout
        );
        assert_eq!(p.attempts.latency_awareness, Some(LatencyAwareness::default()));
        assert_eq!(session.attempts.latency_awareness, None);

        let own = StatementOptions {
            consistency: Some(Consistency::All),
            timeout: Some(Duration::from_millis(7)),
            attempt_timeout: Some(Duration::from_millis(3)),
            ..StatementOptions::default()
        };
        let o = Settings::of(&own, Some(&profile), &config);
        assert_eq!(
            (o.consistency, o.request_timeout, o.attempts.attempt_timeout),
            (Consistency::All, Some(Duration::from_millis(7)), Some(Duration::from_millis(3)))
        );
        let empty = ExecutionProfile::new("empty");
        let empty = Settings::of(&none, Some(&empty), &config);
        assert_eq!((empty.consistency, empty.request_timeout), (Consistency::Quorum, Some(Duration::from_secs(12))));
    }

    /// Serial consistency can be unset at each level: a statement's or a
    /// profile's `None` sends none, whatever the levels below say.
    #[test]
    fn serial_consistency_can_be_unset_at_each_level() {
        let config = SessionConfig::default();
        assert_eq!(config.serial_consistency, Some(Consistency::LocalSerial));
        let none = StatementOptions::default();
        let unset = ExecutionProfile::new("unset").serial_consistency(None);
        assert_eq!(Settings::of(&none, Some(&unset), &config).serial_consistency, None, "profile unsets");
        let serial = ExecutionProfile::new("serial").serial_consistency(Consistency::Serial);
        assert_eq!(Settings::of(&none, Some(&serial), &config).serial_consistency, Some(Consistency::Serial));
        let own = crate::Statement::new("x").with_serial_consistency(None);
        assert_eq!(Settings::of(own.options(), Some(&serial), &config).serial_consistency, None, "statement unsets");
    }

    /// The session's default handle comes after the statement's profile
    /// and before the session's own settings.
    #[test]
    fn the_session_default_handle_comes_after_the_statements_profile() {
        let config = SessionConfig::default();
        let statement = ExecutionProfile::new("s").consistency(Consistency::Two);
        let default = ExecutionProfile::new("d").consistency(Consistency::Three).request_timeout(None);
        let none = StatementOptions::default();
        let both = Settings::of(&none, Profiles(Some(&statement), Some(&default)), &config);
        assert_eq!((both.consistency, both.request_timeout), (Consistency::Two, None));
        let only_default = Settings::of(&none, Profiles(None, Some(&default)), &config);
        assert_eq!(only_default.consistency, Consistency::Three);
        assert_eq!(Settings::of(&none, Profiles(None, None), &config).request_timeout, config.request_timeout);
    }

    /// The load-balancing policy: the statement's profile's, else the
    /// default handle's profile's, else the session's, else none (the
    /// built-in plan); a profile without one does not hide the session's.
    #[test]
    fn the_statements_observer_then_its_profiles_then_the_sessions() {
        use crate::history::HistoryCollector;
        let is = |got: Option<&Arc<dyn RequestObserver>>, want: &Arc<dyn RequestObserver>| {
            got.is_some_and(|g| Arc::ptr_eq(g, want))
        };
        let session_observer: Arc<dyn RequestObserver> = Arc::new(HistoryCollector::new());
        let profile_observer: Arc<dyn RequestObserver> = Arc::new(HistoryCollector::new());
        let own_observer: Arc<dyn RequestObserver> = Arc::new(HistoryCollector::new());
        let config = SessionConfig { observer: Some(session_observer.clone()), ..SessionConfig::default() };
        let profile = ExecutionProfile::new("observed").request_observer(profile_observer.clone());
        let none = StatementOptions::default();
        let own = StatementOptions { request_observer: Some(own_observer.clone()), ..StatementOptions::default() };
        assert!(is(Settings::of(&own, Some(&profile), &config).attempts.observer, &own_observer), "the statement's");
        assert!(is(Settings::of(&none, Some(&profile), &config).attempts.observer, &profile_observer), "the profile's");
        assert!(is(Settings::of(&none, None, &config).attempts.observer, &session_observer), "the session's");
        let plain = SessionConfig::default();
        assert!(Settings::of(&none, None, &plain).attempts.observer.is_none());
        assert!(Settings::of(&own, None, &config).attempts.request.is_none(), "resolving makes no request id");
        assert_ne!(own, none, "the observer counts in equality");
        assert_eq!(own, own.clone());
    }

    #[test]
    fn the_load_balancing_policy_of_the_profile_then_of_the_session() {
        use crate::load_balancing::{DefaultPolicy, LoadBalancingPolicy};
        let is = |got: Option<&Arc<dyn LoadBalancingPolicy>>, want: &Arc<dyn LoadBalancingPolicy>| {
            got.is_some_and(|g| Arc::ptr_eq(g, want))
        };
        let session_policy: Arc<dyn LoadBalancingPolicy> = Arc::new(DefaultPolicy);
        let profile_policy: Arc<dyn LoadBalancingPolicy> = Arc::new(DefaultPolicy);
        let default_policy: Arc<dyn LoadBalancingPolicy> = Arc::new(DefaultPolicy);
        let none = StatementOptions::default();
        let plain = SessionConfig::default();
        assert!(Settings::of(&none, None, &plain).attempts.load_balancing.is_none(), "the built-in plan");
        let config = SessionConfig { load_balancing: Some(session_policy.clone()), ..SessionConfig::default() };
        let own = ExecutionProfile::new("own").load_balancing_policy(profile_policy.clone());
        let default = ExecutionProfile::new("default").load_balancing_policy(default_policy.clone());
        let silent = ExecutionProfile::new("silent").consistency(Consistency::One);
        fn of<'a>(
            none: &'a StatementOptions,
            profiles: Profiles<'a>,
            config: &'a SessionConfig,
        ) -> Option<&'a Arc<dyn LoadBalancingPolicy>> {
            Settings::of(none, profiles, config).attempts.load_balancing
        }
        let got = |profiles, config| of(&none, profiles, config);
        assert!(is(got(Profiles(Some(&own), Some(&default)), &config), &profile_policy), "the statement's profile");
        assert!(is(got(Profiles(Some(&silent), Some(&default)), &config), &default_policy), "the default handle's");
        assert!(is(got(Profiles(Some(&silent), None), &config), &session_policy), "the session's");
        assert!(is(got(Profiles(Some(&own), None), &plain), &profile_policy), "over the built-in plan");
        assert!(got(Profiles(Some(&silent), None), &plain).is_none());
        assert_ne!(own, ExecutionProfile::new("own"), "the policy counts in equality");
        assert_eq!(own, own.clone());
    }

    /// Statements holding one handle follow it when it is re-pointed; a
    /// profile given by value gets a handle of its own.
    #[test]
    fn statements_follow_their_profile_handle() {
        let handle = ExecutionProfile::new("oltp").consistency(Consistency::LocalQuorum).into_handle();
        let a = crate::Statement::new("a").with_profile(handle.clone());
        let b = crate::Statement::new("b").with_profile(handle.clone());
        let own = crate::Statement::new("c").with_profile(ExecutionProfile::new("own").consistency(Consistency::Two));
        let config = SessionConfig::default();
        let resolve = |s: &crate::Statement| {
            let profile = s.options().profile.as_ref().map(ExecutionProfileHandle::profile);
            Settings::of(s.options(), profile.as_deref(), &config).consistency
        };
        assert_eq!(
            (resolve(&a), resolve(&b), resolve(&own)),
            (Consistency::LocalQuorum, Consistency::LocalQuorum, Consistency::Two)
        );
        handle.map_to_another_profile(ExecutionProfile::new("degraded").consistency(Consistency::One));
        assert_eq!((resolve(&a), resolve(&b), resolve(&own)), (Consistency::One, Consistency::One, Consistency::Two));
        assert_eq!(a.options().profile, b.options().profile, "one handle");
        assert_ne!(a.options().profile, own.options().profile);
    }
}
