//! Restarts from the table-backed checkpoint store, through the Scylla
//! emulation front on a real Cassandra:
//!
//! * in process: a reader with a [`TableCheckpointStore`] is stopped mid-run
//!   and dropped; a new reader resumes from the table and delivers the rest,
//!   skipping nothing (at-least-once: only the tail of the last window may
//!   come again);
//! * in a separate process: the `printer` binary, following a table live
//!   with `--checkpoint-keyspace`, is killed with SIGKILL after it printed
//!   some changes and saved a checkpoint, then restarted to the end; the two
//!   outputs together hold every change, in write order per partition key,
//!   with repeats only where the second run resumed.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use shardwise::{Session, Statement};
use shardwise_cdc::checkpoint::TableCheckpointStore;
use shardwise_cdc::{CdcReaderBuilder, CdcRow, CheckpointStore, Consumer, ConsumerError, GroupInfo, Operation};
use testkit::emu::FrontHandle;

use crate::common::{self, run};

async fn setup(tag: &str) -> (FrontHandle, Session, String) {
    let (front, session, ks) = common::front_and_keyspace(tag).await;
    run(
        &session,
        &format!("CREATE TABLE {ks}.t (pk int, ck int, v bigint, PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}}"),
    )
    .await;
    (front, session, ks)
}

type Ops = HashMap<i32, Vec<(Operation, Option<i64>)>>;

/// What the consumer saw per partition: (operation, v) in delivery order.
type Seen = Arc<Mutex<Ops>>;

fn collector(seen: Seen) -> Arc<dyn shardwise_cdc::ConsumerFactory> {
    Arc::new(move |_: &GroupInfo| -> Box<dyn Consumer> {
        let seen = seen.clone();
        Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
            let pk: i32 = row.value::<Option<i32>>("pk")?.ok_or_else(|| ConsumerError::failed("no pk"))?;
            let v = row.value::<Option<i64>>("v")?;
            seen.lock().expect("lock").entry(pk).or_default().push((row.operation(), v));
            Ok(())
        })
    })
}

fn count(seen: &Seen) -> usize {
    seen.lock().expect("lock").values().map(Vec::len).sum()
}

/// The changes of the workload: (pk, ck, operation, v) with increasing v.
fn plan(partitions: i32, n: i64, seed: u64) -> Vec<(i32, i32, Operation, Option<i64>)> {
    let mut x = seed;
    (0..n)
        .map(|v| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let pk = ((x >> 33) % partitions as u64) as i32;
            let ck = ((x >> 20) % 4) as i32;
            match (x >> 50) % 10 {
                0..=5 => (pk, ck, Operation::Insert, Some(v)),
                6..=8 => (pk, ck, Operation::Update, Some(v)),
                _ => (pk, ck, Operation::RowDelete, None),
            }
        })
        .collect()
}

fn expected_of(plan: &[(i32, i32, Operation, Option<i64>)]) -> Ops {
    let mut expected = Ops::new();
    for &(pk, _, op, v) in plan {
        expected.entry(pk).or_default().push((op, v));
    }
    expected
}

/// Writes the planned changes, `per_tick` of them every `tick` (all at once
/// with a zero tick).
async fn write(
    session: &Session,
    ks: &str,
    plan: &[(i32, i32, Operation, Option<i64>)],
    per_tick: usize,
    tick: Duration,
) {
    let insert = session
        .prepare(Statement::new(format!("INSERT INTO {ks}.t (pk, ck, v) VALUES (?, ?, ?)")))
        .await
        .expect("prepare");
    let update = session
        .prepare(Statement::new(format!("UPDATE {ks}.t SET v = ? WHERE pk = ? AND ck = ?")))
        .await
        .expect("prepare");
    let delete =
        session.prepare(Statement::new(format!("DELETE FROM {ks}.t WHERE pk = ? AND ck = ?"))).await.expect("prepare");
    for (i, &(pk, ck, op, v)) in plan.iter().enumerate() {
        if i > 0 && i % per_tick.max(1) == 0 && !tick.is_zero() {
            tokio::time::sleep(tick).await;
        }
        match op {
            Operation::Insert => session.execute(&insert, (pk, ck, v.expect("v"))).await.map(drop),
            Operation::Update => session.execute(&update, (v.expect("v"), pk, ck)).await.map(drop),
            _ => session.execute(&delete, (pk, ck)).await.map(drop),
        }
        .expect("write");
    }
}

/// Checks that a first run (a prefix per key) and a resumed run (a suffix
/// per key) together cover `expected` in order with no gap; returns how
/// many changes the second run repeated.
fn check_resumed(expected: &Ops, first: &Ops, second: &Ops) -> usize {
    let mut repeated = 0;
    for (pk, ops) in expected {
        let a = first.get(pk).cloned().unwrap_or_default();
        let b = second.get(pk).cloned().unwrap_or_default();
        assert!(a.len() <= ops.len() && b.len() <= ops.len(), "pk {pk}: more changes than written");
        assert_eq!(&a[..], &ops[..a.len()], "pk {pk}: first run in write order");
        let resumed_at = ops.len() - b.len();
        assert!(
            resumed_at <= a.len(),
            "pk {pk}: rows missed between runs ({} + {} of {})",
            a.len(),
            b.len(),
            ops.len()
        );
        assert_eq!(&b[..], &ops[resumed_at..], "pk {pk}: second run in write order");
        repeated += a.len() - resumed_at;
    }
    for pk in first.keys().chain(second.keys()) {
        assert!(expected.contains_key(pk), "pk {pk} was never written");
    }
    repeated
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_from_the_table_checkpoint_without_missing_a_row() {
    let (_front, session, ks) = setup("cdc_tckpt").await;
    let store = TableCheckpointStore::new(session.clone(), &ks, "cdc_checkpoints");
    store.create_table().await.expect("checkpoint table");
    let store = Arc::new(store);
    let log = &format!("{ks}.t_scylla_cdc_log");
    assert_eq!(store.load(log).await.expect("load"), None, "a fresh table has no checkpoint");

    let start = SystemTime::now() - Duration::from_secs(1);
    let plan = plan(20, 400, 3);
    write(&session, &ks, &plan, 400, Duration::ZERO).await;
    let expected = expected_of(&plan);
    let total = plan.len();
    let end = SystemTime::now() + Duration::from_millis(500);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let builder = |seen: Seen| {
        CdcReaderBuilder::new(session.clone(), &ks, "t")
            .start(start)
            .end(end)
            .window_size(Duration::from_millis(100))
            .safety_interval(Duration::from_millis(300))
            .sleep_interval(Duration::from_millis(50))
            .workers(2)
            .checkpoints(store.clone(), Duration::from_millis(100))
            .build(collector(seen))
    };

    // First run: stopped once about a quarter of the changes came, then dropped.
    let first: Seen = Arc::default();
    let reader = builder(first.clone()).await.expect("reader");
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&first) < total / 4 {
        assert!(Instant::now() < deadline, "the first run delivers changes");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    reader.stop();
    reader.join().await.expect("stopped cleanly");
    let first_count = count(&first);
    assert!(first_count < total, "the first run was stopped before the end ({first_count} of {total})");

    // The table holds the checkpoint: the generation and every group, some
    // of them past the start.
    let saved = store.load(log).await.expect("load").expect("a checkpoint was saved");
    assert!(!saved.groups.is_empty(), "{saved:?}");
    let start_ms = start.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as i64;
    assert!(saved.groups.iter().any(|g| g.progress.0 > start_ms), "some progress saved: {saved:?}");
    assert!(saved.groups.iter().all(|g| g.progress.0 >= saved.generation.0), "{saved:?}");

    // Second run: a new reader, from the table's checkpoint to the end.
    let second: Seen = Arc::default();
    let reader = builder(second.clone()).await.expect("reader");
    tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("finishes").expect("ok");
    let second_count = count(&second);
    let (first, second) = (first.lock().expect("lock").clone(), second.lock().expect("lock").clone());
    let repeated = check_resumed(&expected, &first, &second);
    assert!(
        second_count < total,
        "the second run resumed from the checkpoint, not from the start ({second_count} of {total})"
    );
    assert_eq!(first_count + second_count - repeated, total);
    eprintln!("first run {first_count}, second run {second_count}, repeated {repeated}, of {total}");

    // The finished run's checkpoint is at the end for every group.
    let done = store.load(log).await.expect("load").expect("checkpoint");
    let end_ms = end.duration_since(UNIX_EPOCH).expect("epoch").as_millis() as i64;
    assert!(done.groups.iter().all(|g| g.progress.0 >= end_ms), "{done:?}");
}

/// The `printer` of this package, as a child process following `ks.t`
/// from an absolute time (to an absolute time, or forever), with a table checkpoint in `ks`; its JSON
/// lines go to `out`.
fn spawn_printer(
    addr: std::net::SocketAddr,
    ks: &str,
    start_ms: u64,
    end_ms: Option<u64>,
    out: &std::path::Path,
) -> Child {
    let file = std::fs::File::create(out).expect("output file");
    let mut command = Command::new(env!("CARGO_BIN_EXE_printer"));
    if let Some(end) = end_ms {
        command.args(["--end-unix-ms", &end.to_string()]);
    }
    command
        .args(["--node", &addr.to_string(), "--keyspace", ks, "--table", "t", "--json"])
        .args(["--start-unix-ms", &start_ms.to_string()])
        .args(["--window", "0.2", "--safety", "0.3", "--sleep", "0.05", "--workers", "2", "--consistency", "ONE"])
        .args(["--checkpoint-keyspace", ks, "--checkpoint-interval", "0.1"])
        .stdout(Stdio::from(file))
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn printer")
}

/// The value of `"name":"…"` in a JSON line of the printer.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("\"{name}\":\"");
    let at = line.find(&key)? + key.len();
    line[at..].split('"').next()
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

fn lines_in(path: &std::path::Path) -> usize {
    std::fs::read(path).map(|b| b.iter().filter(|&&c| c == b'\n').count()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_printer_process_resumes_from_the_table_checkpoint() {
    let (front, session, ks) = setup("cdc_kill").await;
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
    let mut child = spawn_printer(front.addr(), &ks, ms(start), None, &out1);
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

    // Restarted once the writes are done, now with an end: it resumes from
    // the table and runs to the end.
    writer.await.expect("writer");
    let end = SystemTime::now() + Duration::from_millis(500);
    let mut child = spawn_printer(front.addr(), &ks, ms(start), Some(ms(end)), &out2);
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the restarted printer did not finish");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "the restarted printer finished cleanly: {status:?}");

    let (first, n1) = read_output(&out1);
    let (second, n2) = read_output(&out2);
    assert!(n1 >= killed_at.min(total / 4) && n1 < total, "killed mid-run: {n1} of {total}");
    let repeated = check_resumed(&expected, &first, &second);
    assert!(n2 < total, "the restart resumed from the checkpoint, not from the start ({n2} of {total})");
    assert_eq!(n1 + n2 - repeated, total, "every change printed");
    eprintln!("killed after {n1} changes; the restart printed {n2} ({repeated} again) of {total}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Readers of two tables with the same name in two keyspaces share one
/// checkpoint table: each keeps its own checkpoint (the key is the log's
/// `keyspace.table`), so the second does not resume from the first's
/// progress and skip its own rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_the_same_name_in_two_keyspaces_keep_separate_checkpoints() {
    let (_front, session, ks) = setup("cdc_ckpt_ks1").await;
    let ks2 = testkit::fresh_keyspace("cdc_ckpt_ks2");
    run(
        &session,
        &format!("CREATE KEYSPACE {ks2} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
    )
    .await;
    run(
        &session,
        &format!(
            "CREATE TABLE {ks2}.t (pk int, ck int, v bigint, PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}}"
        ),
    )
    .await;
    let store = TableCheckpointStore::new(session.clone(), &ks, "cdc_checkpoints");
    store.create_table().await.expect("checkpoint table");
    let store = Arc::new(store);

    let start = SystemTime::now() - Duration::from_secs(1);
    let (plan1, plan2) = (plan(10, 100, 11), plan(10, 100, 12));
    write(&session, &ks, &plan1, 100, Duration::ZERO).await;
    write(&session, &ks2, &plan2, 100, Duration::ZERO).await;
    let end = SystemTime::now() + Duration::from_millis(500);
    let read = |keyspace: String, seen: Seen| {
        CdcReaderBuilder::new(session.clone(), &keyspace, "t")
            .start(start)
            .end(end)
            .window_size(Duration::from_secs(1))
            .safety_interval(Duration::from_millis(300))
            .sleep_interval(Duration::from_millis(50))
            .workers(2)
            .checkpoints(store.clone(), Duration::from_millis(100))
            .build(collector(seen))
    };
    for (keyspace, plan) in [(ks.clone(), &plan1), (ks2.clone(), &plan2)] {
        let seen: Seen = Arc::default();
        let reader = read(keyspace.clone(), seen.clone()).await.expect("reader");
        tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("finishes").expect("ok");
        let seen = seen.lock().expect("lock").clone();
        assert_eq!(seen, expected_of(plan), "every change of {keyspace}.t, in order");
    }
    for keyspace in [&ks, &ks2] {
        let key = format!("{keyspace}.t_scylla_cdc_log");
        assert!(store.load(&key).await.expect("load").is_some(), "a checkpoint under {key}");
    }
}
