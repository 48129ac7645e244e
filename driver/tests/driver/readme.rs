//! The driver examples of the README, as a user copies them: the same
//! calls, run against the real server (a fresh keyspace instead of `ks`).
//! The README's snippets are not doc tests (most are fragments), so this
//! module is what keeps them compiling and working; change both together.

use std::sync::Arc;

use shardwise::protocol::consistency::Consistency;
use shardwise::{Batch, LatencyAwareness, Session, SessionBuilder, Statement, TlsConfig};

/// "Using the driver": one `execute` for every kind of statement, borrowed
/// rows, a row stream, the schema, a trace, and a spawned task binding a
/// borrowed value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_examples_work() -> Result<(), Box<dyn std::error::Error>> {
    let session = SessionBuilder::new()
        .known_node_addr(testkit::shared_node()?)
        .default_consistency(Consistency::One)
        .build()
        .await?;
    let ks = testkit::fresh_keyspace("readme");

    // One `execute` for unprepared statements, prepared statements and batches.
    session
        .execute(
            &Statement::new(format!(
                "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = \
                 {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
            )),
            (),
        )
        .await?;
    session
        .execute(&Statement::new(format!("CREATE TABLE IF NOT EXISTS {ks}.kv (pk bigint PRIMARY KEY, v text)")), ())
        .await?;

    let insert = session.prepare(format!("INSERT INTO {ks}.kv (pk, v) VALUES (?, ?)")).await?;
    session.execute(&insert, (1i64, "one")).await?;

    let batch = Batch::logged((&insert, &insert));
    session.execute(&batch, ((2i64, "two"), (3i64, "three"))).await?;

    let select = session.prepare(format!("SELECT pk, v FROM {ks}.kv WHERE pk = ?")).await?;
    let result = session.execute(&select, (1i64,)).await?;
    let mut read = Vec::new();
    for row in result.rows::<(i64, &str)>()? {
        let (pk, v) = row?;
        read.push((pk, v.to_owned()));
    }
    assert_eq!(read, [(1, "one".to_owned())]);

    // Large results as a stream of owned rows.
    let mut rows =
        session.execute_stream::<_, _, (i64, String)>(Statement::new(format!("SELECT pk, v FROM {ks}.kv")), ());
    let mut all = Vec::new();
    while let Some(row) = rows.next_row().await {
        all.push(row?);
    }
    all.sort();
    assert_eq!(all, [(1, "one".to_owned()), (2, "two".to_owned()), (3, "three".to_owned())]);

    // The schema.
    let schema = session.schema().await?;
    let kv = &schema.keyspaces[ks.as_str()].tables["kv"];
    assert_eq!(kv.partition_key, ["pk"]);
    let columns: Vec<_> = kv.columns.iter().map(|c| (&c.name, &c.typ)).collect();
    assert_eq!(columns.len(), 2, "{columns:?}");

    // The trace of a request.
    let traced = session.execute(&select.clone().with_tracing(true), (1i64,)).await?;
    let trace = crate::common::finished_trace(&session, traced.tracing_id().ok_or("no tracing id")?).await?;
    assert!(trace.coordinator.is_some() && !trace.events.is_empty(), "{trace:?}");

    // A spawned task binding a borrowed value.
    let insert = Arc::new(insert);
    let (s, ins) = (session.clone(), insert.clone());
    let pk = 4i64;
    tokio::spawn(async move { s.execute(&*ins, (pk, "some text")).await }).await??;
    let four = session.execute(&select, (4i64,)).await?;
    assert_eq!(four.rows::<(i64, &str)>()?.next().transpose()?, Some((4, "some text")));
    Ok(())
}

/// The README's session with rack awareness, latency awareness and mutual
/// TLS: compiled here (no certificates to run it with; `tls.rs` runs TLS).
#[allow(dead_code)]
async fn configured_session(
    ca_pem: &[u8],
    client_pem: &[u8],
    client_key: &[u8],
) -> Result<Session, Box<dyn std::error::Error>> {
    let session = SessionBuilder::new()
        .known_node("10.0.0.1:9042")
        .local_rack("dc1", "rack2")
        .latency_awareness(Some(LatencyAwareness::default()))
        .tls(TlsConfig::with_client_cert(ca_pem, client_pem, client_key)?)
        .build()
        .await?;
    Ok(session)
}
