//! Opening a session: the contact points resolved, the topology discovered
//! through the first that answers, the first connections of every node
//! opened, and the background work (refills, control connection) started.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use super::control;
use super::refresh::Partitioners;
use super::snapshot::ClusterState;
use super::{Session, SessionConfig, SessionInner};
use crate::cluster::topology::{
    fetch_cluster_name, fetch_keyspaces, fetch_nodes, fetch_partitioners, lookup, TablePartitioners,
};
use crate::cluster::{ClientRoutes, NodeDistance, NodeInfo, ReplicationStrategy};
use crate::config::ConnectionConfig;
use crate::connection::Connection;
use crate::error::{ConnectionError, ExecutionError, NewSessionError};
use crate::events::SessionEvent;
use crate::metrics::Metrics;
use crate::pool::{runtime_workers, NodePool};

/// A contact point's addresses ([`lookup`]); a host without a port means
/// 9042.
async fn resolve(node: &str, timeout: Option<Duration>) -> Result<Vec<SocketAddr>, String> {
    if let Ok(addr) = node.parse::<SocketAddr>() {
        return Ok(vec![addr]);
    }
    let with_port = if node.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        node.to_owned()
    } else {
        format!("{node}:9042")
    };
    lookup(with_port, timeout).await
}

/// Every contact point's addresses, without repeats. A contact point that
/// does not resolve is skipped with a warning, as long as another does:
/// one stale name among several must not keep a service from starting.
async fn resolve_all(nodes: &[String], timeout: Option<Duration>) -> Result<Vec<SocketAddr>, NewSessionError> {
    let mut addrs = Vec::new();
    let mut failed = Vec::new();
    for node in nodes {
        match resolve(node, timeout).await {
            Ok(resolved) => {
                for a in resolved {
                    if !addrs.contains(&a) {
                        addrs.push(a);
                    }
                }
            }
            Err(why) => {
                tracing::warn!(node, %why, "contact point does not resolve; trying the others");
                failed.push(format!("{node} ({why})"));
            }
        }
    }
    if addrs.is_empty() {
        return Err(NewSessionError::Resolve(failed.join(", ")));
    }
    Ok(addrs)
}

/// The first connections of a node: one, and on an unsharded node up to
/// `per_node` (a sharded node's others are opened per shard by the refill).
async fn open_initial(
    addr: SocketAddr,
    config: ConnectionConfig,
    per_node: usize,
) -> (Vec<Connection>, Option<ConnectionError>) {
    let mut conns = Vec::new();
    for _ in 0..per_node {
        match Connection::open(addr, &config).await {
            Ok(c) => {
                let sharded = c.sharding().is_some();
                conns.push(c);
                if sharded {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(%addr, error = %e, "cannot connect");
                return (conns, Some(e));
            }
        }
    }
    (conns, None)
}

/// What the first successful contact point told of the cluster.
struct Discovered {
    name: Option<String>,
    nodes: Vec<NodeInfo>,
    keyspaces: HashMap<String, ReplicationStrategy>,
    partitioners: Option<TablePartitioners>,
}

async fn discover(
    conn: &Connection,
    translator: Option<&dyn crate::cluster::AddressTranslator>,
    routes: Option<&ClientRoutes>,
    keyspaces: &[String],
) -> Result<Discovered, ExecutionError> {
    if let Some(routes) = routes {
        routes.reload(conn).await?;
    }
    Ok(Discovered {
        name: fetch_cluster_name(conn).await,
        nodes: fetch_nodes(conn, translator).await?,
        keyspaces: fetch_keyspaces(conn, keyspaces).await?,
        partitioners: fetch_partitioners(conn, keyspaces).await?,
    })
}

impl Session {
    /// No node of the session has a connection left: the contact points
    /// are resolved again (a name may stand for other addresses now, as a
    /// Kubernetes service's after its pods moved) and the topology is read
    /// through the first that answers; its nodes' pools then fill as after
    /// any topology change. Nothing to do when the session does not
    /// discover the topology: its contact points are its nodes, whose
    /// pools keep trying the addresses resolved at start.
    pub(super) async fn rediscover(&self) {
        let config = &self.inner.config;
        if !config.discover_topology {
            return;
        }
        let addrs = match resolve_all(&config.known_nodes, config.hostname_resolution_timeout).await {
            Ok(addrs) => addrs,
            Err(e) => {
                tracing::warn!(error = %e, "no contact point resolves; the session has no node to reach");
                return;
            }
        };
        for addr in addrs {
            let conn = match Connection::open(addr, &config.connection).await {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::debug!(%addr, error = %e, "contact point unreachable");
                    continue;
                }
            };
            let _guard = self.inner.refresh_lock.lock().await;
            match self.read_topology(addr, &conn).await {
                Ok(()) => {
                    tracing::info!(%addr, "every node was unreachable: the topology read again through a contact point");
                    return;
                }
                Err(e) => tracing::warn!(%addr, error = %e, "topology read through a contact point failed"),
            }
        }
    }

    /// Connects to `config`'s known nodes ([`super::SessionBuilder::build`]).
    pub(super) async fn connect(mut config: SessionConfig) -> Result<Session, NewSessionError> {
        if config.known_nodes.is_empty() {
            return Err(NewSessionError::NoKnownNodes);
        }
        if config.connections_per_node == 0 {
            return Err(NewSessionError::Config("connections_per_node must be at least 1"));
        }
        if config.remote_connections_per_node == 0 {
            return Err(NewSessionError::Config(
                "remote_connections_per_node must be at least 1 (to keep remote nodes out, do not use them in the distance policy)",
            ));
        }
        let routes = match &config.client_routes {
            None => None,
            Some(_) if config.address_translator.is_some() => {
                return Err(NewSessionError::Config("client routes and an address translator cannot be combined"))
            }
            Some(_) if !config.discover_topology => {
                return Err(NewSessionError::Config("client routes need the topology discovered"))
            }
            Some(c) if c.connection_ids.is_empty() => {
                return Err(NewSessionError::Config("client routes need at least one connection id"))
            }
            Some(c) => {
                let routes = Arc::new(ClientRoutes::new(c.clone(), config.connection.tls.is_some()));
                config.address_translator = Some(routes.clone());
                // An endpoint forwards the route's port alone.
                config.connection.shard_aware_port = false;
                Some(routes)
            }
        };
        let addrs = resolve_all(&config.known_nodes, config.hostname_resolution_timeout).await?;
        let mut last_error = None;
        let mut discovered = None;
        let mut discovery_error = None;
        let mut reached = false;
        if config.discover_topology {
            for addr in &addrs {
                match Connection::open(*addr, &config.connection).await {
                    Ok(contact) => {
                        reached = true;
                        let translator = config.address_translator.as_deref();
                        match discover(&contact, translator, routes.as_deref(), &config.keyspaces_to_fetch).await {
                            Ok(d) if !d.nodes.is_empty() => {
                                // Every other connection starts at the version the cluster
                                // agreed on: a v4-only node (Scylla) would reject v5 on
                                // each of them, at the cost of a second connect.
                                config.connection.max_version = contact.version();
                                discovered = Some(d);
                                break;
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(%addr, error = %e, "topology discovery failed");
                                discovery_error = Some(e.to_string());
                            }
                        }
                    }
                    Err(e) => last_error = Some((*addr, e)),
                }
            }
        }
        if let (Some(routes), None) = (&routes, &discovered) {
            // The contact points are the endpoints, not nodes: without a
            // route to any node there is nothing to fall back on.
            if reached {
                let ids = routes.connection_ids().join(", ");
                let why =
                    discovery_error.unwrap_or_else(|| format!("no node has a route under the connection ids [{ids}]"));
                return Err(NewSessionError::ClientRoutes(why));
            }
        }
        let workers = runtime_workers();
        let cluster_name = discovered.as_mut().and_then(|d| d.name.take()).map(Arc::from);
        let (state, strategies, partitioners) = match discovered {
            Some(d) => {
                let strategies = Arc::new(d.keyspaces);
                (ClusterState::build(&config, workers, d.nodes, strategies.clone(), &[]), strategies, d.partitioners)
            }
            None => {
                let (sizes, affinity) = config.pool_shape(NodeDistance::Local, workers);
                let nodes: Vec<Arc<NodePool>> =
                    addrs.iter().map(|a| Arc::new(NodePool::new(*a, sizes, affinity))).collect();
                let local = nodes.len();
                (ClusterState { nodes, rack: 0, local, infos: Vec::new(), routing: None }, Arc::default(), None)
            }
        };
        let (shutdown, shutdown_rx) = watch::channel(());
        let session = Session {
            inner: Arc::new(SessionInner {
                workers,
                runtime: tokio::runtime::Handle::current(),
                keyspace: RwLock::new(None),
                state: arc_swap::ArcSwap::from_pointee(state),
                strategies: RwLock::new(strategies),
                partitioners: RwLock::new(Partitioners { tables: partitioners }),
                refresh_lock: tokio::sync::Mutex::new(()),
                control: Mutex::new(None),
                prepared: super::prepared_cache::PreparedCache::new(config.prepared_cache_capacity),
                config,
                tablets: Default::default(),
                schema: RwLock::new(None),
                schema_reads: tokio::sync::Mutex::new(()),
                metrics: Metrics::default(),
                events: broadcast::channel(256).0,
                routes,
                cluster_name,
                shutdown,
            }),
        };
        let state = session.state();
        let opening: Vec<_> = state
            .nodes
            .iter()
            .map(|node| {
                tokio::spawn(open_initial(
                    node.addr,
                    session.inner.config.connection.clone(),
                    node.slots.sizes().per_node,
                ))
            })
            .collect();
        for (node, opening) in state.nodes.iter().zip(opening) {
            let (conns, error) = opening.await.unwrap_or_else(|_| (Vec::new(), Some(ConnectionError::Closed)));
            if let Some(e) = error {
                session.inner.metrics.connect_failed(&e);
                last_error = Some((node.addr, e));
            }
            for conn in conns {
                session.install(node, conn);
            }
        }
        if state.nodes.iter().all(|n| !n.slots.has_open()) {
            let last = last_error.or_else(|| state.nodes.first().map(|n| (n.addr, ConnectionError::Closed)));
            let Some((node, source)) = last else { return Err(NewSessionError::NoKnownNodes) };
            return Err(NewSessionError::Connect { node, source });
        }
        if let Some(ks) = session.inner.config.keyspace.clone() {
            session
                .use_keyspace(ks, session.inner.config.keyspace_case_sensitive)
                .await
                .map_err(NewSessionError::UseKeyspace)?;
        }
        for node in &state.nodes {
            if !node.slots.has_open() && node.set_up(false) {
                session.inner.emit(SessionEvent::NodeDown(node.addr));
            }
            session.refill(node);
        }
        tokio::spawn(control::run(Arc::downgrade(&session.inner), shutdown_rx));
        Ok(session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One name that does not resolve among several is skipped; only when
    /// none resolves does `build` fail, naming each.
    #[tokio::test]
    async fn an_unresolvable_contact_point_among_others_is_skipped() {
        let nodes = ["no-such-host.invalid".to_owned(), "127.0.0.1:9043".to_owned(), "localhost".to_owned()];
        let addrs =
            resolve_all(&nodes, Some(crate::cluster::topology::RESOLVE_TIMEOUT)).await.expect("the others resolve");
        assert!(addrs.contains(&"127.0.0.1:9043".parse().expect("addr")), "{addrs:?}");
        assert!(addrs.iter().any(|a| a.port() == 9042), "a host without a port means 9042: {addrs:?}");
        match resolve_all(&nodes[..1], None).await {
            Err(NewSessionError::Resolve(why)) => assert!(why.starts_with("no-such-host.invalid ("), "{why}"),
            other => panic!("expected Resolve, got {other:?}"),
        }
    }
}
