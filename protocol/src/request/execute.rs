//! EXECUTE: `<id [short bytes]>`, in v5 (or v4 with Scylla's
//! `SCYLLA_USE_METADATA_ID`, docs/protocol.md §1.8) `<result_metadata_id
//! [short bytes]>`, then `<query_parameters>`.

use bytes::BufMut;

use super::query::QueryParameters;
use super::Request;
use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::frame::{Opcode, ProtocolVersion};
use crate::types::ser::{RawValues, SerializeValues};

/// The EXECUTE request: runs a prepared statement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Execute<'a, V> {
    /// The prepared statement id.
    pub id: &'a [u8],
    /// The result metadata id from PREPARE, written as empty when absent,
    /// in v5 and in v4 with `SCYLLA_USE_METADATA_ID` (encode through
    /// [`super::Negotiated`]); a plain v4 EXECUTE leaves it out.
    pub result_metadata_id: Option<&'a [u8]>,
    /// Parameters and values.
    pub params: QueryParameters<'a, V>,
}

impl<'a> Execute<'a, RawValues<'a>> {
    /// Decodes the body.
    pub fn decode(version: ProtocolVersion, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Self::decode_ext(version, false, r)
    }

    /// Decodes the body on a connection that negotiated Scylla's
    /// `SCYLLA_USE_METADATA_ID` when `metadata_id` is set (a v4 EXECUTE then
    /// carries the result metadata id as v5's does).
    pub fn decode_ext(version: ProtocolVersion, metadata_id: bool, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let id = r.short_bytes("statement id")?;
        let result_metadata_id = match version.carries_metadata_id(metadata_id) {
            true => Some(r.short_bytes("result metadata id")?),
            false => None,
        };
        Ok(Execute { id, result_metadata_id, params: QueryParameters::decode(version, r)? })
    }
}

impl<V: SerializeValues> Request for Execute<'_, V> {
    const OPCODE: Opcode = Opcode::Execute;
    fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        self.body_len_ext(version, false)
    }
    fn encode_body(&self, version: ProtocolVersion, buf: &mut impl BufMut) {
        self.encode_body_ext(version, false, buf)
    }
    fn body_len_ext(&self, version: ProtocolVersion, metadata_id: bool) -> Result<usize, EncodeError> {
        if self.params.keyspace.is_some() {
            return Err(EncodeError::InvalidValue { what: "EXECUTE", reason: "the keyspace is fixed at prepare time" });
        }
        let mut n = codec::short_bytes_len("statement id", self.id)?;
        if version.carries_metadata_id(metadata_id) {
            n += codec::short_bytes_len("result metadata id", self.result_metadata_id.unwrap_or(&[]))?;
        }
        Ok(n + self.params.encoded_len(version)?)
    }
    fn encode_body_ext(&self, version: ProtocolVersion, metadata_id: bool, buf: &mut impl BufMut) {
        codec::put_short_bytes(buf, self.id);
        if version.carries_metadata_id(metadata_id) {
            codec::put_short_bytes(buf, self.result_metadata_id.unwrap_or(&[]));
        }
        self.params.encode(version, buf);
    }
}
