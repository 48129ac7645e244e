//! The lease flags that `printer`, `replicator` and `kafka-sink` share: readers that
//! share one table through leases in a table of the cluster (see
//! `shardwise_cdc::lease`), and the lease configuration they make.

use std::time::Duration;

use shardwise::Session;
use shardwise_cdc::{LeaseConfig, LeaseTable};

use crate::connect::ConnectArgs;

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
    /// Keep the lease queries on a session of their own, to this node
    /// (host:port; default: the reading session): their timing never waits
    /// behind the log reads.
    #[arg(long, value_name = "NODE")]
    pub lease_node: Option<String>,
}

impl LeaseArgs {
    /// The lease TTL, if the table is shared.
    pub fn ttl(&self) -> Option<Duration> {
        self.lease_keyspace.as_ref().map(|_| Duration::from_secs(self.lease_ttl))
    }

    /// The lease configuration, its table created if missing; `None` if the
    /// table is not shared. The leases are kept through `session`, or
    /// through a session of their own to `--lease-node` (connected as
    /// `connect` says).
    pub async fn config(
        &self,
        session: &Session,
        connect: &ConnectArgs,
    ) -> Result<Option<LeaseConfig>, Box<dyn std::error::Error>> {
        let Some(ks) = &self.lease_keyspace else { return Ok(None) };
        let heartbeat = crate::reading::positive_seconds("lease-heartbeat", self.lease_heartbeat)?;
        let session = match &self.lease_node {
            Some(node) => connect.builder(node)?.build().await?,
            None => session.clone(),
        };
        let table = LeaseTable::new(session, ks, &self.lease_table);
        table.create_table().await?;
        let mut config = LeaseConfig::new(table).timing(Duration::from_secs(self.lease_ttl), heartbeat);
        if let Some(name) = &self.reader_name {
            config = config.name(name.clone());
        }
        Ok(Some(config))
    }
}
