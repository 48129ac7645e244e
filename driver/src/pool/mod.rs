//! The connections to one node: its per-shard [`slots`] and whether the node
//! is up. The session's refill task (which opens connections to the
//! missing shards with [`Connection::open_to_shard`]) and connection
//! watchers fill and empty the slots; requests pick from them.

pub(crate) mod slots;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use shardwise_protocol::sharding::ShardingInfo;
use shardwise_protocol::token::Token;
use tokio::sync::Notify;

use crate::affinity::ConnectionAffinity;
use crate::connection::Connection;
use slots::{Lane, PoolConnection, Sizes, Slots};

impl PoolConnection for Connection {
    fn is_closed(&self) -> bool {
        Connection::is_closed(self)
    }
    fn in_flight(&self) -> usize {
        Connection::in_flight(self)
    }
    fn shard(&self) -> Option<(u16, u16)> {
        self.sharding().map(|s| (s.shard(), s.sharder().nr_shards().get()))
    }
}

/// The least loaded open connection in `slots` of the shard owning `token`
/// (by `shard_of`, asked of a connection of the node) on a sharded node,
/// else the least loaded open connection. Generic over the connection so
/// that the query plan's tests can use it without sockets.
pub(crate) fn pick_connection<C: PoolConnection>(
    slots: &Slots<C>,
    token: Option<Token>,
    seed: usize,
    lane: Lane,
    shard_of: impl FnOnce(&C, Token) -> u16,
) -> Option<C> {
    slots.pick(|c| token.map(|token| shard_of(c, token)), seed, lane)
}

/// This thread's lane ([`ConnectionAffinity::Thread`],
/// [`ConnectionAffinity::Auto`]): threads are numbered in the order they
/// first ask.
fn thread_lane() -> usize {
    static THREADS: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static LANE: usize = THREADS.fetch_add(1, Ordering::Relaxed);
    }
    LANE.try_with(|lane| *lane).unwrap_or(0)
}

/// The worker threads of the runtime this runs on (1 outside one).
pub(crate) fn runtime_workers() -> usize {
    tokio::runtime::Handle::try_current().map_or(1, |h| h.metrics().num_workers())
}

/// The connections to one node.
pub(crate) struct NodePool {
    /// The node's address.
    pub(crate) addr: SocketAddr,
    /// The connections, by shard.
    pub(crate) slots: Slots<Connection>,
    /// Which of a node's (a shard's) connections a request takes.
    affinity: ConnectionAffinity,
    /// Whether the node counts as up: it has an open connection and no
    /// DOWN event came after the last one opened.
    up: AtomicBool,
    /// The node left the topology (or its session ended): stop refilling.
    retired: AtomicBool,
    /// Wakes a refill task sleeping through its backoff (an UP event); a
    /// wake-up while no task sleeps is kept for the next sleep.
    pub(crate) wake: Notify,
    /// How long the attempts sent to the node took.
    pub(crate) latency: crate::metrics::LatencyHistogram,
    /// Their average, for latency awareness.
    pub(crate) average: crate::latency::NodeAverage,
    /// Until when refills open connections through the regular port: the
    /// shard-aware port gave a connection of another shard (a NAT rewrote
    /// the source port, or the port could not be reached and the regular
    /// port served instead).
    shard_port_off_until: std::sync::Mutex<Option<Instant>>,
}

/// How long a node's shard-aware port goes unused after it gave a
/// connection of another shard than asked.
const SHARD_PORT_PAUSE: Duration = Duration::from_secs(5 * 60);

impl std::fmt::Debug for NodePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodePool").field("addr", &self.addr).field("up", &self.is_up()).finish()
    }
}

impl NodePool {
    /// An empty pool for `sizes` connections, chosen between by `affinity`.
    pub(crate) fn new(addr: SocketAddr, sizes: Sizes, affinity: ConnectionAffinity) -> Self {
        NodePool {
            addr,
            slots: Slots::sized(sizes),
            affinity,
            up: AtomicBool::new(true),
            retired: AtomicBool::new(false),
            wake: Notify::new(),
            latency: Default::default(),
            average: Default::default(),
            shard_port_off_until: std::sync::Mutex::new(None),
        }
    }

    /// Whether a refill may ask for a shard through the node's shard-aware
    /// port.
    pub(crate) fn shard_port_usable(&self) -> bool {
        let off = self.shard_port_off_until.lock().unwrap_or_else(|e| e.into_inner());
        off.is_none_or(|until| Instant::now() >= until)
    }

    /// The shard-aware port gave a connection of another shard than asked:
    /// refills use the regular port for [`SHARD_PORT_PAUSE`].
    pub(crate) fn shard_port_misplaced(&self) {
        *self.shard_port_off_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + SHARD_PORT_PAUSE);
    }

    /// A connection to the shard owning `token` on a sharded node, else
    /// any: this thread's when connections are thread-affine (see
    /// [`ConnectionAffinity`]), else the least loaded.
    pub(crate) fn connection_for(&self, token: Option<Token>, seed: usize) -> Option<Connection> {
        pick_connection(&self.slots, token, seed, self.lane(), |c, token| {
            c.sharding().map_or(0, |s: &ShardingInfo| s.sharder().shard_of(token))
        })
    }

    /// A connection to `shard` (a tablet's), else any; chosen as by
    /// [`NodePool::connection_for`].
    pub(crate) fn connection_on_shard(&self, shard: u16, seed: usize) -> Option<Connection> {
        self.slots.pick(|_| Some(shard), seed, self.lane())
    }

    fn lane(&self) -> Lane {
        match self.affinity {
            ConnectionAffinity::LeastLoaded => Lane::Shared,
            ConnectionAffinity::Thread => Lane::Own(thread_lane()),
            ConnectionAffinity::Auto => Lane::OwnUnsharded(thread_lane()),
        }
    }

    /// The least loaded open connection.
    pub(crate) fn connection(&self, seed: usize) -> Option<Connection> {
        self.slots.pick_any(seed)
    }

    /// Whether the node counts as up.
    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// Marks the node up or down; `true` when that changed its state.
    pub(crate) fn set_up(&self, up: bool) -> bool {
        self.up.swap(up, Ordering::AcqRel) != up
    }

    /// Whether the pool was retired.
    pub(crate) fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// Retires the pool: no more refills, every connection closed.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
        self.slots.abandon_refill();
        for conn in self.slots.take_all() {
            conn.close();
        }
        self.wake.notify_one();
    }
}
