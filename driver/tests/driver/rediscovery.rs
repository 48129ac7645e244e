//! Every node of the cluster moves while a session runs (a Kubernetes
//! cluster whose pods all came back at new addresses): the session's pools
//! and its control connection are all lost, and nothing it knows of the
//! cluster is reachable. It goes back to its contact points (a service
//! address that stays), reads the topology there, and works again at the
//! nodes' new addresses.
//!
//! Here the node is the shared Cassandra behind two proxies, its old and
//! its new address, and a third proxy stands for the contact point; the
//! session learns where the node is from an address translator that is
//! told when the node moved (what a DNS name of each pod would say). The
//! old address then closes every connection and refuses new ones.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shardwise::cluster::{AddressTranslator, TranslationError, UntranslatedPeer};
use shardwise::{SessionBuilder, SessionEvent, Statement};
use testkit::fault::FaultProxy;
use uuid::Uuid;

/// Every node at the one address it has now.
#[derive(Debug)]
struct Moving(Arc<Mutex<SocketAddr>>);

impl Moving {
    fn now(&self) -> SocketAddr {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl AddressTranslator for Moving {
    fn translate(&self, _peer: &UntranslatedPeer<'_>) -> Result<SocketAddr, TranslationError> {
        Ok(self.now())
    }
    fn translate_connected(
        &self,
        _host_id: Uuid,
        _connected: SocketAddr,
    ) -> Option<Result<SocketAddr, TranslationError>> {
        Some(Ok(self.now()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_every_node_moved_finds_them_through_its_contact_points() {
    let node = testkit::shared_node().expect("server");
    let contact = FaultProxy::start(node).expect("proxy");
    let old = FaultProxy::start(node).expect("proxy");
    let at = Arc::new(Mutex::new(old.addr()));
    let session = SessionBuilder::new()
        .known_node_addr(contact.addr())
        .address_translator(Arc::new(Moving(at.clone())))
        .build()
        .await
        .expect("session");
    let mut events = session.events();
    let probe = Statement::new("SELECT key FROM system.local");
    session.execute(&probe, ()).await.expect("a read at the old address");
    assert_eq!(session.nodes(), vec![old.addr()]);
    let contacted = contact.accepted();

    // The node moves: its old address goes away, the new one answers.
    let new = FaultProxy::start(node).expect("proxy");
    *at.lock().unwrap_or_else(|e| e.into_inner()) = new.addr();
    drop(old);

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if session.nodes() == vec![new.addr()] && session.execute(&probe, ()).await.is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "the session never found the node again: {:?}", session.nodes());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(contact.accepted() > contacted, "found again through the contact point");
    assert!(new.accepted() > 0);
    let mut moved = false;
    while let Ok(event) = events.try_recv() {
        moved |= matches!(&event, SessionEvent::TopologyRefreshed { added, .. } if added.contains(&new.addr()));
    }
    assert!(moved, "a topology refresh added the new address");
}
