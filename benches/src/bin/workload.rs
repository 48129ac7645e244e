//! `workload`: a latte-style workload runner for shardwise and the official
//! ScyllaDB driver (`scylla` 1.9), both in this one binary.
//!
//! ```text
//! workload run write --driver shardwise -d 10s -t 1 -p 128 --node 127.0.0.1:9042
//! workload compare read --rounds 3 -d 10s -t 2 -p 2048 --node 127.0.0.1:9042 --markdown out.md
//! ```
//!
//! Vocabulary as in latte: `-d/--duration` (time such as `10s`, or a cycle
//! count such as `100000`), `-w/--warmup`, `-t/--threads`,
//! `-p/--concurrency` (requests in flight per thread), `-c/--connections`
//! (per shard, per node), `-r/--rate` (ops/s for the whole process),
//! `--consistency`, `--node host:port`.
//!
//! Workloads, on `<keyspace>.kv (pk bigint PRIMARY KEY, v1 bigint, v2 text)`:
//! `write` (prepared INSERT, pk = cycle), `read` (prepared SELECT by pk of
//! the `--load N` rows loaded first), `mixed` (even cycles write, odd cycles
//! read), `batch` (an unlogged batch of 4 prepared INSERTs), `paged` (100
//! rows of a prepared `SELECT … LIMIT 100` in pages of 25: one request of
//! the runner is the 4 pages).
//!
//! Threading, as latte does it: one tokio runtime per run, current-thread
//! when `-t 1`, otherwise multi-thread with `-t` workers; one session shared
//! by everything (latte shares one driver session through its context); `-t`
//! top-level tasks, each running `-p` request loops (one request at a time
//! per loop). The drivers' own connection tasks run on the same runtime.
//!
//! Measured per run (after the warm-up): elapsed, throughput, latency
//! percentiles (HDR histogram, from just before `execute` to the decoded
//! answer; with `--rate`, from the time the request was due on the rate's
//! timeline, so that queueing behind a slow answer counts: open loop; and,
//! beside them, from the send: without the wait for the request's turn,
//! which at a rate includes the wake-up up to 1 ms after the due time that
//! tokio's timer granularity adds), client CPU (user + system of the whole process from
//! `getrusage(RUSAGE_SELF)`, so the drivers' background tasks count), CPU
//! utilisation, CPU per request, heap allocations per request (a counting
//! global allocator), errors.
//!
//! `compare` runs shardwise and the official driver in turn, A B B A …, each
//! run in a child process of its own (`run --report-line`), against the same
//! server, on protocol v4 for both unless `--protocol` says otherwise, and
//! reports per-round ratios shardwise/official and their median.

use std::fmt::Write as _;
use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use clap::{Args, Parser, Subcommand, ValueEnum};
use hdrhistogram::Histogram;
use shardwise_benches::consistency::parse_consistency;
use shardwise_benches::interval::{parse_interval, Interval};
use shardwise_benches::json;
use shardwise_benches::rusage::{online_cpus, process_cpu_time};
use testkit::alloc::{allocations, CountingAllocator};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// The `v2` value of every row (32 bytes): a constant, so the runner itself
/// allocates nothing per request.
const TEXT: &str = "shardwise workload value 0123456";

#[derive(Parser, Debug)]
#[command(
    name = "workload",
    version,
    about = "latte-style workload runner: shardwise beside the official ScyllaDB driver"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one workload with one driver and print latte-style statistics.
    Run {
        #[command(flatten)]
        common: Common,
        /// Which driver to run.
        #[arg(long, value_enum, default_value_t = DriverKind::Shardwise)]
        driver: DriverKind,
        /// Write the figures as JSON to this file.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
        /// Print the figures as one machine-readable last line (what
        /// `compare` reads from its child processes).
        #[arg(long, hide = true)]
        report_line: bool,
    },
    /// Run both drivers in turn, each run in a process of its own, in the
    /// order A B B A (shardwise first in odd rounds, official first in even
    /// ones), and print per-round ratios shardwise/official with their median.
    /// shardwise speaks protocol v4 here unless `--protocol` says otherwise:
    /// the official driver speaks only v4.
    Compare {
        #[command(flatten)]
        common: Common,
        /// Rounds (each runs both drivers once).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Write the runs, ratios and medians as JSON to this file.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
        /// Write a markdown section (tables) to this file.
        #[arg(long)]
        markdown: Option<std::path::PathBuf>,
        /// Heading text for the markdown section (e.g. the server).
        #[arg(long)]
        label: Option<String>,
    },
}

#[derive(Args, Debug, Clone)]
struct Common {
    /// write | read | mixed | batch | paged.
    #[arg(value_enum)]
    workload: WorkloadKind,
    /// Run time (`10s`, `500ms`, `2m`) or a number of cycles (`100000`).
    #[arg(short = 'd', long, default_value = "10s", value_parser = parse_interval)]
    duration: Interval,
    /// Warm-up before each measured run, not measured (time or cycles).
    #[arg(short = 'w', long, default_value = "1s", value_parser = parse_interval)]
    warmup: Interval,
    /// Threads (tokio workers; one task of `-p` request loops each).
    #[arg(short = 't', long, default_value = "1")]
    threads: NonZeroUsize,
    /// Requests in flight per thread.
    #[arg(short = 'p', long, default_value = "128")]
    concurrency: NonZeroUsize,
    /// Every request loop a spawned task of its own (as services and latte run them),
    /// instead of one task per thread joining its loops.
    #[arg(long)]
    spawn: bool,
    /// Connections per shard (per node for Cassandra).
    #[arg(short = 'c', long, default_value = "1")]
    connections: NonZeroUsize,
    /// shardwise only: which of a node's (a shard's) connections a request
    /// takes (`ConnectionAffinity`): `auto`, the driver's default, keeps
    /// each thread to a connection of its own and opens at least one per
    /// runtime worker on a node without shards (Cassandra); `thread` does
    /// so on every node; `least-loaded` shares every connection.
    #[arg(long, value_enum, default_value = "auto")]
    affinity: Affinity,
    /// Fixed rate in ops/s for the whole process (default: unlimited, closed loop); latency
    /// then counts from when each request was due (open loop).
    #[arg(short = 'r', long)]
    rate: Option<f64>,
    /// Consistency level (ONE, LOCAL_ONE, QUORUM, LOCAL_QUORUM, ALL, …).
    #[arg(long, default_value = "LOCAL_QUORUM")]
    consistency: String,
    /// Contact point host:port (repeatable).
    #[arg(long = "node", default_value = "127.0.0.1:9042")]
    nodes: Vec<String>,
    /// Keyspace of the `kv` table (created if missing, replication factor 1).
    #[arg(long, default_value = "shardwise_workload")]
    keyspace: String,
    /// Rows (pk 0..N) to load before a `read` or `mixed` run, or before a
    /// `write` run when given. Loading is skipped when pk 0 and pk N-1 exist.
    #[arg(long)]
    load: Option<u64>,
    /// Request timeout in seconds (latte's default: 5); 0: none, for both
    /// drivers (no per-request timer).
    #[arg(long, default_value_t = 5.0)]
    request_timeout: f64,
    /// Highest protocol version shardwise may negotiate (4 or 5; the official
    /// driver speaks v4 only). Default: shardwise's own default (v5 first);
    /// for `compare`, 4.
    #[arg(long)]
    protocol: Option<u8>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum WorkloadKind {
    /// Prepared INSERT of (pk, v1, v2).
    Write,
    /// Prepared SELECT v1, v2 by pk of loaded rows.
    Read,
    /// Half writes, half reads.
    Mixed,
    /// An unlogged batch of 4 prepared INSERTs (pk 4·cycle … 4·cycle + 3).
    Batch,
    /// A prepared `SELECT pk, v1, v2 … LIMIT 100` read in pages of 25:
    /// 100 rows in 4 requests (needs 100 rows loaded).
    Paged,
}

impl WorkloadKind {
    fn name(self) -> &'static str {
        match self {
            WorkloadKind::Write => "write",
            WorkloadKind::Read => "read",
            WorkloadKind::Mixed => "mixed",
            WorkloadKind::Batch => "batch",
            WorkloadKind::Paged => "paged",
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Affinity {
    /// `ConnectionAffinity::Auto`.
    Auto,
    /// `ConnectionAffinity::LeastLoaded`.
    LeastLoaded,
    /// `ConnectionAffinity::Thread`.
    Thread,
}

impl Affinity {
    fn name(self) -> &'static str {
        match self {
            Affinity::Auto => "auto",
            Affinity::LeastLoaded => "least-loaded",
            Affinity::Thread => "thread",
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum DriverKind {
    /// This project's driver.
    Shardwise,
    /// The official ScyllaDB driver, `scylla` 1.9.
    Official,
}

impl DriverKind {
    fn name(self) -> &'static str {
        match self {
            DriverKind::Shardwise => "shardwise",
            DriverKind::Official => "official",
        }
    }
}

// ---------------------------------------------------------------------------
// The two drivers behind one interface.

/// One request of the workload, on one driver.
trait Driver: Send + Sync + 'static {
    /// Prepared INSERT of row `pk`.
    fn write(&self, pk: i64) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Prepared SELECT of row `pk`; `Ok(false)` when the row is missing.
    fn read(&self, pk: i64) -> impl Future<Output = anyhow::Result<bool>> + Send;
    /// An unlogged batch of 4 prepared INSERTs, rows `4·n` … `4·n + 3`.
    fn batch(&self, n: i64) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// The 100 rows of the `LIMIT 100` scan, page by page; `Ok(false)` when
    /// fewer came or one is not as written.
    fn paged(&self) -> impl Future<Output = anyhow::Result<bool>> + Send;
    /// Protocol version in use, for the report.
    fn protocol(&self) -> String;
}

type Prepared = shardwise::PreparedStatement;

struct Shardwise {
    session: shardwise::Session,
    insert: shardwise::PreparedStatement,
    select: shardwise::PreparedStatement,
    batch: shardwise::Batch<(Prepared, Prepared, Prepared, Prepared)>,
    scan: shardwise::PreparedStatement,
}

impl Shardwise {
    async fn connect(c: &Common) -> anyhow::Result<Shardwise> {
        let session = shardwise_session(c, c.connections.get()).await?;
        let (insert, select) = (insert_cql(&c.keyspace), select_cql(&c.keyspace));
        let insert = session.prepare(insert.as_str()).await.context("prepare INSERT (shardwise)")?;
        let select = session.prepare(select.as_str()).await.context("prepare SELECT (shardwise)")?;
        let scan = session.prepare(scan_cql(&c.keyspace).as_str()).await.context("prepare scan (shardwise)")?;
        let scan = scan.with_page_size(PAGE);
        let batch = shardwise::Batch::unlogged((insert.clone(), insert.clone(), insert.clone(), insert.clone()));
        Ok(Shardwise { session, insert, select, batch, scan })
    }
}

async fn shardwise_session(c: &Common, connections: usize) -> anyhow::Result<shardwise::Session> {
    use shardwise::protocol::frame::ProtocolVersion;
    let (consistency, _) = parse_consistency(&c.consistency)?;
    let mut b = shardwise::SessionBuilder::new()
        .default_consistency(consistency)
        .connections_per_node(connections)
        .request_timeout(request_timeout(c));
    b = b.connection_affinity(match c.affinity {
        Affinity::Auto => shardwise::ConnectionAffinity::Auto,
        Affinity::LeastLoaded => shardwise::ConnectionAffinity::LeastLoaded,
        Affinity::Thread => shardwise::ConnectionAffinity::Thread,
    });
    for n in &c.nodes {
        b = b.known_node(n.clone());
    }
    match c.protocol {
        None => {}
        Some(4) => b = b.protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4),
        Some(5) => b = b.protocol_versions(ProtocolVersion::V4, ProtocolVersion::V5),
        Some(v) => bail!("--protocol {v}: 4 or 5"),
    }
    b.build().await.context("shardwise session")
}

impl Driver for Shardwise {
    async fn write(&self, pk: i64) -> anyhow::Result<()> {
        self.session.execute(&self.insert, ShardwiseRow { pk, v1: pk.wrapping_mul(2), v2: TEXT }).await?;
        Ok(())
    }
    async fn read(&self, pk: i64) -> anyhow::Result<bool> {
        let result = self.session.execute(&self.select, (pk,)).await?;
        let row: Option<(i64, &str)> = result.first_row()?;
        Ok(row.is_some_and(|(v1, v2)| v1 == pk.wrapping_mul(2) && !v2.is_empty()))
    }
    async fn batch(&self, n: i64) -> anyhow::Result<()> {
        let row = |pk: i64| ShardwiseRow { pk, v1: pk.wrapping_mul(2), v2: TEXT };
        let pk = n.wrapping_mul(4);
        let values = (row(pk), row(pk + 1), row(pk + 2), row(pk + 3));
        self.session.execute(&self.batch, values).await?;
        Ok(())
    }
    async fn paged(&self) -> anyhow::Result<bool> {
        let (mut rows, mut good) = (0usize, true);
        let mut pages = self.session.execute_pages(&self.scan, ());
        while let Some(page) = pages.next_page().await {
            let page = page?;
            for row in page.rows::<(i64, i64, &str)>()? {
                let (pk, v1, v2) = row?;
                good &= v1 == pk.wrapping_mul(2) && !v2.is_empty();
                rows += 1;
            }
        }
        Ok(good && rows == SCANNED)
    }
    fn protocol(&self) -> String {
        match self.session.connections().first() {
            Some(c) => format!("{:?}", c.version()),
            None => "?".into(),
        }
    }
}

struct Official {
    session: scylla::client::session::Session,
    insert: scylla::statement::prepared::PreparedStatement,
    select: scylla::statement::prepared::PreparedStatement,
    batch: scylla::statement::batch::Batch,
    scan: scylla::statement::prepared::PreparedStatement,
}

impl Official {
    async fn connect(c: &Common) -> anyhow::Result<Official> {
        use scylla::client::execution_profile::ExecutionProfile;
        use scylla::client::PoolSize;
        let (_, consistency) = parse_consistency(&c.consistency)?;
        let profile = ExecutionProfile::builder().consistency(consistency).request_timeout(request_timeout(c)).build();
        let session = scylla::client::session_builder::SessionBuilder::new()
            .known_nodes(&c.nodes)
            .pool_size(PoolSize::PerShard(c.connections))
            .default_execution_profile_handle(profile.into_handle())
            .build()
            .await
            .context("official driver session")?;
        let insert = session.prepare(insert_cql(&c.keyspace)).await.context("prepare INSERT (official)")?;
        let select = session.prepare(select_cql(&c.keyspace)).await.context("prepare SELECT (official)")?;
        let mut scan = session.prepare(scan_cql(&c.keyspace)).await.context("prepare scan (official)")?;
        scan.set_page_size(PAGE);
        let mut batch = scylla::statement::batch::Batch::new(scylla::statement::batch::BatchType::Unlogged);
        for _ in 0..4 {
            batch.append_statement(insert.clone());
        }
        Ok(Official { session, insert, select, batch, scan })
    }
}

impl Driver for Official {
    async fn write(&self, pk: i64) -> anyhow::Result<()> {
        self.session.execute_unpaged(&self.insert, OfficialRow { pk, v1: pk.wrapping_mul(2), v2: TEXT }).await?;
        Ok(())
    }
    async fn read(&self, pk: i64) -> anyhow::Result<bool> {
        let result = self.session.execute_unpaged(&self.select, (pk,)).await?;
        let rows = result.into_rows_result()?;
        let row: Option<(i64, &str)> = rows.maybe_first_row()?;
        Ok(row.is_some_and(|(v1, v2)| v1 == pk.wrapping_mul(2) && !v2.is_empty()))
    }
    async fn batch(&self, n: i64) -> anyhow::Result<()> {
        let row = |pk: i64| OfficialRow { pk, v1: pk.wrapping_mul(2), v2: TEXT };
        let pk = n.wrapping_mul(4);
        let values = (row(pk), row(pk + 1), row(pk + 2), row(pk + 3));
        self.session.batch(&self.batch, values).await?;
        Ok(())
    }
    async fn paged(&self) -> anyhow::Result<bool> {
        use scylla::response::PagingState;
        use std::ops::ControlFlow;
        let (mut rows, mut good) = (0usize, true);
        let mut state = PagingState::start();
        loop {
            let (page, next) = self.session.execute_single_page(&self.scan, (), state).await?;
            for row in page.into_rows_result()?.rows::<(i64, i64, &str)>()? {
                let (pk, v1, v2) = row?;
                good &= v1 == pk.wrapping_mul(2) && !v2.is_empty();
                rows += 1;
            }
            match next.into_paging_control_flow() {
                ControlFlow::Break(()) => break,
                ControlFlow::Continue(s) => state = s,
            }
        }
        Ok(good && rows == SCANNED)
    }
    fn protocol(&self) -> String {
        "V4".into()
    }
}

/// The INSERT's values for shardwise: a struct like the official driver's
/// (see [`OfficialRow`]), so that both drivers bind the same way, checking
/// the values against the markers by name. Both drivers take the
/// `(i64, i64, &str)` tuple in these `impl Future + Send` methods as well;
/// the structs stay so that the measured work is what earlier runs measured.
#[derive(shardwise::SerializeValues)]
struct ShardwiseRow {
    pk: i64,
    v1: i64,
    v2: &'static str,
}

/// The INSERT's values for the official driver (see [`ShardwiseRow`]).
#[derive(scylla::SerializeRow)]
struct OfficialRow {
    pk: i64,
    v1: i64,
    v2: &'static str,
}

fn request_timeout(c: &Common) -> Option<Duration> {
    (c.request_timeout > 0.0).then(|| Duration::from_secs_f64(c.request_timeout))
}

fn insert_cql(ks: &str) -> String {
    format!("INSERT INTO {ks}.kv (pk, v1, v2) VALUES (?, ?, ?)")
}

fn select_cql(ks: &str) -> String {
    format!("SELECT v1, v2 FROM {ks}.kv WHERE pk = ?")
}

/// Rows of one `paged` request, and its page size.
const SCANNED: usize = 100;
const PAGE: i32 = 25;

fn scan_cql(ks: &str) -> String {
    format!("SELECT pk, v1, v2 FROM {ks}.kv LIMIT {SCANNED}")
}

// ---------------------------------------------------------------------------
// Schema and load (always with shardwise; not measured).

async fn prepare_data(c: &Common) -> anyhow::Result<()> {
    use shardwise::Statement;
    let session = shardwise_session(c, 1).await?;
    let ks = &c.keyspace;
    session
        .execute(
            &Statement::new(format!(
                "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            )),
            (),
        )
        .await
        .context("CREATE KEYSPACE")?;
    session
        .execute(
            &Statement::new(format!("CREATE TABLE IF NOT EXISTS {ks}.kv (pk bigint PRIMARY KEY, v1 bigint, v2 text)")),
            (),
        )
        .await
        .context("CREATE TABLE")?;
    let rows = load_rows(c);
    if rows == 0 {
        return Ok(());
    }
    let insert = session.prepare(insert_cql(ks).as_str()).await?;
    let select = session.prepare(select_cql(ks).as_str()).await?;
    let present = |pk: i64| {
        let (session, select) = (&session, &select);
        async move {
            let r = session.execute(select, (pk,)).await?;
            anyhow::Ok(r.first_row::<(i64, &str)>()?.is_some())
        }
    };
    if present(0).await? && present(rows as i64 - 1).await? {
        eprintln!("load: {rows} rows already present in {ks}.kv");
        return Ok(());
    }
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let loops = (0..256).map(|_| async {
        loop {
            let pk = next.fetch_add(1, Ordering::Relaxed);
            if pk >= rows {
                return anyhow::Ok(());
            }
            let pk = pk as i64;
            session.execute(&insert, (pk, pk.wrapping_mul(2), TEXT)).await.context("load INSERT")?;
        }
    });
    for r in futures::future::join_all(loops).await {
        r?;
    }
    eprintln!("load: {rows} rows into {ks}.kv in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn load_rows(c: &Common) -> u64 {
    match (c.workload, c.load) {
        (_, Some(n)) => n,
        (WorkloadKind::Write | WorkloadKind::Batch, None) => 0,
        (WorkloadKind::Paged, None) => SCANNED as u64,
        (_, None) => 100_000,
    }
}

// ---------------------------------------------------------------------------
// The run loop.

/// What one thread (task) collects.
struct ThreadStats {
    histogram: Histogram<u64>,
    /// Latency from just before `execute` (the same as `histogram` in a
    /// closed loop; without the wait for the request's turn at a rate).
    service: Histogram<u64>,
    ops: u64,
    errors: u64,
    missing_rows: u64,
    first_error: Option<String>,
}

impl ThreadStats {
    fn new() -> anyhow::Result<ThreadStats> {
        Ok(ThreadStats {
            // Nanoseconds, 1 ns .. 100 s, 3 significant digits.
            histogram: Histogram::new_with_bounds(1, 100_000_000_000, 3)?,
            service: Histogram::new_with_bounds(1, 100_000_000_000, 3)?,
            ops: 0,
            errors: 0,
            missing_rows: 0,
            first_error: None,
        })
    }
}

/// Parameters of one phase, shared by the threads.
struct Phase {
    workload: WorkloadKind,
    interval: Interval,
    threads: u64,
    /// Rows to read from (pk 0..rows).
    rows: u64,
    /// Per-thread rate in ops/s.
    rate_per_thread: Option<f64>,
}

/// One thread's task: `concurrency` loops, each one request at a time.
/// What the request loops of one thread share.
struct Loops<D> {
    db: Arc<D>,
    phase: Arc<Phase>,
    index: u64,
    next: AtomicU64,
    stats: Mutex<ThreadStats>,
    deadline: Option<Instant>,
    limit: u64,
    start: Instant,
}

async fn thread_task<D: Driver>(
    db: Arc<D>,
    phase: Arc<Phase>,
    index: u64,
    concurrency: usize,
    start: Instant,
    spawn: bool,
) -> anyhow::Result<ThreadStats> {
    let deadline = match phase.interval {
        Interval::Time(d) => Some(start + d),
        Interval::Count(_) => None,
    };
    let limit = match phase.interval {
        // Thread `index` runs cycles index, index + threads, …
        Interval::Count(n) => (n + phase.threads - 1 - index) / phase.threads,
        Interval::Time(_) => u64::MAX,
    };
    let loops = Arc::new(Loops {
        db,
        phase,
        index,
        next: AtomicU64::new(0),
        stats: Mutex::new(ThreadStats::new()?),
        deadline,
        limit,
        start,
    });
    if spawn {
        // As services and latte run them: every loop a task of its own, on any worker.
        let tasks: Vec<_> = (0..concurrency).map(|_| tokio::spawn(one_loop(loops.clone()))).collect();
        for t in tasks {
            t.await?;
        }
    } else {
        futures::future::join_all((0..concurrency).map(|_| one_loop(loops.clone()))).await;
    }
    let loops = Arc::try_unwrap(loops).map_err(|_| anyhow::anyhow!("a request loop outlived its thread"))?;
    Ok(loops.stats.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// One request loop: requests one after the other until the phase ends.
async fn one_loop<D: Driver>(l: Arc<Loops<D>>) {
    let phase = &l.phase;
    loop {
        let local = l.next.fetch_add(1, Ordering::Relaxed);
        if local >= l.limit {
            return;
        }
        // At a fixed rate the request is due at its place on the timeline,
        // and its latency counts from then (open loop, as wrk2 and latte's
        // `--rate`): a request that waits for a free loop because an
        // earlier answer was slow shows that wait, instead of hiding it.
        let due = phase.rate_per_thread.map(|rate| l.start + Duration::from_secs_f64(local as f64 / rate));
        if let Some(due) = due {
            tokio::time::sleep_until(due.into()).await;
        }
        let now = Instant::now();
        if l.deadline.is_some_and(|d| now >= d) {
            return;
        }
        let t0 = due.unwrap_or(now);
        let cycle = local * phase.threads + l.index;
        let read = || l.db.read((cycle % phase.rows.max(1)) as i64);
        let result = match phase.workload {
            WorkloadKind::Write => l.db.write(cycle as i64).await.map(|()| true),
            WorkloadKind::Read => read().await,
            WorkloadKind::Mixed if cycle.is_multiple_of(2) => l.db.write(cycle as i64).await.map(|()| true),
            WorkloadKind::Mixed => read().await,
            WorkloadKind::Batch => l.db.batch(cycle as i64).await.map(|()| true),
            WorkloadKind::Paged => l.db.paged().await,
        };
        let ns = t0.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        let service_ns = now.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        let mut s = l.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.ops += 1;
        match result {
            Ok(found) => {
                s.histogram.saturating_record(ns.max(1));
                s.service.saturating_record(service_ns.max(1));
                if !found {
                    s.missing_rows += 1;
                }
            }
            Err(e) => {
                s.errors += 1;
                if s.first_error.is_none() {
                    s.first_error = Some(format!("{e:#}"));
                }
            }
        }
    }
}

/// Figures of one measured run.
#[derive(Debug, Clone)]
struct RunReport {
    driver: DriverKind,
    workload: WorkloadKind,
    threads: usize,
    concurrency: usize,
    connections: usize,
    protocol: String,
    elapsed_s: f64,
    ops: u64,
    errors: u64,
    missing_rows: u64,
    first_error: Option<String>,
    throughput: f64,
    mean_ms: f64,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
    cpu_user_s: f64,
    cpu_sys_s: f64,
    cpu_s: f64,
    /// Percent of all online CPUs (latte's figure).
    cpu_util: f64,
    cpu_us_per_op: f64,
    allocs: u64,
    allocs_per_op: f64,
    /// Latency from just before `execute` (at a rate: without the wait for
    /// the request's turn, and so without tokio's 1 ms timer granularity).
    svc_p50_ms: f64,
    svc_p99_ms: f64,
    svc_p999_ms: f64,
    svc_max_ms: f64,
}

async fn run_phase<D: Driver>(
    db: &Arc<D>,
    phase: Phase,
    concurrency: usize,
    multi: bool,
    spawn: bool,
) -> anyhow::Result<(Vec<ThreadStats>, Duration)> {
    let phase = Arc::new(phase);
    let start = Instant::now();
    let mut stats = Vec::new();
    if multi {
        let handles: Vec<_> = (0..phase.threads)
            .map(|i| tokio::spawn(thread_task(db.clone(), phase.clone(), i, concurrency, start, spawn)))
            .collect();
        for h in handles {
            stats.push(h.await??);
        }
    } else {
        stats.push(thread_task(db.clone(), phase.clone(), 0, concurrency, start, spawn).await?);
    }
    Ok((stats, start.elapsed()))
}

async fn measure<D: Driver>(db: D, c: &Common, driver: DriverKind) -> anyhow::Result<RunReport> {
    let db = Arc::new(db);
    let threads = c.threads.get();
    let concurrency = c.concurrency.get();
    let multi = threads > 1;
    let rows = load_rows(c);
    let rate_per_thread = c.rate.map(|r| r / threads as f64);
    // Warm-up: pools fill, buffers and stream-id tables reach their size.
    if c.warmup != Interval::Count(0) && c.warmup != Interval::Time(Duration::ZERO) {
        let phase = Phase { workload: c.workload, interval: c.warmup, threads: threads as u64, rows, rate_per_thread };
        run_phase(&db, phase, concurrency, multi, c.spawn).await?;
    }
    let protocol = db.protocol();
    let cpu0 = process_cpu_time()?;
    let allocs0 = allocations();
    let phase = Phase { workload: c.workload, interval: c.duration, threads: threads as u64, rows, rate_per_thread };
    let (stats, elapsed) = run_phase(&db, phase, concurrency, multi, c.spawn).await?;
    let allocs = allocations().saturating_sub(allocs0);
    let cpu = process_cpu_time()?.since(&cpu0);
    drop(db);

    let mut hist = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3)?;
    let mut service = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3)?;
    let (mut ops, mut errors, mut missing_rows, mut first_error) = (0u64, 0u64, 0u64, None);
    for s in stats {
        hist.add(&s.histogram)?;
        service.add(&s.service)?;
        ops += s.ops;
        errors += s.errors;
        missing_rows += s.missing_rows;
        first_error = first_error.or(s.first_error);
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    let elapsed_s = elapsed.as_secs_f64();
    let cpu_s = cpu.total().as_secs_f64();
    let per_op = |x: f64| if ops == 0 { f64::NAN } else { x / ops as f64 };
    Ok(RunReport {
        driver,
        workload: c.workload,
        threads,
        concurrency,
        connections: c.connections.get(),
        protocol,
        elapsed_s,
        ops,
        errors,
        missing_rows,
        first_error,
        throughput: ops as f64 / elapsed_s,
        mean_ms: hist.mean() / 1e6,
        p50_ms: ms(hist.value_at_quantile(0.5)),
        p90_ms: ms(hist.value_at_quantile(0.9)),
        p99_ms: ms(hist.value_at_quantile(0.99)),
        p999_ms: ms(hist.value_at_quantile(0.999)),
        max_ms: ms(hist.max()),
        cpu_user_s: cpu.user.as_secs_f64(),
        cpu_sys_s: cpu.system.as_secs_f64(),
        cpu_s,
        cpu_util: 100.0 * cpu_s / elapsed_s / online_cpus() as f64,
        cpu_us_per_op: per_op(cpu_s * 1e6),
        allocs,
        allocs_per_op: per_op(allocs as f64),
        svc_p50_ms: ms(service.value_at_quantile(0.5)),
        svc_p99_ms: ms(service.value_at_quantile(0.99)),
        svc_p999_ms: ms(service.value_at_quantile(0.999)),
        svc_max_ms: ms(service.max()),
    })
}

/// One run of one driver in a runtime of its own (dropped afterwards, with
/// the session and its tasks).
fn run_driver(c: &Common, driver: DriverKind) -> anyhow::Result<RunReport> {
    let threads = c.threads.get();
    let rt = if threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()?
    };
    let report = rt.block_on(async {
        match driver {
            DriverKind::Shardwise => measure(Shardwise::connect(c).await?, c, driver).await,
            DriverKind::Official => measure(Official::connect(c).await?, c, driver).await,
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    report
}

/// The `run` arguments that repeat `c`.
fn run_args(c: &Common) -> Vec<String> {
    let interval = |i: Interval| match i {
        Interval::Time(d) => format!("{}ms", d.as_millis()),
        Interval::Count(n) => n.to_string(),
    };
    let flags = [
        ("-d", interval(c.duration)),
        ("-w", interval(c.warmup)),
        ("-t", c.threads.to_string()),
        ("-p", c.concurrency.to_string()),
        ("-c", c.connections.to_string()),
        ("--consistency", c.consistency.clone()),
        ("--keyspace", c.keyspace.clone()),
        ("--request-timeout", c.request_timeout.to_string()),
    ];
    let mut a: Vec<String> = vec!["run".into(), c.workload.name().into()];
    for (flag, value) in flags {
        a.extend([flag.into(), value]);
    }
    if c.spawn {
        a.push("--spawn".into());
    }
    a.extend(["--affinity".into(), c.affinity.name().into()]);
    for n in &c.nodes {
        a.extend(["--node".into(), n.clone()]);
    }
    if let Some(r) = c.rate {
        a.extend(["-r".into(), r.to_string()]);
    }
    if let Some(n) = c.load {
        a.extend(["--load".into(), n.to_string()]);
    }
    if let Some(v) = c.protocol {
        a.extend(["--protocol".into(), v.to_string()]);
    }
    a
}

/// One run of `driver` in a child process of this binary, so that neither
/// driver's background tasks (nor its allocator state) are billed to the
/// other; its output is passed through.
fn run_child(c: &Common, driver: DriverKind) -> anyhow::Result<RunReport> {
    let exe = std::env::current_exe().context("locating the workload binary")?;
    let out = std::process::Command::new(&exe)
        .args(run_args(c))
        .args(["--driver", driver.name(), "--report-line"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut report = None;
    for line in stdout.lines() {
        match line.strip_prefix(REPORT_PREFIX) {
            Some(fields) => report = Some(parse_report_fields(fields)?),
            None => println!("{line}"),
        }
    }
    if !out.status.success() {
        bail!("the {} run failed ({})", driver.name(), out.status);
    }
    report.ok_or_else(|| anyhow!("the {} run printed no report", driver.name()))
}

/// Marks the machine-readable line of `run --report-line`.
const REPORT_PREFIX: &str = "REPORT\t";

/// The figures of a run as tab-separated fields (the first error's
/// whitespace made single spaces).
fn report_fields(r: &RunReport) -> String {
    let nums = [
        r.elapsed_s,
        r.throughput,
        r.mean_ms,
        r.p50_ms,
        r.p90_ms,
        r.p99_ms,
        r.p999_ms,
        r.max_ms,
        r.cpu_user_s,
        r.cpu_sys_s,
        r.cpu_s,
        r.cpu_util,
        r.cpu_us_per_op,
        r.allocs_per_op,
        r.svc_p50_ms,
        r.svc_p99_ms,
        r.svc_p999_ms,
        r.svc_max_ms,
    ];
    let mut f = vec![
        r.driver.name().to_string(),
        r.workload.name().to_string(),
        r.threads.to_string(),
        r.concurrency.to_string(),
        r.connections.to_string(),
        r.protocol.clone(),
        r.ops.to_string(),
        r.errors.to_string(),
        r.missing_rows.to_string(),
        r.allocs.to_string(),
    ];
    f.extend(nums.iter().map(|x| x.to_string()));
    f.push(r.first_error.as_deref().map(|e| e.split_whitespace().collect::<Vec<_>>().join(" ")).unwrap_or_default());
    f.join("\t")
}

/// The inverse of [`report_fields`].
fn parse_report_fields(line: &str) -> anyhow::Result<RunReport> {
    let f: Vec<&str> = line.split('\t').collect();
    if f.len() != 29 {
        bail!("a report line of {} fields, not 29: {line:?}", f.len());
    }
    let int = |i: usize| f[i].parse::<u64>().with_context(|| format!("report field {i}: {:?}", f[i]));
    let num = |i: usize| f[i].parse::<f64>().with_context(|| format!("report field {i}: {:?}", f[i]));
    Ok(RunReport {
        driver: DriverKind::from_str(f[0], true).map_err(|e| anyhow!(e))?,
        workload: WorkloadKind::from_str(f[1], true).map_err(|e| anyhow!(e))?,
        threads: int(2)? as usize,
        concurrency: int(3)? as usize,
        connections: int(4)? as usize,
        protocol: f[5].to_string(),
        ops: int(6)?,
        errors: int(7)?,
        missing_rows: int(8)?,
        allocs: int(9)?,
        elapsed_s: num(10)?,
        throughput: num(11)?,
        mean_ms: num(12)?,
        p50_ms: num(13)?,
        p90_ms: num(14)?,
        p99_ms: num(15)?,
        p999_ms: num(16)?,
        max_ms: num(17)?,
        cpu_user_s: num(18)?,
        cpu_sys_s: num(19)?,
        cpu_s: num(20)?,
        cpu_util: num(21)?,
        cpu_us_per_op: num(22)?,
        allocs_per_op: num(23)?,
        svc_p50_ms: num(24)?,
        svc_p99_ms: num(25)?,
        svc_p999_ms: num(26)?,
        svc_max_ms: num(27)?,
        first_error: Some(f[28].to_string()).filter(|e| !e.is_empty()),
    })
}

fn setup(c: &Common) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(prepare_data(c))
}

// ---------------------------------------------------------------------------
// Output.

fn print_config(c: &Common, what: &str) {
    println!("CONFIG");
    println!("            Mode  {what}");
    println!(
        "        Workload  {} on {}.kv (pk bigint PRIMARY KEY, v1 bigint, v2 text)",
        c.workload.name(),
        c.keyspace
    );
    println!("           Nodes  {}", c.nodes.join(", "));
    println!("     Consistency  {}", c.consistency.to_ascii_uppercase());
    println!("         Threads  {}", c.threads);
    println!("     Concurrency  {} in flight per thread", c.concurrency);
    println!("     Connections  {} per shard", c.connections);
    println!("        Max rate  {}", c.rate.map(|r| format!("{r} op/s")).unwrap_or_else(|| "unlimited".into()));
    println!("          Warmup  {}", c.warmup);
    println!("        Run time  {}", c.duration);
    println!("   Loaded rows    {}", load_rows(c));
    println!("   Client CPUs    {} online", online_cpus());
    println!();
}

fn print_report(r: &RunReport) {
    println!(
        "SUMMARY  {}  {}  {} thread(s) x {} in flight, {} connection(s)/shard, protocol {}",
        r.driver.name(),
        r.workload.name(),
        r.threads,
        r.concurrency,
        r.connections,
        r.protocol
    );
    println!("         Elapsed time       [s]  {:>12.3}", r.elapsed_s);
    println!("             CPU time       [s]  {:>12.3}   (user {:.3}, sys {:.3})", r.cpu_s, r.cpu_user_s, r.cpu_sys_s);
    println!("      CPU utilisation       [%]  {:>12.1}   (of {} CPUs)", r.cpu_util, online_cpus());
    println!("        CPU / request      [µs]  {:>12.2}", r.cpu_us_per_op);
    println!("     Allocs / request            {:>12.3}   ({} in all)", r.allocs_per_op, r.allocs);
    println!("             Requests      [op]  {:>12}", r.ops);
    println!("               Errors      [op]  {:>12}", r.errors);
    if r.missing_rows > 0 {
        println!("         Missing rows      [op]  {:>12}", r.missing_rows);
    }
    println!("           Throughput    [op/s]  {:>12.0}", r.throughput);
    println!(
        "    Latency [ms]  mean {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
        r.mean_ms, r.p50_ms, r.p90_ms, r.p99_ms, r.p999_ms, r.max_ms
    );
    println!(
        "  from the send [ms]  p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
        r.svc_p50_ms, r.svc_p99_ms, r.svc_p999_ms, r.svc_max_ms
    );
    if let Some(e) = &r.first_error {
        println!("      First error  {e}");
    }
    println!();
}

fn report_json(r: &RunReport) -> String {
    format!(
        "{{\"driver\": {}, \"workload\": {}, \"threads\": {}, \"concurrency\": {}, \"connections\": {}, \"protocol\": {}, \
         \"elapsed_s\": {}, \"ops\": {}, \"errors\": {}, \"missing_rows\": {}, \"throughput\": {}, \"mean_ms\": {}, \"p50_ms\": {}, \
         \"p90_ms\": {}, \"p99_ms\": {}, \"p999_ms\": {}, \"max_ms\": {}, \"cpu_user_s\": {}, \"cpu_sys_s\": {}, \"cpu_s\": {}, \
         \"cpu_util_pct\": {}, \"cpu_us_per_op\": {}, \"allocs\": {}, \"allocs_per_op\": {}, \"svc_p50_ms\": {}, \"svc_p99_ms\": {}, \
         \"svc_p999_ms\": {}, \"svc_max_ms\": {}, \"first_error\": {}}}",
        json::string(r.driver.name()),
        json::string(r.workload.name()),
        r.threads,
        r.concurrency,
        r.connections,
        json::string(&r.protocol),
        json::number(r.elapsed_s),
        r.ops,
        r.errors,
        r.missing_rows,
        json::number(r.throughput),
        json::number(r.mean_ms),
        json::number(r.p50_ms),
        json::number(r.p90_ms),
        json::number(r.p99_ms),
        json::number(r.p999_ms),
        json::number(r.max_ms),
        json::number(r.cpu_user_s),
        json::number(r.cpu_sys_s),
        json::number(r.cpu_s),
        json::number(r.cpu_util),
        json::number(r.cpu_us_per_op),
        r.allocs,
        json::number(r.allocs_per_op),
        json::number(r.svc_p50_ms),
        json::number(r.svc_p99_ms),
        json::number(r.svc_p999_ms),
        json::number(r.svc_max_ms),
        r.first_error.as_deref().map(json::string).unwrap_or_else(|| "null".into()),
    )
}

/// Ratios shardwise/official of one round.
#[derive(Debug, Clone, Copy)]
struct Ratios {
    cpu_per_op: f64,
    throughput: f64,
    p50: f64,
    p99: f64,
    /// The tail beyond p99: what an open-loop run (`--rate`) shows most.
    p999: f64,
    max: f64,
    /// p99 and p99.9 from the send (see [`RunReport::svc_p99_ms`]).
    svc_p99: f64,
    svc_p999: f64,
}

impl Ratios {
    fn of(s: &RunReport, o: &RunReport) -> Ratios {
        Ratios {
            cpu_per_op: s.cpu_us_per_op / o.cpu_us_per_op,
            throughput: s.throughput / o.throughput,
            p50: s.p50_ms / o.p50_ms,
            p99: s.p99_ms / o.p99_ms,
            p999: s.p999_ms / o.p999_ms,
            max: s.max_ms / o.max_ms,
            svc_p99: s.svc_p99_ms / o.svc_p99_ms,
            svc_p999: s.svc_p999_ms / o.svc_p999_ms,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

struct Comparison {
    runs: Vec<(RunReport, RunReport)>,
    ratios: Vec<Ratios>,
    median: Ratios,
    median_allocs: (f64, f64),
    median_cpu: (f64, f64),
}

fn compare_summary(runs: Vec<(RunReport, RunReport)>) -> Comparison {
    let ratios: Vec<Ratios> = runs.iter().map(|(s, o)| Ratios::of(s, o)).collect();
    let pick = |f: fn(&Ratios) -> f64| median(ratios.iter().map(f).collect());
    let median_r = Ratios {
        cpu_per_op: pick(|r| r.cpu_per_op),
        throughput: pick(|r| r.throughput),
        p50: pick(|r| r.p50),
        p99: pick(|r| r.p99),
        p999: pick(|r| r.p999),
        max: pick(|r| r.max),
        svc_p99: pick(|r| r.svc_p99),
        svc_p999: pick(|r| r.svc_p999),
    };
    let median_allocs = (
        median(runs.iter().map(|(s, _)| s.allocs_per_op).collect()),
        median(runs.iter().map(|(_, o)| o.allocs_per_op).collect()),
    );
    let median_cpu = (
        median(runs.iter().map(|(s, _)| s.cpu_us_per_op).collect()),
        median(runs.iter().map(|(_, o)| o.cpu_us_per_op).collect()),
    );
    Comparison { runs, ratios, median: median_r, median_allocs, median_cpu }
}

fn print_comparison(cmp: &Comparison) {
    println!("COMPARISON  shardwise / official, per round");
    println!("  round   CPU/request   throughput        p50        p99   allocs/req (shardwise, official)");
    for (i, (r, (s, o))) in cmp.ratios.iter().zip(&cmp.runs).enumerate() {
        println!(
            "  {:>5}   {:>10.3}x   {:>9.3}x  {:>8.3}x  {:>8.3}x   {:.3}, {:.3}",
            i + 1,
            r.cpu_per_op,
            r.throughput,
            r.p50,
            r.p99,
            s.allocs_per_op,
            o.allocs_per_op
        );
    }
    let m = &cmp.median;
    println!(
        "  median  {:>10.3}x   {:>9.3}x  {:>8.3}x  {:>8.3}x   {:.3}, {:.3}",
        m.cpu_per_op, m.throughput, m.p50, m.p99, cmp.median_allocs.0, cmp.median_allocs.1
    );
    println!("  median CPU per request: shardwise {:.2} µs, official {:.2} µs", cmp.median_cpu.0, cmp.median_cpu.1);
    println!();
}

fn comparison_markdown(c: &Common, cmp: &Comparison, label: Option<&str>) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "#### {} — {} thread(s) × {} in flight, {} connection(s) per shard, shardwise's affinity {}{}\n",
        c.workload.name(),
        c.threads,
        c.concurrency,
        c.connections,
        c.affinity.name(),
        label.map(|l| format!(" — {l}")).unwrap_or_default()
    );
    let _ = writeln!(
        md,
        "Run time {} after a {} warm-up, {}, consistency {}, {} rounds, one process per run (shardwise first in odd rounds, official first in even ones).\n",
        c.duration,
        c.warmup,
        c.rate
            .map(|r| format!("open loop at {r:.0} requests/s (latency from when each request was due)"))
            .unwrap_or_else(|| "closed loop".into()),
        c.consistency.to_ascii_uppercase(),
        cmp.runs.len()
    );
    md.push_str("| round | driver | protocol | ops/s | CPU µs/op | CPU util % | allocs/op | p50 ms | p99 ms | p99.9 ms | max ms | from the send: p50, p99, p99.9 ms | errors |\n");
    md.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i, (s, o)) in cmp.runs.iter().enumerate() {
        for r in [s, o] {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.0} | {:.2} | {:.1} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3}, {:.3}, {:.3} | {} |",
                i + 1,
                r.driver.name(),
                r.protocol,
                r.throughput,
                r.cpu_us_per_op,
                r.cpu_util,
                r.allocs_per_op,
                r.p50_ms,
                r.p99_ms,
                r.p999_ms,
                r.max_ms,
                r.svc_p50_ms,
                r.svc_p99_ms,
                r.svc_p999_ms,
                r.errors
            );
        }
    }
    md.push_str(
        "\n| shardwise / official | CPU per request | throughput | p50 | p99 | p99.9 | max | p99 from the send | p99.9 from the send |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (i, r) in cmp.ratios.iter().enumerate() {
        let _ = writeln!(
            md,
            "| round {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            i + 1,
            r.cpu_per_op,
            r.throughput,
            r.p50,
            r.p99,
            r.p999,
            r.max,
            r.svc_p99,
            r.svc_p999
        );
    }
    let m = &cmp.median;
    let _ = writeln!(
        md,
        "| **median** | **{:.3}** | **{:.3}** | **{:.3}** | **{:.3}** | **{:.3}** | **{:.3}** | **{:.3}** | **{:.3}** |",
        m.cpu_per_op, m.throughput, m.p50, m.p99, m.p999, m.max, m.svc_p99, m.svc_p999
    );
    let _ = writeln!(
        md,
        "\nMedian CPU per request: shardwise {:.2} µs, official {:.2} µs. Median allocations per request: shardwise {:.3}, official {:.3}.\n",
        cmp.median_cpu.0, cmp.median_cpu.1, cmp.median_allocs.0, cmp.median_allocs.1
    );
    md
}

fn comparison_json(c: &Common, cmp: &Comparison, label: Option<&str>) -> String {
    let mut j = String::from("{");
    let _ = write!(
        j,
        "\"workload\": {}, \"threads\": {}, \"concurrency\": {}, \"connections\": {}, \"affinity\": {}, \"label\": {}, \"rate\": {}, \"runs\": [",
        json::string(c.workload.name()),
        c.threads,
        c.concurrency,
        c.connections,
        json::string(c.affinity.name()),
        label.map(json::string).unwrap_or_else(|| "null".into()),
        c.rate.map(json::number).unwrap_or_else(|| "null".into())
    );
    let runs: Vec<String> = cmp
        .runs
        .iter()
        .map(|(s, o)| format!("{{\"shardwise\": {}, \"official\": {}}}", report_json(s), report_json(o)))
        .collect();
    j.push_str(&runs.join(", "));
    let ratio = |r: &Ratios| {
        format!(
            "{{\"cpu_per_op\": {}, \"throughput\": {}, \"p50\": {}, \"p99\": {}, \"p999\": {}, \"max\": {}, \"svc_p99\": {}, \"svc_p999\": {}}}",
            json::number(r.cpu_per_op),
            json::number(r.throughput),
            json::number(r.p50),
            json::number(r.p99),
            json::number(r.p999),
            json::number(r.max),
            json::number(r.svc_p99),
            json::number(r.svc_p999)
        )
    };
    let ratios: Vec<String> = cmp.ratios.iter().map(ratio).collect();
    let _ = writeln!(
        j,
        "], \"ratios\": [{}], \"median\": {}, \"median_allocs_per_op\": {{\"shardwise\": {}, \"official\": {}}}, \
         \"median_cpu_us_per_op\": {{\"shardwise\": {}, \"official\": {}}}}}",
        ratios.join(", "),
        ratio(&cmp.median),
        json::number(cmp.median_allocs.0),
        json::number(cmp.median_allocs.1),
        json::number(cmp.median_cpu.0),
        json::number(cmp.median_cpu.1)
    );
    j
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { common, driver, json, report_line } => {
            print_config(&common, &format!("run, driver {}", driver.name()));
            setup(&common)?;
            let r = run_driver(&common, driver)?;
            print_report(&r);
            if let Some(path) = json {
                std::fs::write(&path, report_json(&r) + "\n").with_context(|| format!("writing {}", path.display()))?;
            }
            if report_line {
                println!("{REPORT_PREFIX}{}", report_fields(&r));
            }
        }
        Command::Compare { common, rounds, json, markdown, label } => {
            if rounds == 0 {
                return Err(anyhow!("--rounds must be at least 1"));
            }
            let mut common = common;
            common.protocol = common.protocol.or(Some(4));
            print_config(
                &common,
                &format!(
                    "compare, {rounds} round(s), one process per run: shardwise, official, official, shardwise, …"
                ),
            );
            setup(&common)?;
            let mut runs = Vec::new();
            for round in 1..=rounds {
                let shardwise_first = round % 2 == 1;
                let [first, second] = if shardwise_first {
                    [DriverKind::Shardwise, DriverKind::Official]
                } else {
                    [DriverKind::Official, DriverKind::Shardwise]
                };
                let run = |driver: DriverKind| {
                    println!("--- round {round}/{rounds}: {}", driver.name());
                    run_child(&common, driver)
                };
                let (a, b) = (run(first)?, run(second)?);
                runs.push(if shardwise_first { (a, b) } else { (b, a) });
            }
            let cmp = compare_summary(runs);
            print_comparison(&cmp);
            if let Some(path) = markdown {
                std::fs::write(&path, comparison_markdown(&common, &cmp, label.as_deref()))
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            if let Some(path) = json {
                std::fs::write(&path, comparison_json(&common, &cmp, label.as_deref()))
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `compare` child gets the parent's settings back: its arguments
    /// parse to the same `Common`.
    #[test]
    fn run_args_repeat_the_settings() {
        let cli = Cli::try_parse_from([
            "workload",
            "compare",
            "read",
            "-d",
            "2500ms",
            "-w",
            "100",
            "-t",
            "4",
            "-p",
            "2048",
            "--spawn",
            "-c",
            "2",
            "-r",
            "1000.5",
            "--consistency",
            "ONE",
            "--node",
            "10.0.0.1:9042",
            "--node",
            "10.0.0.2:9042",
            "--keyspace",
            "k",
            "--load",
            "77",
            "--request-timeout",
            "0",
            "--protocol",
            "4",
        ])
        .expect("parse");
        let Command::Compare { common, .. } = cli.command else { panic!("not compare") };
        let mut args = vec!["workload".to_string()];
        args.extend(run_args(&common));
        let back = Cli::try_parse_from(&args).expect("the child's arguments parse");
        let Command::Run { common: again, .. } = back.command else { panic!("not run") };
        assert_eq!(format!("{again:?}"), format!("{common:?}"));
    }

    #[test]
    fn report_fields_round_trip() {
        let r = RunReport {
            driver: DriverKind::Official,
            workload: WorkloadKind::Mixed,
            threads: 2,
            concurrency: 128,
            connections: 1,
            protocol: "V4".into(),
            elapsed_s: 6.5,
            ops: 1000,
            errors: 3,
            missing_rows: 1,
            first_error: Some("timed\tout\nafter 5 s".into()),
            throughput: 153.8,
            mean_ms: 1.25,
            p50_ms: 1.0,
            p90_ms: 2.0,
            p99_ms: 3.0,
            p999_ms: 4.0,
            max_ms: 5.0,
            cpu_user_s: 0.5,
            cpu_sys_s: 0.25,
            cpu_s: 0.75,
            cpu_util: 5.8,
            cpu_us_per_op: 750.0,
            allocs: 11_000,
            allocs_per_op: 11.0,
            svc_p50_ms: 0.5,
            svc_p99_ms: 1.5,
            svc_p999_ms: 2.5,
            svc_max_ms: 4.5,
        };
        let back = parse_report_fields(&report_fields(&r)).expect("parse");
        let expected = RunReport { first_error: Some("timed out after 5 s".into()), ..r };
        assert_eq!(format!("{back:?}"), format!("{expected:?}"));
        assert!(parse_report_fields("official\twrite").is_err());
    }

    /// An open-loop comparison states its rate and the tail ratios beyond p99.
    #[test]
    fn an_open_loop_comparison_states_its_rate_and_tail() {
        let cli = Cli::try_parse_from(["workload", "compare", "write", "-r", "6000"]).expect("parse");
        let Command::Compare { common, .. } = cli.command else { panic!("not compare") };
        let report = |driver, p999_ms, max_ms| {
            let mut r = parse_report_fields(&report_fields(&RunReport {
                driver,
                workload: WorkloadKind::Write,
                threads: 1,
                concurrency: 128,
                connections: 1,
                protocol: "V4".into(),
                elapsed_s: 1.0,
                ops: 6000,
                errors: 0,
                missing_rows: 0,
                first_error: None,
                throughput: 6000.0,
                mean_ms: 1.0,
                p50_ms: 1.0,
                p90_ms: 2.0,
                p99_ms: 3.0,
                p999_ms,
                max_ms,
                cpu_user_s: 0.1,
                cpu_sys_s: 0.1,
                cpu_s: 0.2,
                cpu_util: 20.0,
                cpu_us_per_op: 33.0,
                allocs: 0,
                allocs_per_op: 0.0,
                svc_p50_ms: 1.0,
                svc_p99_ms: 3.0,
                svc_p999_ms: p999_ms,
                svc_max_ms: max_ms,
            }))
            .expect("parse");
            r.driver = driver;
            r
        };
        let cmp =
            compare_summary(vec![(report(DriverKind::Shardwise, 4.0, 8.0), report(DriverKind::Official, 8.0, 32.0))]);
        assert_eq!((cmp.median.p999, cmp.median.max), (0.5, 0.25));
        let json = comparison_json(&common, &cmp, None);
        assert!(json.contains("\"rate\": 6000"), "{json}");
        assert!(json.contains("\"p999\": 0.5") && json.contains("\"max\": 0.25"), "{json}");
        let md = comparison_markdown(&common, &cmp, None);
        assert!(md.contains("open loop at 6000 requests/s") && md.contains("| p99.9 | max |"), "{md}");
    }
}
