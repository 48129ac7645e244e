//! Framing: the 9-byte envelope header shared by v4 and v5 ([`envelope`]),
//! v5's outer segments with their CRCs and optional LZ4 ([`segment`]), v4's
//! per-envelope LZ4 body compression ([`compression`]), and a streaming
//! [`decoder`] that turns bytes in any chunking into complete envelopes, and
//! its outbound counterpart, the [`framer`]; [`exact`] decodes an established
//! v4 connection's envelopes at exact sizes.

pub mod compression;
pub mod decoder;
pub mod envelope;
pub mod exact;
pub mod framer;
pub mod segment;

pub use decoder::FrameDecoder;
pub use envelope::{Envelope, EnvelopeHeader, Flags, Opcode, ProtocolVersion, HEADER_LEN};
pub use framer::Framer;
