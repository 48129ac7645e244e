//! CQL values for the CDC log: types from their schema text, literals to
//! serialized bytes, serialized collections taken apart and built, and
//! Cassandra's comparator on serialized values.
//!
//! Log rows carry values in the native protocol's serialized form, the form
//! bound values arrive in, so literals of a base write are serialized the
//! same way (scalars through the protocol crate's [`CqlValue`] serializer).
//! Sets and maps are written sorted by their key type's comparator and
//! without duplicates, as Cassandra stores them, so that a log value built
//! from a literal equals one built from a bound value ([`normalize`]); the
//! same comparator ([`compare`]) orders clustering keys.
//!
//! One submodule per concern, all re-exported here: `types` (schema text
//! to types), `literals` (literals and terms to values), `text` (text
//! forms of varints, decimals, dates, times, durations), `collections`
//! (serialized collections and UDTs), `comparator` and `timeuuids`.

use std::cmp::Ordering;
use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use shardwise_protocol::codec::{self, Reader};
use shardwise_protocol::types::ser::SerializeValue;
use shardwise_protocol::types::{
    ColumnType, CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlValue, CqlVarint,
};
use uuid::Uuid;

use super::dml::{BindMarker, Literal, Term};

mod collections;
mod comparator;
mod literals;
mod text;
mod timeuuids;
mod types;

pub use collections::*;
pub use comparator::*;
pub use literals::*;
pub(crate) use text::*;
pub use timeuuids::*;
pub use types::*;

/// What can go wrong with types and values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// A type's text could not be parsed or its user type resolved.
    #[error("invalid type `{text}`: {reason}")]
    Type {
        /// The type text.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// A literal does not make a value of the type.
    #[error("invalid {typ} value: {reason}")]
    Literal {
        /// The type, as CQL writes it.
        typ: String,
        /// What is wrong.
        reason: String,
    },
    /// Valid CQL that is not evaluated here (most functions, bind markers
    /// inside literals given to [`literal_bytes`]).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Serialized bytes are not a valid value.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// What was being read.
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn invalid(typ: &ColumnType, reason: impl Into<String>) -> ValueError {
    ValueError::Literal { typ: typ.to_string(), reason: reason.into() }
}

fn malformed(what: &'static str) -> impl Fn(shardwise_protocol::DecodeError) -> ValueError {
    move |e| ValueError::Malformed { what, reason: e.to_string() }
}

/// What the tests of the submodules share.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod testing {
    pub(super) use std::collections::HashMap;

    pub(super) use bytes::Bytes;
    pub(super) use shardwise_protocol::types::de::{DeserializeValue, FrameSlice};
    pub(super) use shardwise_protocol::types::CqlVector;

    pub(super) use super::super::dml::{parse, Statement};
    use super::*;
    pub(super) use shardwise_protocol::types::ColumnType as T;

    pub(super) fn udts() -> HashMap<(&'static str, &'static str), Vec<(String, String)>> {
        let f = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        HashMap::from([
            (("ks", "ut"), f(&[("a", "int"), ("b", "text")])),
            (("ks", "MyType"), f(&[("x", "frozen<ut>"), ("Y", "list<int>")])),
            (("other", "loop"), f(&[("me", "loop")])),
        ])
    }

    pub(super) fn ty(text: &str) -> ParsedType {
        let u = udts();
        parse_type(text, "ks", &|k, n| u.get(&(k, n)).cloned()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    pub(super) fn ut() -> ColumnType {
        ty("ut").typ
    }

    /// The literal of `INSERT INTO t (c) VALUES (<text>)`.
    pub(super) fn lit(text: &str) -> Literal {
        match parse(&format!("INSERT INTO t (c) VALUES ({text})")) {
            Ok(Statement::Insert(mut i)) => match i.values.remove(0) {
                Term::Literal(l) => l,
                other => panic!("{other:?}"),
            },
            other => panic!("{text}: {other:?}"),
        }
    }

    pub(super) fn bytes(text: &str, typ: &ColumnType) -> Vec<u8> {
        literal_bytes(&lit(text), typ).unwrap_or_else(|e| panic!("{text} as {typ}: {e}")).unwrap()
    }

    pub(super) fn decode(typ: &ColumnType, b: &[u8]) -> CqlValue {
        let frame = Bytes::copy_from_slice(b);
        CqlValue::deserialize(typ, Some(FrameSlice::whole(&frame))).unwrap_or_else(|e| panic!("{typ}: {e}"))
    }

    /// The literal serialized for `typ`, decoded by the protocol crate.
    pub(super) fn value(text: &str, typ: &ColumnType) -> CqlValue {
        decode(typ, &bytes(text, typ))
    }

    pub(super) fn fails(text: &str, typ: &ColumnType) -> ValueError {
        literal_bytes(&lit(text), typ).expect_err(text)
    }

    pub(super) fn ser(v: &CqlValue) -> Vec<u8> {
        cql_bytes(v, &T::Blob).unwrap_or_else(|_| {
            let mut out = Vec::new();
            v.encode(&mut out);
            out.split_off(4)
        })
    }
}
