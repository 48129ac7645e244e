//! `SCYLLA_USE_METADATA_ID` through the front (docs/protocol.md §1.8): the
//! shardwise driver negotiates it on v4, so its prepared statements skip the
//! result metadata, and a table altered under a prepared `SELECT *` is
//! followed through `Metadata_changed`, as ScyllaDB does it. The front
//! counts the answers it sent without columns and those that told of a
//! change, so the test sees that the metadata was really skipped.

use std::time::Duration;

use shardwise::protocol::consistency::Consistency;
use shardwise::{SessionBuilder, Statement};
use shardwise_emu::FrontConfig;

use crate::support::start_front;

#[tokio::test]
async fn a_prepared_select_skips_metadata_on_v4_and_follows_alter_table() {
    let front = start_front(FrontConfig { shards: 2, ..FrontConfig::default() });
    let s = SessionBuilder::new()
        .known_node_addr(front.addr())
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session through the front");
    // Every connection negotiated the extension and knows its node's host id
    // from the handshake (SCYLLA_HOST_ID), the one system.local names.
    let local = s.execute(&Statement::new("SELECT host_id FROM system.local"), ()).await.expect("local");
    let host_id = local.first_row::<(uuid::Uuid,)>().expect("uuid").expect("a row").0;
    let connections = s.connections();
    assert!(!connections.is_empty());
    for c in &connections {
        assert!(c.uses_metadata_id(), "{}: SCYLLA_USE_METADATA_ID not negotiated", c.addr());
        assert_eq!(c.host_id(), Some(host_id), "{}: host id from SUPPORTED", c.addr());
    }

    let ks = testkit::fresh_keyspace("metaid");
    s.execute(&Statement::new(testkit::create_keyspace(&ks, 1)), ()).await.expect("keyspace");
    s.execute(&Statement::new(format!("CREATE TABLE {ks}.t (pk int PRIMARY KEY, a int)")), ()).await.expect("ddl");
    s.execute(&Statement::new(format!("INSERT INTO {ks}.t (pk, a) VALUES (1, 10)")), ()).await.expect("insert");
    let select = s.prepare(format!("SELECT * FROM {ks}.t WHERE pk = ?")).await.expect("prepare");
    let before = front.stats();
    for _ in 0..3 {
        let r = s.execute(&select, (1i32,)).await.expect("select");
        assert_eq!(r.first_row::<(i32, i32)>().expect("two columns"), Some((1, 10)));
    }
    let skipped = front.stats().metadata_skipped - before.metadata_skipped;
    assert_eq!(skipped, 3, "the result metadata was not skipped");

    s.execute(&Statement::new(format!("ALTER TABLE {ks}.t ADD b text")), ()).await.expect("alter");
    s.execute(&Statement::new(format!("UPDATE {ks}.t SET b = 'new' WHERE pk = 1")), ()).await.expect("update");
    // Cassandra forgets the statement on ALTER (the next EXECUTE would be
    // answered UNPREPARED and prepared again, columns and id new): another
    // client prepares it first, so this one's EXECUTE reaches a server that
    // knows the statement, with the id of the old columns.
    let other = SessionBuilder::new()
        .known_node_addr(front.addr())
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("another session");
    other.prepare(format!("SELECT * FROM {ks}.t WHERE pk = ?")).await.expect("prepared again elsewhere");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = front.stats();
    let r = s.execute(&select, (1i32,)).await.expect("select after alter");
    assert_eq!(r.first_row::<(i32, i32, Option<&str>)>().expect("the new column"), Some((1, 10, Some("new"))));
    assert_eq!(select.result_specs().expect("specs").len(), 3, "cache updated");
    let after = front.stats();
    assert_eq!(after.metadata_changed - before.metadata_changed, 1, "Metadata_changed sent once");
    // The new id is current: the metadata is skipped again, the new column read.
    for _ in 0..3 {
        let r = s.execute(&select, (1i32,)).await.expect("select");
        assert_eq!(r.first_row::<(i32, i32, Option<&str>)>().expect("three columns"), Some((1, 10, Some("new"))));
    }
    assert_eq!(front.stats().metadata_skipped - after.metadata_skipped, 3, "skipped again with the new id");
    assert_eq!(front.stats().metadata_changed, after.metadata_changed, "no change told twice");
}

/// The official driver negotiates the extension too (scylla 1.9): its
/// prepared `SELECT *` through the front skips the metadata and reads the
/// column added meanwhile, told by `Metadata_changed`.
#[tokio::test]
async fn the_official_driver_follows_alter_table_with_metadata_ids() {
    let front = start_front(FrontConfig::default());
    let s = crate::support::session(&front).await;
    let ks = crate::support::keyspace(&s, "metaid_official").await;
    s.query_unpaged(format!("CREATE TABLE {ks}.t (pk int PRIMARY KEY, a int)"), &[]).await.expect("ddl");
    s.query_unpaged(format!("INSERT INTO {ks}.t (pk, a) VALUES (1, 10)"), &[]).await.expect("insert");
    let text = format!("SELECT * FROM {ks}.t WHERE pk = ?");
    let select = s.prepare(text.as_str()).await.expect("prepare");
    let before = front.stats();
    let rows = s.execute_unpaged(&select, (1i32,)).await.expect("select").into_rows_result().expect("rows");
    assert_eq!(rows.first_row::<(i32, i32)>().expect("two columns"), (1, 10));
    assert_eq!(front.stats().metadata_skipped - before.metadata_skipped, 1, "metadata skipped");
    s.query_unpaged(format!("ALTER TABLE {ks}.t ADD b text"), &[]).await.expect("alter");
    s.query_unpaged(format!("UPDATE {ks}.t SET b = 'new' WHERE pk = 1"), &[]).await.expect("update");
    // Prepared again by another client, so the EXECUTE is not UNPREPARED.
    crate::support::session(&front).await.prepare(text.as_str()).await.expect("prepared elsewhere");
    let before = front.stats();
    let rows = s.execute_unpaged(&select, (1i32,)).await.expect("select").into_rows_result().expect("rows");
    assert_eq!(rows.first_row::<(i32, i32, Option<String>)>().expect("three columns"), (1, 10, Some("new".into())));
    assert_eq!(front.stats().metadata_changed - before.metadata_changed, 1, "Metadata_changed");
}
