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
//!
//! Besides plain TCP ([`Kafka::addr`]), the broker serves secured clients:
//! SASL over plain TCP ([`Kafka::sasl_addr`]), TLS ([`Kafka::tls_addr`]) and
//! SASL over TLS ([`Kafka::sasl_tls_addr`]). Its SASL listeners take PLAIN
//! (as [`SASL_USER`]) and SCRAM-SHA-256 and SCRAM-SHA-512 (as
//! [`SCRAM_USER`], whose credentials the format writes into the metadata
//! log). Its TLS certificate is made at each start by the JDK's `keytool`
//! (run while the log directory is formatted): self-signed, for
//! `IP:127.0.0.1`, and exported as PEM ([`Kafka::ca_pem_path`]) for clients
//! to verify the broker with.

use std::fs;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::class_archive::{self, Archive};
use crate::dist::{cache_root, ensure_jars, find_java, Artifact};
use crate::error::{HarnessError, Result};
use crate::node::LAUNCHER;
use crate::ports::free_ports;
use crate::process::{signal_group, tail_lines, wait_or_kill};

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
    tls_addr: SocketAddr,
    sasl_tls_addr: SocketAddr,
    ca_pem: PathBuf,
    child: Option<Child>,
    lifeline: Option<ChildStdin>,
    pgid: u32,
}

/// The user and password of SASL PLAIN on the broker's SASL listeners
/// ([`Kafka::sasl_addr`], [`Kafka::sasl_tls_addr`]).
pub const SASL_USER: (&str, &str) = ("sink", "sink-secret");

/// The user and password of SASL/SCRAM (SCRAM-SHA-256 and SCRAM-SHA-512) on
/// the broker's SASL listeners: credentials in the cluster's metadata,
/// written when the log directory is formatted.
pub const SCRAM_USER: (&str, &str) = ("scram-sink", "scram-secret");

/// The password of the broker's PKCS12 keystore (and of its key).
const KEYSTORE_PASSWORD: &str = "changeit";

/// The ports of a broker's listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// Plain TCP (`PLAINTEXT`), also between the broker and itself.
    pub plain: u16,
    /// The KRaft controller's.
    pub controller: u16,
    /// SASL over plain TCP (`SASL_PLAINTEXT`).
    pub sasl: u16,
    /// TLS (`SSL`).
    pub tls: u16,
    /// SASL over TLS (`SASL_SSL`).
    pub sasl_tls: u16,
}

/// The `server.properties` of a combined broker and controller with node id
/// 1, serving clients on the ports of `ports` (SASL PLAIN as [`SASL_USER`],
/// SCRAM as [`SCRAM_USER`]; TLS with the PKCS12 `keystore`).
pub fn server_properties(data: &Path, ports: Ports, keystore: &Path) -> String {
    let Ports { plain, controller, sasl, tls, sasl_tls } = ports;
    let (user, password) = SASL_USER;
    let plain_login =
        format!("org.apache.kafka.common.security.plain.PlainLoginModule required user_{user}=\"{password}\";");
    let scram_login = "org.apache.kafka.common.security.scram.ScramLoginModule required;";
    let mut logins = String::new();
    for listener in ["sasl_plaintext", "sasl_ssl"] {
        logins.push_str(&format!("listener.name.{listener}.plain.sasl.jaas.config={plain_login}\n"));
        for mechanism in ["scram-sha-256", "scram-sha-512"] {
            logins.push_str(&format!("listener.name.{listener}.{mechanism}.sasl.jaas.config={scram_login}\n"));
        }
    }
    format!(
        "process.roles=broker,controller\n\
         node.id=1\n\
         controller.quorum.voters=1@127.0.0.1:{controller}\n\
         listeners=PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller},\
         SASL_PLAINTEXT://127.0.0.1:{sasl},SSL://127.0.0.1:{tls},SASL_SSL://127.0.0.1:{sasl_tls}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},\
         SSL://127.0.0.1:{tls},SASL_SSL://127.0.0.1:{sasl_tls}\n\
         controller.listener.names=CONTROLLER\n\
         inter.broker.listener.name=PLAINTEXT\n\
         listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,\
         SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL\n\
         sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n\
         {logins}\
         ssl.keystore.type=PKCS12\n\
         ssl.keystore.location={}\n\
         ssl.keystore.password={KEYSTORE_PASSWORD}\n\
         ssl.key.password={KEYSTORE_PASSWORD}\n\
         ssl.client.auth=none\n\
         log.dirs={}\n\
         num.partitions=1\n\
         offsets.topic.replication.factor=1\n\
         offsets.topic.num.partitions=1\n\
         transaction.state.log.replication.factor=1\n\
         transaction.state.log.min.isr=1\n\
         transaction.state.log.num.partitions=1\n\
         group.initial.rebalance.delay.ms=0\n\
         auto.create.topics.enable=true\n",
        keystore.display(),
        data.display()
    )
}

/// The `StorageTool format` arguments that write [`SCRAM_USER`]'s
/// SCRAM-SHA-256 and SCRAM-SHA-512 credentials into the metadata log.
pub fn scram_format_args() -> Vec<String> {
    let (user, password) = SCRAM_USER;
    ["SCRAM-SHA-256", "SCRAM-SHA-512"]
        .into_iter()
        .flat_map(|mechanism| ["--add-scram".to_owned(), format!("{mechanism}=[name={user},password={password}]")])
        .collect()
}

/// `keytool` beside `java` (the JDK's), else `keytool` on the `PATH`.
fn find_keytool(java: &Path) -> PathBuf {
    match java.parent() {
        Some(bin) if !bin.as_os_str().is_empty() && bin.join("keytool").is_file() => bin.join("keytool"),
        _ => PathBuf::from("keytool"),
    }
}

/// Makes the broker's TLS identity in `dir` with `keytool`: an EC key and
/// its self-signed certificate for `IP:127.0.0.1` (valid 2 days) in the
/// PKCS12 keystore `broker.p12`, and that certificate as PEM in
/// `ca.pem` (the one certificate a client has to trust). Their paths.
pub fn make_keystore(keytool: &Path, dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let (keystore, pem) = (dir.join("broker.p12"), dir.join("ca.pem"));
    let run = |args: &[&str]| {
        let out = match Command::new(keytool).args(args).stdin(Stdio::null()).output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(HarnessError::MissingTool {
                    tool: "keytool",
                    looked_for: format!("{} (beside java, or on PATH)", keytool.display()),
                    package: "openjdk-17-jdk-headless",
                })
            }
            Err(e) => return Err(HarnessError::io(format!("running {}", keytool.display()), e)),
        };
        if out.status.success() {
            Ok(())
        } else {
            Err(HarnessError::Config(format!(
                "keytool {} failed ({}): {}{}",
                args.first().copied().unwrap_or_default(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )))
        }
    };
    let path = |p: &Path| p.display().to_string();
    let ks = path(&keystore);
    let common = ["-alias", "broker", "-keystore", ks.as_str(), "-storepass", KEYSTORE_PASSWORD];
    run(&[
        &[
            "-genkeypair",
            "-keyalg",
            "EC",
            "-groupname",
            "secp256r1",
            "-validity",
            "2",
            "-dname",
            "CN=127.0.0.1",
            "-ext",
            "SAN=ip:127.0.0.1",
            "-storetype",
            "PKCS12",
            "-keypass",
            KEYSTORE_PASSWORD,
        ][..],
        &common[..],
    ]
    .concat())?;
    run(&[&["-exportcert", "-rfc", "-file", path(&pem).as_str()][..], &common[..]].concat())?;
    Ok((keystore, pem))
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

/// Starts of a broker, at most, while its process exits as it starts: the
/// five ports it listens on are found free, then released until the broker
/// binds them, seconds later (after the log directory is formatted), and
/// another test's node, front or proxy can take one meanwhile. (Kafka logs
/// nothing here, without an SLF4J binding, so its reason is not seen.)
const START_ATTEMPTS: usize = 3;

/// Whether a broker whose `attempt`-th start failed with `error` is started
/// again, on other ports and in another directory.
fn start_again(error: &HarnessError, attempt: usize) -> bool {
    matches!(error, HarnessError::KafkaStartup { exited: true, .. }) && attempt < START_ATTEMPTS
}

impl Kafka {
    /// Resolves the jars (once per machine), formats a fresh log directory
    /// and starts the broker; waits until it answers (see the module docs).
    /// A broker that exits as it starts is started again, on other ports
    /// (three starts in all).
    pub fn start() -> Result<Kafka> {
        let mut attempt = 1;
        loop {
            match Kafka::start_once() {
                Err(e) if start_again(&e, attempt) => {
                    eprintln!("testkit: Kafka start {attempt} of {START_ATTEMPTS} failed, trying other ports: {e}");
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    fn start_once() -> Result<Kafka> {
        let (java, java_major) = find_java()?;
        let lib = ensure_jars(&cache_root()?.join(format!("kafka_2.13-{KAFKA_VERSION}")), &KAFKA)?;
        let archive = Archive::of_jars(&java, java_major, &lib);
        let classpath = archive.classpath.clone();
        // A broker lives for one test: C1 only, and the jars' class data
        // archive once there is one (see `class_archive`); the format tool
        // maps it too but never records it.
        let plan = class_archive::plan(&archive);
        let mut jvm = vec!["-XX:TieredStopAtLevel=1".to_string()];
        if let class_archive::Plan::Use(_) = plan {
            jvm.extend(plan.jvm_args());
        }
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        let dir = std::env::temp_dir().join(format!("shardwise-kafka-{}-{nanos}", std::process::id()));
        let data = dir.join("data");
        fs::create_dir_all(&data).map_err(|e| HarnessError::io(format!("creating {}", data.display()), e))?;
        let ports = match free_ports(&[IpAddr::V4(Ipv4Addr::LOCALHOST)], 5)?[..] {
            [plain, controller, sasl, tls, sasl_tls] => Ports { plain, controller, sasl, tls, sasl_tls },
            _ => return Err(HarnessError::Config("fewer free ports than asked for".into())),
        };
        let properties = dir.join("server.properties");
        let write = |path: &Path, text: &str| {
            fs::write(path, text).map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))
        };
        let keystore = dir.join("broker.p12");
        write(&properties, &server_properties(&data, ports, &keystore))?;
        write(&dir.join("log4j.properties"), LOG4J)?;
        let log4j = format!("-Dlog4j.configuration=file:{}", dir.join("log4j.properties").display());
        let log_path = dir.join("kafka.log");

        // The keystore is made while the log directory is formatted: two
        // JVMs at once, not one after the other.
        let keytool = find_keytool(&java);
        let (made, format) = std::thread::scope(|scope| {
            let made = scope.spawn(|| make_keystore(&keytool, &dir));
            let format = Command::new(&java)
                .args(&jvm)
                .args([log4j.as_str(), "-cp", &classpath, "kafka.tools.StorageTool", "format"])
                .args(["-t", &cluster_id(nanos ^ u128::from(std::process::id())), "-c"])
                .arg(&properties)
                .args(scram_format_args())
                .stdin(Stdio::null())
                .output()
                .map_err(|e| HarnessError::io("running kafka.tools.StorageTool format", e));
            let made = made.join().unwrap_or_else(|_| Err(HarnessError::Config("making the keystore panicked".into())));
            (made, format)
        });
        let (_, ca_pem) = made?;
        let format = format?;
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
            .args(["-Xms128M", "-Xmx512M", "-XX:TieredStopAtLevel=1"])
            .args(plan.jvm_args())
            .args([log4j.as_str(), "-cp", &classpath, "kafka.Kafka"])
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
        let at = |port| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        let mut kafka = Kafka {
            dir,
            addr: at(ports.plain),
            sasl_addr: at(ports.sasl),
            tls_addr: at(ports.tls),
            sasl_tls_addr: at(ports.sasl_tls),
            ca_pem,
            child: Some(child),
            lifeline,
            pgid,
        };
        kafka.wait_ready(&log_path)?;
        if let class_archive::Plan::Record(recording) = plan {
            recording.finish();
        }
        Ok(kafka)
    }

    fn wait_ready(&mut self, log_path: &Path) -> Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
                return Err(HarnessError::KafkaStartup {
                    addr: self.addr,
                    exited: true,
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
                    exited: false,
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

    /// The broker's SASL listener over plain TCP
    /// (`security.protocol=SASL_PLAINTEXT`): `sasl.mechanism=PLAIN` for the
    /// user and password of [`SASL_USER`], `SCRAM-SHA-256` or
    /// `SCRAM-SHA-512` for those of [`SCRAM_USER`].
    pub fn sasl_addr(&self) -> SocketAddr {
        self.sasl_addr
    }

    /// The broker's TLS listener (`security.protocol=SSL`), its
    /// certificate verified with [`ca_pem_path`](Self::ca_pem_path); no
    /// client certificate is asked for.
    pub fn tls_addr(&self) -> SocketAddr {
        self.tls_addr
    }

    /// The broker's SASL listener over TLS (`security.protocol=SASL_SSL`):
    /// the mechanisms and users of [`sasl_addr`](Self::sasl_addr), the
    /// certificate of [`tls_addr`](Self::tls_addr).
    pub fn sasl_tls_addr(&self) -> SocketAddr {
        self.sasl_tls_addr
    }

    /// The PEM file of the certificate that verifies the broker's TLS
    /// listeners (`ssl.ca.location`): its own, self-signed, for
    /// `IP:127.0.0.1`, made at this start.
    pub fn ca_pem_path(&self) -> &Path {
        &self.ca_pem
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

    /// Only a broker that exited as it started is started again, and at
    /// most `START_ATTEMPTS` times in all.
    #[test]
    fn a_broker_that_exited_is_started_again_a_bounded_number_of_times() {
        let failed = |exited| HarnessError::KafkaStartup {
            addr: "127.0.0.1:9092".parse().unwrap(),
            exited,
            reason: String::new(),
            log: PathBuf::new(),
            tail: String::new(),
        };
        assert!(start_again(&failed(true), 1) && start_again(&failed(true), START_ATTEMPTS - 1));
        assert!(!start_again(&failed(true), START_ATTEMPTS), "bounded");
        assert!(!start_again(&failed(false), 1), "one that never answered is not started again");
        assert!(!start_again(&HarnessError::Config("x".into()), 1));
    }

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
        let ports = Ports { plain: 9092, controller: 9093, sasl: 9094, tls: 9095, sasl_tls: 9096 };
        let p = server_properties(Path::new("/d"), ports, Path::new("/k.p12"));
        assert!(p.contains("process.roles=broker,controller\n"));
        assert!(p.contains("controller.quorum.voters=1@127.0.0.1:9093\n"));
        assert!(p.contains(
            "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094,\
             SSL://127.0.0.1:9095,SASL_SSL://127.0.0.1:9096\n"
        ));
        assert!(p.contains("user_sink=\"sink-secret\";\n"));
        assert!(p.contains("sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"));
        assert!(p.contains("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="));
        assert!(p.contains("ssl.keystore.location=/k.p12\n"));
        assert!(p.contains("transaction.state.log.replication.factor=1\n"));
        assert!(p.contains("log.dirs=/d\n"));
        assert_eq!(
            scram_format_args(),
            [
                "--add-scram",
                "SCRAM-SHA-256=[name=scram-sink,password=scram-secret]",
                "--add-scram",
                "SCRAM-SHA-512=[name=scram-sink,password=scram-secret]"
            ]
        );
    }
}
