//! What the front does with Cassandra's answer before the client sees it:
//! PREPARED learned, schema changes held until the front did its part,
//! tablet routes added, events rewritten to the fronts' addresses.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use shardwise_protocol::frame::{Envelope, Opcode};
use shardwise_protocol::response::{
    Event, Response, ResponseMessage, ResultMessage, SchemaChange, SchemaChangeTarget, SchemaChangeType,
};
use shardwise_protocol::token::Partitioner;

use super::frame::{
    error_frame, frame, message_offset, prepared_id, response_frame, with_tablet_route, without_warnings,
};
use super::{classify, unrouted_info, Conn, Dml, Pending};
use crate::guard::Resolution;
use crate::shared::StatementInfo;
use crate::stats::inc;

pub(super) fn on_response(conn: &Arc<Conn>, env: Envelope) {
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
        Some(Pending::Prepare { lwt, text, at, json_table }) => {
            let keyspace = at.keyspace.clone();
            let mut body = learn_prepared(conn, &env, lwt, &text, at);
            if let Some((ks, table)) = json_table {
                // ScyllaDB's PREPARED of `INSERT ... JSON ... IF NOT EXISTS`
                // announces `[applied]` and every column although the
                // statement runs unconditionally (scylladb#8682:
                // `prepare_conditions` builds the CAS result metadata, the
                // condition itself is never set; see `rewrite`).
                let (conn, metadata_id) = (conn.clone(), conn.metadata_id.load(Ordering::Relaxed));
                tokio::spawn(async move {
                    let ks = ks.or(keyspace);
                    let shape = match &ks {
                        Some(ks) => conn.shared.lwt_shape_of_table(ks, &table).await,
                        None => None,
                    };
                    let prepared = match (shape, Response::decode(&h, body.clone())) {
                        (
                            Some(shape),
                            Ok(Response { message: ResponseMessage::Result(ResultMessage::Prepared(mut p)), .. }),
                        ) => {
                            p.result_metadata = shape.metadata(false);
                            if metadata_id {
                                let specs = p.result_metadata.specs.as_deref().unwrap_or_default();
                                p.result_metadata_id = Some(super::metadata_id::of(specs));
                            }
                            response_frame(h.stream, ResponseMessage::Result(ResultMessage::Prepared(p)))
                        }
                        _ => None,
                    };
                    let _ = conn.to_client.send(prepared.unwrap_or_else(|| {
                        let body = if metadata_id { super::metadata_id::prepared(&h, &body) } else { body };
                        frame(&h, h.flags.0, &body)
                    }));
                });
                return;
            }
            let conditional = match classify(&text) {
                Dml::Parsed(statement) if statement.is_conditional() => Some(statement),
                _ => None,
            };
            let metadata_id = conn.metadata_id.load(Ordering::Relaxed);
            let Some(statement) = conditional else {
                if metadata_id {
                    body = super::metadata_id::prepared(&h, &body);
                }
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
                        if metadata_id {
                            let specs = p.result_metadata.specs.as_deref().unwrap_or_default();
                            p.result_metadata_id = Some(super::metadata_id::of(specs));
                        }
                        response_frame(h.stream, ResponseMessage::Result(ResultMessage::Prepared(p)))
                    }
                    _ => None,
                };
                let _ = conn.to_client.send(prepared.unwrap_or_else(|| {
                    let body = if metadata_id { super::metadata_id::prepared(&h, &body) } else { body };
                    frame(&h, h.flags.0, &body)
                }));
            });
        }
        Some(Pending::SchemaTables(read)) => {
            let amended = message_offset(&h, &env.body).and_then(|at| crate::identity::amend(&read, &env.body, at));
            let _ = conn.to_client.send(frame(&h, h.flags.0, amended.as_ref().unwrap_or(&env.body)));
        }
        Some(Pending::Batch) => {
            let _ = conn.to_client.send(without_warnings(&h, &env.body));
        }
        Some(Pending::Tablet(route)) => {
            let _ = conn.to_client.send(with_tablet_route(&h, &env.body, &route));
        }
        Some(Pending::MetadataId { client_id, skip, route, batch }) => {
            let body = super::metadata_id::answer(conn, &h, &env.body, &client_id, skip);
            let _ = conn.to_client.send(match route {
                Some(route) => with_tablet_route(&h, &body, &route),
                None if batch => without_warnings(&h, &body),
                None => frame(&h, h.flags.0, &body),
            });
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
        Some(Pending::Schema {
            cdc,
            table,
            tablets,
            vector,
            table_tablets,
            keyspace,
            tombstone_gc,
            create,
            caching_enabled,
        }) => {
            let (change, fabricated) = match Response::decode(&h, env.body.clone()) {
                Ok(Response { message: ResponseMessage::Result(ResultMessage::SchemaChange(c)), .. }) => (c, false),
                // Cassandra answers Void to an ALTER that changes nothing it
                // knows (only Scylla's `cdc`, `tablets`, `tombstone_gc` or
                // caching's `enabled` changed): the front does its part and
                // answers what Scylla would, a Schema_change. A CREATE answered Void (`IF NOT
                // EXISTS` of a table that exists) changed nothing, on
                // ScyllaDB too: it goes as it came.
                Ok(Response { message: ResponseMessage::Result(ResultMessage::Void), .. })
                    if !create
                        && (cdc.is_some()
                            || table_tablets.is_some()
                            || tombstone_gc.is_some()
                            || caching_enabled.is_some()) =>
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
                if let (Ok(()), Some(options), SchemaChangeTarget::Table { keyspace, name }) =
                    (&result, tombstone_gc, &change.target)
                {
                    if matches!(change.change, SchemaChangeType::Created | SchemaChangeType::Updated) {
                        result = conn.shared.set_tombstone_gc(keyspace, name, options).await;
                    }
                }
                if let (Ok(()), Some(enabled), SchemaChangeTarget::Table { keyspace, name }) =
                    (&result, caching_enabled, &change.target)
                {
                    if matches!(change.change, SchemaChangeType::Created | SchemaChangeType::Updated) {
                        conn.shared.set_caching_enabled(keyspace, name, enabled);
                    }
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
/// Learns a PREPARED answer's table, key indexes and partitioner, and the
/// statement when it is DML; marks LWT statements when the client
/// negotiated the mark. Returns the body to send.
///
/// `at` is where unqualified names pointed when the PREPARE was sent. When the
/// answer names the statement's keyspace (a bound column), that wins; when it
/// does not and a `USE` was in flight, the keyspace stays uncertain and the
/// CDC write guard refuses unqualified writes to CDC tables.
pub(super) fn learn_prepared(conn: &Conn, env: &Envelope, lwt: bool, text: &str, at: Resolution) -> Bytes {
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
/// Topology and status events name the front instead of the Cassandra node.
pub(super) fn rewrite_event(conn: &Conn, env: &Envelope) -> Option<Bytes> {
    let Ok(Response { message: ResponseMessage::Event(event), .. }) = Response::decode(&env.header, env.body.clone())
    else {
        return None;
    };
    let map = |node: SocketAddr| conn.shared.front_address_of(node, conn.node);
    let event = match event {
        Event::TopologyChange { change, node } => Event::TopologyChange { change, node: map(node) },
        Event::StatusChange { change, node } => Event::StatusChange { change, node: map(node) },
        Event::SchemaChange(_) | Event::ClientRoutesChange { .. } => return None,
    };
    response_frame(-1, ResponseMessage::Event(event))
}
