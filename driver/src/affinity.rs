//! Connection affinity: which of a node's connections a request takes.
//! A setting of the session ([`SessionConfig::connection_affinity`]) that
//! the pools follow; here, below both, so that the pools need nothing of
//! the session to read it.
//!
//! [`SessionConfig::connection_affinity`]: crate::SessionConfig::connection_affinity

/// Which of a node's connections (of a shard's, on a sharded node) a
/// request takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionAffinity {
    /// Thread-affine where that pays, the default. A node without shards
    /// (Cassandra) gets at least one connection per worker of the runtime
    /// the session connects on, and each thread keeps to its own, as with
    /// [`Thread`](Self::Thread): two workers then never share a write
    /// buffer or a stream table, which against one node with thousands of
    /// requests in flight cuts the client's CPU per write by a fifth to a
    /// third. On a
    /// sharded node (ScyllaDB), whose shards already give the session as
    /// many connections, a request takes the least loaded of its shard's
    /// (`benches/RESULTS.md`, "Thread-affine by default against nodes
    /// without shards"). So does a request to a node given more
    /// connections than the runtime has workers
    /// ([`SessionConfig::connections_per_node`](crate::SessionConfig::connections_per_node) above the worker count, or
    /// above 1 on a current-thread runtime), so that all of them are used.
    #[default]
    Auto,
    /// The one with the fewest requests in flight; equal ones take turns.
    /// Every thread shares every connection.
    LeastLoaded,
    /// One per thread, on every node: each thread that sends requests is
    /// given a lane when it sends its first, and keeps to connection
    /// `lane mod n` of the `n` it can choose from, falling back to the
    /// least loaded while that one is not open. With
    /// [`SessionConfig::connections_per_node`](crate::SessionConfig::connections_per_node) at the runtime's worker
    /// count, two workers do not share a connection's write buffer and
    /// stream table. That pays with thousands of requests in flight per
    /// node; with a few hundred spread over many shards' connections, the
    /// batches get smaller and it does not (`benches/RESULTS.md`, "A
    /// connection per runtime worker, thread-affine").
    Thread,
}
