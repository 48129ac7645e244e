//! Partition-key tokens: Cassandra's Murmur3 variant and Scylla's CDC partitioner.
//!
//! A token is the position of a partition on the ring. Drivers compute it from the bound
//! partition-key values to pick the replica (and, on Scylla, the shard) that owns the data.
//! This module follows `docs/protocol.md` §3:
//!
//! - [`murmur3_h1`] and [`Murmur3Hasher`]: the first 64 bits of MurmurHash3 x64/128 with seed 0
//!   **including Cassandra's "signed tail" quirk**: bytes of the final partial block are
//!   sign-extended before being shifted into place (§3.1). The standard algorithm gives wrong
//!   tokens for keys whose tail holds a byte ≥ 0x80.
//! - [`Token::murmur3`]: the hash, normalized so that `i64::MIN` (the "minimum token" sentinel)
//!   becomes `i64::MAX` (§3.2).
//! - [`PartitionKeyHasher`]: a composite key (two or more columns) hashed as each component's
//!   `u16` big-endian length, its bytes and a `0x00` byte (§3.3), without building the
//!   serialized key in memory.
//! - [`Token::cdc`] and [`Partitioner::Cdc`]: `com.scylladb.dht.CDCPartitioner`, whose token is
//!   the first 8 bytes of the stream id (§3.5).
//!
//! # Allocation
//!
//! Nothing in this module allocates: the hashers keep at most one 16-byte block of pending
//! input on the stack, and composite keys are streamed component by component, so a token can
//! be computed on the hot path of every request.
//!
//! ```
//! use shardwise_protocol::token::{Partitioner, Token};
//!
//! // A single-column key is hashed as its serialized value bytes.
//! assert_eq!(Token::murmur3(b"test").value(), -6017608668500074083);
//!
//! // A composite key (two `int` columns): components are framed while hashing.
//! let token = Partitioner::Murmur3
//!     .token_of_composite([&143i32.to_be_bytes()[..], &234i32.to_be_bytes()[..]])
//!     .expect("components are short");
//! assert_eq!(token.value(), 4958784316840156970);
//! ```

use std::fmt;
use std::num::ParseIntError;
use std::str::FromStr;

/// The first MurmurHash3 x64/128 multiplication constant.
const C1: u64 = 0x87c3_7b91_1142_53d5;
/// The second MurmurHash3 x64/128 multiplication constant.
const C2: u64 = 0x4cf5_ad43_2745_937f;
/// Size of one MurmurHash3 x64/128 body block.
const BLOCK: usize = 16;

/// A position on the token ring (a signed 64-bit Murmur3 or CDC token).
///
/// Every `i64` is a valid ring position: ring tokens read from `system.local`/`system.peers` may
/// take any value, and `i64::MIN` is the "minimum token" that sorts before every key. Tokens
/// computed from partition keys by [`Token::murmur3`] and [`Token::cdc`] never equal
/// `i64::MIN` (except the documented invalid-CDC-key case), see [`Token::normalized`].
///
/// Tokens order like the `i64` they wrap, which is the ring order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(i64);

impl Token {
    /// The minimum token (`i64::MIN`): the sentinel that sorts before every key token.
    pub const MIN: Token = Token(i64::MIN);
    /// The maximum token (`i64::MAX`).
    pub const MAX: Token = Token(i64::MAX);

    /// Wraps a raw ring position as is (no normalization), e.g. a token read from the ring
    /// tables or from a tablet boundary.
    pub const fn new(value: i64) -> Token {
        Token(value)
    }

    /// Wraps a freshly computed key hash, replacing the reserved `i64::MIN` by `i64::MAX`,
    /// as Cassandra's `Murmur3Partitioner.normalize` and Scylla's `token::normalize` do (§3.2).
    pub const fn normalized(value: i64) -> Token {
        if value == i64::MIN {
            Token(i64::MAX)
        } else {
            Token(value)
        }
    }

    /// The signed 64-bit value of the token.
    pub const fn value(self) -> i64 {
        self.0
    }

    /// The Murmur3Partitioner token of serialized partition-key bytes (for a single-column
    /// key: the value bytes as sent in EXECUTE, without the `[int]` length prefix; for a
    /// composite key see [`PartitionKeyHasher`]).
    ///
    /// The hash is normalized with [`Token::normalized`].
    ///
    /// **Empty key**: this hashes it like any other input, giving token 0, which is what
    /// **Scylla** does (empty keys are legal there in materialized views). Cassandra instead
    /// returns [`Token::MIN`] without hashing, but it rejects empty partition keys for every
    /// write and read anyway, so the choice only matters for Scylla views, where it is right.
    /// A caller that wants Cassandra's behaviour can test `key.is_empty()` first.
    pub fn murmur3(key: &[u8]) -> Token {
        Token::normalized(murmur3_h1(key))
    }

    /// The `com.scylladb.dht.CDCPartitioner` token of a CDC log table's `cdc$stream_id` value:
    /// the first 8 bytes read as a big-endian `i64`, then normalized (no hashing, §3.5).
    ///
    /// **Invalid lengths**: a key shorter than 8 bytes gives [`Token::MIN`] (the "invalid"
    /// token), and only the first 8 bytes of a longer key are used. This is what the
    /// scylla-rust-driver and gocql do; Scylla itself returns the minimum token for any length
    /// other than 16. Real stream ids are always 16 bytes, so the two rules only differ for
    /// keys that cannot name an existing CDC partition, where routing does not matter.
    pub fn cdc(stream_id: &[u8]) -> Token {
        match stream_id.first_chunk::<8>() {
            Some(head) => Token::normalized(i64::from_be_bytes(*head)),
            None => Token::MIN,
        }
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for Token {
    type Err = ParseIntError;

    /// Parses a decimal token, as stored in `system.local.tokens` and `system.peers.tokens`.
    fn from_str(s: &str) -> Result<Token, ParseIntError> {
        s.parse().map(Token)
    }
}

impl From<i64> for Token {
    fn from(value: i64) -> Token {
        Token(value)
    }
}

impl From<Token> for i64 {
    fn from(token: Token) -> i64 {
        token.0
    }
}

/// The first 64 bits (`h1`) of Cassandra's `MurmurHash.hash3_x64_128(key, 0)` as an `i64`,
/// **without** normalization (so `i64::MIN` is possible; [`Token::murmur3`] normalizes).
///
/// Equivalent to feeding `key` to a fresh [`Murmur3Hasher`] and calling
/// [`Murmur3Hasher::finish_h1`].
pub fn murmur3_h1(key: &[u8]) -> i64 {
    let mut hasher = Murmur3Hasher::new();
    hasher.write(key);
    hasher.finish_h1()
}

/// A streaming form of Cassandra's Murmur3 (x64, 128-bit, signed-tail quirk).
///
/// Input may be fed in any number of pieces of any sizes: the result depends only on the
/// concatenation of the pieces. The hasher keeps at most 15 bytes of a pending block in
/// place, so it never allocates.
///
/// ```
/// use shardwise_protocol::token::{murmur3_h1, Murmur3Hasher};
///
/// let mut hasher = Murmur3Hasher::new();
/// hasher.write(b"hello, ");
/// hasher.write(b"world");
/// assert_eq!(hasher.finish_h1(), murmur3_h1(b"hello, world"));
/// ```
#[derive(Debug, Clone)]
pub struct Murmur3Hasher {
    /// First half of the state.
    h1: u64,
    /// Second half of the state.
    h2: u64,
    /// Bytes of the block not yet complete; `pending[..pending_len]` is meaningful.
    pending: [u8; BLOCK],
    /// How many bytes of `pending` are filled (always < 16 between calls).
    pending_len: usize,
    /// Total number of bytes written so far.
    len: u64,
}

impl Murmur3Hasher {
    /// A hasher with seed 0, the seed Cassandra and Scylla use for tokens.
    pub const fn new() -> Murmur3Hasher {
        Murmur3Hasher::with_seed(0)
    }

    /// A hasher with an arbitrary seed (both state halves start at `seed`, as in Cassandra's
    /// `hash3_x64_128(key, offset, length, seed)`). Tokens always use seed 0.
    pub const fn with_seed(seed: u64) -> Murmur3Hasher {
        Murmur3Hasher { h1: seed, h2: seed, pending: [0; BLOCK], pending_len: 0, len: 0 }
    }

    /// Appends `bytes` to the hashed input.
    pub fn write(&mut self, bytes: &[u8]) {
        self.len = self.len.wrapping_add(bytes.len() as u64);
        let mut rest = bytes;
        if self.pending_len > 0 {
            let free = &mut self.pending[self.pending_len..];
            let take = free.len().min(rest.len());
            let (head, tail) = rest.split_at(take);
            free[..take].copy_from_slice(head);
            self.pending_len += take;
            rest = tail;
            if self.pending_len < BLOCK {
                return;
            }
            let block = self.pending;
            self.mix_block(&block);
            self.pending_len = 0;
        }
        let mut blocks = rest.chunks_exact(BLOCK);
        for block in &mut blocks {
            self.mix_block(block);
        }
        let remainder = blocks.remainder();
        self.pending[..remainder.len()].copy_from_slice(remainder);
        self.pending_len = remainder.len();
    }

    /// Total number of bytes written so far.
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing has been written yet.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The full 128-bit result `(h1, h2)` of the input written so far. The hasher is left
    /// unchanged, so more input may follow.
    pub fn finish128(&self) -> (u64, u64) {
        let (mut h1, mut h2) = (self.h1, self.h2);
        let tail = &self.pending[..self.pending_len];
        if !tail.is_empty() {
            // The quirk: each tail byte is sign-extended to 64 bits before the shift, as Java's
            // `(long) byte` and Scylla's `(uint64_t)(int8_t)` do.
            let (mut k1, mut k2) = (0u64, 0u64);
            for (i, &byte) in tail.iter().enumerate() {
                let extended = i64::from(byte as i8) as u64;
                if i < 8 {
                    k1 ^= extended << (8 * i);
                } else {
                    k2 ^= extended << (8 * (i - 8));
                }
            }
            if tail.len() > 8 {
                h2 ^= mix_k2(k2);
            }
            h1 ^= mix_k1(k1);
        }
        h1 ^= self.len;
        h2 ^= self.len;
        h1 = h1.wrapping_add(h2);
        h2 = h2.wrapping_add(h1);
        h1 = fmix(h1);
        h2 = fmix(h2);
        h1 = h1.wrapping_add(h2);
        h2 = h2.wrapping_add(h1);
        (h1, h2)
    }

    /// The first 64 bits of the result as an `i64`: the raw token, before normalization.
    pub fn finish_h1(&self) -> i64 {
        self.finish128().0 as i64
    }

    /// The normalized Murmur3 token of the input written so far (see [`Token::murmur3`]).
    pub fn finish_token(&self) -> Token {
        Token::normalized(self.finish_h1())
    }

    /// Mixes one full 16-byte body block into the state.
    fn mix_block(&mut self, block: &[u8]) {
        let (lo, hi) = block.split_at(8);
        let k1 = le_u64(lo);
        let k2 = le_u64(hi);

        self.h1 ^= mix_k1(k1);
        self.h1 = self.h1.rotate_left(27).wrapping_add(self.h2);
        self.h1 = self.h1.wrapping_mul(5).wrapping_add(0x52dc_e729);

        self.h2 ^= mix_k2(k2);
        self.h2 = self.h2.rotate_left(31).wrapping_add(self.h1);
        self.h2 = self.h2.wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }
}

impl Default for Murmur3Hasher {
    fn default() -> Murmur3Hasher {
        Murmur3Hasher::new()
    }
}

/// Reads up to 8 bytes as a little-endian `u64` (body bytes are taken unsigned).
fn le_u64(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |acc, &b| (acc << 8) | u64::from(b))
}

/// The `k1` scramble: multiply, rotate by 31, multiply.
fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

/// The `k2` scramble: multiply, rotate by 33, multiply.
fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

/// MurmurHash3's 64-bit finalization mix (logical shifts).
fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// A streaming form of the CDC partitioner: remembers the first 8 bytes written.
///
/// See [`Token::cdc`] for the rule, including keys shorter than 8 bytes.
#[derive(Debug, Clone, Default)]
pub struct CdcHasher {
    /// The first bytes written; `head[..head_len]` is meaningful.
    head: [u8; 8],
    /// How many bytes of `head` are filled.
    head_len: usize,
}

impl CdcHasher {
    /// An empty hasher.
    pub const fn new() -> CdcHasher {
        CdcHasher { head: [0; 8], head_len: 0 }
    }

    /// Appends `bytes` to the key; only the first 8 bytes overall matter.
    pub fn write(&mut self, bytes: &[u8]) {
        let free = &mut self.head[self.head_len..];
        let take = free.len().min(bytes.len());
        free[..take].copy_from_slice(&bytes[..take]);
        self.head_len += take;
    }

    /// The CDC token of the key written so far.
    pub fn finish_token(&self) -> Token {
        Token::cdc(&self.head[..self.head_len])
    }
}

/// A partitioner: how a table turns partition-key bytes into a token.
///
/// Learn it per table (§3.6): Scylla's `system_schema.scylla_tables.partitioner` holds the class
/// name for non-default partitioners (NULL means the cluster default, Murmur3); Cassandra always
/// uses the cluster partitioner from `system.local.partitioner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Partitioner {
    /// `com.scylladb.dht.CDCPartitioner`: CDC log tables; the token is the stream id's first
    /// 8 bytes.
    Cdc,
    /// `org.apache.cassandra.dht.Murmur3Partitioner`: the default of Cassandra and Scylla.
    #[default]
    Murmur3,
}

impl Partitioner {
    /// Recognizes a partitioner class name by its suffix (`…Murmur3Partitioner`,
    /// `…CDCPartitioner`), as the scylla-rust-driver does. Other partitioners (Random,
    /// ByteOrdered, …) are not supported and give `None`: do not route by token then.
    pub fn from_class_name(name: &str) -> Option<Partitioner> {
        if name.ends_with("Murmur3Partitioner") {
            Some(Partitioner::Murmur3)
        } else if name.ends_with("CDCPartitioner") {
            Some(Partitioner::Cdc)
        } else {
            None
        }
    }

    /// The fully qualified class name of this partitioner.
    pub const fn class_name(self) -> &'static str {
        match self {
            Partitioner::Cdc => "com.scylladb.dht.CDCPartitioner",
            Partitioner::Murmur3 => "org.apache.cassandra.dht.Murmur3Partitioner",
        }
    }

    /// A streaming hasher for this partitioner.
    pub const fn hasher(self) -> PartitionerHasher {
        match self {
            Partitioner::Cdc => PartitionerHasher::Cdc(CdcHasher::new()),
            Partitioner::Murmur3 => PartitionerHasher::Murmur3(Murmur3Hasher::new()),
        }
    }

    /// The token of a single-column partition key: its serialized value bytes.
    pub fn token_of_single(self, key: &[u8]) -> Token {
        match self {
            Partitioner::Cdc => Token::cdc(key),
            Partitioner::Murmur3 => Token::murmur3(key),
        }
    }

    /// The token of a composite partition key given its components' serialized value bytes in
    /// partition-key column order; each is framed as `u16` BE length, bytes, `0x00` (§3.3).
    ///
    /// This always uses the composite framing, so pass two or more components (a one-column
    /// key is *not* framed: use [`token_of_single`](Self::token_of_single) or
    /// [`token_of_key`](Self::token_of_key)).
    ///
    /// # Errors
    ///
    /// [`ComponentTooLong`] if a component is longer than 65535 bytes.
    pub fn token_of_composite<'a, I>(self, components: I) -> Result<Token, ComponentTooLong>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut hasher = PartitionKeyHasher::new(self);
        for component in components {
            hasher.push_component(component)?;
        }
        Ok(hasher.finish())
    }

    /// The token of a partition key given its components in partition-key column order: one
    /// component is hashed raw, two or more with the composite framing.
    ///
    /// Returns `Ok(None)` for an empty list (no partition-key columns known: no token routing).
    ///
    /// # Errors
    ///
    /// [`ComponentTooLong`] if the key is composite and a component is longer than 65535 bytes.
    pub fn token_of_key<'a, I>(self, components: I) -> Result<Option<Token>, ComponentTooLong>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut components = components.into_iter();
        let Some(first) = components.next() else {
            return Ok(None);
        };
        let Some(second) = components.next() else {
            return Ok(Some(self.token_of_single(first)));
        };
        self.token_of_composite([first, second].into_iter().chain(components)).map(Some)
    }
}

/// A streaming hasher for either partitioner (see [`Partitioner::hasher`]).
#[derive(Debug, Clone)]
pub enum PartitionerHasher {
    /// CDC partitioner: first 8 bytes.
    Cdc(CdcHasher),
    /// Murmur3 partitioner.
    Murmur3(Murmur3Hasher),
}

impl PartitionerHasher {
    /// Appends `bytes` to the key.
    pub fn write(&mut self, bytes: &[u8]) {
        match self {
            PartitionerHasher::Cdc(h) => h.write(bytes),
            PartitionerHasher::Murmur3(h) => h.write(bytes),
        }
    }

    /// The token of the key written so far.
    pub fn finish_token(&self) -> Token {
        match self {
            PartitionerHasher::Cdc(h) => h.finish_token(),
            PartitionerHasher::Murmur3(h) => h.finish_token(),
        }
    }
}

/// A component of a composite partition key was longer than 65535 bytes, so the key cannot be
/// serialized for hashing and has no token (route it without token awareness).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("partition-key component of {len} bytes exceeds the 65535-byte limit of composite keys")]
pub struct ComponentTooLong {
    /// Length of the offending component.
    pub len: usize,
}

/// Hashes a composite (two or more columns) partition key from its components, framing each as
/// `u16` big-endian length ‖ bytes ‖ `0x00` on the fly, without building the key in memory.
///
/// ```
/// use shardwise_protocol::token::{Partitioner, PartitionKeyHasher};
///
/// let mut hasher = PartitionKeyHasher::new(Partitioner::Murmur3);
/// hasher.push_component(&143i32.to_be_bytes()).expect("short");
/// hasher.push_component(&234i32.to_be_bytes()).expect("short");
/// assert_eq!(hasher.finish().value(), 4958784316840156970);
/// ```
#[derive(Debug, Clone)]
pub struct PartitionKeyHasher {
    /// The partitioner's hasher, fed the framed components.
    inner: PartitionerHasher,
}

impl PartitionKeyHasher {
    /// An empty composite key for the given partitioner.
    pub const fn new(partitioner: Partitioner) -> PartitionKeyHasher {
        PartitionKeyHasher { inner: partitioner.hasher() }
    }

    /// Appends the next component (its serialized value bytes).
    ///
    /// # Errors
    ///
    /// [`ComponentTooLong`] if `value` is longer than 65535 bytes; nothing is hashed then, and
    /// the key as a whole has no token.
    pub fn push_component(&mut self, value: &[u8]) -> Result<(), ComponentTooLong> {
        let len = u16::try_from(value.len()).map_err(|_| ComponentTooLong { len: value.len() })?;
        self.inner.write(&len.to_be_bytes());
        self.inner.write(value);
        self.inner.write(&[0x00]);
        Ok(())
    }

    /// The token of the components pushed so far.
    pub fn finish(&self) -> Token {
        self.inner.finish_token()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests may panic on broken fixtures.
mod tests {
    use super::*;

    /// Decodes a hex string (test helper).
    fn hex(s: &str) -> Vec<u8> {
        assert_eq!(s.len() % 2, 0, "odd hex length");
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// §3.4: [SRD] tokens of raw single-column keys.
    #[test]
    fn srd_murmur3_tokens() {
        let cases: [(&str, i64); 4] = [
            ("test", -6017608668500074083),
            ("xd", 4507812186440344727),
            ("primary_key", -1632642444691073360),
            ("kremówki", 4354931215268080151),
        ];
        for (key, token) in cases {
            assert_eq!(Token::murmur3(key.as_bytes()), Token::new(token), "key {key:?}");
            assert_eq!(Partitioner::Murmur3.token_of_single(key.as_bytes()).value(), token);
        }
    }

    /// §3.4: the 20-prefix series "", "0", "01", … of [GOCQL] (raw h1).
    #[test]
    fn gocql_prefix_series() {
        let expected: [u64; 20] = [
            0x0000000000000000,
            0x2ac9debed546a380,
            0x649e4eaa7fc1708e,
            0xce68f60d7c353bdb,
            0x0f95757ce7f38254,
            0x0f04e459497f3fc1,
            0x88c0a92586be0a27,
            0x13eb9fb82606f7a6,
            0x8236039b7387354d,
            0x4c1e87519fe738ba,
            0x3f9652ac3effeb24,
            0x3f33760ded9006c6,
            0xaed70a6631854cb1,
            0x8a299a8f8e0e2da7,
            0x624b675c779249a6,
            0xa4b203bb1d90b9a3,
            0xa3293ad698ecb99a,
            0xbc740023dbd50048,
            0x3fe5ab9837d25cdd,
            0x2d0338c1ca87d132,
        ];
        let mut key = Vec::new();
        for (len, &h1) in expected.iter().enumerate() {
            assert_eq!(key.len(), len);
            assert_eq!(murmur3_h1(&key), h1 as i64, "prefix of length {len}");
            key.push(b'0' + (len % 10) as u8);
        }
    }

    /// §3.4: [GOCQL] sample strings (raw h1).
    #[test]
    fn gocql_strings() {
        assert_eq!(murmur3_h1(b"hello"), 0xcbd8a7b341bd9b02_u64 as i64);
        assert_eq!(murmur3_h1(b"hello"), -3758069500696749310);
        assert_eq!(murmur3_h1(b"hello, world"), 0x342fac623a5ebc8e);
        assert_eq!(murmur3_h1(b"19 Jan 2038 at 3:14:07 AM"), 0xb89e5988b737affc_u64 as i64);
        assert_eq!(murmur3_h1(b"The quick brown fox jumps over the lazy dog."), 0xcd99481f9ee902c9_u64 as i64);
    }

    /// §3.4: the tail holds 0xb8, which the standard (unsigned) algorithm gets wrong.
    #[test]
    fn sign_quirk_vector() {
        let key = hex("00104327529fb645dd00b883ec39ae448bb800000400066a6b00");
        assert_eq!(key.len(), 26);
        assert_eq!(murmur3_h1(&key), -9223371632693506265);
    }

    /// §3.4: 1024 bytes 00..ff repeated four times.
    #[test]
    fn kilobyte_vector() {
        let key: Vec<u8> = (0..1024).map(|i| (i % 256) as u8).collect();
        assert_eq!(murmur3_h1(&key), 7627370222079200297);
    }

    /// §3.4: [SCY] composite key of two ints (143, 234), "expected value taken from Origin".
    #[test]
    fn scylla_composite_vector() {
        let serialized = hex("00040000008f000004000000ea00");
        assert_eq!(serialized.len(), 14);
        assert_eq!(Token::murmur3(&serialized).value(), 4958784316840156970);

        let a = 143i32.to_be_bytes();
        let b = 234i32.to_be_bytes();
        let token = Partitioner::Murmur3.token_of_composite([&a[..], &b[..]]).unwrap();
        assert_eq!(token.value(), 4958784316840156970);
        assert_eq!(Partitioner::Murmur3.token_of_key([&a[..], &b[..]]).unwrap(), Some(token));
    }

    /// §3.4: [SCY] seeded 128-bit outputs of the core function.
    #[test]
    fn scylla_seeded_128() {
        let text = b"012345678901234567890123456789012345678901234567890123456789";
        let cases: [(usize, u64, u64); 3] = [
            (0, 13907055927958326333, 10701141902926764871),
            (5, 6846275695158209935, 11251493995290334439),
            (59, 1589012859535948937, 7402826160257180747),
        ];
        for (len, h1, h2) in cases {
            let mut hasher = Murmur3Hasher::with_seed(0xcafe_babe);
            hasher.write(&text[..len]);
            assert_eq!(hasher.finish128(), (h1, h2), "prefix of length {len}");
        }
    }

    /// Any chunking of the input gives the same hash as one write.
    #[test]
    fn streaming_is_chunking_independent() {
        // Bytes ≥ 0x80 everywhere so the signed tail matters at every length.
        let data: Vec<u8> = (0..100u32).map(|i| (i.wrapping_mul(151) ^ 0x9d) as u8).collect();
        for len in 0..data.len() {
            let input = &data[..len];
            let whole = murmur3_h1(input);
            // Every single split point.
            for split in 0..=len {
                let mut h = Murmur3Hasher::new();
                h.write(&input[..split]);
                h.write(&input[split..]);
                assert_eq!(h.finish_h1(), whole, "len {len} split {split}");
            }
            // Fixed-size chunks of every size, with empty writes mixed in.
            for chunk in 1..=20 {
                let mut h = Murmur3Hasher::new();
                for piece in input.chunks(chunk) {
                    h.write(piece);
                    h.write(&[]);
                }
                assert_eq!(h.finish_h1(), whole, "len {len} chunk {chunk}");
                assert_eq!(h.len(), len as u64);
            }
        }
    }

    /// `finish128` does not consume: hashing may continue afterwards.
    #[test]
    fn finish_is_non_destructive() {
        let mut h = Murmur3Hasher::new();
        h.write(b"hello");
        assert_eq!(h.finish_h1(), murmur3_h1(b"hello"));
        h.write(b", world");
        assert_eq!(h.finish_h1(), murmur3_h1(b"hello, world"));
    }

    /// The composite helper equals hashing the serialized key, for any component sizes.
    #[test]
    fn composite_matches_serialized() {
        let parts: [&[u8]; 4] = [b"", b"\x80\xff", &[0xab; 300], b"text"];
        let mut serialized = Vec::new();
        for p in parts {
            serialized.extend_from_slice(&(p.len() as u16).to_be_bytes());
            serialized.extend_from_slice(p);
            serialized.push(0);
        }
        let token = Partitioner::Murmur3.token_of_composite(parts).unwrap();
        assert_eq!(token, Token::murmur3(&serialized));
        assert_eq!(Partitioner::Murmur3.token_of_key(parts).unwrap(), Some(token));
        // CDC partitioner over a composite key: first 8 serialized bytes.
        assert_eq!(Partitioner::Cdc.token_of_composite(parts).unwrap(), Token::cdc(&serialized));
    }

    #[test]
    fn composite_component_limit() {
        let max = vec![7u8; 65535];
        let over = vec![7u8; 65536];
        assert!(Partitioner::Murmur3.token_of_composite([&max[..], b"x"]).is_ok());
        assert_eq!(Partitioner::Murmur3.token_of_composite([b"x", &over[..]]), Err(ComponentTooLong { len: 65536 }));
        assert_eq!(Partitioner::Murmur3.token_of_key([&over[..], b"x"]), Err(ComponentTooLong { len: 65536 }));
        // A single-column key is not framed, so it has no such limit.
        assert_eq!(Partitioner::Murmur3.token_of_key([&over[..]]), Ok(Some(Token::murmur3(&over))));
        assert_eq!(Partitioner::Murmur3.token_of_key(std::iter::empty()), Ok(None));
    }

    /// §3.2: the empty key hashes to 0 (Scylla's rule), and i64::MIN is normalized.
    #[test]
    fn empty_key_and_normalization() {
        assert_eq!(murmur3_h1(b""), 0);
        assert_eq!(Token::murmur3(b""), Token::new(0));
        assert_eq!(Token::normalized(i64::MIN), Token::MAX);
        assert_eq!(Token::normalized(-1), Token::new(-1));
        assert_eq!(Token::normalized(i64::MAX), Token::MAX);
    }

    /// §3.5: [SRD] CDC partitioner vectors.
    #[test]
    fn srd_cdc_tokens() {
        let cases: [(&str, i64); 4] = [
            ("test", i64::MIN),
            ("xd", i64::MIN),
            ("primary_key", 8102654598100187487),
            ("kremówki", 7742362231512463211),
        ];
        for (key, token) in cases {
            assert_eq!(Token::cdc(key.as_bytes()).value(), token, "key {key:?}");
            assert_eq!(Partitioner::Cdc.token_of_single(key.as_bytes()).value(), token);
            let mut h = Partitioner::Cdc.hasher();
            for b in key.as_bytes() {
                h.write(std::slice::from_ref(b));
            }
            assert_eq!(h.finish_token().value(), token, "streamed key {key:?}");
        }
    }

    /// §3.5: a real 16-byte stream id carries its token in the high 8 bytes; MIN normalizes.
    #[test]
    fn cdc_stream_ids() {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&(-42i64).to_be_bytes());
        id[15] = 0x01;
        assert_eq!(Token::cdc(&id), Token::new(-42));
        id[..8].copy_from_slice(&i64::MIN.to_be_bytes());
        assert_eq!(Token::cdc(&id), Token::MAX);
        assert_eq!(Token::cdc(&[]), Token::MIN);
        assert_eq!(Token::cdc(&[1; 7]), Token::MIN);
    }

    #[test]
    fn partitioner_names() {
        assert_eq!(
            Partitioner::from_class_name("org.apache.cassandra.dht.Murmur3Partitioner"),
            Some(Partitioner::Murmur3)
        );
        assert_eq!(Partitioner::from_class_name("com.scylladb.dht.CDCPartitioner"), Some(Partitioner::Cdc));
        assert_eq!(Partitioner::from_class_name("Murmur3Partitioner"), Some(Partitioner::Murmur3));
        assert_eq!(Partitioner::from_class_name("org.apache.cassandra.dht.RandomPartitioner"), None);
        assert_eq!(Partitioner::from_class_name(""), None);
        for p in [Partitioner::Cdc, Partitioner::Murmur3] {
            assert_eq!(Partitioner::from_class_name(p.class_name()), Some(p));
        }
    }

    #[test]
    fn token_traits() {
        assert_eq!(Token::new(-5).to_string(), "-5");
        assert_eq!("-9223372036854775808".parse::<Token>().unwrap(), Token::MIN);
        assert!("x".parse::<Token>().is_err());
        assert!(Token::MIN < Token::new(0) && Token::new(0) < Token::MAX);
        assert_eq!(i64::from(Token::from(7)), 7);
    }
}
