//! Errors of the codec layer.
//!
//! Decoding failures say *what* was being read and why it failed, so that a
//! malformed frame from a server is reported with enough context to debug it.
//! Encoding failures only arise when a caller hands in something the wire
//! format cannot carry (a string over 64 KiB, too many values, ...).

/// A failure to decode bytes received from the peer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before the value being read was complete.
    #[error("unexpected end of input while reading {what}: needed {needed} bytes, {remaining} left")]
    UnexpectedEnd {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// Bytes were left after a complete message or value.
    #[error("{remaining} trailing bytes after {what}")]
    TrailingData {
        /// What was complete.
        what: &'static str,
        /// How many bytes were left over.
        remaining: usize,
    },
    /// A length prefix was negative where a negative length is not allowed.
    #[error("invalid length {len} for {what}")]
    InvalidLength {
        /// What was being read.
        what: &'static str,
        /// The length found.
        len: i64,
    },
    /// A string was not valid UTF-8 (or ASCII where ASCII is required).
    #[error("invalid text in {what}")]
    InvalidText {
        /// What was being read.
        what: &'static str,
    },
    /// An enumerated field held a value this crate does not know.
    #[error("unknown {what}: {value:#x}")]
    UnknownCode {
        /// Which field.
        what: &'static str,
        /// The value found.
        value: i64,
    },
    /// A field held a value that the protocol forbids.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// Which field.
        what: &'static str,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// A v5 frame header or payload failed its checksum.
    #[error("{what} checksum mismatch: expected {expected:#x}, computed {computed:#x}")]
    Checksum {
        /// Header (CRC24) or payload (CRC32).
        what: &'static str,
        /// The checksum sent by the peer.
        expected: u32,
        /// The checksum of the received bytes.
        computed: u32,
    },
    /// Decompression failed.
    #[error("decompression failed: {0}")]
    Decompression(&'static str),
    /// A frame or envelope is larger than the configured limit.
    #[error("{what} of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// What is too large.
        what: &'static str,
        /// Its declared length.
        len: usize,
        /// The limit.
        limit: usize,
    },
}

/// A failure to encode a request or value: the input cannot be represented on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A length does not fit in its length prefix.
    #[error("{what} of length {len} does not fit in its length prefix (max {max})")]
    TooLong {
        /// What is too long.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The maximum the prefix allows.
        max: usize,
    },
    /// A feature was used with a protocol version that does not have it.
    #[error("{what} is not supported by protocol v{version}")]
    Unsupported {
        /// The feature.
        what: &'static str,
        /// The protocol version in use.
        version: u8,
    },
    /// A value could not be serialized as the requested CQL type.
    #[error("cannot serialize {rust_type} as {cql_type}")]
    TypeMismatch {
        /// The Rust type.
        rust_type: &'static str,
        /// The CQL type, as written in CQL.
        cql_type: String,
    },
    /// A value was invalid for its CQL type (e.g. a duration with mixed signs).
    #[error("invalid value for {what}: {reason}")]
    InvalidValue {
        /// The type or field.
        what: &'static str,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// The fields of a struct do not match the fields of the user-defined
    /// type, or the bind markers, it is written as (the derived
    /// `SerializeValue` and `SerializeValues` impls).
    #[error("cannot serialize {rust_type} as {cql_type}: {mismatch}")]
    Fields {
        /// The Rust struct.
        rust_type: &'static str,
        /// The UDT (`keyspace.name`) or the bind markers (`bind markers (name type, ...)`).
        cql_type: String,
        /// Which field or bind marker differs, and how (boxed: a rare
        /// error, which would otherwise enlarge every result of a request).
        mismatch: Box<FieldMismatch>,
    },
}

/// How the fields of a struct differ from the fields of a user-defined type
/// or from the bind markers of a statement ([`EncodeError::Fields`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldMismatch {
    /// The type has no field of the struct field's name.
    #[error("the type has no field named {field:?}")]
    NoSuchField {
        /// The struct field's (or its `rename`d) name.
        field: String,
    },
    /// The type has the field, at another position: a UDT value's fields
    /// are written in the struct's order, which must be the type's.
    #[error(
        "field {field:?} is field {position} of the struct, where the type has field {expected:?}: \
         declare the struct's fields in the type's order (only the type's last fields may be left out)"
    )]
    OutOfOrder {
        /// The struct field's name.
        field: String,
        /// Its position among the struct's (not skipped) fields.
        position: usize,
        /// The name of the type's field at that position.
        expected: String,
    },
    /// A struct field's value cannot be written as its UDT field's type.
    #[error("field {field:?}: {source}")]
    FieldType {
        /// The field's name.
        field: String,
        /// Why its value does not fit.
        source: Box<EncodeError>,
    },
    /// The statement has a bind marker that no field is named after.
    #[error("no field is named after bind marker {marker:?} (rename one with #[shardwise(rename = \"...\")])")]
    NoFieldForMarker {
        /// The bind marker's name.
        marker: String,
    },
    /// A field has no bind marker of its name.
    #[error("the statement has no bind marker named {field:?}")]
    NoMarkerForField {
        /// The field's name.
        field: String,
    },
    /// Two bind markers have the same name (`c > ? AND c < ?`): a struct
    /// matched by name has one value for both.
    #[error(
        "bind marker {marker:?} appears twice: name the markers (`:lo`, `:hi`), \
         bind a tuple, or use #[shardwise(flavor = \"in_order\")]"
    )]
    DuplicateMarker {
        /// The bind marker's name.
        marker: String,
    },
}
