//! How many windows a worker keeps requested at once, found by the worker.
//!
//! A fixed count either starves a server with cores to spare (too few
//! queries to keep its shards busy) or queues in a busy one. The limit here
//! climbs the worker's own throughput: by Little's law a worker that keeps
//! `n` windows requested and sees them answered after a mean latency `L`
//! reads `n / L` windows a second, so one more window pays exactly while
//! the latency holds. Each round (as many answers as the limit) measures the
//! rate of answers and their mean latency:
//!
//! * **queueing** (TCP Vegas's estimate, `n × (1 − base / L)` windows
//!   waiting instead of being served, `base` the lowest mean seen) above a
//!   quarter of the limit: one step down;
//! * otherwise, with the limit reached, one step **up on probation**: kept if
//!   the next round's rate is 5% higher, else taken back (and not tried
//!   again for a while);
//! * now and then one step **down on probation**: kept if the rate holds
//!   within 3% (fewer windows buffered for the same speed), else taken back;
//! * a timeout or an overload error: half the limit at once.
//!
//! The latency runs from the request to when the worker takes the answer,
//! so a worker busy with its consumers looks like a slow server: more
//! windows in flight would not read faster then either.
//!
//! Sans-IO: time comes in as parameters, so the whole behaviour is tested
//! against a modelled server.

use std::time::{Duration, Instant};

/// The lowest limit: one window at a time.
const MIN: usize = 1;
/// Rounds between probes (after a probe taken back, before the next).
const QUIET_ROUNDS: u32 = 8;

/// A step on probation: the limit before it and the rate there.
#[derive(Debug, Clone, Copy)]
struct Probe {
    from: usize,
    rate: f64,
}

/// Windows in flight per worker: fixed, or found by the worker.
#[derive(Debug, Clone)]
pub(super) struct InFlightLimit {
    limit: usize,
    max: usize,
    adaptive: bool,
    /// The current round: when it started, its answers and their latencies.
    started: Option<Instant>,
    answers: usize,
    latency: Duration,
    /// Whether the worker had as many windows requested as allowed (and
    /// more to request) in this round: only then can a higher limit help.
    saturated: bool,
    /// The lowest round mean latency seen.
    base: Option<Duration>,
    up: Option<Probe>,
    down: Option<Probe>,
    /// Rounds until the next probe up, and down.
    quiet_up: u32,
    quiet_down: u32,
}

impl InFlightLimit {
    /// Always `n` windows (at least one).
    pub(super) fn fixed(n: usize) -> InFlightLimit {
        let n = n.max(MIN);
        InFlightLimit {
            limit: n,
            max: n,
            adaptive: false,
            started: None,
            answers: 0,
            latency: Duration::ZERO,
            saturated: false,
            base: None,
            up: None,
            down: None,
            quiet_up: 0,
            quiet_down: QUIET_ROUNDS,
        }
    }

    /// Starting at `start`, between one and `max` windows.
    pub(super) fn adaptive(start: usize, max: usize) -> InFlightLimit {
        let max = max.max(MIN);
        InFlightLimit { adaptive: true, max, ..InFlightLimit::fixed(start.clamp(MIN, max)) }
    }

    /// The most windows to have requested now.
    pub(super) fn get(&self) -> usize {
        self.limit
    }

    /// The worker has as many windows requested as the limit allows.
    pub(super) fn reached(&mut self) {
        self.saturated = true;
    }

    /// A window's first page came back at `now`, `latency` after it was
    /// requested.
    pub(super) fn answered(&mut self, now: Instant, latency: Duration) {
        if !self.adaptive {
            return;
        }
        let started = *self.started.get_or_insert_with(|| now.checked_sub(latency).unwrap_or(now));
        self.answers += 1;
        self.latency = self.latency.saturating_add(latency);
        if self.answers < self.limit.max(4) {
            return;
        }
        let elapsed = now.saturating_duration_since(started).as_secs_f64();
        let rate = if elapsed > 0.0 { self.answers as f64 / elapsed } else { f64::INFINITY };
        let mean = self.latency / self.answers as u32;
        let base = self.base.map_or(mean, |b| b.min(mean));
        self.base = Some(base);
        let waiting =
            if mean.is_zero() { 0.0 } else { self.limit as f64 * (1.0 - base.as_secs_f64() / mean.as_secs_f64()) };
        self.decide(rate, waiting);
        self.started = Some(now);
        self.answers = 0;
        self.latency = Duration::ZERO;
        self.saturated = false;
    }

    fn decide(&mut self, rate: f64, waiting: f64) {
        let step = (self.limit / 8).max(1);
        self.quiet_up = self.quiet_up.saturating_sub(1);
        self.quiet_down = self.quiet_down.saturating_sub(1);
        if let Some(probe) = self.up.take() {
            if rate < probe.rate * 1.05 {
                self.limit = probe.from;
                self.quiet_up = QUIET_ROUNDS;
                return;
            }
        }
        if let Some(probe) = self.down.take() {
            if rate < probe.rate * 0.97 {
                self.limit = probe.from;
                self.quiet_down = QUIET_ROUNDS;
                return;
            }
            // Kept: the next step down may follow soon.
            self.quiet_down = 2;
        }
        if waiting > (self.limit / 4).max(2) as f64 {
            self.limit = self.limit.saturating_sub(step).max(MIN);
        } else if self.saturated && self.quiet_up == 0 && self.limit < self.max {
            self.up = Some(Probe { from: self.limit, rate });
            self.limit = (self.limit + step).min(self.max);
        } else if self.quiet_down == 0 && self.limit > MIN {
            self.down = Some(Probe { from: self.limit, rate });
            self.limit = self.limit.saturating_sub(step).max(MIN);
        }
    }

    /// A window timed out or the server said it is overloaded: half as many.
    pub(super) fn overloaded(&mut self) {
        if self.adaptive {
            self.limit = (self.limit / 2).max(MIN);
            (self.up, self.down, self.started) = (None, None, None);
            self.answers = 0;
            self.latency = Duration::ZERO;
            self.saturated = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A modelled server of `slots` parallel slots, each serving a window in
    /// `service`, read by a worker that spends `worker` on each window: the
    /// latency and the rate of answers of a worker keeping `n` requested.
    fn serve(n: usize, slots: usize, service: Duration, worker: Duration) -> (Duration, Duration) {
        // Processor sharing: n windows over the slots take n / slots services.
        let server = service.mul_f64((n as f64 / slots as f64).max(1.0));
        let latency = server.max(worker * n as u32);
        // Answers come one every latency / n.
        (latency, latency / n as u32)
    }

    /// Runs `rounds` rounds against the modelled server on a virtual clock;
    /// the limits seen.
    fn run(limit: &mut InFlightLimit, rounds: usize, slots: usize, service: Duration, worker: Duration) -> Vec<usize> {
        let mut now = Instant::now();
        let mut seen = Vec::new();
        for _ in 0..rounds {
            let n = limit.get();
            let (latency, every) = serve(n, slots, service, worker);
            limit.reached();
            for _ in 0..n.max(4) {
                now += every;
                limit.answered(now, latency);
            }
            seen.push(limit.get());
        }
        seen
    }

    fn mean(seen: &[usize]) -> f64 {
        seen.iter().sum::<usize>() as f64 / seen.len() as f64
    }

    #[test]
    fn a_server_with_spare_slots_gets_more_windows() {
        let mut limit = InFlightLimit::adaptive(4, 64);
        let seen = run(&mut limit, 300, 24, Duration::from_millis(5), Duration::from_micros(10));
        let late = mean(&seen[200..]);
        assert!((18.0..=30.0).contains(&late), "settles near the server's 24 slots, got {late}: {seen:?}");
    }

    #[test]
    fn a_busy_worker_does_not_climb() {
        // The worker needs 2 ms per window, the server 1 ms with 16 slots:
        // more windows in flight only queue at the worker.
        let mut limit = InFlightLimit::adaptive(4, 64);
        let seen = run(&mut limit, 300, 16, Duration::from_millis(1), Duration::from_millis(2));
        let late = mean(&seen[200..]);
        assert!(late <= 5.0, "stays low, got {late}: {seen:?}");
    }

    #[test]
    fn a_limit_past_what_helps_comes_down() {
        let mut limit = InFlightLimit::adaptive(48, 64);
        let seen = run(&mut limit, 400, 8, Duration::from_millis(5), Duration::from_micros(10));
        let late = mean(&seen[300..]);
        assert!(late <= 14.0, "comes down towards the server's 8 slots, got {late}: {seen:?}");
    }

    #[test]
    fn never_beyond_its_bounds() {
        let mut limit = InFlightLimit::adaptive(4, 8);
        let seen = run(&mut limit, 100, 1000, Duration::from_millis(5), Duration::ZERO);
        assert!(seen.iter().all(|&n| (1..=8).contains(&n)), "{seen:?}");
        assert!(seen[20..].contains(&8), "reaches the cap when nothing queues: {seen:?}");
        let mut one = InFlightLimit::adaptive(0, 0);
        assert_eq!(one.get(), 1);
        one.overloaded();
        assert_eq!(one.get(), 1, "never below one");
    }

    #[test]
    fn a_limit_not_reached_is_not_raised() {
        // Following a table live: fewer windows are due than allowed.
        let mut limit = InFlightLimit::adaptive(4, 64);
        let mut now = Instant::now();
        for _ in 0..100 {
            now += Duration::from_millis(5);
            limit.answered(now, Duration::from_millis(5));
        }
        assert!(limit.get() <= 4, "{}", limit.get());
    }

    #[test]
    fn overload_halves_and_fixed_never_moves() {
        let mut limit = InFlightLimit::adaptive(32, 64);
        limit.overloaded();
        assert_eq!(limit.get(), 16);
        let mut fixed = InFlightLimit::fixed(4);
        let seen = run(&mut fixed, 50, 64, Duration::from_millis(5), Duration::ZERO);
        fixed.overloaded();
        assert!(seen.iter().all(|&n| n == 4) && fixed.get() == 4, "{seen:?}");
    }
}
