//! Frames the front writes itself: answers and errors in Scylla's words,
//! requests re-encoded, the tablet routing payload added to a response, and
//! the offsets of a response's message past its custom payload.

use bytes::{BufMut, Bytes, BytesMut};
use shardwise_protocol::codec::Reader;
use shardwise_protocol::frame::{EnvelopeHeader, Flags, Opcode, ProtocolVersion, HEADER_LEN};
use shardwise_protocol::request::{encode_request, Request};
use shardwise_protocol::response::{Response, ResponseMessage};
use shardwise_protocol::tablets::TabletRoute;

pub(super) fn frame(header: &EnvelopeHeader, flags: u8, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER_LEN + body.len());
    EnvelopeHeader { flags: Flags(flags), length: body.len() as u32, ..*header }.encode(&mut out);
    out.extend_from_slice(body);
    out.freeze()
}
pub(super) fn error_frame(version: u8, stream: i16, code: i32, message: &str) -> Bytes {
    let mut body = Vec::with_capacity(6 + message.len());
    body.put_i32(code);
    let msg = &message.as_bytes()[..message.len().min(u16::MAX as usize)];
    body.put_u16(msg.len() as u16);
    body.put_slice(msg);
    error_body_frame(version, stream, &body)
}
/// An ERROR response of protocol `version` on `stream` carrying `body`.
fn error_body_frame(version: u8, stream: i16, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER_LEN + body.len());
    out.put_u8(0x80 | version);
    out.put_u8(0);
    out.put_i16(stream);
    out.put_u8(Opcode::Error as u8);
    out.put_u32(body.len() as u32);
    out.extend_from_slice(body);
    out.freeze()
}
/// Cassandra's UNPREPARED error for `id`: the driver prepares the
/// statement again and retries.
pub(super) fn unprepared_frame(stream: i16, id: &[u8]) -> Bytes {
    let message = "Prepared statement unknown to the Scylla emulation front; prepare it again";
    let mut body = Vec::with_capacity(8 + message.len() + id.len());
    body.put_i32(0x2500);
    body.put_u16(message.len() as u16);
    body.put_slice(message.as_bytes());
    body.put_u16(id.len().min(u16::MAX as usize) as u16);
    body.put_slice(&id[..id.len().min(u16::MAX as usize)]);
    error_body_frame(4, stream, &body)
}
pub(super) fn response_frame(stream: i16, message: ResponseMessage) -> Option<Bytes> {
    let mut buf = Vec::new();
    Response::new(message).encode(ProtocolVersion::V4, stream, &mut buf).ok()?;
    Some(Bytes::from(buf))
}
/// Encodes a (modified) request with the client's stream id, uncompressed.
pub(super) fn encode<R: Request>(h: &EnvelopeHeader, request: &R) -> Option<Bytes> {
    let mut buf = Vec::new();
    encode_request(request, ProtocolVersion::V4, h.stream, h.flags.0 & !Flags::COMPRESSION, &mut buf).ok()?;
    Some(Bytes::from(buf))
}
/// The offset of the message in a response body (after tracing id,
/// warnings and custom payload).
pub(super) fn message_offset(header: &EnvelopeHeader, body: &[u8]) -> Option<usize> {
    let mut r = Reader::new(body);
    if header.flags.has(Flags::TRACING) {
        r.take(16, "tracing id").ok()?;
    }
    if header.flags.has(Flags::WARNING) {
        r.string_list("warnings").ok()?;
    }
    if header.flags.has(Flags::CUSTOM_PAYLOAD) {
        r.bytes_map("custom payload").ok()?;
    }
    Some(body.len() - r.remaining())
}
/// A response with its warnings left out (the WARNING flag cleared): the
/// answer ScyllaDB gives to a BATCH, which carries none of Cassandra's
/// batch warnings (see `request::on_batch`). A body whose
/// warnings cannot be read goes as it came.
pub(super) fn without_warnings(header: &EnvelopeHeader, body: &[u8]) -> Bytes {
    if !header.flags.has(Flags::WARNING) {
        return frame(header, header.flags.0, body);
    }
    let mut r = Reader::new(body);
    if header.flags.has(Flags::TRACING) && r.take(16, "tracing id").is_err() {
        return frame(header, header.flags.0, body);
    }
    let start = body.len() - r.remaining();
    if r.string_list("warnings").is_err() {
        return frame(header, header.flags.0, body);
    }
    let end = body.len() - r.remaining();
    let mut out = Vec::with_capacity(body.len() - (end - start));
    out.extend_from_slice(&body[..start]);
    out.extend_from_slice(&body[end..]);
    frame(header, header.flags.0 & !Flags::WARNING, &out)
}
/// The id of a PREPARED result, read without decoding its metadata:
/// `<kind [int]><id [short bytes]>` after the envelope's optional fields.
pub(super) fn prepared_id(header: &EnvelopeHeader, body: &Bytes) -> Option<Bytes> {
    let mut r = Reader::new(body.get(message_offset(header, body)?..)?);
    (r.i32("result kind").ok()? == 4).then_some(())?;
    let id = r.short_bytes("prepared id").ok()?;
    Some(Bytes::copy_from_slice(id))
}
/// The `tablets-routing-v1` (or, with a version, `-v2`) custom payload
/// entry for `route`.
pub(super) fn route_payload(route: &TabletRoute) -> (String, Option<Bytes>) {
    let mut value = Vec::new();
    route.encode(&mut value);
    (route.payload_key().to_string(), Some(Bytes::from(value)))
}
/// A successful RESULT with the tablets routing payload added (any other
/// answer, or one that has a payload already, goes as it came).
pub(super) fn with_tablet_route(h: &EnvelopeHeader, body: &[u8], route: &TabletRoute) -> Bytes {
    let at = match message_offset(h, body) {
        Some(at) if h.opcode == Opcode::Result && !h.flags.has(Flags::CUSTOM_PAYLOAD) => at,
        _ => return frame(h, h.flags.0, body),
    };
    let mut value = Vec::new();
    route.encode(&mut value);
    let key = route.payload_key();
    let mut out = Vec::with_capacity(body.len() + 2 + 2 + key.len() + 4 + value.len());
    out.extend_from_slice(&body[..at]);
    out.put_u16(1);
    out.put_u16(key.len() as u16);
    out.put_slice(key.as_bytes());
    out.put_i32(value.len() as i32);
    out.put_slice(&value);
    out.extend_from_slice(&body[at..]);
    frame(h, h.flags.0 | Flags::CUSTOM_PAYLOAD, &out)
}
