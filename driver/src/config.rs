//! Connection settings shared by every connection of a session.

use std::sync::Arc;
use std::time::Duration;

use shardwise_protocol::frame::ProtocolVersion;

use tokio_rustls::rustls;

use crate::auth::AuthenticatorProvider;

/// TLS settings: a rustls client configuration (certificate verification is
/// rustls', on by default) and the name to verify the server against.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// The rustls configuration.
    pub client: Arc<rustls::ClientConfig>,
    /// Server name to verify; `None` verifies the node's IP address.
    pub server_name: Option<String>,
}

impl TlsConfig {
    /// Trusts the CA certificates of a PEM file (and nothing else).
    pub fn with_ca_pem(pem: &[u8]) -> Result<TlsConfig, TlsSetupError> {
        Self::with_roots(roots_of(pem)?)
    }

    /// Trusts the given roots.
    pub fn with_roots(roots: rustls::RootCertStore) -> Result<TlsConfig, TlsSetupError> {
        let client = client_builder(roots)?.with_no_client_auth();
        Ok(TlsConfig { client: Arc::new(client), server_name: None })
    }

    /// Trusts the CA certificates of `ca_pem`, and presents the certificate
    /// chain of `cert_pem` with the private key of `key_pem` (PKCS #8,
    /// PKCS #1 or SEC1) to nodes that ask for one: mutual TLS, as Cassandra
    /// and ScyllaDB do with `require_client_auth`.
    pub fn with_client_cert(ca_pem: &[u8], cert_pem: &[u8], key_pem: &[u8]) -> Result<TlsConfig, TlsSetupError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsSetupError(format!("bad client certificate PEM: {e}")))?;
        if chain.is_empty() {
            return Err(TlsSetupError("no certificate in the client certificate PEM".into()));
        }
        let key =
            PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsSetupError(format!("bad private key PEM: {e}")))?;
        let client = client_builder(roots_of(ca_pem)?)?
            .with_client_auth_cert(chain, key)
            .map_err(|e| TlsSetupError(format!("client certificate and key: {e}")))?;
        Ok(TlsConfig { client: Arc::new(client), server_name: None })
    }
}

/// The CA certificates of a PEM file.
fn roots_of(pem: &[u8]) -> Result<rustls::RootCertStore, TlsSetupError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| TlsSetupError(format!("bad PEM: {e}")))?;
        roots.add(cert).map_err(|e| TlsSetupError(format!("bad CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(TlsSetupError("no certificate in the PEM data".into()));
    }
    Ok(roots)
}

/// A rustls client configuration trusting `roots`, before its client authentication is chosen.
fn client_builder(
    roots: rustls::RootCertStore,
) -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>, TlsSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsSetupError(e.to_string()))?
        .with_root_certificates(roots))
}

/// A TLS configuration could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TLS setup: {0}")]
pub struct TlsSetupError(pub String);

/// Compression negotiated in STARTUP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// LZ4: v4 compresses each body, v5 each segment.
    Lz4,
}

/// How connections are opened and run.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// Highest protocol version to try first.
    pub max_version: ProtocolVersion,
    /// Lowest acceptable version when the server refuses the higher one.
    pub min_version: ProtocolVersion,
    /// Compression to request (used only if the server supports it).
    pub compression: Compression,
    /// Authentication, for servers that require it.
    pub authenticator: Option<Arc<dyn AuthenticatorProvider>>,
    /// Timeout of TCP connect plus handshake.
    pub connect_timeout: Duration,
    /// Size of each of the two swap write buffers; requests that do not fit
    /// take a separate (allocating) path.
    pub write_buffer_size: usize,
    /// Maximum concurrent requests per connection (≤ 32768).
    pub max_streams: usize,
    /// Close the connection when more requests than this were abandoned
    /// (e.g. timed out) and are still unanswered.
    pub max_orphans: Option<usize>,
    /// Send OPTIONS at this interval, also while requests are in flight: a
    /// connection that stops answering is closed within the interval plus
    /// [`heartbeat_timeout`](Self::heartbeat_timeout).
    pub heartbeat_interval: Option<Duration>,
    /// A heartbeat unanswered for this long closes the connection.
    pub heartbeat_timeout: Duration,
    /// Largest accepted response body.
    pub max_response_body: usize,
    /// Disable Nagle's algorithm.
    pub tcp_nodelay: bool,
    /// TLS, when the server requires it.
    pub tls: Option<TlsConfig>,
    /// Open per-shard connections through the node's shard-aware port when
    /// it advertises one (the default). Off, every connection goes to the
    /// regular port and the node picks its shard: for clients whose source
    /// ports are rewritten on the way (NAT) or that must pass a proxy in
    /// front of the regular port. The official driver's
    /// `disallow_shard_aware_port(true)` is this set to `false`.
    pub shard_aware_port: bool,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            max_version: ProtocolVersion::V5,
            min_version: ProtocolVersion::V4,
            compression: Compression::None,
            authenticator: None,
            connect_timeout: Duration::from_secs(5),
            write_buffer_size: 64 * 1024,
            max_streams: 32768,
            max_orphans: Some(1024),
            heartbeat_interval: Some(Duration::from_secs(30)),
            heartbeat_timeout: Duration::from_secs(30),
            max_response_body: 256 * 1024 * 1024,
            tcp_nodelay: true,
            tls: None,
            shard_aware_port: true,
        }
    }
}
