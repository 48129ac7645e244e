//! A node must not outlive the process that started it, even when that
//! process is SIGKILLed and runs no destructor.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::node::group_alive;
use testkit::{Node, NodeConfig};

const CHILD_ENV: &str = "SHARDWISE_LIFELINE_CHILD";

/// Runs only as the child of `node_dies_with_its_process`.
#[test]
#[ignore = "helper: run by node_dies_with_its_process"]
fn lifeline_child() {
    if std::env::var(CHILD_ENV).is_err() {
        return;
    }
    let cfg = NodeConfig::default().with_free_ports().expect("free ports");
    let node = Node::start(cfg).unwrap_or_else(|e| panic!("{e}"));
    // Straight to fd 1: libtest's output capture only intercepts `print!`.
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY {} {} {}", node.addr(), node.process_group(), node.dir().display()).unwrap();
    out.flush().unwrap();
    drop(out);
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn node_dies_with_its_process() {
    let _own = crate::support::own_nodes();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "lifeline::lifeline_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut ready = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        eprintln!("child: {line}");
        // libtest may have printed "test lifeline::lifeline_child ... " on the same line.
        if let Some(rest) = line.find("READY ").map(|i| &line[i + "READY ".len()..]) {
            let mut parts = rest.splitn(3, ' ');
            let addr: SocketAddr = parts.next().unwrap().parse().unwrap();
            let pgid: u32 = parts.next().unwrap().parse().unwrap();
            let dir = PathBuf::from(parts.next().unwrap());
            ready = Some((addr, pgid, dir));
            break;
        }
    }
    let (addr, pgid, dir) = ready.expect("child never reported a ready node");
    assert!(TcpStream::connect(addr).is_ok());
    assert!(group_alive(pgid));

    child.kill().unwrap(); // SIGKILL: no destructor runs in the child
    child.wait().unwrap();
    let t = Instant::now();
    while group_alive(pgid) || dir.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "java (group {pgid}) or {} still there 60 s after its parent died",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("node gone {:.1} s after its parent was killed", t.elapsed().as_secs_f64());
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
}
