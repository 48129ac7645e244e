//! # shardwise-protocol
//!
//! A sans-IO implementation of the CQL native protocol, versions 4 and 5:
//! bytes in, messages out, and messages in, bytes out. There are no sockets,
//! no async runtime and no clock in this crate, so every part of it is
//! testable with byte slices alone; the `shardwise` driver puts I/O around it.
//!
//! Module map:
//!
//! - [`frame`]: the envelope header, v5 segments (CRCs, LZ4), v4 body compression and the
//!   streaming frame decoder, and the framer that seals outbound runs of envelopes.
//! - [`handshake`]: the connection handshake as a socket-free state machine.
//! - [`request`]: one module per request opcode, each encoded exact-size into the caller's buffer.
//! - [`response`]: responses (results, errors, events, supported, authentication) with their
//!   tracing id, warnings and custom payload.
//! - [`codec`]: the primitive notations of the spec over a bounds-checked reader.
//! - [`consistency`]: consistency levels.
//! - [`types`]: CQL types, value serialization and zero-copy deserialization.
//! - [`rows`]: result metadata and zero-copy row sets over one response buffer.
//! - [`token`], [`sharding`]: partition-key tokens (Murmur3, CDC) and Scylla shard routing.
//! - [`name_hash`]: a fast hasher for maps keyed by keyspace, table and column names.
//! - [`tablets`]: Scylla's tablets routing payload (a tablet's token range and replicas).
//! - [`error`]: the typed decode and encode errors.
//! - `fuzzing` (hidden, the `fuzzing` feature): the harnesses the fuzz targets and the unit tests share.
//!
//! Every decoder returns a typed [`DecodeError`] on malformed input; nothing
//! here panics on bytes from the network.
//!
//! ## Optional features
//!
//! Conversions for other crates' types, all off by default (the `shardwise`
//! driver has features of the same names):
//!
//! | Feature | Rust | CQL |
//! |---|---|---|
//! | `chrono` | `chrono::NaiveDate`, `NaiveTime`, `DateTime<Utc>` | `date`, `time` (ns), `timestamp` (ms) |
//! | `time` | `time::Date`, `Time`, `OffsetDateTime` (read in UTC), `PrimitiveDateTime` (as UTC) | `date`, `time`, `timestamp`, `timestamp` |
//! | `num-bigint` | `num_bigint::BigInt` | `varint` |
//! | `bigdecimal` | `bigdecimal::BigDecimal` (enables `num-bigint`) | `decimal` |
//! | `secrecy` | `secrecy::Secret<T>` (secrecy 0.8), written as the `T` it wraps (no `DeserializeValue`) | the `T`'s |
//! | `serde` | serde's `Serialize`/`Deserialize` for [`types::CqlDate`], `CqlTime`, `CqlTimestamp`, `CqlDuration`, `CqlVarint`, `CqlDecimal` and [`types::CqlValue`] | |
//!
//! Each Rust type implements [`types::ser::SerializeValue`] and
//! [`types::de::DeserializeValue`] for exactly the CQL types listed (and can
//! be a `vector` element), and converts to and from this crate's value type
//! ([`types::CqlDate`], [`types::CqlTime`], [`types::CqlTimestamp`],
//! [`types::CqlVarint`], [`types::CqlDecimal`]) with `From`/`TryFrom`. A
//! value out of the other type's range is an error, never a wrapped or
//! clamped value: `EncodeError::InvalidValue` when writing (a chrono leap
//! second, a decimal scale beyond 32 bits), `DeserializeError::Overflow`
//! when reading (a `date` beyond chrono's ±262 000 years), and
//! `types::OutOfRange` from `TryFrom`. Timestamps are milliseconds: finer
//! precision is truncated toward the past when written.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod codec;
pub mod consistency;
pub mod error;
pub mod frame;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod handshake;
pub mod name_hash;
pub mod request;
pub mod response;
pub mod rows;
pub mod sharding;
pub mod tablets;
pub mod token;
pub mod types;

pub use error::{DecodeError, EncodeError, FieldMismatch};

// Used by the code `shardwise-macros` generates.
#[doc(hidden)]
pub use bytes;
