//! The report of a phase, in latte's terms: throughput (cycles, requests
//! and rows per second), latency percentiles, errors, the client's CPU time
//! (user + system of the whole process, from `getrusage`, so the drivers'
//! background tasks count) per cycle, and the elapsed time; as text, and as
//! JSON for `--output`.

use std::fmt::Write as _;

use shardwise_benches::json;
use shardwise_benches::rusage::{online_cpus, CpuTime};

use crate::runner::Measured;

/// The figures of one phase.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// `load` or `run`.
    pub command: String,
    /// The script path.
    pub script: String,
    /// `shardwise` or `scylla`.
    pub driver: String,
    /// The protocol version in use.
    pub protocol: String,
    /// `--tag` values.
    pub tags: Vec<String>,
    /// Threads.
    pub threads: usize,
    /// Request loops per thread.
    pub concurrency: usize,
    /// Fixed rate, if any.
    pub rate: Option<f64>,
    /// Seconds.
    pub elapsed_s: f64,
    /// Cycles (calls of the function).
    pub ops: u64,
    /// Requests.
    pub requests: u64,
    /// Rows returned.
    pub rows: u64,
    /// Cycles that ended in a failed request.
    pub errors: u64,
    /// The first of them.
    pub first_error: Option<String>,
    /// Latency of a cycle, milliseconds.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// User CPU seconds of the process.
    pub cpu_user_s: f64,
    /// System CPU seconds of the process.
    pub cpu_sys_s: f64,
}

/// Who ran what, for the report.
pub struct Labels<'a> {
    /// `load` or `run`.
    pub command: &'a str,
    /// The script path.
    pub script: &'a str,
    /// The driver's name.
    pub driver: &'a str,
    /// The protocol version in use.
    pub protocol: String,
    /// `--tag` values.
    pub tags: &'a [String],
}

impl Report {
    /// The report of `m`, which took `cpu`.
    pub fn new(
        labels: Labels<'_>,
        threads: usize,
        concurrency: usize,
        rate: Option<f64>,
        m: &Measured,
        cpu: CpuTime,
    ) -> Report {
        let ms = |ns: u64| ns as f64 / 1e6;
        let h = &m.histogram;
        let empty = h.is_empty();
        let q = |q: f64| if empty { f64::NAN } else { ms(h.value_at_quantile(q)) };
        Report {
            command: labels.command.into(),
            script: labels.script.into(),
            driver: labels.driver.into(),
            protocol: labels.protocol,
            tags: labels.tags.to_vec(),
            threads,
            concurrency,
            rate,
            elapsed_s: m.elapsed.as_secs_f64(),
            ops: m.ops,
            requests: m.requests,
            rows: m.rows,
            errors: m.errors,
            first_error: m.first_error.clone(),
            mean_ms: if empty { f64::NAN } else { h.mean() / 1e6 },
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            p999_ms: q(0.999),
            max_ms: if empty { f64::NAN } else { ms(h.max()) },
            cpu_user_s: cpu.user.as_secs_f64(),
            cpu_sys_s: cpu.system.as_secs_f64(),
        }
    }

    fn per_s(&self, n: u64) -> f64 {
        n as f64 / self.elapsed_s
    }

    /// Client CPU seconds, user + system.
    pub fn cpu_s(&self) -> f64 {
        self.cpu_user_s + self.cpu_sys_s
    }

    /// Client CPU microseconds per cycle.
    pub fn cpu_us_per_op(&self) -> f64 {
        if self.ops == 0 {
            f64::NAN
        } else {
            self.cpu_s() * 1e6 / self.ops as f64
        }
    }

    /// Percent of all online CPUs (latte's figure).
    pub fn cpu_util(&self) -> f64 {
        100.0 * self.cpu_s() / self.elapsed_s / online_cpus() as f64
    }

    /// The text report.
    pub fn text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "SUMMARY  {} {}  driver {}  protocol {}  {} thread(s) x {} in flight{}{}",
            self.command,
            self.script,
            self.driver,
            self.protocol,
            self.threads,
            self.concurrency,
            self.rate.map(|r| format!(", rate {r} op/s")).unwrap_or_default(),
            if self.tags.is_empty() { String::new() } else { format!("  tags {}", self.tags.join(",")) }
        );
        let _ = writeln!(t, "         Elapsed time       [s]  {:>12.3}", self.elapsed_s);
        let _ = writeln!(
            t,
            "             CPU time       [s]  {:>12.3}   (user {:.3}, sys {:.3}; {:.1}% of {} CPUs)",
            self.cpu_s(),
            self.cpu_user_s,
            self.cpu_sys_s,
            self.cpu_util(),
            online_cpus()
        );
        let _ = writeln!(t, "          CPU / cycle      [µs]  {:>12.2}", self.cpu_us_per_op());
        let _ = writeln!(t, "               Cycles      [op]  {:>12}   {:>10.0} op/s", self.ops, self.per_s(self.ops));
        let _ = writeln!(
            t,
            "             Requests     [req]  {:>12}   {:>10.0} req/s",
            self.requests,
            self.per_s(self.requests)
        );
        let _ =
            writeln!(t, "                 Rows     [row]  {:>12}   {:>10.0} row/s", self.rows, self.per_s(self.rows));
        let _ = writeln!(t, "               Errors      [op]  {:>12}", self.errors);
        let _ = writeln!(
            t,
            "    Latency [ms]  mean {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
            self.mean_ms, self.p50_ms, self.p90_ms, self.p99_ms, self.p999_ms, self.max_ms
        );
        if let Some(e) = &self.first_error {
            let _ = writeln!(t, "      First error  {e}");
        }
        t
    }

    /// The JSON report.
    pub fn json(&self) -> String {
        let tags: Vec<String> = self.tags.iter().map(|t| json::string(t)).collect();
        format!(
            "{{\"command\": {}, \"script\": {}, \"driver\": {}, \"protocol\": {}, \"tags\": [{}], \"threads\": {}, \
             \"concurrency\": {}, \"rate\": {}, \"elapsed_s\": {}, \"ops\": {}, \"requests\": {}, \"rows\": {}, \
             \"ops_per_s\": {}, \"req_per_s\": {}, \"rows_per_s\": {}, \"errors\": {}, \"first_error\": {}, \
             \"mean_ms\": {}, \"p50_ms\": {}, \"p90_ms\": {}, \"p99_ms\": {}, \"p999_ms\": {}, \"max_ms\": {}, \
             \"cpu_user_s\": {}, \"cpu_sys_s\": {}, \"cpu_us_per_op\": {}, \"cpu_util_pct\": {}}}\n",
            json::string(&self.command),
            json::string(&self.script),
            json::string(&self.driver),
            json::string(&self.protocol),
            tags.join(", "),
            self.threads,
            self.concurrency,
            self.rate.map(json::number).unwrap_or_else(|| "null".into()),
            json::number(self.elapsed_s),
            self.ops,
            self.requests,
            self.rows,
            json::number(self.per_s(self.ops)),
            json::number(self.per_s(self.requests)),
            json::number(self.per_s(self.rows)),
            self.errors,
            self.first_error.as_deref().map(json::string).unwrap_or_else(|| "null".into()),
            json::number(self.mean_ms),
            json::number(self.p50_ms),
            json::number(self.p90_ms),
            json::number(self.p99_ms),
            json::number(self.p999_ms),
            json::number(self.max_ms),
            json::number(self.cpu_user_s),
            json::number(self.cpu_sys_s),
            json::number(self.cpu_us_per_op()),
            json::number(self.cpu_util()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn text_and_json_carry_the_figures() {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).expect("histogram");
        for ms in 1..=100u64 {
            h.record(ms * 1_000_000).expect("record");
        }
        let m = Measured {
            elapsed: Duration::from_secs(2),
            histogram: h,
            ops: 100,
            errors: 1,
            first_error: Some("statement \"w\": timed \"out\"".into()),
            requests: 300,
            rows: 50,
        };
        let cpu = CpuTime { user: Duration::from_millis(30), system: Duration::from_millis(10) };
        let tags = vec!["a".to_string()];
        let labels = Labels { command: "run", script: "x.rn", driver: "shardwise", protocol: "V4".into(), tags: &tags };
        let r = Report::new(labels, 1, 8, None, &m, cpu);
        assert!((r.cpu_us_per_op() - 400.0).abs() < 1e-6);
        assert!((r.p50_ms - 50.0).abs() < 0.1 && (r.max_ms - 100.0).abs() < 0.1);
        let text = r.text();
        assert!(text.contains("150 req/s") && text.contains("25 row/s") && text.contains("50 op/s"), "{text}");
        let json = r.json();
        assert!(json.contains("\"req_per_s\": 150") && json.contains("\"errors\": 1"), "{json}");
        assert!(json.contains("timed \\\"out\\\""), "{json}");
        assert!(json.contains("\"rate\": null") && json.contains("\"tags\": [\"a\"]"), "{json}");
    }

    #[test]
    fn an_empty_phase_has_no_latencies() {
        let m = Measured {
            elapsed: Duration::from_secs(1),
            histogram: hdrhistogram::Histogram::<u64>::new(3).expect("histogram"),
            ops: 0,
            errors: 0,
            first_error: None,
            requests: 0,
            rows: 0,
        };
        let labels = Labels { command: "run", script: "x.rn", driver: "scylla", protocol: "V4".into(), tags: &[] };
        let r = Report::new(labels, 1, 1, Some(10.0), &m, CpuTime::default());
        assert!(r.json().contains("\"p99_ms\": null"));
    }
}
