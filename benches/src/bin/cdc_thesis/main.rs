//! The CDC thesis benchmark ("Library for Scylla Change Data Capture in
//! Rust", University of Warsaw, 2022): shardwise-cdc beside `scylla-cdc` 0.7
//! reading the same CDC log, in the same binary.
//!
//! * `load`: scylla-bench style. Table `(pk bigint, ck bigint, v blob,
//!   PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}`, P partitions × C
//!   clustering rows, all RowInserts (prepared INSERT, many in flight, with
//!   shardwise). The expected row count, the checksum (sum of all `ck`) and
//!   the load's start and end times go to the table `<keyspace>.cdc_thesis_meta`.
//! * `read`: one reader, one library, in this process: starts at the load
//!   start (or the first generation), counts rows and sums `ck`, stops when
//!   the expected count is reached and checks the checksum. Prints a human
//!   summary and one machine-readable `RESULT` line (see `--help`).
//! * `compare`: for each window size and library (and core count, pinned
//!   with `taskset`), runs `read` in a fresh child process and prints the
//!   thesis's table, with the ratios shardwise / scylla-cdc.
//! * `latency`: the end-to-end delay of a live consumer, each library in
//!   turn with the same small safety interval and sleep ([`latency`]).
//!
//! CPU time is `getrusage(RUSAGE_SELF)` deltas inside the child, from just
//! before the session is opened to the moment the last expected row was
//! consumed (the same interval as the elapsed time); the whole child process
//! (start-up and shutdown included, what GNU `time` would report) comes from
//! `getrusage(RUSAGE_CHILDREN)` deltas in the parent.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use tokio::sync::Notify;

mod latency;

/// The table holding what `load` wrote (per table name).
const META_TABLE: &str = "cdc_thesis_meta";

#[derive(Parser, Debug)]
#[command(
    name = "cdc_thesis",
    about = "The CDC thesis benchmark: shardwise-cdc vs scylla-cdc 0.7 reading the same CDC log",
    long_about = "The CDC thesis benchmark: shardwise-cdc vs scylla-cdc 0.7 reading the same CDC log.\n\n\
        1. `cdc_thesis load --node ADDR --partitions P --rows C` writes P x C RowInserts into a CDC table \
        through ADDR (a Scylla, or the Scylla emulation front) and records the expected count and checksum.\n\
        2. `cdc_thesis read --node ADDR --library shardwise|scylla-cdc --window 15` reads them back once, \
        measuring CPU (getrusage) and elapsed time.\n\
        3. `cdc_thesis compare --node ADDR [--windows 15,30,60] [--cores 1,2] [--markdown FILE]` runs \
        `read` for every window size and library in fresh child processes and prints the thesis table.\n\n\
        `read` prints one line `RESULT library=L window_s=W rows=N checksum=S expected_rows=N \
        expected_checksum=S ok=true|false user_s=U sys_s=S elapsed_s=E` (fields separated by spaces)."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create the CDC table and write P x C RowInserts (scylla-bench style).
    Load(LoadArgs),
    /// Read the log back once with one library and report the figures.
    Read(ReadArgs),
    /// Run `read` for every window size and library in child processes; print the table.
    Compare(CompareArgs),
    /// The end-to-end delay of a live consumer, each library in turn, in child processes.
    Latency(latency::LatencyArgs),
    /// One library's end-to-end delay on a fresh table (what `latency` runs).
    LatencyRun(latency::LatencyRunArgs),
}

/// Where the data lives.
#[derive(Args, Debug, Clone)]
struct Target {
    /// Contact point (host:port), e.g. the emulation front.
    #[arg(long)]
    node: String,
    /// Keyspace (created with SimpleStrategy, RF 1).
    #[arg(long, default_value = "cdc_bench")]
    keyspace: String,
    /// Base table (its log is `<table>_scylla_cdc_log`).
    #[arg(long, default_value = "test")]
    table: String,
}

#[derive(Args, Debug)]
struct LoadArgs {
    #[command(flatten)]
    target: Target,
    /// Partitions (P).
    #[arg(long, default_value_t = 100)]
    partitions: i64,
    /// Clustering rows per partition (C).
    #[arg(long, default_value_t = 2000)]
    rows: i64,
    /// Requests in flight.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Size of the `v` blob in bytes.
    #[arg(long, default_value_t = 16)]
    blob_size: usize,
}

/// Which CDC library reads.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Library {
    /// shardwise-cdc (this workspace).
    Shardwise,
    /// shardwise-cdc with an async consumer (`build_async`): each change
    /// copied into an owned `Change` and awaited.
    ShardwiseAsync,
    /// scylla-cdc 0.7 on the official `scylla` driver.
    #[value(name = "scylla-cdc")]
    ScyllaCdc,
}

impl Library {
    fn name(self) -> &'static str {
        match self {
            Library::Shardwise => "shardwise",
            Library::ShardwiseAsync => "shardwise-async",
            Library::ScyllaCdc => "scylla-cdc",
        }
    }
}

/// Where a reader starts.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum StartAt {
    /// One second before the recorded load start.
    Load,
    /// The first CDC generation (the thesis's setting; reads every empty
    /// window between the generation and the load).
    Generation,
}

impl StartAt {
    fn name(self) -> &'static str {
        match self {
            StartAt::Load => "load",
            StartAt::Generation => "generation",
        }
    }
}

/// Reader settings shared by `read` and `compare`.
#[derive(Args, Debug, Clone)]
struct ReaderOpts {
    /// Sleep between windows, in milliseconds (the thesis: 1).
    #[arg(long, default_value_t = 1)]
    sleep_ms: u64,
    /// Safety interval in milliseconds (windows end at now - safety).
    #[arg(long, default_value_t = 1000)]
    safety_ms: u64,
    /// Where reading starts.
    #[arg(long, value_enum, default_value_t = StartAt::Load)]
    from: StartAt,
    /// Expected rows (default: from the load's record).
    #[arg(long)]
    expected_rows: Option<u64>,
    /// Expected checksum, the sum of all `ck` (default: from the load's record).
    #[arg(long)]
    expected_checksum: Option<i64>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// shardwise-cdc worker threads (default: one per available core).
    #[arg(long)]
    workers: Option<usize>,
    /// Page size of log queries (both libraries).
    #[arg(long, default_value_t = 5000)]
    page_size: i32,
    /// Windows a shardwise-cdc worker keeps in flight, a fixed count
    /// (default: the count each worker finds itself).
    #[arg(long)]
    windows_in_flight: Option<usize>,
    /// The most windows a shardwise-cdc worker may find worth keeping in
    /// flight (default: the library's).
    #[arg(long, conflicts_with = "windows_in_flight")]
    max_windows_in_flight: Option<usize>,
}

#[derive(Args, Debug)]
struct ReadArgs {
    #[command(flatten)]
    target: Target,
    /// The library that reads.
    #[arg(long, value_enum)]
    library: Library,
    /// Window size in seconds.
    #[arg(long, default_value_t = 15)]
    window: u64,
    #[command(flatten)]
    opts: ReaderOpts,
}

#[derive(Args, Debug)]
struct CompareArgs {
    #[command(flatten)]
    target: Target,
    /// Window sizes in seconds.
    #[arg(long, value_delimiter = ',', default_value = "15,30,60")]
    windows: Vec<u64>,
    /// Libraries, in run order.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "shardwise,scylla-cdc")]
    libraries: Vec<Library>,
    /// Core counts to pin each run to with `taskset -c 0..N-1` (e.g. `1,2`);
    /// default: not pinned.
    #[arg(long, value_delimiter = ',')]
    cores: Vec<usize>,
    /// Runs of each (cores, window, library); the table shows the median by elapsed time.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Also write the table as Markdown to this file.
    #[arg(long)]
    markdown: Option<std::path::PathBuf>,
    #[command(flatten)]
    opts: ReaderOpts,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Load(a) => runtime(None)?.block_on(load(a)),
        Cmd::Read(a) => read(a),
        Cmd::Compare(a) => compare(a),
        Cmd::Latency(a) => latency::compare(a),
        Cmd::LatencyRun(a) => latency::run(a),
    }
}

fn runtime(workers: Option<usize>) -> Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        b.worker_threads(n.max(1));
    }
    Ok(b.enable_all().build()?)
}

fn resolve(node: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    node.to_socket_addrs()?.next().ok_or_else(|| anyhow!("{node}: no address"))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

async fn shardwise_session(node: &str) -> Result<shardwise::Session> {
    use shardwise::protocol::consistency::Consistency;
    let session = shardwise::SessionBuilder::new()
        .known_node_addr(resolve(node)?)
        .default_consistency(Consistency::One)
        .build()
        .await
        .with_context(|| format!("connecting to {node}"))?;
    Ok(session)
}

// ---------------------------------------------------------------- load

async fn load(a: LoadArgs) -> Result<()> {
    use shardwise::Statement;
    let (ks, table) = (quote(&a.target.keyspace), quote(&a.target.table));
    if a.partitions <= 0 || a.rows <= 0 {
        bail!("--partitions and --rows must be positive");
    }
    let session = shardwise_session(&a.target.node).await?;
    let ddl = |s: String| Statement::new(s);
    session
        .execute(
            &ddl(format!(
                "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            )),
            (),
        )
        .await
        .context("creating the keyspace")?;
    session.execute(&ddl(format!("DROP TABLE IF EXISTS {ks}.{table}")), ()).await.context("dropping the old table")?;
    session
        .execute(
            &ddl(format!(
                "CREATE TABLE {ks}.{table} (pk bigint, ck bigint, v blob, PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}}"
            )),
            (),
        )
        .await
        .context("creating the CDC table")?;
    session
        .execute(
            &ddl(format!(
                "CREATE TABLE IF NOT EXISTS {ks}.{META_TABLE} (table_name text PRIMARY KEY, rows bigint, checksum bigint, \
                 load_start_ms bigint, load_end_ms bigint, partitions bigint, clustering bigint)"
            )),
            (),
        )
        .await
        .context("creating the record table")?;
    let insert = Arc::new(
        session
            .prepare(Statement::new(format!("INSERT INTO {ks}.{table} (pk, ck, v) VALUES (?, ?, ?)")))
            .await
            .context("preparing the INSERT")?,
    );

    let total = a.partitions * a.rows;
    let checksum = a.partitions.wrapping_mul(a.rows.wrapping_mul(a.rows - 1) / 2);
    let next = Arc::new(AtomicI64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    // The readers start (one second before) here.
    let start_ms = now_ms();
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(a.concurrency);
    for _ in 0..a.concurrency.max(1) {
        let (session, insert, next, errors) = (session.clone(), insert.clone(), next.clone(), errors.clone());
        let (rows, blob_size) = (a.rows, a.blob_size);
        tasks.push(tokio::spawn(async move {
            let mut v = vec![0u8; blob_size];
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return Ok::<(), anyhow::Error>(());
                }
                let (pk, ck) = (i / rows, i % rows);
                for (j, b) in v.iter_mut().enumerate() {
                    *b = (i as u8).wrapping_add(j as u8);
                }
                let mut attempt = 0;
                loop {
                    match session.execute(&*insert, (pk, ck, v.clone())).await {
                        Ok(_) => break,
                        Err(_) if attempt < 5 => {
                            attempt += 1;
                            errors.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                        }
                        Err(e) => return Err(anyhow!("INSERT pk {pk} ck {ck}: {e}")),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let elapsed = started.elapsed();
    let end_ms = now_ms();
    session
        .execute(
            &Statement::new(format!(
                "INSERT INTO {ks}.{META_TABLE} (table_name, rows, checksum, load_start_ms, load_end_ms, partitions, clustering) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)"
            )),
            (a.target.table.as_str(), total, checksum, start_ms, end_ms, a.partitions, a.rows),
        )
        .await
        .context("recording the load")?;
    println!(
        "loaded {total} rows ({} partitions x {} rows, {}-byte blobs) into {}.{} in {:.2?} ({:.0} rows/s, {} retried errors)",
        a.partitions,
        a.rows,
        a.blob_size,
        a.target.keyspace,
        a.target.table,
        elapsed,
        total as f64 / elapsed.as_secs_f64(),
        errors.load(Ordering::Relaxed)
    );
    println!("LOAD rows={total} checksum={checksum} load_start_ms={start_ms} load_end_ms={end_ms}");
    Ok(())
}

// ---------------------------------------------------------------- read

/// What `load` recorded, and where to start.
#[derive(Debug, Clone, Copy)]
struct Plan {
    rows: u64,
    checksum: i64,
    start_ms: i64,
    load_end_ms: i64,
}

async fn plan(target: &Target, opts: &ReaderOpts) -> Result<Plan> {
    use shardwise::Statement;
    let session = shardwise_session(&target.node).await?;
    let result = session
        .execute(
            &Statement::new(format!(
                "SELECT rows, checksum, load_start_ms, load_end_ms FROM {}.{META_TABLE} WHERE table_name = ?",
                quote(&target.keyspace)
            )),
            (target.table.as_str(),),
        )
        .await
        .context("reading the load's record (run `cdc_thesis load` first)")?;
    let (rows, checksum, load_start, load_end) = result.first_row::<(i64, i64, i64, i64)>()?.ok_or_else(|| {
        anyhow!("no load recorded for {}.{}: run `cdc_thesis load` first", target.keyspace, target.table)
    })?;
    let start_ms = match opts.from {
        StartAt::Load => load_start - 1000,
        StartAt::Generation => {
            let result = session
                .execute(
                    &Statement::new(
                        "SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps'",
                    ),
                    (),
                )
                .await
                .context("reading the CDC generations")?;
            let mut first: Option<i64> = None;
            for row in result.rows::<(shardwise::protocol::types::CqlTimestamp,)>()? {
                let t = row?.0 .0;
                if t <= load_start {
                    first = Some(first.map_or(t, |f: i64| f.min(t)));
                }
            }
            first.ok_or_else(|| anyhow!("no CDC generation before the load"))?
        }
    };
    Ok(Plan {
        rows: opts.expected_rows.unwrap_or(rows as u64),
        checksum: opts.expected_checksum.unwrap_or(checksum),
        start_ms,
        load_end_ms: load_end,
    })
}

/// Rows seen and their checksum, shared by every consumer.
#[derive(Default)]
struct Tally {
    rows: AtomicU64,
    checksum: AtomicI64,
    other: AtomicU64,
    expected: u64,
    done: Notify,
}

impl Tally {
    fn new(expected: u64) -> Self {
        Tally { expected, ..Tally::default() }
    }

    #[inline]
    fn add(&self, ck: i64) {
        self.checksum.fetch_add(ck, Ordering::Relaxed);
        if self.rows.fetch_add(1, Ordering::AcqRel) + 1 == self.expected {
            self.done.notify_one();
        }
    }
}

/// CPU times of this process (or its waited-for children).
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    user: f64,
    sys: f64,
}

fn cpu(who: libc::c_int) -> Cpu {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid, writable `rusage`; `who` is RUSAGE_SELF or RUSAGE_CHILDREN.
    if unsafe { libc::getrusage(who, &mut r) } != 0 {
        return Cpu::default();
    }
    Cpu { user: tv(r.ru_utime), sys: tv(r.ru_stime) }
}

impl std::ops::Sub for Cpu {
    type Output = Cpu;
    fn sub(self, o: Cpu) -> Cpu {
        Cpu { user: self.user - o.user, sys: self.sys - o.sys }
    }
}

/// One measured read.
#[derive(Debug, Clone)]
struct Measure {
    library: String,
    window: u64,
    rows: u64,
    checksum: i64,
    expected_rows: u64,
    expected_checksum: i64,
    user: f64,
    sys: f64,
    elapsed: f64,
}

impl Measure {
    fn ok(&self) -> bool {
        self.rows == self.expected_rows && self.checksum == self.expected_checksum
    }
    fn cpu(&self) -> f64 {
        self.user + self.sys
    }
    fn rows_per_s(&self) -> f64 {
        self.rows as f64 / self.elapsed.max(1e-9)
    }
    fn cpu_us_per_row(&self) -> f64 {
        self.cpu() * 1e6 / (self.rows.max(1) as f64)
    }
    fn line(&self) -> String {
        format!(
            "RESULT library={} window_s={} rows={} checksum={} expected_rows={} expected_checksum={} ok={} user_s={:.3} sys_s={:.3} elapsed_s={:.3}",
            self.library,
            self.window,
            self.rows,
            self.checksum,
            self.expected_rows,
            self.expected_checksum,
            self.ok(),
            self.user,
            self.sys,
            self.elapsed
        )
    }
    fn parse(line: &str) -> Option<Measure> {
        let rest = line.strip_prefix("RESULT ")?;
        let mut m = Measure {
            library: String::new(),
            window: 0,
            rows: 0,
            checksum: 0,
            expected_rows: 0,
            expected_checksum: 0,
            user: 0.0,
            sys: 0.0,
            elapsed: 0.0,
        };
        for kv in rest.split_whitespace() {
            let (k, v) = kv.split_once('=')?;
            match k {
                "library" => m.library = v.to_owned(),
                "window_s" => m.window = v.parse().ok()?,
                "rows" => m.rows = v.parse().ok()?,
                "checksum" => m.checksum = v.parse().ok()?,
                "expected_rows" => m.expected_rows = v.parse().ok()?,
                "expected_checksum" => m.expected_checksum = v.parse().ok()?,
                "user_s" => m.user = v.parse().ok()?,
                "sys_s" => m.sys = v.parse().ok()?,
                "elapsed_s" => m.elapsed = v.parse().ok()?,
                _ => {}
            }
        }
        Some(m)
    }
}

fn read(a: ReadArgs) -> Result<()> {
    // The scylla-cdc reader runs on this runtime's workers (one per
    // available core, as an application would); shardwise-cdc runs on its
    // own worker threads and leaves this runtime nearly idle.
    let rt = runtime(None)?;
    let plan = rt.block_on(plan(&a.target, &a.opts))?;
    let tally = Arc::new(Tally::new(plan.rows));
    // Let the safety interval pass over the end of the load before timing
    // starts: neither library then waits on the clock.
    let ready_at = plan.load_end_ms + a.opts.safety_ms as i64 + 100;
    let wait = ready_at - now_ms();
    if wait > 0 {
        std::thread::sleep(Duration::from_millis(wait as u64));
    }
    let cpu0 = cpu(libc::RUSAGE_SELF);
    let t0 = Instant::now();
    let outcome = rt.block_on(async {
        match a.library {
            Library::Shardwise => read_shardwise(&a, plan, tally.clone(), t0, cpu0, false).await,
            Library::ShardwiseAsync => read_shardwise(&a, plan, tally.clone(), t0, cpu0, true).await,
            Library::ScyllaCdc => read_scylla_cdc(&a, plan, tally.clone(), t0, cpu0).await,
        }
    })?;
    let (elapsed, used) = outcome;
    let m = Measure {
        library: a.library.name().into(),
        window: a.window,
        rows: tally.rows.load(Ordering::Acquire),
        checksum: tally.checksum.load(Ordering::Acquire),
        expected_rows: plan.rows,
        expected_checksum: plan.checksum,
        user: used.user,
        sys: used.sys,
        elapsed,
    };
    eprintln!(
        "{}: window {} s, from {}: {} rows (expected {}), checksum {} (expected {}){}; user {:.2} s, sys {:.2} s, CPU {:.0} %, elapsed {:.2} s, {:.0} rows/s, {:.2} us CPU/row",
        m.library,
        m.window,
        a.opts.from.name(),
        m.rows,
        m.expected_rows,
        m.checksum,
        m.expected_checksum,
        if tally.other.load(Ordering::Relaxed) > 0 {
            format!(", {} non-insert rows", tally.other.load(Ordering::Relaxed))
        } else {
            String::new()
        },
        m.user,
        m.sys,
        100.0 * m.cpu() / m.elapsed.max(1e-9),
        m.elapsed,
        m.rows_per_s(),
        m.cpu_us_per_row()
    );
    println!("{}", m.line());
    // Dropping a runtime with a reader that may still be stopping: do not wait long.
    rt.shutdown_timeout(Duration::from_secs(2));
    if !m.ok() {
        bail!("count or checksum mismatch");
    }
    Ok(())
}

/// Waits until the tally is complete (or the timeout); returns the elapsed
/// time and CPU used since `t0` / `cpu0`, measured at that moment.
async fn wait_done(tally: &Tally, timeout: Duration, t0: Instant, cpu0: Cpu) -> Result<(f64, Cpu)> {
    let deadline = tokio::time::Instant::now() + timeout;
    while tally.rows.load(Ordering::Acquire) < tally.expected {
        if tokio::time::timeout_at(deadline, tally.done.notified()).await.is_err() {
            bail!("timed out after {timeout:?} with {} of {} rows", tally.rows.load(Ordering::Acquire), tally.expected);
        }
    }
    Ok((t0.elapsed().as_secs_f64(), cpu(libc::RUSAGE_SELF) - cpu0))
}

/// The async consumer of `--library shardwise-async`: what the synchronous
/// one counts, from owned changes, awaited.
struct AsyncTally(Arc<Tally>);

impl shardwise_cdc::AsyncConsumer for AsyncTally {
    async fn consume(&mut self, change: shardwise_cdc::Change) -> Result<(), shardwise_cdc::ConsumerError> {
        use shardwise::protocol::types::CqlValue;
        match (change.operation, change.value("ck")) {
            (shardwise_cdc::Operation::Insert, Some(CqlValue::BigInt(ck))) => self.0.add(*ck),
            (shardwise_cdc::Operation::Insert, other) => {
                return Err(shardwise_cdc::ConsumerError::failed(format!("ck is {other:?}")))
            }
            _ => {
                self.0.other.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

async fn read_shardwise(
    a: &ReadArgs,
    plan: Plan,
    tally: Arc<Tally>,
    t0: Instant,
    cpu0: Cpu,
    asynchronous: bool,
) -> Result<(f64, Cpu)> {
    use shardwise_cdc::{CdcReaderBuilder, CdcRow, Consumer, ConsumerError, GroupInfo, Operation};
    let session = shardwise_session(&a.target.node).await?;
    let start = UNIX_EPOCH + Duration::from_millis(plan.start_ms.max(0) as u64);
    let mut builder = CdcReaderBuilder::new(session, &a.target.keyspace, &a.target.table)
        .start(start)
        .window_size(Duration::from_secs(a.window))
        .safety_interval(Duration::from_millis(a.opts.safety_ms))
        .sleep_interval(Duration::from_millis(a.opts.sleep_ms))
        .page_size(a.opts.page_size);
    if let Some(w) = a.opts.workers {
        builder = builder.workers(w);
    }
    if let Some(n) = a.opts.windows_in_flight {
        builder = builder.windows_in_flight(n);
    }
    if let Some(n) = a.opts.max_windows_in_flight {
        builder = builder.max_windows_in_flight(n);
    }
    let factory = {
        let tally = tally.clone();
        move |_: &GroupInfo| -> Box<dyn Consumer> {
            let tally = tally.clone();
            Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
                if row.operation() != Operation::Insert {
                    tally.other.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                let ck: i64 = row.value("ck")?;
                tally.add(ck);
                Ok(())
            })
        }
    };
    let reader = if asynchronous {
        let tally = tally.clone();
        builder.build_async(move |_: &GroupInfo| AsyncTally(tally.clone())).await
    } else {
        builder.build(Arc::new(factory)).await
    };
    let reader = reader.context("starting shardwise-cdc")?;
    let handle = reader.handle();
    // `CdcReader::join`'s future is not `Send` (it holds the planner's
    // guard across an await), so it is polled here rather than spawned.
    let joined = reader.join();
    tokio::pin!(joined);
    let measured = tokio::select! {
        m = wait_done(&tally, Duration::from_secs(a.opts.timeout), t0, cpu0) => m,
        r = &mut joined => {
            // The reader ended before all rows came: its error says why.
            r?;
            bail!("the shardwise-cdc reader finished with {} of {} rows", tally.rows.load(Ordering::Acquire), tally.expected);
        }
    };
    handle.stop();
    if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(10), joined).await {
        eprintln!("shardwise-cdc reader stopped with an error: {e}");
    }
    measured
}

async fn read_scylla_cdc(a: &ReadArgs, plan: Plan, tally: Arc<Tally>, t0: Instant, cpu0: Cpu) -> Result<(f64, Cpu)> {
    use scylla::client::session_builder::SessionBuilder;
    use scylla_cdc::consumer::{CDCRow, OperationType};
    use scylla_cdc::log_reader::CDCLogReaderBuilder;

    let sum = {
        let tally = tally.clone();
        move |row: &CDCRow<'_>| {
            if row.operation != OperationType::RowInsert {
                tally.other.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            tally.add(ck_of(row)?);
            Ok(())
        }
    };

    let session = Arc::new(
        SessionBuilder::new()
            .known_node_addr(resolve(&a.target.node)?)
            .default_execution_profile_handle(
                scylla::client::execution_profile::ExecutionProfile::builder()
                    .consistency(scylla::statement::Consistency::LocalQuorum)
                    .build()
                    .into_handle(),
            )
            .build()
            .await
            .context("connecting with the scylla driver")?,
    );
    let _ = a.opts.page_size; // scylla-cdc reads with the driver's default page size (5,000).
    let (mut reader, handle) = CDCLogReaderBuilder::new()
        .session(session)
        .keyspace(&a.target.keyspace)
        .table_name(&a.target.table)
        .start_timestamp(Duration::from_millis(plan.start_ms.max(0) as u64))
        .window_size(Duration::from_secs(a.window))
        .safety_interval(Duration::from_millis(a.opts.safety_ms))
        .sleep_interval(Duration::from_millis(a.opts.sleep_ms))
        .consumer_factory(Arc::new(RowFn(Arc::new(sum))))
        .build()
        .await
        .context("starting scylla-cdc")?;
    let measured = tokio::select! {
        m = wait_done(&tally, Duration::from_secs(a.opts.timeout), t0, cpu0) => m,
        r = handle => {
            r?;
            bail!("the scylla-cdc reader finished with {} of {} rows", tally.rows.load(Ordering::Acquire), tally.expected);
        }
    };
    reader.stop();
    measured
}

/// A scylla-cdc consumer (and factory of such) that hands every row to a function.
struct RowFn<F>(Arc<F>);

#[async_trait::async_trait]
impl<F> scylla_cdc::consumer::Consumer for RowFn<F>
where
    F: Fn(&scylla_cdc::consumer::CDCRow<'_>) -> anyhow::Result<()> + Send + Sync,
{
    async fn consume_cdc(&mut self, row: scylla_cdc::consumer::CDCRow<'_>) -> anyhow::Result<()> {
        (self.0)(&row)
    }
}

#[async_trait::async_trait]
impl<F> scylla_cdc::consumer::ConsumerFactory for RowFn<F>
where
    F: Fn(&scylla_cdc::consumer::CDCRow<'_>) -> anyhow::Result<()> + Send + Sync + 'static,
{
    async fn new_consumer(&self) -> Box<dyn scylla_cdc::consumer::Consumer> {
        Box::new(RowFn(self.0.clone()))
    }
}

/// The `ck` (bigint) of a scylla-cdc row.
fn ck_of(row: &scylla_cdc::consumer::CDCRow<'_>) -> anyhow::Result<i64> {
    row.get_value("ck").as_ref().and_then(|v| v.as_bigint()).ok_or_else(|| anyhow!("ck is not a bigint"))
}

// ---------------------------------------------------------------- compare

/// One run of `compare`.
#[derive(Debug, Clone)]
struct Run {
    cores: Option<usize>,
    m: Measure,
    /// The whole child process (start-up and shutdown included).
    process: Cpu,
}

fn child(a: &CompareArgs, cores: Option<usize>, window: u64, library: Library) -> Result<Run> {
    let exe = std::env::current_exe()?;
    let mut args: Vec<String> = vec![
        "read".into(),
        "--node".into(),
        a.target.node.clone(),
        "--keyspace".into(),
        a.target.keyspace.clone(),
        "--table".into(),
        a.target.table.clone(),
        "--library".into(),
        library.name().into(),
        "--window".into(),
        window.to_string(),
        "--sleep-ms".into(),
        a.opts.sleep_ms.to_string(),
        "--safety-ms".into(),
        a.opts.safety_ms.to_string(),
        "--from".into(),
        a.opts.from.name().into(),
        "--timeout".into(),
        a.opts.timeout.to_string(),
        "--page-size".into(),
        a.opts.page_size.to_string(),
    ];
    if let Some(n) = a.opts.expected_rows {
        args.extend(["--expected-rows".into(), n.to_string()]);
    }
    if let Some(n) = a.opts.expected_checksum {
        args.extend(["--expected-checksum".into(), n.to_string()]);
    }
    if let Some(n) = a.opts.workers {
        args.extend(["--workers".into(), n.to_string()]);
    }
    if let Some(n) = a.opts.windows_in_flight {
        args.extend(["--windows-in-flight".into(), n.to_string()]);
    }
    if let Some(n) = a.opts.max_windows_in_flight {
        args.extend(["--max-windows-in-flight".into(), n.to_string()]);
    }
    let mut cmd = match cores {
        Some(n) => {
            let mut c = Command::new("taskset");
            let list = (0..n.max(1)).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
            c.arg("-c").arg(list).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args(&args).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let before = cpu(libc::RUSAGE_CHILDREN);
    let out = cmd.output().with_context(|| format!("running {}", exe.display()))?;
    let process = cpu(libc::RUSAGE_CHILDREN) - before;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let m = stdout
        .lines()
        .find_map(Measure::parse)
        .ok_or_else(|| anyhow!("`read` printed no RESULT line (exit {}): {stdout}", out.status))?;
    if !out.status.success() {
        bail!("`read` failed ({}): {}", out.status, m.line());
    }
    Ok(Run { cores, m, process })
}

fn median(mut runs: Vec<Run>) -> Option<Run> {
    runs.sort_by(|a, b| a.m.elapsed.total_cmp(&b.m.elapsed));
    let i = runs.len() / 2;
    runs.into_iter().nth(i)
}

fn compare(a: CompareArgs) -> Result<()> {
    let pinned: Vec<Option<usize>> = if a.cores.is_empty() {
        vec![None]
    } else if Command::new("taskset").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok() {
        a.cores.iter().map(|&n| Some(n)).collect()
    } else {
        eprintln!("cdc_thesis: taskset not found; runs are not pinned");
        vec![None]
    };
    let mut table: Vec<Run> = Vec::new();
    for &cores in &pinned {
        for &window in &a.windows {
            for &library in &a.libraries {
                let mut runs = Vec::new();
                for round in 0..a.rounds.max(1) {
                    eprintln!(
                        "cdc_thesis: {}, window {window} s, {}, round {}",
                        library.name(),
                        cores.map_or("unpinned".to_string(), |n| format!("{n} core(s)")),
                        round + 1
                    );
                    runs.push(child(&a, cores, window, library)?);
                }
                table.extend(median(runs));
            }
        }
    }
    let text = render(&table, &a);
    print!("{text}");
    if let Some(path) = &a.markdown {
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn mmss(s: f64) -> String {
    let m = (s / 60.0).floor();
    format!("{}:{:05.2}", m as u64, s - m * 60.0)
}

fn render(runs: &[Run], a: &CompareArgs) -> String {
    let mut s = String::new();
    let rows = runs.first().map_or(0, |r| r.m.rows);
    let _ = writeln!(
        s,
        "CDC thesis benchmark: {rows} rows from {}.{} via {}, sleep {} ms, safety {} ms, start at the {}, {} round(s) (median by elapsed)\n",
        a.target.keyspace,
        a.target.table,
        a.target.node,
        a.opts.sleep_ms,
        a.opts.safety_ms,
        if a.opts.from == StartAt::Load { "load start" } else { "first generation" },
        a.rounds.max(1)
    );
    let _ = writeln!(
        s,
        "| cores | window (s) | library | user (s) | sys (s) | CPU % | elapsed | rows/s | CPU µs/row | process user+sys (s) | ok |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
    for r in runs {
        let m = &r.m;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {:.2} | {:.0} % | {} | {:.0} | {:.2} | {:.2} | {} |",
            r.cores.map_or("-".to_string(), |n| n.to_string()),
            m.window,
            m.library,
            m.user,
            m.sys,
            100.0 * m.cpu() / m.elapsed.max(1e-9),
            mmss(m.elapsed),
            m.rows_per_s(),
            m.cpu_us_per_row(),
            r.process.user + r.process.sys,
            if m.ok() { "yes" } else { "NO" }
        );
    }
    let find = |cores: Option<usize>, window: u64, lib: &str| {
        runs.iter().find(|r| r.cores == cores && r.m.window == window && r.m.library == lib)
    };
    let (mut ratios, mut async_ratios) = (String::new(), String::new());
    for r in runs.iter().filter(|r| r.m.library == Library::Shardwise.name()) {
        if let Some(peer) = find(r.cores, r.m.window, Library::ScyllaCdc.name()) {
            let _ = writeln!(
                ratios,
                "| {} | {} | {:.2} | {:.2} |",
                r.cores.map_or("-".to_string(), |n| n.to_string()),
                r.m.window,
                r.m.cpu_us_per_row() / peer.m.cpu_us_per_row().max(1e-12),
                r.m.elapsed / peer.m.elapsed.max(1e-12)
            );
        }
    }
    for r in runs.iter().filter(|r| r.m.library == Library::ShardwiseAsync.name()) {
        if let Some(sync) = find(r.cores, r.m.window, Library::Shardwise.name()) {
            let _ = writeln!(
                async_ratios,
                "| {} | {} | {:.2} | {:.2} |",
                r.cores.map_or("-".to_string(), |n| n.to_string()),
                r.m.window,
                r.m.cpu_us_per_row() / sync.m.cpu_us_per_row().max(1e-12),
                r.m.elapsed / sync.m.elapsed.max(1e-12)
            );
        }
    }
    if !async_ratios.is_empty() {
        let _ = writeln!(s, "\nasync consumer / synchronous consumer (shardwise):\n");
        let _ = writeln!(s, "| cores | window (s) | CPU per row | elapsed |");
        let _ = writeln!(s, "|---|---|---|---|");
        s.push_str(&async_ratios);
    }
    if !ratios.is_empty() {
        let _ = writeln!(s, "\nshardwise / scylla-cdc (target: CPU per row ≤ 0.12, elapsed ≤ 0.60):\n");
        let _ = writeln!(s, "| cores | window (s) | CPU per row | elapsed |");
        let _ = writeln!(s, "|---|---|---|---|");
        s.push_str(&ratios);
    }
    s
}
