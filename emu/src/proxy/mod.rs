//! One client connection: its shard, its Cassandra connection, and what
//! passes between them.
//!
//! Every client connection gets its own upstream connection, so stream ids
//! pass through unchanged and no request ever waits for another client.
//! Client frames are decoded ([`FrameDecoder`](shardwise_protocol::frame::FrameDecoder), v4 only, LZ4 bodies
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
//! - `SCYLLA_USE_METADATA_ID`: when negotiated, v4 PREPARED answers get a
//!   result metadata id and EXECUTEs are answered as ScyllaDB answers them
//!   (skipped columns, `Metadata_changed`), see `proxy/metadata_id.rs`.
//! - TOPOLOGY_CHANGE/STATUS_CHANGE events carry the front's address instead
//!   of the Cassandra node's.
//!
//! Files: `connection` (the tasks of one connection: `serve`, the client
//! and Cassandra readers, the writer), `request` (what a client's request
//! meets before Cassandra), `response` (what Cassandra's answer meets before
//! the client), `frame` (frames the front writes itself); here the
//! connection's state (`Conn`) and what requests and responses share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use shardwise_protocol::codec::Reader;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::{Envelope, EnvelopeHeader, Flags};
use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage};
use shardwise_protocol::tablets::TabletRoute;
use shardwise_protocol::token::Partitioner;
use shardwise_protocol::types::ser::RawValues;

use super::cdclog::dml::{self, Statement};
use super::cdclog::synth::{self, Item, OwnedValue};
use super::rewrite::{self, LocalAnswer};
use super::stats::inc;
use crate::delay_line::Outbox;
use crate::guard::{self, Keyspace, Resolution, Verdict};
use crate::shared::{Shared, StatementInfo};
use frame::{error_frame, frame, response_frame};

mod connection;
mod frame;
mod metadata_id;
mod request;
mod response;

pub(crate) use connection::serve;

/// The tablets routing a connection negotiated, for one request.
#[derive(Debug, Clone, Copy)]
enum Routing {
    None,
    V1,
    /// With the request's tablet version block.
    V2 {
        block: u8,
    },
}

/// What a request expects of its response.
#[derive(Debug)]
enum Pending {
    Prepare {
        lwt: bool,
        text: String,
        /// Where unqualified names pointed when the PREPARE was sent.
        at: Resolution,
        /// A JSON insert whose `IF NOT EXISTS` the front took out: its
        /// table (see [`crate::rewrite::Rewrite::json_insert_table`]).
        json_table: Option<(Option<String>, String)>,
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
        /// The table's `tombstone_gc`, kept once the statement succeeded.
        tombstone_gc: Option<crate::tombstone_gc::TombstoneGc>,
        /// A CREATE (never answered with a made-up Schema_change).
        create: bool,
        /// Whether the table's `caching` given is enabled, kept once the
        /// statement succeeded.
        caching_enabled: Option<bool>,
    },
    Use,
    /// A read of `system_schema.tables`: its answer gets Scylla's rows
    /// ([`crate::identity`]).
    SchemaTables(crate::identity::TablesRead),
    /// A request that reached a node or shard holding no replica of its
    /// tablet: its answer gets the tablet's routing payload.
    Tablet(TabletRoute),
    /// A v4 EXECUTE with `SCYLLA_USE_METADATA_ID`: sent to Cassandra
    /// without the id and asking for the metadata; its rows are answered as
    /// ScyllaDB does ([`metadata_id::answer`]), then get `route` if any.
    MetadataId {
        client_id: Bytes,
        skip: bool,
        route: Option<TabletRoute>,
        /// A prepared `BEGIN ... BATCH`: answered without warnings.
        batch: bool,
    },
    /// A BATCH: answered without Cassandra's warnings, as ScyllaDB sends
    /// none for batches (`request::on_batch`).
    Batch,
}
pub(crate) struct Conn {
    shared: Arc<Shared>,
    node: usize,
    shard: u16,
    pending: Mutex<HashMap<i16, Pending>>,
    lwt_mark: AtomicBool,
    /// The client negotiated `TABLETS_ROUTING_V1`.
    tablets_routing: AtomicBool,
    /// The client negotiated `TABLETS_ROUTING_V2_EXPERIMENTAL`: its
    /// EXECUTEs end with a tablet version block.
    tablets_routing_v2: AtomicBool,
    /// The client negotiated `SCYLLA_USE_METADATA_ID`.
    metadata_id: AtomicBool,
    keyspace: Mutex<Keyspace>,
    to_client: Outbox,
    to_upstream: Outbox,
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
        let (judged, _) = self.judge(id, values, Routing::None);
        match judged {
            Some(true) => inc(&c.batch_hits),
            Some(false) => inc(&c.batch_misses),
            None => inc(&c.unrouted),
        }
        judged.map(|hit| !hit)
    }

    /// Hit, miss or unrouted for a prepared statement's values, counted;
    /// the tablet's routing payload when the client negotiated it and
    /// ScyllaDB would send one: v1 on a miss, v2 (`block`, the EXECUTE's
    /// tablet version block) when the block is not one of the tablet's
    /// version. `Some(true)` is a miss.
    fn route_tablet(
        &self,
        id: &[u8],
        values: &RawValues<'_>,
        block: Option<u8>,
    ) -> (Option<bool>, Option<TabletRoute>) {
        let c = self.shard_counters();
        let routing = match block {
            Some(block) => Routing::V2 { block },
            None if self.tablets_routing.load(Ordering::Relaxed) => Routing::V1,
            None => Routing::None,
        };
        let (judged, route) = self.judge(id, values, routing);
        if route.is_some() {
            inc(&self.shared.counters.tablet_routes);
        }
        match judged {
            Some(true) => inc(&c.hits),
            Some(false) => inc(&c.misses),
            None => inc(&c.unrouted),
        }
        (judged.map(|hit| !hit), route)
    }

    /// Whether a prepared statement's values reach their owner here
    /// (`Some(true)`), elsewhere (`Some(false)`) or cannot be told (`None`),
    /// and, under `routing`, the payload ScyllaDB would attach to the
    /// answer. A table with tablets is judged by its tablet's replicas (node
    /// and shard), others by the token's shard. As in ScyllaDB's
    /// `check_locality` (`locator/tablets.cc`), a v1 payload goes with every
    /// miss, wrong node or wrong shard, of a request on exactly one partition
    /// of a tablets table; as in its `check_tablet_version`, a v2 payload
    /// with every such request whose version block is not the tablet's,
    /// hit or miss.
    fn judge(&self, id: &[u8], values: &RawValues<'_>, routing: Routing) -> (Option<bool>, Option<TabletRoute>) {
        let Some(info) = self.prepared_info(id) else { return (None, None) };
        if info.pk_indexes.is_empty() || values.names.is_some() {
            return (None, None);
        }
        let tablets = info.table.as_ref().and_then(|(ks, table)| self.shared.tablets_of(ks, table));
        let here = |token: shardwise_protocol::token::Token| match &tablets {
            Some(map) => map.tablet_of(token.value()).is_replica(self.node, self.shard),
            None => self.shared.sharder.shard_of(token) == self.shard,
        };
        let host_id = |n: usize| self.shared.nodes.get(n).and_then(|n| n.host_id);
        let route = |token: shardwise_protocol::token::Token| match routing {
            Routing::None => None,
            Routing::V1 => tablets.as_ref()?.tablet_of(token.value()).route(host_id),
            Routing::V2 { block } => tablets
                .as_ref()?
                .tablet_of(token.value())
                .route_v2(host_id)
                .filter(|r| r.version.is_some_and(|v| !shardwise_protocol::tablets::block_matches(v, block))),
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
        let payload = match (tokens.as_slice(), routing) {
            ([token], Routing::V1) if !hit => route(*token),
            ([token], Routing::V2 { .. }) => route(*token),
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
        is_batch: synth::is_batch_text(text),
    }
}
