//! The replicator for every type family, through the Scylla emulation front
//! on a real Cassandra: every native type, lists (append, prepend,
//! overwrite, null; element removal by key is documented as not
//! replicable), non-frozen UDTs (field updates, field nulls, overwrites,
//! null), static columns (atomic and collections), frozen collections and
//! tuples — each inserted, updated, nulled, deleted and written with TTLs
//! on a CDC-enabled table, then replayed from the log into a table without
//! CDC. Both tables then hold the same rows, with the same write times and
//! (within the replication delay) the same TTLs on the atomic columns.

use std::time::{Duration, SystemTime};

use shardwise::protocol::types::CqlValue;
use shardwise::{Session, Statement};
use shardwise_cdc::replicator::Replicator;
use shardwise_cdc::CdcReaderBuilder;
use shardwise_emu::FrontHandle;

use crate::common::{self, run};

async fn setup(tag: &str) -> (FrontHandle, Session, String) {
    let (front, session, ks) = common::front_and_keyspace(tag).await;
    (front, session, ks)
}

/// The rows of `table`: every column, then the write time and the TTL of
/// each of `atomic`; sorted.
async fn dump(session: &Session, ks: &str, table: &str, atomic: &[&str]) -> Vec<(String, Vec<Option<i32>>)> {
    let names = session
        .execute(
            &Statement::new("SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?"),
            (ks, table),
        )
        .await
        .expect("columns");
    let mut names: Vec<String> = names.rows::<(String,)>().expect("rows").map(|r| r.expect("row").0).collect();
    names.sort();
    let mut text = format!("SELECT {}", names.join(", "));
    for c in atomic {
        text.push_str(&format!(", writetime({c}), ttl({c})"));
    }
    text.push_str(&format!(" FROM {ks}.{table}"));
    let result = session.execute(&Statement::new(text.clone()), ()).await.unwrap_or_else(|e| panic!("{text}: {e}"));
    let mut rows: Vec<(String, Vec<Option<i32>>)> = result
        .rows::<Vec<Option<CqlValue>>>()
        .expect("rows")
        .map(|r| {
            let mut r = r.expect("row");
            // The TTLs (every second column of the tail) apart: they count down.
            let tail = r.split_off(r.len() - 2 * atomic.len());
            let mut ttls = Vec::new();
            for (i, v) in tail.into_iter().enumerate() {
                if i % 2 == 0 {
                    r.push(v);
                } else {
                    ttls.push(match v {
                        Some(CqlValue::Int(t)) => Some(t),
                        None => None,
                        other => panic!("ttl {other:?}"),
                    });
                }
            }
            (format!("{r:?}"), ttls)
        })
        .collect();
    rows.sort();
    rows
}

/// Creates `src` (CDC) and `dst` with `columns`, runs `statements` on `src`
/// (`{t}` stands for it), replicates, and compares.
async fn replicate_and_compare(session: &Session, ks: &str, columns: &str, atomic: &[&str], statements: &[&str]) {
    run(session, &format!("CREATE TABLE {ks}.src {columns} WITH cdc = {{'enabled': true}}")).await;
    run(session, &format!("CREATE TABLE {ks}.dst {columns}")).await;
    let start = SystemTime::now() - Duration::from_secs(1);
    let t = format!("{ks}.src");
    for s in statements {
        run(session, &s.replace("{t}", &t)).await;
    }
    let end = SystemTime::now() + Duration::from_millis(500);

    let replicator = Replicator::new(session, ks, "src", session.clone(), ks, "dst").await.expect("replicator");
    let reader = CdcReaderBuilder::new(session.clone(), ks, "src")
        .start(start)
        .end(end)
        .window_size(Duration::from_secs(2))
        .safety_interval(Duration::from_millis(500))
        .sleep_interval(Duration::from_millis(100))
        .generation_poll_interval(Duration::from_millis(200))
        .workers(2)
        .build(replicator.clone())
        .await
        .expect("reader");
    tokio::time::timeout(Duration::from_secs(120), reader.join()).await.expect("reader finishes").expect("reader ok");
    assert!(replicator.rows() >= statements.len() as u64 / 2, "rows consumed: {}", replicator.rows());

    let source = dump(session, ks, "src", atomic).await;
    let replica = dump(session, ks, "dst", atomic).await;
    assert!(!source.is_empty());
    eprintln!("{} rows consumed, {} writes, {} rows compared", replicator.rows(), replicator.writes(), source.len());
    let mut bad = Vec::new();
    for (a, b) in source.iter().zip(&replica) {
        if a.0 != b.0 {
            bad.push(format!("source:  {}\nreplica: {}", a.0, b.0));
            continue;
        }
        for (i, (x, y)) in a.1.iter().zip(&b.1).enumerate() {
            // The replica's TTL started later, by the replication delay.
            let close = match (x, y) {
                (Some(x), Some(y)) => (y - x).abs() <= 30,
                (None, None) => true,
                _ => false,
            };
            if !close {
                bad.push(format!("ttl({}) of {}: source {x:?}, replica {y:?}", atomic[i], a.0));
            }
        }
    }
    assert!(bad.is_empty(), "{} differences:\n{}", bad.len(), bad.join("\n"));
    assert_eq!(source.len(), replica.len(), "row counts");
}

const NATIVE_COLUMNS: &str = "(pk int, ck int, \
    c_int int, c_bigint bigint, c_text text, c_ascii ascii, c_varchar varchar, c_blob blob, c_boolean boolean, \
    c_double double, c_float float, c_decimal decimal, c_varint varint, c_uuid uuid, c_timeuuid timeuuid, \
    c_timestamp timestamp, c_date date, c_time time, c_inet inet, c_smallint smallint, c_tinyint tinyint, \
    c_duration duration, PRIMARY KEY (pk, ck))";

const NATIVE: &[&str] = &[
    "c_int",
    "c_bigint",
    "c_text",
    "c_ascii",
    "c_varchar",
    "c_blob",
    "c_boolean",
    "c_double",
    "c_float",
    "c_decimal",
    "c_varint",
    "c_uuid",
    "c_timeuuid",
    "c_timestamp",
    "c_date",
    "c_time",
    "c_inet",
    "c_smallint",
    "c_tinyint",
    "c_duration",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_native_type() {
    let (_front, session, ks) = setup("cdc_repl_native").await;
    let all = NATIVE.join(", ");
    let row = |pk: i32, ck: i32, n: i32| {
        format!(
            "INSERT INTO {{t}} (pk, ck, {all}) VALUES ({pk}, {ck}, {n}, {}, 'text {n}', 'ascii {n}', 'varchar é {n}', \
             0xcafe{n:02x}, {}, {n}.5, -{n}.25, 3.14159265358979323846{n}, 1234567890123456789012345678901234567890{n}, \
             123e4567-e89b-12d3-a456-4266141740{n:02}, 50554d6e-29bb-11e5-b345-feff819cdc{n:02}, \
             '2020-01-{:02} 10:11:12.345+0000', '2021-02-{:02}', '12:34:56.{n:03}', '10.0.0.{n}', {}, {}, 1mo{n}d3h4m5s6ms7us8ns)",
            i64::from(n) * 1_000_000_000_000,
            n % 2 == 0,
            n % 28 + 1,
            n % 28 + 1,
            n * 100,
            n % 100,
        )
    };
    let mut statements: Vec<String> = Vec::new();
    for pk in 0..4 {
        for ck in 0..4 {
            statements.push(row(pk, ck, pk * 10 + ck));
        }
    }
    statements.extend(
        [
            // Updates of every type; a second value for some.
            "UPDATE {t} SET c_int = -1, c_bigint = -2, c_text = '', c_ascii = '', c_varchar = 'v', c_blob = 0x, \
             c_boolean = false, c_double = -0.0, c_float = 1e10, c_decimal = -0.001, c_varint = -99999999999999999999999, \
             c_uuid = 00000000-0000-0000-0000-000000000000, c_timeuuid = 00000000-0000-1000-8000-000000000000, \
             c_timestamp = 0, c_date = '1970-01-01', c_time = '00:00:00', c_inet = '::1', c_smallint = -32768, \
             c_tinyint = -128, c_duration = -1h WHERE pk = 0 AND ck = 0",
            "UPDATE {t} SET c_double = 1.7976931348623157E308, c_float = -3.4028235E38, c_inet = '2001:db8::ff00:42:8329', \
             c_smallint = 32767, c_tinyint = 127, c_int = 2147483647, c_bigint = -9223372036854775808 WHERE pk = 0 AND ck = 1",
            // Updates of rows that do not exist yet.
            "UPDATE {t} SET c_text = 'new row', c_duration = 2y WHERE pk = 5 AND ck = 0",
            "UPDATE {t} SET c_date = '2000-02-29', c_time = '23:59:59.999999999' WHERE pk = 5 AND ck = 1",
            // Nulls: in updates and inserts.
            "UPDATE {t} SET c_int = null, c_text = null, c_blob = null, c_duration = null WHERE pk = 1 AND ck = 0",
            "INSERT INTO {t} (pk, ck, c_int, c_text, c_decimal) VALUES (1, 1, 5, null, null)",
            "INSERT INTO {t} (pk, ck, c_uuid) VALUES (6, 0, null)",
            // Column deletes, a row delete, a partition delete.
            "DELETE c_bigint, c_ascii, c_varint, c_inet FROM {t} WHERE pk = 1 AND ck = 2",
            "DELETE FROM {t} WHERE pk = 2 AND ck = 1",
            "DELETE FROM {t} WHERE pk = 3",
            "INSERT INTO {t} (pk, ck, c_tinyint) VALUES (3, 9, 9)",
            "DELETE FROM {t} WHERE pk = 2 AND ck >= 2 AND ck < 3",
            // TTLs: insert, update, and an update without TTL over a TTL'd cell.
            "INSERT INTO {t} (pk, ck, c_int, c_text, c_timestamp) VALUES (7, 0, 70, 'ttl', '2022-03-04 05:06:07+0000') USING TTL 3600",
            "UPDATE {t} USING TTL 7200 SET c_float = 7.5, c_boolean = true WHERE pk = 7 AND ck = 1",
            "UPDATE {t} USING TTL 1800 SET c_int = 71 WHERE pk = 7 AND ck = 0",
            "UPDATE {t} SET c_text = 'no ttl' WHERE pk = 7 AND ck = 0",
        ]
        .map(String::from),
    );
    let statements: Vec<&str> = statements.iter().map(String::as_str).collect();
    replicate_and_compare(&session, &ks, NATIVE_COLUMNS, NATIVE, &statements).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists() {
    let (_front, session, ks) = setup("cdc_repl_lists").await;
    let columns = "(pk int, ck int, v int, l list<text>, li list<int>, PRIMARY KEY (pk, ck))";
    replicate_and_compare(
        &session,
        &ks,
        columns,
        &["v"],
        &[
            "INSERT INTO {t} (pk, ck, v, l, li) VALUES (0, 0, 1, ['a', 'b'], [1, 2, 3])",
            "INSERT INTO {t} (pk, ck, v, l, li) VALUES (0, 1, 1, ['a', 'b'], [1, 2, 3])",
            "INSERT INTO {t} (pk, ck, v, l, li) VALUES (0, 2, 1, ['a', 'b'], [1, 2, 3])",
            "INSERT INTO {t} (pk, ck, v, l, li) VALUES (0, 3, 1, ['a', 'b'], [1, 2, 3])",
            "INSERT INTO {t} (pk, ck, v, l, li) VALUES (0, 4, 1, ['a', 'b'], [1, 2, 3])",
            // Append, prepend, both, repeatedly.
            "UPDATE {t} SET l = l + ['c', 'd'] WHERE pk = 0 AND ck = 0",
            "UPDATE {t} SET l = ['y', 'z'] + l WHERE pk = 0 AND ck = 1",
            "UPDATE {t} SET l = l + ['c'] WHERE pk = 0 AND ck = 2",
            "UPDATE {t} SET l = ['x'] + l WHERE pk = 0 AND ck = 2",
            "UPDATE {t} SET l = l + ['e'], li = [0] + li WHERE pk = 0 AND ck = 2",
            "UPDATE {t} SET l = ['w'] + l WHERE pk = 0 AND ck = 2",
            // Overwrite, then append to the overwritten list.
            "UPDATE {t} SET l = ['o1', 'o2'] WHERE pk = 0 AND ck = 3",
            "UPDATE {t} SET l = l + ['o3'] WHERE pk = 0 AND ck = 3",
            "UPDATE {t} SET li = [] WHERE pk = 0 AND ck = 3",
            // Null and delete.
            "UPDATE {t} SET l = null WHERE pk = 0 AND ck = 4",
            "DELETE li FROM {t} WHERE pk = 0 AND ck = 4",
            // Lists on new rows; insert then append; append to nothing.
            "UPDATE {t} SET l = l + ['n'] WHERE pk = 1 AND ck = 0",
            "UPDATE {t} SET li = [5] + li WHERE pk = 1 AND ck = 1",
            "INSERT INTO {t} (pk, ck, l) VALUES (1, 2, ['i'])",
            "UPDATE {t} SET l = l + ['j', 'k'], v = 3 WHERE pk = 1 AND ck = 2",
            "INSERT INTO {t} (pk, ck, v, l) VALUES (1, 3, 4, null)",
            // TTLs.
            "INSERT INTO {t} (pk, ck, v, l) VALUES (2, 0, 20, ['t1']) USING TTL 3600",
            "UPDATE {t} USING TTL 3600 SET l = l + ['t2'], v = 21 WHERE pk = 2 AND ck = 0",
            "UPDATE {t} USING TTL 3600 SET li = [7, 8] WHERE pk = 2 AND ck = 1",
            // Row delete after list writes; a write into it again.
            "DELETE FROM {t} WHERE pk = 1 AND ck = 0",
            "UPDATE {t} SET l = l + ['again'] WHERE pk = 1 AND ck = 0",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_defined_types() {
    let (_front, session, ks) = setup("cdc_repl_udt").await;
    run(&session, &format!("CREATE TYPE {ks}.ut (a int, b text, c frozen<list<int>>)")).await;
    let columns = "(pk int, ck int, v int, u ut, fu frozen<ut>, PRIMARY KEY (pk, ck))";
    replicate_and_compare(
        &session,
        &ks,
        columns,
        &["v", "fu"],
        &[
            "INSERT INTO {t} (pk, ck, v, u, fu) VALUES (0, 0, 1, {a: 1, b: 'one', c: [1]}, {a: 1, b: 'f'})",
            "INSERT INTO {t} (pk, ck, v, u, fu) VALUES (0, 1, 1, {a: 1, b: 'one', c: [1]}, {a: 1, b: 'f'})",
            "INSERT INTO {t} (pk, ck, v, u, fu) VALUES (0, 2, 1, {a: 1, b: 'one', c: [1]}, {a: 1, b: 'f'})",
            "INSERT INTO {t} (pk, ck, v, u, fu) VALUES (0, 3, 1, {a: 1, b: 'one', c: [1]}, {a: 1, b: 'f'})",
            "INSERT INTO {t} (pk, ck, v, u) VALUES (0, 4, 1, {a: 1})",
            // Field updates, one and several.
            "UPDATE {t} SET u.a = 2 WHERE pk = 0 AND ck = 0",
            "UPDATE {t} SET u.b = 'two', u.c = [2, 2] WHERE pk = 0 AND ck = 1",
            // Field nulls.
            "UPDATE {t} SET u.b = null WHERE pk = 0 AND ck = 2",
            "UPDATE {t} SET u.a = null, u.c = [3] WHERE pk = 0 AND ck = 3",
            // Whole overwrites (with missing fields), null, delete.
            "UPDATE {t} SET u = {a: 9} WHERE pk = 0 AND ck = 4",
            "UPDATE {t} SET u = {a: 10, b: 'ten', c: []}, fu = {b: 'g'} WHERE pk = 0 AND ck = 0",
            "UPDATE {t} SET u = null WHERE pk = 0 AND ck = 1",
            "DELETE u, fu FROM {t} WHERE pk = 0 AND ck = 2",
            // Field updates of rows without the UDT, then a field write after an overwrite.
            "UPDATE {t} SET u.b = 'fresh' WHERE pk = 1 AND ck = 0",
            "UPDATE {t} SET u = {a: 5, b: 'five'} WHERE pk = 1 AND ck = 1",
            "UPDATE {t} SET u.a = 6 WHERE pk = 1 AND ck = 1",
            "INSERT INTO {t} (pk, ck, v, u) VALUES (1, 2, 3, null)",
            // TTLs.
            "INSERT INTO {t} (pk, ck, v, u, fu) VALUES (2, 0, 20, {a: 20, b: 'ttl'}, {a: 2}) USING TTL 3600",
            "UPDATE {t} USING TTL 1800 SET u.a = 21, fu = {a: 3} WHERE pk = 2 AND ck = 0",
            "UPDATE {t} USING TTL 3600 SET u = {a: 22} WHERE pk = 2 AND ck = 1",
            // Row delete.
            "DELETE FROM {t} WHERE pk = 0 AND ck = 3",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statics_frozen_collections_and_tuples() {
    let (_front, session, ks) = setup("cdc_repl_static").await;
    let columns = "(pk int, ck int, s int static, st text static, ss set<int> static, \
        fl frozen<list<int>>, fs frozen<set<text>>, fm frozen<map<int, frozen<list<text>>>>, \
        tu tuple<int, text, boolean>, nt frozen<tuple<int, frozen<map<text, int>>>>, \
        m map<int, frozen<set<int>>>, PRIMARY KEY (pk, ck))";
    let atomic = &["s", "st", "fl", "fs", "fm", "tu", "nt"];
    replicate_and_compare(
        &session,
        &ks,
        columns,
        atomic,
        &[
            // Statics: insert with a row, static only, update, null, delete, TTL.
            "INSERT INTO {t} (pk, ck, s, st, fl) VALUES (0, 0, 1, 'static', [1, 2])",
            "INSERT INTO {t} (pk, s, ss) VALUES (1, 10, {1, 2})",
            "UPDATE {t} SET s = 2 WHERE pk = 0",
            "UPDATE {t} SET st = null, ss = ss + {3} WHERE pk = 1",
            "UPDATE {t} SET ss = ss - {1} WHERE pk = 1",
            "UPDATE {t} SET s = 3, fl = [3] WHERE pk = 2 AND ck = 0",
            "DELETE st FROM {t} WHERE pk = 0",
            "UPDATE {t} USING TTL 3600 SET s = 4, ss = {9} WHERE pk = 3",
            "INSERT INTO {t} (pk, ck, s) VALUES (4, 0, 40) USING TTL 3600",
            "DELETE s FROM {t} WHERE pk = 2",
            // A partition delete takes the statics with it; then a static again.
            "INSERT INTO {t} (pk, ck, s, st) VALUES (5, 0, 50, 'gone')",
            "DELETE FROM {t} WHERE pk = 5",
            "UPDATE {t} SET st = 'back' WHERE pk = 5",
            // Frozen collections and tuples: insert, overwrite, null, delete, TTL.
            "INSERT INTO {t} (pk, ck, fl, fs, fm, tu, nt) VALUES (6, 0, [1, 1, 2], {'a', 'b'}, {1: ['x'], 2: []}, (1, 'one', true), (1, {'k': 1}))",
            "INSERT INTO {t} (pk, ck, fl, fs, fm, tu, nt) VALUES (6, 1, [], {}, {}, (null, null, null), (null, null))",
            "INSERT INTO {t} (pk, ck, fl, fs, fm, tu, nt) VALUES (6, 2, [1], {'a'}, {1: ['y']}, (2, 'two', false), (2, {}))",
            "UPDATE {t} SET fl = [4, 5], tu = (3, null, true) WHERE pk = 6 AND ck = 0",
            "UPDATE {t} SET fs = null, nt = (5, {'z': 26}) WHERE pk = 6 AND ck = 1",
            "DELETE fm, tu FROM {t} WHERE pk = 6 AND ck = 2",
            "UPDATE {t} USING TTL 3600 SET tu = (7, 'ttl', false), fm = {7: ['t']} WHERE pk = 6 AND ck = 3",
            // A map of frozen sets: elements added, removed, overwritten.
            "UPDATE {t} SET m = {1: {1}, 2: {2, 3}} WHERE pk = 7 AND ck = 0",
            "UPDATE {t} SET m = m + {3: {}} WHERE pk = 7 AND ck = 0",
            "UPDATE {t} SET m[1] = {10} WHERE pk = 7 AND ck = 0",
            "DELETE m[2] FROM {t} WHERE pk = 7 AND ck = 0",
            // Row delete.
            "DELETE FROM {t} WHERE pk = 0 AND ck = 0",
        ],
    )
    .await;
}
