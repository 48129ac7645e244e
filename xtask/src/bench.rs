//! `cargo xtask bench`: the comparison suite end to end. Builds the release
//! benchmark binaries, starts Cassandra 5.0 (or uses `$SHARDWISE_CASSANDRA`)
//! and a Scylla emulation front with 8 shards in this process, runs
//! `workload compare` (shardwise beside the official driver, protocol v4 on
//! both sides, one process per run, A B B A) for `write` and `read` as
//! services run them: a current-thread runtime × 128 in flight, then every
//! request loop a spawned task on 2 workers × 128, 2 × 2048, 4 × 2048 and
//! 8 × 2048 (whether a request costs more as workers are added),
//! and the last two again with a connection per worker and shardwise's
//! requests keeping to their thread's; against plain Cassandra and through
//! the front; then the open-loop matrix: for `write` and `read` on a
//! current-thread runtime × 128 and on 2 workers × 128 spawned loops, both
//! drivers at a fixed rate (`--rate`, latency from when each request was
//! due) of 25, 50, 75 and 90% of the official driver's closed-loop peak in
//! that configuration (its median throughput in the comparison just run),
//! against Cassandra and through the front; then the CDC benchmark
//! (`cdc_thesis load` and `compare`, `--cdc-load PxR` rows, `--cdc-cores`)
//! through a front of 4 shards built in release (`shardwise-emu`, a child
//! process), and writes everything to `benches/results/latest.md`, with
//! the figures as JSON in `benches/results/latest/`: one file per comparison
//! , `driver.json` and `open-loop.json` (kind `open_loop`), all of them in
//! the format `cargo xtask charts` reads.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use shardwise_emu::{Front, FrontConfig, FrontHandle};
use testkit::{Node, NodeConfig};

use crate::steps::workspace_root;

struct Options {
    quick: bool,
    cdc: bool,
    workloads: bool,
    duration: Option<String>,
    warmup: Option<String>,
    rounds: Option<usize>,
    /// `cdc_thesis load` size: partitions and rows per partition.
    cdc_load: Option<(u64, u64)>,
    /// `cdc_thesis compare --cores`.
    cdc_cores: Option<String>,
    /// Instructions per request only: write them (`Write`) or check them
    /// against the committed ones (`Check`).
    instructions: Option<Instructions>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Instructions {
    Write,
    Check,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        cdc: true,
        workloads: true,
        duration: None,
        warmup: None,
        rounds: None,
        cdc_load: None,
        cdc_cores: None,
        instructions: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--instructions" => o.instructions = Some(Instructions::Write),
            "--check" => o.instructions = Some(Instructions::Check),
            "--no-cdc" => o.cdc = false,
            "--cdc-only" => o.workloads = false,
            "--duration" => o.duration = Some(it.next().ok_or("--duration takes a value (e.g. 10s)")?.clone()),
            "--warmup" => o.warmup = Some(it.next().ok_or("--warmup takes a value (e.g. 1s)")?.clone()),
            "--rounds" => {
                o.rounds = Some(
                    it.next()
                        .and_then(|v| v.parse().ok())
                        .filter(|&n: &usize| n > 0)
                        .ok_or("--rounds takes a positive number")?,
                )
            }
            "--cdc-load" => {
                let v = it.next().ok_or("--cdc-load takes PARTITIONSxROWS (e.g. 1000x10000)")?;
                o.cdc_load = Some(
                    v.split_once('x')
                        .and_then(|(p, r)| Some((p.parse().ok()?, r.parse().ok()?)))
                        .filter(|&(p, r): &(u64, u64)| p > 0 && r > 0)
                        .ok_or_else(|| format!("--cdc-load {v}: not PARTITIONSxROWS (e.g. 1000x10000)"))?,
                )
            }
            "--cdc-cores" => o.cdc_cores = Some(it.next().ok_or("--cdc-cores takes a list (e.g. 1,2)")?.clone()),
            other => {
                return Err(format!(
                    "unknown option {other} (options: --quick --no-cdc --cdc-only --duration D --warmup D --rounds N \
                     --cdc-load PxR --cdc-cores LIST --instructions --check)"
                ))
            }
        }
    }
    Ok(o)
}

pub fn run(args: &[String]) -> ExitCode {
    let opts = match parse_args(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("xtask bench: {e}");
            return ExitCode::from(2);
        }
    };
    crate::install_interrupt_handler();
    match bench(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn banner(text: &str) {
    eprintln!("\n==== xtask bench: {text}");
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Where cargo puts release binaries (honours `CARGO_TARGET_DIR`).
fn release_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            if d.is_absolute() { d } else { root.join(d) }.join("release")
        }
        None => root.join("target").join("release"),
    }
}

fn build(root: &Path, bin: &str) -> Result<(), String> {
    build_package(root, "shardwise-benches", bin)
}

fn build_package(root: &Path, package: &str, bin: &str) -> Result<(), String> {
    let status = cargo()
        .current_dir(root)
        .args(["build", "--release", "-p", package, "--bin", bin])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo build --release -p {package} --bin {bin}: {status}"))
    }
}

/// Shards of the front the CDC benchmark reads through.
const CDC_FRONT_SHARDS: u16 = 4;

/// The emulation front built in release (`shardwise-emu`), as a child
/// process in front of `upstream`: the CDC benchmark measures the readers,
/// and a debug-built front in this process would be their bottleneck.
struct ReleaseFront {
    child: std::process::Child,
    addr: String,
}

impl ReleaseFront {
    fn start(bin: &Path, upstream: SocketAddr) -> Result<ReleaseFront, String> {
        use std::io::BufRead as _;
        let mut child = Command::new(bin)
            .args(["--upstream", &upstream.to_string(), "--shards", &CDC_FRONT_SHARDS.to_string()])
            .args(["--keyspace", "shardwise_emu_cdc_bench"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        let stdout = child.stdout.take().ok_or("the front's output")?;
        let mut lines = std::io::BufReader::new(stdout).lines();
        let addr = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(addr) = line.strip_prefix("contact point (Scylla): ") {
                        break addr.trim().to_string();
                    }
                }
                _ => {
                    let _ = child.kill();
                    let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                    return Err(format!("{} ended before it served ({status})", bin.display()));
                }
            }
        };
        // Its counters keep coming; nobody reads them here.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(ReleaseFront { child, addr })
    }
}

impl Drop for ReleaseFront {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Output of a shell-free command, trimmed; empty on failure.
fn capture(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn machine_description() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "?".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0))
        .unwrap_or_else(|| "?".into());
    format!(
        "- `nproc`: {}\n- CPU: {model}\n- RAM: {mem_gib}\n- kernel: {}\n- `rustc`: {}\n",
        capture("nproc", &[]),
        capture("uname", &["-r"]),
        capture("rustc", &["--version"]),
    )
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".into())
}

struct Case {
    workload: &'static str,
    threads: usize,
    concurrency: usize,
    /// A connection per runtime worker, for both drivers, and shardwise's
    /// requests keeping to their thread's (`ConnectionAffinity::Thread`);
    /// otherwise the drivers' defaults: one connection per shard (shardwise's
    /// `Auto`: at least one per worker to a node without shards).
    affine: bool,
}

/// Runtime workers × requests in flight; on more than one worker every
/// request loop is a task of its own (`--spawn`), as in services and latte.
/// The last three tell whether a request costs more as workers are added
/// (run pinned on a machine with cores to spare, that is the cost of its
/// state moving between cores).
const SHAPES: [(usize, usize); 5] = [(1, 128), (2, 128), (2, 2048), (4, 2048), (8, 2048)];

/// The shapes also run with a connection per worker, shardwise's
/// thread-affine: those with thousands of requests in flight, where sharing
/// one connection between workers costs the most.
const AFFINE_SHAPES: [(usize, usize); 2] = [(2, 2048), (4, 2048)];

/// The open-loop matrix: runtime workers × request loops (spawned on more
/// than one worker), the workloads, and the rates as percentages of the
/// official driver's closed-loop peak in the same configuration.
const OPEN_SHAPES: [(usize, usize); 2] = [(1, 128), (2, 128)];
const OPEN_WORKLOADS: [&str; 2] = ["write", "read"];
const OPEN_PERCENTS: [u32; 4] = [25, 50, 75, 90];

/// Why the suite has no cell with a node slowed by the fault proxy.
const SLOW_NODE_NOTE: &str = "Slow-node cell: not run. The suite has one Cassandra node (the front emulates shards, \
     not nodes), so a delayed proxy in front of it would slow every request rather than one replica of several, \
     and latency awareness or speculative execution would have no faster node to turn to.";

/// Emulated shards of the front.
const FRONT_SHARDS: u16 = 8;

fn cases() -> Vec<Case> {
    let shared = SHAPES.iter().map(|&shape| (shape, false));
    let affine = AFFINE_SHAPES.iter().map(|&shape| (shape, true));
    shared
        .chain(affine)
        .flat_map(|((threads, concurrency), affine)| {
            ["write", "read"].map(|workload| Case { workload, threads, concurrency, affine })
        })
        .collect()
}

fn bench(o: &Options) -> Result<(), String> {
    let started = Instant::now();
    let root = workspace_root();
    let bin_dir = release_dir(&root);
    if let Some(mode) = o.instructions {
        banner("instructions and allocations per request (callgrind, against the responder)");
        for bin in crate::instructions::binaries() {
            build(&root, bin)?;
        }
        let stamp = format!(
            "{} UTC, tree {}",
            capture("date", &["-u", "+%Y-%m-%d %H:%M"]),
            capture("git", &["-C", &root.to_string_lossy(), "rev-parse", "--short", "HEAD"])
        );
        return crate::instructions::run(&root, &bin_dir, mode == Instructions::Check, &stamp);
    }
    let out_dir = root.join("benches").join("results");
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    let json_dir = out_dir.join("latest");
    std::fs::create_dir_all(&json_dir).map_err(|e| format!("creating {}: {e}", json_dir.display()))?;
    let work = out_dir.join("tmp");
    std::fs::create_dir_all(&work).map_err(|e| format!("creating {}: {e}", work.display()))?;

    let (duration, warmup, rounds, load) = if o.quick {
        (
            o.duration.clone().unwrap_or_else(|| "1s".into()),
            o.warmup.clone().unwrap_or_else(|| "300ms".into()),
            o.rounds.unwrap_or(1),
            "5000",
        )
    } else {
        (
            o.duration.clone().unwrap_or_else(|| "6s".into()),
            o.warmup.clone().unwrap_or_else(|| "1s".into()),
            o.rounds.unwrap_or(3),
            "100000",
        )
    };

    banner("1. build the release binaries");
    build(&root, "workload")?;
    let workload_bin = bin_dir.join("workload");
    let cdc_bin = bin_dir.join("cdc_thesis");
    let cdc_note = if !o.cdc {
        Some("skipped (--no-cdc)".to_string())
    } else {
        match build(&root, "cdc_thesis").and_then(|()| build_package(&root, "shardwise-emu", "shardwise-emu")) {
            Ok(()) => None,
            Err(e) => Some(format!("skipped: the CDC benchmark does not build ({e})")),
        }
    };

    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = format!("cargo xtask {}", args.join(" "));
    let mut md = String::new();
    let _ = writeln!(md, "## Workload comparison: `{command}`\n");
    let _ = writeln!(md, "- date: {} (`date -u`)", capture("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]));
    let _ = writeln!(
        md,
        "- tree: `{}`{}",
        capture("git", &["-C", &root.to_string_lossy(), "rev-parse", "--short", "HEAD"]),
        if capture("git", &["-C", &root.to_string_lossy(), "status", "--porcelain"]).is_empty() {
            ""
        } else {
            " plus uncommitted changes"
        }
    );
    let _ = writeln!(md, "- load average (1, 5, 15 min) at the start: {}", load_average());
    md.push_str(&machine_description());
    let _ = writeln!(
        md,
        "- settings: run time {duration}, warm-up {warmup}, {rounds} round(s) per comparison, consistency ONE, 1 connection per shard \
         (a connection per runtime worker for both where the heading says shardwise's affinity is `thread`); \
         shardwise's default affinity (`auto`) opens a connection per runtime worker to a node without shards, \
         each thread keeping to its own; \
         {load} rows loaded for reads; Cassandra, the emulation front (in the xtask process, {FRONT_SHARDS} shards) and the client share the machine; protocol v4 on both sides; \
         each run in a process of its own, in the order shardwise, official, official, shardwise, …\n"
    );

    banner("2. start the server");
    let mut node = None;
    let addr: SocketAddr = match std::env::var(testkit::SHARDWISE_CASSANDRA).ok().filter(|v| !v.trim().is_empty()) {
        Some(v) => {
            let a = testkit::shared::parse_server_addr(&v).map_err(|e| e.to_string())?;
            eprintln!("using the server in {}: {a}", testkit::SHARDWISE_CASSANDRA);
            a
        }
        None => {
            eprintln!("starting Cassandra {}...", testkit::CASSANDRA_VERSION);
            let config = NodeConfig { quick_jit: false, ..NodeConfig::default() };
            let n = Node::start(config.with_free_ports().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
            eprintln!("ready at {} after {:.1} s", n.addr(), n.startup_time().unwrap_or_default().as_secs_f64());
            let a = n.addr();
            node = Some(n);
            a
        }
    };
    // The workloads' front (the CDC benchmark starts its own, built in release).
    let front = if o.workloads {
        let front = Front::start(
            addr,
            FrontConfig { shards: FRONT_SHARDS, emu_keyspace: "shardwise_emu_bench".into(), ..FrontConfig::default() },
        )
        .map_err(|e| format!("emulation front: {e}"))?;
        eprintln!(
            "emulation front at {} ({FRONT_SHARDS} shards, shard-aware port {})",
            front.addr(),
            front.shard_aware_addr()
        );
        Some(front)
    } else {
        None
    };

    let result = run_suite(
        o,
        &workload_bin,
        &cdc_bin,
        cdc_note,
        addr,
        front.as_ref(),
        &work,
        &json_dir,
        &duration,
        &warmup,
        rounds,
        load,
        &mut md,
    );
    let _ = writeln!(
        md,
        "\nLoad average at the end: {}. Whole suite: {:.0} s.",
        load_average(),
        started.elapsed().as_secs_f64()
    );

    if let Some(front) = front {
        front.stop();
    }
    if let Some(mut n) = node {
        if let Err(e) = n.stop() {
            eprintln!("xtask bench: stopping the server: {e}");
        }
    }
    if o.workloads {
        let meta = RunMeta {
            date: capture("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]),
            tree: capture("git", &["-C", &root.to_string_lossy(), "rev-parse", "--short", "HEAD"]),
            machine: machine_description().lines().map(|l| l.trim_start_matches("- ")).collect::<Vec<_>>().join("; "),
            command: command.clone(),
            settings: format!(
                "run time {duration}, warm-up {warmup}, {rounds} round(s) per comparison, one process per run, \
                 order A B B A, protocol v4, consistency ONE, {load} rows loaded for reads"
            ),
        };
        let written = write_driver_results(&json_dir, &meta);
        if let Err(e) = written {
            eprintln!("xtask bench: {e}");
        }
    }
    let latest = out_dir.join("latest.md");
    std::fs::write(&latest, &md).map_err(|e| format!("writing {}: {e}", latest.display()))?;
    let _ = std::fs::remove_dir_all(&work);
    banner("results");
    println!("{md}");
    eprintln!("xtask bench: wrote {}; copy the figures into benches/RESULTS.md", latest.display());
    result
}

/// The file name (without `.json`) of one comparison's results.
fn stem(through_front: bool, case: &Case) -> String {
    format!(
        "{}-{}-t{}-p{}{}",
        if through_front { "front" } else { "cassandra" },
        case.workload,
        case.threads,
        case.concurrency,
        if case.affine { "-affine" } else { "" }
    )
}

/// The file name (without `.json`) of one open-loop comparison.
fn open_stem(through_front: bool, case: &Case, percent: u32) -> String {
    format!("{}-open{percent}", stem(through_front, case))
}

/// The open-loop cells in the suite's order: (through the front, case, percent).
fn open_cells() -> Vec<(bool, Case, u32)> {
    let mut cells = Vec::new();
    for through_front in [false, true] {
        for workload in OPEN_WORKLOADS {
            for (threads, concurrency) in OPEN_SHAPES {
                for percent in OPEN_PERCENTS {
                    cells.push((through_front, Case { workload, threads, concurrency, affine: false }, percent));
                }
            }
        }
    }
    cells
}

/// The official driver's closed-loop peak in a comparison's JSON: the
/// median of its rounds' throughput.
fn official_peak(text: &str) -> Result<f64, String> {
    let cell: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("a comparison's JSON: {e}"))?;
    let mut rates: Vec<f64> = cell["runs"]
        .as_array()
        .ok_or("a comparison's JSON has no runs")?
        .iter()
        .filter_map(|run| run["official"]["throughput"].as_f64())
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    if rates.is_empty() {
        return Err("no throughput of the official driver".into());
    }
    rates.sort_by(f64::total_cmp);
    let n = rates.len();
    Ok(if n % 2 == 1 { rates[n / 2] } else { (rates[n / 2 - 1] + rates[n / 2]) / 2.0 })
}

/// One row of the open-loop summary: the medians over the rounds of both
/// drivers' p50, p99, p99.9 and max, the median ratios, and the rates
/// achieved (a driver that falls behind the timeline shows it here).
fn open_loop_row(server: &str, case: &Case, percent: u32, text: &str) -> Result<String, String> {
    let cell: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("a comparison's JSON: {e}"))?;
    let runs = cell["runs"].as_array().ok_or("a comparison's JSON has no runs")?;
    let median = |driver: &str, field: &str| {
        let mut v: Vec<f64> = runs.iter().filter_map(|r| r[driver][field].as_f64()).collect();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    };
    let ratio = |field: &str| cell["median"][field].as_f64().unwrap_or(f64::NAN);
    let rate = cell["rate"].as_f64().unwrap_or(f64::NAN);
    let shape = if case.threads == 1 {
        format!("current-thread × {}", case.concurrency)
    } else {
        format!("{} × {} spawned", case.threads, case.concurrency)
    };
    let mut row = format!("| {server} | {} | {shape} | {percent}% = {rate:.0}/s |", case.workload);
    for driver in ["shardwise", "official"] {
        let _ = write!(
            row,
            " {:.0} | {:.2} / {:.2} / {:.2} / {:.1} |",
            median(driver, "throughput"),
            median(driver, "p50_ms"),
            median(driver, "p99_ms"),
            median(driver, "p999_ms"),
            median(driver, "max_ms")
        );
    }
    let _ = write!(row, " {:.2} | {:.2} | {:.2} | {:.2} |", ratio("p50"), ratio("p99"), ratio("p999"), ratio("max"));
    Ok(row)
}

const OPEN_LOOP_HEADER: &str =
    "| server | workload | runtime × loops | rate (of the official peak) | shardwise ops/s | \
     shardwise p50 / p99 / p99.9 / max ms | official ops/s | official p50 / p99 / p99.9 / max ms | \
     p50 ratio | p99 ratio | p99.9 ratio | max ratio |\n|---|---|---|---|---:|---|---:|---|---:|---:|---:|---:|\n";

/// Where a run's figures come from, as a results file names it.
struct RunMeta {
    date: String,
    tree: String,
    machine: String,
    command: String,
    settings: String,
}

/// Gathers the comparisons' JSON files in `dir` (those the suite wrote, in
/// its order) into `dir/driver.json`, a results file of kind `driver` as
/// `cargo xtask charts` reads: copied to `benches/results/driver-<date>.json`
/// and charted, it publishes the run.
fn write_driver_results(dir: &Path, meta: &RunMeta) -> Result<(), String> {
    let mut cells = Vec::new();
    for through_front in [false, true] {
        for case in &cases() {
            let path = dir.join(format!("{}.json", stem(through_front, case)));
            match std::fs::read_to_string(&path) {
                Ok(text) => cells.push((through_front, case.threads > 1, text)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("reading {}: {e}", path.display())),
            }
        }
    }
    let text = driver_results(meta, &cells)?;
    let path = dir.join("driver.json");
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    eprintln!("xtask bench: wrote {}", path.display());
    let mut open = Vec::new();
    for (through_front, case, percent) in open_cells() {
        let path = dir.join(format!("{}.json", open_stem(through_front, &case, percent)));
        match std::fs::read_to_string(&path) {
            Ok(text) => open.push((through_front, case.threads > 1, text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        }
    }
    if !open.is_empty() {
        let text = open_loop_results(meta, &open)?;
        let path = dir.join("open-loop.json");
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("xtask bench: wrote {}", path.display());
    }
    Ok(())
}

/// A results file of kind `driver` from the comparisons as `workload compare
/// --json` wrote them (through the front or not, spawned loops or not, the
/// text), each with `server` and `spawn` added.
fn driver_results(meta: &RunMeta, cells: &[(bool, bool, String)]) -> Result<String, String> {
    results_file(
        "driver",
        "Service-shaped comparison, shardwise / official driver (scylla 1.9), protocol v4",
        meta,
        cells,
    )
}

/// A results file of kind `open_loop`: the fixed-rate comparisons, each
/// cell with its `rate`, as [`driver_results`] builds its cells.
fn open_loop_results(meta: &RunMeta, cells: &[(bool, bool, String)]) -> Result<String, String> {
    results_file(
        "open_loop",
        "Open loop: latency at 25-90% of the official driver's closed-loop peak, measured from when each request was due",
        meta,
        cells,
    )
}

fn results_file(kind: &str, title: &str, meta: &RunMeta, cells: &[(bool, bool, String)]) -> Result<String, String> {
    use serde_json::{json, Value};
    let cells = cells
        .iter()
        .map(|(through_front, spawn, text)| {
            let mut cell: Value = serde_json::from_str(text).map_err(|e| format!("a comparison's JSON: {e}"))?;
            let object = cell.as_object_mut().ok_or("a comparison's JSON is not an object")?;
            object.insert("server".into(), json!(if *through_front { "front" } else { "cassandra" }));
            object.insert("spawn".into(), json!(spawn));
            Ok(cell)
        })
        .collect::<Result<Vec<Value>, String>>()?;
    let file = json!({
        "kind": kind,
        "title": title,
        "date": meta.date,
        "tree": meta.tree,
        "machine": meta.machine,
        "command": meta.command,
        "settings": meta.settings,
        "source": "cargo xtask bench (benches/results/latest.md)",
        "cells": cells,
    });
    serde_json::to_string_pretty(&file).map(|t| t + "\n").map_err(|e| e.to_string())
}

#[allow(clippy::too_many_arguments)]
fn run_suite(
    o: &Options,
    workload_bin: &Path,
    cdc_bin: &Path,
    cdc_note: Option<String>,
    addr: SocketAddr,
    front: Option<&FrontHandle>,
    work: &Path,
    json_dir: &Path,
    duration: &str,
    warmup: &str,
    rounds: usize,
    load: &str,
    md: &mut String,
) -> Result<(), String> {
    let front_label = format!("through the emulation front, {FRONT_SHARDS} shards");
    // Each target with its front, if it is one (there is a front when workloads run).
    let targets =
        [Some(("Cassandra 5.0 directly", addr, None)), front.map(|f| (front_label.as_str(), f.addr(), Some(f)))];
    let mut failures = Vec::new();
    let mut step = 3;
    for (label, target, front) in targets.into_iter().flatten().filter(|_| o.workloads) {
        let _ = writeln!(
            md,
            "### {}\n",
            if front.is_some() {
                format!("Shard-aware: through the Scylla emulation front ({FRONT_SHARDS} shards)")
            } else {
                "Plain Cassandra 5.0".to_string()
            }
        );
        for case in &cases() {
            if crate::interrupted() {
                return Err("interrupted".into());
            }
            let connections = if case.affine { case.threads } else { 1 };
            let affine = if case.affine { " --affinity thread" } else { "" };
            banner(&format!(
                "{step}. workload compare {} -t {} -p {} -c {connections}{affine} — {label}",
                case.workload, case.threads, case.concurrency
            ));
            step += 1;
            let stem = stem(front.is_some(), case);
            let md_path = work.join(format!("{stem}.md"));
            let json_path = json_dir.join(format!("{stem}.json"));
            if let Some(front) = front {
                front.reset_routing_stats();
            }
            let run = Compare { bin: workload_bin, target, label, duration, warmup, rounds, load };
            let status = run.run(case, None, &md_path, &json_path)?;
            if status.success() {
                md.push_str(&std::fs::read_to_string(&md_path).unwrap_or_default());
                let _ = writeln!(md, "Machine-readable: `benches/results/latest/{stem}.json`.\n");
            } else {
                let _ = writeln!(md, "**{stem}: the workload runner failed ({status}).**\n");
                failures.push(stem.clone());
            }
            if let Some(front) = front {
                let s = front.stats();
                let line = format!(
                    "Front routing over both drivers: {} hits, {} misses (hit rate {:.4}), {} unrouted.",
                    s.hits(),
                    s.misses(),
                    s.hit_rate(),
                    s.nodes.iter().flat_map(|n| n.shards.iter()).map(|sh| sh.unrouted).sum::<u64>()
                );
                eprintln!("{line}");
                let _ = writeln!(md, "{line}\n");
            }
        }
        // The open-loop matrix, at rates from the comparisons just run.
        let server = if front.is_some() { "front" } else { "Cassandra" };
        let _ = writeln!(
            md,
            "#### Open loop — {label}\n\nEach request is due at its place on a fixed-rate timeline (`--rate`) and its \
             latency counts from then, so a slow answer delays the requests queued behind it in the figures too. \
             Rates are shares of the official driver's closed-loop throughput in the same configuration, measured above; \
             {} round(s) per rate.\n",
            rounds.min(2)
        );
        let mut summary = String::from(OPEN_LOOP_HEADER);
        for (through_front, case, percent) in open_cells().into_iter().filter(|c| c.0 == front.is_some()) {
            if crate::interrupted() {
                return Err("interrupted".into());
            }
            let closed = json_dir.join(format!("{}.json", stem(through_front, &case)));
            let peak = std::fs::read_to_string(&closed)
                .map_err(|e| format!("reading {}: {e}", closed.display()))
                .and_then(|text| official_peak(&text));
            let peak = match peak {
                Ok(p) => p,
                Err(e) => {
                    let _ = writeln!(
                        summary,
                        "| {server} | {} | {} × {} | {percent}%: no peak ({e}) |",
                        case.workload, case.threads, case.concurrency
                    );
                    continue;
                }
            };
            let rate = (peak * f64::from(percent) / 100.0).round().max(1.0);
            banner(&format!(
                "{step}. workload compare {} -t {} -p {} -r {rate:.0} ({percent}% of {peak:.0}/s) — {label}",
                case.workload, case.threads, case.concurrency
            ));
            step += 1;
            let stem = open_stem(through_front, &case, percent);
            let md_path = work.join(format!("{stem}.md"));
            let json_path = json_dir.join(format!("{stem}.json"));
            let run = Compare { bin: workload_bin, target, label, duration, warmup, rounds: rounds.min(2), load };
            let status = run.run(&case, Some(rate), &md_path, &json_path)?;
            let row = if status.success() {
                std::fs::read_to_string(&json_path)
                    .map_err(|e| e.to_string())
                    .and_then(|text| open_loop_row(server, &case, percent, &text))
            } else {
                Err(format!("the workload runner failed ({status})"))
            };
            match row {
                Ok(row) => {
                    let _ = writeln!(summary, "{row}");
                }
                Err(e) => {
                    let _ = writeln!(
                        summary,
                        "| {server} | {} | {} × {} | {percent}%: {e} |",
                        case.workload, case.threads, case.concurrency
                    );
                    failures.push(stem.clone());
                }
            }
        }
        let _ = writeln!(
            md,
            "{summary}\nRatios are shardwise / official (medians of the rounds' ratios); under 1.0 shardwise is faster. \
             Each cell's rounds: `benches/results/latest/<server>-<workload>-t<T>-p<P>-open<percent>.json`; all of them in \
             `benches/results/latest/open-loop.json`.\n\n{SLOW_NODE_NOTE}\n"
        );
    }

    banner(&format!("{step}. CDC benchmark"));
    let _ = writeln!(md, "### CDC benchmark (`cdc_thesis`)\n");
    let _ = writeln!(
        md,
        "Through the emulation front built in release (`shardwise-emu`, a child process, {CDC_FRONT_SHARDS} shards).\n"
    );
    match cdc_note {
        Some(note) => {
            eprintln!("CDC benchmark {note}");
            let _ = writeln!(md, "{note}\n");
        }
        None if crate::interrupted() => return Err("interrupted".into()),
        None => match ReleaseFront::start(&cdc_bin.with_file_name("shardwise-emu"), addr)
            .and_then(|front| run_cdc(o, cdc_bin, &front.addr, work))
        {
            Ok((cmdline, out)) => {
                let _ = writeln!(md, "Command: `{cmdline}`\n\n{}\n", out.trim_end());
            }
            Err(e) => {
                eprintln!("CDC benchmark: {e}");
                let _ = writeln!(md, "**CDC benchmark failed: {e}**\n");
                failures.push("cdc_thesis".into());
            }
        },
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("failed: {}", failures.join(", ")))
    }
}

/// One `workload compare` invocation's fixed settings.
struct Compare<'a> {
    bin: &'a Path,
    target: SocketAddr,
    label: &'a str,
    duration: &'a str,
    warmup: &'a str,
    rounds: usize,
    load: &'a str,
}

impl Compare<'_> {
    /// Runs `workload compare` for `case`, closed loop or at `rate` requests/s,
    /// writing its Markdown and JSON to the paths given.
    fn run(
        &self,
        case: &Case,
        rate: Option<f64>,
        md_path: &Path,
        json_path: &Path,
    ) -> Result<std::process::ExitStatus, String> {
        let connections = if case.affine { case.threads } else { 1 };
        Command::new(self.bin)
            .arg("compare")
            .arg(case.workload)
            .args(["--node", &self.target.to_string()])
            .args(["-t", &case.threads.to_string(), "-p", &case.concurrency.to_string()])
            .args(["-c", &connections.to_string()])
            .args(if case.threads > 1 { &["--spawn"][..] } else { &[] })
            .args(if case.affine { &["--affinity", "thread"][..] } else { &[] })
            .args(rate.map(|r| vec!["--rate".to_string(), format!("{r:.0}")]).unwrap_or_default())
            .args(["--protocol", "4"])
            .args(["-d", self.duration, "-w", self.warmup, "--rounds", &self.rounds.to_string()])
            .args(["--consistency", "ONE", "--load", self.load, "--keyspace", "shardwise_workload"])
            .args(["--label", self.label])
            .arg("--markdown")
            .arg(md_path)
            .arg("--json")
            .arg(json_path)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run {}: {e}", self.bin.display()))
    }
}

/// Runs the CDC benchmark through the front at `node` (built in release,
/// [`CDC_FRONT_SHARDS`] shards). Its interface is read from
/// `--help`: with `load` and `compare` subcommands, `cdc_thesis load --node
/// <front>` then `cdc_thesis compare --node <front> --markdown <file>` (small
/// sizes and one window when `--quick`); otherwise `cdc_thesis --node
/// <front>`. Returns the command lines and the Markdown (or standard output).
fn run_cdc(o: &Options, bin: &Path, node: &str, work: &Path) -> Result<(String, String), String> {
    let help = Command::new(bin).arg("--help").output().map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let help = String::from_utf8_lossy(&help.stdout).to_string() + &String::from_utf8_lossy(&help.stderr);
    let run = |args: &[String], capture_stdout: bool| -> Result<String, String> {
        let shown = format!("target/release/cdc_thesis {}", args.join(" "));
        eprintln!("running {shown}");
        let out = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(if capture_stdout { Stdio::piped() } else { Stdio::inherit() })
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        print!("{stdout}");
        if out.status.success() {
            Ok(stdout)
        } else {
            Err(format!("{shown}: {}", out.status))
        }
    };
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    if help.contains("load") && help.contains("compare") {
        let mut load = strings(&["load", "--node", node]);
        let table = work.join("cdc.md");
        let mut compare = strings(&["compare", "--node", node]);
        if o.quick {
            load.extend(strings(&["--partitions", "10", "--rows", "200"]));
            compare.extend(strings(&["--windows", "15"]));
        }
        if let Some((partitions, rows)) = o.cdc_load {
            load.extend([format!("--partitions={partitions}"), format!("--rows={rows}")]);
        }
        if let Some(cores) = &o.cdc_cores {
            compare.push(format!("--cores={cores}"));
        }
        compare.push("--markdown".into());
        compare.push(table.to_string_lossy().into_owned());
        run(&load, false)?;
        if crate::interrupted() {
            return Err("interrupted".into());
        }
        let stdout = run(&compare, true)?;
        let text = std::fs::read_to_string(&table).unwrap_or(stdout);
        let cmdline = format!(
            "target/release/cdc_thesis {}; target/release/cdc_thesis {}",
            load.join(" "),
            compare[..compare.len() - 2].join(" ")
        );
        Ok((cmdline, text))
    } else if help.contains("--node") {
        let args = strings(&["--node", node]);
        let stdout = run(&args, true)?;
        Ok((format!("target/release/cdc_thesis {}", args.join(" ")), format!("```\n{}\n```", stdout.trim_end())))
    } else {
        Err(format!("{} --help names neither load/compare nor --node; not run", bin.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options() {
        let o = parse_args(&args("--quick --no-cdc --rounds 2 --duration 3s")).expect("parse");
        assert!(o.quick && !o.cdc);
        assert_eq!(o.rounds, Some(2));
        assert_eq!(o.duration.as_deref(), Some("3s"));
        assert!(parse_args(&args("--rounds 0")).is_err());
        assert!(parse_args(&args("--bogus")).is_err());
    }

    /// What the suite writes is what `cargo xtask charts` draws.
    #[test]
    fn the_driver_results_are_what_the_charts_read() {
        // Abridged from `workload compare --json`: the fields the charts use and a few more.
        let cell = |workload: &str, p99: f64| {
            format!(
                "{{\"workload\": \"{workload}\", \"threads\": 2, \"concurrency\": 2048, \"connections\": 1, \
                 \"affinity\": \"auto\", \"label\": \"Cassandra 5.0 directly\", \"runs\": [], \"ratios\": [], \
                 \"median\": {{\"cpu_per_op\": 0.3, \"throughput\": 1.3, \"p50\": 0.8, \"p99\": {p99}}}, \
                 \"median_allocs_per_op\": {{\"shardwise\": 0.01, \"official\": 11.0}}, \
                 \"median_cpu_us_per_op\": {{\"shardwise\": 2.1, \"official\": 7.2}}}}\n"
            )
        };
        let meta = test_meta();
        let text = driver_results(&meta, &[(false, true, cell("write", 0.97)), (true, true, cell("read", 1.25))])
            .expect("results");
        let charts = crate::charts::render_file(Path::new("driver-2026-01-01.json"), &text).expect("charts");
        let p99 = &charts.iter().find(|(name, _)| name == "driver-2026-01-01-p99.svg").expect("p99 chart").1;
        assert!(p99.contains("Cassandra, write, 2 × 2048") && p99.contains("front, read, 2 × 2048"), "{p99}");
        assert!(p99.contains("0.97") && p99.contains("1.25"), "{p99}");
        assert!(driver_results(&meta, &[(false, true, "not json".into())]).is_err());
    }
    fn test_meta() -> RunMeta {
        RunMeta {
            date: "2026-01-01 00:00:00 UTC".into(),
            tree: "abc1234".into(),
            machine: "`nproc`: 2".into(),
            command: "cargo xtask bench".into(),
            settings: "s".into(),
        }
    }

    /// The open-loop rates come from the official driver's median closed-loop
    /// throughput; the cells are charted as `open_loop` and summarised with
    /// both drivers' tails and the ratios.
    #[test]
    fn the_open_loop_matrix_takes_its_rates_from_the_official_peak() {
        let closed = r#"{"runs": [{"shardwise": {"throughput": 9.0}, "official": {"throughput": 20000.0}},
            {"shardwise": {"throughput": 9.0}, "official": {"throughput": 24000.0}},
            {"shardwise": {"throughput": 9.0}, "official": {"throughput": 30000.0}}]}"#;
        assert_eq!(official_peak(closed), Ok(24000.0));
        assert!(official_peak(r#"{"runs": []}"#).is_err());
        assert!(official_peak("not json").is_err());

        let open = r#"{"workload": "write", "threads": 2, "concurrency": 128, "connections": 1, "affinity": "auto",
            "label": "Cassandra 5.0 directly", "rate": 6000,
            "runs": [{"shardwise": {"throughput": 5999.0, "p50_ms": 1.0, "p99_ms": 2.0, "p999_ms": 4.0, "max_ms": 9.0},
                      "official": {"throughput": 6000.0, "p50_ms": 1.0, "p99_ms": 4.0, "p999_ms": 8.0, "max_ms": 30.0}}],
            "median": {"cpu_per_op": 0.5, "throughput": 1.0, "p50": 1.0, "p99": 0.5, "p999": 0.5, "max": 0.3}}"#;
        let case = Case { workload: "write", threads: 2, concurrency: 128, affine: false };
        let row = open_loop_row("Cassandra", &case, 25, open).expect("row");
        assert!(
            row.contains("25% = 6000/s") && row.contains("2.00 / 4.00 / 9.0") && row.contains("0.50 | 0.30 |"),
            "{row}"
        );
        assert_eq!(row.matches('|').count(), OPEN_LOOP_HEADER.lines().next().map_or(0, |h| h.matches('|').count()));
        assert_eq!(open_stem(true, &case, 90), "front-write-t2-p128-open90");
        assert_eq!(open_cells().len(), 2 * OPEN_WORKLOADS.len() * OPEN_SHAPES.len() * OPEN_PERCENTS.len());

        let meta = test_meta();
        let text = open_loop_results(&meta, &[(false, true, open.into())]).expect("results");
        let charts = crate::charts::render_file(Path::new("open-loop.json"), &text).expect("charts");
        let p99 = &charts.iter().find(|(name, _)| name == "open-loop-p99.svg").expect("p99 chart").1;
        assert!(p99.contains("6,000") && p99.contains("4.0"), "{p99}");
    }
}
