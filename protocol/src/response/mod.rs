//! Responses. A response body may start with a tracing id, warnings and a
//! custom payload (as the envelope flags say), then the message itself.
//! Everything is owned except row data, which stays in the response buffer
//! (see [`crate::rows`]): decoding a write's Void result or a page of rows
//! whose metadata was skipped allocates nothing.

mod error;
mod event;
mod result;

pub use error::{code, ErrorKind, ErrorResponse, Failures, WriteType};
pub use event::{Event, SchemaChange, SchemaChangeTarget, SchemaChangeType};
pub use result::{Prepared, ResultMessage};

use bytes::{BufMut, Bytes};
use uuid::Uuid;

use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::frame::envelope::{Envelope, EnvelopeHeader, Flags, Opcode, ProtocolVersion, HEADER_LEN};
use crate::types::ColumnSpec;

/// A response message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseMessage {
    /// ERROR
    Error(ErrorResponse),
    /// READY
    Ready,
    /// AUTHENTICATE: the server's authenticator class.
    Authenticate(String),
    /// SUPPORTED: option name → supported values.
    Supported(Vec<(String, Vec<String>)>),
    /// RESULT
    Result(ResultMessage),
    /// EVENT
    Event(Event),
    /// AUTH_CHALLENGE: a SASL token.
    AuthChallenge(Option<Bytes>),
    /// AUTH_SUCCESS: final SASL token.
    AuthSuccess(Option<Bytes>),
}

impl ResponseMessage {
    /// The message's opcode.
    pub fn opcode(&self) -> Opcode {
        match self {
            ResponseMessage::Error(_) => Opcode::Error,
            ResponseMessage::Ready => Opcode::Ready,
            ResponseMessage::Authenticate(_) => Opcode::Authenticate,
            ResponseMessage::Supported(_) => Opcode::Supported,
            ResponseMessage::Result(_) => Opcode::Result,
            ResponseMessage::Event(_) => Opcode::Event,
            ResponseMessage::AuthChallenge(_) => Opcode::AuthChallenge,
            ResponseMessage::AuthSuccess(_) => Opcode::AuthSuccess,
        }
    }

    /// The value of a SUPPORTED option (first value).
    pub fn supported_option(&self, key: &str) -> Option<&str> {
        match self {
            ResponseMessage::Supported(opts) => {
                opts.iter().find(|(k, _)| k == key).and_then(|(_, v)| v.first()).map(String::as_str)
            }
            _ => None,
        }
    }
}

/// A decoded response: the optional body prefix and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Tracing session id (flag 0x02).
    pub tracing_id: Option<Uuid>,
    /// Server warnings (flag 0x08).
    pub warnings: Vec<String>,
    /// Custom payload (flag 0x04), e.g. Scylla's tablet routing info.
    pub custom_payload: Vec<(String, Option<Bytes>)>,
    /// The message.
    pub message: ResponseMessage,
}

impl Response {
    /// A response with no prefix.
    pub fn new(message: ResponseMessage) -> Self {
        Response { tracing_id: None, warnings: Vec::new(), custom_payload: Vec::new(), message }
    }

    /// Decodes the body of a response envelope. The body is moved in: a Rows
    /// result keeps it without copying.
    pub fn decode(header: &EnvelopeHeader, body: Bytes) -> Result<Self, DecodeError> {
        Self::decode_known(header, body, None)
    }

    /// [`Self::decode`] for a response whose rows' columns are expected to
    /// be `known` ([`crate::rows::ResultMetadata::decode_known`]).
    pub fn decode_known(
        header: &EnvelopeHeader,
        body: Bytes,
        known: Option<&[ColumnSpec]>,
    ) -> Result<Self, DecodeError> {
        Self::decode_ext(header, body, known, false)
    }

    /// [`Self::decode_known`] on a connection that negotiated Scylla's
    /// `SCYLLA_USE_METADATA_ID` when `metadata_id` is set: a v4 PREPARED then
    /// carries a result metadata id ([`ResultMessage::decode_ext`]).
    pub fn decode_ext(
        header: &EnvelopeHeader,
        body: Bytes,
        known: Option<&[ColumnSpec]>,
        metadata_id: bool,
    ) -> Result<Self, DecodeError> {
        if !header.is_response {
            return Err(DecodeError::Invalid { what: "envelope", reason: "a request where a response was expected" });
        }
        let mut r = Reader::new(&body);
        let tracing_id = if header.flags.has(Flags::TRACING) { Some(r.uuid("tracing id")?) } else { None };
        let warnings = if header.flags.has(Flags::WARNING) {
            r.string_list("warnings")?.into_iter().map(str::to_owned).collect()
        } else {
            Vec::new()
        };
        let custom_payload = if header.flags.has(Flags::CUSTOM_PAYLOAD) {
            r.bytes_map("custom payload")?
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.map(Bytes::copy_from_slice)))
                .collect()
        } else {
            Vec::new()
        };
        let version = header.version;
        let message = match header.opcode {
            Opcode::Error => ResponseMessage::Error(ErrorResponse::decode(version, &mut r)?),
            Opcode::Ready => ResponseMessage::Ready,
            Opcode::Authenticate => ResponseMessage::Authenticate(r.string("authenticator")?.to_owned()),
            Opcode::Supported => ResponseMessage::Supported(
                r.string_multimap("supported options")?
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
                    .collect(),
            ),
            Opcode::Result => {
                let start = body.len() - r.remaining();
                let result = ResultMessage::decode_ext(version, metadata_id, body, start, known)?;
                return Ok(Response { tracing_id, warnings, custom_payload, message: ResponseMessage::Result(result) });
            }
            Opcode::Event => ResponseMessage::Event(Event::decode(&mut r)?),
            Opcode::AuthChallenge => ResponseMessage::AuthChallenge(r.bytes("auth token")?.map(|t| body.slice_ref(t))),
            Opcode::AuthSuccess => ResponseMessage::AuthSuccess(r.bytes("auth token")?.map(|t| body.slice_ref(t))),
            other => return Err(DecodeError::UnknownCode { what: "response opcode", value: (other as u8).into() }),
        };
        r.finish("response body")?;
        Ok(Response { tracing_id, warnings, custom_payload, message })
    }

    /// Decodes a whole envelope.
    pub fn from_envelope(envelope: Envelope) -> Result<Self, DecodeError> {
        Self::decode(&envelope.header, envelope.body)
    }

    /// Writes a whole response envelope (header and body) to `buf`.
    pub fn encode(&self, version: ProtocolVersion, stream: i16, buf: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = buf.len();
        let mut flags = 0;
        if self.tracing_id.is_some() {
            flags |= Flags::TRACING;
        }
        if !self.warnings.is_empty() {
            flags |= Flags::WARNING;
        }
        if !self.custom_payload.is_empty() {
            flags |= Flags::CUSTOM_PAYLOAD;
        }
        let header = EnvelopeHeader {
            version,
            is_response: true,
            flags: Flags(flags),
            stream,
            opcode: self.message.opcode(),
            length: 0,
        };
        header.encode(buf);
        if let Some(id) = self.tracing_id {
            buf.put_slice(id.as_bytes());
        }
        if !self.warnings.is_empty() {
            codec::write_string_list(buf, "warnings", &self.warnings)?;
        }
        if !self.custom_payload.is_empty() {
            buf.put_u16(codec::check_short_len("custom payload", self.custom_payload.len())? as u16);
            for (k, v) in &self.custom_payload {
                codec::write_string(buf, "custom payload key", k)?;
                codec::write_bytes(buf, "custom payload value", v.as_deref())?;
            }
        }
        match &self.message {
            ResponseMessage::Error(e) => e.encode(version, buf)?,
            ResponseMessage::Ready => {}
            ResponseMessage::Authenticate(a) => codec::write_string(buf, "authenticator", a)?,
            ResponseMessage::Supported(opts) => {
                buf.put_u16(codec::check_short_len("supported options", opts.len())? as u16);
                for (k, v) in opts {
                    codec::write_string(buf, "option", k)?;
                    codec::write_string_list(buf, "option values", v)?;
                }
            }
            ResponseMessage::Result(r) => r.encode(version, buf)?,
            ResponseMessage::Event(e) => e.encode(buf)?,
            ResponseMessage::AuthChallenge(t) | ResponseMessage::AuthSuccess(t) => {
                codec::write_bytes(buf, "auth token", t.as_deref())?
            }
        }
        let len = buf.len() - start - HEADER_LEN;
        let len = u32::try_from(len).map_err(|_| EncodeError::TooLong { what: "body", len, max: u32::MAX as usize })?;
        buf[start + 5..start + HEADER_LEN].copy_from_slice(&len.to_be_bytes());
        Ok(())
    }
}
