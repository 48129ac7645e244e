//! The result of `Session::execute`: the decoded response (which owns the
//! response buffer) plus what is needed to read its rows, and the node that
//! answered ([`Coordinator`]).

use std::net::SocketAddr;
use std::sync::Arc;

use shardwise_protocol::response::{ResultMessage, SchemaChange};
use shardwise_protocol::rows::{Rows, TypedRows};
use shardwise_protocol::types::de::DeserializeRow;
use shardwise_protocol::types::de::Row;
use shardwise_protocol::types::{ColumnSpec, CqlValue};
use uuid::Uuid;

use crate::error::RowsAccessError;

/// The state to fetch the next page with. Owned (copied out of the
/// response), so keeping it does not pin the previous page's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagingState(pub(crate) Arc<[u8]>);

impl PagingState {
    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
    /// A paging state from raw bytes (e.g. saved by an application).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        PagingState(bytes.into())
    }
}

/// The node, and the shard on a sharded node, that answered a request:
/// the connection the successful attempt went through. Recorded inline in
/// every result (a copy of the connection's address and shard), so it costs
/// no allocation.
///
/// A node is named by its address as the driver knows it (after address
/// translation; not the shard-aware port a connection may have been opened
/// to, which [`Coordinator::connection_address`] gives), as everywhere in
/// shardwise: [`Session::topology`] gives its
/// host id, datacenter and rack ([`Session::node_info`] finds it), and
/// [`SingleTargetLoadBalancingPolicy::new`] takes it (with [`shard`]) to send
/// a later statement to the same place.
///
/// [`Session::topology`]: crate::Session::topology
/// [`Session::node_info`]: crate::Session::node_info
/// [`SingleTargetLoadBalancingPolicy::new`]: crate::load_balancing::SingleTargetLoadBalancingPolicy::new
/// [`shard`]: Coordinator::shard
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Coordinator {
    node: SocketAddr,
    /// The port the connection was opened to: the node's, or its
    /// shard-aware port (same address, another port).
    connection_port: u16,
    shard: Option<u16>,
}

impl Coordinator {
    /// The connection at `addr` (on `shard`, for a sharded node), taken
    /// for the node until the session names the node
    /// ([`Coordinator::on_node`]).
    pub(crate) fn of_connection(addr: SocketAddr, shard: Option<u16>) -> Self {
        Coordinator { node: addr, connection_port: addr.port(), shard }
    }
    /// The same connection, of the node at `node` (the pool's address: a
    /// connection through the shard-aware port has another port).
    pub(crate) fn on_node(self, node: SocketAddr) -> Self {
        Coordinator { node, ..self }
    }
    /// The node: its address as the driver knows it (after address
    /// translation), which the topology, the metrics and
    /// `SingleTargetLoadBalancingPolicy` name it by.
    pub fn node(&self) -> SocketAddr {
        self.node
    }
    /// The address the connection was opened to: the node's, or its
    /// shard-aware port on a ScyllaDB node. Not for telling nodes apart
    /// (use [`Coordinator::node`]), as with the official driver.
    pub fn connection_address(&self) -> SocketAddr {
        SocketAddr::new(self.node.ip(), self.connection_port)
    }
    /// The shard of the connection, on a sharded node (ScyllaDB); `None`
    /// on Cassandra.
    pub fn shard(&self) -> Option<u16> {
        self.shard
    }
}

impl std::fmt::Display for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.shard {
            Some(shard) => write!(f, "{} shard {shard}", self.node),
            None => write!(f, "{}", self.node),
        }
    }
}

/// The outcome of a request.
#[derive(Debug)]
pub struct QueryResult {
    pub(crate) result: ResultMessage,
    pub(crate) specs: Option<Arc<[ColumnSpec]>>,
    /// Who answered.
    pub(crate) coordinator: Coordinator,
    /// What few answers carry, boxed: inline, it would enlarge every
    /// result, which a request moves several times.
    pub(crate) extras: Option<Box<Extras>>,
}

/// The rarer parts of an answer.
#[derive(Debug, Default)]
pub(crate) struct Extras {
    pub(crate) tracing_id: Option<Uuid>,
    pub(crate) warnings: Vec<String>,
    /// The tablet the server attached (the request reached a node or shard
    /// that is not its replica).
    pub(crate) tablet: Option<shardwise_protocol::tablets::TabletRoute>,
}

impl Extras {
    /// `None` when the answer carried none of them.
    pub(crate) fn of(
        tracing_id: Option<Uuid>,
        warnings: Vec<String>,
        tablet: Option<shardwise_protocol::tablets::TabletRoute>,
    ) -> Option<Box<Extras>> {
        (tracing_id.is_some() || !warnings.is_empty() || tablet.is_some())
            .then(|| Box::new(Extras { tracing_id, warnings, tablet }))
    }
}

impl QueryResult {
    /// An empty result, as a write answers (a failure the retry policy
    /// chose to ignore), from the node whose failure it stands for.
    pub(crate) fn void(coordinator: Coordinator) -> Self {
        QueryResult { result: ResultMessage::Void, specs: None, coordinator, extras: None }
    }

    /// The node (and shard) that answered the request: the last attempt's,
    /// after retries; for a write error the retry policy chose to ignore,
    /// the node whose error it was.
    pub fn request_coordinator(&self) -> Coordinator {
        self.coordinator
    }

    /// The result message itself.
    pub fn message(&self) -> &ResultMessage {
        &self.result
    }

    /// The page of rows as received, if the result has rows. A prepared
    /// statement's page (an unprepared one with values is prepared first)
    /// may come without its columns, which the statement knows: read rows
    /// with [`QueryResult::rows`] and columns with
    /// [`QueryResult::column_specs`], which fill them in.
    pub fn raw_rows(&self) -> Option<&Rows> {
        match &self.result {
            ResultMessage::Rows(rows) => Some(rows),
            _ => None,
        }
    }

    /// Number of rows in this page (0 for non-row results).
    pub fn rows_count(&self) -> usize {
        self.raw_rows().map_or(0, Rows::rows_count)
    }

    /// The rows as `R`, borrowing from the response buffer; the type is
    /// checked once against the columns, and the values' framing once
    /// against the row count.
    ///
    /// ```no_run
    /// # async fn f(session: &shardwise::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// let result = session.execute(&shardwise::Statement::new("SELECT pk, name FROM ks.t"), ()).await?;
    /// for row in result.rows::<(i64, &str)>()? {
    ///     let (pk, name) = row?;
    ///     println!("{pk}: {name}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn rows<'a, R: DeserializeRow<'a>>(&'a self) -> Result<TypedRows<'a, R>, RowsAccessError> {
        let rows = self.raw_rows().ok_or(RowsAccessError::NotRows)?;
        Ok(match (&rows.metadata.specs, &self.specs) {
            (Some(_), _) => rows.rows()?,
            (None, Some(specs)) => rows.rows_with(specs)?,
            (None, None) => rows.rows()?,
        })
    }

    /// The first row, if any.
    pub fn first_row<'a, R: DeserializeRow<'a>>(&'a self) -> Result<Option<R>, RowsAccessError> {
        Ok(self.rows::<R>()?.next().transpose()?)
    }

    /// The column specs of the rows.
    pub fn column_specs(&self) -> Option<&[ColumnSpec]> {
        let rows = self.raw_rows()?;
        rows.metadata.specs.as_deref().or(self.specs.as_deref())
    }

    /// The paging state for the next page, if there is one.
    pub fn paging_state(&self) -> Option<PagingState> {
        let state = self.raw_rows()?.metadata.paging_state.as_ref()?;
        Some(PagingState(Arc::from(&state[..])))
    }

    /// Whether more pages follow.
    pub fn has_more_pages(&self) -> bool {
        self.raw_rows().is_some_and(|r| r.metadata.paging_state.is_some())
    }

    /// For a conditional (LWT) statement: whether it was applied (the
    /// `[applied]` column). `None` if the result has no such column.
    pub fn applied(&self) -> Option<bool> {
        let index = self.column_specs()?.iter().position(|s| s.name == "[applied]")?;
        let row: Row = self.first_row().ok()??;
        match row.columns.get(index)? {
            Some(CqlValue::Boolean(applied)) => Some(*applied),
            _ => None,
        }
    }

    /// The schema change this result reports, for DDL.
    pub fn schema_change(&self) -> Option<&SchemaChange> {
        match &self.result {
            ResultMessage::SchemaChange(c) => Some(c),
            _ => None,
        }
    }

    /// The tracing session id, when tracing was requested.
    pub fn tracing_id(&self) -> Option<Uuid> {
        self.extras.as_ref().and_then(|e| e.tracing_id)
    }

    /// Warnings the server attached to the response.
    pub fn warnings(&self) -> &[String] {
        self.extras.as_ref().map_or(&[], |e| &e.warnings)
    }
}
