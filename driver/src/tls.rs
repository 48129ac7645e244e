//! TLS: the settings (a rustls client configuration and the name to
//! verify), built from PEM files, and the handshake on a new connection.
//!
//! Behind the `tls` feature (on by default). Without it the driver carries
//! no rustls and no ring: [`TlsConfig`] still exists, so that settings and
//! builders keep one shape, but no value of it can be made.

#[cfg(feature = "tls")]
pub use enabled::*;

#[cfg(feature = "tls")]
mod enabled {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use tokio::net::TcpStream;
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::ServerName;
    use tokio_rustls::TlsConnector;

    use super::TlsSetupError;
    use crate::error::ConnectionError;

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
            let key = PrivateKeyDer::from_pem_slice(key_pem)
                .map_err(|e| TlsSetupError(format!("bad private key PEM: {e}")))?;
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

    impl TlsConfig {
        /// The TLS handshake on a new connection to `addr`.
        pub(crate) async fn connect(
            &self,
            addr: SocketAddr,
            socket: TcpStream,
        ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, ConnectionError> {
            let name = match &self.server_name {
                Some(n) => ServerName::try_from(n.clone())
                    .map_err(|_| ConnectionError::Tls(format!("invalid server name {n}").into()))?,
                None => ServerName::IpAddress(addr.ip().into()),
            };
            TlsConnector::from(self.client.clone())
                .connect(name, socket)
                .await
                .map_err(|e| ConnectionError::Tls(e.to_string().into()))
        }
    }
}

/// A TLS configuration could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TLS setup: {0}")]
pub struct TlsSetupError(pub String);

/// TLS settings. The `tls` feature is off: no value of this type can be
/// made, and connections are plain TCP.
#[cfg(not(feature = "tls"))]
#[derive(Debug, Clone)]
pub struct TlsConfig {
    never: std::convert::Infallible,
}

#[cfg(not(feature = "tls"))]
impl TlsConfig {
    /// What cannot be: a value of this type.
    pub(crate) fn unreachable(&self) -> ! {
        match self.never {}
    }
}
