//! v4 body compression (spec v4 §5): with `lz4` negotiated in STARTUP, an
//! envelope whose flag 0x01 is set carries `[int] uncompressed length` (big
//! endian) followed by a raw LZ4 block. v5 compresses whole segments instead
//! (see [`super::segment`]).

use bytes::{BufMut, Bytes};

use crate::error::{DecodeError, EncodeError};

/// Compresses a v4 body: `[int] uncompressed length ‖ LZ4 block`.
pub fn compress_body(body: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let len = i32::try_from(body.len()).map_err(|_| EncodeError::TooLong {
        what: "body",
        len: body.len(),
        max: i32::MAX as usize,
    })?;
    let start = out.len();
    out.put_i32(len);
    let bound = lz4_flex::block::get_maximum_output_size(body.len());
    out.resize(start + 4 + bound, 0);
    let n = lz4_flex::block::compress_into(body, &mut out[start + 4..])
        .map_err(|_| EncodeError::InvalidValue { what: "body", reason: "LZ4 compression failed" })?;
    out.truncate(start + 4 + n);
    Ok(())
}

/// Decompresses a v4 body, refusing announced sizes above `max_len`.
pub fn decompress_body(body: &[u8], max_len: usize) -> Result<Bytes, DecodeError> {
    let Some((len, block)) = body.split_first_chunk::<4>() else {
        return Err(DecodeError::UnexpectedEnd { what: "compressed body length", needed: 4, remaining: body.len() });
    };
    let len = i32::from_be_bytes(*len);
    let len =
        usize::try_from(len).map_err(|_| DecodeError::InvalidLength { what: "uncompressed body", len: len.into() })?;
    if len > max_len {
        return Err(DecodeError::TooLarge { what: "uncompressed body", len, limit: max_len });
    }
    let mut out = vec![0u8; len];
    let n = lz4_flex::block::decompress_into(block, &mut out)
        .map_err(|_| DecodeError::Decompression("invalid LZ4 block in body"))?;
    if n != len {
        return Err(DecodeError::Decompression("LZ4 body shorter than announced"));
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_hostile_lengths() {
        let body = b"SELECT * FROM ks.t WHERE pk = ? SELECT * FROM ks.t WHERE pk = ?".repeat(20);
        let mut out = Vec::new();
        compress_body(&body, &mut out).unwrap();
        assert!(out.len() < body.len());
        assert_eq!(&decompress_body(&out, 1 << 20).unwrap()[..], &body[..]);
        assert!(matches!(decompress_body(&out, 10), Err(DecodeError::TooLarge { .. })));
        for p in 0..out.len() {
            assert!(decompress_body(&out[..p], 1 << 20).is_err(), "prefix {p}");
        }
        assert!(decompress_body(&[0xff, 0xff, 0xff, 0xff], 1 << 20).is_err());
    }
}
