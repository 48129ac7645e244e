//! Request rates as Dropwizard's `Meter` (and the official driver after it)
//! computes them: a mean rate over the whole life of the session, and
//! exponentially weighted moving averages over 1, 5 and 15 minutes, each
//! updated every 5 s ("tick") with the requests of the interval that ended:
//!
//! ```text
//! alpha = 1 − exp(−5 s / (60 s · minutes))
//! rate  = count / 5 s                          at the first tick
//! rate  = rate + alpha · (count / 5 s − rate)  at each one after
//! ```
//!
//! [`Meter`] is the arithmetic alone, over a clock and a count its caller
//! passes (nanoseconds since the session started, and requests so far):
//! nothing here reads a clock, so tests drive it with a virtual one. As in
//! Dropwizard, the ticks are made lazily, when something looks (a request
//! starting, a snapshot): every interval that ended since the last tick
//! ticks then, the first with the requests counted since, the others with
//! none. An interval is over once more than 5 s passed since it started.

/// One tick: 5 s, in ns.
pub(crate) const TICK_NS: u64 = 5_000_000_000;
const TICK_SECS: f64 = 5.0;

/// Requests per second, as Dropwizard's `Meter` and the official driver's `Metrics`
/// (`get_mean_rate`, `get_one_minute_rate`, …) compute them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Requests per second since the session started.
    pub mean: f64,
    /// Exponentially weighted moving average over one minute.
    pub one_minute: f64,
    /// Exponentially weighted moving average over five minutes.
    pub five_minutes: f64,
    /// Exponentially weighted moving average over fifteen minutes.
    pub fifteen_minutes: f64,
}

/// One exponentially weighted moving average.
#[derive(Debug, Clone, Copy)]
struct Ewma {
    alpha: f64,
    /// Per second.
    rate: f64,
    ticked: bool,
}

impl Ewma {
    fn over_minutes(minutes: f64) -> Self {
        Ewma { alpha: 1.0 - (-TICK_SECS / 60.0 / minutes).exp(), rate: 0.0, ticked: false }
    }

    /// `ticks` (at least 1) intervals ended: the first with `count`
    /// requests, the others with none.
    fn tick(&mut self, count: u64, ticks: u64) {
        let instant = count as f64 / TICK_SECS;
        if self.ticked {
            self.rate += self.alpha * (instant - self.rate);
        } else {
            self.rate = instant;
            self.ticked = true;
        }
        // The empty intervals after it, at once: each multiplies the rate
        // by (1 − alpha).
        if ticks > 1 {
            self.rate *= (1.0 - self.alpha).powf((ticks - 1) as f64);
        }
    }
}

/// The rates' state: when the last tick was and how many requests it had
/// counted, and the three averages.
#[derive(Debug, Clone)]
pub(crate) struct Meter {
    last_tick: u64,
    counted: u64,
    m1: Ewma,
    m5: Ewma,
    m15: Ewma,
}

impl Default for Meter {
    fn default() -> Self {
        Meter {
            last_tick: 0,
            counted: 0,
            m1: Ewma::over_minutes(1.0),
            m5: Ewma::over_minutes(5.0),
            m15: Ewma::over_minutes(15.0),
        }
    }
}

impl Meter {
    /// When the next tick is due: once the clock is past it.
    pub(crate) fn next_tick(&self) -> u64 {
        self.last_tick.saturating_add(TICK_NS)
    }

    /// Ticks for the intervals that ended by `now` (ns), `count` requests
    /// having been made in all by then.
    pub(crate) fn advance(&mut self, now: u64, count: u64) {
        let age = now.saturating_sub(self.last_tick);
        if age <= TICK_NS {
            return;
        }
        let ticks = age / TICK_NS;
        // The interval `now` is in starts on the 5 s grid of the first one.
        self.last_tick = now - age % TICK_NS;
        let new = count.saturating_sub(self.counted);
        self.counted = self.counted.max(count);
        for ewma in [&mut self.m1, &mut self.m5, &mut self.m15] {
            ewma.tick(new, ticks);
        }
    }

    /// Requests counted by the ticks so far.
    #[cfg(test)]
    pub(crate) fn counted(&self) -> u64 {
        self.counted
    }

    /// The rates at `now` (ns since the start), after [`Meter::advance`] to
    /// it, `count` requests having been made in all.
    pub(crate) fn rates(&self, now: u64, count: u64) -> Rates {
        let mean = if count == 0 || now == 0 { 0.0 } else { count as f64 / (now as f64 / 1e9) };
        Rates { mean, one_minute: self.m1.rate, five_minutes: self.m5.rate, fifteen_minutes: self.m15.rate }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    /// The loop Dropwizard runs, one tick at a time, for comparison with
    /// the closed form used for runs of empty intervals.
    fn ticked_one_by_one(minutes: f64, counts: &[u64]) -> f64 {
        let mut e = Ewma::over_minutes(minutes);
        for &c in counts {
            e.tick(c, 1);
        }
        e.rate
    }

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    /// Dropwizard's `EWMATest`: 3 events in the first interval, then one
    /// minute (12 ticks) after another with none. The expected values are
    /// those its tests publish (0.6 · e^(−k·5/(60·m)) after k empty ticks).
    #[test]
    fn ewmas_decay_as_dropwizard_publishes() {
        let one = [0.6, 0.22072766, 0.08120117, 0.02987224, 0.01098938, 0.00404277, 0.00148725];
        let five = [0.6, 0.49123845, 0.40219203, 0.32928698, 0.26959738, 0.22072766, 0.18071653];
        let fifteen = [0.6, 0.56130419, 0.52510399, 0.49123845, 0.45955700, 0.42991879, 0.40219203];
        for (minutes, expected) in [(1.0, one), (5.0, five), (15.0, fifteen)] {
            let mut e = Ewma::over_minutes(minutes);
            e.tick(3, 1);
            for (minute, want) in expected.iter().enumerate() {
                assert!(close(e.rate, *want, 1e-8), "{minutes}-minute rate after {minute} min: {}", e.rate);
                // A minute of empty intervals, in one call.
                e.tick(0, 1);
                e.tick(0, 11);
            }
        }
    }

    #[test]
    fn empty_intervals_at_once_decay_as_one_by_one() {
        for minutes in [1.0, 5.0, 15.0] {
            let mut counts = vec![40, 7, 0, 12];
            let mut at_once = Ewma::over_minutes(minutes);
            for &c in &counts {
                at_once.tick(c, 1);
            }
            at_once.tick(3, 500);
            counts.push(3);
            counts.extend(std::iter::repeat_n(0, 499));
            let one_by_one = ticked_one_by_one(minutes, &counts);
            assert!(close(at_once.rate, one_by_one, 1e-12 * one_by_one.max(1e-300)), "{at_once:?} {one_by_one}");
        }
    }

    /// Dropwizard's `MeterTest`: one event at 0 s, two at 10 s; at 10 s the
    /// mean rate is 0.3/s and the averages are those of one interval with
    /// one event and one without.
    #[test]
    fn a_meter_ticks_lazily_as_dropwizard() {
        let mut m = Meter::default();
        m.advance(0, 0);
        m.advance(10 * SEC, 1);
        let r = m.rates(10 * SEC, 3);
        assert!(close(r.mean, 0.3, 1e-12), "{r:?}");
        assert!(close(r.one_minute, 0.1840, 0.001), "{r:?}");
        assert!(close(r.five_minutes, 0.1966, 0.001), "{r:?}");
        assert!(close(r.fifteen_minutes, 0.1988, 0.001), "{r:?}");
        // The next interval started at 10 s (the 5 s grid): nothing due
        // at 15 s, a tick with the two events just after.
        assert_eq!(m.next_tick(), 15 * SEC);
        m.advance(15 * SEC, 3);
        assert!(close(m.rates(15 * SEC, 3).one_minute, r.one_minute, 0.0));
        m.advance(15 * SEC + 1, 3);
        let after = m.rates(15 * SEC + 1, 3).one_minute;
        let alpha = 1.0 - (-5.0f64 / 60.0).exp();
        assert!(close(after, r.one_minute + alpha * (0.4 - r.one_minute), 1e-12), "{after}");
    }

    /// A steady 100 requests per second, looked at every 0.5 s: the first
    /// tick (at 5.5 s) counts 5.5 s of requests over its 5 s (110/s), every
    /// later one 5 s of them (100/s), and each average has forgotten the
    /// first as the formula says.
    #[test]
    fn a_steady_rate_is_found() {
        let mut m = Meter::default();
        let mut now = 0;
        let mut count = 0;
        while now < 1800 * SEC {
            now += SEC / 2;
            count = now / (SEC / 100);
            m.advance(now, count);
        }
        let r = m.rates(now, count);
        assert!(close(r.mean, 100.0, 1e-9), "{r:?}");
        // Ticks at 5.5 s, 10.5 s, … 1795.5 s: 359 of them.
        for (minutes, rate) in [(1.0, r.one_minute), (5.0, r.five_minutes), (15.0, r.fifteen_minutes)] {
            let kept = (-5.0f64 / 60.0 / minutes).exp().powi(358);
            assert!(close(rate, 100.0 + 10.0 * kept, 1e-9), "{minutes} min: {rate}");
        }
    }

    #[test]
    fn no_requests_no_rates() {
        let mut m = Meter::default();
        m.advance(3600 * SEC, 0);
        assert_eq!(m.rates(3600 * SEC, 0), Rates::default());
        assert_eq!(Meter::default().rates(0, 0), Rates::default());
    }
}
