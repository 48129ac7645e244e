//! The lease flags that `printer` and `kafka-sink` share: readers that
//! share one table through leases in a table of the cluster (see
//! `shardwise_cdc::lease`), and the lease configuration they make.

use std::time::Duration;

use shardwise::Session;
use shardwise_cdc::{LeaseConfig, LeaseTable};

/// How a tool shares its table with other processes.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaseArgs {
    /// Share the table with other readers through leases in a table of
    /// this keyspace (created if missing).
    #[arg(long)]
    pub lease_keyspace: Option<String>,
    /// The lease table's name.
    #[arg(long, default_value = "cdc_leases")]
    pub lease_table: String,
    /// This reader's name among those sharing the table (default: from its
    /// process id and start time).
    #[arg(long)]
    pub reader_name: Option<String>,
    /// Seconds a lease lasts without renewal (whole seconds).
    #[arg(long, default_value_t = 10)]
    pub lease_ttl: u64,
    /// Seconds between lease renewals (less than the TTL less 1.5 s).
    #[arg(long, default_value_t = 2.0)]
    pub lease_heartbeat: f64,
}

impl LeaseArgs {
    /// The lease TTL, if the table is shared.
    pub fn ttl(&self) -> Option<Duration> {
        self.lease_keyspace.as_ref().map(|_| Duration::from_secs(self.lease_ttl))
    }

    /// The lease configuration, its table created if missing; `None` if the
    /// table is not shared.
    pub async fn config(&self, session: &Session) -> Result<Option<LeaseConfig>, Box<dyn std::error::Error>> {
        let Some(ks) = &self.lease_keyspace else { return Ok(None) };
        let heartbeat = Duration::try_from_secs_f64(self.lease_heartbeat)
            .map_err(|_| format!("--lease-heartbeat {}: not a number of seconds", self.lease_heartbeat))?;
        let table = LeaseTable::new(session.clone(), ks, &self.lease_table);
        table.create_table().await?;
        let mut config = LeaseConfig::new(table).timing(Duration::from_secs(self.lease_ttl), heartbeat);
        if let Some(name) = &self.reader_name {
            config = config.name(name.clone());
        }
        Ok(Some(config))
    }
}
