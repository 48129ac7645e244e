//! Client routes (ScyllaDB 2026.1; docs/protocol.md §1.9): where a client
//! behind PrivateLink-style endpoints must connect to reach each node.
//!
//! The cluster keeps the routes in `system.client_routes`, one row per
//! (connection id, host id), and announces each change with the
//! `CLIENT_ROUTES_CHANGE` event. A session configured with
//! [`ClientRoutesConfig`] reads the rows of its connection ids before it
//! discovers the topology and whenever it reads the topology again (every
//! refresh, a control connection that moved, an event naming one of its
//! ids), and connects to every node, the one it read the topology through
//! included, at its route. A node without a route is left out, as an
//! address translator leaves out a peer it has no address for.
//!
//! [`ClientRoutes`] is the address translator of such a session: by host
//! id, so that several nodes may share one endpoint's IP.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;

use shardwise_protocol::consistency::Consistency;
use uuid::Uuid;

use super::translation::{AddressTranslator, TranslationError, UntranslatedPeer};
use crate::connection::Connection;
use crate::error::ExecutionError;
use crate::params::Params;
use crate::statement::Statement;

/// Which routes of `system.client_routes` a session follows: those of its
/// connection ids (one per endpoint the client can reach, the ids the
/// cluster's operator gave them). With several ids, a node keeps the route
/// it was reached by while that one lasts; a new node takes the route of
/// the first id listed that has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRoutesConfig {
    /// The connection ids, in order of preference.
    pub connection_ids: Vec<String>,
}

impl ClientRoutesConfig {
    /// Follows the routes of `connection_ids`.
    pub fn new(connection_ids: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ClientRoutesConfig { connection_ids: connection_ids.into_iter().map(Into::into).collect() }
    }
}

/// A row of `SELECT connection_id, host_id, address, port, tls_port FROM system.client_routes`.
type RouteRow = (Option<String>, Option<Uuid>, Option<String>, Option<i32>, Option<i32>);

/// One node's route.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    connection_id: String,
    addr: SocketAddr,
}

#[derive(Debug, Default)]
struct Routes {
    by_host: HashMap<Uuid, Route>,
    /// The IPs the peers tables give, to find the node of a status event
    /// (which names a node by that IP).
    hosts: HashMap<IpAddr, Uuid>,
}

/// The routes a session follows, as last read; the session's address
/// translator.
#[derive(Debug)]
pub struct ClientRoutes {
    config: ClientRoutesConfig,
    tls: bool,
    routes: Mutex<Routes>,
}

impl ClientRoutes {
    /// Routes for `config`, none read yet; `tls`: connect to the routes'
    /// TLS ports.
    pub(crate) fn new(config: ClientRoutesConfig, tls: bool) -> Self {
        ClientRoutes { config, tls, routes: Mutex::new(Routes::default()) }
    }

    /// The connection ids followed.
    pub(crate) fn connection_ids(&self) -> &[String] {
        &self.config.connection_ids
    }

    /// Whether a `CLIENT_ROUTES_CHANGE` naming `connection_ids` (paired
    /// with `host_ids`) may change a route followed: one of its ids is
    /// ours, or its lists (empty, or of different lengths) name no pair.
    pub(crate) fn concerns(&self, connection_ids: &[String], host_ids: &[String]) -> bool {
        connection_ids.is_empty()
            || connection_ids.len() != host_ids.len()
            || connection_ids.iter().any(|id| self.config.connection_ids.contains(id))
    }

    /// The route of `host`, when there is one.
    pub fn route_of(&self, host: Uuid) -> Option<SocketAddr> {
        self.lock().by_host.get(&host).map(|r| r.addr)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the routes again through `conn`; returns how many nodes have
    /// one. Rows without a host, an address or the port this session uses
    /// are skipped (logged); when rows were read and none is usable, the
    /// routes known are kept and the read is an error.
    pub(crate) async fn reload(&self, conn: &Connection) -> Result<usize, ExecutionError> {
        let ids: Vec<String> =
            self.config.connection_ids.iter().map(|id| format!("'{}'", id.replace('\'', "''"))).collect();
        let text = format!(
            "SELECT connection_id, host_id, address, port, tls_port FROM system.client_routes WHERE connection_id IN ({})",
            ids.join(", ")
        );
        let result = conn.execute(&Statement::new(text), &(), Params::new(Consistency::One)).await?;
        let mut rows = Vec::new();
        for row in result
            .rows::<RouteRow>()
            .map_err(|_| ExecutionError::UnexpectedResponse("system.client_routes rows of an unexpected shape"))?
        {
            let row =
                row.map_err(|_| ExecutionError::UnexpectedResponse("a system.client_routes row does not decode"))?;
            rows.push(row);
        }
        let read = rows.len();
        let mut candidates = Vec::new();
        for (connection_id, host, address, port, tls_port) in rows {
            let port = if self.tls { tls_port } else { port };
            let (Some(connection_id), Some(host), Some(address), Some(port)) =
                (connection_id, host, address, port.and_then(|p| u16::try_from(p).ok()))
            else {
                tracing::warn!(tls = self.tls, "a client route without a host, an address or a port is skipped");
                continue;
            };
            match resolve(&address, port).await {
                Some(addr) => candidates.push((host, Route { connection_id, addr })),
                None => tracing::warn!(%host, address, "a client route whose address does not resolve is skipped"),
            }
        }
        if read > 0 && candidates.is_empty() {
            return Err(ExecutionError::UnexpectedResponse("no row of system.client_routes is usable"));
        }
        let mut routes = self.lock();
        routes.by_host = choose(&self.config.connection_ids, &routes.by_host, candidates);
        Ok(routes.by_host.len())
    }
}

/// `address` (an IP, or a name resolved here) at `port`.
async fn resolve(address: &str, port: u16) -> Option<SocketAddr> {
    if let Ok(ip) = address.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, port));
    }
    super::topology::lookup((address, port), Some(super::topology::RESOLVE_TIMEOUT)).await.ok()?.into_iter().next()
}

/// One route per host out of `candidates`: the one of the connection id
/// the host has now when it is still offered, else the first of `ids`
/// that offers one.
fn choose(ids: &[String], current: &HashMap<Uuid, Route>, candidates: Vec<(Uuid, Route)>) -> HashMap<Uuid, Route> {
    let rank = |host: &Uuid, route: &Route| {
        let kept = current.get(host).is_some_and(|c| c.connection_id == route.connection_id);
        (!kept, ids.iter().position(|id| *id == route.connection_id).unwrap_or(usize::MAX))
    };
    let mut chosen: HashMap<Uuid, Route> = HashMap::new();
    for (host, route) in candidates {
        match chosen.get(&host) {
            Some(have) if rank(&host, have) <= rank(&host, &route) => {}
            _ => {
                chosen.insert(host, route);
            }
        }
    }
    chosen
}

impl AddressTranslator for ClientRoutes {
    /// A peer's route, by its host id; a status event's node (no host id)
    /// by the IP its peers row gave.
    fn translate(&self, peer: &UntranslatedPeer<'_>) -> Result<SocketAddr, TranslationError> {
        let mut routes = self.lock();
        let host = match peer.host_id {
            Some(host) => {
                routes.hosts.insert(peer.address.ip(), host);
                host
            }
            None => *routes.hosts.get(&peer.address.ip()).ok_or(TranslationError::NoRuleForAddress(peer.address))?,
        };
        routes.by_host.get(&host).map(|r| r.addr).ok_or(TranslationError::NoRuleForAddress(peer.address))
    }

    fn translate_connected(
        &self,
        host_id: Uuid,
        connected: SocketAddr,
    ) -> Option<Result<SocketAddr, TranslationError>> {
        Some(self.route_of(host_id).ok_or(TranslationError::NoRuleForAddress(connected)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(id: &str, port: u16) -> Route {
        Route { connection_id: id.into(), addr: SocketAddr::from(([127, 0, 0, 1], port)) }
    }

    #[test]
    fn a_host_keeps_its_connection_id_and_a_new_one_takes_the_first_listed() {
        let ids = ["a".to_owned(), "b".to_owned()];
        let (h1, h2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let current: HashMap<Uuid, Route> = [(h1, route("b", 1))].into();
        let offered = vec![(h1, route("a", 10)), (h1, route("b", 11)), (h2, route("b", 20)), (h2, route("a", 21))];
        let chosen = choose(&ids, &current, offered.clone());
        assert_eq!(chosen[&h1], route("b", 11), "h1 stays on b, its id now");
        assert_eq!(chosen[&h2], route("a", 21), "h2 is new: the first id listed");
        let gone = offered.into_iter().filter(|(_, r)| r.connection_id != "b").collect();
        assert_eq!(choose(&ids, &current, gone)[&h1], route("a", 10), "b withdrawn: h1 moves to a");
    }

    #[test]
    fn an_event_concerns_a_session_naming_one_of_its_ids_or_no_pair() {
        let routes = ClientRoutes::new(ClientRoutesConfig::new(["c1"]), false);
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert!(routes.concerns(&s(&["c2", "c1"]), &s(&["h", "h"])));
        assert!(!routes.concerns(&s(&["c2"]), &s(&["h"])), "another endpoint's route");
        assert!(routes.concerns(&[], &[]), "empty lists: every route");
        assert!(routes.concerns(&s(&["c2"]), &[]), "unpaired lists: every route");
    }

    #[test]
    fn peers_translate_by_host_id_and_status_events_by_the_peers_ip() {
        let routes = ClientRoutes::new(ClientRoutesConfig::new(["c1"]), false);
        let host = Uuid::from_u128(7);
        routes.lock().by_host.insert(host, route("c1", 4000));
        let native: SocketAddr = "10.0.0.7:9042".parse().expect("addr");
        let event = UntranslatedPeer { host_id: None, address: native, datacenter: None, rack: None };
        assert_eq!(routes.translate(&event), Err(TranslationError::NoRuleForAddress(native)), "not seen yet");
        let peer = UntranslatedPeer { host_id: Some(host), ..event };
        assert_eq!(routes.translate(&peer), Ok(route("c1", 4000).addr));
        assert_eq!(routes.translate(&event), Ok(route("c1", 4000).addr), "by the peers row's IP");
        let unrouted = UntranslatedPeer { host_id: Some(Uuid::from_u128(8)), ..event };
        assert!(routes.translate(&unrouted).is_err(), "a node without a route is left out");
        assert_eq!(routes.translate_connected(host, native), Some(Ok(route("c1", 4000).addr)));
    }
}
