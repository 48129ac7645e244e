//! An HTTP service on axum whose handlers bind request data by reference:
//! the path's id and the body's text go into the prepared statement as
//! `i64` and `&str`, with no copy into owned values, and a read borrows its
//! answer's text from the response buffer until the reply is made.
//!
//! ```text
//! SCYLLA_URI=127.0.0.1:9042 cargo run -p shardwise --example axum_service
//! curl -X PUT --data Ada localhost:3000/users/1 && curl localhost:3000/users/1
//! ```
//!
//! With `--self-test` it serves on a free port, sends itself a few
//! requests, checks the answers and exits; `cargo test` runs that against
//! the test suite's server.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use shardwise::{PreparedStatement, Session, SessionBuilder, Statement};

/// What every handler shares: one session, statements prepared once.
struct App {
    session: Session,
    insert: PreparedStatement,
    select: PreparedStatement,
}

/// `PUT /users/{id}` with the name as the body.
async fn put_user(State(app): State<Arc<App>>, Path(id): Path<i64>, name: String) -> StatusCode {
    // `name.as_str()` is bound as it is: serialized straight into the
    // connection's buffer.
    match app.session.execute(&app.insert, (id, name.as_str())).await {
        Ok(_) => StatusCode::NO_CONTENT,
        Err(e) => {
            eprintln!("insert {id}: {e}");
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

/// `GET /users/{id}`: the name, or 404.
async fn get_user(State(app): State<Arc<App>>, Path(id): Path<i64>) -> (StatusCode, String) {
    let result = match app.session.execute(&app.select, (id,)).await {
        Ok(r) => r,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    // `&str` borrows from the response; one copy, into the reply.
    match result.first_row::<(&str,)>() {
        Ok(Some((name,))) => (StatusCode::OK, name.to_owned()),
        Ok(None) => (StatusCode::NOT_FOUND, String::new()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn app(uri: &str) -> Result<Arc<App>, Box<dyn std::error::Error>> {
    let session = SessionBuilder::new().known_node(uri).build().await?;
    session
        .execute(
            &Statement::new(
                "CREATE KEYSPACE IF NOT EXISTS examples WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            ),
            (),
        )
        .await?;
    session
        .execute(&Statement::new("CREATE TABLE IF NOT EXISTS examples.users (id bigint PRIMARY KEY, name text)"), ())
        .await?;
    let insert = session.prepare("INSERT INTO examples.users (id, name) VALUES (?, ?)").await?;
    let select = session.prepare("SELECT name FROM examples.users WHERE id = ?").await?;
    Ok(Arc::new(App { session, insert, select }))
}

/// One HTTP/1.1 request on a new connection; the status and the body.
async fn request(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    Ok((status, body))
}

/// Serves on `127.0.0.1:3000` until stopped; with `self_test`, on a free
/// port, checking a few requests of its own, then returns.
async fn run(uri: &str, self_test: bool) -> Result<(), Box<dyn std::error::Error>> {
    let app = app(uri).await?;
    let router = Router::new().route("/users/{id}", get(get_user).put(put_user)).with_state(app);
    let listener = tokio::net::TcpListener::bind(if self_test { "127.0.0.1:0" } else { "127.0.0.1:3000" }).await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    if !self_test {
        println!("serving on http://{addr}");
        return Ok(server.await??);
    }
    let id = i64::from(std::process::id());
    let checks = [
        (request(addr, "PUT", &format!("/users/{id}"), "Ada").await?, (204, String::new())),
        (request(addr, "GET", &format!("/users/{id}"), "").await?, (200, "Ada".into())),
        (request(addr, "GET", "/users/-1", "").await?, (404, String::new())),
    ];
    server.abort();
    for (got, want) in checks {
        if got != want {
            return Err(format!("expected {want:?}, got {got:?}").into());
        }
    }
    println!("axum service: PUT, GET and a 404 answered as expected");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("SCYLLA_URI").unwrap_or_else(|_| "127.0.0.1:9042".into());
    run(&uri, std::env::args().any(|a| a == "--self-test")).await
}

/// `cargo test` runs the example against the suite's server.
#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_service_answers_against_the_test_server() {
        let node = testkit::shared_node().expect("a Cassandra node");
        super::run(&node.to_string(), true).await.expect("the self-test");
    }
}
