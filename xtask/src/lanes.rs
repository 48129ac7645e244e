//! Test binaries side by side. `cargo test` runs one test binary after
//! another, and most of the suite's time is spent waiting: for a Cassandra
//! node or a Kafka broker to start, a partition to heal, a lease to expire.
//! Here cargo builds the binaries once (`cargo test --no-run`), and they run
//! in a few lanes at once, the longest first. The driver's binary, whose
//! tests with servers of their own are serialized inside one process, runs
//! as several parts, one process each. A binary's output is kept and printed
//! whole when it ends, so the log reads as cargo's does.
//!
//! A binary reports instead of hanging or leaking (issue 54): each runs in
//! its own process group, and one still running past its limit ([`limit`]:
//! a generous multiple of its known seconds, at most 15 minutes) has its
//! group killed, its log printed and its run failed while the other lanes
//! go on. Every process a binary starts carries a mark in its environment
//! (`SHARDWISE_XTASK_JOB`, inherited by its children and theirs, kept when
//! one is reparented to init): once the binary ended, any process still
//! holding its mark is a leftover, named with its command line, killed, and
//! the binary's run failed.

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::interrupted;
use crate::steps::Failures;

/// Lanes when neither `--lanes` nor `SHARDWISE_TEST_LANES` says: one per
/// four cores, at least one. The tests are CPU-bound on the project's 2-core
/// machine (it was 59–79% busy with one lane, mostly the Cassandra and Kafka
/// JVMs); three lanes there made every heavy binary about three times
/// slower, and timing-sensitive tests (a lease renewal, a node crash under
/// load) failed.
pub fn default_lanes() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 4).max(1))
}

/// One test binary cargo built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    /// `crate-dir/kind/target`, e.g. `driver/test/driver`.
    pub name: String,
    pub path: PathBuf,
    /// Where cargo runs it (its package's directory).
    pub manifest_dir: PathBuf,
}

/// One run of a binary: all its tests, or the part named by `args`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub binary: Binary,
    pub label: String,
    pub args: Vec<String>,
    /// Expected seconds, to start the longest jobs first.
    pub weight: u32,
    /// How long it may run before it is killed and failed ([`limit`]).
    pub timeout: Duration,
}

/// The longest a binary that took `weight` seconds in one lane may run: four
/// times that (a loaded machine, another lane beside it), at least five
/// minutes (a small binary's cluster start on a slow machine), at most 15
/// (a hang costs the run a quarter hour, not CI's 90 minutes).
/// `SHARDWISE_TEST_TIMEOUT` (seconds) replaces it for every binary.
pub fn limit(weight: u32, env: Option<&str>) -> Duration {
    if let Some(seconds) = env.and_then(|v| v.trim().parse::<u64>().ok()).filter(|s| *s > 0) {
        return Duration::from_secs(seconds);
    }
    Duration::from_secs((u64::from(weight) * 4).clamp(5 * 60, 15 * 60))
}

/// The environment variable that marks every process a job starts.
pub const MARK: &str = "SHARDWISE_XTASK_JOB";

/// How a job ended.
#[derive(Debug)]
pub struct Outcome {
    pub label: String,
    pub took: Duration,
    pub passed: bool,
    /// The failed tests and their panics (empty when it passed).
    pub failures: Vec<String>,
}

/// Seconds each slow binary took in one lane on the 2-core machine (the
/// rest took under 10 s): the order the lanes take them in.
const KNOWN_SECONDS: &[(&str, u32)] = &[
    ("driver/test/driver", 290),
    ("cdc-kafka/test/sink", 97),
    ("cdc-kafka/test/group", 180),
    ("cdc/test/crash", 85),
    ("cdc-tools/test/printer", 78),
    ("cdc-kafka/test/nemesis", 480),
    ("emu/test/front", 67),
    ("cdc/test/cdc", 66),
    ("cdc-kafka/test/kills", 65),
    ("testkit/test/harness", 54),
    ("benches/test/cutover", 36),
    ("driver/test/allocations", 11),
    ("cdc-tools/test/replicator", 9),
    ("cdc-kafka/example/embedded_sink", 8),
];

/// A part: the test-name prefixes it runs, and its expected seconds.
type Part = (&'static [&'static str], u32);

/// Binaries run as parts: each part is the tests whose names start with one
/// of its prefixes (with its expected seconds); the tests no part names run
/// as one more part. The driver's tests that start clusters of their own
/// take turns inside one process (`common::own_servers`); as parts, they
/// start them side by side.
const PARTS: &[(&str, &[Part])] = &[(
    "driver/test/driver",
    &[
        (&["cluster::"], 130),
        (&["load_balancing::lwt"], 46),
        (&["load_balancing::rack"], 45),
        (&["schema::", "auth::"], 9),
        (&["tls::"], 9),
    ],
)];

/// The test binaries in the JSON messages of `cargo test --no-run
/// --message-format=json...`, in cargo's order.
pub fn parse_artifacts(messages: &str) -> Vec<Binary> {
    let mut binaries = Vec::new();
    for line in messages.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if v["reason"] != "compiler-artifact" || v["profile"]["test"] != true {
            continue;
        }
        let (Some(exe), Some(manifest)) = (v["executable"].as_str(), v["manifest_path"].as_str()) else { continue };
        let manifest_dir = Path::new(manifest).parent().unwrap_or(Path::new(".")).to_path_buf();
        let dir = manifest_dir.file_name().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default();
        let kind = v["target"]["kind"][0].as_str().unwrap_or("test");
        let target = v["target"]["name"].as_str().unwrap_or("?");
        binaries.push(Binary { name: format!("{dir}/{kind}/{target}"), path: PathBuf::from(exe), manifest_dir });
    }
    binaries
}

/// The executable of the binary target `name` in the same messages (cargo
/// builds a package's binaries for its integration tests).
pub fn find_bin(messages: &str, name: &str) -> Option<PathBuf> {
    messages.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).find_map(|v| {
        let is_it = v["reason"] == "compiler-artifact"
            && v["profile"]["test"] == false
            && v["target"]["kind"][0] == "bin"
            && v["target"]["name"] == name;
        is_it.then(|| v["executable"].as_str().map(PathBuf::from)).flatten()
    })
}

/// The jobs for `binaries`, longest first. `list` gives a binary's test
/// names (for binaries run as parts); when it fails, the binary runs whole.
pub fn plan(binaries: &[Binary], list: impl Fn(&Binary) -> Result<Vec<String>, String>) -> Vec<Job> {
    let env_timeout = std::env::var("SHARDWISE_TEST_TIMEOUT").ok();
    let mut jobs = Vec::new();
    for b in binaries {
        let weight = KNOWN_SECONDS.iter().find(|(n, _)| *n == b.name).map_or(1, |(_, s)| *s);
        let timeout = limit(weight, env_timeout.as_deref());
        let whole = Job { binary: b.clone(), label: b.name.clone(), args: Vec::new(), weight, timeout };
        let Some((_, parts)) = PARTS.iter().find(|(n, _)| *n == b.name) else {
            jobs.push(whole);
            continue;
        };
        let names = match list(b) {
            Ok(names) => names,
            Err(e) => {
                eprintln!("xtask test: {} runs whole: {e}", b.name);
                jobs.push(whole);
                continue;
            }
        };
        jobs.extend(split(b, &names, parts, weight).into_iter().map(|mut j| {
            j.timeout = limit(j.weight, env_timeout.as_deref());
            j
        }));
    }
    // Stable: equal weights keep cargo's order.
    jobs.sort_by_key(|j| std::cmp::Reverse(j.weight));
    jobs
}

/// `names` cut into `parts`, plus a last part of the rest; each runs its
/// tests by exact name, and a part that names no test is left out.
fn split(b: &Binary, names: &[String], parts: &[Part], weight: u32) -> Vec<Job> {
    let mut taken = vec![false; names.len()];
    let mut groups = Vec::new();
    for (prefixes, seconds) in parts {
        let mut group = Vec::new();
        for (i, n) in names.iter().enumerate() {
            if !taken[i] && prefixes.iter().any(|p| n.starts_with(p)) {
                taken[i] = true;
                group.push(n.clone());
            }
        }
        groups.push((group, *seconds));
    }
    let named: u32 = parts.iter().map(|(_, s)| s).sum();
    let rest = names.iter().zip(&taken).filter(|(_, t)| !**t).map(|(n, _)| n.clone()).collect();
    groups.push((rest, weight.saturating_sub(named).max(1)));
    let count = groups.iter().filter(|(g, _)| !g.is_empty()).count();
    groups
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .enumerate()
        .map(|(i, (group, seconds))| {
            let mut args = vec!["--exact".to_string()];
            args.extend(group);
            let label = format!("{} [{}/{count}]", b.name, i + 1);
            Job { binary: b.clone(), label, args, weight: seconds, timeout: limit(seconds, None) }
        })
        .collect()
}

/// A binary's test names (`--list --format terse`: `name: test` lines).
pub fn list_tests(b: &Binary) -> Result<Vec<String>, String> {
    let out = Command::new(&b.path)
        .args(["--list", "--format", "terse"])
        .current_dir(&b.manifest_dir)
        .env("CARGO_MANIFEST_DIR", &b.manifest_dir)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("listing its tests: {e}"))?;
    if !out.status.success() {
        return Err(format!("listing its tests exited with {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().filter_map(|l| l.strip_suffix(": test")).map(str::to_string).collect())
}

/// Runs `jobs` in `lanes` threads, each job's output into `log_dir` and then
/// printed whole; `env` is set for every job. Stops taking jobs once
/// interrupted.
pub fn run(jobs: Vec<Job>, lanes: usize, env: &[(String, String)], log_dir: &Path) -> Vec<Outcome> {
    let queue = Mutex::new(VecDeque::from(jobs));
    let outcomes = Mutex::new(Vec::new());
    let print = Mutex::new(());
    std::thread::scope(|s| {
        for _ in 0..lanes.max(1) {
            s.spawn(|| loop {
                if interrupted() {
                    break;
                }
                let Some(job) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front() else { break };
                eprintln!("xtask test: started {}", job.label);
                let (outcome, log) = run_job(&job, env, log_dir);
                {
                    let _turn = print.lock().unwrap_or_else(|e| e.into_inner());
                    let verdict = if outcome.passed { "ok" } else { "FAILED" };
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "\n---- {} ({verdict}, {:.1} s)", job.label, outcome.took.as_secs_f64());
                    let _ = out.write_all(log.as_bytes());
                    let _ = out.flush();
                }
                outcomes.lock().unwrap_or_else(|e| e.into_inner()).push(outcome);
            });
        }
    });
    outcomes.into_inner().unwrap_or_else(|e| e.into_inner())
}

fn run_job(job: &Job, env: &[(String, String)], log_dir: &Path) -> (Outcome, String) {
    use std::os::unix::process::CommandExt;
    let started = Instant::now();
    let file_name: String =
        job.label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let log_path = log_dir.join(format!("{file_name}.log"));
    // The mark: unique to this run of this job (the pid of xtask, the log's name).
    let mark = format!("{}/{file_name}/", std::process::id());
    let mut cmd = Command::new(&job.binary.path);
    cmd.args(&job.args)
        .current_dir(&job.binary.manifest_dir)
        .env("CARGO_MANIFEST_DIR", &job.binary.manifest_dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(MARK, &mark)
        .process_group(0);
    let status = crate::steps::output_to(&mut cmd, &log_path)
        .and_then(|cmd| cmd.spawn().map_err(|e| format!("running {}: {e}", job.binary.path.display())))
        .and_then(|mut child| wait_within(&mut child, job.timeout));
    let leftovers = reap_marked(&mark, LEFTOVER_GRACE);
    let mut log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut failures = Failures::default();
    log.lines().for_each(|l| failures.see(l));
    let mut passed = match status {
        Ok(Ended::Exited(s)) if s.success() => true,
        Ok(Ended::Exited(s)) => {
            failures.lines.insert(0, format!("{} exited with {s}", job.label));
            false
        }
        Ok(Ended::TimedOut) => {
            let note = format!(
                "{} ran past its limit of {} s (it took about {} s in one lane; SHARDWISE_TEST_TIMEOUT): killed",
                job.label,
                job.timeout.as_secs(),
                job.weight
            );
            log.push_str(&format!("\nxtask test: {note}\n"));
            failures.lines.insert(0, note);
            false
        }
        Ok(Ended::Interrupted) => {
            failures.lines.insert(0, format!("{}: interrupted, killed", job.label));
            false
        }
        Err(e) => {
            log.push_str(&format!("\nxtask test: {e}\n"));
            failures.lines.insert(0, format!("{}: {e}", job.label));
            false
        }
    };
    if !leftovers.is_empty() {
        let note = format!("{}: {} processes it started were left running (killed):", job.label, leftovers.len());
        log.push_str(&format!("\nxtask test: {note}\n"));
        failures.lines.push(note);
        for (pid, command) in &leftovers {
            log.push_str(&format!("  pid {pid}: {command}\n"));
            failures.lines.push(format!("  pid {pid}: {command}"));
        }
        passed = false;
    }
    let outcome = Outcome { label: job.label.clone(), took: started.elapsed(), passed, failures: failures.lines };
    (outcome, log)
}

/// How long processes a binary started may take to end after it (a
/// launcher stops its server once its lifeline closes, and a JVM on a
/// loaded 2-core machine may take half a minute to shut down).
const LEFTOVER_GRACE: Duration = if cfg!(test) { Duration::from_secs(1) } else { Duration::from_secs(60) };

/// How a job's process ended.
enum Ended {
    Exited(std::process::ExitStatus),
    /// Past its limit: its process group was killed.
    TimedOut,
    /// The run was interrupted: its process group was killed.
    Interrupted,
}

/// Waits for `child` (the leader of its own process group) up to `limit`;
/// past it, or once the run is interrupted, kills the group and reaps it.
fn wait_within(child: &mut std::process::Child, limit: Duration) -> Result<Ended, String> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(Ended::Exited(status)),
            Ok(None) => {}
            Err(e) => return Err(format!("could not wait: {e}")),
        }
        let ended = if interrupted() {
            Ended::Interrupted
        } else if Instant::now() >= deadline {
            Ended::TimedOut
        } else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        kill_group(child.id());
        let _ = child.kill();
        let _ = child.wait();
        return Ok(ended);
    }
}

/// SIGKILL to every process of group `pgid`.
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The processes (pid, command line) whose environment holds a `MARK` that
/// starts with `mark`, from `/proc` (none where there is no `/proc`).
pub fn marked(mark: &str) -> Vec<(u32, String)> {
    let needle = format!("{MARK}={mark}");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if pid == std::process::id() {
            continue;
        }
        let Ok(environ) = std::fs::read(e.path().join("environ")) else { continue };
        if !environ.split(|b| *b == 0).any(|v| v.starts_with(needle.as_bytes())) {
            continue;
        }
        // A zombie's environment reads empty; one that still reads is alive.
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let words: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        found.push((pid, words.join(" ")));
    }
    found.sort();
    found
}

/// The processes still marked `mark` after `grace` (a launcher that stops
/// its server once its lifeline closed may take a few seconds), each then
/// killed.
pub fn reap_marked(mark: &str, grace: Duration) -> Vec<(u32, String)> {
    let deadline = Instant::now() + grace;
    loop {
        let left = marked(mark);
        if left.is_empty() {
            return left;
        }
        if Instant::now() >= deadline {
            for (pid, _) in &left {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).stderr(Stdio::null()).status();
            }
            return left;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary(name: &str) -> Binary {
        Binary { name: name.into(), path: PathBuf::from("/bin/true"), manifest_dir: PathBuf::from("/tmp") }
    }

    #[test]
    fn test_artifacts_are_found_in_cargo_messages() {
        let messages = concat!(
            r#"{"reason":"compiler-artifact","manifest_path":"/w/driver/Cargo.toml","target":{"kind":["test"],"name":"driver"},"profile":{"test":true},"executable":"/w/target/debug/deps/driver-1"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","manifest_path":"/w/driver/Cargo.toml","target":{"kind":["lib"],"name":"shardwise"},"profile":{"test":false},"executable":null}"#,
            "\n",
            r#"{"reason":"compiler-artifact","manifest_path":"/w/cdc-tools/Cargo.toml","target":{"kind":["bin"],"name":"printer"},"profile":{"test":false},"executable":"/w/target/debug/printer"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\nnot json\n",
            r#"{"reason":"compiler-artifact","manifest_path":"/w/cdc/Cargo.toml","target":{"kind":["lib"],"name":"shardwise_cdc"},"profile":{"test":true},"executable":"/w/target/debug/deps/shardwise_cdc-2"}"#,
        );
        assert_eq!(find_bin(messages, "printer"), Some(PathBuf::from("/w/target/debug/printer")));
        assert_eq!(find_bin(messages, "driver"), None);
        let found = parse_artifacts(messages);
        assert_eq!(
            found,
            [
                Binary {
                    name: "driver/test/driver".into(),
                    path: "/w/target/debug/deps/driver-1".into(),
                    manifest_dir: "/w/driver".into()
                },
                Binary {
                    name: "cdc/lib/shardwise_cdc".into(),
                    path: "/w/target/debug/deps/shardwise_cdc-2".into(),
                    manifest_dir: "/w/cdc".into()
                },
            ]
        );
    }

    #[test]
    fn the_driver_runs_as_parts_that_cover_every_test_once_and_the_longest_start_first() {
        let names: Vec<String> = [
            "auth::password_authentication",
            "cluster::three_node_cluster",
            "load_balancing::lwt_requests_go_to_the_primary_replica",
            "load_balancing::rack_then_datacenter_then_remote",
            "load_balancing::round_robin",
            "schema::schema_metadata_follows_every_change",
            "send::a_write",
            "tls::mutual_tls",
        ]
        .map(String::from)
        .to_vec();
        let listed = names.clone();
        let jobs =
            plan(&[binary("emu/lib/shardwise_emu"), binary("driver/test/driver"), binary("cdc/test/crash")], |_| {
                Ok(listed.clone())
            });
        let labels: Vec<&str> = jobs.iter().map(|j| j.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "driver/test/driver [1/6]",
                "cdc/test/crash",
                "driver/test/driver [6/6]",
                "driver/test/driver [2/6]",
                "driver/test/driver [3/6]",
                "driver/test/driver [4/6]",
                "driver/test/driver [5/6]",
                "emu/lib/shardwise_emu",
            ]
        );
        let args = |label: &str| jobs.iter().find(|j| j.label == label).map(|j| j.args[1..].to_vec());
        let mut covered: Vec<String> =
            jobs.iter().filter(|j| j.binary.name == "driver/test/driver").flat_map(|j| j.args[1..].to_vec()).collect();
        assert!(jobs.iter().filter(|j| j.binary.name == "driver/test/driver").all(|j| j.args[0] == "--exact"));
        covered.sort();
        assert_eq!(covered, names);
        assert_eq!(
            args("driver/test/driver [4/6]").expect("part 4"),
            ["auth::password_authentication", "schema::schema_metadata_follows_every_change"]
        );
        assert_eq!(args("driver/test/driver [6/6]").expect("part 6"), ["load_balancing::round_robin", "send::a_write"]);
    }

    #[test]
    fn a_binary_whose_tests_cannot_be_listed_runs_whole() {
        let jobs = plan(&[binary("driver/test/driver")], |_| Err("no".into()));
        assert_eq!(jobs.len(), 1);
        assert!(jobs[0].args.is_empty());
    }

    #[test]
    fn jobs_run_in_lanes_and_failures_are_told() {
        let dir = std::env::temp_dir().join(format!("xtask-lanes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let job = |label: &str, path: &str| Job {
            binary: Binary { name: label.into(), path: path.into(), manifest_dir: dir.clone() },
            label: label.into(),
            args: Vec::new(),
            weight: 1,
            timeout: Duration::from_secs(60),
        };
        let jobs = vec![job("yes", "/bin/true"), job("no", "/bin/false"), job("missing", "/no/such/binary")];
        let mut outcomes = run(jobs, 2, &[], &dir);
        outcomes.sort_by(|a, b| a.label.cmp(&b.label));
        let verdicts: Vec<(&str, bool)> = outcomes.iter().map(|o| (o.label.as_str(), o.passed)).collect();
        assert_eq!(verdicts, [("missing", false), ("no", false), ("yes", true)]);
        assert!(outcomes[0].failures[0].starts_with("missing: running /no/such/binary"));
        assert!(outcomes[1].failures[0].starts_with("no exited with"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn limits_are_a_multiple_of_the_known_seconds_within_five_and_fifteen_minutes() {
        assert_eq!(limit(1, None), Duration::from_secs(300));
        assert_eq!(limit(130, None), Duration::from_secs(520));
        assert_eq!(limit(290, None), Duration::from_secs(900));
        assert_eq!(limit(290, Some("42")), Duration::from_secs(42));
        assert_eq!(limit(290, Some("no")), Duration::from_secs(900));
    }

    /// A script job: `sh -c SCRIPT` written as an executable file.
    fn script_job(dir: &Path, label: &str, script: &str, timeout: Duration) -> Job {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(label);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Job {
            binary: Binary { name: label.into(), path, manifest_dir: dir.to_path_buf() },
            label: label.into(),
            args: Vec::new(),
            weight: 1,
            timeout,
        }
    }

    #[test]
    fn a_binary_past_its_limit_is_killed_and_failed_and_the_others_go_on() {
        let dir = std::env::temp_dir().join(format!("xtask-lanes-limit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let jobs = vec![
            script_job(&dir, "hangs", "echo before the hang; sleep 60", Duration::from_millis(700)),
            script_job(&dir, "quick", "echo quick", Duration::from_secs(30)),
        ];
        let t = Instant::now();
        let mut outcomes = run(jobs, 1, &[], &dir);
        assert!(t.elapsed() < Duration::from_secs(20), "the hang was waited for: {:?}", t.elapsed());
        outcomes.sort_by(|a, b| a.label.cmp(&b.label));
        assert!(!outcomes[0].passed, "{:?}", outcomes[0]);
        assert!(outcomes[0].failures[0].contains("ran past its limit of 0 s"), "{:?}", outcomes[0].failures);
        assert!(outcomes[1].passed, "{:?}", outcomes[1]);
        let log = std::fs::read_to_string(dir.join("hangs.log")).unwrap();
        assert!(log.contains("before the hang"), "{log}");
        // The group was killed: its `sleep` too (it carried the mark).
        assert!(marked(&format!("{}/hangs/", std::process::id())).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_process_left_behind_by_a_binary_is_named_killed_and_fails_it() {
        let dir = std::env::temp_dir().join(format!("xtask-lanes-leak-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A daemon in a session of its own (as a wrapper's fork reparented
        // to init): the group kill would not reach it, the mark does.
        let leaky = "setsid sleep 321 </dev/null >/dev/null 2>&1 &\nsleep 0.2\necho done";
        let jobs = vec![script_job(&dir, "leaky", leaky, Duration::from_secs(30))];
        let outcomes = run(jobs, 1, &[], &dir);
        assert!(!outcomes[0].passed, "{:?}", outcomes[0]);
        let failures = outcomes[0].failures.join("\n");
        assert!(failures.contains("1 processes it started were left running"), "{failures}");
        assert!(failures.contains("sleep 321"), "{failures}");
        let gone = Instant::now() + Duration::from_secs(5);
        while !marked(&format!("{}/leaky/", std::process::id())).is_empty() {
            assert!(Instant::now() < gone, "the leftover was not killed");
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
