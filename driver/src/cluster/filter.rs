//! Host filters: which nodes the session may use at all, decided by code
//! (the official driver's `HostFilter`), beyond the allow and deny lists of
//! the [`DistancePolicy`](super::DistancePolicy). A node a filter refuses
//! is ignored: no pool, no requests, as a node of a remote datacenter
//! without `use_remote`.

use super::topology::NodeInfo;

/// Decides whether the session may use a node; asked on every topology
/// read, for every node (so it should be cheap).
pub trait HostFilter: Send + Sync + std::fmt::Debug {
    /// Whether `node` may be used.
    fn accept(&self, node: &NodeInfo) -> bool;
}

/// Accepts the nodes of one datacenter only (those that report none are
/// refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatacenterFilter(pub String);

impl HostFilter for DatacenterFilter {
    fn accept(&self, node: &NodeInfo) -> bool {
        node.datacenter.as_deref() == Some(self.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn a_datacenter_filter_accepts_its_datacenter_only() {
        let node = |dc: Option<&str>| NodeInfo {
            host_id: Uuid::from_u128(1),
            address: ([127, 0, 0, 1], 9042).into(),
            datacenter: dc.map(String::from),
            rack: None,
            tokens: Vec::new(),
        };
        let f = DatacenterFilter("dc1".into());
        assert!(f.accept(&node(Some("dc1"))));
        assert!(!f.accept(&node(Some("dc2"))));
        assert!(!f.accept(&node(None)));
    }
}
