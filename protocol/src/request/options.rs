//! OPTIONS: asks the server which STARTUP options it supports. Empty body.

use bytes::BufMut;

use super::Request;
use crate::error::EncodeError;
use crate::frame::{Opcode, ProtocolVersion};

/// The OPTIONS request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options;

impl Request for Options {
    const OPCODE: Opcode = Opcode::Options;
    fn body_len(&self, _: ProtocolVersion) -> Result<usize, EncodeError> {
        Ok(0)
    }
    fn encode_body(&self, _: ProtocolVersion, _: &mut impl BufMut) {}
}
