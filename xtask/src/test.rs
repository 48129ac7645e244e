//! `cargo xtask test`: every test tier in one command, against a Cassandra
//! this process starts and always stops.

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Instant;

use testkit::{Node, NodeConfig};

use crate::interrupted;
use crate::steps::{banner, cargo, output_to, run_status, suffix, workspace_root, Failures, Run, Status, Step};

/// A Cassandra node that serves many test runs: the suite's shared node,
/// and `cargo xtask emu`'s, which developers point test runs at
/// (`SHARDWISE_CASSANDRA`). It gets a 2 GB heap; see the suite's node below
/// for the figures. It serves for many minutes, but tests run short and
/// varied work (hundreds of tables created, a few thousand rows each), which
/// the JVM's optimizing compiler costs more to compile than it saves: the
/// emulation front's and the CDC crate's tests took 98 s of this node's CPU
/// with `quick_jit` (C1 only) and 133 s without, in the same wall time.
pub(crate) fn shared_node_config() -> NodeConfig {
    NodeConfig { heap_max: "2G".into(), ..NodeConfig::default() }
}

/// Parsed command line of `xtask test`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub fuzz: bool,
    pub loom: bool,
    pub fuzz_seconds: u64,
    /// Run the house checks (outside paths, fmt, clippy, doc, package); `--no-house` skips them.
    pub house: bool,
    /// `--only`: run just the workspace tests with these extra arguments.
    pub only: Option<Vec<String>>,
    /// Test binaries run at once (`--lanes`, `SHARDWISE_TEST_LANES`; see `lanes.rs`).
    pub lanes: usize,
    /// After `--`: extra arguments for the workspace test step.
    pub cargo_args: Vec<String>,
}

/// Seconds per fuzz target in the suite's smoke step: enough for each
/// target to reach its seeds and a few hundred thousand inputs; the long
/// runs are `cargo xtask fuzz`'s (13 targets at 15 s took 195 s of the suite).
pub const DEFAULT_FUZZ_SECONDS: u64 = 6;

/// Parses the arguments after `test`; `env_seconds` is `$SHARDWISE_FUZZ_SECONDS`,
/// `env_lanes` `$SHARDWISE_TEST_LANES`.
pub fn parse_args(args: &[String], env_seconds: Option<&str>, env_lanes: Option<&str>) -> Result<Options, String> {
    let fuzz_seconds = match env_seconds.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => s.parse().map_err(|_| format!("SHARDWISE_FUZZ_SECONDS={s:?} is not a number of seconds"))?,
        None => DEFAULT_FUZZ_SECONDS,
    };
    let lanes = match env_lanes.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => s.parse().map_err(|_| format!("SHARDWISE_TEST_LANES={s:?} is not a number"))?,
        None => crate::lanes::default_lanes(),
    };
    let mut o =
        Options { fuzz: true, loom: true, fuzz_seconds, house: true, only: None, lanes, cargo_args: Vec::new() };
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--no-fuzz" => o.fuzz = false,
            "--no-loom" => o.loom = false,
            "--no-house" => o.house = false,
            "--fuzz-seconds" => {
                let v = args.get(i + 1).ok_or("--fuzz-seconds needs a value")?;
                o.fuzz_seconds = v.parse().map_err(|_| format!("--fuzz-seconds {v:?} is not a number"))?;
                i += 1;
            }
            "--lanes" => {
                let v = args.get(i + 1).ok_or("--lanes needs a value")?;
                o.lanes = v.parse().map_err(|_| format!("--lanes {v:?} is not a number"))?;
                i += 1;
            }
            "--only" => {
                o.only = Some(args[i + 1..].to_vec());
                break;
            }
            "--" => {
                o.cargo_args = args[i + 1..].to_vec();
                break;
            }
            other => return Err(format!("unknown option {other:?} (see `cargo xtask help`)")),
        }
        i += 1;
    }
    if o.fuzz_seconds == 0 {
        return Err("fuzz seconds must be at least 1".into());
    }
    if o.lanes == 0 {
        return Err("lanes must be at least 1".into());
    }
    Ok(o)
}

/// Runs `cargo test`, passing its output through, and on failure names the
/// failed tests and their panics in the error (the summary is often all a CI
/// log keeps of a long run).
fn run_tests(cmd: &mut Command) -> Result<(), String> {
    use std::io::{BufRead, BufReader, Write};
    let mut child = cmd.stdout(Stdio::piped()).spawn().map_err(|e| format!("could not run: {e}"))?;
    let mut failures = Failures::default();
    let mut timings = Timings::default();
    if let Some(out) = child.stdout.take() {
        let stdout = std::io::stdout();
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = writeln!(stdout.lock(), "{line}");
            failures.see(&line);
            timings.see(&line);
        }
    }
    timings.print_slowest(10);
    match child.wait() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(std::iter::once(format!("exited with {s}")).chain(failures.lines).collect::<Vec<_>>().join("\n")),
        Err(e) => Err(format!("could not wait: {e}")),
    }
}

/// How long each test binary took, from libtest's `test result: ...
/// finished in N s` lines, each named by its first test (cargo names the
/// binary on stderr, which is not read here): where the suite's time goes.
#[derive(Default)]
struct Timings {
    first: Option<String>,
    binaries: Vec<(f64, String)>,
}

impl Timings {
    fn see(&mut self, line: &str) {
        if line.starts_with("running ") {
            self.first = None;
        } else if let Some((name, _)) = line.strip_prefix("test ").and_then(|l| l.split_once(" ... ")) {
            // Not libtest's "test X has been running for over 60 seconds".
            if self.first.is_none() {
                self.first = Some(name.to_string());
            }
        }
        if let Some(seconds) = line
            .strip_prefix("test result:")
            .and_then(|l| l.rsplit("finished in ").next())
            .and_then(|t| t.trim().strip_suffix('s'))
            .and_then(|t| t.parse::<f64>().ok())
        {
            let name = self.first.take().unwrap_or_else(|| "(no tests)".into());
            self.binaries.push((seconds, name));
        }
    }

    fn print_slowest(&self, n: usize) {
        let mut slowest = self.binaries.clone();
        slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
        if slowest.first().is_some_and(|s| s.0 >= 1.0) {
            eprintln!("\nxtask test: the slowest test binaries (named by their first test):");
            for (seconds, name) in slowest.iter().take(n).filter(|s| s.0 >= 1.0) {
                eprintln!("  {seconds:>8.1} s  {name}");
            }
        }
    }
}

pub fn run(args: &[String]) -> ExitCode {
    let env_seconds = std::env::var("SHARDWISE_FUZZ_SECONDS").ok();
    let env_lanes = std::env::var("SHARDWISE_TEST_LANES").ok();
    let opts = match parse_args(args, env_seconds.as_deref(), env_lanes.as_deref()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("xtask test: {e}");
            return ExitCode::from(2);
        }
    };
    crate::install_interrupt_handler();
    let root = workspace_root();
    let mut run = Run { steps: Vec::new() };
    let all = Instant::now();
    let free_at_start = free_disk(&root);

    // 0. The house. Its quick checks come first: they need no server and fail
    //    fast. Its builds (clippy, rustdoc, package) run beside the tests when
    //    the tests run in lanes (see house.rs), else here.
    let house_beside = opts.house && opts.only.is_none() && opts.cargo_args.is_empty();
    if opts.only.is_none() {
        if opts.house {
            crate::house::checks(&root, &mut run);
            if !house_beside {
                for step in crate::house::builds(&root, crate::house::Mode::Foreground) {
                    run.add(step);
                }
            }
        } else {
            run.record("house checks", Instant::now(), Status::Skipped, "--no-house");
        }
    }

    // 1. The server.
    banner("starting Cassandra");
    let t = Instant::now();
    let mut node: Option<Node> = None;
    let server = match std::env::var(testkit::SHARDWISE_CASSANDRA).ok().filter(|v| !v.trim().is_empty()) {
        Some(v) => {
            run.record("cassandra", t, Status::Passed, format!("using SHARDWISE_CASSANDRA={v}"));
            Some(v)
        }
        // The whole suite shares this node and creates about 440 tables on
        // it; each costs Cassandra over a megabyte of heap that stays live
        // (700 MB after a full GC, near the end of a run): 2 GB leaves room
        // for the suite to grow instead of an OutOfMemoryError mid-run.
        None => match shared_node_config().with_free_ports().and_then(Node::start) {
            Ok(n) => {
                let addr = n.addr().to_string();
                run.record(
                    "cassandra",
                    t,
                    Status::Passed,
                    format!("{addr}, ready in {:.1} s, log {}", t.elapsed().as_secs_f64(), n.log_path().display()),
                );
                node = Some(n);
                Some(addr)
            }
            Err(e) => {
                run.record("cassandra", t, Status::Failed, e.to_string());
                None
            }
        },
    };

    // 2. Workspace tests (unit, integration against the server, loom models
    //    compiled without `--cfg loom`), then doc tests.
    // Every process the suite's cargo commands start carries the run's mark
    // (see lanes.rs): what still holds it at the end was left behind.
    let run_mark = format!("{}/", std::process::id());
    let with_server = |cmd: &mut Command| {
        cmd.env(crate::lanes::MARK, format!("{run_mark}cargo/"));
        match &server {
            Some(addr) => cmd.env(testkit::SHARDWISE_CASSANDRA, addr),
            // Tests start their own server (testkit::shared_node) then.
            None => cmd.env_remove(testkit::SHARDWISE_CASSANDRA),
        };
    };
    let (name, mut args) = match &opts.only {
        // `--workspace` would override a `-p`: test just the named packages then.
        Some(extra) if names_packages(extra) => (format!("cargo test {}", extra.join(" ")), extra.clone()),
        Some(extra) => {
            let mut args = vec!["--workspace".to_string()];
            args.extend(extra.iter().cloned());
            (format!("cargo test {}", args.join(" ")), args)
        }
        // --no-fail-fast: one failing test binary must not hide the others.
        None => (
            "cargo test --workspace --all-targets".to_string(),
            vec!["--workspace".to_string(), "--all-targets".to_string(), "--no-fail-fast".to_string()],
        ),
    };
    args.extend(opts.cargo_args.iter().cloned());
    let mut house = None;
    if interrupted() {
        run.skip_rest(&[&name]);
    } else if opts.only.is_none() && opts.cargo_args.is_empty() {
        house = in_lanes(&root, &opts, house_beside, server.as_deref(), &mut run);
    } else {
        banner(&name);
        let t = Instant::now();
        let mut cmd = cargo();
        cmd.current_dir(&root).arg("test").args(&args);
        with_server(&mut cmd);
        match run_tests(&mut cmd) {
            Ok(()) => run.record(&name, t, Status::Passed, ""),
            Err(e) => run.record(&name, t, Status::Failed, e),
        }
    }
    if opts.only.is_none() {
        if interrupted() {
            run.skip_rest(&["doc tests"]);
        } else {
            banner("cargo test --workspace --doc");
            let t = Instant::now();
            let mut cmd = cargo();
            cmd.current_dir(&root).args(["test", "--workspace", "--doc"]);
            with_server(&mut cmd);
            match run_tests(&mut cmd) {
                Ok(()) => run.record("doc tests", t, Status::Passed, ""),
                Err(e) => run.record("doc tests", t, Status::Failed, e),
            }
        }
    }

    // 3. The server is not needed any more: stop it now so that loom and the
    //    fuzzers get its CPU and memory (it is also stopped on every early
    //    exit: on drop, and by its lifeline if this process dies).
    if let Some(mut n) = node.take() {
        banner("stopping Cassandra");
        let t = Instant::now();
        match n.stop() {
            Ok(_) => run.record("stop cassandra", t, Status::Passed, ""),
            Err(e) => run.record("stop cassandra", t, Status::Failed, e.to_string()),
        }
    }

    if opts.only.is_none() {
        // 4. Loom models.
        if !opts.loom {
            run.record("loom", Instant::now(), Status::Skipped, "--no-loom");
        } else if interrupted() {
            run.skip_rest(&["loom"]);
        } else {
            banner("loom models (RUSTFLAGS=\"--cfg loom\", target/loom)");
            let t = Instant::now();
            match run_status(&mut loom_command(&root)) {
                Ok(()) => run.record("loom", t, Status::Passed, ""),
                Err(e) => run.record("loom", t, Status::Failed, e),
            }
        }

        // 5. Fuzz smoke runs.
        if !opts.fuzz {
            run.record("fuzz", Instant::now(), Status::Skipped, "--no-fuzz");
        } else if interrupted() {
            run.skip_rest(&["fuzz"]);
        } else {
            banner(&format!("fuzz smoke runs ({} s per target)", opts.fuzz_seconds));
            let t = Instant::now();
            let (status, note) = fuzz(&root, opts.fuzz_seconds);
            run.record("fuzz", t, status, note);
        }
    }

    // 6. The house's builds: joined if they ran beside the tests, else here.
    if house_beside {
        let steps = match house {
            Some(handle) => {
                banner("the house's builds, started beside the tests (clippy, doc, package)");
                handle.join().unwrap_or_else(|_| {
                    vec![Step::new("house builds", Instant::now(), Status::Failed, "their thread panicked")]
                })
            }
            None => crate::house::builds(&root, crate::house::Mode::Foreground),
        };
        for step in steps {
            run.add(step);
        }
    }

    // 7. No process any test started is left (the lanes check each binary
    //    as it ends; this catches the rest: doc tests, `--only` runs).
    banner("no process the tests started is left");
    let t = Instant::now();
    let left = crate::lanes::reap_marked(&run_mark, std::time::Duration::from_secs(60));
    if left.is_empty() {
        run.record("leftover processes", t, Status::Passed, "");
    } else {
        let lines: Vec<String> = left.iter().map(|(pid, cmd)| format!("pid {pid}: {cmd}")).collect();
        let note = format!("{} processes left running (killed)\n{}", left.len(), lines.join("\n"));
        run.record("leftover processes", t, Status::Failed, note);
    }

    // The build outputs of a clean run fill tens of gigabytes: say how much
    // room the run took, so a CI machine short of disk shows up as such.
    if let (Some(start), Some(end)) = (free_at_start, free_disk(&root)) {
        eprintln!("\nxtask test: disk free {} at the start, {} at the end", gigabytes(start), gigabytes(end));
    }
    summary(&run, all)
}

/// `cargo test` of the loom models, built with `--cfg loom` in their own
/// target folder.
fn loom_command(root: &Path) -> Command {
    let mut cmd = cargo();
    cmd.current_dir(root)
        .args(["test", "-p", "shardwise-loom-tests", "--release"])
        .env("RUSTFLAGS", "--cfg loom")
        .env("CARGO_TARGET_DIR", root.join("target").join("loom"));
    cmd
}

/// Builds what the loom and fuzz steps run while the tests run, at the
/// lowest CPU priority: the tests leave about a quarter of this 2-core
/// machine idle (they wait on servers), and these builds took about four
/// minutes of the suite after them. Output goes to `log_dir`; a failure
/// here shows again, with its errors, when the step builds for itself.
/// Then, with `house`, the house's builds (see house.rs). The receiver gets
/// the loom and fuzz builds' notes when they are done; the thread's result
/// is the house's steps.
fn prebuild(
    root: &Path,
    opts: &Options,
    house: bool,
    log_dir: &Path,
) -> (Receiver<Vec<String>>, std::thread::JoinHandle<Vec<Step>>) {
    let (root, log_dir, loom, fuzz) = (root.to_path_buf(), log_dir.to_path_buf(), opts.loom, opts.fuzz);
    let (built, notes_rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let mut notes = Vec::new();
        if loom {
            let log = log_dir.join("loom-build.log");
            let mut cmd = crate::fuzz::nice(loom_command(&root));
            let built = output_to(cmd.arg("--no-run"), &log).and_then(run_status);
            notes.push(match built {
                Ok(()) => "loom built".to_string(),
                Err(e) => format!("loom build: {e} (see {})", log.display()),
            });
        }
        if fuzz && !interrupted() {
            let log = log_dir.join("fuzz-build.log");
            let built = crate::fuzz::targets(&root)
                .and_then(|t| t.map_or(Ok(()), |_| crate::fuzz::build_all(&root, Some(&log))));
            notes.push(match built {
                Ok(()) => "fuzz targets built".to_string(),
                Err(e) => format!("fuzz build: {e} (see {})", log.display()),
            });
        }
        // The receiver may be gone (the tests were interrupted): nothing waits then.
        let _ = built.send(notes);
        if house {
            crate::house::builds(&root, crate::house::Mode::Beside { logs: &log_dir })
        } else {
            Vec::new()
        }
    });
    (notes_rx, handle)
}

/// The workspace tests as two steps: cargo builds every test binary, then
/// they run side by side in `opts.lanes` lanes (see `lanes.rs`).
/// Returns the thread of the house's builds when `house` and it started.
fn in_lanes(
    root: &Path,
    opts: &Options,
    house: bool,
    server: Option<&str>,
    run: &mut Run,
) -> Option<std::thread::JoinHandle<Vec<Step>>> {
    use std::io::{BufRead, BufReader};
    let name = "build tests";
    banner("cargo test --workspace --all-targets --no-run");
    let t = Instant::now();
    let mut cmd = cargo();
    cmd.current_dir(root)
        .args(["test", "--workspace", "--all-targets", "--no-run", "--message-format=json-render-diagnostics"])
        .stdout(Stdio::piped());
    let mut messages = String::new();
    let built = cmd.spawn().map_err(|e| format!("could not run: {e}")).and_then(|mut child| {
        if let Some(out) = child.stdout.take() {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                messages.push_str(&line);
                messages.push('\n');
            }
        }
        match child.wait() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("exited with {s}")),
            Err(e) => Err(format!("could not wait: {e}")),
        }
    });
    let binaries = crate::lanes::parse_artifacts(&messages);
    match built {
        Ok(()) if binaries.is_empty() => {
            run.record(name, t, Status::Failed, "cargo named no test binary");
            return None;
        }
        Ok(()) => run.record(name, t, Status::Passed, format!("{} test binaries", binaries.len())),
        Err(e) => {
            run.record(name, t, Status::Failed, e);
            return None;
        }
    }
    let name = "workspace tests";
    if interrupted() {
        run.skip_rest(&[name]);
        return None;
    }
    let lanes = if opts.lanes == 1 { "one lane".to_string() } else { format!("{} lanes", opts.lanes) };
    banner(&format!("workspace tests, {} binaries in {lanes}", binaries.len()));
    let t = Instant::now();
    let log_dir = root.join("target").join("xtask-test");
    if let Err(e) = std::fs::create_dir_all(&log_dir) {
        run.record(name, t, Status::Failed, format!("creating {}: {e}", log_dir.display()));
        return None;
    }
    let (built, builds) = prebuild(root, opts, house, &log_dir);
    let jobs = crate::lanes::plan(&binaries, crate::lanes::list_tests);
    let mut env: Vec<(String, String)> =
        server.map(|a| (testkit::SHARDWISE_CASSANDRA.to_string(), a.to_string())).into_iter().collect();
    // The nemesis runs the CDC printer, another package's binary: this one,
    // instead of a `cargo build -p` whose features differ from the
    // workspace's (which rebuilt a dozen crates mid-run).
    if let Some(printer) = crate::lanes::find_bin(&messages, "printer") {
        env.push(("SHARDWISE_PRINTER".into(), printer.display().to_string()));
    }
    let mut outcomes = crate::lanes::run(jobs, opts.lanes, &env, &log_dir);
    outcomes.sort_by_key(|o| std::cmp::Reverse(o.took));
    eprintln!("\nxtask test: the slowest test runs:");
    for o in outcomes.iter().take(12) {
        eprintln!("  {:>8.1} s  {}", o.took.as_secs_f64(), o.label);
    }
    let failed: Vec<String> = outcomes.iter().filter(|o| !o.passed).flat_map(|o| o.failures.clone()).collect();
    let note = format!("{} runs", outcomes.len());
    if interrupted() {
        run.record(name, t, Status::Failed, format!("{note}, interrupted"));
    } else if failed.is_empty() {
        run.record(name, t, Status::Passed, note);
    } else {
        run.record(name, t, Status::Failed, failed.join("\n"));
    }
    // The loom and fuzz builds left to finish (they only shorten the steps
    // after this); the house's go on.
    let t = Instant::now();
    match built.recv() {
        Ok(notes) if notes.is_empty() => {}
        Ok(notes) => run.record("loom and fuzz builds (during the tests)", t, Status::Passed, notes.join("; ")),
        Err(_) => run.record("loom and fuzz builds (during the tests)", t, Status::Failed, "their thread ended early"),
    }
    Some(builds)
}

/// Free bytes on the file system that holds `dir` (`df -Pk`), if `df` answers.
fn free_disk(dir: &Path) -> Option<u64> {
    let out = Command::new("df").arg("-Pk").arg(dir).stderr(Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // POSIX format: a header, then "fs blocks used available capacity mount".
    let kib: u64 = text.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()?;
    Some(kib * 1024)
}

fn gigabytes(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// Prints every step and turns the run into an exit code.
fn summary(run: &Run, all: Instant) -> ExitCode {
    eprintln!("\n==== xtask test summary ({:.0} s)", all.elapsed().as_secs_f64());
    for s in &run.steps {
        let tag = match s.status {
            Status::Passed => "PASS",
            Status::Failed => "FAIL",
            Status::Skipped => "SKIP",
        };
        let mut lines = s.note.lines();
        let note = lines.next().unwrap_or("");
        eprintln!("  {tag}  {:<28} {:>7.1} s{}", s.name, s.took.as_secs_f64(), suffix(note));
        // The failed tests of a failed step, each with its panic.
        if s.status == Status::Failed {
            for more in lines.take(40) {
                eprintln!("          {more}");
            }
        }
    }
    let failed = run.steps.iter().filter(|s| s.status == Status::Failed).count();
    let passed = run.steps.iter().filter(|s| s.status == Status::Passed).count();
    let skipped = run.steps.iter().filter(|s| s.status == Status::Skipped).count();
    if interrupted() {
        eprintln!("xtask test: INTERRUPTED");
        ExitCode::from(130)
    } else if failed > 0 {
        eprintln!("xtask test: FAILED ({failed} of {} steps)", run.steps.len());
        ExitCode::FAILURE
    } else {
        eprintln!("xtask test: OK ({passed} steps, {skipped} skipped)");
        ExitCode::SUCCESS
    }
}

/// `cargo xtask house`: only the house checks, with the summary.
pub fn run_house() -> ExitCode {
    let (mut run, all) = (Run { steps: Vec::new() }, Instant::now());
    crate::house::run_all(&workspace_root(), &mut run);
    summary(&run, all)
}

/// Runs every fuzz target for `seconds`, two at a time (libFuzzer uses one
/// core; this machine has two), after one build of them all; returns the
/// step's status and note. Each run's output is printed whole when it ends.
fn fuzz(root: &Path, seconds: u64) -> (Status, String) {
    let targets = match crate::fuzz::targets(root) {
        Ok(Some(t)) if !t.is_empty() => t,
        Ok(Some(_)) => return (Status::Skipped, "cargo fuzz list shows no targets yet".into()),
        Ok(None) => return (Status::Skipped, "fuzz/ has no Cargo.toml yet".into()),
        Err(e) => return (Status::Failed, e),
    };
    if let Err(e) = crate::fuzz::build_all(root, None) {
        return (Status::Failed, e);
    }
    let queue = std::sync::Mutex::new(targets.iter().collect::<std::collections::VecDeque<_>>());
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..FUZZ_AT_ONCE {
            s.spawn(|| loop {
                let Some(target) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front() else { break };
                let result = if interrupted() {
                    Err("not run (interrupted)".to_string())
                } else {
                    let mut output = format!("\n---- fuzz {target}: {seconds} s\n");
                    let result =
                        crate::fuzz::run_target(root, target, crate::fuzz::Budget::Seconds(seconds), &mut |line| {
                            output.push_str(line);
                            output.push('\n');
                        });
                    match &result {
                        Ok(o) => output.push_str(&format!("---- fuzz {target}: {} executions, no crash\n", o.runs)),
                        Err(e) => output.push_str(&format!("---- fuzz {target}: FAILED: {e}\n")),
                    }
                    eprint!("{output}");
                    result
                };
                results.lock().unwrap_or_else(|e| e.into_inner()).push((target.clone(), result));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let failed = results.iter().any(|(_, r)| r.is_err());
    let notes: Vec<String> = results
        .iter()
        .map(|(target, r)| match r {
            Ok(o) => format!("{target}: {} runs", o.runs),
            Err(e) => format!("{target}: FAILED {e}"),
        })
        .collect();
    let status = if failed { Status::Failed } else { Status::Passed };
    (status, notes.join("; "))
}

/// Fuzz targets run at once in the smoke step.
const FUZZ_AT_ONCE: usize = 2;

/// Whether `--only` arguments name packages (`-p X`, `--package X`, `--package=X`).
fn names_packages(args: &[String]) -> bool {
    args.iter().take_while(|a| *a != "--").any(|a| a == "-p" || a == "--package" || a.starts_with("--package="))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn failed_tests_and_their_panics_are_named() {
        let out = "running 3 tests\ntest a::ok ... ok\ntest fault::tests::stops ... FAILED\n\nfailures:\n\n\
                   ---- fault::tests::stops stdout ----\n\n\
                   thread 'fault::tests::stops' panicked at testkit/src/fault.rs:9:5:\nstopped in 3s\n\n\
                   failures:\n    fault::tests::stops\n";
        let mut f = Failures::default();
        out.lines().for_each(|l| f.see(l));
        assert_eq!(
            f.lines,
            [
                "failed: fault::tests::stops",
                "  thread 'fault::tests::stops' panicked at testkit/src/fault.rs:9:5: stopped in 3s"
            ]
        );
    }

    #[test]
    fn test_binaries_are_timed_and_named_by_their_first_test() {
        let out = "running 2 tests\ntest cdc::a has been running for over 60 seconds\ntest cdc::a ... ok\n\
                   test cdc::b ... ok\n\n\
                   test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 41.50s\n\
                   running 0 tests\n\ntest result: ok. 0 passed; 0 failed; finished in 0.00s\n";
        let mut t = Timings::default();
        out.lines().for_each(|l| t.see(l));
        assert_eq!(t.binaries, [(41.5, "cdc::a".to_string()), (0.0, "(no tests)".to_string())]);
    }

    #[test]
    fn defaults_and_env() {
        let o = parse_args(&[], None, None).unwrap();
        assert_eq!(
            o,
            Options {
                fuzz: true,
                loom: true,
                fuzz_seconds: DEFAULT_FUZZ_SECONDS,
                house: true,
                only: None,
                lanes: crate::lanes::default_lanes(),
                cargo_args: Vec::new()
            }
        );
        assert_eq!(parse_args(&[], Some("5"), None).unwrap().fuzz_seconds, 5);
        assert!(parse_args(&[], Some("soon"), None).is_err());
        assert_eq!(parse_args(&[], None, Some("2")).unwrap().lanes, 2);
        assert!(parse_args(&[], None, Some("many")).is_err());
    }

    #[test]
    fn flags() {
        let o = parse_args(&args("--no-fuzz --fuzz-seconds 7 --no-loom --no-house --lanes 1"), Some("5"), Some("4"))
            .unwrap();
        assert!(!o.fuzz && !o.loom && !o.house);
        assert_eq!((o.fuzz_seconds, o.lanes), (7, 1));
        assert!(parse_args(&args("--lanes 0"), None, None).is_err());
        let o = parse_args(&args("--only -p testkit start_stop -- --nocapture"), None, None).unwrap();
        assert_eq!(o.only, Some(args("-p testkit start_stop -- --nocapture")));
        assert!(names_packages(&args("-p testkit start_stop -- --nocapture")));
        assert!(!names_packages(&args("start_stop -- -p")));
        let o = parse_args(&args("--no-fuzz -- -p testkit --lib"), None, None).unwrap();
        assert_eq!(o.cargo_args, args("-p testkit --lib"));
        assert!(!o.fuzz);
        assert!(parse_args(&args("--fuzz-seconds"), None, None).is_err());
        assert!(parse_args(&args("--fuzz-seconds 0"), None, None).is_err());
        assert!(parse_args(&args("--bogus"), None, None).is_err());
    }
}
