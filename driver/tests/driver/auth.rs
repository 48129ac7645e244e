//! Authentication against a second Cassandra started with
//! `PasswordAuthenticator`: the right credentials work, wrong ones and
//! missing ones are clear errors; a custom authenticator given to
//! `SessionBuilder::authenticator` is the one the handshake uses, and it
//! can await I/O for its credentials.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shardwise::auth::{AuthError, AuthFuture, AuthenticatorProvider, AuthenticatorSession, PlainTextAuthenticator};
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

/// Username and password through `SessionBuilder::user` on v4 and v5;
/// wrong and missing credentials are typed authentication errors; a
/// custom authenticator (see [`custom_authenticator`]).
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
    custom_authenticator(&node).await;
}

/// A custom authenticator: it records what the handshake asked of it and
/// answers with username and password, or refuses. Its credentials come
/// with I/O, as a service's from a secret store: each connection's
/// exchange asks a task for them over a channel and awaits the answer.
#[derive(Debug)]
struct Recording {
    /// Refuse instead of answering.
    refuse: bool,
    /// The server's authenticator class, as `start` was given it.
    classes: Mutex<Vec<String>>,
    /// Exchanges the server accepted (`success` calls).
    successes: Arc<AtomicUsize>,
    /// Where credentials are asked for.
    vault: tokio::sync::mpsc::Sender<tokio::sync::oneshot::Sender<(String, String)>>,
}

impl Recording {
    /// With a secret store that answers after a delay, counting the
    /// credentials it handed out.
    fn new(refuse: bool, handed: Arc<AtomicUsize>) -> Self {
        let (vault, mut asks) = tokio::sync::mpsc::channel::<tokio::sync::oneshot::Sender<(String, String)>>(16);
        tokio::spawn(async move {
            while let Some(reply) = asks.recv().await {
                tokio::time::sleep(Duration::from_millis(20)).await;
                handed.fetch_add(1, Ordering::SeqCst);
                let _ = reply.send(("cassandra".to_owned(), "cassandra".to_owned()));
            }
        });
        Recording { refuse, classes: Mutex::default(), successes: Arc::default(), vault }
    }
}

/// One exchange of [`Recording`]: username/password's, counting the success.
struct Counted(Box<dyn AuthenticatorSession>, Arc<AtomicUsize>);

impl AuthenticatorSession for Counted {
    fn evaluate_challenge<'a>(&'a mut self, token: Option<&'a [u8]>) -> AuthFuture<'a, Vec<u8>> {
        self.0.evaluate_challenge(token)
    }
    fn success<'a>(&'a mut self, token: Option<&'a [u8]>) -> AuthFuture<'a, ()> {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.success(token)
    }
}

impl AuthenticatorProvider for Recording {
    fn start<'a>(&'a self, class: &'a str) -> AuthFuture<'a, (Vec<u8>, Box<dyn AuthenticatorSession>)> {
        Box::pin(async move {
            self.classes.lock().expect("classes").push(class.to_owned());
            if self.refuse {
                return Err(AuthError("refused by the test's authenticator".into()));
            }
            let (reply, answer) = tokio::sync::oneshot::channel();
            self.vault.send(reply).await.map_err(|_| AuthError("the vault is gone".into()))?;
            let (user, password) = answer.await.map_err(|_| AuthError("the vault did not answer".into()))?;
            let (token, session) = PlainTextAuthenticator::new(user, password).start(class).await?;
            Ok((token, Box::new(Counted(session, self.successes.clone())) as Box<dyn AuthenticatorSession>))
        })
    }
}

/// `SessionBuilder::authenticator`: the session's connections authenticate
/// through the given provider (it is asked with the server's authenticator
/// class, once per connection, and told of each success), and its error
/// fails the session as a typed authentication error carrying its message.
async fn custom_authenticator(node: &Node) {
    let handed = Arc::new(AtomicUsize::new(0));
    let auth = Arc::new(Recording::new(false, handed.clone()));
    let session = SessionBuilder::new()
        .known_node_addr(node.addr())
        .authenticator(auth.clone())
        .build()
        .await
        .expect("a session through the custom authenticator");
    session.execute(&Statement::new("SELECT key FROM system.local"), ()).await.expect("query");
    // Read in this order: each open connection's exchange started before it opened (more may
    // be starting in the background).
    let open = session.connections().len();
    let succeeded = auth.successes.load(Ordering::SeqCst);
    let classes = auth.classes.lock().expect("classes").clone();
    println!(
        "custom authenticator: {} exchanges started, {succeeded} accepted, {open} connections open",
        classes.len()
    );
    assert!(open > 0 && succeeded >= open, "{succeeded} exchanges accepted for {open} open connections");
    assert!(succeeded <= classes.len(), "more successes than exchanges started: {succeeded}, {classes:?}");
    assert!(handed.load(Ordering::SeqCst) >= succeeded, "every accepted exchange awaited the vault's credentials");
    assert!(
        classes.iter().all(|c| c.ends_with("PasswordAuthenticator")),
        "started with the server's authenticator class: {classes:?}"
    );

    let refusing = Arc::new(Recording::new(true, Arc::default()));
    let err = SessionBuilder::new()
        .known_node_addr(node.addr())
        .authenticator(refusing.clone())
        .build()
        .await
        .expect_err("the authenticator refused");
    assert!(
        matches!(&err, NewSessionError::Connect { source: ConnectionError::Auth(msg), .. } if msg == "refused by the test's authenticator"),
        "{err:?}"
    );
    assert!(!refusing.classes.lock().expect("classes").is_empty(), "the refusing authenticator was asked");
}
