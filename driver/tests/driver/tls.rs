//! TLS against a Cassandra started with client encryption, with a
//! certificate made at test time by the JDK's `keytool`: verified against
//! that certificate it works; an unknown CA is a clear error. With client
//! authentication required (mutual TLS, a client certificate made by
//! `openssl`), the client's certificate opens sessions, and no certificate
//! or an unknown one does not.

use std::path::Path;
use std::process::Command;

use shardwise::{ConnectionError, NewSessionError, SessionBuilder, Statement, TlsConfig};
use testkit::{ClientEncryption, Node, NodeConfig};
use tokio_rustls::rustls;

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

/// A self-signed client certificate and its PKCS #8 key, as PEM files.
fn make_client_cert(dir: &Path, name: &str) -> (std::path::PathBuf, Vec<u8>, Vec<u8>) {
    let (cert, key) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj"])
        .arg(format!("/CN={name}"))
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(out.status.success(), "openssl: {}", String::from_utf8_lossy(&out.stderr));
    (cert.clone(), std::fs::read(&cert).expect("cert"), std::fs::read(&key).expect("key"))
}

/// The TLS alert with which the server refused a session: a handshake
/// error (TLS 1.2: the server checks the client's certificate during the
/// handshake) is `None` inside `Ok`; with TLS 1.3 the client's side of the
/// handshake is over before the server has checked its certificate, and
/// the refusal is the server's fatal alert, read where the first answer was
/// expected (or the reset that may overtake it). Anything else (a session,
/// a timeout, a closed connection, an error of the server's) is an `Err`
/// naming it: no refusal by TLS.
fn refused_by_tls(r: Result<shardwise::Session, NewSessionError>) -> Result<Option<rustls::AlertDescription>, String> {
    match r {
        Err(NewSessionError::Connect { source: ConnectionError::Tls(_), .. }) => Ok(None),
        Err(NewSessionError::Connect { source: ConnectionError::Io(e), .. }) => {
            match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
                Some(rustls::Error::AlertReceived(alert)) => Ok(Some(*alert)),
                // The server sent its alert and closed while the client's
                // first request, sent after its side of the handshake, lay
                // unread: the kernel answers unread data with a reset, which
                // may overtake the alert.
                None if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(None),
                _ => Err(format!("an I/O error that is no TLS alert: {e:?}")),
            }
        }
        Err(other) => Err(format!("not a TLS refusal: {other:?}")),
        Ok(_) => Err("a session was opened".into()),
    }
}

/// Mutual TLS: the client's certificate opens a session; no certificate,
/// or one the server does not trust, is refused by TLS itself (a handshake
/// error or the server's alert: a timeout or any other error would not do).
#[tokio::test]
async fn mutual_tls_takes_the_clients_certificate_and_refuses_others() {
    let _turn = crate::common::own_servers().await;
    let dir = std::env::temp_dir().join(format!("shardwise-mtls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (keystore, server_pem) = make_cert(&dir, "server");
    let (client_cert_file, client_pem, client_key) = make_client_cert(&dir, "client");
    let (_, stranger_pem, stranger_key) = make_client_cert(&dir, "stranger");
    // The server trusts the client's certificate, and only it.
    let truststore = dir.join("trust.jks");
    let out = Command::new("keytool")
        .args(["-importcert", "-noprompt", "-alias", "client", "-storepass", "changeit", "-storetype", "JKS"])
        .arg("-file")
        .arg(&client_cert_file)
        .arg("-keystore")
        .arg(&truststore)
        .output()
        .expect("keytool runs");
    assert!(out.status.success(), "keytool: {}", String::from_utf8_lossy(&out.stderr));
    let config = NodeConfig {
        client_encryption: Some(ClientEncryption {
            keystore,
            keystore_password: "changeit".into(),
            optional: true,
            require_client_auth: Some((truststore, "changeit".into())),
        }),
        ..NodeConfig::default()
    }
    .with_free_ports()
    .expect("ports");
    let node = tokio::task::spawn_blocking(move || Node::start(config)).await.expect("join").expect("mTLS Cassandra");
    let connect = |tls: TlsConfig| {
        let conn = shardwise::ConnectionConfig {
            tls: Some(tls),
            connect_timeout: std::time::Duration::from_secs(5),
            ..Default::default()
        };
        SessionBuilder::new().known_node_addr(node.addr()).connection_config(conn).build()
    };

    let tls = TlsConfig::with_client_cert(&server_pem, &client_pem, &client_key).expect("tls config");
    let session = connect(tls).await.expect("a session with the client's certificate");
    let r = session.execute(&Statement::new("SELECT release_version FROM system.local"), ()).await.expect("query");
    assert_eq!(r.rows_count(), 1);

    let without = connect(TlsConfig::with_ca_pem(&server_pem).expect("tls config")).await;
    let alert = refused_by_tls(without).expect("no client certificate: refused by TLS");
    println!("without a certificate: the server's alert {alert:?}");
    let stranger = TlsConfig::with_client_cert(&server_pem, &stranger_pem, &stranger_key).expect("tls config");
    let alert = refused_by_tls(connect(stranger).await).expect("an unknown client certificate: refused by TLS");
    println!("with an unknown certificate: the server's alert {alert:?}");

    // Bad input is a typed error, not a panic.
    let bad = TlsConfig::with_client_cert(&server_pem, b"not a pem", &client_key);
    assert!(matches!(bad, Err(shardwise::config::TlsSetupError(ref m)) if m.contains("client certificate")), "{bad:?}");
    let bad = TlsConfig::with_client_cert(&server_pem, &client_pem, b"");
    assert!(matches!(bad, Err(shardwise::config::TlsSetupError(ref m)) if m.contains("private key")), "{bad:?}");

    drop(session);
    let _ = std::fs::remove_dir_all(dir);
}
