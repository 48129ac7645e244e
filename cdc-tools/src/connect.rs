//! The connection flags of `printer` and `replicator`, as the driver's
//! builder takes them: username and password, and TLS verified against a
//! CA certificate file.

use shardwise::{SessionBuilder, TlsConfig};

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
}

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
        let mut builder = SessionBuilder::new().known_node(node);
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
        let user = ConnectArgs { username: Some("u".into()), password: Some("p".into()), tls_ca: None };
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
