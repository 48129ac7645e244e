//! `Session::schema` against Cassandra (with materialized views on): every
//! column kind and type, a user type nesting another, an index and a view;
//! after each schema change the snapshot follows within the event delay,
//! and a snapshot taken before never changes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shardwise::protocol::consistency::Consistency;
use shardwise::session::schema::{ClusteringOrder, ColumnKind, Schema, TableMetadata};
use shardwise::{Session, SessionBuilder, Statement};
use testkit::{Node, NodeConfig};

async fn run(s: &Session, cql: &str) {
    s.execute(&Statement::new(cql.to_owned()), ()).await.unwrap_or_else(|e| panic!("{cql}: {e}"));
}

/// Waits until the session's schema satisfies `ok`.
async fn until(s: &Session, what: &str, ok: impl Fn(&Schema) -> bool) -> Arc<Schema> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let schema = s.schema().await.expect("schema");
        if ok(&schema) {
            return schema;
        }
        assert!(Instant::now() < deadline, "the schema never showed {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn table<'a>(schema: &'a Schema, ks: &str, t: &str) -> &'a TableMetadata {
    schema.keyspaces.get(ks).and_then(|k| k.tables.get(t)).unwrap_or_else(|| panic!("table {ks}.{t}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_metadata_follows_every_change() {
    let _turn = crate::common::own_servers().await;
    let config =
        NodeConfig::default().with_yaml("materialized_views_enabled: true\n").with_free_ports().expect("ports");
    let node = tokio::task::spawn_blocking(move || Node::start(config)).await.expect("join").expect("Cassandra");
    let s = SessionBuilder::new()
        .known_node_addr(node.addr())
        .default_consistency(Consistency::One)
        .build()
        .await
        .expect("session");
    let ks = "schema_ks";
    for ddl in testkit::samples::every_type_schema(ks) {
        run(&s, &ddl).await;
    }
    run(&s, &format!("CREATE TYPE {ks}.person (name text, home frozen<addr>)")).await;
    run(
        &s,
        &format!(
            "CREATE TABLE {ks}.events (pk int, ck1 text, ck2 int, st text static, r int, who frozen<person>, \
             PRIMARY KEY ((pk), ck1, ck2)) WITH CLUSTERING ORDER BY (ck1 DESC, ck2 ASC)"
        ),
    )
    .await;
    run(&s, &format!("CREATE INDEX events_r ON {ks}.events (r)")).await;
    run(
        &s,
        &format!(
            "CREATE MATERIALIZED VIEW {ks}.events_by_r AS SELECT pk, ck1, ck2, r FROM {ks}.events \
             WHERE r IS NOT NULL AND pk IS NOT NULL AND ck1 IS NOT NULL AND ck2 IS NOT NULL PRIMARY KEY (r, pk, ck1, ck2)"
        ),
    )
    .await;

    let schema = s.schema().await.expect("schema");
    let k = schema.keyspaces.get(ks).expect("keyspace");
    assert!(k.replication.get("class").is_some_and(|c| c.ends_with("SimpleStrategy")), "{:?}", k.replication);
    assert!(k.durable_writes);
    // Every type, as the server writes it.
    let every = table(&schema, ks, "every_type");
    assert_eq!(every.columns.len(), 26);
    assert_eq!(every.partition_key, ["pk"]);
    let typ = |c: &str| every.column(c).map(|c| c.typ.as_str()).unwrap_or_else(|| panic!("column {c}"));
    assert_eq!(
        [typ("b"), typ("l"), typ("m"), typ("tup"), typ("ud"), typ("vec"), typ("dur"), typ("vi")],
        [
            "bigint",
            "list<int>",
            "map<text, int>",
            "frozen<tuple<int, text>>",
            "frozen<addr>",
            "vector<float, 3>",
            "duration",
            "varint"
        ]
    );
    assert!(every
        .columns
        .iter()
        .skip(1)
        .all(|c| c.kind == ColumnKind::Regular && c.clustering_order == ClusteringOrder::None));
    assert_eq!(table(&schema, ks, "counters").column("c").map(|c| c.typ.as_str()), Some("counter"));
    // Every column kind, keys in key order, clustering orders.
    let events = table(&schema, ks, "events");
    assert_eq!(
        (events.partition_key.as_slice(), events.clustering_key.as_slice()),
        (&["pk".to_owned()][..], &["ck1".to_owned(), "ck2".to_owned()][..])
    );
    let names: Vec<&str> = events.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["pk", "ck1", "ck2", "st", "r", "who"], "keys first, in key order, then by kind and name");
    let col = |c: &str| events.column(c).expect("column");
    assert_eq!(
        (col("ck1").kind, col("ck1").clustering_order, col("ck1").position),
        (ColumnKind::Clustering, ClusteringOrder::Desc, 0)
    );
    assert_eq!((col("ck2").clustering_order, col("ck2").position), (ClusteringOrder::Asc, 1));
    assert_eq!(col("st").kind, ColumnKind::Static);
    assert_eq!(col("who").typ, "frozen<person>");
    // A user type nesting another.
    let person = k.user_types.get("person").expect("person");
    assert_eq!(person.fields, [("name".to_owned(), "text".to_owned()), ("home".to_owned(), "frozen<addr>".to_owned())]);
    assert_eq!(k.user_types.get("addr").expect("addr").fields.len(), 2);
    // The index and the view.
    let index = events.indexes.get("events_r").expect("index");
    assert_eq!((index.kind.as_str(), index.options.get("target").map(String::as_str)), ("COMPOSITES", Some("r")));
    let view = k.views.get("events_by_r").expect("view");
    assert_eq!((view.base_table.as_str(), view.include_all_columns), ("events", false));
    assert_eq!(view.table.partition_key, ["r"]);
    assert_eq!(view.table.clustering_key, ["pk", "ck1", "ck2"]);
    assert!(!k.tables.contains_key("events_by_r"), "a view is not a table");

    // Each change shows in a new snapshot; the old one stays as it was.
    let before = schema.clone();
    run(&s, &format!("ALTER TABLE {ks}.events ADD extra map<int, text>")).await;
    let after = until(&s, "the added column", |sc| table(sc, ks, "events").column("extra").is_some()).await;
    assert_eq!(table(&after, ks, "events").column("extra").map(|c| c.typ.as_str()), Some("map<int, text>"));
    assert!(table(&before, ks, "events").column("extra").is_none(), "an old snapshot never changes");
    run(&s, &format!("DROP INDEX {ks}.events_r")).await;
    until(&s, "the index dropped", |sc| table(sc, ks, "events").indexes.is_empty()).await;
    run(&s, &format!("ALTER TYPE {ks}.person ADD born date")).await;
    until(&s, "the type's new field", |sc| {
        sc.keyspaces[ks].user_types.get("person").is_some_and(|p| p.fields.len() == 3)
    })
    .await;
    run(&s, &format!("DROP MATERIALIZED VIEW {ks}.events_by_r")).await;
    run(&s, &format!("CREATE TABLE {ks}.later (pk int PRIMARY KEY)")).await;
    until(&s, "the view dropped and the new table", |sc| {
        sc.keyspaces[ks].views.is_empty() && sc.keyspaces[ks].tables.contains_key("later")
    })
    .await;
    run(&s, &format!("DROP KEYSPACE {ks}")).await;
    until(&s, "the keyspace dropped", |sc| !sc.keyspaces.contains_key(ks)).await;
}
