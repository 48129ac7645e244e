//! STARTUP: `[string map]` of options (`CQL_VERSION` is mandatory;
//! `COMPRESSION`, `DRIVER_NAME`, Scylla extensions...).

use bytes::BufMut;

use super::Request;
use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::frame::{Opcode, ProtocolVersion};

/// The STARTUP request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Startup<'a> {
    /// Options as key/value pairs.
    pub options: Vec<(&'a str, &'a str)>,
}

impl<'a> Startup<'a> {
    /// Decodes the body.
    pub fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(Startup { options: r.string_map("startup options")? })
    }
}

impl Request for Startup<'_> {
    const OPCODE: Opcode = Opcode::Startup;
    fn body_len(&self, _: ProtocolVersion) -> Result<usize, EncodeError> {
        codec::string_map_len("startup options", &self.options)
    }
    fn encode_body(&self, _: ProtocolVersion, buf: &mut impl BufMut) {
        codec::put_string_map(buf, &self.options);
    }
}
