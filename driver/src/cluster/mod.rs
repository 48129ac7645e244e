//! Cluster awareness: topology discovery ([`topology`]), the token ring and
//! replica placement ([`ring`]), the tablets learned from the servers
//! ([`tablets`]), and node distance ([`distance`]).

pub mod distance;
pub mod ring;
pub mod tablets;
pub mod topology;

pub use distance::{DistancePolicy, NodeDistance};
pub use ring::{ReplicaTable, ReplicationStrategy, RingNode, TokenRing};
pub use topology::NodeInfo;
