//! The crate's error, [`EmuError`]: what starting or running the front can
//! meet (I/O, an unexpected answer from Cassandra, Cassandra's own errors,
//! bad configuration). It imports nothing of the crate, so every module can
//! return it without importing the front.

/// What can go wrong in the front.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// An I/O error.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// Cassandra answered something unexpected.
    #[error("protocol: {0}")]
    Protocol(String),
    /// Cassandra answered with an error.
    #[error("server error {code:#06x}: {message}")]
    Server {
        /// Error code.
        code: i32,
        /// Message.
        message: String,
    },
    /// Bad configuration.
    #[error("configuration: {0}")]
    Config(String),
}

impl EmuError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> EmuError {
        EmuError::Io { what: what.into(), source }
    }
    pub(crate) fn code_and_message(self) -> (i32, String) {
        match self {
            EmuError::Server { code, message } => (code, message),
            other => (0, other.to_string()),
        }
    }
}
