//! What a service ported from the official driver does most, in one
//! program: a denormalised write built at run time as a batch (prepared and
//! unprepared statements, value lists of several types), custom value
//! types (newtype ids derived, no hand-written impls), partial updates
//! with unset values, and two execution profiles, one of them behind a
//! handle the service re-points at run time.
//!
//! ```text
//! SCYLLA_URI=127.0.0.1:9042 cargo run -p shardwise --example porting
//! ```
//!
//! `cargo test` runs it against the test suite's server.

use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::types::ser::{DynValues, MaybeUnset};
use shardwise::{Batch, DeserializeValue, ExecutionProfile, SerializeValue, Session, SessionBuilder, Statement};

/// A user id: its own type, bound and read as the uuid it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, SerializeValue, DeserializeValue)]
struct UserId(uuid::Uuid);

/// A user's handle, borrowed from the result when read.
#[derive(Debug, PartialEq, SerializeValue, DeserializeValue)]
struct Handle<'a>(&'a str);

async fn run(uri: &str) -> Result<(), Box<dyn std::error::Error>> {
    let session: Session = SessionBuilder::new().known_node(uri).build().await?;
    let ks = format!("porting_{}", std::process::id());
    for ddl in [
        format!("CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
        format!("CREATE TABLE IF NOT EXISTS {ks}.users (id uuid PRIMARY KEY, handle text, plan text, logins int)"),
        format!("CREATE TABLE IF NOT EXISTS {ks}.by_handle (handle text PRIMARY KEY, id uuid)"),
    ] {
        session.execute(&Statement::new(ddl), ()).await?;
    }

    // Two profiles: writes at QUORUM; reads behind a handle, so that the
    // service can move every read statement to ONE during an incident.
    let writes = ExecutionProfile::new("writes").consistency(Consistency::Quorum).into_handle();
    let reads = ExecutionProfile::new("reads").consistency(Consistency::LocalQuorum).into_handle();

    // A sign-up batch built at run time: per user a prepared insert into
    // each table, and an unprepared statement among them.
    let insert = session.prepare(format!("INSERT INTO {ks}.users (id, handle, plan) VALUES (?, ?, ?)")).await?;
    let index = session.prepare(format!("INSERT INTO {ks}.by_handle (handle, id) VALUES (?, ?)")).await?;
    let users: Vec<(UserId, String)> =
        (0..12).map(|i| (UserId(uuid::Uuid::from_u128(0x5eed + i)), format!("user{i}"))).collect();
    let rows: Vec<(UserId, Handle<'_>, &str)> = users.iter().map(|(id, h)| (*id, Handle(h), "free")).collect();
    let index_rows: Vec<(Handle<'_>, UserId)> = users.iter().map(|(id, h)| (Handle(h), *id)).collect();
    let first = (users[0].0,);
    let mut batch: Batch = Batch::default();
    let mut values: Vec<&dyn DynValues> = Vec::new();
    for (row, index_row) in rows.iter().zip(&index_rows) {
        batch.append_statement(&insert);
        values.push(row);
        batch.append_statement(&index);
        values.push(index_row);
    }
    batch.append_statement(format!("UPDATE {ks}.users SET plan = 'pro' WHERE id = ?"));
    values.push(&first);
    // Prepared as a whole: every statement typed and bound by its markers.
    let batch = session.prepare_batch(&batch).await?.with_profile(writes.clone());
    session.execute(&batch, &values).await?;

    // A partial update: only `logins` changes, the other columns are unset.
    let update = session
        .prepare(format!("UPDATE {ks}.users SET handle = ?, plan = ?, logins = ? WHERE id = ?"))
        .await?
        .with_profile(writes);
    let only_logins = (MaybeUnset::<&str>::Unset, MaybeUnset::<&str>::Unset, MaybeUnset::Set(3), users[0].0);
    session.execute(&update, only_logins).await?;

    let get = session
        .prepare(format!("SELECT id, handle, plan, logins FROM {ks}.users WHERE id = ?"))
        .await?
        .with_profile(reads.clone());
    let check = |r: shardwise::QueryResult| -> Result<(), Box<dyn std::error::Error>> {
        let row: Option<(UserId, Handle<'_>, &str, Option<i32>)> = r.first_row()?;
        match row {
            Some((id, Handle("user0"), "pro", Some(3))) if id == users[0].0 => Ok(()),
            other => Err(format!("user0 read back as {other:?}").into()),
        }
    };
    check(session.execute(&get, (users[0].0,)).await?)?;
    // The incident: every statement holding `reads` moves to ONE at once.
    reads.map_to_another_profile(ExecutionProfile::new("degraded reads").consistency(Consistency::One));
    check(session.execute(&get, (users[0].0,)).await?)?;
    println!("porting: a batch of {} statements, a partial update, reads re-pointed to ONE", values.len());
    session.execute(&Statement::new(format!("DROP KEYSPACE {ks}")), ()).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("SCYLLA_URI").unwrap_or_else(|_| "127.0.0.1:9042".into());
    run(&uri).await
}

/// `cargo test` runs the example against the suite's server.
#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_ported_calls_work_against_the_test_server() {
        let node = testkit::shared_node().expect("a Cassandra node");
        super::run(&node.to_string()).await.expect("the example");
    }
}
