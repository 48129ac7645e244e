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
//! - `fuzzing` (hidden): the harnesses the fuzz targets and the unit tests share.
//!
//! Every decoder returns a typed [`DecodeError`] on malformed input; nothing
//! here panics on bytes from the network.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod codec;
pub mod consistency;
pub mod error;
pub mod frame;
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
