//! The responder (`src/bin/responder.rs`) keeps working with both drivers:
//! it is started on ports of its own, and the workload runner runs a few
//! hundred writes and reads through each driver, on a current-thread and
//! a multi-thread runtime, against it. Nothing is timed; every request
//! must succeed, and every read must find the row the runner checks for.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The responder, killed when the test ends.
struct Responder {
    child: Child,
    port: u16,
    shard_aware_port: u16,
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_responder() -> Responder {
    let mut child = Command::new(env!("CARGO_BIN_EXE_responder"))
        .args(["--port", "0", "--shard-aware-port", "0", "--shards", "3"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the responder starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("the responder's first line");
    let ports: Vec<u16> = line
        .strip_prefix("LISTENING ")
        .unwrap_or_else(|| panic!("not a LISTENING line: {line:?}"))
        .split_whitespace()
        .map(|p| p.parse().expect("a port"))
        .collect();
    Responder { child, port: ports[0], shard_aware_port: ports[1] }
}

/// Runs `workload run` with `driver` and returns its report line's fields.
fn run(responder: &Responder, driver: &str, workload: &str, threads: &str, protocol: &[&str]) -> Vec<String> {
    let node = format!("127.0.0.1:{}", responder.port);
    let out = Command::new(env!("CARGO_BIN_EXE_workload"))
        .args(["run", workload, "--driver", driver, "-d", "300", "-w", "50", "-t", threads, "-p", "16"])
        .args(["--node", &node, "--report-line"])
        .args(protocol)
        .output()
        .expect("the workload runner runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{driver} {workload} -t {threads}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().find_map(|l| l.strip_prefix("REPORT\t")).expect("a report line");
    line.split('\t').map(str::to_string).collect()
}

#[test]
fn both_drivers_write_and_read_through_the_responder() {
    let responder = start_responder();
    assert_ne!(responder.port, responder.shard_aware_port);
    for driver in ["shardwise", "official"] {
        for threads in ["1", "2"] {
            for workload in ["write", "read"] {
                // shardwise tries v5 first on its own (and is refused, as
                // Scylla refuses it), v4 only when told.
                let protocols: &[&[&str]] = if driver == "shardwise" { &[&[], &["--protocol", "4"]] } else { &[&[]] };
                for protocol in protocols {
                    let f = run(&responder, driver, workload, threads, protocol);
                    let what = format!("{driver} {workload} -t {threads} {protocol:?}");
                    // Fields: driver, workload, threads, concurrency,
                    // connections, protocol, ops, errors, missing rows, …
                    assert_eq!(f[5], "V4", "{what}: protocol");
                    assert_eq!(f[6], "300", "{what}: requests");
                    assert_eq!(f[7], "0", "{what}: errors ({})", f[24]);
                    assert_eq!(f[8], "0", "{what}: reads without their row");
                }
            }
        }
    }
}
