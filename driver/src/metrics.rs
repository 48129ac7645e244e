//! The session's counters, request rates and latency histograms (the
//! session's, and one per node), updated with relaxed atomics on the
//! request path and read as a [`MetricsSnapshot`].
//!
//! What a request costs here: as it starts, a relaxed load of the next
//! rate tick's time (compared with the start instant the request read
//! anyway: no clock read) and one add to its kind's counter; as it ends,
//! one add to a latency bucket (and one to the error counter when it
//! failed). Nothing allocates. Connection, retry, timeout and prepare
//! counters are touched only by those events.
//!
//! The per-request counters and the histograms are striped: each thread
//! adds to a stripe of its own (on cache lines of its own), and a snapshot
//! sums the stripes. Counters that every request touches on a single word
//! would make the runtime's worker threads fight over that cache line on
//! every request. The session's completed request count is its
//! histogram's total.
//!
//! Why relaxed ordering suffices: every counter is a statistic read on its
//! own; no reader infers from one counter that another has been updated
//! (a snapshot taken while requests run may count a request's start and
//! not yet its end, which the fields' docs say). Each counter alone is
//! still exact: atomic adds are never lost, and each is read at a value it
//! had. The rate state ([`rates::Meter`]) is behind a mutex, so ticks are
//! ordered and each sees the counts of the one before; the atomic next
//! tick time beside it is only a hint that spares requests the lock: a
//! stale hint costs a `try_lock` that finds nothing to do, or a tick made
//! by the next request or snapshot instead. A request never waits for the
//! lock (`try_lock`: if another thread ticks, that one does the work).
//! `tests::counts_and_rates_hold_under_threads` records from many threads
//! while snapshots tick, and checks that nothing is lost.

mod histogram;
mod percentile;
mod rates;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

pub use histogram::Latencies;
pub(crate) use histogram::LatencyHistogram;
use rates::Meter;
pub use rates::Rates;

use crate::error::ConnectionError;
use crate::execute::Params;
use crate::pool::NodePool;

/// Stripes per histogram and per-request counter (a power of two): threads
/// beyond it share them.
const STRIPES: usize = 8;

/// This thread's stripe.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.try_with(|s| *s).unwrap_or(0)
}

/// What a request asks for, counted as it starts (and again as it fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestKind {
    /// Every row in one response (`execute_unpaged`).
    Unpaged,
    /// A statement's first page (`execute`, which writes and batches use
    /// too, and the first page of pagers and row streams).
    FirstPage,
    /// A page after a paging state (`execute_page`, pagers, row streams).
    NextPage,
}

const KINDS: usize = 3;

/// One stripe of the per-kind request counters, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
struct KindStripe([AtomicU64; KINDS]);

/// Session-wide counters.
#[derive(Debug)]
pub(crate) struct Metrics {
    /// Where the clock of the rates starts.
    epoch: Instant,
    /// Nanoseconds after `epoch` past which the rates are due a tick (a
    /// hint: the meter itself decides).
    next_tick: AtomicU64,
    meter: Mutex<Meter>,
    /// Requests started, by kind.
    kinds: Box<[KindStripe]>,
    /// Requests that failed, by kind (rare: not striped).
    errors: [AtomicU64; KINDS],
    retries: AtomicU64,
    timeouts: AtomicU64,
    attempt_timeouts: AtomicU64,
    prepares: AtomicU64,
    reprepares: AtomicU64,
    connections_opened: AtomicU64,
    connections_closed: AtomicU64,
    connect_failures: AtomicU64,
    connect_timeouts: AtomicU64,
    latency: LatencyHistogram,
    /// The latency a percentile speculative execution waits, kept.
    speculative_delay: percentile::PercentileCache,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::starting_at(Instant::now())
    }
}

fn counter() -> AtomicU64 {
    AtomicU64::new(0)
}

impl Metrics {
    /// Counters whose rates are measured from `epoch`.
    fn starting_at(epoch: Instant) -> Self {
        let meter = Meter::default();
        Metrics {
            epoch,
            next_tick: AtomicU64::new(meter.next_tick()),
            meter: Mutex::new(meter),
            kinds: (0..STRIPES).map(|_| KindStripe(std::array::from_fn(|_| counter()))).collect(),
            errors: std::array::from_fn(|_| counter()),
            retries: counter(),
            timeouts: counter(),
            attempt_timeouts: counter(),
            prepares: counter(),
            reprepares: counter(),
            connections_opened: counter(),
            connections_closed: counter(),
            connect_failures: counter(),
            connect_timeouts: counter(),
            latency: LatencyHistogram::default(),
            speculative_delay: percentile::PercentileCache::default(),
        }
    }

    fn nanos_since_epoch(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// A request with `params` started `at` (the instant it read as it
    /// started); its kind, to count it by when it fails. `params` by value:
    /// a borrow of a local in the request's async fn would keep the local
    /// in its future's state.
    pub(crate) fn started(&self, at: Instant, params: Params<'_>) -> RequestKind {
        let kind = match (params.page_size, params.paging_state) {
            (None, _) => RequestKind::Unpaged,
            (Some(_), None) => RequestKind::FirstPage,
            (Some(_), Some(_)) => RequestKind::NextPage,
        };
        self.started_kind(at, kind);
        kind
    }

    fn started_kind(&self, at: Instant, kind: RequestKind) {
        let now = self.nanos_since_epoch(at);
        if now > self.next_tick.load(Ordering::Relaxed) {
            self.tick(now, false);
        }
        if let Some(stripe) = self.kinds.get(stripe()) {
            stripe.0[kind as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests started so far.
    fn started_count(&self) -> [u64; KINDS] {
        let mut sums = [0; KINDS];
        for stripe in self.kinds.iter() {
            for (sum, n) in sums.iter_mut().zip(stripe.0.iter()) {
                *sum += n.load(Ordering::Relaxed);
            }
        }
        sums
    }

    /// Ticks the rates up to `now` (ns after the epoch) and returns them;
    /// on the request path (`wait` false) only if no other thread is at
    /// it.
    #[cold]
    fn tick(&self, now: u64, wait: bool) -> Option<Rates> {
        let mut meter = match self.meter.try_lock() {
            Ok(meter) => meter,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) if wait => self.meter.lock().unwrap_or_else(|e| e.into_inner()),
            Err(TryLockError::WouldBlock) => return None,
        };
        let count = self.started_count().iter().sum();
        meter.advance(now, count);
        self.next_tick.store(meter.next_tick(), Ordering::Relaxed);
        Some(meter.rates(now, count))
    }

    /// The session's request latency at `percentile` (above 0, at most
    /// 100) as of `at`, read from the histogram at most once per 100 ms
    /// (see `percentile`); `None` before any request finished.
    pub(crate) fn latency_at_percentile(&self, percentile: f64, at: Instant) -> Option<Duration> {
        self.speculative_delay.get(&self.latency, percentile, self.nanos_since_epoch(at))
    }
    /// A request of `kind` ended after `latency`, successfully or not.
    pub(crate) fn request(&self, latency: Duration, ok: bool, kind: RequestKind) {
        if !ok {
            self.errors[kind as usize].fetch_add(1, Ordering::Relaxed);
        }
        self.latency.record(latency);
    }
    pub(crate) fn retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn timeout(&self) {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn attempt_timeout(&self) {
        self.attempt_timeouts.fetch_add(1, Ordering::Relaxed);
    }
    /// A statement the session had not prepared is sent to be prepared.
    pub(crate) fn prepare(&self) {
        self.prepares.fetch_add(1, Ordering::Relaxed);
    }
    /// A node had forgotten a prepared statement: prepared again.
    pub(crate) fn reprepare(&self) {
        self.reprepares.fetch_add(1, Ordering::Relaxed);
    }
    /// A connection joined a node's pool.
    pub(crate) fn connection_opened(&self) {
        self.connections_opened.fetch_add(1, Ordering::Relaxed);
    }
    /// A connection of a pool closed.
    pub(crate) fn connection_closed(&self) {
        self.connections_closed.fetch_add(1, Ordering::Relaxed);
    }
    /// A pool connection could not be opened (`error`, handed back).
    pub(crate) fn connect_failed<'e>(&self, error: &'e ConnectionError) -> &'e ConnectionError {
        self.connect_failures.fetch_add(1, Ordering::Relaxed);
        if matches!(error, ConnectionError::ConnectTimeout) {
            self.connect_timeouts.fetch_add(1, Ordering::Relaxed);
        }
        error
    }

    /// The counters, with each node's attempt latencies and the
    /// connections open in its pool now.
    pub(crate) fn snapshot(&self, nodes: &[Arc<NodePool>]) -> MetricsSnapshot {
        let mut connections = 0;
        let nodes = nodes
            .iter()
            .map(|n| {
                connections += n.slots.open_connections().len() as u64;
                NodeLatency { addr: n.addr, latency: n.latency.snapshot() }
            })
            .collect();
        self.snapshot_at(Instant::now(), nodes, connections)
    }

    fn snapshot_at(&self, now: Instant, nodes: Vec<NodeLatency>, connections: u64) -> MetricsSnapshot {
        let rates = self.tick(self.nanos_since_epoch(now), true).unwrap_or_default();
        let latency = self.latency.snapshot();
        let [unpaged, first_pages, next_pages] = self.started_count();
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let [unpaged_errors, first_page_errors, next_page_errors] = self.errors.each_ref().map(load);
        MetricsSnapshot {
            requests: latency.count(),
            errors: unpaged_errors + first_page_errors + next_page_errors,
            unpaged_errors,
            first_page_errors,
            next_page_errors,
            retries: load(&self.retries),
            timeouts: load(&self.timeouts),
            attempt_timeouts: load(&self.attempt_timeouts),
            unpaged,
            first_pages,
            next_pages,
            prepares: load(&self.prepares),
            reprepares: load(&self.reprepares),
            connections,
            connections_opened: load(&self.connections_opened),
            connections_closed: load(&self.connections_closed),
            connect_failures: load(&self.connect_failures),
            connect_timeouts: load(&self.connect_timeouts),
            rates,
            latency,
            nodes,
        }
    }
}

/// A copy of the session's counters, rates and latency histograms.
///
/// Requests are counted once each, however many attempts (retries,
/// speculative executions) they made; the attempts are in [`Self::nodes`].
/// The kinds (`unpaged`, `first_pages`, `next_pages`) count requests as
/// they start, `requests` and `errors` as they end: while requests run,
/// the kinds add up to more than `requests`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Requests completed (successfully or not).
    pub requests: u64,
    /// Requests that ended in an error: the sum of the three below.
    pub errors: u64,
    /// Of them, requests for every row in one response (the official
    /// driver's `get_errors_unpaged_num`).
    pub unpaged_errors: u64,
    /// Of them, requests for a first page (what `first_pages` counts).
    pub first_page_errors: u64,
    /// Of them, requests for a page after a paging state.
    pub next_page_errors: u64,
    /// Retries made.
    pub retries: u64,
    /// Requests that timed out (the request timeout).
    pub timeouts: u64,
    /// Attempts that timed out (the attempt timeout), retried or not.
    pub attempt_timeouts: u64,
    /// Requests started for every row in one response (`execute_unpaged`).
    pub unpaged: u64,
    /// Requests started for a statement's first page: `execute` (every
    /// write and batch sent with it too), `execute_page` without a paging
    /// state, and the first page of a pager or row stream.
    pub first_pages: u64,
    /// Requests started for a page after a paging state (`execute_page`
    /// with one, the later pages of pagers and row streams).
    pub next_pages: u64,
    /// Statements sent to be prepared (`Session::prepare` of a statement
    /// not in the session's cache; once per statement, however many nodes
    /// it is prepared on).
    pub prepares: u64,
    /// Statements prepared again because a node had forgotten them.
    pub reprepares: u64,
    /// Connections open in the nodes' pools now (the control connection
    /// not included).
    pub connections: u64,
    /// Connections that joined a pool since the session started.
    pub connections_opened: u64,
    /// Pool connections that closed since the session started.
    pub connections_closed: u64,
    /// Pool connections that could not be opened (timed out or not).
    pub connect_failures: u64,
    /// Pool connections whose opening took longer than the connect timeout.
    pub connect_timeouts: u64,
    /// Requests per second: the mean since the session started, and the
    /// 1, 5 and 15 minute moving averages (of requests started).
    pub rates: Rates,
    /// How long the requests took (retries and speculative executions
    /// included).
    pub latency: Latencies,
    /// Per node: the latency of the attempts sent to it.
    pub nodes: Vec<NodeLatency>,
}

/// The attempts one node served, as a latency histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeLatency {
    /// The node.
    pub addr: SocketAddr,
    /// How long the attempts sent to the node took (answered or failed).
    pub latency: Latencies,
}

impl NodeLatency {
    /// Attempts counted.
    pub fn attempts(&self) -> u64 {
        self.latency.count()
    }
    /// An upper bound of the `q` quantile (0.0..=1.0) of the latency (at
    /// most 1/32 above it, see [`Latencies::quantile`]).
    pub fn latency_quantile(&self, q: f64) -> Option<Duration> {
        self.latency.quantile(q)
    }
}

impl MetricsSnapshot {
    /// An upper bound of the `q` quantile (0.0..=1.0) of the latency (at
    /// most 1/32 above it, see [`Latencies::quantile`]).
    pub fn latency_quantile(&self, q: f64) -> Option<Duration> {
        self.latency.quantile(q)
    }

    /// The mean latency in whole milliseconds, as the official driver's
    /// `get_latency_avg_ms` (there from bucket midpoints too).
    pub fn latency_avg_ms(&self) -> Option<u64> {
        self.latency.mean().map(|d| d.as_millis() as u64)
    }

    /// The standard deviation of the latency in whole milliseconds, as the
    /// official driver's `get_latency_std_dev_ms` (from bucket midpoints,
    /// [`Latencies::std_dev`]).
    pub fn latency_std_dev_ms(&self) -> Option<u64> {
        self.latency.std_dev().map(|d| d.as_millis() as u64)
    }

    /// The `percentile` (0.0..=100.0) of the latency in whole
    /// milliseconds, its bucket's midpoint, as the official driver's
    /// `get_latency_percentile_ms`. `None` when no request was counted or
    /// `percentile` is out of range.
    pub fn latency_percentile_ms(&self, percentile: f64) -> Option<u64> {
        if !(0.0..=100.0).contains(&percentile) {
            return None;
        }
        self.latency.quantile_midpoint(percentile / 100.0).map(|d| d.as_millis() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn counts_come_from_the_requests() {
        let m = Metrics::default();
        let now = Instant::now();
        for (us, kind) in [
            (1, RequestKind::FirstPage),
            (3, RequestKind::Unpaged),
            (100, RequestKind::NextPage),
            (100, RequestKind::NextPage),
            (5000, RequestKind::FirstPage),
        ] {
            m.started_kind(now, kind);
            m.request(Duration::from_micros(us), us != 3 && us != 5000, kind);
        }
        m.started_kind(now, RequestKind::FirstPage);
        m.retry();
        m.timeout();
        m.attempt_timeout();
        m.prepare();
        m.reprepare();
        m.connection_opened();
        m.connection_opened();
        m.connection_closed();
        m.connect_failed(&ConnectionError::ConnectTimeout);
        m.connect_failed(&ConnectionError::Closed);
        let s = m.snapshot_at(now, Vec::new(), 1);
        assert_eq!((s.requests, s.errors, s.retries, s.timeouts, s.attempt_timeouts), (5, 2, 1, 1, 1));
        assert_eq!((s.unpaged_errors, s.first_page_errors, s.next_page_errors), (1, 1, 0));
        assert_eq!((s.unpaged, s.first_pages, s.next_pages), (1, 3, 2));
        assert_eq!((s.prepares, s.reprepares), (1, 1));
        assert_eq!((s.connections, s.connections_opened, s.connections_closed), (1, 2, 1));
        assert_eq!((s.connect_failures, s.connect_timeouts), (2, 1));
        assert_eq!(s.latency_quantile(0.5), Some(Duration::from_micros(102)));
        assert_eq!(s.latency_quantile(1.0), Some(Duration::from_micros(5120)));
        // Midpoints: (1.5 + 3.5 + 101 + 101 + 5056) / 5 µs.
        assert_eq!(s.latency.mean(), Some(Duration::from_nanos(1_052_600)));
        assert_eq!(s.latency_avg_ms(), Some(1));
        // sqrt(mean of (midpoint - 1052.6 µs)^2): 2002.2 µs.
        assert_eq!(s.latency.std_dev().map(|d| d.as_micros()), Some(2002));
        assert_eq!(s.latency_std_dev_ms(), Some(2));
        assert_eq!(s.latency_percentile_ms(100.0), Some(5));
        assert_eq!(s.latency_percentile_ms(101.0), None);
    }

    /// The rates tick from the start instants requests pass in (a virtual
    /// clock here): 10 requests a second for a minute (off the 5 s grid, so
    /// that each interval holds 50), then none.
    #[test]
    fn rates_follow_the_requests_on_a_virtual_clock() {
        let epoch = Instant::now();
        let m = Metrics::starting_at(epoch);
        for i in 0..600u32 {
            m.started_kind(epoch + SEC * i / 10 + SEC / 20, RequestKind::FirstPage);
        }
        let r = m.snapshot_at(epoch + 60 * SEC, Vec::new(), 0).rates;
        assert!((r.mean - 10.0).abs() < 1e-9, "{r:?}");
        // Every average started at the first interval's 10/s and stayed.
        for rate in [r.one_minute, r.five_minutes, r.fifteen_minutes] {
            assert!((rate - 10.0).abs() < 1e-9, "{r:?}");
        }
        // Ten idle minutes: one-minute rate decays by e^-10, read lazily.
        let r = m.snapshot_at(epoch + 660 * SEC, Vec::new(), 0).rates;
        assert!((r.one_minute - 10.0 * (-10.0f64).exp()).abs() < 1e-9, "{r:?}");
        assert!((r.five_minutes - 10.0 * (-2.0f64).exp()).abs() < 1e-9, "{r:?}");
        assert!((r.mean - 600.0 / 660.0).abs() < 1e-9, "{r:?}");
    }

    /// Threads record requests (every kind, with errors) while another
    /// takes snapshots, which tick the rates: nothing is lost or counted
    /// twice, and the rates see every request once.
    #[test]
    fn counts_and_rates_hold_under_threads() {
        let epoch = Instant::now();
        let m = Arc::new(Metrics::starting_at(epoch));
        let threads = STRIPES + 3;
        let per_thread = 20_000u32;
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (m, done) = (m.clone(), done.clone());
            std::thread::spawn(move || {
                let mut last = 0;
                let mut t = 0;
                while !done.load(Ordering::Relaxed) {
                    t += 1;
                    let s = m.snapshot_at(epoch + SEC * t, Vec::new(), 0);
                    assert!(s.requests >= last, "completed requests went back");
                    last = s.requests;
                }
            })
        };
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..per_thread {
                        let kind =
                            [RequestKind::Unpaged, RequestKind::FirstPage, RequestKind::NextPage][i as usize % 3];
                        // Virtual time moves on too: requests tick as well.
                        m.started_kind(epoch + Duration::from_micros(u64::from(i) * 500), kind);
                        m.request(Duration::from_micros(1 << (t % 20)), i % 100 != 0, kind);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("worker");
        }
        done.store(true, Ordering::Relaxed);
        reader.join().expect("reader");
        let total = u64::from(per_thread) * threads as u64;
        // Far in the (virtual) future: every interval ticked.
        let s = m.snapshot_at(epoch + 1_000_000 * SEC, Vec::new(), 0);
        assert_eq!(s.requests, total);
        assert_eq!(s.unpaged + s.first_pages + s.next_pages, total);
        assert_eq!(s.errors, total / 100);
        assert_eq!(s.unpaged_errors + s.first_page_errors + s.next_page_errors, s.errors);
        // The last tick counted every request, once.
        assert_eq!(m.meter.lock().expect("meter").counted(), total);
        assert!(s.rates.mean > 0.0);
        for t in 0..threads {
            let bucket = Duration::from_micros(1 << (t % 20));
            let n: u64 = s.latency.buckets().filter(|(b, _)| b.start == bucket).map(|(_, n)| n).sum();
            assert!(n >= u64::from(per_thread), "thread {t}'s bucket: {n}");
        }
    }

    /// The recording cost per request (`started` and `request`), on one
    /// thread and on as many as the machine has cores, against a clock
    /// read for scale. A measurement, not a check: run it with
    /// `cargo test -p shardwise --release --lib metrics::tests::recording_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn recording_cost() {
        const N: u32 = 10_000_000;
        let params = Params { page_size: Some(5000), ..Params::new(shardwise_protocol::consistency::Consistency::One) };
        let per_request = |threads: usize| {
            let m = Arc::new(Metrics::default());
            let start = Instant::now();
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let m = m.clone();
                    std::thread::spawn(move || {
                        let at = Instant::now();
                        for i in 0..N {
                            let kind = m.started(std::hint::black_box(at), params);
                            m.request(Duration::from_micros(u64::from(i % 4096) + t as u64), i % 1000 != 0, kind);
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join().expect("worker");
            }
            assert_eq!(m.snapshot_at(Instant::now(), Vec::new(), 0).requests, u64::from(N) * threads as u64);
            start.elapsed().as_nanos() as f64 / f64::from(N)
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let clock = {
            let start = Instant::now();
            for _ in 0..N {
                std::hint::black_box(Instant::now());
            }
            start.elapsed().as_nanos() as f64 / f64::from(N)
        };
        println!(
            "recording: {:.2} ns per request on 1 thread, {:.2} ns per request and thread on {cores}; Instant::now: {clock:.2} ns",
            per_request(1),
            per_request(cores)
        );
    }
}
