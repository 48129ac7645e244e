//! SASL-style authentication: the server names its authenticator in
//! AUTHENTICATE, the client answers with tokens until AUTH_SUCCESS.
//!
//! The authenticator's steps are asynchronous, so that one can fetch its
//! credentials with I/O as each connection opens (a signature for Amazon
//! Keyspaces, a secret from Vault, a short-lived token). Each step returns
//! an [`AuthFuture`] (a boxed future: the traits stay object safe, behind
//! the `Arc<dyn AuthenticatorProvider>` a session holds); an authenticator
//! with nothing to await returns `Box::pin(std::future::ready(..))`. The
//! whole exchange is bounded by the connection's connect timeout.

use std::future::Future;
use std::pin::Pin;

/// An authentication failure reported by an authenticator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthError(pub String);

/// What each step of an authenticator returns: a future of its answer.
pub type AuthFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, AuthError>> + Send + 'a>>;

/// Creates one [`AuthenticatorSession`] per connection.
///
/// ```
/// use shardwise::auth::{AuthError, AuthFuture, AuthenticatorProvider, AuthenticatorSession, PlainTextAuthenticator};
///
/// /// Fetches a fresh password for each connection (from a secret store, say).
/// #[derive(Debug)]
/// struct Vault;
///
/// async fn fetch_password() -> Result<String, AuthError> {
///     Ok("secret".into())
/// }
///
/// impl AuthenticatorProvider for Vault {
///     fn start<'a>(&'a self, class: &'a str) -> AuthFuture<'a, (Vec<u8>, Box<dyn AuthenticatorSession>)> {
///         Box::pin(async move {
///             let password = fetch_password().await?;
///             PlainTextAuthenticator::new("service", password).start(class).await
///         })
///     }
/// }
/// ```
pub trait AuthenticatorProvider: Send + Sync + std::fmt::Debug {
    /// Starts authenticating against `authenticator_class` (the server's
    /// class name) and returns the initial token.
    fn start<'a>(&'a self, authenticator_class: &'a str) -> AuthFuture<'a, (Vec<u8>, Box<dyn AuthenticatorSession>)>;
}

/// One connection's authentication exchange.
pub trait AuthenticatorSession: Send {
    /// Answers a server challenge.
    fn evaluate_challenge<'a>(&'a mut self, token: Option<&'a [u8]>) -> AuthFuture<'a, Vec<u8>>;
    /// The server accepted; `token` is its final token.
    fn success<'a>(&'a mut self, token: Option<&'a [u8]>) -> AuthFuture<'a, ()>;
}

/// Username/password authentication (`PasswordAuthenticator`): the token is
/// `\0username\0password`.
///
/// ```
/// # use shardwise::auth::{AuthenticatorProvider, PlainTextAuthenticator};
/// let auth = PlainTextAuthenticator::new("cassandra", "cassandra");
/// # tokio_test_block_on(async {
/// let (token, _) = auth.start("org.apache.cassandra.auth.PasswordAuthenticator").await.unwrap();
/// assert_eq!(token, b"\0cassandra\0cassandra");
/// # });
/// # fn tokio_test_block_on(f: impl std::future::Future<Output = ()>) {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
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
    fn evaluate_challenge<'a>(&'a mut self, _: Option<&'a [u8]>) -> AuthFuture<'a, Vec<u8>> {
        Box::pin(std::future::ready(Err(AuthError("unexpected challenge for username/password authentication".into()))))
    }
    fn success<'a>(&'a mut self, _: Option<&'a [u8]>) -> AuthFuture<'a, ()> {
        Box::pin(std::future::ready(Ok(())))
    }
}

impl AuthenticatorProvider for PlainTextAuthenticator {
    fn start<'a>(&'a self, _class: &'a str) -> AuthFuture<'a, (Vec<u8>, Box<dyn AuthenticatorSession>)> {
        let mut token = Vec::with_capacity(2 + self.username.len() + self.password.len());
        token.push(0);
        token.extend_from_slice(self.username.as_bytes());
        token.push(0);
        token.extend_from_slice(self.password.as_bytes());
        Box::pin(std::future::ready(Ok((token, Box::new(Done) as Box<dyn AuthenticatorSession>))))
    }
}
