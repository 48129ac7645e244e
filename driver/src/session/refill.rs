//! Keeping every pool filled: new connections installed and watched, a lost
//! one reported (the node down when it was the last) and replaced in the
//! background with backoff, an UP event cutting the backoff short.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::keyspace::use_keyspace_on;
use super::{Session, SessionInner};
use crate::connection::Connection;
use crate::events::SessionEvent;
use crate::pool::slots::Wanted;
use crate::pool::NodePool;

impl Session {
    /// Puts a new connection into `node`'s slots and watches it; closes
    /// what does not fit or was replaced.
    pub(super) fn install(&self, node: &Arc<NodePool>, conn: Connection) {
        let installed = node.slots.install(conn.clone());
        for c in installed.dropped {
            c.close();
        }
        if let Some(c) = installed.surplus {
            c.close();
            return;
        }
        if node.is_retired() {
            node.retire();
            return;
        }
        self.watch(node, conn);
        self.inner.metrics.connection_opened();
        self.inner.emit(SessionEvent::ConnectionOpened(node.addr));
        if node.set_up(true) {
            self.inner.emit(SessionEvent::NodeUp(node.addr));
        }
    }

    /// Waits in the background for `conn` to close, then reports the node
    /// down if it was its last connection and refills.
    fn watch(&self, node: &Arc<NodePool>, conn: Connection) {
        let weak = Arc::downgrade(&self.inner);
        let pool = Arc::downgrade(node);
        let mut shutdown = self.inner.shutdown.subscribe();
        self.inner.runtime.spawn(async move {
            tokio::select! {
                _ = conn.closed() => {}
                _ = shutdown.changed() => return,
            }
            drop(conn);
            let (Some(inner), Some(node)) = (weak.upgrade(), pool.upgrade()) else { return };
            inner.metrics.connection_closed();
            Session { inner }.connection_lost(&node);
        });
    }

    fn connection_lost(&self, node: &Arc<NodePool>) {
        if node.is_retired() {
            return;
        }
        if !node.slots.has_open() && node.set_up(false) {
            self.inner.emit(SessionEvent::NodeDown(node.addr));
        }
        self.refill(node);
    }

    /// Opens missing connections to `node` in the background, with backoff,
    /// unless a refill of the node is already running.
    pub(super) fn refill(&self, node: &Arc<NodePool>) {
        if node.is_retired() || !node.slots.claim_refill() {
            return;
        }
        self.inner.runtime.spawn(refill(Arc::downgrade(&self.inner), node.clone()));
    }

    /// A node the plan found without a connection: down, and refilled.
    pub(super) fn node_unavailable(&self, node: &Arc<NodePool>) {
        if node.set_up(false) {
            self.inner.emit(SessionEvent::NodeDown(node.addr));
        }
        self.refill(node);
    }

    /// A request on `conn` failed: refill if the connection closed.
    pub(super) fn note_failure(&self, node: &Arc<NodePool>, conn: &Connection) {
        if conn.is_closed() {
            self.refill(node);
        }
    }
}

/// Opens the connections `node` misses, one at a time, with exponential
/// backoff after failures (cut short by an UP event for the node), until
/// none is missing, the node is retired or the session is gone.
async fn refill(weak: Weak<SessionInner>, node: Arc<NodePool>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if node.is_retired() {
            node.slots.abandon_refill();
            return;
        }
        let Some(inner) = weak.upgrade() else { return };
        let wanted = match node.slots.missing() {
            Some(w) => w,
            None if node.slots.release_refill() => return,
            // A connection went missing while the job was being let go.
            None => continue,
        };
        let config = &inner.config.connection;
        let attempt = match &wanted {
            Wanted::Shard { shard, sample } => match sample.sharding() {
                Some(sharding) if node.shard_port_usable() => {
                    let opened = Connection::open_to_shard(node.addr, *shard, sharding, config).await;
                    if opened.as_ref().is_ok_and(|c| c.shard() != *shard) {
                        tracing::info!(addr = %node.addr, "the shard-aware port gave another shard; using the regular port for a while");
                        node.shard_port_misplaced();
                    }
                    opened
                }
                _ => Connection::open(node.addr, config).await,
            },
            Wanted::Any => Connection::open(node.addr, config).await,
        };
        let attempt = match attempt {
            Ok(conn) => {
                let keyspace = inner.keyspace.read().unwrap_or_else(|e| e.into_inner()).clone();
                match keyspace {
                    Some(ks) => match use_keyspace_on(&conn, &ks).await {
                        Ok(()) => Ok(conn),
                        Err(e) => {
                            conn.close();
                            Err(e.to_string())
                        }
                    },
                    None => Ok(conn),
                }
            }
            Err(e) => Err(inner.metrics.connect_failed(&e).to_string()),
        };
        match attempt {
            Ok(conn) => {
                Session { inner }.install(&node, conn);
                backoff = Duration::from_millis(100);
            }
            Err(error) => {
                tracing::debug!(addr = %node.addr, %error, ?backoff, "reconnect failed");
                inner.emit(SessionEvent::ConnectionFailed { node: node.addr, error });
                let mut shutdown = inner.shutdown.subscribe();
                drop(inner);
                let woken = tokio::select! {
                    _ = tokio::time::sleep(backoff) => false,
                    _ = node.wake.notified() => true,
                    _ = shutdown.changed() => return,
                };
                backoff = if woken { Duration::from_millis(100) } else { (backoff * 2).min(Duration::from_secs(10)) };
            }
        }
    }
}
