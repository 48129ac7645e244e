//! `cargo xtask demo`: a real Cassandra 5.0, what it serves on the wire, the
//! driver working against it end to end, and then CDC end to end: the Scylla
//! emulation front in front of it, a CDC-enabled table, a stream of writes,
//! and the CDC engine following them live, printing each change.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use shardwise::protocol::consistency::Consistency;
use shardwise::{Session, SessionBuilder, Statement};
use shardwise_cdc::printer::human;
use shardwise_cdc::{CdcReaderBuilder, CdcRow, Change, Consumer, ConsumerError, GroupInfo};
use shardwise_emu::{Front, FrontConfig, FrontHandle};
use testkit::probe::{self, OPTIONS_V4};
use testkit::{HarnessError, Node, NodeConfig};

pub fn run(args: &[String]) -> ExitCode {
    if let Some(a) = args.first() {
        eprintln!("xtask demo: unexpected argument {a:?}");
        return ExitCode::from(2);
    }
    crate::install_interrupt_handler();
    match demo() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn demo() -> Result<(), Box<dyn std::error::Error>> {
    let mut node = None;
    let addr = match std::env::var(testkit::SHARDWISE_CASSANDRA).ok().filter(|v| !v.trim().is_empty()) {
        Some(v) => {
            let addr = testkit::shared::parse_server_addr(&v)?;
            println!("using the server in SHARDWISE_CASSANDRA: {addr}");
            addr
        }
        None => {
            println!(
                "starting Cassandra {} on 127.0.0.1 (the first run resolves its jars with Maven into {})",
                testkit::CASSANDRA_VERSION,
                testkit::dist::cassandra_cache_dir()?.display()
            );
            let n = Node::start(NodeConfig::default().with_free_ports()?)?;
            println!(
                "ready at {} after {:.1} s (log: {})",
                n.addr(),
                n.startup_time().unwrap_or_default().as_secs_f64(),
                n.log_path().display()
            );
            let addr = n.addr();
            node = Some(n);
            addr
        }
    };

    let result = show_options(addr).map_err(Box::<dyn std::error::Error>::from).and_then(|()| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(demo_session(addr))?;
        let front = Front::start(addr, FrontConfig { shards: 4, ..FrontConfig::default() })?;
        println!(
            "\nthe Scylla emulation front listens on {} (4 shards, shard-aware port {})",
            front.addr(),
            front.shard_aware_addr()
        );
        let cdc = rt.block_on(demo_cdc(&front));
        println!("front counters:\n{}", front.stats());
        cdc
    });

    if let Some(mut n) = node {
        let t = Instant::now();
        n.stop()?;
        println!("stopped the server in {:.1} s", t.elapsed().as_secs_f64());
    }
    result
}

/// OPTIONS by hand over a plain `TcpStream`: what the server serves.
fn show_options(addr: SocketAddr) -> Result<(), HarnessError> {
    let io = |what: &str, e: std::io::Error| HarnessError::Io { context: format!("{what} {addr}"), source: e };
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| io("connecting to", e))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| io("configuring the socket to", e))?;
    println!("\n-> OPTIONS    {}", hex(&OPTIONS_V4));
    s.write_all(&OPTIONS_V4).map_err(|e| io("writing to", e))?;
    let mut header = [0u8; 9];
    s.read_exact(&mut header).map_err(|e| io("reading from", e))?;
    let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
    if header[4] != probe::opcode::SUPPORTED || len > 1 << 20 {
        return Err(HarnessError::Protocol {
            addr,
            message: format!("expected a SUPPORTED frame, got header {}", hex(&header)),
        });
    }
    println!("<- SUPPORTED  {} ({len}-byte body)", hex(&header));
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).map_err(|e| io("reading from", e))?;
    let options = probe::decode_supported(&body).map_err(|message| HarnessError::Protocol { addr, message })?;
    let width = options.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (key, values) in &options {
        println!("   {key:width$}  {}", values.join(", "));
    }
    println!();
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

async fn demo_session(addr: std::net::SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let session = SessionBuilder::new().known_node_addr(addr).default_consistency(Consistency::One).build().await?;
    let conn = session.connections().into_iter().next().ok_or("no connection")?;
    println!("connected to {addr} with protocol {:?}", conn.version());
    println!("the server offered (SUPPORTED):");
    for (key, values) in conn.supported() {
        println!("  {key}: {}", values.join(", "));
    }
    let local = session
        .execute(&Statement::new("SELECT cluster_name, release_version, cql_version FROM system.local"), ())
        .await?;
    if let Some((cluster, release, cql)) = local.first_row::<(&str, &str, &str)>()? {
        println!("cluster {cluster:?}: Cassandra {release}, CQL {cql}");
    }
    demo_workload(&session).await?;
    let m = session.metrics();
    println!(
        "requests: {}, errors: {}, p50 <= {:?}, p99 <= {:?}",
        m.requests,
        m.errors,
        m.latency_quantile(0.5).unwrap_or_default(),
        m.latency_quantile(0.99).unwrap_or_default()
    );
    Ok(())
}

async fn demo_workload(session: &Session) -> Result<(), Box<dyn std::error::Error>> {
    let ks = "shardwise_demo";
    session
        .execute(
            &Statement::new(format!(
                "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            )),
            (),
        )
        .await?;
    session
        .execute(&Statement::new(format!("CREATE TABLE IF NOT EXISTS {ks}.kv (pk bigint PRIMARY KEY, v text)")), ())
        .await?;
    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)").as_str()).await?;
    const ROWS: i64 = 10_000;
    let started = Instant::now();
    let mut in_flight = tokio::task::JoinSet::new();
    for pk in 0..ROWS {
        if in_flight.len() >= 256 {
            in_flight.join_next().await.ok_or("join")???;
        }
        let (session, insert) = (session.clone(), insert.clone());
        in_flight.spawn(async move { session.execute(&insert, (pk, format!("value {pk}"))).await.map(drop) });
    }
    while let Some(done) = in_flight.join_next().await {
        done??;
    }
    let elapsed = started.elapsed();
    println!(
        "wrote {ROWS} rows with a prepared INSERT, 256 in flight: {:.0} writes/s",
        ROWS as f64 / elapsed.as_secs_f64()
    );
    let select = session.prepare(format!("SELECT v FROM {ks}.kv WHERE pk = ?").as_str()).await?;
    let row = session.execute(&select, (4242i64,)).await?;
    if let Some((v,)) = row.first_row::<(&str,)>()? {
        println!("read back pk 4242: {v:?} (borrowed from the response buffer)");
    }
    Ok(())
}

/// CDC end to end: writes for a few seconds while the engine follows them.
async fn demo_cdc(front: &FrontHandle) -> Result<(), Box<dyn std::error::Error>> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    let session =
        SessionBuilder::new().known_node_addr(front.addr()).default_consistency(Consistency::One).build().await?;
    let ks = "shardwise_demo";
    session
        .execute(
            &Statement::new(format!(
                "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            )),
            (),
        )
        .await?;
    session.execute(&Statement::new(format!("DROP TABLE IF EXISTS {ks}.orders")), ()).await?;
    session
        .execute(
            &Statement::new(format!(
                "CREATE TABLE {ks}.orders (customer int, id int, item text, qty int, PRIMARY KEY (customer, id)) \
                 WITH cdc = {{'enabled': true}}"
            )),
            (),
        )
        .await?;
    println!("created {ks}.orders WITH cdc = {{'enabled': true}}; the front created {ks}.orders_scylla_cdc_log");
    let started = std::time::SystemTime::now();
    const SECONDS: u64 = 5;
    let seen = Arc::new(AtomicU64::new(0));
    let counter = seen.clone();
    let factory = move |_: &GroupInfo| -> Box<dyn Consumer> {
        let counter = counter.clone();
        Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
            let n = counter.fetch_add(1, Ordering::Relaxed);
            if n < 12 || n.is_multiple_of(500) {
                println!("  cdc> {}", human(&Change::from_row(&row)?));
            }
            Ok(())
        })
    };
    let reader = CdcReaderBuilder::new(session.clone(), ks, "orders")
        .start(started)
        .duration(Duration::from_secs(SECONDS + 1))
        .window_size(Duration::from_secs(1))
        .safety_interval(Duration::from_millis(500))
        .sleep_interval(Duration::from_millis(200))
        .generation_poll_interval(Duration::from_secs(1))
        .workers(2)
        .build(Arc::new(factory))
        .await?;
    println!("the CDC engine follows the log (2 worker threads, window 1 s, safety 0.5 s); writing for {SECONDS} s...");
    let insert = session
        .prepare(format!("INSERT INTO {ks}.orders (customer, id, item, qty) VALUES (?, ?, ?, ?)").as_str())
        .await?;
    let update =
        session.prepare(format!("UPDATE {ks}.orders SET qty = ? WHERE customer = ? AND id = ?").as_str()).await?;
    let delete = session.prepare(format!("DELETE FROM {ks}.orders WHERE customer = ? AND id = ?").as_str()).await?;
    let (mut written, mut i) = (0u64, 0i32);
    let deadline = Instant::now() + Duration::from_secs(SECONDS);
    let mut tick = Instant::now();
    while Instant::now() < deadline {
        let (customer, id) = (i % 50, i / 50);
        match i % 7 {
            5 => session.execute(&update, (i, customer, id - 1)).await.map(drop)?,
            6 => session.execute(&delete, (customer, id - 2)).await.map(drop)?,
            _ => session.execute(&insert, (customer, id, format!("item-{i}"), 1 + i % 3)).await.map(drop)?,
        }
        written += 1;
        i += 1;
        if tick.elapsed() >= Duration::from_secs(1) {
            println!("  [progress] written {written}, delivered by CDC {}", seen.load(Ordering::Relaxed));
            tick = Instant::now();
        }
    }
    reader.join().await?;
    println!("wrote {written} changes; the CDC engine delivered {} log rows", seen.load(Ordering::Relaxed));
    Ok(())
}
