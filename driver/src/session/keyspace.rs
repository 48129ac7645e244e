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
    /// Sets the keyspace of every connection (`USE keyspace`), as the
    /// official driver's method of this name: with `case_sensitive` the
    /// name is taken as written (quoted), else in lower case, as CQL takes
    /// an unquoted name, which must then be 1 to 48 letters, digits and
    /// underscores ([`ExecutionError::BadKeyspaceName`] otherwise).
    pub async fn use_keyspace(&self, keyspace: impl Into<String>, case_sensitive: bool) -> Result<(), ExecutionError> {
        let keyspace = keyspace_name(keyspace.into(), case_sensitive)?;
        for conn in self.connections() {
            use_keyspace_on(&conn, &keyspace).await?;
        }
        *self.inner.keyspace.write().unwrap_or_else(|e| e.into_inner()) = Some(keyspace);
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

/// The keyspace `name` stands for: as written when `case_sensitive`, else
/// what CQL makes of it unquoted (lower case, and only a valid identifier).
fn keyspace_name(name: String, case_sensitive: bool) -> Result<String, ExecutionError> {
    let bad = |reason| Err(ExecutionError::BadKeyspaceName { name: name.clone(), reason });
    if name.is_empty() {
        return bad("empty");
    }
    if case_sensitive {
        return Ok(name);
    }
    if name.len() > 48 {
        return bad("longer than 48 characters");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return bad("not only letters, digits and underscores (quote it: case_sensitive)");
    }
    Ok(name.to_ascii_lowercase())
}

/// A CQL identifier quoted (`"name"`, inner quotes doubled).
pub(super) fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `USE keyspace` on one connection.
pub(super) async fn use_keyspace_on(conn: &Connection, keyspace: &str) -> Result<(), ExecutionError> {
    let cql = format!("USE {}", quoted(keyspace));
    let q = Query { query: &cql, params: QueryParameters::new(Consistency::One, ()) };
    match Response::from_envelope(conn.send(&q, 0).await?)?.message {
        ResponseMessage::Result(ResultMessage::SetKeyspace(_)) => Ok(()),
        ResponseMessage::Error(e) => Err(e.into()),
        _ => Err(ExecutionError::UnexpectedResponse("USE not answered with Set_keyspace")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unquoted_names_are_lowered_and_checked_and_quoted_ones_kept() {
        assert_eq!(keyspace_name("MyKs_1".into(), false).ok(), Some("myks_1".into()));
        assert_eq!(keyspace_name("MyKs".into(), true).ok(), Some("MyKs".into()));
        assert_eq!(keyspace_name("my ks".into(), true).ok(), Some("my ks".into()));
        for bad in ["", "my ks", "ks\"", &"k".repeat(49)] {
            let e = keyspace_name(bad.into(), false).expect_err(bad);
            assert!(matches!(&e, ExecutionError::BadKeyspaceName { name, .. } if name == bad), "{e}");
        }
        assert!(keyspace_name(String::new(), true).is_err());
    }
}
