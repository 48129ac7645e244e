//! The writer, reader, sweeper and heartbeat tasks of a connection.

use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use shardwise_protocol::codec::Reader;
use shardwise_protocol::frame::exact::{ExactDecoder, VOID};
use shardwise_protocol::frame::framer::{HEAD_ROOM, TAIL_ROOM};
use shardwise_protocol::frame::{Envelope, FrameDecoder, Framer, Opcode, ProtocolVersion};
use shardwise_protocol::request::Options;
use shardwise_protocol::response::Event;
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::mpsc;

use super::direct::{handed, write_in_turn, Sink};
use super::{deliver, Inner, QueuedRun};
use crate::config::Compression;
use crate::error::ConnectionError;

/// At most this many scheduling rounds a batch waits for more requests
/// before it is written.
const MAX_COALESCING_ROUNDS: usize = 4;

/// Writes whatever the swap buffer collected, one syscall per batch.
///
/// Coalescing: with other requests in flight, more are on their way (their
/// answers make their tasks send again), so a batch is not written at once:
/// it is copied aside (the swap buffer is free again for the requests
/// coming), and the runnable tasks get a scheduling round (which runs the
/// runtime's I/O poll too) to queue theirs, round after round while more
/// come, a few rounds at most and not past half the buffer's size. Then one
/// write sends it all. Writing the first part at once and the rest after
/// the rounds, as this did before, made one syscall more per batch, which
/// showed with many connections of a few requests each (a shard-aware
/// session): 32% more `sendto`s per request than the official driver, which
/// also waits before it writes. A request alone on its connection is
/// written at once; on a plain connection it writes itself (`direct.rs`),
/// and the writer takes its turn around each write (`turn.rs`).
pub(super) async fn writer<W: Sink>(
    inner: Arc<Inner>,
    mut socket: W,
    mut framer: Framer,
    mut oversized: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    let result: Result<(), ConnectionError> = async {
        // Made on the first batch that waits: one per connection.
        let mut batch: Vec<u8> = Vec::new();
        loop {
            tokio::select! {
                biased;
                slice = inner.queued() => {
                    let Some(mut slice) = slice else { return Ok(()) };
                    let wire = seal(&mut framer, &mut slice)?;
                    if inner.streams.in_flight() <= 1 {
                        write_in_turn(&inner, &mut socket, wire).await?;
                        continue;
                    }
                    if batch.capacity() == 0 {
                        // It never holds more than half the buffer plus one
                        // sealed run; a run sealed with LZ4 can outgrow the
                        // buffer a little (incompressible bodies, and v4's
                        // length before each compressed body), so twice the
                        // buffer: no reallocation later.
                        batch.reserve(2 * inner.queue.capacity() + HEAD_ROOM + TAIL_ROOM);
                    }
                    batch.extend_from_slice(wire);
                    drop(slice);
                    for _ in 0..MAX_COALESCING_ROUNDS {
                        if 2 * batch.len() > inner.queue.capacity() {
                            break;
                        }
                        tokio::task::yield_now().await;
                        let Ok(mut more) = inner.queue.try_dequeue() else { break };
                        batch.extend_from_slice(seal(&mut framer, &mut more)?);
                    }
                    write_in_turn(&inner, &mut socket, &batch).await?;
                    batch.clear();
                }
                () = handed(&inner) => write_in_turn(&inner, &mut socket, &[]).await?,
                Some(buf) = oversized.recv() => {
                    let wire = framer.frame(&buf).map_err(|_| ConnectionError::Protocol("malformed envelope run"))?;
                    write_in_turn(&inner, &mut socket, wire).await?;
                }
            }
        }
    }
    .await;
    if let Err(e) = result {
        inner.close(e);
    }
    socket.shutdown().await;
}

/// `run` sealed for the wire (see `Framer::seal`).
fn seal<'a>(framer: &'a mut Framer, run: &'a mut QueuedRun<'_>) -> Result<&'a [u8], ConnectionError> {
    framer.seal(run.frame_mut()).map_err(|_| ConnectionError::Protocol("unframable run"))
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
    let mut decoder = ExactDecoder::new(max_body, inner.compression == Compression::Lz4);
    loop {
        // Only a read that finds the buffer empty reads the socket.
        let from_socket = socket.buffer().is_empty();
        let n = socket.read(decoder.read_buf()).await?;
        if n == 0 {
            return Err(ConnectionError::Closed);
        }
        if from_socket {
            inner.mark_read();
        }
        if let Some(envelope) = decoder.filled(n)? {
            dispatch(inner, envelope)?;
        }
    }
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
        inner.mark_read();
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

/// Expires the requests whose deadline passed (`Streams::expire`), asleep
/// until the earliest deadline to come, or until pinged by a request with
/// an earlier one. With requests of one timeout answered in time, it wakes
/// about once per timeout.
///
/// No deadline is missed: a request that stores its deadline behind the
/// sweep pings it (`sweep.rs`, loom-checked); a ping that comes before the
/// sweeper waits is kept by `Notify` as a permit.
pub(super) async fn sweeper(inner: Arc<Inner>) {
    loop {
        if inner.closed.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        inner.next_sweep.begin();
        let next = inner.streams.expire(inner.now_tick());
        inner.next_sweep.end(next);
        let pinged = inner.sweep.notified();
        match next {
            None => pinged.await,
            Some(tick) => {
                tokio::select! {
                    () = pinged => {}
                    () = tokio::time::sleep_until(inner.instant_of(tick)) => {}
                }
            }
        }
    }
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
