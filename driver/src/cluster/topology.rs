//! Topology discovery: the nodes of the cluster from `system.local` and
//! `system.peers_v2` (falling back to `system.peers`), and each keyspace's
//! replication from `system_schema.keyspaces`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::response::ErrorKind;
use shardwise_protocol::token::Token;
use uuid::Uuid;

use super::ring::{ReplicationStrategy, RingNode};
use crate::connection::Connection;
use crate::error::ExecutionError;
use crate::execute::Params;
use crate::statement::Statement;

/// A node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Stable identity.
    pub host_id: Uuid,
    /// Address clients connect to.
    pub address: SocketAddr,
    /// Datacenter.
    pub datacenter: Option<String>,
    /// Rack.
    pub rack: Option<String>,
    /// Tokens owned.
    pub tokens: Vec<Token>,
}

impl NodeInfo {
    /// The node as the ring sees it.
    pub fn ring_node(&self) -> RingNode {
        RingNode { datacenter: self.datacenter.clone(), rack: self.rack.clone(), tokens: self.tokens.clone() }
    }
}

fn tokens(set: Option<Vec<String>>) -> Vec<Token> {
    let mut t: Vec<Token> = set.unwrap_or_default().iter().filter_map(|s| s.parse().ok()).collect();
    t.sort_unstable();
    t
}

/// Reads the nodes of the cluster through `conn` (whose address stands for
/// the node it is connected to).
pub async fn fetch_nodes(conn: &Connection) -> Result<Vec<NodeInfo>, ExecutionError> {
    let params = Params::new(Consistency::One);
    let local = conn
        .execute(&Statement::new("SELECT host_id, data_center, rack, tokens FROM system.local WHERE key = 'local'"), &(), params)
        .await?;
    let mut nodes = Vec::new();
    type LocalRow = (Option<Uuid>, Option<String>, Option<String>, Option<Vec<String>>);
    if let Some((Some(host_id), dc, rack, t)) = local.first_row::<LocalRow>().map_err(rows_error)? {
        nodes.push(NodeInfo { host_id, address: conn.addr(), datacenter: dc, rack, tokens: tokens(t) });
    }
    let port = conn.addr().port();
    let v2 = conn
        .execute(
            &Statement::new("SELECT host_id, native_address, native_port, data_center, rack, tokens FROM system.peers_v2"),
            &(),
            params,
        )
        .await;
    match v2 {
        Ok(result) => {
            type PeerRow = (Option<Uuid>, Option<IpAddr>, Option<i32>, Option<String>, Option<String>, Option<Vec<String>>);
            for row in result.rows::<PeerRow>().map_err(rows_error)? {
                let (host_id, address, native_port, dc, rack, t) = row.map_err(|e| rows_error(e.into()))?;
                let (Some(host_id), Some(ip)) = (host_id, address) else { continue };
                let port = native_port.and_then(|p| u16::try_from(p).ok()).unwrap_or(port);
                nodes.push(NodeInfo { host_id, address: SocketAddr::new(ip, port), datacenter: dc, rack, tokens: tokens(t) });
            }
        }
        Err(ExecutionError::Db(e)) if e.kind == ErrorKind::Invalid => {
            let result = conn
                .execute(&Statement::new("SELECT host_id, rpc_address, peer, data_center, rack, tokens FROM system.peers"), &(), params)
                .await?;
            type PeerRow = (Option<Uuid>, Option<IpAddr>, Option<IpAddr>, Option<String>, Option<String>, Option<Vec<String>>);
            for row in result.rows::<PeerRow>().map_err(rows_error)? {
                let (host_id, rpc, peer, dc, rack, t) = row.map_err(|e| rows_error(e.into()))?;
                let Some(host_id) = host_id else { continue };
                // An unspecified rpc_address means "the same as the peer address".
                let Some(ip) = rpc.filter(|ip| !ip.is_unspecified()).or(peer) else { continue };
                nodes.push(NodeInfo { host_id, address: SocketAddr::new(ip, port), datacenter: dc, rack, tokens: tokens(t) });
            }
        }
        Err(e) => return Err(e),
    }
    Ok(nodes)
}

/// Reads the replication strategy of every keyspace.
pub async fn fetch_keyspaces(conn: &Connection) -> Result<HashMap<String, ReplicationStrategy>, ExecutionError> {
    let result = conn
        .execute(&Statement::new("SELECT keyspace_name, replication FROM system_schema.keyspaces"), &(), Params::new(Consistency::One))
        .await?;
    let mut out = HashMap::new();
    for row in result.rows::<(String, HashMap<String, String>)>().map_err(rows_error)? {
        let (name, replication) = row.map_err(|e| rows_error(e.into()))?;
        let strategy = ReplicationStrategy::from_options(replication.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        out.insert(name, strategy);
    }
    Ok(out)
}

fn rows_error(_: crate::error::RowsAccessError) -> ExecutionError {
    ExecutionError::UnexpectedResponse("system table rows of an unexpected shape")
}
