//! The envelope (v4 "frame") header: `version | flags | stream | opcode |
//! length`, 9 bytes, big-endian (spec §2).

use bytes::{BufMut, Bytes};

use crate::error::DecodeError;

/// Size of an envelope header.
pub const HEADER_LEN: usize = 9;

/// Largest body this crate accepts by default (the spec's 256 MB).
pub const DEFAULT_MAX_BODY_LEN: usize = 256 * 1024 * 1024;

/// A protocol version this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    /// Native protocol v4 (Cassandra 2.2+, ScyllaDB).
    V4,
    /// Native protocol v5 (Cassandra 4.0+), with segment framing.
    V5,
}

impl ProtocolVersion {
    /// The version number on the wire.
    pub fn number(self) -> u8 {
        match self {
            ProtocolVersion::V4 => 4,
            ProtocolVersion::V5 => 5,
        }
    }
    /// Whether PREPARED and EXECUTE carry a result metadata id: always in
    /// v5, in v4 when the connection negotiated Scylla's
    /// `SCYLLA_USE_METADATA_ID` (`negotiated`; docs/protocol.md §1.8).
    pub fn carries_metadata_id(self, negotiated: bool) -> bool {
        self == ProtocolVersion::V5 || negotiated
    }
    /// The version for a wire number (direction bit ignored).
    pub fn from_number(n: u8) -> Result<Self, DecodeError> {
        match n & 0x7f {
            4 => Ok(ProtocolVersion::V4),
            5 => Ok(ProtocolVersion::V5),
            other => Err(DecodeError::UnknownCode { what: "protocol version", value: other.into() }),
        }
    }
}

/// Envelope header flags (spec §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u8);

impl Flags {
    /// The body is compressed (v4 only).
    pub const COMPRESSION: u8 = 0x01;
    /// Tracing requested, or a tracing id precedes the response body.
    pub const TRACING: u8 = 0x02;
    /// A custom payload precedes the body.
    pub const CUSTOM_PAYLOAD: u8 = 0x04;
    /// Warnings precede the response body.
    pub const WARNING: u8 = 0x08;
    /// The beta version of the protocol is requested.
    pub const USE_BETA: u8 = 0x10;

    /// Whether `flag` is set.
    pub fn has(self, flag: u8) -> bool {
        self.0 & flag != 0
    }
}

/// Message opcodes (spec §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// ERROR (response)
    Error = 0x00,
    /// STARTUP
    Startup = 0x01,
    /// READY (response)
    Ready = 0x02,
    /// AUTHENTICATE (response)
    Authenticate = 0x03,
    /// OPTIONS
    Options = 0x05,
    /// SUPPORTED (response)
    Supported = 0x06,
    /// QUERY
    Query = 0x07,
    /// RESULT (response)
    Result = 0x08,
    /// PREPARE
    Prepare = 0x09,
    /// EXECUTE
    Execute = 0x0A,
    /// REGISTER
    Register = 0x0B,
    /// EVENT (response)
    Event = 0x0C,
    /// BATCH
    Batch = 0x0D,
    /// AUTH_CHALLENGE (response)
    AuthChallenge = 0x0E,
    /// AUTH_RESPONSE
    AuthResponse = 0x0F,
    /// AUTH_SUCCESS (response)
    AuthSuccess = 0x10,
}

impl Opcode {
    /// Every opcode, for exhaustive tests.
    pub const ALL: [Opcode; 16] = [
        Opcode::Error,
        Opcode::Startup,
        Opcode::Ready,
        Opcode::Authenticate,
        Opcode::Options,
        Opcode::Supported,
        Opcode::Query,
        Opcode::Result,
        Opcode::Prepare,
        Opcode::Execute,
        Opcode::Register,
        Opcode::Event,
        Opcode::Batch,
        Opcode::AuthChallenge,
        Opcode::AuthResponse,
        Opcode::AuthSuccess,
    ];

    /// The opcode for a wire byte.
    pub fn from_byte(b: u8) -> Result<Self, DecodeError> {
        Opcode::ALL
            .iter()
            .copied()
            .find(|o| *o as u8 == b)
            .ok_or(DecodeError::UnknownCode { what: "opcode", value: b.into() })
    }
}

/// A decoded envelope header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeHeader {
    /// Protocol version.
    pub version: ProtocolVersion,
    /// Whether this is a response (direction bit 0x80 of the version byte).
    pub is_response: bool,
    /// Flags.
    pub flags: Flags,
    /// Stream id; −1 for server events.
    pub stream: i16,
    /// Opcode.
    pub opcode: Opcode,
    /// Body length.
    pub length: u32,
}

impl EnvelopeHeader {
    /// Parses a header, checking that the body length is within `max_body`.
    pub fn decode(bytes: &[u8; HEADER_LEN], max_body: usize) -> Result<Self, DecodeError> {
        let version = ProtocolVersion::from_number(bytes[0])?;
        let opcode = Opcode::from_byte(bytes[4])?;
        let length = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
        if length as usize > max_body {
            return Err(DecodeError::TooLarge { what: "envelope body", len: length as usize, limit: max_body });
        }
        Ok(EnvelopeHeader {
            version,
            is_response: bytes[0] & 0x80 != 0,
            flags: Flags(bytes[1]),
            stream: i16::from_be_bytes([bytes[2], bytes[3]]),
            opcode,
            length,
        })
    }

    /// Writes the header.
    pub fn encode(&self, buf: &mut impl BufMut) {
        let dir = if self.is_response { 0x80 } else { 0 };
        buf.put_u8(self.version.number() | dir);
        buf.put_u8(self.flags.0);
        buf.put_i16(self.stream);
        buf.put_u8(self.opcode as u8);
        buf.put_u32(self.length);
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        self.encode(&mut &mut out[..]);
        out
    }
}

/// A complete envelope: header and body. The body is a shared buffer, so
/// responses decoded from it borrow without copying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The header; `length` equals `body.len()` (after v4 decompression, the
    /// length of the decompressed body).
    pub header: EnvelopeHeader,
    /// The body.
    pub body: Bytes,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_errors() {
        let h = EnvelopeHeader {
            version: ProtocolVersion::V5,
            is_response: true,
            flags: Flags(Flags::WARNING | Flags::TRACING),
            stream: -1,
            opcode: Opcode::Event,
            length: 77,
        };
        let b = h.to_bytes();
        assert_eq!(b, [0x85, 0x0a, 0xff, 0xff, 0x0c, 0, 0, 0, 77]);
        assert_eq!(EnvelopeHeader::decode(&b, 1000), Ok(h));
        assert!(matches!(EnvelopeHeader::decode(&b, 10), Err(DecodeError::TooLarge { len: 77, .. })));
        let mut bad = b;
        bad[4] = 0x04;
        assert!(matches!(EnvelopeHeader::decode(&bad, 1000), Err(DecodeError::UnknownCode { .. })));
        bad = b;
        bad[0] = 0x83;
        assert!(matches!(EnvelopeHeader::decode(&bad, 1000), Err(DecodeError::UnknownCode { .. })));
        for op in Opcode::ALL {
            assert_eq!(Opcode::from_byte(op as u8), Ok(op));
        }
    }
}
