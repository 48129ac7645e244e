//! A client connection's tasks: the accept hands the socket to [`serve`],
//! which opens the Cassandra connection and runs one task reading the
//! client, one reading Cassandra and one writer per socket.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use shardwise_protocol::frame::FrameDecoder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use super::frame::error_frame;
use super::request::on_request;
use super::response::on_response;
use super::Conn;
use crate::guard::Keyspace;
use crate::shared::Shared;
use crate::stats::inc;

/// Serves one accepted client connection until either side closes.
pub(crate) async fn serve(shared: Arc<Shared>, node: usize, client: TcpStream, shard: u16) {
    let counters = &shared.nodes[node].counters.shards[usize::from(shard)];
    inc(&counters.accepted);
    inc(&counters.open);
    let upstream_addr = shared.nodes[node].counters.upstream;
    if let Ok(upstream) = TcpStream::connect(upstream_addr).await {
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let (cr, cw) = client.into_split();
        let (ur, uw) = upstream.into_split();
        let (ctx, crx) = unbounded_channel();
        let (utx, urx) = unbounded_channel();
        tokio::spawn(writer(cw, crx));
        tokio::spawn(writer(uw, urx));
        let conn = Arc::new(Conn {
            shared: shared.clone(),
            node,
            shard,
            pending: Mutex::new(HashMap::new()),
            lwt_mark: AtomicBool::new(false),
            metadata_id: AtomicBool::new(false),
            tablets_routing: AtomicBool::new(false),
            tablets_routing_v2: AtomicBool::new(false),
            keyspace: Mutex::new(Keyspace::default()),
            to_client: ctx,
            to_upstream: utx,
        });
        tokio::select! {
            _ = client_loop(conn.clone(), cr) => {}
            _ = upstream_loop(conn.clone(), ur) => {}
        }
        // Answers that will never come: CDC write tasks waiting for one end.
        if let Ok(mut pending) = conn.pending.lock() {
            pending.clear();
        };
    }
    counters.open.fetch_sub(1, Ordering::Relaxed);
}
/// Writes everything queued for a socket, coalescing what is ready into one
/// write; ends (closing the write side) when every sender is gone.
pub(super) async fn writer(mut w: OwnedWriteHalf, mut rx: UnboundedReceiver<Bytes>) {
    let mut buf = BytesMut::new();
    while let Some(first) = rx.recv().await {
        let result = if let Ok(second) = rx.try_recv() {
            buf.clear();
            buf.extend_from_slice(&first);
            buf.extend_from_slice(&second);
            while buf.len() < 256 * 1024 {
                match rx.try_recv() {
                    Ok(more) => buf.extend_from_slice(&more),
                    Err(_) => break,
                }
            }
            w.write_all(&buf).await
        } else {
            w.write_all(&first).await
        };
        if result.is_err() {
            return;
        }
    }
    let _ = w.shutdown().await;
}
/// Reads more bytes from `r` into the decoder's input, growing it by 64 KiB
/// when less than 16 KiB is free. `false` when the peer closed or failed.
pub(super) async fn read_more(dec: &mut FrameDecoder, r: &mut OwnedReadHalf) -> bool {
    let input = dec.input_mut();
    if input.capacity() - input.len() < 16 * 1024 {
        input.reserve(64 * 1024);
    }
    matches!(r.read_buf(input).await, Ok(n) if n > 0)
}
pub(super) async fn client_loop(conn: Arc<Conn>, mut r: OwnedReadHalf) {
    let mut dec = FrameDecoder::new();
    loop {
        loop {
            let input = dec.input_mut();
            if input.len() >= 4 && input[0] & 0x7f != 4 {
                let (version, stream) = (input[0] & 0x7f, i16::from_be_bytes([input[2], input[3]]));
                inc(&conn.shared.counters.version_rejections);
                let message = format!("Invalid or unsupported protocol version: {version}");
                let _ = conn.to_client.send(error_frame(4, stream, 0x000A, &message));
                return;
            }
            match dec.next_envelope() {
                Ok(Some(env)) => on_request(&conn, &mut dec, env),
                Ok(None) => break,
                Err(_) => return,
            }
        }
        if !read_more(&mut dec, &mut r).await {
            return;
        }
    }
}
pub(super) async fn upstream_loop(conn: Arc<Conn>, mut r: OwnedReadHalf) {
    let mut dec = FrameDecoder::new();
    loop {
        loop {
            match dec.next_envelope() {
                Ok(Some(env)) => on_response(&conn, env),
                Ok(None) => break,
                Err(_) => return,
            }
        }
        if !read_more(&mut dec, &mut r).await {
            return;
        }
    }
}
