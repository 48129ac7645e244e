//! Harnesses for the fuzz targets in `fuzz/` (one thin target each). They
//! live here so that the normal test suite runs them on seed inputs too and
//! they cannot rot. Each asserts the properties a decoder must keep on any
//! input: no panic, and whatever decodes re-encodes to something that
//! decodes to the same value.

use bytes::Bytes;

use crate::codec::Reader;
use crate::frame::envelope::{EnvelopeHeader, Flags, Opcode, ProtocolVersion, HEADER_LEN};
use crate::frame::segment::SegmentCompression;
use crate::frame::FrameDecoder;
use crate::request::AnyRequest;
use crate::response::{Response, ResponseMessage, ResultMessage};
use crate::types::de::{DeserializeValue, FrameSlice};
use crate::types::ser::SerializeValue;
use crate::types::{ColumnType, CqlValue};

fn version(b: u8) -> ProtocolVersion {
    if b & 1 == 0 {
        ProtocolVersion::V4
    } else {
        ProtocolVersion::V5
    }
}

/// Streams `data[1..]` through a [`FrameDecoder`] in the mode chosen by
/// `data[0]`, in chunks, and decodes every envelope as a message.
pub fn frame_decoder(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut d = FrameDecoder::new().with_max_body(1 << 20);
    match mode % 4 {
        0 => {}
        1 => d.set_v4_lz4(true),
        2 => d.set_framed(SegmentCompression::None),
        _ => d.set_framed(SegmentCompression::Lz4),
    }
    let chunk = usize::from(mode / 4) + 1;
    for part in rest.chunks(chunk) {
        d.feed(part);
        loop {
            match d.next_envelope() {
                Ok(Some(env)) => {
                    if env.header.is_response {
                        let _ = Response::from_envelope(env);
                    } else {
                        let _ = AnyRequest::decode(env.header.opcode, env.header.version, &env.body);
                    }
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

/// Decodes `data[HEADER_LEN..]` as the body of a response whose header is
/// `data[..HEADER_LEN]` (length fixed up); what decodes must re-encode and
/// decode to the same response.
pub fn response(data: &[u8]) {
    let Some(head) = data.first_chunk::<HEADER_LEN>() else { return };
    let body = Bytes::copy_from_slice(&data[HEADER_LEN..]);
    let Ok(opcode) = Opcode::from_byte(head[4]) else { return };
    let header = EnvelopeHeader {
        version: version(head[0]),
        is_response: true,
        flags: Flags(head[1] & (Flags::TRACING | Flags::WARNING | Flags::CUSTOM_PAYLOAD)),
        stream: 0,
        opcode,
        length: body.len() as u32,
    };
    let Ok(resp) = Response::decode(&header, body) else { return };
    if let ResponseMessage::Result(ResultMessage::Rows(rows)) = &resp.message {
        if let Ok(iter) = rows.rows::<Vec<Option<CqlValue>>>() {
            for row in iter {
                let _ = row;
            }
        }
    }
    let mut again = Vec::new();
    if resp.encode(header.version, 0, &mut again).is_ok() {
        let h = EnvelopeHeader::decode(again.first_chunk::<HEADER_LEN>().expect("encoded a header"), usize::MAX)
            .expect("own header decodes");
        let back = Response::decode(&h, Bytes::copy_from_slice(&again[HEADER_LEN..]));
        assert_eq!(back.as_ref().ok(), Some(&resp), "response re-encoding changed it");
    }
}

/// Decodes `data[2..]` as a request body (opcode from `data[0]`, version
/// from `data[1]`); what decodes must survive a re-encoding.
pub fn request(data: &[u8]) {
    let [op, v, body @ ..] = data else { return };
    let Ok(opcode) = Opcode::from_byte(*op) else { return };
    let version = version(*v);
    let Ok(req) = AnyRequest::decode(opcode, version, body) else { return };
    let mut again = Vec::new();
    if req.encode(version, 0, 0, &mut again).is_ok() {
        let back = AnyRequest::decode(opcode, version, &again[HEADER_LEN..]);
        assert_eq!(back.as_ref().ok(), Some(&req), "request re-encoding changed it");
    }
}

/// Reads a column type from the start of `data` and a value of that type
/// from the rest; a value that decodes must round-trip.
pub fn value(data: &[u8]) {
    let mut r = Reader::new(data);
    let Ok(typ) = ColumnType::decode(&mut r) else { return };
    let frame = Bytes::copy_from_slice(r.rest());
    let Ok(v) = CqlValue::deserialize(&typ, Some(FrameSlice::whole(&frame))) else { return };
    let Ok(len) = SerializeValue::encoded_len(&v) else { return };
    let mut out = Vec::with_capacity(len);
    SerializeValue::encode(&v, &mut out);
    assert_eq!(out.len(), len, "encoded_len is exact");
    let again = Bytes::copy_from_slice(&out[4..]);
    let back = CqlValue::deserialize(&typ, Some(FrameSlice::whole(&again)));
    assert_eq!(back.as_ref().ok(), Some(&v), "value round trip for {typ}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs on which a fuzz target once failed; each must pass now.
    #[test]
    fn regressions() {
        // EXECUTE with the "values with names" flag and zero values: decoded as named,
        // re-encoded without values (fuzz `request`, fixed in QueryParameters::decode).
        request(&[0x0a, 0x00, 0, 0, 0, 0, 0x55, 0, 0, 0, 0, 0xfc, 0, 0, 0x07]);
        // ROWS with zero columns, HAS_MORE_PAGES and a null paging state,
        // 20 rows: the zero-column bound was the body size, which shrank by
        // the 4 bytes of the null paging state on re-encoding (fuzz
        // `response`, fixed in Rows::decode).
        response(&[
            0xef, 0x00, 0x3f, 0x00, 0x08, 0x00, 0xff, 0x01, 0x00, 0x00, 0x00, 0x00, 0x02, 0x06, 0x00, 0x00, 0x02, 0x00,
            0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x14,
        ]);
    }

    /// A nested `vector` type whose size overflows `usize`, then a value:
    /// the size multiplied without a check (fuzz `value`, fixed in
    /// `parse_vector_args`).
    #[test]
    fn value_regression_nested_vector_overflow() {
        let class = concat!(
            "org.apache.cassandra.db.marshal.VectorType(",
            "org.apache.cassandra.db.marshal.VectorType(",
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.UUIDType, 4294967295), ",
            "4294967295), 4294967295)"
        )
        .as_bytes();
        let mut data = vec![0, 0];
        data.extend_from_slice(&(class.len() as u16).to_be_bytes());
        data.extend_from_slice(class);
        data.extend_from_slice(&[0; 32]);
        value(&data);
    }

    #[test]
    fn harnesses_accept_seeds_and_garbage() {
        let seeds: [&[u8]; 6] = [
            &[],
            &[0, 0x84, 0, 0, 0, 0x02, 0, 0, 0, 0],
            &[2, 0x09, 0x00, 0x02, 0xa4, 0xc8, 0xc1, 0x05, 0, 0, 0, 0x05, 0, 0, 0, 0, 0x10, 0x86, 0x28, 0x4d],
            &[0x84, 0, 0, 0, 0x08, 0, 0, 0, 4, 0, 0, 0, 1],
            &[0x07, 1, 0, 0, 0, 1, b'x', 0, 1, 0, 0, 0, 0],
            &[0, 0x09, 0, 0, 0, 42],
        ];
        for s in seeds {
            frame_decoder(s);
            response(s);
            request(s);
            value(s);
        }
        let mut x = 0x1234_5678_u32;
        for len in 0..300 {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            frame_decoder(&data);
            response(&data);
            request(&data);
            value(&data);
        }
    }
}
