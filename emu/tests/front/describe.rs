//! ScyllaDB's DESCRIBE through the front, checked as ScyllaDB's own
//! test/cqlpy/test_describe.py checks it: the CDC log hidden from listings
//! and replaced by its ALTER row (`test_hide_cdc_table`, including the
//! replay of `DESC KEYSPACE` after dropping the base), the log described as
//! its commented CREATE (`test_describe_cdc_log_table_format` and
//! `_create_statement`, exact texts), and an altered log property shown
//! (`test_describe_cdc_log_table_opts`).

use scylla::client::session::Session;
use shardwise_emu::describe::{CDC_LOG_DESC_PREFIX, CDC_LOG_DESC_SUFFIX};
use shardwise_emu::FrontConfig;

use crate::support::{keyspace, session, start_front};

type DescRow = (Option<String>, String, String, Option<String>);

async fn describe(session: &Session, cql: &str) -> Vec<DescRow> {
    let rows = session.query_unpaged(cql, &[]).await.expect(cql).into_rows_result().expect("rows");
    let specs: Vec<(String, String, String)> = rows
        .column_specs()
        .iter()
        .map(|s| (s.table_spec().ks_name().to_string(), s.table_spec().table_name().to_string(), s.name().to_string()))
        .collect();
    assert_eq!(specs.len(), 4, "{cql}: {specs:?}");
    for (i, name) in ["keyspace_name", "type", "name", "create_statement"].iter().enumerate() {
        assert_eq!(specs[i], ("system".to_string(), "describe".to_string(), name.to_string()), "{cql}");
    }
    rows.rows::<DescRow>().expect("typed").map(|r| r.expect("row")).collect()
}

async fn tables(session: &Session, ks: &str) -> Vec<String> {
    let rows = session
        .query_unpaged("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?", (ks,))
        .await
        .expect("tables")
        .into_rows_result()
        .expect("rows");
    let mut names: Vec<String> = rows.rows::<(String,)>().expect("typed").map(|r| r.expect("row").0).collect();
    names.sort();
    names
}

/// Whitespace collapsed, as test_describe.py's `format_create_statement`.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_hides_the_cdc_log_and_replays() {
    let front = start_front(FrontConfig::default());
    let s = session(&front).await;
    let ks = keyspace(&s, "describe").await;
    let log = "t_scylla_cdc_log";
    s.query_unpaged(
        format!("CREATE TABLE {ks}.t (p int PRIMARY KEY, v vector<float, 3>) WITH cdc = {{'enabled': true}}"),
        &[],
    )
    .await
    .expect("create");

    // DESC TABLES (a listing: three columns) has no log.
    s.use_keyspace(&ks, false).await.expect("use");
    let listing = s.query_unpaged("DESC TABLES", &[]).await.expect("tables").into_rows_result().expect("rows");
    assert_eq!(listing.column_specs().len(), 3);
    let names: Vec<(String, String, String)> =
        listing.rows::<(String, String, String)>().expect("typed").map(|r| r.expect("row")).collect();
    assert_eq!(names, vec![(ks.clone(), "table".to_string(), "t".to_string())]);

    // DESC KEYSPACE: keyspace, table, then the log's ALTER.
    let desc = describe(&s, &format!("DESC KEYSPACE {ks}")).await;
    let kinds: Vec<(&str, &str)> = desc.iter().map(|r| (r.1.as_str(), r.2.as_str())).collect();
    assert_eq!(kinds, vec![("keyspace", ks.as_str()), ("table", "t"), ("table", log)]);
    let alter = desc[2].3.clone().expect("statement");
    assert!(
        alter.starts_with(&format!("ALTER TABLE {ks}.{log} WITH bloom_filter_fp_chance = 0.01\n    AND ")),
        "{alter}"
    );
    assert!(alter.ends_with(";\n"), "{alter}");
    let create_ks = desc[0].3.clone().expect("statement");
    assert_eq!(
        create_ks,
        format!(
            "CREATE KEYSPACE {ks} WITH replication = {{'class': 'org.apache.cassandra.locator.SimpleStrategy', \
             'replication_factor': '1'}} AND durable_writes = true AND tablets = {{'enabled': false}};"
        )
    );
    let base = desc[1].3.clone().expect("statement");
    assert!(base.contains("\n    AND cdc = {'delta': 'full', 'enabled': 'true', 'postimage': 'false', 'preimage': 'false', 'ttl': '86400'}"), "{base}");

    // DESC SCHEMA: the log only as the ALTER (other tests' keyspaces on the
    // shared server may have logs of the same name: only this keyspace's).
    let schema = describe(&s, "DESC SCHEMA").await;
    let logs: Vec<&DescRow> = schema.iter().filter(|r| r.0.as_deref() == Some(ks.as_str()) && r.2 == log).collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0].3.as_deref(), Some(alter.as_str()));
    // DESC TABLE t: the same group, the ALTER last.
    let table = describe(&s, "DESC TABLE t").await;
    assert_eq!(table.len(), 2);
    assert_eq!(table[1].3.as_deref(), Some(alter.as_str()));

    // The log itself: one row, the commented CREATE.
    let [row] = <[DescRow; 1]>::try_from(describe(&s, &format!("DESC TABLE {ks}.{log}")).await).expect("one row");
    assert_eq!((row.0.as_deref(), row.1.as_str(), row.2.as_str()), (Some(ks.as_str()), "table", log));
    let statement = row.3.expect("statement");
    assert!(statement.starts_with(CDC_LOG_DESC_PREFIX) && statement.ends_with(CDC_LOG_DESC_SUFFIX), "{statement}");
    let body = &statement[CDC_LOG_DESC_PREFIX.len()..statement.len() - CDC_LOG_DESC_SUFFIX.len()];
    let expected = format!(
        "CREATE TABLE {ks}.{log} ( \"cdc$stream_id\" blob, \"cdc$time\" timeuuid, \"cdc$batch_seq_no\" int, \
         \"cdc$deleted_v\" boolean, \"cdc$end_of_batch\" boolean, \"cdc$operation\" tinyint, \"cdc$ttl\" bigint, \
         p int, v vector<float, 3>, PRIMARY KEY (\"cdc$stream_id\", \"cdc$time\", \"cdc$batch_seq_no\") ) \
         WITH CLUSTERING ORDER BY (\"cdc$time\" ASC, \"cdc$batch_seq_no\" ASC) AND bloom_filter_fp_chance = 0.01 \
         AND caching = {{'enabled': 'false', 'keys': 'NONE', 'rows_per_partition': 'NONE'}} \
         AND comment = 'CDC log for {ks}.t' AND compaction = {{'class': 'TimeWindowCompactionStrategy', \
         'compaction_window_size': '60', 'compaction_window_unit': 'MINUTES', \
         'expired_sstable_check_frequency_seconds': '1800'}} \
         AND compression = {{'sstable_compression': 'LZ4WithDictsCompressor'}} \
         AND crc_check_chance = 1 AND default_time_to_live = 0 AND gc_grace_seconds = 0 \
         AND max_index_interval = 2048 AND memtable_flush_period_in_ms = 0 AND min_index_interval = 128 \
         AND speculative_retry = '99.0PERCENTILE' \
         AND tombstone_gc = {{'mode': 'timeout', 'propagation_delay_in_seconds': '3600'}};"
    );
    assert_eq!(collapse(body), expected);

    // An altered log property shows.
    s.query_unpaged(format!("ALTER TABLE {ks}.{log} WITH gc_grace_seconds = 31"), &[]).await.expect("alter log");
    let [row] = <[DescRow; 1]>::try_from(describe(&s, &format!("DESCRIBE TABLE {ks}.{log} WITH INTERNALS")).await)
        .expect("one row");
    assert!(row.3.as_deref().is_some_and(|c| c.contains("\n    AND gc_grace_seconds = 31\n")), "{row:?}");

    // Replaying DESC KEYSPACE after dropping the base recreates both.
    let desc = describe(&s, &format!("DESC KEYSPACE {ks}")).await;
    s.query_unpaged(format!("DROP TABLE {ks}.t"), &[]).await.expect("drop");
    assert!(tables(&s, &ks).await.is_empty());
    for row in &desc[1..] {
        s.query_unpaged(row.3.clone().expect("statement"), &[]).await.expect("replay");
    }
    assert_eq!(tables(&s, &ks).await, vec!["t".to_string(), log.to_string()]);
    assert_eq!(describe(&s, &format!("DESC KEYSPACE {ks}")).await, desc);

    // ScyllaDB's errors.
    let err = s.query_unpaged("DESC TABLE nope", &[]).await.expect_err("no table").to_string();
    assert!(err.contains(&format!("Table 'nope' not found in keyspace '{ks}'")), "{err}");
    let err = s.query_unpaged("DESC KEYSPACE nope_ks", &[]).await.expect_err("no keyspace").to_string();
    assert!(err.contains("'nope_ks' not found in keyspaces"), "{err}");
    s.query_unpaged(format!("DROP KEYSPACE {ks}"), &[]).await.expect("drop keyspace");
}

/// The compressor of a table, as ScyllaDB 2026 prints it: its default
/// (`LZ4WithDictsCompressor`, `db/config.cc`; test_describe.py's CDC log of
/// a vector table) when none is given or that one is, the qualified name
/// of a Cassandra-compatible one asked for by name with its chunk length
/// (`test_describe_secondary_index`), and each the same after `ALTER`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_prints_the_compressor_scylla_uses() {
    let front = start_front(FrontConfig::default());
    let s = session(&front).await;
    let ks = keyspace(&s, "describe_compression").await;
    let dicts = "compression = {'sstable_compression': 'LZ4WithDictsCompressor'}";
    let lz4 = "compression = {'chunk_length_in_kb': '64', 'sstable_compression': 'org.apache.cassandra.io.compress.LZ4Compressor'}";
    let given = [
        ("plain", ""),
        ("dicts", " WITH compression = {'sstable_compression': 'LZ4WithDictsCompressor'}"),
        ("lz4", " WITH compression = {'sstable_compression': 'LZ4Compressor', 'chunk_length_in_kb': 64}"),
    ];
    for (table, with) in given {
        s.query_unpaged(format!("CREATE TABLE {ks}.{table} (p int PRIMARY KEY){with}"), &[]).await.expect("create");
    }
    let printed = |rows: Vec<DescRow>| rows.into_iter().next().and_then(|r| r.3).expect("a statement");
    for (table, want) in [("plain", dicts), ("dicts", dicts), ("lz4", lz4)] {
        let desc = printed(describe(&s, &format!("DESC TABLE {ks}.{table}")).await);
        assert!(collapse(&desc).contains(want), "{table}: {desc}");
    }
    s.query_unpaged(
        format!("ALTER TABLE {ks}.plain WITH compression = {{'sstable_compression': 'LZ4Compressor'}}"),
        &[],
    )
    .await
    .expect("alter to LZ4");
    s.query_unpaged(
        format!("ALTER TABLE {ks}.lz4 WITH compression = {{'sstable_compression': 'LZ4WithDictsCompressor'}}"),
        &[],
    )
    .await
    .expect("alter to the dictionary LZ4");
    let plain = printed(describe(&s, &format!("DESC TABLE {ks}.plain")).await);
    assert!(
        collapse(&plain)
            .contains("compression = {'sstable_compression': 'org.apache.cassandra.io.compress.LZ4Compressor'}"),
        "{plain}"
    );
    let altered = printed(describe(&s, &format!("DESC TABLE {ks}.lz4")).await);
    assert!(collapse(&altered).contains(dicts), "{altered}");
}
