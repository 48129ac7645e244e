//! What both derives' tests share.

use shardwise_protocol::types::{ColumnSpec, ColumnType};

/// A column (or bind marker) `name` of type `typ` in `ks.t`.
pub fn spec(name: &str, typ: ColumnType) -> ColumnSpec {
    ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ }
}
