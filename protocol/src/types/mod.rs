//! CQL types and values: the type descriptions of result metadata
//! ([`ColumnType`]), serialization of Rust values into bind values
//! ([`ser`]), zero-copy deserialization of values and rows ([`de`]), and an
//! owned dynamic value ([`CqlValue`]) for convenience; [`derived`] holds
//! what the derives of `shardwise-macros` call (structs as user-defined
//! types, bind markers by name).

mod collections;
mod column_type;
pub mod de;
pub mod derived;
pub mod ser;
mod value;

pub use column_type::{ColumnType, DURATION_CLASS};
pub use value::{
    CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlValue, CqlVarint, CqlVector, VarintOutOfRange,
};

/// One column of a result set or one bind marker of a prepared statement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColumnSpec {
    /// Keyspace of the column's table.
    pub keyspace: String,
    /// Table of the column.
    pub table: String,
    /// Column (or bind marker) name.
    pub name: String,
    /// CQL type.
    pub typ: ColumnType,
}

#[cfg(test)]
pub(crate) use column_type::tests::sample_types;
#[cfg(test)]
pub(crate) use value::tests::sample_values;
