//! The control connection: one pooled connection registered for server
//! events (REGISTER), on an up node. It reacts to what the cluster reports
//! and keeps the session's view current:
//!
//! - SCHEMA_CHANGE: replication and partitioners are read again;
//! - STATUS_CHANGE DOWN: the node is marked down (plans skip it);
//! - STATUS_CHANGE UP: the node is marked up when a connection is open,
//!   its refill is woken, and the topology read again shortly after;
//! - CLIENT_ROUTES_CHANGE (with [client routes](crate::cluster::routes)):
//!   when it names a connection id followed, the routes and the topology
//!   are read again at once;
//! - TOPOLOGY_CHANGE: the topology is read again shortly after (events are
//!   hints; several within
//!   [`SessionConfig::topology_event_delay`](super::SessionConfig::topology_event_delay)
//!   share one refresh);
//! - every
//!   [`SessionConfig::topology_refresh_interval`](super::SessionConfig::topology_refresh_interval):
//!   topology and schema are read again.
//!
//! When its connection closes (the node died, or left the topology) it
//! moves to another node at once, preferring up nodes and leaving the node
//! it lost for last, registers again, emits
//! [`SessionEvent::ControlConnectionChanged`], and reads topology and
//! schema again, since events sent meanwhile were lost. When no node has a
//! connection for 2 s, the contact points are resolved again and the
//! topology read through one of them (every node may have moved).

use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use shardwise_protocol::request::Register;
use shardwise_protocol::response::{Event, Response, ResponseMessage};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::{Session, SessionInner};
use crate::connection::Connection;
use crate::error::ExecutionError;
use crate::events::SessionEvent;
use crate::pool::NodePool;

/// Pause before trying again when no node can take the control connection.
const RETRY: Duration = Duration::from_millis(200);

/// After this many pauses in a row with no node to take the control
/// connection (2 s), the session goes back to its contact points
/// ([`Session::rediscover`]), and again after as many more.
const REDISCOVER_AFTER: u32 = 10;

/// How a registered control connection stopped listening.
enum Ended {
    /// Its connection closed: move to another node.
    Closed,
    /// The session is gone.
    Shutdown,
}

/// Registers for the events the session reacts to; `routes`: ScyllaDB's
/// `CLIENT_ROUTES_CHANGE` too (a server without it refuses the REGISTER).
async fn register(conn: &Connection, routes: bool) -> Result<(), ExecutionError> {
    let mut events = vec!["TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"];
    if routes {
        events.push("CLIENT_ROUTES_CHANGE");
    }
    let register = Register { events };
    match Response::from_envelope(conn.send(&register, 0).await?)?.message {
        ResponseMessage::Ready => Ok(()),
        ResponseMessage::Error(e) => Err(e.into()),
        _ => Err(ExecutionError::UnexpectedResponse("REGISTER not answered with READY")),
    }
}

/// Sleeps `d`; `true` when the session ended meanwhile.
async fn pause(shutdown: &mut watch::Receiver<()>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = shutdown.changed() => true,
    }
}

/// The control connection's task; ends with the session.
pub(super) async fn run(weak: Weak<SessionInner>, mut shutdown: watch::Receiver<()>) {
    let mut lost: Option<SocketAddr> = None;
    let mut registered_before = false;
    let mut without_node = 0;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let session = Session { inner };
        let Some((addr, conn)) = session.control_candidate(lost) else {
            without_node += 1;
            if without_node >= REDISCOVER_AFTER {
                without_node = 0;
                tokio::select! {
                    _ = session.rediscover() => {}
                    _ = shutdown.changed() => return,
                }
            }
            drop(session);
            if pause(&mut shutdown, RETRY).await {
                return;
            }
            continue;
        };
        without_node = 0;
        let mut events = conn.events();
        let timeout = session.inner.config.system_query_timeout;
        let routes = session.inner.routes.is_some();
        let registered = tokio::time::timeout(timeout, register(&conn, routes))
            .await
            .unwrap_or(Err(ExecutionError::Timeout(timeout)));
        if let Err(e) = registered {
            tracing::debug!(%addr, error = %e, "REGISTER failed");
            lost = Some(addr);
            drop(session);
            if pause(&mut shutdown, RETRY).await {
                return;
            }
            continue;
        }
        *session.inner.control.lock().unwrap_or_else(|e| e.into_inner()) = Some(addr);
        tracing::debug!(%addr, "control connection registered");
        session.inner.emit(SessionEvent::ControlConnectionChanged(addr));
        if registered_before {
            // Events sent while no connection was registered are lost.
            if let Err(e) = session.refresh_topology().await {
                tracing::warn!(error = %e, "topology refresh after the control connection moved failed");
            }
            session.refresh_schema().await;
        }
        registered_before = true;
        let interval = session.inner.config.topology_refresh_interval;
        let delay = session.inner.config.topology_event_delay;
        let weak_inner = Arc::downgrade(&session.inner);
        drop(session);
        match listen(&weak_inner, &conn, &mut events, &mut shutdown, interval, delay).await {
            Ended::Shutdown => return,
            Ended::Closed => {
                tracing::debug!(%addr, "control connection closed");
                lost = Some(addr);
                if let Some(inner) = weak_inner.upgrade() {
                    *inner.control.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
            }
        }
    }
}

async fn listen(
    weak: &Weak<SessionInner>,
    conn: &Connection,
    events: &mut broadcast::Receiver<Event>,
    shutdown: &mut watch::Receiver<()>,
    interval: Option<Duration>,
    delay: Duration,
) -> Ended {
    let mut next_periodic = interval.map(|i| Instant::now() + i);
    let mut topology_due: Option<Instant> = None;
    // Events read but not yet told to subscribers: those of a burst whose
    // schema is read once, after its last queued event (a migration, or
    // other clients' DDL on a busy cluster, would otherwise queue a full
    // schema read per event and leave the session behind by as many).
    let mut held: Vec<Event> = Vec::new();
    loop {
        let deadline = [next_periodic, topology_due].into_iter().flatten().min();
        let timer = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let received = tokio::select! {
            // Queued events first: `held` is empty whenever another branch
            // is taken.
            biased;
            e = events.recv() => Some(e),
            _ = conn.closed() => return Ended::Closed,
            _ = shutdown.changed() => return Ended::Shutdown,
            _ = timer => None,
        };
        let Some(inner) = weak.upgrade() else { return Ended::Shutdown };
        let session = Session { inner };
        let now = Instant::now();
        match received {
            None => {
                let periodic = next_periodic.is_some_and(|t| t <= now);
                if periodic || topology_due.is_some_and(|t| t <= now) {
                    topology_due = None;
                    if let Err(e) = session.refresh_topology().await {
                        tracing::warn!(error = %e, "topology refresh failed");
                    }
                }
                if periodic {
                    session.refresh_schema().await;
                    next_periodic = interval.map(|i| Instant::now() + i);
                }
            }
            Some(Err(broadcast::error::RecvError::Lagged(missed))) => {
                tracing::warn!(missed, "server events were dropped; reading topology and schema again");
                topology_due = Some(now);
                session.refresh_schema().await;
                tell(&session, &mut held);
            }
            Some(Err(broadcast::error::RecvError::Closed)) => return Ended::Closed,
            Some(Ok(event)) => {
                let schema = matches!(event, Event::SchemaChange(_));
                match &event {
                    Event::SchemaChange(change) => session.forget_tablets(change),
                    Event::StatusChange { change, node } if change == "DOWN" => {
                        session.node_reported_down(session.reported_as(*node).await)
                    }
                    Event::StatusChange { change, node } if change == "UP" => {
                        session.node_reported_up(session.reported_as(*node).await);
                        topology_due.get_or_insert(now + delay);
                    }
                    Event::StatusChange { .. } | Event::TopologyChange { .. } => {
                        topology_due.get_or_insert(now + delay);
                    }
                    Event::ClientRoutesChange { connection_ids, host_ids, .. } => {
                        // Written through group 0 before it is announced:
                        // read at once (with the topology, through the
                        // routes).
                        if session.inner.routes.as_ref().is_some_and(|r| r.concerns(connection_ids, host_ids)) {
                            topology_due = Some(now);
                        }
                    }
                }
                held.push(event);
                if !schema || events.is_empty() {
                    if held.iter().any(|e| matches!(e, Event::SchemaChange(_))) {
                        session.refresh_schema().await;
                    }
                    tell(&session, &mut held);
                }
            }
        }
    }
}

/// Tells the session's subscribers the events `held`, in the order they
/// came (schema changes once the schema was read again).
fn tell(session: &Session, held: &mut Vec<Event>) {
    for event in held.drain(..) {
        session.inner.emit(SessionEvent::Database(event));
    }
}

impl Session {
    /// A connection to carry the control connection: up nodes first (local
    /// before remote), the node just lost last.
    fn control_candidate(&self, lost: Option<SocketAddr>) -> Option<(SocketAddr, Connection)> {
        let state = self.state();
        let rank = |p: &Arc<NodePool>| (Some(p.addr) == lost, !p.is_up());
        let mut order: Vec<&Arc<NodePool>> = state.nodes.iter().collect();
        // Stable: local nodes stay ahead of remote ones within a rank.
        order.sort_by_key(|p| rank(p));
        order.into_iter().find_map(|p| p.connection(0).map(|c| (p.addr, c)))
    }

    /// The cluster reported a node down: plans skip it until it is up.
    fn node_reported_down(&self, node: Reported) {
        for pool in self.state().nodes.iter().filter(|p| node.is(p.addr)) {
            if pool.set_up(false) {
                self.inner.emit(SessionEvent::NodeDown(pool.addr));
            }
        }
    }

    /// The cluster reported a node up: up at once if a connection is open;
    /// either way its refill tries now instead of after its backoff.
    fn node_reported_up(&self, node: Reported) {
        for pool in self.state().nodes.iter().filter(|p| node.is(p.addr)) {
            if pool.slots.has_open() && pool.set_up(true) {
                self.inner.emit(SessionEvent::NodeUp(pool.addr));
            }
            pool.wake.notify_one();
            self.refill(pool);
        }
    }

    /// Which of the session's nodes a status event's `node` names: with an
    /// address translator, the one at exactly its translation (awaited
    /// within the system query timeout, as a topology read's; every
    /// translated node may share one IP, a proxy's), else those of its IP
    /// (an event gives the node's native address, whose port may not be
    /// the one connected to).
    async fn reported_as(&self, node: SocketAddr) -> Reported {
        let Some(translator) = &self.inner.config.address_translator else { return Reported::Ip(node.ip()) };
        let peer = crate::cluster::UntranslatedPeer { host_id: None, address: node, datacenter: None, rack: None };
        let timeout = self.inner.config.system_query_timeout;
        match tokio::time::timeout(timeout, translator.translate_address(&peer)).await {
            Ok(Ok(at)) => Reported::At(at),
            Ok(Err(error)) => {
                tracing::debug!(%node, %error, "a status event for an address without translation");
                Reported::None
            }
            Err(_) => {
                tracing::warn!(%node, ?timeout, "translating a status event's address timed out");
                Reported::None
            }
        }
    }
}

/// The nodes a status event names (`Session::reported_as`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reported {
    /// Every node at this IP.
    Ip(std::net::IpAddr),
    /// The node at exactly this address.
    At(SocketAddr),
    /// None of the session's.
    None,
}

impl Reported {
    fn is(self, addr: SocketAddr) -> bool {
        match self {
            Reported::Ip(ip) => addr.ip() == ip,
            Reported::At(at) => addr == at,
            Reported::None => false,
        }
    }
}
