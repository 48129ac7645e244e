//! `--metrics-addr`: the reader's progress and lag as Prometheus text at
//! `http://ADDR/metrics`, for a scraper or `curl`. A minimal HTTP/1.1
//! responder on the tool's runtime (one short GET per scrape), so that the
//! tools take no HTTP stack as a dependency for one page of text.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, UNIX_EPOCH};

use shardwise_cdc::{CdcReaderHandle, ReaderProgress};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest request read, and how long a client may take to send it.
const REQUEST_LIMIT: usize = 8 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Listens on `addr` and serves the progress of `reader` of `table`
/// (`keyspace.table`) until the process ends; the address it listens on
/// (with port 0, the one the system chose).
pub async fn serve(addr: SocketAddr, reader: CdcReaderHandle, table: String) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else { continue };
            let (reader, table) = (reader.clone(), table.clone());
            tokio::spawn(async move {
                let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(socket, &reader, &table)).await;
            });
        }
    });
    Ok(local)
}

/// `--metrics-addr ADDR`: serves the progress of `reader`, which reads
/// `keyspace.table`, at `addr`; the address it listens on, or the flag's
/// one-line error.
pub async fn serve_flag(
    addr: SocketAddr,
    reader: &shardwise_cdc::CdcReader,
    keyspace: &str,
    table: &str,
) -> Result<SocketAddr, String> {
    serve(addr, reader.handle(), format!("{keyspace}.{table}"))
        .await
        .map_err(|e| format!("--metrics-addr {addr}: cannot listen: {e}"))
}

/// Reads one request and answers it: the metrics for `GET /metrics` (or
/// `/`), 404 for another path, 405 for another method.
async fn answer(mut socket: TcpStream, reader: &CdcReaderHandle, table: &str) -> std::io::Result<()> {
    let mut request = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < REQUEST_LIMIT {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let line = request.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let mut words = std::str::from_utf8(line).unwrap_or_default().split(' ');
    let (method, path) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let (status, body) = match (method, path) {
        ("GET", "/metrics" | "/") => ("200 OK", render(&reader.progress(), table)),
        ("GET", _) => ("404 Not Found", "not found: the metrics are at /metrics\n".to_owned()),
        _ => ("405 Method Not Allowed", "only GET\n".to_owned()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.shutdown().await
}

/// `progress` as Prometheus text, every series labelled with `table`.
pub fn render(progress: &ReaderProgress, table: &str) -> String {
    let table = table.replace('\\', "\\\\").replace('"', "\\\"");
    let seconds = |t: std::time::SystemTime| t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(out, "# HELP shardwise_cdc_{name} {help}\n# TYPE shardwise_cdc_{name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "shardwise_cdc_{name}{{table=\"{table}\"{labels}}} {value}");
        }
    };
    let one = |v: f64| [(String::new(), v)];
    metric("rows_total", "counter", "Rows handed to the consumer.", &one(progress.rows as f64));
    metric("windows_total", "counter", "Windows read to their end.", &one(progress.windows as f64));
    metric(
        "windows_retried_total",
        "counter",
        "Window reads that failed and were tried again.",
        &one(progress.windows_retried as f64),
    );
    metric("bytes_total", "counter", "Bytes of the log rows handed to the consumer.", &one(progress.bytes as f64));
    metric(
        "groups_taken_total",
        "counter",
        "Stream groups this reader took a lease of.",
        &one(progress.groups_taken as f64),
    );
    metric(
        "groups_left_total",
        "counter",
        "Stream groups this reader left (handed over, or a lease lost).",
        &one(progress.groups_left as f64),
    );
    metric("groups", "gauge", "Stream groups this reader reads.", &one(progress.groups.len() as f64));
    metric(
        "horizon_seconds",
        "gauge",
        "The cluster's time minus the safety interval (Unix seconds).",
        &one(seconds(progress.horizon)),
    );
    metric(
        "max_lag_seconds",
        "gauge",
        "The largest lag of the groups this reader reads.",
        &one(progress.max_lag().as_secs_f64()),
    );
    let per_group = |f: &dyn Fn(&shardwise_cdc::GroupLag) -> f64| -> Vec<(String, f64)> {
        progress.groups.iter().map(|g| (format!(",group=\"{}\"", g.key), f(g))).collect()
    };
    metric(
        "lag_seconds",
        "gauge",
        "How far a group's delivered changes are behind the horizon.",
        &per_group(&|g| g.lag.as_secs_f64()),
    );
    metric(
        "progress_seconds",
        "gauge",
        "Everything of a group before this was delivered (Unix seconds).",
        &per_group(&|g| seconds(g.progress)),
    );
    out
}
