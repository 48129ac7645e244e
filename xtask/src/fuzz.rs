//! Running the fuzz targets of `fuzz/` (cargo-fuzz, nightly): the smoke runs
//! of `cargo xtask test` and the long runs of `cargo xtask fuzz`.
//!
//! Each target runs on two corpus folders: `fuzz/corpus/<target>` (the
//! working corpus libFuzzer grows; not committed) and the committed seeds
//! in `fuzz/seeds/<target>` (read only). The crate builds into its own
//! target folder, `fuzz/target`, not the workspace's.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::interrupted;

/// `cargo +nightly` through the rustup proxy on PATH.
pub fn cargo_nightly() -> Command {
    let mut c = Command::new("cargo");
    c.arg("+nightly");
    // Let the `+nightly` proxy pick every tool; do not pin the outer toolchain,
    // and build into the fuzz crate's own target folder.
    c.env_remove("RUSTUP_TOOLCHAIN").env_remove("CARGO").env_remove("RUSTC").env_remove("CARGO_TARGET_DIR");
    c
}

/// `cmd` run through `nice -n 19`, with its arguments, environment and
/// working directory.
pub fn nice(cmd: Command) -> Command {
    let mut niced = Command::new("nice");
    niced.args(["-n", "19"]).arg(cmd.get_program()).args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        niced.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => niced.env(k, v),
            None => niced.env_remove(k),
        };
    }
    niced
}

/// Checks for nightly and cargo-fuzz (installing cargo-fuzz if missing) and
/// lists the targets. `Ok(None)`: there is no fuzz crate.
pub fn targets(root: &Path) -> Result<Option<Vec<String>>, String> {
    if !root.join("fuzz").join("Cargo.toml").is_file() {
        return Ok(None);
    }
    let quiet = |c: &mut Command| {
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    };
    if !quiet(cargo_nightly().arg("--version")) {
        return Err("no nightly toolchain: rustup toolchain install nightly --profile minimal".into());
    }
    if !quiet(cargo_nightly().args(["fuzz", "--version"])) {
        eprintln!("xtask: installing cargo-fuzz (cargo install cargo-fuzz --locked)");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        match Command::new(cargo).args(["install", "cargo-fuzz", "--locked"]).status() {
            Ok(s) if s.success() => {}
            Ok(s) => return Err(format!("cargo install cargo-fuzz --locked exited with {s}")),
            Err(e) => return Err(format!("cargo install cargo-fuzz --locked could not run: {e}")),
        }
    }
    let out = cargo_nightly()
        .current_dir(root)
        .args(["fuzz", "list"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cargo +nightly fuzz list: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo +nightly fuzz list failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(Some(parse_fuzz_list(&String::from_utf8_lossy(&out.stdout))))
}

/// What one run of a target did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// libFuzzer's execution count.
    pub runs: u64,
    /// Wall time of the fuzzing itself (libFuzzer's "in N second(s)").
    pub seconds: u64,
}

/// How long one target runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// For this many seconds (libFuzzer's `-max_total_time`).
    Seconds(u64),
    /// Until this many executions (libFuzzer's `-runs`), however long that takes.
    Runs(u64),
}

impl Budget {
    fn flag(self) -> String {
        match self {
            Budget::Seconds(s) => format!("-max_total_time={s}"),
            Budget::Runs(n) => format!("-runs={n}"),
        }
    }
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Budget::Seconds(s) => write!(f, "for {s} s"),
            Budget::Runs(n) => write!(f, "for {n} executions"),
        }
    }
}

/// Builds every target (one cargo, so the smoke runs that follow start at
/// once); `quiet_and_nice`: at the lowest CPU priority, output to `log`.
pub fn build_all(root: &Path, quiet_and_nice: Option<&Path>) -> Result<(), String> {
    let mut cmd = cargo_nightly();
    if let Some(log) = quiet_and_nice {
        cmd = nice(cmd);
        crate::steps::output_to(&mut cmd, log)?;
    }
    match cmd.current_dir(root).args(["fuzz", "build"]).stdin(Stdio::null()).status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("cargo +nightly fuzz build exited with {s}")),
        Err(e) => Err(format!("could not run cargo +nightly fuzz build: {e}")),
    }
}

/// Runs one target within `budget` on its working corpus and its seeds;
/// each line of libFuzzer's output goes to `out`. A crash (or leak, timeout,
/// allocation over the limit) is an error naming the input libFuzzer saved.
pub fn run_target(root: &Path, target: &str, budget: Budget, out: &mut dyn FnMut(&str)) -> Result<Outcome, String> {
    let corpus = root.join("fuzz").join("corpus").join(target);
    std::fs::create_dir_all(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
    let seeds: PathBuf = root.join("fuzz").join("seeds").join(target);
    let mut cmd = cargo_nightly();
    cmd.current_dir(root).args(["fuzz", "run", target]).arg(&corpus);
    if seeds.is_dir() {
        cmd.arg(&seeds);
    }
    let mut child = cmd
        .arg("--")
        .arg(budget.flag())
        // One input must not take long or allocate much: a hang or a
        // hostile length that is trusted is a finding.
        .arg("-timeout=10")
        .arg("-rss_limit_mb=2048")
        .arg("-malloc_limit_mb=256")
        .arg("-print_final_stats=1")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run cargo +nightly fuzz run: {e}"))?;
    let mut done = None;
    let mut artifact = None;
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            out(&line);
            if let Some(d) = parse_done(&line) {
                done = Some(d);
            }
            if let Some(path) = line.split("Test unit written to ").nth(1) {
                artifact = Some(path.trim().to_string());
            }
        }
    }
    let status = child.wait().map_err(|e| format!("waiting for cargo fuzz: {e}"))?;
    match (status.success(), done, artifact) {
        (true, Some(o), None) => Ok(o),
        (true, None, None) => Err("finished without libFuzzer's \"Done N runs\" line".into()),
        (_, _, Some(a)) => Err(format!("{status}: crash input saved to {a}")),
        (false, _, None) => Err(format!("{status}")),
    }
}

/// Targets from `cargo fuzz list`: one per non-empty line.
pub fn parse_fuzz_list(stdout: &str) -> Vec<String> {
    stdout.lines().map(str::trim).filter(|l| !l.is_empty() && !l.contains(' ')).map(String::from).collect()
}

/// libFuzzer's final line: `Done 123456 runs in 31 second(s)`.
pub fn parse_done(line: &str) -> Option<Outcome> {
    let rest = line.trim().strip_prefix("Done ")?;
    let (n, rest) = rest.split_once(' ')?;
    let secs = rest.strip_prefix("runs in ")?.split_once(' ')?.0;
    Some(Outcome { runs: n.parse().ok()?, seconds: secs.parse().ok()? })
}

/// Parsed command line of `xtask fuzz`.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Minutes per target.
    pub minutes: f64,
    /// Executions per target instead of minutes.
    pub runs: Option<u64>,
    /// Only this target.
    pub target: Option<String>,
}

impl Options {
    fn budget(&self) -> Budget {
        match self.runs {
            Some(n) => Budget::Runs(n),
            None => Budget::Seconds(seconds(self.minutes)),
        }
    }
}

/// Parses the arguments after `fuzz`: `[--minutes N | --runs N] [target]`.
pub fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options { minutes: 10.0, runs: None, target: None };
    let mut minutes_given = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--minutes" => {
                let v = it.next().ok_or("--minutes needs a value")?;
                o.minutes = v.parse().map_err(|_| format!("--minutes {v:?} is not a number"))?;
                if !(o.minutes.is_finite() && o.minutes > 0.0) {
                    return Err(format!("--minutes {v:?} must be above zero"));
                }
                minutes_given = true;
            }
            "--runs" => {
                let v = it.next().ok_or("--runs needs a value")?;
                let n: u64 = v.replace('_', "").parse().map_err(|_| format!("--runs {v:?} is not a whole number"))?;
                if n == 0 {
                    return Err("--runs must be above zero".into());
                }
                o.runs = Some(n);
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option {flag:?} (see `cargo xtask help`)")),
            name if o.target.is_none() => o.target = Some(name.to_string()),
            extra => return Err(format!("one target at most (got {extra:?} too)")),
        }
    }
    if minutes_given && o.runs.is_some() {
        return Err("--minutes and --runs exclude each other".into());
    }
    Ok(o)
}

/// Whole seconds for `minutes` (at least one).
fn seconds(minutes: f64) -> u64 {
    ((minutes * 60.0).round() as u64).max(1)
}

/// `cargo xtask fuzz [--minutes N | --runs N] [target]`: each target (or
/// the named one) in turn for N minutes or N executions; a summary of executions per target; fails on
/// the first crash, naming the input libFuzzer saved.
pub fn run(args: &[String]) -> ExitCode {
    let opts = match parse_args(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("xtask fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    crate::install_interrupt_handler();
    let root = crate::steps::workspace_root();
    let all = match targets(&root) {
        Ok(Some(t)) => t,
        Ok(None) => {
            eprintln!("xtask fuzz: fuzz/ has no Cargo.toml");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("xtask fuzz: {e}");
            return ExitCode::FAILURE;
        }
    };
    let chosen: Vec<String> = match &opts.target {
        Some(t) if all.contains(t) => vec![t.clone()],
        Some(t) => {
            eprintln!("xtask fuzz: no target {t:?}; the targets are: {}", all.join(" "));
            return ExitCode::from(2);
        }
        None => all,
    };
    let budget = opts.budget();
    let started = Instant::now();
    let mut rows: Vec<(String, Result<Outcome, String>)> = Vec::new();
    for target in &chosen {
        if interrupted() {
            break;
        }
        eprintln!("\n==== xtask fuzz: {target} {budget}");
        let result = run_target(&root, target, budget, &mut |line| eprintln!("{line}"));
        let failed = result.is_err();
        rows.push((target.clone(), result));
        if failed {
            break;
        }
    }
    eprintln!("\n==== xtask fuzz summary ({:.0?})", Duration::from_secs(started.elapsed().as_secs()));
    let mut ok = rows.len() == chosen.len();
    for (target, result) in &rows {
        match result {
            Ok(o) => eprintln!(
                "  {target:<16} {:>13} executions in {:>5} s ({:>7} / s), no crash",
                o.runs,
                o.seconds,
                o.runs / o.seconds.max(1)
            ),
            Err(e) => {
                ok = false;
                eprintln!("  {target:<16} FAILED: {e}");
            }
        }
    }
    for target in chosen.iter().skip(rows.len()) {
        eprintln!("  {target:<16} not run");
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// Regression: the working directory was dropped, so a niced build ran
    /// wherever xtask was started.
    #[test]
    fn nice_keeps_the_whole_command() {
        use std::ffi::OsStr;
        let mut cmd = Command::new("cargo");
        cmd.arg("build").current_dir("/tmp/somewhere").env("A", "1").env_remove("B");
        let niced = nice(cmd);
        assert_eq!(niced.get_program(), "nice");
        assert_eq!(niced.get_args().collect::<Vec<_>>(), ["-n", "19", "cargo", "build"]);
        assert_eq!(niced.get_current_dir(), Some(Path::new("/tmp/somewhere")));
        let envs: Vec<_> = niced.get_envs().collect();
        assert!(envs.contains(&(OsStr::new("A"), Some(OsStr::new("1")))));
        assert!(envs.contains(&(OsStr::new("B"), None)));
    }

    #[test]
    fn libfuzzer_done_line() {
        assert_eq!(parse_done("Done 1234567 runs in 31 second(s)"), Some(Outcome { runs: 1_234_567, seconds: 31 }));
        assert_eq!(parse_done("#1024\tpulse  cov: 12 ft: 13"), None);
        assert_eq!(parse_done("Done soon"), None);
        assert_eq!(parse_done("Done 12 runs in soon"), None);
    }

    #[test]
    fn fuzz_list_lines() {
        assert_eq!(parse_fuzz_list("frame_decoder\nrequest\n\nvalue\n"), args("frame_decoder request value"));
    }

    #[test]
    fn fuzz_arguments() {
        assert_eq!(parse_args(&[]), Ok(Options { minutes: 10.0, runs: None, target: None }));
        assert_eq!(parse_args(&[]).map(|o| o.budget()), Ok(Budget::Seconds(600)));
        assert_eq!(
            parse_args(&args("--minutes 0.5 value")),
            Ok(Options { minutes: 0.5, runs: None, target: Some("value".into()) })
        );
        assert_eq!(
            parse_args(&args("dml --minutes 2")),
            Ok(Options { minutes: 2.0, runs: None, target: Some("dml".into()) })
        );
        let runs = parse_args(&args("--runs 10_000_000 dml"));
        assert_eq!(runs.as_ref().map(|o| o.budget()), Ok(Budget::Runs(10_000_000)));
        assert_eq!(Budget::Runs(5).flag(), "-runs=5");
        assert_eq!(Budget::Seconds(30).flag(), "-max_total_time=30");
        assert!(parse_args(&args("--runs 0")).is_err());
        assert!(parse_args(&args("--runs many")).is_err());
        assert!(parse_args(&args("--runs 5 --minutes 1")).is_err());
        assert!(parse_args(&args("--minutes")).is_err());
        assert!(parse_args(&args("--minutes 0")).is_err());
        assert!(parse_args(&args("--minutes soon")).is_err());
        assert!(parse_args(&args("a b")).is_err());
        assert!(parse_args(&args("--bogus")).is_err());
        assert_eq!(seconds(0.5), 30);
        assert_eq!(seconds(0.001), 1);
    }
}
