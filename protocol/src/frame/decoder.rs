//! A streaming decoder: feed bytes as they arrive, in any chunking, and take
//! complete envelopes out.
//!
//! A connection starts *unframed* (v4 always; v5 until the server answered
//! STARTUP with READY or AUTHENTICATE), then a v5 connection switches to
//! *framed* mode with [`FrameDecoder::set_framed`], after which bytes are
//! read as segments. Bytes already buffered past the switch point are simply
//! read in the new mode, so the switch needs no coordination with I/O.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::frame::compression::decompress_body;
use crate::frame::envelope::{Envelope, EnvelopeHeader, Flags, DEFAULT_MAX_BODY_LEN, HEADER_LEN};
use crate::frame::segment::{decode_payload, SegmentCompression, SegmentHeader, TRAILER_LEN};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Unframed { v4_lz4: bool },
    Framed(SegmentCompression),
}

/// Turns a byte stream into envelopes. See the module docs.
#[derive(Debug)]
pub struct FrameDecoder {
    input: BytesMut,
    mode: Mode,
    max_body: usize,
    /// Unread envelopes of the current self-contained segment.
    segment: Bytes,
    /// An envelope being reassembled from non-self-contained segments.
    partial: BytesMut,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// An unframed decoder accepting bodies up to 256 MB.
    pub fn new() -> Self {
        FrameDecoder {
            input: BytesMut::new(),
            mode: Mode::Unframed { v4_lz4: false },
            max_body: DEFAULT_MAX_BODY_LEN,
            segment: Bytes::new(),
            partial: BytesMut::new(),
        }
    }

    /// Sets the largest accepted envelope body.
    pub fn with_max_body(mut self, max_body: usize) -> Self {
        self.max_body = max_body;
        self
    }

    /// In unframed mode, decompress bodies flagged as LZ4-compressed (v4
    /// with `COMPRESSION: lz4` negotiated). Enable it before sending STARTUP:
    /// Cassandra already compresses its READY answer.
    pub fn set_v4_lz4(&mut self, enabled: bool) {
        self.mode = Mode::Unframed { v4_lz4: enabled };
    }

    /// Switches to v5 segment framing (after READY or AUTHENTICATE).
    pub fn set_framed(&mut self, compression: SegmentCompression) {
        self.mode = Mode::Framed(compression);
    }

    /// Whether the decoder reads segments.
    pub fn is_framed(&self) -> bool {
        matches!(self.mode, Mode::Framed(_))
    }

    /// Appends received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        self.input.extend_from_slice(data);
    }

    /// The input buffer, for reading from a socket straight into it.
    pub fn input_mut(&mut self) -> &mut BytesMut {
        &mut self.input
    }

    /// Bytes received but not yet decoded into envelopes.
    pub fn buffered(&self) -> usize {
        self.input.len() + self.segment.len() + self.partial.len()
    }

    /// The next complete envelope, `Ok(None)` when more bytes are needed. An
    /// error is fatal for the connection.
    pub fn next_envelope(&mut self) -> Result<Option<Envelope>, DecodeError> {
        match self.mode {
            Mode::Unframed { v4_lz4 } => self.next_unframed(v4_lz4),
            Mode::Framed(c) => self.next_framed(c),
        }
    }

    fn next_unframed(&mut self, v4_lz4: bool) -> Result<Option<Envelope>, DecodeError> {
        let Some(header) = self.input.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let mut header = EnvelopeHeader::decode(header, self.max_body)?;
        let total = HEADER_LEN + header.length as usize;
        if self.input.len() < total {
            self.input.reserve(total - self.input.len());
            return Ok(None);
        }
        self.input.advance(HEADER_LEN);
        let mut body = self.input.split_to(header.length as usize).freeze();
        if v4_lz4 && header.flags.has(Flags::COMPRESSION) {
            body = decompress_body(&body, self.max_body)?;
            header.flags.0 &= !Flags::COMPRESSION;
            header.length = body.len() as u32;
        }
        Ok(Some(Envelope { header, body }))
    }

    fn next_framed(&mut self, c: SegmentCompression) -> Result<Option<Envelope>, DecodeError> {
        loop {
            if !self.segment.is_empty() {
                return self.envelope_from_segment().map(Some);
            }
            let Some(segment) = self.next_segment(c)? else {
                return Ok(None);
            };
            let (header, payload) = segment;
            if header.self_contained {
                if !self.partial.is_empty() {
                    return Err(DecodeError::Invalid {
                        what: "segment",
                        reason: "self-contained segment inside a split envelope",
                    });
                }
                self.segment = payload;
                continue;
            }
            self.partial.extend_from_slice(&payload);
            if let Some(h) = self.partial.first_chunk::<HEADER_LEN>() {
                let h = EnvelopeHeader::decode(h, self.max_body)?;
                let total = HEADER_LEN + h.length as usize;
                if self.partial.len() > total {
                    return Err(DecodeError::Invalid { what: "segment", reason: "split envelope overruns its length" });
                }
                if self.partial.len() == total {
                    let mut whole = std::mem::take(&mut self.partial).freeze();
                    whole.advance(HEADER_LEN);
                    return Ok(Some(Envelope { header: h, body: whole }));
                }
            }
        }
    }

    fn envelope_from_segment(&mut self) -> Result<Envelope, DecodeError> {
        let Some(h) = self.segment.first_chunk::<HEADER_LEN>() else {
            return Err(DecodeError::Invalid {
                what: "segment",
                reason: "self-contained segment ends inside an envelope header",
            });
        };
        let header = EnvelopeHeader::decode(h, self.max_body)?;
        let total = HEADER_LEN + header.length as usize;
        if self.segment.len() < total {
            return Err(DecodeError::Invalid {
                what: "segment",
                reason: "self-contained segment ends inside an envelope body",
            });
        }
        let mut env = self.segment.split_to(total);
        if self.segment.is_empty() {
            // Drop the reference to the input buffer so it can be reused in place.
            self.segment = Bytes::new();
        }
        env.advance(HEADER_LEN);
        Ok(Envelope { header, body: env })
    }

    fn next_segment(&mut self, c: SegmentCompression) -> Result<Option<(SegmentHeader, Bytes)>, DecodeError> {
        let hlen = c.header_len();
        if self.input.len() < hlen {
            return Ok(None);
        }
        let header = SegmentHeader::decode(&self.input, c)?;
        let total = hlen + header.payload_len + TRAILER_LEN;
        if self.input.len() < total {
            self.input.reserve(total - self.input.len());
            return Ok(None);
        }
        // Split the segment off the input: its envelopes share the buffer.
        let mut segment = self.input.split_to(total).freeze();
        segment.advance(hlen);
        let payload = decode_payload(&header, &segment, c)?;
        Ok(Some((header, payload)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::envelope::{Opcode, ProtocolVersion};
    use crate::frame::segment::{encode_envelopes, MAX_PAYLOAD};

    fn envelope(stream: i16, body_len: usize) -> Vec<u8> {
        let h = EnvelopeHeader {
            version: ProtocolVersion::V5,
            is_response: true,
            flags: Flags(0),
            stream,
            opcode: Opcode::Result,
            length: body_len as u32,
        };
        let mut out = h.to_bytes().to_vec();
        out.extend((0..body_len).map(|i| (i * 7 + stream as usize) as u8));
        out
    }

    fn decode_all(d: &mut FrameDecoder, bytes: &[u8], chunk: usize) -> Vec<Envelope> {
        let mut out = Vec::new();
        for c in bytes.chunks(chunk.max(1)) {
            d.feed(c);
            while let Some(e) = d.next_envelope().unwrap() {
                out.push(e);
            }
        }
        out
    }

    #[test]
    fn unframed_in_any_chunking() {
        let mut bytes = envelope(1, 0);
        bytes.extend(envelope(2, 300));
        bytes.extend(envelope(3, 5));
        for chunk in [1, 2, 9, 10, 100, 10_000] {
            let mut d = FrameDecoder::new();
            let got = decode_all(&mut d, &bytes, chunk);
            assert_eq!(got.iter().map(|e| e.header.stream).collect::<Vec<_>>(), [1, 2, 3]);
            assert_eq!(got[1].body.len(), 300);
            assert_eq!(d.buffered(), 0);
        }
    }

    #[test]
    fn framed_small_and_split_envelopes_in_any_chunking() {
        for c in [SegmentCompression::None, SegmentCompression::Lz4] {
            let mut run = envelope(1, 10);
            run.extend(envelope(2, 2 * MAX_PAYLOAD + 17));
            run.extend(envelope(3, 0));
            run.extend(envelope(4, MAX_PAYLOAD - 9));
            let mut wire = Vec::new();
            encode_envelopes(&run, c, &mut wire).unwrap();
            for chunk in [7, 1000, 200_000] {
                let mut d = FrameDecoder::new();
                d.set_framed(c);
                let got = decode_all(&mut d, &wire, chunk);
                let mut again = Vec::new();
                for e in &got {
                    again.extend(e.header.to_bytes());
                    again.extend(&e.body);
                }
                assert_eq!(again, run, "{c:?} chunk {chunk}");
            }
        }
    }

    #[test]
    fn oversized_and_corrupt_input_are_errors() {
        let mut d = FrameDecoder::new().with_max_body(100);
        d.feed(&envelope(1, 101)[..HEADER_LEN]);
        assert!(matches!(d.next_envelope(), Err(DecodeError::TooLarge { .. })));

        let mut wire = Vec::new();
        encode_envelopes(&envelope(1, 50), SegmentCompression::None, &mut wire).unwrap();
        let last = wire.len() - 1;
        wire[last] ^= 1;
        let mut d = FrameDecoder::new();
        d.set_framed(SegmentCompression::None);
        d.feed(&wire);
        assert!(matches!(d.next_envelope(), Err(DecodeError::Checksum { .. })));
    }
}
