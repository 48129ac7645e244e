//! The front's connections for CDC work: writing log rows and reading
//! pre-images, many requests in flight (unlike the one-at-a-time admin
//! connection), prepared statements cached per connection.
//!
//! Every log write is one BATCH of prepared `UPDATE`s — `UPDATE` because
//! Scylla's log rows have no row marker, only cells — with the record's
//! timestamp and the CDC TTL bound, so cell timestamps equal the base
//! write's (§1.7).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use shardwise_protocol::codec::RawValue;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::{Envelope, FrameDecoder, ProtocolVersion};
use shardwise_protocol::request::{
    encode_request, Batch, BatchStatement, BatchType, Execute, Prepare, QueryParameters, Request, StatementKind,
};
use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage};
use shardwise_protocol::types::ser::RawValues;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::{mpsc, oneshot};

use crate::admin;
use crate::EmuError;

/// Stream ids a connection uses (far below the protocol's limit).
const STREAMS: i16 = 1024;

struct Mux {
    to_server: mpsc::UnboundedSender<Bytes>,
    waiting: Mutex<HashMap<i16, oneshot::Sender<Envelope>>>,
    free: Mutex<Vec<i16>>,
    prepared: Mutex<HashMap<String, Bytes>>,
    closed: AtomicBool,
}

impl Mux {
    async fn open(addr: SocketAddr, credentials: Option<&(String, String)>) -> Result<Arc<Mux>, EmuError> {
        let conn = admin::Conn::connect(addr, credentials).await?;
        let (r, mut w) = conn.stream.into_split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
        let mux = Arc::new(Mux {
            to_server: tx,
            waiting: Mutex::new(HashMap::new()),
            free: Mutex::new((0..STREAMS).rev().collect()),
            prepared: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
        });
        tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                if w.write_all(&frame).await.is_err() {
                    return;
                }
            }
        });
        tokio::spawn(Mux::read(mux.clone(), r, conn.decoder));
        Ok(mux)
    }

    async fn read(mux: Arc<Mux>, mut r: OwnedReadHalf, mut dec: FrameDecoder) {
        'outer: loop {
            loop {
                match dec.next_envelope() {
                    Ok(Some(env)) => {
                        let waiter = mux.waiting.lock().ok().and_then(|mut w| w.remove(&env.header.stream));
                        if let Some(w) = waiter {
                            let _ = w.send(env);
                        }
                    }
                    Ok(None) => break,
                    Err(_) => break 'outer,
                }
            }
            let input = dec.input_mut();
            input.reserve(64 * 1024);
            if !matches!(r.read_buf(input).await, Ok(n) if n > 0) {
                break;
            }
        }
        mux.closed.store(true, Ordering::Relaxed);
        if let Ok(mut w) = mux.waiting.lock() {
            w.clear();
        }
    }

    async fn roundtrip<R: Request>(&self, request: &R) -> Result<ResultMessage, EmuError> {
        let lost = || EmuError::Protocol("the CDC writer's connection to Cassandra closed".into());
        let id = self
            .free
            .lock()
            .ok()
            .and_then(|mut f| f.pop())
            .ok_or_else(|| EmuError::Protocol("no free stream id".into()))?;
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(id, tx);
        }
        let mut buf = Vec::new();
        let sent = encode_request(request, ProtocolVersion::V4, id, 0, &mut buf)
            .map_err(|e| EmuError::Protocol(format!("encoding a log write: {e}")))
            .and_then(|_| self.to_server.send(Bytes::from(buf)).map_err(|_| lost()));
        let answer = match sent {
            Ok(()) => rx.await.map_err(|_| lost()),
            Err(e) => Err(e),
        };
        if answer.is_ok() {
            // A lost answer leaves its id out: the connection is dead anyway.
            if let Ok(mut f) = self.free.lock() {
                f.push(id);
            }
        }
        match Response::from_envelope(answer?)
            .map_err(|e| EmuError::Protocol(format!("decoding an answer: {e}")))?
            .message
        {
            ResponseMessage::Result(r) => Ok(r),
            ResponseMessage::Error(e) => Err(EmuError::Server { code: e.code, message: e.message }),
            other => Err(EmuError::Protocol(format!("unexpected answer: {other:?}"))),
        }
    }

    async fn prepared(&self, text: &str) -> Result<Bytes, EmuError> {
        if let Some(id) = self.prepared.lock().ok().and_then(|p| p.get(text).cloned()) {
            return Ok(id);
        }
        match self.roundtrip(&Prepare { query: text, keyspace: None }).await? {
            ResultMessage::Prepared(p) => {
                if let Ok(mut m) = self.prepared.lock() {
                    m.insert(text.to_string(), p.id.clone());
                }
                Ok(p.id)
            }
            other => Err(EmuError::Protocol(format!("PREPARE answered {other:?}"))),
        }
    }
}

/// One statement of a log write: text and bound values.
pub(crate) type Write = (String, Vec<Bytes>);

/// A small pool of multiplexed connections.
pub(crate) struct LogWriter {
    addr: SocketAddr,
    credentials: Option<(String, String)>,
    conns: Vec<tokio::sync::Mutex<Option<Arc<Mux>>>>,
    next: AtomicUsize,
}

impl LogWriter {
    pub(crate) fn new(addr: SocketAddr, credentials: Option<(String, String)>, connections: usize) -> LogWriter {
        LogWriter {
            addr,
            credentials,
            conns: (0..connections.max(1)).map(|_| tokio::sync::Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    async fn conn(&self) -> Result<Arc<Mux>, EmuError> {
        let slot = &self.conns[self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len()];
        let mut guard = slot.lock().await;
        if let Some(m) = guard.as_ref().filter(|m| !m.closed.load(Ordering::Relaxed)) {
            return Ok(m.clone());
        }
        let m = Mux::open(self.addr, self.credentials.as_ref()).await?;
        *guard = Some(m.clone());
        Ok(m)
    }

    /// Runs the statements as one batch (logged when `logged`).
    pub(crate) async fn batch(&self, writes: &[Write], consistency: Consistency, logged: bool) -> Result<(), EmuError> {
        let conn = self.conn().await?;
        for attempt in 0..2 {
            let mut ids = Vec::with_capacity(writes.len());
            for (text, _) in writes {
                ids.push(conn.prepared(text).await?);
            }
            let values: Vec<Vec<RawValue<'_>>> =
                writes.iter().map(|(_, v)| v.iter().map(|b| RawValue::Value(&b[..])).collect()).collect();
            let statements: Vec<BatchStatement<'_, RawValues<'_>>> = ids
                .iter()
                .zip(values)
                .map(|(id, values)| BatchStatement {
                    kind: StatementKind::Prepared(&id[..]),
                    values: RawValues { names: None, values },
                })
                .collect();
            let batch = Batch {
                kind: if logged { BatchType::Logged } else { BatchType::Unlogged },
                statements,
                consistency,
                serial_consistency: None,
                timestamp: None,
                keyspace: None,
                now_in_seconds: None,
            };
            match conn.roundtrip(&batch).await {
                Ok(_) => return Ok(()),
                // Unprepared (Cassandra evicted it): prepare again, once.
                Err(EmuError::Server { code: 0x2500, .. }) if attempt == 0 => {
                    if let Ok(mut p) = conn.prepared.lock() {
                        p.clear();
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(EmuError::Protocol("log write: statement kept being unprepared".into()))
    }

    /// Runs a SELECT with bound values, returning the result.
    pub(crate) async fn select(
        &self,
        text: &str,
        values: &[Bytes],
        consistency: Consistency,
    ) -> Result<ResultMessage, EmuError> {
        let conn = self.conn().await?;
        for attempt in 0..2 {
            let values = RawValues { names: None, values: values.iter().map(|b| RawValue::Value(&b[..])).collect() };
            let id = conn.prepared(text).await?;
            let params = QueryParameters::new(consistency, values);
            match conn.roundtrip(&Execute { id: &id, result_metadata_id: None, params }).await {
                Err(EmuError::Server { code: 0x2500, .. }) if attempt == 0 => {
                    if let Ok(mut p) = conn.prepared.lock() {
                        p.remove(text);
                    }
                }
                other => return other,
            }
        }
        Err(EmuError::Protocol("image read: statement kept being unprepared".into()))
    }
}
