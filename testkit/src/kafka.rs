//! A real Apache Kafka broker for tests: one KRaft node (broker and
//! controller in one process) on loopback, started the way [`crate::node`]
//! starts Cassandra.
//!
//! The broker is the Maven artifact `org.apache.kafka:kafka_2.13`
//! ([`KAFKA_VERSION`]) and its dependencies, resolved once per machine into
//! the cache ([`crate::dist`]). A start writes a `server.properties` for a
//! single combined node (replication factor 1 for the internal topics, so
//! transactions work), formats the log directory with `kafka.tools.StorageTool
//! format`, and runs `kafka.Kafka server.properties` behind the same `sh`
//! launcher as Cassandra: in a process group of its own, stopped when the
//! pipe to this process closes, so no JVM outlives the test process. The
//! broker is ready when an `ApiVersions` round trip on its port succeeds.
//! (Its log holds only what the JVM prints: the Maven artifact brings no
//! SLF4J binding, so the broker's own logging is off.)

use std::fs;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::dist::{cache_root, ensure_jars, find_java, Artifact};
use crate::error::{HarnessError, Result};
use crate::node::{signal_group, tail_lines, wait_or_kill, LAUNCHER};

/// The Kafka release the harness runs.
pub const KAFKA_VERSION: &str = "3.9.1";

/// The broker: `org.apache.kafka:kafka_2.13`.
pub const KAFKA: Artifact = Artifact { group: "org.apache.kafka", artifact: "kafka_2.13", version: KAFKA_VERSION };

/// How long a start may take.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// A running single-node Kafka (see the module docs); stopped on drop.
#[derive(Debug)]
pub struct Kafka {
    dir: PathBuf,
    addr: SocketAddr,
    sasl_addr: SocketAddr,
    child: Option<Child>,
    lifeline: Option<ChildStdin>,
    pgid: u32,
}

/// The user and password of the broker's SASL listener ([`Kafka::sasl_addr`]):
/// SASL PLAIN over plain TCP.
pub const SASL_USER: (&str, &str) = ("sink", "sink-secret");

/// The `server.properties` of a combined broker and controller with node id
/// 1, serving clients on `port` (and with SASL PLAIN, as [`SASL_USER`], on
/// `sasl`) and its controller on `controller`.
pub fn server_properties(data: &Path, port: u16, controller: u16, sasl: u16) -> String {
    let (user, password) = SASL_USER;
    format!(
        "process.roles=broker,controller\n\
         node.id=1\n\
         controller.quorum.voters=1@127.0.0.1:{controller}\n\
         listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},SASL_PLAINTEXT://127.0.0.1:{sasl}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl}\n\
         controller.listener.names=CONTROLLER\n\
         inter.broker.listener.name=PLAINTEXT\n\
         listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n\
         sasl.enabled.mechanisms=PLAIN\n\
         listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \
         required user_{user}=\"{password}\";\n\
         log.dirs={}\n\
         num.partitions=1\n\
         offsets.topic.replication.factor=1\n\
         offsets.topic.num.partitions=1\n\
         transaction.state.log.replication.factor=1\n\
         transaction.state.log.min.isr=1\n\
         transaction.state.log.num.partitions=1\n\
         group.initial.rebalance.delay.ms=0\n\
         auto.create.topics.enable=true\n",
        data.display()
    )
}

/// Console logging to the broker's log file, at INFO.
const LOG4J: &str = "log4j.rootLogger=INFO, stdout\n\
log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n\
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n\
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n";

/// A cluster id for `StorageTool format`: 16 bytes in unpadded URL-safe
/// base64 (22 characters), as `kafka-storage random-uuid` prints.
pub fn cluster_id(seed: u128) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = seed.to_be_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, &b| (n << 8) | u32::from(b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

impl Kafka {
    /// Resolves the jars (once per machine), formats a fresh log directory
    /// and starts the broker; waits until it answers (see the module docs).
    pub fn start() -> Result<Kafka> {
        let (java, _) = find_java()?;
        let lib = ensure_jars(&cache_root()?.join(format!("kafka_2.13-{KAFKA_VERSION}")), &KAFKA)?;
        let classpath = format!("{}/*", lib.display());
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        let dir = std::env::temp_dir().join(format!("shardwise-kafka-{}-{nanos}", std::process::id()));
        let data = dir.join("data");
        fs::create_dir_all(&data).map_err(|e| HarnessError::io(format!("creating {}", data.display()), e))?;
        let (port, controller) = crate::ports::free_port_pair(&[IpAddr::V4(Ipv4Addr::LOCALHOST)])?;
        let sasl = (0..100)
            .map(|_| crate::ports::free_port(&[IpAddr::V4(Ipv4Addr::LOCALHOST)]))
            .find(|p| !matches!(p, Ok(p) if *p == port || *p == controller))
            .unwrap_or_else(|| crate::ports::free_port(&[IpAddr::V4(Ipv4Addr::LOCALHOST)]))?;
        let properties = dir.join("server.properties");
        let write = |path: &Path, text: &str| {
            fs::write(path, text).map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))
        };
        write(&properties, &server_properties(&data, port, controller, sasl))?;
        write(&dir.join("log4j.properties"), LOG4J)?;
        let log4j = format!("-Dlog4j.configuration=file:{}", dir.join("log4j.properties").display());
        let log_path = dir.join("kafka.log");

        let format = Command::new(&java)
            .args([log4j.as_str(), "-cp", &classpath, "kafka.tools.StorageTool", "format"])
            .args(["-t", &cluster_id(nanos ^ u128::from(std::process::id())), "-c"])
            .arg(&properties)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| HarnessError::io("running kafka.tools.StorageTool format", e))?;
        if !format.status.success() {
            return Err(HarnessError::Config(format!(
                "formatting Kafka's log directory in {} failed ({}): {}{}",
                dir.display(),
                format.status,
                String::from_utf8_lossy(&format.stdout),
                String::from_utf8_lossy(&format.stderr)
            )));
        }

        let log =
            fs::File::create(&log_path).map_err(|e| HarnessError::io(format!("creating {}", log_path.display()), e))?;
        let log_err = log.try_clone().map_err(|e| HarnessError::io("duplicating the log file handle", e))?;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(LAUNCHER)
            .arg("shardwise-kafka")
            .arg(&java)
            .args(["-Xms128M", "-Xmx512M", log4j.as_str(), "-cp", &classpath, "kafka.Kafka"])
            .arg(&properties)
            .current_dir(&dir)
            .env("SHARDWISE_NODE_DIR", &dir)
            .env("SHARDWISE_RM_DIR", &dir)
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log_err)
            .process_group(0)
            .spawn()
            .map_err(|e| HarnessError::io("starting the Kafka launcher (sh)", e))?;
        let lifeline = child.stdin.take();
        let pgid = child.id();
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        let sasl_addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), sasl);
        let mut kafka = Kafka { dir, addr, sasl_addr, child: Some(child), lifeline, pgid };
        kafka.wait_ready(&log_path)?;
        Ok(kafka)
    }

    fn wait_ready(&mut self, log_path: &Path) -> Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
                return Err(HarnessError::KafkaStartup {
                    addr: self.addr,
                    reason: format!("it exited: {status}"),
                    tail: tail_lines(log_path, 40),
                    log: log_path.to_path_buf(),
                });
            }
            if api_versions(self.addr, Duration::from_secs(2)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::KafkaStartup {
                    addr: self.addr,
                    reason: format!("no ApiVersions answer on its port after {STARTUP_TIMEOUT:?}"),
                    tail: tail_lines(log_path, 40),
                    log: log_path.to_path_buf(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The broker's client address (`bootstrap.servers`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The broker's SASL listener: SASL PLAIN over plain TCP, for the user
    /// and password of [`SASL_USER`] (`security.protocol=SASL_PLAINTEXT`,
    /// `sasl.mechanism=PLAIN`).
    pub fn sasl_addr(&self) -> SocketAddr {
        self.sasl_addr
    }

    /// The broker's directory (configuration, data, `kafka.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Pauses the broker (SIGSTOP to its process group): its connections
    /// stay open and nothing answers, as in a long garbage collection.
    pub fn pause(&self) {
        signal_group(self.pgid, "STOP");
    }

    /// Resumes a paused broker (SIGCONT).
    pub fn resume(&self) {
        signal_group(self.pgid, "CONT");
    }

    /// Stops the broker (SIGTERM, then SIGKILL to its process group after
    /// 20 s) and removes its directory. Idempotent.
    pub fn stop(&mut self) {
        self.lifeline = None;
        if let Some(mut child) = self.child.take() {
            let _ = wait_or_kill(&mut child, self.pgid, Duration::from_secs(20));
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Kafka {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One `ApiVersions` (v0) round trip: the broker's answer has this
/// request's correlation id and no error. Returns how many APIs it lists.
pub fn api_versions(addr: SocketAddr, timeout: Duration) -> std::io::Result<usize> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let client = b"shardwise-testkit";
    let correlation: i32 = 0x5357;
    let mut request = Vec::new();
    request.extend_from_slice(&18i16.to_be_bytes()); // ApiVersions
    request.extend_from_slice(&0i16.to_be_bytes()); // version 0
    request.extend_from_slice(&correlation.to_be_bytes());
    request.extend_from_slice(&(client.len() as i16).to_be_bytes());
    request.extend_from_slice(client);
    let mut frame = (request.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&request);
    stream.write_all(&frame)?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let size = usize::try_from(i32::from_be_bytes(size)).map_err(|_| invalid("negative size"))?;
    if !(10..=1 << 20).contains(&size) {
        return Err(invalid("implausible ApiVersions answer size"));
    }
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body)?;
    let field = |at: usize, n: usize| body.get(at..at + n).ok_or_else(|| invalid("short ApiVersions answer"));
    let id = i32::from_be_bytes(field(0, 4)?.try_into().map_err(|_| invalid("correlation id"))?);
    let error = i16::from_be_bytes(field(4, 2)?.try_into().map_err(|_| invalid("error code"))?);
    let count = i32::from_be_bytes(field(6, 4)?.try_into().map_err(|_| invalid("count"))?);
    if id != correlation {
        return Err(invalid("ApiVersions answer to another request"));
    }
    if error != 0 {
        return Err(invalid(&format!("ApiVersions error code {error}")));
    }
    usize::try_from(count).map_err(|_| invalid("negative API count"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_22_url_safe_characters() {
        assert_eq!(cluster_id(0), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(cluster_id(u128::MAX), "_____________________w");
        let id = cluster_id(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        assert_eq!(id.len(), 22);
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{id}");
    }

    #[test]
    fn properties_make_one_combined_node_with_transactions() {
        let p = server_properties(Path::new("/d"), 9092, 9093, 9094);
        assert!(p.contains("process.roles=broker,controller\n"));
        assert!(p.contains("controller.quorum.voters=1@127.0.0.1:9093\n"));
        assert!(p.contains(
            "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094\n"
        ));
        assert!(p.contains("user_sink=\"sink-secret\";\n"));
        assert!(p.contains("transaction.state.log.replication.factor=1\n"));
        assert!(p.contains("log.dirs=/d\n"));
    }
}
