//! Checkpoints: how far a run got, so that a restarted run resumes there.
//!
//! A [`Checkpoint`] is the current generation's timestamp and, for every
//! stream group of it, its progress (everything before it was read). The
//! planner produces one ([`crate::plan::Planner::checkpoint`]) every
//! checkpoint interval and resumes from one ([`crate::plan::Planner::restore`]);
//! a window being read at save time is read again after a restart
//! (at-least-once delivery). Groups are identified by their first stream id,
//! which is unique across generations.
//!
//! Stores are async (they do I/O) and object safe: methods return boxed
//! futures, so a store can be shared as `Arc<dyn CheckpointStore>`.
//!
//! [`record`] writes checkpoints as key/value records, for stores outside
//! the cluster (the Kafka sink keeps them in a compacted topic);
//! [`scylla_cdc`] reads the checkpoints `scylla-cdc` saved, to take over
//! from it.
//!
//! # The table of [`TableCheckpointStore`]
//!
//! ```text
//! CREATE TABLE IF NOT EXISTS <keyspace>.<table> (
//!     table_name text,       -- the checkpointed log, e.g. 'ks.t_scylla_cdc_log'
//!     generation timestamp,  -- a generation's timestamp
//!     group_id   blob,       -- a group's first stream id (16 zero bytes: the generation marker)
//!     progress   timestamp,  -- everything before it was read
//!     epoch      bigint,     -- the fencing epoch of the group's holder (leases)
//!     PRIMARY KEY ((table_name), generation, group_id)
//! ) WITH CLUSTERING ORDER BY (generation DESC, group_id ASC)
//! ```
//!
//! Single statements are unprepared: a save every few seconds does not
//! need preparing. The statements of batches are prepared (the session
//! caches them), so that the server parses a statement once rather than
//! once per row of every batch: with a batch of 256 rows, parsing was most
//! of its cost.
//!
//! A save writes a marker row (so that a generation without streams is
//! recorded too) and one row per group of the current
//! generation, `USING TTL` (7 days by default, so rows of old generations
//! expire), in unlogged batches of at most 64 rows. All rows of a log live
//! in one partition, so each batch is applied atomically; a save cut short
//! between batches leaves some groups at their previous progress, which
//! only means reading more again. A load takes the newest generation (the
//! first clustering row) and its groups' progress.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::types::CqlTimestamp;
use shardwise::{Batch, ExecutionError, QueryResult, RowsAccessError, Session, Statement};

use crate::stream::StreamId;
use crate::sync::Mutex;

pub mod record;
pub mod scylla_cdc;
use crate::time::Millis;
use crate::BoxFuture;

/// The name checkpoints of the log of `keyspace.table` are kept under:
/// `keyspace.table_scylla_cdc_log` (tables of the same name in other
/// keyspaces have the same streams: they are per cluster).
pub fn log_name(keyspace: &str, table: &str) -> String {
    format!("{keyspace}.{table}_scylla_cdc_log")
}

/// What a checkpoint holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The timestamp of the generation being read.
    pub generation: Millis,
    /// The progress of its groups.
    pub groups: Vec<GroupProgress>,
}

impl Checkpoint {
    /// The progress saved for `group`, if any.
    pub fn progress_of(&self, group: StreamId) -> Option<Millis> {
        self.groups.iter().find(|g| g.group == group).map(|g| g.progress)
    }
}

/// The progress of one stream group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupProgress {
    /// The group: its first stream id.
    pub group: StreamId,
    /// Everything before this time was read.
    pub progress: Millis,
    /// The fencing epoch of the holder that read it, when readers share the
    /// table through leases ([`CheckpointStore::fence`]); 0: not fenced.
    /// A store that fences refuses a save whose epoch is not the group's
    /// current one.
    pub epoch: u64,
}

/// What [`CheckpointStore::fence`] gives a group's new holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    /// The holder's epoch: greater than every epoch the group had before.
    pub epoch: u64,
    /// The group's progress as saved by its earlier holders (none saved:
    /// `None`). No earlier holder can save after the fence.
    pub progress: Option<Millis>,
}

/// A checkpoint could not be loaded or saved.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A request failed.
    #[error("checkpoint request failed: {0}")]
    Query(#[from] ExecutionError),
    /// The checkpoint table's rows do not have the expected columns.
    #[error("unexpected checkpoint rows: {0}")]
    Rows(#[from] RowsAccessError),
    /// A store outside the cluster failed (the Kafka sink's topic).
    #[error("checkpoint store: {0}")]
    Store(String),
    /// Groups whose saves were refused: another holder fenced them (took
    /// them over with a later epoch). The other groups of the save were
    /// saved.
    #[error("{} group(s) taken over by another reader: their progress was not saved", .0.len())]
    Fenced(Vec<StreamId>),
    /// A conditional write's answer has no `[applied]` column.
    #[error("the checkpoint table's answer to a conditional write has no [applied] column")]
    NotConditional,
    /// Another reader fenced the group at the same time: try again later.
    #[error("group {0} was fenced by another reader at the same time")]
    FenceContended(StreamId),
}

/// Where checkpoints are kept, per log table.
pub trait CheckpointStore: Send + Sync {
    /// The last checkpoint saved for `table`, if any.
    fn load<'a>(&'a self, table: &'a str) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>>;

    /// Saves `checkpoint` as the latest of `table`. The progress of groups
    /// it does not hold stays as saved before: readers that share a table
    /// through leases each save only their own groups. A store that fences
    /// ([`CheckpointStore::fence`]) saves a group with a non-zero epoch only
    /// if that is still the group's epoch, and fails with
    /// [`CheckpointError::Fenced`] naming the groups it refused.
    fn save<'a>(&'a self, table: &'a str, checkpoint: &'a Checkpoint) -> BoxFuture<'a, Result<(), CheckpointError>>;

    /// The progress saved for the groups of one generation of `table`
    /// (`None` if nothing was saved for it). By default, [`load`] if it is
    /// of that generation.
    ///
    /// [`load`]: CheckpointStore::load
    fn load_generation<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
    ) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
        Box::pin(async move { Ok(self.load(table).await?.filter(|cp| cp.generation == generation)) })
    }

    /// Takes `group` of `generation` over for a new holder: gives it an
    /// epoch greater than any it had, from which on saves of the group
    /// with an older epoch are refused, and returns the group's progress as
    /// saved so far. By default a store does not fence: epoch 0 and the
    /// progress of [`load_generation`](CheckpointStore::load_generation);
    /// two holders of one group (a paused reader that comes back after its
    /// lease expired) may then both save it.
    fn fence<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
        group: StreamId,
    ) -> BoxFuture<'a, Result<Fence, CheckpointError>> {
        Box::pin(async move {
            let saved = self.load_generation(table, generation).await?;
            let progress = saved.and_then(|cp| cp.progress_of(group));
            Ok(Fence { epoch: 0, progress })
        })
    }

    /// [`fence`](CheckpointStore::fence) of each of `groups`, one result
    /// per group in order. By default the fences run side by side; a store
    /// in the cluster fences them together, in a number of round trips
    /// that does not grow with the groups.
    fn fence_all<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
        groups: &'a [StreamId],
    ) -> BoxFuture<'a, Vec<Result<Fence, CheckpointError>>> {
        Box::pin(crate::join::join_all(groups.iter().map(move |g| self.fence(table, generation, *g))))
    }
}

/// Checkpoints in memory (tests, or runs that never restart): per table
/// and generation, each group's latest saved progress.
#[derive(Debug, Default)]
pub struct MemoryCheckpointStore {
    checkpoints: Mutex<HashMap<String, BTreeMap<Millis, Vec<GroupProgress>>>>,
    /// Each fenced group's current epoch, per table and generation.
    epochs: Mutex<HashMap<(String, Millis, StreamId), u64>>,
}

impl MemoryCheckpointStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn find(&self, table: &str, generation: Option<Millis>) -> Option<Checkpoint> {
        let checkpoints = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        let generations = checkpoints.get(table)?;
        let (&generation, groups) = match generation {
            Some(g) => generations.get_key_value(&g)?,
            None => generations.last_key_value()?,
        };
        Some(Checkpoint { generation, groups: groups.clone() })
    }
}

impl CheckpointStore for MemoryCheckpointStore {
    fn load<'a>(&'a self, table: &'a str) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
        Box::pin(std::future::ready(Ok(self.find(table, None))))
    }

    fn save<'a>(&'a self, table: &'a str, checkpoint: &'a Checkpoint) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let epochs = self.epochs.lock().unwrap_or_else(|e| e.into_inner());
        let mut checkpoints = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        let groups = checkpoints.entry(table.to_owned()).or_default().entry(checkpoint.generation).or_default();
        let mut refused = Vec::new();
        for saved in &checkpoint.groups {
            let current = epochs.get(&(table.to_owned(), checkpoint.generation, saved.group)).copied().unwrap_or(0);
            if saved.epoch != 0 && saved.epoch != current {
                refused.push(saved.group);
                continue;
            }
            match groups.iter_mut().find(|g| g.group == saved.group) {
                Some(g) => *g = *saved,
                None => groups.push(*saved),
            }
        }
        let result = if refused.is_empty() { Ok(()) } else { Err(CheckpointError::Fenced(refused)) };
        Box::pin(std::future::ready(result))
    }

    fn fence<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
        group: StreamId,
    ) -> BoxFuture<'a, Result<Fence, CheckpointError>> {
        let mut epochs = self.epochs.lock().unwrap_or_else(|e| e.into_inner());
        let epoch = epochs.entry((table.to_owned(), generation, group)).or_insert(0);
        *epoch += 1;
        let progress = self.find(table, Some(generation)).and_then(|cp| cp.progress_of(group));
        Box::pin(std::future::ready(Ok(Fence { epoch: *epoch, progress })))
    }

    fn load_generation<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
    ) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
        Box::pin(std::future::ready(Ok(self.find(table, Some(generation)))))
    }
}

/// Checkpoints in a table of the cluster (see the [module docs](self) for
/// its schema).
#[derive(Debug, Clone)]
pub struct TableCheckpointStore {
    session: Session,
    name: String,
    ttl: Duration,
    batch_rows: usize,
}

/// The largest TTL Cassandra and Scylla accept (20 years).
const MAX_TTL_SECS: i32 = 630_720_000;

/// The default TTL of checkpoint rows.
pub const DEFAULT_CHECKPOINT_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

impl TableCheckpointStore {
    /// A store in `keyspace.table` (identifiers as written in CQL: quote
    /// them if they need quoting).
    pub fn new(session: Session, keyspace: &str, table: &str) -> Self {
        TableCheckpointStore {
            session,
            name: format!("{keyspace}.{table}"),
            ttl: DEFAULT_CHECKPOINT_TTL,
            batch_rows: 64,
        }
    }

    /// Sets the TTL of saved rows (whole seconds, at most the server's
    /// maximum of 20 years; zero: rows never expire).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Creates the table if it does not exist, and adds the `epoch` column
    /// to a table created before fencing existed.
    ///
    /// Waits until every node knows the table, as
    /// [`LeaseTable::create_table`](crate::LeaseTable::create_table) does.
    pub async fn create_table(&self) -> Result<(), CheckpointError> {
        let made = self.session.execute(&Statement::new(create_table_cql(&self.name)), ()).await?;
        known_everywhere(&self.session, &made).await?;
        let alter = Statement::new(format!("ALTER TABLE {} ADD epoch bigint", self.name));
        match self.session.execute(&alter, ()).await {
            // 0x2200: invalid, the column exists already.
            Ok(_) => Ok(()),
            Err(ExecutionError::Db(e)) if e.code == 0x2200 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn load_checkpoint(&self, table: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let table: Arc<str> = table.into();
        let latest = Statement::new(format!("SELECT generation FROM {} WHERE table_name = ? LIMIT 1", self.name))
            .with_idempotent(true);
        let result = self.session.execute(&latest, (table.clone(),)).await?;
        let Some((generation,)) = result.first_row::<(CqlTimestamp,)>()? else {
            return Ok(None);
        };
        self.load_groups(table, generation).await
    }

    /// The groups saved for `generation` (`None` if nothing was, not even
    /// its marker).
    async fn load_groups(
        &self,
        table: Arc<str>,
        generation: CqlTimestamp,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        let groups = Statement::new(format!(
            "SELECT group_id, progress, epoch FROM {} WHERE table_name = ? AND generation = ?",
            self.name
        ))
        .with_idempotent(true);
        let mut pages = self.session.execute_pages(groups, (table, generation));
        let mut checkpoint = Checkpoint { generation: generation.into(), groups: Vec::new() };
        let mut found = false;
        while let Some(page) = pages.next_page().await {
            let page = page?;
            found |= page.rows_count() > 0;
            push_groups(page.rows::<(StreamId, Option<CqlTimestamp>, Option<i64>)>()?, &mut checkpoint.groups)?;
        }
        Ok(found.then_some(checkpoint))
    }

    fn ttl_secs(&self) -> i32 {
        i32::try_from(self.ttl.as_secs()).unwrap_or(i32::MAX).min(MAX_TTL_SECS)
    }

    async fn save_checkpoint(&self, table: &str, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let insert = Statement::new(format!(
            "INSERT INTO {} (table_name, generation, group_id, progress) VALUES (?, ?, ?, ?) USING TTL ?",
            self.name
        ));
        let table: Arc<str> = table.into();
        let ttl = self.ttl_secs();
        let generation = CqlTimestamp::from(checkpoint.generation);
        let marker = (table.clone(), generation, GENERATION_MARKER, generation, ttl);
        let (fenced, plain): (Vec<&GroupProgress>, Vec<&GroupProgress>) =
            checkpoint.groups.iter().partition(|g| g.epoch != 0);
        let groups = plain.iter().map(|g| (table.clone(), generation, g.group, g.progress.into(), ttl));
        let rows: Vec<_> = std::iter::once(marker).chain(groups).collect();
        let insert = self.session.prepare(insert).await?;
        for chunk in rows.chunks(self.batch_rows.max(1)) {
            let batch = Batch::unlogged(vec![insert.clone(); chunk.len()]).with_idempotent(true);
            self.session.execute(&batch, chunk.to_vec()).await?;
        }
        let mut refused = Vec::new();
        for chunk in fenced.chunks(self.batch_rows.max(1)) {
            refused.extend(self.save_fenced(&table, generation, chunk).await?);
        }
        if refused.is_empty() {
            Ok(())
        } else {
            Err(CheckpointError::Fenced(refused))
        }
    }

    /// Saves fenced groups, each only if its epoch is still the saved one:
    /// one conditional batch (the rows share a partition), and group by
    /// group when it is refused, to learn which. Returns the refused groups.
    async fn save_fenced(
        &self,
        table: &Arc<str>,
        generation: CqlTimestamp,
        groups: &[&GroupProgress],
    ) -> Result<Vec<StreamId>, CheckpointError> {
        let update = Statement::new(format!(
            "UPDATE {} USING TTL ? SET progress = ?, epoch = ? \
             WHERE table_name = ? AND generation = ? AND group_id = ? IF epoch = ?",
            self.name
        ));
        let ttl = self.ttl_secs();
        let epoch = |g: &GroupProgress| i64::try_from(g.epoch).unwrap_or(i64::MAX);
        let values: Vec<_> = groups
            .iter()
            .map(|g| (ttl, CqlTimestamp::from(g.progress), epoch(g), table.clone(), generation, g.group, epoch(g)))
            .collect();
        let prepared = self.session.prepare(update.clone()).await?;
        let batch = Batch::logged(vec![prepared; values.len()]);
        let result = self.session.execute(&batch, values.clone()).await?;
        if result.applied().ok_or(CheckpointError::NotConditional)? {
            return Ok(Vec::new());
        }
        let mut refused = Vec::new();
        for (g, v) in groups.iter().zip(values) {
            if !self.session.execute(&update, v).await?.applied().ok_or(CheckpointError::NotConditional)? {
                refused.push(g.group);
            }
        }
        Ok(refused)
    }

    /// Fences `groups` together: per [`FENCE_ROWS`] groups, one read
    /// through Paxos of their epochs and progress, then one conditional
    /// batch that raises each epoch if neither it nor the progress changed
    /// since the read. Applied, the progress read is the final word of
    /// the earlier holders (a save after the read changes the progress,
    /// and the batch is refused). Refused, the answer's rows are the new
    /// current values, and the batch is tried again with them, up to
    /// [`FENCE_ATTEMPTS`] times.
    async fn fence_groups(
        &self,
        table: &str,
        generation: Millis,
        groups: &[StreamId],
    ) -> Vec<Result<Fence, CheckpointError>> {
        let mut out = Vec::with_capacity(groups.len());
        for chunk in groups.chunks(FENCE_ROWS) {
            match self.fence_chunk(table, generation, chunk).await {
                Ok(fences) => out.extend(fences.into_iter().map(Ok)),
                Err(e) => out.extend(chunk.iter().map(|_| Err(e.clone()))),
            }
        }
        out
    }

    async fn fence_chunk(
        &self,
        table: &str,
        generation: Millis,
        groups: &[StreamId],
    ) -> Result<Vec<Fence>, CheckpointError> {
        let table: Arc<str> = table.into();
        let generation = CqlTimestamp::from(generation);
        let read = Statement::new(format!(
            "SELECT group_id, epoch, progress FROM {} WHERE table_name = ? AND generation = ? AND group_id IN ?",
            self.name
        ))
        .with_consistency(Consistency::Serial)
        .with_idempotent(true);
        let result = self.session.execute(&read, (table.clone(), generation, groups.to_vec())).await?;
        let mut current = saved_rows(&result)?;
        let update = Statement::new(format!(
            "UPDATE {} USING TTL ? SET epoch = ? WHERE table_name = ? AND generation = ? AND group_id = ? \
             IF epoch = ? AND progress = ?",
            self.name
        ));
        let ttl = self.ttl_secs();
        let update = self.session.prepare(update).await?;
        for _ in 0..FENCE_ATTEMPTS {
            let mut fences = Vec::with_capacity(groups.len());
            let mut values = Vec::with_capacity(groups.len());
            for &group in groups {
                let (epoch, progress) = current.get(&group).copied().unwrap_or((None, None));
                let next = epoch.unwrap_or(0).checked_add(1).ok_or(CheckpointError::FenceContended(group))?;
                fences.push(Fence { epoch: next.unsigned_abs(), progress: progress.map(Millis::from) });
                values.push((ttl, next, table.clone(), generation, group, epoch, progress));
            }
            let batch = Batch::logged(vec![update.clone(); values.len()]);
            let result = self.session.execute(&batch, values).await?;
            if result.applied().ok_or(CheckpointError::NotConditional)? {
                return Ok(fences);
            }
            // Rows the answer does not name do not exist (Cassandra); a row
            // named with a null key did not exist (ScyllaDB).
            current = saved_rows(&result)?;
        }
        Err(CheckpointError::FenceContended(groups.first().copied().unwrap_or(GENERATION_MARKER)))
    }
}

/// The groups fenced by one conditional batch.
const FENCE_ROWS: usize = 64;

/// How many times a refused fence batch is tried again with the values its
/// answer named.
const FENCE_ATTEMPTS: usize = 4;

/// A group's epoch and progress as saved.
type Saved = (Option<i64>, Option<CqlTimestamp>);

/// `group_id`, `epoch` and `progress` of a result's rows, found by name
/// (a refused conditional batch adds `[applied]` and the key columns, in
/// an order that differs between Cassandra and ScyllaDB).
fn saved_rows(result: &shardwise::QueryResult) -> Result<HashMap<StreamId, Saved>, CheckpointError> {
    use shardwise::protocol::types::CqlValue;
    let Some(specs) = result.column_specs() else { return Ok(HashMap::new()) };
    let column = |name: &str| specs.iter().position(|s| s.name == name);
    let Some(group) = column("group_id") else { return Ok(HashMap::new()) };
    let (epoch, progress) = (column("epoch"), column("progress"));
    let mut rows = HashMap::new();
    for row in result.rows::<shardwise::protocol::types::de::Row>()? {
        let row = row.map_err(RowsAccessError::from)?;
        let value = |i: Option<usize>| i.and_then(|i| row.columns.get(i)).and_then(Option::as_ref);
        let Some(CqlValue::Blob(id)) = value(Some(group)) else { continue };
        let Ok(id) = <[u8; 16]>::try_from(id.as_slice()) else { continue };
        let epoch = match value(epoch) {
            Some(CqlValue::BigInt(e)) => Some(*e),
            _ => None,
        };
        let progress = match value(progress) {
            Some(CqlValue::Timestamp(t)) => Some(*t),
            _ => None,
        };
        rows.insert(StreamId::from_bytes(id), (epoch, progress));
    }
    Ok(rows)
}

/// The `group_id` of the row that records a generation even when it has
/// no groups: all zeros, a version-0 id that Scylla never creates.
/// Appends the progress of the groups of `SELECT group_id, progress, epoch`
/// rows (the generation marker is not a group, and a group fenced before
/// any progress was saved has none).
pub(crate) fn push_groups<E>(
    rows: impl IntoIterator<Item = Result<(StreamId, Option<CqlTimestamp>, Option<i64>), E>>,
    groups: &mut Vec<GroupProgress>,
) -> Result<(), RowsAccessError>
where
    RowsAccessError: From<E>,
{
    for row in rows {
        let (group, progress, epoch) = row.map_err(RowsAccessError::from)?;
        if let (false, Some(progress)) = (group == GENERATION_MARKER, progress) {
            let epoch = epoch.unwrap_or(0).unsigned_abs();
            groups.push(GroupProgress { group, progress: progress.into(), epoch });
        }
    }
    Ok(())
}

pub(crate) const GENERATION_MARKER: StreamId = StreamId::from_bytes([0; 16]);

/// After a `CREATE TABLE IF NOT EXISTS` answered `made`: waits until every
/// node agrees on the schema. A table another reader made a moment ago is
/// answered with no schema change (so the driver waits for nothing) by a
/// coordinator that knows it, while other nodes may not yet: on three
/// nodes, a printer started beside another failed its first lease request
/// with "table does not exist" from such a node.
pub(crate) async fn known_everywhere(session: &Session, made: &QueryResult) -> Result<(), ExecutionError> {
    if made.schema_change().is_none() {
        session.await_schema_agreement().await?;
    }
    Ok(())
}

/// The DDL of the checkpoint table `name` (`keyspace.table`).
fn create_table_cql(name: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {name} (table_name text, generation timestamp, group_id blob, \
         progress timestamp, epoch bigint, PRIMARY KEY ((table_name), generation, group_id)) \
         WITH CLUSTERING ORDER BY (generation DESC, group_id ASC)"
    )
}

impl CheckpointStore for TableCheckpointStore {
    fn load<'a>(&'a self, table: &'a str) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
        Box::pin(self.load_checkpoint(table))
    }

    fn save<'a>(&'a self, table: &'a str, checkpoint: &'a Checkpoint) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(self.save_checkpoint(table, checkpoint))
    }

    fn load_generation<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
    ) -> BoxFuture<'a, Result<Option<Checkpoint>, CheckpointError>> {
        Box::pin(self.load_groups(table.into(), generation.into()))
    }

    fn fence<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
        group: StreamId,
    ) -> BoxFuture<'a, Result<Fence, CheckpointError>> {
        Box::pin(async move {
            let mut fences = self.fence_chunk(table, generation, &[group]).await?;
            fences.pop().ok_or(CheckpointError::FenceContended(group))
        })
    }

    fn fence_all<'a>(
        &'a self,
        table: &'a str,
        generation: Millis,
        groups: &'a [StreamId],
    ) -> BoxFuture<'a, Vec<Result<Fence, CheckpointError>>> {
        Box::pin(self.fence_groups(table, generation, groups))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// Polls a future that is ready without waiting.
    fn now_or_never<F: Future>(f: F) -> F::Output {
        let mut f = pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the future waits"),
        }
    }

    fn checkpoint(generation: i64) -> Checkpoint {
        Checkpoint {
            generation: Millis(generation),
            groups: vec![GroupProgress {
                group: StreamId::from_bytes([7; 16]),
                progress: Millis(generation + 5),
                epoch: 0,
            }],
        }
    }

    #[test]
    fn memory_store_keeps_the_latest_per_table() {
        let store: Arc<dyn CheckpointStore> = Arc::new(MemoryCheckpointStore::new());
        assert!(now_or_never(store.load("ks.t")).unwrap().is_none());
        now_or_never(store.save("ks.t", &checkpoint(1))).unwrap();
        now_or_never(store.save("ks.t", &checkpoint(2))).unwrap();
        now_or_never(store.save("ks.u", &checkpoint(3))).unwrap();
        assert_eq!(now_or_never(store.load("ks.t")).unwrap(), Some(checkpoint(2)));
        assert_eq!(now_or_never(store.load("ks.u")).unwrap(), Some(checkpoint(3)));
        assert_eq!(now_or_never(store.load_generation("ks.t", Millis(1))).unwrap(), Some(checkpoint(1)));
        assert_eq!(now_or_never(store.load_generation("ks.t", Millis(4))).unwrap(), None);
    }

    /// Readers sharing a table save their own groups: each save keeps the
    /// others' progress.
    #[test]
    fn memory_store_merges_the_groups_of_a_generation() {
        let store = MemoryCheckpointStore::new();
        let progress =
            |n: u8, p: i64| GroupProgress { group: StreamId::from_bytes([n; 16]), progress: Millis(p), epoch: 0 };
        let save = |groups| now_or_never(store.save("ks.t", &Checkpoint { generation: Millis(1), groups })).unwrap();
        save(vec![progress(1, 10), progress(2, 10)]);
        save(vec![progress(2, 20), progress(3, 30)]);
        let loaded = now_or_never(store.load("ks.t")).unwrap().unwrap();
        assert_eq!(loaded.groups, vec![progress(1, 10), progress(2, 20), progress(3, 30)]);
    }

    #[test]
    fn table_store_schema() {
        let cql = create_table_cql("ks.cdc_checkpoints");
        assert!(cql.starts_with("CREATE TABLE IF NOT EXISTS ks.cdc_checkpoints ("));
        assert!(cql.contains("PRIMARY KEY ((table_name), generation, group_id)"));
        assert!(cql.contains("CLUSTERING ORDER BY (generation DESC, group_id ASC)"));
    }

    /// The table store's futures can be boxed as `Send` (checked by
    /// compiling, never run).
    #[allow(dead_code)]
    fn table_store_is_object_safe(session: Session) -> Arc<dyn CheckpointStore> {
        Arc::new(TableCheckpointStore::new(session, "ks", "checkpoints").with_ttl(Duration::ZERO))
    }
}
