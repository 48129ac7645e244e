//! Inbound v4 decoding at exact sizes: each envelope's body gets a buffer of
//! exactly the announced length, read into directly, so a response costs one
//! allocation (its body) and no copy out of a shared input buffer. The 4-byte
//! body of a Void result, the answer to every plain write, is recognised and
//! handed over as a static buffer: a write's answer allocates nothing.
//!
//! The caller reads from its socket into [`ExactDecoder::read_buf`] and
//! reports how many bytes came with [`ExactDecoder::filled`]. A header
//! announcing a huge body does not cost that memory before the bytes
//! arrive: bodies over [`WHOLE_BODY`] grow as they are read.
//!
//! [`FrameDecoder`](super::FrameDecoder) is the general decoder (any
//! chunking, v5 segments); this one is for the established v4 connection,
//! where it saves the copy.

use bytes::Bytes;

use crate::error::DecodeError;
use crate::frame::compression::decompress_body;
use crate::frame::envelope::{Envelope, EnvelopeHeader, Flags, Opcode, HEADER_LEN};

/// The body of the Void result every plain write gets.
pub const VOID: &[u8] = &[0, 0, 0, 1];

/// Bodies up to this size are allocated whole, once, when their header is
/// read; larger ones grow (doubling) as their bytes arrive.
pub const WHOLE_BODY: usize = 1 << 20;

#[derive(Debug)]
enum State {
    Header {
        buf: [u8; HEADER_LEN],
        filled: usize,
    },
    /// A 4-byte Result body: perhaps a Void.
    Short {
        header: EnvelopeHeader,
        buf: [u8; 4],
        filled: usize,
    },
    /// `body.len()` bytes allocated so far, `filled` of them read.
    Body {
        header: EnvelopeHeader,
        body: Vec<u8>,
        filled: usize,
    },
}

/// See the module docs.
#[derive(Debug)]
pub struct ExactDecoder {
    max_body: usize,
    lz4: bool,
    state: State,
}

impl ExactDecoder {
    /// A decoder accepting bodies up to `max_body` bytes, decompressing
    /// bodies flagged as LZ4-compressed when `lz4` was negotiated.
    pub fn new(max_body: usize, lz4: bool) -> Self {
        ExactDecoder { max_body, lz4, state: State::Header { buf: [0; HEADER_LEN], filled: 0 } }
    }

    /// Where the next bytes from the socket go; never empty.
    pub fn read_buf(&mut self) -> &mut [u8] {
        match &mut self.state {
            State::Header { buf, filled } => &mut buf[*filled..],
            State::Short { buf, filled, .. } => &mut buf[*filled..],
            State::Body { body, filled, .. } => &mut body[*filled..],
        }
    }

    /// Takes `n` bytes written into [`read_buf`](Self::read_buf); returns an
    /// envelope when one is complete. An error is fatal for the connection.
    pub fn filled(&mut self, n: usize) -> Result<Option<Envelope>, DecodeError> {
        if n > self.read_buf().len() {
            return Err(DecodeError::Invalid { what: "read", reason: "more bytes than the buffer offered" });
        }
        match &mut self.state {
            State::Header { buf, filled } => {
                *filled += n;
                if *filled < HEADER_LEN {
                    return Ok(None);
                }
                let header = EnvelopeHeader::decode(buf, self.max_body)?;
                let len = header.length as usize;
                self.state = if len == 0 {
                    return self.complete(header, Bytes::new());
                } else if len == VOID.len() && header.opcode == Opcode::Result {
                    State::Short { header, buf: [0; 4], filled: 0 }
                } else {
                    State::Body { header, body: vec![0; len.min(WHOLE_BODY)], filled: 0 }
                };
                Ok(None)
            }
            State::Short { header, buf, filled } => {
                *filled += n;
                if *filled < buf.len() {
                    return Ok(None);
                }
                let body = if *buf == *VOID { Bytes::from_static(VOID) } else { Bytes::copy_from_slice(buf) };
                let header = *header;
                self.complete(header, body)
            }
            State::Body { header, body, filled } => {
                *filled += n;
                let len = header.length as usize;
                if *filled < len {
                    if *filled == body.len() {
                        // Doubling, never past the announced length.
                        body.resize(len.min(body.len() * 2), 0);
                    }
                    return Ok(None);
                }
                let (header, body) = (*header, std::mem::take(body));
                self.complete(header, Bytes::from(body))
            }
        }
    }

    fn complete(&mut self, mut header: EnvelopeHeader, mut body: Bytes) -> Result<Option<Envelope>, DecodeError> {
        self.state = State::Header { buf: [0; HEADER_LEN], filled: 0 };
        if self.lz4 && header.flags.has(Flags::COMPRESSION) {
            body = decompress_body(&body, self.max_body)?;
            header.flags.0 &= !Flags::COMPRESSION;
            header.length = body.len() as u32;
        }
        Ok(Some(Envelope { header, body }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameDecoder, Framer, ProtocolVersion};
    use crate::response::{Response, ResponseMessage, ResultMessage};

    fn response(message: ResponseMessage, stream: i16) -> Vec<u8> {
        let mut out = Vec::new();
        Response::new(message).encode(ProtocolVersion::V4, stream, &mut out).expect("encode");
        out
    }

    /// A run of responses of every size class.
    fn run() -> Vec<u8> {
        let mut run = Vec::new();
        run.extend(response(ResponseMessage::Result(ResultMessage::Void), 1));
        run.extend(response(ResponseMessage::Ready, 2));
        run.extend(response(ResponseMessage::Authenticate("a".repeat(3000)), 3));
        run.extend(response(ResponseMessage::Result(ResultMessage::Void), 4));
        run.extend(response(ResponseMessage::Authenticate("b".repeat(40_000)), 5));
        run
    }

    /// Reads `wire` in pieces of at most `chunk` bytes.
    fn decode(wire: &[u8], chunk: usize, lz4: bool) -> Result<Vec<Envelope>, DecodeError> {
        let mut d = ExactDecoder::new(1 << 24, lz4);
        let mut rest = wire;
        let mut out = Vec::new();
        while !rest.is_empty() {
            let buf = d.read_buf();
            assert!(!buf.is_empty());
            let n = buf.len().min(chunk).min(rest.len());
            buf[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            out.extend(d.filled(n)?);
        }
        assert!(matches!(d.state, State::Header { filled: 0, .. }), "a partial envelope left");
        Ok(out)
    }

    /// The general decoder's envelopes for the same bytes.
    fn reference(wire: &[u8], lz4: bool) -> Vec<Envelope> {
        let mut d = FrameDecoder::new().with_max_body(1 << 24);
        d.set_v4_lz4(lz4);
        d.feed(wire);
        std::iter::from_fn(|| d.next_envelope().expect("reference")).collect()
    }

    #[test]
    fn any_chunking_gives_the_general_decoders_envelopes() {
        for lz4 in [false, true] {
            let run = run();
            let wire = if lz4 {
                Framer::established(ProtocolVersion::V4, true).frame(&run).expect("frame").to_vec()
            } else {
                run.clone()
            };
            let expected = reference(&wire, lz4);
            assert_eq!(expected.len(), 5);
            for chunk in [1, 2, 3, 9, 13, 4096, usize::MAX] {
                assert_eq!(decode(&wire, chunk, lz4).expect("decode"), expected, "chunk {chunk} lz4 {lz4}");
            }
        }
    }

    #[test]
    fn a_void_result_allocates_nothing() {
        let envs = decode(&run(), usize::MAX, false).expect("decode");
        for i in [0, 3] {
            assert_eq!(envs[i].body.as_ptr(), VOID.as_ptr(), "envelope {i} is the static Void");
        }
        // Another 4-byte result body is kept as it came.
        let mut other = response(ResponseMessage::Result(ResultMessage::Void), 9);
        other[HEADER_LEN + 3] = 7;
        let env = decode(&other, usize::MAX, false).expect("decode").remove(0);
        assert_eq!(env.body.as_ref(), [0, 0, 0, 7]);
    }

    #[test]
    fn a_huge_announced_body_grows_as_it_arrives() {
        let mut header = [0x84, 0, 0, 1, Opcode::Result as u8, 0, 0, 0, 0];
        header[5..9].copy_from_slice(&(256u32 << 20).to_be_bytes());
        let mut d = ExactDecoder::new(usize::MAX, false);
        d.read_buf().copy_from_slice(&header);
        assert!(d.filled(HEADER_LEN).expect("header").is_none());
        assert_eq!(d.read_buf().len(), WHOLE_BODY, "no more than WHOLE_BODY before any byte");
        let n = d.read_buf().len();
        assert!(d.filled(n).expect("body").is_none());
        assert_eq!(d.read_buf().len(), WHOLE_BODY, "then doubling");
    }

    #[test]
    fn bad_input_is_an_error() {
        // Over the limit.
        let mut d = ExactDecoder::new(10, false);
        let wire = response(ResponseMessage::Authenticate("x".repeat(20)), 0);
        d.read_buf().copy_from_slice(&wire[..HEADER_LEN]);
        assert!(matches!(d.filled(HEADER_LEN), Err(DecodeError::TooLarge { .. })));
        // A compressed body that does not decompress.
        let mut wire = response(ResponseMessage::Authenticate("x".repeat(20)), 0);
        wire[1] |= Flags::COMPRESSION;
        assert!(decode(&wire, usize::MAX, true).is_err());
        // A caller reporting more than it was offered.
        let mut d = ExactDecoder::new(10, false);
        assert!(d.filled(HEADER_LEN + 1).is_err());
    }
}
