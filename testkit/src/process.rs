//! The harness's child processes: signals to a process group, a bounded
//! wait for one asked to stop, and the tail of its log. Below the node,
//! Kafka and distribution files, which all use them (issue 54, part 6:
//! `dist.rs` took `tail_lines` from `node.rs`, which uses `dist.rs`).

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The last `n` lines of a file (best effort: an unreadable file gives a note).
pub fn tail_lines(path: &Path, n: usize) -> String {
    const MAX_READ: u64 = 256 * 1024;
    let mut f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return format!("(cannot read {}: {e})", path.display()),
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(MAX_READ);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(start)).and_then(|_| f.read_to_end(&mut buf)).is_err() {
        return format!("(cannot read {})", path.display());
    }
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    lines[from..].join("\n")
}

/// Sends `signal` to every process of group `pgid` (via the shell's `kill`).
pub(crate) fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("sh")
        .args(["-c", "kill -s \"$1\" -- \"-$2\" 2>/dev/null", "sh", signal, &pgid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Waits up to `grace` for `child` (asked to stop) to exit, then sends
/// SIGKILL to its process group `pgid` and reaps it.
pub(crate) fn wait_or_kill(child: &mut Child, pgid: u32, grace: Duration) -> std::io::Result<ExitStatus> {
    let deadline = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) | Err(_) => {
                signal_group(pgid, "KILL");
                return child.wait();
            }
        }
    }
}

/// Whether any process of group `pgid` is alive.
pub fn group_alive(pgid: u32) -> bool {
    Command::new("sh")
        .args(["-c", "kill -s 0 -- \"-$1\" 2>/dev/null", "sh", &pgid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
