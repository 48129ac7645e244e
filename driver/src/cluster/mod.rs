//! Cluster awareness: topology discovery ([`topology`]), the token ring and
//! replica placement ([`ring`]), and node distance ([`distance`]).

pub mod distance;
pub mod ring;
pub mod topology;

pub use distance::{DistancePolicy, NodeDistance};
pub use ring::{ReplicaTable, ReplicationStrategy, RingNode, TokenRing};
pub use topology::NodeInfo;
