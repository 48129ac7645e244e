//! `SCYLLA_USE_METADATA_ID` (docs/protocol.md §1.8): v5's result metadata
//! ids on v4, as ScyllaDB offers them (docs/dev/protocol-extensions.md,
//! "Negotiate sending metadata id"; `transport/server.cc`).
//!
//! The Cassandra behind the front speaks v4 without ids, so the front keeps
//! them itself: a PREPARED answer gets the id of its result columns after the
//! statement id; an EXECUTE's id is taken off before Cassandra sees it, and
//! Cassandra is asked for the columns every time. The rows then go back the
//! way ScyllaDB sends them: without columns when the client asked to skip
//! them and its id is the current one, with `Metadata_changed`, the new id
//! and the columns when its id is stale (a table altered since PREPARE),
//! and with the columns otherwise.
//!
//! The id is a digest of the columns' names and types, so equal columns
//! give equal ids on every node and connection (ScyllaDB hashes the names
//! and types of the result columns too, `cql3::metadata::calculate_metadata_id`;
//! the digest here is not ScyllaDB's, which a client cannot tell: an id is
//! opaque to it).

use bytes::{BufMut, Bytes, BytesMut};
use shardwise_protocol::frame::{EnvelopeHeader, Opcode, ProtocolVersion};
use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage};
use shardwise_protocol::types::ColumnSpec;

use super::frame::message_offset;
use super::Conn;
use crate::stats::inc;

/// The 16-byte id of result columns (two FNV-1a 64-bit digests of their
/// names and types, with different offsets).
pub(super) fn of(specs: &[ColumnSpec]) -> Bytes {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    let mut feed = |bytes: &[u8]| {
        for &x in bytes.iter().chain(&[0xff]) {
            a = (a ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
            b = (b ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(5);
        }
    };
    for s in specs {
        feed(s.name.as_bytes());
        feed(format!("{:?}", s.typ).as_bytes());
    }
    let mut id = BytesMut::with_capacity(16);
    id.put_u64(a);
    id.put_u64(b);
    id.freeze()
}

/// A PREPARED answer's body with the id of its result columns after the
/// statement id; any other answer's body as it is.
pub(super) fn prepared(h: &EnvelopeHeader, body: &Bytes) -> Bytes {
    let Ok(Response { message: ResponseMessage::Result(ResultMessage::Prepared(p)), .. }) =
        Response::decode(h, body.clone())
    else {
        return body.clone();
    };
    let Some(at) = message_offset(h, body) else { return body.clone() };
    let id = of(p.result_metadata.specs.as_deref().unwrap_or_default());
    // <kind [int]><id [short bytes]> then the metadata id.
    let split = at + 4 + 2 + p.id.len();
    let Some((head, tail)) = (split <= body.len()).then(|| body.split_at(split)) else { return body.clone() };
    let mut out = BytesMut::with_capacity(body.len() + 2 + id.len());
    out.extend_from_slice(head);
    out.put_u16(id.len() as u16);
    out.extend_from_slice(&id);
    out.extend_from_slice(tail);
    out.freeze()
}

/// Cassandra's answer to an EXECUTE sent on without the client's metadata
/// id (`client_id`) and with its columns asked for: a Rows answer is sent as
/// ScyllaDB sends it (see the module docs), anything else as it came.
pub(super) fn answer(conn: &Conn, h: &EnvelopeHeader, body: &Bytes, client_id: &[u8], skip: bool) -> Bytes {
    if h.opcode != Opcode::Result {
        return body.clone();
    }
    let (Some(at), Ok(response)) = (message_offset(h, body), Response::decode(h, body.clone())) else {
        return body.clone();
    };
    let ResponseMessage::Result(ResultMessage::Rows(mut rows)) = response.message else { return body.clone() };
    let Some(specs) = rows.metadata.specs.as_deref() else { return body.clone() };
    let id = of(specs);
    if id.as_ref() != client_id {
        rows.metadata.new_metadata_id = Some(id);
        inc(&conn.shared.counters.metadata_changed);
    } else if skip {
        rows.metadata.specs = None;
        inc(&conn.shared.counters.metadata_skipped);
    } else {
        return body.clone();
    }
    let mut out = Vec::with_capacity(body.len() + 20);
    out.extend_from_slice(&body[..at]);
    match ResultMessage::Rows(rows).encode(ProtocolVersion::V4, &mut out) {
        Ok(()) => Bytes::from(out),
        Err(_) => body.clone(),
    }
}
