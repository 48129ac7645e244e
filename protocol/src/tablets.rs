//! Scylla's tablets routing extensions (`docs/protocol.md` §1.6, §1.7):
//! the custom payload a node attaches to a request's answer to tell the
//! client the tablet's token range and its replicas, so the next request
//! for that range goes to the right place. Decoded here, and encoded for
//! the emulation front.
//!
//! - `TABLETS_ROUTING_V1`: attached when the request reached a node or
//!   shard that is not a replica of the key's tablet. The value under the
//!   payload key is a CQL tuple, written as its elements without an outer
//!   length: `tuple<bigint first_token, bigint last_token,
//!   list<tuple<uuid host_id, int shard>>>`. The range is `(first_token,
//!   last_token]`.
//! - `TABLETS_ROUTING_V2_EXPERIMENTAL` (ScyllaDB's strongly consistent
//!   tables; experimental upstream): every EXECUTE ends with one byte, a
//!   block of the tablet version the client knows ([`version_block`]); the
//!   node attaches the tablet under `tablets-routing-v2`, with a fourth
//!   element, its version (`bigint`), when that block does not match.

use bytes::BufMut;
use uuid::Uuid;

use crate::codec::Reader;
use crate::error::DecodeError;

/// The STARTUP (and SUPPORTED) key that turns the extension on.
pub const TABLETS_ROUTING_V1: &str = "TABLETS_ROUTING_V1";

/// The custom payload key of a tablet's routing information.
pub const PAYLOAD_KEY: &str = "tablets-routing-v1";

/// The STARTUP (and SUPPORTED) key of tablets routing v2, under the name
/// ScyllaDB gives it while it is experimental.
pub const TABLETS_ROUTING_V2: &str = "TABLETS_ROUTING_V2_EXPERIMENTAL";

/// The custom payload key of a tablet's routing information, v2.
pub const PAYLOAD_KEY_V2: &str = "tablets-routing-v2";

/// Block `index` (0–15, taken modulo 16) of `version`, as an EXECUTE
/// carries it: the index in the high nibble, bits `[4 * index, 4 * index +
/// 4)` of the version in the low one.
pub fn version_block(version: u64, index: u8) -> u8 {
    let index = index & 0x0F;
    (index << 4) | ((version >> (4 * u32::from(index))) & 0x0F) as u8
}

/// Whether `block` (see [`version_block`]) is a block of `version`.
pub fn block_matches(version: u64, block: u8) -> bool {
    version_block(version, block >> 4) == block
}

/// One replica of a tablet: a node, by host id, and the shard on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TabletReplica {
    /// The node's host id (`system.local` / `system.peers`).
    pub host_id: Uuid,
    /// The shard of that node holding the tablet.
    pub shard: u16,
}

/// A tablet's routing information: the tokens `first_token + 1 ..=
/// last_token` and their replicas in the tablet's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TabletRoute {
    /// The range start, exclusive (`i64::MIN` for a table's first tablet).
    pub first_token: i64,
    /// The range end, inclusive.
    pub last_token: i64,
    /// The replicas (v2: for a strongly consistent table, the Raft leader
    /// first).
    pub replicas: Vec<TabletReplica>,
    /// The tablet's version (v2 only).
    pub version: Option<u64>,
}

/// At most this many replicas are read (a replication factor is far
/// smaller); more is a hostile length, not a tablet.
const MAX_REPLICAS: usize = 256;

impl TabletRoute {
    /// Whether `token` is in the tablet's range.
    pub fn contains(&self, token: i64) -> bool {
        token > self.first_token && token <= self.last_token
    }

    /// Reads the payload value of v1. An empty or wrapping range
    /// (`last_token <= first_token`), a shard that does not fit a shard
    /// number, or bytes left over are errors.
    pub fn decode(value: &[u8]) -> Result<TabletRoute, DecodeError> {
        TabletRoute::decode_as(value, false)
    }

    /// Reads the payload value of v2 (v1's and the version), with v1's
    /// checks.
    pub fn decode_v2(value: &[u8]) -> Result<TabletRoute, DecodeError> {
        TabletRoute::decode_as(value, true)
    }

    fn decode_as(value: &[u8], v2: bool) -> Result<TabletRoute, DecodeError> {
        let mut r = Reader::new(value);
        let first_token = bigint(&mut r, "tablet first token")?;
        let last_token = bigint(&mut r, "tablet last token")?;
        if last_token <= first_token {
            return Err(DecodeError::Invalid { what: "tablet range", reason: "last token not above first token" });
        }
        let list =
            r.bytes("tablet replicas")?.ok_or(DecodeError::Invalid { what: "tablet replicas", reason: "null" })?;
        let version = match v2 {
            true => Some(bigint(&mut r, "tablet version")? as u64),
            false => None,
        };
        r.finish("tablets routing payload")?;
        let mut l = Reader::new(list);
        let n = l.len_i32("tablet replica count")?;
        if n > MAX_REPLICAS {
            return Err(DecodeError::TooLarge { what: "tablet replica list", len: n, limit: MAX_REPLICAS });
        }
        let mut replicas = Vec::with_capacity(n);
        for _ in 0..n {
            let element =
                l.bytes("tablet replica")?.ok_or(DecodeError::Invalid { what: "tablet replica", reason: "null" })?;
            let mut e = Reader::new(element);
            let id =
                e.bytes("replica host id")?.ok_or(DecodeError::Invalid { what: "replica host id", reason: "null" })?;
            let host_id = Uuid::from_slice(id)
                .map_err(|_| DecodeError::Invalid { what: "replica host id", reason: "not 16 bytes" })?;
            let shard =
                e.bytes("replica shard")?.ok_or(DecodeError::Invalid { what: "replica shard", reason: "null" })?;
            let shard = <[u8; 4]>::try_from(shard)
                .map_err(|_| DecodeError::Invalid { what: "replica shard", reason: "not 4 bytes" })?;
            let shard = u16::try_from(i32::from_be_bytes(shard))
                .map_err(|_| DecodeError::Invalid { what: "replica shard", reason: "out of range" })?;
            e.finish("tablet replica")?;
            replicas.push(TabletReplica { host_id, shard });
        }
        l.finish("tablet replica list")?;
        Ok(TabletRoute { first_token, last_token, replicas, version })
    }

    /// The payload key this route is sent under: v2's with a version.
    pub fn payload_key(&self) -> &'static str {
        if self.version.is_some() {
            PAYLOAD_KEY_V2
        } else {
            PAYLOAD_KEY
        }
    }

    /// Writes the payload value (what [`TabletRoute::decode`] reads, or
    /// with a version [`TabletRoute::decode_v2`]).
    pub fn encode(&self, out: &mut impl BufMut) {
        for token in [self.first_token, self.last_token] {
            out.put_i32(8);
            out.put_i64(token);
        }
        // Each replica: [int 16][uuid][int 4][int shard] inside its own [int] length.
        const REPLICA: usize = 4 + 16 + 4 + 4;
        let list_len = 4 + self.replicas.len() * (4 + REPLICA);
        out.put_i32(list_len as i32);
        out.put_i32(self.replicas.len() as i32);
        for r in &self.replicas {
            out.put_i32(REPLICA as i32);
            out.put_i32(16);
            out.put_slice(r.host_id.as_bytes());
            out.put_i32(4);
            out.put_i32(i32::from(r.shard));
        }
        if let Some(version) = self.version {
            out.put_i32(8);
            out.put_u64(version);
        }
    }
}

fn bigint(r: &mut Reader<'_>, what: &'static str) -> Result<i64, DecodeError> {
    let b = r.bytes(what)?.ok_or(DecodeError::Invalid { what, reason: "null" })?;
    let b = <[u8; 8]>::try_from(b).map_err(|_| DecodeError::Invalid { what, reason: "not 8 bytes" })?;
    Ok(i64::from_be_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route() -> TabletRoute {
        TabletRoute {
            first_token: i64::MIN,
            last_token: -4611686018427387905,
            replicas: vec![
                TabletReplica { host_id: Uuid::from_u128(0x1111), shard: 3 },
                TabletReplica { host_id: Uuid::from_u128(0x2222), shard: 0 },
            ],
            version: None,
        }
    }

    #[test]
    fn round_trip_and_layout() {
        let mut buf = Vec::new();
        route().encode(&mut buf);
        assert_eq!(TabletRoute::decode(&buf), Ok(route()));
        // Two bigints, then the list: [int len][int 2] and two 32-byte elements.
        assert_eq!(buf.len(), 12 + 12 + 4 + 4 + 2 * 32);
        assert_eq!(&buf[..4], &[0, 0, 0, 8]);
        assert_eq!(&buf[24..32], &[0, 0, 0, 68, 0, 0, 0, 2]);
        let r = route();
        assert!(r.contains(i64::MIN + 1) && r.contains(-4611686018427387905));
        assert!(!r.contains(i64::MIN) && !r.contains(-4611686018427387904));
    }

    #[test]
    fn v2_carries_the_version_and_blocks_name_its_nibbles() {
        let v2 = TabletRoute { version: Some(0xFEDC_BA98_7654_3210), ..route() };
        let mut buf = Vec::new();
        v2.encode(&mut buf);
        assert_eq!(TabletRoute::decode_v2(&buf), Ok(v2.clone()));
        assert!(TabletRoute::decode(&buf).is_err(), "v1 refuses the version element");
        let mut v1 = Vec::new();
        route().encode(&mut v1);
        assert!(TabletRoute::decode_v2(&v1).is_err(), "v2 needs the version");
        for n in 0..buf.len() {
            assert!(TabletRoute::decode_v2(&buf[..n]).is_err(), "{n} bytes");
        }
        assert_eq!((v2.payload_key(), route().payload_key()), (PAYLOAD_KEY_V2, PAYLOAD_KEY));
        // ScyllaDB's docs: block 13 equal to 0xC is the byte 0xDC.
        assert_eq!(version_block(0xC << 52, 13), 0xDC);
        let version = 0xFEDC_BA98_7654_3210u64;
        for index in 0..16u8 {
            let block = version_block(version, index);
            assert_eq!(block, index << 4 | index, "block {index}: nibble i of this version is i");
            assert!(block_matches(version, block));
            assert!(!block_matches(version, block ^ 1), "another nibble");
        }
        assert_eq!(version_block(version, 17), version_block(version, 1), "the index is taken modulo 16");
    }

    #[test]
    fn hostile_values_are_typed_errors() {
        let mut good = Vec::new();
        route().encode(&mut good);
        // Every truncation fails without a panic.
        for n in 0..good.len() {
            assert!(TabletRoute::decode(&good[..n]).is_err(), "{n} bytes");
        }
        // Trailing bytes.
        let mut long = good.clone();
        long.push(0);
        assert!(TabletRoute::decode(&long).is_err());
        // An empty or wrapping range.
        let mut empty = route();
        empty.first_token = empty.last_token;
        let mut buf = Vec::new();
        empty.encode(&mut buf);
        assert!(matches!(TabletRoute::decode(&buf), Err(DecodeError::Invalid { what: "tablet range", .. })));
        // A shard beyond u16.
        let mut big = good.clone();
        let at = good.len() - 4;
        big[at..].copy_from_slice(&70_000i32.to_be_bytes());
        assert!(matches!(TabletRoute::decode(&big), Err(DecodeError::Invalid { what: "replica shard", .. })));
        // A replica count far beyond any replication factor.
        let mut many = good.clone();
        many[28..32].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(TabletRoute::decode(&many), Err(DecodeError::TooLarge { .. })));
    }
}
