//! The writer, reader and heartbeat tasks of a connection.

use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use shardwise_protocol::codec::Reader;
use shardwise_protocol::frame::compression::{compress_body, decompress_body};
use shardwise_protocol::frame::segment::{
    encode_envelopes, encode_segment, seal_in_place, SegmentCompression, LZ4_HEADER_LEN, UNCOMPRESSED_HEADER_LEN,
};
use shardwise_protocol::frame::{Envelope, EnvelopeHeader, Flags, FrameDecoder, Opcode, ProtocolVersion, HEADER_LEN};
use shardwise_protocol::request::Options;
use shardwise_protocol::response::Event;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::{deliver, Inner};
use crate::config::Compression;
use crate::error::ConnectionError;

/// The body of the Void result every plain write gets.
const VOID: &[u8] = &[0, 0, 0, 1];

/// Writes whatever the swap buffer collected, one syscall per buffer.
pub(super) async fn writer<W: AsyncWrite + Unpin>(
    inner: Arc<Inner>,
    mut socket: W,
    mut oversized: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let mut scratch = Vec::new();
    let result: Result<(), ConnectionError> = async {
        loop {
            tokio::select! {
                biased;
                slice = inner.queue.dequeue_async() => {
                    let Ok(mut slice) = slice else { return Ok(()) };
                    match (inner.version, inner.compression) {
                        (ProtocolVersion::V4, Compression::None) => socket.write_all(&slice).await?,
                        (ProtocolVersion::V4, Compression::Lz4) => {
                            scratch.clear();
                            compress_envelopes(&slice, &mut scratch)?;
                            socket.write_all(&scratch).await?;
                        }
                        (ProtocolVersion::V5, Compression::None) => {
                            // One self-contained segment, sealed in place.
                            let frame = &mut slice.frame_mut()[LZ4_HEADER_LEN - UNCOMPRESSED_HEADER_LEN..];
                            seal_in_place(frame, true).map_err(|_| ConnectionError::Protocol("oversized segment"))?;
                            socket.write_all(frame).await?;
                        }
                        (ProtocolVersion::V5, Compression::Lz4) => {
                            scratch.clear();
                            encode_segment(&slice, true, SegmentCompression::Lz4, &mut scratch)
                                .map_err(|_| ConnectionError::Protocol("oversized segment"))?;
                            socket.write_all(&scratch).await?;
                        }
                    }
                    drop(slice);
                    // Coalescing: with other requests in flight, more are on
                    // their way (their answers make their tasks send again);
                    // let the runnable tasks queue theirs before the next
                    // write instead of sending each alone.
                    if inner.streams.in_flight() > 1 {
                        tokio::task::yield_now().await;
                    }
                }
                Some(buf) = oversized.recv() => {
                    scratch.clear();
                    match (inner.version, inner.compression) {
                        (ProtocolVersion::V4, Compression::None) => socket.write_all(&buf).await?,
                        (ProtocolVersion::V4, Compression::Lz4) => {
                            compress_envelopes(&buf, &mut scratch)?;
                            socket.write_all(&scratch).await?;
                        }
                        (ProtocolVersion::V5, c) => {
                            let c = if c == Compression::Lz4 { SegmentCompression::Lz4 } else { SegmentCompression::None };
                            encode_envelopes(&buf, c, &mut scratch)
                                .map_err(|_| ConnectionError::Protocol("malformed envelope run"))?;
                            socket.write_all(&scratch).await?;
                        }
                    }
                    // Do not keep a huge scratch buffer around.
                    if scratch.capacity() > 1 << 20 {
                        scratch = Vec::new();
                    }
                }
            }
        }
    }
    .await;
    if let Err(e) = result {
        inner.close(e);
    }
    let _ = socket.shutdown().await;
}

/// v4 LZ4: compresses the body of each envelope of a run.
fn compress_envelopes(mut run: &[u8], out: &mut Vec<u8>) -> Result<(), ConnectionError> {
    while let Some(header) = run.first_chunk::<HEADER_LEN>() {
        let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
        let body = run.get(HEADER_LEN..HEADER_LEN + len).ok_or(ConnectionError::Protocol("truncated envelope"))?;
        let start = out.len();
        out.extend_from_slice(header);
        if body.is_empty() {
            run = &run[HEADER_LEN..];
            continue;
        }
        compress_body(body, out).map_err(|_| ConnectionError::Protocol("compression failed"))?;
        out[start + 1] |= Flags::COMPRESSION;
        let compressed = (out.len() - start - HEADER_LEN) as u32;
        out[start + 5..start + HEADER_LEN].copy_from_slice(&compressed.to_be_bytes());
        run = &run[HEADER_LEN + len..];
    }
    Ok(())
}

/// Reads envelopes and hands each to its request (events to subscribers).
pub(super) async fn reader<R: AsyncRead + Unpin>(inner: Arc<Inner>, socket: R, decoder: FrameDecoder, max_body: usize) {
    let result = match inner.version {
        ProtocolVersion::V4 => read_v4(&inner, socket, max_body).await,
        ProtocolVersion::V5 => read_v5(&inner, socket, decoder).await,
    };
    inner.close(result.err().unwrap_or(ConnectionError::Closed));
}

async fn read_v4<R: AsyncRead + Unpin>(inner: &Inner, socket: R, max_body: usize) -> Result<(), ConnectionError> {
    let mut socket = BufReader::with_capacity(16 * 1024, socket);
    let lz4 = inner.compression == Compression::Lz4;
    loop {
        let mut head = [0u8; HEADER_LEN];
        match socket.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(ConnectionError::Closed),
            Err(e) => return Err(e.into()),
        }
        let mut header = EnvelopeHeader::decode(&head, max_body)?;
        let len = header.length as usize;
        let mut body = if header.opcode == Opcode::Result && len == VOID.len() {
            let mut four = [0u8; 4];
            socket.read_exact(&mut four).await?;
            if four == VOID {
                Bytes::from_static(VOID)
            } else {
                Bytes::copy_from_slice(&four)
            }
        } else {
            Bytes::from(read_body(&mut socket, len).await?)
        };
        if lz4 && header.flags.has(Flags::COMPRESSION) {
            body = decompress_body(&body, max_body)?;
            header.flags.0 &= !Flags::COMPRESSION;
            header.length = body.len() as u32;
        }
        dispatch(inner, Envelope { header, body })?;
    }
}

/// Bodies up to this size are allocated whole, once, before they are read.
/// Larger ones grow as their bytes arrive: a 9-byte header announcing the
/// maximum body must not cost that much memory before one byte of it came.
const WHOLE_BODY: usize = 1 << 20;

/// Reads a body of `len` bytes announced by a header.
async fn read_body<R: AsyncRead + Unpin>(socket: &mut R, len: usize) -> std::io::Result<Vec<u8>> {
    if len <= WHOLE_BODY {
        // The one allocation of a response: its body, exactly.
        let mut body = vec![0u8; len];
        socket.read_exact(&mut body).await?;
        return Ok(body);
    }
    let mut body = Vec::with_capacity(WHOLE_BODY);
    let mut rest = socket.take(len as u64);
    while body.len() < len {
        if body.len() == body.capacity() {
            // Doubling, never past the announced length.
            body.reserve_exact(body.len().min(len - body.len()));
        }
        if rest.read_buf(&mut body).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(body)
}

/// v5 read buffer: segments are split off it without copying, so
/// responses share it; once they are dropped, the space is reused in place.
const V5_READ_BUFFER: usize = 64 * 1024;

async fn read_v5<R: AsyncRead + Unpin>(
    inner: &Inner,
    mut socket: R,
    mut decoder: FrameDecoder,
) -> Result<(), ConnectionError> {
    decoder.input_mut().reserve(V5_READ_BUFFER);
    loop {
        while let Some(envelope) = decoder.next_envelope()? {
            dispatch(inner, envelope)?;
        }
        let input = decoder.input_mut();
        if input.capacity() - input.len() < 4096 {
            // Less than the whole buffer, so a buffer no response holds is reclaimed.
            input.reserve(V5_READ_BUFFER / 4);
        }
        if socket.read_buf(input).await? == 0 {
            return Err(ConnectionError::Closed);
        }
    }
}

fn dispatch(inner: &Inner, mut envelope: Envelope) -> Result<(), ConnectionError> {
    if envelope.header.opcode == Opcode::Result && envelope.body.as_ref() == VOID {
        // Do not let a write's answer keep the (v5) read buffer shared: the
        // buffer is then reused in place instead of reallocated.
        envelope.body = Bytes::from_static(VOID);
    }
    if envelope.header.stream >= 0 {
        return deliver(inner, envelope);
    }
    if envelope.header.opcode == Opcode::Event {
        match Event::decode(&mut Reader::new(&envelope.body)) {
            Ok(event) => {
                let _ = inner.events.send(event);
            }
            Err(e) => tracing::warn!(addr = %inner.addr, error = %e, "undecodable event ignored"),
        }
    }
    Ok(())
}

/// Pings the connection every `interval`, whatever is in flight, and closes
/// it when a ping gets no answer within `timeout`: a half-open connection
/// (TCP up, nothing coming back) is detected within `interval + timeout`.
/// Pinging only idle connections would not do: a request abandoned after
/// its timeout stays in flight until an answer that never comes, so a
/// silenced connection would never be pinged again.
pub(super) async fn heartbeat(inner: Weak<Inner>, interval: Duration, timeout: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(strong) = inner.upgrade() else { return };
        if strong.closed.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        // Waiting for a stream id counts against the timeout too: ids held
        // by requests that are never answered are part of the same failure.
        match tokio::time::timeout(timeout, strong.send(&Options, 0)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                strong.close(ConnectionError::HeartbeatTimeout);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::ReadBuf;

    use super::*;

    /// Yields `data` in small pieces, then EOF; remembers the largest
    /// buffer it was asked to fill.
    struct Trickle {
        data: Vec<u8>,
        largest: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            self.largest = self.largest.max(buf.remaining());
            let n = self.data.len().min(buf.remaining()).min(4096);
            let piece: Vec<u8> = self.data.drain(..n).collect();
            buf.put_slice(&piece);
            Poll::Ready(Ok(()))
        }
    }

    /// A header announced 256 MiB and the reader allocated (and offered the
    /// socket) all of it before one byte arrived.
    #[tokio::test]
    async fn a_huge_announced_body_is_read_in_bounded_steps() {
        let mut socket = Trickle { data: vec![7; 10_000], largest: 0 };
        let r = read_body(&mut socket, 256 << 20).await;
        assert_eq!(r.map_err(|e| e.kind()), Err(std::io::ErrorKind::UnexpectedEof));
        assert!(socket.largest <= WHOLE_BODY, "offered {} bytes at once", socket.largest);
    }

    #[tokio::test]
    async fn bodies_small_and_large_are_read_whole() {
        for len in [0, 4, 5000, WHOLE_BODY, WHOLE_BODY + 1, 3 * WHOLE_BODY + 17] {
            let data: Vec<u8> = (0..len + 3).map(|i| i as u8).collect();
            let mut socket = Trickle { data: data.clone(), largest: 0 };
            let body = read_body(&mut socket, len).await.expect("body");
            assert_eq!(body, data[..len], "len {len}");
            assert_eq!(socket.data, data[len..], "nothing read past the body");
        }
    }
}
