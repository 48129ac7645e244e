//! The demo behind `cargo xtask demo`, built in release: the figures that make the case
//! for shardwise, measured in under a minute against a real server.
//!
//! A real Cassandra 5.0, the Scylla emulation front in front of it (4 shards, shard-aware
//! port), and a session on a multi-threaded runtime, as services run it. It prints, in a
//! few lines: write and read throughput with p50/p99 latency, heap allocations per request
//! (a counting global allocator, all threads), the share of requests that reached the
//! shard owning their token, and the CDC engine following a table live: changes written,
//! delivered, and the delay from a write's timestamp to its delivery.
//!
//! Beside each phase it runs the same phase with the official driver (`scylla` 1.9, protocol
//! v4 as it negotiates with Cassandra 5.0): same statements, loops, runtime and front, after
//! the same warm-up, and prints the ratios shardwise / official, so a newcomer sees the
//! difference that does not depend on the machine. Each driver warms up before its figures
//! (writes before writes, reads before reads: a server whose read path is still being
//! compiled would bill that to whichever driver reads first), the measured halves alternate
//! (shardwise, official, official, shardwise), and each ratio is printed with the ratio of
//! each pair of halves beside it: when the two disagree, the difference is the server's
//! drift, not the drivers'.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::error::Error;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use shardwise::protocol::consistency::Consistency;
use shardwise::{Session, SessionBuilder, Statement};
use shardwise_cdc::{CdcReaderBuilder, CdcRow, Consumer, ConsumerError, GroupInfo};
use shardwise_emu::{Front, FrontConfig, FrontHandle};
use testkit::{Node, NodeConfig};

type Result<T, E = Box<dyn Error + Send + Sync>> = std::result::Result<T, E>;

/// Counts the allocations of the session's runtime threads while [`COUNTING`] is set. The
/// emulation front runs in this process too, on threads of its own, and is not counted.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set on the session runtime's threads (`on_thread_start`).
    static RUNTIME_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn count_one() {
    if COUNTING.load(Ordering::Relaxed) && RUNTIME_THREAD.try_with(|t| t.get()).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call to the system allocator unchanged; it only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller upholds `alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: as for `dealloc`; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Requests in flight: request loops, each issuing one request after the other.
const LOOPS: usize = 256;
/// Writes before anything is measured: a fresh JVM compiles its hot paths in
/// the first seconds, and a demo measured then shows the server warming up.
const WARM_TIME: Duration = Duration::from_secs(6);
const WRITE_TIME: Duration = Duration::from_secs(6);
const READ_TIME: Duration = Duration::from_secs(6);
/// Reads before reads are measured, each driver in turn: the server's read path is
/// compiled by its JIT in the first second of reads, and without this the first
/// measured half (shardwise's) paid for it alone.
const READ_WARM_TIME: Duration = Duration::from_secs(2);
/// The official driver's warm-up: its own connections and the server's paths for them.
const OFFICIAL_WARM_TIME: Duration = Duration::from_secs(2);
const CDC_TIME: Duration = Duration::from_secs(5);
const SHARDS: u16 = 4;
const KS: &str = "shardwise_demo";

fn main() -> std::process::ExitCode {
    match demo() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask demo: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn demo() -> Result<()> {
    let mut node = None;
    let upstream = match std::env::var(testkit::SHARDWISE_CASSANDRA).ok().filter(|v| !v.trim().is_empty()) {
        Some(v) => testkit::shared::parse_server_addr(&v)?,
        None => {
            println!(
                "starting Cassandra {} (the first run resolves its jars with Maven into {})",
                testkit::CASSANDRA_VERSION,
                testkit::dist::cassandra_cache_dir()?.display()
            );
            let n = Node::start(NodeConfig { quick_jit: false, ..NodeConfig::default() }.with_free_ports()?)?;
            let addr = n.addr();
            node = Some(n);
            addr
        }
    };
    let front = Front::start(upstream, FrontConfig { shards: SHARDS, ..FrontConfig::default() })?;
    println!(
        "Cassandra {} at {upstream}; the Scylla emulation front at {} ({SHARDS} shards, shard-aware port {})",
        testkit::CASSANDRA_VERSION,
        front.addr(),
        front.shard_aware_addr().port()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(|| RUNTIME_THREAD.with(|t| t.set(true)))
        .enable_all()
        .build()?;
    let result = rt.block_on(run(&front));
    front.stop();
    if let Some(mut n) = node {
        n.stop()?;
    }
    result
}

/// The official driver's session and statements, shared by its request loops.
struct Official {
    session: scylla::client::session::Session,
    insert: scylla::statement::prepared::PreparedStatement,
    select: scylla::statement::prepared::PreparedStatement,
}

impl Official {
    async fn connect(front: &FrontHandle) -> Result<Arc<Official>> {
        use scylla::client::execution_profile::ExecutionProfile;
        let profile =
            ExecutionProfile::builder().consistency(scylla::statement::Consistency::One).build().into_handle();
        let session = scylla::client::session_builder::SessionBuilder::new()
            .known_node(front.addr().to_string())
            .default_execution_profile_handle(profile)
            .build()
            .await?;
        let insert = session.prepare(format!("INSERT INTO {KS}.kv (pk, v) VALUES (?, ?)")).await?;
        let select = session.prepare(format!("SELECT v FROM {KS}.kv WHERE pk = ?")).await?;
        Ok(Arc::new(Official { session, insert, select }))
    }
}

/// Prints the official driver's figures of a phase and the ratios shardwise / official,
/// each with the ratios of the two pairs of halves (first shardwise half against the first
/// official one, second against second) in brackets: their disagreement is the spread.
fn beside(shardwise: &Measured, official: &Measured) {
    let ratio = |f: &dyn Fn(&Phase) -> f64| {
        let r = |s: &Phase, o: &Phase| if f(o) > 0.0 { format!("{:.2}x", f(s) / f(o)) } else { "-".into() };
        format!(
            "{} ({}, {})",
            r(&shardwise.all, &official.all),
            r(&shardwise.halves[0], &official.halves[0]),
            r(&shardwise.halves[1], &official.halves[1])
        )
    };
    let o = &official.all;
    println!(
        "  official driver: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {:.2} allocations per request",
        o.rate(),
        o.latency.quantile(0.5) as f64 / 1000.0,
        o.latency.quantile(0.99) as f64 / 1000.0,
        o.allocations as f64 / o.requests.max(1) as f64,
    );
    println!(
        "  shardwise/official (halves in brackets): throughput {}, p50 {}, p99 {}",
        ratio(&Phase::rate),
        ratio(&|p: &Phase| p.latency.quantile(0.5) as f64),
        ratio(&|p: &Phase| p.latency.quantile(0.99) as f64),
    );
}

/// One driver's two measured halves, and both as one.
struct Measured {
    halves: [Phase; 2],
    all: Phase,
}

async fn run(front: &FrontHandle) -> Result<()> {
    let session =
        SessionBuilder::new().known_node_addr(front.addr()).default_consistency(Consistency::One).build().await?;
    let protocol = session.connections().first().map(|c| format!("{:?}", c.version())).unwrap_or_default();
    println!("session: protocol {protocol}, shard-aware, on a multi-threaded runtime (2 workers)");
    session
        .execute(
            &Statement::new(format!(
                "CREATE KEYSPACE IF NOT EXISTS {KS} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            )),
            (),
        )
        .await?;
    session
        .execute(&Statement::new(format!("CREATE TABLE IF NOT EXISTS {KS}.kv (pk bigint PRIMARY KEY, v bigint)")), ())
        .await?;

    let insert = Arc::new(session.prepare(format!("INSERT INTO {KS}.kv (pk, v) VALUES (?, ?)")).await?);
    let write = {
        let insert = insert.clone();
        move |s: Session, pk: i64| {
            let insert = insert.clone();
            async move { Ok(s.execute(&*insert, (pk, pk * 2)).await.map(drop)?) }
        }
    };
    println!("warming the server up with {} s of writes (not measured)", WARM_TIME.as_secs());
    phase(&session, WARM_TIME, write.clone()).await?;
    let official = Official::connect(front).await?;
    let official_write = |o: Arc<Official>, pk: i64| async move {
        o.session.execute_unpaged(&o.insert, (pk, pk * 2)).await?;
        Result::<()>::Ok(())
    };
    println!(
        "official driver (scylla 1.9) on the same runtime and front: {} s of writes to warm it up (not measured)",
        OFFICIAL_WARM_TIME.as_secs()
    );
    phase(&official, OFFICIAL_WARM_TIME, official_write).await?;
    // Routing counts from the measured phases on.
    let before = front.stats();
    let (writes, official_writes, written) =
        alternate((&session, write), (&official, official_write), WRITE_TIME).await?;
    println!("{}", writes.all.line("prepared writes"));
    beside(&writes, &official_writes);
    // Every half wrote the keys from 0 on: each of them at least its measured requests.
    let written = written as i64;
    let select = Arc::new(session.prepare(format!("SELECT v FROM {KS}.kv WHERE pk = ?")).await?);
    let shardwise_read = {
        let select = select.clone();
        move |s: Session, n: i64| {
            let select = select.clone();
            async move {
                let pk = n % written.max(1);
                let result = s.execute(&*select, (pk,)).await?;
                match result.first_row::<(i64,)>()? {
                    Some((v,)) if v == pk * 2 => Ok(()),
                    other => Err(format!("pk {pk}: read {other:?}, wrote {}", pk * 2).into()),
                }
            }
        }
    };
    let official_read = move |o: Arc<Official>, n: i64| async move {
        let pk = n % written.max(1);
        let rows = o.session.execute_unpaged(&o.select, (pk,)).await?.into_rows_result()?;
        let checked: Result<()> = match rows.maybe_first_row::<(i64,)>()? {
            Some((v,)) if v == pk * 2 => Ok(()),
            other => Err(format!("pk {pk}: read {other:?} with the official driver, wrote {}", pk * 2).into()),
        };
        checked
    };
    println!("warming the server's reads up: {} s of reads with each driver (not measured)", READ_WARM_TIME.as_secs());
    phase(&official, READ_WARM_TIME, official_read).await?;
    phase(&session, READ_WARM_TIME, shardwise_read.clone()).await?;
    let (reads, official_reads, _) =
        alternate((&session, shardwise_read), (&official, official_read), READ_TIME).await?;
    println!("{}", reads.all.line("single-row reads"));
    beside(&reads, &official_reads);
    drop(official);
    let after = front.stats();
    let (hits, misses) = (after.hits() - before.hits(), after.misses() - before.misses());
    println!(
        "shard hits: {hits} of {} routed requests of both drivers reached the shard that owns their token ({:.2}%)",
        hits + misses,
        100.0 * hits as f64 / (hits + misses).max(1) as f64
    );
    cdc(&session).await
}

/// Measures shardwise and the official driver for `time` each, in halves ordered
/// shardwise, official, official, shardwise, so that a server or machine growing faster or
/// slower during the demo favours neither; returns each driver's halves and the fewest
/// requests any half measured.
async fn alternate<FS, FutS, FO, FutO>(
    shardwise: (&Session, FS),
    official: (&Arc<Official>, FO),
    time: Duration,
) -> Result<(Measured, Measured, u64)>
where
    FS: Fn(Session, i64) -> FutS + Clone + Send + 'static,
    FutS: std::future::Future<Output = Result<()>> + Send,
    FO: Fn(Arc<Official>, i64) -> FutO + Clone + Send + 'static,
    FutO: std::future::Future<Output = Result<()>> + Send,
{
    let half = time / 2;
    let s1 = phase(shardwise.0, half, shardwise.1.clone()).await?;
    let o1 = phase(official.0, half, official.1.clone()).await?;
    let o2 = phase(official.0, half, official.1).await?;
    let s2 = phase(shardwise.0, half, shardwise.1).await?;
    let fewest = [&s1, &o1, &o2, &s2].iter().map(|p| p.requests).min().unwrap_or(0);
    Ok((Measured::of(s1, s2), Measured::of(o1, o2), fewest))
}

/// What one measured phase saw.
struct Phase {
    requests: u64,
    elapsed: Duration,
    allocations: u64,
    latency: Histogram,
}

impl Measured {
    fn of(first: Phase, second: Phase) -> Measured {
        let latency = Histogram::new();
        latency.absorb(&first.latency);
        latency.absorb(&second.latency);
        let all = Phase {
            requests: first.requests + second.requests,
            elapsed: first.elapsed + second.elapsed,
            allocations: first.allocations + second.allocations,
            latency,
        };
        Measured { halves: [first, second], all }
    }
}

impl Phase {
    /// Requests per second.
    fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    fn line(&self, what: &str) -> String {
        format!(
            "{what}: {} in {:.1} s, {LOOPS} in flight: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, {:.2} allocations per request",
            self.requests,
            self.elapsed.as_secs_f64(),
            self.requests as f64 / self.elapsed.as_secs_f64(),
            self.latency.quantile(0.5) as f64 / 1000.0,
            self.latency.quantile(0.99) as f64 / 1000.0,
            self.allocations as f64 / self.requests.max(1) as f64
        )
    }
}

/// Runs `request` from [`LOOPS`] spawned request loops for `time`, after a short warm-up;
/// counts requests, latencies and allocations (only the measured part). `client` is what
/// each request gets: a shardwise [`Session`] or the official driver's.
async fn phase<C, F, Fut>(client: &C, time: Duration, request: F) -> Result<Phase>
where
    C: Clone + Send + 'static,
    F: Fn(C, i64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let latency = Arc::new(Histogram::new());
    let next = Arc::new(AtomicU64::new(0));
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..LOOPS {
        let (session, request) = (client.clone(), request.clone());
        let (latency, next, measuring, stop) = (latency.clone(), next.clone(), measuring.clone(), stop.clone());
        loops.spawn(async move {
            let mut done = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let n = next.fetch_add(1, Ordering::Relaxed) as i64;
                let t = Instant::now();
                request(session.clone(), n).await?;
                if measuring.load(Ordering::Relaxed) {
                    latency.record(t.elapsed());
                    done += 1;
                }
            }
            Ok::<u64, Box<dyn Error + Send + Sync>>(done)
        });
    }
    tokio::time::sleep(Duration::from_millis(500)).await; // warm-up: connections, caches, JIT
    ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(time).await;
    measuring.store(false, Ordering::Relaxed);
    COUNTING.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let mut requests = 0;
    while let Some(done) = loops.join_next().await {
        requests += done??;
    }
    let latency = Arc::try_unwrap(latency).map_err(|_| "latency histogram still shared")?;
    Ok(Phase { requests, elapsed, allocations, latency })
}

/// The CDC engine follows a table live while it is written; the consumer checks every
/// change against what was written and measures its delay.
async fn cdc(session: &Session) -> Result<()> {
    session.execute(&Statement::new(format!("DROP TABLE IF EXISTS {KS}.orders")), ()).await?;
    session
        .execute(
            &Statement::new(format!(
                "CREATE TABLE {KS}.orders (customer int, id int, qty int, PRIMARY KEY (customer, id)) \
                 WITH cdc = {{'enabled': true}}"
            )),
            (),
        )
        .await?;
    let started = SystemTime::now();
    let delays = Arc::new(Histogram::new());
    // Every delivered change by key: the engine delivers at least once (a window read again
    // after a timeout comes again), so repeats are counted apart and the check is on keys.
    let seen = Arc::new(Mutex::new(Delivered::default()));
    let factory = {
        let (delays, seen) = (delays.clone(), seen.clone());
        move |_: &GroupInfo| -> Box<dyn Consumer> {
            let (delays, seen) = (delays.clone(), seen.clone());
            Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
                let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
                let written = row.time_micros();
                delays.record(Duration::from_micros((now.as_micros() as i64 - written).max(0) as u64));
                let key: (i32, i32) = (row.value("customer")?, row.value("id")?);
                let qty = row.value::<Option<i32>>("qty")?.unwrap_or_default();
                let mut seen = seen.lock().map_err(|_| ConsumerError::failed("a consumer panicked"))?;
                seen.rows += 1;
                seen.qty.insert(key, qty);
                Ok(())
            })
        }
    };
    let reader = CdcReaderBuilder::new(session.clone(), KS, "orders")
        .start(started)
        .window_size(Duration::from_millis(250))
        .safety_interval(Duration::from_millis(100))
        .sleep_interval(Duration::from_millis(50))
        .generation_poll_interval(Duration::from_secs(1))
        .workers(2)
        .build(Arc::new(factory))
        .await?;
    let insert =
        Arc::new(session.prepare(format!("INSERT INTO {KS}.orders (customer, id, qty) VALUES (?, ?, ?)")).await?);
    // 16 writers, each its own customers, so every change can be checked.
    let deadline = Instant::now() + CDC_TIME;
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..16i32 {
        let (session, insert) = (session.clone(), insert.clone());
        writers.spawn(async move {
            let (mut written, mut sum) = (0u64, 0u64);
            while Instant::now() < deadline {
                let i = written as i32;
                let qty = 1 + i % 5;
                session.execute(&*insert, (w, i, qty)).await?;
                written += 1;
                sum += qty as u64;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Ok::<(u64, u64), shardwise::ExecutionError>((written, sum))
        });
    }
    let (mut written, mut sum) = (0u64, 0u64);
    while let Some(done) = writers.join_next().await {
        let (n, s) = done??;
        written += n;
        sum += s;
    }
    // A live reader has no end: wait for the last change (at most 30 s: a loaded machine
    // can hold a window back for seconds), then stop it.
    let waited = Instant::now();
    let distinct = |seen: &Mutex<Delivered>| seen.lock().map(|s| s.qty.len() as u64).unwrap_or(0);
    while distinct(&seen) < written && waited.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let caught_up = waited.elapsed();
    reader.stop();
    reader.join().await?;
    let seen = seen.lock().map_err(|_| "a consumer panicked")?;
    let (got, got_sum) = (seen.qty.len() as u64, seen.qty.values().map(|q| *q as u64).sum::<u64>());
    let repeats = seen.rows - got;
    let verdict = if got == written && got_sum == sum { "every change, checksum equal" } else { "MISMATCH" };
    println!(
        "CDC: {written} changes written, {got} delivered ({verdict}, {repeats} repeated); write to delivery \
         p50 {:.0} ms, p99 {:.0} ms (window 250 ms, safety interval 100 ms); the last change {:.1} s after the \
         last write",
        delays.quantile(0.5) as f64 / 1000.0,
        delays.quantile(0.99) as f64 / 1000.0,
        caught_up.as_secs_f64()
    );
    if got != written || got_sum != sum {
        return Err(
            format!("the CDC engine delivered {got} changes (sum {got_sum}), {written} written (sum {sum})").into()
        );
    }
    Ok(())
}

/// What the CDC consumers saw: every row, and the last quantity of each key.
#[derive(Default)]
struct Delivered {
    rows: u64,
    qty: HashMap<(i32, i32), i32>,
}

/// A log-linear latency histogram in microseconds (1/32 relative resolution), lock-free.
struct Histogram {
    buckets: Vec<AtomicU64>,
    total: AtomicU64,
}

const SUB: u64 = 32;

impl Histogram {
    fn new() -> Self {
        Histogram { buckets: (0..64 * SUB).map(|_| AtomicU64::new(0)).collect(), total: AtomicU64::new(0) }
    }

    fn index(us: u64) -> usize {
        if us < SUB {
            return us as usize;
        }
        let exp = 63 - us.leading_zeros() as u64 - 5; // us >> exp lies in [SUB, 2 * SUB)
        ((exp + 1) * SUB + (us >> exp) - SUB) as usize
    }

    fn lower_bound(index: usize) -> u64 {
        let i = index as u64;
        if i < SUB {
            return i;
        }
        let exp = i / SUB - 1;
        (SUB + i % SUB) << exp
    }

    fn record(&self, d: Duration) {
        let i = Self::index(d.as_micros() as u64).min(self.buckets.len() - 1);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `other`'s samples to these.
    fn absorb(&self, other: &Histogram) {
        for (mine, theirs) in self.buckets.iter().zip(&other.buckets) {
            mine.fetch_add(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.total.fetch_add(other.total.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// The value below which a `q` share of the samples lie, in microseconds.
    fn quantile(&self, q: f64) -> u64 {
        let total = self.total.load(Ordering::Relaxed);
        let rank = ((total as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= rank {
                return Self::lower_bound(i);
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_hold_their_values() {
        for us in (0..5000).chain([65_535, 65_536, 1 << 30, u64::from(u32::MAX)]) {
            let i = Histogram::index(us);
            assert!(Histogram::lower_bound(i) <= us && us < Histogram::lower_bound(i + 1), "{us} in bucket {i}");
            assert!(i < 64 * SUB as usize);
        }
        let h = Histogram::new();
        for us in 1..=1000 {
            h.record(Duration::from_micros(us));
        }
        // Within the 1/32 resolution of the buckets.
        assert!((484..=500).contains(&h.quantile(0.5)), "{}", h.quantile(0.5));
        assert!((960..=990).contains(&h.quantile(0.99)), "{}", h.quantile(0.99));
        // Two histograms added up hold both's samples.
        let more = Histogram::new();
        for us in 1001..=3000 {
            more.record(Duration::from_micros(us));
        }
        h.absorb(&more);
        assert_eq!(h.total.load(Ordering::Relaxed), 3000);
        assert!((1470..=1500).contains(&h.quantile(0.5)), "{}", h.quantile(0.5));
    }
}
