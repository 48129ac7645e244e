//! Three nodes on 127.0.0.1–3 (about a minute and 2 GB; it takes its turn
//! with the other tests that start nodes of their own).

use std::collections::BTreeSet;
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};

use testkit::raw::{QueryResult, RawConnection};
use testkit::Cluster;

/// `Cluster::start(3)` returns three nodes on one port, each of which
/// already lists the two others with their tokens in `system.peers` (a
/// client reading the ring sees all of it), and `Cluster::stop` leaves none
/// of them listening.
#[test]
fn three_node_cluster() {
    let _own = crate::support::own_nodes();
    let t = Instant::now();
    let mut cluster = Cluster::start(3).unwrap_or_else(|e| panic!("{e}"));
    for node in cluster.nodes() {
        eprintln!("{} ready in {:.1} s", node.addr(), node.startup_time().unwrap_or_default().as_secs_f64());
    }
    eprintln!("cluster up in {:.1} s", t.elapsed().as_secs_f64());
    let points = cluster.contact_points();
    assert_eq!(points.len(), 3);
    assert!(points.iter().all(|p| p.port() == points[0].port()));

    // Every node already sees the two others in system.peers, with their
    // tokens: `Cluster::start` waits for the ring to settle.
    for (i, addr) in points.iter().enumerate() {
        let expected: BTreeSet<IpAddr> =
            points.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, p)| p.ip()).collect();
        let mut c = RawConnection::connect(*addr, Duration::from_secs(10)).unwrap();
        c.startup(None).unwrap();
        let QueryResult::Rows(rows) = c.query("SELECT peer, data_center, tokens FROM system.peers").unwrap() else {
            panic!("no rows")
        };
        let seen: BTreeSet<IpAddr> = (0..rows.rows.len()).filter_map(|r| rows.inet(r, "peer")).collect();
        assert_eq!(seen, expected, "{addr}'s peers");
        assert!((0..rows.rows.len()).all(|r| rows.text(r, "data_center").as_deref() == Some("datacenter1")));
        let tokens = rows.column("tokens").unwrap();
        assert!(
            rows.rows.iter().all(|r| r[tokens].as_ref().is_some_and(|c| c.len() > 4)),
            "{addr}: a peer without tokens"
        );
    }

    let t = Instant::now();
    cluster.stop().unwrap();
    eprintln!("cluster stopped in {:.1} s", t.elapsed().as_secs_f64());
    for p in points {
        assert!(TcpStream::connect_timeout(&p, Duration::from_secs(1)).is_err(), "{p} still open");
    }
}
