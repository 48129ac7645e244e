//! The session's keyspace: `USE` on every connection, whether set through
//! [`Session::use_keyspace`] or by a `USE` statement, and on every new
//! connection after.

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::request::{Query, QueryParameters};
use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage};

use super::Session;
use crate::connection::Connection;
use crate::error::ExecutionError;

impl Session {
    /// Sets the keyspace of every connection (`USE keyspace`).
    pub async fn use_keyspace(&self, keyspace: &str) -> Result<(), ExecutionError> {
        for conn in self.connections() {
            use_keyspace_on(&conn, keyspace).await?;
        }
        *self.inner.keyspace.write().unwrap_or_else(|e| e.into_inner()) = Some(keyspace.to_owned());
        Ok(())
    }

    /// A `USE` on `already` changed the keyspace: the other connections follow.
    pub(super) async fn keyspace_changed(&self, keyspace: &str, already: &Connection) {
        *self.inner.keyspace.write().unwrap_or_else(|e| e.into_inner()) = Some(keyspace.to_owned());
        for conn in self.connections() {
            if conn.same_as(already) {
                continue;
            }
            if let Err(e) = use_keyspace_on(&conn, keyspace).await {
                tracing::warn!(addr = %conn.addr(), error = %e, "USE failed");
            }
        }
    }

    /// The keyspace set by `USE`, if any.
    pub fn keyspace(&self) -> Option<String> {
        self.inner.keyspace.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// `USE keyspace` on one connection.
pub(super) async fn use_keyspace_on(conn: &Connection, keyspace: &str) -> Result<(), ExecutionError> {
    let cql = format!("USE \"{}\"", keyspace.replace('"', "\"\""));
    let q = Query { query: &cql, params: QueryParameters::new(Consistency::One, ()) };
    match Response::from_envelope(conn.send(&q, 0).await?)?.message {
        ResponseMessage::Result(ResultMessage::SetKeyspace(_)) => Ok(()),
        ResponseMessage::Error(e) => Err(e.into()),
        _ => Err(ExecutionError::UnexpectedResponse("USE not answered with Set_keyspace")),
    }
}
