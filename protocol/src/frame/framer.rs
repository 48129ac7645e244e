//! The outbound half of a connection's wire state: turns runs of whole
//! envelopes into the bytes a socket sends, for each of the four cases a
//! connection can be in (v4 or v5, with or without LZ4).
//!
//! Writers queue requests into a buffer that keeps [`HEAD_ROOM`] bytes
//! before the run and [`TAIL_ROOM`] after it, so that the common case, v5
//! without compression, becomes one segment sealed in place, without a
//! copy; the other cases write into the framer's own scratch buffer, reused
//! from one run to the next. The handshake and the oversized requests that
//! bypass the buffer use [`Framer::frame`], which needs no room around the
//! run.

use crate::error::EncodeError;
use crate::frame::compression::compress_body;
use crate::frame::envelope::{Flags, ProtocolVersion, HEADER_LEN};
use crate::frame::segment::{
    encode_envelopes, encode_segment, seal_in_place, SegmentCompression, LZ4_HEADER_LEN, MAX_PAYLOAD, TRAILER_LEN,
    UNCOMPRESSED_HEADER_LEN,
};

/// Bytes a write buffer keeps free before a run for [`Framer::seal`]: the
/// largest segment header.
pub const HEAD_ROOM: usize = LZ4_HEADER_LEN;
/// Bytes a write buffer keeps free after a run for [`Framer::seal`]: the
/// segment trailer.
pub const TAIL_ROOM: usize = TRAILER_LEN;

/// A scratch buffer grown past this by one huge request is given back.
const KEEP_SCRATCH: usize = 1 << 20;

/// Frames runs of envelopes for one connection (see the module docs).
#[derive(Debug, Clone)]
pub struct Framer {
    version: ProtocolVersion,
    lz4: bool,
    /// Whether v5 framing has started: in v5, the handshake's first requests
    /// (up to STARTUP) travel as bare envelopes.
    segments: bool,
    scratch: Vec<u8>,
}

impl Framer {
    /// A framer for a connection speaking `version`, compressing with LZ4
    /// when `lz4` is set. In v5 it starts unframed: call
    /// [`start_segments`](Self::start_segments) once STARTUP is answered.
    pub fn new(version: ProtocolVersion, lz4: bool) -> Self {
        Framer { version, lz4, segments: false, scratch: Vec::new() }
    }

    /// A framer for an established connection: v5 runs are segments from
    /// the first.
    pub fn established(version: ProtocolVersion, lz4: bool) -> Self {
        let mut f = Framer::new(version, lz4);
        f.start_segments();
        f
    }

    /// Starts v5 segment framing (no effect on v4).
    pub fn start_segments(&mut self) {
        self.segments = self.version == ProtocolVersion::V5;
    }

    /// Frames the run in `buf[HEAD_ROOM..buf.len() - TAIL_ROOM]`, a run of
    /// whole envelopes, and returns the bytes to send: a part of `buf` when
    /// it can be framed in place, the framer's scratch buffer otherwise.
    pub fn seal<'a>(&'a mut self, buf: &'a mut [u8]) -> Result<&'a [u8], EncodeError> {
        let run_len = buf
            .len()
            .checked_sub(HEAD_ROOM + TAIL_ROOM)
            .ok_or(EncodeError::InvalidValue { what: "write buffer", reason: "smaller than the room around a run" })?;
        if self.segments && !self.lz4 && run_len <= MAX_PAYLOAD {
            let segment = &mut buf[HEAD_ROOM - UNCOMPRESSED_HEADER_LEN..];
            seal_in_place(segment, true)?;
            return Ok(segment);
        }
        self.frame(&buf[HEAD_ROOM..HEAD_ROOM + run_len])
    }

    /// Frames a run of whole envelopes held without room around it.
    pub fn frame<'a>(&'a mut self, run: &'a [u8]) -> Result<&'a [u8], EncodeError> {
        if self.scratch.capacity() > KEEP_SCRATCH {
            self.scratch = Vec::new();
        }
        self.scratch.clear();
        match (self.segments, self.lz4) {
            (true, lz4) => {
                let c = if lz4 { SegmentCompression::Lz4 } else { SegmentCompression::None };
                if run.len() <= MAX_PAYLOAD {
                    // One self-contained segment; `encode_envelopes` would
                    // walk the run's envelopes to find the same thing.
                    encode_segment(run, true, c, &mut self.scratch)?;
                } else {
                    encode_envelopes(run, c, &mut self.scratch)?;
                }
            }
            // v4 with LZ4 compresses each body; in v5 the handshake is bare
            // and never compressed.
            (false, true) if self.version == ProtocolVersion::V4 => compress_envelopes(run, &mut self.scratch)?,
            (false, _) => return Ok(run),
        }
        Ok(&self.scratch)
    }
}

/// v4 LZ4: each envelope of `run` with its body compressed and flagged; an
/// empty body stays as it is.
fn compress_envelopes(mut run: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    const TRUNCATED: EncodeError = EncodeError::InvalidValue { what: "envelope run", reason: "truncated envelope" };
    while !run.is_empty() {
        let header = run.first_chunk::<HEADER_LEN>().ok_or(TRUNCATED)?;
        let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
        let body = run.get(HEADER_LEN..HEADER_LEN + len).ok_or(TRUNCATED)?;
        let start = out.len();
        out.extend_from_slice(header);
        if !body.is_empty() {
            compress_body(body, out)?;
            out[start + 1] |= Flags::COMPRESSION;
            let compressed = (out.len() - start - HEADER_LEN) as u32;
            out[start + 5..start + HEADER_LEN].copy_from_slice(&compressed.to_be_bytes());
        }
        run = &run[HEADER_LEN + len..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameDecoder;
    use crate::request::{encode_request, Options, Prepare};

    /// A run of `n` PREPARE envelopes with distinct streams, each `text` long.
    fn run(version: ProtocolVersion, n: i16, text_len: usize) -> Vec<u8> {
        let query = "x".repeat(text_len);
        let mut out = Vec::new();
        for stream in 0..n {
            encode_request(&Prepare { query: &query, keyspace: None }, version, stream, 0, &mut out).expect("encode");
        }
        out
    }

    /// Decodes `wire` as a connection in the same mode would and checks the
    /// envelopes are those of `run`.
    fn assert_round_trip(version: ProtocolVersion, lz4: bool, run: &[u8], wire: &[u8]) {
        let mut decoder = FrameDecoder::new().with_max_body(1 << 24);
        match (version, lz4) {
            (ProtocolVersion::V5, lz4) => {
                decoder.set_framed(if lz4 { SegmentCompression::Lz4 } else { SegmentCompression::None })
            }
            (ProtocolVersion::V4, lz4) => decoder.set_v4_lz4(lz4),
        }
        decoder.feed(wire);
        let mut decoded = Vec::new();
        while let Some(env) = decoder.next_envelope().expect("decodes") {
            env.header.encode(&mut decoded);
            decoded.extend_from_slice(&env.body);
        }
        assert_eq!(decoder.buffered(), 0, "{version:?} lz4 {lz4}: bytes left over");
        assert_eq!(decoded, run, "{version:?} lz4 {lz4}");
    }

    const CASES: [(ProtocolVersion, bool); 4] = [
        (ProtocolVersion::V4, false),
        (ProtocolVersion::V4, true),
        (ProtocolVersion::V5, false),
        (ProtocolVersion::V5, true),
    ];

    #[test]
    fn every_case_round_trips_through_the_decoder() {
        for (version, lz4) in CASES {
            for (n, text) in [(1, 0), (3, 40), (50, 1000)] {
                let run = run(version, n, text);
                let mut framer = Framer::established(version, lz4);
                let wire = framer.frame(&run).expect("frame").to_vec();
                assert_round_trip(version, lz4, &run, &wire);
                // Sealing the same run from a buffer with room gives the same bytes.
                let mut buf = vec![0xAA; HEAD_ROOM];
                buf.extend_from_slice(&run);
                buf.extend_from_slice(&[0xBB; TAIL_ROOM]);
                assert_eq!(framer.seal(&mut buf).expect("seal"), wire, "{version:?} lz4 {lz4}");
            }
        }
    }

    #[test]
    fn compression_shrinks_compressible_runs() {
        for version in [ProtocolVersion::V4, ProtocolVersion::V5] {
            let run = run(version, 4, 4000);
            let plain = Framer::established(version, false).frame(&run).expect("frame").len();
            let lz4 = Framer::established(version, true).frame(&run).expect("frame").len();
            assert!(lz4 * 10 < plain, "{version:?}: {lz4} bytes compressed against {plain}");
        }
    }

    #[test]
    fn a_run_larger_than_a_segment_is_split() {
        for lz4 in [false, true] {
            let run = run(ProtocolVersion::V5, 3, 100_000);
            assert!(run.len() > MAX_PAYLOAD);
            let mut framer = Framer::established(ProtocolVersion::V5, lz4);
            let wire = framer.frame(&run).expect("frame").to_vec();
            assert_round_trip(ProtocolVersion::V5, lz4, &run, &wire);
            let mut buf = vec![0; HEAD_ROOM];
            buf.extend_from_slice(&run);
            buf.extend_from_slice(&[0; TAIL_ROOM]);
            assert_eq!(framer.seal(&mut buf).expect("seal"), wire);
        }
    }

    #[test]
    fn v5_is_bare_until_segments_start() {
        let mut opts = Vec::new();
        encode_request(&Options, ProtocolVersion::V5, 0, 0, &mut opts).expect("encode");
        for lz4 in [false, true] {
            let mut framer = Framer::new(ProtocolVersion::V5, lz4);
            assert_eq!(framer.frame(&opts).expect("frame"), opts);
            framer.start_segments();
            assert_ne!(framer.frame(&opts).expect("frame"), opts);
        }
        // v4 with LZ4 compresses from the first request; OPTIONS has no
        // body, so its envelope is unchanged.
        let mut opts4 = Vec::new();
        encode_request(&Options, ProtocolVersion::V4, 0, 0, &mut opts4).expect("encode");
        assert_eq!(Framer::new(ProtocolVersion::V4, true).frame(&opts4).expect("frame"), opts4);
    }

    #[test]
    fn truncated_runs_and_small_buffers_are_errors() {
        let two = run(ProtocolVersion::V4, 2, 10);
        let cut = &two[..two.len() - 1];
        assert!(Framer::established(ProtocolVersion::V4, true).frame(cut).is_err());
        let three = run(ProtocolVersion::V5, 3, 60_000);
        assert!(Framer::established(ProtocolVersion::V5, false).frame(&three[..MAX_PAYLOAD + 5]).is_err());
        let mut tiny = [0u8; HEAD_ROOM + TAIL_ROOM - 1];
        assert!(Framer::established(ProtocolVersion::V5, false).seal(&mut tiny).is_err());
    }

    #[test]
    fn a_huge_scratch_is_given_back() {
        let mut framer = Framer::established(ProtocolVersion::V4, true);
        framer.frame(&run(ProtocolVersion::V4, 1, 3 << 20)).expect("frame");
        framer.frame(&run(ProtocolVersion::V4, 1, 10)).expect("frame");
        assert!(framer.scratch.capacity() <= KEEP_SCRATCH);
    }
}
