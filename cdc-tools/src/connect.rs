//! The connection flags of `printer` and `replicator`, as the driver's
//! builder takes them: username and password, TLS verified against a CA
//! certificate file, the shard-aware port, the connection heartbeat, and
//! the translation of the nodes' addresses.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use shardwise::{ConnectionConfig, SessionBuilder, TlsConfig};

/// Credentials and TLS for the tools' sessions.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnectArgs {
    /// Username, for a cluster that requires authentication (with --password).
    #[arg(long, requires = "password")]
    pub username: Option<String>,
    /// Password of --username.
    #[arg(long, requires = "username")]
    pub password: Option<String>,
    /// Connect with TLS, verifying the nodes against the CA certificates of
    /// this PEM file.
    #[arg(long, value_name = "PEM_FILE")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// Connect to the nodes' regular port only, never to their shard-aware
    /// port: for clients behind NAT or a proxy.
    #[arg(long)]
    pub disallow_shard_aware_port: bool,
    /// Seconds between the heartbeats of each connection, and how long one
    /// may go unanswered: a connection the network silenced is replaced
    /// within about twice this [default: 5].
    #[arg(long, value_name = "SECONDS")]
    pub connection_heartbeat: Option<f64>,
    /// Reach the node the cluster lists at IP (its `system.peers` address)
    /// at ADDR (`ip:port`) instead: NAT, a proxy per node; repeat for each
    /// node. Peers with no translation are left out; the contact point is
    /// used as given.
    #[arg(long, value_name = "IP=ADDR", value_parser = translation)]
    pub translate_address: Vec<(IpAddr, SocketAddr)>,
}

/// One `--translate-address` value: `IP=ip:port`.
fn translation(value: &str) -> Result<(IpAddr, SocketAddr), String> {
    let (from, to) = value.split_once('=').ok_or("expected IP=ADDR, e.g. 10.0.0.2=127.0.0.1:19042")?;
    let ip = from.trim().parse::<IpAddr>().map_err(|e| format!("{from}: {e} (expected an IP)"))?;
    let addr = to.trim().parse::<SocketAddr>().map_err(|e| format!("{to}: {e} (expected ip:port)"))?;
    Ok((ip, addr))
}

/// The connection heartbeat of the tools when `--connection-heartbeat` is
/// not given: well under a lease's TTL, so that a reader whose connections
/// were silenced gets new ones before its leases are taken over.
pub const CONNECTION_HEARTBEAT: Duration = Duration::from_secs(5);

/// The flags could not be turned into a session builder.
#[derive(Debug, thiserror::Error)]
pub enum ConnectArgsError {
    /// The CA file could not be read.
    #[error("cannot read the TLS CA file {path}: {source}")]
    ReadCa {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `--connection-heartbeat` is not a positive number of seconds.
    #[error("--connection-heartbeat {0}: not a positive number of seconds")]
    Heartbeat(f64),
    /// The CA file holds no usable certificate.
    #[error("the TLS CA file {path}: {source}")]
    BadCa {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: shardwise::config::TlsSetupError,
    },
}

impl ConnectArgs {
    /// A session builder for `node` with these credentials and TLS.
    pub fn builder(&self, node: &str) -> Result<SessionBuilder, ConnectArgsError> {
        let heartbeat = match self.connection_heartbeat {
            None => CONNECTION_HEARTBEAT,
            Some(s) => {
                Duration::try_from_secs_f64(s).ok().filter(|d| !d.is_zero()).ok_or(ConnectArgsError::Heartbeat(s))?
            }
        };
        let connection = ConnectionConfig {
            heartbeat_interval: Some(heartbeat),
            heartbeat_timeout: heartbeat,
            ..Default::default()
        };
        let mut builder = SessionBuilder::new()
            .known_node(node)
            .connection_config(connection)
            .disallow_shard_aware_port(self.disallow_shard_aware_port);
        if !self.translate_address.is_empty() {
            let map: HashMap<IpAddr, SocketAddr> = self.translate_address.iter().copied().collect();
            builder = builder.address_translator(Arc::new(map));
        }
        if let (Some(user), Some(password)) = (&self.username, &self.password) {
            builder = builder.user(user.clone(), password.clone());
        }
        if let Some(path) = &self.tls_ca {
            let pem = std::fs::read(path).map_err(|source| ConnectArgsError::ReadCa { path: path.clone(), source })?;
            let tls = TlsConfig::with_ca_pem(&pem)
                .map_err(|source| ConnectArgsError::BadCa { path: path.clone(), source })?;
            builder = builder.tls(tls);
        }
        Ok(builder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_make_the_builder() {
        let none = ConnectArgs::default().builder("127.0.0.1:9042").expect("builder");
        assert!(none.config().connection.authenticator.is_none() && none.config().connection.tls.is_none());
        assert!(none.config().connection.shard_aware_port, "the shard-aware port by default");
        // Claim `tools-heartbeat`: 5 s when the flag is not given.
        assert_eq!(none.config().connection.heartbeat_interval, Some(Duration::from_secs(5)));
        assert_eq!(none.config().connection.heartbeat_timeout, Duration::from_secs(5));
        let beat = ConnectArgs { connection_heartbeat: Some(0.5), ..ConnectArgs::default() };
        let beat = beat.builder("n").expect("builder").config().connection.clone();
        assert_eq!(
            (beat.heartbeat_interval, beat.heartbeat_timeout),
            (Some(Duration::from_millis(500)), Duration::from_millis(500))
        );
        for bad in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            let e = ConnectArgs { connection_heartbeat: Some(bad), ..ConnectArgs::default() }
                .builder("n")
                .expect_err("refused");
            assert!(e.to_string().starts_with("--connection-heartbeat"), "{e}");
        }
        assert!(none.config().address_translator.is_none());
        let (from, to): (IpAddr, SocketAddr) =
            ("10.0.0.2".parse().expect("ip"), "127.0.0.1:19042".parse().expect("addr"));
        assert_eq!(translation("10.0.0.2=127.0.0.1:19042"), Ok((from, to)));
        for bad in ["10.0.0.2", "10.0.0.2:9042=127.0.0.1:1", "10.0.0.2=127.0.0.1", "x=127.0.0.1:1"] {
            assert!(translation(bad).is_err(), "{bad}");
        }
        let nat = ConnectArgs { translate_address: vec![(from, to)], ..ConnectArgs::default() };
        assert!(nat.builder("n").expect("builder").config().address_translator.is_some());
        let direct = ConnectArgs { disallow_shard_aware_port: true, ..ConnectArgs::default() };
        assert!(!direct.builder("n").expect("builder").config().connection.shard_aware_port);
        let user = ConnectArgs { username: Some("u".into()), password: Some("p".into()), ..ConnectArgs::default() };
        assert!(user.builder("n").expect("builder").config().connection.authenticator.is_some());
        let missing = ConnectArgs { tls_ca: Some("/nonexistent/ca.pem".into()), ..ConnectArgs::default() };
        let e = missing.builder("n").expect_err("no file");
        assert!(e.to_string().starts_with("cannot read the TLS CA file /nonexistent/ca.pem"), "{e}");
        let dir = std::env::temp_dir().join(format!("shardwise-tools-ca-{}", std::process::id()));
        std::fs::write(&dir, b"not a certificate").expect("write");
        let bad = ConnectArgs { tls_ca: Some(dir.clone()), ..ConnectArgs::default() };
        assert!(bad.builder("n").is_err(), "no certificate in the file");
        let _ = std::fs::remove_file(dir);
    }
}
