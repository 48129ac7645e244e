//! A service in the shape tonic gives one: a handler struct shared by
//! `Arc`, each request handled on a task of its own (`tokio::spawn`), on a
//! multi-thread runtime. The session is cloned into nothing: the handler
//! holds one, and every task borrows it; statements are prepared once at
//! start-up; each request's owned message is bound by reference.
//!
//! ```text
//! SCYLLA_URI=127.0.0.1:9042 cargo run -p shardwise --example spawned_tasks
//! ```
//!
//! It sends itself 2,000 requests from as many tasks, 256 at a time, and
//! checks every answer; `cargo test` runs it against the test suite's
//! server.

use std::sync::Arc;

use shardwise::protocol::consistency::Consistency;
use shardwise::{ExecutionError, PreparedStatement, Session, SessionBuilder, Statement};
use tokio::task::JoinSet;

/// A request message, as a generated gRPC type would be: owned.
struct PutScore {
    player: String,
    score: i64,
}

/// What a handler can fail with, as a gRPC status would carry it.
#[derive(Debug, thiserror::Error)]
enum Status {
    #[error("unavailable: {0}")]
    Unavailable(#[from] ExecutionError),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("internal: {0}")]
    Internal(String),
}

/// The service: what every request's task shares.
struct Scores {
    session: Session,
    put: PreparedStatement,
    get: PreparedStatement,
}

impl Scores {
    async fn new(uri: &str) -> Result<Scores, Box<dyn std::error::Error>> {
        let session = SessionBuilder::new().known_node(uri).default_consistency(Consistency::One).build().await?;
        session
            .execute(
                &Statement::new(
                    "CREATE KEYSPACE IF NOT EXISTS examples WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
                ),
                (),
            )
            .await?;
        session
            .execute(
                &Statement::new("CREATE TABLE IF NOT EXISTS examples.scores (player text PRIMARY KEY, score bigint)"),
                (),
            )
            .await?;
        // Idempotent writes may be retried on another node, or speculated.
        let put =
            session.prepare("INSERT INTO examples.scores (player, score) VALUES (?, ?)").await?.with_idempotent(true);
        let get = session.prepare("SELECT score FROM examples.scores WHERE player = ?").await?.with_idempotent(true);
        Ok(Scores { session, put, get })
    }

    /// `rpc PutScore(PutScore) returns (Empty)`.
    async fn put_score(&self, request: PutScore) -> Result<(), Status> {
        self.session.execute(&self.put, (request.player.as_str(), request.score)).await?;
        Ok(())
    }

    /// `rpc GetScore(Player) returns (Score)`.
    async fn get_score(&self, player: &str) -> Result<i64, Status> {
        let result = self.session.execute(&self.get, (player,)).await?;
        match result.first_row::<(i64,)>() {
            Ok(Some((score,))) => Ok(score),
            Ok(None) => Err(Status::NotFound(player.to_owned())),
            Err(e) => Err(Status::Internal(e.to_string())),
        }
    }
}

/// Requests the self-test sends, and how many run at once.
const REQUESTS: i64 = 2_000;
const CONCURRENCY: usize = 256;

async fn run(uri: &str) -> Result<(), Box<dyn std::error::Error>> {
    let service = Arc::new(Scores::new(uri).await?);
    let run = std::process::id();
    let mut tasks = JoinSet::new();
    let mut done = 0;
    for i in 0..REQUESTS {
        if tasks.len() >= CONCURRENCY {
            tasks.join_next().await.ok_or("a task")???;
            done += 1;
        }
        // One task per request, as a gRPC server spawns them.
        let service = service.clone();
        tasks.spawn(async move {
            let player = format!("player-{run}-{i}");
            service.put_score(PutScore { player: player.clone(), score: i }).await?;
            match service.get_score(&player).await? {
                score if score == i => Ok(()),
                score => Err(Status::Internal(format!("{player}: read {score}, wrote {i}"))),
            }
        });
    }
    while let Some(answer) = tasks.join_next().await {
        answer??;
        done += 1;
    }
    match service.get_score("nobody").await {
        Err(Status::NotFound(_)) => {}
        other => return Err(format!("an unknown player: {other:?}").into()),
    }
    println!("spawned tasks: {done} requests, each written and read back on a task of its own");
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
    async fn every_request_is_answered_against_the_test_server() {
        let node = testkit::shared_node().expect("a Cassandra node");
        super::run(&node.to_string()).await.expect("the self-test");
    }
}
