//! The front itself: [`Front`] starts one listener pair per Cassandra node
//! and [`FrontHandle`] is what a test or the binary holds on to while it runs
//! (addresses, counters, generations, CDC options). The state every
//! connection shares lives in [`crate::shared`]; this module builds it,
//! binds the listeners and hands each accepted socket to the proxy.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU16;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shardwise_protocol::sharding::Sharder;
use tokio::net::TcpListener;

use crate::admin::Admin;
use crate::clock::now_ms;
use crate::config::FrontConfig;
use crate::delay_line::DelayLine;
use crate::error::EmuError;
use crate::generation::Generation;
use crate::shared::client_routes::ClientRoute;
use crate::shared::{Generations, NodeState, Resize, RouteListeners, SchemaCache, Shared, TabletKeyspace, Tablets};
use crate::stats::{inc, Counters, FrontStats, NodeCounters, ShardCounters};
use crate::tablet_streams::TabletStreams;
use crate::tablets::TabletMap;
use crate::{cdclog, proxy, system_tables, CdcOptions, CdcTable};

/// An emulated node's addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmulatedNode {
    /// The Cassandra node behind it.
    pub upstream: SocketAddr,
    /// The front's regular address.
    pub addr: SocketAddr,
    /// The front's shard-aware address.
    pub shard_aware_addr: SocketAddr,
    /// The node's host id, as `SCYLLA_HOST_ID` reports it.
    pub host_id: Option<uuid::Uuid>,
}

/// Starts fronts.
#[derive(Debug)]
pub struct Front;

impl Front {
    /// Starts a front for one Cassandra node. Blocks until it listens.
    pub fn start(upstream: SocketAddr, config: FrontConfig) -> Result<FrontHandle, EmuError> {
        Front::start_cluster(&[upstream], config)
    }

    /// Starts one front per Cassandra node of a cluster (the nodes' native
    /// addresses), sharing one prepared-statement memory, CDC registry and
    /// generation history. Blocks until they listen.
    pub fn start_cluster(upstreams: &[SocketAddr], config: FrontConfig) -> Result<FrontHandle, EmuError> {
        if upstreams.is_empty() {
            return Err(EmuError::Config("no Cassandra node to front".into()));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.worker_threads.max(1))
            .thread_name("emu-front")
            .enable_all()
            .build()
            .map_err(|e| EmuError::io("starting the front's runtime", e))?;
        let (tx, rx) = std::sync::mpsc::channel();
        let upstreams = upstreams.to_vec();
        runtime.spawn(async move {
            let _ = tx.send(setup(upstreams, config).await);
        });
        let shared = rx
            .recv_timeout(Duration::from_secs(180))
            .map_err(|_| EmuError::Config("the front did not start within 180 s".into()))??;
        Ok(FrontHandle { runtime: Some(runtime), shared })
    }
}

async fn bind(ip: IpAddr, port: u16) -> Result<TcpListener, EmuError> {
    TcpListener::bind(SocketAddr::new(ip, port)).await.map_err(|e| EmuError::io(format!("listening on {ip}:{port}"), e))
}

/// One listener on each of `ips`, all on the same port: `port`, or when it
/// is 0 one the kernel picks for the first address that is also free on the
/// others (tried a few times, as another process may hold it there).
async fn bind_all(ips: &[IpAddr], port: u16) -> Result<Vec<TcpListener>, EmuError> {
    let Some((&first, rest)) = ips.split_first() else { return Ok(Vec::new()) };
    if port != 0 || rest.is_empty() {
        let mut listeners = Vec::with_capacity(ips.len());
        for &ip in ips {
            listeners.push(bind(ip, port).await?);
        }
        return Ok(listeners);
    }
    for _ in 0..200 {
        let head = bind(first, 0).await?;
        let chosen = head.local_addr().map_err(|e| EmuError::io("front address", e))?.port();
        let mut listeners = vec![head];
        for &ip in rest {
            match TcpListener::bind(SocketAddr::new(ip, chosen)).await {
                Ok(l) => listeners.push(l),
                Err(_) => break,
            }
        }
        if listeners.len() == ips.len() {
            return Ok(listeners);
        }
    }
    Err(EmuError::Config(format!("no port is free on every one of {ips:?}")))
}

async fn setup(upstreams: Vec<SocketAddr>, config: FrontConfig) -> Result<Arc<Shared>, EmuError> {
    let nr = NonZeroU16::new(config.shards).ok_or_else(|| EmuError::Config("shards must be at least 1".into()))?;
    let sharder = Sharder::new(nr, config.ignore_msb).map_err(|e| EmuError::Config(e.to_string()))?;
    let emu = config.emu_keyspace.clone();
    if emu.is_empty() || !emu.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return Err(EmuError::Config(format!("emu_keyspace {emu:?} must be a lowercase identifier")));
    }
    let admin = Admin::new(upstreams[0], config.credentials.clone());
    let (ring, ring_nodes) = system_tables::read_ring(&admin).await?;
    if ring_nodes > 1 {
        if let Ok(mut c) = admin.consistency.lock() {
            *c = shardwise_protocol::consistency::Consistency::Quorum;
        }
    }
    for ddl in system_tables::keyspace_ddl(&emu, ring_nodes.clamp(1, 3)) {
        admin.query(&ddl).await?;
    }
    admin.wait_schema_agreement(Duration::from_secs(20)).await?;
    let registry = system_tables::load_registry(&admin, &emu).await?;
    let tombstone_gc = system_tables::load_tombstone_gc(&admin, &emu).await?;

    // Host ids by rpc address.
    let mut host_ids: HashMap<IpAddr, uuid::Uuid> = HashMap::new();
    for q in [
        "SELECT rpc_address, host_id FROM system.local WHERE key = 'local'",
        "SELECT rpc_address, host_id FROM system.peers",
    ] {
        for r in admin.rows(q).await? {
            if let (Some(shardwise_protocol::types::CqlValue::Inet(ip)), Some(id)) =
                (r[0].clone(), r[1].as_ref().and_then(|v| v.as_uuid()))
            {
                host_ids.insert(ip, id);
            }
        }
    }

    // Listeners: one pair per node, the same two ports on every address.
    let ips: Vec<IpAddr> = upstreams.iter().map(|u| config.bind_ip.unwrap_or(u.ip())).collect();
    let regulars = bind_all(&ips, config.port).await?;
    let awares = bind_all(&ips, config.shard_aware_port).await?;
    let mut listeners = Vec::new();
    let mut nodes = Vec::new();
    for (i, (regular, aware)) in regulars.into_iter().zip(awares).enumerate() {
        let front = regular.local_addr().map_err(|e| EmuError::io("front address", e))?;
        let shard_aware = aware.local_addr().map_err(|e| EmuError::io("front address", e))?;
        nodes.push(NodeState {
            counters: NodeCounters {
                upstream: upstreams[i],
                front,
                shards: (0..nr.get()).map(|_| ShardCounters::default()).collect(),
                regular_accepted: Default::default(),
                shard_aware_accepted: Default::default(),
            },
            shard_aware,
            advertised_shard_aware_port: AtomicU16::new(0),
            host_id: host_ids.get(&upstreams[i].ip()).copied(),
            rr: AtomicU32::new(0),
        });
        listeners.push((i, regular, aware));
    }

    let credentials = config.credentials.clone();
    let shared = Arc::new(Shared {
        delay: config.miss_delay.filter(|d| !d.is_zero()).map(DelayLine::start),
        config,
        sharder,
        nodes,
        counters: Counters::default(),
        prepared: Mutex::new(HashMap::new()),
        registry: Mutex::new(registry),
        generations: Generations::default(),
        schemas: SchemaCache::default(),
        tablets: Tablets::default(),
        admin,
        log_writer: cdclog::writer::LogWriter::new(upstreams[0], credentials, 2),
        rng: std::sync::atomic::AtomicU64::new(now_ms() as u64 ^ u64::from(std::process::id()) << 32),
        last_timestamp: std::sync::atomic::AtomicI64::new(0),
        tombstone_gc: Mutex::new(tombstone_gc),
        caching_enabled: Mutex::new(HashMap::new()),
        route_listeners: RouteListeners::default(),
    });
    // Keyspaces created with tablets through a front before this one.
    for (keyspace, initial) in system_tables::tablet_keyspaces(&shared.admin, &emu).await? {
        let rf = system_tables::replication_factor(&shared.admin, &keyspace).await?;
        if let Ok(mut k) = shared.tablets.keyspaces.lock() {
            k.insert(keyspace, TabletKeyspace { initial, rf });
        }
    }

    // The generation: reuse the latest when it was built for this ring and
    // sharding (a restarted Scylla keeps its generation), else publish one now.
    let existing = system_tables::read_generations(&shared.admin, &emu, sharder).await?;
    let reuse = existing.last().is_some_and(|g| system_tables::matches_ring(g, &ring, sharder));
    if let Ok(mut gens) = shared.generations.list.lock() {
        *gens = existing;
    }
    if !reuse {
        shared.create_generation(now_ms()).await?;
    }

    for (i, regular, aware) in listeners {
        tokio::spawn(accept_loop(shared.clone(), i, regular, false));
        tokio::spawn(accept_loop(shared.clone(), i, aware, true));
    }
    Ok(shared)
}

async fn accept_loop(shared: Arc<Shared>, node: usize, listener: TcpListener, shard_aware: bool) {
    let n = u32::from(shared.sharder.nr_shards().get());
    loop {
        let Ok((socket, peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let counters = &shared.nodes[node].counters;
        inc(if shard_aware { &counters.shard_aware_accepted } else { &counters.regular_accepted });
        let shard = if shard_aware {
            u32::from(peer.port()) % n
        } else {
            shared.nodes[node].rr.fetch_add(1, Ordering::Relaxed) % n
        };
        tokio::spawn(proxy::serve(shared.clone(), node, socket, shard as u16));
    }
}

/// A running front (one per Cassandra node). Dropping it stops the front.
pub struct FrontHandle {
    runtime: Option<tokio::runtime::Runtime>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FrontHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontHandle").field("nodes", &self.nodes()).finish()
    }
}

impl FrontHandle {
    /// The first node's regular address (the contact point).
    pub fn addr(&self) -> SocketAddr {
        self.shared.nodes[0].counters.front
    }

    /// The first node's shard-aware address.
    pub fn shard_aware_addr(&self) -> SocketAddr {
        self.shared.nodes[0].shard_aware
    }

    /// Names `port` in SUPPORTED as the first node's shard-aware port
    /// instead of its own: with a TCP proxy there that forwards to
    /// [`FrontHandle::shard_aware_addr`], clients get what a NAT between
    /// them and ScyllaDB gives, connections on the proxy's source ports'
    /// shards rather than their own. 0 names the node's own port again.
    pub fn advertise_shard_aware_port(&self, port: u16) {
        self.shared.nodes[0].advertised_shard_aware_port.store(port, Ordering::Relaxed);
    }

    /// Every emulated node.
    pub fn nodes(&self) -> Vec<EmulatedNode> {
        self.shared
            .nodes
            .iter()
            .map(|n| EmulatedNode {
                upstream: n.counters.upstream,
                addr: n.counters.front,
                shard_aware_addr: n.shard_aware,
                host_id: n.host_id,
            })
            .collect()
    }

    /// The configuration.
    pub fn config(&self) -> &FrontConfig {
        &self.shared.config
    }

    /// The sharding every node reports.
    pub fn sharder(&self) -> Sharder {
        self.shared.sharder
    }

    /// The keyspace of the stand-in tables.
    pub fn emu_keyspace(&self) -> &str {
        &self.shared.config.emu_keyspace
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> FrontStats {
        self.shared.stats()
    }

    /// Sets hits, misses and unrouted counts back to zero.
    pub fn reset_routing_stats(&self) {
        let nodes: Vec<&NodeCounters> = self.shared.nodes.iter().map(|n| &n.counters).collect();
        self.shared.counters.reset_routing(&nodes);
    }

    /// Every published generation, oldest first.
    pub fn generations(&self) -> Vec<Generation> {
        self.shared.generations.list.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// The generation operating at `at_ms` (the latest whose timestamp is not
    /// after it; the oldest if all are later).
    pub fn generation_at(&self, at_ms: i64) -> Option<Generation> {
        let gens = self.generations();
        gens.iter().rev().find(|g| g.timestamp_ms <= at_ms).or(gens.first()).cloned()
    }

    /// The generation operating now.
    pub fn current_generation(&self) -> Option<Generation> {
        self.generation_at(now_ms())
    }

    /// The tablet map of `keyspace.table`, when its keyspace was created
    /// with tablets.
    pub fn tablets(&self, keyspace: &str, table: &str) -> Option<Arc<TabletMap>> {
        self.shared.tablets_of(keyspace, table)
    }

    /// The `tablets = {...}` hints of `keyspace.table` as DESCRIBE shows
    /// them, when it was given some ([`crate::tablet_options`]).
    pub fn table_tablet_options(
        &self,
        keyspace: &str,
        table: &str,
    ) -> Option<std::collections::BTreeMap<String, String>> {
        self.shared.table_tablet_options(keyspace, table)
    }

    /// `Some(initial)` when `keyspace` uses tablets (0: no `initial` given).
    pub fn keyspace_tablets(&self, keyspace: &str) -> Option<i32> {
        self.shared.keyspace_tablets(keyspace)
    }

    /// The CDC stream sets of `keyspace.table`, when it is a CDC table in a
    /// tablets keyspace.
    pub fn tablet_streams(&self, keyspace: &str, table: &str) -> Option<TabletStreams> {
        self.shared.tablets.streams.lock().ok()?.get(&(keyspace.to_owned(), table.to_owned())).cloned()
    }

    /// Splits or merges the tablets of `keyspace.table` now, as Scylla's
    /// load balancer does when a table grows or shrinks: the front judges
    /// and answers by the new map from here on, and `system.tablets` shows
    /// it (with the next `resize_seq_number`); a CDC table gets a new stream
    /// set ([`crate::tablet_streams`]). `Ok(None)` when the table has no
    /// tablets, or one tablet to merge.
    pub async fn resize_tablets(
        &self,
        keyspace: &str,
        table: &str,
        resize: Resize,
    ) -> Result<Option<Arc<TabletMap>>, EmuError> {
        let shared = self.shared.clone();
        let (keyspace, table) = (keyspace.to_owned(), table.to_owned());
        self.on_runtime("resize", async move { shared.resize_tablets(&keyspace, &table, resize).await }).await
    }

    /// Runs `work` on the front's runtime (where its own connections to
    /// Cassandra live) and waits for it; `what` names it in the error of a
    /// task that died.
    async fn on_runtime<T: Send + 'static>(
        &self,
        what: &str,
        work: impl std::future::Future<Output = Result<T, EmuError>> + Send + 'static,
    ) -> Result<T, EmuError> {
        let runtime = self.runtime.as_ref().ok_or_else(|| EmuError::Config("front stopped".into()))?;
        runtime.spawn(work).await.map_err(|e| EmuError::Protocol(format!("{what} task: {e}")))?
    }

    /// The base tables with CDC options.
    pub fn cdc_tables(&self) -> Vec<CdcTable> {
        let Ok(r) = self.shared.registry.lock() else { return Vec::new() };
        let mut v: Vec<CdcTable> = r
            .tables
            .iter()
            .map(|((k, t), o)| CdcTable { keyspace: k.clone(), table: t.clone(), options: *o })
            .collect();
        v.sort_by(|a, b| (&a.keyspace, &a.table).cmp(&(&b.keyspace, &b.table)));
        v
    }

    /// The CDC options of one base table.
    pub fn cdc_options(&self, keyspace: &str, table: &str) -> Option<CdcOptions> {
        self.shared.registry.lock().ok()?.options(keyspace, table)
    }

    /// Publishes a new generation for the current ring, operating from `at`
    /// (simulates the generation switch of a topology change; Scylla uses
    /// now + 65 s for those).
    pub async fn new_generation_at(&self, at: SystemTime) -> Result<Generation, EmuError> {
        let ms = at.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
        let shared = self.shared.clone();
        self.on_runtime("generation", async move { shared.create_generation(ms).await }).await
    }

    /// [`new_generation_at`](Self::new_generation_at) for synchronous callers.
    pub fn new_generation_at_blocking(&self, at: SystemTime) -> Result<Generation, EmuError> {
        let ms = at.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
        let shared = self.shared.clone();
        let runtime = self.runtime.as_ref().ok_or_else(|| EmuError::Config("front stopped".into()))?;
        let (tx, rx) = std::sync::mpsc::channel();
        runtime.spawn(async move {
            let _ = tx.send(shared.create_generation(ms).await);
        });
        rx.recv().map_err(|_| EmuError::Protocol("generation task ended".into()))?
    }

    /// Sets client routes, as ScyllaDB's REST API does
    /// (`POST /v2/client-routes`): each replaces the route of its
    /// connection id and host id in `system.client_routes`, then one
    /// `CLIENT_ROUTES_CHANGE` names them all to the connections registered
    /// for it.
    pub async fn set_client_routes(&self, routes: Vec<ClientRoute>) -> Result<(), EmuError> {
        let shared = self.shared.clone();
        self.on_runtime("client routes", async move { shared.set_client_routes(&routes).await }).await
    }

    /// Removes the route of `connection_id` to `host_id`
    /// (`DELETE /v2/client-routes`), then announces it.
    pub async fn remove_client_route(&self, connection_id: &str, host_id: uuid::Uuid) -> Result<(), EmuError> {
        let shared = self.shared.clone();
        let connection_id = connection_id.to_owned();
        self.on_runtime("client routes", async move { shared.remove_client_route(&connection_id, host_id).await }).await
    }

    /// Stops the front: listeners close, client connections are dropped.
    pub fn stop(mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for FrontHandle {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
