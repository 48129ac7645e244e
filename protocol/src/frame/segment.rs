//! v5 segments ("frames" in the v5 spec, §2): after STARTUP completes, every
//! byte on a v5 connection travels inside segments that carry a CRC24-checked
//! little-endian header and a CRC32 payload trailer, optionally LZ4
//! compressed. A self-contained segment holds one or more whole envelopes; an
//! envelope too large for one segment is split over a run of
//! non-self-contained segments.
//!
//! Layouts (all little-endian):
//!
//! ```text
//! uncompressed: | len:17 | self_contained:1 | pad:6 | crc24:24 | payload | crc32:32 |
//! lz4:          | compressed_len:17 | uncompressed_len:17 | self_contained:1 | pad:5 |
//!               | crc24:24 | compressed payload | crc32 (of the compressed bytes):32 |
//! ```
//!
//! In an LZ4 segment an uncompressed length of 0 means the payload is stored
//! raw, which the encoder does when compression does not shrink it.

use bytes::{BufMut, Bytes};

use crate::error::{DecodeError, EncodeError};
use crate::frame::envelope::HEADER_LEN as ENVELOPE_HEADER_LEN;

/// Largest payload of one segment: 128 KiB − 1.
pub const MAX_PAYLOAD: usize = (1 << 17) - 1;
/// Header size of an uncompressed segment.
pub const UNCOMPRESSED_HEADER_LEN: usize = 6;
/// Header size of an LZ4 segment.
pub const LZ4_HEADER_LEN: usize = 8;
/// Size of the CRC32 trailer.
pub const TRAILER_LEN: usize = 4;

const CRC24_INIT: u32 = 0x87_5060;
const CRC24_POLY: u32 = 0x197_4F0B;
const CRC32_PREFIX: [u8; 4] = [0xFA, 0x2D, 0x55, 0xCA];

/// CRC24 of a segment header (Koopman polynomial, init 0x875060, MSB first).
pub fn crc24(bytes: &[u8]) -> u32 {
    let mut crc = CRC24_INIT;
    for &b in bytes {
        crc ^= u32::from(b) << 16;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x100_0000 != 0 {
                crc ^= CRC24_POLY;
            }
        }
    }
    crc & 0xFF_FFFF
}

/// CRC32 of a segment payload: CRC-32/IEEE over `FA 2D 55 CA ‖ payload`.
pub fn crc32(payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&CRC32_PREFIX);
    h.update(payload);
    h.finalize()
}

/// Whether segments are LZ4 compressed on this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SegmentCompression {
    /// No compression: 6-byte headers.
    #[default]
    None,
    /// LZ4: 8-byte headers.
    Lz4,
}

impl SegmentCompression {
    /// Header size for this mode.
    pub fn header_len(self) -> usize {
        match self {
            SegmentCompression::None => UNCOMPRESSED_HEADER_LEN,
            SegmentCompression::Lz4 => LZ4_HEADER_LEN,
        }
    }
}

/// A decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Bytes of payload on the wire.
    pub payload_len: usize,
    /// For LZ4: the uncompressed length, 0 when stored raw. Equal to
    /// `payload_len` for uncompressed segments.
    pub uncompressed_len: usize,
    /// Whether the segment holds whole envelopes.
    pub self_contained: bool,
}

impl SegmentHeader {
    /// Parses and checks a header; `bytes` must hold at least
    /// `compression.header_len()` bytes.
    pub fn decode(bytes: &[u8], compression: SegmentCompression) -> Result<Self, DecodeError> {
        let n = compression.header_len();
        let Some(header) = bytes.get(..n) else {
            return Err(DecodeError::UnexpectedEnd { what: "segment header", needed: n, remaining: bytes.len() });
        };
        let mut raw = [0u8; 8];
        raw[..n].copy_from_slice(header);
        let value = u64::from_le_bytes(raw);
        let data_bits = (n - 3) * 8;
        let data = value & ((1 << data_bits) - 1);
        let expected = (value >> data_bits) as u32 & 0xFF_FFFF;
        let computed = crc24(&header[..n - 3]);
        if expected != computed {
            return Err(DecodeError::Checksum { what: "segment header", expected, computed });
        }
        let payload_len = (data & 0x1_FFFF) as usize;
        Ok(match compression {
            SegmentCompression::None => {
                SegmentHeader { payload_len, uncompressed_len: payload_len, self_contained: data & (1 << 17) != 0 }
            }
            SegmentCompression::Lz4 => SegmentHeader {
                payload_len,
                uncompressed_len: ((data >> 17) & 0x1_FFFF) as usize,
                self_contained: data & (1 << 34) != 0,
            },
        })
    }

    /// Writes the header (with its CRC24) for `compression`.
    pub fn encode(&self, compression: SegmentCompression, buf: &mut impl BufMut) {
        let sc = u64::from(self.self_contained);
        let (data, n) = match compression {
            SegmentCompression::None => (self.payload_len as u64 | sc << 17, 3),
            SegmentCompression::Lz4 => (self.payload_len as u64 | (self.uncompressed_len as u64) << 17 | sc << 34, 5),
        };
        let bytes = data.to_le_bytes();
        buf.put_slice(&bytes[..n]);
        buf.put_slice(&crc24(&bytes[..n]).to_le_bytes()[..3]);
    }
}

/// Writes `payload` as one segment.
pub fn encode_segment(
    payload: &[u8],
    self_contained: bool,
    compression: SegmentCompression,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(EncodeError::TooLong { what: "segment payload", len: payload.len(), max: MAX_PAYLOAD });
    }
    match compression {
        SegmentCompression::None => {
            out.reserve(UNCOMPRESSED_HEADER_LEN + payload.len() + TRAILER_LEN);
            let header = SegmentHeader { payload_len: payload.len(), uncompressed_len: payload.len(), self_contained };
            header.encode(compression, out);
            out.extend_from_slice(payload);
            out.put_u32_le(crc32(payload));
        }
        SegmentCompression::Lz4 => {
            let start = out.len();
            let bound = lz4_flex::block::get_maximum_output_size(payload.len());
            out.resize(start + LZ4_HEADER_LEN + bound, 0);
            let body = &mut out[start + LZ4_HEADER_LEN..];
            let compressed = lz4_flex::block::compress_into(payload, body)
                .map_err(|_| EncodeError::InvalidValue { what: "segment", reason: "LZ4 compression failed" })?;
            let (payload_len, uncompressed_len) = if compressed < payload.len() {
                (compressed, payload.len())
            } else {
                body[..payload.len()].copy_from_slice(payload);
                (payload.len(), 0)
            };
            out.truncate(start + LZ4_HEADER_LEN + payload_len);
            let crc = crc32(&out[start + LZ4_HEADER_LEN..]);
            out.put_u32_le(crc);
            let header = SegmentHeader { payload_len, uncompressed_len, self_contained };
            let mut h = [0u8; LZ4_HEADER_LEN];
            header.encode(compression, &mut &mut h[..]);
            out[start..start + LZ4_HEADER_LEN].copy_from_slice(&h);
        }
    }
    Ok(())
}

/// Fills in the header and trailer of an uncompressed segment whose payload
/// was written in place: `segment` is `[6 header bytes][payload][4 trailer
/// bytes]`. This is how a write buffer becomes one segment without a copy.
pub fn seal_in_place(segment: &mut [u8], self_contained: bool) -> Result<(), EncodeError> {
    let overhead = UNCOMPRESSED_HEADER_LEN + TRAILER_LEN;
    let payload_len = segment
        .len()
        .checked_sub(overhead)
        .ok_or(EncodeError::InvalidValue { what: "segment", reason: "buffer smaller than header and trailer" })?;
    if payload_len > MAX_PAYLOAD {
        return Err(EncodeError::TooLong { what: "segment payload", len: payload_len, max: MAX_PAYLOAD });
    }
    let (header, rest) = segment.split_at_mut(UNCOMPRESSED_HEADER_LEN);
    let (payload, trailer) = rest.split_at_mut(payload_len);
    SegmentHeader { payload_len, uncompressed_len: payload_len, self_contained }
        .encode(SegmentCompression::None, &mut &mut header[..]);
    trailer.copy_from_slice(&crc32(payload).to_le_bytes());
    Ok(())
}

/// Wraps a run of complete envelopes (as written back to back) into
/// segments: envelopes are packed into self-contained segments of at most
/// [`MAX_PAYLOAD`] bytes, and an envelope larger than that is split over
/// non-self-contained segments.
pub fn encode_envelopes(
    envelopes: &[u8],
    compression: SegmentCompression,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut rest = envelopes;
    while !rest.is_empty() {
        // Take as many whole envelopes as fit in one segment.
        let mut take = 0;
        while let Some(len) = envelope_len(&rest[take..])? {
            if take + len > MAX_PAYLOAD {
                break;
            }
            take += len;
            if take == rest.len() {
                break;
            }
        }
        if take > 0 {
            encode_segment(&rest[..take], true, compression, out)?;
            rest = &rest[take..];
            continue;
        }
        // The next envelope alone is larger than a segment.
        let len = envelope_len(rest)?.unwrap_or(rest.len());
        for chunk in rest[..len].chunks(MAX_PAYLOAD) {
            encode_segment(chunk, false, compression, out)?;
        }
        rest = &rest[len..];
    }
    Ok(())
}

/// Length (header + body) of the envelope at the start of `bytes`, checking
/// that it is complete.
fn envelope_len(bytes: &[u8]) -> Result<Option<usize>, EncodeError> {
    let Some(header) = bytes.get(..ENVELOPE_HEADER_LEN) else {
        return Ok(None);
    };
    let body = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
    let len = ENVELOPE_HEADER_LEN + body;
    if len > bytes.len() {
        return Err(EncodeError::InvalidValue { what: "envelope run", reason: "truncated envelope" });
    }
    Ok(Some(len))
}

/// Decodes the payload of a segment whose header was read: checks the CRC32
/// trailer and decompresses LZ4 payloads. `bytes` holds payload and trailer;
/// an uncompressed payload is returned as a slice of it, without a copy.
pub fn decode_payload(
    header: &SegmentHeader,
    bytes: &Bytes,
    compression: SegmentCompression,
) -> Result<Bytes, DecodeError> {
    let total = header.payload_len + TRAILER_LEN;
    if bytes.len() < total {
        return Err(DecodeError::UnexpectedEnd { what: "segment payload", needed: total, remaining: bytes.len() });
    }
    let payload = &bytes[..header.payload_len];
    let mut t = [0u8; 4];
    t.copy_from_slice(&bytes[header.payload_len..total]);
    let expected = u32::from_le_bytes(t);
    let computed = crc32(payload);
    if expected != computed {
        return Err(DecodeError::Checksum { what: "segment payload", expected, computed });
    }
    if compression == SegmentCompression::Lz4 && header.uncompressed_len != 0 {
        let mut out = vec![0u8; header.uncompressed_len];
        let n = lz4_flex::block::decompress_into(payload, &mut out)
            .map_err(|_| DecodeError::Decompression("invalid LZ4 block in segment"))?;
        if n != header.uncompressed_len {
            return Err(DecodeError::Decompression("LZ4 segment shorter than announced"));
        }
        return Ok(Bytes::from(out));
    }
    Ok(bytes.slice(..header.payload_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_vectors_from_the_spec() {
        assert_eq!(crc32(&[]), 1148681939);
        assert_eq!(crc32(&[0; 5]), 1178391023);
        assert_eq!(crc32(&[1, 2, 3, 4, 5, 6]), 3536190002);
        assert_eq!(crc24(&[0; 3]), 8251255);
        assert_eq!(crc24(&[0; 5]), 11185162);
        assert_eq!(crc24(&[0x40, 0xE2, 0x01]), 5891942);
        assert_eq!(crc24(&[0x40, 0xE2, 0x01, 0, 0]), 8775784);
    }

    #[test]
    fn worked_examples_from_the_spec() {
        let mut h = Vec::new();
        SegmentHeader { payload_len: 5, uncompressed_len: 5, self_contained: true }
            .encode(SegmentCompression::None, &mut h);
        assert_eq!(h, [0x05, 0x00, 0x02, 0x19, 0x99, 0x9A]);

        let options = [0x05, 0, 0, 0, 0x05, 0, 0, 0, 0];
        let mut out = Vec::new();
        encode_segment(&options, true, SegmentCompression::None, &mut out).unwrap();
        assert_eq!(out, [0x09, 0x00, 0x02, 0xa4, 0xc8, 0xc1, 0x05, 0, 0, 0, 0x05, 0, 0, 0, 0, 0x10, 0x86, 0x28, 0x4d]);

        let mut h = Vec::new();
        SegmentHeader { payload_len: 10, uncompressed_len: 20, self_contained: true }
            .encode(SegmentCompression::Lz4, &mut h);
        assert_eq!(h, [0x0a, 0x00, 0x28, 0x00, 0x04, 0x0b, 0x71, 0x14]);
    }

    #[test]
    fn headers_round_trip_and_reject_corruption() {
        for c in [SegmentCompression::None, SegmentCompression::Lz4] {
            for sc in [true, false] {
                let h = SegmentHeader {
                    payload_len: MAX_PAYLOAD,
                    uncompressed_len: if c == SegmentCompression::Lz4 { 1234 } else { MAX_PAYLOAD },
                    self_contained: sc,
                };
                let mut b = Vec::new();
                h.encode(c, &mut b);
                assert_eq!(SegmentHeader::decode(&b, c), Ok(h));
                for bit in 0..b.len() * 8 {
                    let mut bad = b.clone();
                    bad[bit / 8] ^= 1 << (bit % 8);
                    assert!(SegmentHeader::decode(&bad, c).is_err(), "bit {bit} flip undetected");
                }
                assert!(SegmentHeader::decode(&b[..b.len() - 1], c).is_err());
            }
        }
    }

    #[test]
    fn in_place_sealing_matches_encoding() {
        let payload = b"hello segments";
        let mut seg = vec![0u8; UNCOMPRESSED_HEADER_LEN];
        seg.extend_from_slice(payload);
        seg.extend_from_slice(&[0; TRAILER_LEN]);
        seal_in_place(&mut seg, true).unwrap();
        let mut out = Vec::new();
        encode_segment(payload, true, SegmentCompression::None, &mut out).unwrap();
        assert_eq!(seg, out);
        assert!(seal_in_place(&mut [0u8; 3], true).is_err());
    }

    #[test]
    fn lz4_payload_round_trips_and_incompressible_is_stored_raw() {
        let compressible = vec![7u8; 5000];
        let random: Vec<u8> = (0..300u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for payload in [compressible, random] {
            let mut out = Vec::new();
            encode_segment(&payload, true, SegmentCompression::Lz4, &mut out).unwrap();
            let h = SegmentHeader::decode(&out, SegmentCompression::Lz4).unwrap();
            let got =
                decode_payload(&h, &Bytes::copy_from_slice(&out[LZ4_HEADER_LEN..]), SegmentCompression::Lz4).unwrap();
            assert_eq!(&got[..], &payload[..]);
            let mut bad = out.clone();
            let last = bad.len() - 5;
            bad[last] ^= 0x40;
            let bad = Bytes::copy_from_slice(&bad[LZ4_HEADER_LEN..]);
            assert!(decode_payload(&h, &bad, SegmentCompression::Lz4).is_err());
        }
    }
}
