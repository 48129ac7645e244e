//! The protocol crate's integration tests, one binary (linking dominates the test build):
//!
//! - [`alloc`]: serializing and decoding on the hot path allocates nothing (a counting
//!   allocator, counted per thread so the other tests running beside it do not disturb it);
//! - [`messages`]: every opcode round-trips in v4 and v5, prefixes and trailing bytes fail;
//! - [`metadata_id`]: `SCYLLA_USE_METADATA_ID`'s v4 PREPARED, EXECUTE and Rows bytes;
//! - [`vectors`]: the token and shard vectors in `tests/data/`.

mod alloc;
mod messages;
mod metadata_id;
mod vectors;
