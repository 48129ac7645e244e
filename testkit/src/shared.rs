//! One server for a whole test process, and unique keyspace names.
//!
//! Starting Cassandra takes seconds, so tests share one: [`shared_node`]
//! returns the address in `SHARDWISE_CASSANDRA` when it is set (that is how
//! `cargo xtask test` hands its server to every test binary), and otherwise
//! starts a node on 127.0.0.1 with free ports the first time it is called and
//! keeps it for the rest of the process. Rust never drops statics, so that
//! node is stopped by the wrapper's lifeline (see [`crate::node`]): when the
//! test process exits, its end of the pipe closes and the JVM gets SIGTERM,
//! and its directory is removed once the JVM has exited.
//!
//! Tests that share a server must not share names: [`fresh_keyspace`] gives
//! each one a keyspace name no other test, process or earlier run uses, and
//! [`create_keyspace`] is the one statement that creates such a keyspace.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::NodeConfig;
use crate::error::{HarnessError, Result};
use crate::node::Node;

/// The environment variable naming an already running server.
pub const SHARDWISE_CASSANDRA: &str = "SHARDWISE_CASSANDRA";

#[derive(Debug)]
struct Shared {
    addr: SocketAddr,
    /// Kept alive for the rest of the process (never dropped).
    _node: Option<Node>,
}

static SHARED: OnceLock<std::result::Result<Shared, String>> = OnceLock::new();

/// Parses a `SHARDWISE_CASSANDRA` value: `host:port`, or a bare host meaning
/// port 9042.
pub fn parse_server_addr(value: &str) -> Result<SocketAddr> {
    let value = value.trim();
    let bad = |reason: String| HarnessError::BadAddressEnv { value: value.to_string(), reason };
    if value.is_empty() {
        return Err(bad("empty".into()));
    }
    if let Ok(addr) = value.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Ok(ip) = value.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, 9042));
    }
    let with_port = if value.contains(':') { value.to_string() } else { format!("{value}:9042") };
    with_port
        .to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("resolves to no address".into()))
}

/// The address of a running Cassandra for tests; see the module docs.
pub fn shared_node() -> Result<SocketAddr> {
    let shared = SHARED.get_or_init(|| {
        if let Ok(value) = std::env::var(SHARDWISE_CASSANDRA) {
            if !value.trim().is_empty() {
                return parse_server_addr(&value).map(|addr| Shared { addr, _node: None }).map_err(|e| e.to_string());
            }
        }
        let start = || -> Result<Shared> {
            let mut cfg = NodeConfig::default().with_free_ports()?;
            cfg.cluster_name = "shardwise-shared".into();
            let node = Node::start(cfg)?;
            Ok(Shared { addr: node.addr(), _node: Some(node) })
        };
        start().map_err(|e| e.to_string())
    });
    match shared {
        Ok(s) => Ok(s.addr),
        Err(msg) => Err(HarnessError::SharedNodeFailed(msg.clone())),
    }
}

/// A keyspace name that is unique across tests, processes and runs:
/// `<prefix>_<pid>_<counter>_<time>`, lowercase, at most 48 characters (the
/// CQL limit), only `[a-z0-9_]`, starting with a letter.
pub fn fresh_keyspace(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() % 1_000_000_000).unwrap_or(0);
    let suffix = format!("_{}_{n}_{t}", std::process::id());
    let mut clean: String = prefix
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !clean.starts_with(|c: char| c.is_ascii_lowercase()) {
        clean.insert_str(0, "ks");
    }
    let max_prefix = 48usize.saturating_sub(suffix.len());
    clean.truncate(max_prefix);
    clean + &suffix
}

/// The statement creating keyspace `ks` with `SimpleStrategy` and
/// `replication_factor` replicas: the set-up of most tests, written once.
pub fn create_keyspace(ks: &str, replication_factor: u32) -> String {
    format!("CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_names_are_valid_and_unique() {
        let a = fresh_keyspace("Driver-Tests");
        let b = fresh_keyspace("Driver-Tests");
        assert_ne!(a, b);
        for k in [&a, &b, &fresh_keyspace(""), &fresh_keyspace("9lives"), &fresh_keyspace(&"x".repeat(100))] {
            assert!(k.len() <= 48, "{k}");
            assert!(k.starts_with(|c: char| c.is_ascii_lowercase()), "{k}");
            assert!(k.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'), "{k}");
        }
        assert!(a.starts_with("driver_tests_"));
        assert!(fresh_keyspace("9lives").starts_with("ks9lives_"));
    }

    #[test]
    fn keyspace_statement() {
        assert_eq!(
            create_keyspace("ks_1", 3),
            "CREATE KEYSPACE ks_1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"
        );
    }

    #[test]
    fn server_addresses() {
        assert_eq!(parse_server_addr("127.0.0.1:9043").unwrap(), "127.0.0.1:9043".parse().unwrap());
        assert_eq!(parse_server_addr(" 127.0.0.2 ").unwrap(), "127.0.0.2:9042".parse().unwrap());
        assert_eq!(parse_server_addr("localhost:19042").unwrap().port(), 19042);
        assert!(parse_server_addr("").is_err());
        assert!(parse_server_addr("127.0.0.1:notaport").is_err());
    }
}
