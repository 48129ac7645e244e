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
//!
//! This module only builds requests; a connection runs them
//! (`Connection::execute`, in `connection/execute.rs`), and the session runs
//! them with a plan, retries and timeouts (`session/request.rs`).

use std::sync::Arc;

use shardwise_protocol::request::{self, Execute, Query, Request, StatementKind};
use shardwise_protocol::token::Token;
use shardwise_protocol::types::ser::DynValues;
use shardwise_protocol::types::ser::{InMarkerOrder, SerializeValues};
use shardwise_protocol::types::ColumnSpec;
use shardwise_protocol::EncodeError;

pub use crate::params::Params;
use crate::statement::{Batch, BatchStatement, PreparedStatement, Statement, StatementOptions};

/// What receives the request an [`Executable`] builds, for the length of
/// one synchronous call.
pub trait RequestVisitor {
    /// What the visit returns.
    type Output;
    /// Called with the request.
    fn visit<R: Request>(self, request: &R) -> Self::Output;
}

/// The result columns one request was built against, noted while it is
/// written (`Executable::with_request_noting`). A lock without allocation,
/// held only to swap one pointer.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct SentSpecs(std::sync::Mutex<Option<Arc<[ColumnSpec]>>>);

impl SentSpecs {
    fn note(&self, specs: Option<&Arc<[ColumnSpec]>>) {
        // A poisoned lock holds a pointer all the same.
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = specs.cloned();
    }

    /// The columns last noted, taken out.
    pub(crate) fn take(&self) -> Option<Arc<[ColumnSpec]>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }
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

    /// [`Executable::with_request`], noting in `sent` the result columns
    /// the request was built against: the ones a result that skips its
    /// metadata is read with. (Taken after the answer came, they may be
    /// another request's: a table altered meanwhile.)
    #[doc(hidden)]
    fn with_request_noting<R: RequestVisitor>(
        &self,
        values: &V,
        params: Params<'_>,
        visitor: R,
        _sent: &SentSpecs,
    ) -> Result<R::Output, EncodeError> {
        self.with_request(values, params, visitor)
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

    /// The unprepared statement to prepare before it runs with `values`:
    /// one that carries values, as the official driver does, so that they
    /// are checked against the markers' types, bound by name where named,
    /// and the request routed by its key (the session caches what it
    /// prepared, so this is one lookup after the first time).
    fn to_prepare<'s>(&'s self, _values: &'s V) -> Option<(&'s Statement, &'s (dyn DynValues + Sync))> {
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

/// Values matched to bind markers by name cannot go with a statement whose
/// markers are unknown (they would be bound in field order).
fn positional<V: SerializeValues + ?Sized>(values: &V) -> Result<(), EncodeError> {
    if values.by_name() {
        return Err(EncodeError::InvalidValue {
            what: "bind values",
            reason: "values matched to the markers by name need a prepared statement (Session::prepare, Session::prepare_batch)",
        });
    }
    Ok(())
}

/// An unprepared statement that carries values is prepared by the session
/// first ([`Executable::to_prepare`]); sent as it is (on a chosen
/// connection, `Connection::execute`), its values go positionally (its
/// markers' names and types are unknown), and values matched by name are
/// refused, never bound in field order.
impl<V: SerializeValues + Sync> Executable<V> for Statement {
    fn options(&self) -> &StatementOptions {
        self.options()
    }
    fn to_prepare<'s>(&'s self, values: &'s V) -> Option<(&'s Statement, &'s (dyn DynValues + Sync))> {
        (!self.is_sent_as_text() && values.count() > 0).then_some((self, values))
    }
    fn with_request<R: RequestVisitor>(
        &self,
        values: &V,
        params: Params<'_>,
        visitor: R,
    ) -> Result<R::Output, EncodeError> {
        positional(values)?;
        Ok(visitor.visit(&Query { query: self.text(), params: params.query(values) }))
    }
}

impl PreparedStatement {
    /// The token of the partition `values` bind (as the official
    /// `PreparedStatement::calculate_token`): the values taken in the bind
    /// markers' order, so a struct matched to them by name gives the token
    /// its key has. `None` when the statement binds no whole key, a key
    /// value is null, or the table's partitioner is not supported.
    pub fn calculate_token<V: SerializeValues + ?Sized>(&self, values: &V) -> Option<Token> {
        prepared_route(self, values).map(|route| route.token)
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
        self.build(values, params, visitor, None)
    }
    fn with_request_noting<R: RequestVisitor>(
        &self,
        values: &V,
        params: Params<'_>,
        visitor: R,
        sent: &SentSpecs,
    ) -> Result<R::Output, EncodeError> {
        self.build(values, params, visitor, Some(sent))
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

impl PreparedStatement {
    /// The EXECUTE request of one attempt, its result columns noted in
    /// `sent` from the same snapshot of the result shape.
    fn build<V: SerializeValues, R: RequestVisitor>(
        &self,
        values: &V,
        params: Params<'_>,
        visitor: R,
        sent: Option<&SentSpecs>,
    ) -> Result<R::Output, EncodeError> {
        values.check_types(self.bind_specs())?;
        // One snapshot of the result shape for the whole request: the size
        // and the bytes written must agree even if it changes meanwhile.
        self.with_shape(|shape| {
            if let Some(sent) = sent {
                sent.note(shape.specs.as_ref());
            }
            // Values matched to the markers by name go in the markers' order.
            let mut query = params.query(InMarkerOrder::new(values, self.bind_specs()));
            // The result columns are cached: ask the server not to resend
            // them, but only where a metadata id tells a stale cache (v5,
            // or ScyllaDB's metadata-id extension): without one, a table
            // altered meanwhile would have its rows read with the old
            // columns. Metadata that is sent and has not changed is
            // compared in place and costs no allocation
            // (`ResultMetadata::decode_known`).
            query.skip_metadata = shape.specs.is_some() && shape.metadata_id.is_some();
            Ok(visitor.visit(&Execute {
                id: self.id(),
                result_metadata_id: shape.metadata_id.as_deref(),
                params: query,
            }))
        })
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
    fn with_request_noting<R: RequestVisitor>(
        &self,
        values: &V,
        params: Params<'_>,
        visitor: R,
        sent: &SentSpecs,
    ) -> Result<R::Output, EncodeError> {
        (**self).with_request_noting(values, params, visitor, sent)
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
    fn to_prepare<'s>(&'s self, values: &'s V) -> Option<(&'s Statement, &'s (dyn DynValues + Sync))> {
        (**self).to_prepare(values)
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
    fn check<V: SerializeValues>(&self, values: &V) -> Result<(), EncodeError> {
        positional(values)
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

impl BatchEntry for BatchStatement {
    fn kind(&self) -> StatementKind<'_> {
        match self {
            BatchStatement::Query(s) => s.kind(),
            BatchStatement::PreparedStatement(p) => p.kind(),
        }
    }
    fn check<V: SerializeValues>(&self, values: &V) -> Result<(), EncodeError> {
        match self {
            BatchStatement::Query(s) => s.check(values),
            BatchStatement::PreparedStatement(p) => p.check(values),
        }
    }
    fn prepared(&self) -> Option<&PreparedStatement> {
        match self {
            BatchStatement::Query(_) => None,
            BatchStatement::PreparedStatement(p) => Some(p),
        }
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
                let statements = ($(request::BatchStatement {
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

/// A batch over a `Vec` of statements (built at run time), with one value
/// list per statement: a `Vec`, an array or a slice of them, owned or
/// borrowed. The list of requests is built in one `Vec`, the only
/// allocation of the batch's request.
macro_rules! vec_batch {
    ($([$($gen:tt)*] $values:ty),*) => {$(
        impl<$($gen)* S: BatchEntry, V: SerializeValues> Executable<$values> for Batch<Vec<S>> {
            fn options(&self) -> &StatementOptions {
                self.options()
            }
            fn with_request<R: RequestVisitor>(
                &self,
                values: &$values,
                params: Params<'_>,
                visitor: R,
            ) -> Result<R::Output, EncodeError> {
                vec_batch_request(self, &values[..], params, visitor)
            }
            fn prepared_with_id(&self, id: &[u8]) -> Option<&PreparedStatement> {
                self.statements.iter().find_map(|s| s.prepared().filter(|p| p.id() == id))
            }
            fn route(&self, values: &$values) -> Option<Route<'_>> {
                prepared_route(self.statements.first()?.prepared()?, values.first()?)
            }
        }
    )*};
}
vec_batch!([] Vec<V>, ['v,] &'v Vec<V>, ['v,] &'v [V], [const N: usize,] [V; N]);

fn vec_batch_request<S: BatchEntry, V: SerializeValues, R: RequestVisitor>(
    batch: &Batch<Vec<S>>,
    values: &[V],
    params: Params<'_>,
    visitor: R,
) -> Result<R::Output, EncodeError> {
    if values.len() != batch.statements.len() {
        return Err(EncodeError::InvalidValue { what: "batch", reason: "one value list per statement is needed" });
    }
    let mut statements = Vec::with_capacity(values.len());
    for (s, v) in batch.statements.iter().zip(values) {
        s.check(v)?;
        statements.push(request::BatchStatement { kind: s.kind(), values: s.in_marker_order(v) });
    }
    Ok(visitor.visit(&batch_request(batch.kind, statements, params)))
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
