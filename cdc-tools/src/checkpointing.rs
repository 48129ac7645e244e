//! The checkpoint flags that `printer` and `replicator` share: progress
//! saved in a table of the cluster and resumed from (see
//! `shardwise_cdc::checkpoint::TableCheckpointStore`). `kafka-sink` keeps
//! its checkpoints in Kafka and has only `--checkpoint-interval`.

use std::sync::Arc;

use shardwise::Session;
use shardwise_cdc::checkpoint::TableCheckpointStore;
use shardwise_cdc::CdcReaderBuilder;

use crate::leasing::LeaseArgs;
use crate::reading::positive_seconds;

/// Where a tool saves its progress.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckpointArgs {
    /// Save progress in a checkpoint table of this keyspace (created if
    /// missing) and resume from it.
    #[arg(long)]
    pub checkpoint_keyspace: Option<String>,
    /// The checkpoint table's name.
    #[arg(long, default_value = "cdc_checkpoints")]
    pub checkpoint_table: String,
    /// Seconds between checkpoint saves.
    #[arg(long, default_value_t = 5.0)]
    pub checkpoint_interval: f64,
}

impl CheckpointArgs {
    /// Whether the flags go together (before anything connects): leases
    /// need a checkpoint table, and the interval is a duration.
    pub fn check(&self, leases: &LeaseArgs) -> Result<(), String> {
        if leases.lease_keyspace.is_some() && self.checkpoint_keyspace.is_none() {
            return Err("--lease-keyspace needs --checkpoint-keyspace: the readers share their progress there".into());
        }
        if leases.lease_keyspace.is_some() {
            positive_seconds("lease-heartbeat", leases.lease_heartbeat)?;
        }
        positive_seconds("checkpoint-interval", self.checkpoint_interval).map(drop)
    }

    /// `builder` saving to and resuming from the checkpoint table (created
    /// if missing), when one is named. Leases need it: the readers that
    /// share a table share their progress there.
    pub async fn apply(
        &self,
        builder: CdcReaderBuilder,
        session: &Session,
        leases: &LeaseArgs,
    ) -> Result<CdcReaderBuilder, Box<dyn std::error::Error>> {
        self.check(leases)?;
        let Some(ks) = &self.checkpoint_keyspace else { return Ok(builder) };
        let interval = positive_seconds("checkpoint-interval", self.checkpoint_interval)?;
        let store = TableCheckpointStore::new(session.clone(), ks, &self.checkpoint_table);
        store.create_table().await?;
        Ok(builder.checkpoints(Arc::new(store), interval))
    }
}
