//! Scylla shard awareness: which shard owns a token, what a node's SUPPORTED says about its
//! shards, and which source ports land a connection on a given shard.
//!
//! Follows `docs/protocol.md` §1.2–§1.3 and §2:
//!
//! - [`Sharder::shard_of`]: the `biased-token-round-robin` algorithm (§2.1).
//! - [`ShardingInfo::from_supported`]: the `SCYLLA_*` sharding keys of a SUPPORTED response.
//! - [`ShardPortIterator`]: the local ports `p` with `p % nr_shards == shard` in a range, for
//!   binding a socket before connecting to the shard-aware port (§2.5).
//!
//! For tablet tables the owning shard comes from the tablet replica list, not from
//! [`Sharder::shard_of`] (§2.3); the static algorithm remains right for vnode tables.
//!
//! # Allocation
//!
//! [`Sharder::shard_of`] and [`ShardPortIterator`] never allocate.
//! [`ShardingInfo::from_supported`] allocates only when it fails, to keep an unparsable value
//! in the returned [`ShardingError`].
//!
//! ```
//! use std::num::NonZeroU16;
//! use shardwise_protocol::sharding::{ShardingInfo, ShardPortIterator};
//! use shardwise_protocol::token::Token;
//!
//! let supported: Vec<(&str, Vec<&str>)> = vec![
//!     ("SCYLLA_SHARD", vec!["1"]),
//!     ("SCYLLA_NR_SHARDS", vec!["4"]),
//!     ("SCYLLA_SHARDING_IGNORE_MSB", vec!["12"]),
//!     ("SCYLLA_PARTITIONER", vec!["org.apache.cassandra.dht.Murmur3Partitioner"]),
//!     ("SCYLLA_SHARDING_ALGORITHM", vec!["biased-token-round-robin"]),
//!     ("SCYLLA_SHARD_AWARE_PORT", vec!["19042"]),
//! ];
//! let info = ShardingInfo::from_supported(&supported)?.expect("a Scylla node");
//! assert_eq!(info.shard(), 1);
//! assert_eq!(info.sharder().shard_of(Token::new(-9219783007514621794)), 3);
//!
//! // Source ports that put a new connection on shard 3.
//! let mut ports = ShardPortIterator::new(3, info.sharder().nr_shards(), 49152..=65535, 0);
//! assert_eq!(ports.next(), Some(49155));
//! assert_eq!(ports.next(), Some(49159));
//! # Ok::<(), shardwise_protocol::sharding::ShardingError>(())
//! ```

use std::iter::FusedIterator;
use std::num::NonZeroU16;
use std::ops::RangeInclusive;

use crate::token::{Partitioner, Token};

/// SUPPORTED key: the shard that serves this connection (decimal).
pub const SCYLLA_SHARD: &str = "SCYLLA_SHARD";
/// SUPPORTED key: the number of shards of the node (decimal).
pub const SCYLLA_NR_SHARDS: &str = "SCYLLA_NR_SHARDS";
/// SUPPORTED key: the number of most significant token bits ignored by sharding (decimal).
pub const SCYLLA_SHARDING_IGNORE_MSB: &str = "SCYLLA_SHARDING_IGNORE_MSB";
/// SUPPORTED key: the node's default partitioner class name.
pub const SCYLLA_PARTITIONER: &str = "SCYLLA_PARTITIONER";
/// SUPPORTED key: the sharding algorithm name.
pub const SCYLLA_SHARDING_ALGORITHM: &str = "SCYLLA_SHARDING_ALGORITHM";
/// SUPPORTED key: the plain-text shard-aware port (decimal).
pub const SCYLLA_SHARD_AWARE_PORT: &str = "SCYLLA_SHARD_AWARE_PORT";
/// SUPPORTED key: the TLS shard-aware port (decimal).
pub const SCYLLA_SHARD_AWARE_PORT_SSL: &str = "SCYLLA_SHARD_AWARE_PORT_SSL";

/// The only sharding algorithm there is, and the only one this crate computes.
pub const BIASED_TOKEN_ROUND_ROBIN: &str = "biased-token-round-robin";

/// The source-port range the scylla-rust-driver uses by default: the IANA ephemeral ports.
pub const DEFAULT_SHARD_PORT_RANGE: RangeInclusive<u16> = 49152..=65535;

/// The SUPPORTED sharding information could not be used.
///
/// A node whose SUPPORTED yields one of these should be treated as not shard-aware (route by
/// node only) — the values are a server bug or an algorithm this crate does not know, and must
/// not be guessed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardingError {
    /// A sharding key appeared more than once in the multimap.
    #[error("SUPPORTED key {key} appears more than once")]
    DuplicateKey {
        /// The repeated key.
        key: &'static str,
    },
    /// `ignore_msb` is 64 or more: every token would shift to zero.
    #[error("sharding ignore_msb {ignore_msb} is not below 64")]
    IgnoreMsbTooLarge {
        /// The value found.
        ignore_msb: u8,
    },
    /// A value did not parse as the expected number (or was a zero port).
    #[error("SUPPORTED key {key} has invalid value {value:?}")]
    InvalidValue {
        /// The key.
        key: &'static str,
        /// The value as sent.
        value: String,
    },
    /// Some sharding keys were present but this one was missing.
    #[error("SUPPORTED has sharding keys but lacks {key}")]
    MissingKey {
        /// The missing key.
        key: &'static str,
    },
    /// The connection's shard is not below the node's shard count.
    #[error("shard {shard} is out of range for {nr_shards} shards")]
    ShardOutOfRange {
        /// `SCYLLA_SHARD`.
        shard: u16,
        /// `SCYLLA_NR_SHARDS`.
        nr_shards: u16,
    },
    /// `SCYLLA_SHARDING_ALGORITHM` is not `biased-token-round-robin`.
    #[error("unsupported sharding algorithm {name:?}")]
    UnsupportedAlgorithm {
        /// The algorithm named by the server.
        name: String,
    },
    /// `SCYLLA_PARTITIONER` is not a Murmur3 partitioner.
    #[error("unsupported partitioner {name:?}")]
    UnsupportedPartitioner {
        /// The class name sent by the server.
        name: String,
    },
    /// A key carried zero or several values instead of exactly one.
    #[error("SUPPORTED key {key} has {count} values, expected exactly one")]
    ValueCount {
        /// The key.
        key: &'static str,
        /// How many values it had.
        count: usize,
    },
    /// `SCYLLA_NR_SHARDS` is zero.
    #[error("SCYLLA_NR_SHARDS is zero")]
    ZeroShards,
}

/// The `biased-token-round-robin` sharding of one node: `nr_shards` and `ignore_msb`.
///
/// With `ignore_msb = k`, the token ring is cut into `nr_shards · 2^k` equal slices assigned to
/// shards round-robin (§2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sharder {
    /// Number of shards, at least one.
    nr_shards: NonZeroU16,
    /// Most significant bits of the biased token to drop; always below 64.
    ignore_msb: u8,
}

impl Sharder {
    /// A sharder for `nr_shards` shards ignoring the `ignore_msb` most significant token bits
    /// (Scylla's default is 12).
    ///
    /// # Errors
    ///
    /// [`ShardingError::IgnoreMsbTooLarge`] if `ignore_msb >= 64`.
    pub const fn new(nr_shards: NonZeroU16, ignore_msb: u8) -> Result<Sharder, ShardingError> {
        if ignore_msb >= 64 {
            return Err(ShardingError::IgnoreMsbTooLarge { ignore_msb });
        }
        Ok(Sharder { nr_shards, ignore_msb })
    }

    /// The number of shards.
    pub const fn nr_shards(&self) -> NonZeroU16 {
        self.nr_shards
    }

    /// The number of ignored most significant bits.
    pub const fn ignore_msb(&self) -> u8 {
        self.ignore_msb
    }

    /// The shard (in `0..nr_shards`) that owns `token`.
    ///
    /// Bias the token to an unsigned offset from `i64::MIN`, drop the `ignore_msb` top bits,
    /// read the rest as a fraction of 2^64 and scale it by the shard count.
    pub const fn shard_of(&self, token: Token) -> u16 {
        let biased = (token.value() as u64).wrapping_add(1 << 63);
        // `ignore_msb < 64` is an invariant of the type, so the shift cannot overflow.
        let shifted = biased << self.ignore_msb;
        let scaled = (shifted as u128 * self.nr_shards.get() as u128) >> 64;
        // `scaled < nr_shards <= u16::MAX`.
        scaled as u16
    }

    /// The shard a connection to the shard-aware port lands on when it comes from `port`
    /// (`port % nr_shards`, §2.4).
    pub const fn shard_of_source_port(&self, port: u16) -> u16 {
        port % self.nr_shards.get()
    }
}

/// What a Scylla node's SUPPORTED response says about sharding (§1.2, §1.3).
///
/// Invariant: `shard < nr_shards`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardingInfo {
    /// The shard serving the connection that received this SUPPORTED.
    shard: u16,
    /// The node's sharding.
    sharder: Sharder,
    /// `SCYLLA_SHARD_AWARE_PORT`, if advertised.
    shard_aware_port: Option<u16>,
    /// `SCYLLA_SHARD_AWARE_PORT_SSL`, if advertised.
    shard_aware_port_ssl: Option<u16>,
}

impl ShardingInfo {
    /// Reads the sharding keys from a decoded SUPPORTED `[string multimap]`.
    ///
    /// See [`from_entries`](Self::from_entries) for the rules.
    ///
    /// # Errors
    ///
    /// As [`from_entries`](Self::from_entries).
    pub fn from_supported(supported: &[(&str, Vec<&str>)]) -> Result<Option<ShardingInfo>, ShardingError> {
        ShardingInfo::from_entries(supported.iter().map(|(key, values)| (*key, values.iter())))
    }

    /// Reads the sharding keys from any `(key, values)` multimap entries, in one pass.
    ///
    /// The five sharding keys are `SCYLLA_SHARD`, `SCYLLA_NR_SHARDS`,
    /// `SCYLLA_SHARDING_IGNORE_MSB`, `SCYLLA_PARTITIONER` and `SCYLLA_SHARDING_ALGORITHM`.
    /// Each must hold exactly one value.
    ///
    /// - None of the five present: `Ok(None)` — not Scylla, or shard awareness disabled on
    ///   the node (shard-aware ports alone are then ignored). This is what Cassandra sends.
    /// - All five present and valid: `Ok(Some(_))`. The partitioner must be a Murmur3
    ///   partitioner (matched by class-name suffix, as everywhere else) and the algorithm
    ///   exactly `biased-token-round-robin`; the shard must be below the shard count, the
    ///   shard count non-zero and `ignore_msb` below 64. The two shard-aware ports are
    ///   optional; when present each must be a non-zero `u16`.
    /// - Anything else: an error. Callers should then proceed without shard awareness.
    ///
    /// Other keys are ignored.
    ///
    /// # Errors
    ///
    /// A [`ShardingError`] naming the first problem found.
    pub fn from_entries<I, K, V, S>(entries: I) -> Result<Option<ShardingInfo>, ShardingError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut shard = Slot::new(SCYLLA_SHARD);
        let mut nr_shards = Slot::new(SCYLLA_NR_SHARDS);
        let mut ignore_msb = Slot::new(SCYLLA_SHARDING_IGNORE_MSB);
        let mut partitioner = Slot::new(SCYLLA_PARTITIONER);
        let mut algorithm = Slot::new(SCYLLA_SHARDING_ALGORITHM);
        let mut port = Slot::new(SCYLLA_SHARD_AWARE_PORT);
        let mut port_ssl = Slot::new(SCYLLA_SHARD_AWARE_PORT_SSL);

        for (key, values) in entries {
            match key.as_ref() {
                SCYLLA_SHARD => shard.set(values, parse_number::<u16>)?,
                SCYLLA_NR_SHARDS => nr_shards.set(values, parse_number::<u16>)?,
                SCYLLA_SHARDING_IGNORE_MSB => ignore_msb.set(values, parse_number::<u8>)?,
                SCYLLA_PARTITIONER => partitioner.set(values, |_, name| match Partitioner::from_class_name(name) {
                    Some(Partitioner::Murmur3) => Ok(()),
                    _ => Err(ShardingError::UnsupportedPartitioner { name: name.to_owned() }),
                })?,
                SCYLLA_SHARDING_ALGORITHM => algorithm.set(values, |_, name| {
                    if name == BIASED_TOKEN_ROUND_ROBIN {
                        Ok(())
                    } else {
                        Err(ShardingError::UnsupportedAlgorithm { name: name.to_owned() })
                    }
                })?,
                SCYLLA_SHARD_AWARE_PORT => port.set(values, parse_port)?,
                SCYLLA_SHARD_AWARE_PORT_SSL => port_ssl.set(values, parse_port)?,
                _ => {}
            }
        }

        if !(shard.seen || nr_shards.seen || ignore_msb.seen || partitioner.seen || algorithm.seen) {
            return Ok(None);
        }
        let shard = shard.required()?;
        let nr_shards = nr_shards.required()?;
        let ignore_msb = ignore_msb.required()?;
        partitioner.required()?;
        algorithm.required()?;

        let nr_shards = NonZeroU16::new(nr_shards).ok_or(ShardingError::ZeroShards)?;
        if shard >= nr_shards.get() {
            return Err(ShardingError::ShardOutOfRange { shard, nr_shards: nr_shards.get() });
        }
        Ok(Some(ShardingInfo {
            shard,
            sharder: Sharder::new(nr_shards, ignore_msb)?,
            shard_aware_port: port.value,
            shard_aware_port_ssl: port_ssl.value,
        }))
    }

    /// The shard serving the connection whose SUPPORTED this came from (`SCYLLA_SHARD`).
    pub const fn shard(&self) -> u16 {
        self.shard
    }

    /// The node's sharding (`SCYLLA_NR_SHARDS`, `SCYLLA_SHARDING_IGNORE_MSB`).
    pub const fn sharder(&self) -> Sharder {
        self.sharder
    }

    /// The plain-text shard-aware port, if the node advertises one.
    pub const fn shard_aware_port(&self) -> Option<u16> {
        self.shard_aware_port
    }

    /// The TLS shard-aware port, if the node advertises one.
    pub const fn shard_aware_port_ssl(&self) -> Option<u16> {
        self.shard_aware_port_ssl
    }

    /// The shard-aware port to use for a plain (`tls == false`) or TLS connection.
    pub const fn shard_aware_port_for(&self, tls: bool) -> Option<u16> {
        if tls {
            self.shard_aware_port_ssl
        } else {
            self.shard_aware_port
        }
    }
}

/// One sharding key while scanning the multimap: whether it was seen and its parsed value.
struct Slot<T> {
    /// The key's name.
    key: &'static str,
    /// Whether the key appeared.
    seen: bool,
    /// The parsed value once seen.
    value: Option<T>,
}

impl<T> Slot<T> {
    /// An empty slot for `key`.
    const fn new(key: &'static str) -> Slot<T> {
        Slot { key, seen: false, value: None }
    }

    /// Records the key's values: exactly one, parsed by `parse`, and the key at most once.
    fn set<V, S>(
        &mut self,
        values: V,
        parse: impl FnOnce(&'static str, &str) -> Result<T, ShardingError>,
    ) -> Result<(), ShardingError>
    where
        V: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        if self.seen {
            return Err(ShardingError::DuplicateKey { key: self.key });
        }
        self.seen = true;
        let mut values = values.into_iter();
        let Some(first) = values.next() else {
            return Err(ShardingError::ValueCount { key: self.key, count: 0 });
        };
        let extra = values.count();
        if extra > 0 {
            return Err(ShardingError::ValueCount { key: self.key, count: 1 + extra });
        }
        self.value = Some(parse(self.key, first.as_ref())?);
        Ok(())
    }

    /// The value, or [`ShardingError::MissingKey`].
    fn required(self) -> Result<T, ShardingError> {
        self.value.ok_or(ShardingError::MissingKey { key: self.key })
    }
}

/// Parses a decimal number for `key`.
fn parse_number<T: std::str::FromStr>(key: &'static str, value: &str) -> Result<T, ShardingError> {
    value.parse().map_err(|_| ShardingError::InvalidValue { key, value: value.to_owned() })
}

/// Parses a non-zero decimal port for `key`.
fn parse_port(key: &'static str, value: &str) -> Result<u16, ShardingError> {
    match parse_number::<u16>(key, value)? {
        0 => Err(ShardingError::InvalidValue { key, value: value.to_owned() }),
        port => Ok(port),
    }
}

/// The local ports of a range that land a shard-aware connection on one shard.
///
/// Yields every port `p` of the range with `p % nr_shards == shard` exactly once, in ascending
/// order starting from the candidate at index `start_offset % len` and wrapping around to the
/// lowest candidate. The scylla-rust-driver starts at a random candidate so that concurrent
/// clients spread out; pick `start_offset` at random in `0..len` (with `len` from
/// [`ExactSizeIterator::len`] of an iterator built with offset 0) to do the same — this crate
/// has no randomness of its own.
///
/// Bind the socket to each port in turn before connecting to the shard-aware port, moving on
/// when binding fails with "address in use" (§2.5). The range is taken as given: keep it above
/// the privileged ports (the scylla-rust-driver requires a start of at least 1024; gocql uses
/// 32768–65535, see also [`DEFAULT_SHARD_PORT_RANGE`]).
///
/// The iterator is empty if `shard >= nr_shards` or the range holds no candidate.
///
/// ```
/// use std::num::NonZeroU16;
/// use shardwise_protocol::sharding::ShardPortIterator;
///
/// let n = NonZeroU16::new(4).expect("non-zero");
/// let ports: Vec<u16> = ShardPortIterator::new(1, n, 10..=25, 2).collect();
/// assert_eq!(ports, [21, 25, 13, 17]);
/// ```
#[derive(Debug, Clone)]
pub struct ShardPortIterator {
    /// The lowest candidate port.
    first: u32,
    /// Distance between candidates (`nr_shards`).
    step: u32,
    /// Number of candidates in the range.
    count: u32,
    /// Index of the next candidate to yield.
    cursor: u32,
    /// Candidates not yet yielded.
    remaining: u32,
}

impl ShardPortIterator {
    /// The candidates for `shard` of `nr_shards` in `range`, starting at candidate index
    /// `start_offset` (taken modulo the number of candidates).
    pub fn new(
        shard: u16,
        nr_shards: NonZeroU16,
        range: RangeInclusive<u16>,
        start_offset: usize,
    ) -> ShardPortIterator {
        let step = u32::from(nr_shards.get());
        let (low, high) = (u32::from(*range.start()), u32::from(*range.end()));
        let shard = u32::from(shard);
        // Lowest p >= low with p % step == shard.
        let first = low + (step - low % step + shard) % step;
        let count = if shard >= step || low > high || first > high { 0 } else { (high - first) / step + 1 };
        let cursor = match count {
            0 => 0,
            // `count <= 65536`, so the remainder fits in `u32`.
            _ => (start_offset % count as usize) as u32,
        };
        ShardPortIterator { first, step, count, cursor, remaining: count }
    }
}

impl Iterator for ShardPortIterator {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        if self.remaining == 0 {
            return None;
        }
        let port = self.first + self.cursor * self.step;
        self.remaining -= 1;
        self.cursor += 1;
        if self.cursor == self.count {
            self.cursor = 0;
        }
        // Every candidate lies inside a `u16` range, so the conversion cannot fail.
        u16::try_from(port).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for ShardPortIterator {}

impl FusedIterator for ShardPortIterator {}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests may panic on broken fixtures.
mod tests {
    use super::*;

    fn sharder(nr_shards: u16, ignore_msb: u8) -> Sharder {
        Sharder::new(NonZeroU16::new(nr_shards).unwrap(), ignore_msb).unwrap()
    }

    /// §2.2: the representative [GOCQL] subset (nr_shards = 4, ignore_msb = 12).
    #[test]
    fn gocql_subset() {
        let s = sharder(4, 12);
        let cases: [(i64, u16); 13] = [
            (-9219783007514621794, 3),
            (-9218910161940551519, 3),
            (-9217148724365525195, 1),
            (-9215501124608928187, 2),
            (-9209452951616763088, 0),
            (-3790811379916698, 0),
            (-1161327067926650, 2),
            (337365398009672, 0),
            (1835083890227297, 1),
            (9201200566037300421, 0),
            (9203923190973454807, 2),
            (9207233672484108073, 1),
            (9222582454147032830, 3),
        ];
        for (token, shard) in cases {
            assert_eq!(s.shard_of(Token::new(token)), shard, "token {token}");
        }
    }

    /// §2.2: [JD3] key → token → shard (nr_shards = 12, ignore_msb = 12).
    #[test]
    fn jd3_key_to_shard() {
        let s = sharder(12, 12);
        let cases: [(&str, i64, u16); 5] = [
            ("a", -8839064797231613815, 4),
            ("b", 8833996863197925870, 6),
            ("c", -8198557465434950441, 6),
            ("e", -4200008757497435756, 4),
            ("100000", 2739050094959918959, 2),
        ];
        for (key, token, shard) in cases {
            let t = Token::murmur3(key.as_bytes());
            assert_eq!(t.value(), token, "token of {key:?}");
            assert_eq!(s.shard_of(t), shard, "shard of {key:?}");
        }
    }

    /// Checks that `starts[i]` is the first token of slice `i` (shard `i % nr_shards`) and that
    /// the token before it is in slice `i - 1`.
    fn check_slices(s: Sharder, starts: &[i64]) {
        let n = s.nr_shards().get();
        assert_eq!(starts.len(), usize::from(n) << s.ignore_msb());
        for (i, &start) in starts.iter().enumerate() {
            let shard = (i % usize::from(n)) as u16;
            assert_eq!(s.shard_of(Token::new(start)), shard, "slice {i} start {start}");
            if i > 0 {
                let prev = ((i - 1) % usize::from(n)) as u16;
                assert_eq!(s.shard_of(Token::new(start - 1)), prev, "before slice {i}");
            }
        }
        // The minimum token and the listed start of slice 0 are both in slice 0; the maximum
        // token is in the last slice.
        assert_eq!(s.shard_of(Token::MIN), 0);
        let last = ((starts.len() - 1) % usize::from(n)) as u16;
        assert_eq!(s.shard_of(Token::MAX), last);
    }

    /// §2.2: [SCY] slice starts for nr_shards = 7, ignore_msb = 0.
    #[test]
    fn scylla_slices_7_0() {
        check_slices(
            sharder(7, 0),
            &[
                -9223372036854775807,
                -6588122883467697005,
                -3952873730080618203,
                -1317624576693539401,
                1317624576693539402,
                3952873730080618204,
                6588122883467697006,
            ],
        );
    }

    /// §2.2: [SCY] slice starts for nr_shards = 2, ignore_msb = 0.
    #[test]
    fn scylla_slices_2_0() {
        let s = sharder(2, 0);
        check_slices(s, &[-9223372036854775807, 0]);
        assert_eq!(s.shard_of(Token::new(-1)), 0);
        assert_eq!(s.shard_of(Token::new(0)), 1);
    }

    /// §2.2: [SCY] slice starts for nr_shards = 7, ignore_msb = 2 (28 slices).
    #[test]
    fn scylla_slices_7_2() {
        check_slices(
            sharder(7, 2),
            &[
                -9223372036854775807,
                -8564559748508006107,
                -7905747460161236406,
                -7246935171814466706,
                -6588122883467697005,
                -5929310595120927305,
                -5270498306774157604,
                -4611686018427387904,
                -3952873730080618203,
                -3294061441733848502,
                -2635249153387078802,
                -1976436865040309101,
                -1317624576693539401,
                -658812288346769700,
                0,
                658812288346769701,
                1317624576693539402,
                1976436865040309102,
                2635249153387078803,
                3294061441733848503,
                3952873730080618204,
                4611686018427387904,
                5270498306774157605,
                5929310595120927306,
                6588122883467697006,
                7246935171814466707,
                7905747460161236407,
                8564559748508006108,
            ],
        );
    }

    /// §2.2: [SCY] nr_shards = 2, ignore_msb = 4: 32 slices every 2^59 tokens.
    #[test]
    fn scylla_slices_2_4() {
        let mut starts = vec![-9223372036854775807];
        starts.extend((1..32i128).map(|k| i64::try_from(i128::from(i64::MIN) + k * 576460752303423488).unwrap()));
        assert_eq!(starts[1], -8646911284551352320);
        assert_eq!(starts[31], 8646911284551352320);
        check_slices(sharder(2, 4), &starts);
    }

    /// The u128 product equals the portable 64-bit split form of §2.1.
    #[test]
    fn matches_portable_form() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let token = Token::new(x as i64);
            for (n, msb) in [(1u16, 0u8), (3, 12), (12, 12), (65535, 0), (64, 63), (7, 2)] {
                let biased = (x.wrapping_add(1 << 63)) << msb;
                let (lo, hi) = (biased & 0xffff_ffff, biased >> 32);
                let n64 = u64::from(n);
                let portable = (((lo * n64) >> 32) + hi * n64) >> 32;
                assert_eq!(u64::from(sharder(n, msb).shard_of(token)), portable);
            }
        }
    }

    #[test]
    fn sharder_limits() {
        let one = NonZeroU16::new(1).unwrap();
        assert_eq!(Sharder::new(one, 64), Err(ShardingError::IgnoreMsbTooLarge { ignore_msb: 64 }));
        assert!(Sharder::new(one, 63).is_ok());
        let max = sharder(u16::MAX, 0);
        assert_eq!(max.shard_of(Token::MIN), 0);
        assert_eq!(max.shard_of(Token::MAX), u16::MAX - 1);
        assert_eq!(sharder(1, 12).shard_of(Token::MAX), 0);
        assert_eq!(sharder(4, 12).shard_of_source_port(19045), 1);
    }

    fn full() -> Vec<(&'static str, Vec<&'static str>)> {
        vec![
            ("CQL_VERSION", vec!["3.3.1"]),
            ("COMPRESSION", vec!["lz4", "snappy"]),
            ("SCYLLA_SHARD", vec!["5"]),
            ("SCYLLA_NR_SHARDS", vec!["12"]),
            ("SCYLLA_SHARDING_IGNORE_MSB", vec!["12"]),
            ("SCYLLA_PARTITIONER", vec!["org.apache.cassandra.dht.Murmur3Partitioner"]),
            ("SCYLLA_SHARDING_ALGORITHM", vec!["biased-token-round-robin"]),
            ("SCYLLA_SHARD_AWARE_PORT", vec!["19042"]),
            ("SCYLLA_SHARD_AWARE_PORT_SSL", vec!["19142"]),
        ]
    }

    fn with(key: &str, values: Vec<&'static str>) -> Vec<(&'static str, Vec<&'static str>)> {
        let mut map = full();
        let entry = map.iter_mut().find(|(k, _)| *k == key).unwrap();
        entry.1 = values;
        map
    }

    fn without(key: &str) -> Vec<(&'static str, Vec<&'static str>)> {
        full().into_iter().filter(|(k, _)| *k != key).collect()
    }

    #[test]
    fn parses_full_supported() {
        let info = ShardingInfo::from_supported(&full()).unwrap().unwrap();
        assert_eq!(info.shard(), 5);
        assert_eq!(info.sharder(), sharder(12, 12));
        assert_eq!(info.shard_aware_port(), Some(19042));
        assert_eq!(info.shard_aware_port_ssl(), Some(19142));
        assert_eq!(info.shard_aware_port_for(false), Some(19042));
        assert_eq!(info.shard_aware_port_for(true), Some(19142));

        // Ports are optional.
        let map = without(SCYLLA_SHARD_AWARE_PORT);
        let map: Vec<_> = map.into_iter().filter(|(k, _)| *k != SCYLLA_SHARD_AWARE_PORT_SSL).collect();
        let info = ShardingInfo::from_supported(&map).unwrap().unwrap();
        assert_eq!((info.shard_aware_port(), info.shard_aware_port_ssl()), (None, None));

        // Owned strings through the generic entry point.
        let owned: Vec<(String, Vec<String>)> =
            full().into_iter().map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect())).collect();
        assert_eq!(
            ShardingInfo::from_entries(owned.iter().map(|(k, v)| (k, v))).unwrap(),
            ShardingInfo::from_supported(&full()).unwrap()
        );
    }

    #[test]
    fn cassandra_supported_has_no_sharding() {
        let cassandra = vec![
            ("CQL_VERSION", vec!["3.4.7"]),
            ("COMPRESSION", vec!["lz4", "snappy"]),
            ("PROTOCOL_VERSIONS", vec!["3/v3", "4/v4", "5/v5", "6/v6-beta"]),
        ];
        assert_eq!(ShardingInfo::from_supported(&cassandra), Ok(None));
        assert_eq!(ShardingInfo::from_supported(&[]), Ok(None));
        // Shard-aware ports alone say nothing about sharding.
        let ports = vec![("SCYLLA_SHARD_AWARE_PORT", vec!["19042"])];
        assert_eq!(ShardingInfo::from_supported(&ports), Ok(None));
    }

    #[test]
    fn partial_sharding_keys_are_errors() {
        for key in
            [SCYLLA_SHARD, SCYLLA_NR_SHARDS, SCYLLA_SHARDING_IGNORE_MSB, SCYLLA_PARTITIONER, SCYLLA_SHARDING_ALGORITHM]
        {
            assert_eq!(
                ShardingInfo::from_supported(&without(key)),
                Err(ShardingError::MissingKey { key }),
                "without {key}"
            );
        }
        let only_shard = vec![("SCYLLA_SHARD", vec!["0"])];
        assert_eq!(ShardingInfo::from_supported(&only_shard), Err(ShardingError::MissingKey { key: SCYLLA_NR_SHARDS }));
    }

    #[test]
    fn invalid_values_are_errors() {
        let invalid = |key: &'static str, value: &str| ShardingError::InvalidValue { key, value: value.to_owned() };
        let cases: Vec<(&str, Vec<&'static str>, ShardingError)> = vec![
            (SCYLLA_SHARD, vec!["x"], invalid(SCYLLA_SHARD, "x")),
            (SCYLLA_SHARD, vec!["-1"], invalid(SCYLLA_SHARD, "-1")),
            (SCYLLA_SHARD, vec!["12"], ShardingError::ShardOutOfRange { shard: 12, nr_shards: 12 }),
            (SCYLLA_NR_SHARDS, vec!["0"], ShardingError::ZeroShards),
            (SCYLLA_NR_SHARDS, vec!["65536"], invalid(SCYLLA_NR_SHARDS, "65536")),
            (SCYLLA_NR_SHARDS, vec![" 12"], invalid(SCYLLA_NR_SHARDS, " 12")),
            (SCYLLA_SHARDING_IGNORE_MSB, vec!["256"], invalid(SCYLLA_SHARDING_IGNORE_MSB, "256")),
            (SCYLLA_SHARDING_IGNORE_MSB, vec!["64"], ShardingError::IgnoreMsbTooLarge { ignore_msb: 64 }),
            (
                SCYLLA_PARTITIONER,
                vec!["org.apache.cassandra.dht.RandomPartitioner"],
                ShardingError::UnsupportedPartitioner { name: "org.apache.cassandra.dht.RandomPartitioner".to_owned() },
            ),
            (
                SCYLLA_SHARDING_ALGORITHM,
                vec!["token-round-robin"],
                ShardingError::UnsupportedAlgorithm { name: "token-round-robin".to_owned() },
            ),
            (SCYLLA_SHARD_AWARE_PORT, vec!["0"], invalid(SCYLLA_SHARD_AWARE_PORT, "0")),
            (SCYLLA_SHARD_AWARE_PORT_SSL, vec!["70000"], invalid(SCYLLA_SHARD_AWARE_PORT_SSL, "70000")),
            (SCYLLA_SHARD, vec![], ShardingError::ValueCount { key: SCYLLA_SHARD, count: 0 }),
            (SCYLLA_NR_SHARDS, vec!["12", "12"], ShardingError::ValueCount { key: SCYLLA_NR_SHARDS, count: 2 }),
        ];
        for (key, values, error) in cases {
            let shown = format!("{key}={values:?}");
            assert_eq!(ShardingInfo::from_supported(&with(key, values)), Err(error), "{shown}");
        }
        let mut dup = full();
        dup.push(("SCYLLA_SHARD", vec!["1"]));
        assert_eq!(ShardingInfo::from_supported(&dup), Err(ShardingError::DuplicateKey { key: SCYLLA_SHARD }));
    }

    fn ports(shard: u16, n: u16, range: RangeInclusive<u16>, offset: usize) -> Vec<u16> {
        ShardPortIterator::new(shard, NonZeroU16::new(n).unwrap(), range, offset).collect()
    }

    #[test]
    fn port_iterator_small() {
        assert_eq!(ports(1, 4, 10..=25, 0), [13, 17, 21, 25]);
        assert_eq!(ports(1, 4, 10..=25, 2), [21, 25, 13, 17]);
        assert_eq!(ports(1, 4, 10..=25, 6), [21, 25, 13, 17]);
        assert_eq!(ports(2, 4, 10..=25, 0), [10, 14, 18, 22]);
        assert_eq!(ports(0, 1, 5..=7, 1), [6, 7, 5]);
        assert_eq!(ports(3, 4, 10..=10, 0), Vec::<u16>::new());
        assert_eq!(ports(2, 4, 10..=10, 9), [10]);
        assert_eq!(ports(4, 4, 0..=100, 0), Vec::<u16>::new());
        #[allow(clippy::reversed_empty_ranges)]
        let empty = ports(0, 4, 20..=10, 0);
        assert!(empty.is_empty());
    }

    /// Every matching port in the range exactly once, from the chosen start, wrapping.
    #[test]
    fn port_iterator_covers_range() {
        for n in [1u16, 2, 3, 7, 12, 64, 1000] {
            for (lo, hi) in [(49152u16, 65535u16), (32768, 65535), (10000, 10100), (0, 65535)] {
                let expected: Vec<u16> = (lo..=hi).filter(|p| p % n == n / 2).collect();
                for offset in [0, 1, expected.len().saturating_sub(1), expected.len(), 12345] {
                    let it = ShardPortIterator::new(n / 2, NonZeroU16::new(n).unwrap(), lo..=hi, offset);
                    assert_eq!(it.len(), expected.len());
                    let got: Vec<u16> = it.collect();
                    let start = offset.checked_rem(expected.len()).unwrap_or(0);
                    let mut rotated = expected[start..].to_vec();
                    rotated.extend_from_slice(&expected[..start]);
                    assert_eq!(got, rotated, "n {n} range {lo}..={hi} offset {offset}");
                }
            }
        }
        let mut it = ShardPortIterator::new(3, NonZeroU16::new(4).unwrap(), 65530..=65535, 0);
        assert_eq!(it.next(), Some(65531));
        assert_eq!(it.next(), Some(65535));
        assert_eq!(it.next(), None);
        assert_eq!(it.next(), None);
    }
}
