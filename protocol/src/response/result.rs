//! RESULT responses: Void, Rows, Set_keyspace, Prepared, Schema_change.

use bytes::{BufMut, Bytes};

use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::frame::ProtocolVersion;
use crate::response::event::SchemaChange;
use crate::rows::{PreparedMetadata, ResultMetadata, Rows};
use crate::types::ColumnSpec;

/// The answer to PREPARE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The statement id to send in EXECUTE.
    pub id: Bytes,
    /// The result metadata id: v5, or v4 with Scylla's
    /// `SCYLLA_USE_METADATA_ID` (docs/protocol.md §1.8). On v4 it is written
    /// when present; the reader must be told whether to expect it
    /// ([`ResultMessage::decode_ext`]).
    pub result_metadata_id: Option<Bytes>,
    /// Bind markers and partition key indexes.
    pub metadata: PreparedMetadata,
    /// Columns of the rows the statement returns.
    pub result_metadata: ResultMetadata,
}

/// A RESULT message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultMessage {
    /// No result (writes).
    Void,
    /// A page of rows.
    Rows(Rows),
    /// Answer to `USE keyspace`.
    SetKeyspace(String),
    /// Answer to PREPARE. Boxed: the largest variant by far, and a rare
    /// one, it would otherwise set the size of every result, which the
    /// driver moves several times per request.
    Prepared(Box<Prepared>),
    /// Answer to DDL.
    SchemaChange(SchemaChange),
}

impl ResultMessage {
    /// Decodes a RESULT message from `body[start..]` to the end of `body`
    /// (trailing bytes are an error). The body is moved into a Rows result.
    pub fn decode(version: ProtocolVersion, body: Bytes, start: usize) -> Result<Self, DecodeError> {
        Self::decode_known(version, body, start, None)
    }

    /// [`Self::decode`] for a result whose rows' columns are expected to be
    /// `known` ([`crate::rows::ResultMetadata::decode_known`]).
    pub fn decode_known(
        version: ProtocolVersion,
        body: Bytes,
        start: usize,
        known: Option<&[ColumnSpec]>,
    ) -> Result<Self, DecodeError> {
        Self::decode_ext(version, false, body, start, known)
    }

    /// [`Self::decode_known`] on a connection that negotiated Scylla's
    /// `SCYLLA_USE_METADATA_ID` when `metadata_id` is set: a v4 PREPARED then
    /// carries a result metadata id after the statement id, as in v5.
    pub fn decode_ext(
        version: ProtocolVersion,
        metadata_id: bool,
        body: Bytes,
        start: usize,
        known: Option<&[ColumnSpec]>,
    ) -> Result<Self, DecodeError> {
        let kind = Reader::new(body.get(start..).unwrap_or_default()).i32("result kind")?;
        if kind == 0x0002 {
            return Ok(ResultMessage::Rows(Rows::decode_known(body, start + 4, known)?));
        }
        let mut r = Reader::new(body.get(start + 4..).unwrap_or_default());
        let msg = Self::decode_other(version.carries_metadata_id(metadata_id), kind, &mut r, &body)?;
        r.finish("result")?;
        Ok(msg)
    }

    fn decode_other(metadata_id: bool, kind: i32, r: &mut Reader<'_>, body: &Bytes) -> Result<Self, DecodeError> {
        match kind {
            0x0001 => Ok(ResultMessage::Void),
            0x0003 => Ok(ResultMessage::SetKeyspace(r.string("keyspace")?.to_owned())),
            0x0004 => {
                let id = Bytes::copy_from_slice(r.short_bytes("statement id")?);
                let result_metadata_id = match metadata_id {
                    true => Some(Bytes::copy_from_slice(r.short_bytes("result metadata id")?)),
                    false => None,
                };
                let metadata = PreparedMetadata::decode(r)?;
                let mut result_metadata = ResultMetadata::decode(r, body)?;
                // Do not pin the PREPARE response buffer in a long-lived cache.
                result_metadata.paging_state = None;
                result_metadata.new_metadata_id = None;
                Ok(ResultMessage::Prepared(Box::new(Prepared { id, result_metadata_id, metadata, result_metadata })))
            }
            0x0005 => Ok(ResultMessage::SchemaChange(SchemaChange::decode(r)?)),
            _ => Err(DecodeError::UnknownCode { what: "result kind", value: kind.into() }),
        }
    }

    /// Writes the body.
    pub fn encode(&self, version: ProtocolVersion, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        match self {
            ResultMessage::Void => buf.put_i32(0x0001),
            ResultMessage::Rows(rows) => rows.encode(buf)?,
            ResultMessage::SetKeyspace(ks) => {
                buf.put_i32(0x0003);
                codec::write_string(buf, "keyspace", ks)?;
            }
            ResultMessage::Prepared(p) => {
                buf.put_i32(0x0004);
                codec::write_short_bytes(buf, "statement id", &p.id)?;
                if version == ProtocolVersion::V5 || p.result_metadata_id.is_some() {
                    let id = p.result_metadata_id.as_deref().unwrap_or_default();
                    codec::write_short_bytes(buf, "result metadata id", id)?;
                }
                p.metadata.encode(buf)?;
                p.result_metadata.encode(buf)?;
            }
            ResultMessage::SchemaChange(c) => {
                buf.put_i32(0x0005);
                c.encode(buf)?;
            }
        }
        Ok(())
    }
}
