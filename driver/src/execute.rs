//! How each kind of statement becomes a protocol request: the
//! [`Executable`] trait, implemented for [`Statement`], [`PreparedStatement`]
//! and [`Batch`]es of them. Requests borrow the statement and the values,
//! so building one allocates nothing (batches over a `Vec` excepted).
//!
//! A request is handed to a [`RequestVisitor`] instead of being returned:
//! its type is the statement's business, and a value of a type chosen by
//! the statement (say an associated type with a lifetime) that an `async fn`
//! holds across an `.await` makes the future `Send` only for `'static`
//! values: rustc must then prove the type `Send` for every lifetime the
//! values could have, and cannot (rust-lang/rust#110338), so
//! `tokio::spawn(async move { session.execute(&stmt, (1, "text")).await })`
//! would not compile. With a visitor the request lives only inside a
//! synchronous call, and the connection builds it again on each try to
//! write it (`Connection::send_with`), so no await ever sees it.

use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::Flags;
use shardwise_protocol::request::{self, BatchStatement, Execute, Query, QueryParameters, Request, StatementKind};
use shardwise_protocol::response::{ErrorKind, Response, ResponseMessage, ResultMessage};
use shardwise_protocol::tablets::{TabletRoute, PAYLOAD_KEY};
use shardwise_protocol::token::Token;
use shardwise_protocol::types::ser::{InMarkerOrder, SerializeValues};
use shardwise_protocol::types::ColumnSpec;
use shardwise_protocol::EncodeError;

use crate::connection::{Connection, Deadline, TryWrite};
use crate::error::ExecutionError;
use crate::result::{Extras, QueryResult};
use crate::statement::{Batch, PreparedStatement, ResultShape, Statement, StatementOptions};

/// Per-attempt parameters resolved from the statement and session defaults.
#[derive(Debug, Clone, Copy)]
pub struct Params<'a> {
    /// Consistency level.
    pub consistency: Consistency,
    /// Serial consistency.
    pub serial_consistency: Option<Consistency>,
    /// Page size.
    pub page_size: Option<i32>,
    /// Paging state of the page to fetch.
    pub paging_state: Option<&'a [u8]>,
    /// Client timestamp.
    pub timestamp: Option<i64>,
}

impl<'a> Params<'a> {
    /// Parameters at `consistency`, with nothing else set.
    pub fn new(consistency: Consistency) -> Self {
        Params { consistency, serial_consistency: None, page_size: None, paging_state: None, timestamp: None }
    }

    fn query<V>(&self, values: V) -> QueryParameters<'a, V> {
        QueryParameters {
            page_size: self.page_size,
            paging_state: self.paging_state,
            serial_consistency: self.serial_consistency,
            timestamp: self.timestamp,
            ..QueryParameters::new(self.consistency, values)
        }
    }
}

/// What receives the request an [`Executable`] builds, for the length of
/// one synchronous call.
pub trait RequestVisitor {
    /// What the visit returns.
    type Output;
    /// Called with the request.
    fn visit<R: Request>(self, request: &R) -> Self::Output;
}

/// Something `Session::execute` can run with values `V`.
pub trait Executable<V> {
    /// The statement's options.
    fn options(&self) -> &StatementOptions;

    /// Builds the request of one attempt, checking the values against the
    /// bind markers when they are known, and hands it to `visitor`.
    fn with_request<R: RequestVisitor>(
        &self,
        values: &V,
        params: Params<'_>,
        visitor: R,
    ) -> Result<R::Output, EncodeError>;

    /// Result columns known in advance (prepared statements), for results
    /// that skip their metadata.
    fn result_specs(&self) -> Option<Arc<[ColumnSpec]>> {
        None
    }

    /// The prepared statement with the given id, to re-prepare it after the
    /// server forgot it.
    fn prepared_with_id(&self, _id: &[u8]) -> Option<&PreparedStatement> {
        None
    }

    /// The prepared statement whose result metadata the server may update.
    fn as_prepared(&self) -> Option<&PreparedStatement> {
        None
    }

    /// Keyspace, table and partition-key token of this execution, for
    /// token-aware routing (prepared statements whose key is bound).
    fn route(&self, _values: &V) -> Option<Route<'_>> {
        None
    }
}

/// Where an execution goes: its table and its partition key's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<'a> {
    /// The keyspace.
    pub keyspace: &'a str,
    /// The table.
    pub table: &'a str,
    /// The partition key's token.
    pub token: Token,
    /// A lightweight transaction: its primary replica first, always.
    pub lwt: bool,
}

/// Table and token of a prepared statement bound with `values`.
fn prepared_route<'a, V: SerializeValues + ?Sized>(p: &'a PreparedStatement, values: &V) -> Option<Route<'a>> {
    let spec = p.bind_specs().first()?;
    let token =
        crate::routing::partition_token(p.pk_indexes(), &InMarkerOrder::new(values, p.bind_specs()), p.partitioner()?)?;
    Some(Route { keyspace: spec.keyspace.as_str(), table: spec.table.as_str(), token, lwt: p.is_lwt() })
}

impl<V: SerializeValues> Executable<V> for Statement {
    fn options(&self) -> &StatementOptions {
        self.options()
    }
    fn with_request<R: RequestVisitor>(
        &self,
        values: &V,
        params: Params<'_>,
        visitor: R,
    ) -> Result<R::Output, EncodeError> {
        Ok(visitor.visit(&Query { query: self.text(), params: params.query(values) }))
    }
}

impl<V: SerializeValues> Executable<V> for PreparedStatement {
    fn options(&self) -> &StatementOptions {
        self.options()
    }
    fn with_request<R: RequestVisitor>(
        &self,
        values: &V,
        params: Params<'_>,
        visitor: R,
    ) -> Result<R::Output, EncodeError> {
        values.check_types(self.bind_specs())?;
        // One snapshot of the result shape for the whole request: the size
        // and the bytes written must agree even if it changes meanwhile.
        self.with_shape(|shape| {
            // Values matched to the markers by name go in the markers' order.
            let mut query = params.query(InMarkerOrder::new(values, self.bind_specs()));
            // The result columns are cached: ask the server not to resend them.
            query.skip_metadata = shape.specs.is_some();
            Ok(visitor.visit(&Execute {
                id: self.id(),
                result_metadata_id: shape.metadata_id.as_deref(),
                params: query,
            }))
        })
    }
    fn result_specs(&self) -> Option<Arc<[ColumnSpec]>> {
        PreparedStatement::result_specs(self)
    }
    fn prepared_with_id(&self, id: &[u8]) -> Option<&PreparedStatement> {
        (self.id() == id).then_some(self)
    }
    fn as_prepared(&self) -> Option<&PreparedStatement> {
        Some(self)
    }
    fn route(&self, values: &V) -> Option<Route<'_>> {
        prepared_route(self, values)
    }
}

impl<V, T: Executable<V> + ?Sized> Executable<V> for &T {
    fn options(&self) -> &StatementOptions {
        (**self).options()
    }
    fn with_request<R: RequestVisitor>(
        &self,
        values: &V,
        params: Params<'_>,
        visitor: R,
    ) -> Result<R::Output, EncodeError> {
        (**self).with_request(values, params, visitor)
    }
    fn result_specs(&self) -> Option<Arc<[ColumnSpec]>> {
        (**self).result_specs()
    }
    fn prepared_with_id(&self, id: &[u8]) -> Option<&PreparedStatement> {
        (**self).prepared_with_id(id)
    }
    fn as_prepared(&self) -> Option<&PreparedStatement> {
        (**self).as_prepared()
    }
    fn route(&self, values: &V) -> Option<Route<'_>> {
        (**self).route(values)
    }
}

/// A statement that can be part of a batch.
pub trait BatchEntry {
    /// How the statement is sent in the batch.
    fn kind(&self) -> StatementKind<'_>;
    /// Checks values against the bind markers, when known.
    fn check<V: SerializeValues>(&self, values: &V) -> Result<(), EncodeError>;
    /// The prepared statement, if this is one.
    fn prepared(&self) -> Option<&PreparedStatement>;
    /// `values` in the order of the bind markers, when known.
    fn in_marker_order<'v, V: SerializeValues>(&'v self, values: &'v V) -> InMarkerOrder<'v, V> {
        InMarkerOrder::new(values, self.prepared().map_or(&[], |p| p.bind_specs()))
    }
}

impl BatchEntry for Statement {
    fn kind(&self) -> StatementKind<'_> {
        StatementKind::Query(self.text())
    }
    fn check<V: SerializeValues>(&self, _: &V) -> Result<(), EncodeError> {
        Ok(())
    }
    fn prepared(&self) -> Option<&PreparedStatement> {
        None
    }
}

impl BatchEntry for PreparedStatement {
    fn kind(&self) -> StatementKind<'_> {
        StatementKind::Prepared(self.id())
    }
    fn check<V: SerializeValues>(&self, values: &V) -> Result<(), EncodeError> {
        values.check_types(self.bind_specs())
    }
    fn prepared(&self) -> Option<&PreparedStatement> {
        Some(self)
    }
}

impl<T: BatchEntry + ?Sized> BatchEntry for &T {
    fn kind(&self) -> StatementKind<'_> {
        (**self).kind()
    }
    fn check<V: SerializeValues>(&self, values: &V) -> Result<(), EncodeError> {
        (**self).check(values)
    }
    fn prepared(&self) -> Option<&PreparedStatement> {
        (**self).prepared()
    }
}

fn batch_request<'a, S>(kind: request::BatchType, statements: S, params: Params<'a>) -> request::Batch<'a, S> {
    request::Batch {
        kind,
        statements,
        consistency: params.consistency,
        serial_consistency: params.serial_consistency,
        timestamp: params.timestamp,
        keyspace: None,
        now_in_seconds: None,
    }
}

macro_rules! tuple_batch {
    ($($s:ident $v:ident . $i:tt),+) => {
        impl<$($s: BatchEntry, $v: SerializeValues),+> Executable<($($v,)+)> for Batch<($($s,)+)> {
            fn options(&self) -> &StatementOptions {
                self.options()
            }
            fn with_request<R: RequestVisitor>(
                &self,
                values: &($($v,)+),
                params: Params<'_>,
                visitor: R,
            ) -> Result<R::Output, EncodeError> {
                $(self.statements.$i.check(&values.$i)?;)+
                let statements = ($(BatchStatement {
                    kind: self.statements.$i.kind(),
                    values: self.statements.$i.in_marker_order(&values.$i),
                },)+);
                Ok(visitor.visit(&batch_request(self.kind, statements, params)))
            }
            fn prepared_with_id(&self, id: &[u8]) -> Option<&PreparedStatement> {
                None$(.or_else(|| self.statements.$i.prepared().filter(|p| p.id() == id)))+
            }
            fn route(&self, values: &($($v,)+)) -> Option<Route<'_>> {
                // A batch goes where its first statement's partition lives.
                prepared_route(self.statements.0.prepared()?, &values.0)
            }
        }
    };
}
tuple_batch!(S0 V0.0);
tuple_batch!(S0 V0.0, S1 V1.1);
tuple_batch!(S0 V0.0, S1 V1.1, S2 V2.2);
tuple_batch!(S0 V0.0, S1 V1.1, S2 V2.2, S3 V3.3);
tuple_batch!(S0 V0.0, S1 V1.1, S2 V2.2, S3 V3.3, S4 V4.4);
tuple_batch!(S0 V0.0, S1 V1.1, S2 V2.2, S3 V3.3, S4 V4.4, S5 V5.5);
tuple_batch!(S0 V0.0, S1 V1.1, S2 V2.2, S3 V3.3, S4 V4.4, S5 V5.5, S6 V6.6);
tuple_batch!(S0 V0.0, S1 V1.1, S2 V2.2, S3 V3.3, S4 V4.4, S5 V5.5, S6 V6.6, S7 V7.7);

/// A batch over a slice of statements with one value list per statement
/// (the list of requests is built in a `Vec`).
impl<S: BatchEntry, V: SerializeValues> Executable<Vec<V>> for Batch<Vec<S>> {
    fn options(&self) -> &StatementOptions {
        self.options()
    }
    fn with_request<R: RequestVisitor>(
        &self,
        values: &Vec<V>,
        params: Params<'_>,
        visitor: R,
    ) -> Result<R::Output, EncodeError> {
        if values.len() != self.statements.len() {
            return Err(EncodeError::InvalidValue { what: "batch", reason: "one value list per statement is needed" });
        }
        let mut statements = Vec::with_capacity(values.len());
        for (s, v) in self.statements.iter().zip(values) {
            s.check(v)?;
            statements.push(BatchStatement { kind: s.kind(), values: s.in_marker_order(v) });
        }
        Ok(visitor.visit(&batch_request(self.kind, statements, params)))
    }
    fn prepared_with_id(&self, id: &[u8]) -> Option<&PreparedStatement> {
        self.statements.iter().find_map(|s| s.prepared().filter(|p| p.id() == id))
    }
    fn route(&self, values: &Vec<V>) -> Option<Route<'_>> {
        prepared_route(self.statements.first()?.prepared()?, values.first()?)
    }
}

/// The `tablets-routing-v1` payload, when present and valid (an invalid
/// one is ignored: the request itself succeeded).
fn tablet_of(payload: &[(String, Option<Bytes>)]) -> Option<TabletRoute> {
    let (_, value) = payload.iter().find(|(k, _)| k == PAYLOAD_KEY)?;
    match TabletRoute::decode(value.as_deref()?) {
        Ok(route) => Some(route),
        Err(error) => {
            tracing::debug!(%error, "ignoring an invalid tablets-routing-v1 payload");
            None
        }
    }
}

impl RequestVisitor for TryWrite<'_, '_> {
    type Output = Poll<Result<(), ExecutionError>>;

    fn visit<R: Request>(self, request: &R) -> Self::Output {
        self.write(request)
    }
}

impl Connection {
    /// Runs a statement on this connection (no retries, no failover): the
    /// request is written in place, the answer decoded, `METADATA_CHANGED`
    /// followed and `UNPREPARED` answered by re-preparing here. For callers
    /// that choose their own connection, e.g. per-shard workers running
    /// their own current-thread runtime; rows come back as views over the
    /// response buffer.
    pub async fn execute<E: Executable<V>, V>(
        &self,
        statement: &E,
        values: &V,
        params: Params<'_>,
    ) -> Result<QueryResult, ExecutionError> {
        execute_observed(self, statement, values, params, None, |_| {}).await
    }

    /// Prepares a statement on this connection's node.
    pub async fn prepare(&self, text: &str) -> Result<PreparedStatement, ExecutionError> {
        prepare_until(self, text, None).await
    }
}

/// Prepares `text` on `conn`, waiting until `deadline` at most.
async fn prepare_until(
    conn: &Connection,
    text: &str,
    deadline: Option<&Deadline>,
) -> Result<PreparedStatement, ExecutionError> {
    let prepare = request::Prepare { query: text, keyspace: None };
    let envelope = conn.send_with(0, deadline, |write| Ok(write.write(&prepare))).await?;
    match Response::from_envelope(envelope)?.message {
        ResponseMessage::Result(ResultMessage::Prepared(p)) => Ok(PreparedStatement::new(text, *p, conn.lwt_mask())),
        ResponseMessage::Error(e) => Err(e.into()),
        _ => Err(ExecutionError::UnexpectedResponse("PREPARE not answered with Prepared")),
    }
}

/// Prepares `p` again on `conn` (the node answered UNPREPARED), and takes
/// the result shape it answers with.
async fn reprepare(
    conn: &Connection,
    p: &PreparedStatement,
    deadline: Option<&Deadline>,
) -> Result<(), ExecutionError> {
    tracing::debug!(addr = %conn.addr(), text = p.text(), "re-preparing");
    let fresh = prepare_until(conn, p.text(), deadline).await?;
    if fresh.id() != p.id() {
        return Err(ExecutionError::UnexpectedResponse("re-prepare returned another statement id"));
    }
    p.set_shape(ResultShape { metadata_id: fresh.with_shape(|s| s.metadata_id.clone()), specs: fresh.result_specs() });
    Ok(())
}

/// Runs `statement` on one chosen connection: builds the request in place,
/// decodes the answer, follows `METADATA_CHANGED` and re-prepares on
/// `UNPREPARED`, calling `on_reprepared` with the prepared statement once it
/// was prepared again (before the retry), all of it until `deadline`. This is the allocation-free path
/// `Session::execute` uses for each attempt (which reports a re-prepare as
/// [`crate::SessionEvent::StatementReprepared`]), and `Connection::execute`
/// for callers that pick their own connection (the CDC engine's per-shard
/// workers).
pub(crate) async fn execute_observed<E: Executable<V>, V>(
    conn: &Connection,
    statement: &E,
    values: &V,
    params: Params<'_>,
    deadline: Option<&Deadline>,
    on_reprepared: impl FnOnce(&PreparedStatement),
) -> Result<QueryResult, ExecutionError> {
    let mut on_reprepared = Some(on_reprepared);
    let flags = if statement.options().tracing { Flags::TRACING } else { 0 };
    let mut reprepared = false;
    loop {
        // Only references to the statement and the values are held across
        // the await; the request is built inside the connection's write.
        let envelope = conn.send_with(flags, deadline, |write| statement.with_request(values, params, write)).await?;
        // The answer lives in this block only, so that the rare re-prepare
        // below does not keep it in every request's future.
        let forgotten = {
            let response = Response::from_envelope(envelope)?;
            match response.message {
                ResponseMessage::Result(result) => {
                    if let (ResultMessage::Rows(rows), Some(p)) = (&result, statement.as_prepared()) {
                        if let Some(id) = &rows.metadata.new_metadata_id {
                            // The table changed: the server sent the new columns and their id.
                            p.set_shape(ResultShape {
                                metadata_id: Some(Bytes::copy_from_slice(id)),
                                specs: rows.metadata.specs.clone().map(Arc::from),
                            });
                        }
                    }
                    // Only rows read the specs: a write's answer takes no
                    // reference to them.
                    let specs = match &result {
                        ResultMessage::Rows(_) => statement.result_specs(),
                        _ => None,
                    };
                    return Ok(QueryResult {
                        specs,
                        result,
                        extras: Extras::of(response.tracing_id, response.warnings, tablet_of(&response.custom_payload)),
                    });
                }
                ResponseMessage::Error(e) => {
                    let forgotten = match &e.kind {
                        ErrorKind::Unprepared { id } => statement.prepared_with_id(id).filter(|_| !reprepared),
                        _ => None,
                    };
                    match forgotten {
                        Some(p) => p,
                        None => return Err(e.into()),
                    }
                }
                _ => return Err(ExecutionError::UnexpectedResponse("request not answered with RESULT or ERROR")),
            }
        };
        // The node forgot the statement (restart, eviction): prepare it again
        // there and retry; retry policies do not count this. Boxed: a rare
        // path that would otherwise enlarge every request's future.
        Box::pin(reprepare(conn, forgotten, deadline)).await?;
        if let Some(report) = on_reprepared.take() {
            report(forgotten);
        }
        reprepared = true;
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use shardwise_protocol::response::Prepared;
    use shardwise_protocol::rows::{PreparedMetadata, ResultMetadata};
    use shardwise_protocol::token::Partitioner;
    use shardwise_protocol::types::{ColumnSpec, ColumnType};

    use super::*;

    fn prepared(table: &str) -> PreparedStatement {
        let spec = ColumnSpec {
            keyspace: "ks".into(),
            table: table.into(),
            name: "cdc$stream_id".into(),
            typ: ColumnType::Blob,
        };
        let metadata = PreparedMetadata { flags: 0, pk_indexes: vec![0], specs: vec![spec] };
        let result_metadata =
            ResultMetadata { columns_count: 0, paging_state: None, new_metadata_id: None, specs: None };
        PreparedStatement::new(
            "SELECT * FROM ks.t WHERE \"cdc$stream_id\" = ?",
            Prepared { id: Bytes::from_static(b"id"), result_metadata_id: None, metadata, result_metadata },
            0,
        )
    }

    /// Regression: the CDC partitioner used to be chosen by the table's name
    /// (`…_scylla_cdc_log`); a log table is recognised by its partitioner,
    /// which the session learns from `system_schema.scylla_tables`.
    #[test]
    fn the_route_uses_the_statements_partitioner_not_the_table_name() {
        let stream_id: [u8; 16] = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8];
        let values = (&stream_id[..],);
        let murmur3 = crate::routing::partition_token(&[0], &values, Partitioner::Murmur3).expect("token");
        let cdc = crate::routing::partition_token(&[0], &values, Partitioner::Cdc).expect("token");
        assert_ne!(murmur3, cdc);

        let named_like_a_log = prepared("t_scylla_cdc_log");
        assert_eq!(named_like_a_log.partitioner(), Some(Partitioner::Murmur3), "Murmur3 until told otherwise");
        assert_eq!(
            prepared_route(&named_like_a_log, &values),
            Some(Route { keyspace: "ks", table: "t_scylla_cdc_log", token: murmur3, lwt: false })
        );

        let log = prepared("anything");
        log.set_partitioner(Some(Partitioner::Cdc));
        assert_eq!(
            prepared_route(&log, &values),
            Some(Route { keyspace: "ks", table: "anything", token: cdc, lwt: false })
        );
        assert_eq!(log.clone().partitioner(), Some(Partitioner::Cdc), "shared by every handle");

        log.set_partitioner(None);
        assert_eq!(prepared_route(&log, &values), None, "an unsupported partitioner is not routed");
    }
}
