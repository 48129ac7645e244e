//! Execution profiles: named bundles of how a request runs (consistency,
//! serial consistency, request and attempt timeouts, retry policy,
//! speculative execution, latency awareness, load-balancing policy). A statement carries one
//! ([`with_profile`](crate::Statement::with_profile)); the session has a
//! default one ([`SessionBuilder::default_profile`](crate::SessionBuilder::default_profile)).
//! For each setting the statement's own option wins, then its profile's,
//! then the session's; a profile leaves unset what it does not say (the
//! `settings` module resolves them, once per request).
//!
//! Statements hold a profile through an [`ExecutionProfileHandle`]: every
//! statement given one handle follows it when it is re-pointed at another
//! profile at run time ([`ExecutionProfileHandle::map_to_another_profile`],
//! as the official driver's handles), e.g. to move a service's reads to
//! another consistency during an incident without rebuilding statements. A
//! request reads the handle once, as it starts.
//!
//! Here, below the statements and the session that both hold profiles, so
//! that neither has to reach up into the other for them.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use shardwise_protocol::consistency::Consistency;

use crate::latency::LatencyAwareness;
use crate::load_balancing::LoadBalancingPolicy;
use crate::observer::RequestObserver;
use crate::retry::RetryPolicy;

/// Speculative execution: for idempotent statements, start another attempt
/// on the next node when the first has not answered within the delay: a
/// fixed one ([`SpeculativePolicy::fixed`], the official
/// `SimpleSpeculativeExecutionPolicy`), or the session's request latency
/// at a percentile ([`SpeculativePolicy::percentile`], the official
/// `PercentileSpeculativeExecutionPolicy`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeculativePolicy {
    /// How long to wait before each extra attempt; with a `percentile`,
    /// until the session has measured a request.
    pub delay: Duration,
    /// Extra attempts at most.
    pub max_extra: usize,
    /// When set (above 0, at most 100, e.g. `99.0`; out of range: `delay`):
    /// wait the session's request latency at this percentile instead, over
    /// every request the session has finished (its metrics' histogram,
    /// within 3 % above the true value), read again at most every 100 ms.
    /// Read once as a request starts; every extra attempt of that request
    /// waits as long.
    pub percentile: Option<f64>,
}

impl SpeculativePolicy {
    /// Another attempt each `delay` the request goes unanswered, `max_extra`
    /// at most.
    pub fn fixed(max_extra: usize, delay: Duration) -> Self {
        SpeculativePolicy { delay, max_extra, percentile: None }
    }

    /// Another attempt each time the request has gone unanswered for the
    /// session's latency at `percentile` (e.g. `99.0`), `max_extra` at
    /// most; 100 ms until the session has measured a request (as the
    /// official driver falls back to).
    pub fn percentile(max_extra: usize, percentile: f64) -> Self {
        SpeculativePolicy { delay: Duration::from_millis(100), max_extra, percentile: Some(percentile) }
    }
}

/// A named bundle of execution settings: consistency, serial consistency,
/// request and attempt timeouts, retry policy, speculative execution,
/// latency awareness, and a load-balancing policy of its own (e.g. one
/// that sends to another datacenter, or to one node:
/// [`SingleTargetLoadBalancingPolicy`](crate::load_balancing::SingleTargetLoadBalancingPolicy)). For
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
    pub(crate) serial_consistency: Option<Option<Consistency>>,
    pub(crate) request_timeout: Option<Option<Duration>>,
    pub(crate) attempt_timeout: Option<Option<Duration>>,
    pub(crate) retry_policy: Option<Arc<dyn RetryPolicy>>,
    pub(crate) speculative: Option<Option<SpeculativePolicy>>,
    pub(crate) latency_awareness: Option<Option<LatencyAwareness>>,
    pub(crate) observer: Option<Arc<dyn RequestObserver>>,
    pub(crate) load_balancing: Option<Arc<dyn LoadBalancingPolicy>>,
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
    /// Serial consistency of conditional statements; `None` sends none
    /// (the server's default, `SERIAL`).
    pub fn serial_consistency(mut self, c: impl Into<Option<Consistency>>) -> Self {
        self.serial_consistency = Some(c.into());
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
    /// The load-balancing policy that plans the requests run with this
    /// profile, instead of the session's
    /// ([`SessionBuilder::load_balancing`](crate::SessionBuilder::load_balancing),
    /// else the built-in plan). A profile without one plans as the session
    /// does.
    pub fn load_balancing_policy(mut self, p: Arc<dyn LoadBalancingPolicy>) -> Self {
        self.load_balancing = Some(p);
        self
    }
    /// A handle to this profile, to give to statements and re-point later.
    pub fn into_handle(self) -> ExecutionProfileHandle {
        ExecutionProfileHandle::new(self)
    }
}

/// A shared, re-pointable reference to an [`ExecutionProfile`]: statements
/// given the same handle (clones of it) all switch when it is mapped to
/// another profile. A request takes the profile the handle points to as it
/// starts.
///
/// ```
/// use shardwise::protocol::consistency::Consistency;
/// use shardwise::{ExecutionProfile, Statement};
///
/// let reads = ExecutionProfile::new("reads").consistency(Consistency::LocalQuorum).into_handle();
/// let get = Statement::new("SELECT v FROM ks.t WHERE pk = ?").with_profile(reads.clone());
/// // Later, for every statement holding the handle:
/// reads.map_to_another_profile(ExecutionProfile::new("degraded").consistency(Consistency::One));
/// assert_eq!(get.options().profile.as_ref().map(|h| h.profile().name().to_owned()), Some("degraded".into()));
/// ```
#[derive(Debug, Clone)]
pub struct ExecutionProfileHandle(Arc<RwLock<Arc<ExecutionProfile>>>);

impl ExecutionProfileHandle {
    /// A handle pointing to `profile`.
    pub fn new(profile: impl Into<Arc<ExecutionProfile>>) -> Self {
        ExecutionProfileHandle(Arc::new(RwLock::new(profile.into())))
    }
    /// The profile the handle points to now.
    pub fn profile(&self) -> Arc<ExecutionProfile> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// Points the handle, and every statement holding it, to `profile`;
    /// requests that already started keep the one they took.
    pub fn map_to_another_profile(&self, profile: impl Into<Arc<ExecutionProfile>>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = profile.into();
    }
}

/// A handle of its own for the profile.
impl From<Arc<ExecutionProfile>> for ExecutionProfileHandle {
    fn from(profile: Arc<ExecutionProfile>) -> Self {
        ExecutionProfileHandle::new(profile)
    }
}

/// A handle of its own for the profile.
impl From<ExecutionProfile> for ExecutionProfileHandle {
    fn from(profile: ExecutionProfile) -> Self {
        ExecutionProfileHandle::new(profile)
    }
}

/// Handles are equal when they are the same handle (clones of one).
impl PartialEq for ExecutionProfileHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ExecutionProfileHandle {}

/// Whether both are unset, or both the same object.
fn same_object<T: ?Sized>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

/// Profiles are equal when they set the same things (the same retry,
/// observer and load-balancing objects).
impl PartialEq for ExecutionProfile {
    fn eq(&self, other: &Self) -> bool {
        same_object(&self.retry_policy, &other.retry_policy)
            && same_object(&self.observer, &other.observer)
            && same_object(&self.load_balancing, &other.load_balancing)
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
