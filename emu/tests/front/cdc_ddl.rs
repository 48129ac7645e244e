//! CDC DDL and Scylla-only syntax through the front, with the official
//! `scylla` crate as the client: `WITH cdc = {...}` creates the base table
//! and a log table with Scylla's schema, `system_schema.scylla_tables`
//! reports the CDC partitioner, `BYPASS CACHE` and `USING TIMEOUT` work.

use std::collections::BTreeMap;
use std::sync::Arc;

use scylla::client::session::Session;
use shardwise_emu::{FrontConfig, PreImage};

use crate::support::{keyspace, session, start_front};

async fn columns(session: &Session, ks: &str, table: &str) -> BTreeMap<String, (String, String)> {
    let rows = session
        .query_unpaged(
            "SELECT column_name, kind, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
            (ks, table),
        )
        .await
        .expect("columns")
        .into_rows_result()
        .expect("rows");
    rows.rows::<(String, String, String)>()
        .expect("typed")
        .map(|r| {
            let (name, kind, typ) = r.expect("row");
            (name, (kind, typ))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_ddl_creates_scylla_shaped_log() {
    let front = start_front(FrontConfig::default());
    let session = Arc::new(session(&front).await);
    let ks = keyspace(&session, "emu_cdc_ddl").await;
    session
        .query_unpaged(
            format!(
                "CREATE TABLE {ks}.t (pk int, ck int, v text, m map<int, text>, l list<int>, s set<text>, \
                 PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true, 'preimage': 'full', 'ttl': 3600}} AND comment = 'base'"
            ),
            &[],
        )
        .await
        .expect("CREATE TABLE ... WITH cdc");

    // The log table has Scylla's schema.
    let log = columns(&session, &ks, "t_scylla_cdc_log").await;
    let expect: &[(&str, &str, &str)] = &[
        ("cdc$stream_id", "partition_key", "blob"),
        ("cdc$time", "clustering", "timeuuid"),
        ("cdc$batch_seq_no", "clustering", "int"),
        ("cdc$operation", "regular", "tinyint"),
        ("cdc$ttl", "regular", "bigint"),
        ("cdc$end_of_batch", "regular", "boolean"),
        ("pk", "regular", "int"),
        ("ck", "regular", "int"),
        ("v", "regular", "text"),
        ("cdc$deleted_v", "regular", "boolean"),
        ("m", "regular", "frozen<map<int, text>>"),
        ("cdc$deleted_m", "regular", "boolean"),
        ("cdc$deleted_elements_m", "regular", "frozen<set<int>>"),
        ("l", "regular", "frozen<map<timeuuid, int>>"),
        ("cdc$deleted_l", "regular", "boolean"),
        ("cdc$deleted_elements_l", "regular", "frozen<set<timeuuid>>"),
        ("s", "regular", "frozen<set<text>>"),
        ("cdc$deleted_s", "regular", "boolean"),
        ("cdc$deleted_elements_s", "regular", "frozen<set<text>>"),
    ];
    let want: BTreeMap<String, (String, String)> =
        expect.iter().map(|(n, k, t)| (n.to_string(), (k.to_string(), t.to_string()))).collect();
    assert_eq!(log, want);
    // The base table is as written, without Scylla's option.
    assert_eq!(columns(&session, &ks, "t").await.len(), 6);
    let (comment, gc): (String, i32) = session
        .query_unpaged(
            "SELECT comment, gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?",
            (&ks, "t_scylla_cdc_log"),
        )
        .await
        .expect("tables")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("row");
    assert_eq!(comment, format!("CDC log for {ks}.t"));
    assert_eq!(gc, 0);

    // Scylla's per-table partitioner.
    let partitioners: BTreeMap<String, Option<String>> = session
        .query_unpaged(
            "SELECT table_name, partitioner FROM system_schema.scylla_tables WHERE keyspace_name = ?",
            (&ks,),
        )
        .await
        .expect("scylla_tables")
        .into_rows_result()
        .expect("rows")
        .rows::<(String, Option<String>)>()
        .expect("typed")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(partitioners.get("t_scylla_cdc_log"), Some(&Some("com.scylladb.dht.CDCPartitioner".to_string())));
    assert_eq!(partitioners.get("t"), Some(&None));
    let options = front.cdc_options(&ks, "t").expect("options kept");
    assert!(options.enabled);
    assert_eq!((options.preimage, options.ttl), (PreImage::Full, 3600));

    // The driver's metadata learns the CDC partitioner from scylla_tables.
    session.refresh_metadata().await.expect("refresh");
    let state = session.get_cluster_state();
    let log_meta = state.get_keyspace(&ks).and_then(|k| k.tables.get("t_scylla_cdc_log")).expect("log table metadata");
    assert_eq!(log_meta.partitioner.as_deref(), Some("com.scylladb.dht.CDCPartitioner"));

    // Scylla-only syntax.
    session
        .query_unpaged(format!("INSERT INTO {ks}.t (pk, ck, v) VALUES (1, 2, 'x') USING TTL 100 AND TIMEOUT 5s"), &[])
        .await
        .expect("USING TIMEOUT on INSERT");
    let (v,): (String,) = session
        .query_unpaged(format!("SELECT v FROM {ks}.t WHERE pk = 1 BYPASS CACHE"), &[])
        .await
        .expect("BYPASS CACHE")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("row");
    assert_eq!(v, "x");
    session
        .query_unpaged(format!("SELECT v FROM {ks}.t WHERE pk = 1 USING TIMEOUT 5s"), &[])
        .await
        .expect("USING TIMEOUT on SELECT");
    let prepared = session
        .prepare(format!("SELECT v FROM {ks}.t WHERE pk = ? AND ck = ? BYPASS CACHE USING TIMEOUT 200ms"))
        .await
        .expect("prepare with Scylla syntax");
    let (v,): (String,) = session
        .execute_unpaged(&prepared, (1, 2))
        .await
        .expect("execute")
        .into_rows_result()
        .expect("rows")
        .single_row()
        .expect("row");
    assert_eq!(v, "x");

    // ALTER TABLE ADD is mirrored into the log; disabling CDC keeps the log.
    session.query_unpaged(format!("ALTER TABLE {ks}.t ADD w bigint"), &[]).await.expect("alter add");
    let log = columns(&session, &ks, "t_scylla_cdc_log").await;
    assert_eq!(log.get("w").map(|c| c.1.as_str()), Some("bigint"));
    assert!(log.contains_key("cdc$deleted_w"));
    session
        .query_unpaged(format!("ALTER TABLE {ks}.t WITH cdc = {{'enabled': false}}"), &[])
        .await
        .expect("disable cdc");
    assert!(!front.cdc_options(&ks, "t").expect("options").enabled);
    assert!(!columns(&session, &ks, "t_scylla_cdc_log").await.is_empty(), "the log is kept");
    session
        .query_unpaged(format!("ALTER TABLE {ks}.t WITH cdc = {{'enabled': true}}"), &[])
        .await
        .expect("re-enable cdc");

    // Scylla's validation.
    let err = session
        .query_unpaged(format!("CREATE TABLE {ks}.bad (pk int PRIMARY KEY) WITH cdc = {{'bogus': 1}}"), &[])
        .await
        .expect_err("unknown option");
    assert!(err.to_string().contains("Invalid CDC option: bogus"), "{err}");
    let err = session
        .query_unpaged(
            format!("CREATE TABLE {ks}.cnt (pk int PRIMARY KEY, c counter) WITH cdc = {{'enabled': true}}"),
            &[],
        )
        .await
        .expect_err("counters");
    assert!(err.to_string().contains("Counter support not implemented"), "{err}");
    assert!(columns(&session, &ks, "cnt").await.is_empty(), "no base table without its log");

    // Dropping the base drops the log.
    session.query_unpaged(format!("DROP TABLE {ks}.t"), &[]).await.expect("drop");
    assert!(columns(&session, &ks, "t_scylla_cdc_log").await.is_empty());
    assert!(front.cdc_options(&ks, "t").is_none());
    println!("{}", front.stats());
}
