//! The `printer` application as a separate process, through the Scylla
//! emulation front on a real Cassandra: following a table live with
//! `--checkpoint-keyspace`, it is killed with SIGKILL after it printed some
//! changes and saved a checkpoint, then restarted to the end; the two
//! outputs together hold every change, in write order per partition key,
//! with repeats only where the second run resumed.
//!
//! Here, not in `shardwise-cdc`'s tests, because only the tests of this
//! package can locate its binaries (`CARGO_BIN_EXE_printer`). The setup and
//! the workload are those of `shardwise-cdc`'s tests, included by path.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::collections::HashMap;
use std::sync::Arc;

use shardwise_cdc::checkpoint::TableCheckpointStore;
use shardwise_cdc::{CheckpointStore, Operation, StreamId};

use common::workload::{check_resumed, create_table, expected_of, groups_of, plan, safety_arg, write, Ops};
use common::{exit_of, held, signal};
use shardwise_cdc_testkit as common;

/// The `printer` of this package, as a child process following `ks.t`
/// from an absolute time (to an absolute time, or forever), with a table
/// checkpoint in `ks`; its JSON lines go to `out`.
fn spawn_printer(
    addr: std::net::SocketAddr,
    ks: &str,
    start_ms: u64,
    end_ms: Option<u64>,
    out: &std::path::Path,
    extra: &[&str],
) -> Child {
    let file = std::fs::File::create(out).expect("output file");
    let mut command = Command::new(env!("CARGO_BIN_EXE_printer"));
    command.args(extra);
    if let Some(end) = end_ms {
        command.args(["--end-unix-ms", &end.to_string()]);
    }
    command
        .args(["--node", &addr.to_string(), "--keyspace", ks, "--table", "t", "--json"])
        .args(["--start-unix-ms", &start_ms.to_string()])
        .args(live_reading("2"))
        .args(["--checkpoint-keyspace", ks, "--checkpoint-interval", "0.1"])
        .stdout(Stdio::from(file))
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn printer")
}

/// The value of `"name":…` in a JSON line of the printer: a string's contents, or a number.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("\"{name}\":");
    let rest = &line[line.find(&key)? + key.len()..];
    match rest.strip_prefix('"') {
        Some(string) => string.split('"').next(),
        None => rest.split([',', '}']).next(),
    }
}

/// The complete lines of a printer's output, as (pk, operation, v) per key.
fn read_output(path: &std::path::Path) -> (Ops, usize) {
    let text = std::fs::read_to_string(path).expect("read output");
    // A line cut by the kill has no newline: it was not delivered.
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let mut ops = Ops::new();
    let mut n = 0;
    for line in complete.lines() {
        let op = match field(line, "operation") {
            Some("insert") => Operation::Insert,
            Some("update") => Operation::Update,
            Some("row-delete") => Operation::RowDelete,
            other => panic!("unexpected operation {other:?} in {line}"),
        };
        let pk: i32 = field(line, "pk").and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no pk in {line}"));
        let v: Option<i64> = field(line, "v").map(|s| s.parse().unwrap_or_else(|_| panic!("bad v in {line}")));
        ops.entry(pk).or_default().push((op, v));
        n += 1;
    }
    (ops, n)
}

/// The complete lines of a printer's output as (pk, `time_us`, v): a
/// change's identity, to tell which changes two runs both printed.
fn times_in(path: &std::path::Path) -> std::collections::HashSet<(i32, i64, Option<i64>)> {
    let text = std::fs::read_to_string(path).expect("read output");
    let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
    let number = |line: &str, name: &str| -> i64 {
        field(line, name).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    let v = |line: &str| field(line, "v").map(|_| number(line, "v"));
    complete.lines().map(|line| (number(line, "pk") as i32, number(line, "time_us"), v(line))).collect()
}

/// How much later than one checkpoint interval and one window after a
/// group's saved progress its repeats may reach: a save's and a window's
/// latency on a loaded machine.
const SLACK_MS: i64 = 300;

/// Waits until every one of the `groups` groups of `log` has saved progress
/// within 3 s of now: each holder reads at the head of the log (its windows
/// end the safety interval, a window and a checkpoint interval back), not a
/// backlog, where one checkpoint interval would hold many windows.
async fn at_the_head(store: &TableCheckpointStore, log: &str, groups: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("epoch").as_millis() as i64;
        let saved = store.load(log).await.ok().flatten();
        let behind: Vec<i64> = saved.map_or_else(Vec::new, |c| c.groups.iter().map(|g| now - g.progress.0).collect());
        if behind.len() >= groups && behind.iter().all(|&ms| ms < 3000) {
            return;
        }
        assert!(Instant::now() < deadline, "every group read at the head {what}: {behind:?} ms behind");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The slowest lightweight transaction through the test's session, one
/// every 100 ms: a checkpoint save is one, and a holder killed while its
/// save is under way repeats from the save before, so repeats reach past
/// one interval by as much as a save took.
struct LwtProbe {
    stop: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<i64>,
}

impl LwtProbe {
    async fn start(session: &shardwise::Session, ks: &str) -> Self {
        common::run(session, &format!("CREATE TABLE {ks}.lwt_probe (k int PRIMARY KEY)")).await;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let insert = shardwise::Statement::new(format!("INSERT INTO {ks}.lwt_probe (k) VALUES (?) IF NOT EXISTS"));
        let (session, flag) = (session.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let mut slowest = 0;
            for k in 0i32.. {
                if flag.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let started = Instant::now();
                // A timed-out LWT took at least its timeout: counted as such.
                let _ = session.execute(&insert, (k,)).await;
                slowest = slowest.max(started.elapsed().as_millis() as i64);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            slowest
        });
        LwtProbe { stop, task }
    }

    /// Stops the probe: the slowest LWT it saw, in ms.
    async fn stop(self) -> i64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.expect("the LWT probe")
    }
}

/// The reading flags of the printers that follow a live workload: 200 ms
/// windows, the safety interval of live readers, `workers` workers, ONE.
fn live_reading(workers: &str) -> Vec<String> {
    let safety = safety_arg();
    ["--window", "0.2", "--safety", &safety, "--sleep", "0.05", "--workers", workers, "--consistency", "ONE"]
        .map(String::from)
        .to_vec()
}

fn lines_in(path: &std::path::Path) -> usize {
    std::fs::read(path).map(|b| b.iter().filter(|&&c| c == b'\n').count()).unwrap_or(0)
}

/// Claim `cdc-repeats-bounded` for one printer: killed (SIGKILL) while it
/// follows a live workload and restarted, it prints every change, in write
/// order per key, and repeats exactly what it read after each group's own
/// last checkpoint: a change the killed run printed is printed again if and
/// only if it is at or after the progress its group saved in the checkpoint
/// table (each key's group found by the shipped reader with the printer's
/// grouping, 64 streams to a query; every group holding changes has a
/// saved progress); and each group's repeats lie less than one checkpoint
/// interval (0.1 s) and one window (0.2 s), and [`SLACK_MS`], after its
/// progress. When written, in six tries: 2 to 15 repeats over 1 to 4 of 4
/// groups, at most 98 ms after their group's progress (the paced run below,
/// five tries: at most 190 ms, its groups' progress up to 337 ms apart).
///
/// Fails if a group resumed before or after its own saved progress, or
/// repeated more than the bound. Tried when it was written: with each key
/// mapped to the group of the next key (pk + 1), it failed in one try of
/// two ("pk 24, change at … µs: printed again is true, its group …'s saved
/// progress … µs", 1.8 ms before it), the paced run below too ("printed again is
/// false", 85 ms past it); it passes where the groups' saved progress is
/// the same (a caught-up reader's groups are often at one horizon).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_printer_process_resumes_from_the_table_checkpoint() {
    killed_and_resumed("cdc_kill", &[]).await;
}

/// The same with `--pace 40`: the printer is an async consumer that awaits
/// a timer after each change (each stream group prints at most 40 changes
/// a second, slower than the writes come), so it holds the reader back;
/// what a checkpoint saved was printed, and nothing is lost or reordered
/// across the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_slow_async_printer_loses_nothing() {
    killed_and_resumed("cdc_kill_paced", &["--pace", "40"]).await;
}

async fn killed_and_resumed(name: &str, extra: &[&str]) {
    let (front, session, ks) = common::front_and_keyspace(name).await;
    create_table(&session, &ks).await;
    let dir = std::env::temp_dir().join(format!("shardwise-cdc-kill-{}-{ks}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (out1, out2) = (dir.join("run1.jsonl"), dir.join("run2.jsonl"));
    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as u64;

    let plan = plan(30, 600, 7);
    let expected = expected_of(&plan);
    let total = plan.len();
    let start = SystemTime::now() - Duration::from_millis(500);

    // The printer follows the table live (no end) while the changes are
    // written, 20 every 100 ms.
    let mut child = spawn_printer(front.addr(), &ks, ms(start), None, &out1, extra);
    let writer = {
        let (session, ks, plan) = (session.clone(), ks.clone(), plan.clone());
        tokio::spawn(async move { write(&session, &ks, &plan, 20, Duration::from_millis(100)).await })
    };

    // Kill it (SIGKILL) once it printed a quarter of the changes and saved
    // a checkpoint with progress past the start.
    let store = TableCheckpointStore::new(session.clone(), &ks, "cdc_checkpoints");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(child.try_wait().expect("try_wait").is_none(), "the printer exited before it was killed");
        assert!(Instant::now() < deadline, "the printer prints and checkpoints ({} lines)", lines_in(&out1));
        if lines_in(&out1) >= total / 4 {
            // The table may not exist yet: the printer creates it.
            if let Ok(Some(cp)) = store.load(&format!("{ks}.t_scylla_cdc_log")).await {
                if cp.groups.iter().any(|g| g.progress.0 as u64 > ms(start) + 1000) {
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    assert!(!status.success(), "killed: {status:?}");
    let killed_at = lines_in(&out1);
    let log = format!("{ks}.t_scylla_cdc_log");
    // What the killed printer saved last, each group's own progress (a
    // save still in flight can only move it later).
    let at_kill = store.load(&log).await.expect("load").expect("a checkpoint");

    // Restarted once the writes are done, now with an end: it resumes from
    // the table and runs to the end. The checkpoint it resumes from, read
    // just before (a save in flight at the kill has landed by now).
    writer.await.expect("writer");
    let saved = store.load(&log).await.expect("load").expect("a checkpoint");
    assert_eq!(saved.generation, at_kill.generation, "one generation");
    for g in &at_kill.groups {
        let now = saved.progress_of(g.group);
        assert!(now >= Some(g.progress), "group {}: {:?} saved at the kill, then {now:?}", g.group, g.progress);
    }
    let end = SystemTime::now() + Duration::from_millis(500);
    let mut child = spawn_printer(front.addr(), &ks, ms(start), Some(ms(end)), &out2, extra);
    let status = exit_of(&mut child, Instant::now() + Duration::from_secs(120), "the restarted printer").await;
    assert!(status.success(), "the restarted printer finished cleanly: {status:?}");

    let (first, n1) = read_output(&out1);
    let (second, n2) = read_output(&out2);
    assert!(n1 >= killed_at.min(total / 4) && n1 < total, "killed mid-run: {n1} of {total}");
    let repeated = check_resumed(&expected, &first, &second);
    assert!(n2 < total, "the restart resumed from the checkpoint, not from the start ({n2} of {total})");
    assert_eq!(n1 + n2 - repeated, total, "every change printed");

    // Each key's group, as the printer groups the streams (the default 64
    // streams to a query); every group holding changes has a saved
    // progress (the grouping is the printer's).
    let groups = groups_of(&session, &ks, (ms(start), ms(end)), 64).await;
    let from_of = |pk: i32| -> (StreamId, i64) {
        let group = *groups.get(&pk).unwrap_or_else(|| panic!("pk {pk}: printed, so in the log: no group"));
        let progress = saved.progress_of(group).unwrap_or_else(|| panic!("pk {pk}: group {group} has no progress"));
        (group, progress.0 * 1000)
    };
    // Only what was read after its own group's last checkpoint is printed
    // again, and all of it: a change the first run printed is printed
    // again if and only if it is at or after the saved progress of its
    // group (its `time_us` against the progress, in µs).
    let (times1, times2) = (times_in(&out1), times_in(&out2));
    let mut again: HashMap<StreamId, Vec<i64>> = HashMap::new();
    for &(pk, t, v) in &times1 {
        let (group, from) = from_of(pk);
        let printed_again = times2.contains(&(pk, t, v));
        assert_eq!(
            printed_again,
            t >= from,
            "pk {pk}, change at {t} µs: printed again is {printed_again}, its group {group}'s saved progress {from} µs"
        );
        if printed_again {
            again.entry(group).or_default().push(t);
        }
    }
    assert_eq!(again.values().map(Vec::len).sum::<usize>(), repeated, "the changes printed twice");
    // What each group repeats lies within one checkpoint interval (0.1 s)
    // and the window being read (0.2 s) after its saved progress, and
    // SLACK for a loaded machine's save and read latency.
    let mut per_group = Vec::new();
    for (group, times) in &again {
        let from = saved.progress_of(*group).expect("progress").0 * 1000;
        let span_us = times.iter().max().expect("one") - from;
        per_group.push((times.len(), span_us / 1000));
        assert!(
            span_us < (100 + 200 + SLACK_MS) * 1000,
            "group {group}: repeats up to {span_us} µs after its saved progress {from} µs"
        );
    }
    per_group.sort();
    let oldest = saved.groups.iter().map(|g| g.progress.0).min().expect("groups");
    let ahead: Vec<i64> = saved.groups.iter().map(|g| g.progress.0 - oldest).collect();
    eprintln!(
        "{} groups, ms ahead of the oldest {ahead:?}; repeats per group (count, ms after its progress): {per_group:?}",
        saved.groups.len()
    );
    eprintln!("killed after {n1} changes; the restart printed {n2} ({repeated} again) of {total}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs the printer with `args` until it exits (30 s at most): its exit
/// status and what it wrote to stderr.
fn printer_fails_with(args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_printer"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn printer");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the printer did not exit on {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr).expect("stderr");
    (status, stderr)
}

/// Bad input ends the printer at once with one line that says what is
/// wrong, and a failure status: an unreachable node, a table that does not
/// exist, a table without CDC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_one_clear_line_and_a_failure_status() {
    let (front, session, ks) = common::front_and_keyspace("cdc_bad_input").await;
    common::run(&session, &format!("CREATE TABLE {ks}.plain (pk int PRIMARY KEY, v int)")).await;
    let node = front.addr().to_string();
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").to_string();
    let cases = [
        (unused.clone(), "t".to_string(), format!("could not connect to any known node (the last tried, {unused}")),
        (node.clone(), "nope".to_string(), format!("table {ks}.nope does not exist")),
        (node.clone(), "plain".to_string(), format!("table {ks}.plain has no CDC log")),
    ];
    for (node, table, expected) in cases {
        let (status, stderr) = printer_fails_with(&["--node", &node, "--keyspace", &ks, "--table", &table]);
        assert!(!status.success(), "{table}: exit status {status}");
        assert_eq!(stderr.lines().count(), 1, "{table}: one line, got {stderr:?}");
        assert!(stderr.starts_with("printer: ") && stderr.contains(&expected), "{table}: {stderr:?}");
        assert!(!stderr.contains("Os {"), "{table}: no debug form: {stderr:?}");
    }
    // A negative window is an error, not a panic.
    let (status, stderr) = printer_fails_with(&["--node", &node, "--keyspace", &ks, "--table", "t", "--window=-1"]);
    assert!(!status.success() && stderr.lines().count() == 1, "{status} {stderr:?}");
    assert!(stderr.starts_with("printer: --window -1: not a number of seconds"), "{stderr:?}");
    // Values out of range are errors, not panics.
    let checkpoints = ["--checkpoint-keyspace", ks.as_str()];
    let out_of_range: [(&[&str], &str); 6] = [
        (&["--pace", "0"], "--pace 0: expected a positive number of changes per second"),
        (&["--pace=-5"], "--pace -5: expected a positive number of changes per second"),
        (&["--start-ago", "18446744073709551615"], "--start-ago 18446744073709551615: before the Unix epoch"),
        (&["--end-unix-ms", "18446744073709551615"], "--end-unix-ms 18446744073709551615: past the times"),
        (&["--checkpoint-interval", "inf", checkpoints[0], checkpoints[1]], "--checkpoint-interval inf: not a number"),
        (&["--sleep", "1e300"], "--sleep 1e300: not a number of seconds"),
    ];
    for (flags, expected) in out_of_range {
        let mut args = vec!["--node", &node, "--keyspace", &ks, "--table", "t"];
        args.extend_from_slice(flags);
        let (status, stderr) = printer_fails_with(&args);
        assert!(!status.success() && stderr.lines().count() == 1, "{flags:?}: {status} {stderr:?}");
        assert!(stderr.starts_with(&format!("printer: {expected}")), "{flags:?}: {stderr:?}");
    }
}

/// `--debezium NAME`: each change as a Debezium envelope line, `before`
/// and `after` from the table's images: an insert, an update and a delete
/// on a table with pre- and post-images.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_envelopes_with_images() {
    let (front, session, ks) = common::front_and_keyspace("cdc_debezium").await;
    let now_ms = || SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis() as u64;
    let start = now_ms() - 1000;
    common::run(
        &session,
        &format!(
            "CREATE TABLE {ks}.t (pk int, ck int, v text, PRIMARY KEY (pk, ck)) \
             WITH cdc = {{'enabled': true, 'preimage': 'full', 'postimage': true}}"
        ),
    )
    .await;
    for statement in [
        format!("INSERT INTO {ks}.t (pk, ck, v) VALUES (1, 2, 'first')"),
        format!("UPDATE {ks}.t SET v = 'second' WHERE pk = 1 AND ck = 2"),
        format!("DELETE FROM {ks}.t WHERE pk = 1 AND ck = 2"),
    ] {
        common::run(&session, &statement).await;
    }
    let end = now_ms() + 300;
    let out = Command::new(env!("CARGO_BIN_EXE_printer"))
        .args(["--node", &front.addr().to_string(), "--keyspace", &ks, "--table", "t", "--debezium", "cluster"])
        .args(["--start-unix-ms", &start.to_string(), "--end-unix-ms", &end.to_string()])
        .args(["--window", "1", "--safety", safety_arg().as_str(), "--sleep", "0.05", "--consistency", "ONE"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("printer runs");
    assert!(out.status.success(), "{:?}", out.status);
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    let key = r#""key":{"ck":2,"pk":1}"#;
    let topic = format!(r#"{{"topic":"cluster.{ks}.t","#);
    let expected = [
        (r#""before":null,"after":{"ck":2,"pk":1,"v":{"value":"first"}},"op":"c""#),
        (r#""before":{"ck":2,"pk":1,"v":{"value":"first"}},"after":{"ck":2,"pk":1,"v":{"value":"second"}},"op":"u""#),
        (r#""before":{"ck":2,"pk":1,"v":{"value":"second"}},"after":null,"op":"d""#),
    ];
    for (line, want) in lines.iter().zip(expected) {
        assert!(line.starts_with(&topic) && line.contains(key), "{line}");
        assert!(line.contains(want), "{line} lacks {want}");
        assert!(line.contains(&format!(r#""keyspace_name":"{ks}","table_name":"t""#)), "{line}");
    }
}

/// A printer that shares `ks.t` with others through leases in `ks`, as
/// `name`, from `start_ms` to `end_ms`, in groups of 4 streams (16 groups
/// on the front's 4 shards); its JSON lines go to `out`.
fn spawn_sharing(
    addr: std::net::SocketAddr,
    ks: &str,
    name: &str,
    (start_ms, end_ms): (u64, u64),
    out: &std::path::Path,
) -> Child {
    let file = std::fs::File::create(out).expect("output file");
    Command::new(env!("CARGO_BIN_EXE_printer"))
        .args(["--node", &addr.to_string(), "--keyspace", ks, "--table", "t", "--json"])
        .args(["--start-unix-ms", &start_ms.to_string(), "--end-unix-ms", &end_ms.to_string()])
        .args(live_reading("1"))
        .args(["--checkpoint-keyspace", ks, "--checkpoint-interval", "0.1", "--streams-per-query", "4"])
        .args(["--lease-keyspace", ks, "--reader-name", name, "--lease-ttl", "3", "--lease-heartbeat", "0.5"])
        .stdout(Stdio::from(file))
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn printer")
}

/// Three printers share a table through leases; one is killed (SIGKILL)
/// mid-workload and a fourth joins; then another is paused (SIGSTOP) past
/// its leases and resumed (SIGCONT). Every change is printed (count and
/// checksum of the values), in write order per key within each printer;
/// repeats (windows a printer had not saved, read again by the taker) stay
/// under a fifth of the changes, and per group (each key's group found by
/// the shipped reader with the printers' grouping, 4 streams to a query;
/// its takeovers from its fencing epoch in the checkpoint table, which
/// every holder raises by one, graceful handovers included): a group never
/// taken over repeats nothing; a group's repeats fall in at most one run
/// per takeover (a run: repeats less than a second apart), each spanning
/// less than one checkpoint interval (0.1 s), one window (0.2 s),
/// [`SLACK_MS`] and the slowest LWT the test saw (a save is one: CI's
/// failed run had a run of 1,063 ms); and what the killed printer printed and another printed
/// again, of a group it held at the kill, is at or after the progress it
/// had saved for that group (read right after the kill). The groups are
/// spread; the kill and the pause come once every group is read at the head
/// of the log (a holder catching up reads many windows in one interval);
/// and the paused printer set no progress back: a printer started
/// over the same range once all are done prints nothing.
///
/// When written, in ten tries: 0 to 14 repeats, in runs of at most 30 ms,
/// at most one run per group, in 16 or 17 groups; the kill's own repeats
/// (counted in the last five) 6, 0, 0, 0 and 1. These per-group checks are weak here, and were not
/// seen to fail: with each key mapped to the group of the next key (pk + 1,
/// three tries), or one takeover fewer counted per group (one try), the
/// test still passed, as by the end nearly every group had been taken over
/// (epoch 2 or more), the kill mostly repeated nothing, and the groups of a
/// caught-up printer saved nearly the same progress. The killed printer's
/// test above is the one that checks repeats against each group's own
/// saved progress, and was seen to fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printers_share_a_table_through_leases_and_survive_a_kill() {
    let (front, session, ks) = common::front_and_keyspace("cdc_leases").await;
    create_table(&session, &ks).await;
    let dir = std::env::temp_dir().join(format!("shardwise-cdc-leases-{}-{ks}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as u64;

    // Inserts and updates only: every value is written once, so a change is
    // known by its value.
    let plan: Vec<_> = plan(40, 3000, 11).into_iter().filter(|c| c.2 != Operation::RowDelete).collect();
    let expected = expected_of(&plan);
    let total = plan.len();
    let start = SystemTime::now() - Duration::from_millis(500);
    let end = SystemTime::now() + Duration::from_secs(60);
    let range = (ms(start), ms(end));
    let names = ["p1", "p2", "p3", "p4"];
    let outs: Vec<_> = names.iter().map(|n| dir.join(format!("{n}.jsonl"))).collect();
    let mut children: Vec<Child> =
        (0..3).map(|i| spawn_sharing(front.addr(), &ks, names[i], range, &outs[i])).collect();
    let probe = LwtProbe::start(&session, &ks).await;
    let writer = {
        let (session, ks, plan) = (session.clone(), ks.clone(), plan.clone());
        tokio::spawn(async move { write(&session, &ks, &plan, 20, Duration::from_millis(100)).await })
    };

    // The three spread the groups, and print.
    let deadline = Instant::now() + Duration::from_secs(60);
    let groups = loop {
        let held = held(&session, &ks, "cdc_leases").await;
        let printed: usize = outs.iter().map(|o| lines_in(o)).sum();
        let groups: usize = held.values().sum();
        if held.len() == 3 && groups >= 4 && held.values().all(|&n| n <= groups.div_ceil(3) + 1) && printed > total / 4
        {
            break groups;
        }
        assert!(Instant::now() < deadline, "three printers spread the groups and print: {held:?}, {printed} lines");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The groups p2 holds, and then, killed, the progress it saved for
    // them (its takers resume there or later: at its lease's end).
    let log = format!("{ks}.t_scylla_cdc_log");
    let store = TableCheckpointStore::new(session.clone(), &ks, "cdc_checkpoints");
    at_the_head(&store, &log, groups, "before the kill").await;
    let leases = shardwise_cdc::LeaseTable::new(session.clone(), &ks, "cdc_leases");
    let owners = leases.leases(&log).await.expect("the leases");
    children[1].kill().expect("SIGKILL");
    let status = children[1].wait().expect("wait");
    assert!(!status.success(), "killed: {status:?}");
    let killed_at = lines_in(&outs[1]);
    let at_kill = store.load(&log).await.expect("load").expect("a checkpoint");
    let killed_groups: Vec<StreamId> = owners.iter().filter(|(_, o)| o.as_str() == "p2").map(|(g, _)| *g).collect();
    assert!(!killed_groups.is_empty(), "p2 held groups: {owners:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    children.push(spawn_sharing(front.addr(), &ks, names[3], range, &outs[3]));

    // The survivors and the newcomer take the killed printer's groups over
    // and spread them again.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held = held(&session, &ks, "cdc_leases").await;
        let live = ["p1", "p3", "p4"];
        let spread = held.keys().all(|k| live.contains(&k.as_str()))
            && live.iter().all(|k| held.get(*k).is_some_and(|&n| n >= 1 && n <= groups.div_ceil(3) + 1))
            && held.values().sum::<usize>() == groups;
        if spread {
            break;
        }
        assert!(Instant::now() < deadline, "the groups are spread over the live printers: {held:?} of {groups}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // p3 is paused (SIGSTOP) until its leases ran out and the others took
    // its groups over, then resumed: it comes back as a zombie whose
    // workers check their leases and whose saves are fenced.
    at_the_head(&store, &log, groups, "before the pause").await;
    signal(&children[2], "STOP");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held = held(&session, &ks, "cdc_leases").await;
        if !held.contains_key("p3") && held.values().sum::<usize>() == groups {
            break;
        }
        assert!(Instant::now() < deadline, "the others take the paused printer's groups: {held:?} of {groups}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    signal(&children[2], "CONT");
    writer.await.expect("writer");
    assert!(SystemTime::now() + Duration::from_secs(2) < end, "the writes ended well before the printers' end");

    let deadline = Instant::now() + Duration::from_secs(120);
    for (i, child) in children.iter_mut().enumerate().filter(|(i, _)| *i != 1) {
        let status = exit_of(child, deadline, names[i]).await;
        assert!(status.success(), "printer {} finished cleanly: {status:?}", names[i]);
    }

    // Every value printed; within each printer, in write order per key
    // (a printer that lost a lease under load and took the group again
    // reads its unsaved windows again, so its first prints of each value
    // are what must be in order); repeats bounded.
    let outputs: Vec<Ops> = outs.iter().map(|o| read_output(o).0).collect();
    let mut printers_of: std::collections::HashMap<i64, Vec<usize>> = std::collections::HashMap::new();
    for (i, ops) in outputs.iter().enumerate() {
        for (pk, changes) in ops {
            let mut first = std::collections::HashSet::new();
            let values: Vec<i64> =
                changes.iter().map(|(_, v)| v.expect("a value")).filter(|v| first.insert(*v)).collect();
            assert!(values.windows(2).all(|w| w[0] < w[1]), "{}: pk {pk} in write order: {values:?}", names[i]);
            for (_, v) in changes {
                printers_of.entry(v.expect("a value")).or_default().push(i);
            }
        }
    }
    let written: std::collections::BTreeSet<i64> = expected.values().flatten().map(|(_, v)| v.expect("v")).collect();
    let printed: std::collections::BTreeSet<i64> = printers_of.keys().copied().collect();
    assert_eq!(printed.len(), total, "every change printed (count)");
    assert_eq!(printed.iter().sum::<i64>(), written.iter().sum::<i64>(), "every change printed (checksum)");
    assert_eq!(printed, written);
    // Each takeover repeats what the group's old holder read after its
    // last checkpoint (0.1 s) and the window under way (0.2 s), for the
    // groups it held: at 200 changes a second, well under 400 a takeover.
    // Two takeovers are made (the kill and the pause); a lease lost under
    // load is one more.
    let repeated: usize = printers_of.values().map(|p| p.len() - 1).sum();
    assert!(repeated <= total / 5, "{repeated} of {total} printed more than once");
    // Per group: the takeovers each group had, from the checkpoint table
    // (each holder fences the group, raising its epoch by one: epoch 1,
    // never taken over; graceful handovers count too, repeating nothing),
    // read before p5 fences them all again; each key's group as the
    // printers group the streams (4 to a query). A group never taken over
    // repeats nothing; the repeats of a group, in time order, fall in at
    // most one run per takeover (a new run after a gap of over a second),
    // each spanning less than one checkpoint interval (0.1 s) and one
    // window (0.2 s), and SLACK for a loaded machine.
    let saved = store.load(&log).await.expect("load").expect("a checkpoint");
    let key_groups = groups_of(&session, &ks, range, 4).await;
    let pk_of: HashMap<i64, i32> = plan.iter().map(|&(pk, _, _, v)| (v.expect("a value"), pk)).collect();
    let mut time_of = HashMap::new();
    for out in &outs {
        time_of.extend(times_in(out).into_iter().map(|(_, t, v)| (v.expect("a value"), t)));
    }
    let mut again: HashMap<StreamId, Vec<i64>> = HashMap::new();
    let mut after_kill = 0;
    for (v, printers) in &printers_of {
        let pk = pk_of[v];
        let group = *key_groups.get(&pk).unwrap_or_else(|| panic!("pk {pk}: printed, so in the log: no group"));
        // What p2 printed and another printer again, of a group p2 held at
        // the kill: at or after the progress p2 saved for that group.
        if printers.len() > 1 && printers.contains(&1) && killed_groups.contains(&group) {
            let from = at_kill.progress_of(group).map_or(range.0 as i64, |p| p.0) * 1000;
            let t = time_of[v];
            assert!(t >= from, "pk {pk}, value {v} at {t} µs: printed again, before its group {group}'s {from} µs");
            after_kill += printers.len() - 1;
        }
        again.entry(group).or_default().extend(std::iter::repeat_n(time_of[v], printers.len() - 1));
    }
    let slowest_lwt_ms = probe.stop().await;
    let run_bound_ms = 100 + 200 + SLACK_MS + slowest_lwt_ms;
    let mut per_group = Vec::new();
    for g in &saved.groups {
        let mut times = again.remove(&g.group).unwrap_or_default();
        times.sort_unstable();
        let takeovers = g.epoch.saturating_sub(1) as usize;
        let mut runs: Vec<(i64, i64)> = Vec::new();
        for &t in &times {
            match runs.last_mut() {
                Some((_, last)) if t - *last <= 1_000_000 => *last = t,
                _ => runs.push((t, t)),
            }
        }
        let spans: Vec<i64> = runs.iter().map(|(first, last)| (last - first) / 1000).collect();
        per_group.push((g.epoch, times.len(), spans.clone()));
        assert!(
            runs.len() <= takeovers,
            "group {}: {} runs of repeats {spans:?} ms, {takeovers} takeovers",
            g.group,
            runs.len()
        );
        assert!(
            spans.iter().all(|&ms| ms < run_bound_ms),
            "group {}: runs of repeats spanning {spans:?} ms, over {run_bound_ms} ms (the slowest LWT took \
             {slowest_lwt_ms} ms)",
            g.group
        );
    }
    assert!(again.is_empty(), "repeats of groups with no saved progress: {again:?}");
    eprintln!(
        "per group (epoch, repeats, ms spanned by each run of repeats): {per_group:?}; {after_kill} repeats of \
         what p2 printed in its {} groups; the slowest LWT {slowest_lwt_ms} ms",
        killed_groups.len()
    );
    // The paused printer set no progress back: one more printer over the
    // same range resumes at its end, and prints nothing.
    let again = dir.join("p5.jsonl");
    let mut child = spawn_sharing(front.addr(), &ks, "p5", range, &again);
    let status = exit_of(&mut child, Instant::now() + Duration::from_secs(60), "p5").await;
    assert!(status.success(), "p5 finished cleanly: {status:?}");
    assert_eq!(lines_in(&again), 0, "a printer over the same range after the others prints nothing");
    let counts: Vec<usize> = outputs.iter().map(|o| o.values().map(Vec::len).sum()).collect();
    eprintln!(
        "{groups} groups; printed per printer {counts:?} (p2 killed after {killed_at}); {repeated} repeated of {total}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A printer whose clock runs 2 s ahead of the cluster's (`faketime`)
/// still prints every change of a live workload: it reads a window only
/// once the cluster's clock, not its own, is past the window's end and the
/// safety interval (1.5 s here, below the skew). By its own clock it would
/// read windows that writes still land in, and miss those writes. A clock
/// 2 s behind loses nothing either (its windows are merely late). The
/// skews are seen acting in the printers' Debezium envelopes, whose `ts_ms`
/// is the printer's clock: when it printed its last change, 2 s ahead of
/// the test's clock (and 2 s behind), less the time the test took to see it.
/// The negative control: a third printer 2 s ahead with `--local-clock`
/// (its own clock alone) loses changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_printer_whose_clock_is_skewed_loses_nothing() {
    // libfaketime preloaded into the printer itself (not the `faketime`
    // wrapper, which forks it: killing the wrapper left the printer running
    // after the test, issue 54), in its own process group, killed as a group.
    let library = faketime_library();
    let (front, session, ks) = common::front_and_keyspace("cdc_skew").await;
    create_table(&session, &ks).await;
    let dir = std::env::temp_dir().join(format!("shardwise-cdc-skew-{}-{ks}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as u64;

    let plan = plan(20, 600, 5);
    let expected = expected_of(&plan);
    let start = SystemTime::now() - Duration::from_millis(500);
    // No end: each printer follows until it printed as many changes as
    // were written (or a deadline passes), then runs on a while longer in
    // case something comes twice.
    let mut children = Vec::new();
    // The negative control: a third printer 2 s ahead on its own clock
    // (`--local-clock`, as `scylla-cdc` reads), which must lose changes.
    for (skew, name, own) in [("+2s", "ahead", false), ("-2s", "behind", false), ("+2s", "ahead-local", true)] {
        let out = dir.join(format!("{name}.jsonl"));
        let child = Command::new(env!("CARGO_BIN_EXE_printer"))
            .env("LD_PRELOAD", &library)
            .env("FAKETIME", skew)
            .env_remove("FAKETIME_TIMESTAMP_FILE")
            .process_group(0)
            .args(["--node", &front.addr().to_string(), "--keyspace", &ks, "--table", "t", "--debezium", "cluster"])
            .args(["--start-unix-ms", &ms(start).to_string()])
            .args(own.then_some("--local-clock"))
            .args(live_reading("1"))
            .stdout(Stdio::from(std::fs::File::create(&out).expect("output file")))
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn printer under faketime");
        children.push((name, Group(Some(child)), out));
    }
    write(&session, &ks, &plan, 20, Duration::from_millis(100)).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    // When the test saw each printer's last change (by its own clock, the
    // cluster's): the printer printed it at most one poll before.
    let mut done_at = [None; 2];
    let checked = &children[..2];
    while done_at.iter().any(Option::is_none) && Instant::now() < deadline {
        for (i, (_, _, out)) in checked.iter().enumerate() {
            if done_at[i].is_none() && lines_in(out) >= plan.len() {
                done_at[i] = Some(ms(SystemTime::now()) as i64);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The printer on its own clock read each window about half a second
    // before the cluster's clock reached its end: the writes that landed
    // there afterwards are lost (by then it has read past every write).
    let (name, mut child, out) = children.pop().expect("the control");
    assert_eq!(child.0.as_mut().map(|c| c.try_wait().expect("try_wait").is_none()), Some(true), "{name} runs on");
    child.end();
    let text = std::fs::read_to_string(&out).expect("read output");
    let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
    let printed = complete.lines().count();
    eprintln!("clock {name}: printed {printed} of {} changes", plan.len());
    assert!(printed < plan.len(), "a printer ahead on its own clock loses changes ({printed} of {})", plan.len());
    for ((name, child, out), done_at) in children.iter_mut().zip(done_at) {
        let running = child.0.as_mut().map(|c| c.try_wait().expect("try_wait").is_none());
        assert_eq!(running, Some(true), "the printer {name} runs on");
        child.end();
        let text = std::fs::read_to_string(&out).expect("read output");
        let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
        let (mut seen, mut last) = (Ops::new(), i64::MIN);
        for line in complete.lines() {
            let ((pk, op, v), printed) = envelope_of(line);
            seen.entry(pk).or_default().push((op, v));
            last = last.max(printed);
        }
        for (pk, ops) in &expected {
            assert_eq!(seen.get(pk), Some(ops), "clock {name}: pk {pk}, every change once, in write order");
        }
        assert_eq!(complete.lines().count(), plan.len(), "clock {name}: every change once");
        // The skew acted: the printer's clock (its envelopes' `ts_ms`) when
        // it printed its last change, against the test's when it saw it
        // (up to one 50 ms poll later, and a loaded machine's delay).
        let shift = done_at.map(|seen| last - seen);
        eprintln!("clock {name}: {shift:?} ms against the test's");
        let expected = if *name == "ahead" { 1000..2100 } else { -3000..-1000 };
        assert!(shift.is_some_and(|s| expected.contains(&s)), "clock {name}: {shift:?} ms, expected in {expected:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A child in a process group of its own (spawned with `process_group(0)`:
/// the group's id is its pid), killed with its group when it is ended or
/// dropped: a failed assertion does not leave it running after the test.
struct Group(Option<Child>);

impl Group {
    /// Kills the child and every process of its group, then reaps it (once:
    /// its pid is not signalled again after it was reaped).
    fn end(&mut self) {
        if let Some(mut child) = self.0.take() {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.end();
    }
}

/// The library `faketime` preloads, as it sets `LD_PRELOAD` for its
/// command. A test that preloads it itself spawns the printer, not a
/// `faketime` process that forks it: `kill` ends the printer (issue 54).
fn faketime_library() -> String {
    let out = Command::new("faketime").args(["-f", "+0s", "printenv", "LD_PRELOAD"]).output();
    let library = out.ok().filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let library = library.unwrap_or_default();
    assert!(!library.is_empty(), "faketime is missing: `apt-get install faketime` (.ci/run installs it)");
    library
}

/// A Debezium line of the printer: its change as (pk, operation, v), and
/// the envelope's own `ts_ms` (the last one; the first is the write's), the
/// printer's clock when it printed the change.
fn envelope_of(line: &str) -> ((i32, Operation, Option<i64>), i64) {
    let op = match field(line, "op") {
        Some("c") => Operation::Insert,
        Some("u") => Operation::Update,
        Some("d") => Operation::RowDelete,
        other => panic!("unexpected op {other:?} in {line}"),
    };
    let pk = field(line, "pk").and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no pk in {line}"));
    let after = line.split_once("\"after\":").map_or("", |(_, after)| after);
    let v = after.strip_prefix('{').map(|row| {
        let (_, cell) = row.split_once("\"v\":{\"value\":").unwrap_or_else(|| panic!("no v in {line}"));
        cell.split('}').next().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("bad v in {line}"))
    });
    let printed = line.rfind("\"ts_ms\":").and_then(|i| field(&line[i..], "ts_ms")).and_then(|s| s.parse().ok());
    ((pk, op, v), printed.unwrap_or_else(|| panic!("no ts_ms in {line}")))
}

/// A printer whose wall clock steps 5 s forward while it follows a live
/// workload (an NTP step, a VM resumed) still prints every change, once
/// each: its notion of "now" is the cluster's time extrapolated on the
/// monotonic clock, which did not step, so it still reads a window only
/// once the cluster's clock is past its end and the safety interval (1.5 s
/// here). Had it added the cluster's offset to the wall clock, it would
/// read windows up to 3.5 s in the future until it next read the cluster's
/// time, and miss the writes that land in them (issue 51).
///
/// libfaketime, preloaded, shifts the printer's wall clock by what a file
/// says (read again every second), `+0s` until the printer has printed
/// some changes, then `+5s`; its monotonic clock is left alone, as a step
/// leaves it. The printer prints Debezium envelopes, whose `ts_ms` is its
/// clock: the shift is seen there, none before the step and 5 s after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_printer_whose_clock_steps_forward_loses_nothing() {
    let library = faketime_library();
    let (front, session, ks) = common::front_and_keyspace("cdc_step").await;
    create_table(&session, &ks).await;
    let dir = std::env::temp_dir().join(format!("shardwise-cdc-step-{}-{ks}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as i64;
    let (spec, out, err) = (dir.join("faketime"), dir.join("printer.jsonl"), dir.join("printer.stderr"));
    std::fs::write(&spec, "+0s\n").expect("faketime file");

    // 2400 changes, 20 every 100 ms: 12 s of writes.
    let plan = plan(20, 2400, 13);
    let expected = expected_of(&plan);
    let start = SystemTime::now() - Duration::from_millis(500);
    let mut child = Command::new(env!("CARGO_BIN_EXE_printer"))
        .env("LD_PRELOAD", &library)
        .env_remove("FAKETIME")
        .env("FAKETIME_TIMESTAMP_FILE", &spec)
        .env("FAKETIME_CACHE_DURATION", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .args(["--node", &front.addr().to_string(), "--keyspace", &ks, "--table", "t", "--debezium", "cluster"])
        .args(["--start-unix-ms", &ms(start).to_string()])
        .args(live_reading("1"))
        .stdout(Stdio::from(std::fs::File::create(&out).expect("output file")))
        .stderr(Stdio::from(std::fs::File::create(&err).expect("stderr file")))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn printer");
    let writer = {
        let (session, ks, plan) = (session.clone(), ks.clone(), plan.clone());
        tokio::spawn(async move { write(&session, &ks, &plan, 20, Duration::from_millis(100)).await })
    };

    // Each line as it comes: how far the printer's clock when it printed
    // it is ahead of the test's when the test saw it (at most the shift:
    // the printing came first). Once 100 changes are printed (the printer
    // reads live, and read the cluster's time), the clock steps.
    let stderr = || std::fs::read_to_string(&err).unwrap_or_default();
    let (mut seen, mut ahead_before, mut ahead_after) = (0, Vec::new(), Vec::new());
    let (mut stepped, mut writes_done) = (false, None);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(child.try_wait().expect("try_wait").is_none(), "the printer exited: {}", stderr());
        let text = std::fs::read_to_string(&out).expect("read output");
        let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
        let now = ms(SystemTime::now());
        for line in complete.lines().skip(seen) {
            let ahead = envelope_of(line).1 - now;
            if stepped {
                ahead_after.push(ahead)
            } else {
                ahead_before.push(ahead)
            }
            seen += 1;
        }
        if !stepped && seen >= 100 {
            std::fs::write(&spec, "+5s\n").expect("faketime file");
            stepped = true;
        }
        // Done once every change came, or 5 s after the last write (over
        // three safety intervals): what has not come then is lost.
        if writer.is_finished() {
            let since = *writes_done.get_or_insert_with(Instant::now);
            if seen >= plan.len() || since.elapsed() > Duration::from_secs(5) {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the printer prints ({seen} lines): {}", stderr());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    writer.await.expect("writer");
    // A change printed twice would come within a second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(child.try_wait().expect("try_wait").is_none(), "the printer runs on: {}", stderr());
    child.kill().expect("kill");
    let status = child.wait().expect("wait");
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    assert_eq!(signal, Some(9), "the printer itself was killed (SIGKILL): {status:?}");

    // The printer's clock did step: no shift before, 5 s after (the test
    // sees a line up to 100 ms after it was printed, and the file is read
    // again within a second).
    let (most_before, most_after) = (ahead_before.iter().max(), ahead_after.iter().max());
    assert!(ahead_before.len() >= 100 && most_before < Some(&1000), "no shift before the step: {most_before:?}");
    assert!(most_after > Some(&4000), "the printer's clock stepped 5 s forward: {most_after:?} ms ahead");
    let text = std::fs::read_to_string(&out).expect("read output");
    let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
    let mut printed = Ops::new();
    for line in complete.lines() {
        let ((pk, op, v), _) = envelope_of(line);
        printed.entry(pk).or_default().push((op, v));
    }
    let n = complete.lines().count();
    assert_eq!(n, plan.len(), "every change once (printed of written)");
    for (pk, ops) in &expected {
        assert_eq!(printed.get(pk), Some(ops), "pk {pk}: every change once, in write order");
    }
    eprintln!("{n} changes printed; the clock {most_after:?} ms ahead after the step");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scrape of `http://ADDR/path`: the status line and the body.
fn scrape(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut socket = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    socket.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(socket, "GET {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n").expect("request");
    let mut answer = String::new();
    socket.read_to_string(&mut answer).expect("answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    (head.lines().next().unwrap_or_default().to_owned(), body.to_owned())
}

/// The value of the sample `name{labels}` in Prometheus text.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// `--metrics-addr`: while the printer follows a table, a scrape shows the
/// rows it printed, its groups and their lag; the lag stays small once it
/// caught up; another path is a 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printer_serves_its_progress_and_lag_as_prometheus_text() {
    use std::io::BufRead;
    let (front, session, ks) = common::front_and_keyspace("cdc_metrics").await;
    create_table(&session, &ks).await;
    let plan = plan(10, 300, 3);
    let mut child = Command::new(env!("CARGO_BIN_EXE_printer"))
        .args(["--node", &front.addr().to_string(), "--keyspace", &ks, "--table", "t", "--json"])
        .args(["--start-ago", "5", "--metrics-addr", "127.0.0.1:0", "--progress", "0.2"])
        .args(live_reading("2"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn printer");
    // "[printer] metrics at http://ADDR/metrics" comes first on stderr.
    let stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let addr = tokio::task::spawn_blocking(move || {
        let mut lines = stderr.lines().map_while(Result::ok);
        let at = lines
            .find_map(|l| l.strip_prefix("[printer] metrics at http://")?.strip_suffix("/metrics").map(String::from));
        // Then its progress lines, every 0.2 s: delivered, rate, lag.
        let progress = std::thread::spawn(move || {
            let mut progress = Vec::new();
            for line in lines {
                if line.starts_with("[printer] ") && line.contains(" rows (") && line.contains("/s), lag ") {
                    progress.push(line);
                }
            }
            progress
        });
        (at, progress)
    })
    .await
    .expect("join");
    let (addr, progress) = (addr.0.expect("the printer says where its metrics are"), addr.1);
    write(&session, &ks, &plan, 50, Duration::from_millis(50)).await;

    let table = format!("{{table=\"{ks}.t\"}}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        let (a, path) = (addr.clone(), "/metrics");
        let (status, body) = tokio::task::spawn_blocking(move || scrape(&a, path)).await.expect("join");
        assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
        if sample(&body, &format!("shardwise_cdc_rows_total{table}")) == Some(plan.len() as f64) {
            break body;
        }
        assert!(Instant::now() < deadline, "the scrapes never showed {} rows:\n{body}", plan.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let groups = sample(&body, &format!("shardwise_cdc_groups{table}")).expect("groups");
    assert!(groups >= 1.0, "{body}");
    let lags = body
        .lines()
        .filter(|l| l.starts_with(&format!("shardwise_cdc_lag_seconds{{table=\"{ks}.t\",group=\"")))
        .count();
    assert_eq!(lags as f64, groups, "a lag per group:\n{body}");
    assert!(sample(&body, &format!("shardwise_cdc_windows_total{table}")).is_some_and(|w| w > 0.0), "{body}");
    // Each row is more than its 16-byte stream id and timeuuid.
    let bytes = sample(&body, &format!("shardwise_cdc_bytes_total{table}")).expect("bytes");
    assert!(
        bytes > 32.0 * plan.len() as f64,
        "{bytes} bytes for {} rows:
{body}",
        plan.len()
    );
    assert_eq!(sample(&body, &format!("shardwise_cdc_groups_taken_total{table}")), Some(0.0), "no leases: {body}");
    // Caught up: every group within a second or so of the horizon (it
    // reads 200 ms windows and sleeps 50 ms between them).
    let max_lag = sample(&body, &format!("shardwise_cdc_max_lag_seconds{table}")).expect("max lag");
    assert!(max_lag < 5.0, "caught up, yet a lag of {max_lag} s:\n{body}");
    let a = addr.clone();
    let (status, _) = tokio::task::spawn_blocking(move || scrape(&a, "/elsewhere")).await.expect("join");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let _ = child.kill();
    let _ = child.wait();
    let progress = progress.join().expect("stderr reader");
    // Rows counted up as they were printed (the kill may come before a
    // line shows them all), each line with the lag over every group.
    let counts: Vec<usize> =
        progress.iter().filter_map(|l| l.strip_prefix("[printer] ")?.split(' ').next()?.parse().ok()).collect();
    assert_eq!(counts.len(), progress.len(), "{progress:?}");
    assert!(counts.windows(2).all(|w| w[0] <= w[1]) && counts.last() > Some(&0), "{progress:?}");
    assert!(counts.iter().all(|&n| n <= plan.len()), "{progress:?}");
    assert!(progress.iter().all(|l| l.contains(&format!(" over {groups} groups"))), "{progress:?}");
}
