//! The `replicator` application as a separate process, with credentials
//! and TLS (`--username`, `--password`, `--tls-ca`) on both sides.
//!
//! One Cassandra of its own, started with `PasswordAuthenticator` and TLS
//! on its native port (optional: the emulation front's own connections are
//! plaintext), is both clusters: the source is the emulation front over it
//! (the CDC log is the front's), reached through a TLS endpoint the test
//! runs in front of the front; the destination is the Cassandra itself,
//! over its own TLS. The replicated rows equal the source's; a wrong
//! password and an unknown CA each end the replicator with one line that
//! names the failure and a failure status.
//!
//! Here, not in `shardwise-cdc`'s tests, because only the tests of this
//! package can locate its binaries (`CARGO_BIN_EXE_replicator`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shardwise::protocol::types::CqlValue;
use shardwise::{Session, SessionBuilder, Statement};
use shardwise_cdc::checkpoint::TableCheckpointStore;
use shardwise_cdc::CheckpointStore;
use shardwise_emu::{Front, FrontConfig, FrontHandle};
use testkit::{Auth, ClientEncryption, Node, NodeConfig};
use tokio_rustls::rustls;

use common::{exit_of, run, signal};
use shardwise_cdc_testkit as common;

/// The default superuser of a `PasswordAuthenticator` Cassandra.
const USER: (&str, &str) = ("cassandra", "cassandra");

/// A self-signed certificate for 127.0.0.1 made by the JDK's `keytool`:
/// its PKCS12 keystore (for Cassandra), its PEM, and its private key as
/// PEM (for the test's TLS endpoint, extracted by `openssl`).
fn make_cert(dir: &Path, name: &str) -> (PathBuf, Vec<u8>, Vec<u8>) {
    let keystore = dir.join(format!("{name}.p12"));
    let (pem, bag, key) =
        (dir.join(format!("{name}.pem")), dir.join(format!("{name}.bag")), dir.join(format!("{name}.key")));
    let tool = |program: &str, args: &[&str]| {
        let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program} runs: {e}"));
        assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let path = |p: &Path| p.to_str().expect("utf-8 path").to_owned();
    let ks = path(&keystore);
    let generate = "-genkeypair -alias node -keyalg RSA -keysize 2048 -validity 2 -dname CN=127.0.0.1 \
                    -ext SAN=ip:127.0.0.1 -storepass changeit -keypass changeit -storetype PKCS12 -keystore";
    tool("keytool", &generate.split_whitespace().chain([ks.as_str()]).collect::<Vec<_>>());
    tool(
        "keytool",
        &["-exportcert", "-rfc", "-alias", "node", "-keystore", &ks, "-storepass", "changeit", "-file", &path(&pem)],
    );
    tool("openssl", &["pkcs12", "-in", &ks, "-nocerts", "-nodes", "-passin", "pass:changeit", "-out", &path(&bag)]);
    tool("openssl", &["pkey", "-in", &path(&bag), "-out", &path(&key)]);
    (keystore, std::fs::read(pem).expect("pem"), std::fs::read(key).expect("key"))
}

/// A TLS endpoint on 127.0.0.1 with `cert_pem` and `key_pem`, each of
/// whose connections is carried on in plaintext to `target`: the
/// emulation front, which speaks no TLS itself. Its address.
async fn tls_endpoint(cert_pem: &[u8], key_pem: &[u8], target: SocketAddr) -> SocketAddr {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(cert_pem).collect::<Result<Vec<_>, _>>().expect("certificate");
    let key = PrivateKeyDer::from_pem_slice(key_pem).expect("private key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server configuration");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that does not trust the certificate ends here.
                let Ok(mut tls) = acceptor.accept(socket).await else { return };
                let Ok(mut plain) = tokio::net::TcpStream::connect(target).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}

/// The rows of `ks.table` with the write times of the regular columns, sorted.
async fn dump(session: &Session, ks: &str, table: &str) -> Vec<String> {
    let text = format!("SELECT pk, ck, v, m, writetime(v) FROM {ks}.{table}");
    let result = session.execute(&Statement::new(text), ()).await.expect("select");
    let mut rows: Vec<String> =
        result.rows::<Vec<Option<CqlValue>>>().expect("rows").map(|r| format!("{:?}", r.expect("row"))).collect();
    rows.sort();
    rows
}

/// Connections to the Cassandra itself (not through the front) as
/// (username, TLS), from `system_views.clients`.
async fn clients(session: &Session) -> Vec<(Option<String>, Option<bool>)> {
    let result = session
        .execute(&Statement::new("SELECT username, ssl_enabled FROM system_views.clients"), ())
        .await
        .expect("system_views.clients");
    result.rows::<(Option<String>, Option<bool>)>().expect("rows").map(|r| r.expect("row")).collect()
}

/// Runs the replicator with `args` until it exits (30 s at most): its exit
/// status and what it wrote to stderr.
async fn replicator_fails_with(args: &[String]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_replicator"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn replicator");
    let status = exit_of(&mut child, Instant::now() + Duration::from_secs(30), "the refused replicator").await;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr).expect("stderr");
    (status, stderr)
}

/// With `--username`/`--password` and `--tls-ca`, the replicator reads the
/// CDC log of a source that requires both (through TLS) and writes into a
/// destination that requires both (the Cassandra's own TLS, seen in its
/// `system_views.clients`): the destination ends with the source's rows
/// and write times, and a SIGINT ends the replicator cleanly. A wrong
/// password, and a CA that did not sign the nodes' certificate, each end
/// it at once with one `replicator: ...` line naming the failure
/// (`authentication failed`, `TLS handshake failed`) and a failure status,
/// not a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicates_with_credentials_and_tls_and_refuses_a_wrong_password_or_ca() {
    let dir = std::env::temp_dir().join(format!("shardwise-replicator-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (keystore, server_pem, server_key) = make_cert(&dir, "server");
    let (_, other_pem, _) = make_cert(&dir, "other");
    let (ca, other_ca) = (dir.join("server.pem"), dir.join("other.pem"));
    std::fs::write(&other_ca, &other_pem).expect("other CA");

    let config = NodeConfig {
        auth: Auth::Password,
        client_encryption: Some(ClientEncryption {
            keystore,
            keystore_password: "changeit".into(),
            // Plaintext too on the same port: the harness' readiness probe
            // and the emulation front's own connections.
            optional: true,
            require_client_auth: None,
        }),
        ..NodeConfig::default()
    }
    .with_free_ports()
    .expect("ports");
    let node = tokio::task::spawn_blocking(move || Node::start(config))
        .await
        .expect("join")
        .expect("a Cassandra with passwords and TLS");
    let direct = login(node.addr()).await;

    let upstream = node.addr();
    let front: FrontHandle = tokio::task::spawn_blocking(move || {
        let credentials = Some((USER.0.to_owned(), USER.1.to_owned()));
        let emu = testkit::fresh_keyspace("emu_replicator_tls");
        Front::start(upstream, FrontConfig { shards: 2, emu_keyspace: emu, credentials, ..FrontConfig::default() })
    })
    .await
    .expect("join")
    .expect("a front over the Cassandra");
    let source = tls_endpoint(&server_pem, &server_key, front.addr()).await;
    let session = SessionBuilder::new()
        .known_node_addr(front.addr())
        .user(USER.0, USER.1)
        .build()
        .await
        .expect("a session through the front");

    let ks = testkit::fresh_keyspace("replicator_tls");
    run(&session, &testkit::create_keyspace(&ks, 1)).await;
    let columns = "(pk int, ck int, v text, m map<int, text>, PRIMARY KEY (pk, ck))";
    run(&session, &format!("CREATE TABLE {ks}.src {columns} WITH cdc = {{'enabled': true}}")).await;
    run(&session, &format!("CREATE TABLE {ks}.dst {columns}")).await;
    for pk in 0..5 {
        for ck in 0..4 {
            run(
                &session,
                &format!("INSERT INTO {ks}.src (pk, ck, v, m) VALUES ({pk}, {ck}, 'v{pk}.{ck}', {{{ck}: 'x'}})"),
            )
            .await;
        }
    }
    for statement in [
        format!("UPDATE {ks}.src SET v = 'updated', m = m + {{9: 'nine'}} WHERE pk = 1 AND ck = 1"),
        format!("DELETE FROM {ks}.src WHERE pk = 2 AND ck = 0"),
        format!("DELETE FROM {ks}.src WHERE pk = 3"),
    ] {
        run(&session, &statement).await;
    }
    let expected = dump(&session, &ks, "src").await;
    assert_eq!(expected.len(), 20 - 1 - 4, "the source's rows");

    let path = |p: &Path| p.to_str().expect("utf-8 path").to_owned();
    let args = |password: &str, ca: &Path| -> Vec<String> {
        let fixed = "--table src --destination-table dst --start-ago 60 --window 1 --safety 1 --workers 1 --username";
        let mut args: Vec<String> = fixed.split(' ').chain([USER.0]).map(str::to_owned).collect();
        let given = [
            ("--node", source.to_string()),
            ("--destination", node.addr().to_string()),
            ("--password", password.to_owned()),
            ("--tls-ca", path(ca)),
            ("--keyspace", ks.clone()),
            // Its progress, in a table of the source cluster.
            ("--checkpoint-keyspace", ks.clone()),
            ("--checkpoint-interval", "0.2".to_owned()),
        ];
        args.extend(given.into_iter().flat_map(|(flag, value)| [flag.to_owned(), value]));
        args
    };

    let log = dir.join("replicator.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_replicator"))
        .args(args(USER.1, &ca))
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).expect("log file")))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn replicator");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tls_clients = 0;
    loop {
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "the replicator exited early: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        // The replicator's destination connections are the only TLS ones
        // to the Cassandra itself.
        let seen = clients(&direct).await;
        tls_clients = tls_clients.max(seen.iter().filter(|c| *c == &(Some(USER.0.to_owned()), Some(true))).count());
        if dump(&direct, &ks, "dst").await == expected && tls_clients > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the destination holds the source's rows over TLS ({tls_clients} TLS clients): {:?}\nreplicator: {}",
            dump(&direct, &ks, "dst").await,
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    signal(&child, "INT");
    let status = exit_of(&mut child, Instant::now() + Duration::from_secs(30), "the replicator after SIGINT").await;
    assert!(status.success(), "the replicator stopped cleanly: {status:?}");
    // It saved how far it replicated: a restart resumes there.
    let store = TableCheckpointStore::new(session.clone(), &ks, "cdc_checkpoints");
    let saved = store.load(&format!("{ks}.src_scylla_cdc_log")).await.expect("load").expect("a checkpoint");
    assert!(!saved.groups.is_empty(), "progress per group: {saved:?}");

    for (password, ca, failure) in
        [("wrong", &ca, "authentication failed: "), (USER.1, &other_ca, "TLS handshake failed: ")]
    {
        let (status, stderr) = replicator_fails_with(&args(password, ca)).await;
        assert!(!status.success(), "{failure}: exit status {status}");
        assert_eq!(stderr.lines().count(), 1, "{failure}: one line, got {stderr:?}");
        let expected = format!("replicator: could not connect to any known node (the last tried, {source}: {failure}");
        assert!(stderr.starts_with(&expected), "{stderr:?} starts with {expected:?}");
        assert!(!stderr.contains("panicked"), "{stderr:?}");
    }
    eprintln!(
        "{} rows replicated through TLS with credentials; {tls_clients} TLS connections to the destination",
        expected.len()
    );
    drop((session, direct));
    front.stop();
    tokio::task::spawn_blocking(move || drop(node)).await.expect("join");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A session straight to the Cassandra at `addr` (plaintext) as the
/// default superuser, once it lets that user in.
async fn login(addr: SocketAddr) -> Session {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match SessionBuilder::new().known_node_addr(addr).user(USER.0, USER.1).build().await {
            Ok(s) => return s,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(500)).await,
            Err(e) => panic!("cannot log in as {}: {e}", USER.0),
        }
    }
}

/// Every flag the replicator shares with the printer, given a bad value:
/// one line naming the flag and the value, and a failure status, before
/// anything connects (the node here does not exist). Values of the wrong
/// kind for a typed flag (`--metrics-addr nope`, `--translate-address x`)
/// are the argument parser's error, with its usage hint.
#[test]
fn bad_flag_values_get_one_clear_line_before_connecting() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").to_string();
    let cases: [(&[&str], &str); 16] = [
        (&["--workers", "0"], "--workers 0: a reader needs at least one worker"),
        (&["--streams-per-query", "65"], "--streams-per-query 65: from 1 to 64"),
        (&["--max-windows-in-flight", "0"], "--max-windows-in-flight 0: a worker needs at least one window in flight"),
        (&["--progress=-1"], "--progress -1: not a number of seconds"),
        (&["--tls-ca", "/nonexistent/ca.pem"], "cannot read the TLS CA file /nonexistent/ca.pem"),
        (&["--connection-heartbeat", "inf"], "--connection-heartbeat inf: not a positive number of seconds"),
        (&["--window=-1"], "--window -1: not a number of seconds"),
        (&["--window", "0"], "--window 0: must be more than 0"),
        (&["--safety", "inf"], "--safety inf: not a number of seconds"),
        (&["--sleep", "1e300"], "--sleep 1e300: not a number of seconds"),
        (&["--consistency", "most"], "--consistency most: unknown consistency MOST"),
        (&["--start-ago", "18446744073709551615"], "--start-ago 18446744073709551615: before the Unix epoch"),
        (&["--end-unix-ms", "18446744073709551615"], "--end-unix-ms 18446744073709551615: past the times"),
        (&["--checkpoint-keyspace", "ks", "--checkpoint-interval", "0"], "--checkpoint-interval 0: must be more"),
        (&["--lease-keyspace", "ks"], "--lease-keyspace needs --checkpoint-keyspace"),
        (
            &["--checkpoint-keyspace", "ks", "--lease-keyspace", "ks", "--lease-heartbeat", "nan"],
            "--lease-heartbeat NaN: not a number of seconds",
        ),
    ];
    for (flags, expected) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_replicator"))
            .args(["--node", &unused, "--keyspace", "ks", "--table", "t", "--destination-table", "t2"])
            .args(flags)
            .stdin(Stdio::null())
            .output()
            .expect("run the replicator");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{flags:?}: {}", output.status);
        assert_eq!(stderr.lines().count(), 1, "{flags:?}: one line, got {stderr:?}");
        assert!(stderr.starts_with(&format!("replicator: {expected}")), "{flags:?}: {stderr:?}");
    }
}
