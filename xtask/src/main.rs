//! `cargo xtask <command>`: the project's entry points.
//!
//! - `demo`: starts a local Cassandra 5.0 and shows the driver working on it.
//! - `test`: starts the server, runs the whole test suite against it (unit,
//!   loom models, integration), then a bounded fuzz run of every target.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use shardwise::protocol::consistency::Consistency;
use shardwise::{Session, SessionBuilder, Statement};
use testkit::{Node, NodeConfig};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo(),
        Some("test") => test(&args[1..]),
        _ => {
            eprintln!("usage: cargo xtask <demo | test [--no-fuzz] [--fuzz-seconds N] [-- <cargo test args>]>");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."))
}

/// Starts one Cassandra node on free ports; it stops when dropped (and when
/// this process dies, through testkit's lifeline).
fn start_server() -> Result<Node, String> {
    eprintln!("xtask: starting Cassandra {} (first run downloads it with Maven)...", testkit::CASSANDRA_VERSION);
    let started = Instant::now();
    let config = NodeConfig::default().with_free_ports().map_err(|e| e.to_string())?;
    let node = Node::start(config).map_err(|e| e.to_string())?;
    eprintln!("xtask: Cassandra is up at {} after {:.1?}", node.addr(), started.elapsed());
    Ok(node)
}

fn install_ctrlc_handler() {
    // Ctrl-C ends this process; the server dies with it through testkit's
    // lifeline. The handler only makes the exit prompt and quiet.
    let _ = ctrlc::set_handler(|| {
        eprintln!("\nxtask: interrupted, stopping");
        std::process::exit(130);
    });
}

fn demo() -> Result<(), String> {
    install_ctrlc_handler();
    let node = start_server()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(demo_session(node.addr())).map_err(|e| e.to_string())?;
    drop(node);
    eprintln!("xtask: server stopped");
    Ok(())
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
    session.execute(&Statement::new(format!("CREATE TABLE IF NOT EXISTS {ks}.kv (pk bigint PRIMARY KEY, v text)")), ()).await?;
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
    println!("wrote {ROWS} rows with a prepared INSERT, 256 in flight: {:.0} writes/s", ROWS as f64 / elapsed.as_secs_f64());
    let select = session.prepare(format!("SELECT v FROM {ks}.kv WHERE pk = ?").as_str()).await?;
    let row = session.execute(&select, (4242i64,)).await?;
    if let Some((v,)) = row.first_row::<(&str,)>()? {
        println!("read back pk 4242: {v:?} (borrowed from the response buffer)");
    }
    Ok(())
}

struct Step {
    name: String,
    ok: bool,
    detail: String,
}

fn run(cmd: &mut Command) -> bool {
    eprintln!("xtask: running {cmd:?}");
    cmd.status().map(|s| s.success()).unwrap_or_else(|e| {
        eprintln!("xtask: cannot run {cmd:?}: {e}");
        false
    })
}

fn test(args: &[String]) -> Result<(), String> {
    install_ctrlc_handler();
    let mut fuzz = true;
    let mut fuzz_seconds: u64 = std::env::var("SHARDWISE_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    let mut cargo_args = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--no-fuzz" => fuzz = false,
            "--fuzz-seconds" => {
                fuzz_seconds = it.next().and_then(|s| s.parse().ok()).ok_or("--fuzz-seconds takes a number")?
            }
            "--" => cargo_args.extend(it.by_ref().cloned()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    let root = workspace_root();
    let started = Instant::now();
    let node = start_server()?;
    let addr = node.addr().to_string();
    let mut steps = Vec::new();

    // 1. Every crate's tests: unit, loom models, integration against the server.
    let ok = run(Command::new("cargo")
        .current_dir(&root)
        .args(["test", "--workspace", "--all-targets"])
        .args(&cargo_args)
        .env(testkit::SHARDWISE_CASSANDRA, &addr));
    steps.push(Step { name: "cargo test --workspace".into(), ok, detail: String::new() });
    let ok = run(Command::new("cargo").current_dir(&root).args(["test", "--workspace", "--doc"]).env(testkit::SHARDWISE_CASSANDRA, &addr));
    steps.push(Step { name: "doc tests".into(), ok, detail: String::new() });
    drop(node);

    // 2. Bounded fuzzing of every target.
    if fuzz {
        for step in fuzz_all(&root.join("fuzz"), fuzz_seconds) {
            steps.push(step);
        }
    }

    eprintln!("\nxtask: summary after {:.0?}", started.elapsed());
    let mut failed = 0;
    for s in &steps {
        eprintln!("  {} {}{}", if s.ok { "ok    " } else { "FAILED" }, s.name, s.detail);
        failed += usize::from(!s.ok);
    }
    if failed > 0 {
        return Err(format!("{failed} step(s) failed"));
    }
    Ok(())
}

fn fuzz_all(fuzz_dir: &Path, seconds: u64) -> Vec<Step> {
    let mut steps = Vec::new();
    let has_cargo_fuzz = Command::new("cargo").args(["fuzz", "--version"]).output().is_ok_and(|o| o.status.success());
    if !has_cargo_fuzz && !run(Command::new("cargo").args(["install", "cargo-fuzz", "--locked"])) {
        steps.push(Step { name: "install cargo-fuzz".into(), ok: false, detail: String::new() });
        return steps;
    }
    let mut targets: Vec<String> = std::fs::read_dir(fuzz_dir.join("fuzz_targets"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| e.path().file_stem().map(|s| s.to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    targets.sort();
    if targets.is_empty() {
        eprintln!("xtask: no fuzz targets found");
    }
    for target in targets {
        let max_time = format!("-max_total_time={seconds}");
        eprintln!("xtask: fuzzing {target} for {seconds} s");
        let out = Command::new("cargo")
            .current_dir(fuzz_dir)
            .args(["+nightly", "fuzz", "run", &target, "--", &max_time, "-rss_limit_mb=2048", "-print_final_stats=1"])
            .output();
        let (ok, detail) = match out {
            Ok(out) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let runs = stderr
                    .lines()
                    .filter_map(|l| l.strip_prefix("Done ").and_then(|r| r.split_whitespace().next()))
                    .last()
                    .unwrap_or("?")
                    .to_owned();
                if !out.status.success() {
                    let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
                    eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
                }
                (out.status.success(), format!(" ({runs} executions in {seconds} s)"))
            }
            Err(e) => (false, format!(" (cannot run: {e})")),
        };
        steps.push(Step { name: format!("fuzz {target}"), ok, detail });
    }
    steps
}
