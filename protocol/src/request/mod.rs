//! Requests, one module per opcode. Each request knows its exact body size
//! for a protocol version ([`Request::body_len`]), so [`encode_request`]
//! reserves once and writes header and body straight into the caller's
//! buffer. Each also decodes ([`AnyRequest::decode`]), which the Scylla
//! emulation front and the round-trip tests use.

mod auth_response;
mod batch;
mod execute;
mod options;
mod prepare;
mod query;
mod register;
mod startup;

pub use auth_response::AuthResponse;
pub use batch::{Batch, BatchStatement, BatchStatements, BatchType, StatementKind};
pub use execute::Execute;
pub use options::Options;
pub use prepare::Prepare;
pub use query::{Query, QueryParameters};
pub use register::Register;
pub use startup::Startup;

use bytes::BufMut;

use crate::codec::Reader;
use crate::error::{DecodeError, EncodeError};
use crate::frame::envelope::{EnvelopeHeader, Flags, Opcode, ProtocolVersion, HEADER_LEN};
use crate::types::ser::RawValues;

/// A request message.
pub trait Request {
    /// The request's opcode.
    const OPCODE: Opcode;
    /// Exact size of the body for `version`; also validates the request.
    fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError>;
    /// Writes the body. Only called after [`Self::body_len`] succeeded, and
    /// writes exactly that many bytes.
    fn encode_body(&self, version: ProtocolVersion, buf: &mut impl BufMut);
    /// [`Self::body_len`] on a connection that negotiated Scylla's
    /// `SCYLLA_USE_METADATA_ID` when `metadata_id` is set (only EXECUTE
    /// differs: a v4 EXECUTE then carries a result metadata id).
    fn body_len_ext(&self, version: ProtocolVersion, metadata_id: bool) -> Result<usize, EncodeError> {
        let _ = metadata_id;
        self.body_len(version)
    }
    /// [`Self::encode_body`] on a connection that negotiated
    /// `SCYLLA_USE_METADATA_ID` when `metadata_id` is set.
    fn encode_body_ext(&self, version: ProtocolVersion, metadata_id: bool, buf: &mut impl BufMut) {
        let _ = metadata_id;
        self.encode_body(version, buf)
    }
}

/// `request` as a connection that negotiated Scylla's extensions writes
/// it. With `SCYLLA_USE_METADATA_ID` (`metadata_id` set) a v4 EXECUTE
/// carries its result metadata id, empty when it has none, as v5's does;
/// without it a v4 EXECUTE never carries one. With
/// `TABLETS_ROUTING_V2_EXPERIMENTAL` (`tablet_version_block` set) every
/// EXECUTE ends with that byte ([`crate::tablets::version_block`]); other
/// requests are unchanged. Every encoder takes it as a request.
#[derive(Debug, Clone, Copy)]
pub struct Negotiated<'r, R> {
    /// The request.
    pub request: &'r R,
    /// `SCYLLA_USE_METADATA_ID` was negotiated.
    pub metadata_id: bool,
    /// Tablets routing v2 was negotiated: the block an EXECUTE ends with.
    pub tablet_version_block: Option<u8>,
}

impl<R: Request> Negotiated<'_, R> {
    fn trailer(&self) -> Option<u8> {
        self.tablet_version_block.filter(|_| R::OPCODE == Opcode::Execute)
    }
}

impl<R: Request> Request for Negotiated<'_, R> {
    const OPCODE: Opcode = R::OPCODE;
    fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        Ok(self.request.body_len_ext(version, self.metadata_id)? + usize::from(self.trailer().is_some()))
    }
    fn encode_body(&self, version: ProtocolVersion, buf: &mut impl BufMut) {
        self.request.encode_body_ext(version, self.metadata_id, buf);
        if let Some(block) = self.trailer() {
            buf.put_u8(block);
        }
    }
}

/// Writes a whole envelope (header and body) for `request` into `buf`,
/// reserving its exact size first. Returns the number of bytes written.
///
/// ```
/// use shardwise_protocol::frame::ProtocolVersion;
/// use shardwise_protocol::request::{encode_request, Options};
///
/// let mut buf = Vec::new();
/// encode_request(&Options, ProtocolVersion::V4, 0, 0, &mut buf).unwrap();
/// assert_eq!(buf, [4, 0, 0, 0, 5, 0, 0, 0, 0]);
/// ```
pub fn encode_request<R: Request>(
    request: &R,
    version: ProtocolVersion,
    stream: i16,
    flags: u8,
    buf: &mut Vec<u8>,
) -> Result<usize, EncodeError> {
    let body = request.body_len(version)?;
    buf.reserve(HEADER_LEN + body);
    write_request(request, version, stream, flags, body, buf)?;
    Ok(HEADER_LEN + body)
}

/// Writes a whole envelope into any buffer, given the body size computed by
/// [`Request::body_len`] (for callers that reserve space themselves).
pub fn write_request<R: Request>(
    request: &R,
    version: ProtocolVersion,
    stream: i16,
    flags: u8,
    body_len: usize,
    buf: &mut impl BufMut,
) -> Result<(), EncodeError> {
    let length = u32::try_from(body_len).map_err(|_| EncodeError::TooLong {
        what: "body",
        len: body_len,
        max: u32::MAX as usize,
    })?;
    EnvelopeHeader { version, is_response: false, flags: Flags(flags), stream, opcode: R::OPCODE, length }.encode(buf);
    request.encode_body(version, buf);
    Ok(())
}

/// Any request, decoded from a body with borrowed fields (values stay in
/// wire form).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum AnyRequest<'a> {
    Startup(Startup<'a>),
    AuthResponse(AuthResponse<'a>),
    Options(Options),
    Query(Query<'a, RawValues<'a>>),
    Prepare(Prepare<'a>),
    Execute(Execute<'a, RawValues<'a>>),
    Register(Register<'a>),
    Batch(Batch<'a, Vec<BatchStatement<'a, RawValues<'a>>>>),
}

impl<'a> AnyRequest<'a> {
    /// Decodes a request body. Fails on response opcodes and trailing bytes.
    pub fn decode(opcode: Opcode, version: ProtocolVersion, body: &'a [u8]) -> Result<Self, DecodeError> {
        Self::decode_ext(opcode, version, false, body)
    }

    /// [`Self::decode`] on a connection that negotiated Scylla's
    /// `SCYLLA_USE_METADATA_ID` when `metadata_id` is set ([`Execute::decode_ext`]).
    pub fn decode_ext(
        opcode: Opcode,
        version: ProtocolVersion,
        metadata_id: bool,
        body: &'a [u8],
    ) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let req = match opcode {
            Opcode::Startup => AnyRequest::Startup(Startup::decode(&mut r)?),
            Opcode::AuthResponse => AnyRequest::AuthResponse(AuthResponse::decode(&mut r)?),
            Opcode::Options => AnyRequest::Options(Options),
            Opcode::Query => AnyRequest::Query(Query::decode(version, &mut r)?),
            Opcode::Prepare => AnyRequest::Prepare(Prepare::decode(version, &mut r)?),
            Opcode::Execute => AnyRequest::Execute(Execute::decode_ext(version, metadata_id, &mut r)?),
            Opcode::Register => AnyRequest::Register(Register::decode(&mut r)?),
            Opcode::Batch => AnyRequest::Batch(Batch::decode(version, &mut r)?),
            other => return Err(DecodeError::UnknownCode { what: "request opcode", value: (other as u8).into() }),
        };
        r.finish("request body")?;
        Ok(req)
    }

    /// The request's opcode.
    pub fn opcode(&self) -> Opcode {
        match self {
            AnyRequest::Startup(_) => Opcode::Startup,
            AnyRequest::AuthResponse(_) => Opcode::AuthResponse,
            AnyRequest::Options(_) => Opcode::Options,
            AnyRequest::Query(_) => Opcode::Query,
            AnyRequest::Prepare(_) => Opcode::Prepare,
            AnyRequest::Execute(_) => Opcode::Execute,
            AnyRequest::Register(_) => Opcode::Register,
            AnyRequest::Batch(_) => Opcode::Batch,
        }
    }

    /// Writes the whole envelope for this request.
    pub fn encode(
        &self,
        version: ProtocolVersion,
        stream: i16,
        flags: u8,
        buf: &mut Vec<u8>,
    ) -> Result<usize, EncodeError> {
        match self {
            AnyRequest::Startup(r) => encode_request(r, version, stream, flags, buf),
            AnyRequest::AuthResponse(r) => encode_request(r, version, stream, flags, buf),
            AnyRequest::Options(r) => encode_request(r, version, stream, flags, buf),
            AnyRequest::Query(r) => encode_request(r, version, stream, flags, buf),
            AnyRequest::Prepare(r) => encode_request(r, version, stream, flags, buf),
            AnyRequest::Execute(r) => encode_request(r, version, stream, flags, buf),
            AnyRequest::Register(r) => encode_request(r, version, stream, flags, buf),
            AnyRequest::Batch(r) => encode_request(r, version, stream, flags, buf),
        }
    }
    /// [`Self::encode`] on a connection that negotiated Scylla's
    /// `SCYLLA_USE_METADATA_ID` when `metadata_id` is set ([`Negotiated`]).
    pub fn encode_ext(
        &self,
        version: ProtocolVersion,
        metadata_id: bool,
        stream: i16,
        flags: u8,
        buf: &mut Vec<u8>,
    ) -> Result<usize, EncodeError> {
        match self {
            AnyRequest::Execute(request) => encode_request(
                &Negotiated { request, metadata_id, tablet_version_block: None },
                version,
                stream,
                flags,
                buf,
            ),
            other => other.encode(version, stream, flags, buf),
        }
    }
}

/// Query flags are a `[byte]` in v4 and an `[int]` in v5.
pub(crate) fn flags_len(version: ProtocolVersion) -> usize {
    match version {
        ProtocolVersion::V4 => 1,
        ProtocolVersion::V5 => 4,
    }
}

pub(crate) fn put_flags(version: ProtocolVersion, flags: u32, buf: &mut impl BufMut) {
    match version {
        ProtocolVersion::V4 => buf.put_u8(flags as u8),
        ProtocolVersion::V5 => buf.put_u32(flags),
    }
}

pub(crate) fn read_flags(version: ProtocolVersion, r: &mut Reader<'_>) -> Result<u32, DecodeError> {
    match version {
        ProtocolVersion::V4 => r.u8("flags").map(u32::from),
        ProtocolVersion::V5 => r.u32("flags"),
    }
}

pub(crate) fn v5_only(version: ProtocolVersion, what: &'static str) -> Result<(), EncodeError> {
    match version {
        ProtocolVersion::V5 => Ok(()),
        ProtocolVersion::V4 => Err(EncodeError::Unsupported { what, version: 4 }),
    }
}
