//! One Cassandra process: start, wait until it serves CQL, stop.
//!
//! ## Why a shell wrapper
//!
//! The JVM is started by a few lines of `sh` (see [`LAUNCHER`]) in a process
//! group of its own. The wrapper holds the read end of a pipe whose write end
//! only this process has; when that pipe closes, the wrapper sends SIGTERM to
//! Java. The pipe closes when [`Node::stop`] drops it *and* when this process
//! dies for any reason (panic=abort, SIGKILL, a test harness that calls
//! `exit`), because the kernel closes a dead process's descriptors. So no JVM
//! outlives the test process, without polling and without `PR_SET_PDEATHSIG`
//! (which fires when the spawning *thread* exits, and test threads exit all
//! the time). The wrapper also deletes the node's directory after Java exits
//! when the stop came through the pipe, so a static server that is never
//! dropped leaves nothing behind either.
//!
//! The separate process group means a Ctrl-C in the terminal does not reach
//! the JVM directly (the owner decides how to stop it), and SIGKILL can be sent
//! to the whole group when the grace period after SIGTERM runs out.
//!
//! ## Readiness
//!
//! A node is ready when its log says `Startup complete` and an OPTIONS round
//! trip on the native port gets SUPPORTED back. The log file is the JVM's
//! stdout and stderr, in the node's directory.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::os::unix::process::CommandExt;

use crate::config::{NodeConfig, NodeDirs, LOGBACK_XML};
use crate::dist::Distribution;
use crate::error::{HarnessError, Result};

/// The wrapper that runs the JVM. `$@` is the java command line.
///
/// * fd 3 keeps the original stdin (the pipe from the harness) for the
///   watcher; Java gets `/dev/null` and not fd 3, so only the watcher holds the
///   pipe's read end.
/// * The watcher subshell reads until EOF, marks the stop as requested, and
///   sends SIGTERM to Java.
/// * After Java exits, the watcher is killed and, if the stop was requested
///   and `SHARDWISE_RM_DIR` is set, the node directory is removed.
pub const LAUNCHER: &str = r#"exec 3<&0 </dev/null
"$@" 3<&- &
java=$!
( while read -r _ <&3; do :; done
  [ -n "$SHARDWISE_NODE_DIR" ] && : > "$SHARDWISE_NODE_DIR/.stop-requested"
  kill -TERM "$java" 2>/dev/null ) &
watch=$!
exec 3<&-
trap 'kill -TERM "$java" 2>/dev/null' TERM HUP INT
while :; do
  wait "$java"; rc=$?
  kill -0 "$java" 2>/dev/null || break
done
kill "$watch" 2>/dev/null
if [ -n "$SHARDWISE_RM_DIR" ] && [ -e "$SHARDWISE_RM_DIR/.stop-requested" ]; then
  rm -rf "$SHARDWISE_RM_DIR"
fi
exit "$rc"
"#;

/// The log line that ends a successful startup.
pub const STARTUP_COMPLETE: &str = "Startup complete";

/// A running Cassandra node. Dropping it stops it (see [`Node::stop`]).
#[derive(Debug)]
pub struct Node {
    config: NodeConfig,
    dirs: NodeDirs,
    child: Option<Child>,
    /// The pipe the wrapper watches; `None` once a stop was requested.
    lifeline: Option<ChildStdin>,
    pgid: u32,
    started: Instant,
    startup_time: Option<Duration>,
    keep_dir: bool,
    exit_status: Option<ExitStatus>,
    /// Set while this node records the classes for the class data archive.
    recording: Option<crate::class_archive::Recording>,
}

pub use crate::process::{group_alive, tail_lines};
pub(crate) use crate::process::{signal_group, wait_or_kill};

/// A fresh, unique directory for a node.
fn make_node_dir(base: Option<&Path>, address: IpAddr, port: u16) -> Result<PathBuf> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let base = base.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
    fs::create_dir_all(&base).map_err(|e| HarnessError::io(format!("creating {}", base.display()), e))?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    for attempt in 0..100u32 {
        let name = format!(
            "shardwise-node-{}-{}-{}-{}-{:08x}",
            address,
            port,
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed),
            nanos.wrapping_add(attempt)
        );
        let dir = base.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(HarnessError::io(format!("creating {}", dir.display()), e)),
        }
    }
    Err(HarnessError::Config(format!("could not create a unique node directory in {}", base.display())))
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

impl Node {
    /// Starts a node and waits until it serves CQL (see the module docs).
    ///
    /// Resolves Java and the jars first ([`Distribution::ensure`]). On failure
    /// the process is stopped and its directory kept; the error names the log.
    pub fn start(config: NodeConfig) -> Result<Node> {
        let node = Node::spawn(config)?;
        node.finish_start()
    }

    /// Launches the process without waiting for it to be ready.
    fn spawn(config: NodeConfig) -> Result<Node> {
        config.validate()?;
        let dist = Distribution::ensure()?;
        let root = make_node_dir(config.base_dir.as_deref(), config.address, config.native_port)?;
        let dirs = NodeDirs { root };
        let keep_dir = config.keep_dir || env_flag("SHARDWISE_KEEP_NODE_DIRS");
        fs::write(dirs.yaml(), config.cassandra_yaml(&dirs))
            .map_err(|e| HarnessError::io(format!("writing {}", dirs.yaml().display()), e))?;
        if let Some(location) = &config.location {
            fs::write(dirs.rackdc(), location.rackdc_properties())
                .map_err(|e| HarnessError::io(format!("writing {}", dirs.rackdc().display()), e))?;
        }
        fs::write(dirs.logback(), LOGBACK_XML)
            .map_err(|e| HarnessError::io(format!("writing {}", dirs.logback().display()), e))?;
        let log = fs::File::create(dirs.log())
            .map_err(|e| HarnessError::io(format!("creating {}", dirs.log().display()), e))?;
        let log_err = log.try_clone().map_err(|e| HarnessError::io("duplicating the log file handle", e))?;

        let plan = crate::class_archive::plan(&crate::class_archive::Archive::cassandra(&dist));
        let mut jvm_args = config.jvm_args(&dirs, &dist.classpath());
        // Before `-cp <classpath> <main class>`.
        let at = jvm_args.len().saturating_sub(3);
        jvm_args.splice(at..at, plan.jvm_args());
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(LAUNCHER)
            .arg("shardwise-cassandra")
            .arg(&dist.java)
            .args(jvm_args)
            .current_dir(&dirs.root)
            .env("SHARDWISE_NODE_DIR", &dirs.root)
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        if keep_dir {
            cmd.env_remove("SHARDWISE_RM_DIR");
        } else {
            cmd.env("SHARDWISE_RM_DIR", &dirs.root);
        }
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|e| HarnessError::io("starting the Cassandra launcher (sh)", e))?;
        let lifeline = child.stdin.take();
        let pgid = child.id();
        Ok(Node {
            config,
            dirs,
            child: Some(child),
            lifeline,
            pgid,
            started,
            startup_time: None,
            keep_dir,
            exit_status: None,
            recording: match plan {
                crate::class_archive::Plan::Record(r) => Some(r),
                _ => None,
            },
        })
    }

    /// Waits for readiness; on failure stops the process, keeps the directory.
    fn finish_start(mut self) -> Result<Node> {
        match self.wait_ready() {
            Ok(()) => {
                self.startup_time = Some(self.started.elapsed());
                if let Some(recording) = self.recording.take() {
                    recording.finish();
                }
                Ok(self)
            }
            Err(e) => {
                self.keep_dir = true;
                // The wrapper must not remove the directory either.
                let _ = fs::remove_file(self.dirs.root.join(".stop-requested"));
                self.kill();
                Err(e)
            }
        }
    }

    fn wait_ready(&mut self) -> Result<()> {
        let timeout = self.config.startup_timeout;
        let deadline = self.started + timeout;
        let addr = self.addr();
        let log_path = self.dirs.log();
        let mut scanner = LogScanner::new(log_path.clone());
        let mut saw_complete = false;
        loop {
            if let Some(child) = self.child.as_mut() {
                match child.try_wait() {
                    Ok(Some(status)) => {
                        self.exit_status = Some(status);
                        self.child = None;
                        return Err(HarnessError::ExitedDuringStartup {
                            addr,
                            status: status.to_string(),
                            tail: tail_lines(&log_path, 40),
                            log: log_path,
                        });
                    }
                    Ok(None) => {}
                    Err(e) => return Err(HarnessError::io("polling the Cassandra process", e)),
                }
            }
            if !saw_complete {
                saw_complete = scanner.contains(STARTUP_COMPLETE);
            }
            if saw_complete {
                match crate::raw::options(addr, Duration::from_secs(2)) {
                    Ok(_) => return Ok(()),
                    Err(_) if Instant::now() < deadline => {}
                    Err(e) => {
                        return Err(HarnessError::StartupTimeout {
                            addr,
                            timeout,
                            waiting_for: "an OPTIONS round trip on the native port",
                            tail: format!("{}\n(last probe error: {e})", tail_lines(&log_path, 40)),
                            log: log_path,
                        })
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::StartupTimeout {
                    addr,
                    timeout,
                    waiting_for: "\"Startup complete\" in the log",
                    tail: tail_lines(&log_path, 40),
                    log: log_path,
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The native-protocol (CQL) address.
    pub fn addr(&self) -> SocketAddr {
        self.config.native_addr()
    }

    /// The internode address.
    pub fn storage_addr(&self) -> SocketAddr {
        self.config.storage_addr()
    }

    /// The configuration it was started with.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// The node's directory (yaml, log, data).
    pub fn dir(&self) -> &Path {
        &self.dirs.root
    }

    /// The log file (JVM stdout and stderr).
    pub fn log_path(&self) -> PathBuf {
        self.dirs.log()
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        tail_lines(&self.dirs.log(), n)
    }

    /// The process group of the wrapper and the JVM.
    pub fn process_group(&self) -> u32 {
        self.pgid
    }

    /// From launch to ready.
    pub fn startup_time(&self) -> Option<Duration> {
        self.startup_time
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => match c.try_wait() {
                Ok(None) => true,
                Ok(Some(status)) => {
                    self.exit_status = Some(status);
                    self.child = None;
                    false
                }
                Err(_) => false,
            },
            None => false,
        }
    }

    /// Asks the node to stop (SIGTERM via the wrapper) without waiting.
    pub fn request_stop(&mut self) {
        self.lifeline = None;
    }

    /// Stops the node: SIGTERM, then SIGKILL to the whole process group if it
    /// has not exited after [`NodeConfig::stop_grace`]. Removes the node's
    /// directory unless it is to be kept. Idempotent.
    pub fn stop(&mut self) -> Result<Option<ExitStatus>> {
        self.request_stop();
        if let Some(mut child) = self.child.take() {
            let status = wait_or_kill(&mut child, self.pgid, self.config.stop_grace)
                .map_err(|e| HarnessError::io("waiting for the Cassandra process", e))?;
            self.exit_status = Some(status);
        }
        self.remove_dir();
        Ok(self.exit_status)
    }

    /// Kills the node at once (SIGKILL to the process group), as a crash would.
    pub fn kill(&mut self) {
        // SIGKILL first: closing the pipe first would let the wrapper run its
        // requested-stop path (and remove a directory that is to be kept).
        if self.child.is_some() {
            signal_group(self.pgid, "KILL");
        }
        self.lifeline = None;
        if let Some(mut child) = self.child.take() {
            if let Ok(status) = child.wait() {
                self.exit_status = Some(status);
            }
        }
        self.remove_dir();
    }

    fn remove_dir(&self) {
        if !self.keep_dir && self.dirs.root.exists() {
            let _ = fs::remove_dir_all(&self.dirs.root);
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Searches a growing log file for a line, reading only what was appended.
#[derive(Debug)]
pub(crate) struct LogScanner {
    path: PathBuf,
    offset: u64,
    carry: Vec<u8>,
}

impl LogScanner {
    pub(crate) fn new(path: PathBuf) -> Self {
        LogScanner { path, offset: 0, carry: Vec::new() }
    }

    /// Whether `needle` appeared since the last call (or spans the boundary).
    pub(crate) fn contains(&mut self, needle: &str) -> bool {
        let Ok(mut f) = fs::File::open(&self.path) else {
            return false;
        };
        let mut fresh = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).and_then(|_| f.read_to_end(&mut fresh)).is_err() {
            return false;
        }
        self.offset += fresh.len() as u64;
        let mut window = std::mem::take(&mut self.carry);
        window.extend_from_slice(&fresh);
        let found = window.windows(needle.len()).any(|w| w == needle.as_bytes());
        let keep = needle.len().saturating_sub(1).min(window.len());
        self.carry = window[window.len() - keep..].to_vec();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn scanner_finds_text_across_appends() {
        let dir = std::env::temp_dir().join(format!("shardwise-scan-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let mut f = fs::File::create(&path).unwrap();
        let mut s = LogScanner::new(path.clone());
        assert!(!s.contains("Startup complete"));
        f.write_all(b"INFO a\nINFO Startup com").unwrap();
        assert!(!s.contains("Startup complete"));
        f.write_all(b"plete\n").unwrap();
        assert!(s.contains("Startup complete"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tail_of_file() {
        let dir = std::env::temp_dir().join(format!("shardwise-tail-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        fs::write(&path, "1\n2\n3\n4\n").unwrap();
        assert_eq!(tail_lines(&path, 2), "3\n4");
        assert_eq!(tail_lines(&path, 10), "1\n2\n3\n4");
        assert!(tail_lines(&dir.join("missing"), 2).starts_with("(cannot read"));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// The wrapper's contract, with `sleep` standing in for Java: closing the
    /// pipe stops the child and removes the directory; the exit status of the
    /// child is passed on when it exits by itself.
    #[test]
    fn launcher_stops_child_when_pipe_closes() {
        let dir = make_node_dir(None, IpAddr::from([127, 0, 0, 1]), 1).unwrap();
        let mut child = Command::new("sh")
            .args(["-c", LAUNCHER, "launcher-test", "sleep", "30"])
            .env("SHARDWISE_NODE_DIR", &dir)
            .env("SHARDWISE_RM_DIR", &dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id();
        std::thread::sleep(Duration::from_millis(300));
        assert!(child.try_wait().unwrap().is_none());
        assert!(group_alive(pgid));
        let t = Instant::now();
        drop(child.stdin.take());
        let status = child.wait().unwrap();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(!status.success()); // sleep died of SIGTERM
        assert!(!dir.exists(), "directory should be removed after a requested stop");
        std::thread::sleep(Duration::from_millis(100));
        assert!(!group_alive(pgid), "no process of the group may survive");

        let dir = make_node_dir(None, IpAddr::from([127, 0, 0, 1]), 2).unwrap();
        let mut child = Command::new("sh")
            .args(["-c", LAUNCHER, "launcher-test", "sh", "-c", "sleep 0.2; exit 7"])
            .env("SHARDWISE_NODE_DIR", &dir)
            .env("SHARDWISE_RM_DIR", &dir)
            .stdin(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        // Keep the pipe open: the child ends by itself, not by request.
        let _pipe = child.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "launcher did not exit");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(7));
        assert!(dir.exists(), "a crash keeps the directory for inspection");
        fs::remove_dir_all(&dir).unwrap();
    }
}
