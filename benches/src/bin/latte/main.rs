//! `latte`: runs latte's workload scripts, unchanged, on shardwise or on the
//! official ScyllaDB driver (`scylla` 1.9).
//!
//! ```text
//! latte schema benches/latte/insert.rn 127.0.0.1:9042
//! latte load   benches/latte/read.rn -d 1000
//! latte run    benches/latte/insert.rn -d 10s -t 1 -p 128 --driver scylla -o run.json
//! ```
//!
//! The command line follows latte's: `schema`, `load` and `run`, a script
//! and the nodes (default `$SHARDWISE_CASSANDRA`, else 127.0.0.1:9042);
//! `-d/--duration` (a time such as `10s`, or a cycle count such as `1000`),
//! `-w/--warmup`, `-r/--rate`, `-t/--threads`, `-p/--concurrency`, `--tag`,
//! `-P name=value` (for `latte::param!`), `-o/--output FILE.json`; ours:
//! `--driver shardwise|scylla`. Both drivers speak protocol v4 unless
//! `--protocol 5` (shardwise only). `load` calls `prepare`, `erase` (if
//! defined) and then `load` for cycles 0..N, N from `-d` or the script's
//! `ctx.load_cycle_count` (set by `prepare`) or `LOAD_COUNT`; `run` calls
//! `prepare` and then `run`. A script's `mod name;` loads `name.rn` (or
//! `name/mod.rn`) beside it, as latte's workloads split their helpers.
//!
//! Modules, one concept each:
//! - `script`: compiling a script with the `latte` module, calling its functions;
//! - `functions`: the `latte` module (data generators, `param!`);
//! - `context`: the `ctx` object, one session of either driver;
//! - `values`: script values to CQL values by the markers' types;
//! - `runner`: a phase's threads and request loops, closed or open loop;
//! - `report`: the figures, as text and JSON;
//! - `error`: the errors, one line each.

mod context;
mod error;
mod functions;
mod report;
mod runner;
mod script;
mod values;

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use shardwise_benches::interval::{parse_interval, Interval};
use shardwise_benches::rusage::process_cpu_time;

use crate::context::{ConnectOptions, Context, DriverKind};
use crate::error::LatteError;
use crate::report::{Labels, Report};
use crate::runner::Plan;
use crate::script::Script;

#[derive(Parser, Debug)]
#[command(name = "latte", version, about = "Runs latte workload scripts on shardwise or the official ScyllaDB driver")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Calls the script's `schema` function once.
    Schema(Target),
    /// Calls `prepare`, `erase` (if any), then `load` for cycles 0..N.
    Load(Phase),
    /// Calls `prepare`, then `run` for the given time or cycles, and reports.
    Run(Phase),
}

#[derive(Args, Debug, Clone)]
struct Target {
    /// The workload script (`.rn`).
    script: PathBuf,
    /// Contact points, host:port (default: $SHARDWISE_CASSANDRA, else 127.0.0.1:9042).
    nodes: Vec<String>,
    /// Script parameter for `latte::param!` (repeatable).
    #[arg(short = 'P', value_parser = parse_param)]
    params: Vec<(String, String)>,
    /// Which driver runs the script.
    #[arg(long, value_enum, default_value_t = DriverKind::Shardwise)]
    driver: DriverKind,
    /// Consistency level.
    #[arg(long, default_value = "LOCAL_QUORUM")]
    consistency: String,
    /// Highest protocol version (5: shardwise only).
    #[arg(long, default_value_t = 4)]
    protocol: u8,
    /// Request timeout in seconds (0: none).
    #[arg(long, default_value = "5", value_parser = parse_timeout)]
    request_timeout: Timeout,
    /// Connections per shard (per node on Cassandra).
    #[arg(short = 'c', long, default_value = "1")]
    connections: NonZeroUsize,
}

#[derive(Args, Debug, Clone)]
struct Phase {
    #[command(flatten)]
    target: Target,
    /// Run time (`10s`, `500ms`) or cycles (`1000`); `run` default 60s, `load` default LOAD_COUNT.
    #[arg(short = 'd', long, value_parser = parse_interval)]
    duration: Option<Interval>,
    /// Warm-up before a `run`, not measured (time or cycles).
    #[arg(short = 'w', long, default_value = "0", value_parser = parse_interval)]
    warmup: Interval,
    /// Cycles per second for the whole process (open loop); default: unlimited.
    #[arg(short = 'r', long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// Threads.
    #[arg(short = 't', long, default_value = "1")]
    threads: NonZeroUsize,
    /// Cycles in flight per thread.
    #[arg(short = 'p', long, default_value = "128")]
    concurrency: NonZeroUsize,
    /// A label for the report (repeatable).
    #[arg(long)]
    tag: Vec<String>,
    /// Write the report as JSON to this file.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
}

/// `-r`: a positive, finite number of cycles per second.
fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!("bad rate {s:?}: a positive number of cycles per second")),
    }
}

/// A request timeout (`None`: none).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Timeout(Option<Duration>);

/// `--request-timeout`: seconds, 0 for none.
fn parse_timeout(s: &str) -> Result<Timeout, String> {
    let secs: f64 = s.trim().parse().map_err(|_| format!("bad timeout {s:?}: seconds"))?;
    if secs == 0.0 {
        return Ok(Timeout(None));
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if secs > 0.0 => Ok(Timeout(Some(d))),
        _ => Err(format!("bad timeout {s:?}: seconds, 0 for none")),
    }
}

/// `-P name=value`.
fn parse_param(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => Ok((name.trim().to_string(), value.to_string())),
        _ => Err(format!("bad parameter {s:?}: expected name=value")),
    }
}

impl Target {
    fn connect_options(&self) -> ConnectOptions {
        let nodes = if self.nodes.is_empty() {
            vec![std::env::var("SHARDWISE_CASSANDRA")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| "127.0.0.1:9042".into())]
        } else {
            self.nodes.clone()
        };
        ConnectOptions {
            nodes,
            consistency: self.consistency.clone(),
            protocol: self.protocol,
            request_timeout: self.request_timeout.0,
            connections: self.connections.get(),
        }
    }

    fn load_script(&self) -> Result<Script, LatteError> {
        let params: HashMap<String, String> = self.params.iter().cloned().collect();
        Script::load(&self.script, params)
    }
}

fn require(
    script: &Script,
    function: &'static str,
    command: &'static str,
    args: &'static str,
) -> Result<(), LatteError> {
    if script.has(function) {
        Ok(())
    } else {
        Err(LatteError::MissingFunction { path: script.path.clone(), function, command, args })
    }
}

/// A runtime for the session: the thread's own with one thread, else
/// `threads` workers for the drivers' connection tasks.
fn runtime(threads: usize) -> Result<tokio::runtime::Runtime, LatteError> {
    if threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()
    }
    .map_err(LatteError::Start)
}

fn schema(t: &Target) -> Result<(), LatteError> {
    let script = t.load_script()?;
    require(&script, "schema", "schema", "")?;
    let rt = runtime(1)?;
    rt.block_on(async {
        let ctx = Context::connect(t.driver, &t.connect_options()).await?;
        runner::call_once(&script, &ctx, "schema").await
    })?;
    println!("schema: {} done ({})", script.path.display(), t.driver.name());
    Ok(())
}

fn phase(p: &Phase, command: &'static str) -> Result<(), LatteError> {
    let t = &p.target;
    let script = t.load_script()?;
    require(&script, command, command, ", i")?;
    let threads = p.threads.get();
    let rt = runtime(threads)?;
    let ctx = rt.block_on(async {
        let ctx = Context::connect(t.driver, &t.connect_options()).await?;
        if script.has("prepare") {
            runner::call_once(&script, &ctx, "prepare").await?;
        }
        if command == "load" && script.has("erase") {
            runner::call_once(&script, &ctx, "erase").await?;
        }
        Ok::<_, LatteError>(ctx)
    })?;
    // As latte: `-d`, else what `prepare` set `ctx.load_cycle_count` to, else `LOAD_COUNT`.
    let interval = match (command, p.duration) {
        (_, Some(d)) => d,
        ("load", None) => {
            Interval::Count(ctx.load_cycle_count().or_else(|| script.load_count()).ok_or(LatteError::NoLoadCount)?)
        }
        (_, None) => Interval::Time(Duration::from_secs(60)),
    };
    let plan = |interval| Plan { function: command, interval, threads, concurrency: p.concurrency.get(), rate: p.rate };
    let measure = |interval| runner::run_phase(&script, &ctx, &plan(interval), &rt);
    if command == "run" && p.warmup != Interval::Count(0) && p.warmup != Interval::Time(Duration::ZERO) {
        measure(p.warmup)?;
    }
    let cpu0 = process_cpu_time().map_err(|e| LatteError::Runtime(e.to_string()))?;
    let m = measure(interval)?;
    let cpu = process_cpu_time().map_err(|e| LatteError::Runtime(e.to_string()))?.since(&cpu0);
    let script_name = script.path.display().to_string();
    let labels =
        Labels { command, script: &script_name, driver: t.driver.name(), protocol: ctx.protocol(), tags: &p.tag };
    let report = Report::new(labels, threads, p.concurrency.get(), p.rate, &m, cpu);
    print!("{}", report.text());
    if let Some(path) = &p.output {
        std::fs::write(path, report.json()).map_err(|source| LatteError::Output { path: path.clone(), source })?;
    }
    drop(ctx);
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Schema(t) => schema(t),
        Command::Load(p) => phase(p, "load"),
        Command::Run(p) => phase(p, "run"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("latte").chain(args.iter().copied()))
    }

    #[test]
    fn latte_s_command_line() {
        let cli = parse(&[
            "run",
            "w.rn",
            "10.0.0.1:9042",
            "10.0.0.2",
            "-d",
            "1000",
            "-r",
            "500.5",
            "-t",
            "2",
            "-p",
            "64",
            "--tag",
            "a",
            "--tag",
            "b",
            "-P",
            "rows=10",
            "-P",
            "name=x=y",
            "--driver",
            "scylla",
            "-o",
            "out.json",
            "-w",
            "2s",
        ])
        .expect("parse");
        let Command::Run(p) = cli.command else { panic!("not run") };
        assert_eq!(p.target.script, PathBuf::from("w.rn"));
        assert_eq!(p.target.nodes, ["10.0.0.1:9042", "10.0.0.2"]);
        assert_eq!(p.duration, Some(Interval::Count(1000)));
        assert_eq!(p.warmup, Interval::Time(Duration::from_secs(2)));
        assert_eq!(p.rate, Some(500.5));
        assert_eq!((p.threads.get(), p.concurrency.get()), (2, 64));
        assert_eq!(p.tag, ["a", "b"]);
        assert_eq!(p.target.params, [("rows".to_string(), "10".to_string()), ("name".to_string(), "x=y".to_string())]);
        assert_eq!(p.target.driver, DriverKind::Scylla);
        assert_eq!(p.output, Some(PathBuf::from("out.json")));
        assert_eq!(p.target.protocol, 4);
    }

    #[test]
    fn defaults() {
        let cli = parse(&["load", "w.rn", "-d", "10s"]).expect("parse");
        let Command::Load(p) = cli.command else { panic!("not load") };
        assert_eq!(p.duration, Some(Interval::Time(Duration::from_secs(10))));
        assert_eq!(p.target.driver, DriverKind::Shardwise);
        assert_eq!((p.threads.get(), p.concurrency.get(), p.rate), (1, 128, None));
        assert!(p.target.nodes.is_empty());
        let cli = parse(&["schema", "w.rn"]).expect("parse");
        let Command::Schema(t) = cli.command else { panic!("not schema") };
        assert_eq!(t.connect_options().request_timeout, Some(Duration::from_secs(5)));
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(parse(&["run", "w.rn", "-P", "novalue"]).is_err());
        assert!(parse(&["run", "w.rn", "-P", "=v"]).is_err());
        assert!(parse(&["run", "w.rn", "-d", "10 parsecs"]).is_err());
        assert!(parse(&["run", "w.rn", "-t", "0"]).is_err());
        assert!(parse(&["run", "w.rn", "--driver", "cassandra"]).is_err());
        for rate in ["0", "-5", "inf", "NaN", "x"] {
            assert!(parse(&["run", "w.rn", "-r", rate]).is_err(), "-r {rate}");
        }
        for timeout in ["-1", "inf", "1e300", "x"] {
            assert!(parse(&["run", "w.rn", "--request-timeout", timeout]).is_err(), "--request-timeout {timeout}");
        }
        assert_eq!(parse_timeout("0"), Ok(Timeout(None)));
        assert_eq!(parse_timeout("0.5"), Ok(Timeout(Some(Duration::from_millis(500)))));
        assert!(parse(&["run"]).is_err());
        assert_eq!(parse_param("a=1"), Ok(("a".into(), "1".into())));
    }
}
