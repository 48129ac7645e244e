//! The cluster as the session sees it, as one object
//! ([`Session::cluster_state`]; the official driver's
//! `Session::get_cluster_state()`): the cluster's name, every node with its
//! place, state, connections and sharding, and the replicas of a token.
//!
//! The nodes are a copy taken when asked; the replicas are read from the
//! session's view when asked, tablets learned since included. A token of a
//! table's partition key ([`ClusterInfo::compute_token`]) comes from a
//! statement the session prepares once for the table (and caches): its bind
//! markers carry the key's types and names, so values are checked and
//! matched by name exactly as a prepared statement's are.

use std::net::SocketAddr;
use std::sync::Arc;

use shardwise_protocol::sharding::Sharder;
use shardwise_protocol::token::Token;
use shardwise_protocol::types::ser::SerializeValues;
use shardwise_protocol::EncodeError;
use uuid::Uuid;

use super::schema::SchemaError;
use super::Session;
use crate::cluster::node::Replica;
use crate::error::ExecutionError;

/// One node as [`ClusterInfo::get_nodes_info`] lists it (the official
/// driver's `Node`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// The address the driver connects to (after address translation).
    pub address: SocketAddr,
    /// Its host id, datacenter and rack, when the topology is discovered.
    pub host_id: Option<Uuid>,
    /// Its datacenter.
    pub datacenter: Option<String>,
    /// Its rack.
    pub rack: Option<String>,
    /// In the local datacenter (per the distance policy).
    pub local: bool,
    /// Counted as up (no DOWN event since it answered last).
    pub up: bool,
    /// Its open connections.
    pub connections: usize,
    /// Its sharding, on ScyllaDB, once a connection told it.
    pub sharder: Option<Sharder>,
}

impl NodeState {
    /// Whether the session has an open connection to it.
    pub fn is_connected(&self) -> bool {
        self.connections > 0
    }

    /// Its sharding (the official driver's `Node::sharder`).
    pub fn sharder(&self) -> Option<Sharder> {
        self.sharder
    }
}

/// The cluster as a session sees it.
#[derive(Clone)]
pub struct ClusterInfo {
    name: Option<Arc<str>>,
    nodes: Vec<NodeState>,
    session: Session,
}

impl std::fmt::Debug for ClusterInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterInfo").field("name", &self.name).field("nodes", &self.nodes).finish()
    }
}

impl ClusterInfo {
    /// The cluster's name (`system.local`'s `cluster_name`, read when the
    /// session connected); `None` when it could not be read.
    pub fn cluster_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Every node the session has a pool for, local ones first.
    pub fn get_nodes_info(&self) -> &[NodeState] {
        &self.nodes
    }

    /// The replicas of `token` in `keyspace.table`, each with the shard
    /// that owns it there ([`Session::token_endpoints`]: the tablet's for a
    /// table with tablets, as learned so far).
    pub fn get_token_endpoints(&self, keyspace: &str, table: &str, token: Token) -> Vec<Replica> {
        self.session.token_endpoints(keyspace, table, token)
    }

    /// The token of the partition of `keyspace.table` whose key `values`
    /// give (the official `ClusterState::compute_token`): the key's columns
    /// in key order (a tuple), or a struct that derives `SerializeValues`,
    /// matched by name. The values are checked against the key's types. The
    /// first call for a table prepares `SELECT … WHERE` its key columns `= ?`
    /// (one round trip; the session caches it), so the token is the one a
    /// prepared statement of the table routes by, partitioner included.
    pub async fn compute_token<V: SerializeValues + ?Sized>(
        &self,
        keyspace: &str,
        table: &str,
        values: &V,
    ) -> Result<Token, TokenError> {
        let no_table = || TokenError::NoTable { keyspace: keyspace.to_owned(), table: table.to_owned() };
        let schema = self.session.schema().await?;
        let ks = schema.keyspaces.get(keyspace).ok_or_else(no_table)?;
        let key = match (ks.tables.get(table), ks.views.get(table)) {
            (Some(t), _) => &t.partition_key,
            (None, Some(v)) => &v.table.partition_key,
            (None, None) => return Err(no_table()),
        };
        if key.is_empty() {
            return Err(no_table());
        }
        if values.count() != key.len() {
            return Err(TokenError::Count {
                keyspace: keyspace.to_owned(),
                table: table.to_owned(),
                key: key.join(", "),
                given: values.count(),
            });
        }
        let quote = super::keyspace::quoted;
        let columns: Vec<String> = key.iter().map(|c| quote(c)).collect();
        let text = format!(
            "SELECT {} FROM {}.{} WHERE {}",
            columns.join(", "),
            quote(keyspace),
            quote(table),
            columns.iter().map(|c| format!("{c} = ?")).collect::<Vec<_>>().join(" AND ")
        );
        let prepared = self.session.prepare(text).await?;
        values.check_types(prepared.bind_specs())?;
        prepared.calculate_token(values).ok_or(TokenError::NoToken)
    }
}

/// Why [`ClusterInfo::compute_token`] gave no token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The schema could not be read.
    #[error("reading the schema for a partition key: {0}")]
    Schema(#[from] SchemaError),
    /// No such table or view in the schema (the schema follows schema
    /// events: one just created may not be in it yet).
    #[error("no table or view {keyspace}.{table} in the schema")]
    NoTable {
        /// The keyspace asked for.
        keyspace: String,
        /// The table asked for.
        table: String,
    },
    /// Not as many values as the partition key has columns.
    #[error("the partition key of {keyspace}.{table} is ({key}): {given} values given")]
    Count {
        /// The keyspace.
        keyspace: String,
        /// The table.
        table: String,
        /// The key's columns, in key order.
        key: String,
        /// The values given.
        given: usize,
    },
    /// Preparing the table's key statement failed.
    #[error("preparing the partition key statement: {0}")]
    Prepare(#[from] ExecutionError),
    /// A value does not fit its key column (a type, a name).
    #[error("the partition key values: {0}")]
    Values(#[from] EncodeError),
    /// A key value is null or unset, or the table's partitioner is not one
    /// the driver implements.
    #[error("no token: a key value is null or unset, or the table's partitioner is not implemented")]
    NoToken,
}

impl Session {
    /// The cluster as this session sees it now ([`ClusterInfo`]).
    pub fn cluster_state(&self) -> ClusterInfo {
        let nodes = self.with_state(|state| {
            state
                .nodes
                .iter()
                .enumerate()
                .filter_map(|(i, pool)| {
                    let view = state.node_view(i)?;
                    let open = pool.slots.open_connections();
                    Some(NodeState {
                        address: view.addr,
                        host_id: view.host_id(),
                        datacenter: view.datacenter().map(str::to_owned),
                        rack: view.rack().map(str::to_owned),
                        local: view.local,
                        up: view.up,
                        connections: open.len(),
                        sharder: open.iter().find_map(|c| c.sharding().map(|s| s.sharder())),
                    })
                })
                .collect()
        });
        let name = self.inner.cluster_name.clone();
        ClusterInfo { name, nodes, session: self.clone() }
    }
}
