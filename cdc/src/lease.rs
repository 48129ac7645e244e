//! Leases: reading one table from several processes.
//!
//! Readers that share a table (any number of processes, on one machine or
//! many) split its stream groups between them through a lease table in the
//! cluster itself. A reader holds a group while its lease row names it;
//! the row is written with a lightweight transaction and a TTL, and renewed
//! by a heartbeat. Each reader also keeps a member row (with the same TTL)
//! so the others know how many share the table.
//!
//! Why this shape: the cluster is the one thing every reader can reach, and
//! LWTs give the one guarantee that matters, that two live readers never
//! both think they hold a group. A reader that dies stops renewing; its
//! rows expire after the TTL, and the survivors take its groups over from
//! its last checkpoint (so what it read after that checkpoint is read
//! again: the only duplicates). A reader that stops cleanly saves its
//! groups' progress before it deletes their leases, so a handover repeats
//! nothing. A reader that cannot renew a lease before its local deadline
//! (the renewal's send time plus the TTL less a second and the clock skew bound, on the monotonic
//! clock) stops reading the group: its workers neither start a window nor
//! end one past the deadline. A paused reader that comes back after
//! another took its groups over cannot save their progress: takeovers
//! fence the group in the checkpoint store ([`crate::CheckpointStore::fence`]).
//!
//! The fencing epoch lives in the checkpoint row rather than in the lease
//! row: a lease row expires with its TTL, and an epoch that expired with it
//! would start again from 1, while the checkpoint row lasts as long as the
//! progress it guards.
//!
//! Balance is decided by [`quota`] and [`moves`], pure functions of what
//! the lease table says: with `G` groups and `M` members (in name order),
//! the first `G mod M` members hold `⌈G/M⌉` groups and the others `⌊G/M⌋`.
//! Readers that join or leave change `M`, and each reader moves towards its
//! quota on its next heartbeat: releasing its extra groups, claiming free
//! ones.
//!
//! # The table of [`LeaseTable`]
//!
//! ```text
//! CREATE TABLE IF NOT EXISTS <keyspace>.<table> (
//!     log   text,  -- the log read, e.g. 'ks.t_scylla_cdc_log'
//!     kind  text,  -- 'lease' or 'member'
//!     item  text,  -- a group's first stream id (hex), a member's name, or 'grouping'
//!     owner text,  -- the member holding the lease (the grouping, for 'grouping')
//!     PRIMARY KEY ((log, kind), item)
//! )
//! ```
//!
//! Leases and members are two partitions: the lease partition is written
//! only with LWTs, the member partition only with plain writes, so the two
//! kinds of writes never mix in one partition.
//!
//! A reader's renewals, claims and releases of one heartbeat are each one
//! conditional batch of the lease partition ([`LeaseTable::renew_all`],
//! [`LeaseTable::claim_all`], [`LeaseTable::release_all`]): one Paxos round
//! per [`BATCH_ROWS`] groups, so the cost of a heartbeat does not grow with
//! the groups a reader holds. A batch applies whole or not at all; a
//! refused one is sent again without the rows its answer shows failing
//! their condition (Cassandra answers the rows that exist, ScyllaDB one row
//! per statement; both name each row's item).
//!
//! The lease partition also holds the row `'grouping'`, whose owner is how
//! the readers group the log's streams (streams per query, the sharding):
//! recorded by the first reader ([`LeaseTable::record_grouping`]), kept by
//! every heartbeat's renewal batch ([`LeaseTable::renew_with_grouping`]),
//! and expiring a TTL after the last reader stopped. A reader that groups
//! otherwise is refused: it would apply one grouping's leases and progress
//! to another's groups.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use shardwise::protocol::consistency::Consistency;
use shardwise::{Batch, ExecutionError, RowsAccessError, Session, Statement};

use crate::stream::StreamId;

/// How a reader shares a table with others ([`crate::CdcReaderBuilder::leases`]).
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// The lease table (see the [module docs](self)).
    pub table: LeaseTable,
    /// This reader's name, unique among the readers of the table.
    pub name: String,
    /// How long a lease lasts without renewal (whole seconds, at least 1).
    pub ttl: Duration,
    /// How often leases are renewed and the groups rebalanced (less than
    /// the time a lease is surely held, see [`LeaseConfig::clock_skew`]).
    pub heartbeat: Duration,
    /// The most the clocks of the cluster's nodes may differ (default
    /// 500 ms). A lease counts as held until its TTL, less one second (the
    /// server counts a TTL in whole seconds from its own clock) and less
    /// this bound, after its renewal was sent: past that, workers neither
    /// start a window of its group nor hand a window's end to the consumer.
    pub clock_skew: Duration,
}

impl LeaseConfig {
    /// Leases in `table`, for a reader named after this process (its id and
    /// start time), with a TTL of 10 s and a heartbeat every 2 s.
    pub fn new(table: LeaseTable) -> Self {
        let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        LeaseConfig {
            table,
            name: format!("pid{}-{}", std::process::id(), started.as_micros()),
            ttl: Duration::from_secs(10),
            heartbeat: Duration::from_secs(2),
            clock_skew: Duration::from_millis(500),
        }
    }

    /// Sets this reader's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the TTL and the heartbeat.
    pub fn timing(mut self, ttl: Duration, heartbeat: Duration) -> Self {
        self.ttl = ttl;
        self.heartbeat = heartbeat;
        self
    }

    /// Sets the bound on the clock skew between the cluster's nodes.
    pub fn clock_skew(mut self, skew: Duration) -> Self {
        self.clock_skew = skew;
        self
    }

    /// The TTL in whole seconds, if the settings can work.
    pub(crate) fn check(&self) -> Result<i32, String> {
        check(self.ttl, self.heartbeat, self.clock_skew, &self.name)
    }

    /// How long after its renewal was sent a lease is surely held: the TTL
    /// in whole seconds, less one second of rounding and the clock skew.
    pub(crate) fn held_for(&self) -> Duration {
        held_for(self.ttl, self.clock_skew)
    }

    /// The longest a lease query may take: at most twice the heartbeat,
    /// and never as long as a lease is surely held.
    pub(crate) fn query_bound(&self) -> Duration {
        query_bound(self.heartbeat, self.held_for())
    }
}

fn query_bound(heartbeat: Duration, held_for: Duration) -> Duration {
    heartbeat.saturating_mul(2).min(held_for)
}

fn held_for(ttl: Duration, clock_skew: Duration) -> Duration {
    Duration::from_secs(ttl.as_secs()).saturating_sub(Duration::from_secs(1)).saturating_sub(clock_skew)
}

fn check(ttl: Duration, heartbeat: Duration, clock_skew: Duration, name: &str) -> Result<i32, String> {
    let secs = i32::try_from(ttl.as_secs()).map_err(|_| "the lease TTL is too long".to_string())?;
    if secs < 1 {
        return Err("the lease TTL must be at least 1 s".into());
    }
    if heartbeat.is_zero() || heartbeat >= held_for(ttl, clock_skew) {
        return Err(format!(
            "the lease heartbeat must not be zero, and shorter than the TTL less 1 s and the clock skew bound \
             ({:?} here)",
            held_for(ttl, clock_skew)
        ));
    }
    if name.is_empty() {
        return Err("the reader's name must not be empty".into());
    }
    Ok(secs)
}

/// A lease request failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// A request failed.
    #[error("lease request failed: {0}")]
    Query(#[from] ExecutionError),
    /// The lease table's rows do not have the expected columns.
    #[error("unexpected lease rows: {0}")]
    Rows(#[from] RowsAccessError),
    /// A conditional statement's answer has no `[applied]` column.
    #[error("the lease table's answer to a conditional write has no [applied] column")]
    NotConditional,
    /// A lease request took longer than its bound (twice the heartbeat, at
    /// most the time a lease is surely held): its answer no longer counts.
    #[error("a lease request took longer than {0:?}")]
    Timeout(Duration),
    /// A conditional batch of lease rows was refused although its answer
    /// shows every condition holding (a server that answers otherwise
    /// than Cassandra or ScyllaDB).
    #[error("a conditional batch of lease rows was refused, yet its answer names no row that fails its condition")]
    Refused,
}

impl LeaseError {
    /// Whether the same request may succeed if made again: the cluster
    /// timed out, was unavailable or overloaded, or the connection failed
    /// (not a lease table that does not exist, nor rows of another shape).
    pub fn is_transient(&self) -> bool {
        match self {
            LeaseError::Timeout(_) => true,
            // Unavailable, overloaded, bootstrapping, write and read
            // timeouts, a CAS write of unknown outcome.
            LeaseError::Query(ExecutionError::Db(e)) => {
                matches!(e.code, 0x1000 | 0x1001 | 0x1002 | 0x1100 | 0x1200 | 0x2500)
            }
            LeaseError::Query(
                ExecutionError::Timeout(_)
                | ExecutionError::AttemptTimeout { .. }
                | ExecutionError::Connection(_)
                | ExecutionError::NoConnection
                | ExecutionError::PlanUnavailable { .. },
            ) => true,
            _ => false,
        }
    }
}

/// The lease table of a cluster (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct LeaseTable {
    session: Session,
    name: String,
}

const LEASE: &str = "lease";
/// The item of the lease partition's row that records the streams'
/// grouping (not a stream id: [`LeaseTable::leases`] passes it over).
const GROUPING: &str = "grouping";
const MEMBER: &str = "member";

impl LeaseTable {
    /// The table `keyspace.table` (identifiers as written in CQL).
    pub fn new(session: Session, keyspace: &str, table: &str) -> Self {
        LeaseTable { session, name: format!("{keyspace}.{table}") }
    }

    /// Creates the table if it does not exist, and waits until every node
    /// knows it: a table another reader made a moment ago may not have
    /// reached every node yet.
    pub async fn create_table(&self) -> Result<(), LeaseError> {
        let ddl = format!(
            "CREATE TABLE IF NOT EXISTS {} (log text, kind text, item text, owner text, \
             PRIMARY KEY ((log, kind), item))",
            self.name
        );
        let made = self.session.execute(&Statement::new(ddl), ()).await?;
        crate::checkpoint::known_everywhere(&self.session, &made).await?;
        Ok(())
    }

    /// A lease row written if it does not exist (values: log, kind, item,
    /// owner, TTL).
    fn claim_cql(&self) -> String {
        format!("INSERT INTO {} (log, kind, item, owner) VALUES (?, ?, ?, ?) IF NOT EXISTS USING TTL ?", self.name)
    }

    /// A lease row extended if its owner is still the one given (values:
    /// TTL, owner, log, kind, item, owner).
    fn renew_cql(&self) -> String {
        format!("UPDATE {} USING TTL ? SET owner = ? WHERE log = ? AND kind = ? AND item = ? IF owner = ?", self.name)
    }

    /// A lease row deleted if its owner is the one given (values: log,
    /// kind, item, owner).
    fn release_cql(&self) -> String {
        format!("DELETE FROM {} WHERE log = ? AND kind = ? AND item = ? IF owner = ?", self.name)
    }

    fn statement(&self, text: String) -> Statement {
        Statement::new(text).with_consistency(Consistency::Quorum)
    }

    /// Says that `member` reads `log`, for `ttl` seconds.
    pub async fn heartbeat(&self, log: &str, member: &str, ttl: i32) -> Result<(), LeaseError> {
        let insert = self
            .statement(format!("INSERT INTO {} (log, kind, item, owner) VALUES (?, ?, ?, ?) USING TTL ?", self.name));
        self.session.execute(&insert.with_idempotent(true), (log, MEMBER, member, member, ttl)).await?;
        Ok(())
    }

    /// Says that `member` no longer reads `log`.
    pub async fn leave(&self, log: &str, member: &str) -> Result<(), LeaseError> {
        let delete = self.statement(format!("DELETE FROM {} WHERE log = ? AND kind = ? AND item = ?", self.name));
        self.session.execute(&delete.with_idempotent(true), (log, MEMBER, member)).await?;
        Ok(())
    }

    /// The members reading `log`, in name order.
    pub async fn members(&self, log: &str) -> Result<Vec<String>, LeaseError> {
        let select = self.statement(format!("SELECT item FROM {} WHERE log = ? AND kind = ?", self.name));
        let mut pages = self.session.execute_pages(select.with_idempotent(true), (log.to_owned(), MEMBER));
        let mut members = Vec::new();
        while let Some(page) = pages.next_page().await {
            members_of_page(&page?, &mut members)?;
        }
        members.sort();
        Ok(members)
    }

    /// The leases of `log`: group → holder. Rows whose item is not a
    /// stream id are ignored.
    pub async fn leases(&self, log: &str) -> Result<HashMap<StreamId, String>, LeaseError> {
        let select = self.statement(format!("SELECT item, owner FROM {} WHERE log = ? AND kind = ?", self.name));
        let mut pages = self.session.execute_pages(select.with_idempotent(true), (log.to_owned(), LEASE));
        let mut leases = HashMap::new();
        while let Some(page) = pages.next_page().await {
            leases_of_page(&page?, &mut leases)?;
        }
        Ok(leases)
    }

    /// Takes the lease of `group` for `member` if nobody holds it.
    pub async fn claim(&self, log: &str, group: StreamId, member: &str, ttl: i32) -> Result<bool, LeaseError> {
        let insert = self.statement(self.claim_cql());
        let result = self.session.execute(&insert, (log, LEASE, group.to_string().as_str(), member, ttl)).await?;
        was_applied(&result)
    }

    /// Extends the lease of `group` by `ttl` if `member` still holds it.
    pub async fn renew(&self, log: &str, group: StreamId, member: &str, ttl: i32) -> Result<bool, LeaseError> {
        let update = self.statement(self.renew_cql());
        let result =
            self.session.execute(&update, (ttl, member, log, LEASE, group.to_string().as_str(), member)).await?;
        was_applied(&result)
    }

    /// Gives the lease of `group` up if `member` holds it.
    pub async fn release(&self, log: &str, group: StreamId, member: &str) -> Result<bool, LeaseError> {
        let delete = self.statement(self.release_cql());
        let result = self.session.execute(&delete, (log, LEASE, group.to_string().as_str(), member)).await?;
        was_applied(&result)
    }

    /// Takes the leases of those of `groups` that nobody holds, for
    /// `member`: one conditional batch per [`BATCH_ROWS`] groups (one Paxos
    /// round), again without the groups it names as held when it is
    /// refused. The groups taken, in order.
    pub async fn claim_all(
        &self,
        log: &str,
        groups: &[StreamId],
        member: &str,
        ttl: i32,
    ) -> Result<Vec<StreamId>, LeaseError> {
        let insert = Statement::new(self.claim_cql());
        let values = |item: String| (log.to_owned(), LEASE, item, member.to_owned(), ttl);
        self.conditional(&insert, groups, values, |owner| owner.is_none()).await
    }

    /// Extends by `ttl` the leases of those of `groups` that `member` still
    /// holds: one conditional batch per [`BATCH_ROWS`] groups, again
    /// without the groups it names as lost when it is refused. The groups
    /// renewed, in order; the others are no longer `member`'s.
    pub async fn renew_all(
        &self,
        log: &str,
        groups: &[StreamId],
        member: &str,
        ttl: i32,
    ) -> Result<Vec<StreamId>, LeaseError> {
        Ok(self.renew_rows(log, groups, member, None, ttl).await?.0)
    }

    /// Gives up the leases of those of `groups` that `member` holds, in
    /// conditional batches as [`LeaseTable::renew_all`]. The groups
    /// released.
    pub async fn release_all(&self, log: &str, groups: &[StreamId], member: &str) -> Result<Vec<StreamId>, LeaseError> {
        let delete = Statement::new(self.release_cql());
        let values = |item: String| (log.to_owned(), LEASE, item, member.to_owned());
        self.conditional(&delete, groups, values, |owner| owner == Some(member)).await
    }

    /// `statement` for each of `groups` (its values from the group's item),
    /// as conditional batches of at most [`BATCH_ROWS`] rows of the lease
    /// partition. A batch applies whole or not at all: a refused one is
    /// sent again without the groups whose current owner, as the answer
    /// names it, fails `keeps` (a row the answer does not name has no
    /// owner). The groups applied.
    async fn conditional<V: shardwise::protocol::types::ser::SerializeValues>(
        &self,
        statement: &Statement,
        groups: &[StreamId],
        values: impl Fn(String) -> V,
        keeps: impl Fn(Option<&str>) -> bool,
    ) -> Result<Vec<StreamId>, LeaseError> {
        let items: Vec<String> = groups.iter().map(StreamId::to_string).collect();
        let applied = self.conditional_items(statement, &items, values, |_, owner| keeps(owner)).await?;
        Ok(groups.iter().zip(&items).filter(|(_, i)| applied.contains(*i)).map(|(g, _)| *g).collect())
    }

    /// [`LeaseTable::conditional`] on the rows named by `items`; `keeps`
    /// sees the item and its current owner. The items applied.
    async fn conditional_items<V: shardwise::protocol::types::ser::SerializeValues>(
        &self,
        statement: &Statement,
        items: &[String],
        values: impl Fn(String) -> V,
        keeps: impl Fn(&str, Option<&str>) -> bool,
    ) -> Result<HashSet<String>, LeaseError> {
        let mut applied = HashSet::with_capacity(items.len());
        if items.is_empty() {
            return Ok(applied);
        }
        // Prepared (once per session: it caches them), so that the server
        // parses the statement once, not once per row of every batch.
        let statement = self.session.prepare(statement.clone()).await?;
        for chunk in items.chunks(BATCH_ROWS) {
            let mut left = chunk.to_vec();
            while !left.is_empty() {
                let batch = Batch::logged(vec![statement.clone(); left.len()]).with_consistency(Consistency::Quorum);
                let result =
                    self.session.execute(&batch, left.iter().map(|i| values(i.clone())).collect::<Vec<_>>()).await?;
                if was_applied(&result)? {
                    applied.extend(left);
                    break;
                }
                let owners = batch_owners(&result)?;
                let before = left.len();
                left.retain(|i| keeps(i, owners.get(i).and_then(|o| o.as_deref())));
                if left.len() == before {
                    // Refused, yet every condition holds by the answer:
                    // sending it again would be refused again.
                    return Err(LeaseError::Refused);
                }
            }
        }
        Ok(applied)
    }

    /// Records `grouping` as how the readers of `log` group its streams,
    /// for `ttl` seconds, unless one is recorded already: the grouping
    /// recorded (`grouping` itself if none was). Readers that group a log
    /// otherwise would read one grouping's progress as another's: see
    /// [`crate::CdcError::Grouping`].
    pub async fn record_grouping(&self, log: &str, grouping: &str, ttl: i32) -> Result<String, LeaseError> {
        let insert = self.statement(self.claim_cql());
        // Refused, and gone since (it expired in between): taken again, a
        // few times at most.
        for _ in 0..GROUPING_ATTEMPTS {
            let result = self.session.execute(&insert, (log, LEASE, GROUPING, grouping, ttl)).await?;
            if was_applied(&result)? {
                return Ok(grouping.to_owned());
            }
            if let Some(recorded) = batch_owners(&result)?.remove(GROUPING).flatten() {
                return Ok(recorded);
            }
        }
        Err(LeaseError::Refused)
    }

    /// [`LeaseTable::renew_all`] in the batch that also keeps `grouping`
    /// recorded for another `ttl`: the groups renewed, and whether the
    /// grouping still is the one recorded (`false`: it expired, or another
    /// is recorded; see [`LeaseTable::record_grouping`]).
    pub async fn renew_with_grouping(
        &self,
        log: &str,
        groups: &[StreamId],
        member: &str,
        grouping: &str,
        ttl: i32,
    ) -> Result<(Vec<StreamId>, bool), LeaseError> {
        self.renew_rows(log, groups, member, Some(grouping), ttl).await
    }

    /// The renewals of `groups` for `member`, and with `grouping` its row
    /// too (first, in the same batch): the groups renewed, and whether the
    /// grouping row was (`true` without one).
    async fn renew_rows(
        &self,
        log: &str,
        groups: &[StreamId],
        member: &str,
        grouping: Option<&str>,
        ttl: i32,
    ) -> Result<(Vec<StreamId>, bool), LeaseError> {
        let update = Statement::new(self.renew_cql());
        let owner = |item: &str| match grouping {
            Some(grouping) if item == GROUPING => grouping.to_owned(),
            _ => member.to_owned(),
        };
        let values = |item: String| (ttl, owner(&item), log.to_owned(), LEASE, item.clone(), owner(&item));
        let items: Vec<String> =
            grouping.map(|_| GROUPING.to_owned()).into_iter().chain(groups.iter().map(StreamId::to_string)).collect();
        let applied =
            self.conditional_items(&update, &items, values, |item, current| current == Some(&owner(item))).await?;
        let renewed = groups.iter().filter(|g| applied.contains(&g.to_string())).copied().collect();
        Ok((renewed, grouping.is_none() || applied.contains(GROUPING)))
    }
}

/// How many times [`LeaseTable::record_grouping`] tries to record a
/// grouping whose row was refused and then found gone.
const GROUPING_ATTEMPTS: usize = 3;

/// The most lease rows one conditional batch writes. A batch is one Paxos
/// round whatever its size; this bounds the size of one mutation.
pub const BATCH_ROWS: usize = 256;

/// Appends the members of a page of `SELECT item` of the member partition.
pub(crate) fn members_of_page(page: &shardwise::QueryResult, out: &mut Vec<String>) -> Result<(), LeaseError> {
    for row in page.rows::<(&str,)>()? {
        out.push(row.map_err(RowsAccessError::from)?.0.to_owned());
    }
    Ok(())
}

/// Adds the leases of a page of `SELECT item, owner` of the lease
/// partition: group → holder. Rows whose item is not a stream id (the
/// grouping's) or that have no owner are passed over.
pub(crate) fn leases_of_page(
    page: &shardwise::QueryResult,
    out: &mut HashMap<StreamId, String>,
) -> Result<(), LeaseError> {
    for row in page.rows::<(&str, Option<&str>)>()? {
        let (item, owner) = row.map_err(RowsAccessError::from)?;
        if let (Ok(group), Some(owner)) = (item.parse::<StreamId>(), owner) {
            out.insert(group, owner.to_owned());
        }
    }
    Ok(())
}

/// Whether a conditional write was applied (its `[applied]` column).
pub(crate) fn was_applied(result: &shardwise::QueryResult) -> Result<bool, LeaseError> {
    result.applied().ok_or(LeaseError::NotConditional)
}

/// The owners that a refused conditional batch names, by group: Cassandra
/// answers the rows that exist, in clustering order; ScyllaDB one row per
/// statement, `null` where the row does not exist. Either way a group's
/// row is found by its `item`.
pub(crate) fn batch_owners(result: &shardwise::QueryResult) -> Result<HashMap<String, Option<String>>, LeaseError> {
    use shardwise::protocol::types::CqlValue;
    let specs = result.column_specs().ok_or(LeaseError::NotConditional)?;
    let column = |name: &str| specs.iter().position(|s| s.name == name);
    let (Some(item), owner) = (column("item"), column("owner")) else {
        return Ok(HashMap::new());
    };
    let text = |v: Option<&Option<CqlValue>>| match v {
        Some(Some(CqlValue::Text(t) | CqlValue::Ascii(t))) => Some(t.clone()),
        _ => None,
    };
    let mut owners = HashMap::new();
    for row in result.rows::<shardwise::protocol::types::de::Row>()? {
        let row = row.map_err(RowsAccessError::from)?;
        let Some(item) = text(row.columns.get(item)) else { continue };
        owners.insert(item, owner.and_then(|o| text(row.columns.get(o))));
    }
    Ok(owners)
}

/// How many of `groups` groups `member` should hold when `members` (in name
/// order) share them: `⌈G/M⌉` for the first `G mod M` members, `⌊G/M⌋`
/// for the others. A member missing from the list counts as the last.
pub fn quota(member: &str, members: &[String], groups: usize) -> usize {
    let mut names: BTreeSet<&str> = members.iter().map(String::as_str).collect();
    names.insert(member);
    let count = names.len();
    let rank = names.iter().position(|m| *m == member).unwrap_or(count - 1);
    groups / count + usize::from(rank < groups % count)
}

/// What a member does on a heartbeat to reach its quota.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Moves {
    /// Free groups to try to claim, in order (more than needed: a claim may
    /// be lost to another member); stop after [`Moves::wanted`] succeeded.
    pub claim: Vec<StreamId>,
    /// How many claims reach the quota.
    pub wanted: usize,
    /// Held groups to release.
    pub release: Vec<StreamId>,
}

/// The moves of `member` given the current generation's `groups` (in
/// order), the lease table's `leases` and the `members`.
pub fn moves(member: &str, members: &[String], groups: &[StreamId], leases: &HashMap<StreamId, String>) -> Moves {
    let quota = quota(member, members, groups.len());
    let held: Vec<StreamId> = groups.iter().copied().filter(|g| leases.get(g).is_some_and(|o| o == member)).collect();
    if held.len() > quota {
        return Moves { claim: Vec::new(), wanted: 0, release: held[quota..].to_vec() };
    }
    if held.len() == quota {
        return Moves::default();
    }
    // Members start looking at different places, so that they rarely race
    // for the same free group.
    let rank = members.iter().position(|m| m == member).unwrap_or(members.len());
    let start = if groups.is_empty() { 0 } else { rank * groups.len() / (members.len().max(rank + 1)) };
    let claim = groups[start..].iter().chain(&groups[..start]).copied().filter(|g| !leases.contains_key(g)).collect();
    Moves { claim, wanted: quota - held.len(), release: Vec::new() }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("m{i}")).collect()
    }

    fn group(n: u8) -> StreamId {
        StreamId::from_bytes([n; 16])
    }

    #[test]
    fn quotas_add_up_and_differ_by_at_most_one() {
        for members in 1..6 {
            for groups in 0..40 {
                let all = names(members);
                let quotas: Vec<usize> = all.iter().map(|m| quota(m, &all, groups)).collect();
                assert_eq!(quotas.iter().sum::<usize>(), groups, "{members} members, {groups} groups");
                assert!(quotas.iter().max().unwrap() - quotas.iter().min().unwrap() <= 1);
                assert!(*quotas.iter().max().unwrap() <= groups.div_ceil(members));
            }
        }
        assert_eq!(quota("new", &names(2), 16), 5, "a member not listed yet counts itself");
    }

    /// Members that each apply their moves on a heartbeat, one after the
    /// other, reach their quotas; a member that joins takes its share from
    /// the others, a member that leaves hands its groups over.
    #[test]
    fn heartbeats_converge_to_the_quotas() {
        let groups: Vec<StreamId> = (0..16).map(group).collect();
        let mut leases: HashMap<StreamId, String> = HashMap::new();
        let settle = |members: &[String], leases: &mut HashMap<StreamId, String>| {
            for _ in 0..4 {
                for m in members {
                    let mv = moves(m, members, &groups, leases);
                    for g in &mv.release {
                        leases.remove(g);
                    }
                    for g in mv.claim.iter().take(mv.wanted) {
                        leases.insert(*g, m.clone());
                    }
                }
            }
            let mut held: Vec<usize> = members.iter().map(|m| leases.values().filter(|o| *o == m).count()).collect();
            held.sort();
            held
        };
        let mut members = names(3);
        assert_eq!(settle(&members, &mut leases), vec![5, 5, 6]);
        members.push("m3".into());
        assert_eq!(settle(&members, &mut leases), vec![4, 4, 4, 4]);
        // m1 dies: its leases expire.
        leases.retain(|_, o| o != "m1");
        members.retain(|m| m != "m1");
        assert_eq!(settle(&members, &mut leases), vec![5, 5, 6]);
        assert_eq!(leases.len(), 16);
    }

    #[test]
    fn moves_release_extras_and_claim_only_free_groups() {
        let groups: Vec<StreamId> = (0..4).map(group).collect();
        let members = names(2);
        let mut leases: HashMap<StreamId, String> = groups.iter().map(|g| (*g, "m0".to_string())).collect();
        assert_eq!(moves("m0", &members, &groups, &leases).release, vec![group(2), group(3)]);
        let none_free = Moves { claim: vec![], wanted: 2, release: vec![] };
        assert_eq!(moves("m1", &members, &groups, &leases), none_free, "nothing is free: two wanted, none to try");
        leases.remove(&group(3));
        let mv = moves("m1", &members, &groups, &leases);
        assert_eq!((mv.claim, mv.wanted), (vec![group(3)], 2), "two wanted, one free");
    }

    /// Timeouts, unavailability, overload and lost connections are tried
    /// again at build; a table that does not exist is not.
    #[test]
    fn transient_lease_errors_are_told_apart() {
        use shardwise::protocol::response::{ErrorKind, ErrorResponse};
        let db =
            |code: i32, kind: ErrorKind| LeaseError::Query(ErrorResponse { code, message: String::new(), kind }.into());
        assert!(db(0x1001, ErrorKind::Overloaded).is_transient());
        assert!(db(0x1002, ErrorKind::IsBootstrapping).is_transient());
        assert!(LeaseError::Timeout(Duration::from_secs(1)).is_transient());
        assert!(LeaseError::Query(ExecutionError::NoConnection).is_transient());
        let planned = "127.0.0.1:9042".parse().expect("an address");
        assert!(
            LeaseError::Query(ExecutionError::PlanUnavailable { last: planned }).is_transient(),
            "a session whose policy plans only nodes that are down (a single target) waits as for no connection"
        );
        assert!(LeaseError::Query(ExecutionError::Timeout(Duration::from_secs(1))).is_transient());
        assert!(!db(0x2200, ErrorKind::ServerError).is_transient(), "invalid: no such table");
        assert!(!db(0x0000, ErrorKind::ServerError).is_transient());
        assert!(!LeaseError::NotConditional.is_transient());
        assert!(!LeaseError::Refused.is_transient());
    }

    #[test]
    fn settings_are_checked() {
        let skew = Duration::from_millis(500);
        let timing = |ttl: u64, heartbeat_ms: u64| {
            check(Duration::from_secs(ttl), Duration::from_millis(heartbeat_ms), skew, "me")
        };
        assert_eq!(timing(3, 500), Ok(3));
        assert!(timing(0, 500).is_err());
        assert!(timing(3, 3000).is_err());
        assert!(timing(3, 1500).is_err(), "3 s less 1 s of rounding and 0.5 s of skew leave 1.5 s");
        assert!(timing(3, 0).is_err());
        assert!(check(Duration::from_secs(3), Duration::from_secs(1), skew, "").is_err());
        let held = held_for(Duration::from_millis(10_900), skew);
        assert_eq!(held, Duration::from_millis(8500), "whole seconds, less rounding and skew");
        assert_eq!(query_bound(Duration::from_secs(2), held), Duration::from_secs(4), "twice the heartbeat");
        assert_eq!(query_bound(Duration::from_secs(5), held), held, "never as long as a lease is held");
    }
}
