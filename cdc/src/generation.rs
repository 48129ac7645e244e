//! Where generations and their streams come from.
//!
//! [`GenerationSource`] answers the planner's generation fetches; it is a
//! trait so that the planner's callers can be tested without a cluster and
//! so that tablets keyspaces (per-table stream sets in `system.cdc_*`) get
//! their own source ([`crate::tablets`]). [`VnodeGenerations`] reads the user-facing tables
//! Scylla (≥ 4.4) keeps for vnode keyspaces:
//!
//! ```text
//! <ks>.cdc_generation_timestamps (key text, time timestamp, expired timestamp,
//!     PRIMARY KEY (key, time)) WITH CLUSTERING ORDER BY (time DESC)      -- key = 'timestamps'
//! <ks>.cdc_streams_descriptions_v2 (time timestamp, range_end bigint,
//!     streams frozen<set<blob>>, PRIMARY KEY (time, range_end))         -- one row per vnode
//! ```
//!
//! `<ks>` is `system_distributed` unless configured otherwise (the
//! emulation front rewrites `system_distributed.` to its stand-in tables,
//! so the default works there too). Scylla publishes a generation's streams
//! before its timestamp, so a timestamp that can be seen has its streams
//! written; they are read at QUORUM, or at ONE on a one-node cluster
//! (`system_distributed` has replication factor 3, so QUORUM would need two
//! live replicas). A timestamp whose streams partition reads empty (seen
//! when `system_distributed` lost replicas) is reported as
//! [`GenerationError::EmptyGeneration`], for the caller to retry later.

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::rows::TypedRows;
use shardwise::protocol::types::CqlTimestamp;
use shardwise::{ExecutionError, RowsAccessError, Session, Statement};

use crate::stream::{StreamGroup, StreamId, StreamIdError};
use crate::time::Millis;
use crate::BoxFuture;

/// A generation lookup failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GenerationError {
    /// A request failed.
    #[error("generation request failed: {0}")]
    Query(#[from] ExecutionError),
    /// The rows do not have the expected columns.
    #[error("unexpected generation rows: {0}")]
    Rows(#[from] RowsAccessError),
    /// A stream id of the generation is malformed.
    #[error("generation {generation}: {source}")]
    StreamId {
        /// The generation.
        generation: Millis,
        /// What is wrong with the id.
        source: StreamIdError,
    },
    /// The generation's timestamp exists but its streams read empty
    /// (under-replicated metadata): retry later.
    #[error("generation {0} has no streams (yet); retry later")]
    EmptyGeneration(Millis),
}

/// Generations and their streams.
pub trait GenerationSource: Send + Sync {
    /// The timestamp of the generation active at `ts`: the latest one at or
    /// before it.
    fn generation_at(&self, ts: Millis) -> BoxFuture<'_, Result<Option<Millis>, GenerationError>>;

    /// The timestamp of the first generation after `ts`.
    fn next_generation_after(&self, ts: Millis) -> BoxFuture<'_, Result<Option<Millis>, GenerationError>>;

    /// The stream groups of the generation with timestamp `generation`.
    fn streams(&self, generation: Millis) -> BoxFuture<'_, Result<Vec<StreamGroup>, GenerationError>>;

    /// Whether each group [`Self::streams`] gives is one vnode's streams,
    /// one per shard of the node that owned the vnode when the generation
    /// was made, as in ScyllaDB's vnode generations. The reader then finds
    /// a stream's shard from its vnode's number of streams, generation by
    /// generation, instead of from the sharding of a node it is connected
    /// to (nodes can have different shard counts). Default: `false`.
    fn groups_are_vnodes(&self) -> bool {
        false
    }

    /// The generation to start reading at `ts` from: the one active then,
    /// or else the first one after it (reading starts before the first
    /// generation).
    fn first_generation(&self, ts: Millis) -> BoxFuture<'_, Result<Option<Millis>, GenerationError>> {
        Box::pin(async move {
            match self.generation_at(ts).await? {
                Some(g) => Ok(Some(g)),
                None => self.next_generation_after(ts).await,
            }
        })
    }
}

/// The default keyspace of the generation tables.
pub const DEFAULT_METADATA_KEYSPACE: &str = "system_distributed";

/// Generations of vnode keyspaces, read from `cdc_generation_timestamps`
/// and `cdc_streams_descriptions_v2` (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct VnodeGenerations {
    session: Session,
    queries: Queries,
    page_size: i32,
}

#[derive(Debug, Clone)]
struct Queries {
    at: Statement,
    next: Statement,
    streams: Statement,
}

impl Queries {
    fn new(keyspace: &str) -> Self {
        let timestamps = format!("SELECT time FROM {keyspace}.cdc_generation_timestamps WHERE key = 'timestamps'");
        // Sent as text: each runs once per generation, where a PREPARE on
        // every node would cost more than it saves.
        Queries {
            at: Statement::new(format!("{timestamps} AND time <= ? ORDER BY time DESC LIMIT 1")).sent_as_text(),
            next: Statement::new(format!("{timestamps} AND time > ? ORDER BY time ASC LIMIT 1")).sent_as_text(),
            streams: Statement::new(format!(
                "SELECT streams FROM {keyspace}.cdc_streams_descriptions_v2 WHERE time = ?"
            ))
            .sent_as_text(),
        }
    }
}

impl VnodeGenerations {
    /// Generations from `system_distributed`.
    pub fn new(session: Session) -> Self {
        VnodeGenerations { session, queries: Queries::new(DEFAULT_METADATA_KEYSPACE), page_size: 5000 }
    }

    /// Reads the generation tables from `keyspace` instead (as written in
    /// CQL: quote it if it needs quoting).
    pub fn with_keyspace(mut self, keyspace: &str) -> Self {
        self.queries = Queries::new(keyspace);
        self
    }

    async fn consistency(&self) -> Result<Consistency, GenerationError> {
        metadata_consistency(&self.session).await
    }

    async fn timestamp(&self, query: &Statement, ts: Millis) -> Result<Option<Millis>, GenerationError> {
        let statement = query.clone().with_consistency(self.consistency().await?).with_idempotent(true);
        let result = self.session.execute(&statement, (CqlTimestamp::from(ts),)).await?;
        Ok(result.first_row::<(CqlTimestamp,)>()?.map(|(t,)| t.into()))
    }

    async fn stream_groups(&self, generation: Millis) -> Result<Vec<StreamGroup>, GenerationError> {
        let statement = self
            .queries
            .streams
            .clone()
            .with_consistency(self.consistency().await?)
            .with_page_size(self.page_size)
            .with_idempotent(true);
        let mut pages = self.session.execute_pages(statement, (CqlTimestamp::from(generation),));
        let mut groups = Vec::new();
        while let Some(page) = pages.next_page().await {
            // Typed through the result, not its raw rows: a prepared
            // statement's pages may skip the columns the statement knows.
            groups_of_typed_rows(page?.rows()?, generation, &mut groups)?;
        }
        if groups.is_empty() {
            return Err(GenerationError::EmptyGeneration(generation));
        }
        Ok(groups)
    }
}

/// The consistency of the CDC metadata reads: ONE on a one-node cluster,
/// else QUORUM (counted each time: a cluster grows exactly when new
/// generations appear).
pub(crate) async fn metadata_consistency(session: &Session) -> Result<Consistency, GenerationError> {
    let peers =
        Statement::new("SELECT COUNT(*) FROM system.peers").with_consistency(Consistency::One).with_idempotent(true);
    let result = session.execute(&peers, ()).await?;
    let count = result.first_row::<(i64,)>()?.map_or(0, |(n,)| n);
    Ok(consistency_for(count))
}

fn consistency_for(peers: i64) -> Consistency {
    if peers + 1 < 2 {
        Consistency::One
    } else {
        Consistency::Quorum
    }
}

/// Appends one group per row (vnode) of a `SELECT streams` page; rows
/// with no streams are skipped.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn groups_of_rows(
    rows: &shardwise::protocol::rows::Rows,
    generation: Millis,
    out: &mut Vec<StreamGroup>,
) -> Result<(), GenerationError> {
    groups_of_typed_rows(rows.rows().map_err(RowsAccessError::from)?, generation, out)
}

fn groups_of_typed_rows<'a>(
    rows: TypedRows<'a, (Vec<&'a [u8]>,)>,
    generation: Millis,
    out: &mut Vec<StreamGroup>,
) -> Result<(), GenerationError> {
    for row in rows {
        let (streams,) = row.map_err(RowsAccessError::from)?;
        let ids = streams
            .into_iter()
            .map(StreamId::from_slice)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| GenerationError::StreamId { generation, source })?;
        out.extend(StreamGroup::new(ids));
    }
    Ok(())
}

impl GenerationSource for VnodeGenerations {
    fn generation_at(&self, ts: Millis) -> BoxFuture<'_, Result<Option<Millis>, GenerationError>> {
        Box::pin(self.timestamp(&self.queries.at, ts))
    }

    fn next_generation_after(&self, ts: Millis) -> BoxFuture<'_, Result<Option<Millis>, GenerationError>> {
        Box::pin(self.timestamp(&self.queries.next, ts))
    }

    fn streams(&self, generation: Millis) -> BoxFuture<'_, Result<Vec<StreamGroup>, GenerationError>> {
        Box::pin(self.stream_groups(generation))
    }

    /// A row of `cdc_streams_descriptions_v2` is one vnode's streams, one
    /// per shard of its owner then (`docs/cdc-log.md` §4.2).
    fn groups_are_vnodes(&self) -> bool {
        true
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    use super::*;
    use shardwise::protocol::rows::Rows;

    #[test]
    fn queries_follow_the_spec() {
        let q = Queries::new(DEFAULT_METADATA_KEYSPACE);
        assert_eq!(
            q.at.text(),
            "SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps' \
             AND time <= ? ORDER BY time DESC LIMIT 1"
        );
        assert_eq!(
            q.next.text(),
            "SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps' \
             AND time > ? ORDER BY time ASC LIMIT 1"
        );
        assert_eq!(
            q.streams.text(),
            "SELECT streams FROM system_distributed.cdc_streams_descriptions_v2 WHERE time = ?"
        );
        assert!(Queries::new("emu").streams.text().contains(" emu.cdc_streams_descriptions_v2 "));
    }

    #[test]
    fn one_node_reads_at_one() {
        assert_eq!(consistency_for(0), Consistency::One);
        assert_eq!(consistency_for(1), Consistency::Quorum);
        assert_eq!(consistency_for(5), Consistency::Quorum);
    }

    /// Generations in memory.
    struct Fixed(Vec<i64>);

    impl GenerationSource for Fixed {
        fn generation_at(&self, ts: Millis) -> BoxFuture<'_, Result<Option<Millis>, GenerationError>> {
            let found = self.0.iter().rev().find(|g| **g <= ts.0).map(|g| Millis(*g));
            Box::pin(std::future::ready(Ok(found)))
        }
        fn next_generation_after(&self, ts: Millis) -> BoxFuture<'_, Result<Option<Millis>, GenerationError>> {
            let found = self.0.iter().find(|g| **g > ts.0).map(|g| Millis(*g));
            Box::pin(std::future::ready(Ok(found)))
        }
        fn streams(&self, generation: Millis) -> BoxFuture<'_, Result<Vec<StreamGroup>, GenerationError>> {
            Box::pin(std::future::ready(Err(GenerationError::EmptyGeneration(generation))))
        }
    }

    fn now_or_never<F: Future>(f: F) -> F::Output {
        match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the future waits"),
        }
    }

    #[test]
    fn first_generation_falls_back_to_the_next_one() {
        let source: Arc<dyn GenerationSource> = Arc::new(Fixed(vec![10, 20, 30]));
        assert_eq!(now_or_never(source.first_generation(Millis(25))).unwrap(), Some(Millis(20)));
        assert_eq!(now_or_never(source.first_generation(Millis(5))).unwrap(), Some(Millis(10)));
        assert_eq!(now_or_never(source.first_generation(Millis(30))).unwrap(), Some(Millis(30)));
        let empty: Arc<dyn GenerationSource> = Arc::new(Fixed(vec![]));
        assert_eq!(now_or_never(empty.first_generation(Millis(5))).unwrap(), None);
        assert!(matches!(now_or_never(source.streams(Millis(10))), Err(GenerationError::EmptyGeneration(Millis(10)))));
    }

    fn streams_page(rows: &[Option<Vec<StreamId>>]) -> Rows {
        use shardwise::protocol::rows::ResultMetadata;
        use shardwise::protocol::types::ser::SerializeValue;
        use shardwise::protocol::types::{ColumnSpec, ColumnType};
        let typ = ColumnType::Set(Box::new(ColumnType::Blob));
        let spec = ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: "streams".into(), typ };
        let encoded: Vec<Option<Vec<u8>>> = rows
            .iter()
            .map(|r| {
                r.as_ref().map(|ids| {
                    let mut buf = Vec::new();
                    ids.encode(&mut buf);
                    buf.split_off(4)
                })
            })
            .collect();
        let rows: Vec<Vec<Option<&[u8]>>> = encoded.iter().map(|r| vec![r.as_deref()]).collect();
        let metadata = ResultMetadata { columns_count: 1, specs: Some(vec![spec]), ..Default::default() };
        Rows::from_raw(metadata, &rows).unwrap()
    }

    fn id(token: u8, index: u8) -> StreamId {
        let mut b = [0u8; 16];
        b[0] = token;
        b[15] = (index << 4) | 1;
        StreamId::from_bytes(b)
    }

    #[test]
    fn one_group_per_vnode_row() {
        let page = streams_page(&[Some(vec![id(9, 1), id(3, 1)]), None, Some(vec![id(4, 2)])]);
        let mut groups = Vec::new();
        groups_of_rows(&page, Millis(1), &mut groups).unwrap();
        let streams: Vec<&[StreamId]> = groups.iter().map(StreamGroup::streams).collect();
        assert_eq!(streams, vec![&[id(3, 1), id(9, 1)][..], &[id(4, 2)][..]], "sorted within, empty rows skipped");
    }

    #[test]
    fn malformed_stream_ids_are_errors() {
        use shardwise::protocol::rows::ResultMetadata;
        // A set holding one 15-byte blob.
        let specs = streams_page(&[]).metadata.specs;
        let value = [0, 0, 0, 1, 0, 0, 0, 15, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
        let metadata = ResultMetadata { columns_count: 1, specs, ..Default::default() };
        let bad = Rows::from_raw(metadata, &[vec![Some(&value[..])]]).unwrap();
        let mut groups = Vec::new();
        assert!(matches!(
            groups_of_rows(&bad, Millis(1), &mut groups),
            Err(GenerationError::StreamId { source: StreamIdError::Length(15), .. })
        ));
    }

    #[allow(dead_code)]
    fn vnode_source_is_object_safe(session: Session) -> Arc<dyn GenerationSource> {
        Arc::new(VnodeGenerations::new(session).with_keyspace("emu"))
    }
}
