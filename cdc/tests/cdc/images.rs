//! Changes with their images, through the emulation front: tables with
//! `preimage: true`, `preimage: 'full'` and `postimage: true`; an insert of
//! a new row, an update, a batch over two rows of one partition, and a row
//! delete, each delta paired with the images of its own row; and the
//! Debezium envelopes made of them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use shardwise::protocol::types::CqlValue;
use shardwise_cdc::debezium::{envelope, Source};
use shardwise_cdc::{CdcReaderBuilder, ChangeWithImages, Consumer, GroupInfo, WithImages};

use crate::common::{front_and_keyspace, run};

type Seen = Arc<Mutex<Vec<ChangeWithImages>>>;

/// Reads `ks.table` from `start` to now with images paired.
async fn read(session: &shardwise::Session, ks: &str, table: &str, start: SystemTime) -> Vec<ChangeWithImages> {
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let factory = move |_: &GroupInfo| -> Box<dyn Consumer> {
        let sink = sink.clone();
        Box::new(WithImages::new(move |c: ChangeWithImages| {
            sink.lock().expect("lock").push(c);
            Ok(())
        }))
    };
    let reader = CdcReaderBuilder::new(session.clone(), ks, table)
        .start(start)
        .end(SystemTime::now() + Duration::from_millis(300))
        .window_size(Duration::from_secs(5))
        .safety_interval(Duration::from_millis(200))
        .sleep_interval(Duration::from_millis(50))
        .build(Arc::new(factory))
        .await
        .expect("reader");
    tokio::time::timeout(Duration::from_secs(60), reader.join()).await.expect("reader finishes").expect("reader ok");
    let mut seen = seen.lock().expect("lock").clone();
    seen.sort_by_key(|c| (c.delta.time_micros(), c.delta.batch_seq_no));
    seen
}

fn int(c: &shardwise_cdc::Change, column: &str) -> String {
    match c.value(column) {
        Some(CqlValue::Int(v)) => v.to_string(),
        _ => "-".into(),
    }
}

/// Each change as "operation ck v w | pre v w | post v w".
fn show(changes: &[ChangeWithImages]) -> Vec<String> {
    let image = |c: Option<&shardwise_cdc::Change>| match c {
        Some(c) => format!("v={} w={}", int(c, "v"), int(c, "w")),
        None => "-".into(),
    };
    changes
        .iter()
        .map(|c| {
            let d = &c.delta;
            format!(
                "{:?} ck={} v={} w={} | pre {} | post {}",
                d.operation,
                int(d, "ck"),
                int(d, "v"),
                int(d, "w"),
                image(c.preimage.as_ref()),
                image(c.postimage.as_ref())
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_with_the_images_of_its_row() {
    let (_front, session, ks) = front_and_keyspace("cdc_images").await;
    let tables = [
        ("pre_on", "'preimage': true"),
        ("pre_full", "'preimage': 'full'"),
        ("post_on", "'postimage': true"),
        ("both", "'preimage': 'full', 'postimage': true"),
    ];
    let start = SystemTime::now() - Duration::from_secs(1);
    for (table, options) in tables {
        run(
            &session,
            &format!(
                "CREATE TABLE {ks}.{table} (pk int, ck int, v int, w int, PRIMARY KEY (pk, ck)) \
                 WITH cdc = {{'enabled': true, {options}}}"
            ),
        )
        .await;
        run(&session, &format!("INSERT INTO {ks}.{table} (pk, ck, v, w) VALUES (1, 1, 10, 100)")).await;
        run(&session, &format!("UPDATE {ks}.{table} SET v = 11 WHERE pk = 1 AND ck = 1")).await;
        run(&session, &format!("INSERT INTO {ks}.{table} (pk, ck, v, w) VALUES (1, 2, 20, 200)")).await;
        run(
            &session,
            &format!(
                "BEGIN UNLOGGED BATCH UPDATE {ks}.{table} SET v = 12 WHERE pk = 1 AND ck = 1; \
                 UPDATE {ks}.{table} SET v = 21 WHERE pk = 1 AND ck = 2; APPLY BATCH"
            ),
        )
        .await;
        run(&session, &format!("DELETE FROM {ks}.{table} WHERE pk = 1 AND ck = 2")).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Scylla's images: none for a row that did not exist; `true` holds the
    // columns the write changed (a row delete changes them all), `'full'`
    // the whole row; a post-image the whole row after, none for a delete.
    let deltas = [
        "Insert ck=1 v=10 w=100",
        "Update ck=1 v=11 w=-",
        "Insert ck=2 v=20 w=200",
        "Update ck=1 v=12 w=-",
        "Update ck=2 v=21 w=-",
        "RowDelete ck=2 v=- w=-",
    ];
    let pre_on = ["-", "v=10 w=-", "-", "v=11 w=-", "v=20 w=-", "v=21 w=200"];
    let pre_full = ["-", "v=10 w=100", "-", "v=11 w=100", "v=20 w=200", "v=21 w=200"];
    let post = ["v=10 w=100", "v=11 w=100", "v=20 w=200", "v=12 w=100", "v=21 w=200", "-"];
    let none = ["-"; 6];
    for (table, pre, post) in
        [("pre_on", pre_on, none), ("pre_full", pre_full, none), ("post_on", none, post), ("both", pre_full, post)]
    {
        let seen = read(&session, &ks, table, start).await;
        let want: Vec<String> = (0..6).map(|i| format!("{} | pre {} | post {}", deltas[i], pre[i], post[i])).collect();
        assert_eq!(show(&seen), want, "{table}");
        // Debezium envelopes: `before` and `after` from the images where the table has them.
        let source = Source { name: "test", keyspace: &ks, table };
        let update = envelope(&seen[1], &source, 0).expect("an update makes an envelope");
        assert_eq!(update.key, r#"{"ck":1,"pk":1}"#);
        let (before, after) = match table {
            "pre_on" => {
                (r#"{"ck":1,"pk":1,"v":{"value":10},"w":null}"#, r#"{"ck":1,"pk":1,"v":{"value":11},"w":null}"#)
            }
            "pre_full" => (
                r#"{"ck":1,"pk":1,"v":{"value":10},"w":{"value":100}}"#,
                r#"{"ck":1,"pk":1,"v":{"value":11},"w":null}"#,
            ),
            "post_on" => ("null", r#"{"ck":1,"pk":1,"v":{"value":11},"w":{"value":100}}"#),
            _ => (
                r#"{"ck":1,"pk":1,"v":{"value":10},"w":{"value":100}}"#,
                r#"{"ck":1,"pk":1,"v":{"value":11},"w":{"value":100}}"#,
            ),
        };
        let want = format!(r#""before":{before},"after":{after},"op":"u""#);
        assert!(update.value.contains(&want), "{table}: {} lacks {want}", update.value);
        let delete = envelope(&seen[5], &source, 0).expect("a delete makes an envelope");
        assert!(delete.value.contains(r#""after":null,"op":"d""#), "{table}: {}", delete.value);
    }
}
