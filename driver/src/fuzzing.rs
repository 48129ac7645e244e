//! Harnesses for the fuzz targets in `fuzz/` that read what the driver
//! reads: typed rows (`typed_row`), the connection handshake (`handshake`)
//! and the system tables behind the topology (`system_rows`). They live
//! here so that the unit tests run them on their seed inputs
//! (`fuzz/seeds/<target>/`) too. Public only for the fuzz crate; any panic
//! is a bug, errors are expected. [`query_result`] hands the harnesses of
//! other crates (the CDC engine's lease and tablet rows) a result as
//! `Session::execute` returns one, so they fuzz their shipped decoders.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use shardwise_macros::DeserializeRow;
use shardwise_protocol::frame::ProtocolVersion;
use shardwise_protocol::fuzzing::rows;
use shardwise_protocol::rows::Rows;
use shardwise_protocol::token::{Partitioner, Token};
use shardwise_protocol::types::de::{DeserializeRow, ListIter, MapIter, Row};
use shardwise_protocol::types::CqlValue;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::auth::{AuthError, AuthFuture, AuthenticatorProvider, AuthenticatorSession};
use crate::cluster::ring::{ReplicaTable, ReplicationStrategy, TokenRing};
use crate::cluster::topology::{self, NodeInfo};
use crate::config::{Compression, ConnectionConfig};
use crate::connection::handshake::{self, Failure};

/// A page of `rows` as `Session::execute` returns it (no cached result
/// metadata, no extras): what decoders of [`crate::QueryResult`]s read.
pub fn query_result(rows: Rows) -> crate::QueryResult {
    crate::QueryResult {
        result: shardwise_protocol::response::ResultMessage::Rows(rows),
        specs: None,
        coordinator: crate::result::Coordinator::of_connection(std::net::SocketAddr::from(([0, 0, 0, 0], 0)), None),
        extras: None,
    }
}

// ---------------------------------------------------------------- typed rows

/// Column names of `typed_row` inputs (by index): the fields of the derived rows.
pub const TYPED_NAMES: [&str; 6] = ["id", "name", "tags", "attrs", "pair", "extra"];

/// A row matched by column name.
#[derive(Debug, DeserializeRow)]
#[shardwise(crate = "shardwise_protocol")]
pub struct Named<'a> {
    /// `bigint`
    pub id: i64,
    /// `text` / `ascii`
    pub name: &'a str,
    /// `list<text>` / `set<text>`
    pub tags: Option<Vec<String>>,
    /// `map<text, int>`
    pub attrs: Option<HashMap<&'a str, i32>>,
    /// Not read.
    #[shardwise(skip)]
    pub skipped: u8,
}

/// A row matched by position.
#[derive(Debug, DeserializeRow)]
#[shardwise(crate = "shardwise_protocol", flavor = "in_order")]
pub struct InOrder<'a> {
    /// `int`
    pub id: Option<i32>,
    /// `text`
    pub name: Option<&'a str>,
    /// `tuple<int, text>`
    pub pair: Option<(i32, &'a str)>,
}

/// A row whose fields are renamed columns.
#[derive(Debug, DeserializeRow)]
#[shardwise(crate = "shardwise_protocol")]
pub struct Renamed {
    /// Column `pair`: `tuple<bigint, blob>`.
    #[shardwise(rename = "pair")]
    pub p: Option<(Option<i64>, Vec<u8>)>,
    /// Column `extra`: `map<text, list<int>>`.
    #[shardwise(rename = "extra")]
    pub e: Option<BTreeMap<String, Vec<Option<i32>>>>,
}

/// Reads every row of `rows` as `R`: a type that does not fit the columns is
/// a typed error before any row; every row read is one of the page's, and
/// reading a row twice gives the same outcome.
fn read_rows<'a, R: DeserializeRow<'a> + std::fmt::Debug>(rows: &'a Rows) -> usize {
    let Ok(iter) = rows.rows::<R>() else { return 0 };
    let Ok(again) = rows.rows::<R>() else { panic!("the type check is not deterministic") };
    let mut n = 0;
    for (row, twice) in iter.zip(again) {
        // (Compared by outcome: hash maps print in a random order.)
        assert_eq!(row.is_ok(), twice.is_ok(), "row {n} read twice: {row:?} then {twice:?}");
        n += 1;
    }
    assert!(n <= rows.rows_count(), "{n} rows read of {}", rows.rows_count());
    n
}

/// Typed deserialization (`DeserializeValue`/`DeserializeRow` for tuples,
/// `Option`, `&str`, `Vec`, maps, sets, lazy iterators, `CqlValue`, `Row`
/// and derived rows). `data[0]` picks the Rust row type, `data[1..]` is a
/// [`rows`] input (columns named from [`TYPED_NAMES`]). Returns the number
/// of rows read.
pub fn typed_row(data: &[u8]) -> usize {
    let Some((&which, rest)) = data.split_first() else { return 0 };
    let Some(page) = rows(rest, &TYPED_NAMES) else { return 0 };
    read_rows::<Vec<Option<CqlValue>>>(&page);
    match which % 10 {
        0 => read_rows::<(i32, Option<&str>, Vec<i64>)>(&page),
        1 => read_rows::<(Option<HashMap<String, i32>>,)>(&page),
        2 => read_rows::<(BTreeMap<&str, Vec<u8>>, Option<HashSet<i64>>)>(&page),
        3 => read_rows::<(Option<(i32, &str)>, CqlValue)>(&page),
        4 => read_rows::<Row>(&page),
        5 => read_rows::<Named<'_>>(&page),
        6 => read_rows::<InOrder<'_>>(&page),
        7 => read_rows::<Renamed>(&page),
        8 => read_rows::<(Option<Vec<Option<(Option<i64>, Option<String>)>>>, Option<Vec<u8>>)>(&page),
        _ => lazy_collections(&page),
    }
}

/// `ListIter` and `MapIter`, drained item by item: an error ends them.
fn lazy_collections(page: &Rows) -> usize {
    type Lazy<'a> = (ListIter<'a, Option<i32>>, MapIter<'a, &'a str, Option<i64>>);
    let Ok(iter) = page.rows::<Lazy<'_>>() else { return 0 };
    let mut n = 0;
    for row in iter {
        n += 1;
        let Ok((list, map)) = row else { continue };
        let bound = list.remaining() + 1;
        assert!(list.take(bound + 1).count() <= bound, "ListIter yields more than it announced");
        let bound = map.size_hint().1.unwrap_or(usize::MAX);
        assert!(map.take(bound.saturating_add(1)).count() <= bound, "MapIter yields more than it announced");
    }
    n
}

// ---------------------------------------------------------------- handshake

/// An in-memory socket: reads return the server's bytes `chunk` at a time,
/// then end of stream; writes are kept.
struct Script<'a> {
    server: &'a [u8],
    chunk: usize,
    written: Vec<u8>,
}

impl AsyncRead for Script<'_> {
    fn poll_read(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let n = self.chunk.min(self.server.len()).min(buf.remaining());
        let (now, later) = self.server.split_at(n);
        buf.put_slice(now);
        self.server = later;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Script<'_> {
    fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.written.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A SASL mechanism that answers every challenge with the challenge itself.
#[derive(Debug)]
struct Echo;

impl AuthenticatorProvider for Echo {
    fn start<'a>(&'a self, _class: &'a str) -> AuthFuture<'a, (Vec<u8>, Box<dyn AuthenticatorSession>)> {
        Box::pin(std::future::ready(Ok((b"\0user\0pass".to_vec(), Box::new(Echo) as Box<dyn AuthenticatorSession>))))
    }
}

impl AuthenticatorSession for Echo {
    fn evaluate_challenge<'a>(&'a mut self, token: Option<&'a [u8]>) -> AuthFuture<'a, Vec<u8>> {
        Box::pin(std::future::ready(match token {
            Some(b"refuse") => Err(AuthError("refused".into())),
            t => Ok(t.unwrap_or_default().to_vec()),
        }))
    }
    fn success<'a>(&'a mut self, _: Option<&'a [u8]>) -> AuthFuture<'a, ()> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// How a scripted handshake ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeOutcome {
    /// Connected at this version with this compression.
    Connected(ProtocolVersion, Compression),
    /// The server rejected the version.
    VersionRejected,
    /// A typed error.
    Failed(String),
}

/// The connection handshake (OPTIONS → SUPPORTED, STARTUP → READY or
/// AUTHENTICATE, the SASL exchange) against a scripted server, with no
/// socket. `data[0]`: bit 0 the version (v4, v5), bit 1 whether LZ4 is
/// asked for, bit 2 whether an authenticator is configured, bits 3.. the
/// read size minus one; `data[1..]` is everything the server sends. The
/// handshake must end (the script never blocks), and a connection it
/// reports matches what was asked.
pub fn handshake(data: &[u8]) -> HandshakeOutcome {
    let Some((&mode, server)) = data.split_first() else { return HandshakeOutcome::Failed("empty".into()) };
    let version = if mode & 1 == 0 { ProtocolVersion::V4 } else { ProtocolVersion::V5 };
    let config = ConnectionConfig {
        max_version: version,
        compression: if mode & 2 == 0 { Compression::None } else { Compression::Lz4 },
        authenticator: (mode & 4 != 0).then(|| Arc::new(Echo) as Arc<dyn AuthenticatorProvider>),
        max_response_body: 1 << 20,
        ..ConnectionConfig::default()
    };
    let mut socket = Script { server, chunk: usize::from(mode >> 3) + 1, written: Vec::new() };
    let result = {
        let mut future = pin!(handshake::handshake(&mut socket, &config, version));
        let mut cx = Context::from_waker(Waker::noop());
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(r) => r,
            Poll::Pending => panic!("the handshake waits although the server never blocks"),
        }
    };
    assert!(!socket.written.is_empty(), "the handshake sent nothing");
    match result {
        Ok(h) => {
            assert_eq!(h.version, version);
            assert!(!h.lz4 || config.compression == Compression::Lz4, "unasked LZ4");
            assert_eq!(h.decoder.buffered(), 0, "bytes left after the handshake");
            HandshakeOutcome::Connected(h.version, if h.lz4 { Compression::Lz4 } else { Compression::None })
        }
        Err(Failure::VersionRejected) => HandshakeOutcome::VersionRejected,
        Err(Failure::Fatal(e)) => HandshakeOutcome::Failed(e.to_string()),
    }
}

// ---------------------------------------------------------------- system tables

/// What a `system_rows` input yielded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SystemRows {
    /// Nodes read.
    pub nodes: usize,
    /// Keyspace strategies read.
    pub strategies: usize,
    /// Table partitioners read.
    pub partitioners: usize,
}

/// Rows of the system tables the topology is read from. `data[0] % 5`
/// picks the table (`system.local`, `system.peers_v2`, `system.peers`,
/// `system_schema.keyspaces`, `system_schema.scylla_tables`), `data[1..]`
/// is a [`rows`] input. Nodes are put on a token ring and replicas placed
/// under several strategies; replication options become a strategy placed
/// on a small fixed ring. Every replica set holds distinct nodes of the
/// ring, no more than the strategy asks for.
pub fn system_rows(data: &[u8]) -> SystemRows {
    let mut out = SystemRows::default();
    let Some((&which, rest)) = data.split_first() else { return out };
    let Some(page) = rows(rest, &[]) else { return out };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 9042));
    let mut nodes = Vec::new();
    match which % 5 {
        0 => {
            if let Ok(mut iter) = page.rows::<topology::LocalRow>() {
                if let Some(Ok(row)) = iter.next() {
                    nodes.extend(topology::local_node(row, addr));
                }
            }
        }
        1 => {
            if let Ok(iter) = page.rows::<topology::PeerV2Row>() {
                nodes.extend(iter.filter_map(Result::ok).filter_map(|r| topology::peer_v2_node(r, addr.port())));
            }
        }
        2 => {
            if let Ok(iter) = page.rows::<topology::PeerRow>() {
                nodes.extend(iter.filter_map(Result::ok).filter_map(|r| topology::peer_node(r, addr.port())));
            }
        }
        3 => {
            if let Ok(iter) = page.rows::<(String, HashMap<String, String>)>() {
                let ring = Arc::new(TokenRing::new(sample_nodes().iter().map(NodeInfo::ring_node).collect()));
                for (_, options) in iter.filter_map(Result::ok) {
                    let strategy = ReplicationStrategy::from_options(options.iter().map(|(k, v)| (&**k, &**v)));
                    check_replicas(&ring, strategy);
                    out.strategies += 1;
                }
            }
        }
        _ => {
            if let Ok(iter) = page.rows::<(String, String, Option<&str>)>() {
                for (_, _, class) in iter.filter_map(Result::ok) {
                    if let Some(p) = topology::table_partitioner(class) {
                        assert_eq!(Partitioner::from_class_name(p.class_name()), Some(p), "{class:?} read as {p:?}");
                    }
                    out.partitioners += 1;
                }
            }
        }
    }
    out.nodes = nodes.len();
    for n in &nodes {
        assert!(n.tokens.windows(2).all(|w| w[0] <= w[1]), "tokens unsorted");
    }
    let unique: HashSet<SocketAddr> = nodes.iter().map(|n| n.address).collect();
    if unique.len() == nodes.len() {
        assert!(topology::diff_topology(&nodes, &nodes).is_empty(), "a topology differs from itself");
    }
    if !nodes.is_empty() {
        let ring = Arc::new(TokenRing::new(nodes.iter().map(NodeInfo::ring_node).collect()));
        let dcs: Vec<(String, usize)> =
            nodes.iter().filter_map(|n| n.datacenter.clone()).take(3).map(|dc| (dc, 2)).collect();
        for strategy in [
            ReplicationStrategy::Simple { rf: 3 },
            ReplicationStrategy::NetworkTopology { datacenters: dcs },
            ReplicationStrategy::Everywhere,
            ReplicationStrategy::Local,
        ] {
            check_replicas(&ring, strategy);
        }
    }
    out
}

/// Three nodes in two datacenters, dc1 on two racks.
fn sample_nodes() -> Vec<NodeInfo> {
    let node = |i: u8, dc: &str, rack: &str, tokens: &[i64]| NodeInfo {
        host_id: uuid::Uuid::from_u128(u128::from(i)),
        address: SocketAddr::from(([127, 0, 0, i], 9042)),
        datacenter: Some(dc.into()),
        rack: Some(rack.into()),
        tokens: tokens.iter().map(|t| Token::from(*t)).collect(),
    };
    vec![node(1, "dc1", "a", &[-100, 50]), node(2, "dc1", "b", &[0]), node(3, "dc2", "a", &[100, i64::MIN])]
}

/// Places replicas of a few tokens under `strategy` and checks them.
fn check_replicas(ring: &Arc<TokenRing>, strategy: ReplicationStrategy) {
    let owners = ring.nodes().iter().filter(|n| !n.tokens.is_empty()).count();
    let table = ReplicaTable::new(ring.clone(), strategy.clone());
    let probes = ring.nodes().iter().flat_map(|n| n.tokens.iter().copied()).take(16);
    for token in probes.chain([Token::from(i64::MIN), Token::from(0), Token::from(i64::MAX)]) {
        let replicas = table.replicas(token);
        let distinct: HashSet<usize> = replicas.iter().copied().collect();
        assert_eq!(distinct.len(), replicas.len(), "{strategy:?}: a replica twice: {replicas:?}");
        assert!(replicas.iter().all(|r| *r < ring.nodes().len()), "{strategy:?}: {replicas:?}");
        assert!(replicas.len() <= owners, "{strategy:?}: {replicas:?} of {owners} owners");
        match &strategy {
            ReplicationStrategy::Simple { rf } => assert_eq!(replicas.len(), (*rf).min(owners), "{strategy:?}"),
            ReplicationStrategy::Everywhere => assert_eq!(replicas.len(), owners),
            ReplicationStrategy::Local => assert!(replicas.is_empty()),
            ReplicationStrategy::NetworkTopology { datacenters } => {
                let asked = datacenters.iter().fold(0usize, |sum, (_, rf)| sum.saturating_add(*rf));
                assert!(replicas.len() <= asked, "{strategy:?}: {replicas:?}");
            }
        }
        if let Some(primary) = ring.primary(token) {
            if matches!(strategy, ReplicationStrategy::Simple { rf } if rf > 0) {
                assert_eq!(replicas.first(), Some(&primary), "the primary owner comes first");
            }
        }
    }
}

#[cfg(test)]
mod tests;
