//! The reading flags that `printer` and `kafka-sink` share: where reading
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
    /// Print the reader's informational and debug lines on stderr as well
    /// as its warnings, once it runs.
    #[arg(long)]
    pub verbose: bool,
}

impl ReadingArgs {
    /// A reader builder of `keyspace.table` with these settings.
    pub fn builder(&self, session: Session, keyspace: &str, table: &str) -> Result<CdcReaderBuilder, String> {
        let start = match self.start_unix_ms {
            Some(ms) => UNIX_EPOCH + Duration::from_millis(ms),
            None => SystemTime::now() - Duration::from_secs(self.start_ago),
        };
        let seconds = |what: &str, s: f64| {
            Duration::try_from_secs_f64(s).map_err(|_| format!("--{what} {s}: not a number of seconds"))
        };
        let mut builder = CdcReaderBuilder::new(session, keyspace, table)
            .start(start)
            .window_size(seconds("window", self.window)?)
            .safety_interval(seconds("safety", self.safety)?)
            .sleep_interval(seconds("sleep", self.sleep)?)
            .consistency(consistency(&self.consistency)?)
            .streams_per_query(self.streams_per_query);
        if let Some(ms) = self.end_unix_ms {
            builder = builder.end(UNIX_EPOCH + Duration::from_millis(ms));
        }
        if let Some(w) = self.workers {
            builder = builder.workers(w);
        }
        Ok(builder)
    }
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
}
