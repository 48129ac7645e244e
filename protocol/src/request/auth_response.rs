//! AUTH_RESPONSE: a SASL token (`[bytes]`) answering AUTHENTICATE or
//! AUTH_CHALLENGE.

use bytes::BufMut;

use super::Request;
use crate::codec::{self, Reader};
use crate::error::{DecodeError, EncodeError};
use crate::frame::{Opcode, ProtocolVersion};

/// The AUTH_RESPONSE request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthResponse<'a> {
    /// The token; `None` is a null token.
    pub token: Option<&'a [u8]>,
}

impl<'a> AuthResponse<'a> {
    /// Decodes the body.
    pub fn decode(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(AuthResponse { token: r.bytes("auth token")? })
    }
}

impl Request for AuthResponse<'_> {
    const OPCODE: Opcode = Opcode::AuthResponse;
    fn body_len(&self, _: ProtocolVersion) -> Result<usize, EncodeError> {
        Ok(4 + codec::check_int_len("auth token", self.token.map_or(0, <[u8]>::len))?)
    }
    fn encode_body(&self, _: ProtocolVersion, buf: &mut impl BufMut) {
        codec::put_bytes(buf, self.token);
    }
}
