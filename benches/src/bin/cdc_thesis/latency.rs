//! `latency`: how long a live consumer waits for each change, and what the
//! waiting costs. This process writes rows at a steady rate, each carrying
//! the time it was sent (its `ck`, microseconds since the epoch); a child
//! process reads the log with one library, from just before, with a small
//! safety interval and sleep, and its consumer records `now - ck` for each
//! row. That is the delay from the write being sent to the consumer being
//! called: the write's own latency (about a millisecond here) more than
//! "acknowledged to consumed". The child's CPU time (`getrusage`) is the
//! reader's alone. Each (library, round) reads a fresh table, the libraries
//! alternating, so both see the same server.

use std::fmt::Write as _;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use tokio::sync::Notify;

use crate::{quote, resolve, runtime, shardwise_session, Library, Target};

/// The live settings both libraries run with.
#[derive(Args, Debug, Clone)]
pub(crate) struct LiveOpts {
    /// Rows written per second.
    #[arg(long, default_value_t = 500)]
    rate: u64,
    /// Seconds of writing.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Safety interval in milliseconds (windows end at now - safety).
    #[arg(long, default_value_t = 100)]
    safety_ms: u64,
    /// Sleep between windows in milliseconds.
    #[arg(long, default_value_t = 100)]
    sleep_ms: u64,
    /// Window size in milliseconds.
    #[arg(long, default_value_t = 1000)]
    window_ms: u64,
}

impl LiveOpts {
    fn args(&self) -> Vec<String> {
        vec![
            "--rate".into(),
            self.rate.to_string(),
            "--seconds".into(),
            self.seconds.to_string(),
            "--safety-ms".into(),
            self.safety_ms.to_string(),
            "--sleep-ms".into(),
            self.sleep_ms.to_string(),
            "--window-ms".into(),
            self.window_ms.to_string(),
        ]
    }
}

/// `cdc_thesis latency`: every library, alternating, in child processes.
#[derive(Args, Debug)]
pub(crate) struct LatencyArgs {
    #[command(flatten)]
    target: Target,
    /// Libraries, in run order within a round.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "shardwise,scylla-cdc")]
    libraries: Vec<Library>,
    /// Rounds; the table shows the median of each figure.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    #[command(flatten)]
    live: LiveOpts,
    /// Also write the table as Markdown to this file.
    #[arg(long)]
    markdown: Option<std::path::PathBuf>,
}

/// `cdc_thesis latency-run`: one library, one fresh table, in this process.
#[derive(Args, Debug)]
pub(crate) struct LatencyRunArgs {
    #[command(flatten)]
    target: Target,
    /// The library that reads.
    #[arg(long, value_enum)]
    library: Library,
    #[command(flatten)]
    live: LiveOpts,
}

/// One run's delays, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
struct Delays {
    library: String,
    rows: u64,
    expected: u64,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    /// The reader process's CPU time (user + system), in seconds.
    cpu_s: f64,
}

impl Delays {
    fn line(&self) -> String {
        format!(
            "LATENCY library={} rows={} expected={} p50_ms={:.2} p90_ms={:.2} p99_ms={:.2} max_ms={:.2} cpu_s={:.3}",
            self.library, self.rows, self.expected, self.p50, self.p90, self.p99, self.max, self.cpu_s
        )
    }

    fn parse(line: &str) -> Option<Delays> {
        let rest = line.strip_prefix("LATENCY ")?;
        let mut d =
            Delays { library: String::new(), rows: 0, expected: 0, p50: 0.0, p90: 0.0, p99: 0.0, max: 0.0, cpu_s: 0.0 };
        for kv in rest.split_whitespace() {
            let (k, v) = kv.split_once('=')?;
            match k {
                "library" => d.library = v.to_owned(),
                "rows" => d.rows = v.parse().ok()?,
                "expected" => d.expected = v.parse().ok()?,
                "p50_ms" => d.p50 = v.parse().ok()?,
                "p90_ms" => d.p90 = v.parse().ok()?,
                "p99_ms" => d.p99 = v.parse().ok()?,
                "max_ms" => d.max = v.parse().ok()?,
                "cpu_s" => d.cpu_s = v.parse().ok()?,
                _ => {}
            }
        }
        Some(d)
    }
}

fn now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// What the consumers record.
struct Record {
    delays: Mutex<Histogram<u64>>,
    rows: AtomicU64,
    expected: u64,
    done: Notify,
}

impl Record {
    fn add(&self, sent_us: i64) {
        let delay = u64::try_from(now_us() - sent_us).unwrap_or(0);
        if let Ok(mut h) = self.delays.lock() {
            h.saturating_record(delay);
        }
        if self.rows.fetch_add(1, Ordering::AcqRel) + 1 == self.expected {
            self.done.notify_one();
        }
    }
}

pub(crate) fn run(a: LatencyRunArgs) -> Result<()> {
    let rt = runtime(None)?;
    let d = rt.block_on(run_async(&a))?;
    println!("{}", d.line());
    rt.shutdown_timeout(Duration::from_secs(2));
    if d.rows != d.expected {
        bail!("{} of {} rows delivered", d.rows, d.expected);
    }
    Ok(())
}

async fn run_async(a: &LatencyRunArgs) -> Result<Delays> {
    use std::io::Write as _;
    let expected = a.live.rate * a.live.seconds;
    let record = Arc::new(Record {
        delays: Mutex::new(Histogram::new_with_bounds(1, 3_600_000_000, 3)?),
        rows: AtomicU64::new(0),
        expected,
        done: Notify::new(),
    });
    let cpu0 = crate::cpu(libc::RUSAGE_SELF);
    let start = SystemTime::now() - Duration::from_secs(1);
    let stop: Box<dyn FnOnce()> = match a.library {
        Library::Shardwise => shardwise_reader(a, start, record.clone()).await?,
        Library::ScyllaCdc => scylla_cdc_reader(a, start, record.clone()).await?,
        Library::ShardwiseAsync => anyhow::bail!("the latency mode measures shardwise and scylla-cdc"),
    };
    // Reading the present: the writer may start.
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("READY");
    std::io::stdout().flush()?;
    let timeout = Duration::from_secs(a.live.seconds + 30) + Duration::from_millis(a.live.window_ms);
    let deadline = tokio::time::Instant::now() + timeout;
    while record.rows.load(Ordering::Acquire) < expected {
        if tokio::time::timeout_at(deadline, record.done.notified()).await.is_err() {
            break;
        }
    }
    let used = crate::cpu(libc::RUSAGE_SELF) - cpu0;
    stop();
    let h = record.delays.lock().map_err(|_| anyhow!("a consumer panicked"))?.clone();
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Ok(Delays {
        library: a.library.name().into(),
        rows: record.rows.load(Ordering::Acquire),
        expected,
        p50: ms(0.5),
        p90: ms(0.9),
        p99: ms(0.99),
        max: h.max() as f64 / 1000.0,
        cpu_s: used.user + used.sys,
    })
}

/// A fresh CDC table `(pk bigint, ck bigint)` and its prepared INSERT.
async fn fresh_table(session: &shardwise::Session, target: &Target) -> Result<shardwise::PreparedStatement> {
    use shardwise::Statement;
    let (ks, table) = (quote(&target.keyspace), quote(&target.table));
    let replication = "{'class': 'SimpleStrategy', 'replication_factor': 1}";
    for ddl in [
        format!("CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {replication}"),
        format!("DROP TABLE IF EXISTS {ks}.{table}"),
        format!(
            "CREATE TABLE {ks}.{table} (pk bigint, ck bigint, PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}}"
        ),
    ] {
        session.execute(&Statement::new(ddl.as_str()), ()).await.with_context(|| ddl.clone())?;
    }
    session.prepare(format!("INSERT INTO {ks}.{table} (pk, ck) VALUES (?, ?)")).await.context("prepare")
}

/// Writes `rate × seconds` rows at `rate`, each with the time it is sent as its `ck`.
async fn write_steadily(
    session: &shardwise::Session,
    insert: &shardwise::PreparedStatement,
    live: &LiveOpts,
) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs(1) / u32::try_from(live.rate.max(1)).unwrap_or(1));
    let mut writes = tokio::task::JoinSet::new();
    let insert = Arc::new(insert.clone());
    for i in 0..live.rate * live.seconds {
        tick.tick().await;
        let (session, insert) = (session.clone(), insert.clone());
        writes.spawn(async move { session.execute(&*insert, ((i % 16) as i64, now_us())).await });
    }
    while let Some(w) = writes.join_next().await {
        w?.context("write")?;
    }
    Ok(())
}

async fn shardwise_reader(a: &LatencyRunArgs, start: SystemTime, record: Arc<Record>) -> Result<Box<dyn FnOnce()>> {
    use shardwise_cdc::{CdcReaderBuilder, CdcRow, Consumer, ConsumerError, GroupInfo};
    let session = shardwise_session(&a.target.node).await?;
    let factory = move |_: &GroupInfo| -> Box<dyn Consumer> {
        let record = record.clone();
        Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
            record.add(row.value("ck")?);
            Ok(())
        })
    };
    let reader = CdcReaderBuilder::new(session, &a.target.keyspace, &a.target.table)
        .start(start)
        .window_size(Duration::from_millis(a.live.window_ms))
        .safety_interval(Duration::from_millis(a.live.safety_ms))
        .sleep_interval(Duration::from_millis(a.live.sleep_ms))
        .build(Arc::new(factory))
        .await
        .context("starting shardwise-cdc")?;
    let handle = reader.handle();
    // The reader runs on its own threads; `join` (not `Send`) is left to a thread of its own.
    std::thread::spawn(move || {
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
            if let Err(e) = rt.block_on(reader.join()) {
                eprintln!("shardwise-cdc reader: {e}");
            }
        }
    });
    Ok(Box::new(move || handle.stop()))
}

async fn scylla_cdc_reader(a: &LatencyRunArgs, start: SystemTime, record: Arc<Record>) -> Result<Box<dyn FnOnce()>> {
    use scylla::client::session_builder::SessionBuilder;
    use scylla_cdc::log_reader::CDCLogReaderBuilder;

    let delay = move |row: &scylla_cdc::consumer::CDCRow<'_>| {
        record.add(crate::ck_of(row)?);
        Ok(())
    };

    let session = Arc::new(
        SessionBuilder::new()
            .known_node_addr(resolve(&a.target.node)?)
            .build()
            .await
            .context("connecting with the scylla driver")?,
    );
    let (mut reader, handle) = CDCLogReaderBuilder::new()
        .session(session)
        .keyspace(&a.target.keyspace)
        .table_name(&a.target.table)
        .start_timestamp(start.duration_since(UNIX_EPOCH)?)
        .window_size(Duration::from_millis(a.live.window_ms))
        .safety_interval(Duration::from_millis(a.live.safety_ms))
        .sleep_interval(Duration::from_millis(a.live.sleep_ms))
        .consumer_factory(Arc::new(crate::RowFn(Arc::new(delay))))
        .build()
        .await
        .context("starting scylla-cdc")?;
    tokio::spawn(async move {
        if let Err(e) = handle.await {
            eprintln!("scylla-cdc reader: {e}");
        }
    });
    Ok(Box::new(move || reader.stop()))
}

/// Runs `latency-run` for every round and library, alternating, and writes
/// the rows each reads.
pub(crate) fn compare(a: LatencyArgs) -> Result<()> {
    let rt = runtime(None)?;
    let runs = rt.block_on(compare_async(&a))?;
    let text = render(&runs, &a);
    print!("{text}");
    if let Some(path) = &a.markdown {
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

async fn compare_async(a: &LatencyArgs) -> Result<Vec<Delays>> {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let exe = std::env::current_exe()?;
    let session = shardwise_session(&a.target.node).await?;
    let mut runs: Vec<Delays> = Vec::new();
    for round in 0..a.rounds.max(1) {
        for &library in &a.libraries {
            let target = Target {
                table: format!("{}_{}_{round}", a.target.table, library.name().replace('-', "_")),
                ..a.target.clone()
            };
            eprintln!("cdc_thesis latency: {}, round {}", library.name(), round + 1);
            let insert = fresh_table(&session, &target).await?;
            let mut child = tokio::process::Command::new(&exe)
                .args(["latency-run", "--node", &target.node, "--keyspace", &target.keyspace, "--table", &target.table])
                .args(["--library", library.name()])
                .args(a.live.args())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("running {}", exe.display()))?;
            let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
            let mut lines = BufReader::new(stdout).lines();
            let mut printed = String::new();
            while let Some(line) = lines.next_line().await? {
                if line == "READY" {
                    write_steadily(&session, &insert, &a.live).await?;
                    continue;
                }
                printed.push_str(&line);
                printed.push('\n');
            }
            let status = child.wait().await?;
            let d = printed
                .lines()
                .find_map(Delays::parse)
                .ok_or_else(|| anyhow!("`latency-run` printed no LATENCY line ({status}): {printed}"))?;
            if !status.success() {
                bail!("`latency-run` failed ({status}): {}", d.line());
            }
            runs.push(d);
        }
    }
    Ok(runs)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn render(runs: &[Delays], a: &LatencyArgs) -> String {
    let l = &a.live;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "CDC end-to-end delay (write sent → consumer called) via {}: {} rows/s for {} s, safety {} ms, sleep {} ms, window {} ms, {} round(s)\n",
        a.target.node,
        l.rate,
        l.seconds,
        l.safety_ms,
        l.sleep_ms,
        l.window_ms,
        a.rounds.max(1)
    );
    let _ = writeln!(s, "| library | round | rows | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | reader CPU (s) |");
    let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---:|");
    let per_round = a.libraries.len().max(1);
    for (i, d) in runs.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | {} | {} / {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
            d.library,
            i / per_round + 1,
            d.rows,
            d.expected,
            d.p50,
            d.p90,
            d.p99,
            d.max,
            d.cpu_s
        );
    }
    let of =
        |lib: Library, f: fn(&Delays) -> f64| median(runs.iter().filter(|d| d.library == lib.name()).map(f).collect());
    if a.libraries.contains(&Library::Shardwise) && a.libraries.contains(&Library::ScyllaCdc) {
        let _ = write!(s, "\nmedians, shardwise / scylla-cdc:");
        type Figure = fn(&Delays) -> f64;
        let figures: [(&str, Figure, &str); 3] =
            [("p50", |d| d.p50, "ms"), ("p99", |d| d.p99, "ms"), ("reader CPU", |d| d.cpu_s, "s")];
        for (name, f, unit) in figures {
            let (ours, theirs) = (of(Library::Shardwise, f), of(Library::ScyllaCdc, f));
            let _ = write!(s, " {name} {ours:.2} / {theirs:.2} {unit} ({:.2}×);", ours / theirs);
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_line_reads_back() {
        let d = Delays {
            library: "scylla-cdc".into(),
            rows: 5000,
            expected: 5000,
            p50: 120.5,
            p90: 180.25,
            p99: 230.0,
            max: 410.75,
            cpu_s: 0.125,
        };
        assert_eq!(Delays::parse(&d.line()), Some(d));
        assert_eq!(Delays::parse("RESULT rows=1"), None);
    }
}
