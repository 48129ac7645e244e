//! Starts a real Cassandra, speaks raw CQL v4 to it, stops it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use shardwise_protocol::codec::Reader;
use testkit::node::group_alive;
use testkit::raw;
use testkit::{Node, NodeConfig};

#[test]
fn start_options_stop() {
    let _own = crate::support::own_nodes();
    let cfg = NodeConfig::default().with_free_ports().expect("free ports");
    let mut node = Node::start(cfg).unwrap_or_else(|e| panic!("{e}"));
    let addr = node.addr();
    let dir = node.dir().to_path_buf();
    let pgid = node.process_group();
    eprintln!(
        "node {addr} ready in {:.1} s (dir {})",
        node.startup_time().unwrap_or_default().as_secs_f64(),
        dir.display()
    );

    // OPTIONS by hand (version 4, no flags, stream 0, opcode 5, empty body),
    // independent of the protocol crate's encoder.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[0x04, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00]).unwrap();
    let mut header = [0u8; 9];
    s.read_exact(&mut header).unwrap();
    assert_eq!(header[0], 0x84, "v4 response version byte");
    assert_eq!(&header[2..4], &[0, 0], "stream 0");
    assert_eq!(header[4], 0x06, "SUPPORTED");
    let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    let mut r = Reader::new(&body);
    let supported = r.string_multimap("SUPPORTED").unwrap();
    r.finish("SUPPORTED").unwrap();
    let cql = supported.iter().find(|(k, _)| *k == "CQL_VERSION").expect("CQL_VERSION");
    assert_eq!(cql.1, vec!["3.4.7"]);
    drop(s);
    // The same through the raw client.
    let supported = raw::options(addr, Duration::from_secs(10)).unwrap();
    assert!(supported.iter().any(|(k, v)| k == "CQL_VERSION" && v == &["3.4.7"]), "{supported:?}");

    let version = raw::release_version(addr, None, Duration::from_secs(10)).unwrap();
    assert_eq!(version, testkit::CASSANDRA_VERSION);

    let t = Instant::now();
    node.stop().unwrap();
    eprintln!("stopped in {:.1} s", t.elapsed().as_secs_f64());
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(), "port still open");
    assert!(!group_alive(pgid), "a process of the node's group survived");
    assert!(!dir.exists(), "node directory not removed");
}
