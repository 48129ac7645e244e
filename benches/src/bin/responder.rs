//! `responder`: a CQL server that answers at once, for measuring what a
//! driver itself adds to a request (its CPU and its latency) without a
//! database's own cost and pauses in the figures.
//!
//! ```text
//! taskset -c 0 responder --port 9042 --shard-aware-port 19042 --shards 2
//! ```
//!
//! Protocol v4 only (as Scylla's extensions and the official driver speak
//! it; a v5 STARTUP is refused with a protocol error, and a driver that
//! tries v5 first falls back). Answered:
//!
//! - OPTIONS: SUPPORTED with CQL_VERSION, COMPRESSION (none) and Scylla's
//!   sharding extensions: `SCYLLA_SHARD`, `SCYLLA_NR_SHARDS`,
//!   `SCYLLA_SHARDING_ALGORITHM` (biased-token-round-robin),
//!   `SCYLLA_SHARDING_IGNORE_MSB` (12), `SCYLLA_PARTITIONER` (Murmur3) and
//!   `SCYLLA_SHARD_AWARE_PORT`. A connection to the shard-aware port is on
//!   shard `source port % N`, as Scylla assigns it; one to the regular port
//!   on the next shard in turn.
//! - STARTUP, REGISTER: READY (no events are ever pushed).
//! - QUERY: the metadata queries both drivers make on connect, read from
//!   the column list of the SELECT: `system.local` (one row: this node,
//!   its tokens), `system.peers` and `system.peers_v2` (no rows: one node),
//!   `system_schema.keyspaces` (the workload keyspace, SimpleStrategy, one
//!   replica), every other `system_schema.*` table empty; every column
//!   typed as Scylla types it, so both drivers' type checks pass. `USE ks`:
//!   SET_KEYSPACE. Any other SELECT: one row. Anything else (DDL, writes):
//!   a Void result (no SCHEMA_CHANGE, so no driver waits for schema
//!   agreement).
//! - PREPARE: a statement id that says what EXECUTE answers; bind markers
//!   typed from the statement's column names (`pk`, `v1`: bigint, `v2`:
//!   text, as the workload's `kv` table; other names blob), the first one
//!   the partition key.
//! - EXECUTE: a Void for an INSERT/UPDATE/DELETE, one row for a SELECT
//!   (with or without metadata, as the request's skip-metadata flag asks):
//!   every bigint column is twice the first bound value when that is a
//!   bigint, every text column a constant (what the workload runner's
//!   reads check). An unknown id: UNPREPARED.
//! - BATCH: a Void.
//! - Anything else (AUTH_RESPONSE, undecodable requests): a server error.
//!
//! Each connection is read as fast as it comes: every complete request in
//! a read is answered, and all the answers go out in one write. With
//! `--delay-us D`, every answer waits D µs after its request arrived (the
//! answers stay in order; tokio's timer, so about a millisecond's
//! granularity). One tokio runtime: current-thread by default (pin the
//! process to a core with `taskset`), `--threads N` for more workers.
//!
//! It prints `LISTENING <port> <shard-aware port>` on stdout once both
//! ports are open (with `--port 0`, the ports the system chose).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use shardwise_protocol::bytes::{BufMut, Bytes};
use shardwise_protocol::frame::{Opcode, ProtocolVersion, HEADER_LEN};
use shardwise_protocol::request::AnyRequest;
use shardwise_protocol::response::{
    code, ErrorKind, ErrorResponse, Prepared, Response, ResponseMessage, ResultMessage,
};
use shardwise_protocol::rows::{PreparedMetadata, ResultMetadata, Rows};
use shardwise_protocol::types::{ColumnSpec, ColumnType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The text of every text column of a canned row (the workload's `v2`).
const TEXT: &str = "shardwise workload value 0123456";

/// Largest request body accepted (Scylla's default native transport limit
/// is larger; the workloads send a few hundred bytes).
const MAX_BODY: usize = 16 << 20;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "responder",
    version,
    about = "A CQL (v4) server that answers at once, with Scylla's shard-aware port"
)]
struct Cli {
    /// Address to listen on (also the node's address in `system.local`).
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// The regular CQL port (0: one the system picks).
    #[arg(long, default_value_t = 9042)]
    port: u16,
    /// The shard-aware port (0: one the system picks).
    #[arg(long, default_value_t = 19042)]
    shard_aware_port: u16,
    /// Shards the node reports (`SCYLLA_NR_SHARDS`).
    #[arg(long, default_value_t = 2)]
    shards: u16,
    /// Fixed delay of every answer, in microseconds after its request
    /// arrived (0: none).
    #[arg(long, default_value_t = 0)]
    delay_us: u64,
    /// Tokio workers (1: a current-thread runtime).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// The keyspace `system_schema.keyspaces` reports (SimpleStrategy, one replica).
    #[arg(long, default_value = "shardwise_workload")]
    keyspace: String,
    /// Tokens of the node in `system.local` (evenly spread).
    #[arg(long, default_value_t = 16)]
    tokens: u32,
}

/// What an EXECUTE of a prepared statement answers.
#[derive(Debug)]
enum Canned {
    /// A Void result.
    Void,
    /// One row of these columns.
    Row {
        /// `RESULT` body up to the rows count, with the column specs.
        with_metadata: Vec<u8>,
        /// The same with `No_metadata`.
        without_metadata: Vec<u8>,
        types: Vec<ColumnType>,
    },
    /// `limit` rows of these columns (`SELECT … LIMIT n` with no `?`),
    /// in pages of the request's page size: row `i` has every bigint
    /// column `i` but the second, `2i`, and every text column the
    /// constant.
    Rows { specs: Vec<ColumnSpec>, limit: usize },
}

/// What every connection shares.
struct Server {
    cli: Cli,
    shard_aware_port: u16,
    /// Prepared statements by id (written at PREPARE only; every
    /// connection keeps its own copy of what it executes).
    prepared: RwLock<HashMap<Vec<u8>, Arc<Canned>>>,
    /// The shard of the next connection to the regular port.
    next_shard: AtomicUsize,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    anyhow::ensure!(cli.shards >= 1, "--shards must be at least 1");
    let rt = if cli.threads <= 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(cli.threads).enable_all().build()?
    };
    rt.block_on(serve(cli))
}

async fn serve(cli: Cli) -> anyhow::Result<()> {
    let regular =
        TcpListener::bind((cli.host, cli.port)).await.with_context(|| format!("binding port {}", cli.port))?;
    let aware = TcpListener::bind((cli.host, cli.shard_aware_port))
        .await
        .with_context(|| format!("binding port {}", cli.shard_aware_port))?;
    let (port, shard_aware_port) = (regular.local_addr()?.port(), aware.local_addr()?.port());
    let server = Arc::new(Server {
        cli,
        shard_aware_port,
        prepared: RwLock::new(HashMap::new()),
        next_shard: AtomicUsize::new(0),
    });
    println!("LISTENING {port} {shard_aware_port}");
    let accept = |listener: TcpListener, shard_aware: bool| {
        let server = server.clone();
        tokio::spawn(async move {
            loop {
                let Ok((socket, peer)) = listener.accept().await else { continue };
                let shards = usize::from(server.cli.shards);
                let shard = if shard_aware {
                    usize::from(peer.port()) % shards
                } else {
                    server.next_shard.fetch_add(1, Ordering::Relaxed) % shards
                };
                tokio::spawn(connection(server.clone(), socket, shard as u16));
            }
        })
    };
    let a = accept(regular, false);
    let b = accept(aware, true);
    let _ = tokio::join!(a, b);
    Ok(())
}

/// Where a connection's answers go: straight to the socket, or through a
/// writer task that sends each batch when it is due (`--delay-us`).
enum Sink {
    Direct(tokio::net::tcp::OwnedWriteHalf),
    Delayed(tokio::sync::mpsc::UnboundedSender<(tokio::time::Instant, Vec<u8>)>, tokio::task::JoinHandle<()>),
}

/// Serves one connection until the client closes it.
async fn connection(server: Arc<Server>, socket: TcpStream, shard: u16) {
    let _ = socket.set_nodelay(true);
    let (mut read, mut write) = socket.into_split();
    let delay = Duration::from_micros(server.cli.delay_us);
    let mut sink = if delay.is_zero() {
        Sink::Direct(write)
    } else {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
        let writer = tokio::spawn(async move {
            while let Some((due, bytes)) = rx.recv().await {
                tokio::time::sleep_until(due).await;
                if write.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        });
        Sink::Delayed(tx, writer)
    };
    let mut conn = Conn { server, shard, statements: HashMap::new() };
    let mut buf: Vec<u8> = vec![0; 64 * 1024];
    let mut out: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut filled = 0usize;
    'read: loop {
        if buf.len() - filled < 16 * 1024 {
            buf.resize(buf.len() * 2, 0);
        }
        let n = match read.read(&mut buf[filled..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let arrived = tokio::time::Instant::now();
        filled += n;
        let mut at = 0;
        while filled - at >= HEADER_LEN {
            let head = &buf[at..at + HEADER_LEN];
            let length = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
            if length > MAX_BODY {
                break 'read;
            }
            if filled - at < HEADER_LEN + length {
                break;
            }
            let (version, stream, opcode) = (head[0] & 0x7f, i16::from_be_bytes([head[2], head[3]]), head[4]);
            let body = &buf[at + HEADER_LEN..at + HEADER_LEN + length];
            conn.answer(version, stream, opcode, body, &mut out);
            at += HEADER_LEN + length;
        }
        buf.copy_within(at..filled, 0);
        filled -= at;
        if out.is_empty() {
            continue;
        }
        match &mut sink {
            Sink::Direct(w) => {
                if w.write_all(&out).await.is_err() {
                    break;
                }
                out.clear();
                // Do not keep a huge buffer after a burst.
                if out.capacity() > 1 << 20 {
                    out = Vec::with_capacity(64 * 1024);
                }
            }
            Sink::Delayed(tx, _) => {
                let batch = std::mem::replace(&mut out, Vec::with_capacity(4096));
                if tx.send((arrived + delay, batch)).is_err() {
                    break;
                }
            }
        }
    }
    if let Sink::Delayed(tx, writer) = sink {
        drop(tx);
        let _ = writer.await;
    }
}

/// One connection's state.
struct Conn {
    server: Arc<Server>,
    shard: u16,
    /// The statements this connection executes, copied from the server's map.
    statements: HashMap<Vec<u8>, Arc<Canned>>,
}

impl Conn {
    /// Appends the answer to one request to `out`.
    fn answer(&mut self, version: u8, stream: i16, opcode: u8, body: &[u8], out: &mut Vec<u8>) {
        if version != 4 {
            let message = format!("Invalid or unsupported protocol version ({version}); supported versions are (4)");
            return respond(out, stream, error(code::PROTOCOL_ERROR, ErrorKind::ProtocolError, message));
        }
        // The hot path, by hand: EXECUTE of a prepared statement.
        if opcode == Opcode::Execute as u8 {
            if let Some(()) = self.execute(stream, body, out) {
                return;
            }
        }
        let Ok(opcode) = Opcode::from_byte(opcode) else {
            return respond(out, stream, server_error(format!("unknown opcode {opcode:#x}")));
        };
        let request = match AnyRequest::decode(opcode, ProtocolVersion::V4, body) {
            Ok(r) => r,
            Err(e) => return respond(out, stream, server_error(format!("undecodable {opcode:?}: {e}"))),
        };
        let message = match request {
            AnyRequest::Options(_) => ResponseMessage::Supported(self.supported()),
            AnyRequest::Startup(_) | AnyRequest::Register(_) => ResponseMessage::Ready,
            AnyRequest::Query(q) => self.server.query(q.query),
            AnyRequest::Prepare(p) => self.server.prepare(p.query),
            AnyRequest::Batch(_) => ResponseMessage::Result(ResultMessage::Void),
            AnyRequest::Execute(e) => error(
                code::UNPREPARED,
                ErrorKind::Unprepared { id: e.id.to_vec() },
                "prepared statement not found".into(),
            ),
            AnyRequest::AuthResponse(_) => server_error("no authentication here".into()),
        };
        respond(out, stream, message);
    }

    /// EXECUTE: `None` when the statement is not known (the slow path
    /// answers UNPREPARED) or the body does not parse.
    fn execute(&mut self, stream: i16, body: &[u8], out: &mut Vec<u8>) -> Option<()> {
        let id_len = usize::from(u16::from_be_bytes([*body.first()?, *body.get(1)?]));
        let id = body.get(2..2 + id_len)?;
        let canned = match self.statements.get(id) {
            Some(c) => c.clone(),
            None => {
                let c = self.server.prepared.read().unwrap_or_else(|e| e.into_inner()).get(id)?.clone();
                self.statements.insert(id.to_vec(), c.clone());
                c
            }
        };
        if let Canned::Rows { specs, limit } = &*canned {
            let message = page(specs, *limit, body)?;
            respond(out, stream, message);
            return Some(());
        }
        let params = body.get(2 + id_len..)?;
        // consistency [short], flags [byte], values: count [short], [bytes]…
        let flags = *params.get(2)?;
        let start = out.len();
        header(out, stream, Opcode::Result);
        match &*canned {
            Canned::Void => out.put_i32(0x0001),
            // Answered above.
            Canned::Rows { .. } => return None,
            Canned::Row { with_metadata, without_metadata, types } => {
                let first = if flags & 0x01 != 0 && u16::from_be_bytes([*params.get(3)?, *params.get(4)?]) > 0 {
                    let len = i32::from_be_bytes(params.get(5..9)?.try_into().ok()?);
                    if len == 8 {
                        Some(i64::from_be_bytes(params.get(9..17)?.try_into().ok()?))
                    } else {
                        None
                    }
                } else {
                    None
                };
                out.extend_from_slice(if flags & 0x02 != 0 { without_metadata } else { with_metadata });
                for t in types {
                    canned_value(out, t, first);
                }
            }
        }
        finish(out, start);
        Some(())
    }

    fn supported(&self) -> Vec<(String, Vec<String>)> {
        let s = &self.server;
        [
            ("CQL_VERSION", vec!["3.3.1".to_string()]),
            ("COMPRESSION", vec![]),
            ("SCYLLA_SHARD", vec![self.shard.to_string()]),
            ("SCYLLA_NR_SHARDS", vec![s.cli.shards.to_string()]),
            ("SCYLLA_SHARDING_IGNORE_MSB", vec!["12".into()]),
            ("SCYLLA_PARTITIONER", vec!["org.apache.cassandra.dht.Murmur3Partitioner".into()]),
            ("SCYLLA_SHARDING_ALGORITHM", vec!["biased-token-round-robin".into()]),
            ("SCYLLA_SHARD_AWARE_PORT", vec![s.shard_aware_port.to_string()]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

impl Server {
    /// The answer to a QUERY.
    fn query(&self, query: &str) -> ResponseMessage {
        let q = query.trim();
        let lower = q.to_ascii_lowercase();
        if let Some(ks) = lower.strip_prefix("use ") {
            let ks = q[q.len() - ks.len()..].trim().trim_matches('"').to_string();
            return ResponseMessage::Result(ResultMessage::SetKeyspace(ks));
        }
        let Some((columns, keyspace, table)) = parse_select(q) else {
            return ResponseMessage::Result(ResultMessage::Void);
        };
        let specs: Vec<ColumnSpec> = columns
            .iter()
            .map(|c| ColumnSpec {
                keyspace: keyspace.clone(),
                table: table.clone(),
                name: c.clone(),
                typ: column_type(&keyspace, &table, c),
            })
            .collect();
        let rows: Vec<Vec<Option<Vec<u8>>>> = match (keyspace.as_str(), table.as_str()) {
            ("system", "local") => vec![specs.iter().map(|s| self.local_value(&s.name)).collect()],
            ("system", _) => Vec::new(),
            ("system_schema", "keyspaces") => {
                vec![specs.iter().map(|s| self.keyspace_value(&s.name)).collect()]
            }
            ("system_schema", _) => Vec::new(),
            _ => vec![specs.iter().map(|s| Some(value_bytes(&s.typ, None))).collect()],
        };
        rows_message(specs, rows)
    }

    /// The answer to a PREPARE: the statement registered under an id that
    /// hashes its text.
    fn prepare(&self, query: &str) -> ResponseMessage {
        let id = statement_id(query).to_vec();
        let (markers, result, canned) = prepared_shape(query);
        self.prepared.write().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), Arc::new(canned));
        let pk_indexes = if markers.is_empty() { Vec::new() } else { vec![0] };
        ResponseMessage::Result(ResultMessage::Prepared(Box::new(Prepared {
            id: Bytes::from(id),
            result_metadata_id: None,
            metadata: PreparedMetadata { flags: 0, pk_indexes, specs: markers },
            result_metadata: ResultMetadata {
                columns_count: result.len(),
                paging_state: None,
                new_metadata_id: None,
                specs: Some(result),
            },
        })))
    }

    fn local_value(&self, column: &str) -> Option<Vec<u8>> {
        let inet = || match self.cli.host {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        let text = |s: &str| Some(s.as_bytes().to_vec());
        match column {
            "key" => text("local"),
            "host_id" => Some(uuid::Uuid::from_u128(0x5a4d_1234_0000_4000_8000_0000_0000_0001).as_bytes().to_vec()),
            "schema_version" => {
                Some(uuid::Uuid::from_u128(0x5c4e_0000_0000_4000_8000_0000_0000_0007).as_bytes().to_vec())
            }
            "rpc_address" | "broadcast_address" | "listen_address" | "native_address" | "broadcast_rpc_address" => {
                Some(inet())
            }
            "native_port" | "rpc_port" => Some(i32::from(self.cli.port).to_be_bytes().to_vec()),
            "data_center" => text("datacenter1"),
            "rack" => text("rack1"),
            "cluster_name" => text("responder"),
            "partitioner" => text("org.apache.cassandra.dht.Murmur3Partitioner"),
            "release_version" => text("3.0.8"),
            "cql_version" => text("3.3.1"),
            "native_protocol_version" => text("4"),
            "tokens" => {
                let n = self.cli.tokens.max(1);
                let step = (u64::MAX / u64::from(n)) as i64;
                let tokens: Vec<String> =
                    (0..n).map(|i| i64::MIN.wrapping_add(step.wrapping_mul(i64::from(i))).to_string()).collect();
                Some(collection(&tokens))
            }
            _ => None,
        }
    }

    fn keyspace_value(&self, column: &str) -> Option<Vec<u8>> {
        match column {
            "keyspace_name" => Some(self.cli.keyspace.as_bytes().to_vec()),
            "replication" => {
                let mut m = 2i32.to_be_bytes().to_vec();
                for s in ["class", "org.apache.cassandra.locator.SimpleStrategy", "replication_factor", "1"] {
                    m.extend((s.len() as i32).to_be_bytes());
                    m.extend(s.as_bytes());
                }
                Some(m)
            }
            "durable_writes" => Some(vec![1]),
            _ => None,
        }
    }
}

/// `SELECT a, b FROM ks.t …` → (["a", "b"], "ks", "t"); `None` for any
/// other statement.
fn parse_select(q: &str) -> Option<(Vec<String>, String, String)> {
    let lower = q.to_ascii_lowercase();
    let rest = lower.strip_prefix("select")?;
    let from = rest.find(" from ")?;
    let columns: Vec<String> =
        rest[..from].split(',').map(|c| c.trim().trim_matches('"').to_string()).filter(|c| !c.is_empty()).collect();
    let table = rest[from + 6..].split_whitespace().next()?;
    let (ks, t) = table.split_once('.').unwrap_or(("", table));
    Some((columns, ks.trim_matches('"').to_string(), t.trim_matches('"').to_string()))
}

/// The bind markers, result columns and EXECUTE answer of a prepared statement.
fn prepared_shape(query: &str) -> (Vec<ColumnSpec>, Vec<ColumnSpec>, Canned) {
    let spec = |ks: &str, t: &str, name: &str| ColumnSpec {
        keyspace: ks.to_string(),
        table: t.to_string(),
        name: name.to_string(),
        typ: column_type(ks, t, name),
    };
    let lower = query.trim().to_ascii_lowercase();
    if let Some((columns, ks, t)) = parse_select(query) {
        // Markers: the column names before each `?` of the WHERE clause.
        let where_part = lower.split_once(" where ").map(|(_, w)| w).unwrap_or("");
        let markers: Vec<ColumnSpec> = where_part
            .split(" and ")
            .filter(|c| c.contains('?'))
            .filter_map(|c| c.split(['=', ' ', '<', '>']).find(|s| !s.is_empty()))
            .map(|name| spec(&ks, &t, name))
            .collect();
        let result: Vec<ColumnSpec> = columns.iter().map(|c| spec(&ks, &t, c)).collect();
        if let (true, Some(limit)) = (markers.is_empty(), limit_of(&lower)) {
            return (markers, result.clone(), Canned::Rows { specs: result, limit });
        }
        let metadata = |specs: Option<Vec<ColumnSpec>>| {
            let mut b = Vec::new();
            let m = ResultMetadata { columns_count: result.len(), paging_state: None, new_metadata_id: None, specs };
            b.put_i32(0x0002);
            // Encoding a metadata we built cannot fail.
            let _ = m.encode(&mut b);
            b.put_i32(1);
            b
        };
        let canned = Canned::Row {
            with_metadata: metadata(Some(result.clone())),
            without_metadata: metadata(None),
            types: result.iter().map(|s| s.typ.clone()).collect(),
        };
        return (markers, result, canned);
    }
    // INSERT INTO ks.t (a, b, c) VALUES (?, ?, ?): markers a, b, c.
    let markers = match (lower.strip_prefix("insert into "), lower.find('('), lower.find(')')) {
        (Some(rest), Some(open), Some(close)) if open < close => {
            let table = rest.split(|c: char| c == '(' || c.is_whitespace()).next().unwrap_or("");
            let (ks, t) = table.split_once('.').unwrap_or(("", table));
            lower[open + 1..close].split(',').map(|c| spec(ks, t, c.trim())).collect()
        }
        _ => Vec::new(),
    };
    (markers, Vec::new(), Canned::Void)
}

/// `n` of a trailing `LIMIT n`.
fn limit_of(lower: &str) -> Option<usize> {
    let (_, n) = lower.rsplit_once(" limit ")?;
    n.trim().parse().ok()
}

/// The page of a `Canned::Rows` statement an EXECUTE asks for: from the
/// row its paging state names (a big-endian u32, the rows sent before),
/// as many as its page size (all without one); the paging state of the
/// next page when rows remain. `None` when the request does not decode.
fn page(specs: &[ColumnSpec], limit: usize, body: &[u8]) -> Option<ResponseMessage> {
    let mut r = shardwise_protocol::codec::Reader::new(body);
    let execute = shardwise_protocol::request::Execute::decode(ProtocolVersion::V4, &mut r).ok()?;
    let params = &execute.params;
    let from = match params.paging_state {
        Some(state) => u32::from_be_bytes(state.try_into().ok()?) as usize,
        None => 0,
    };
    let size = params.page_size.filter(|&n| n > 0).map_or(limit, |n| n as usize);
    let to = limit.min(from.saturating_add(size));
    let values: Vec<Vec<Option<Vec<u8>>>> = (from..to)
        .map(|i| {
            let mut bigints = 0;
            specs
                .iter()
                .map(|s| {
                    let value = match s.typ {
                        ColumnType::BigInt => {
                            bigints += 1;
                            Some((i as i64).wrapping_mul(if bigints == 2 { 2 } else { 1 }))
                        }
                        _ => None,
                    };
                    let mut v = Vec::new();
                    match value {
                        Some(n) => v.extend_from_slice(&n.to_be_bytes()),
                        None => v = value_bytes(&s.typ, None),
                    }
                    Some(v)
                })
                .collect()
        })
        .collect();
    let metadata = ResultMetadata {
        columns_count: specs.len(),
        paging_state: (to < limit).then(|| Bytes::copy_from_slice(&(to as u32).to_be_bytes())),
        new_metadata_id: None,
        specs: (!params.skip_metadata).then(|| specs.to_vec()),
    };
    let borrowed: Vec<Vec<Option<&[u8]>>> = values.iter().map(|r| r.iter().map(|v| v.as_deref()).collect()).collect();
    Some(match Rows::from_raw(metadata, &borrowed) {
        Ok(rows) => ResponseMessage::Result(ResultMessage::Rows(rows)),
        Err(e) => server_error(format!("canned rows: {e}")),
    })
}

/// The type of a column, as Scylla has it for the system tables both
/// drivers read and as the workload's `kv` table has it.
fn column_type(keyspace: &str, table: &str, column: &str) -> ColumnType {
    use ColumnType::*;
    match (keyspace, table, column) {
        (_, _, "host_id" | "schema_version") => Uuid,
        (_, _, "rpc_address" | "peer" | "native_address" | "broadcast_address" | "listen_address" | "preferred_ip") => {
            Inet
        }
        (_, _, "native_port" | "rpc_port" | "position" | "initial_tablets") => Int,
        (_, _, "tokens") => Set(Box::new(Text)),
        (_, _, "replication") => Map(Box::new(Text), Box::new(Text)),
        (_, _, "durable_writes") => Boolean,
        (_, _, "field_names" | "field_types" | "argument_types" | "argument_names") => List(Box::new(Text)),
        ("system" | "system_schema", _, _) => Text,
        (_, _, "pk" | "v1") => BigInt,
        (_, _, "v2") => Text,
        _ => Blob,
    }
}

/// The canned value of a column of type `t` (see the module's doc).
fn canned_value(out: &mut Vec<u8>, t: &ColumnType, first: Option<i64>) {
    match t {
        ColumnType::BigInt => {
            out.put_i32(8);
            out.put_i64(first.unwrap_or(0).wrapping_mul(2));
        }
        ColumnType::Text | ColumnType::Ascii => {
            out.put_i32(TEXT.len() as i32);
            out.put_slice(TEXT.as_bytes());
        }
        ColumnType::Int => {
            out.put_i32(4);
            out.put_i32(0);
        }
        ColumnType::Boolean => {
            out.put_i32(1);
            out.put_u8(0);
        }
        _ => out.put_i32(-1),
    }
}

fn value_bytes(t: &ColumnType, first: Option<i64>) -> Vec<u8> {
    let mut v = Vec::new();
    canned_value(&mut v, t, first);
    let len = i32::from_be_bytes([v[0], v[1], v[2], v[3]]);
    if len < 0 {
        Vec::new()
    } else {
        v.split_off(4)
    }
}

fn collection(items: &[String]) -> Vec<u8> {
    let mut out = (items.len() as i32).to_be_bytes().to_vec();
    for item in items {
        out.extend((item.len() as i32).to_be_bytes());
        out.extend(item.as_bytes());
    }
    out
}

fn rows_message(specs: Vec<ColumnSpec>, rows: Vec<Vec<Option<Vec<u8>>>>) -> ResponseMessage {
    let metadata =
        ResultMetadata { columns_count: specs.len(), paging_state: None, new_metadata_id: None, specs: Some(specs) };
    let borrowed: Vec<Vec<Option<&[u8]>>> = rows.iter().map(|r| r.iter().map(|v| v.as_deref()).collect()).collect();
    match Rows::from_raw(metadata, &borrowed) {
        Ok(rows) => ResponseMessage::Result(ResultMessage::Rows(rows)),
        Err(e) => server_error(format!("canned rows: {e}")),
    }
}

/// A statement id: 16 bytes of FNV-1a of the text (twice, seeded apart).
fn statement_id(query: &str) -> [u8; 16] {
    let fnv = |seed: u64| {
        query.bytes().fold(0xcbf2_9ce4_8422_2325 ^ seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    };
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&fnv(0).to_be_bytes());
    id[8..].copy_from_slice(&fnv(0x9e37_79b9_7f4a_7c15).to_be_bytes());
    id
}

fn error(code: i32, kind: ErrorKind, message: String) -> ResponseMessage {
    ResponseMessage::Error(ErrorResponse { code, message, kind })
}

fn server_error(message: String) -> ResponseMessage {
    error(code::SERVER_ERROR, ErrorKind::ServerError, message)
}

/// Appends a v4 response envelope.
fn respond(out: &mut Vec<u8>, stream: i16, message: ResponseMessage) {
    let start = out.len();
    if Response::new(message).encode(ProtocolVersion::V4, stream, out).is_err() {
        out.truncate(start);
        let fallback = server_error("response could not be encoded".into());
        let _ = Response::new(fallback).encode(ProtocolVersion::V4, stream, out);
    }
}

/// Appends a v4 response header with a length to be set by [`finish`].
fn header(out: &mut Vec<u8>, stream: i16, opcode: Opcode) {
    out.extend_from_slice(&[0x84, 0]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.push(opcode as u8);
    out.extend_from_slice(&[0; 4]);
}

/// Sets the length of the envelope that starts at `start`.
fn finish(out: &mut [u8], start: usize) {
    let len = (out.len() - start - HEADER_LEN) as u32;
    out[start + 5..start + 9].copy_from_slice(&len.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> Arc<Server> {
        let cli = Cli::try_parse_from(["responder", "--shards", "3"]).expect("parse");
        Arc::new(Server {
            cli,
            shard_aware_port: 19042,
            prepared: RwLock::new(HashMap::new()),
            next_shard: AtomicUsize::new(0),
        })
    }

    #[test]
    fn the_metadata_queries_are_typed_as_scylla_types_them() {
        let q =
            "SELECT host_id, rpc_address, data_center, rack, tokens, cluster_name FROM system.local WHERE key='local'";
        let (columns, ks, table) = parse_select(q).expect("a select");
        assert_eq!((ks.as_str(), table.as_str(), columns.len()), ("system", "local", 6));
        let types: Vec<ColumnType> = columns.iter().map(|c| column_type(&ks, &table, c)).collect();
        assert_eq!(
            types,
            [
                ColumnType::Uuid,
                ColumnType::Inet,
                ColumnType::Text,
                ColumnType::Text,
                ColumnType::Set(Box::new(ColumnType::Text)),
                ColumnType::Text
            ]
        );
        let ResponseMessage::Result(ResultMessage::Rows(rows)) = server().query(q) else { panic!("not rows") };
        assert_eq!(rows.rows_count(), 1);
        let ResponseMessage::Result(ResultMessage::Rows(rows)) = server().query("SELECT peer FROM system.peers") else {
            panic!("not rows")
        };
        assert_eq!(rows.rows_count(), 0);
        assert!(
            matches!(server().query("USE ks"), ResponseMessage::Result(ResultMessage::SetKeyspace(k)) if k == "ks")
        );
        assert!(matches!(
            server().query("CREATE TABLE ks.t (a int PRIMARY KEY)"),
            ResponseMessage::Result(ResultMessage::Void)
        ));
    }

    #[test]
    fn a_prepared_read_answers_twice_its_key_and_a_write_a_void() {
        let s = server();
        let mut conn = Conn { server: s.clone(), shard: 0, statements: HashMap::new() };
        let select = "SELECT v1, v2 FROM ks.kv WHERE pk = ?";
        let ResponseMessage::Result(ResultMessage::Prepared(p)) = s.prepare(select) else { panic!("not prepared") };
        assert_eq!(p.metadata.pk_indexes, [0]);
        assert_eq!(p.metadata.specs[0].typ, ColumnType::BigInt);
        // EXECUTE: id, consistency ONE, flags VALUES | SKIP_METADATA, one bigint value 21.
        let mut body = (p.id.len() as u16).to_be_bytes().to_vec();
        body.extend_from_slice(&p.id);
        body.extend_from_slice(&[0, 1, 0x03, 0, 1, 0, 0, 0, 8]);
        body.extend_from_slice(&21i64.to_be_bytes());
        let mut out = Vec::new();
        conn.answer(4, 7, Opcode::Execute as u8, &body, &mut out);
        let head: &[u8; HEADER_LEN] = out[..HEADER_LEN].try_into().expect("a header");
        let header = shardwise_protocol::frame::EnvelopeHeader::decode(head, 1 << 20).expect("header");
        assert_eq!((header.stream, header.opcode), (7, Opcode::Result));
        let response = Response::decode(&header, Bytes::copy_from_slice(&out[HEADER_LEN..])).expect("response");
        let ResponseMessage::Result(ResultMessage::Rows(rows)) = response.message else { panic!("not rows") };
        assert_eq!(rows.rows_count(), 1);
        let v1 = &rows.raw_rows()[..12];
        assert_eq!(v1, [&8i32.to_be_bytes()[..], &42i64.to_be_bytes()].concat());

        let insert = "INSERT INTO ks.kv (pk, v1, v2) VALUES (?, ?, ?)";
        let ResponseMessage::Result(ResultMessage::Prepared(p)) = s.prepare(insert) else { panic!("not prepared") };
        let types: Vec<&ColumnType> = p.metadata.specs.iter().map(|s| &s.typ).collect();
        assert_eq!(types, [&ColumnType::BigInt, &ColumnType::BigInt, &ColumnType::Text]);
        let mut body = (p.id.len() as u16).to_be_bytes().to_vec();
        body.extend_from_slice(&p.id);
        body.extend_from_slice(&[0, 1, 0]);
        out.clear();
        conn.answer(4, 8, Opcode::Execute as u8, &body, &mut out);
        assert_eq!(&out[HEADER_LEN..], 1i32.to_be_bytes());
        // An unknown id is UNPREPARED; a v5 request a protocol error.
        out.clear();
        conn.answer(4, 9, Opcode::Execute as u8, &[0, 2, 9, 9, 0, 1, 0], &mut out);
        assert_eq!(out[4], Opcode::Error as u8);
        assert_eq!(&out[HEADER_LEN..HEADER_LEN + 4], code::UNPREPARED.to_be_bytes());
        out.clear();
        conn.answer(5, 1, Opcode::Options as u8, &[], &mut out);
        assert_eq!(&out[HEADER_LEN..HEADER_LEN + 4], code::PROTOCOL_ERROR.to_be_bytes());
    }

    #[test]
    fn a_limited_scan_is_answered_in_pages_of_the_requested_size() {
        let s = server();
        let mut conn = Conn { server: s.clone(), shard: 0, statements: HashMap::new() };
        let scan = "SELECT pk, v1, v2 FROM ks.kv LIMIT 10";
        let ResponseMessage::Result(ResultMessage::Prepared(p)) = s.prepare(scan) else { panic!("not prepared") };
        assert!(p.metadata.specs.is_empty());
        let mut state: Option<Vec<u8>> = None;
        let mut seen = Vec::new();
        for request in 0..5 {
            assert!(request < 4, "the pages never end");
            // EXECUTE: consistency ONE, flags PAGE_SIZE (| PAGING_STATE), page size 4.
            let mut body = (p.id.len() as u16).to_be_bytes().to_vec();
            body.extend_from_slice(&p.id);
            body.extend_from_slice(&[0, 1, if state.is_some() { 0x0c } else { 0x04 }]);
            body.extend_from_slice(&4i32.to_be_bytes());
            if let Some(st) = &state {
                body.extend_from_slice(&(st.len() as i32).to_be_bytes());
                body.extend_from_slice(st);
            }
            let mut out = Vec::new();
            conn.answer(4, 1, Opcode::Execute as u8, &body, &mut out);
            let head: &[u8; HEADER_LEN] = out[..HEADER_LEN].try_into().expect("a header");
            let header = shardwise_protocol::frame::EnvelopeHeader::decode(head, 1 << 20).expect("header");
            let response = Response::decode(&header, Bytes::copy_from_slice(&out[HEADER_LEN..])).expect("response");
            let ResponseMessage::Result(ResultMessage::Rows(rows)) = response.message else { panic!("not rows") };
            for row in rows.rows::<(i64, i64, &str)>().expect("typed") {
                let (pk, v1, v2) = row.expect("a row");
                assert_eq!((v1, v2), (pk * 2, TEXT));
                seen.push(pk);
            }
            state = rows.metadata.paging_state.as_ref().map(|b| b.to_vec());
            if state.is_none() {
                break;
            }
        }
        assert_eq!(seen, (0..10).collect::<Vec<i64>>(), "pages of 4, 4 and 2 rows, in order");
    }

    #[test]
    fn supported_names_the_shard_and_the_shard_aware_port() {
        let conn = Conn { server: server(), shard: 2, statements: HashMap::new() };
        let supported = ResponseMessage::Supported(conn.supported());
        assert_eq!(supported.supported_option("SCYLLA_SHARD"), Some("2"));
        assert_eq!(supported.supported_option("SCYLLA_NR_SHARDS"), Some("3"));
        assert_eq!(supported.supported_option("SCYLLA_SHARD_AWARE_PORT"), Some("19042"));
        assert_eq!(supported.supported_option("SCYLLA_SHARDING_ALGORITHM"), Some("biased-token-round-robin"));
    }
}
