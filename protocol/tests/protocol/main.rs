//! The protocol crate's integration tests, one binary (linking dominates the test build):
//!
//! - [`alloc`]: serializing and decoding on the hot path allocates nothing (a counting
//!   allocator, counted per thread so the other tests running beside it do not disturb it);
//! - [`messages`]: every opcode round-trips in v4 and v5, prefixes and trailing bytes fail;
//! - [`vectors`]: the token and shard vectors in `tests/data/`.

mod alloc;
mod messages;
mod vectors;
