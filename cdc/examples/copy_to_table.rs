//! A CDC consumer that writes every change of a table into another table:
//! an [`AsyncConsumer`] that awaits its own writes through the session.
//! The reader hands each change over once the previous one's write has
//! finished, and counts a window as read only once all of its writes have,
//! so a checkpoint never gets ahead of the copy.
//!
//! ```text
//! SCYLLA_URI=127.0.0.1:9042 cargo run -p shardwise-cdc --example copy_to_table
//! ```
//!
//! It creates `examples_cdc.orders` (CDC on) and `examples_cdc.orders_copy`,
//! writes inserts, updates and deletes to the first, copies what the log
//! says into the second, and checks that both hold the same rows. It needs
//! ScyllaDB or this project's emulation front (`cargo xtask emu`); `cargo
//! test` runs it through the front over the test suite's Cassandra.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::types::CqlValue;
use shardwise::{PreparedStatement, Session, SessionBuilder, Statement};
use shardwise_cdc::{AsyncConsumer, CdcReaderBuilder, Change, ConsumerError, GroupInfo, Operation};

/// Writes each change into the copy (one per stream group: a clone).
#[derive(Clone)]
struct CopyRows {
    session: Session,
    upsert: PreparedStatement,
    delete: PreparedStatement,
}

impl AsyncConsumer for CopyRows {
    async fn consume(&mut self, change: Change) -> Result<(), ConsumerError> {
        let Some(CqlValue::BigInt(id)) = change.value("id").cloned() else {
            return Err(ConsumerError::failed(format!("a change without its key: {change:?}")));
        };
        let result = match change.operation {
            Operation::Insert | Operation::Update => {
                // A cell the write did not touch is neither set nor deleted.
                let qty = match change.value("qty") {
                    Some(CqlValue::Int(q)) => Some(*q),
                    _ if change.is_deleted("qty") => None,
                    _ => return Ok(()),
                };
                self.session.execute(&self.upsert, (id, qty)).await
            }
            Operation::PartitionDelete | Operation::RowDelete => self.session.execute(&self.delete, (id,)).await,
            _ => return Ok(()),
        };
        result.map(drop).map_err(ConsumerError::failed)
    }
}

/// Every row of `table`, by id.
async fn rows(session: &Session, table: &str) -> Result<BTreeMap<i64, Option<i32>>, Box<dyn std::error::Error>> {
    let all = session.execute_unpaged(&Statement::new(format!("SELECT id, qty FROM examples_cdc.{table}")), ()).await?;
    Ok(all.rows::<(i64, Option<i32>)>()?.collect::<Result<_, _>>()?)
}

async fn run(uri: &str) -> Result<(), Box<dyn std::error::Error>> {
    let session = SessionBuilder::new().known_node(uri).default_consistency(Consistency::One).build().await?;
    for ddl in [
        "CREATE KEYSPACE IF NOT EXISTS examples_cdc WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "DROP TABLE IF EXISTS examples_cdc.orders",
        "DROP TABLE IF EXISTS examples_cdc.orders_copy",
        "CREATE TABLE examples_cdc.orders (id bigint PRIMARY KEY, qty int) WITH cdc = {'enabled': true}",
        "CREATE TABLE examples_cdc.orders_copy (id bigint PRIMARY KEY, qty int)",
    ] {
        session.execute(&Statement::new(ddl), ()).await?;
    }
    let start = SystemTime::now() - Duration::from_secs(1);
    let insert = session.prepare("INSERT INTO examples_cdc.orders (id, qty) VALUES (?, ?)").await?;
    let update = session.prepare("UPDATE examples_cdc.orders SET qty = ? WHERE id = ?").await?;
    let delete = session.prepare("DELETE FROM examples_cdc.orders WHERE id = ?").await?;
    for id in 0..200_i64 {
        session.execute(&insert, (id, (id % 7) as i32)).await?;
    }
    for id in (0..200_i64).step_by(4) {
        session.execute(&update, (Some(-1_i32), id)).await?;
    }
    for id in (0..200_i64).step_by(10) {
        session.execute(&update, (None::<i32>, id + 1)).await?;
        session.execute(&delete, (id,)).await?;
    }

    let copy = CopyRows {
        session: session.clone(),
        upsert: session.prepare("INSERT INTO examples_cdc.orders_copy (id, qty) VALUES (?, ?)").await?,
        delete: session.prepare("DELETE FROM examples_cdc.orders_copy WHERE id = ?").await?,
    };
    // Read from before the writes to a little after them, then stop.
    let reader = CdcReaderBuilder::new(session.clone(), "examples_cdc", "orders")
        .start(start)
        .end(SystemTime::now() + Duration::from_secs(1))
        .window_size(Duration::from_secs(1))
        .safety_interval(Duration::from_millis(500))
        .build_async(move |_: &GroupInfo| copy.clone())
        .await?;
    reader.join().await?;

    let (base, copied) = (rows(&session, "orders").await?, rows(&session, "orders_copy").await?);
    if base != copied {
        return Err(format!("the copy differs: {} rows against {}", copied.len(), base.len()).into());
    }
    println!("copied {} rows from the CDC log of examples_cdc.orders", copied.len());
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("SCYLLA_URI").unwrap_or_else(|_| "127.0.0.1:9042".into());
    run(&uri).await
}

/// `cargo test` runs the example through the emulation front.
#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_copy_matches_the_table() {
        use shardwise_emu::{Front, FrontConfig};
        let upstream = testkit::shared_node().expect("a Cassandra node");
        let emu_keyspace = testkit::fresh_keyspace("emu_example");
        let front = tokio::task::spawn_blocking(move || {
            Front::start(upstream, FrontConfig { shards: 2, emu_keyspace, ..FrontConfig::default() })
        })
        .await
        .expect("join")
        .expect("the front");
        super::run(&front.addr().to_string()).await.expect("the example");
    }
}
