//! SASL-style authentication: the server names its authenticator in
//! AUTHENTICATE, the client answers with tokens until AUTH_SUCCESS.

/// An authentication failure reported by an authenticator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthError(pub String);

/// Creates one [`AuthenticatorSession`] per connection.
pub trait AuthenticatorProvider: Send + Sync + std::fmt::Debug {
    /// Starts authenticating against `authenticator_class` (the server's
    /// class name) and returns the initial token.
    fn start(&self, authenticator_class: &str) -> Result<(Vec<u8>, Box<dyn AuthenticatorSession>), AuthError>;
}

/// One connection's authentication exchange.
pub trait AuthenticatorSession: Send {
    /// Answers a server challenge.
    fn evaluate_challenge(&mut self, token: Option<&[u8]>) -> Result<Vec<u8>, AuthError>;
    /// The server accepted; `token` is its final token.
    fn success(&mut self, token: Option<&[u8]>) -> Result<(), AuthError>;
}

/// Username/password authentication (`PasswordAuthenticator`): the token is
/// `\0username\0password`.
///
/// ```
/// # use shardwise::auth::{AuthenticatorProvider, PlainTextAuthenticator};
/// let auth = PlainTextAuthenticator::new("cassandra", "cassandra");
/// let (token, _) = auth.start("org.apache.cassandra.auth.PasswordAuthenticator").unwrap();
/// assert_eq!(token, b"\0cassandra\0cassandra");
/// ```
#[derive(Clone)]
pub struct PlainTextAuthenticator {
    username: String,
    password: String,
}

impl std::fmt::Debug for PlainTextAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainTextAuthenticator").field("username", &self.username).finish_non_exhaustive()
    }
}

impl PlainTextAuthenticator {
    /// An authenticator for `username` and `password`.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        PlainTextAuthenticator { username: username.into(), password: password.into() }
    }
}

struct Done;

impl AuthenticatorSession for Done {
    fn evaluate_challenge(&mut self, _: Option<&[u8]>) -> Result<Vec<u8>, AuthError> {
        Err(AuthError("unexpected challenge for username/password authentication".into()))
    }
    fn success(&mut self, _: Option<&[u8]>) -> Result<(), AuthError> {
        Ok(())
    }
}

impl AuthenticatorProvider for PlainTextAuthenticator {
    fn start(&self, _class: &str) -> Result<(Vec<u8>, Box<dyn AuthenticatorSession>), AuthError> {
        let mut token = Vec::with_capacity(2 + self.username.len() + self.password.len());
        token.push(0);
        token.extend_from_slice(self.username.as_bytes());
        token.push(0);
        token.extend_from_slice(self.password.as_bytes());
        Ok((token, Box::new(Done)))
    }
}
