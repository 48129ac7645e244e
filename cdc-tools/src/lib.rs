//! What the command-line applications of `shardwise-cdc` share.
//!
//! Modules:
//! * [`connect`]: the connection flags (credentials, TLS) and the session they make.

pub mod connect;
