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
}
