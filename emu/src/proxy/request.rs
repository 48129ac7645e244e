//! What the front does with a client's request before Cassandra sees it:
//! rewrites, refusals, local answers, shard and tablet routing, the CDC
//! write guard, LWT in Scylla's dialect, BATCH entries and CDC writes.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{BufMut, Bytes};
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::{Envelope, EnvelopeHeader, Flags, FrameDecoder, Opcode, ProtocolVersion};
use shardwise_protocol::handshake::USE_METADATA_ID;
use shardwise_protocol::request::{
    encode_request, AnyRequest, Batch, BatchStatement, Execute, Query, QueryParameters, Register, Startup,
    StatementKind,
};
use shardwise_protocol::response::{
    Response, ResponseMessage, ResultMessage, SchemaChange, SchemaChangeTarget, SchemaChangeType,
};
use shardwise_protocol::tablets::{TabletRoute, TABLETS_ROUTING_V1, TABLETS_ROUTING_V2};
use shardwise_protocol::types::ser::RawValues;

use super::frame::{
    encode, error_frame, frame, response_frame, route_payload, unprepared_frame, with_tablet_route, without_warnings,
};
use super::{applied, classify, lwt_applied, unrouted_info, Conn, Dml, Lwt, Pending};
use crate::cdclog::dml::Statement;
use crate::cdclog::synth::{self, Item};
use crate::guard::{Resolution, Verdict};
use crate::rewrite::{self, LocalAnswer};
use crate::shared::client_routes::CLIENT_ROUTES_CHANGE;
use crate::shared::{Shared, StatementInfo};
use crate::stats::inc;

pub(super) fn on_request(conn: &Arc<Conn>, dec: &mut FrameDecoder, env: Envelope) {
    let h = env.header;
    inc(&conn.shared.counters.requests);
    // Tablets routing v2: an EXECUTE ends with the client's tablet version
    // block, which Cassandra must not see (ScyllaDB refuses an EXECUTE
    // without it: `transport/server.cc`).
    let (env, block) = match (h.opcode, conn.tablets_routing_v2.load(Ordering::Relaxed)) {
        (Opcode::Execute, true) => match env.body.split_last() {
            Some((&block, rest)) => {
                let body = env.body.slice(..rest.len());
                (Envelope { body, ..env }, Some(block))
            }
            None => {
                conn.reply_error(h.stream, 0x000A, "EXECUTE without the tablet version block of TABLETS_ROUTING_V2");
                return;
            }
        },
        _ => (env, None),
    };
    let emu = conn.shared.config.emu_keyspace.as_str();
    let metadata_id = conn.metadata_id.load(Ordering::Relaxed);
    let decoded = AnyRequest::decode_ext(h.opcode, h.version, metadata_id, &env.body);
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
                } else if k == TABLETS_ROUTING_V2 && conn.shared.config.strongly_consistent_tables {
                    conn.tablets_routing_v2.store(true, Ordering::Relaxed);
                } else if k == USE_METADATA_ID {
                    conn.metadata_id.store(true, Ordering::Relaxed);
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
                if let Some(message) = tombstone_gc_refusal(&conn.shared, &rw, current.as_deref()) {
                    conn.reply_error(h.stream, crate::tombstone_gc::INVALID, message);
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
                        tombstone_gc: rw.tombstone_gc,
                        create: rw.create,
                        caching_enabled: rw.caching_enabled,
                    },
                );
            } else if rw.use_keyspace {
                conn.use_sent(h.stream);
            } else if synth::is_batch_text(text) {
                // No warnings on a batch's answer (see [`on_batch`]).
                conn.pend(h.stream, Pending::Batch);
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
            let json_table = rw.json_insert_table.clone();
            conn.pend(h.stream, Pending::Prepare { lwt: rw.lwt, text, at: conn.resolution(None), json_table });
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
            let (routed, tablet) = conn.route_tablet(e.id, &e.params.values, block);
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
                // Cassandra's v4 knows no metadata id.
                let request = Execute { params, result_metadata_id: None, ..e };
                if let Some(frame) = encode(&h, &request) {
                    cdc_write(conn, h, frame, vec![item], ts, e.params.consistency, lwt, tablet);
                }
                return;
            }
            if let Some(client_id) = e.result_metadata_id {
                // SCYLLA_USE_METADATA_ID: the id stays here, Cassandra sends the columns.
                let skip = e.params.skip_metadata;
                let params = QueryParameters { skip_metadata: false, ..e.params };
                let request = Execute { id: e.id, result_metadata_id: None, params };
                let Some(frame) = encode(&h, &request) else {
                    conn.reply_error(h.stream, 0x000A, "EXECUTE not re-encodable");
                    return;
                };
                let client_id = Bytes::copy_from_slice(client_id);
                // A prepared USE has no rows, and its answer is awaited already.
                if !info.is_use {
                    conn.pend(h.stream, Pending::MetadataId { client_id, skip, route: tablet, batch: info.is_batch });
                }
                conn.forward_routed(&h, &frame[shardwise_protocol::frame::HEADER_LEN..], miss);
                return;
            }
            if let Some(route) = tablet {
                conn.pend(h.stream, Pending::Tablet(route));
            } else if info.is_batch {
                conn.pend(h.stream, Pending::Batch);
            }
            conn.forward_routed(&h, &env.body, miss);
        }
        Ok(AnyRequest::Batch(b)) => on_batch(conn, &h, &env.body, b),
        Ok(AnyRequest::Register(r)) if r.events.contains(&CLIENT_ROUTES_CHANGE) => {
            // ScyllaDB's own event, which Cassandra would refuse: announced
            // by the front, the others registered with Cassandra.
            conn.shared.listen_for_routes(conn.to_client.clone());
            let events: Vec<&str> = r.events.into_iter().filter(|e| *e != CLIENT_ROUTES_CHANGE).collect();
            if events.is_empty() {
                conn.reply(response_frame(h.stream, ResponseMessage::Ready));
            } else if let Some(f) = encode(&h, &Register { events }) {
                let _ = conn.to_upstream.send(f);
            }
        }
        _ => conn.forward(&h, &env.body),
    }
}
/// A PREPARE of Scylla's LWT dialect ([`crate::lwt::prepared`]): answered
/// by the front with the id ScyllaDB would give it, or sent on (rewritten
/// when `text` differs from the client's) when Cassandra can prepare it.
pub(super) fn prepare_lwt_dialect(
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
                let mut prepared = owned.prepared;
                if conn.metadata_id.load(Ordering::Relaxed) {
                    let specs = prepared.result_metadata.specs.as_deref().unwrap_or_default();
                    prepared.result_metadata_id = Some(super::metadata_id::of(specs));
                }
                let message = ResponseMessage::Result(ResultMessage::Prepared(Box::new(prepared)));
                conn.reply(response_frame(h.stream, message));
            }
            Some(Err((code, message))) => conn.reply_error(h.stream, code, &message),
            None => {
                if rewritten {
                    inc(&conn.shared.counters.rewritten);
                }
                conn.pend(h.stream, Pending::Prepare { lwt, text, at, json_table: None });
                conn.forward(&h, &body);
            }
        }
    });
}
pub(super) fn on_batch(
    conn: &Arc<Conn>,
    h: &EnvelopeHeader,
    body: &[u8],
    b: Batch<'_, Vec<BatchStatement<'_, RawValues<'_>>>>,
) {
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
        let statements = rewritten(&b.statements, &texts);
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
    // ScyllaDB sends no warnings with a batch's answer (scylladb#10196; its
    // batch size checks only log, `verify_batch_size` in
    // cql3/statements/batch_statement.cc): Cassandra's are left out.
    conn.pend(h.stream, Pending::Batch);
    if texts.iter().all(Option::is_none) {
        conn.forward_routed(h, body, miss);
        return;
    }
    inc(&conn.shared.counters.rewritten);
    let statements = rewritten(&b.statements, &texts);
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
/// A batch's statements with the texts the front rewrote (`None`: as sent).
fn rewritten<'a>(
    statements: &[BatchStatement<'a, RawValues<'a>>],
    texts: &'a [Option<String>],
) -> Vec<BatchStatement<'a, RawValues<'a>>> {
    statements
        .iter()
        .zip(texts)
        .map(|(s, t)| BatchStatement {
            kind: t.as_deref().map_or(s.kind, StatementKind::Query),
            values: s.values.clone(),
        })
        .collect()
}

/// A write to CDC tables: computes its log rows (reading images first when
/// the tables want them), forwards the write, and writes the log rows once
/// Cassandra has applied it, before the client sees the answer. A write the
/// front cannot log is refused; a log write that fails turns the answer
/// into an error — a log row is never silently missing.
#[allow(clippy::too_many_arguments)]
pub(super) fn cdc_write(
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
    let batch = h.opcode == Opcode::Batch || items.iter().any(|i| matches!(*i.statement, Statement::Batch(_)));
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
        // any other path; a batch goes without Cassandra's warnings (see
        // [`on_batch`]).
        let answer = match &tablet {
            Some(route) => with_tablet_route(&answer.header, &answer.body, route),
            None if batch => without_warnings(&answer.header, &answer.body),
            None => frame(&answer.header, answer.header.flags.0, &answer.body),
        };
        let _ = conn.to_client.send(answer);
    });
}
/// `ALTER KEYSPACE k WITH tablets = {...}` and nothing else (flavour
/// checked): Cassandra has nothing to apply, so the front records the map
/// and answers Scylla's Schema_change itself.
pub(super) fn alter_keyspace_tablets_only(conn: &Arc<Conn>, stream: i16, keyspace: String, choice: Option<i32>) {
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
/// ScyllaDB's refusal of `tombstone_gc` mode `repair` on a CDC log
/// (`alter_table_statement.cc`, see [`crate::tombstone_gc`]).
fn tombstone_gc_refusal(shared: &Shared, rw: &rewrite::Rewrite, current: Option<&str>) -> Option<&'static str> {
    let options = rw.tombstone_gc?;
    if options.mode != crate::tombstone_gc::Mode::Repair {
        return None;
    }
    let (keyspace, table) = rw.table.as_ref()?;
    let keyspace = keyspace.as_deref().or(current)?;
    let is_log = shared.registry.lock().ok()?.is_log(keyspace, table);
    is_log.then_some(crate::tombstone_gc::REPAIR_ON_LOG)
}
/// Scylla's refusal of a vector index, or of `WITH cdc` options too weak
/// for the vector index a table has (see [`super::vector_index`]).
pub(super) fn vector_index_refusal(
    shared: &Shared,
    vector: Option<&crate::vector_index::IndexDdl>,
    cdc: Option<&crate::cdc::CdcOptions>,
    table: &Option<(Option<String>, String)>,
    current: Option<String>,
) -> Option<String> {
    let registry = shared.registry.lock().ok()?;
    if let Some(crate::vector_index::IndexDdl::Create { keyspace: Some(keyspace), table, .. }) = vector {
        return crate::vector_index::refusal(&registry, keyspace, table);
    }
    let (Some(options), Some((keyspace, table))) = (cdc, table.as_ref()) else { return None };
    let keyspace = keyspace.clone().or(current)?;
    if !registry.has_vector_index(&keyspace, table) {
        return None;
    }
    crate::vector_index::options_refusal(options, true)
}
