//! The workload of the checkpoint tests: a table `t (pk, ck, v)` with CDC,
//! a seeded sequence of inserts, updates and row deletes with increasing
//! `v`, and the check that a stopped run and a resumed one together deliver
//! every change in order. Here rather than in `checkpoint.rs` because the
//! `printer` test of `shardwise-cdc-tools` (a separate process killed and
//! restarted) uses it too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use shardwise::{Session, Statement};
use shardwise_cdc::{
    CdcReaderBuilder, CdcRow, CheckpointStore, Consumer, ConsumerError, ConsumerFactory, GroupInfo, Operation, StreamId,
};
use shardwise_emu::FrontHandle;

use super::{front_and_keyspace, run};

/// Changes per partition key: (operation, v) in order.
pub type Ops = HashMap<i32, Vec<(Operation, Option<i64>)>>;

/// What a consumer saw per partition: (operation, v) in delivery order.
pub type Seen = Arc<Mutex<Ops>>;

/// A consumer factory that records every row into `seen`.
pub fn collector(seen: Seen) -> Arc<dyn ConsumerFactory> {
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

/// Rows `seen` holds.
pub fn count(seen: &Seen) -> usize {
    seen.lock().expect("lock").values().map(Vec::len).sum()
}

/// The front, a session, a fresh keyspace named after `tag`, and the workload's table in it.
pub async fn front_with_table(tag: &str) -> (FrontHandle, Session, String) {
    let (front, session, ks) = front_and_keyspace(tag).await;
    create_table(&session, &ks).await;
    (front, session, ks)
}

/// Creates `ks.t`, the CDC-enabled table of the workload.
pub async fn create_table(session: &Session, ks: &str) {
    run(
        session,
        &format!("CREATE TABLE {ks}.t (pk int, ck int, v bigint, PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}}"),
    )
    .await;
}

/// The changes of the workload: (pk, ck, operation, v) with increasing v.
pub fn plan(partitions: i32, n: i64, seed: u64) -> Vec<(i32, i32, Operation, Option<i64>)> {
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

pub fn expected_of(plan: &[(i32, i32, Operation, Option<i64>)]) -> Ops {
    let mut expected = Ops::new();
    for &(pk, _, op, v) in plan {
        expected.entry(pk).or_default().push((op, v));
    }
    expected
}

/// How long a workload write may take before the test gives up on it: a
/// write with no answer in 10 s is a hang, not a loaded machine. It used to
/// be 1 s, and every CDC test failed when a 2-core machine shared with
/// others was slow to answer one write (issue 54).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The safety interval of readers that follow a live workload. A change's
/// `cdc$time` is taken when its write starts, and its window is read a
/// safety interval after that: a write acknowledged later than that may be
/// missed, by ScyllaDB's CDC as by any reader of it (`cdc/tests/crash.rs`).
pub const SAFETY: Duration = Duration::from_millis(1500);

/// [`SAFETY`] as a command-line value in seconds, for the tools' `--safety`.
pub fn safety_arg() -> String {
    SAFETY.as_secs_f64().to_string()
}

/// A workload write acknowledged [`SAFETY`] or more after it started: a
/// reader with that safety interval may have read its window before the
/// change was there, and missed it without any fault of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateWrite {
    pub keyspace: String,
    /// Its index in the plan.
    pub index: usize,
    pub pk: i32,
    pub op: Operation,
    pub v: Option<i64>,
    pub took: Duration,
}

static LATE: Mutex<Vec<LateWrite>> = Mutex::new(Vec::new());

/// The late writes of this process's workloads so far (see [`LateWrite`]).
pub fn late_writes() -> Vec<LateWrite> {
    LATE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The late writes as a sentence for a failure message ("" when none).
fn late_note() -> String {
    let late = late_writes();
    if late.is_empty() {
        return String::new();
    }
    let each: Vec<String> = late
        .iter()
        .map(|l| format!("{}: write {} ({:?} of pk {}) took {:?}", l.keyspace, l.index, l.op, l.pk, l.took))
        .collect();
    format!(
        "; {} writes of this process were acknowledged past the safety interval {SAFETY:?} (a loaded machine), \
         a reader may have missed them: {}",
        late.len(),
        each.join(", ")
    )
}

/// Writes the planned changes, `per_tick` of them every `tick` (all at once
/// with a zero tick), each within [`WRITE_TIMEOUT`]; see [`write_until`].
pub async fn write(
    session: &Session,
    ks: &str,
    plan: &[(i32, i32, Operation, Option<i64>)],
    per_tick: usize,
    tick: Duration,
) {
    write_until(session, ks, plan, per_tick, tick, None).await;
}

/// As [`write()`], stopping at `until` if given: how many of the planned
/// changes were written (and acknowledged).
///
/// The safety reasoning, and why a slow write no longer fails here: the
/// checks of the tests compare what a reader with [`SAFETY`] delivered with
/// the plan, exactly. That is sound for every write acknowledged within
/// `SAFETY` of its start. A slower one (a loaded machine) is not a fault of
/// the reader, and the reader may still have read it (it usually does: its
/// windows lag more than the safety interval): so it is not failed here, but
/// recorded ([`late_writes`], and a line on stderr), and a check that then
/// finds a change missing names the late writes in its message
/// ([`check_resumed`]). A write with no answer within [`WRITE_TIMEOUT`]
/// fails the test: it may or may not have been applied, and writing it
/// again would put a second change in the log that the plan does not have.
/// Only a write that was never sent (no connection) is tried again, until
/// `WRITE_TIMEOUT` after its first try.
pub async fn write_until(
    session: &Session,
    ks: &str,
    plan: &[(i32, i32, Operation, Option<i64>)],
    per_tick: usize,
    tick: Duration,
    until: Option<std::time::Instant>,
) -> usize {
    let prepare = |cql: String| session.prepare(Statement::new(cql));
    let insert = prepare(format!("INSERT INTO {ks}.t (pk, ck, v) VALUES (?, ?, ?)")).await.expect("prepare");
    let update = prepare(format!("UPDATE {ks}.t SET v = ? WHERE pk = ? AND ck = ?")).await.expect("prepare");
    let delete = prepare(format!("DELETE FROM {ks}.t WHERE pk = ? AND ck = ?")).await.expect("prepare");
    let (insert, update, delete) =
        (insert.with_timeout(WRITE_TIMEOUT), update.with_timeout(WRITE_TIMEOUT), delete.with_timeout(WRITE_TIMEOUT));
    for (i, &(pk, ck, op, v)) in plan.iter().enumerate() {
        if until.is_some_and(|until| std::time::Instant::now() >= until) {
            return i;
        }
        if i > 0 && i % per_tick.max(1) == 0 && !tick.is_zero() {
            tokio::time::sleep(tick).await;
        }
        let began = std::time::Instant::now();
        loop {
            let done = match op {
                Operation::Insert => session.execute(&insert, (pk, ck, v.expect("v"))).await.map(drop),
                Operation::Update => session.execute(&update, (v.expect("v"), pk, ck)).await.map(drop),
                _ => session.execute(&delete, (pk, ck)).await.map(drop),
            };
            match done {
                Ok(()) => break,
                Err(shardwise::ExecutionError::NoConnection) if began.elapsed() < WRITE_TIMEOUT => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("write {i} ({op:?} of pk {pk}), bounded by {WRITE_TIMEOUT:?}: {e}"),
            }
        }
        let took = began.elapsed();
        if took >= SAFETY {
            eprintln!(
                "workload: write {i} ({op:?} of pk {pk}) in {ks} took {took:?}, past the safety interval {SAFETY:?}"
            );
            let late = LateWrite { keyspace: ks.to_string(), index: i, pk, op, v, took };
            LATE.lock().unwrap_or_else(|e| e.into_inner()).push(late);
        }
    }
    plan.len()
}

/// The reader of the resume tests: `ks.t` over `[start, end)` in 100 ms
/// windows, [`SAFETY`] behind the clock, on two workers, saving its progress to
/// `store` every `interval`.
pub fn resumable(
    session: &Session,
    ks: &str,
    (start, end): (SystemTime, SystemTime),
    store: Arc<dyn CheckpointStore>,
    interval: Duration,
) -> CdcReaderBuilder {
    CdcReaderBuilder::new(session.clone(), ks, "t")
        .start(start)
        .end(end)
        .window_size(Duration::from_millis(100))
        .safety_interval(SAFETY)
        .sleep_interval(Duration::from_millis(50))
        .workers(2)
        .checkpoints(store, interval)
}

/// Checks that a first run (a prefix per key) and a resumed run (a suffix
/// per key) together cover `expected` in order with no gap; returns how
/// many changes the second run repeated.
pub fn check_resumed(expected: &Ops, first: &Ops, second: &Ops) -> usize {
    let mut repeated = 0;
    for (pk, ops) in expected {
        let a = first.get(pk).cloned().unwrap_or_default();
        let b = second.get(pk).cloned().unwrap_or_default();
        assert!(a.len() <= ops.len() && b.len() <= ops.len(), "pk {pk}: more changes than written");
        assert_eq!(&a[..], &ops[..a.len()], "pk {pk}: first run in write order{}", late_note());
        let resumed_at = ops.len() - b.len();
        assert!(
            resumed_at <= a.len(),
            "pk {pk}: rows missed between runs ({} + {} of {}){}",
            a.len(),
            b.len(),
            ops.len(),
            late_note()
        );
        assert_eq!(&b[..], &ops[resumed_at..], "pk {pk}: second run in write order{}", late_note());
        repeated += a.len() - resumed_at;
    }
    for pk in first.keys().chain(second.keys()) {
        assert!(expected.contains_key(pk), "pk {pk} was never written");
    }
    repeated
}

/// Each partition key's stream group (its first stream id, as the
/// checkpoint table's `group_id` names it).
pub type Groups = HashMap<i32, StreamId>;

/// The stream group of each partition key's changes to `ks.t` in
/// `[start, end)` (Unix ms), as the shipped reader groups the streams with
/// `per_query` streams to a query: the grouping of a tool reading through
/// the same front with `--streams-per-query per_query`.
pub async fn groups_of(session: &Session, ks: &str, (start, end): (u64, u64), per_query: usize) -> Groups {
    let found: Arc<Mutex<Groups>> = Arc::default();
    let f = found.clone();
    let factory: Arc<dyn ConsumerFactory> = Arc::new(move |info: &GroupInfo| -> Box<dyn Consumer> {
        let (found, group) = (f.clone(), info.streams.key());
        Box::new(move |row: CdcRow<'_>| -> Result<(), ConsumerError> {
            let pk: i32 = row.value::<Option<i32>>("pk")?.ok_or_else(|| ConsumerError::failed("no pk"))?;
            let had = *found.lock().expect("lock").entry(pk).or_insert(group);
            assert_eq!(had, group, "pk {pk}: its changes in one group");
            Ok(())
        })
    });
    let at = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    let reader = CdcReaderBuilder::new(session.clone(), ks, "t")
        .start(at(start))
        .end(at(end))
        .window_size(Duration::from_secs(5))
        .safety_interval(SAFETY)
        .sleep_interval(Duration::from_millis(50))
        .workers(2)
        .streams_per_query(per_query)
        .build(factory)
        .await
        .expect("reader");
    tokio::time::timeout(Duration::from_secs(120), reader.join())
        .await
        .expect("reading the log for the groups took over 120 s")
        .expect("the groups read");
    let found = found.lock().expect("lock").clone();
    found
}
