//! Stream sets of tables in tablets keyspaces, read as generations.
//!
//! In a ScyllaDB keyspace with tablets the log does not follow the
//! cluster's CDC generations: each table has stream sets of its own, one
//! stream per tablet, and a split or merge starts a new set for the whole
//! table (`docs/cdc-log.md` §11). Scylla publishes them, keyed by the base
//! table's names, in two node-local tables:
//!
//! ```text
//! system.cdc_timestamps (keyspace_name, table_name, timestamp)          -- a row per set, newest first
//! system.cdc_streams (keyspace_name, table_name, timestamp, stream_state, stream_id)
//!     -- per set: its streams (state 0), the streams it closed (1) and opened (2)
//! ```
//!
//! A set plays the part of a generation: the planner reads every stream of
//! a set up to the next set's timestamp, then the next set's streams from
//! it, so no change is missed or read twice across a split or merge.
//! Scylla gives every stream of the new set fresh random bits, so every
//! stream changes at a resize and a per-stream hand-over would change
//! nothing. [`TabletGenerations`] is chosen by
//! [`CdcReaderBuilder::build`](crate::CdcReaderBuilder::build) when
//! `system_schema.scylla_keyspaces` gives the keyspace an `initial_tablets`
//! value ([`uses_tablets`]), as Scylla's own readers decide.

use shardwise::protocol::response::ErrorKind;
use shardwise::protocol::types::CqlTimestamp;
use shardwise::{ExecutionError, QueryResult, RowsAccessError, Session, Statement};

use crate::generation::{metadata_consistency, GenerationError, GenerationSource};
use crate::stream::{StreamGroup, StreamId};
use crate::time::Millis;
use crate::BoxFuture;

/// `stream_state` of the streams of a set.
const CURRENT: i8 = 0;

/// The stream sets of one table in a tablets keyspace (see the
/// [module docs](self)).
#[derive(Debug, Clone)]
pub struct TabletGenerations {
    session: Session,
    keyspace: String,
    table: String,
    at: Statement,
    next: Statement,
    streams: Statement,
}

impl TabletGenerations {
    /// The stream sets of `keyspace.table` (the base table's names).
    pub fn new(session: Session, keyspace: &str, table: &str) -> Self {
        let timestamps = "SELECT timestamp FROM system.cdc_timestamps WHERE keyspace_name = ? AND table_name = ?";
        // Sent as text, as the vnode generations' reads (`generation.rs`).
        TabletGenerations {
            session,
            keyspace: keyspace.to_owned(),
            table: table.to_owned(),
            at: Statement::new(format!("{timestamps} AND timestamp <= ? ORDER BY timestamp DESC LIMIT 1"))
                .sent_as_text(),
            next: Statement::new(format!("{timestamps} AND timestamp > ? ORDER BY timestamp ASC LIMIT 1"))
                .sent_as_text(),
            streams: Statement::new(
                "SELECT stream_id FROM system.cdc_streams WHERE keyspace_name = ? AND table_name = ? \
                 AND timestamp = ? AND stream_state = ?",
            )
            .sent_as_text(),
        }
    }

    async fn timestamp(&self, query: &Statement, ts: Millis) -> Result<Option<Millis>, GenerationError> {
        let statement = query.clone().with_consistency(metadata_consistency(&self.session).await?);
        let values = (self.keyspace.as_str(), self.table.as_str(), CqlTimestamp::from(ts));
        let result = self.session.execute(&statement.with_idempotent(true), values).await?;
        set_timestamp(&result)
    }

    /// The set's streams, one group each (the reader regroups them by the
    /// node and shard that hold them).
    async fn stream_groups(&self, set: Millis) -> Result<Vec<StreamGroup>, GenerationError> {
        let statement = self
            .streams
            .clone()
            .with_consistency(metadata_consistency(&self.session).await?)
            .with_page_size(5000)
            .with_idempotent(true);
        let values = (self.keyspace.as_str(), self.table.as_str(), CqlTimestamp::from(set), CURRENT);
        let mut pages = self.session.execute_pages(statement, values);
        let mut groups = Vec::new();
        while let Some(page) = pages.next_page().await {
            groups_of_stream_page(&page?, set, &mut groups)?;
        }
        if groups.is_empty() {
            return Err(GenerationError::EmptyGeneration(set));
        }
        Ok(groups)
    }
}

/// The set's timestamp of a `SELECT timestamp FROM system.cdc_timestamps`
/// answer: its first row, `None` with no row.
pub(crate) fn set_timestamp(result: &QueryResult) -> Result<Option<Millis>, GenerationError> {
    Ok(result.first_row::<(CqlTimestamp,)>()?.map(|(t,)| t.into()))
}

/// Appends one group per stream of a page of `SELECT stream_id FROM
/// system.cdc_streams` (the streams of set `set`).
pub(crate) fn groups_of_stream_page(
    page: &QueryResult,
    set: Millis,
    out: &mut Vec<StreamGroup>,
) -> Result<(), GenerationError> {
    // Typed through the result, not its raw rows: a prepared statement's
    // pages may skip the columns the statement knows.
    for row in page.rows::<(&[u8],)>()? {
        let (id,) = row.map_err(RowsAccessError::from)?;
        let id = StreamId::from_slice(id).map_err(|source| GenerationError::StreamId { generation: set, source })?;
        out.extend(StreamGroup::new([id]));
    }
    Ok(())
}

/// Whether a `SELECT initial_tablets FROM system_schema.scylla_keyspaces`
/// answer gives the keyspace an `initial_tablets` value.
pub(crate) fn has_initial_tablets(result: &QueryResult) -> bool {
    matches!(result.first_row::<(Option<i32>,)>(), Ok(Some((Some(_),))))
}

impl GenerationSource for TabletGenerations {
    fn generation_at(&self, ts: Millis) -> BoxFuture<'_, Result<Option<Millis>, GenerationError>> {
        Box::pin(self.timestamp(&self.at, ts))
    }

    fn next_generation_after(&self, ts: Millis) -> BoxFuture<'_, Result<Option<Millis>, GenerationError>> {
        Box::pin(self.timestamp(&self.next, ts))
    }

    fn streams(&self, generation: Millis) -> BoxFuture<'_, Result<Vec<StreamGroup>, GenerationError>> {
        Box::pin(self.stream_groups(generation))
    }
}

/// Whether `keyspace` uses tablets: `system_schema.scylla_keyspaces` gives
/// it an `initial_tablets` value. No row, or no such table (Cassandra, old
/// Scylla: an Invalid error), means vnodes; any other failure is an error,
/// not a guess (reading the wrong streams would deliver nothing).
pub async fn uses_tablets(session: &Session, keyspace: &str) -> Result<bool, ExecutionError> {
    let query = Statement::new("SELECT initial_tablets FROM system_schema.scylla_keyspaces WHERE keyspace_name = ?")
        .with_idempotent(true)
        .sent_as_text();
    match session.execute(&query, (keyspace,)).await {
        Ok(result) => Ok(has_initial_tablets(&result)),
        Err(ExecutionError::Db(e)) if e.kind == ErrorKind::Invalid => Ok(false),
        Err(e) => Err(e),
    }
}
