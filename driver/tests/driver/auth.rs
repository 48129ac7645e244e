//! Authentication against a second Cassandra started with
//! `PasswordAuthenticator`: the right credentials work, wrong ones and
//! missing ones are clear errors.

use std::time::{Duration, Instant};

use shardwise::protocol::frame::ProtocolVersion;
use shardwise::{ConnectionError, NewSessionError, Session, SessionBuilder, Statement};
use testkit::{Auth, Node, NodeConfig};

fn start_node() -> Node {
    let config = NodeConfig { auth: Auth::Password, ..NodeConfig::default() }.with_free_ports().expect("free ports");
    Node::start(config).expect("auth-enabled Cassandra")
}

async fn connect(
    node: &Node,
    user: Option<(&str, &str)>,
    version: ProtocolVersion,
) -> Result<Session, NewSessionError> {
    let mut b = SessionBuilder::new().known_node_addr(node.addr()).protocol_versions(version, version);
    if let Some((u, p)) = user {
        b = b.user(u, p);
    }
    b.build().await
}

#[tokio::test]
async fn password_authentication() {
    let _turn = crate::common::own_servers().await;
    let node = tokio::task::spawn_blocking(start_node).await.expect("start");
    // The default superuser appears a few seconds after startup.
    let deadline = Instant::now() + Duration::from_secs(60);
    let session = loop {
        match connect(&node, Some(("cassandra", "cassandra")), ProtocolVersion::V5).await {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(500)).await,
            Err(e) => panic!("cannot log in as cassandra: {e}"),
        }
    };
    let r = session.execute(&Statement::new("SELECT release_version FROM system.local"), ()).await.expect("query");
    assert_eq!(r.rows_count(), 1);

    for version in [ProtocolVersion::V4, ProtocolVersion::V5] {
        let s = connect(&node, Some(("cassandra", "cassandra")), version).await.expect("v4 and v5 log in");
        s.execute(&Statement::new("SELECT key FROM system.local"), ()).await.expect("query");

        let err = connect(&node, Some(("cassandra", "wrong")), version).await.expect_err("wrong password");
        match err {
            NewSessionError::Connect { source: ConnectionError::Auth(msg), .. } => {
                assert!(msg.to_lowercase().contains("password") || msg.to_lowercase().contains("credentials"), "{msg}")
            }
            other => panic!("expected an authentication error, got {other:?}"),
        }
        let err = connect(&node, None, version).await.expect_err("no credentials");
        assert!(
            matches!(&err, NewSessionError::Connect { source: ConnectionError::Auth(msg), .. } if msg.contains("requires authentication")),
            "{err:?}"
        );
    }
}
