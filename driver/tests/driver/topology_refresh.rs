//! Topology refresh against a scripted fake cluster on 127.0.0.1–5: one
//! fake server per address (same port), answering the handshake, REGISTER,
//! the system tables the session reads (`system.local`, `system.peers_v2`,
//! `system_schema.keyspaces`; no `scylla_tables`, like Cassandra) from a
//! topology the test edits, and pushing events to registered connections.
//! What a real cluster cannot do in a test's time: nodes join, leave, move
//! their tokens and change their address.
//!
//! Checked: pools follow the topology after TOPOLOGY_CHANGE events and
//! after periodic refreshes (added nodes get connections, removed nodes'
//! connections are closed, a node with new tokens or a new address is
//! replaced, and routing follows the new ring); STATUS_CHANGE DOWN takes a
//! node out of query plans while its connections are still open, and UP
//! brings it back; the control connection moves when its node dies and
//! registers again there.
//!
//! Also checked here, where a test can give nodes datacenters and make
//! them forget prepared statements: local and remote nodes get pools of
//! their own size and ignored nodes none, a node whose distance changes
//! gets a pool of the new size; and an `UNPREPARED` answer makes the
//! session prepare the statement again and report it
//! ([`SessionEvent::StatementReprepared`]).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shardwise::cluster::{DistancePolicy, NodeDistance};
use shardwise::protocol::consistency::Consistency;
use shardwise::protocol::frame::{EnvelopeHeader, ProtocolVersion, HEADER_LEN};
use shardwise::protocol::request::AnyRequest;
use shardwise::protocol::response::{code, Prepared};
use shardwise::protocol::response::{ErrorKind, ErrorResponse, Event, ResponseMessage, ResultMessage};
use shardwise::protocol::rows::PreparedMetadata;
use shardwise::protocol::rows::{ResultMetadata, Rows};
use shardwise::protocol::token::Token;
use shardwise::protocol::types::{ColumnSpec, ColumnType};
use shardwise::{SessionBuilder, SessionConfig, SessionEvent, Statement};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use uuid::Uuid;

use crate::common::response;

/// A node as the fake cluster reports it.
#[derive(Debug, Clone)]
struct FakeNode {
    host_id: Uuid,
    ip: IpAddr,
    tokens: Vec<i64>,
    datacenter: &'static str,
}

/// One fake server per address; the topology every one of them reports.
struct FakeCluster {
    port: u16,
    topology: Mutex<Vec<FakeNode>>,
    /// Event sinks of the connections that sent REGISTER, by server address.
    registered: Mutex<Vec<(IpAddr, mpsc::UnboundedSender<Vec<u8>>)>>,
    /// Open connections per server address.
    open: Mutex<HashMap<IpAddr, Arc<AtomicUsize>>>,
    /// Queries other than system-table reads, per server address.
    queries: Mutex<HashMap<IpAddr, usize>>,
    /// Per address: `true` while the server runs; set to `false` to kill it
    /// (listener and connections).
    alive: Mutex<HashMap<IpAddr, watch::Sender<bool>>>,
    /// PREPARE requests, per server address.
    prepares: Mutex<HashMap<IpAddr, usize>>,
    /// Set: the next EXECUTE (on any server) is answered UNPREPARED.
    forget: AtomicBool,
    /// Reads of `system_schema.keyspaces`, on every server.
    keyspace_reads: AtomicUsize,
}

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

fn text(s: &str) -> Option<Vec<u8>> {
    Some(s.as_bytes().to_vec())
}

fn collection(items: &[&str]) -> Vec<u8> {
    let mut out = (items.len() as i32).to_be_bytes().to_vec();
    for item in items {
        out.extend((item.len() as i32).to_be_bytes());
        out.extend(item.as_bytes());
    }
    out
}

fn spec(table: &str, name: &str, typ: ColumnType) -> ColumnSpec {
    ColumnSpec { keyspace: "system".into(), table: table.into(), name: name.into(), typ }
}

fn rows(specs: Vec<ColumnSpec>, rows: Vec<Vec<Option<Vec<u8>>>>) -> ResponseMessage {
    let metadata =
        ResultMetadata { columns_count: specs.len(), paging_state: None, new_metadata_id: None, specs: Some(specs) };
    let borrowed: Vec<Vec<Option<&[u8]>>> = rows.iter().map(|r| r.iter().map(|v| v.as_deref()).collect()).collect();
    ResponseMessage::Result(ResultMessage::Rows(Rows::from_raw(metadata, &borrowed).expect("rows")))
}

impl FakeCluster {
    async fn start(addresses: &[IpAddr], topology: Vec<FakeNode>) -> Arc<FakeCluster> {
        // A port found free can be taken before it is bound (by another
        // test's fake, or a connection's local port): bound on every
        // address, or another port.
        let mut listeners = Vec::new();
        let mut port = 0;
        for _ in 0..20 {
            port = testkit::ports::free_port(addresses).expect("a free port on every address");
            listeners.clear();
            for &a in addresses {
                match TcpListener::bind(SocketAddr::new(a, port)).await {
                    Ok(l) => listeners.push((a, l)),
                    Err(_) => break,
                }
            }
            if listeners.len() == addresses.len() {
                break;
            }
        }
        assert_eq!(listeners.len(), addresses.len(), "no port to bind on every address");
        let cluster = Arc::new(FakeCluster {
            port,
            topology: Mutex::new(topology),
            registered: Mutex::new(Vec::new()),
            open: Mutex::new(HashMap::new()),
            queries: Mutex::new(HashMap::new()),
            alive: Mutex::new(HashMap::new()),
            prepares: Mutex::new(HashMap::new()),
            forget: AtomicBool::new(false),
            keyspace_reads: AtomicUsize::new(0),
        });
        for (a, listener) in listeners {
            cluster.serve(a, listener);
        }
        cluster
    }

    fn addr(&self, ip: IpAddr) -> SocketAddr {
        SocketAddr::new(ip, self.port)
    }

    fn open_connections(&self, ip: IpAddr) -> usize {
        self.open.lock().expect("open").get(&ip).map_or(0, |c| c.load(Ordering::SeqCst))
    }

    fn queries(&self, ip: IpAddr) -> usize {
        self.queries.lock().expect("queries").get(&ip).copied().unwrap_or(0)
    }

    fn prepares(&self, ip: IpAddr) -> usize {
        self.prepares.lock().expect("prepares").get(&ip).copied().unwrap_or(0)
    }

    /// Every server forgets its prepared statements: the next EXECUTE is
    /// answered UNPREPARED.
    fn forget_prepared(&self) {
        self.forget.store(true, Ordering::SeqCst);
    }

    fn registrations(&self, ip: IpAddr) -> usize {
        self.registered.lock().expect("registered").iter().filter(|(a, tx)| *a == ip && !tx.is_closed()).count()
    }

    fn edit(&self, f: impl FnOnce(&mut Vec<FakeNode>)) {
        f(&mut self.topology.lock().expect("topology"));
    }

    /// Sends `event` on every registered connection still open.
    fn push(&self, event: Event) {
        let frame = response(-1, ResponseMessage::Event(event));
        for (_, tx) in self.registered.lock().expect("registered").iter() {
            let _ = tx.send(frame.clone());
        }
    }

    /// Kills the server at `ip`: its listener and every connection.
    fn kill(&self, ip: IpAddr) {
        if let Some(alive) = self.alive.lock().expect("alive").get(&ip) {
            let _ = alive.send(false);
        }
    }

    fn serve(self: &Arc<Self>, ip: IpAddr, listener: TcpListener) {
        let (alive, mut stopped) = watch::channel(true);
        self.alive.lock().expect("alive").insert(ip, alive);
        let open = self.open.lock().expect("open").entry(ip).or_default().clone();
        let cluster = self.clone();
        tokio::spawn(async move {
            loop {
                let (socket, _) = tokio::select! {
                    a = listener.accept() => match a { Ok(a) => a, Err(_) => return },
                    _ = stopped.wait_for(|alive| !alive) => return,
                };
                let cluster = cluster.clone();
                let open = open.clone();
                let stopped = stopped.clone();
                tokio::spawn(async move {
                    open.fetch_add(1, Ordering::SeqCst);
                    cluster.connection(ip, socket, stopped).await;
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
    }

    async fn connection(self: Arc<Self>, ip: IpAddr, socket: TcpStream, mut stopped: watch::Receiver<bool>) {
        let (mut read, mut write) = socket.into_split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let writer = tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                if write.write_all(&frame).await.is_err() {
                    return;
                }
            }
        });
        loop {
            let mut head = [0u8; HEADER_LEN];
            let got = tokio::select! {
                r = read.read_exact(&mut head) => r.is_ok(),
                _ = stopped.wait_for(|alive| !alive) => false,
            };
            if !got {
                break;
            }
            let Ok(header) = EnvelopeHeader::decode(&head, 1 << 20) else { break };
            let mut body = vec![0u8; header.length as usize];
            if read.read_exact(&mut body).await.is_err() {
                break;
            }
            let Ok(request) = AnyRequest::decode(header.opcode, header.version, &body) else { break };
            let answer = match request {
                AnyRequest::Options(_) => {
                    ResponseMessage::Supported(vec![("CQL_VERSION".into(), vec!["3.4.7".into()])])
                }
                AnyRequest::Startup(_) => ResponseMessage::Ready,
                AnyRequest::Register(_) => {
                    self.registered.lock().expect("registered").push((ip, tx.clone()));
                    ResponseMessage::Ready
                }
                AnyRequest::Query(q) => self.answer(ip, q.query),
                AnyRequest::Prepare(p) => {
                    *self.prepares.lock().expect("prepares").entry(ip).or_default() += 1;
                    ResponseMessage::Result(ResultMessage::Prepared(Box::new(Prepared {
                        id: bytes::Bytes::copy_from_slice(&statement_id(p.query)),
                        result_metadata_id: None,
                        metadata: PreparedMetadata::default(),
                        result_metadata: ResultMetadata::default(),
                    })))
                }
                AnyRequest::Execute(e) if self.forget.swap(false, Ordering::SeqCst) => {
                    ResponseMessage::Error(ErrorResponse {
                        code: code::UNPREPARED,
                        message: "prepared statement not found".into(),
                        kind: ErrorKind::Unprepared { id: e.id.to_vec() },
                    })
                }
                AnyRequest::Execute(_) => {
                    *self.queries.lock().expect("queries").entry(ip).or_default() += 1;
                    ResponseMessage::Result(ResultMessage::Void)
                }
                _ => ResponseMessage::Result(ResultMessage::Void),
            };
            if tx.send(response(header.stream, answer)).is_err() {
                break;
            }
        }
        drop(tx);
        writer.abort();
    }

    fn answer(&self, ip: IpAddr, query: &str) -> ResponseMessage {
        let topology = self.topology.lock().expect("topology").clone();
        let tokens = |n: &FakeNode| {
            let t: Vec<String> = n.tokens.iter().map(i64::to_string).collect();
            Some(collection(&t.iter().map(String::as_str).collect::<Vec<_>>()))
        };
        if query.contains("schema_version") {
            rows(
                vec![spec("local", "schema_version", ColumnType::Uuid)],
                vec![vec![Some(Uuid::from_u128(7).as_bytes().to_vec())]],
            )
        } else if query.contains("FROM system.local") {
            let specs = vec![
                spec("local", "host_id", ColumnType::Uuid),
                spec("local", "data_center", ColumnType::Text),
                spec("local", "rack", ColumnType::Text),
                spec("local", "tokens", ColumnType::Set(Box::new(ColumnType::Text))),
            ];
            let me = topology
                .iter()
                .filter(|n| n.ip == ip)
                .map(|n| vec![Some(n.host_id.as_bytes().to_vec()), text(n.datacenter), text("r1"), tokens(n)]);
            rows(specs, me.collect())
        } else if query.contains("FROM system.peers_v2") {
            let specs = vec![
                spec("peers_v2", "host_id", ColumnType::Uuid),
                spec("peers_v2", "native_address", ColumnType::Inet),
                spec("peers_v2", "native_port", ColumnType::Int),
                spec("peers_v2", "data_center", ColumnType::Text),
                spec("peers_v2", "rack", ColumnType::Text),
                spec("peers_v2", "tokens", ColumnType::Set(Box::new(ColumnType::Text))),
            ];
            let inet = |a: IpAddr| match a {
                IpAddr::V4(v4) => v4.octets().to_vec(),
                IpAddr::V6(v6) => v6.octets().to_vec(),
            };
            let peers = topology.iter().filter(|n| n.ip != ip).map(|n| {
                vec![
                    Some(n.host_id.as_bytes().to_vec()),
                    Some(inet(n.ip)),
                    Some(i32::from(self.port).to_be_bytes().to_vec()),
                    text(n.datacenter),
                    text("r1"),
                    tokens(n),
                ]
            });
            rows(specs, peers.collect())
        } else if query.contains("FROM system_schema.keyspaces") {
            self.keyspace_reads.fetch_add(1, Ordering::SeqCst);
            let specs = vec![
                spec("keyspaces", "keyspace_name", ColumnType::Text),
                spec(
                    "keyspaces",
                    "replication",
                    ColumnType::Map(Box::new(ColumnType::Text), Box::new(ColumnType::Text)),
                ),
            ];
            let mut replication = 2i32.to_be_bytes().to_vec();
            for s in ["class", "org.apache.cassandra.locator.SimpleStrategy", "replication_factor", "1"] {
                replication.extend((s.len() as i32).to_be_bytes());
                replication.extend(s.as_bytes());
            }
            rows(specs, vec![vec![text("ks"), Some(replication)]])
        } else if query.contains("scylla_tables") {
            ResponseMessage::Error(ErrorResponse {
                code: 0x2200,
                message: "table scylla_tables does not exist".into(),
                kind: ErrorKind::Invalid,
            })
        } else {
            *self.queries.lock().expect("queries").entry(ip).or_default() += 1;
            ResponseMessage::Result(ResultMessage::Void)
        }
    }
}

/// Every session event, as it arrives.
struct Events(tokio::sync::broadcast::Receiver<SessionEvent>);

impl Events {
    /// Waits for an event `want` accepts; returns it.
    async fn wait(&mut self, what: &str, want: impl Fn(&SessionEvent) -> bool) -> SessionEvent {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match tokio::time::timeout_at(deadline, self.0.recv()).await {
                Ok(Ok(e)) if want(&e) => return e,
                Ok(Ok(_)) => {}
                Ok(Err(e)) => panic!("event stream: {e}"),
                Err(_) => panic!("no {what} within 10 s"),
            }
        }
    }
}

fn node(id: u128, last: u8, tokens: &[i64]) -> FakeNode {
    FakeNode { host_id: Uuid::from_u128(id), ip: ip(last), tokens: tokens.to_vec(), datacenter: "dc1" }
}

fn node_in(datacenter: &'static str, id: u128, last: u8, tokens: &[i64]) -> FakeNode {
    FakeNode { datacenter, ..node(id, last, tokens) }
}

/// The fake's id for a prepared statement: a digest of its text.
fn statement_id(query: &str) -> [u8; 8] {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    query.hash(&mut h);
    h.finish().to_be_bytes()
}

async fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn builder(fake: &FakeCluster, contact: IpAddr) -> SessionBuilder {
    SessionBuilder::new()
        .known_node_addr(fake.addr(contact))
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .default_consistency(Consistency::One)
        .await_schema_agreement(false)
        .topology_event_delay(Duration::from_millis(50))
}

fn refreshed(e: &SessionEvent) -> Option<(&[SocketAddr], &[SocketAddr], &[SocketAddr])> {
    match e {
        SessionEvent::TopologyRefreshed { added, removed, changed, .. } => Some((added, removed, changed)),
        _ => None,
    }
}

fn sorted(mut v: Vec<SocketAddr>) -> Vec<SocketAddr> {
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_follow_joins_leaves_moves_and_new_addresses() {
    let addresses: Vec<IpAddr> = (1..=5).map(ip).collect();
    let fake = FakeCluster::start(&addresses, vec![node(1, 1, &[-100, 100]), node(2, 2, &[0, 200])]).await;
    let (a, b, c, d) = (fake.addr(ip(1)), fake.addr(ip(2)), fake.addr(ip(3)), fake.addr(ip(4)));
    let session = builder(&fake, ip(1)).topology_refresh_interval(None).build().await.expect("session");
    let mut events = Events(session.events());
    assert_eq!(sorted(session.nodes()), vec![a, b]);
    until("a connection to every node", || fake.open_connections(ip(1)) > 0 && fake.open_connections(ip(2)) > 0).await;
    until("the control connection", || session.control_node().is_some()).await;
    // Token 150 belongs to the node owning 200: b.
    assert_eq!(session.replicas("ks", Token::from(150)), vec![b]);

    // A node joins.
    fake.edit(|t| t.push(node(3, 3, &[300])));
    fake.push(Event::TopologyChange { change: "NEW_NODE".into(), node: c });
    let e =
        events.wait("refresh after NEW_NODE", |e| refreshed(e).is_some_and(|(added, _, _)| !added.is_empty())).await;
    assert_eq!(refreshed(&e), Some((&[c][..], &[][..], &[][..])));
    assert_eq!(sorted(session.nodes()), vec![a, b, c]);
    until("connections to the new node", || fake.open_connections(ip(3)) > 0).await;
    assert_eq!(session.replicas("ks", Token::from(250)), vec![c], "the ring includes the new node");

    // A node leaves: its pool is closed.
    fake.edit(|t| t.retain(|n| n.ip != ip(2)));
    fake.push(Event::TopologyChange { change: "REMOVED_NODE".into(), node: b });
    let e = events
        .wait("refresh after REMOVED_NODE", |e| refreshed(e).is_some_and(|(_, removed, _)| !removed.is_empty()))
        .await;
    assert_eq!(refreshed(&e), Some((&[][..], &[b][..], &[][..])));
    assert_eq!(sorted(session.nodes()), vec![a, c]);
    until("the removed node's connections closed", || fake.open_connections(ip(2)) == 0).await;
    assert_eq!(session.replicas("ks", Token::from(150)), vec![c], "200 is gone: 150 goes to 300");

    // A node moves its tokens.
    fake.edit(|t| t.iter_mut().filter(|n| n.ip == ip(3)).for_each(|n| n.tokens = vec![120]));
    fake.push(Event::TopologyChange { change: "MOVED_NODE".into(), node: c });
    let e = events
        .wait("refresh after MOVED_NODE", |e| refreshed(e).is_some_and(|(_, _, changed)| !changed.is_empty()))
        .await;
    assert_eq!(refreshed(&e), Some((&[][..], &[][..], &[c][..])));
    assert_eq!(session.replicas("ks", Token::from(110)), vec![c]);
    assert_eq!(session.replicas("ks", Token::from(150)), vec![a], "past 120 the ring wraps to -100");
    assert!(fake.open_connections(ip(3)) > 0, "the moved node keeps its connections");

    // The same node (host id) comes back at another address: replaced.
    fake.edit(|t| t.iter_mut().filter(|n| n.ip == ip(3)).for_each(|n| n.ip = ip(4)));
    fake.push(Event::TopologyChange { change: "NEW_NODE".into(), node: d });
    let e = events
        .wait("refresh after the address change", |e| refreshed(e).is_some_and(|(added, _, _)| !added.is_empty()))
        .await;
    assert_eq!(refreshed(&e), Some((&[d][..], &[c][..], &[d][..])));
    assert_eq!(sorted(session.nodes()), vec![a, d]);
    until("the old address's connections closed", || fake.open_connections(ip(3)) == 0).await;
    until("connections to the new address", || fake.open_connections(ip(4)) > 0).await;
    assert_eq!(session.replicas("ks", Token::from(110)), vec![d]);

    // Requests go only to nodes of the current topology.
    let before = (fake.queries(ip(2)), fake.queries(ip(3)));
    for _ in 0..20 {
        session.execute(&Statement::new("INSERT INTO ks.t (pk) VALUES (1)"), ()).await.expect("request");
    }
    assert_eq!((fake.queries(ip(2)), fake.queries(ip(3))), before);
    assert!(fake.queries(ip(1)) > 0 && fake.queries(ip(4)) > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_refresh_finds_changes_without_events() {
    let addresses: Vec<IpAddr> = (1..=3).map(ip).collect();
    let fake = FakeCluster::start(&addresses, vec![node(1, 1, &[0]), node(2, 2, &[100])]).await;
    let session = builder(&fake, ip(1))
        .topology_refresh_interval(Some(Duration::from_millis(300)))
        .build()
        .await
        .expect("session");
    let mut events = Events(session.events());
    fake.edit(|t| t.push(node(3, 3, &[200])));
    let e = events.wait("periodic refresh", |e| refreshed(e).is_some_and(|(added, _, _)| !added.is_empty())).await;
    assert_eq!(refreshed(&e).map(|(added, _, _)| added.to_vec()), Some(vec![fake.addr(ip(3))]));
    until("connections to the node found by the periodic refresh", || fake.open_connections(ip(3)) > 0).await;
}

/// A burst of schema changes (a migration, or other clients' DDL on a
/// busy cluster) is read once, after its last queued event, not once per
/// event: a session reading each in turn fell seconds behind, and acted on
/// stale events (it forgot tablets learned since). Every event still
/// reaches subscribers, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_schema_changes_is_read_once() {
    use shardwise::protocol::response::{SchemaChange, SchemaChangeTarget, SchemaChangeType};
    let fake = FakeCluster::start(&[ip(1)], vec![node(1, 1, &[0])]).await;
    let session = builder(&fake, ip(1)).topology_refresh_interval(None).build().await.expect("session");
    let mut events = Events(session.events());
    until("the control connection", || session.control_node().is_some()).await;
    let created = |i: usize| {
        Event::SchemaChange(SchemaChange {
            change: SchemaChangeType::Created,
            target: SchemaChangeTarget::Table { keyspace: "ks".into(), name: format!("t{i}") },
        })
    };
    let before = fake.keyspace_reads.load(Ordering::SeqCst);
    for i in 0..50 {
        fake.push(created(i));
    }
    for i in 0..50 {
        let want = SessionEvent::Database(created(i));
        let told = events.wait("a schema change", |e| matches!(e, SessionEvent::Database(_))).await;
        assert_eq!(told, want, "every event told, in order");
    }
    let reads = fake.keyspace_reads.load(Ordering::SeqCst) - before;
    assert!((1..=10).contains(&reads), "50 schema changes read the keyspaces {reads} times");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_event_takes_a_node_out_of_plans_until_up() {
    let addresses: Vec<IpAddr> = (1..=2).map(ip).collect();
    let fake = FakeCluster::start(&addresses, vec![node(1, 1, &[0]), node(2, 2, &[100])]).await;
    let (a, b) = (fake.addr(ip(1)), fake.addr(ip(2)));
    let session = builder(&fake, ip(1)).topology_refresh_interval(None).build().await.expect("session");
    let mut events = Events(session.events());
    until("the control connection", || session.control_node().is_some()).await;
    let insert = Statement::new("INSERT INTO ks.t (pk) VALUES (1)");
    for _ in 0..10 {
        session.execute(&insert, ()).await.expect("request");
    }
    assert!(fake.queries(ip(1)) > 0 && fake.queries(ip(2)) > 0, "round-robin over both");

    // Reported down while its connections are still open: skipped.
    fake.push(Event::StatusChange { change: "DOWN".into(), node: b });
    events.wait("NodeDown", |e| *e == SessionEvent::NodeDown(b)).await;
    assert_eq!(session.up_nodes(), vec![a]);
    assert!(fake.open_connections(ip(2)) > 0);
    let before = fake.queries(ip(2));
    for _ in 0..20 {
        session.execute(&insert, ()).await.expect("request");
    }
    assert_eq!(fake.queries(ip(2)), before, "a node reported down gets no requests");

    fake.push(Event::StatusChange { change: "UP".into(), node: b });
    events.wait("NodeUp", |e| *e == SessionEvent::NodeUp(b)).await;
    for _ in 0..20 {
        session.execute(&insert, ()).await.expect("request");
    }
    assert!(fake.queries(ip(2)) > before, "back in the plans");
}

/// Nodes reached through a proxy each (as behind NAT): the peers' addresses
/// are translated, requests pass the proxies, a status event for a node's
/// own address takes exactly that node down (every proxy shares one IP),
/// and a peer with no translation is left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn translated_peers_are_reached_at_their_translated_addresses() {
    translated_peers(|map| Arc::new(map)).await;
}

/// A translator that answers only asynchronously (the official driver's
/// `translate_address`, here after a pause as a lookup would take).
#[derive(Debug)]
struct Looked(HashMap<SocketAddr, SocketAddr>);

impl shardwise::cluster::AddressTranslator for Looked {
    fn translate_address<'a>(
        &'a self,
        peer: &'a shardwise::cluster::UntranslatedPeer<'a>,
    ) -> shardwise::cluster::Translation<'a> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            self.0
                .get(&peer.address)
                .copied()
                .ok_or(shardwise::cluster::TranslationError::NoRuleForAddress(peer.address))
        })
    }
}

/// The same with a translator that only answers asynchronously: peers and
/// status events are translated by awaiting it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asynchronous_translator_is_awaited_for_peers_and_events() {
    translated_peers(|map| Arc::new(Looked(map))).await;
}

async fn translated_peers(
    translator: impl FnOnce(HashMap<SocketAddr, SocketAddr>) -> Arc<dyn shardwise::cluster::AddressTranslator>,
) {
    use testkit::fault::{Direction, FaultProxy};
    let addresses: Vec<IpAddr> = (1..=3).map(ip).collect();
    let fake = FakeCluster::start(&addresses, vec![node(1, 1, &[0]), node(2, 2, &[100]), node(3, 3, &[200])]).await;
    let (a, b) = (fake.addr(ip(1)), fake.addr(ip(2)));
    let (pa, pb) = (FaultProxy::start(a).expect("proxy"), FaultProxy::start(b).expect("proxy"));
    // Node 3 has no translation: it is left out.
    let map: HashMap<SocketAddr, SocketAddr> = [(a, pa.addr()), (b, pb.addr())].into();
    let session = SessionBuilder::new()
        .known_node_addr(pa.addr())
        .protocol_versions(ProtocolVersion::V4, ProtocolVersion::V4)
        .default_consistency(Consistency::One)
        .await_schema_agreement(false)
        .topology_event_delay(Duration::from_millis(50))
        .topology_refresh_interval(None)
        .address_translator(translator(map))
        .build()
        .await
        .expect("session");
    let mut events = Events(session.events());
    until("the control connection", || session.control_node().is_some()).await;
    assert_eq!(sorted(session.up_nodes()), sorted(vec![pa.addr(), pb.addr()]));
    let insert = Statement::new("INSERT INTO ks.t (pk) VALUES (1)");
    for _ in 0..10 {
        session.execute(&insert, ()).await.expect("request");
    }
    let through = |p: &FaultProxy| p.frames(Direction::ToServer, 0x07);
    assert!(through(&pa) > 0 && through(&pb) > 0, "requests pass both proxies");
    assert!(fake.queries(ip(2)) > 0, "node 2 reached through its proxy");
    assert_eq!(fake.open_connections(ip(3)), 0, "no connection to the untranslated peer");

    fake.push(Event::StatusChange { change: "DOWN".into(), node: b });
    events.wait("NodeDown", |e| *e == SessionEvent::NodeDown(pb.addr())).await;
    assert_eq!(session.up_nodes(), vec![pa.addr()], "only node 2 is down");
    fake.push(Event::StatusChange { change: "UP".into(), node: b });
    events.wait("NodeUp", |e| *e == SessionEvent::NodeUp(pb.addr())).await;
    assert_eq!(sorted(session.up_nodes()), sorted(vec![pa.addr(), pb.addr()]));
}

/// A refill started from another runtime than the session's (a CDC
/// worker's thread has its own) runs on the session's: the connections it
/// opens outlive that runtime. Their tasks once ran where the refill was
/// started, died with that runtime, and left connections in the pool that
/// nobody read: requests to the node timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_opened_from_a_short_lived_runtime_outlive_it() {
    let addresses: Vec<IpAddr> = (1..=2).map(ip).collect();
    let fake = FakeCluster::start(&addresses, vec![node(1, 1, &[0])]).await;
    let session = builder(&fake, ip(1))
        .topology_refresh_interval(None)
        .request_timeout(Some(Duration::from_secs(2)))
        .build()
        .await
        .expect("session");
    until("the control connection", || session.control_node().is_some()).await;
    fake.edit(|nodes| nodes.push(node(2, 2, &[100])));
    // Node 2 is found, and its pool filled, from a runtime of its own that
    // ends right after.
    let (worker, observed) = (session.clone(), fake.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            worker.refresh_topology().await.expect("refresh");
            until("node 2's connections", || observed.open_connections(ip(2)) > 0).await;
        });
    })
    .join()
    .expect("the short-lived runtime's thread");
    let insert = Statement::new("INSERT INTO ks.t (pk) VALUES (1)");
    // A request to a connection nobody reads never ends: its deadline is
    // kept by the connection's tasks.
    for i in 0..20 {
        let request = tokio::time::timeout(Duration::from_secs(10), session.execute(&insert, ()));
        request.await.unwrap_or_else(|_| panic!("request {i} hung")).unwrap_or_else(|e| panic!("request {i}: {e}"));
    }
    assert!(fake.queries(ip(2)) > 0, "node 2 answered requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_connection_moves_and_registers_again() {
    let addresses: Vec<IpAddr> = (1..=3).map(ip).collect();
    let fake = FakeCluster::start(&addresses, vec![node(1, 1, &[0]), node(2, 2, &[100]), node(3, 3, &[200])]).await;
    let session = builder(&fake, ip(1)).topology_refresh_interval(None).build().await.expect("session");
    let mut events = Events(session.events());
    until("the control connection", || session.control_node().is_some()).await;
    let first = session.control_node().expect("control");
    assert_eq!(fake.registrations(first.ip()), 1);

    let killed = Instant::now();
    fake.kill(first.ip());
    let e = events
        .wait("ControlConnectionChanged", |e| matches!(e, SessionEvent::ControlConnectionChanged(a) if *a != first))
        .await;
    let SessionEvent::ControlConnectionChanged(second) = e else { unreachable!() };
    println!("control connection moved from {first} to {second} in {:?}", killed.elapsed());
    assert_ne!(second, first);
    assert_eq!(session.control_node(), Some(second));
    assert_eq!(fake.registrations(second.ip()), 1, "registered again on the new node");
    // The move re-reads the topology (events sent meanwhile were lost).
    events.wait("refresh after the move", |e| refreshed(e).is_some()).await;
    // Events arrive through the new control connection.
    let change = Event::StatusChange { change: "DOWN".into(), node: first };
    fake.push(change.clone());
    events.wait("the event through the new control connection", |e| *e == SessionEvent::Database(change.clone())).await;
    // Requests avoid the dead node.
    for _ in 0..10 {
        session.execute(&Statement::new("INSERT INTO ks.t (pk) VALUES (1)"), ()).await.expect("request");
    }
}

#[test]
fn connection_counts_per_distance() {
    let config = SessionConfig::default();
    assert_eq!(config.connections_for(NodeDistance::Local), 1);
    assert_eq!(config.connections_for(NodeDistance::Remote), 1, "remote nodes default to one connection");
    assert_eq!(config.connections_for(NodeDistance::Ignored), 0);
    let builder = SessionBuilder::new()
        .connections_per_node(4)
        .connections_per_node_for(NodeDistance::Remote, 2)
        .connections_per_node_for(NodeDistance::Ignored, 9);
    let config = builder.config();
    assert_eq!(config.connections_for(NodeDistance::Local), 4);
    assert_eq!(config.connections_for(NodeDistance::Remote), 2);
    assert_eq!(config.connections_for(NodeDistance::Ignored), 0, "ignored nodes never get connections");
    let builder = builder.connections_per_node_for(NodeDistance::Local, 3);
    assert_eq!(builder.config().connections_per_node, 3);
}

/// Local nodes get the local count, remote nodes their own, ignored nodes
/// none; a node that becomes local is given a pool of the local size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_are_sized_by_node_distance() {
    let addresses: Vec<IpAddr> = (1..=4).map(ip).collect();
    let topology = vec![
        node_in("dc1", 1, 1, &[0]),
        node_in("dc1", 2, 2, &[100]),
        node_in("dc2", 3, 3, &[200]),
        node_in("dc2", 4, 4, &[300]),
    ];
    let fake = FakeCluster::start(&addresses, topology).await;
    let (a, b, c, d) = (fake.addr(ip(1)), fake.addr(ip(2)), fake.addr(ip(3)), fake.addr(ip(4)));
    let policy = DistancePolicy {
        local_datacenter: Some("dc1".into()),
        use_remote: true,
        deny: vec![ip(4)],
        ..Default::default()
    };
    let session = builder(&fake, ip(1))
        .topology_refresh_interval(None)
        .distance_policy(policy)
        .connections_per_node_for(NodeDistance::Local, 3)
        .connections_per_node_for(NodeDistance::Remote, 2)
        .build()
        .await
        .expect("session");
    let mut events = Events(session.events());
    assert_eq!(session.nodes(), vec![a, b, c], "local nodes first, the ignored one left out");
    let pool = |addr: SocketAddr| session.node_connections(addr, None).len();
    until("local pools full", || pool(a) == 3 && pool(b) == 3).await;
    until("the remote pool full", || pool(c) == 2).await;
    until("the control connection", || session.control_node().is_some()).await;
    // Let the refills settle: nothing more is opened.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!((pool(a), pool(b), pool(c), pool(d)), (3, 3, 2, 0));
    until("the server sees the local count", || fake.open_connections(ip(2)) == 3).await;
    until("the server sees the remote count", || fake.open_connections(ip(3)) == 2).await;
    assert_eq!(fake.open_connections(ip(4)), 0, "an ignored node gets no connection");

    // The remote node moves to the local datacenter: a pool of the local size.
    fake.edit(|t| t.iter_mut().filter(|n| n.ip == ip(3)).for_each(|n| n.datacenter = "dc1"));
    fake.push(Event::TopologyChange { change: "MOVED_NODE".into(), node: c });
    let e = events
        .wait("refresh after the move", |e| refreshed(e).is_some_and(|(_, _, changed)| !changed.is_empty()))
        .await;
    assert_eq!(refreshed(&e), Some((&[c][..], &[c][..], &[c][..])), "the pool was replaced");
    until("the moved node's pool at the local size", || pool(c) == 3).await;
    until("the old remote pool's connections closed", || fake.open_connections(ip(3)) == 3).await;
    assert_eq!(fake.open_connections(ip(4)), 0);
    assert_eq!(session.nodes(), vec![a, b, c]);
}

/// A node that forgot a prepared statement answers UNPREPARED: the session
/// prepares it there again, the request succeeds, and the session reports
/// the re-prepare.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprepared_answer_reprepares_and_emits_an_event() {
    let addresses: Vec<IpAddr> = (1..=2).map(ip).collect();
    let fake = FakeCluster::start(&addresses, vec![node(1, 1, &[0]), node(2, 2, &[100])]).await;
    let session = builder(&fake, ip(1)).topology_refresh_interval(None).build().await.expect("session");
    let mut events = Events(session.events());
    until("a connection to every node", || session.up_nodes().len() == 2).await;
    let text = "INSERT INTO ks.t (pk) VALUES (1)";
    let prepared = session.prepare(text).await.expect("prepare");
    assert_eq!(prepared.id(), statement_id(text));
    let prepares_before: Vec<usize> = addresses.iter().map(|a| fake.prepares(*a)).collect();
    session.execute(&prepared, ()).await.expect("a request without UNPREPARED");

    fake.forget_prepared();
    session.execute(&prepared, ()).await.expect("the request succeeds after re-preparing");
    assert!(!fake.forget.load(Ordering::SeqCst), "the server answered UNPREPARED");
    let e = events.wait("StatementReprepared", |e| matches!(e, SessionEvent::StatementReprepared { .. })).await;
    let SessionEvent::StatementReprepared { node, statement, id } = e else { unreachable!() };
    assert!(addresses.contains(&node.ip()), "{node}");
    assert_eq!(statement, text);
    assert_eq!(id, statement_id(text).to_vec());
    let prepares_after: Vec<usize> = addresses.iter().map(|a| fake.prepares(*a)).collect();
    let grew: Vec<IpAddr> = addresses
        .iter()
        .zip(prepares_before.iter().zip(&prepares_after))
        .filter(|(_, (b, a))| a > b)
        .map(|(ip, _)| *ip)
        .collect();
    assert_eq!(grew, vec![node.ip()], "prepared again on the node that forgot it, and only there");

    // Once only: requests that do not meet UNPREPARED report nothing.
    for _ in 0..5 {
        session.execute(&prepared, ()).await.expect("request");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    while let Ok(e) = events.0.try_recv() {
        assert!(!matches!(e, SessionEvent::StatementReprepared { .. }), "unexpected {e:?}");
    }
}
