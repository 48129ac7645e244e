//! The reading flags that `printer`, `replicator` and `kafka-sink` share: where reading
//! starts and ends, the window, safety interval and sleep, the workers and
//! the consistency, and the reader builder they make.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shardwise::protocol::consistency::Consistency;
use shardwise::Session;
use shardwise_cdc::CdcReaderBuilder;

/// How a tool reads the log.
#[derive(Debug, Clone, clap::Args)]
pub struct ReadingArgs {
    /// Start this many seconds ago (0: now).
    #[arg(long, default_value_t = 0)]
    pub start_ago: u64,
    /// Start at this absolute time, in milliseconds since the Unix epoch
    /// (instead of `--start-ago`).
    #[arg(long, conflicts_with = "start_ago")]
    pub start_unix_ms: Option<u64>,
    /// Stop after the changes before this absolute time, in milliseconds
    /// since the Unix epoch (default: follow forever).
    #[arg(long)]
    pub end_unix_ms: Option<u64>,
    /// Window size in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub window: f64,
    /// Safety interval in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub safety: f64,
    /// Trust this machine's clock alone, as `scylla-cdc` does, instead of
    /// holding it to the cluster's: a clock ahead of the nodes' by more than
    /// the safety interval then loses changes.
    #[arg(long)]
    pub local_clock: bool,
    /// Sleep between windows once caught up, in seconds.
    #[arg(long, default_value_t = 1.0)]
    pub sleep: f64,
    /// Worker threads (default: available cores).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Read consistency (ONE, QUORUM, LOCAL_QUORUM, ALL...).
    #[arg(long, default_value = "LOCAL_QUORUM")]
    pub consistency: String,
    /// The most streams one log query reads (1-64): the size of the groups
    /// that readers sharing a table hold.
    #[arg(long, default_value_t = 64)]
    pub streams_per_query: usize,
    /// The most windows a worker may keep requested at once; each worker
    /// finds how many pay below that (default 64).
    #[arg(long, default_value_t = 64)]
    pub max_windows_in_flight: usize,
    /// Print the reader's informational and debug lines on stderr as well
    /// as its warnings, once it runs.
    #[arg(long)]
    pub verbose: bool,
    /// Serve the reader's progress and lag (per group) as Prometheus text
    /// at http://ADDR/metrics, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Seconds between progress lines on stderr (0: none; default: 2 on a
    /// terminal, 10 otherwise).
    #[arg(long, value_name = "SECONDS")]
    pub progress: Option<f64>,
}

impl ReadingArgs {
    /// With `--metrics-addr`, serves `reader`'s progress there and says
    /// where on stderr (as `[tool] metrics at http://…/metrics`).
    pub async fn serve_metrics(
        &self,
        tool: &str,
        reader: &shardwise_cdc::CdcReader,
        keyspace: &str,
        table: &str,
    ) -> Result<(), String> {
        let Some(addr) = self.metrics_addr else { return Ok(()) };
        let at = crate::metrics::serve_flag(addr, reader, keyspace, table).await?;
        eprintln!("[{tool}] metrics at http://{at}/metrics");
        Ok(())
    }

    /// Whether the flags hold usable values: checked before anything
    /// connects, so that a bad value is its one error line whatever the
    /// cluster.
    pub fn check(&self) -> Result<(), String> {
        crate::progress::interval(self.progress)?;
        self.settings().map(drop)
    }

    /// Prints the progress line of `tool` every `--progress` seconds (see
    /// [`crate::progress`]) until the reader finishes.
    pub fn report_progress(
        &self,
        tool: &'static str,
        what: &'static str,
        reader: &shardwise_cdc::CdcReader,
        delivered: impl Fn() -> u64 + Send + 'static,
    ) -> Result<(), String> {
        if let Some(every) = crate::progress::interval(self.progress)? {
            crate::progress::spawn(tool, what, every, reader.handle(), delivered);
        }
        Ok(())
    }

    /// The flags' values, checked.
    fn settings(&self) -> Result<Settings, String> {
        if self.workers == Some(0) {
            return Err("--workers 0: a reader needs at least one worker".into());
        }
        if !(1..=64).contains(&self.streams_per_query) {
            return Err(format!("--streams-per-query {}: from 1 to 64", self.streams_per_query));
        }
        if self.max_windows_in_flight == 0 {
            return Err("--max-windows-in-flight 0: a worker needs at least one window in flight".into());
        }
        let start = match self.start_unix_ms {
            Some(ms) => unix_ms("start-unix-ms", ms)?,
            None => SystemTime::now()
                .checked_sub(Duration::from_secs(self.start_ago))
                .filter(|t| *t >= UNIX_EPOCH)
                .ok_or_else(|| format!("--start-ago {}: before the Unix epoch", self.start_ago))?,
        };
        Ok(Settings {
            start,
            end: self.end_unix_ms.map(|ms| unix_ms("end-unix-ms", ms)).transpose()?,
            window: positive_seconds("window", self.window)?,
            safety: seconds("safety", self.safety)?,
            sleep: seconds("sleep", self.sleep)?,
            consistency: consistency(&self.consistency).map_err(|e| {
                format!("--consistency {}: {e} (ONE, QUORUM, LOCAL_QUORUM, ALL, ...)", self.consistency)
            })?,
        })
    }

    /// A reader builder of `keyspace.table` with these settings.
    pub fn builder(&self, session: Session, keyspace: &str, table: &str) -> Result<CdcReaderBuilder, String> {
        let s = self.settings()?;
        let mut builder = CdcReaderBuilder::new(session, keyspace, table)
            .start(s.start)
            .window_size(s.window)
            .safety_interval(s.safety)
            .cluster_clock(!self.local_clock)
            .sleep_interval(s.sleep)
            .consistency(s.consistency)
            .streams_per_query(self.streams_per_query)
            .max_windows_in_flight(self.max_windows_in_flight);
        if let Some(end) = s.end {
            builder = builder.end(end);
        }
        if let Some(w) = self.workers {
            builder = builder.workers(w);
        }
        Ok(builder)
    }
}

/// [`ReadingArgs`]' values, checked.
struct Settings {
    start: SystemTime,
    end: Option<SystemTime>,
    window: Duration,
    safety: Duration,
    sleep: Duration,
    consistency: Consistency,
}

/// The value of `--<flag>` as a duration: a finite number of seconds, not
/// negative, at most a year (what a tool's interval or timeout can mean).
pub fn seconds(flag: &str, value: f64) -> Result<Duration, String> {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| *d <= YEAR)
        .ok_or_else(|| format!("--{flag} {}: not a number of seconds from 0 to a year", shown(value)))
}

/// `value` as the user may have typed it (huge ones in exponent form).
fn shown(value: f64) -> String {
    if value.is_finite() && value.abs() >= 1e15 {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// [`seconds`], and more than zero.
pub fn positive_seconds(flag: &str, value: f64) -> Result<Duration, String> {
    let d = seconds(flag, value)?;
    if d.is_zero() {
        return Err(format!("--{flag} {}: must be more than 0", shown(value)));
    }
    Ok(d)
}

/// The time `ms` milliseconds after the Unix epoch, as the log's
/// timestamps can hold it (`--<flag>`).
fn unix_ms(flag: &str, ms: u64) -> Result<SystemTime, String> {
    i64::try_from(ms)
        .ok()
        .and_then(|_| UNIX_EPOCH.checked_add(Duration::from_millis(ms)))
        .ok_or_else(|| format!("--{flag} {ms}: past the times a CDC log holds"))
}

/// A consistency level by its CQL name (`ONE`, `QUORUM`, `LOCAL_QUORUM`…, any case).
pub fn consistency(name: &str) -> Result<Consistency, String> {
    Ok(match name.to_ascii_uppercase().as_str() {
        "ONE" => Consistency::One,
        "TWO" => Consistency::Two,
        "THREE" => Consistency::Three,
        "QUORUM" => Consistency::Quorum,
        "ALL" => Consistency::All,
        "LOCAL_QUORUM" => Consistency::LocalQuorum,
        "EACH_QUORUM" => Consistency::EachQuorum,
        "LOCAL_ONE" => Consistency::LocalOne,
        other => return Err(format!("unknown consistency {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistency_names() {
        assert_eq!(consistency("local_quorum"), Ok(Consistency::LocalQuorum));
        assert_eq!(consistency("ONE"), Ok(Consistency::One));
        assert_eq!(consistency("most"), Err("unknown consistency MOST".to_string()));
    }

    #[test]
    fn out_of_range_values_are_errors_not_panics() {
        assert_eq!(seconds("sleep", 0.0), Ok(Duration::ZERO));
        assert_eq!(positive_seconds("kafka-timeout", 2.5), Ok(Duration::from_millis(2500)));
        for bad in [f64::INFINITY, f64::NAN, -1.0, 1e300] {
            let e = seconds("checkpoint-interval", bad).expect_err("refused");
            assert!(e.starts_with("--checkpoint-interval "), "{e}");
        }
        assert!(positive_seconds("kafka-timeout", 0.0).is_err());
        assert!(unix_ms("end-unix-ms", u64::MAX).is_err());
        assert!(unix_ms("end-unix-ms", 1_700_000_000_000).is_ok());
    }
}
