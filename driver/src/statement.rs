//! Statements: unprepared [`Statement`]s, [`PreparedStatement`]s and
//! [`Batch`]es, all executed by `Session::execute`. Per-statement options
//! ([`StatementOptions`]) override the session defaults.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::request::BatchType;
use shardwise_protocol::response::Prepared;
use shardwise_protocol::token::Partitioner;
use shardwise_protocol::types::ColumnSpec;

use crate::observer::RequestObserver;
use crate::replaced::Replaceable;

/// Options of one statement; `None` means "the session default".
#[derive(Debug, Clone, Default)]
pub struct StatementOptions {
    /// Consistency level.
    pub consistency: Option<Consistency>,
    /// Serial consistency for conditional statements: `Some(None)` sends
    /// none, whatever the profile and the session say.
    pub serial_consistency: Option<Option<Consistency>>,
    /// Rows per page.
    pub page_size: Option<i32>,
    /// Client-side timestamp (µs); `None` lets the server assign it.
    pub timestamp: Option<i64>,
    /// Whether the statement can safely be applied twice (enables
    /// speculative execution and retries after a lost answer).
    pub idempotent: bool,
    /// Request timeout: bounds the whole request, retries and speculative
    /// attempts included (see [`SessionConfig::request_timeout`](crate::SessionConfig::request_timeout)).
    pub timeout: Option<Duration>,
    /// Timeout of each attempt (see
    /// [`SessionConfig::attempt_timeout`](crate::SessionConfig::attempt_timeout)).
    pub attempt_timeout: Option<Duration>,
    /// Ask the server to trace the request.
    pub tracing: bool,
    /// The execution profile: settings this statement does not set itself.
    pub profile: Option<crate::profile::ExecutionProfileHandle>,
    /// The observer of this statement's requests (the official driver's
    /// history listener), instead of its profile's or the session's.
    pub request_observer: Option<Arc<dyn RequestObserver>>,
}

/// Equal when every option is, observers by identity (the same object).
impl PartialEq for StatementOptions {
    fn eq(&self, other: &Self) -> bool {
        let same_observer = match (&self.request_observer, &other.request_observer) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same_observer
            && self.consistency == other.consistency
            && self.serial_consistency == other.serial_consistency
            && self.page_size == other.page_size
            && self.timestamp == other.timestamp
            && self.idempotent == other.idempotent
            && self.timeout == other.timeout
            && self.attempt_timeout == other.attempt_timeout
            && self.tracing == other.tracing
            && self.profile == other.profile
    }
}

impl Eq for StatementOptions {}

macro_rules! options_setters {
    () => {
        /// Sets the consistency level.
        pub fn with_consistency(mut self, c: Consistency) -> Self {
            self.options.consistency = Some(c);
            self
        }
        /// Sets the serial consistency level; `None` sends none.
        pub fn with_serial_consistency(mut self, c: impl Into<Option<Consistency>>) -> Self {
            self.options.serial_consistency = Some(c.into());
            self
        }
        /// Sets the page size.
        pub fn with_page_size(mut self, rows: i32) -> Self {
            self.options.page_size = Some(rows);
            self
        }
        /// Sets a client-side timestamp in microseconds.
        pub fn with_timestamp(mut self, micros: i64) -> Self {
            self.options.timestamp = Some(micros);
            self
        }
        /// Marks the statement idempotent.
        pub fn with_idempotent(mut self, idempotent: bool) -> Self {
            self.options.idempotent = idempotent;
            self
        }
        /// Sets the request timeout (the whole request, retries included).
        pub fn with_timeout(mut self, timeout: Duration) -> Self {
            self.options.timeout = Some(timeout);
            self
        }
        /// Sets the timeout of each attempt; an idempotent statement whose
        /// attempt timed out is retried on the next node.
        pub fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
            self.options.attempt_timeout = Some(timeout);
            self
        }
        /// Asks the server to trace the request.
        pub fn with_tracing(mut self, tracing: bool) -> Self {
            self.options.tracing = tracing;
            self
        }
        /// The execution profile for what this statement does not set: a
        /// profile (`Arc<ExecutionProfile>` or `ExecutionProfile`), or an
        /// [`ExecutionProfileHandle`](crate::profile::ExecutionProfileHandle)
        /// shared with other statements and re-pointable at run time.
        pub fn with_profile(mut self, profile: impl Into<crate::profile::ExecutionProfileHandle>) -> Self {
            self.options.profile = Some(profile.into());
            self
        }
        /// Tells `observer` of this statement's requests and each of their
        /// attempts, instead of its profile's or the session's observer: a
        /// [`HistoryCollector`](crate::history::HistoryCollector) keeps
        /// them (the official driver's `set_history_listener`).
        pub fn with_request_observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
            self.options.request_observer = Some(observer);
            self
        }
        /// The statement's options.
        pub fn options(&self) -> &StatementOptions {
            &self.options
        }
        /// The statement's options, mutably.
        pub fn options_mut(&mut self) -> &mut StatementOptions {
            &mut self.options
        }
    };
}

/// An unprepared statement: its text is sent with every execution, or,
/// when it carries values, the session prepares it first (once: prepared
/// statements are cached) and runs the prepared statement, as the official
/// driver does, unless [`Statement::sent_as_text`] says otherwise.
///
/// ```
/// # use shardwise::statement::Statement;
/// # use shardwise::protocol::consistency::Consistency;
/// let s = Statement::new("SELECT * FROM ks.t WHERE pk = ?").with_consistency(Consistency::One);
/// assert_eq!(s.text(), "SELECT * FROM ks.t WHERE pk = ?");
/// ```
#[derive(Debug, Clone)]
pub struct Statement {
    text: Arc<str>,
    options: StatementOptions,
    as_text: bool,
}

impl Statement {
    /// A statement with default options.
    pub fn new(text: impl Into<Arc<str>>) -> Self {
        Statement { text: text.into(), options: StatementOptions::default(), as_text: false }
    }
    /// The CQL text.
    pub fn text(&self) -> &str {
        &self.text
    }
    /// Sent as text even with values, never prepared by the session: the
    /// values go untyped and positionally (values matched by name are
    /// refused), and the request is not routed by its key. For a statement
    /// run once, where a PREPARE on every node costs more than it saves.
    pub fn sent_as_text(mut self) -> Self {
        self.as_text = true;
        self
    }
    /// Whether [`Statement::sent_as_text`] was asked.
    pub fn is_sent_as_text(&self) -> bool {
        self.as_text
    }
    options_setters!();
}

impl From<&str> for Statement {
    fn from(s: &str) -> Self {
        Statement::new(s)
    }
}

/// For text made at run time: `session.prepare(format!(…))`.
impl From<String> for Statement {
    fn from(s: String) -> Self {
        Statement::new(s)
    }
}

/// What a prepared statement's result looks like; replaced as a whole when
/// the server reports a schema change (`METADATA_CHANGED`).
#[derive(Debug)]
pub(crate) struct ResultShape {
    /// v5 result metadata id.
    pub(crate) metadata_id: Option<Bytes>,
    /// Result column specs; `None` when the statement returns no rows.
    pub(crate) specs: Option<Arc<[ColumnSpec]>>,
}

#[derive(Debug)]
pub(crate) struct PreparedInner {
    pub(crate) text: String,
    pub(crate) id: Bytes,
    pub(crate) bind_specs: Vec<ColumnSpec>,
    pub(crate) pk_indexes: Vec<u16>,
    /// The result shape: as prepared, read in place, with no shared word
    /// written (no lock, no reference count), until it changes (a
    /// re-prepare, or an answer with new result metadata).
    pub(crate) shape: Replaceable<ResultShape>,
    /// The table's partitioner ([`encode_partitioner`]), as the session
    /// learned it; Murmur3 until then.
    pub(crate) partitioner: AtomicU8,
    /// Scylla marked it a lightweight transaction.
    pub(crate) lwt: bool,
    /// The tracing ids of its PREPAREs, one per node, when it was prepared
    /// with tracing on.
    pub(crate) prepare_tracing_ids: std::sync::OnceLock<Vec<uuid::Uuid>>,
}

fn encode_partitioner(p: Option<Partitioner>) -> u8 {
    match p {
        Some(Partitioner::Murmur3) => 0,
        Some(Partitioner::Cdc) => 1,
        None => 2,
    }
}

fn decode_partitioner(v: u8) -> Option<Partitioner> {
    match v {
        0 => Some(Partitioner::Murmur3),
        1 => Some(Partitioner::Cdc),
        _ => None,
    }
}

/// A statement prepared on the server: executed by id, with its bind
/// markers and result columns known (results skip their metadata).
/// Cloning is cheap.
#[derive(Debug, Clone)]
pub struct PreparedStatement {
    pub(crate) inner: Arc<PreparedInner>,
    options: StatementOptions,
}

impl PreparedStatement {
    /// `lwt_mask`: the LWT mark negotiated on the connection that prepared
    /// it (0: none).
    pub(crate) fn new(text: &str, prepared: Prepared, lwt_mask: u32) -> Self {
        let lwt = prepared.metadata.is_lwt(lwt_mask);
        let specs = prepared.result_metadata.specs.filter(|s| !s.is_empty()).map(Arc::from);
        PreparedStatement {
            inner: Arc::new(PreparedInner {
                text: text.to_owned(),
                id: prepared.id,
                bind_specs: prepared.metadata.specs,
                pk_indexes: prepared.metadata.pk_indexes,
                shape: Replaceable::new(ResultShape { metadata_id: prepared.result_metadata_id, specs }),
                partitioner: AtomicU8::new(encode_partitioner(Some(Partitioner::Murmur3))),
                lwt,
                prepare_tracing_ids: std::sync::OnceLock::new(),
            }),
            options: StatementOptions::default(),
        }
    }

    /// The CQL text.
    pub fn text(&self) -> &str {
        &self.inner.text
    }
    /// The tracing ids of the PREPAREs that made it, one per node that
    /// answered, when the statement given to
    /// [`Session::prepare`](crate::Session::prepare) had tracing on (the
    /// official driver's `get_prepare_tracing_ids`); empty otherwise, and
    /// for a statement the session's cache answered without a PREPARE.
    pub fn prepare_tracing_ids(&self) -> &[uuid::Uuid] {
        self.inner.prepare_tracing_ids.get().map_or(&[], Vec::as_slice)
    }
    /// The server's statement id.
    pub fn id(&self) -> &[u8] {
        &self.inner.id
    }
    /// The bind markers.
    pub fn bind_specs(&self) -> &[ColumnSpec] {
        &self.inner.bind_specs
    }
    /// Bind-marker indexes of the partition key, in key order.
    pub fn pk_indexes(&self) -> &[u16] {
        &self.inner.pk_indexes
    }
    /// The partitioner of the statement's table, which turns its bound
    /// partition key into a token for routing: learned by
    /// `Session::prepare` from `system_schema.scylla_tables` where that
    /// table exists (CDC log tables use the CDC partitioner), Murmur3
    /// otherwise. `None` for a partitioner the driver does not implement:
    /// the statement is then not routed by token.
    pub fn partitioner(&self) -> Option<Partitioner> {
        decode_partitioner(self.inner.partitioner.load(Ordering::Relaxed))
    }
    /// Sets the partitioner of every handle to this prepared statement.
    pub(crate) fn set_partitioner(&self, p: Option<Partitioner>) {
        self.inner.partitioner.store(encode_partitioner(p), Ordering::Relaxed);
    }
    /// Whether the server marked it a lightweight transaction (Scylla's
    /// `SCYLLA_LWT_ADD_METADATA_MARK`). Such statements go to the primary
    /// replica first, so that concurrent Paxos rounds on one partition do
    /// not contend across coordinators.
    pub fn is_lwt(&self) -> bool {
        self.inner.lwt
    }
    /// The result columns, if the statement returns rows.
    pub fn result_specs(&self) -> Option<Arc<[ColumnSpec]>> {
        self.with_shape(|shape| shape.specs.clone())
    }
    /// `f` of the current result shape. Until the shape first changes, the
    /// one every request reads is the prepared one, in place: requests on
    /// different workers then share no written cache line here.
    pub(crate) fn with_shape<R>(&self, f: impl FnOnce(&ResultShape) -> R) -> R {
        self.inner.shape.with(f)
    }
    pub(crate) fn set_shape(&self, shape: ResultShape) {
        self.inner.shape.replace(shape);
    }
    /// Replaces the result shape with `f` of the current one, which no
    /// other request replaces meanwhile.
    pub(crate) fn update_shape(&self, f: impl FnOnce(&ResultShape) -> ResultShape) {
        self.inner.shape.update(f);
    }
    options_setters!();
}

/// A batch of statements applied together. `S` is a tuple, array, slice or
/// `Vec` of statements (`Statement`, `PreparedStatement`, [`BatchStatement`]
/// or references to them); the values passed to `execute` have the same
/// shape, one value list per statement, so a batch needs no boxing.
///
/// ```
/// # use shardwise::statement::{Batch, Statement};
/// let batch = Batch::logged((
///     Statement::new("INSERT INTO ks.t (pk, v) VALUES (?, ?)"),
///     Statement::new("DELETE FROM ks.t WHERE pk = ?"),
/// ));
/// // session.execute(&batch, ((1, "one"), (2,))).await?;
/// # let _ = batch;
/// ```
///
/// A batch built at run time is a `Batch` (of [`BatchStatement`]s, prepared
/// or not, as many as needed) with one value list per statement; lists of
/// different types go in one `Vec` as `&dyn DynValues`:
///
/// ```
/// # use shardwise::statement::Batch;
/// # use shardwise::protocol::types::ser::DynValues;
/// let rows = [(1, "one"), (2, "two")];
/// let gone = (3,);
/// let mut batch: Batch = Batch::default();
/// let mut values: Vec<&dyn DynValues> = Vec::new();
/// for row in &rows {
///     batch.append_statement("INSERT INTO ks.t (pk, v) VALUES (?, ?)");
///     values.push(row);
/// }
/// batch.append_statement("DELETE FROM ks.t WHERE pk = ?");
/// values.push(&gone);
/// // let batch = session.prepare_batch(&batch).await?; // typed and routed
/// // session.execute(&batch, &values).await?;
/// # assert_eq!(batch.statements().len(), values.len());
/// ```
#[derive(Debug, Clone)]
pub struct Batch<S = Vec<BatchStatement>> {
    pub(crate) kind: BatchType,
    pub(crate) statements: S,
    options: StatementOptions,
}

impl<S> Batch<S> {
    /// A batch of the given kind.
    pub fn new(kind: BatchType, statements: S) -> Self {
        Batch { kind, statements, options: StatementOptions::default() }
    }
    /// A logged (atomic) batch.
    pub fn logged(statements: S) -> Self {
        Self::new(BatchType::Logged, statements)
    }
    /// An unlogged batch.
    pub fn unlogged(statements: S) -> Self {
        Self::new(BatchType::Unlogged, statements)
    }
    /// A counter batch.
    pub fn counter(statements: S) -> Self {
        Self::new(BatchType::Counter, statements)
    }
    /// The statements.
    pub fn statements(&self) -> &S {
        &self.statements
    }
    /// The batch's kind.
    pub fn kind(&self) -> BatchType {
        self.kind
    }
    options_setters!();
}

/// An empty logged batch, to build at run time.
impl<S> Default for Batch<Vec<S>> {
    fn default() -> Self {
        Batch::logged(Vec::new())
    }
}

impl<S> Batch<Vec<S>> {
    /// Adds a statement; its values go at the same place in the values'
    /// `Vec`.
    pub fn append_statement(&mut self, statement: impl Into<S>) {
        self.statements.push(statement.into());
    }
    /// The statements, to change them in place.
    pub fn statements_mut(&mut self) -> &mut Vec<S> {
        &mut self.statements
    }
}

/// One statement of a batch built at run time: unprepared or prepared.
/// Prepared statements are sent by id with typed values and make the batch
/// token-aware (by its first statement); `Session::prepare_batch` prepares
/// the others.
#[derive(Debug, Clone)]
pub enum BatchStatement {
    /// An unprepared statement: its text, with positional values.
    Query(Statement),
    /// A prepared statement.
    PreparedStatement(PreparedStatement),
}

impl From<Statement> for BatchStatement {
    fn from(s: Statement) -> Self {
        BatchStatement::Query(s)
    }
}

impl From<&str> for BatchStatement {
    fn from(s: &str) -> Self {
        BatchStatement::Query(s.into())
    }
}

impl From<String> for BatchStatement {
    fn from(s: String) -> Self {
        BatchStatement::Query(s.into())
    }
}

impl From<PreparedStatement> for BatchStatement {
    fn from(p: PreparedStatement) -> Self {
        BatchStatement::PreparedStatement(p)
    }
}

impl From<&PreparedStatement> for BatchStatement {
    fn from(p: &PreparedStatement) -> Self {
        BatchStatement::PreparedStatement(p.clone())
    }
}
