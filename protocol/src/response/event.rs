//! EVENT responses (stream −1) and the schema change description shared
//! with RESULT kind Schema_change.

use std::net::SocketAddr;

use bytes::BufMut;

use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};

/// What happened to a schema element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum SchemaChangeType {
    Created,
    Updated,
    Dropped,
}

/// Which schema element changed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum SchemaChangeTarget {
    Keyspace { keyspace: String },
    Table { keyspace: String, name: String },
    Type { keyspace: String, name: String },
    Function { keyspace: String, name: String, arg_types: Vec<String> },
    Aggregate { keyspace: String, name: String, arg_types: Vec<String> },
}

/// A schema change (event body or RESULT Schema_change).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SchemaChange {
    /// Created, updated or dropped.
    pub change: SchemaChangeType,
    /// The element.
    pub target: SchemaChangeTarget,
}

impl SchemaChange {
    /// Decodes `<change><target><options>`.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let change = match r.string("schema change type")? {
            "CREATED" => SchemaChangeType::Created,
            "UPDATED" => SchemaChangeType::Updated,
            "DROPPED" => SchemaChangeType::Dropped,
            _ => return Err(DecodeError::Invalid { what: "schema change type", reason: "unknown" }),
        };
        let target = r.string("schema change target")?;
        let keyspace = r.string("keyspace")?.to_owned();
        let target = match target {
            "KEYSPACE" => SchemaChangeTarget::Keyspace { keyspace },
            "TABLE" => SchemaChangeTarget::Table { keyspace, name: r.string("table")?.to_owned() },
            "TYPE" => SchemaChangeTarget::Type { keyspace, name: r.string("type")?.to_owned() },
            "FUNCTION" | "AGGREGATE" => {
                let name = r.string("function")?.to_owned();
                let arg_types = r.string_list("arg types")?.into_iter().map(str::to_owned).collect();
                if target == "FUNCTION" {
                    SchemaChangeTarget::Function { keyspace, name, arg_types }
                } else {
                    SchemaChangeTarget::Aggregate { keyspace, name, arg_types }
                }
            }
            _ => return Err(DecodeError::Invalid { what: "schema change target", reason: "unknown" }),
        };
        Ok(SchemaChange { change, target })
    }

    /// Writes the body.
    pub fn encode(&self, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        let change = match self.change {
            SchemaChangeType::Created => "CREATED",
            SchemaChangeType::Updated => "UPDATED",
            SchemaChangeType::Dropped => "DROPPED",
        };
        codec::write_string(buf, "change", change)?;
        match &self.target {
            SchemaChangeTarget::Keyspace { keyspace } => {
                codec::write_string(buf, "target", "KEYSPACE")?;
                codec::write_string(buf, "keyspace", keyspace)?;
            }
            SchemaChangeTarget::Table { keyspace, name } | SchemaChangeTarget::Type { keyspace, name } => {
                let t = if matches!(self.target, SchemaChangeTarget::Table { .. }) { "TABLE" } else { "TYPE" };
                codec::write_string(buf, "target", t)?;
                codec::write_string(buf, "keyspace", keyspace)?;
                codec::write_string(buf, "name", name)?;
            }
            SchemaChangeTarget::Function { keyspace, name, arg_types }
            | SchemaChangeTarget::Aggregate { keyspace, name, arg_types } => {
                let t =
                    if matches!(self.target, SchemaChangeTarget::Function { .. }) { "FUNCTION" } else { "AGGREGATE" };
                codec::write_string(buf, "target", t)?;
                codec::write_string(buf, "keyspace", keyspace)?;
                codec::write_string(buf, "name", name)?;
                codec::write_string_list(buf, "arg types", arg_types)?;
            }
        }
        Ok(())
    }
}

/// A server event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// A node joined, left or moved. Events are hints: re-read the peers.
    TopologyChange {
        /// `NEW_NODE`, `REMOVED_NODE` or `MOVED_NODE`.
        change: String,
        /// The node's address as the server reports it.
        node: SocketAddr,
    },
    /// A node went up or down.
    StatusChange {
        /// `UP` or `DOWN`.
        change: String,
        /// The node's address as the server reports it.
        node: SocketAddr,
    },
    /// The schema changed.
    SchemaChange(SchemaChange),
    /// ScyllaDB's client routes changed (`CLIENT_ROUTES_CHANGE`,
    /// docs/protocol.md §1.9): the routes of `connection_ids[i]` to
    /// `host_ids[i]` are to be read again from `system.client_routes`.
    /// Lists of different lengths, or empty ones, mean every route.
    ClientRoutesChange {
        /// `UPDATE_NODES` (the only kind ScyllaDB sends).
        change: String,
        /// The connection ids whose routes changed.
        connection_ids: Vec<String>,
        /// The host ids (UUIDs as text), paired with `connection_ids` by
        /// position.
        host_ids: Vec<String>,
    },
}

impl Event {
    /// Decodes the body.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.string("event type")? {
            "TOPOLOGY_CHANGE" => {
                Ok(Event::TopologyChange { change: r.string("topology change")?.to_owned(), node: r.inet("node")? })
            }
            "STATUS_CHANGE" => {
                Ok(Event::StatusChange { change: r.string("status change")?.to_owned(), node: r.inet("node")? })
            }
            "SCHEMA_CHANGE" => Ok(Event::SchemaChange(SchemaChange::decode(r)?)),
            "CLIENT_ROUTES_CHANGE" => {
                let change = r.string("client routes change")?.to_owned();
                let owned = |list: Vec<&str>| list.into_iter().map(str::to_owned).collect();
                let connection_ids = owned(r.string_list("connection ids")?);
                let host_ids = owned(r.string_list("host ids")?);
                Ok(Event::ClientRoutesChange { change, connection_ids, host_ids })
            }
            _ => Err(DecodeError::Invalid { what: "event type", reason: "unknown" }),
        }
    }

    /// Writes the body.
    pub fn encode(&self, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        match self {
            Event::TopologyChange { change, node } | Event::StatusChange { change, node } => {
                let t = if matches!(self, Event::TopologyChange { .. }) { "TOPOLOGY_CHANGE" } else { "STATUS_CHANGE" };
                codec::write_string(buf, "event type", t)?;
                codec::write_string(buf, "change", change)?;
                codec::put_inet(buf, node);
            }
            Event::SchemaChange(c) => {
                codec::write_string(buf, "event type", "SCHEMA_CHANGE")?;
                c.encode(buf)?;
            }
            Event::ClientRoutesChange { change, connection_ids, host_ids } => {
                codec::write_string(buf, "event type", "CLIENT_ROUTES_CHANGE")?;
                codec::write_string(buf, "change", change)?;
                codec::write_string_list(buf, "connection ids", connection_ids)?;
                codec::write_string_list(buf, "host ids", host_ids)?;
            }
        }
        Ok(())
    }
}
