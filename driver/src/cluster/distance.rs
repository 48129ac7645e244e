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
}
