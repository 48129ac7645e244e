//! CQL types and values: the type descriptions of result metadata
//! ([`ColumnType`]), serialization of Rust values into bind values
//! ([`ser`], and [`ser::DynValues`] for value lists typed at run time), zero-copy deserialization of values and rows ([`de`]), and an
//! owned dynamic value ([`CqlValue`]) for convenience; [`derived`] holds
//! what the derives of `shardwise-macros` call (structs as user-defined
//! types, bind markers by name).
//!
//! With the features `chrono`, `time`, `num-bigint`, `bigdecimal`,
//! `secrecy` and `serde` (off by default), chrono's and time's dates, times
//! and timestamps, `BigInt` and `BigDecimal` are values too, secrecy's
//! `Secret<T>` is a bind value, and the value types are serde-serializable:
//! see the [crate documentation](crate#optional-features).

#[cfg(feature = "bigdecimal")]
mod bigdecimal_types;
#[cfg(feature = "num-bigint")]
mod bignum;
#[cfg(feature = "chrono")]
mod chrono_types;
mod collections;
mod column_type;
pub mod de;
pub mod derived;
mod dyn_values;
#[cfg(any(feature = "chrono", feature = "time", feature = "num-bigint"))]
mod ext;
#[cfg(feature = "secrecy")]
mod secrecy_types;
pub mod ser;
#[cfg(feature = "serde")]
mod serde_impls;
#[cfg(feature = "time")]
mod time_types;
mod value;

pub use column_type::{ColumnType, DURATION_CLASS};
#[cfg(any(feature = "chrono", feature = "time", feature = "bigdecimal"))]
pub use ext::OutOfRange;
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
