//! Node distance: which nodes get connections and in which order they are
//! tried. Local-datacenter nodes first, remote ones only as a fallback, and
//! explicit allow/deny lists on top.

use std::net::IpAddr;

use super::topology::NodeInfo;

/// How far a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeDistance {
    /// In the local datacenter: tried first.
    Local,
    /// In another datacenter: tried after every local node.
    Remote,
    /// Never connected to.
    Ignored,
}

/// Classifies nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DistancePolicy {
    /// The local datacenter; `None` treats every datacenter as local.
    pub local_datacenter: Option<String>,
    /// The client's rack in the local datacenter: its nodes are tried
    /// before the datacenter's others (rack awareness); `None`: no rack
    /// is preferred.
    pub local_rack: Option<String>,
    /// Connect to remote-datacenter nodes (as fallbacks).
    pub use_remote: bool,
    /// When set, only these addresses get connections.
    pub allow: Option<Vec<IpAddr>>,
    /// These addresses never get connections.
    pub deny: Vec<IpAddr>,
}

impl DistancePolicy {
    /// The distance of `node`.
    pub fn distance(&self, node: &NodeInfo) -> NodeDistance {
        let ip = node.address.ip();
        if self.deny.contains(&ip) || self.allow.as_ref().is_some_and(|a| !a.contains(&ip)) {
            return NodeDistance::Ignored;
        }
        match &self.local_datacenter {
            None => NodeDistance::Local,
            Some(dc) if node.datacenter.as_deref() == Some(dc.as_str()) => NodeDistance::Local,
            Some(_) if self.use_remote => NodeDistance::Remote,
            Some(_) => NodeDistance::Ignored,
        }
    }

    /// Whether `node` is in the local rack (never without one).
    pub fn in_local_rack(&self, node: &NodeInfo) -> bool {
        self.local_rack.as_ref().is_some_and(|rack| node.rack.as_ref() == Some(rack))
            && self.distance(node) == NodeDistance::Local
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ip: [u8; 4], dc: &str) -> NodeInfo {
        NodeInfo {
            host_id: uuid::Uuid::nil(),
            address: (ip, 9042).into(),
            datacenter: Some(dc.into()),
            rack: None,
            tokens: Vec::new(),
        }
    }

    #[test]
    fn local_remote_ignored() {
        let p = DistancePolicy { local_datacenter: Some("dc1".into()), use_remote: true, ..Default::default() };
        assert_eq!(p.distance(&node([127, 0, 0, 1], "dc1")), NodeDistance::Local);
        assert_eq!(p.distance(&node([127, 0, 0, 2], "dc2")), NodeDistance::Remote);
        let strict = DistancePolicy { use_remote: false, ..p.clone() };
        assert_eq!(strict.distance(&node([127, 0, 0, 2], "dc2")), NodeDistance::Ignored);
        let deny = DistancePolicy { deny: vec![[127, 0, 0, 1].into()], ..p.clone() };
        assert_eq!(deny.distance(&node([127, 0, 0, 1], "dc1")), NodeDistance::Ignored);
        let allow = DistancePolicy { allow: Some(vec![[127, 0, 0, 3].into()]), ..p };
        assert_eq!(allow.distance(&node([127, 0, 0, 1], "dc1")), NodeDistance::Ignored);
        assert_eq!(allow.distance(&node([127, 0, 0, 3], "dc1")), NodeDistance::Local);
        assert_eq!(DistancePolicy::default().distance(&node([1, 1, 1, 1], "any")), NodeDistance::Local);
    }

    #[test]
    fn the_local_rack_is_a_rack_of_the_local_datacenter() {
        let in_rack =
            |dc: &str, rack: Option<&str>| NodeInfo { rack: rack.map(String::from), ..node([127, 0, 0, 1], dc) };
        let p = DistancePolicy {
            local_datacenter: Some("dc1".into()),
            local_rack: Some("r1".into()),
            use_remote: true,
            ..Default::default()
        };
        assert!(p.in_local_rack(&in_rack("dc1", Some("r1"))));
        assert!(!p.in_local_rack(&in_rack("dc1", Some("r2"))));
        assert!(!p.in_local_rack(&in_rack("dc1", None)));
        assert!(!p.in_local_rack(&in_rack("dc2", Some("r1"))), "a rack of the same name elsewhere");
        let no_rack = DistancePolicy { local_rack: None, ..p };
        assert!(!no_rack.in_local_rack(&in_rack("dc1", Some("r1"))));
    }
}
