//! Load-balancing policies: the application's plan for each request
//! (see [`LoadBalancingPolicy`]); without one, the session's built-in plan,
//! which [`DefaultPolicy`] returns. [`SingleTargetLoadBalancingPolicy`]
//! sends to one chosen node.
//!
//! Load balancing as a policy of the application's: the plan of a request
//! (which nodes, in which order, on which shard) from its routing
//! information and a view of the cluster, as the official driver's
//! `LoadBalancingPolicy` gives it.
//!
//! Without a policy (the default), a request walks the built-in plan in
//! place (see the `plan` module): token, tablet and shard aware, local rack
//! then datacenter then remote, latency awareness, nodes that are down last.
//! A policy set with [`SessionBuilder::load_balancing`], or with
//! [`ExecutionProfile::load_balancing_policy`] for the statements run with
//! that profile (a profile without one plans as the session does), writes the plan
//! into a buffer instead, once per attempt that needs a node (the first,
//! and each retry on the next node), so a policy that is a pure function of
//! what it is given walks one plan per request. The built-in plan is
//! [`ClusterView::default_plan`], and [`DefaultPolicy`] is the policy that
//! returns it, for policies that reorder or filter it.
//!
//! A policy also hears how each attempt it planned ended
//! ([`LoadBalancingPolicy::on_request_success`] and
//! [`on_request_failure`](LoadBalancingPolicy::on_request_failure)), to
//! keep statistics of its own.
//!
//! A policy costs an allocation per attempt (the plan's buffer) and the
//! policy's own work; a request without one (neither its profile's nor the
//! session's) pays nothing for this module.
//!
//! The types a policy sees live here, below the session: the session's
//! configuration holds a policy, and the session's plan shows itself to one
//! through [`ClusterView`], whose contents the plan supplies (the crate's
//! `ClusterSource`), so this module needs nothing of the session.
//!
//! [`SessionBuilder::load_balancing`]: crate::SessionBuilder::load_balancing
//! [`ExecutionProfile::load_balancing_policy`]: crate::ExecutionProfile::load_balancing_policy

use std::net::SocketAddr;
use std::time::Duration;

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::token::Token;
use uuid::Uuid;

use crate::cluster::NodeInfo;

mod single_target;
pub use single_target::{NodeIdentifier, SingleTargetLoadBalancingPolicy};

/// What a request tells a policy about itself.
#[derive(Debug, Clone, Copy)]
pub struct RoutingInfo<'a> {
    /// The keyspace and table of a routed (prepared, with its partition
    /// key bound) statement.
    pub table: Option<(&'a str, &'a str)>,
    /// The partition key's token, for a routed statement.
    pub token: Option<Token>,
    /// A lightweight transaction (its replicas are best tried in ring
    /// order, primary first).
    pub lwt: bool,
    /// The consistency of the attempt.
    pub consistency: Consistency,
    /// Whether the statement may be applied twice.
    pub idempotent: bool,
    /// The request's seed: the same for each of its attempts, different
    /// between requests (for spreading load deterministically).
    pub seed: usize,
}

/// One step of a plan: a node of the [`ClusterView`] (by index), and the
/// shard to ask it on (`None`: the token's shard, or any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Index of the node in [`ClusterView::nodes`].
    pub node: usize,
    /// The shard, on a sharded node.
    pub shard: Option<u16>,
}

/// Decides each request's plan.
pub trait LoadBalancingPolicy: Send + Sync + std::fmt::Debug {
    /// Pushes the targets a request tries, in order, onto `plan` (empty
    /// when called). Targets without a connection are skipped; a plan with
    /// none that connects fails the request with
    /// [`PlanUnavailable`](crate::ExecutionError::PlanUnavailable), and an
    /// empty one with [`EmptyPlan`](crate::ExecutionError::EmptyPlan).
    fn plan(&self, request: &RoutingInfo<'_>, cluster: &ClusterView<'_>, plan: &mut Vec<Target>);

    /// An attempt this policy planned got its answer from `node` after
    /// `latency` (the official driver's callback of the same name; the
    /// default does nothing). Called on the request's task, before its
    /// result is handed back: keep it short.
    fn on_request_success(&self, request: &RoutingInfo<'_>, latency: Duration, node: NodeView<'_>) {
        let _ = (request, latency, node);
    }

    /// An attempt this policy planned failed at `node` after `latency`,
    /// with `error` (before the retry policy decides whether another
    /// attempt follows; not called when the whole request timed out). The
    /// default does nothing.
    fn on_request_failure(
        &self,
        request: &RoutingInfo<'_>,
        latency: Duration,
        node: NodeView<'_>,
        error: &crate::ExecutionError,
    ) {
        let _ = (request, latency, node, error);
    }
}

/// The built-in plan as a policy: [`ClusterView::default_plan`].
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultPolicy;

impl LoadBalancingPolicy for DefaultPolicy {
    fn plan(&self, _: &RoutingInfo<'_>, cluster: &ClusterView<'_>, plan: &mut Vec<Target>) {
        cluster.default_plan(plan);
    }
}

/// A node as a policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    /// The address the driver connects to (after address translation).
    pub addr: SocketAddr,
    /// Its host id, datacenter and rack, when the topology is discovered.
    pub info: Option<&'a NodeInfo>,
    /// Whether the driver counts it as up.
    pub up: bool,
    /// Whether it is in the local datacenter (per the distance policy).
    pub local: bool,
}

impl<'a> NodeView<'a> {
    /// Its datacenter, when known (borrowed from the view's topology, not
    /// from this copy of the node).
    pub fn datacenter(&self) -> Option<&'a str> {
        self.info.and_then(|i| i.datacenter.as_deref())
    }
    /// Its rack, when known.
    pub fn rack(&self) -> Option<&'a str> {
        self.info.and_then(|i| i.rack.as_deref())
    }
    /// Its host id, when known.
    pub fn host_id(&self) -> Option<Uuid> {
        self.info.map(|i| i.host_id)
    }
}

/// The cluster as one request's policy sees it: the nodes that get
/// connections (local ones first), and the request's replicas.
pub struct ClusterView<'a> {
    source: &'a dyn ClusterSource<'a>,
}

/// What a [`ClusterView`] shows, supplied by the session's plan of the
/// request (the snapshot's nodes, the request's replicas, the built-in
/// order).
pub(crate) trait ClusterSource<'a> {
    /// How many nodes there are ([`ClusterView::nodes`] indexes them).
    fn node_count(&self) -> usize;
    /// The node at `index`.
    fn node(&self, index: usize) -> Option<NodeView<'a>>;
    /// Pushes the request's replicas that get connections.
    fn replicas(&self, out: &mut Vec<Target>);
    /// Pushes the built-in plan.
    fn default_plan(&self, out: &mut Vec<Target>);
}

impl std::fmt::Debug for ClusterView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.nodes()).finish()
    }
}

impl<'a> ClusterView<'a> {
    /// A view of what `source` supplies.
    pub(crate) fn new(source: &'a dyn ClusterSource<'a>) -> Self {
        ClusterView { source }
    }

    /// The nodes, indexed as [`Target::node`] names them.
    pub fn nodes(&self) -> impl Iterator<Item = NodeView<'a>> + '_ {
        (0..self.source.node_count()).filter_map(|i| self.source.node(i))
    }

    /// The node at `index`.
    pub fn node(&self, index: usize) -> Option<NodeView<'a>> {
        self.source.node(index)
    }

    /// The request's replicas (its tablet's, with their shards, for a table
    /// with tablets; else the token ring's, primary first), as far as they
    /// get connections; empty for a request that is not routed.
    pub fn replicas(&self, out: &mut Vec<Target>) {
        self.source.replicas(out);
    }

    /// The built-in plan: what a session without a policy tries, in order.
    pub fn default_plan(&self, out: &mut Vec<Target>) {
        self.source.default_plan(out);
    }
}
