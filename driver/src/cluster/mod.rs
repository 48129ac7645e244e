//! Cluster awareness: the token ring and replica placement ([`ring`]).
//! Topology discovery, node distance and shard-aware pools build on it.

pub mod ring;
