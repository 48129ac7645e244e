//! One client connection: its shard, its Cassandra connection, and what
//! passes between them.
//!
//! Every client connection gets its own upstream connection, so stream ids
//! pass through unchanged and no request ever waits for another client.
//! Client frames are decoded ([`FrameDecoder`], v4 only, LZ4 bodies
//! decompressed); responses are decoded only when the front needs them
//! (PREPARED, Schema_change of schema statements it watches, events with
//! addresses) and otherwise forwarded as the bytes Cassandra sent.
//!
//! - Protocol version: Scylla speaks v3/v4 only; a frame of any version but
//!   4 gets Scylla's `Protocol_error` "Invalid or unsupported protocol
//!   version: N" (version byte 4) and the connection is closed, which makes
//!   drivers fall back to v4. (Deviation: Scylla also accepts v3.)
//! - OPTIONS is answered by the front with Scylla's SUPPORTED (the keys of
//!   `docs/protocol.md` §1.2, see the module docs of [`super`]). STARTUP is forwarded without `COMPRESSION` and without
//!   the Scylla extension keys; when the client chose `lz4`, its requests are
//!   decompressed here and responses go back uncompressed (the compression
//!   flag is per frame, so clients accept that; Cassandra never sees LZ4).
//! - EXECUTE and BATCH entries of prepared statements are routed: the
//!   partition key values (indexes learned from PREPARED) give the token
//!   under the table's partitioner, the token gives the owning shard, and
//!   the connection's shard is counted as a hit or a miss. A miss is
//!   forwarded after the configured delay, without holding back the
//!   connection's other requests (a dedicated delay thread: tokio timers
//!   have millisecond resolution, a miss penalty is tens of microseconds).
//! - QUERY/PREPARE/BATCH texts go through [`super::rewrite`].
//! - Schema statements: the Schema_change answer is held until the front has
//!   done its part (CDC log creation or mirroring, clean-up on DROP).
//! - `SCYLLA_LWT_ADD_METADATA_MARK`: when negotiated, PREPARED answers of
//!   conditional statements get bit 31 of their bind-metadata flags set.
//! - TOPOLOGY_CHANGE/STATUS_CHANGE events carry the front's address instead
//!   of the Cassandra node's.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use shardwise_protocol::codec::Reader;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::{Envelope, EnvelopeHeader, Flags, FrameDecoder, Opcode, ProtocolVersion, HEADER_LEN};
use shardwise_protocol::request::{
    encode_request, AnyRequest, Batch, BatchStatement, Execute, Query, QueryParameters, Request, Startup, StatementKind,
};
use shardwise_protocol::response::{
    Event, Response, ResponseMessage, ResultMessage, SchemaChange, SchemaChangeTarget, SchemaChangeType,
};
use shardwise_protocol::tablets::{TabletRoute, PAYLOAD_KEY, TABLETS_ROUTING_V1};
use shardwise_protocol::token::Partitioner;
use shardwise_protocol::types::ser::RawValues;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use super::cdclog::dml::{self, Statement};
use super::cdclog::synth::{self, Item, OwnedValue};
use super::rewrite::{self, LocalAnswer};
use super::stats::inc;
use crate::delay_line::Outbox;
use crate::guard::{self, Keyspace, Resolution, Verdict};
use crate::shared::{Shared, StatementInfo};

/// What a request expects of its response.
#[derive(Debug)]
enum Pending {
    Prepare {
        lwt: bool,
        text: String,
        /// Where unqualified names pointed when the PREPARE was sent.
        at: Resolution,
    },
    /// A write to a CDC table: the answer goes to the task that writes the log.
    Cdc(tokio::sync::oneshot::Sender<Envelope>),
    Schema {
        cdc: Option<super::cdc::CdcOptions>,
        table: Option<(Option<String>, String)>,
        tablets: Option<Option<i32>>,
        /// A vector index created or an index dropped, keyspace resolved.
        vector: Option<super::vector_index::IndexDdl>,
        /// The table's `tablets = {...}` hints (checked).
        table_tablets: Option<crate::tablet_options::TabletOptions>,
        /// The keyspace of an ALTER KEYSPACE.
        keyspace: Option<String>,
    },
    Use,
    /// A read of `system_schema.tables`: its answer gets Scylla's rows
    /// ([`crate::identity`]).
    SchemaTables(crate::identity::TablesRead),
    /// A request that reached a node or shard holding no replica of its
    /// tablet: its answer gets the tablet's routing payload.
    Tablet(TabletRoute),
}

pub(crate) struct Conn {
    shared: Arc<Shared>,
    node: usize,
    shard: u16,
    pending: Mutex<HashMap<i16, Pending>>,
    lwt_mark: AtomicBool,
    /// The client negotiated `TABLETS_ROUTING_V1`.
    tablets_routing: AtomicBool,
    keyspace: Mutex<Keyspace>,
    to_client: Outbox,
    to_upstream: Outbox,
}

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
            tablets_routing: AtomicBool::new(false),
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
async fn writer(mut w: OwnedWriteHalf, mut rx: UnboundedReceiver<Bytes>) {
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

fn frame(header: &EnvelopeHeader, flags: u8, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER_LEN + body.len());
    EnvelopeHeader { flags: Flags(flags), length: body.len() as u32, ..*header }.encode(&mut out);
    out.extend_from_slice(body);
    out.freeze()
}

fn error_frame(version: u8, stream: i16, code: i32, message: &str) -> Bytes {
    let mut body = Vec::with_capacity(6 + message.len());
    body.put_i32(code);
    let msg = &message.as_bytes()[..message.len().min(u16::MAX as usize)];
    body.put_u16(msg.len() as u16);
    body.put_slice(msg);
    let mut out = BytesMut::with_capacity(HEADER_LEN + body.len());
    out.put_u8(0x80 | version);
    out.put_u8(0);
    out.put_i16(stream);
    out.put_u8(Opcode::Error as u8);
    out.put_u32(body.len() as u32);
    out.extend_from_slice(&body);
    out.freeze()
}

/// Cassandra's UNPREPARED error for `id`: the driver prepares the
/// statement again and retries.
fn unprepared_frame(stream: i16, id: &[u8]) -> Bytes {
    let message = "Prepared statement unknown to the Scylla emulation front; prepare it again";
    let mut body = Vec::with_capacity(8 + message.len() + id.len());
    body.put_i32(0x2500);
    body.put_u16(message.len() as u16);
    body.put_slice(message.as_bytes());
    body.put_u16(id.len().min(u16::MAX as usize) as u16);
    body.put_slice(&id[..id.len().min(u16::MAX as usize)]);
    let mut out = BytesMut::with_capacity(HEADER_LEN + body.len());
    out.put_u8(0x84);
    out.put_u8(0);
    out.put_i16(stream);
    out.put_u8(Opcode::Error as u8);
    out.put_u32(body.len() as u32);
    out.extend_from_slice(&body);
    out.freeze()
}

/// What a statement text is to the CDC side of the front.
enum Dml {
    /// Not INSERT/UPDATE/DELETE/BATCH.
    Other,
    /// DML, read.
    Parsed(Arc<Statement>),
    /// Looks like DML, but the parser could not read it (why).
    Unparsed(String),
}

fn classify(text: &str) -> Dml {
    if !synth::may_be_dml(text) {
        return Dml::Other;
    }
    match dml::parse(text) {
        Ok(s) => Dml::Parsed(Arc::new(s)),
        Err(dml::DmlError::NotDml) => Dml::Other,
        Err(e) => Dml::Unparsed(e.to_string()),
    }
}

fn response_frame(stream: i16, message: ResponseMessage) -> Option<Bytes> {
    let mut buf = Vec::new();
    Response::new(message).encode(ProtocolVersion::V4, stream, &mut buf).ok()?;
    Some(Bytes::from(buf))
}

/// Reads more bytes from `r` into the decoder's input, growing it by 64 KiB
/// when less than 16 KiB is free. `false` when the peer closed or failed.
async fn read_more(dec: &mut FrameDecoder, r: &mut OwnedReadHalf) -> bool {
    let input = dec.input_mut();
    if input.capacity() - input.len() < 16 * 1024 {
        input.reserve(64 * 1024);
    }
    matches!(r.read_buf(input).await, Ok(n) if n > 0)
}

async fn client_loop(conn: Arc<Conn>, mut r: OwnedReadHalf) {
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

impl Conn {
    fn forward(&self, header: &EnvelopeHeader, body: &[u8]) {
        let _ = self.to_upstream.send(frame(header, header.flags.0 & !Flags::COMPRESSION, body));
    }

    fn reply(&self, frame: Option<Bytes>) {
        inc(&self.shared.counters.answered_locally);
        if let Some(f) = frame {
            let _ = self.to_client.send(f);
        }
    }

    fn reply_error(&self, stream: i16, code: i32, message: &str) {
        self.reply(Some(error_frame(4, stream, code, message)));
    }

    fn shard_counters(&self) -> &super::stats::ShardCounters {
        &self.shared.nodes[self.node].counters.shards[usize::from(self.shard)]
    }

    fn pend(&self, stream: i16, p: Pending) {
        if let Ok(mut m) = self.pending.lock() {
            m.insert(stream, p);
        }
    }

    fn local_answer(&self, stream: i16, answer: LocalAnswer) {
        match answer {
            LocalAnswer::Error { code, message } => self.reply_error(stream, code, &message),
            LocalAnswer::FrontStats => {
                let stats = self.shared.stats();
                match super::system_tables::front_stats_result(&self.shared.config.emu_keyspace, &stats) {
                    Ok(rows) => self.reply(response_frame(stream, ResponseMessage::Result(rows))),
                    Err(e) => self.reply_error(stream, 0, &e.to_string()),
                }
            }
        }
    }

    /// Hit, miss or unrouted for a prepared BATCH entry, counted apart from
    /// single statements (see [`super::stats`]); `Some(true)` is a miss.
    /// Never a routing payload: ScyllaDB attaches none to BATCH answers
    /// (`cql3/statements/batch_statement.cc`).
    fn route_batch_entry(&self, id: &[u8], values: &RawValues<'_>) -> Option<bool> {
        let c = self.shard_counters();
        let (judged, _) = self.judge(id, values, false);
        match judged {
            Some(true) => inc(&c.batch_hits),
            Some(false) => inc(&c.batch_misses),
            None => inc(&c.unrouted),
        }
        judged.map(|hit| !hit)
    }

    /// Hit, miss or unrouted for a prepared statement's values, counted; for
    /// a miss on a table with tablets, the tablet's routing payload when
    /// the client negotiated it. `Some(true)` is a miss.
    fn route_tablet(&self, id: &[u8], values: &RawValues<'_>) -> (Option<bool>, Option<TabletRoute>) {
        let c = self.shard_counters();
        let (judged, route) = self.judge(id, values, self.tablets_routing.load(Ordering::Relaxed));
        match judged {
            Some(true) => inc(&c.hits),
            Some(false) => inc(&c.misses),
            None => inc(&c.unrouted),
        }
        (judged.map(|hit| !hit), route)
    }

    /// Whether a prepared statement's values reach their owner here
    /// (`Some(true)`), elsewhere (`Some(false)`) or cannot be told (`None`),
    /// and, with `want_route`, the payload ScyllaDB would attach to the
    /// answer. A table with tablets is judged by its tablet's replicas (node
    /// and shard), others by the token's shard. As in ScyllaDB's
    /// `check_locality` (`locator/tablets.cc`), a payload goes with every
    /// miss, wrong node or wrong shard, of a request on exactly one partition
    /// of a tablets table.
    fn judge(&self, id: &[u8], values: &RawValues<'_>, want_route: bool) -> (Option<bool>, Option<TabletRoute>) {
        let Some(info) = self.prepared_info(id) else { return (None, None) };
        if info.pk_indexes.is_empty() || values.names.is_some() {
            return (None, None);
        }
        let tablets = info.table.as_ref().and_then(|(ks, table)| self.shared.tablets_of(ks, table));
        let here = |token: shardwise_protocol::token::Token| match &tablets {
            Some(map) => map.tablet_of(token.value()).is_replica(self.node, self.shard),
            None => self.shared.sharder.shard_of(token) == self.shard,
        };
        let route = |token: shardwise_protocol::token::Token| {
            let map = tablets.as_ref().filter(|_| want_route)?;
            map.tablet_of(token.value()).route(|n| self.shared.nodes.get(n).and_then(|n| n.host_id))
        };
        let tokens = if info.in_list {
            // `pk IN ?`: served where it arrives; a hit only when every key
            // lives here (else the shard must ask others).
            let Some(list) = info.pk_indexes.first().and_then(|&i| values.values.get(usize::from(i))?.as_bytes())
            else {
                return (None, None);
            };
            let Ok(keys) = super::cdclog::values::collection_elements(list) else { return (None, None) };
            let tokens: Option<Vec<_>> =
                keys.into_iter().map(|key| info.partitioner.token_of_key([key?]).ok().flatten()).collect();
            tokens
        } else {
            let key: Option<Vec<&[u8]>> =
                info.pk_indexes.iter().map(|&i| values.values.get(usize::from(i))?.as_bytes()).collect();
            key.and_then(|key| info.partitioner.token_of_key(key).ok().flatten()).map(|t| vec![t])
        };
        let Some(tokens) = tokens.filter(|t| !t.is_empty()) else { return (None, None) };
        let hit = tokens.iter().all(|&t| here(t));
        // A payload only for one partition: ScyllaDB checks locality only
        // when the request has exactly one partition key.
        let payload = match tokens.as_slice() {
            [token] if !hit => route(*token),
            _ => None,
        };
        (Some(hit), payload)
    }

    fn current_keyspace(&self) -> Option<String> {
        self.keyspace.lock().ok().and_then(|k| k.current.clone())
    }

    /// Where unqualified names point, for a statement prepared in
    /// `prepared` (or not prepared: `None`).
    fn resolution(&self, prepared: Option<&str>) -> Resolution {
        match self.keyspace.lock() {
            Ok(k) => Resolution::of(prepared, &k),
            Err(_) => Resolution { keyspace: prepared.map(str::to_string), changing: true },
        }
    }

    /// A `USE` is on its way to Cassandra: its answer is awaited
    /// ([`Pending::Use`]).
    fn use_sent(&self, stream: i16) {
        if let Ok(mut k) = self.keyspace.lock() {
            k.uses_in_flight += 1;
        }
        self.pend(stream, Pending::Use);
    }

    /// The verdict on an unprepared write `text`, with its statement when
    /// it is to be logged.
    fn judge_text(&self, text: &str) -> (Verdict, Option<Arc<Statement>>) {
        match classify(text) {
            Dml::Other => (Verdict::Plain, None),
            Dml::Unparsed(why) => (guard::judge_unparsed(&self.shared, text, &why), None),
            Dml::Parsed(statement) => (guard::judge(&self.shared, &statement, &self.resolution(None)), Some(statement)),
        }
    }

    /// The prepared statement `id`, when the front saw it prepared.
    fn prepared_info(&self, id: &[u8]) -> Option<Arc<StatementInfo>> {
        self.shared.prepared.lock().ok()?.get(id).cloned()
    }

    /// The verdict on an execution of a prepared statement, with its
    /// statement and keyspace when it is to be logged.
    fn judge_prepared(&self, info: &StatementInfo) -> Verdict {
        match (&info.dml, &info.unparsed) {
            (Some(statement), _) if info.keyspace_changing => {
                let at = Resolution { keyspace: info.keyspace.clone(), changing: true };
                guard::judge(&self.shared, statement, &at)
            }
            (Some(statement), _) => guard::judge(&self.shared, statement, &self.resolution(info.keyspace.as_deref())),
            (None, Some((text, why))) => guard::judge_unparsed(&self.shared, text, why),
            (None, None) => Verdict::Plain,
        }
    }

    fn item(&self, statement: Arc<Statement>, values: &RawValues<'_>) -> Item {
        Item {
            statement,
            keyspace: self.current_keyspace(),
            values: values.values.iter().map(|v| OwnedValue::of(*v)).collect(),
            names: values.names.as_ref().map(|n| n.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn forward_routed(&self, header: &EnvelopeHeader, body: &[u8], miss: bool) {
        match (&self.shared.delay, miss) {
            (Some(line), true) => {
                line.push(&self.to_upstream, frame(header, header.flags.0 & !Flags::COMPRESSION, body))
            }
            _ => self.forward(header, body),
        }
    }
}

fn on_request(conn: &Arc<Conn>, dec: &mut FrameDecoder, env: Envelope) {
    let h = env.header;
    inc(&conn.shared.counters.requests);
    let emu = conn.shared.config.emu_keyspace.as_str();
    let decoded = AnyRequest::decode(h.opcode, h.version, &env.body);
    match decoded {
        Ok(AnyRequest::Options(_)) => {
            let message = ResponseMessage::Supported(conn.shared.supported(conn.node, conn.shard));
            conn.reply(response_frame(h.stream, message));
        }
        Ok(AnyRequest::Startup(s)) => {
            let mut lz4 = false;
            let mut options = Vec::new();
            for &(k, v) in &s.options {
                if k.eq_ignore_ascii_case("COMPRESSION") {
                    if v.eq_ignore_ascii_case("lz4") {
                        lz4 = true;
                    } else {
                        conn.reply_error(h.stream, 0x000A, &format!("Unknown compression algorithm: {v}"));
                        return;
                    }
                } else if k == "SCYLLA_LWT_ADD_METADATA_MARK" {
                    conn.lwt_mark.store(true, Ordering::Relaxed);
                } else if k == TABLETS_ROUTING_V1 {
                    conn.tablets_routing.store(true, Ordering::Relaxed);
                } else if !(k.starts_with("SCYLLA_") || k.starts_with("TABLETS_") || k == "CLIENT_OPTIONS") {
                    options.push((k, v));
                }
            }
            let mut buf = Vec::new();
            if encode_request(&Startup { options }, ProtocolVersion::V4, h.stream, 0, &mut buf).is_ok() {
                let _ = conn.to_upstream.send(Bytes::from(buf));
            }
            if lz4 {
                dec.set_v4_lz4(true);
            }
        }
        Ok(AnyRequest::Query(q)) => {
            if let Some(d) = crate::describe::parse(q.query) {
                let (conn, stream, current) = (conn.clone(), h.stream, conn.current_keyspace());
                tokio::spawn(async move {
                    match crate::describe::answer(&conn.shared, d, current).await {
                        Ok(rows) => conn.reply(response_frame(stream, ResponseMessage::Result(rows))),
                        Err((code, message)) => conn.reply_error(stream, code, &message),
                    }
                });
                return;
            }
            if let Some(text) = crate::describe::cassandra_properties(q.query) {
                // DESCRIBE's property words, replayed: sent on in Cassandra's.
                let mut body = Vec::with_capacity(env.body.len() + 16);
                body.put_i32(text.len() as i32);
                body.put_slice(text.as_bytes());
                body.put_slice(&env.body[4 + q.query.len()..]);
                let header = EnvelopeHeader { length: body.len() as u32, ..h };
                conn.shared.counters.requests.fetch_sub(1, Ordering::Relaxed);
                inc(&conn.shared.counters.rewritten);
                return on_request(conn, dec, Envelope { header, body: Bytes::from(body) });
            }
            let rw = rewrite::rewrite(q.query, emu, false);
            if let Some(answer) = rw.local {
                conn.local_answer(h.stream, answer);
                return;
            }
            inc(&conn.shard_counters().unrouted);
            let text = rw.text.as_deref().unwrap_or(q.query);
            let (verdict, statement) = conn.judge_text(text);
            if let Verdict::Refused(code, message) = verdict {
                inc(&conn.shared.counters.cdc_refused);
                conn.reply_error(h.stream, code, &message);
                return;
            }
            let statement = statement.filter(|s| verdict == Verdict::Logged || s.is_conditional());
            if let Some(statement) = statement {
                let item = conn.item(statement, &q.params.values);
                let conditional = item.statement.is_conditional();
                let ts = q.params.timestamp.unwrap_or_else(|| conn.shared.next_timestamp());
                let params = QueryParameters {
                    timestamp: if conditional { q.params.timestamp } else { Some(ts) },
                    ..q.params.clone()
                };
                let request = Query { query: text, params };
                let lwt = Lwt::of(conditional, q.params.serial_consistency, q.params.skip_metadata);
                if let Some(frame) = encode(&h, &request) {
                    cdc_write(conn, h, frame, vec![item], ts, q.params.consistency, lwt, None);
                }
                return;
            }
            if rw.schema {
                if let Some((code, message)) =
                    crate::refusals::check(&conn.shared, text, conn.current_keyspace().as_deref())
                {
                    conn.reply_error(h.stream, code, &message);
                    return;
                }
                let current = conn.current_keyspace();
                if let Some((code, message)) = crate::tablets_ddl::refusal(&conn.shared, &rw, current.as_deref()) {
                    conn.reply_error(h.stream, code, &message);
                    return;
                }
                if let (true, Some(keyspace), Some(choice)) = (rw.tablets_only, rw.keyspace.clone(), rw.tablets) {
                    alter_keyspace_tablets_only(conn, h.stream, keyspace, choice);
                    return;
                }
                let vector = rw.vector_index.map(|v| v.resolved(current.clone()));
                if let Some(message) =
                    vector_index_refusal(&conn.shared, vector.as_ref(), rw.cdc.as_ref(), &rw.table, current)
                {
                    conn.reply_error(h.stream, 0x2200, &message);
                    return;
                }
                conn.pend(
                    h.stream,
                    Pending::Schema {
                        cdc: rw.cdc,
                        table: rw.table,
                        tablets: rw.tablets,
                        vector,
                        table_tablets: rw.table_tablets.and_then(Result::ok),
                        keyspace: rw.keyspace.filter(|_| rw.alter_keyspace),
                    },
                );
            } else if rw.use_keyspace {
                conn.use_sent(h.stream);
            } else if let Some(identity) = crate::identity::plan(text) {
                match identity {
                    crate::identity::Identity::Tables(read) => {
                        conn.pend(h.stream, Pending::SchemaTables(read.continuing(q.params.paging_state)))
                    }
                    crate::identity::Identity::Config(columns) => {
                        let answer = crate::identity::config_result(&columns).map(ResponseMessage::Result);
                        conn.reply(answer.and_then(|m| response_frame(h.stream, m)));
                        return;
                    }
                    crate::identity::Identity::ConfigUndefined(column) => {
                        conn.reply_error(h.stream, 0x2200, &format!("Undefined column name {column}"));
                        return;
                    }
                }
            }
            match rw.text {
                Some(text) => {
                    inc(&conn.shared.counters.rewritten);
                    let rest = &env.body[4 + q.query.len()..];
                    let mut body = Vec::with_capacity(4 + text.len() + rest.len());
                    body.put_i32(text.len() as i32);
                    body.put_slice(text.as_bytes());
                    body.put_slice(rest);
                    conn.forward(&h, &body);
                }
                None => conn.forward(&h, &env.body),
            }
        }
        Ok(AnyRequest::Prepare(p)) => {
            let rw = rewrite::rewrite(p.query, emu, true);
            if let Some(answer) = rw.local {
                conn.local_answer(h.stream, answer);
                return;
            }
            let text = rw.text.clone().unwrap_or_else(|| p.query.to_string());
            // Scylla's LWT dialect that Cassandra refuses to prepare.
            if let Dml::Parsed(statement) = classify(&text) {
                if crate::lwt::prepared::candidate(&statement) {
                    return prepare_lwt_dialect(conn, h, &env.body, statement, p.query, rw.lwt, text);
                }
            }
            conn.pend(h.stream, Pending::Prepare { lwt: rw.lwt, text, at: conn.resolution(None) });
            match rw.text {
                Some(text) => {
                    inc(&conn.shared.counters.rewritten);
                    let mut body = Vec::with_capacity(4 + text.len());
                    body.put_i32(text.len() as i32);
                    body.put_slice(text.as_bytes());
                    conn.forward(&h, &body);
                }
                None => conn.forward(&h, &env.body),
            }
        }
        Ok(AnyRequest::Execute(e)) => {
            let Some(info) = conn.prepared_info(e.id) else {
                // Prepared before this front saw it (Cassandra keeps
                // prepared statements): the driver prepares it again.
                inc(&conn.shared.counters.cdc_refused);
                conn.reply(Some(unprepared_frame(h.stream, e.id)));
                return;
            };
            let (routed, tablet) = conn.route_tablet(e.id, &e.params.values);
            let miss = routed == Some(true);
            if info.is_use {
                conn.use_sent(h.stream);
            }
            let verdict = conn.judge_prepared(&info);
            if let Verdict::Refused(code, message) = verdict {
                inc(&conn.shared.counters.cdc_refused);
                conn.reply_error(h.stream, code, &message);
                return;
            }
            let statement = info.dml.clone().filter(|s| verdict == Verdict::Logged || s.is_conditional());
            if let Some(statement) = statement {
                let mut item = conn.item(statement, &e.params.values);
                item.keyspace = info.keyspace.clone().or(item.keyspace);
                let conditional = item.statement.is_conditional();
                let ts = e.params.timestamp.unwrap_or_else(|| conn.shared.next_timestamp());
                let params = QueryParameters {
                    timestamp: if conditional { e.params.timestamp } else { Some(ts) },
                    ..e.params.clone()
                };
                let lwt = Lwt::of(conditional, e.params.serial_consistency, e.params.skip_metadata);
                let request = Execute { params, ..e };
                if let Some(frame) = encode(&h, &request) {
                    cdc_write(conn, h, frame, vec![item], ts, e.params.consistency, lwt, tablet);
                }
                return;
            }
            if let Some(route) = tablet {
                conn.pend(h.stream, Pending::Tablet(route));
            }
            conn.forward_routed(&h, &env.body, miss);
        }
        Ok(AnyRequest::Batch(b)) => on_batch(conn, &h, &env.body, b),
        _ => conn.forward(&h, &env.body),
    }
}

/// A PREPARE of Scylla's LWT dialect ([`crate::lwt::prepared`]): answered
/// by the front with the id ScyllaDB would give it, or sent on (rewritten
/// when `text` differs from the client's) when Cassandra can prepare it.
fn prepare_lwt_dialect(
    conn: &Arc<Conn>,
    h: EnvelopeHeader,
    body: &Bytes,
    statement: Arc<Statement>,
    original: &str,
    lwt: bool,
    text: String,
) {
    let at = conn.resolution(None);
    let id = crate::lwt::prepared::statement_id(conn.current_keyspace().as_deref(), original);
    let body = if text == original {
        body.clone()
    } else {
        let mut b = Vec::with_capacity(4 + text.len());
        b.put_i32(text.len() as i32);
        b.put_slice(text.as_bytes());
        Bytes::from(b)
    };
    let rewritten = text != original;
    let conn = conn.clone();
    tokio::spawn(async move {
        let mark = conn.lwt_mark.load(Ordering::Relaxed);
        match conn.shared.lwt_prepare(&statement, at.keyspace.as_deref(), id, mark).await {
            Some(Ok(owned)) => {
                let (keyspace, table) = owned.table;
                let partitioner = conn.shared.partitioner_of(&keyspace, &table);
                let resolved = Resolution { keyspace: Some(keyspace.clone()), changing: false };
                let info = StatementInfo {
                    pk_indexes: owned.prepared.metadata.pk_indexes.clone(),
                    in_list: false,
                    partitioner,
                    table: Some((keyspace, table)),
                    ..unrouted_info(&text, resolved, &conn)
                };
                if let Ok(mut m) = conn.shared.prepared.lock() {
                    m.insert(owned.prepared.id.clone(), Arc::new(info));
                }
                inc(&conn.shared.counters.prepared_learned);
                let message = ResponseMessage::Result(ResultMessage::Prepared(Box::new(owned.prepared)));
                conn.reply(response_frame(h.stream, message));
            }
            Some(Err((code, message))) => conn.reply_error(h.stream, code, &message),
            None => {
                if rewritten {
                    inc(&conn.shared.counters.rewritten);
                }
                conn.pend(h.stream, Pending::Prepare { lwt, text, at });
                conn.forward(&h, &body);
            }
        }
    });
}

fn on_batch(conn: &Arc<Conn>, h: &EnvelopeHeader, body: &[u8], b: Batch<'_, Vec<BatchStatement<'_, RawValues<'_>>>>) {
    let emu = conn.shared.config.emu_keyspace.as_str();
    let mut miss = false;
    let mut texts: Vec<Option<String>> = Vec::with_capacity(b.statements.len());
    for s in &b.statements {
        match s.kind {
            StatementKind::Prepared(id) => {
                if conn.prepared_info(id).is_none() {
                    inc(&conn.shared.counters.cdc_refused);
                    conn.reply(Some(unprepared_frame(h.stream, id)));
                    return;
                }
                miss |= conn.route_batch_entry(id, &s.values) == Some(true);
                texts.push(None);
            }
            StatementKind::Query(q) => {
                inc(&conn.shard_counters().unrouted);
                let rw = rewrite::rewrite(q, emu, false);
                if let Some(LocalAnswer::Error { code, message }) = rw.local {
                    conn.reply_error(h.stream, code, &message);
                    return;
                }
                texts.push(rw.text);
            }
        }
    }
    // Writes to CDC tables: the log follows the batch.
    let mut items = Vec::new();
    let mut cdc = false;
    for (s, t) in b.statements.iter().zip(&texts) {
        let (verdict, parsed) = match s.kind {
            StatementKind::Prepared(id) => match conn.prepared_info(id) {
                Some(info) => (conn.judge_prepared(&info), info.dml.clone().map(|d| (d, info.keyspace.clone()))),
                None => (Verdict::Refused(0x2500, "Unprepared statement in a batch".into()), None),
            },
            StatementKind::Query(q) => {
                let (verdict, statement) = conn.judge_text(t.as_deref().unwrap_or(q));
                (verdict, statement.map(|st| (st, None)))
            }
        };
        match verdict {
            Verdict::Refused(code, message) => {
                inc(&conn.shared.counters.cdc_refused);
                conn.reply_error(h.stream, code, &message);
                return;
            }
            Verdict::Logged => cdc = true,
            Verdict::Plain => {}
        }
        if let Some((statement, keyspace)) = parsed {
            let mut item = conn.item(statement, &s.values);
            item.keyspace = keyspace.or(item.keyspace);
            items.push(item);
        }
    }
    let conditional = items.iter().any(|i| i.statement.is_conditional());
    if cdc || conditional {
        let ts = b.timestamp.unwrap_or_else(|| conn.shared.next_timestamp());
        let statements: Vec<BatchStatement<'_, RawValues<'_>>> = b
            .statements
            .iter()
            .zip(&texts)
            .map(|(s, t)| BatchStatement {
                kind: t.as_deref().map_or(s.kind, StatementKind::Query),
                values: s.values.clone(),
            })
            .collect();
        let (consistency, timestamp) = (b.consistency, if conditional { b.timestamp } else { Some(ts) });
        let batch = Batch { statements, timestamp, ..b };
        // Scylla answers one row per statement: every one must be known.
        let lwt = Lwt::of(conditional, batch.serial_consistency, false)
            .map(|l| Lwt { reshape: items.len() == batch.statements.len(), ..l });
        if let Some(frame) = encode(h, &batch) {
            cdc_write(conn, *h, frame, items, ts, consistency, lwt, None);
        }
        return;
    }
    if texts.iter().all(Option::is_none) {
        conn.forward_routed(h, body, miss);
        return;
    }
    inc(&conn.shared.counters.rewritten);
    let statements: Vec<BatchStatement<'_, RawValues<'_>>> = b
        .statements
        .iter()
        .zip(&texts)
        .map(|(s, t)| BatchStatement {
            kind: t.as_deref().map_or(s.kind, StatementKind::Query),
            values: s.values.clone(),
        })
        .collect();
    let batch = Batch { statements, ..b };
    let mut buf = Vec::new();
    if encode_request(&batch, ProtocolVersion::V4, h.stream, h.flags.0 & !Flags::COMPRESSION, &mut buf).is_ok() {
        let f = Bytes::from(buf);
        match (&conn.shared.delay, miss) {
            (Some(line), true) => line.push(&conn.to_upstream, f),
            _ => {
                let _ = conn.to_upstream.send(f);
            }
        }
    }
}

/// Encodes a (modified) request with the client's stream id, uncompressed.
fn encode<R: Request>(h: &EnvelopeHeader, request: &R) -> Option<Bytes> {
    let mut buf = Vec::new();
    encode_request(request, ProtocolVersion::V4, h.stream, h.flags.0 & !Flags::COMPRESSION, &mut buf).ok()?;
    Some(Bytes::from(buf))
}

/// A write to CDC tables: computes its log rows (reading images first when
/// the tables want them), forwards the write, and writes the log rows once
/// Cassandra has applied it, before the client sees the answer. A write the
/// front cannot log is refused; a log write that fails turns the answer
/// into an error — a log row is never silently missing.
#[allow(clippy::too_many_arguments)]
fn cdc_write(
    conn: &Arc<Conn>,
    h: EnvelopeHeader,
    request: Bytes,
    items: Vec<Item>,
    ts: i64,
    cl: Consistency,
    lwt: Option<Lwt>,
    tablet: Option<TabletRoute>,
) {
    let conn = conn.clone();
    let conditional = lwt.is_some();
    tokio::spawn(async move {
        let shared = &conn.shared;
        let log_cl = synth::log_consistency(cl);
        // Scylla's LWT dialect that Cassandra refuses ([`crate::lwt`]).
        if let Some(l) = lwt {
            match shared.lwt_emulate(&items, l.serial, cl, l.skip_metadata).await {
                Some(Ok(result)) => {
                    if let Some(f) = response_frame(h.stream, ResponseMessage::Result(result)) {
                        let _ = conn.to_client.send(f);
                    }
                    return;
                }
                Some(Err((code, message))) => {
                    conn.reply_error(h.stream, code, &message);
                    return;
                }
                None => {}
            }
        }
        // Scylla's answer to a conditional write shows the rows as they were.
        let before = match lwt {
            Some(l) if l.reshape => shared.lwt_before(&items, l.serial).await.map(|b| (b, l.skip_metadata)),
            _ => None,
        };
        if lwt.is_some() && before.is_none() {
            inc(&shared.counters.lwt_unshaped);
        }
        let planned = async {
            let built = shared.cdc_mutations(&items, ts).await?;
            let mut with_images = Vec::with_capacity(built.mutations.len());
            for m in built.mutations {
                let images = shared
                    .cdc_images(&m, log_cl)
                    .await
                    .map_err(|e| (0x1300, format!("CDC preimage query could not achieve the CL: {e}")))?;
                with_images.push((m, images));
            }
            let (writes, logged) = shared.cdc_log_writes(&with_images)?;
            Ok::<_, (i32, String)>((writes, logged, built.inexact))
        }
        .await;
        let (writes, logged, inexact) = match planned {
            Ok(p) => p,
            Err((code, message)) => {
                inc(&shared.counters.cdc_refused);
                conn.reply_error(h.stream, code, &message);
                return;
            }
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        conn.pend(h.stream, Pending::Cdc(tx));
        if conn.to_upstream.send(request).is_err() {
            return;
        }
        let Ok(answer) = rx.await else { return };
        if !writes.is_empty() && applied(&answer, conditional) {
            if let Err(e) = shared.log_writer.batch(&writes, log_cl, logged).await {
                inc(&shared.counters.cdc_log_failures);
                let _ = conn.to_client.send(error_frame(4, h.stream, 0, &format!("CDC log write failed: {e}")));
                return;
            }
            inc(&shared.counters.cdc_writes_logged);
            shared.counters.cdc_log_rows.fetch_add(writes.len() as u64, Ordering::Relaxed);
        }
        if applied(&answer, conditional) {
            // Counted even when nothing could be logged (`l = l - [v]`).
            shared.counters.cdc_inexact.fetch_add(u64::from(inexact), Ordering::Relaxed);
        }
        if let (Some(((shape, rows), skip)), Some(applied)) = (&before, lwt_applied(&answer)) {
            if let Some(message) = shape.answer(applied, rows, *skip).map(ResponseMessage::Result) {
                // ScyllaDB's answer to a misrouted conditional write carries
                // its tablet like any other (`execute_with_condition` in
                // `cql3/statements/modification_statement.cc`).
                let mut response = Response::new(message);
                response.custom_payload.extend(tablet.as_ref().map(route_payload));
                let mut buf = Vec::new();
                if response.encode(ProtocolVersion::V4, h.stream, &mut buf).is_ok() {
                    let _ = conn.to_client.send(Bytes::from(buf));
                    return;
                }
            }
        }
        // A misrouted write to a tablets table carries its tablet, as on
        // any other path.
        let answer = match &tablet {
            Some(route) => with_tablet_route(&answer.header, &answer.body, route),
            None => frame(&answer.header, answer.header.flags.0, &answer.body),
        };
        let _ = conn.to_client.send(answer);
    });
}

/// How a conditional write is answered: the serial consistency of its
/// reads, and whether the client asked to skip the result metadata.
#[derive(Debug, Clone, Copy)]
struct Lwt {
    serial: Consistency,
    skip_metadata: bool,
    /// Whether the front can answer in Scylla's shape (it knows every
    /// statement of the write).
    reshape: bool,
}

impl Lwt {
    fn of(conditional: bool, serial: Option<Consistency>, skip_metadata: bool) -> Option<Lwt> {
        let serial = serial.unwrap_or(Consistency::Serial);
        conditional.then_some(Lwt { serial, skip_metadata, reshape: true })
    }
}

/// `[applied]` of Cassandra's answer to a conditional write (`None` when
/// the answer is not a rows result, e.g. an error).
fn lwt_applied(answer: &Envelope) -> Option<bool> {
    match Response::decode(&answer.header, answer.body.clone()) {
        Ok(Response { message: ResponseMessage::Result(ResultMessage::Rows(rows)), .. }) => {
            let mut r = Reader::new(rows.raw_rows());
            Some(rows.rows_count() > 0 && matches!(r.bytes("[applied]"), Ok(Some([1]))))
        }
        _ => None,
    }
}

/// Whether the answer to a write says it was applied: a RESULT, and for a
/// conditional write `[applied] = true`.
fn applied(answer: &Envelope, conditional: bool) -> bool {
    match Response::decode(&answer.header, answer.body.clone()) {
        Ok(Response { message: ResponseMessage::Result(ResultMessage::Rows(rows)), .. }) if conditional => {
            let mut r = Reader::new(rows.raw_rows());
            rows.rows_count() > 0 && matches!(r.bytes("[applied]"), Ok(Some([1])))
        }
        Ok(Response { message: ResponseMessage::Result(_), .. }) => !conditional,
        _ => false,
    }
}

async fn upstream_loop(conn: Arc<Conn>, mut r: OwnedReadHalf) {
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

/// The offset of the message in a response body (after tracing id,
/// warnings and custom payload).
fn message_offset(header: &EnvelopeHeader, body: &[u8]) -> Option<usize> {
    let mut r = Reader::new(body);
    if header.flags.has(Flags::TRACING) {
        r.take(16, "tracing id").ok()?;
    }
    if header.flags.has(Flags::WARNING) {
        r.string_list("warnings").ok()?;
    }
    if header.flags.has(Flags::CUSTOM_PAYLOAD) {
        r.bytes_map("custom payload").ok()?;
    }
    Some(body.len() - r.remaining())
}

fn on_response(conn: &Arc<Conn>, env: Envelope) {
    let h = env.header;
    if h.stream < 0 {
        if h.opcode == Opcode::Event {
            if let Some(f) = rewrite_event(conn, &env) {
                let _ = conn.to_client.send(f);
                return;
            }
        }
        let _ = conn.to_client.send(frame(&h, h.flags.0, &env.body));
        return;
    }
    let pending = conn.pending.lock().ok().and_then(|mut m| if m.is_empty() { None } else { m.remove(&h.stream) });
    match pending {
        None => {
            let _ = conn.to_client.send(frame(&h, h.flags.0, &env.body));
        }
        Some(Pending::Cdc(tx)) => {
            let _ = tx.send(env);
        }
        Some(Pending::Prepare { lwt, text, at }) => {
            let keyspace = at.keyspace.clone();
            let body = learn_prepared(conn, &env, lwt, &text, at);
            let conditional = match classify(&text) {
                Dml::Parsed(statement) if statement.is_conditional() => Some(statement),
                _ => None,
            };
            let Some(statement) = conditional else {
                let _ = conn.to_client.send(frame(&h, h.flags.0, &body));
                return;
            };
            // Scylla's PREPARED of a conditional statement describes the
            // columns of its answer ([`crate::lwt`]).
            let conn = conn.clone();
            tokio::spawn(async move {
                let shape = conn.shared.lwt_shape(&statement, keyspace.as_deref()).await;
                let prepared = match (shape, Response::decode(&h, body.clone())) {
                    (
                        Some(shape),
                        Ok(Response { message: ResponseMessage::Result(ResultMessage::Prepared(mut p)), .. }),
                    ) => {
                        p.result_metadata = shape.metadata(false);
                        response_frame(h.stream, ResponseMessage::Result(ResultMessage::Prepared(p)))
                    }
                    _ => None,
                };
                let _ = conn.to_client.send(prepared.unwrap_or_else(|| frame(&h, h.flags.0, &body)));
            });
        }
        Some(Pending::SchemaTables(read)) => {
            let amended = message_offset(&h, &env.body).and_then(|at| crate::identity::amend(&read, &env.body, at));
            let _ = conn.to_client.send(frame(&h, h.flags.0, amended.as_ref().unwrap_or(&env.body)));
        }
        Some(Pending::Tablet(route)) => {
            let _ = conn.to_client.send(with_tablet_route(&h, &env.body, &route));
        }
        Some(Pending::Use) => {
            let set = match Response::decode(&h, env.body.clone()) {
                Ok(Response { message: ResponseMessage::Result(ResultMessage::SetKeyspace(ks)), .. }) => Some(ks),
                _ => None,
            };
            if let Ok(mut k) = conn.keyspace.lock() {
                k.uses_in_flight = k.uses_in_flight.saturating_sub(1);
                if set.is_some() {
                    k.current = set;
                }
            }
            let _ = conn.to_client.send(frame(&h, h.flags.0, &env.body));
        }
        Some(Pending::Schema { cdc, table, tablets, vector, table_tablets, keyspace }) => {
            let (change, fabricated) = match Response::decode(&h, env.body.clone()) {
                Ok(Response { message: ResponseMessage::Result(ResultMessage::SchemaChange(c)), .. }) => (c, false),
                // Cassandra answers Void to an ALTER that changes nothing it
                // knows (only Scylla's `cdc` or `tablets` map changed): the
                // front does its part and answers what Scylla would, a
                // Schema_change.
                Ok(Response { message: ResponseMessage::Result(ResultMessage::Void), .. })
                    if cdc.is_some() || table_tablets.is_some() =>
                {
                    let current = conn.current_keyspace();
                    let Some((Some(keyspace), name)) = table.map(|(ks, t)| (ks.or(current), t)) else {
                        let _ = conn.to_client.send(frame(&h, h.flags.0, &env.body));
                        return;
                    };
                    let target = SchemaChangeTarget::Table { keyspace, name };
                    (SchemaChange { change: SchemaChangeType::Updated, target }, true)
                }
                // Likewise an ALTER KEYSPACE whose only change is Scylla's `tablets` map.
                Ok(Response { message: ResponseMessage::Result(ResultMessage::Void), .. })
                    if tablets.is_some() && keyspace.is_some() =>
                {
                    let target = SchemaChangeTarget::Keyspace { keyspace: keyspace.unwrap_or_default() };
                    (SchemaChange { change: SchemaChangeType::Updated, target }, true)
                }
                Ok(Response { message: ResponseMessage::Error(e), .. }) => {
                    match crate::refusals::translate(e.code, &e.message) {
                        Some((code, message)) => {
                            let _ = conn.to_client.send(error_frame(4, h.stream, code, &message));
                        }
                        None => {
                            let _ = conn.to_client.send(frame(&h, h.flags.0, &env.body));
                        }
                    }
                    return;
                }
                _ => {
                    let _ = conn.to_client.send(frame(&h, h.flags.0, &env.body));
                    return;
                }
            };
            let conn = conn.clone();
            tokio::spawn(async move {
                if let (Some(o), SchemaChangeType::Created, SchemaChangeTarget::Table { keyspace, name }) =
                    (&table_tablets, change.change, &change.target)
                {
                    conn.shared.set_tablet_options(keyspace, name, o.clone());
                }
                let mut result = conn.shared.on_schema_change(&change, cdc).await;
                if let (Ok(()), SchemaChangeTarget::Keyspace { keyspace }) = (&result, &change.target) {
                    result = match tablets {
                        Some(choice) if change.change == SchemaChangeType::Updated => {
                            conn.shared.alter_keyspace_tablets(keyspace, choice).await
                        }
                        Some(Some(initial)) => conn.shared.record_tablets(keyspace, initial).await,
                        None if change.change == SchemaChangeType::Created => {
                            conn.shared.default_tablets(keyspace).await
                        }
                        _ => Ok(()),
                    };
                }
                if let (Ok(()), Some(v)) = (&result, vector) {
                    result = conn.shared.on_vector_index(&change, v).await;
                }
                if let (Ok(()), Some(o), SchemaChangeType::Updated, SchemaChangeTarget::Table { keyspace, name }) =
                    (&result, table_tablets, change.change, &change.target)
                {
                    result = conn.shared.alter_tablet_options(keyspace, name, o).await;
                }
                match result {
                    Ok(()) if fabricated => {
                        let message = ResponseMessage::Result(ResultMessage::SchemaChange(change));
                        if let Some(f) = response_frame(h.stream, message) {
                            let _ = conn.to_client.send(f);
                        }
                    }
                    Ok(()) => {
                        let _ = conn.to_client.send(frame(&h, h.flags.0, &env.body));
                    }
                    Err((code, message)) => {
                        let _ = conn.to_client.send(error_frame(4, h.stream, code, &message));
                    }
                }
            });
        }
    }
}

/// `ALTER KEYSPACE k WITH tablets = {...}` and nothing else (flavour
/// checked): Cassandra has nothing to apply, so the front records the map
/// and answers Scylla's Schema_change itself.
fn alter_keyspace_tablets_only(conn: &Arc<Conn>, stream: i16, keyspace: String, choice: Option<i32>) {
    let conn = conn.clone();
    tokio::spawn(async move {
        let reply = match conn.shared.alter_keyspace_tablets(&keyspace, choice).await {
            Ok(()) => {
                let target = SchemaChangeTarget::Keyspace { keyspace };
                let change = SchemaChange { change: SchemaChangeType::Updated, target };
                response_frame(stream, ResponseMessage::Result(ResultMessage::SchemaChange(change)))
            }
            Err((code, message)) => Some(error_frame(4, stream, code, &message)),
        };
        conn.reply(reply);
    });
}

/// What the front knows of a prepared `text` before routing: its DML, whether it is a `USE`,
/// and where its unqualified names point (`at`); not routed.
fn unrouted_info(text: &str, at: Resolution, conn: &Conn) -> StatementInfo {
    let (dml, unparsed) = match classify(text) {
        Dml::Parsed(d) => (Some(d), None),
        Dml::Unparsed(why) => (None, Some((text.to_string(), why))),
        Dml::Other => (None, None),
    };
    StatementInfo {
        pk_indexes: Vec::new(),
        in_list: false,
        partitioner: Partitioner::Murmur3,
        dml,
        keyspace: at.keyspace,
        keyspace_changing: at.changing,
        unparsed,
        is_use: rewrite::rewrite(text, &conn.shared.config.emu_keyspace, false).use_keyspace,
        table: None,
    }
}

/// The id of a PREPARED result, read without decoding its metadata:
/// `<kind [int]><id [short bytes]>` after the envelope's optional fields.
fn prepared_id(header: &EnvelopeHeader, body: &Bytes) -> Option<Bytes> {
    let mut r = Reader::new(body.get(message_offset(header, body)?..)?);
    (r.i32("result kind").ok()? == 4).then_some(())?;
    let id = r.short_bytes("prepared id").ok()?;
    Some(Bytes::copy_from_slice(id))
}

/// Scylla's refusal of a vector index, or of `WITH cdc` options too weak
/// for the vector index a table has (see [`super::vector_index`]).
fn vector_index_refusal(
    shared: &Shared,
    vector: Option<&super::vector_index::IndexDdl>,
    cdc: Option<&super::cdc::CdcOptions>,
    table: &Option<(Option<String>, String)>,
    current: Option<String>,
) -> Option<String> {
    let registry = shared.registry.lock().ok()?;
    if let Some(super::vector_index::IndexDdl::Create { keyspace: Some(keyspace), table, .. }) = vector {
        return super::vector_index::refusal(&registry, keyspace, table);
    }
    let (Some(options), Some((keyspace, table))) = (cdc, table.as_ref()) else { return None };
    let keyspace = keyspace.clone().or(current)?;
    if !registry.has_vector_index(&keyspace, table) {
        return None;
    }
    super::vector_index::options_refusal(options, true)
}

/// Learns a PREPARED answer's table, key indexes and partitioner, and the
/// statement when it is DML; marks LWT statements when the client
/// negotiated the mark. Returns the body to send.
///
/// `at` is where unqualified names pointed when the PREPARE was sent. When the
/// answer names the statement's keyspace (a bound column), that wins; when it
/// does not and a `USE` was in flight, the keyspace stays uncertain and the
/// CDC write guard refuses unqualified writes to CDC tables.
fn learn_prepared(conn: &Conn, env: &Envelope, lwt: bool, text: &str, at: Resolution) -> Bytes {
    let p = match Response::decode(&env.header, env.body.clone()) {
        Ok(Response { message: ResponseMessage::Result(ResultMessage::Prepared(p)), .. }) => p,
        Ok(_) => return env.body.clone(),
        Err(_) => {
            // A PREPARED the protocol crate cannot read (a type it does not know): the front
            // still must know the id, or every EXECUTE of it would be answered UNPREPARED.
            if let Some(id) = prepared_id(&env.header, &env.body) {
                let info = unrouted_info(text, at, conn);
                if let Ok(mut m) = conn.shared.prepared.lock() {
                    m.insert(id, Arc::new(info));
                }
            }
            return env.body.clone();
        }
    };
    if let Some(spec) = p.metadata.specs.first() {
        let partitioner = conn.shared.partitioner_of(&spec.keyspace, &spec.table);
        // `pk IN ?` binds a list of keys: a multi-partition request, routed
        // (counted) by all of its keys when the key has one column.
        let multi = p.metadata.pk_indexes.iter().any(|&i| match p.metadata.specs.get(usize::from(i)) {
            Some(s) => s.name.to_ascii_lowercase().starts_with("in("),
            None => true,
        });
        // Cassandra reports no key index for `"cdc$stream_id" IN ?` (the
        // marker's column is `in(cdc$stream_id)`); the log's key is that one
        // column, so the list is the key.
        let log_in = (partitioner == Partitioner::Cdc && p.metadata.pk_indexes.is_empty())
            .then(|| p.metadata.specs.iter().position(|s| s.name == "in(cdc$stream_id)"))
            .flatten()
            .and_then(|i| u16::try_from(i).ok());
        let (pk_indexes, in_list) = match log_in {
            Some(i) => (vec![i], true),
            None if multi && p.metadata.pk_indexes.len() > 1 => (Vec::new(), false),
            None => (p.metadata.pk_indexes.clone(), multi),
        };
        // A bound column names the statement's own keyspace, as Cassandra resolved it.
        let at = Resolution { keyspace: Some(spec.keyspace.clone()), changing: false };
        let table = Some((spec.keyspace.clone(), spec.table.clone()));
        let info = StatementInfo { pk_indexes, in_list, partitioner, table, ..unrouted_info(text, at, conn) };
        if let Ok(mut m) = conn.shared.prepared.lock() {
            m.insert(p.id.clone(), Arc::new(info));
        }
        inc(&conn.shared.counters.prepared_learned);
    } else {
        // No bound column: no routing, but the front must still know the
        // statement (an unknown id is answered UNPREPARED).
        let info = unrouted_info(text, at, conn);
        if let Ok(mut m) = conn.shared.prepared.lock() {
            m.insert(p.id.clone(), Arc::new(info));
        }
    }
    if lwt && conn.lwt_mark.load(Ordering::Relaxed) {
        // <kind [int]><id [short bytes]><flags [int]>...
        if let Some(off) = message_offset(&env.header, &env.body) {
            let flags_at = off + 4 + 2 + p.id.len();
            if flags_at < env.body.len() {
                let mut body = BytesMut::from(&env.body[..]);
                body[flags_at] |= 0x80;
                return body.freeze();
            }
        }
    }
    env.body.clone()
}

/// The `tablets-routing-v1` custom payload entry for `route`.
fn route_payload(route: &TabletRoute) -> (String, Option<Bytes>) {
    let mut value = Vec::new();
    route.encode(&mut value);
    (PAYLOAD_KEY.to_string(), Some(Bytes::from(value)))
}

/// A successful RESULT with the `tablets-routing-v1` payload added (any
/// other answer, or one that has a payload already, goes as it came).
fn with_tablet_route(h: &EnvelopeHeader, body: &[u8], route: &TabletRoute) -> Bytes {
    let at = match message_offset(h, body) {
        Some(at) if h.opcode == Opcode::Result && !h.flags.has(Flags::CUSTOM_PAYLOAD) => at,
        _ => return frame(h, h.flags.0, body),
    };
    let mut value = Vec::new();
    route.encode(&mut value);
    let mut out = Vec::with_capacity(body.len() + 2 + 2 + PAYLOAD_KEY.len() + 4 + value.len());
    out.extend_from_slice(&body[..at]);
    out.put_u16(1);
    out.put_u16(PAYLOAD_KEY.len() as u16);
    out.put_slice(PAYLOAD_KEY.as_bytes());
    out.put_i32(value.len() as i32);
    out.put_slice(&value);
    out.extend_from_slice(&body[at..]);
    frame(h, h.flags.0 | Flags::CUSTOM_PAYLOAD, &out)
}

/// Topology and status events name the front instead of the Cassandra node.
fn rewrite_event(conn: &Conn, env: &Envelope) -> Option<Bytes> {
    let Ok(Response { message: ResponseMessage::Event(event), .. }) = Response::decode(&env.header, env.body.clone())
    else {
        return None;
    };
    let map = |node: SocketAddr| conn.shared.front_address_of(node, conn.node);
    let event = match event {
        Event::TopologyChange { change, node } => Event::TopologyChange { change, node: map(node) },
        Event::StatusChange { change, node } => Event::StatusChange { change, node: map(node) },
        Event::SchemaChange(_) => return None,
    };
    response_frame(-1, ResponseMessage::Event(event))
}
