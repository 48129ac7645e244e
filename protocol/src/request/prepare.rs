//! PREPARE: `<query [long string]>`, plus in v5 `<flags [int]>` and an
//! optional keyspace (flag 0x01).

use bytes::BufMut;

use super::{v5_only, Request};
use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::frame::{Opcode, ProtocolVersion};

/// The PREPARE request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prepare<'a> {
    /// The statement text.
    pub query: &'a str,
    /// Keyspace to prepare in (v5 only).
    pub keyspace: Option<&'a str>,
}

const WITH_KEYSPACE: u32 = 0x01;

impl<'a> Prepare<'a> {
    /// Decodes the body.
    pub fn decode(version: ProtocolVersion, r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let query = r.long_string("query")?;
        let mut keyspace = None;
        if version == ProtocolVersion::V5 {
            let flags = r.u32("prepare flags")?;
            if flags & WITH_KEYSPACE != 0 {
                keyspace = Some(r.string("keyspace")?);
            }
        }
        Ok(Prepare { query, keyspace })
    }
}

impl Request for Prepare<'_> {
    const OPCODE: Opcode = Opcode::Prepare;
    fn body_len(&self, version: ProtocolVersion) -> Result<usize, EncodeError> {
        let mut n = codec::long_string_len("query", self.query)?;
        if version == ProtocolVersion::V5 {
            n += 4;
        }
        if let Some(ks) = self.keyspace {
            v5_only(version, "keyspace in PREPARE")?;
            n += codec::string_len("keyspace", ks)?;
        }
        Ok(n)
    }
    fn encode_body(&self, version: ProtocolVersion, buf: &mut impl BufMut) {
        codec::put_long_string(buf, self.query);
        if version == ProtocolVersion::V5 {
            buf.put_u32(if self.keyspace.is_some() { WITH_KEYSPACE } else { 0 });
            if let Some(ks) = self.keyspace {
                codec::put_string(buf, ks);
            }
        }
    }
}
