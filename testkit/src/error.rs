//! The one error type of the harness.
//!
//! A harness failure is almost always an environment problem (no Java, no
//! Maven, a port taken, a server that died while starting), so every variant
//! carries what a person needs to fix it: the tool to install, the log file to
//! read and its last lines, the address that was being waited for.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while preparing, starting, probing or stopping
/// a Cassandra server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// A program the harness needs is not installed.
    #[error("`{tool}` was not found (looked for {looked_for}); install it, e.g. `apt-get install {package}` (the harness needs Java 17 and Maven: `apt-get install openjdk-17-jre-headless maven`)")]
    MissingTool {
        /// The program, e.g. `java`.
        tool: &'static str,
        /// Where it was looked for.
        looked_for: String,
        /// The Debian package that provides it.
        package: &'static str,
    },

    /// `java` exists but is too old (or its version could not be read).
    #[error("Cassandra 5.0 needs Java 11 or 17, but `{java}` reports {version:?}; install Java 17: `apt-get install openjdk-17-jre-headless`")]
    UnsupportedJava {
        /// The java binary that was asked.
        java: PathBuf,
        /// What it reported.
        version: String,
    },

    /// Maven could not resolve the jars of a server (Cassandra or Kafka).
    #[error("resolving {artifact} with Maven in {dir} failed ({status}); last lines of {log}:\n{tail}")]
    Maven {
        /// The artifact being resolved (`group:artifact:version`).
        artifact: String,
        /// The cache directory holding the POM.
        dir: PathBuf,
        /// How `mvn` ended.
        status: String,
        /// The Maven log.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },

    /// Another process holds the cache lock for too long.
    #[error("timed out after {waited:?} waiting for the cache lock {lock} (another process is resolving Cassandra; delete the directory if it is stale)")]
    CacheLocked {
        /// The lock directory.
        lock: PathBuf,
        /// How long we waited.
        waited: Duration,
    },

    /// A filesystem or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The configuration cannot describe a valid server.
    #[error("invalid node configuration: {0}")]
    Config(String),

    /// The server process ended before it was ready.
    #[error("Cassandra for {addr} exited during startup ({status}); last lines of {log}:\n{tail}")]
    ExitedDuringStartup {
        /// The native-protocol address it was to serve.
        addr: SocketAddr,
        /// How the process ended.
        status: String,
        /// Its log file (kept for inspection).
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },

    /// The server did not become ready in time.
    #[error("Cassandra for {addr} was not ready after {timeout:?} ({waiting_for}); last lines of {log}:\n{tail}")]
    StartupTimeout {
        /// The native-protocol address it was to serve.
        addr: SocketAddr,
        /// The timeout that elapsed.
        timeout: Duration,
        /// What had not happened yet.
        waiting_for: &'static str,
        /// Its log file (kept for inspection).
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },

    /// The Kafka broker did not start.
    #[error("Kafka for {addr} did not start ({reason}); last lines of {log}:\n{tail}")]
    KafkaStartup {
        /// The client address it was to serve.
        addr: SocketAddr,
        /// Whether its process ended while starting (rather than never
        /// answering in time).
        exited: bool,
        /// Why: how the process ended, or what it did not do in time.
        reason: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },

    /// No free port could be found on the requested addresses.
    #[error("no port is free on all of {addrs:?}")]
    NoFreePort {
        /// The addresses that were tried.
        addrs: Vec<std::net::IpAddr>,
    },

    /// `SHARDWISE_CASSANDRA` does not hold a usable address.
    #[error("SHARDWISE_CASSANDRA={value:?} is not a usable address (expected e.g. 127.0.0.1:9042): {reason}")]
    BadAddressEnv {
        /// The variable's value.
        value: String,
        /// Why it was rejected.
        reason: String,
    },

    /// Starting the shared server failed earlier in this process.
    #[error("the shared Cassandra server of this test process could not be started: {0}")]
    SharedNodeFailed(String),

    /// The peer sent something the probe could not understand.
    #[error("CQL exchange with {addr} failed: {message}")]
    Protocol {
        /// The server.
        addr: SocketAddr,
        /// What went wrong.
        message: String,
    },

    /// The server answered a probe request with an ERROR frame.
    #[error("server {addr} returned error {code:#06x}: {message}")]
    Server {
        /// The server.
        addr: SocketAddr,
        /// The error code of the ERROR frame.
        code: i32,
        /// Its message.
        message: String,
    },
}

impl HarnessError {
    /// Wraps an [`std::io::Error`] with a description of what was being done.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        HarnessError::Io { context: context.into(), source }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = HarnessError> = std::result::Result<T, E>;
