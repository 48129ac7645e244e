//! TLS against a Cassandra started with client encryption, with a
//! certificate made at test time by the JDK's `keytool`: verified against
//! that certificate it works; an unknown CA is a clear error.

use std::path::Path;
use std::process::Command;

use shardwise::{ConnectionError, NewSessionError, SessionBuilder, Statement, TlsConfig};
use testkit::{ClientEncryption, Node, NodeConfig};

/// A self-signed certificate for 127.0.0.1 in a JKS keystore, and its PEM.
fn make_cert(dir: &Path, name: &str) -> (std::path::PathBuf, Vec<u8>) {
    let keystore = dir.join(format!("{name}.jks"));
    let pem = dir.join(format!("{name}.pem"));
    let keytool = |args: &[&str]| {
        let out = Command::new("keytool").args(args).output().expect("keytool (from the JDK) runs");
        assert!(out.status.success(), "keytool {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ks = keystore.to_str().expect("utf-8 path");
    keytool(&[
        "-genkeypair",
        "-alias",
        "node",
        "-keyalg",
        "RSA",
        "-keysize",
        "2048",
        "-validity",
        "2",
        "-dname",
        "CN=127.0.0.1",
        "-ext",
        "SAN=ip:127.0.0.1",
        "-keystore",
        ks,
        "-storepass",
        "changeit",
        "-keypass",
        "changeit",
        "-storetype",
        "JKS",
    ]);
    keytool(&[
        "-exportcert",
        "-rfc",
        "-alias",
        "node",
        "-keystore",
        ks,
        "-storepass",
        "changeit",
        "-file",
        pem.to_str().expect("utf-8"),
    ]);
    let pem = std::fs::read(pem).expect("pem");
    (keystore, pem)
}

#[tokio::test]
async fn tls_with_a_trusted_and_an_unknown_ca() {
    let _turn = crate::common::own_servers().await;
    let dir = std::env::temp_dir().join(format!("shardwise-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (keystore, pem) = make_cert(&dir, "server");
    let (_, other_pem) = make_cert(&dir, "other");
    let config = NodeConfig {
        client_encryption: Some(ClientEncryption {
            keystore,
            keystore_password: "changeit".into(),
            // Also plaintext on the same port, so the harness' readiness probe works.
            optional: true,
            require_client_auth: None,
        }),
        ..NodeConfig::default()
    }
    .with_free_ports()
    .expect("ports");
    let node = tokio::task::spawn_blocking(move || Node::start(config)).await.expect("join").expect("TLS Cassandra");

    let builder = SessionBuilder::new()
        .known_node_addr(node.addr())
        .tls(TlsConfig::with_ca_pem(&pem).expect("tls config"))
        .connection_config(shardwise::ConnectionConfig::default());
    assert!(builder.config().connection.tls.is_some(), "TLS set on the builder outlives a later connection_config");
    let session = builder.build().await.expect("TLS session verified against the CA");
    let r = session.execute(&Statement::new("SELECT release_version FROM system.local"), ()).await.expect("query");
    assert_eq!(r.rows_count(), 1);

    let conn = shardwise::ConnectionConfig {
        tls: Some(TlsConfig::with_ca_pem(&other_pem).expect("tls config")),
        ..Default::default()
    };
    let err = SessionBuilder::new()
        .known_node_addr(node.addr())
        .connection_config(conn)
        .build()
        .await
        .expect_err("unknown CA");
    match err {
        NewSessionError::Connect { source: ConnectionError::Tls(msg), .. } => {
            assert!(msg.contains("certificate"), "{msg}")
        }
        other => panic!("expected a TLS error, got {other:?}"),
    }

    let _ = std::fs::remove_dir_all(dir);
}
