//! A request writes itself on an idle plain TCP connection, instead of
//! waking the writer task (see `turn.rs` for who writes when).
//!
//! With nothing else in flight there is nothing to coalesce with, so the
//! writer task's hop (a wake-up, a task poll, often on another worker) is
//! pure cost. Such a request takes the turn, serializes itself into the
//! connection's own small buffer (not the swap buffer, whose every enqueue
//! would otherwise have to tell the writer's runs from the request's), and
//! sends it with a non-blocking write from its own poll. Only connections
//! whose runs are sealed in place qualify: plain TCP (a TLS stream cannot
//! be written from two places) without compression (sealing then needs no
//! state of the writer's framer).

use std::future::Future;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use shardwise_protocol::frame::framer::{HEAD_ROOM, TAIL_ROOM};
use shardwise_protocol::frame::{Framer, ProtocolVersion};
use shardwise_protocol::request::{write_request, Request};
use shardwise_protocol::EncodeError;
#[cfg(feature = "tls")]
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::Notify;

use super::turn::Handoff;
use super::Inner;
use crate::error::{ConnectionError, ExecutionError};

/// Where the writer task's bytes go: a stream of its own, or a plain TCP
/// socket that requests may write too ([`Shared`]).
pub(super) trait Sink: Send + 'static {
    /// Writes all of `buf`.
    fn write_all<'a>(&'a mut self, buf: &'a [u8]) -> impl Future<Output = io::Result<()>> + Send + 'a;
    /// Ends the sending side.
    fn shutdown(&mut self) -> impl Future<Output = ()> + Send + '_;
    /// The socket requests may write themselves.
    fn shared(&self) -> Option<Arc<OwnedWriteHalf>> {
        None
    }
}

/// A stream only the writer task writes (TLS).
#[cfg(feature = "tls")]
pub(super) struct Owned<W>(pub(super) W);

#[cfg(feature = "tls")]
impl<W: AsyncWrite + Unpin + Send + 'static> Sink for Owned<W> {
    fn write_all<'a>(&'a mut self, buf: &'a [u8]) -> impl Future<Output = io::Result<()>> + Send + 'a {
        self.0.write_all(buf)
    }

    async fn shutdown(&mut self) {
        let _ = self.0.shutdown().await;
    }
}

/// The sending half of a plain TCP socket, shared with the requests.
pub(super) struct Shared(pub(super) Arc<OwnedWriteHalf>);

impl Sink for Shared {
    async fn write_all<'a>(&'a mut self, mut buf: &'a [u8]) -> io::Result<()> {
        loop {
            buf = &buf[write_some(&self.0, buf)?..];
            if buf.is_empty() {
                return Ok(());
            }
            self.0.writable().await?;
        }
    }

    async fn shutdown(&mut self) {
        // The requests' handle keeps the half alive: end the sending side
        // here, as dropping the last handle would, so the node closes the
        // connection and the reader task ends.
        let _ = socket2::SockRef::from(self.0.as_ref().as_ref()).shutdown(std::net::Shutdown::Write);
    }

    fn shared(&self) -> Option<Arc<OwnedWriteHalf>> {
        Some(self.0.clone())
    }
}

/// What a connection whose requests may write themselves keeps.
#[derive(Debug)]
pub(crate) struct Direct {
    socket: Arc<OwnedWriteHalf>,
    version: ProtocolVersion,
    /// Who writes now, and the holder of the turn's buffer: a request's
    /// run, and once it was handed over, the part of it the socket did not
    /// take.
    handoff: Handoff<Run>,
    /// Pings the writer task when a request handed it the turn.
    handed: Notify,
}

/// How far a request's own write went.
#[derive(Debug)]
enum Sent {
    /// All of it.
    Whole,
    /// Part of it: the rest is in `Run::wire`, for the writer task.
    Part,
    /// None: the framer could not seal it in place (left to the queue).
    Unsealed,
    /// None: the socket failed.
    Failed(io::Error),
}

/// A request's run, framed for the wire in `buf[wire]`.
#[derive(Debug, Default)]
struct Run {
    buf: Vec<u8>,
    wire: Range<usize>,
}

impl Direct {
    pub(super) fn new(socket: Arc<OwnedWriteHalf>, version: ProtocolVersion) -> Self {
        Direct { socket, version, handoff: Handoff::default(), handed: Notify::new() }
    }

    /// Writes `request` (of `body_len` bytes of body) on stream `id` now,
    /// when the connection is idle (the request's own id is the only one
    /// in use) and nobody else writes; `false`, having done nothing, when
    /// it is not for the request to write. A run the socket takes only in
    /// part is finished by the writer task; a failed write closes the
    /// connection, which fails the request.
    pub(super) fn try_write<R: Request>(
        &self,
        inner: &Inner,
        request: &R,
        id: i16,
        flags: u8,
        body_len: usize,
    ) -> Result<bool, ExecutionError> {
        if inner.streams.in_flight() > 1 {
            return Ok(false);
        }
        let Some((sent, handed)) = self.handoff.request(|run| {
            let sent = self.send(run, request, id, flags, body_len);
            let part = matches!(sent, Ok(Sent::Part));
            (sent, part)
        }) else {
            return Ok(false);
        };
        if handed {
            self.handed.notify_one();
            return Ok(true);
        }
        match sent? {
            Sent::Unsealed => Ok(false),
            Sent::Failed(e) => {
                inner.close(e.into());
                Ok(true)
            }
            Sent::Whole | Sent::Part => Ok(true),
        }
    }

    /// `try_write`'s part in its turn: the request serialized and sealed in
    /// `run`, and sent as far as the socket takes it without waiting; what
    /// it did not take is left in `run.wire`.
    fn send<R: Request>(
        &self,
        run: &mut Run,
        request: &R,
        id: i16,
        flags: u8,
        body_len: usize,
    ) -> Result<Sent, EncodeError> {
        let Run { buf, wire } = run;
        buf.clear();
        buf.resize(HEAD_ROOM, 0);
        write_request(request, self.version, id, flags, body_len, buf)?;
        buf.resize(buf.len() + TAIL_ROOM, 0);
        let (start, len) = (buf.as_ptr() as usize, buf.len());
        let mut framer = Framer::established(self.version, false);
        // Sealed in place, without compression: a part of `buf`.
        let sealed = framer.seal(buf).ok().and_then(|sealed| {
            let from = (sealed.as_ptr() as usize).checked_sub(start)?;
            (from + sealed.len() <= len).then_some(from..from + sealed.len())
        });
        let Some(sealed) = sealed else { return Ok(Sent::Unsealed) };
        Ok(match write_some(&self.socket, &buf[sealed.clone()]) {
            Ok(n) if n < sealed.len() => {
                *wire = sealed.start + n..sealed.end;
                Sent::Part
            }
            Ok(_) => Sent::Whole,
            Err(e) => Sent::Failed(e),
        })
    }
}

impl Run {
    /// The buffer, emptied for the next request.
    fn emptied(mut self) -> Run {
        self.buf.clear();
        self.wire = 0..0;
        self
    }
}

/// Writes what the socket takes without waiting.
fn write_some(socket: &OwnedWriteHalf, wire: &[u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < wire.len() {
        match socket.try_write(&wire[n..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Returns when a request handed the writer task the turn (never on a
/// connection whose requests do not write).
pub(super) async fn handed(inner: &Inner) {
    match &inner.direct {
        Some(direct) => direct.handed.notified().await,
        None => std::future::pending().await,
    }
}

/// The writer task writes `buf`, in its turn when requests may write too:
/// after a request's write, and after the rest of a request's run that was
/// handed to it.
pub(super) async fn write_in_turn<S: Sink>(inner: &Inner, socket: &mut S, buf: &[u8]) -> Result<(), ConnectionError> {
    let Some(direct) = &inner.direct else {
        return Ok(socket.write_all(buf).await?);
    };
    // What a request handed over: its run, taken out while it is written,
    // with the part still to write.
    let mut rest = None;
    let written = async {
        loop {
            match direct.handoff.try_writer() {
                Some(taken) => {
                    rest = taken;
                    break;
                }
                // A request writes without waiting: its turn ends soon.
                None => tokio::task::yield_now().await,
            }
        }
        if let Some(run) = &rest {
            socket.write_all(&run.buf[run.wire.clone()]).await?;
        }
        socket.write_all(buf).await
    }
    .await;
    direct.handoff.end_writer(rest.map(Run::emptied));
    Ok(written?)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::pin::pin;
    use std::task::{Context, Waker};
    use std::time::Duration;

    use shardwise_protocol::consistency::Consistency;
    use shardwise_protocol::frame::{FrameDecoder, HEADER_LEN};
    use shardwise_protocol::handshake::Established;
    use shardwise_protocol::request::{Query, QueryParameters};
    use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage};
    use tokio::net::TcpSocket;

    use super::*;
    use crate::config::ConnectionConfig;
    use crate::connection::Connection;

    /// A v4 connection over loopback TCP whose requests may write
    /// themselves, and the node's end of it (blocking, with a timeout).
    /// `small_buffers` shrinks both sides' socket buffers so that a large
    /// run does not fit.
    async fn connected(write_buffer_size: usize, small_buffers: bool) -> (Connection, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let socket = TcpSocket::new_v4().expect("socket");
        if small_buffers {
            socket2::SockRef::from(&listener).set_recv_buffer_size(4096).expect("rcvbuf");
            socket.set_send_buffer_size(4096).expect("sndbuf");
        }
        let addr = listener.local_addr().expect("addr");
        let client = socket.connect(addr).await.expect("connect");
        let (server, _) = listener.accept().expect("accept");
        server.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let (read, write) = client.into_split();
        let established = established_v4(false);
        let config = ConnectionConfig { write_buffer_size, heartbeat_interval: None, ..Default::default() };
        let conn = Connection::start(addr, read, Shared(Arc::new(write)), established, &config);
        assert!(conn.inner().direct.is_some(), "a plain TCP connection without compression");
        (conn, server)
    }

    /// What a plain v4 handshake establishes, with LZ4 when `lz4`.
    fn established_v4(lz4: bool) -> Established {
        Established {
            version: ProtocolVersion::V4,
            lz4,
            supported: Vec::new(),
            metadata_id: false,
            tablets_v2: false,
            host_id: None,
            decoder: FrameDecoder::new(),
            framer: Framer::established(ProtocolVersion::V4, lz4),
        }
    }

    /// Reads one request off `server`: its stream id and the text of its
    /// QUERY body.
    fn read_query(server: &mut std::net::TcpStream) -> (i16, Vec<u8>) {
        let mut header = [0u8; HEADER_LEN];
        server.read_exact(&mut header).expect("a request's header");
        let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
        let mut body = vec![0u8; len];
        server.read_exact(&mut body).expect("a request's body");
        let text_len = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
        (i16::from_be_bytes([header[2], header[3]]), body[4..4 + text_len].to_vec())
    }

    fn answer(server: &mut std::net::TcpStream, stream: i16) {
        let mut answer = Vec::new();
        Response::new(ResponseMessage::Result(ResultMessage::Void))
            .encode(ProtocolVersion::V4, stream, &mut answer)
            .expect("encodes");
        server.write_all(&answer).expect("answer");
    }

    /// A request alone on its connection is on the wire when its first
    /// poll returns: the runtime's only thread then blocks reading it, so
    /// the writer task never ran.
    #[tokio::test]
    async fn a_request_alone_is_written_by_its_own_poll() {
        let (conn, mut server) = connected(64 * 1024, false).await;
        let query = Query { query: "SELECT 1", params: QueryParameters::new(Consistency::One, ()) };
        let mut request = pin!(conn.send_with(0, None, |w| Ok(w.write(&query))));
        let polled = request.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(polled.is_pending());
        let (stream, text) = read_query(&mut server);
        assert_eq!(text, b"SELECT 1");
        answer(&mut server, stream);
        request.await.expect("answered");
        let direct = conn.inner().direct.as_ref().expect("direct");
        assert!(matches!(direct.handoff.try_writer(), Some(None)), "the turn was given back");
    }

    /// A run the socket takes only in part: the request hands the rest to
    /// the writer task, which writes it before the next request, so both
    /// arrive whole and are answered.
    #[tokio::test]
    async fn the_rest_of_a_run_the_socket_did_not_take_is_written_first() {
        let (conn, mut server) = connected(1 << 20, true).await;
        let big = "x".repeat(256 * 1024);
        let query = Query { query: &big, params: QueryParameters::new(Consistency::One, ()) };
        let mut first = pin!(conn.send_with(0, None, |w| Ok(w.write(&query))));
        assert!(first.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
        let direct = conn.inner().direct.as_ref().expect("direct");
        assert!(direct.handoff.peek(|run| !run.wire.is_empty()), "the socket took the whole run");

        let node = std::thread::spawn(move || {
            let mut texts = Vec::new();
            for _ in 0..2 {
                let (stream, text) = read_query(&mut server);
                answer(&mut server, stream);
                texts.push(text);
            }
            texts
        });
        let small = Query { query: "SELECT 2", params: QueryParameters::new(Consistency::One, ()) };
        let second = conn.send_with(0, None, |w| Ok(w.write(&small)));
        let (a, b) = tokio::join!(first, second);
        a.expect("the large request answered");
        b.expect("the small request answered");
        let texts = node.join().expect("node");
        assert_eq!(texts, vec![big.as_bytes().to_vec(), b"SELECT 2".to_vec()]);
        assert_eq!(conn.in_flight(), 0);
    }

    /// What a request writes itself never reaches a connection that
    /// compresses: its runs need the writer's framer.
    #[tokio::test]
    async fn a_compressed_connection_leaves_writing_to_its_writer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (read, write) = client.into_split();
        let established = established_v4(true);
        let config = ConnectionConfig { heartbeat_interval: None, ..Default::default() };
        let conn = Connection::start(addr, read, Shared(Arc::new(write)), established, &config);
        assert!(conn.inner().direct.is_none());
        drop(listener);
    }
}
