//! A plan of one chosen node (and, on a sharded node, one shard): for
//! requests that must run there and nowhere else, e.g. reads of a node's
//! own system tables (`system.local`, a node's view of the cluster or of
//! its compactions), or a check of one replica while repairing. Given to a
//! profile ([`ExecutionProfile::load_balancing_policy`]), so that each
//! statement run with that profile goes to the node, and the others plan as
//! before; or to the session.
//!
//! As with the official driver's policy of the same name, nothing falls
//! back: a node the session does not know fails the request with
//! [`ExecutionError::EmptyPlan`] (the message names the node), and one
//! without a connection (down) with [`ExecutionError::PlanUnavailable`];
//! retries on the next node have no next node, and end with the error that
//! started them.
//!
//! A module of its own: a shipped policy among the types policies are
//! written with (the parent module), which it only uses.
//!
//! [`ExecutionProfile::load_balancing_policy`]: crate::ExecutionProfile::load_balancing_policy
//! [`ExecutionError::EmptyPlan`]: crate::ExecutionError::EmptyPlan
//! [`ExecutionError::PlanUnavailable`]: crate::ExecutionError::PlanUnavailable

use std::net::SocketAddr;
use std::sync::Arc;

use uuid::Uuid;

use super::{ClusterView, LoadBalancingPolicy, NodeView, RoutingInfo, Target};

/// Which node a [`SingleTargetLoadBalancingPolicy`] sends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeIdentifier {
    /// The node with this host id (`system.local`'s and `system.peers`'
    /// `host_id`; known once the session has read the topology).
    HostId(Uuid),
    /// The node at this address: the one the session connects to (after
    /// address translation), or the one the cluster's system tables give
    /// (before it).
    NodeAddress(SocketAddr),
}

impl NodeIdentifier {
    /// Whether `node` is the one named.
    fn names(&self, node: &NodeView<'_>) -> bool {
        match *self {
            NodeIdentifier::HostId(id) => node.host_id() == Some(id),
            NodeIdentifier::NodeAddress(addr) => node.addr == addr || node.info.is_some_and(|i| i.address == addr),
        }
    }
}

/// A node named by its host id.
impl From<Uuid> for NodeIdentifier {
    fn from(id: Uuid) -> Self {
        NodeIdentifier::HostId(id)
    }
}

/// A node named by its address.
impl From<SocketAddr> for NodeIdentifier {
    fn from(addr: SocketAddr) -> Self {
        NodeIdentifier::NodeAddress(addr)
    }
}

/// Sends every request it plans to one node (on one shard, when given and
/// the node is sharded; otherwise on the shard of the request's token, or
/// any), with no other node to fall back to.
///
/// ```
/// use shardwise::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
/// use shardwise::{ExecutionProfile, Statement};
///
/// let node = "10.0.0.7:9042".parse().expect("an address");
/// let there = ExecutionProfile::new("node-7")
///     .load_balancing_policy(SingleTargetLoadBalancingPolicy::new(NodeIdentifier::NodeAddress(node), None));
/// let local = Statement::new("SELECT host_id FROM system.local").with_profile(there);
/// # let _ = local;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SingleTargetLoadBalancingPolicy {
    node: NodeIdentifier,
    shard: Option<u16>,
}

impl SingleTargetLoadBalancingPolicy {
    /// A policy that sends to `node`, on `shard` when it is given and the
    /// node is sharded. In an `Arc`, as a profile or the session takes it.
    pub fn new(node: impl Into<NodeIdentifier>, shard: Option<u16>) -> Arc<Self> {
        Arc::new(SingleTargetLoadBalancingPolicy { node: node.into(), shard })
    }

    /// The node it sends to.
    pub fn node(&self) -> NodeIdentifier {
        self.node
    }

    /// The shard it asks for, if any.
    pub fn shard(&self) -> Option<u16> {
        self.shard
    }
}

impl LoadBalancingPolicy for SingleTargetLoadBalancingPolicy {
    fn plan(&self, _: &RoutingInfo<'_>, cluster: &ClusterView<'_>, plan: &mut Vec<Target>) {
        if let Some(node) = cluster.nodes().position(|n| self.node.names(&n)) {
            plan.push(Target { node, shard: self.shard });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::NodeInfo;
    use crate::load_balancing::ClusterSource;
    use shardwise_protocol::consistency::Consistency;

    /// Three nodes: the first two with topology (host ids 1 and 2; the
    /// second's system tables give another address than the one the
    /// session connects to), the third without.
    struct Three(Vec<NodeInfo>);

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("an address")
    }

    impl Three {
        fn new() -> Three {
            let info = |id: u128, address: &str| NodeInfo {
                host_id: Uuid::from_u128(id),
                address: addr(address),
                datacenter: Some("dc1".into()),
                rack: None,
                tokens: Vec::new(),
            };
            Three(vec![info(1, "10.0.0.1:9042"), info(2, "192.168.0.2:9042")])
        }
    }

    impl<'a> ClusterSource<'a> for &'a Three {
        fn node_count(&self) -> usize {
            3
        }
        fn node(&self, index: usize) -> Option<NodeView<'a>> {
            let addrs = ["10.0.0.1:9042", "10.0.0.2:9042", "10.0.0.3:9042"];
            Some(NodeView { addr: addr(addrs.get(index)?), info: self.0.get(index), up: index != 1, local: true })
        }
        fn replicas(&self, _: &mut Vec<Target>) {}
        fn default_plan(&self, out: &mut Vec<Target>) {
            out.extend((0..3).map(|node| Target { node, shard: None }));
        }
    }

    fn plan_of(policy: &SingleTargetLoadBalancingPolicy) -> Vec<Target> {
        let three = Three::new();
        let source = &three;
        let view = ClusterView::new(&source);
        let request = RoutingInfo {
            table: None,
            token: None,
            lwt: false,
            consistency: Consistency::One,
            idempotent: true,
            seed: 7,
        };
        let mut plan = Vec::new();
        policy.plan(&request, &view, &mut plan);
        plan
    }

    #[test]
    fn the_plan_is_the_named_node_alone() {
        let by_id = SingleTargetLoadBalancingPolicy::new(Uuid::from_u128(2), Some(3));
        assert_eq!(plan_of(&by_id), [Target { node: 1, shard: Some(3) }], "by host id, with its shard, even if down");
        let by_addr = SingleTargetLoadBalancingPolicy::new(addr("10.0.0.3:9042"), None);
        assert_eq!(plan_of(&by_addr), [Target { node: 2, shard: None }], "by address, without topology");
        let by_untranslated = SingleTargetLoadBalancingPolicy::new(addr("192.168.0.2:9042"), None);
        assert_eq!(plan_of(&by_untranslated), [Target { node: 1, shard: None }], "by the system tables' address");
    }

    #[test]
    fn an_unknown_node_gives_an_empty_plan_and_no_fallback() {
        for unknown in [NodeIdentifier::HostId(Uuid::from_u128(9)), NodeIdentifier::NodeAddress(addr("10.0.0.9:9042"))]
        {
            let policy = SingleTargetLoadBalancingPolicy::new(unknown, None);
            assert_eq!(plan_of(&policy), [], "{unknown:?}");
            assert!(format!("{policy:?}").contains(&format!("{unknown:?}")), "its Debug names the node: {policy:?}");
        }
        let policy = SingleTargetLoadBalancingPolicy::new(Uuid::from_u128(9), Some(1));
        assert_eq!((policy.node(), policy.shard()), (NodeIdentifier::HostId(Uuid::from_u128(9)), Some(1)));
    }
}
