//! How a front runs: [`FrontConfig`] (shards, ports, the front's keyspace,
//! credentials, the miss delay) and [`TabletsMode`]. Plain data at the
//! bottom of the crate, read by the shared state, the front and the
//! command-line flags alike.

use std::net::IpAddr;
use std::time::Duration;

/// How to run the front.
#[derive(Debug, Clone)]
pub struct FrontConfig {
    /// Shards per emulated node (`SCYLLA_NR_SHARDS`), default 8.
    pub shards: u16,
    /// `SCYLLA_SHARDING_IGNORE_MSB`, default 12 (Scylla's default).
    pub ignore_msb: u8,
    /// Regular port, the same on every node's address; 0 picks a free one.
    pub port: u16,
    /// Shard-aware port (`SCYLLA_SHARD_AWARE_PORT`); 0 picks a free one.
    pub shard_aware_port: u16,
    /// Extra latency for each request that arrives on the wrong shard.
    pub miss_delay: Option<Duration>,
    /// The keyspace of the stand-in tables (`shardwise_emu` by default).
    /// Fronts with the same keyspace share the published generations, the
    /// CDC options and `scylla_tables`, as the nodes of one Scylla cluster
    /// would; a front whose shard count differs from the latest generation's
    /// publishes a new one, so tests that read generations while other
    /// fronts with other shard counts run should use a keyspace of their own.
    pub emu_keyspace: String,
    /// Credentials for the front's own connection, when Cassandra needs them.
    pub credentials: Option<(String, String)>,
    /// Tokio worker threads of the front's runtime.
    pub worker_threads: usize,
    /// Address to listen on; `None` listens on each Cassandra node's own
    /// address (needed for multi-node clusters, see the module docs).
    pub bind_ip: Option<IpAddr>,
    /// Scylla's `tablets_mode_for_new_keyspaces`: whether a keyspace that
    /// does not say gets tablets. Scylla's default is
    /// [`TabletsMode::Enabled`]; the front's is [`TabletsMode::Disabled`]
    /// (vnodes unless `tablets = {'enabled': true}`), as a Scylla configured
    /// so.
    pub tablets_mode: TabletsMode,
    /// Scylla's experimental feature `strongly-consistent-tables`, which is
    /// what makes it offer `TABLETS_ROUTING_V2_EXPERIMENTAL`
    /// (docs/protocol.md §1.7; the front emulates the routing only, not
    /// strongly consistent tables). Off, as in ScyllaDB.
    pub strongly_consistent_tables: bool,
}

/// Scylla's `tablets_mode_for_new_keyspaces` (`enforced`, which refuses
/// vnode keyspaces, is not emulated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TabletsMode {
    /// New keyspaces use vnodes unless they ask for tablets.
    #[default]
    Disabled,
    /// New keyspaces with a tablets-aware replication strategy
    /// (NetworkTopologyStrategy) use tablets unless they say
    /// `tablets = {'enabled': false}`.
    Enabled,
}

impl Default for FrontConfig {
    fn default() -> Self {
        FrontConfig {
            shards: 8,
            ignore_msb: 12,
            port: 0,
            shard_aware_port: 0,
            miss_delay: None,
            emu_keyspace: "shardwise_emu".into(),
            credentials: None,
            worker_threads: 2,
            bind_ip: None,
            tablets_mode: TabletsMode::Disabled,
            strongly_consistent_tables: false,
        }
    }
}
