//! One CQL connection: a handshake, then a writer task and a reader task
//! around a `Streams` table (`stream.rs`). The wire state itself is the
//! protocol crate's, without I/O: the handshake machine, the framer and
//! the decoders; this module moves bytes between them and the socket.
//!
//! The write path serializes each request in place, with its exact size
//! known first, into a swap buffer (`swap-buffer-queue`): concurrent
//! requests coalesce into the buffer while the writer task writes the other
//! one with a single syscall, and the framer seals a dequeued buffer in
//! place (in v5 into one self-contained segment). A request alone on a
//! plain, uncompressed connection writes itself to the socket instead of
//! waking the writer (`direct.rs`, `turn.rs`). Requests larger than the
//! buffer take a separate, allocating path. The read path allocates one
//! buffer per response body (none for the 4-byte Void result of a write)
//! and hands it to the waiting request's slot. A connection's own
//! `execute` and `prepare` (one statement, no retries) are `execute.rs`.
//!
//! A request's deadline costs no runtime timer while it waits for its
//! answer: the stream table keeps each pending request's deadline, and one
//! sweeper task per connection, asleep until the earliest of them, expires
//! what is due, also for a request still waiting for room in the write
//! buffer. Only a request that must wait for a stream id arms a timer of
//! its own, and only then.
//!
//! This file holds the connection handle, its shared state and the request
//! path (a stream id, the write in place, the wait for the answer); the
//! rest, one concept a module:
//!
//! - `open`: opening a connection (socket, TLS, handshake, its tasks);
//! - `socket`: the TCP socket, its local address and options;
//! - `handshake`: the handshake over the protocol crate's state machine;
//! - `io`: the writer, reader, sweeper and heartbeat tasks;
//! - `direct`, `turn`: a lone request writing the socket itself;
//! - `room`: requests waiting for room in the write buffer;
//! - `stream`: stream ids and the slots where answers meet their requests;
//! - `sweep`: when the sweeper wakes next, and which requests ping it (loom-checked);
//! - `closing`: how a connection closes while requests come and go (loom-checked);
//! - `deadline`: a request's deadline and which timeout it is;
//! - `execute`: the connection's own `execute` and `prepare`.

mod closing;
mod deadline;
mod direct;
mod execute;
pub(crate) mod handshake;
mod io;
mod open;
mod room;
mod socket;
pub(crate) mod stream;
mod sweep;
mod turn;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use shardwise_protocol::frame::framer::{HEAD_ROOM, TAIL_ROOM};
use shardwise_protocol::frame::{Envelope, ProtocolVersion, HEADER_LEN};
use shardwise_protocol::request::{encode_request, write_request, Negotiated, Options, Request};
use shardwise_protocol::response::Event;
use shardwise_protocol::sharding::ShardingInfo;
use shardwise_protocol::EncodeError;
use swap_buffer_queue::error::TryEnqueueError;
use swap_buffer_queue::notify::Notify as QueueNotify;
use swap_buffer_queue::write::WriteVecBuffer;
use swap_buffer_queue::Queue;
use tokio::sync::{broadcast, mpsc, Notify};

use crate::config::Compression;
use crate::error::{ConnectionError, ExecutionError};
use deadline::bounded;
pub(crate) use deadline::{Deadline, Expiry};
pub(crate) use execute::execute_observed;
use stream::{Answer, Delivery, Streams, Tick, Unsent, NO_DEADLINE};

/// What a request's slot receives.
pub(crate) type Delivered = Result<Envelope, ConnectionError>;

/// The swap buffer, with the room the framer seals a run in around the
/// payload (a v5 segment header before it, its CRC32 trailer after it).
pub(crate) type WriteQueue = Queue<WriteVecBuffer<HEAD_ROOM, TAIL_ROOM>, WriteNotifier>;

/// A run of requests taken from the swap buffer.
pub(crate) type QueuedRun<'a> =
    swap_buffer_queue::buffer::BufferSlice<'a, WriteVecBuffer<HEAD_ROOM, TAIL_ROOM>, WriteNotifier>;

/// Who the swap buffer wakes: the writer when a request was queued, and
/// the requests waiting for room when the writer swapped the buffers.
/// swap-buffer-queue's own notifier does the same, but its asynchronous
/// dequeue first retries 64 times, pausing between tries, each time it
/// finds the buffer empty. The writer does that after every write. With
/// a connection per shard and a few requests on each, that spinning took
/// 12% of the client's CPU.
#[derive(Debug, Default)]
pub(crate) struct WriteNotifier {
    /// Pinged when a request was queued. A ping with the writer busy is
    /// kept as a permit, so the writer's next wait returns at once.
    queued: Notify,
    /// The requests waiting for room.
    room: room::WaitingForRoom,
}

impl QueueNotify for WriteNotifier {
    fn notify_dequeue(&self) {
        self.queued.notify_one();
    }

    fn notify_enqueue(&self) {
        self.room.wake_all();
    }
}

pub(crate) struct Inner {
    pub(crate) addr: SocketAddr,
    pub(crate) version: ProtocolVersion,
    pub(crate) compression: Compression,
    pub(crate) supported: Vec<(String, Vec<String>)>,
    pub(crate) sharding: Option<ShardingInfo>,
    /// Scylla's LWT mark in prepared metadata flags (0: not negotiated).
    pub(crate) lwt_mask: u32,
    /// `SCYLLA_USE_METADATA_ID` negotiated: v4 PREPARED answers carry result
    /// metadata ids (docs/protocol.md §1.8).
    pub(crate) metadata_id: bool,
    /// `TABLETS_ROUTING_V2_EXPERIMENTAL` negotiated: every EXECUTE ends
    /// with a tablet version block (docs/protocol.md §1.7).
    pub(crate) tablets_v2: bool,
    /// The node's host id from `SCYLLA_HOST_ID` in SUPPORTED.
    pub(crate) host_id: Option<uuid::Uuid>,
    pub(crate) streams: Streams<Delivered>,
    pub(crate) queue: WriteQueue,
    /// Set when requests may write the socket themselves (`direct.rs`).
    direct: Option<direct::Direct>,
    pub(crate) oversized: mpsc::UnboundedSender<Vec<u8>>,
    /// Pinged when a stream id is freed while requests wait for one.
    pub(crate) freed: Notify,
    /// Pinged once when the connection closes.
    pub(crate) closed_notify: Notify,
    pub(crate) closed: AtomicBool,
    pub(crate) error: OnceLock<ConnectionError>,
    pub(crate) events: broadcast::Sender<Event>,
    pub(crate) max_orphans: Option<usize>,
    /// Tick 1 of the deadline clock (ticks are milliseconds), on the
    /// runtime's clock, as the timers it replaces were (so that a paused
    /// clock in tests pauses deadlines too).
    pub(crate) epoch: tokio::time::Instant,
    /// When the sweeper wakes next (`Tick::MAX`: not before it is pinged, or
    /// sweeping now); a request with an earlier deadline pings it.
    pub(crate) next_sweep: sweep::NextSweep,
    /// Pings the sweeper.
    pub(crate) sweep: Notify,
    /// `read_at` counts from here.
    pub(crate) read_epoch: Instant,
    /// When bytes were last read off the socket (nanoseconds after
    /// `read_epoch`): stored once per read, before the answers in them are
    /// handed on, so an answer's request reads when its answer came without
    /// a clock read of its own.
    pub(crate) read_at: AtomicU64,
}

impl Inner {
    /// The next run of queued requests, waited for without spinning (see
    /// [`WriteNotifier`]); `None` once the connection is closed and every
    /// queued request was taken.
    pub(crate) async fn queued(&self) -> Option<QueuedRun<'_>> {
        use swap_buffer_queue::error::TryDequeueError;
        loop {
            match self.queue.try_dequeue() {
                Ok(run) => return Some(run),
                // Pending: a request is still being written into the
                // buffer; it pings when done.
                Err(TryDequeueError::Empty | TryDequeueError::Pending) => self.queue.notify().queued.notified().await,
                // Another dequeue under way: there is none but the writer's.
                Err(TryDequeueError::Conflict) => tokio::task::yield_now().await,
                Err(TryDequeueError::Closed) => return None,
            }
        }
    }

    /// Closes the connection with `error`: fails every in-flight request,
    /// refuses new ones and stops the writer.
    pub(crate) fn close(&self, error: ConnectionError) {
        let Some(error) = closing::begin_close(&self.closed, &self.error, error, || ConnectionError::Closed) else {
            return;
        };
        tracing::debug!(addr = %self.addr, %error, "connection closed");
        self.queue.close();
        self.streams.fail_all(|| Err(error.clone()));
        self.freed.notify_waiters();
        self.closed_notify.notify_waiters();
        self.sweep.notify_one();
    }

    /// The tick at or after `at`.
    fn tick_at(&self, at: Instant) -> Tick {
        let d = tokio::time::Instant::from_std(at).saturating_duration_since(self.epoch);
        tick_of_ms(d.as_millis() + u128::from(!d.subsec_nanos().is_multiple_of(1_000_000)))
    }

    /// Notes that bytes were just read off the socket (see `read_at`).
    pub(crate) fn mark_read(&self) {
        let nanos = u64::try_from(self.read_epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.read_at.store(nanos, Ordering::Release);
    }

    /// The tick now (rounded down).
    pub(crate) fn now_tick(&self) -> Tick {
        tick_of_ms(self.epoch.elapsed().as_millis())
    }

    /// The instant of `tick`.
    pub(crate) fn instant_of(&self, tick: Tick) -> tokio::time::Instant {
        self.epoch + std::time::Duration::from_millis(tick.saturating_sub(1))
    }

    fn closed_error(&self) -> ConnectionError {
        closing::closed_error(&self.error, || ConnectionError::Closed)
    }

    pub(crate) async fn send<R: Request>(&self, request: &R, flags: u8) -> Result<Envelope, ExecutionError> {
        self.send_with(flags, None, None, |write| Ok(write.write(request))).await
    }

    /// Sends the request `build` hands to the [`TryWrite`] it is given, and
    /// waits for the answer, or until `deadline`. `build` runs again
    /// whenever the write buffer was full, so that the request itself is
    /// never held across an await (see the `execute` module on why that
    /// matters).
    pub(crate) async fn send_with<B>(
        &self,
        flags: u8,
        block: Option<u8>,
        deadline: Option<&Deadline>,
        build: B,
    ) -> Result<Envelope, ExecutionError>
    where
        B: Fn(TryWrite<'_, '_>) -> Result<Poll<Result<(), ExecutionError>>, EncodeError>,
    {
        let inner = self;
        let ticks = deadline.map_or(NO_DEADLINE, |d| self.tick_at(d.at));
        // The usual case first, without a future of its own: an id is free.
        let claimed = closing::claim(&self.closed, &self.error, &self.streams, ticks, || ConnectionError::Closed)?;
        let id = match claimed {
            Some(id) => id,
            // Boxed: every id in use is rare, and its state inline would
            // enlarge every request's future (each layer copies it once).
            None => Box::pin(bounded(deadline, self.allocate_stream(ticks))).await?,
        };
        if self.next_sweep.must_ping(ticks) {
            // The sweeper sleeps past this deadline (or is idle).
            self.sweep.notify_one();
        }
        let mut response = ResponseFuture { inner, id, sent: false, done: false };
        std::future::poll_fn(|cx| match build(TryWrite { inner, id, flags, block, cx }) {
            Err(e) => Poll::Ready(Err(e.into())),
            Ok(Poll::Ready(written)) => Poll::Ready(written),
            // The buffer is full: wait for room, but not past the deadline,
            // which the sweeper keeps as for a request sent (no timer).
            Ok(Poll::Pending) => self.streams.poll_unsent(id, cx).map(|why| {
                Err(match (why, deadline) {
                    (Unsent::Expired, Some(d)) => d.error(),
                    _ => self.closed_error().into(),
                })
            }),
        })
        .await?;
        response.sent = true;
        match (&mut response).await {
            Answer::Received(delivered) => Ok(delivered?),
            Answer::Expired => Err(deadline.map_or_else(|| self.closed_error().into(), |d| d.error())),
            Answer::Missing => Err(self.closed_error().into()),
        }
    }

    async fn allocate_stream(&self, deadline: Tick) -> Result<i16, ExecutionError> {
        let inner = self;
        let _waiting = inner.streams.wait_for_id();
        loop {
            let notified = inner.freed.notified();
            let claimed =
                closing::claim(&inner.closed, &inner.error, &inner.streams, deadline, || ConnectionError::Closed)?;
            if let Some(id) = claimed {
                return Ok(id);
            }
            notified.await;
        }
    }
}

/// The tick `ms` milliseconds after the epoch (tick 1), saturating.
fn tick_of_ms(ms: u128) -> Tick {
    Tick::try_from(ms).unwrap_or(Tick::MAX - 1) + 1
}

/// An open connection. Cheap to clone (one reference count: requests
/// clone the connection they run on); the tasks stop when the connection
/// is closed or every clone is dropped.
#[derive(Clone)]
pub struct Connection {
    owner: Arc<Owner>,
}

/// Closes the connection when the last user handle goes away.
struct Owner(Arc<Inner>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close(ConnectionError::Closed);
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.inner().addr)
            .field("version", &self.inner().version)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Connection {
    fn inner(&self) -> &Inner {
        &self.owner.0
    }

    /// Whether both handles are the same connection.
    pub fn same_as(&self, other: &Connection) -> bool {
        Arc::ptr_eq(&self.owner.0, &other.owner.0)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.inner().addr
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> ProtocolVersion {
        self.inner().version
    }

    /// The negotiated compression.
    pub fn compression(&self) -> Compression {
        self.inner().compression
    }

    /// The options the server listed in SUPPORTED.
    pub fn supported(&self) -> &[(String, Vec<String>)] {
        &self.inner().supported
    }

    /// Scylla's sharding parameters, when the server is sharded.
    pub fn sharding(&self) -> Option<&ShardingInfo> {
        self.inner().sharding.as_ref()
    }

    /// The shard serving this connection (0 on an unsharded server).
    pub fn shard(&self) -> u16 {
        self.inner().sharding.as_ref().map_or(0, ShardingInfo::shard)
    }

    /// This connection as a result names who answered it (the shard only
    /// on a sharded server); the session names the node by its pool's
    /// address.
    pub(crate) fn coordinator(&self) -> crate::result::Coordinator {
        crate::result::Coordinator::of_connection(self.addr(), self.sharding().map(|_| self.shard()))
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.inner().closed.load(Ordering::Acquire)
    }

    /// Resolves when the connection closes.
    pub async fn closed(&self) {
        let notified = self.inner().closed_notify.notified();
        if self.is_closed() {
            return;
        }
        notified.await;
    }

    /// Why the connection closed, if it did.
    pub fn close_reason(&self) -> Option<ConnectionError> {
        self.inner().error.get().cloned()
    }

    /// When bytes were last read off the socket: for a request that has
    /// its answer, when the answer came (or slightly later, when more came
    /// behind it), at the cost of an atomic load instead of a clock read.
    pub(crate) fn answered_at(&self) -> Instant {
        let inner = self.inner();
        inner.read_epoch + std::time::Duration::from_nanos(inner.read_at.load(Ordering::Acquire))
    }

    /// Requests in flight (including abandoned ones still unanswered).
    pub fn in_flight(&self) -> usize {
        self.inner().streams.in_flight()
    }

    /// Requests abandoned before their answer and still unanswered.
    pub fn orphans(&self) -> usize {
        self.inner().streams.orphans()
    }

    /// Server events received on this connection (after REGISTER).
    pub fn events(&self) -> broadcast::Receiver<Event> {
        self.inner().events.subscribe()
    }

    /// Closes the connection; in-flight requests fail with `Closed`.
    pub fn close(&self) {
        self.inner().close(ConnectionError::Closed);
    }

    /// Sends a request and waits for its answer envelope. The request is
    /// serialized straight into the write buffer; nothing is allocated
    /// unless it is larger than the buffer. Waits for a free stream id when
    /// all are in use. Dropping the future abandons the request.
    pub async fn send<R: Request>(&self, request: &R, flags: u8) -> Result<Envelope, ExecutionError> {
        self.inner().send(request, flags).await
    }

    /// [`Connection::send`] of a request built on demand by `build`: what
    /// lets `execute` futures stay `Send` whatever the values borrow.
    pub(crate) fn send_with<'a, B>(
        &'a self,
        flags: u8,
        deadline: Option<&'a Deadline>,
        build: B,
    ) -> impl Future<Output = Result<Envelope, ExecutionError>> + use<'a, B>
    where
        B: Fn(TryWrite<'_, '_>) -> Result<Poll<Result<(), ExecutionError>>, EncodeError>,
    {
        self.send_execute(flags, None, deadline, build)
    }

    /// [`Connection::send_with`] of an EXECUTE that ends with `block` under
    /// tablets routing v2 (see [`TryWrite`]'s `block`).
    pub(crate) fn send_execute<'a, B>(
        &'a self,
        flags: u8,
        block: Option<u8>,
        deadline: Option<&'a Deadline>,
        build: B,
    ) -> impl Future<Output = Result<Envelope, ExecutionError>> + use<'a, B>
    where
        B: Fn(TryWrite<'_, '_>) -> Result<Poll<Result<(), ExecutionError>>, EncodeError>,
    {
        // The connection's own future, not one wrapping it (one copy fewer).
        self.inner().send_with(flags, block, deadline, build)
    }

    /// The mask Scylla marks prepared LWT statements with (0 when it does not).
    pub(crate) fn lwt_mask(&self) -> u32 {
        self.inner().lwt_mask
    }

    /// Whether the connection negotiated `SCYLLA_USE_METADATA_ID` (result
    /// metadata ids on v4, so prepared statements may skip result metadata
    /// safely; docs/protocol.md §1.8).
    pub fn uses_metadata_id(&self) -> bool {
        self.inner().metadata_id
    }

    /// Whether this connection negotiated ScyllaDB's tablets routing v2
    /// ([`ConnectionConfig::tablets_routing_v2`](crate::ConnectionConfig::tablets_routing_v2)).
    pub fn uses_tablets_routing_v2(&self) -> bool {
        self.inner().tablets_v2
    }

    /// The node's host id, as its SUPPORTED said it (`SCYLLA_HOST_ID`,
    /// ScyllaDB only): known from the handshake, before any query.
    pub fn host_id(&self) -> Option<uuid::Uuid> {
        self.inner().host_id
    }

    /// Sends OPTIONS and waits for SUPPORTED: a liveness probe.
    pub async fn ping(&self) -> Result<(), ExecutionError> {
        self.send(&Options, 0).await.map(drop)
    }
}

/// Writes one request on a stream id: serialized in place into the swap
/// buffer, or into a buffer of its own when larger. `Pending` (the buffer
/// is full; the task is woken when it was swapped) leaves nothing behind:
/// the request is built and offered again on the next poll.
pub(crate) struct TryWrite<'a, 'c> {
    inner: &'a Inner,
    id: i16,
    flags: u8,
    /// The tablet version block an EXECUTE ends with under tablets routing
    /// v2 (`None`: block 0 of version 0, for a request whose tablet is not
    /// known).
    block: Option<u8>,
    cx: &'a mut Context<'c>,
}

impl TryWrite<'_, '_> {
    /// Offers `request` to the write buffer (see the type's docs).
    pub(crate) fn write<R: Request>(self, request: &R) -> Poll<Result<(), ExecutionError>> {
        let TryWrite { inner, id, flags, block, cx } = self;
        // A v4 EXECUTE carries a result metadata id exactly when this
        // connection negotiated SCYLLA_USE_METADATA_ID, whatever the
        // statement holds (it may have been prepared on another node); and
        // ends with a tablet version block exactly when it negotiated
        // tablets routing v2 (where one is required).
        let tablet_version_block = inner.tablets_v2.then(|| block.unwrap_or(0));
        let request = &Negotiated { request, metadata_id: inner.metadata_id, tablet_version_block };
        let version = inner.version;
        let body_len = request.body_len(version)?;
        let total = HEADER_LEN + body_len;
        if total <= inner.queue.capacity() {
            if let Some(direct) = &inner.direct {
                if direct.try_write(inner, request, id, flags, body_len)? {
                    return Poll::Ready(Ok(()));
                }
            }
            let write = move |slice: &mut [u8]| {
                let mut out = slice;
                // Cannot fail: the size was computed and checked above.
                let _ = write_request(request, version, id, flags, body_len, &mut out);
            };
            // It either takes the request now or registers the task to be
            // woken when the buffer was swapped, then tries once more (the
            // swap may have come in between).
            let queue = &inner.queue;
            let retry = match queue.try_enqueue((total, write)) {
                Ok(()) => return Poll::Ready(Ok(())),
                Err(TryEnqueueError::Closed(_)) => return Poll::Ready(Err(inner.closed_error().into())),
                Err(TryEnqueueError::InsufficientCapacity(value)) => value,
            };
            queue.notify().room.register(cx.waker());
            match queue.try_enqueue(retry) {
                Ok(()) => Poll::Ready(Ok(())),
                Err(TryEnqueueError::Closed(_)) => Poll::Ready(Err(inner.closed_error().into())),
                Err(TryEnqueueError::InsufficientCapacity(_)) => Poll::Pending,
            }
        } else {
            let mut buf = Vec::new();
            encode_request(request, version, id, flags, &mut buf)?;
            if inner.oversized.send(buf).is_err() {
                return Poll::Ready(Err(inner.closed_error().into()));
            }
            Poll::Ready(Ok(()))
        }
    }
}

/// Waits for the answer of one stream id; abandons the id when dropped first.
struct ResponseFuture<'a> {
    inner: &'a Inner,
    id: i16,
    /// The request reached the write path, so an answer will come.
    sent: bool,
    done: bool,
}

impl Future for &mut ResponseFuture<'_> {
    type Output = Answer<Delivered>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer<Delivered>> {
        let this = self.get_mut();
        let answer = std::task::ready!(this.inner.streams.poll_response(this.id, cx));
        this.done = true;
        match answer {
            // The id stays reserved, as an orphan, until the answer comes.
            Answer::Expired => this.inner.check_orphans(this.inner.streams.orphans()),
            _ => this.inner.id_freed(),
        }
        Poll::Ready(answer)
    }
}

impl Inner {
    /// Wakes a request waiting for a stream id, if one waits, after an id
    /// was freed (see `Streams::awaited`).
    fn id_freed(&self) {
        if self.streams.awaited() {
            self.freed.notify_one();
        }
    }

    /// Closes the connection when abandoned requests exceed the budget.
    fn check_orphans(&self, orphans: usize) {
        if self.max_orphans.is_some_and(|max| orphans > max) {
            self.close(ConnectionError::TooManyOrphans(orphans));
        }
    }
}

impl Drop for ResponseFuture<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        match closing::drop_request(&self.inner.streams, self.id, self.sent) {
            closing::Dropped::Cancelled => self.inner.id_freed(),
            closing::Dropped::Abandoned { orphans } => self.inner.check_orphans(orphans),
        }
    }
}

/// Reader-side delivery of one envelope to its request.
pub(crate) fn deliver(inner: &Inner, envelope: Envelope) -> Result<(), ConnectionError> {
    let id = envelope.header.stream;
    match inner.streams.complete(id, Ok(envelope)) {
        Ok(Delivery::Delivered) => Ok(()),
        Ok(Delivery::Orphan) => {
            inner.id_freed();
            Ok(())
        }
        Err(_) => Err(ConnectionError::Protocol("response for a stream id with no request")),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::atomic::AtomicUsize;

    use shardwise_protocol::consistency::Consistency;
    use shardwise_protocol::frame::{FrameDecoder, Framer};
    use shardwise_protocol::handshake::Established;
    use shardwise_protocol::request::{Query, QueryParameters};
    use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::config::ConnectionConfig;

    /// What a plain v4 handshake establishes.
    fn established_v4() -> Established {
        Established {
            version: ProtocolVersion::V4,
            lz4: false,
            supported: Vec::new(),
            metadata_id: false,
            tablets_v2: false,
            host_id: None,
            decoder: FrameDecoder::new(),
            framer: Framer::established(ProtocolVersion::V4, false),
        }
    }

    /// A v4 connection over an in-memory pipe of `pipe` bytes, with a write
    /// buffer of `write_buffer_size` bytes (`None`: the default's) and no
    /// heartbeat, and the node's end of the pipe.
    fn over_pipe(pipe: usize, write_buffer_size: Option<usize>) -> (Connection, tokio::io::DuplexStream) {
        let (client, server) = tokio::io::duplex(pipe);
        let (read, write) = tokio::io::split(client);
        let mut config = ConnectionConfig { heartbeat_interval: None, ..Default::default() };
        if let Some(size) = write_buffer_size {
            config.write_buffer_size = size;
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], 9042));
        (Connection::start(addr, read, direct::Owned(write), established_v4(), &config), server)
    }

    /// A request that finds the write buffer full is built again once the
    /// buffer was swapped (it is not held meanwhile), and is written
    /// exactly once.
    #[tokio::test]
    async fn a_request_finding_the_buffer_full_is_built_again_and_written_once() {
        // The writer task stalls on a 64-byte pipe nobody reads yet, so the
        // two 1 KiB buffers fill after a few requests of ~330 bytes.
        let (conn, mut server) = over_pipe(64, Some(1024));

        const N: usize = 12;
        let builds = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for i in 0..N {
            let (conn, builds) = (conn.clone(), builds.clone());
            let text = format!("{i:02} {}", "x".repeat(300));
            tasks.push(tokio::spawn(async move {
                let query = Query { query: &text, params: QueryParameters::new(Consistency::One, ()) };
                let build = |write: TryWrite<'_, '_>| {
                    builds.fetch_add(1, Ordering::Relaxed);
                    Ok(write.write(&query))
                };
                conn.send_with(0, None, build).await.map(|envelope| envelope.header.stream)
            }));
        }
        // Every request was offered at least once: most found the buffers
        // full (and were offered again when the writer swapped one).
        while builds.load(Ordering::Relaxed) < N {
            tokio::task::yield_now().await;
        }

        // The server reads and answers each request.
        let mut texts = BTreeSet::new();
        for _ in 0..N {
            let mut header = [0u8; HEADER_LEN];
            server.read_exact(&mut header).await.expect("header");
            let stream = i16::from_be_bytes([header[2], header[3]]);
            let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
            let mut body = vec![0u8; len];
            server.read_exact(&mut body).await.expect("body");
            let text_len = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
            assert!(texts.insert(body[4..4 + text_len][..2].to_vec()), "a request written twice");
            let mut answer = Vec::new();
            Response::new(ResponseMessage::Result(ResultMessage::Void))
                .encode(ProtocolVersion::V4, stream, &mut answer)
                .expect("encodes");
            server.write_all(&answer).await.expect("answer");
        }
        for t in tasks {
            t.await.expect("task").expect("answered");
        }
        assert_eq!(texts.len(), N);
        assert!(builds.load(Ordering::Relaxed) > N, "no request found the buffers full");
        assert_eq!(conn.in_flight(), 0);
        // And nothing else was written.
        let mut more = [0u8; 1];
        let read = tokio::time::timeout(std::time::Duration::from_millis(200), server.read(&mut more)).await;
        assert!(read.is_err(), "more was written than the {N} requests: {read:?}");
    }

    /// A request waiting for room in a full write buffer stops at its
    /// deadline: the sweeper expires it as it expires a request waiting
    /// for its answer (it arms no timer). It was never sent, so its id is
    /// freed at once, not kept as an orphan.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_waiting_for_room_stops_at_its_deadline() {
        // Nobody reads the 64-byte pipe: the writer stalls and the two
        // 1 KiB buffers stay full.
        let (conn, _server) = over_pipe(64, Some(1024));
        let text = "x".repeat(300);
        let mut fillers = Vec::new();
        for _ in 0..8 {
            let (conn, text) = (conn.clone(), text.clone());
            fillers.push(tokio::spawn(async move {
                let query = Query { query: &text, params: QueryParameters::new(Consistency::One, ()) };
                conn.send_with(0, None, |w| Ok(w.write(&query))).await
            }));
        }
        while conn.in_flight() < 8 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;

        let after = std::time::Duration::from_millis(200);
        let deadline = Deadline { at: Instant::now() + after, expiry: Expiry::Request(after) };
        let started = Instant::now();
        let query = Query { query: &text, params: QueryParameters::new(Consistency::One, ()) };
        let result = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            conn.send_with(0, Some(&deadline), |w| Ok(w.write(&query))),
        )
        .await
        .expect("the deadline was missed while waiting for room");
        assert!(matches!(result, Err(ExecutionError::Timeout(t)) if t == after), "{result:?}");
        let took = started.elapsed();
        assert!(took >= after, "expired early: {took:?}");
        assert!(took < std::time::Duration::from_secs(5), "kept waiting past its deadline: {took:?}");
        assert_eq!(conn.orphans(), 0, "a request never sent left its id as an orphan");
        assert_eq!(conn.in_flight(), 8, "the expired request's id was not freed");
        conn.close();
        for f in fillers {
            assert!(f.await.expect("task").is_err());
        }
    }

    /// A request's end is read off the connection, not the clock: the
    /// instant the reader read the answer, after the request was sent and
    /// the server's delay, and before the request returned.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answered_at_is_when_the_answer_was_read() {
        let (conn, mut server) = over_pipe(1 << 16, None);
        let delay = std::time::Duration::from_millis(50);
        let answering = tokio::spawn(async move {
            let mut header = [0u8; HEADER_LEN];
            server.read_exact(&mut header).await.expect("header");
            let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
            server.read_exact(&mut vec![0u8; len]).await.expect("body");
            tokio::time::sleep(delay).await;
            let mut answer = Vec::new();
            Response::new(ResponseMessage::Result(ResultMessage::Void))
                .encode(ProtocolVersion::V4, i16::from_be_bytes([header[2], header[3]]), &mut answer)
                .expect("encodes");
            server.write_all(&answer).await.expect("answer");
            server
        });
        let sent = Instant::now();
        let query = Query { query: "SELECT 1", params: QueryParameters::new(Consistency::One, ()) };
        conn.send_with(0, None, |w| Ok(w.write(&query))).await.expect("answered");
        let returned = Instant::now();
        let at = conn.answered_at();
        assert!(at >= sent + delay, "before the answer came: {:?} after sending", at.saturating_duration_since(sent));
        assert!(at <= returned, "after the request returned");
        drop(answering.await.expect("server"));
    }

    /// Deadlines are kept by the connection's sweeper: a request whose
    /// deadline is earlier than the one the sweeper sleeps until wakes it
    /// (it is not kept waiting for the later one), each request fails with
    /// its own deadline's error, and its id stays reserved as an orphan.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sweeper_expires_each_request_at_its_own_deadline() {
        let (conn, _server) = over_pipe(1 << 16, None);
        let deadline = |after_ms: u64| {
            let after = std::time::Duration::from_millis(after_ms);
            Deadline { at: Instant::now() + after, expiry: Expiry::Request(after) }
        };
        let query = Query { query: "SELECT 1", params: QueryParameters::new(Consistency::One, ()) };

        // No deadline: waits (the sweeper stays idle).
        let forever = {
            let conn = conn.clone();
            tokio::spawn(async move {
                let query = Query { query: "SELECT 2", params: QueryParameters::new(Consistency::One, ()) };
                conn.send_with(0, None, |w| Ok(w.write(&query))).await
            })
        };
        // A late deadline first, so the sweeper sleeps until it...
        let late = {
            let conn = conn.clone();
            tokio::spawn(async move {
                let query = Query { query: "SELECT 3", params: QueryParameters::new(Consistency::One, ()) };
                let d = deadline(30_000);
                conn.send_with(0, Some(&d), |w| Ok(w.write(&query))).await
            })
        };
        while conn.in_flight() < 2 {
            tokio::task::yield_now().await;
        }
        // ...then an early one, which must wake it.
        let started = Instant::now();
        let early = deadline(150);
        let result = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            conn.send_with(0, Some(&early), |w| Ok(w.write(&query))).await
        })
        .await
        .expect("the early deadline was missed");
        let took = started.elapsed();
        assert!(matches!(result, Err(ExecutionError::Timeout(t)) if t.as_millis() == 150), "{result:?}");
        assert!(took >= std::time::Duration::from_millis(150), "expired early: {took:?}");
        assert!(took < std::time::Duration::from_secs(5), "kept waiting for the later deadline: {took:?}");
        assert_eq!(conn.orphans(), 1, "the expired request's id waits for its answer");
        assert_eq!(conn.in_flight(), 3);
        assert!(!late.is_finished() && !forever.is_finished());

        // Closing fails the others with the connection's error.
        conn.close();
        assert!(matches!(late.await.expect("task"), Err(ExecutionError::Connection(ConnectionError::Closed))));
        assert!(matches!(forever.await.expect("task"), Err(ExecutionError::Connection(ConnectionError::Closed))));
    }

    /// Deadlines follow the runtime's clock, as the timers they replace
    /// did: with the clock paused (as in a user's tests), a request of a
    /// 60 s deadline expires when the runtime's time gets there, at once in
    /// real time, and the sweeper does not spin meanwhile.
    #[tokio::test(start_paused = true)]
    async fn deadlines_follow_the_runtime_clock() {
        let (conn, _server) = over_pipe(1 << 16, None);
        let real = Instant::now();
        let paused = tokio::time::Instant::now();
        let after = std::time::Duration::from_secs(60);
        let deadline = Deadline { at: Instant::now() + after, expiry: Expiry::Request(after) };
        let query = Query { query: "SELECT 1", params: QueryParameters::new(Consistency::One, ()) };
        let result = conn.send_with(0, Some(&deadline), |w| Ok(w.write(&query))).await;
        assert!(matches!(result, Err(ExecutionError::Timeout(t)) if t == after), "{result:?}");
        assert!(paused.elapsed() >= std::time::Duration::from_secs(60), "expired early: {:?}", paused.elapsed());
        assert!(real.elapsed() < std::time::Duration::from_secs(10), "waited in real time: {:?}", real.elapsed());
    }
}
