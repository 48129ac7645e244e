//! The reader: worker threads around the [`Planner`].
//!
//! `workers` OS threads each run a current-thread tokio runtime. Streams are
//! grouped by the shard holding them (the CDC partitioner gives a stream's
//! token; the shard count of its vnode's owner, which the generation itself
//! records as the vnode's number of streams, gives its shard) in groups of
//! at most 64 ([`CdcReaderBuilder::streams_per_query`]), a pure function of
//! the generation, so that every reader names the same groups whatever
//! nodes it is connected to, on nodes of different shard counts too; a
//! group belongs to the worker of its shard (`shard % workers`). Which replica serves a window is decided per
//! window. A worker opens its own connections — one per (node, shard) it
//! reads, through Scylla's shard-aware port when the node offers it — so a window's query, its
//! response buffer, the row views and the consumer all live on one thread,
//! next to the shard that holds the rows. Each window of a group is one
//! prepared, paged query `"cdc$stream_id" IN ? AND "cdc$time" >=
//! minTimeuuid(?) AND "cdc$time" < minTimeuuid(?)` whose keys all belong to
//! the shard it is sent to (unlike an `IN` over a vnode's streams, which
//! spans every shard and is served by whichever one receives it). A worker
//! (`worker`) asks for a window's next page before it consumes the current
//! one, and keeps several windows requested at once, as many as pay
//! (`limit`: more while its rate of answers rises and their latency holds).
//!
//! Errors reading a window are retried with exponential backoff (100 ms up
//! to the sleep interval); a failed checkpoint save is made again later
//! (five failures in a row stop the reader); consumer errors and
//! unrecoverable errors stop the reader, and [`CdcReader::join`] returns
//! them. Every log query has a
//! timeout ([`CdcReaderBuilder::query_timeout`]): a shard that stops
//! answering would otherwise block its worker, and with it the barrier
//! between generations, forever. A timed-out query is retried on a new
//! connection; a window that keeps timing out stops the reader with
//! [`CdcError::QueryTimeout`]. A window read again after a failure on a
//! later page skips, in each stream, as many rows as its earlier pages
//! already delivered (a stream's rows come in clustering order), so a
//! retry never delivers a change twice.
//!
//! A reader that shares its table with other processes
//! ([`CdcReaderBuilder::leases`]) runs one more thread, the lease holder
//! (`holder`), which decides which groups the workers read; `deadlines`
//! says until when each lease is surely held, which the workers check
//! themselves; `saves` counts the checkpoint saves under way, which a
//! handover waits for. `progress` counts what the workers delivered and
//! says how far behind each group is ([`CdcReader::progress`]). A reader
//! whose groups are assigned from outside ([`CdcReaderBuilder::assignment`],
//! a Kafka consumer group's) runs `assigned` in the lease holder's place.
//! `signal` carries the stop and leave signals to whoever sleeps, without
//! losing one raised just before the sleep (loom-checked).
//!
//! The planner's clock (`clock`) is the earlier of the local one and the
//! cluster's, so that a reader whose clock runs ahead of the nodes' does
//! not read windows that writes can still land in.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::sharding::ShardingInfo;
use shardwise::protocol::token::Token;
use shardwise::{Connection, ConnectionError, ExecutionError, Session, Statement};
use tokio::sync::{mpsc, Notify};

use crate::checkpoint::scylla_cdc::ScyllaCdcCheckpoints;
use crate::checkpoint::{CheckpointError, CheckpointStore, GroupProgress};
use crate::consumer::{Change, Consumer, ConsumerError, ConsumerFactory};
use crate::generation::{GenerationError, GenerationSource, VnodeGenerations};
use crate::lease::{LeaseConfig, LeaseError};
use crate::plan::{GroupInfo, PlanError, Planner, PlannerConfig, ReadWindow};
use crate::row::{RowError, SchemaError};
use crate::stream::{StreamGroup, StreamId};
use crate::sync::Mutex;
use crate::tablets::TabletGenerations;
use crate::time::Millis;
use progress::Counters;
pub use progress::{GroupLag, ReaderProgress};

/// What stops a reader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CdcError {
    /// Bad configuration.
    #[error("configuration: {0}")]
    Config(String),
    /// The session knows no node.
    #[error("the session has no connection to any node")]
    NoNodes,
    /// The table to read does not exist.
    #[error("table {keyspace}.{table} does not exist")]
    NoSuchTable {
        /// Its keyspace.
        keyspace: String,
        /// The table.
        table: String,
    },
    /// The table exists but has no CDC log: CDC was never turned on for it.
    #[error(
        "table {keyspace}.{table} has no CDC log (CDC is not enabled: ALTER TABLE {keyspace}.{table} WITH cdc = {{'enabled': true}})"
    )]
    NoCdcLog {
        /// Its keyspace.
        keyspace: String,
        /// The table.
        table: String,
    },
    /// Reading generations failed.
    #[error(transparent)]
    Generation(#[from] GenerationError),
    /// Loading or saving a checkpoint failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A lease request failed.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// A query failed for good.
    #[error(transparent)]
    Execution(#[from] ExecutionError),
    /// A connection could not be opened.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// The consumer failed.
    #[error("consumer: {0}")]
    Consumer(#[from] ConsumerError),
    /// A log row could not be read.
    #[error(transparent)]
    Row(#[from] RowError),
    /// The log table's columns are not a CDC log's.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// The planner refused a call (a bug).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The lease of a group ran out (or the group was taken again) while
    /// one of its windows was read: the window does not count as read.
    /// Handled inside the reader, which leaves the group.
    #[error("the lease of CDC group {0} ran out while one of its windows was read")]
    LeaseLost(StreamId),
    /// A worker thread died.
    #[error("worker thread: {0}")]
    Worker(String),
    /// The readers sharing this table group its streams otherwise (another
    /// [`CdcReaderBuilder::streams_per_query`], or nodes sharded otherwise):
    /// one grouping's leases and progress would be read as another's, and
    /// streams skipped or read twice. Start every reader with the same
    /// settings, or stop them all (the record expires a lease TTL after
    /// the last one) before changing them.
    #[error(
        "the readers sharing this table group its streams as \"{recorded}\", this reader as \"{ours}\": \
         start it with the same settings, or stop every reader before changing them"
    )]
    Grouping {
        /// The grouping recorded beside the leases.
        recorded: String,
        /// This reader's.
        ours: String,
    },
    /// The lease holder's driver answered out of turn (a bug).
    #[error(transparent)]
    Coordination(#[from] crate::coordination::CoordinationError),
    /// Reading a window of the log timed out this many times in a row: the
    /// shard holding its streams is stalled (see
    /// [`CdcReaderBuilder::query_timeout`]).
    #[error("reading a window of the CDC log timed out {attempts} times in a row (each after {timeout:?})")]
    QueryTimeout {
        /// Consecutive attempts that timed out.
        attempts: u32,
        /// The timeout of each.
        timeout: Duration,
    },
}

/// Configures and starts a [`CdcReader`].
///
/// ```no_run
/// # async fn f(session: shardwise::Session) -> Result<(), shardwise_cdc::CdcError> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use shardwise_cdc::{CdcReaderBuilder, CdcRow, Consumer, ConsumerError, GroupInfo};
///
/// let reader = CdcReaderBuilder::new(session, "ks", "t")
///     .window_size(Duration::from_secs(30))
///     .safety_interval(Duration::from_secs(10))
///     .start(std::time::SystemTime::now() - Duration::from_secs(60))
///     .build(Arc::new(|_: &GroupInfo| -> Box<dyn Consumer> {
///         Box::new(|row: CdcRow<'_>| -> Result<(), ConsumerError> {
///             println!("{:?} at {:?}", row.operation(), row.time_micros());
///             Ok(())
///         })
///     }))
///     .await?;
/// reader.stop();
/// reader.join().await?;
/// # Ok(()) }
/// ```
pub struct CdcReaderBuilder {
    session: Session,
    keyspace: String,
    table: String,
    start: Option<Millis>,
    end: Option<Millis>,
    duration: Option<Duration>,
    window: Duration,
    safety: Duration,
    cluster_clock: bool,
    sleep: Duration,
    poll: Duration,
    page_size: i32,
    workers: usize,
    consistency: Consistency,
    bypass_cache: bool,
    checkpoints: Option<(Arc<dyn CheckpointStore>, Duration)>,
    generations: Option<Arc<dyn GenerationSource>>,
    query_timeout: Duration,
    query_attempts: u32,
    streams_per_query: usize,
    windows_in_flight: InFlight,
    leases: Option<LeaseConfig>,
    /// `scylla-cdc`'s checkpoint table to take over from (keyspace, table).
    scylla_cdc: Option<(String, String)>,
    assignment: Option<(Arc<dyn Assignment>, Duration)>,
}

/// Windows in flight per worker, as configured.
#[derive(Debug, Clone, Copy)]
enum InFlight {
    Fixed(usize),
    Adaptive { max: usize },
}

/// Where an adaptive worker starts, and its default ceiling.
const START_IN_FLIGHT: usize = 4;
const DEFAULT_MAX_IN_FLIGHT: usize = 64;

impl InFlight {
    fn limit(self) -> limit::InFlightLimit {
        match self {
            InFlight::Fixed(n) => limit::InFlightLimit::fixed(n),
            InFlight::Adaptive { max } => limit::InFlightLimit::adaptive(START_IN_FLIGHT, max),
        }
    }
}

impl std::fmt::Debug for CdcReaderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CdcReaderBuilder").field("keyspace", &self.keyspace).field("table", &self.table).finish()
    }
}

impl CdcReaderBuilder {
    /// A reader of the log of `keyspace.table` (the base table's name).
    /// Defaults: start now, no end, window 60 s, safety interval 30 s,
    /// sleep 10 s, page size 5,000, one worker per available core, reads at
    /// `LOCAL_QUORUM` with `BYPASS CACHE`, no checkpoints, generations from
    /// `system_distributed`, each log query bounded by 10 s and a window
    /// given up after 10 timeouts in a row.
    pub fn new(session: Session, keyspace: &str, table: &str) -> Self {
        CdcReaderBuilder {
            session,
            keyspace: keyspace.into(),
            table: table.into(),
            start: None,
            end: None,
            duration: None,
            window: Duration::from_secs(60),
            safety: Duration::from_secs(30),
            cluster_clock: true,
            sleep: Duration::from_secs(10),
            poll: Duration::from_secs(10),
            page_size: 5000,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            consistency: Consistency::LocalQuorum,
            bypass_cache: true,
            checkpoints: None,
            generations: None,
            query_timeout: Duration::from_secs(10),
            query_attempts: 10,
            streams_per_query: MAX_STREAMS_PER_QUERY,
            windows_in_flight: InFlight::Adaptive { max: DEFAULT_MAX_IN_FLIGHT },
            leases: None,
            assignment: None,
            scylla_cdc: None,
        }
    }

    /// Reads changes from this time on.
    pub fn start(mut self, at: SystemTime) -> Self {
        self.start = Some(Millis::from_system_time(at));
        self
    }

    /// Stops after the changes before this time.
    pub fn end(mut self, at: SystemTime) -> Self {
        self.end = Some(Millis::from_system_time(at));
        self
    }

    /// With only a start or only an end: the length of the time range.
    pub fn duration(mut self, d: Duration) -> Self {
        self.duration = Some(d);
        self
    }

    /// The largest window one query reads.
    pub fn window_size(mut self, d: Duration) -> Self {
        self.window = d;
        self
    }

    /// How far behind the clock reading stays (default 30 s). A change's
    /// `cdc$time` is its write's timestamp, and its window is read no
    /// earlier than this interval after it: a write applied later than that
    /// (a slow or retried write, a client timestamp set in the past, clock
    /// skew between nodes) may be missed, as with any ScyllaDB CDC reader.
    /// Keep it above the writes' timeout.
    pub fn safety_interval(mut self, d: Duration) -> Self {
        self.safety = d;
        self
    }

    /// Hold the planner's clock to the cluster's (the default: the earlier
    /// of this machine's clock and the time a node gives, read every 10 s).
    /// Off, this machine's clock alone, as `scylla-cdc` reads: a clock
    /// ahead of the nodes' by more than the safety interval then reads
    /// windows that writes still land in, and loses those writes
    /// (`cdc-tools/tests/printer.rs` shows both).
    pub fn cluster_clock(mut self, on: bool) -> Self {
        self.cluster_clock = on;
        self
    }

    /// Pause between windows once caught up.
    pub fn sleep_interval(mut self, d: Duration) -> Self {
        self.sleep = d;
        self
    }

    /// How often to look for a new generation.
    pub fn generation_poll_interval(mut self, d: Duration) -> Self {
        self.poll = d;
        self
    }

    /// Rows per page.
    pub fn page_size(mut self, rows: i32) -> Self {
        self.page_size = rows.max(1);
        self
    }

    /// Worker threads.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// Consistency of log reads (choose it so that reads and the writers'
    /// writes overlap).
    pub fn consistency(mut self, c: Consistency) -> Self {
        self.consistency = c;
        self
    }

    /// Whether log queries say `BYPASS CACHE` (Scylla-only syntax).
    pub fn bypass_cache(mut self, on: bool) -> Self {
        self.bypass_cache = on;
        self
    }

    /// Saves progress to `store` every `interval` and resumes from it.
    pub fn checkpoints(mut self, store: Arc<dyn CheckpointStore>, interval: Duration) -> Self {
        self.checkpoints = Some((store, interval));
        self
    }

    /// How long one query of the log (a page of a window, or preparing it
    /// on a new connection) may take (default 10 s). A query that times out
    /// is retried, on a new connection, with the backoff of other errors: a
    /// stalled shard must not block its worker and the generation barrier.
    pub fn query_timeout(mut self, d: Duration) -> Self {
        self.query_timeout = d;
        self
    }

    /// After this many timeouts in a row reading one window (default 10),
    /// the reader stops with [`CdcError::QueryTimeout`].
    pub fn query_attempts(mut self, n: u32) -> Self {
        self.query_attempts = n.max(1);
        self
    }

    /// The most streams one log query reads (default 64). The streams of
    /// one (node, shard) are read in groups of this size: smaller groups
    /// mean more, smaller queries, and finer shares between readers that
    /// share the table through [leases](Self::leases).
    pub fn streams_per_query(mut self, n: usize) -> Self {
        self.streams_per_query = n.clamp(1, MAX_STREAMS_PER_QUERY);
        self
    }

    /// Exactly `n` windows (at least 1) requested at once per worker, each
    /// of another group, instead of the count each worker finds itself (see
    /// [`max_windows_in_flight`](Self::max_windows_in_flight)). Rows are
    /// consumed one window at a time either way, on the worker's thread.
    pub fn windows_in_flight(mut self, n: usize) -> Self {
        self.windows_in_flight = InFlight::Fixed(n.max(1));
        self
    }

    /// The most windows a worker may have requested at once (default 64;
    /// at least 1). The shards serve the next windows while the worker's
    /// consumers take the rows of one; each worker finds how many pay by
    /// itself, starting from 4: more while its rate of answers rises and
    /// their latency holds, fewer when answers queue, half as many on a
    /// timeout or an overload error.
    pub fn max_windows_in_flight(mut self, n: usize) -> Self {
        self.windows_in_flight = InFlight::Adaptive { max: n.max(1) };
        self
    }

    /// Shares the table with other readers (other processes, on any
    /// machine) through the leases of `config`: each reads only the groups
    /// it holds a lease of, groups are rebalanced as readers join and
    /// leave, and the groups of a reader that died are taken over from its
    /// last checkpoint once its leases expire (see [`crate::lease`]).
    /// Needs [checkpoints](Self::checkpoints) in a store all the readers
    /// share, such as a [`crate::checkpoint::TableCheckpointStore`].
    pub fn leases(mut self, config: LeaseConfig) -> Self {
        self.leases = Some(config);
        self
    }

    /// Shares the table with other readers as `assignment` says (a Kafka
    /// consumer group's assignment, say) instead of through leases: each
    /// reads only the groups assigned to it, follows the assignment every
    /// `interval`, fences each group it is given in the checkpoint store
    /// and reads it from the progress found there (see [`Assignment`]).
    /// Needs [checkpoints](Self::checkpoints) in a store all the readers
    /// share; not with [leases](Self::leases).
    pub fn assignment(mut self, assignment: Arc<dyn Assignment>, interval: Duration) -> Self {
        self.assignment = Some((assignment, interval.max(Duration::from_millis(10))));
        self
    }

    /// Takes over from `scylla-cdc`: when the reader has no checkpoint of
    /// its own yet (no [checkpoint store](Self::checkpoints), or nothing
    /// saved in it for this table), it resumes each stream where
    /// `scylla-cdc` saved it in its checkpoint table `keyspace.table` (see
    /// [`crate::checkpoint::scylla_cdc`]): each group from the earliest of
    /// its streams, and every stream's rows before its own saved time
    /// skipped, so nothing `scylla-cdc` saved as read is read again and
    /// nothing after it is missed. Streams it saved nothing for start at the
    /// configured [start](Self::start). Stop the `scylla-cdc` reader first:
    /// its checkpoint is read once, as the reader is built.
    pub fn resume_from_scylla_cdc(mut self, keyspace: &str, table: &str) -> Self {
        self.scylla_cdc = Some((keyspace.into(), table.into()));
        self
    }

    /// Where generations come from (default: [`TabletGenerations`] for a
    /// keyspace with tablets, else [`VnodeGenerations`]).
    pub fn generation_source(mut self, source: Arc<dyn GenerationSource>) -> Self {
        self.generations = Some(source);
        self
    }

    /// The base table and its log exist (`system_schema.tables`).
    async fn check_table(&self) -> Result<(), CdcError> {
        let query =
            Statement::new("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?")
                .with_idempotent(true)
                .sent_as_text();
        let exists = |table: String| {
            let query = query.clone();
            async move {
                let result = self.session.execute(&query, (self.keyspace.as_str(), table.as_str())).await?;
                let row = result.first_row::<(&str,)>();
                row.map(|r| r.is_some()).map_err(|e| CdcError::Config(format!("reading system_schema.tables: {e}")))
            }
        };
        let (keyspace, table) = (self.keyspace.clone(), self.table.clone());
        if !exists(self.table.clone()).await? {
            return Err(CdcError::NoSuchTable { keyspace, table });
        }
        if !exists(format!("{}_scylla_cdc_log", self.table)).await? {
            return Err(CdcError::NoCdcLog { keyspace, table });
        }
        Ok(())
    }

    fn range(&self) -> Result<(Millis, Millis), CdcError> {
        let now = Millis::from_system_time(SystemTime::now());
        Ok(match (self.start, self.end, self.duration) {
            (Some(s), Some(e), _) => (s, e),
            (Some(s), None, Some(d)) => (s, s.saturating_add(d)),
            (None, Some(e), Some(d)) => (e.saturating_sub(d), e),
            (Some(s), None, None) => (s, Millis::MAX),
            (None, Some(e), None) => (now, e),
            (None, None, Some(d)) => (now, now.saturating_add(d)),
            (None, None, None) => (now, Millis::MAX),
        })
    }

    /// Starts the workers; rows go to consumers made by `factory`. Fails
    /// with [`CdcError::NoSuchTable`] or [`CdcError::NoCdcLog`] when the
    /// table cannot be read.
    pub async fn build(self, factory: Arc<dyn ConsumerFactory>) -> Result<CdcReader, CdcError> {
        let (start, end) = self.range()?;
        if end < start {
            return Err(CdcError::Config(format!("end {end:?} is before start {start:?}")));
        }
        let lease_ttl = match &self.leases {
            None => None,
            Some(_) if self.checkpoints.is_none() => {
                return Err(CdcError::Config("leases need a checkpoint store that all readers share".into()));
            }
            Some(config) => Some(config.check().map_err(CdcError::Config)?),
        };
        match (&self.assignment, &self.leases, &self.checkpoints) {
            (Some(_), Some(_), _) => {
                return Err(CdcError::Config("groups come from leases or from an assignment, not both".into()));
            }
            (Some(_), None, None) => {
                return Err(CdcError::Config("an assignment needs a checkpoint store that all readers share".into()));
            }
            _ => {}
        }
        self.check_table().await?;
        let sharding = self.session.connections().iter().find_map(|c| c.sharding().copied());
        let source: Arc<dyn GenerationSource> = match self.generations {
            Some(s) => s,
            None if crate::tablets::uses_tablets(&self.session, &self.keyspace).await? => {
                Arc::new(TabletGenerations::new(self.session.clone(), &self.keyspace, &self.table))
            }
            None => Arc::new(VnodeGenerations::new(self.session.clone())),
        };
        let shards = Shards { per_vnode: source.groups_are_vnodes(), sharding };
        let workers = self.workers;
        let mut config = PlannerConfig::new(start);
        config.end = end;
        config.window = self.window;
        config.safety_interval = self.safety;
        config.sleep_interval = self.sleep;
        config.generation_poll_interval = self.poll;
        config.checkpoint_interval = self.checkpoints.as_ref().map(|c| c.1);
        config.workers = workers;
        let mut planner = Planner::new(config)?.with_assignment(move |g: &StreamGroup| shards.worker_of(g, workers));
        if self.leases.is_some() || self.assignment.is_some() {
            planner = planner.with_leases();
        }
        let log = format!("{}_scylla_cdc_log", self.table);
        let checkpoint_key = crate::checkpoint::log_name(&self.keyspace, &self.table);
        let mut restored = false;
        if let Some((store, _)) = &self.checkpoints {
            if let Some(cp) = store.load(&checkpoint_key).await? {
                planner.restore(&cp)?;
                restored = true;
            }
        }
        let mut stream_starts = None;
        if let (Some((keyspace, table)), false) = (&self.scylla_cdc, restored) {
            if let Some(saved) = ScyllaCdcCheckpoints::load(&self.session, keyspace, table).await? {
                tracing::info!(
                    generation = ?saved.generation,
                    streams = saved.streams.len(),
                    "resuming from scylla-cdc's checkpoints"
                );
                planner.restore_streams(saved.generation, saved.streams.clone())?;
                stream_starts = Some(StreamStarts::new(saved));
            }
        }
        let grouping = shards.grouping(self.streams_per_query);
        if let (Some(config), Some(ttl)) = (&self.leases, lease_ttl) {
            // The first heartbeat: a lease table that cannot be written is
            // an error now, not a reader that never holds a group. A
            // cluster that times out (a node down) is tried again a few
            // times first.
            let recorded = join_lease_table(config, &checkpoint_key, &grouping, ttl).await?;
            if recorded != grouping {
                return Err(CdcError::Grouping { recorded, ours: grouping });
            }
        }
        let text = format!(
            "SELECT * FROM {}.{} WHERE \"cdc$stream_id\" IN ? AND \"cdc$time\" >= minTimeuuid(?) AND \"cdc$time\" < minTimeuuid(?){}",
            quote(&self.keyspace),
            quote(&log),
            if self.bypass_cache { " BYPASS CACHE" } else { "" }
        );
        let shared = Arc::new(Shared {
            planner: Mutex::new(planner),
            source,
            checkpoints: self.checkpoints.map(|c| c.0),
            factory,
            session: self.session,
            keyspace: self.keyspace,
            log: checkpoint_key,
            text,
            page_size: self.page_size,
            consistency: self.consistency,
            max_backoff: self.sleep.max(Duration::from_millis(100)),
            query_timeout: self.query_timeout,
            query_attempts: self.query_attempts,
            streams_per_query: self.streams_per_query,
            windows_in_flight: self.windows_in_flight,
            stopping: Signal::default(),
            saves: Saves::default(),
            written: tokio::sync::Mutex::new(HashMap::new()),
            leaving: Signal::default(),
            deadlines: (self.leases.is_some() || self.assignment.is_some()).then(Deadlines::default),
            assignment: self.assignment.as_ref().map(|(a, _)| a.clone()),
            shards,
            clock: if self.cluster_clock { ClusterClock::default() } else { ClusterClock::local_only() },
            counters: Counters::default(),
            stream_starts,
        });
        if let Err(e) = shared.clock.measure(&shared.session).await {
            // Measured again when the workers look for generations.
            tracing::warn!(error = %e, "reading the cluster's time failed; the local clock is used meanwhile");
        }
        let mut threads = Vec::with_capacity(workers);
        for index in 0..workers {
            let shared = shared.clone();
            let thread = std::thread::Builder::new()
                .name(format!("cdc-worker-{index}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| CdcError::Worker(e.to_string()))?;
                    // A consumer that panics ends its worker with an error, and
                    // the others stop too: the reader must not run on with
                    // groups nobody reads while their leases are renewed.
                    let run =
                        std::panic::AssertUnwindSafe(|| runtime.block_on(Worker::new(index, shared.clone()).run()));
                    let result = std::panic::catch_unwind(run).unwrap_or_else(|panic| {
                        Err(CdcError::Worker(format!("worker {index} panicked: {}", panic_message(panic.as_ref()))))
                    });
                    if result.is_err() {
                        shared.stop();
                    }
                    result
                })
                .map_err(|e| CdcError::Worker(e.to_string()))?;
            threads.push(thread);
        }
        let holder = match (self.leases, lease_ttl, &shared.checkpoints) {
            (Some(config), Some(ttl), Some(store)) => {
                let holder = Holder::new(shared.clone(), store.clone(), config, ttl, grouping);
                let thread = std::thread::Builder::new()
                    .name("cdc-leases".into())
                    .spawn(move || {
                        let runtime = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .map_err(|e| CdcError::Worker(e.to_string()))?;
                        runtime.block_on(holder.run())
                    })
                    .map_err(|e| CdcError::Worker(e.to_string()))?;
                Some(thread)
            }
            _ => None,
        };
        let holder = match (holder, self.assignment, &shared.checkpoints) {
            (None, Some((assignment, interval)), Some(store)) => {
                let assigned = Assigned::new(shared.clone(), store.clone(), assignment, interval);
                let thread = std::thread::Builder::new()
                    .name("cdc-assigned".into())
                    .spawn(move || {
                        let runtime = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .map_err(|e| CdcError::Worker(e.to_string()))?;
                        runtime.block_on(assigned.run())
                    })
                    .map_err(|e| CdcError::Worker(e.to_string()))?;
                Some(thread)
            }
            (holder, ..) => holder,
        };
        Ok(CdcReader { shared, threads, holder, detached: false })
    }

    /// Starts the workers with an asynchronous consumer per stream group
    /// (see [`AsyncConsumer`](crate::AsyncConsumer)): each change is handed
    /// over owned and awaited, in order; a window counts as read (and its
    /// progress is saved) only once the consumer's futures for it have
    /// finished.
    pub async fn build_async<F: crate::AsyncConsumerFactory>(self, factory: F) -> Result<CdcReader, CdcError> {
        let factory = move |group: &GroupInfo| -> Box<dyn Consumer> {
            Box::new(crate::async_consumer::Adapter::new(factory.new_consumer(group)))
        };
        self.build(Arc::new(factory)).await
    }

    /// Starts the workers and returns owned [`Change`]s on a channel of
    /// `capacity` changes: the simple API for code that does not need
    /// borrowed rows. A full channel holds the workers back, and a window's
    /// progress counts as read (and is saved) only once the receiver took
    /// every change of it, so a receiver that dies loses nothing that a
    /// restart would not read again.
    pub async fn build_stream(self, capacity: usize) -> Result<(CdcReader, mpsc::Receiver<Change>), CdcError> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let factory = move |_: &GroupInfo| -> Box<dyn Consumer> { Box::new(ChannelConsumer { tx: tx.clone() }) };
        Ok((self.build(Arc::new(factory)).await?, rx))
    }
}

mod assigned;
mod clock;
mod deadlines;
mod holder;
mod limit;
mod progress;
mod saves;
mod shards;
mod signal;
mod worker;

use clock::ClusterClock;
use deadlines::Deadlines;

use assigned::Assigned;
pub use assigned::Assignment;
use holder::Holder;
use saves::Saves;
use shards::{shard_of, Shards};
use signal::{Signal, Wakes};
use worker::Worker;

/// The consumer of [`CdcReaderBuilder::build_stream`]: owned changes into
/// a bounded channel. It runs on a worker's thread inside its runtime, so it
/// waits for room by sleeping the thread (the worker has nothing else to do
/// then: its rows cannot go anywhere).
struct ChannelConsumer {
    tx: mpsc::Sender<Change>,
}

impl ChannelConsumer {
    const PAUSE: Duration = Duration::from_millis(1);

    fn dropped() -> ConsumerError {
        ConsumerError::failed("the change receiver was dropped")
    }
}

impl Consumer for ChannelConsumer {
    fn consume(&mut self, row: crate::row::CdcRow<'_>) -> Result<(), ConsumerError> {
        let mut change = Change::from_row(&row)?;
        loop {
            match self.tx.try_send(change) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::TrySendError::Full(back)) => {
                    change = back;
                    std::thread::sleep(Self::PAUSE);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return Err(Self::dropped()),
            }
        }
    }

    /// Returns once the receiver took every change sent so far. A receiver
    /// dropped meanwhile frees the room its untaken changes held, so the
    /// channel must still be open once it is empty.
    fn window_end(&mut self, _window: &crate::plan::ReadWindow) -> Result<(), ConsumerError> {
        while self.tx.capacity() < self.tx.max_capacity() && !self.tx.is_closed() {
            std::thread::sleep(Self::PAUSE);
        }
        if self.tx.is_closed() {
            return Err(Self::dropped());
        }
        Ok(())
    }
}

/// Streams per log query: the streams of one (node, shard) are read with
/// one `IN ?` query per window, in chunks of this size.
const MAX_STREAMS_PER_QUERY: usize = 64;

pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Where each stream of a generation taken over from another library
/// starts: its rows before that are skipped (their group may start
/// earlier, at the earliest of its streams).
#[derive(Debug)]
struct StreamStarts {
    generation: Millis,
    starts: HashMap<StreamId, Millis>,
    /// The latest start: windows from there on skip nothing.
    latest: Millis,
}

impl StreamStarts {
    fn new(saved: ScyllaCdcCheckpoints) -> Self {
        let latest = saved.streams.values().max().copied().unwrap_or(Millis::MIN);
        StreamStarts { generation: saved.generation, starts: saved.streams, latest }
    }

    /// The starts that apply to `window`: `None` when it skips nothing.
    fn of(&self, window: &ReadWindow) -> Option<&HashMap<StreamId, Millis>> {
        (window.generation == self.generation && window.from < self.latest).then_some(&self.starts)
    }
}

/// A reader's first heartbeat in the lease table of `config`, and its
/// grouping recorded: the grouping recorded. Transient failures
/// ([`LeaseError::is_transient`]) are tried again, [`JOIN_ATTEMPTS`] times
/// at most, after a backoff that doubles from 250 ms.
async fn join_lease_table(config: &LeaseConfig, log: &str, grouping: &str, ttl: i32) -> Result<String, CdcError> {
    let mut backoff = Duration::from_millis(250);
    let mut attempt = 1;
    loop {
        let joined = async {
            config.table.heartbeat(log, &config.name, ttl).await?;
            config.table.record_grouping(log, grouping, ttl).await
        };
        match joined.await {
            Ok(recorded) => return Ok(recorded),
            Err(e) if e.is_transient() && attempt < JOIN_ATTEMPTS => {
                tracing::warn!(error = %e, attempt, "joining the CDC lease table failed; trying again");
                tokio::time::sleep(backoff).await;
                backoff *= 2;
                attempt += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// How many times a reader tries to join its lease table at build.
const JOIN_ATTEMPTS: u32 = 6;

/// The message a panic was raised with, when it has one.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

struct Shared {
    planner: Mutex<Planner>,
    source: Arc<dyn GenerationSource>,
    checkpoints: Option<Arc<dyn CheckpointStore>>,
    factory: Arc<dyn ConsumerFactory>,
    session: Session,
    keyspace: String,
    /// The checkpoint key: `keyspace.table_scylla_cdc_log`.
    log: String,
    text: String,
    page_size: i32,
    consistency: Consistency,
    max_backoff: Duration,
    query_timeout: Duration,
    query_attempts: u32,
    streams_per_query: usize,
    windows_in_flight: InFlight,
    /// Raised when the workers are to stop; woken also when there may be
    /// work for a sleeping worker (`signal.rs`).
    stopping: Signal<Notify>,
    /// Checkpoint saves under way: a group is handed over only once none
    /// is (one may hold an older progress of it).
    saves: Saves,
    /// This reader's saves, one at a time, with the furthest progress each
    /// group was saved at (per generation): a save that was overtaken
    /// (taken earlier, written later) leaves out what it would move back.
    written: tokio::sync::Mutex<HashMap<(Millis, StreamId), Millis>>,
    /// Raised when the reader is joined or dropped: the lease holder gives
    /// its leases up and ends.
    leaving: Signal<Notify>,
    /// With leases: until when each is surely held.
    deadlines: Option<Deadlines<StreamId>>,
    /// With an assignment: which groups this reader may read.
    assignment: Option<Arc<dyn Assignment>>,
    /// How a generation's streams are grouped by shard.
    shards: Shards,
    /// The planner's time.
    clock: ClusterClock,
    /// Rows and windows delivered, windows retried.
    counters: Counters,
    /// Each stream's own start in the generation taken over from
    /// `scylla-cdc` ([`CdcReaderBuilder::resume_from_scylla_cdc`]).
    stream_starts: Option<StreamStarts>,
}

impl Shared {
    /// The shard of `stream`, one of the streams of `vnode` (a group of
    /// its generation as the source gave it): with the generation, all that
    /// decides how streams are grouped, so that every reader, whatever its
    /// open connections, groups a generation alike.
    fn shard_of(&self, vnode: &StreamGroup, stream: StreamId) -> u16 {
        self.shards.of(vnode, stream)
    }

    /// Where a group's window is read now: the first replica of its
    /// stream that the session is connected to, that node's sharding, and
    /// the shard of the stream.
    fn place(&self, stream: StreamId) -> Result<(SocketAddr, Option<ShardingInfo>, u16), CdcError> {
        let connections = self.session.connections();
        let node = self
            .session
            .replicas(&self.keyspace, Token::new(stream.token()))
            .into_iter()
            .find(|n| connections.iter().any(|c| c.addr() == *n))
            .or_else(|| connections.first().map(Connection::addr))
            .ok_or(CdcError::NoNodes)?;
        let sharding = connections.iter().filter(|c| c.addr() == node).find_map(|c| c.sharding().copied());
        Ok((node, sharding, shard_of(&sharding, stream)))
    }

    /// Whether this reader may read `group` now: always without leases,
    /// else only while its lease is surely held; with an assignment, only
    /// while it is assigned here.
    fn holds(&self, group: StreamId) -> bool {
        self.deadlines.as_ref().is_none_or(|d| d.holds(group, std::time::Instant::now()))
            && self.assignment.as_ref().is_none_or(|a| a.holds(group).is_some())
    }

    /// Leaves `group` of the current generation (its lease is lost), if
    /// this reader still holds it with fencing `epoch`: a refusal of an
    /// older hold of this reader's own (a save of an epoch it took the
    /// group again after) leaves the newer hold alone. A reader without
    /// leases holds every group for good: nothing to leave.
    fn drop_group(&self, group: StreamId, epoch: u64) {
        let Some(deadlines) = &self.deadlines else { return };
        let mut planner = self.planner();
        match planner.groups().iter().find(|g| g.key == group) {
            Some(g) if g.epoch != epoch => {
                tracing::debug!(group = %group, epoch, held = g.epoch, "a refusal of an older hold; the group is kept");
            }
            // A group of the current generation: the call cannot fail.
            Some(g) => {
                deadlines.remove(group);
                let owned = g.owned;
                if planner.lose(g.group).is_ok() && owned {
                    self.counters.left();
                }
            }
            None => deadlines.remove(group),
        }
    }

    /// Saves `checkpoint`, less the groups of the current generation whose
    /// lease is no longer surely held; groups the store refuses (another
    /// reader took them over, see [`CheckpointStore::fence`]) are left,
    /// each if still held with the epoch it was saved with.
    ///
    /// The final checkpoint of a generation left is saved whole: every
    /// group in it was read to that generation's end, so it moves nothing
    /// back, and the readers still in that generation wait for it (its
    /// leases are no longer renewed, and a save retried after they lapsed
    /// would otherwise leave its groups unsaved for good). With an
    /// assignment it goes with epoch 0, whatever the group's hold was: the
    /// group may have been assigned again since (a new epoch, never fenced
    /// here since this reader left the generation), and a store that checks
    /// epochs against the assignment would refuse it, while no later save
    /// of the group can pass that generation's end ([`Assignment`]).
    async fn save(&self, checkpoint: crate::checkpoint::Checkpoint) -> Result<(), CdcError> {
        let Some(store) = &self.checkpoints else { return Ok(()) };
        let mut checkpoint = checkpoint;
        let current = self.planner().generation();
        if current == Some(checkpoint.generation) {
            checkpoint.groups.retain(|g| self.holds(g.group));
        } else if self.assignment.is_some() {
            checkpoint.groups.iter_mut().for_each(|g| g.epoch = 0);
        }
        let mut written = self.written.lock().await;
        let generation = checkpoint.generation;
        checkpoint.groups.retain(|g| written.get(&(generation, g.group)).is_none_or(|p| *p <= g.progress));
        let refused = match store.save(&self.log, &checkpoint).await {
            Ok(()) => Vec::new(),
            Err(CheckpointError::Fenced(refused)) => refused,
            Err(e) => return Err(e.into()),
        };
        let (saved, lost): (Vec<GroupProgress>, Vec<GroupProgress>) =
            checkpoint.groups.into_iter().partition(|g| !refused.contains(&g.group));
        for g in &saved {
            let furthest = written.entry((generation, g.group)).or_insert(g.progress);
            *furthest = (*furthest).max(g.progress);
        }
        // Generations left behind need no more ordering.
        written.retain(|(gen, _), _| *gen >= generation);
        drop(written);
        self.planner().saved(&crate::checkpoint::Checkpoint { generation, groups: saved });
        for g in lost {
            tracing::warn!(group = %g.group, "another reader took a CDC group over; it is left");
            self.drop_group(g.group, g.epoch);
        }
        Ok(())
    }

    fn stop(&self) {
        self.stopping.raise();
    }

    fn stop_at(&self, at: SystemTime) {
        self.planner().set_end(Millis::from_system_time(at));
        self.stopping.wake();
    }

    fn start_leaving(&self) {
        self.leaving.raise();
    }

    fn planner(&self) -> std::sync::MutexGuard<'_, Planner> {
        // A worker that panicked holding the lock left the planner as it
        // was between two calls: still consistent.
        self.planner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A ticket is a `Notified`, which `notify_waiters` wakes from its
/// creation on, polled or not.
impl Wakes for Notify {
    type Ticket<'a> = tokio::sync::futures::Notified<'a>;

    fn ticket(&self) -> Self::Ticket<'_> {
        self.notified()
    }

    fn wake_all(&self) {
        self.notify_waiters();
    }
}

/// A running reader. Dropping it stops it (after the current windows, as
/// [`CdcReader::stop`]), as dropping `scylla-cdc`'s handle did; keep it
/// and [`join`](CdcReader::join) it, or [`detach`](CdcReader::detach) it to
/// let it run on.
pub struct CdcReader {
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<Result<(), CdcError>>>,
    holder: Option<std::thread::JoinHandle<Result<(), CdcError>>>,
    /// Left to run on when dropped ([`CdcReader::detach`]).
    detached: bool,
}

impl std::fmt::Debug for CdcReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CdcReader").field("workers", &self.threads.len()).finish()
    }
}

impl Shared {
    /// See [`CdcReader::progress`].
    fn progress(&self) -> ReaderProgress {
        let now = self.clock.now();
        let planner = self.planner();
        let horizon = now.saturating_sub(planner.safety_interval());
        progress::progress(planner.generation(), horizon, &planner.groups(), &self.counters)
    }
}

impl CdcReader {
    /// Asks the workers to stop after their current window (a checkpoint
    /// is saved first when checkpoints are on).
    pub fn stop(&self) {
        self.shared.stop();
    }

    /// Moves the end to `at`, as `scylla-cdc`'s `stop_at`: the reader reads
    /// every change before `at` (once it is a safety interval in the past)
    /// and then finishes, as one built with [`CdcReaderBuilder::end`] does.
    /// Windows already read past an earlier `at` stay read.
    pub fn stop_at(&self, at: SystemTime) {
        self.shared.stop_at(at);
    }

    /// Lets the reader run on after this value is dropped: what it reads
    /// goes to its consumers until the returned handle stops it (or its end
    /// is reached). Its workers' errors are then only logged.
    pub fn detach(mut self) -> CdcReaderHandle {
        self.detached = true;
        self.handle()
    }

    /// How far the reader has read and how far behind it is: per group it
    /// reads, the end of the last window delivered and its lag behind the
    /// horizon; rows and windows delivered, windows retried.
    pub fn progress(&self) -> ReaderProgress {
        self.shared.progress()
    }

    /// Whether every group has been read up to the end.
    pub fn is_finished(&self) -> bool {
        self.shared.planner().is_finished()
    }

    /// A handle to stop the reader or watch it from elsewhere (a signal
    /// handler, a progress task).
    pub fn handle(&self) -> CdcReaderHandle {
        CdcReaderHandle { shared: self.shared.clone() }
    }

    /// Waits for the workers; the first error of any of them. With leases,
    /// the final checkpoint is saved before the leases are given up.
    pub async fn join(mut self) -> Result<(), CdcError> {
        let threads = std::mem::take(&mut self.threads);
        let results = tokio::task::spawn_blocking(move || threads.into_iter().map(|t| t.join()).collect::<Vec<_>>())
            .await
            .map_err(|e| CdcError::Worker(e.to_string()))?;
        let mut first = Ok(());
        for r in results {
            let r = r.map_err(|_| CdcError::Worker("a worker panicked".into())).and_then(|r| r);
            if first.is_ok() {
                first = r;
            }
        }
        // Not holding the planner's lock across the saves; a generation
        // left and not saved yet (the run was stopped) is saved first.
        let checkpoints = {
            let mut planner = self.shared.planner();
            [planner.take_left(), planner.checkpoint()]
        };
        for cp in checkpoints.into_iter().flatten() {
            self.shared.save(cp).await?;
        }
        if let Some(holder) = self.holder.take() {
            self.shared.start_leaving();
            let left = tokio::task::spawn_blocking(move || holder.join())
                .await
                .map_err(|e| CdcError::Worker(e.to_string()))?
                .map_err(|_| CdcError::Worker("the lease holder panicked".into()))
                .and_then(|r| r);
            if first.is_ok() {
                first = left;
            }
        }
        first
    }
}

impl Drop for CdcReader {
    fn drop(&mut self) {
        // Not joined nor detached: the workers stop after their current
        // windows, and a lease holder ends (leases it cannot give up
        // expire).
        if !self.detached && !self.threads.is_empty() {
            self.shared.stop();
            if self.holder.is_some() {
                self.shared.start_leaving();
            }
        }
    }
}

/// Stops or watches a [`CdcReader`]; cheap to clone.
#[derive(Clone)]
pub struct CdcReaderHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CdcReaderHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CdcReaderHandle").finish_non_exhaustive()
    }
}

impl CdcReaderHandle {
    /// See [`CdcReader::stop_at`].
    pub fn stop_at(&self, at: SystemTime) {
        self.shared.stop_at(at);
    }

    /// See [`CdcReader::stop`].
    pub fn stop(&self) {
        self.shared.stop();
    }

    /// See [`CdcReader::is_finished`].
    pub fn is_finished(&self) -> bool {
        self.shared.planner().is_finished()
    }

    /// See [`CdcReader::progress`].
    pub fn progress(&self) -> ReaderProgress {
        self.shared.progress()
    }
}
