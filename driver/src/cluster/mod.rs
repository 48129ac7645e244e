//! Cluster awareness: the nodes ([`node`]) and their discovery ([`topology`]), the token ring and
//! replica placement ([`ring`]), the tablets learned from the servers
//! ([`tablets`]), node distance ([`distance`]) and host filters ([`filter`]), and the translation of
//! the peers' addresses into reachable ones ([`translation`]), among them ScyllaDB's client routes
//! ([`routes`]).

pub mod distance;
pub mod filter;
pub mod node;
pub mod ring;
pub mod routes;
pub mod tablets;
pub mod topology;
pub mod translation;

pub use distance::{DistancePolicy, NodeDistance};
pub use filter::{DatacenterFilter, HostFilter};
pub use node::NodeInfo;
pub use ring::{ReplicaTable, ReplicationStrategy, RingNode, TokenRing};
pub use routes::{ClientRoutes, ClientRoutesConfig};
pub use translation::{AddressTranslator, Translation, TranslationError, UntranslatedPeer};
