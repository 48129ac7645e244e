//! Address translation: the address a client must use for a node whose
//! peers row names another one. Behind NAT, in Kubernetes, or through a
//! proxy per node, `system.peers` lists the addresses the nodes know
//! themselves by; an [`AddressTranslator`] turns each into one this client
//! can reach (the official driver's extension point of the same name).
//!
//! The contact points are used as given; only the nodes learned from the
//! peers tables, and the addresses of the server's status events, are
//! translated. A peer the translator has no address for is left out of
//! the session's nodes (and a warning logged), as the official driver does.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;

use uuid::Uuid;

/// What the cluster says of a node before translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntranslatedPeer<'a> {
    /// The node's host id; `None` for the address of a status event.
    pub host_id: Option<Uuid>,
    /// The address the peers table (or event) gives: its native address
    /// and port.
    pub address: SocketAddr,
    /// The node's datacenter, when known.
    pub datacenter: Option<&'a str>,
    /// The node's rack, when known.
    pub rack: Option<&'a str>,
}

/// Why a peer's address could not be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TranslationError {
    /// The translator knows no address for this one.
    #[error("no translation for the address {0}")]
    NoRuleForAddress(SocketAddr),
    /// The translator failed, for the reason given.
    #[error("translating {address}: {reason}")]
    Failed {
        /// The address given to the translator.
        address: SocketAddr,
        /// What went wrong.
        reason: String,
    },
}

/// What [`AddressTranslator::translate_address`] returns.
pub type Translation<'a> = Pin<Box<dyn Future<Output = Result<SocketAddr, TranslationError>> + Send + 'a>>;

/// Turns the address a peers row gives into the one to connect to. Called
/// for every peer on every topology read and for the address of every
/// status event, so it should be cheap; it must give a node the same
/// address every time (the session knows nodes by address).
///
/// Implement [`translate`](Self::translate), or, when finding the address
/// takes I/O (a lookup, a call to a service),
/// [`translate_address`](Self::translate_address), the official driver's
/// async method: the session awaits it (within its
/// `system_query_timeout`, as the rest of a topology read). A translator
/// that implements neither translates nothing.
pub trait AddressTranslator: Send + Sync + std::fmt::Debug {
    /// The address to connect to for `peer`, answered at once. The
    /// default: none ([`TranslationError::NoRuleForAddress`]), for a
    /// translator that implements `translate_address` instead.
    fn translate(&self, peer: &UntranslatedPeer<'_>) -> Result<SocketAddr, TranslationError> {
        Err(TranslationError::NoRuleForAddress(peer.address))
    }

    /// The address to connect to for `peer`, awaited: what the session
    /// calls. The default answers [`translate`](Self::translate).
    fn translate_address<'a>(&'a self, peer: &'a UntranslatedPeer<'a>) -> Translation<'a> {
        Box::pin(std::future::ready(self.translate(peer)))
    }

    /// The address to connect to for the node whose `system.local` the
    /// topology was read from, through a connection to `connected`;
    /// `None` (the default): `connected` itself, as the node answered
    /// there. [`ClientRoutes`](super::routes::ClientRoutes) gives its
    /// route, which may have moved since.
    fn translate_connected(
        &self,
        host_id: Uuid,
        connected: SocketAddr,
    ) -> Option<Result<SocketAddr, TranslationError>> {
        let _ = (host_id, connected);
        None
    }
}

impl AddressTranslator for HashMap<SocketAddr, SocketAddr> {
    fn translate(&self, peer: &UntranslatedPeer<'_>) -> Result<SocketAddr, TranslationError> {
        self.get(&peer.address).copied().ok_or(TranslationError::NoRuleForAddress(peer.address))
    }
}

/// By IP alone, whatever the port: ScyllaDB's `system.peers` gives a
/// node's IP only (its port is taken to be the connected node's), so a map
/// by IP is the one that holds there.
impl AddressTranslator for HashMap<IpAddr, SocketAddr> {
    fn translate(&self, peer: &UntranslatedPeer<'_>) -> Result<SocketAddr, TranslationError> {
        self.get(&peer.address.ip()).copied().ok_or(TranslationError::NoRuleForAddress(peer.address))
    }
}

impl AddressTranslator for BTreeMap<SocketAddr, SocketAddr> {
    fn translate(&self, peer: &UntranslatedPeer<'_>) -> Result<SocketAddr, TranslationError> {
        self.get(&peer.address).copied().ok_or(TranslationError::NoRuleForAddress(peer.address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(address: &str) -> UntranslatedPeer<'static> {
        UntranslatedPeer { host_id: None, address: address.parse().unwrap(), datacenter: None, rack: None }
    }

    #[test]
    fn maps_translate_the_addresses_they_hold_and_name_the_others() {
        let map: HashMap<SocketAddr, SocketAddr> =
            [("10.0.0.2:9042".parse().unwrap(), "127.0.0.1:40002".parse().unwrap())].into();
        assert_eq!(map.translate(&peer("10.0.0.2:9042")), Ok("127.0.0.1:40002".parse().unwrap()));
        let missing = "10.0.0.3:9042".parse().unwrap();
        assert_eq!(map.translate(&peer("10.0.0.3:9042")), Err(TranslationError::NoRuleForAddress(missing)));
        let tree: BTreeMap<SocketAddr, SocketAddr> = map.into_iter().collect();
        assert_eq!(tree.translate(&peer("10.0.0.2:9042")), Ok("127.0.0.1:40002".parse().unwrap()));
        let by_ip: HashMap<IpAddr, SocketAddr> =
            [("10.0.0.2".parse().unwrap(), "127.0.0.1:40002".parse().unwrap())].into();
        assert_eq!(by_ip.translate(&peer("10.0.0.2:19042")), Ok("127.0.0.1:40002".parse().unwrap()));
        assert!(by_ip.translate(&peer("10.0.0.3:9042")).is_err());
    }
}
