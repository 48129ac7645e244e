//! Topology discovery: the nodes of the cluster from `system.local` and
//! `system.peers_v2` (falling back to `system.peers`), and each keyspace's
//! replication from `system_schema.keyspaces`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::response::ErrorKind;
use shardwise_protocol::token::{Partitioner, Token};
use uuid::Uuid;

use super::ring::ReplicationStrategy;
use super::translation::{AddressTranslator, UntranslatedPeer};
use crate::connection::Connection;
use crate::error::ExecutionError;
use crate::params::Params;
use crate::statement::Statement;

pub use super::node::NodeInfo;

fn tokens(set: Option<Vec<String>>) -> Vec<Token> {
    let mut t: Vec<Token> = set.unwrap_or_default().iter().filter_map(|s| s.parse().ok()).collect();
    t.sort_unstable();
    t
}

/// A row of `SELECT host_id, data_center, rack, tokens FROM system.local`.
pub(crate) type LocalRow = (Option<Uuid>, Option<String>, Option<String>, Option<Vec<String>>);
/// A row of `SELECT host_id, native_address, native_port, data_center, rack, tokens FROM system.peers_v2`.
pub(crate) type PeerV2Row =
    (Option<Uuid>, Option<IpAddr>, Option<i32>, Option<String>, Option<String>, Option<Vec<String>>);
/// A row of `SELECT host_id, rpc_address, peer, data_center, rack, tokens FROM system.peers`.
pub(crate) type PeerRow =
    (Option<Uuid>, Option<IpAddr>, Option<IpAddr>, Option<String>, Option<String>, Option<Vec<String>>);

/// The node of the `system.local` row read through a connection to `addr`;
/// `None` without a host id.
pub(crate) fn local_node((host_id, dc, rack, t): LocalRow, addr: SocketAddr) -> Option<NodeInfo> {
    Some(NodeInfo { host_id: host_id?, address: addr, datacenter: dc, rack, tokens: tokens(t) })
}

/// The node of a `system.peers_v2` row (its native port, else `port`);
/// `None` without a host id or an address.
pub(crate) fn peer_v2_node(row: PeerV2Row, port: u16) -> Option<NodeInfo> {
    let (host_id, address, native_port, dc, rack, t) = row;
    let (Some(host_id), Some(ip)) = (host_id, address) else { return None };
    let port = native_port.and_then(|p| u16::try_from(p).ok()).unwrap_or(port);
    Some(NodeInfo { host_id, address: SocketAddr::new(ip, port), datacenter: dc, rack, tokens: tokens(t) })
}

/// The node of a `system.peers` row, at `port`; `None` without a host id
/// or an address.
pub(crate) fn peer_node(row: PeerRow, port: u16) -> Option<NodeInfo> {
    let (host_id, rpc, peer, dc, rack, t) = row;
    let host_id = host_id?;
    // An unspecified rpc_address means "the same as the peer address".
    let ip = rpc.filter(|ip| !ip.is_unspecified()).or(peer)?;
    Some(NodeInfo { host_id, address: SocketAddr::new(ip, port), datacenter: dc, rack, tokens: tokens(t) })
}

/// Reads the nodes of the cluster through `conn` (whose address stands for
/// the node it is connected to).
pub async fn fetch_nodes(
    conn: &Connection,
    translator: Option<&dyn AddressTranslator>,
) -> Result<Vec<NodeInfo>, ExecutionError> {
    fetch_nodes_at(conn, conn.addr(), translator).await
}

/// `node` with its address translated by `translator` (if any); `None`,
/// with a warning, when the translator has no address for it.
async fn translated(node: NodeInfo, translator: Option<&dyn AddressTranslator>) -> Option<NodeInfo> {
    let Some(translator) = translator else { return Some(node) };
    let peer = UntranslatedPeer {
        host_id: Some(node.host_id),
        address: node.address,
        datacenter: node.datacenter.as_deref(),
        rack: node.rack.as_deref(),
    };
    let translation = translator.translate_address(&peer).await;
    match translation {
        Ok(address) => Some(NodeInfo { address, ..node }),
        Err(error) => {
            tracing::warn!(host_id = %node.host_id, %error, "a peer left out: its address has no translation");
            None
        }
    }
}

/// The node read through the connection (at `node.address`), at the
/// address `translator` gives it, if any
/// ([`AddressTranslator::translate_connected`]).
fn connected_translated(node: NodeInfo, translator: Option<&dyn AddressTranslator>) -> Option<NodeInfo> {
    match translator.and_then(|t| t.translate_connected(node.host_id, node.address)) {
        None => Some(node),
        Some(Ok(address)) => Some(NodeInfo { address, ..node }),
        Some(Err(error)) => {
            tracing::warn!(host_id = %node.host_id, %error, "the connected node left out: its address has no translation");
            None
        }
    }
}

/// Reads the nodes of the cluster through `conn`, a connection to the node
/// whose client address is `addr` (a connection through the shard-aware
/// port has another port than the node's address). The peers' addresses
/// go through `translator`; the connected node keeps `addr` unless the
/// translator moves it.
pub async fn fetch_nodes_at(
    conn: &Connection,
    addr: SocketAddr,
    translator: Option<&dyn AddressTranslator>,
) -> Result<Vec<NodeInfo>, ExecutionError> {
    let params = Params::new(Consistency::One);
    let local = conn
        .execute(
            &Statement::new("SELECT host_id, data_center, rack, tokens FROM system.local WHERE key = 'local'"),
            &(),
            params,
        )
        .await?;
    let mut nodes = Vec::new();
    if let Some(mut row) = local.first_row::<LocalRow>().map_err(rows_error)? {
        // ScyllaDB said the node's host id in SUPPORTED (SCYLLA_HOST_ID,
        // docs/protocol.md §1.2): it stands in for a row without one.
        row.0 = row.0.or(conn.host_id());
        nodes.extend(local_node(row, addr).and_then(|n| connected_translated(n, translator)));
    }
    // The connected node is the one whose host id the handshake gave (or
    // system.local's): a peers row naming it again is not another node.
    let connected = nodes.first().map(|n| n.host_id).or(conn.host_id());
    let is_other = |n: &NodeInfo| Some(n.host_id) != connected;
    let port = addr.port();
    // The peers as their rows name them, translated once all are read.
    let mut peers = Vec::new();
    let v2 = conn
        .execute(
            &Statement::new(
                "SELECT host_id, native_address, native_port, data_center, rack, tokens FROM system.peers_v2",
            ),
            &(),
            params,
        )
        .await;
    match v2 {
        Ok(result) => {
            for row in result.rows::<PeerV2Row>().map_err(rows_error)? {
                peers.extend(peer_v2_node(row.map_err(|e| rows_error(e.into()))?, port).filter(is_other));
            }
        }
        Err(ExecutionError::Db(e)) if e.kind == ErrorKind::Invalid => {
            let result = conn
                .execute(
                    &Statement::new("SELECT host_id, rpc_address, peer, data_center, rack, tokens FROM system.peers"),
                    &(),
                    params,
                )
                .await?;
            for row in result.rows::<PeerRow>().map_err(rows_error)? {
                peers.extend(peer_node(row.map_err(|e| rows_error(e.into()))?, port).filter(is_other));
            }
        }
        Err(e) => return Err(e),
    }
    for peer in peers {
        nodes.extend(translated(peer, translator).await);
    }
    Ok(nodes)
}

/// How long one name may take to resolve (the official driver's
/// `hostname_resolution_timeout` default).
pub(crate) const RESOLVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The addresses `target` (a name and a port) stands for, resolved on the
/// runtime's blocking pool (`tokio::net::lookup_host`, so a slow resolver
/// never stalls a worker) within `timeout` (none: as long as it takes);
/// why not, as text.
pub(crate) async fn lookup(
    target: impl tokio::net::ToSocketAddrs,
    timeout: Option<std::time::Duration>,
) -> Result<Vec<SocketAddr>, String> {
    within(timeout, tokio::net::lookup_host(target)).await?.map(Iterator::collect).map_err(|e| e.to_string())
}

/// What `answer` gives, unless it takes longer than `timeout` (none: no
/// bound); why not, as text.
async fn within<T>(
    timeout: Option<std::time::Duration>,
    answer: impl std::future::Future<Output = T>,
) -> Result<T, String> {
    match timeout {
        Some(t) => tokio::time::timeout(t, answer).await.map_err(|_| format!("no answer within {t:?}")),
        None => Ok(answer.await),
    }
}

/// The cluster's name, from `system.local` through `conn`; `None` when the
/// node does not say (or answers in another shape).
pub async fn fetch_cluster_name(conn: &Connection) -> Option<String> {
    let statement = Statement::new("SELECT cluster_name FROM system.local WHERE key = 'local'");
    let result = conn.execute(&statement, &(), Params::new(Consistency::One)).await.ok()?;
    result.first_row::<(Option<String>,)>().ok()??.0
}

/// The `WHERE` clause of a `system_schema` read limited to `keyspaces`
/// (every keyspace when empty: no clause). `keyspace_name` is the
/// partition key of every `system_schema` table, so the server reads only
/// those partitions.
pub(crate) fn only(keyspaces: &[String]) -> String {
    if keyspaces.is_empty() {
        return String::new();
    }
    let names: Vec<String> = keyspaces.iter().map(|k| format!("'{}'", k.replace('\'', "''"))).collect();
    format!(" WHERE keyspace_name IN ({})", names.join(", "))
}

/// Reads the replication strategy of every keyspace (of `keyspaces`
/// when it names any).
pub async fn fetch_keyspaces(
    conn: &Connection,
    keyspaces: &[String],
) -> Result<HashMap<String, ReplicationStrategy>, ExecutionError> {
    let query = format!("SELECT keyspace_name, replication FROM system_schema.keyspaces{}", only(keyspaces));
    let result = conn.execute(&Statement::new(query), &(), Params::new(Consistency::One)).await?;
    let mut out = HashMap::new();
    for row in result.rows::<(String, HashMap<String, String>)>().map_err(rows_error)? {
        let (name, replication) = row.map_err(|e| rows_error(e.into()))?;
        let strategy = ReplicationStrategy::from_options(replication.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        out.insert(name, strategy);
    }
    Ok(out)
}

/// The partitioner of each table, by keyspace and table name, from
/// `system_schema.scylla_tables`. A table's entry is `None` when its
/// partitioner is one the driver does not implement.
pub type TablePartitioners = HashMap<(String, String), Option<Partitioner>>;

pub(crate) fn table_partitioner(class: Option<&str>) -> Option<Partitioner> {
    // Scylla leaves the column null for the default partitioner.
    class.map_or(Some(Partitioner::Murmur3), Partitioner::from_class_name)
}

/// Reads every table's partitioner from `system_schema.scylla_tables`;
/// `None` when the cluster has no such table (Cassandra: every table uses
/// the cluster's Murmur3 partitioner).
pub async fn fetch_partitioners(
    conn: &Connection,
    keyspaces: &[String],
) -> Result<Option<TablePartitioners>, ExecutionError> {
    let statement = Statement::new(format!(
        "SELECT keyspace_name, table_name, partitioner FROM system_schema.scylla_tables{}",
        only(keyspaces)
    ));
    let result = match conn.execute(&statement, &(), Params::new(Consistency::One)).await {
        Ok(r) => r,
        Err(ExecutionError::Db(e)) if e.kind == ErrorKind::Invalid => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut out = HashMap::new();
    for row in result.rows::<(String, String, Option<&str>)>().map_err(rows_error)? {
        let (keyspace, table, class) = row.map_err(|e| rows_error(e.into()))?;
        out.insert((keyspace, table), table_partitioner(class));
    }
    Ok(Some(out))
}

/// Reads one table's partitioner from `system_schema.scylla_tables`: the
/// outer `None` when the cluster has no such table, the inner one for a
/// partitioner the driver does not implement. A table without a row uses
/// the default partitioner (Murmur3).
pub async fn fetch_table_partitioner(
    conn: &Connection,
    keyspace: &str,
    table: &str,
) -> Result<Option<Option<Partitioner>>, ExecutionError> {
    let statement = Statement::new(
        "SELECT partitioner FROM system_schema.scylla_tables WHERE keyspace_name = ? AND table_name = ?",
    );
    let values = (keyspace.to_owned(), table.to_owned());
    let result = match conn.execute(&statement, &values, Params::new(Consistency::One)).await {
        Ok(r) => r,
        Err(ExecutionError::Db(e)) if e.kind == ErrorKind::Invalid => return Ok(None),
        Err(e) => return Err(e),
    };
    let class = result.first_row::<(Option<String>,)>().map_err(rows_error)?.and_then(|(c,)| c);
    Ok(Some(table_partitioner(class.as_deref())))
}

/// How a newly read topology differs from the previous one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyDiff {
    /// Addresses that were not in the topology.
    pub added: Vec<SocketAddr>,
    /// Addresses that are no longer in it.
    pub removed: Vec<SocketAddr>,
    /// Nodes (by their new address) whose identity, datacenter, rack or
    /// tokens changed while their address stayed, and nodes (same host id)
    /// that moved to another address.
    pub changed: Vec<SocketAddr>,
}

impl TopologyDiff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Compares two readings of the topology. A node is identified by its
/// address (that is what connections are made to); a host id that moved to
/// another address shows up as removed at the old address, added at the
/// new one, and changed.
pub fn diff_topology(old: &[NodeInfo], new: &[NodeInfo]) -> TopologyDiff {
    let mut diff = TopologyDiff::default();
    for n in new {
        match old.iter().find(|o| o.address == n.address) {
            None => {
                diff.added.push(n.address);
                if old.iter().any(|o| o.host_id == n.host_id) {
                    diff.changed.push(n.address);
                }
            }
            Some(o) if o != n => diff.changed.push(n.address),
            Some(_) => {}
        }
    }
    diff.removed = old.iter().filter(|o| !new.iter().any(|n| n.address == o.address)).map(|o| o.address).collect();
    diff
}

fn rows_error(_: crate::error::RowsAccessError) -> ExecutionError {
    ExecutionError::UnexpectedResponse("system table rows of an unexpected shape")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyspace_list_limits_reads_by_partition_key() {
        assert_eq!(only(&[]), "", "no list: every keyspace");
        let list = ["app".to_owned(), "o'brien".to_owned()];
        assert_eq!(only(&list), " WHERE keyspace_name IN ('app', 'o''brien')", "quoted as CQL literals");
    }

    /// `hostname_resolution_timeout`: an answer later than the bound is
    /// none (the name is then skipped as one that does not resolve); no
    /// bound waits for it.
    #[tokio::test]
    async fn a_lookup_is_bounded_by_the_resolution_timeout() {
        let never = std::future::pending::<()>();
        let late = within(Some(std::time::Duration::from_millis(20)), never).await;
        assert_eq!(late, Err("no answer within 20ms".to_owned()));
        assert_eq!(within(None, std::future::ready(7)).await, Ok(7));
        assert_eq!(within(Some(RESOLVE_TIMEOUT), std::future::ready(7)).await, Ok(7));
    }

    fn node(id: u128, ip: [u8; 4], tokens: &[i64]) -> NodeInfo {
        NodeInfo {
            host_id: Uuid::from_u128(id),
            address: (ip, 9042).into(),
            datacenter: Some("dc1".into()),
            rack: Some("r1".into()),
            tokens: tokens.iter().map(|t| Token::from(*t)).collect(),
        }
    }

    #[test]
    fn topology_diff_finds_added_removed_and_replaced_nodes() {
        let a = node(1, [127, 0, 0, 1], &[0]);
        let b = node(2, [127, 0, 0, 2], &[100]);
        let c = node(3, [127, 0, 0, 3], &[200]);
        assert!(diff_topology(&[a.clone(), b.clone()], &[b.clone(), a.clone()]).is_empty(), "order does not matter");
        let d = diff_topology(&[a.clone(), b.clone()], &[a.clone(), b.clone(), c.clone()]);
        assert_eq!(d, TopologyDiff { added: vec![c.address], ..Default::default() });
        let d = diff_topology(&[a.clone(), b.clone(), c.clone()], &[a.clone(), c.clone()]);
        assert_eq!(d, TopologyDiff { removed: vec![b.address], ..Default::default() });
        // Same node, new tokens.
        let moved = NodeInfo { tokens: vec![Token::from(150)], ..b.clone() };
        let d = diff_topology(&[a.clone(), b.clone()], &[a.clone(), moved]);
        assert_eq!(d, TopologyDiff { changed: vec![b.address], ..Default::default() });
        // Same host id, new address: replaced.
        let readdressed = NodeInfo { address: ([127, 0, 0, 9], 9042).into(), ..b.clone() };
        let d = diff_topology(&[a.clone(), b.clone()], &[a.clone(), readdressed.clone()]);
        assert_eq!(
            d,
            TopologyDiff {
                added: vec![readdressed.address],
                removed: vec![b.address],
                changed: vec![readdressed.address]
            }
        );
        // Same address, another host (a node replaced by a new one).
        let replacement = NodeInfo { host_id: Uuid::from_u128(9), ..b.clone() };
        let d = diff_topology(&[a.clone(), b.clone()], &[a, replacement]);
        assert_eq!(d, TopologyDiff { changed: vec![b.address], ..Default::default() });
    }

    #[test]
    fn partitioner_classes() {
        assert_eq!(table_partitioner(None), Some(Partitioner::Murmur3), "null means the default");
        assert_eq!(table_partitioner(Some("com.scylladb.dht.CDCPartitioner")), Some(Partitioner::Cdc));
        assert_eq!(table_partitioner(Some("org.apache.cassandra.dht.Murmur3Partitioner")), Some(Partitioner::Murmur3));
        assert_eq!(table_partitioner(Some("org.apache.cassandra.dht.RandomPartitioner")), None, "not routable");
    }
}
