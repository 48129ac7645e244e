//! Counters: everything the front does is counted, lock-free (relaxed
//! atomics; a snapshot is not atomic across counters, which is fine for an
//! instrument read after the fact).
//!
//! Per node and shard: connections (open and ever accepted), and for every
//! prepared EXECUTE whose partition key the front can compute a *hit* (the
//! connection's shard owns the token, or for a table with tablets, holds a
//! replica of its tablet) or a *miss*; requests whose key is unknown
//! (unprepared statements, unknown prepared ids, statements without bound
//! partition key) count as *unrouted*. Globally: requests, rewritten
//! statements, local answers, protocol-version rejections, prepared
//! statements learned, CDC logs created.
//!
//! Entries of prepared BATCHes are judged the same way but counted apart
//! (*batch hits* and *batch misses*, not in [`FrontStats::hit_rate`]):
//! ScyllaDB never answers a BATCH with a tablet's routing payload (nothing
//! in <https://github.com/scylladb/scylladb/blob/master/cql3/statements/batch_statement.cc>
//! adds one), so on a tablets table a driver routes a batch only by what
//! single statements taught it, and the Python driver not at all (its
//! `BatchStatement` names no table). Mixing them in would measure the
//! driver, not the front.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(crate) struct ShardCounters {
    pub(crate) open: AtomicU64,
    pub(crate) accepted: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) unrouted: AtomicU64,
    pub(crate) batch_hits: AtomicU64,
    pub(crate) batch_misses: AtomicU64,
}

#[derive(Debug)]
pub(crate) struct NodeCounters {
    pub(crate) upstream: SocketAddr,
    pub(crate) front: SocketAddr,
    pub(crate) shards: Vec<ShardCounters>,
    pub(crate) regular_accepted: AtomicU64,
    pub(crate) shard_aware_accepted: AtomicU64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) requests: AtomicU64,
    pub(crate) rewritten: AtomicU64,
    pub(crate) answered_locally: AtomicU64,
    pub(crate) version_rejections: AtomicU64,
    pub(crate) prepared_learned: AtomicU64,
    pub(crate) cdc_logs_created: AtomicU64,
    pub(crate) cdc_writes_logged: AtomicU64,
    pub(crate) cdc_log_rows: AtomicU64,
    pub(crate) cdc_inexact: AtomicU64,
    pub(crate) cdc_refused: AtomicU64,
    pub(crate) cdc_log_failures: AtomicU64,
    pub(crate) lwt_unshaped: AtomicU64,
    pub(crate) metadata_skipped: AtomicU64,
    pub(crate) metadata_changed: AtomicU64,
    pub(crate) tablet_routes: AtomicU64,
}

pub(crate) fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// One shard's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShardStats {
    /// Connections currently open on this shard.
    pub connections_open: u64,
    /// Connections ever accepted on this shard.
    pub connections_accepted: u64,
    /// Routed requests that arrived on the owning shard.
    pub hits: u64,
    /// Routed requests that arrived on another shard.
    pub misses: u64,
    /// Requests whose partition key the front could not compute.
    pub unrouted: u64,
    /// Prepared BATCH entries that arrived on the owning shard.
    pub batch_hits: u64,
    /// Prepared BATCH entries that arrived on another shard.
    pub batch_misses: u64,
}

/// One emulated node's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStats {
    /// The Cassandra node behind it.
    pub upstream: SocketAddr,
    /// The front's regular address.
    pub front: SocketAddr,
    /// Per shard.
    pub shards: Vec<ShardStats>,
    /// Connections accepted on the regular port.
    pub regular_accepted: u64,
    /// Connections accepted on the shard-aware port.
    pub shard_aware_accepted: u64,
}

/// A snapshot of the front's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontStats {
    /// Per node.
    pub nodes: Vec<NodeStats>,
    /// Requests received from clients.
    pub requests: u64,
    /// Statements rewritten before forwarding.
    pub rewritten: u64,
    /// Requests answered by the front itself.
    pub answered_locally: u64,
    /// Connections refused for speaking a protocol version other than v4.
    pub version_rejections: u64,
    /// Prepared statements whose table and key the front learned.
    pub prepared_learned: u64,
    /// CDC log tables created.
    pub cdc_logs_created: u64,
    /// Writes to CDC tables whose log rows were written.
    pub cdc_writes_logged: u64,
    /// Log rows written.
    pub cdc_log_rows: u64,
    /// List operations logged with guessed keys (`l[i] = v`, `DELETE l[i]`,
    /// `l = l - [v]`: the real keys exist only in Scylla).
    pub cdc_inexact: u64,
    /// Writes to CDC tables refused (a timestamp outside the generations, a
    /// statement the front cannot log).
    pub cdc_refused: u64,
    /// Writes that succeeded but whose log write failed (the client got an
    /// error).
    pub cdc_log_failures: u64,
    /// Conditional writes answered with Cassandra's shape instead of
    /// Scylla's (the front could not tell which row they address, or could
    /// not read it).
    pub lwt_unshaped: u64,
    /// Rows answers to v4 EXECUTEs with `SCYLLA_USE_METADATA_ID` sent
    /// without their column metadata (the client asked to skip it and its
    /// metadata id was current).
    pub metadata_skipped: u64,
    /// Rows answers to v4 EXECUTEs with `SCYLLA_USE_METADATA_ID` that carried
    /// `Metadata_changed` (the client's metadata id was stale).
    pub metadata_changed: u64,
    /// Answers given a tablets routing payload (v1: a misrouted request;
    /// v2: a request whose tablet version block was stale).
    pub tablet_routes: u64,
}

impl FrontStats {
    fn sum(&self, f: impl Fn(&ShardStats) -> u64) -> u64 {
        self.nodes.iter().flat_map(|n| n.shards.iter()).map(f).sum()
    }
    /// Hits over all nodes and shards.
    pub fn hits(&self) -> u64 {
        self.sum(|s| s.hits)
    }
    /// Misses over all nodes and shards.
    pub fn misses(&self) -> u64 {
        self.sum(|s| s.misses)
    }
    /// Unrouted requests over all nodes and shards.
    pub fn unrouted(&self) -> u64 {
        self.sum(|s| s.unrouted)
    }
    /// Prepared BATCH entries on their owning shard, over all nodes and shards.
    pub fn batch_hits(&self) -> u64 {
        self.sum(|s| s.batch_hits)
    }
    /// Prepared BATCH entries on another shard, over all nodes and shards.
    pub fn batch_misses(&self) -> u64 {
        self.sum(|s| s.batch_misses)
    }
    /// `hits / (hits + misses)` of single-statement requests (BATCH entries
    /// are not in it, see the module docs), 1.0 when nothing was routed.
    pub fn hit_rate(&self) -> f64 {
        let routed = self.hits() + self.misses();
        if routed == 0 {
            1.0
        } else {
            self.hits() as f64 / routed as f64
        }
    }
    /// Connections currently open over all nodes.
    pub fn connections_open(&self) -> u64 {
        self.sum(|s| s.connections_open)
    }
}

impl fmt::Display for FrontStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "requests {}  rewritten {}  local {}  v5-rejections {}  prepared {}  cdc-logs {}  hit-rate {:.4}  batch entries {} hits {} misses\n\
             cdc: writes logged {}  log rows {}  inexact list ops {}  refused {}  log-write failures {}  \
             LWT answers in Cassandra's shape {}",
            self.requests,
            self.rewritten,
            self.answered_locally,
            self.version_rejections,
            self.prepared_learned,
            self.cdc_logs_created,
            self.hit_rate(),
            self.batch_hits(),
            self.batch_misses(),
            self.cdc_writes_logged,
            self.cdc_log_rows,
            self.cdc_inexact,
            self.cdc_refused,
            self.cdc_log_failures,
            self.lwt_unshaped
        )?;
        for n in &self.nodes {
            writeln!(
                f,
                "node {} (front {}): accepted {} on the regular port, {} on the shard-aware port",
                n.upstream, n.front, n.regular_accepted, n.shard_aware_accepted
            )?;
            writeln!(f, "  shard  open  accepted        hits      misses    unrouted")?;
            for (i, s) in n.shards.iter().enumerate() {
                writeln!(
                    f,
                    "  {i:>5} {:>5} {:>9} {:>11} {:>11} {:>11}",
                    s.connections_open, s.connections_accepted, s.hits, s.misses, s.unrouted
                )?;
            }
        }
        Ok(())
    }
}

impl Counters {
    pub(crate) fn snapshot(&self, nodes: &[&NodeCounters]) -> FrontStats {
        FrontStats {
            nodes: nodes
                .iter()
                .map(|n| NodeStats {
                    upstream: n.upstream,
                    front: n.front,
                    shards: n
                        .shards
                        .iter()
                        .map(|s| ShardStats {
                            connections_open: get(&s.open),
                            connections_accepted: get(&s.accepted),
                            hits: get(&s.hits),
                            misses: get(&s.misses),
                            unrouted: get(&s.unrouted),
                            batch_hits: get(&s.batch_hits),
                            batch_misses: get(&s.batch_misses),
                        })
                        .collect(),
                    regular_accepted: get(&n.regular_accepted),
                    shard_aware_accepted: get(&n.shard_aware_accepted),
                })
                .collect(),
            requests: get(&self.requests),
            rewritten: get(&self.rewritten),
            answered_locally: get(&self.answered_locally),
            version_rejections: get(&self.version_rejections),
            prepared_learned: get(&self.prepared_learned),
            cdc_logs_created: get(&self.cdc_logs_created),
            cdc_writes_logged: get(&self.cdc_writes_logged),
            cdc_log_rows: get(&self.cdc_log_rows),
            cdc_inexact: get(&self.cdc_inexact),
            cdc_refused: get(&self.cdc_refused),
            cdc_log_failures: get(&self.cdc_log_failures),
            lwt_unshaped: get(&self.lwt_unshaped),
            metadata_skipped: get(&self.metadata_skipped),
            metadata_changed: get(&self.metadata_changed),
            tablet_routes: get(&self.tablet_routes),
        }
    }

    pub(crate) fn reset_routing(&self, nodes: &[&NodeCounters]) {
        for s in nodes.iter().flat_map(|n| n.shards.iter()) {
            s.hits.store(0, Ordering::Relaxed);
            s.misses.store(0, Ordering::Relaxed);
            s.unrouted.store(0, Ordering::Relaxed);
            s.batch_hits.store(0, Ordering::Relaxed);
            s.batch_misses.store(0, Ordering::Relaxed);
        }
    }
}
