//! ScyllaDB's client routes (2026.1; docs/protocol.md §1.9): the rows of
//! `system.client_routes` (kept in the front's keyspace, where the
//! statement rewriter sends that table) and the `CLIENT_ROUTES_CHANGE`
//! event announcing each change to the connections registered for it.
//!
//! ScyllaDB takes routes through its REST API and commits them through
//! group 0 before it announces them; the front takes them through
//! [`FrontHandle::set_client_routes`](crate::FrontHandle::set_client_routes),
//! written before they are announced, in the same order.

use std::sync::Mutex;

use shardwise_protocol::frame::ProtocolVersion;
use shardwise_protocol::response::{Event, Response, ResponseMessage};
use uuid::Uuid;

use super::Shared;
use crate::admin::lit;
use crate::delay_line::Outbox;
use crate::error::EmuError;

/// The event name a client registers for.
pub(crate) const CLIENT_ROUTES_CHANGE: &str = "CLIENT_ROUTES_CHANGE";

/// The connections registered for [`CLIENT_ROUTES_CHANGE`].
#[derive(Default)]
pub(crate) struct RouteListeners(Mutex<Vec<Outbox>>);

/// One route: where clients of `connection_id` reach the node `host_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRoute {
    /// The endpoint's id (what a client is configured with).
    pub connection_id: String,
    /// The node's host id.
    pub host_id: Uuid,
    /// The address (an IP or a DNS name) clients connect to.
    pub address: String,
    /// The CQL port there.
    pub port: u16,
    /// The CQL port with TLS there, if any.
    pub tls_port: Option<u16>,
}

impl Shared {
    /// Announces CLIENT_ROUTES_CHANGE to the connection of `to` from now on.
    pub(crate) fn listen_for_routes(&self, to: Outbox) {
        if let Ok(mut l) = self.route_listeners.0.lock() {
            l.retain(|o| !o.is_closed());
            l.push(to);
        }
    }

    /// Writes `routes` (each replacing the route of its connection and
    /// host), then announces them.
    pub(crate) async fn set_client_routes(&self, routes: &[ClientRoute]) -> Result<(), EmuError> {
        for r in routes {
            let tls = r.tls_port.map_or("null".to_owned(), |p| p.to_string());
            let cql = format!(
                "INSERT INTO {}.client_routes (connection_id, host_id, address, port, tls_port) VALUES ({}, {}, {}, {}, {tls})",
                self.emu(),
                lit(&r.connection_id),
                r.host_id,
                lit(&r.address),
                r.port
            );
            self.admin.query(&cql).await?;
        }
        self.announce_routes(routes.iter().map(|r| (r.connection_id.clone(), r.host_id)).collect());
        Ok(())
    }

    /// Deletes the route of `connection_id` to `host_id`, then announces it.
    pub(crate) async fn remove_client_route(&self, connection_id: &str, host_id: Uuid) -> Result<(), EmuError> {
        let cql = format!(
            "DELETE FROM {}.client_routes WHERE connection_id = {} AND host_id = {host_id}",
            self.emu(),
            lit(connection_id)
        );
        self.admin.query(&cql).await?;
        self.announce_routes(vec![(connection_id.to_owned(), host_id)]);
        Ok(())
    }

    /// `UPDATE_NODES` with the (connection id, host id) pairs changed, to
    /// every connection registered.
    fn announce_routes(&self, changed: Vec<(String, Uuid)>) {
        let (connection_ids, host_ids) = changed.into_iter().map(|(c, h)| (c, h.hyphenated().to_string())).unzip();
        let event = Event::ClientRoutesChange { change: "UPDATE_NODES".into(), connection_ids, host_ids };
        let mut frame = Vec::new();
        if Response::new(ResponseMessage::Event(event)).encode(ProtocolVersion::V4, -1, &mut frame).is_err() {
            return;
        }
        let frame = bytes::Bytes::from(frame);
        if let Ok(mut l) = self.route_listeners.0.lock() {
            l.retain(|o| o.send(frame.clone()).is_ok());
        }
    }
}
