//! A PasswordAuthenticator node: the default superuser works right away
//! (`cassandra.superuser_setup_delay_ms=0`), and no credentials are refused.

use std::time::{Duration, Instant};

use testkit::raw::{QueryResult, RawConnection};
use testkit::{Auth, HarnessError, Node, NodeConfig};

#[test]
fn password_authenticator() {
    let _own = crate::support::own_nodes();
    let cfg = NodeConfig::default().with_free_ports().expect("free ports").with_auth(Auth::Password);
    let node = Node::start(cfg).unwrap_or_else(|e| panic!("{e}"));
    let addr = node.addr();
    let ready = Instant::now();

    let mut anonymous = RawConnection::connect(addr, Duration::from_secs(10)).unwrap();
    match anonymous.startup(None) {
        Err(HarnessError::Protocol { message, .. }) => {
            assert!(message.contains("requires authentication"), "{message}")
        }
        other => panic!("expected an authentication demand, got {other:?}"),
    }

    // The superuser is created asynchronously just after startup.
    let mut conn = loop {
        let mut c = RawConnection::connect(addr, Duration::from_secs(10)).unwrap();
        match c.startup(Some(("cassandra", "cassandra"))) {
            Ok(()) => break c,
            Err(e) if ready.elapsed() < Duration::from_secs(30) => {
                eprintln!("not yet: {e}");
                std::thread::sleep(Duration::from_millis(250));
            }
            Err(e) => panic!("default superuser never worked: {e}"),
        }
    };
    eprintln!("superuser usable {:.1} s after ready", ready.elapsed().as_secs_f64());
    assert!(ready.elapsed() < Duration::from_secs(8), "superuser setup delay not applied");

    let QueryResult::Rows(rows) = conn.query("SELECT role, is_superuser FROM system_auth.roles").unwrap() else {
        panic!("no rows")
    };
    assert!((0..rows.rows.len()).any(|i| rows.text(i, "role").as_deref() == Some("cassandra")));

    let mut wrong = RawConnection::connect(addr, Duration::from_secs(10)).unwrap();
    match wrong.startup(Some(("cassandra", "wrong"))) {
        Err(HarnessError::Server { code, .. }) => assert_eq!(code, 0x0100, "bad credentials error"),
        other => panic!("expected bad credentials, got {other:?}"),
    }
}
