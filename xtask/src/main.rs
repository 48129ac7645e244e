//! `cargo xtask <task>`: the project's own commands, in Rust so they run the
//! same everywhere `cargo` does.
//!
//! * `cargo xtask demo` — build `src/bin/demo.rs` in release and run it: a local
//!   Cassandra 5.0, the Scylla emulation front, throughput, latency, allocations
//!   per request, shard hits and the CDC engine following a table live.
//! * `cargo xtask bench` — the benchmark comparison suite (shardwise beside
//!   the official driver) against a Cassandra and an emulation front it
//!   starts itself; writes `benches/results/latest.md`.
//! * `cargo xtask charts` — draws the committed results (`benches/results/*.json`)
//!   as the SVG charts `benches/RESULTS.md` embeds (`benches/charts/`).
//! * `cargo xtask transcript <file.cql>` — runs a CQL transcript through the
//!   Scylla emulation front and writes its `.result` file, for review.
//! * `cargo xtask test` — the whole test suite against a server it starts
//!   itself: workspace tests, loom models, fuzz smoke runs. CI runs exactly
//!   this (`.ci/run`).
//! * `cargo xtask fuzz [--minutes N | --runs N] [target]` — long fuzz runs:
//!   every target (or one) in turn for N minutes or N executions on its
//!   seeds, executions per target.
//! * `cargo xtask imports [CRATE_DIR...]` — the import circles among a crate's
//!   files (see `imports.rs`); fails when a named crate has one.
//!
//! Arguments are parsed by hand; tasks use `std::process::Command`.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

mod bench;
mod charts;
mod claims;
mod features;
mod fuzz;
mod house;
mod imports;
mod instructions;
mod lanes;
mod paths;
mod steps;
mod test;

/// Set by the first Ctrl-C (or SIGTERM): finish the current step, skip the
/// rest, stop the server. A second one exits at once; the server still dies
/// because its lifeline pipe closes with this process (see `testkit::node`).
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

pub(crate) fn install_interrupt_handler() {
    static PRESSES: AtomicU32 = AtomicU32::new(0);
    let result = ctrlc::set_handler(|| {
        INTERRUPTED.store(true, Ordering::SeqCst);
        if PRESSES.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("\nxtask: interrupted; stopping after the current step (again to quit now)");
        } else {
            eprintln!("\nxtask: quitting now");
            std::process::exit(130);
        }
    });
    if let Err(e) = result {
        eprintln!("xtask: warning: cannot install the Ctrl-C handler: {e}");
    }
}

const HELP: &str = "\
usage: cargo xtask <task> [options]

tasks:
  demo                 build the demo in release and run it (under a minute after the build):
                       a local Cassandra 5.0 and the Scylla emulation front (4 shards), then
                       writes and reads (throughput, p50/p99, allocations per request), shard
                       hits, and the CDC engine following a table live (delivered, delay)
                       (uses $SHARDWISE_CASSANDRA instead when that is set)
  bench [options]      the benchmark comparison suite, shardwise beside the official driver:
                       1. cargo build --release -p shardwise-benches --bin workload (and --bin cdc_thesis)
                       2. start Cassandra 5.0 (or use $SHARDWISE_CASSANDRA) and a Scylla emulation
                          front with 8 shards, in this process
                       3. target/release/workload compare {write,read} on protocol v4 at
                          1 thread x 128, and spawned request loops on 2 x 128, 2 x 2048,
                          4 x 2048 and 8 x 2048, against Cassandra and through the front
                          (3 rounds of 6 s runs per comparison, one process per run, A B B A)
                       4. target/release/cdc_thesis --node <front> (the CDC benchmark), if it builds
                       5. print the results and write benches/results/latest.md (copy into
                          benches/RESULTS.md) and the figures as JSON in benches/results/latest/
                          (driver.json is what `cargo xtask charts` draws, once copied up);
                          about half an hour on 2 cores, plus the server start and the CDC benchmark
    --quick              1 s runs, 1 round, small load: checks that everything works
    --no-cdc             skip step 4
    --cdc-only           skip step 3
    --duration D         run time per measured run (e.g. 10s, or a cycle count)
    --warmup D           warm-up before each run (default 1s)
    --instructions       only user-space instructions and allocations per request, both drivers,
                         under callgrind against the responder (write, read, batch of 4, paged
                         read of 100 rows); writes benches/instructions.tsv
    --check              the same, measured again and compared with benches/instructions.tsv:
                         fails when a shardwise figure grew by more than 3% or allocates more
    --rounds N           rounds per comparison (default 3)
  charts [--check]     draw benches/results/*.json (the committed results) as SVG charts in
                       benches/charts/ (embedded in benches/RESULTS.md); --check only says
                       whether the committed charts are up to date
  test [options]       the whole suite against a Cassandra it starts itself:
                       0. the house: no reference to a path outside the repository, no import
                          circle in the driver or the front (cargo xtask imports driver emu),
                          the feature alignment (cargo xtask features), cargo fmt --check; then,
                          beside step 2 at the lowest CPU priority, in step 2's target folder
                          (reported at the end): cargo clippy --workspace --all-targets -D
                          warnings, the same for the driver without default features,
                          RUSTDOCFLAGS=-D warnings cargo doc --no-deps --workspace, cargo
                          package --no-verify of the publishable crates
                       1. start a node (or use $SHARDWISE_CASSANDRA), export
                          SHARDWISE_CASSANDRA=<addr> to the test steps
                       2. cargo test --workspace --all-targets --no-run, then every test binary
                          in lanes side by side (the driver's in parts; its output printed whole
                          when it ends), then cargo test --workspace --doc
                       3. stop the node (also on failure, Ctrl-C, or if xtask dies)
                       4. loom models: RUSTFLAGS=\"--cfg loom\" cargo test -p shardwise-loom-tests --release
                          (CARGO_TARGET_DIR=target/loom)
                       5. fuzz smoke: cargo +nightly fuzz run <target> for every target, on its
                          seeds (fuzz/seeds/<target>), as `cargo xtask fuzz` does
                       6. a summary; the exit code is non-zero if any step failed
    --no-fuzz            skip step 5
    --no-loom            skip step 4
    --no-house           skip step 0
    --fuzz-seconds N     seconds per fuzz target (default $SHARDWISE_FUZZ_SECONDS or 6)
    --lanes N            test binaries run at once in step 2 (default $SHARDWISE_TEST_LANES, else
                         one per four cores, at least one)
    --only ARGS...       run only step 2, with ARGS instead of --all-targets
                         (e.g. --only -p testkit --test harness)
    -- ARGS...           extra arguments for step 2 (run as one cargo test, one binary at a time)
  fuzz [options] [TARGET]
                       long fuzz runs: every target `cargo +nightly fuzz list` prints (or TARGET)
                       in turn, on its working corpus fuzz/corpus/TARGET and its committed seeds
                       fuzz/seeds/TARGET; prints executions per target; stops at the first crash
                       and names the input libFuzzer saved (fuzz/artifacts/TARGET/...)
    --minutes N          minutes per target (default 10; fractions allowed, e.g. 0.5)
    --runs N             executions per target instead (e.g. --runs 10_000_000)
  emu [options]        Cassandra plus the Scylla emulation front (shardwise-emu), until Ctrl-C:
    --nodes N --shards N --ignore-msb N --miss-delay-us N --port P --shard-aware-port P
                       (the shardwise-emu binary fronts a Cassandra that is already running)
  transcript FILE.cql...
                       run each CQL transcript through a Scylla emulation front (on a Cassandra
                       it starts, or $SHARDWISE_CASSANDRA) and write FILE.result beside it, for
                       review: a .result must show Scylla's behaviour, not merely the front's
                       (the suite is emu/tests/transcripts, run by `cargo xtask test`)
  nemesis [--minutes N] [--seed S]
                       the CDC nemesis (cdc-kafka/tests/nemesis.rs) for N minutes of faults
                       (default 30), on a vnodes table of three nodes (nodes killed and started
                       again) then on a tablets one (each N minutes): kafka-sinks and printers
                       sharing a table through leases, killed, paused, cut off and slowed on a
                       schedule of seed S (default from the clock), then a checker that reports
                       per write delivered or not and how often; `test` runs the tablets one
                       for 30 s (three nodes do not run reliably on a 2-core machine)
  house                only step 0 of `test`: the outside-path check, the driver's import circles,
                       the feature alignment (below), fmt, clippy, doc and cargo package
  features             whether `cargo test --workspace` reuses every crate that building xtask
                       compiles (xtask/Cargo.toml asks for the features the test build unifies
                       to); names each one it would compile again (needs the nightly toolchain
                       for cargo's unit graph)
  imports [--all] [CRATE_DIR...]
                       the import circles among a crate's files (e.g. `imports driver emu`; every
                       crate of the workspace when none is named): its module tree from src/lib.rs,
                       each `use` and `crate::`/`super::`/`self::` path followed through re-exports
                       to the file that defines the item; a file and its own submodules are one
                       subtree, not an import. Prints each circle with one cycle through it (file,
                       line, path per step); the exit code is non-zero if a named crate has one
    --all                also list every import between files (file:line uses file (path))
  help                 this text
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("demo") => demo(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("charts") => charts::run(&args[1..]),
        Some("test") => test::run(&args[1..]),
        Some("house") => test::run_house(),
        Some("features") => features::run(&steps::workspace_root()),
        Some("imports") => imports::run(&args[1..]),
        Some("nemesis") => nemesis(&args[1..]),
        Some("fuzz") => fuzz::run(&args[1..]),
        Some("emu") => emu(&args[1..]),
        Some("transcript") => transcript(&args[1..]),
        Some("help" | "-h" | "--help") => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("xtask: unknown task {other:?}\n\n{HELP}");
            ExitCode::from(2)
        }
        None => {
            eprint!("{HELP}");
            ExitCode::from(2)
        }
    }
}

/// `cargo xtask nemesis [--minutes N] [--seed S]`: the nemesis test of
/// `cdc-kafka` for N minutes of faults (`NEMESIS_SECONDS`), with seed S
/// (`NEMESIS_SEED`), its output shown.
fn nemesis(args: &[String]) -> ExitCode {
    let (mut minutes, mut seed) = (30.0_f64, None);
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        let value = rest.next();
        match (a.as_str(), value) {
            ("--minutes", Some(v)) if v.parse::<f64>().is_ok_and(|m| m > 0.0) => minutes = v.parse().unwrap_or(30.0),
            ("--seed", Some(v)) if v.parse::<u64>().is_ok() => seed = Some(v.clone()),
            _ => {
                eprintln!("xtask nemesis: usage: cargo xtask nemesis [--minutes N] [--seed S]");
                return ExitCode::from(2);
            }
        }
    }
    std::env::set_var("NEMESIS_SECONDS", ((minutes * 60.0).round() as u64).max(1).to_string());
    if let Some(seed) = seed {
        std::env::set_var("NEMESIS_SEED", seed);
    }
    let only: Vec<String> =
        ["--only", "-p", "shardwise-cdc-kafka", "--test", "nemesis", "--", "--nocapture", "--include-ignored"]
            .into_iter()
            .map(String::from)
            .collect();
    test::run(&only)
}

/// `cargo xtask demo`: builds the demo in release and runs it (`xtask/src/bin/demo.rs`).
fn demo(args: &[String]) -> ExitCode {
    if let Some(a) = args.first() {
        eprintln!("xtask demo: unexpected argument {a:?}");
        return ExitCode::from(2);
    }
    eprintln!("xtask demo: building the demo in release (the first build takes a few minutes)...");
    let status = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(steps::workspace_root())
        .args(["run", "--quiet", "--release", "--package", "xtask", "--bin", "demo"])
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => ExitCode::from(u8::try_from(s.code().unwrap_or(1)).unwrap_or(1)),
        Err(e) => {
            eprintln!("xtask demo: could not run cargo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo xtask emu [--nodes N] [--shards N] [--ignore-msb N] [--miss-delay-us N]
/// [--port P] [--shard-aware-port P]`: Cassandra plus the Scylla emulation
/// front (`shardwise_emu`), serving until Ctrl-C; prints the addresses and,
/// whenever they change, the front's counters.
fn emu(args: &[String]) -> ExitCode {
    match emu_serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `cargo xtask transcript FILE.cql...`: writes `FILE.result` from the
/// front's output (`shardwise_emu::transcript`).
fn transcript(files: &[String]) -> ExitCode {
    match transcript_run(files) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask transcript: {e}");
            ExitCode::FAILURE
        }
    }
}

fn transcript_run(files: &[String]) -> Result<(), String> {
    use shardwise_emu::{transcript, Front, FrontConfig};
    use testkit::{Node, NodeConfig};

    if files.is_empty() || files.iter().any(|f| !f.ends_with(".cql")) {
        return Err("usage: cargo xtask transcript FILE.cql...".into());
    }
    let scripts: Vec<(std::path::PathBuf, String)> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).map(|t| (std::path::PathBuf::from(f), t)).map_err(|e| format!("{f}: {e}")))
        .collect::<Result<_, _>>()?;
    let mut node = None;
    let upstream = match std::env::var(testkit::SHARDWISE_CASSANDRA).ok().and_then(|v| v.trim().parse().ok()) {
        Some(addr) => addr,
        None => {
            eprintln!("xtask: starting Cassandra {}...", testkit::CASSANDRA_VERSION);
            let config = NodeConfig::default().with_free_ports().map_err(|e| e.to_string())?;
            let n = Node::start(config).map_err(|e| e.to_string())?;
            let addr = n.addr();
            node = Some(n);
            addr
        }
    };
    let front = Front::start(upstream, FrontConfig::default()).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    for (path, script) in &scripts {
        let out = runtime.block_on(transcript::run(front.addr(), script)).map_err(|e| e.to_string())?;
        let result = path.with_extension("result");
        std::fs::write(&result, out).map_err(|e| format!("{}: {e}", result.display()))?;
        eprintln!("xtask transcript: wrote {} (review it against Scylla's behaviour)", result.display());
    }
    front.stop();
    drop(node);
    Ok(())
}

fn emu_serve(args: &[String]) -> Result<(), String> {
    use shardwise_emu::{Front, FrontConfig};
    use std::time::Instant;
    use testkit::{Cluster, Node};

    let mut nodes: u8 = 1;
    let mut config = FrontConfig::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = it.next().ok_or_else(|| format!("{a} takes a value"))?;
        if a == "--nodes" {
            nodes = value.parse().ok().filter(|n| (1..=9).contains(n)).ok_or("--nodes takes 1..9")?;
        } else if !shardwise_emu::serve::apply_front_flag(&mut config, a, value).map_err(|e| e.to_string())? {
            let flags = shardwise_emu::serve::FRONT_FLAGS;
            return Err(format!(
                "unknown option {a}; the options are\n  --nodes N               Cassandra nodes to start\n{flags}"
            ));
        }
    }
    install_interrupt_handler();
    let started = Instant::now();
    let (single, cluster) = if nodes == 1 {
        eprintln!("xtask: starting Cassandra {}...", testkit::CASSANDRA_VERSION);
        let config = test::shared_node_config().with_free_ports().map_err(|e| e.to_string())?;
        (Some(Node::start(config).map_err(|e| e.to_string())?), None)
    } else {
        eprintln!(
            "xtask: starting a {nodes}-node Cassandra cluster on 127.0.0.1..{nodes} (about 20 s per joining node)..."
        );
        (None, Some(Cluster::start(nodes).map_err(|e| e.to_string())?))
    };
    let upstreams: Vec<std::net::SocketAddr> = match (&single, &cluster) {
        (Some(n), _) => vec![n.addr()],
        (_, Some(c)) => c.contact_points(),
        _ => Vec::new(),
    };
    let front = Front::start_cluster(&upstreams, config).map_err(|e| e.to_string())?;
    println!("up after {:.1?}", started.elapsed());
    println!("{}", shardwise_emu::serve::announce(&front));
    println!("Cassandra itself: {}={}", testkit::SHARDWISE_CASSANDRA, upstreams[0]);
    shardwise_emu::serve::report_until(&front, interrupted);
    front.stop();
    drop(cluster);
    drop(single);
    eprintln!("xtask: stopped");
    Ok(())
}
