//! A client of a ScyllaDB keyspace with tablets. Nothing in the code is
//! special to tablets: a prepared statement carries its table and
//! partition key, so the session routes each request to the replica and
//! shard of the key's tablet once it knows the tablet. It learns a tablet
//! from the first answer that reached another node or shard (ScyllaDB
//! attaches the tablet's replicas to it), and forgets the table's tablets
//! on a schema change. Unprepared statements are not routed.
//!
//! A request observer counts where the attempts went.
//!
//! ```text
//! SCYLLA_URI=127.0.0.1:9042 cargo run -p shardwise --example tablets
//! ```
//!
//! It needs ScyllaDB (2024.2 or later) or this project's emulation front
//! (`cargo xtask emu`); Cassandra has no tablets. `cargo test` runs it
//! through the front over the test suite's Cassandra and checks, from the
//! front's counters, that every write is routed to its tablet's shard once
//! the tablets are learned.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use shardwise::observer::{AttemptInfo, RequestObserver};
use shardwise::protocol::consistency::Consistency;
use shardwise::{PreparedStatement, Session, SessionBuilder, Statement};
use tokio::task::JoinSet;

/// Counts attempts per node and shard.
#[derive(Debug, Default)]
struct Placement(Mutex<BTreeMap<(SocketAddr, Option<u16>), u64>>);

impl RequestObserver for Placement {
    fn attempt_started(&self, attempt: &AttemptInfo<'_>) {
        if let Ok(mut counts) = self.0.lock() {
            *counts.entry((attempt.node, attempt.shard)).or_default() += 1;
        }
    }
}

/// The example's prepared statements.
struct Statements {
    insert: PreparedStatement,
    select: PreparedStatement,
}

async fn connect(uri: &str, placement: Arc<Placement>) -> Result<Session, shardwise::NewSessionError> {
    SessionBuilder::new()
        .known_node(uri)
        .default_consistency(Consistency::One)
        .request_observer(placement)
        .build()
        .await
}

/// A keyspace with tablets (eight to start with) and a table in it.
async fn schema(session: &Session) -> Result<Statements, Box<dyn std::error::Error>> {
    session
        .execute(
            &Statement::new(
                "CREATE KEYSPACE IF NOT EXISTS examples_tablets WITH replication = \
                 {'class': 'NetworkTopologyStrategy', 'replication_factor': 1} \
                 AND tablets = {'enabled': true, 'initial': 8}",
            ),
            (),
        )
        .await?;
    session
        .execute(
            &Statement::new("CREATE TABLE IF NOT EXISTS examples_tablets.events (id bigint PRIMARY KEY, body text)"),
            (),
        )
        .await?;
    let insert = session.prepare("INSERT INTO examples_tablets.events (id, body) VALUES (?, ?)").await?;
    let select = session.prepare("SELECT body FROM examples_tablets.events WHERE id = ?").await?;
    Ok(Statements { insert, select })
}

/// Writes the rows `ids` from 16 tasks, then reads each back.
async fn load(session: &Session, statements: &Arc<Statements>, ids: std::ops::Range<i64>) -> Result<(), String> {
    let mut tasks = JoinSet::new();
    for task in 0..16 {
        let (session, statements, ids) = (session.clone(), statements.clone(), ids.clone());
        tasks.spawn(async move {
            for id in ids.skip(task).step_by(16) {
                let body = format!("event {id}");
                session.execute(&statements.insert, (id, body.as_str())).await.map_err(|e| e.to_string())?;
                let read = session.execute(&statements.select, (id,)).await.map_err(|e| e.to_string())?;
                match read.first_row::<(&str,)>() {
                    Ok(Some((got,))) if got == body => {}
                    other => return Err(format!("event {id} read back as {other:?}")),
                }
            }
            Ok::<(), String>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("SCYLLA_URI").unwrap_or_else(|_| "127.0.0.1:9042".into());
    let placement = Arc::new(Placement::default());
    let session = connect(&uri, placement.clone()).await?;
    let statements = Arc::new(schema(&session).await?);
    load(&session, &statements, 0..2_000).await?;
    let counts = placement.0.lock().map_err(|_| "observer lock")?.clone();
    for ((node, shard), attempts) in counts {
        println!("{node} shard {shard:?}: {attempts} attempts");
    }
    Ok(())
}

/// `cargo test` runs the example through the emulation front.
#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_reach_their_tablets_shard_once_learned() {
        use shardwise_emu::{Front, FrontConfig};
        let upstream = testkit::shared_node().expect("a Cassandra node");
        let front = tokio::task::spawn_blocking(move || {
            Front::start(upstream, FrontConfig { shards: 4, ..FrontConfig::default() })
        })
        .await
        .expect("join")
        .expect("the front");
        let placement = Arc::new(Placement::default());
        let session = connect(&front.addr().to_string(), placement.clone()).await.expect("session");
        // The per-shard connections open in the background.
        let deadline = Instant::now() + Duration::from_secs(20);
        while session.connections().len() < 4 {
            assert!(Instant::now() < deadline, "only {} connections", session.connections().len());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let statements = Arc::new(schema(&session).await.expect("schema"));
        // Learning: a key of each tablet misrouted once at most.
        load(&session, &statements, 0..200).await.expect("learning");
        front.reset_routing_stats();
        load(&session, &statements, 1_000..3_000).await.expect("load");
        let stats = front.stats();
        assert_eq!(stats.misses(), 0, "every routed request on its tablet's shard: {stats}");
        assert!(stats.hits() >= 4_000, "{stats}");
        let shards = placement.0.lock().expect("lock").keys().filter(|(_, s)| s.is_some()).count();
        assert_eq!(shards, 4, "attempts on every shard");
    }
}
