//! REGISTER: subscribes the connection to server events
//! (`TOPOLOGY_CHANGE`, `STATUS_CHANGE`, `SCHEMA_CHANGE`).

use bytes::BufMut;

use super::Request;
use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::frame::{Opcode, ProtocolVersion};

/// The REGISTER request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Register<'a> {
    /// Event types to receive.
    pub events: Vec<&'a str>,
}

impl<'a> Register<'a> {
    /// Decodes the body.
    pub fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(Register { events: r.string_list("event types")? })
    }
}

impl Request for Register<'_> {
    const OPCODE: Opcode = Opcode::Register;
    fn body_len(&self, _: ProtocolVersion) -> Result<usize, EncodeError> {
        codec::string_list_len("event types", &self.events)
    }
    fn encode_body(&self, _: ProtocolVersion, buf: &mut impl BufMut) {
        codec::put_string_list(buf, &self.events);
    }
}
