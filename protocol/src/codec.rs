//! The notations of the native protocol spec (§3): `[short]`, `[string]`,
//! `[bytes]`, `[string map]`, `[inet]`, ... as a bounds-checked [`Reader`]
//! over a byte slice and as size/put helpers over [`BufMut`].
//!
//! Every encoder in this crate computes its exact size first (the `*_len`
//! helpers, which also validate that lengths fit their prefixes) and then
//! writes with the infallible `put_*` helpers, so a request is written into a
//! buffer reserved once and never reallocated.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::BufMut;
use uuid::Uuid;

use crate::error::{DecodeError, EncodeError};

/// A bounds-checked cursor over a byte slice. Every read borrows from the
/// underlying slice, so decoded strings and blobs are zero-copy.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

/// A value as it appears on the wire: `[value]` of the spec (length −1 is
/// null, −2 is "unset").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RawValue<'a> {
    /// A null value.
    Null,
    /// The "unset" marker of protocol v4+: leave the column untouched.
    Unset,
    /// The serialized bytes of a value.
    Value(&'a [u8]),
}

impl<'a> RawValue<'a> {
    /// The bytes of the value, `None` for null and unset.
    pub fn as_bytes(self) -> Option<&'a [u8]> {
        match self {
            RawValue::Value(v) => Some(v),
            _ => None,
        }
    }
    /// Size of this value on the wire, including its `[int]` length.
    pub fn wire_len(self) -> usize {
        4 + self.as_bytes().map_or(0, <[u8]>::len)
    }
    /// Writes the value with its `[int]` length prefix.
    pub fn put(self, buf: &mut impl BufMut) {
        match self {
            RawValue::Null => buf.put_i32(-1),
            RawValue::Unset => buf.put_i32(-2),
            RawValue::Value(v) => {
                buf.put_i32(v.len() as i32);
                buf.put_slice(v);
            }
        }
    }
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The unread bytes, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Fails with [`DecodeError::TrailingData`] if bytes are left.
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingData { what, remaining: self.buf.len() })
        }
    }

    /// Takes `n` bytes.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::UnexpectedEnd { what, needed: n, remaining: self.buf.len() });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// Takes exactly `N` bytes as an array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    /// Takes all remaining bytes.
    pub fn take_rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// `[byte]`.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(what)?[0])
    }
    /// `[short]`, unsigned.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }
    /// A signed 16-bit big-endian integer.
    pub fn i16(&mut self, what: &'static str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }
    /// `[int]`.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }
    /// An unsigned 32-bit big-endian integer.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    /// `[long]`.
    pub fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    /// A non-negative `[int]` count or length.
    pub fn len_i32(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let n = self.i32(what)?;
        usize::try_from(n).map_err(|_| DecodeError::InvalidLength { what, len: n.into() })
    }

    /// `[string]`: a `[short]` length and UTF-8 bytes.
    pub fn string(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        let n = self.u16(what)? as usize;
        utf8(self.take(n, what)?, what)
    }

    /// `[long string]`: an `[int]` length and UTF-8 bytes.
    pub fn long_string(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        let n = self.len_i32(what)?;
        utf8(self.take(n, what)?, what)
    }

    /// `[bytes]`: an `[int]` length (negative is null) and bytes.
    pub fn bytes(&mut self, what: &'static str) -> Result<Option<&'a [u8]>, DecodeError> {
        let n = self.i32(what)?;
        if n < 0 {
            return Ok(None);
        }
        self.take(n as usize, what).map(Some)
    }

    /// `[value]`: like `[bytes]`, with −2 meaning "unset"; other negative lengths are errors.
    pub fn value(&mut self, what: &'static str) -> Result<RawValue<'a>, DecodeError> {
        match self.i32(what)? {
            -1 => Ok(RawValue::Null),
            -2 => Ok(RawValue::Unset),
            n if n < 0 => Err(DecodeError::InvalidLength { what, len: n.into() }),
            n => self.take(n as usize, what).map(RawValue::Value),
        }
    }

    /// `[short bytes]`: a `[short]` length and bytes.
    pub fn short_bytes(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.u16(what)? as usize;
        self.take(n, what)
    }

    /// `[string list]`.
    pub fn string_list(&mut self, what: &'static str) -> Result<Vec<&'a str>, DecodeError> {
        let n = self.u16(what)? as usize;
        let mut out = Vec::with_capacity(n.min(self.remaining() / 2));
        for _ in 0..n {
            out.push(self.string(what)?);
        }
        Ok(out)
    }

    /// `[string map]`.
    pub fn string_map(&mut self, what: &'static str) -> Result<Vec<(&'a str, &'a str)>, DecodeError> {
        let n = self.u16(what)? as usize;
        let mut out = Vec::with_capacity(n.min(self.remaining() / 4));
        for _ in 0..n {
            out.push((self.string(what)?, self.string(what)?));
        }
        Ok(out)
    }

    /// `[string multimap]`.
    pub fn string_multimap(&mut self, what: &'static str) -> Result<Vec<(&'a str, Vec<&'a str>)>, DecodeError> {
        let n = self.u16(what)? as usize;
        let mut out = Vec::with_capacity(n.min(self.remaining() / 4));
        for _ in 0..n {
            out.push((self.string(what)?, self.string_list(what)?));
        }
        Ok(out)
    }

    /// `[bytes map]`.
    pub fn bytes_map(&mut self, what: &'static str) -> Result<BytesMap<'a>, DecodeError> {
        let n = self.u16(what)? as usize;
        let mut out = Vec::with_capacity(n.min(self.remaining() / 6));
        for _ in 0..n {
            out.push((self.string(what)?, self.bytes(what)?));
        }
        Ok(out)
    }

    /// `[inetaddr]`: a one-byte size (4 or 16) and the address.
    pub fn inetaddr(&mut self, what: &'static str) -> Result<IpAddr, DecodeError> {
        match self.u8(what)? {
            4 => Ok(IpAddr::V4(Ipv4Addr::from(self.array::<4>(what)?))),
            16 => Ok(IpAddr::V6(Ipv6Addr::from(self.array::<16>(what)?))),
            n => Err(DecodeError::InvalidLength { what, len: n.into() }),
        }
    }

    /// `[inet]`: an `[inetaddr]` and an `[int]` port.
    pub fn inet(&mut self, what: &'static str) -> Result<SocketAddr, DecodeError> {
        let ip = self.inetaddr(what)?;
        let port = self.i32(what)?;
        let port = u16::try_from(port).map_err(|_| DecodeError::Invalid { what, reason: "port out of range" })?;
        Ok(SocketAddr::new(ip, port))
    }

    /// `[uuid]`: 16 bytes.
    pub fn uuid(&mut self, what: &'static str) -> Result<Uuid, DecodeError> {
        Ok(Uuid::from_bytes(self.array(what)?))
    }

    /// An `[unsigned vint]` (v5 §3).
    pub fn unsigned_vint(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let first = self.u8(what)?;
        let extra = first.leading_ones() as usize;
        if extra == 0 {
            return Ok(first.into());
        }
        let tail = self.take(extra, what)?;
        // With 8 extra bytes the first byte carries no value bits.
        let mut v: u64 = if extra >= 8 { 0 } else { u64::from(first & (0xff >> extra)) };
        for b in tail {
            v = (v << 8) | u64::from(*b);
        }
        Ok(v)
    }

    /// A signed `[vint]` (zig-zag encoded).
    pub fn vint(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        let u = self.unsigned_vint(what)?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }
}

/// A decoded `[bytes map]`.
pub type BytesMap<'a> = Vec<(&'a str, Option<&'a [u8]>)>;

fn utf8<'a>(b: &'a [u8], what: &'static str) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(b).map_err(|_| DecodeError::InvalidText { what })
}

// ---------------------------------------------------------------- sizes

/// Checks that `len` fits a `[short]` length prefix.
pub fn check_short_len(what: &'static str, len: usize) -> Result<usize, EncodeError> {
    if len > u16::MAX as usize {
        Err(EncodeError::TooLong { what, len, max: u16::MAX as usize })
    } else {
        Ok(len)
    }
}

/// Checks that `len` fits an `[int]` length prefix.
pub fn check_int_len(what: &'static str, len: usize) -> Result<usize, EncodeError> {
    if len > i32::MAX as usize {
        Err(EncodeError::TooLong { what, len, max: i32::MAX as usize })
    } else {
        Ok(len)
    }
}

/// Size of a `[string]`.
pub fn string_len(what: &'static str, s: &str) -> Result<usize, EncodeError> {
    Ok(2 + check_short_len(what, s.len())?)
}

/// Size of a `[long string]`.
pub fn long_string_len(what: &'static str, s: &str) -> Result<usize, EncodeError> {
    Ok(4 + check_int_len(what, s.len())?)
}

/// Size of a `[short bytes]`.
pub fn short_bytes_len(what: &'static str, b: &[u8]) -> Result<usize, EncodeError> {
    Ok(2 + check_short_len(what, b.len())?)
}

/// Size of a `[string list]`.
pub fn string_list_len(what: &'static str, list: &[&str]) -> Result<usize, EncodeError> {
    check_short_len(what, list.len())?;
    list.iter().try_fold(2, |acc, s| Ok(acc + string_len(what, s)?))
}

/// Size of a `[string map]`.
pub fn string_map_len(what: &'static str, map: &[(&str, &str)]) -> Result<usize, EncodeError> {
    check_short_len(what, map.len())?;
    map.iter().try_fold(2, |acc, (k, v)| Ok(acc + string_len(what, k)? + string_len(what, v)?))
}

/// Size of a `[string multimap]`.
pub fn string_multimap_len(what: &'static str, map: &[(&str, Vec<&str>)]) -> Result<usize, EncodeError> {
    check_short_len(what, map.len())?;
    map.iter().try_fold(2, |acc, (k, v)| Ok(acc + string_len(what, k)? + string_list_len(what, v)?))
}

/// Size of a `[bytes map]`.
pub fn bytes_map_len(what: &'static str, map: &[(&str, Option<&[u8]>)]) -> Result<usize, EncodeError> {
    check_short_len(what, map.len())?;
    map.iter()
        .try_fold(2, |acc, (k, v)| Ok(acc + string_len(what, k)? + 4 + check_int_len(what, v.map_or(0, <[u8]>::len))?))
}

/// Size of an `[inetaddr]`.
pub fn inetaddr_len(ip: &IpAddr) -> usize {
    match ip {
        IpAddr::V4(_) => 5,
        IpAddr::V6(_) => 17,
    }
}

/// Size of an `[unsigned vint]`.
pub fn unsigned_vint_len(v: u64) -> usize {
    let bits = 64 - v.leading_zeros() as usize;
    // n extra bytes carry 8n value bits plus (7 - n) bits in the first byte.
    match bits {
        0..=7 => 1,
        _ => ((bits - 1) / 7 + 1).min(9),
    }
}

/// Size of a signed `[vint]`.
pub fn vint_len(v: i64) -> usize {
    unsigned_vint_len(zigzag(v))
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

// ---------------------------------------------------------------- writers

/// Writes a `[string]` whose length was checked by [`string_len`].
pub fn put_string(buf: &mut impl BufMut, s: &str) {
    buf.put_u16(s.len() as u16);
    buf.put_slice(s.as_bytes());
}

/// Writes a `[long string]` whose length was checked by [`long_string_len`].
pub fn put_long_string(buf: &mut impl BufMut, s: &str) {
    buf.put_i32(s.len() as i32);
    buf.put_slice(s.as_bytes());
}

/// Writes `[short bytes]`.
pub fn put_short_bytes(buf: &mut impl BufMut, b: &[u8]) {
    buf.put_u16(b.len() as u16);
    buf.put_slice(b);
}

/// Writes `[bytes]`, `None` as null.
pub fn put_bytes(buf: &mut impl BufMut, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            buf.put_i32(b.len() as i32);
            buf.put_slice(b);
        }
        None => buf.put_i32(-1),
    }
}

/// Writes a `[string list]`.
pub fn put_string_list(buf: &mut impl BufMut, list: &[&str]) {
    buf.put_u16(list.len() as u16);
    for s in list {
        put_string(buf, s);
    }
}

/// Writes a `[string map]`.
pub fn put_string_map(buf: &mut impl BufMut, map: &[(&str, &str)]) {
    buf.put_u16(map.len() as u16);
    for (k, v) in map {
        put_string(buf, k);
        put_string(buf, v);
    }
}

/// Writes a `[string multimap]`.
pub fn put_string_multimap(buf: &mut impl BufMut, map: &[(&str, Vec<&str>)]) {
    buf.put_u16(map.len() as u16);
    for (k, v) in map {
        put_string(buf, k);
        put_string_list(buf, v);
    }
}

/// Writes a `[bytes map]`.
pub fn put_bytes_map(buf: &mut impl BufMut, map: &[(&str, Option<&[u8]>)]) {
    buf.put_u16(map.len() as u16);
    for (k, v) in map {
        put_string(buf, k);
        put_bytes(buf, *v);
    }
}

/// Writes an `[inetaddr]`.
pub fn put_inetaddr(buf: &mut impl BufMut, ip: &IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            buf.put_u8(4);
            buf.put_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            buf.put_u8(16);
            buf.put_slice(&a.octets());
        }
    }
}

/// Writes an `[inet]`.
pub fn put_inet(buf: &mut impl BufMut, addr: &SocketAddr) {
    put_inetaddr(buf, &addr.ip());
    buf.put_i32(addr.port().into());
}

/// Writes an `[unsigned vint]`.
pub fn put_unsigned_vint(buf: &mut impl BufMut, v: u64) {
    let n = unsigned_vint_len(v);
    if n == 1 {
        buf.put_u8(v as u8);
        return;
    }
    let extra = n - 1;
    let bytes = v.to_be_bytes();
    if extra == 8 {
        buf.put_u8(0xff);
        buf.put_slice(&bytes);
        return;
    }
    let first_mask = !(0xffu8 >> extra);
    let first = first_mask | bytes[8 - n];
    buf.put_u8(first);
    buf.put_slice(&bytes[8 - extra..]);
}

/// Writes a signed `[vint]`.
pub fn put_vint(buf: &mut impl BufMut, v: i64) {
    put_unsigned_vint(buf, zigzag(v));
}

// ---------------------------------------------------------------- checked writers
//
// Responses are encoded by servers and tests rather than on the client's hot
// path, so they are written in one pass with lengths checked as they go.

/// Writes a `[string]`, checking its length.
pub fn write_string(buf: &mut impl BufMut, what: &'static str, s: &str) -> Result<(), EncodeError> {
    string_len(what, s)?;
    put_string(buf, s);
    Ok(())
}

/// Writes a `[short bytes]`, checking its length.
pub fn write_short_bytes(buf: &mut impl BufMut, what: &'static str, b: &[u8]) -> Result<(), EncodeError> {
    short_bytes_len(what, b)?;
    put_short_bytes(buf, b);
    Ok(())
}

/// Writes `[bytes]`, checking its length.
pub fn write_bytes(buf: &mut impl BufMut, what: &'static str, b: Option<&[u8]>) -> Result<(), EncodeError> {
    check_int_len(what, b.map_or(0, <[u8]>::len))?;
    put_bytes(buf, b);
    Ok(())
}

/// Writes a `[string list]`, checking lengths.
pub fn write_string_list<S: AsRef<str>>(
    buf: &mut impl BufMut,
    what: &'static str,
    list: &[S],
) -> Result<(), EncodeError> {
    buf.put_u16(check_short_len(what, list.len())? as u16);
    for s in list {
        write_string(buf, what, s.as_ref())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_reads_values_nulls_and_names_what_is_short() {
        let buf = [0, 0, 0, 2, 7, 8, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 5, 1];
        let mut r = Reader::new(&buf);
        assert_eq!(r.bytes("a"), Ok(Some(&[7, 8][..])));
        assert_eq!(r.bytes("b"), Ok(None), "a negative length is null");
        assert_eq!(r.bytes("c"), Ok(Some(&[][..])), "an empty value is not null");
        let at = r.remaining();
        assert_eq!(r.bytes("d"), Err(DecodeError::UnexpectedEnd { what: "d", needed: 5, remaining: 1 }));
        assert_eq!(at, 5, "the length and the one byte after it");
        let mut short = Reader::new(&[0, 0]);
        assert_eq!(short.bytes("e"), Err(DecodeError::UnexpectedEnd { what: "e", needed: 4, remaining: 2 }));
    }

    #[test]
    fn vint_examples_from_the_spec() {
        for (v, expect) in [
            (127u64, &[0x7f][..]),
            (128, &[0x80, 0x80]),
            (16383, &[0xbf, 0xff]),
            (16384, &[0xc0, 0x40, 0x00]),
            (256000, &[0xc3, 0xe8, 0x00]),
        ] {
            let mut out = Vec::new();
            put_unsigned_vint(&mut out, v);
            assert_eq!(out, expect, "{v}");
            assert_eq!(unsigned_vint_len(v), expect.len());
            assert_eq!(Reader::new(&out).unsigned_vint("v"), Ok(v));
        }
        let mut out = Vec::new();
        put_vint(&mut out, 1);
        put_vint(&mut out, -1);
        assert_eq!(out, [0x02, 0x01]);
    }

    #[test]
    fn vint_round_trips_at_every_width() {
        let mut values = vec![0u64, 1, u64::MAX, u64::MAX >> 1];
        for shift in 0..64 {
            values.push(1 << shift);
            values.push((1 << shift) - 1);
        }
        for v in values {
            let mut out = Vec::new();
            put_unsigned_vint(&mut out, v);
            assert_eq!(out.len(), unsigned_vint_len(v), "{v}");
            let mut r = Reader::new(&out);
            assert_eq!(r.unsigned_vint("v"), Ok(v));
            assert!(r.is_empty());
            for p in 0..out.len() {
                assert!(Reader::new(&out[..p]).unsigned_vint("v").is_err());
            }
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -300, 300] {
            let mut out = Vec::new();
            put_vint(&mut out, v);
            assert_eq!(Reader::new(&out).vint("v"), Ok(v));
        }
    }
}
