//! CDC stream ids and stream groups.
//!
//! A stream id is the 16-byte partition key (`cdc$stream_id`) of the log
//! table: two big-endian 64-bit words. The high word is the stream's token
//! (the CDC partitioner takes it as is); the low word holds a 4-bit version
//! (bits 0–3, currently 1), the 22-bit index of the vnode the stream was
//! created for (bits 4–25) and 38 random bits.
//!
//! A [`StreamGroup`] is the set of streams read together by one query: the
//! streams of one vnode (one row of `cdc_streams_descriptions_v2`), which
//! share a vnode index and live on the same replicas.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use bytes::BufMut;
use shardwise::protocol::types::de::{DeserializeError, DeserializeValue, FrameSlice, TypeCheckError};
use shardwise::protocol::types::ser::SerializeValue;
use shardwise::protocol::types::ColumnType;
use shardwise::protocol::{DecodeError, EncodeError};

/// A CDC stream id: the 16 bytes of a `cdc$stream_id`.
///
/// Ordered like the blobs they are (unsigned bytewise), which is the order
/// Scylla returns them in.
///
/// ```
/// # use shardwise_cdc::StreamId;
/// let id: StreamId = "807ae73e07dbd4122e32d36e08000011".parse().unwrap();
/// assert_eq!(id.token(), -9188777836090239982);
/// assert_eq!((id.vnode_index(), id.version()), (1, 1));
/// assert_eq!(id.to_string(), "807ae73e07dbd4122e32d36e08000011");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId([u8; 16]);

/// Bytes that are not a stream id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamIdError {
    /// A stream id has exactly 16 bytes.
    #[error("a CDC stream id has 16 bytes, not {0}")]
    Length(usize),
    /// The text is not 32 hexadecimal digits.
    #[error("a CDC stream id is written as 32 hexadecimal digits")]
    Hex,
}

impl StreamId {
    /// Length in bytes.
    pub const LEN: usize = 16;

    /// The stream id with these bytes.
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        StreamId(bytes)
    }

    /// Parses a blob; fails unless it has exactly 16 bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, StreamIdError> {
        <[u8; 16]>::try_from(bytes).map(StreamId).map_err(|_| StreamIdError::Length(bytes.len()))
    }

    /// The bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The stream's token: the first 8 bytes as a big-endian `i64` (what the
    /// CDC partitioner computes for this partition key).
    pub fn token(&self) -> i64 {
        let [a, b, c, d, e, f, g, h, ..] = self.0;
        i64::from_be_bytes([a, b, c, d, e, f, g, h])
    }

    /// The index of the vnode the stream was created for (22 bits; 0 for
    /// tablets).
    pub fn vnode_index(&self) -> u32 {
        // 22 bits fit a u32.
        ((self.low_word() >> 4) & 0x3F_FFFF) as u32
    }

    /// The format version (1 for every stream id Scylla creates today).
    pub fn version(&self) -> u8 {
        (self.low_word() & 0xF) as u8
    }

    fn low_word(&self) -> u64 {
        let [.., a, b, c, d, e, f, g, h] = self.0;
        u64::from_be_bytes([a, b, c, d, e, f, g, h])
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StreamId({self})")
    }
}

/// 32 hexadecimal digits, optionally prefixed by `0x`.
impl FromStr for StreamId {
    type Err = StreamIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let digits = s.strip_prefix("0x").unwrap_or(s).as_bytes();
        if digits.len() != 2 * Self::LEN {
            return Err(StreamIdError::Hex);
        }
        let mut out = [0u8; 16];
        for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
            let hex = |c: u8| char::from(c).to_digit(16).ok_or(StreamIdError::Hex);
            // Two hex digits fit a byte.
            *byte = (hex(pair[0])? * 16 + hex(pair[1])?) as u8;
        }
        Ok(StreamId(out))
    }
}

impl TryFrom<&[u8]> for StreamId {
    type Error = StreamIdError;

    fn try_from(bytes: &[u8]) -> Result<Self, Self::Error> {
        StreamId::from_slice(bytes)
    }
}

impl AsRef<[u8]> for StreamId {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Reads a `blob` of exactly 16 bytes.
impl<'a> DeserializeValue<'a> for StreamId {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        match typ {
            ColumnType::Blob => Ok(()),
            _ => Err(TypeCheckError::new::<Self>(typ)),
        }
    }

    fn deserialize(typ: &'a ColumnType, v: Option<FrameSlice<'a>>) -> Result<Self, DeserializeError> {
        let v = v.ok_or(DeserializeError::UnexpectedNull { rust_type: "StreamId" })?;
        StreamId::from_slice(v.as_slice()).map_err(|_| {
            let len = v.as_slice().len() as i64;
            DeserializeError::malformed(typ, DecodeError::InvalidLength { what: "CDC stream id", len })
        })
    }
}

/// Binds as a `blob`.
impl SerializeValue for StreamId {
    fn check_type(&self, typ: &ColumnType) -> Result<(), EncodeError> {
        self.0.check_type(typ)
    }
    fn encoded_len(&self) -> Result<usize, EncodeError> {
        self.0.encoded_len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        self.0.encode(buf)
    }
}

/// The streams read together by one query, sorted and without duplicates;
/// never empty. Cloning is cheap (the ids are shared).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct StreamGroup {
    streams: Arc<[StreamId]>,
}

impl StreamGroup {
    /// A group of these streams (sorted, duplicates removed); `None` if there
    /// are none.
    pub fn new(streams: impl IntoIterator<Item = StreamId>) -> Option<Self> {
        let mut streams: Vec<StreamId> = streams.into_iter().collect();
        streams.sort_unstable();
        streams.dedup();
        if streams.is_empty() {
            return None;
        }
        Some(StreamGroup { streams: streams.into() })
    }

    /// Groups streams by vnode index, as the official readers do for stream
    /// lists that come without grouping. Ids that are not version 1 form a
    /// group of their own. Groups are sorted by [`Self::key`].
    pub fn by_vnode(streams: impl IntoIterator<Item = StreamId>) -> Vec<StreamGroup> {
        let mut streams: Vec<StreamId> = streams.into_iter().collect();
        streams.sort_unstable_by_key(|s| (s.version() != 1, s.vnode_index(), *s));
        streams.dedup();
        let mut groups = Vec::new();
        let mut rest = streams.as_slice();
        while let Some(first) = rest.first() {
            let same = if first.version() == 1 {
                rest.iter().take_while(|s| s.version() == 1 && s.vnode_index() == first.vnode_index()).count()
            } else {
                1
            };
            let (group, tail) = rest.split_at(same);
            groups.extend(StreamGroup::new(group.iter().copied()));
            rest = tail;
        }
        groups.sort_unstable_by_key(StreamGroup::key);
        groups
    }

    /// The group's identity: its first (smallest) stream id. Unique within
    /// and across generations, since stream ids carry random bits.
    pub fn key(&self) -> StreamId {
        // Never empty by construction.
        self.streams.first().copied().unwrap_or(StreamId([0; 16]))
    }

    /// The vnode index of the group's first stream.
    pub fn vnode_index(&self) -> u32 {
        self.key().vnode_index()
    }

    /// The streams, sorted.
    pub fn streams(&self) -> &[StreamId] {
        &self.streams
    }
}

impl fmt::Debug for StreamGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamGroup")
            .field("key", &self.key())
            .field("vnode_index", &self.vnode_index())
            .field("streams", &self.streams.len())
            .finish()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn id(s: &str) -> StreamId {
        s.parse().unwrap()
    }

    #[test]
    fn decodes_the_documented_examples() {
        let a = id("0x7ffe0c687fcce86e0783343730000001");
        assert_eq!((a.token(), a.version(), a.vnode_index()), (9222822729861621870, 1, 0));
        let b = id("807ae73e07dbd4122e32d36e08000011");
        assert_eq!((b.token(), b.version(), b.vnode_index()), (-9188777836090239982, 1, 1));
        assert_eq!(id("ced00000000000009663c8dc500005a1").vnode_index(), 90);
        let tablet = id("ffffffffffffffff50e84c99d4000001");
        assert_eq!((tablet.token(), tablet.vnode_index(), tablet.version()), (-1, 0, 1));
        // The index has 22 bits: bit 26 upwards is random.
        let max = StreamId::from_bytes([0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf1]);
        assert_eq!((max.vnode_index(), max.version()), (0x3F_FFFF, 1));
    }

    #[test]
    fn text_and_blob_forms() {
        let a = id("807ae73e07dbd4122e32d36e08000011");
        assert_eq!(a.to_string(), "807ae73e07dbd4122e32d36e08000011");
        assert_eq!(format!("{a:?}"), "StreamId(807ae73e07dbd4122e32d36e08000011)");
        assert_eq!(StreamId::from_slice(a.as_bytes()), Ok(a));
        assert_eq!(StreamId::try_from(&a.as_bytes()[..15]), Err(StreamIdError::Length(15)));
        assert_eq!(StreamId::from_slice(&[0; 17]), Err(StreamIdError::Length(17)));
        assert_eq!("807a".parse::<StreamId>(), Err(StreamIdError::Hex));
        assert_eq!("zz7ae73e07dbd4122e32d36e08000011".parse::<StreamId>(), Err(StreamIdError::Hex));
        assert_eq!("807AE73E07DBD4122E32D36E08000011".parse::<StreamId>(), Ok(a));
        // Blob order: a negative token sorts after a positive one.
        assert!(id("7ffe0c687fcce86e0783343730000001") < a);
    }

    #[test]
    fn reads_and_binds_as_a_blob() {
        let a = id("807ae73e07dbd4122e32d36e08000011");
        let frame = Bytes::copy_from_slice(a.as_bytes());
        let v = StreamId::deserialize(&ColumnType::Blob, Some(FrameSlice::whole(&frame)));
        assert_eq!(v, Ok(a));
        assert!(StreamId::type_check(&ColumnType::Text).is_err());
        let short = Bytes::from_static(&[1, 2, 3]);
        assert!(matches!(
            StreamId::deserialize(&ColumnType::Blob, Some(FrameSlice::whole(&short))),
            Err(DeserializeError::Malformed { .. })
        ));
        assert!(matches!(StreamId::deserialize(&ColumnType::Blob, None), Err(DeserializeError::UnexpectedNull { .. })));
        let mut buf = Vec::new();
        assert_eq!(a.encoded_len(), Ok(20));
        a.encode(&mut buf);
        assert_eq!(&buf[..4], &[0, 0, 0, 16]);
        assert_eq!(&buf[4..], a.as_bytes());
        assert!(a.check_type(&ColumnType::Blob).is_ok());
        assert!(a.check_type(&ColumnType::Int).is_err());
    }

    fn stream(token: i64, index: u32, random: u64) -> StreamId {
        let low = (random << 26) | (u64::from(index) << 4) | 1;
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&token.to_be_bytes());
        b[8..].copy_from_slice(&low.to_be_bytes());
        StreamId::from_bytes(b)
    }

    #[test]
    fn groups() {
        assert!(StreamGroup::new([]).is_none());
        let (a, b, c) = (stream(5, 3, 1), stream(-5, 3, 2), stream(1, 3, 3));
        let g = StreamGroup::new([b, a, c, a]).unwrap();
        assert_eq!(g.streams(), &[c, a, b], "sorted as blobs, deduplicated");
        assert_eq!((g.key(), g.vnode_index()), (c, 3));

        let mut v0 = stream(9, 0, 7).as_bytes().to_owned();
        v0[15] = 0x02; // version 2: a group of its own
        let odd = StreamId::from_bytes(v0);
        let d = stream(7, 4, 9);
        let groups = StreamGroup::by_vnode([a, b, c, d, odd, odd]);
        let streams: Vec<&[StreamId]> = groups.iter().map(StreamGroup::streams).collect();
        assert_eq!(streams, vec![&[c, a, b][..], &[d][..], &[odd][..]]);
    }
}
